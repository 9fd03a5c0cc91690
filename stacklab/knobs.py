"""The registry of every tunable: declared once, used by validation, planning and reports.

Components declare their knobs beside their templates (stacks/<component>/knobs.py);
`REGISTRY` collects them explicitly (no globbing) in stacks/__init__.py. What is known about
a knob lives on it: its meaning and source, when it can act (`acts_with`), what its choices
stand for to a verifier (`means`), and what it costs whatever a measurement says (`caution`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

# What a knob's type takes, as an error says it ("load.keepalive takes true or false").
TYPE_WORDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
              list: "a list"}


def type_words(t: type) -> str:
    return TYPE_WORDS.get(t, f"a {t.__name__}")


# A unit as an error says a number is in it ("takes an integer in seconds"); a unit not
# here is said as written ("in MB", "in KiB").
UNIT_WORDS = {"s": "seconds", "ms": "milliseconds", "req/s": "requests per second"}


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
    # A list knob (load.headers): why one entry is refused, or None; a refusal names the
    # entry (ItemError), so that the error points at it, not at the whole list.
    each: Callable[[Any], str | None] | None = None
    # Knobs of the same owner this one needs to act: name -> the value it acts with (a
    # tuple: any of those). `nginx.tcp_nopush` acts only with {"sendfile": True}.
    acts_with: Mapping[str, Any] = field(default_factory=dict, hash=False)
    # What the plan says where it cannot act (default: "acts only with nginx.sendfile on");
    # "{value}" is the value of the knob that stops it.
    inert_why: str = ""
    # What each choice stands for to a verifier ("1d" -> 86400 seconds).
    means: Mapping[Any, Any] = field(default_factory=dict, hash=False)
    caution: str = ""   # what a non-default value costs whatever a measurement says
    # A file the user gives (nginx.include): named relative to the experiment file's
    # directory, which spec.py resolves to an absolute path before `validate` reads it.
    path: bool = False
    # The unit a number is in ("s", "ms", "MB", "MiB", "KiB", "bytes", "req/s"), said by
    # every error about the value: "65s" or "128M" is refused naming it.
    unit: str = ""

    @property
    def key(self) -> str:
        return f"{self.component}.{self.name}"

    def _amount(self, bound: float) -> str:
        """A bound with its unit: "1 s", "8 MB"."""
        return f"{bound:g} {self.unit}" if self.unit else f"{bound:g}"

    def _refused_type(self, value: Any) -> str:
        """"nginx.keepalive_timeout takes an integer in seconds", and where the value was
        a number with its unit, that the unit is not written: "(a number alone, not
        '65s')"."""
        said = f"{self.key} takes {type_words(self.type)}"
        if not self.unit:
            return said
        said += f" in {UNIT_WORDS.get(self.unit, self.unit)}"
        if isinstance(value, str) and value.strip()[:1].isdigit():
            said += f" (a number alone, not {value!r})"
        return said

    def inert(self, values: Mapping[str, Any]) -> str | None:
        """Why this knob cannot act with its owner's `values`, or None when it can."""
        for name, want in self.acts_with.items():
            got = values[name]
            if (got in want) if isinstance(want, tuple) else (got == want):
                continue
            if self.inert_why:
                return self.inert_why.format(value=got)
            key = f"{self.component}.{name}"
            if isinstance(want, bool):
                return f"acts only with {key} {'on' if want else 'off'}"
            wanted = " or ".join(map(repr, want)) if isinstance(want, tuple) else repr(want)
            return f"acts only with {key} = {wanted}, not {got!r}"
        return None

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
            raise ValueError(self._refused_type(value))
        if self.choices and value not in self.choices:
            raise ValueError(f"{self.key} must be one of {', '.join(map(str, self.choices))}")
        if self.min is not None and value < self.min:
            raise ValueError(f"{self.key} must be >= {self._amount(self.min)}")
        if self.max is not None and value > self.max:
            raise ValueError(f"{self.key} must be <= {self._amount(self.max)}")
        problem = self.validate(value) if self.validate else None
        if problem:
            raise ValueError(f"{self.key}: {problem}")
        for index, item in enumerate(value if self.each else ()):
            if problem := self.each(item):
                raise ItemError(index, item, problem)
        return value


class ItemError(ValueError):
    """One entry of a list knob is refused: which one (from 0), its value, and why."""

    def __init__(self, index: int, item: Any, problem: str):
        super().__init__(problem)
        self.index, self.item = index, item


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

    def inert(self, knobs: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
        """Every knob of these owners (owner -> {name: value}) that cannot act with these
        values by its own `acts_with`, and why."""
        out = {}
        for owner, values in knobs.items():
            for knob in self.for_component(owner):
                why = knob.inert(values)
                if why:
                    out[knob.key] = why
        return out


class _Absent:
    """The value of a knob one side does not have (a knob added or removed since)."""

    def __repr__(self) -> str:
        return "no such knob"


ABSENT = _Absent()


@dataclass(frozen=True)
class SettingDifference:
    """One knob whose effective value differs between two sets of knobs."""

    knob: str          # "nginx.sendfile"
    a: Any             # its value in the first, or ABSENT
    b: Any             # … in the second

    def said(self) -> str:
        """How a resume names it, A being the stored runs and B now."""
        if self.a is ABSENT:
            return f"{self.knob} did not exist when its runs were measured (now {self.b!r})"
        if self.b is ABSENT:
            return f"{self.knob} = {self.a!r} when its runs were measured no longer exists"
        return f"{self.knob} = {self.a!r} when its runs were measured, {self.b!r} now"


def setting_differences(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]
                        ) -> list[SettingDifference]:
    """Each knob whose effective value differs between two owner → {knob: value}, by
    owner and knob; a knob one side lacks differs too (a knob added may have changed
    what the config says)."""
    found = []
    for owner in sorted(a.keys() | b.keys()):
        ka, kb = a.get(owner, {}), b.get(owner, {})
        for name in sorted(ka.keys() | kb.keys()):
            va, vb = ka.get(name, ABSENT), kb.get(name, ABSENT)
            if va != vb:
                found.append(SettingDifference(f"{owner}.{name}", va, vb))
    return found
