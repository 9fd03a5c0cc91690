"""The registry of every tunable: declared once, used by validation, planning and reports.

Components declare their knobs beside their templates (stacks/<component>/knobs.py);
`REGISTRY` collects them explicitly (no globbing) in stacks/__init__.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class Knob:
    component: str
    name: str
    type: type
    default: Any
    meaning: str
    choices: tuple = ()
    min: float | None = None
    max: float | None = None
    source: str = ""  # the study (see shared/reference/SEEDS.md) it comes from
    validate: Callable[[Any], str | None] | None = None  # why a value is refused, or None

    @property
    def key(self) -> str:
        return f"{self.component}.{self.name}"

    def check(self, value: Any) -> Any:
        """Return the value if it is allowed, else raise ValueError saying why."""
        if self.type is bool:
            ok = isinstance(value, bool)
        elif self.type is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif self.type is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            ok = isinstance(value, self.type)
        if ok and self.type is float and not math.isfinite(value):
            raise ValueError(f"{self.key} must be a finite number")
        if not ok:
            raise ValueError(f"{self.key} takes a {self.type.__name__}")
        if self.choices and value not in self.choices:
            raise ValueError(f"{self.key} must be one of {', '.join(map(str, self.choices))}")
        if self.min is not None and value < self.min:
            raise ValueError(f"{self.key} must be >= {self.min:g}")
        if self.max is not None and value > self.max:
            raise ValueError(f"{self.key} must be <= {self.max:g}")
        problem = self.validate(value) if self.validate else None
        if problem:
            raise ValueError(f"{self.key}: {problem}")
        return value


@dataclass
class KnobRegistry:
    knobs: dict[str, Knob] = field(default_factory=dict)

    def add(self, *knobs: Knob) -> None:
        for knob in knobs:
            if knob.key in self.knobs:
                raise ValueError(f"knob {knob.key} declared twice")
            self.knobs[knob.key] = knob

    def components(self) -> set[str]:
        return {k.component for k in self.knobs.values()}

    def for_component(self, component: str) -> list[Knob]:
        return [k for k in self.knobs.values() if k.component == component]

    def get(self, key: str) -> Knob | None:
        return self.knobs.get(key)

    def defaults(self, component: str) -> dict[str, Any]:
        return {k.name: k.default for k in self.for_component(component)}
