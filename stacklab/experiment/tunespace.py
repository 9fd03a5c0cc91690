"""The tuner's search space (issue 26), read off the knob registry: each knob a user asks
to tune becomes one Optuna dimension of its own type and range, and a knob that acts only
with others (Knob.acts_with) is a conditional one, suggested only where those others
take a value it acts with, so no trial asks a combination the plan would fold as inert.

What a spec asks per knob key (`[tune.knobs]`):
- `true`: the registry's whole range (a bool, a knob with choices, or a number with both
  bounds);
- a list of values: those values only, as categories (checked against the knob);
- a table `{ min = A, max = B, log = true }`: a number's range narrowed (inside the
  registry's), on a log scale if asked.

Pure: `dimensions` checks and builds; `suggest` asks an Optuna trial for one trial's
values (define-by-run, in an order where every knob comes after those it acts with).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..knobs import Knob, KnobRegistry, type_words

# A range wider than this many times its low end is searched on a log scale unless the
# spec says otherwise (worker counts 1..256: 2 and 4 are as far apart as 128 and 256).
LOG_SPAN = 50


class SpaceError(ValueError):
    """A knob the search cannot take as asked: `key` and why."""

    def __init__(self, key: str, value: Any, why: str):
        super().__init__(f"{key} = {value!r}: {why}")
        self.key, self.value, self.why = key, value, why


@dataclass(frozen=True)
class Dimension:
    """One knob's place in the search: an int or float range, or categories."""

    key: str                                   # "nginx.worker_processes"
    kind: str                                  # "int" | "float" | "categorical"
    default: Any
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple = ()
    # owner's knob keys -> the value (or tuple of values) this knob acts with
    acts_with: Mapping[str, Any] = field(default_factory=dict)


def dimensions(registry: KnobRegistry, asked: Mapping[str, Any]) -> tuple[Dimension, ...]:
    """The dimensions `asked` names, ordered so that each comes after the knobs it acts
    with. SpaceError names the first knob that cannot be searched as asked."""
    dims = {key: _dimension(registry, key, how) for key, how in asked.items()}
    return tuple(_ordered(dims))


def _dimension(registry: KnobRegistry, key: str, how: Any) -> Dimension:
    knob = registry.get(key)
    if knob is None and "." not in key and isinstance(how, dict):
        raise SpaceError(key, how, "name each knob whole, quoted: "
                                   f'"{key}.NAME" = ... under [tune.knobs]')
    if knob is None:
        raise SpaceError(key, how, "no such knob (stacklab stacks lists them)")
    acts = {f"{knob.component}.{name}": want for name, want in knob.acts_with.items()}
    base = {"key": key, "default": knob.default, "acts_with": acts}
    if isinstance(how, list):
        return Dimension(kind="categorical", choices=_values(knob, how), **base)
    if how is True:
        return _whole(knob, base)
    if isinstance(how, dict):
        return _narrowed(knob, how, base)
    raise SpaceError(key, how, "expected true (the whole range), a list of values, or "
                               "{ min = A, max = B } for a number")


def _values(knob: Knob, values: list) -> tuple:
    if len(values) < 2:
        raise SpaceError(knob.key, values, "give at least two values to choose between")
    for v in values:
        try:
            knob.check(v)
        except ValueError as e:
            raise SpaceError(knob.key, values, str(e)) from None
    if len(set(map(repr, values))) != len(values):
        raise SpaceError(knob.key, values, "a value is given twice")
    return tuple(values)


def _whole(knob: Knob, base: dict) -> Dimension:
    if knob.type is bool:
        return Dimension(kind="categorical", choices=(False, True), **base)
    if knob.choices:
        return Dimension(kind="categorical", choices=tuple(knob.choices), **base)
    if knob.type in (int, float) and knob.min is not None and knob.max is not None:
        return _numeric(knob, knob.min, knob.max, None, base)
    raise SpaceError(knob.key, True, "its whole range is not bounded here: give "
                                     "{ min = A, max = B } or a list of values")


def _narrowed(knob: Knob, how: dict, base: dict) -> Dimension:
    if knob.type not in (int, float):
        raise SpaceError(knob.key, how, f"a range needs a number; {knob.key} takes "
                                        f"{type_words(knob.type)}: give a list of values")
    unknown = set(how) - {"min", "max", "log"}
    if unknown or "min" not in how or "max" not in how:
        raise SpaceError(knob.key, how, "expected { min = A, max = B } (and log = true "
                                        "or false)")
    low, high, log = how["min"], how["max"], how.get("log")
    for v in (low, high):
        try:
            knob.check(v)
        except ValueError as e:
            raise SpaceError(knob.key, how, f"{e} (the registry's range)") from None
    if not low < high:
        raise SpaceError(knob.key, how, "min must be below max")
    if log is not None and not isinstance(log, bool):
        raise SpaceError(knob.key, how, "log is true or false")
    return _numeric(knob, low, high, log, base)


def _numeric(knob: Knob, low: float, high: float, log: bool | None,
             base: dict) -> Dimension:
    if log is None:
        log = low > 0 and high / low > LOG_SPAN
    if log and low <= 0:
        raise SpaceError(knob.key, {"min": low, "max": high}, "a log scale needs min > 0")
    kind = "int" if knob.type is int else "float"
    return Dimension(kind=kind, low=low, high=high, log=log, **base)


def _ordered(dims: dict[str, Dimension]) -> list[Dimension]:
    """Each dimension after the searched ones it acts with (their values decide whether
    it is suggested at all)."""
    done: list[Dimension] = []
    seen: set[str] = set()

    def visit(dim: Dimension) -> None:
        if dim.key in seen:
            return
        seen.add(dim.key)
        for parent in dim.acts_with:
            if parent in dims:
                visit(dims[parent])
        done.append(dim)
    for dim in dims.values():
        visit(dim)
    return done


def acts(dim: Dimension, values: Mapping[str, Any]) -> bool:
    """Whether `dim` can act with the values chosen or fixed so far (knob key -> value);
    a knob it acts with that is neither keeps its default, which `values` must hold."""
    for parent, want in dim.acts_with.items():
        got = values.get(parent)
        if not ((got in want) if isinstance(want, tuple) else got == want):
            return False
    return True


def suggest(trial: Any, dims: tuple[Dimension, ...], fixed: Mapping[str, Any]
            ) -> dict[str, Any]:
    """One trial's values of every dimension from an Optuna trial (`trial.suggest_*`),
    define-by-run: a conditional knob that cannot act with the values so far is not
    suggested (it is no parameter of that trial) and keeps its default. `fixed`: the
    other knobs' values (the spec's and the defaults), by key."""
    values = dict(fixed)
    out: dict[str, Any] = {}
    for dim in dims:
        if not acts(dim, values):
            out[dim.key] = values[dim.key] = dim.default
            continue
        if dim.kind == "categorical":
            value = trial.suggest_categorical(dim.key, list(dim.choices))
        elif dim.kind == "int":
            value = trial.suggest_int(dim.key, int(dim.low), int(dim.high), log=dim.log)
        else:
            value = trial.suggest_float(dim.key, float(dim.low), float(dim.high),
                                        log=dim.log)
        out[dim.key] = values[dim.key] = value
    return out
