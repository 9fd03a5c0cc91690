"""Recommendations: for every knob an experiment varied, its effect against the
default value with all else equal, ranked by gain, explained from the knob registry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .analyze import Bound, ExperimentView, TrialSummary, bound, bounded_verdict
from .knobs import KnobRegistry
from .stacks import REGISTRY
from .stats import Comparison, compare


@dataclass(frozen=True)
class Effect:
    knob: str
    value: Any
    default: Any
    stack: str
    workload: str
    concurrency: int
    comparison: Comparison        # req/s of the changed trial against the baseline
    meaning: str
    source: str
    bound: Bound | None = None    # a side was limited (load engine, busy host)

    @property
    def gain(self) -> float:
        return (self.comparison.ratio or 1.0) - 1.0

    @property
    def hurts(self) -> bool:
        return self.comparison.significant and self.gain < 0 and self.bound is None

    @property
    def verdict(self) -> str:
        return "hurts" if self.hurts else bounded_verdict(self.comparison, self.bound)


@dataclass(frozen=True)
class Best:
    stack: str
    workload: str
    concurrency: int
    trial: TrialSummary
    over_default: Comparison | None
    over_best_single: Comparison | None
    best_single: Effect | None
    default: TrialSummary | None = None    # the all-defaults trial of the group

    def label(self, name) -> str:
        """The variant to recommend, named only when it beats the defaults significantly;
        otherwise said plainly."""
        top = name(self.trial)
        if self.default is None:
            return f"{top} (fastest measured; no all-defaults trial to test it against)"
        if self.trial is self.default:
            return "the defaults (no variant measured faster)"
        c, limit = self.over_default, bound(self.default, self.trial, True)
        if limit and limit.relation != "≥":
            return f"no verdict ({limit.why}; fastest measured: {top})"
        if c and c.significant and c.ratio is not None and c.ratio > 1:
            return top
        return f"no significant difference from the default (fastest measured: {top})"


def _value(s: TrialSummary, key: str, registry: KnobRegistry) -> Any:
    knob = registry.get(key)
    return s.knobs.get(key, knob.default if knob else None)


def varied_knobs(view: ExperimentView) -> list[str]:
    keys = {k for s in view.summaries for k in s.knobs}
    return sorted(k for k in keys if len({repr(s.knobs.get(k)) for s in view.summaries}) > 1)


def _group(view: ExperimentView):
    groups: dict[tuple, list[TrialSummary]] = {}
    for s in view.summaries:
        if s.rps.median is not None:
            groups.setdefault((s.stack, s.workload, s.concurrency), []).append(s)
    return groups


def effects(view: ExperimentView, registry: KnobRegistry) -> list[Effect]:
    """One row per (knob value ≠ default) with a baseline trial that differs only there."""
    knobs = varied_knobs(view)
    out = []
    for (stack, workload, conc), trials in _group(view).items():
        for key in knobs:
            knob = registry.get(key)
            if knob is None:
                continue
            for t in trials:
                value = _value(t, key, registry)
                if value == knob.default:
                    continue
                base = next((b for b in trials if _value(b, key, registry) == knob.default and
                             all(_value(b, k, registry) == _value(t, k, registry)
                                 for k in knobs if k != key)), None)
                if base is None:
                    continue
                out.append(Effect(key, value, knob.default, stack, workload, conc,
                                  compare(base.rps.values, t.rps.values), knob.meaning,
                                  knob.source, bound(base, t, True)))
    return sorted(out, key=lambda e: (not e.comparison.significant, -e.gain))


def best_combinations(view: ExperimentView, registry: KnobRegistry,
                      found: list[Effect]) -> list[Best]:
    knobs = varied_knobs(view)
    out = []
    for (stack, workload, conc), trials in sorted(_group(view).items()):
        best = max(trials, key=lambda s: s.rps.median)
        default = next((t for t in trials if all(
            _value(t, k, registry) == registry.get(k).default for k in knobs
            if registry.get(k))), None)
        singles = [e for e in found if (e.stack, e.workload, e.concurrency) ==
                   (stack, workload, conc) and e.gain > 0]
        top = max(singles, key=lambda e: e.gain, default=None)
        top_trial = next((t for t in trials if top and _value(t, top.knob, registry) == top.value
                          and sum(_value(t, k, registry) != registry.get(k).default
                                  for k in knobs if registry.get(k)) == 1), None)
        out.append(Best(stack, workload, conc, best,
                        compare(default.rps.values, best.rps.values) if default else None,
                        compare(top_trial.rps.values, best.rps.values) if top_trial else None,
                        top, default))
    return out


# Settings known to cost something whatever the measurement says (explained to the user):
# each knob's `caution`, declared beside the knob.
CAUTIONS = {key: knob.caution for key, knob in REGISTRY.knobs.items() if knob.caution}
