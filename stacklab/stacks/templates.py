"""Config templates: Jinja2 with strict undefined, so a missing knob is an error, not ''."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jinja2

_env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                          trim_blocks=False, autoescape=False)


def render_template(path: Path, ctx: Any, knobs: dict[str, Any], **extra: Any) -> str:
    template = _env.from_string(path.read_text())
    return template.render(**asdict(ctx), k=SimpleNamespace(**knobs), **extra)
