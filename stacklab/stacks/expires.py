"""The expires knob nginx and Apache share: Cache-Control max-age on every response. Its
choices and what each means to the verifier (seconds of max-age) are declared once, here."""

from __future__ import annotations

from ..knobs import Knob

MAX_AGE_S = {"off": None, "1h": 3600, "1d": 86400, "30d": 30 * 86400}


def expires_knob(component: str, meaning: str) -> Knob:
    return Knob(component, "expires", str, "off", meaning, choices=tuple(MAX_AGE_S),
                source="S1", means=MAX_AGE_S)
