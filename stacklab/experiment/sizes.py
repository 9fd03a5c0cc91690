"""A memory size as a user writes it ("512M", "1G", "300MiB"): binary units, read into
whole MiB, as the machine profile's machine.memory_mb takes them. `capacity --memory`
(analysis/memplan.py) and [tune] memory read it here."""

from __future__ import annotations

import re

_UNITS = {"k": 1 / 1024, "m": 1.0, "g": 1024.0, "t": 1024.0 ** 2}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt])(?:i?b)?\s*$", re.IGNORECASE)


def parse_mib(text: str) -> int:
    """'512M', '1G', '300MiB', '1.5GB' → MiB; ValueError says what is wrong."""
    m = _SIZE.match(text or "")
    if not m:
        raise ValueError("expected a size with its unit, such as 512M, 1G or 300MiB "
                         "(K, M, G, T are binary: M = MiB)")
    mib = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if mib != int(mib) or mib < 1:
        raise ValueError(f"{mib:g} MiB; the machine profile takes a whole number of MiB, "
                         "at least 1")
    return int(mib)
