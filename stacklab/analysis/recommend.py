"""Recommendations: for every knob an experiment varied, its effect against the
default value with all else equal, ranked by gain, explained from the knob registry.

The lab's conditions (`net.*`, `fs.*`, `machine.*`, `load.*`: plan.lab_condition) are
what a stack was measured under, not settings of the server: their effects are reported
apart (`conditions`), never recommended."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from .analyze import (Bound, Decision, ExperimentView, MetricComparison, TrialSummary,
                      compare_trials)
from ..knobs import KnobRegistry
from ..experiment.plan import Trial, effective_knobs, lab_condition
from ..stacks import REGISTRY, STACKS, starve_causes
from .stats import Comparison

# recommend --json (report/schemas/recommend.schema.json). 2: conditions apart; each
# effect's verdict in the one vocabulary (better|worse|same|no-verdict) with its reason.
# 3: comparisons carry `paired`; same only within the margin, reason imprecise.
SCHEMA_VERSION = 3


@dataclass(frozen=True)
class Change:
    """A trial that differs from a baseline trial of the same stack, workload and
    concurrency in one varied knob only, the baseline having it at its default: what
    that knob did, all else equal. The pairing recommend, the headline and combine use."""

    knob: str
    value: Any
    default: Any
    base: TrialSummary
    trial: TrialSummary

    @cached_property
    def rps(self) -> MetricComparison:
        """req/s of the trial (B) against the baseline (A), with its bound and the busy
        sides named (analyze.compare_trials)."""
        return compare_trials(self.base, self.trial)[0]

    @property
    def condition(self) -> bool:
        return lab_condition(self.knob)


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
    rps: MetricComparison | None = None   # the comparison with its bound and busy-host reach
    trial: TrialSummary | None = None     # the trial with the value

    @property
    def gain(self) -> float:
        return (self.comparison.ratio or 1.0) - 1.0

    @property
    def decision(self) -> Decision:
        """better | worse | same | no-verdict (with its reason), req/s against the default."""
        return (self.rps or MetricComparison("req/s", self.comparison, self.bound)).decision

    @property
    def hurts(self) -> bool:
        return self.decision.kind == "worse"

    @property
    def verdict(self) -> str:
        """The verdict in words ("hurts" when it is worse)."""
        if self.hurts:
            return "hurts"
        return (self.rps or MetricComparison("req/s", self.comparison, self.bound)).verdict


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
    decision: Decision | None = None       # the fastest against the defaults, req/s
    # The lab's conditions this best was measured under, where an experiment varied them
    # (knob -> value): a variant is recommended against the defaults under the same ones.
    under: tuple[tuple[str, Any], ...] = ()

    def label(self, name) -> str:
        """The variant to recommend, named only when it is better than the defaults;
        otherwise said plainly."""
        top = name(self.trial)
        if self.default is None:
            return f"{top} (fastest measured; no all-defaults trial to test it against)"
        if self.trial is self.default:
            return "the defaults (no variant measured faster)"
        m = compare_trials(self.default, self.trial, name)[0]
        d = m.decision
        if d.kind == "better":
            return top
        fastest = (f"measured highest: {top}, but {hidden}" if (hidden := behind_cache(
            self.trial)) else f"fastest measured: {top}")
        if d.kind == "no-verdict" and d.reason not in ("few-runs", "no-data"):
            why = (m.bound.why if m.bound else m.imprecise
                   if d.reason == "imprecise" else d.reason)
            return f"no verdict ({why}; {fastest})"
        return f"no significant difference from the default ({fastest})"


HIDDEN_SHARE = 0.95   # a front cache answering this share of requests hides what is behind


def behind_cache(s: TrialSummary) -> str | None:
    """Why the settings behind a front cache were not measured: it answered nearly every
    request itself (hit ratio ≥ HIDDEN_SHARE), so they ran for almost none."""
    for layer, figures in s.layers.items():
        hit = figures.get("hit_ratio")
        if hit is not None and hit.median is not None and hit.median >= HIDDEN_SHARE:
            return (f"{layer} in front answered {hit.median:.0%} of the requests from its "
                    "cache: the settings behind it ran for almost none")
    return None


def starved(view: ExperimentView) -> list[tuple[TrialSummary, tuple[str, ...]]]:
    """Each trial whose runs left clients waiting for a worker (the `starved` flag) and
    what its components say would change it (stacks.starve_causes): a setting to try."""
    out = []
    for s in view.summaries:
        runs = [r for r in view.runs if r.trial_id == s.trial_id and "starved" in r.flags]
        if runs and (why := starve_causes(runs[0].knobs, runs[0].load.clients or 0)):
            out.append((s, why))
    return out


def default_of(registry: KnobRegistry, key: str, stack: str) -> Any:
    """The value knob `key` has in a trial of `stack` that does not set it: the stack's
    own default, else the declared one (plan.effective_knobs)."""
    knob = registry.get(key)
    owner, name = key.split(".", 1)
    try:
        return effective_knobs(registry, STACKS[stack], Trial(stack, "", 0, (), ()))[owner][name]
    except KeyError:          # a stack no longer known, or a knob it does not have
        return knob.default if knob else None


def _value(s: TrialSummary, key: str, registry: KnobRegistry) -> Any:
    return s.knobs[key] if key in s.knobs else default_of(registry, key, s.stack)


def varied_knobs(view: ExperimentView) -> list[str]:
    keys = {k for s in view.summaries for k in s.knobs}
    return sorted(k for k in keys if len({repr(s.knobs.get(k)) for s in view.summaries}) > 1)


def _group(view: ExperimentView):
    groups: dict[tuple, list[TrialSummary]] = {}
    for s in view.summaries:
        if s.rps.median is not None:
            groups.setdefault((s.stack, s.workload, s.concurrency), []).append(s)
    return groups


def changes(view: ExperimentView, registry: KnobRegistry = REGISTRY) -> list[Change]:
    """Every trial whose value of one varied knob is not its default, paired with the
    trial of its stack, workload and concurrency that has the default there and every
    other varied knob as it has (trials without such a baseline are left out)."""
    knobs = [k for k in varied_knobs(view) if registry.get(k) is not None]
    out = []
    for (stack, _, _), trials in _group(view).items():
        values = {t.trial_id: {k: _value(t, k, registry) for k in knobs} for t in trials}
        for key in knobs:
            default = default_of(registry, key, stack)
            for t in trials:
                have = values[t.trial_id]
                if have[key] == default:
                    continue
                base = next((b for b in trials if values[b.trial_id] == {**have, key: default}),
                            None)
                if base is not None:
                    out.append(Change(key, have[key], default, base, t))
    return out


def _effect(c: Change, registry: KnobRegistry) -> Effect:
    knob = registry.get(c.knob)
    t = c.trial
    return Effect(c.knob, c.value, c.default, t.stack, t.workload, t.concurrency,
                  c.rps.comparison, knob.meaning, knob.source, c.rps.bound, c.rps, t)


def _ranked(found: list[Effect]) -> list[Effect]:
    """Those with a verdict (better or worse) first, then by gain."""
    return sorted(found, key=lambda e: (e.decision.kind not in ("better", "worse"), -e.gain))


def effects(view: ExperimentView, registry: KnobRegistry) -> list[Effect]:
    """One row per server setting (value ≠ default) with a baseline trial that differs
    only there; the lab's conditions are left to `conditions`."""
    return _ranked([_effect(c, registry) for c in changes(view, registry)
                    if not c.condition])


def conditions(view: ExperimentView, registry: KnobRegistry = REGISTRY) -> list[Effect]:
    """What each condition of the lab (net, fs, machine, load) did against its default,
    all else equal: reported, never recommended."""
    return _ranked([_effect(c, registry) for c in changes(view, registry) if c.condition])


def best_combinations(view: ExperimentView, registry: KnobRegistry,
                      found: list[Effect]) -> list[Best]:
    """Per stack, workload and concurrency (and conditions: a variant is recommended
    against the defaults measured under the same conditions), the fastest variant."""
    knobs = [k for k in varied_knobs(view) if registry.get(k)]
    settings = [k for k in knobs if not lab_condition(k)]
    out = []
    for (stack, workload, conc), group in sorted(_group(view).items()):
        under: dict[str, list[TrialSummary]] = {}
        for t in group:
            said = tuple((k, _value(t, k, registry)) for k in knobs if lab_condition(k))
            under.setdefault(repr(said), []).append(t)
        for trials in under.values():
            best = _best(stack, workload, conc, trials, settings, found, registry)
            said = tuple((k, _value(best.trial, k, registry)) for k in knobs
                         if lab_condition(k))
            out.append(replace(best, under=said))
    return out


def _best(stack: str, workload: str, conc: int, trials: list[TrialSummary],
          knobs: list[str], found: list[Effect], registry: KnobRegistry) -> Best:
    best = max(trials, key=lambda s: s.rps.median)
    is_default = lambda t, k: _value(t, k, registry) == default_of(registry, k, stack)  # noqa: E731
    default = next((t for t in trials if all(is_default(t, k) for k in knobs)), None)
    ids = {t.trial_id for t in trials}
    singles = [e for e in found if (e.stack, e.workload, e.concurrency) ==
               (stack, workload, conc) and e.gain > 0
               and (e.trial is None or e.trial.trial_id in ids)]
    top = max(singles, key=lambda e: e.gain, default=None)
    top_trial = next((t for t in trials if top and _value(t, top.knob, registry) == top.value
                      and sum(not is_default(t, k) for k in knobs) == 1), None)
    over = compare_trials(default, best)[0] if default else None
    return Best(stack, workload, conc, best, over.comparison if over else None,
                compare_trials(top_trial, best)[0].comparison if top_trial else None,
                top, default, over.decision if over else None)


# Settings known to cost something whatever the measurement says (explained to the user):
# each knob's `caution`, declared beside the knob.
CAUTIONS = {key: knob.caution for key, knob in REGISTRY.knobs.items() if knob.caution}
