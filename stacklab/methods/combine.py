"""Combine (S1's last step): from an experiment's one-at-a-time results, the knob values
that beat their default significantly are set together and measured against the
defaults — every subset of them, side by side in one new experiment — so the report can
say whether the gains add up (the product of the single ratios lies inside the
combination's interval) or interact."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from ..analysis.analyze import (ExperimentView, MetricComparison, TrialSummary, bound, decide,
                                sure, when_of)
from ..analysis.answered import answer, supports
from ..knobs import KnobRegistry
from ..experiment.plan import lab_condition
from ..analysis.stats import Comparison, compare

# 2^k trials measure every subset of k winners; past 4 (16 trials) the weakest are left
# out, and the report says which.
MAX_WINNERS = 4


@dataclass(frozen=True)
class Winner:
    knob: str
    value: Any
    default: Any
    comparison: Comparison         # the single change against the defaults, req/s
    trial: str                     # the trial id that measured it


@dataclass(frozen=True)
class Group:
    """One (stack, workload, concurrency) of the experiment and what won there."""

    stack: str
    workload: str
    concurrency: int
    default: TrialSummary
    winners: tuple[Winner, ...]
    left_out: tuple[Winner, ...] = ()    # significant too, past MAX_WINNERS


def _value(s: TrialSummary, key: str, registry: KnobRegistry) -> Any:
    knob = registry.get(key)
    return s.knobs.get(key, knob.default if knob else None)


def varied(summaries: list[TrialSummary]) -> list[str]:
    keys = {k for s in summaries for k in s.knobs}
    return sorted(k for k in keys if len({repr(s.knobs.get(k)) for s in summaries}) > 1)


def winners(view: ExperimentView, registry: KnobRegistry) -> list[Group]:
    """Per (stack, workload, concurrency): the all-defaults trial and each server setting
    that, changed alone from it, made req/s better (analyze.decide: significantly, a
    bound pointing the same way; paired round by round); the best value
    per knob, strongest first. The lab's conditions
    (plan.lab_condition: a faster link, more CPUs) are what was measured under, never a
    setting to put in a configuration: they win nothing."""
    groups: dict[tuple, list[TrialSummary]] = {}
    for s in view.summaries:
        if s.runs_ok:
            groups.setdefault((s.stack, s.workload, s.concurrency), []).append(s)
    out = []
    for (stack, workload, conc), trials in groups.items():
        keys = [k for k in varied(trials) if registry.get(k) is not None]
        if not keys:
            continue
        default = next((t for t in trials if all(
            _value(t, k, registry) == registry.get(k).default for k in keys)), None)
        if default is None:
            continue
        best: dict[str, Winner] = {}
        for t in trials:
            changed = [k for k in keys if _value(t, k, registry) != registry.get(k).default]
            if len(changed) != 1 or lab_condition(changed[0]):
                continue
            key = changed[0]
            alpha, margin = sure(default, t)
            c = compare(default.rps.values, t.rps.values, alpha,
                        when=when_of(default, t, default.rps, t.rps))
            # better by the one decision rule: a bound pointing the other way leaves no
            # winner
            if decide(c, bound(default, t, True), True, margin=margin).kind != "better":
                continue
            w = Winner(key, _value(t, key, registry), registry.get(key).default, c, t.trial_id)
            if key not in best or w.comparison.ratio > best[key].comparison.ratio:
                best[key] = w
        ranked = sorted(best.values(), key=lambda w: -w.comparison.ratio)
        if ranked:
            out.append(Group(stack, workload, conc, default, tuple(ranked[:MAX_WINNERS]),
                             tuple(ranked[MAX_WINNERS:])))
    return out


def combined_doc(spec: dict, group: Group, name: str, description: str,
                 repetitions: int) -> dict:
    """The experiment file of the combination: the original's measurement settings and
    fixed knobs, this group's stack, workload and concurrency, and each winner at its
    default and its winning value (every subset: 2^k trials)."""
    e = spec["experiment"]
    experiment = {"name": name, "description": description, "repetitions": repetitions,
                  "warmup": e["warmup"], "seed": e["seed"],
                  "keep_cpus_awake": e["keep_cpus_awake"],
                  **({"remeasure": e["remeasure"]} if "remeasure" in e else {})}
    experiment.update({"duration": e["duration"]} if e.get("duration") else
                      {"requests": e["requests"]})
    load: dict[str, Any] = {}
    knobs: dict[str, dict] = {}
    # the defaults trial's own knobs: the fixed ones that act on this stack, and the
    # other axes at their values there (a knob that acts nowhere would be refused)
    fixed = {k: v for k, v in group.default.knobs.items()
             if k not in {w.knob for w in group.winners}}
    for key, value in fixed.items():
        component, knob = key.split(".", 1)
        if component == "load":
            load[knob] = value
        else:
            knobs.setdefault(component, {})[knob] = value
    matrix: dict[str, Any] = {"stack": [group.stack], "workload": [group.workload],
                              "concurrency": [group.concurrency]}
    for w in group.winners:
        component, knob = w.knob.split(".", 1)
        matrix.setdefault(component, {})[knob] = [w.default, w.value]
    doc = {"experiment": experiment, "matrix": matrix}
    if load:
        doc["load"] = load
    if knobs:
        doc["knobs"] = knobs
    return doc


@dataclass(frozen=True)
class Additivity:
    """The combination against the defaults, and whether the single gains add up."""

    combined: Comparison              # all winners together / defaults
    singles: dict[str, Comparison]    # knob -> that winner alone / defaults (same run)
    expected: float | None            # product of the single ratios

    @property
    def verdict(self) -> str:
        c = self.combined
        if c.ci is None or self.expected is None:
            return "no verdict: fewer than 2 runs a side"
        low, high = c.ci
        if low <= self.expected <= high:
            return "adds up (the product of the single gains lies inside the interval)"
        if high < self.expected:
            return "less than the product: the gains overlap (they interact)"
        return "more than the product: the gains reinforce each other (they interact)"


def additivity(view: ExperimentView, group: Group,
               registry: KnobRegistry) -> Additivity | str:
    """From the combination experiment: defaults, each winner alone, all of them."""
    def trial(changed: set[str]) -> TrialSummary | None:
        for s in view.summaries:
            values = {w.knob: _value(s, w.knob, registry) for w in group.winners}
            if all((values[w.knob] == w.value) == (w.knob in changed) for w in group.winners):
                return s if s.runs_ok else None
        return None
    everything = {w.knob for w in group.winners}
    base, combo = trial(set()), trial(everything)
    if base is None or combo is None:
        return "the defaults or the combination has no measured run"
    singles = {}
    for w in group.winners:
        alone = trial({w.knob})
        if alone is not None:
            singles[w.knob] = compare(base.rps.values, alone.rps.values,
                                      when=when_of(base, alone, base.rps, alone.rps))
    ratios = [c.ratio for c in singles.values() if c.ratio]
    expected = math.prod(ratios) if len(ratios) == len(group.winners) else None
    return Additivity(compare(base.rps.values, combo.rps.values,
                              when=when_of(base, combo, base.rps, combo.rps)),
                      singles, expected)


@dataclass(frozen=True)
class Setting:
    """One setting of a trial away from its default, and what the experiment measured of
    it: the trial with only it changed against the all-defaults trial (None: no such
    pair was measured), in the experiment's answer (req/s; at a fixed rate server CPU
    per request)."""

    key: str
    value: Any
    default: Any
    alone: TrialSummary | None
    comparison: MetricComparison | None


@dataclass(frozen=True)
class Support:
    """What the measurements support of a trial's settings (export-config writes only
    these): every one when the trial as a whole beat the all-defaults trial of its
    experiment (jointly: the configuration measured is the one written), else each that
    beat it alone. A configuration changed by a setting no verdict chose is a guess a
    user would deploy."""

    settings: tuple[Setting, ...]             # away from their defaults
    conditions: tuple[str, ...]               # lab conditions it was measured under
    default: TrialSummary | None              # the all-defaults trial beside it
    jointly: MetricComparison | None          # the trial against it
    supported: tuple[str, ...]

    @property
    def unsupported(self) -> tuple[str, ...]:
        return tuple(s.key for s in self.settings if s.key not in self.supported)


def support(trial: TrialSummary, view: ExperimentView, registry: KnobRegistry) -> Support:
    """For each knob of `trial` away from its default (group: the same stack, workload,
    concurrency and lab conditions — net, fs, machine, load — which are what it was
    measured under, never a setting): whether a verdict supports it (Support)."""
    group = [s for s in view.summaries if (s.stack, s.workload, s.concurrency) ==
             (trial.stack, trial.workload, trial.concurrency) and s.runs_ok]
    keys = [k for k in varied(group) if registry.get(k) is not None]
    under = {k: _value(trial, k, registry) for k in keys if lab_condition(k)}
    same = [s for s in group if all(_value(s, k, registry) == v for k, v in under.items())]
    keys = [k for k in keys if k not in under]

    def only(changed: dict[str, Any]) -> TrialSummary | None:
        return next((s for s in same if all(
            _value(s, k, registry) == changed.get(k, registry.get(k).default)
            for k in keys)), None)
    default = only({})
    settings = []
    for key in keys:
        value, knob = _value(trial, key, registry), registry.get(key)
        if value == knob.default:
            continue
        # alone: with the trial's values of the knobs it acts with (tune's arms measure
        # tcp_nopush alone as tcp_nopush with sendfile on)
        alone = only({key: value}) or only({key: value, **{
            k: _value(trial, k, registry) for name in knob.acts_with
            if (k := f"{knob.component}.{name}") in keys}})
        settings.append(Setting(key, value, knob.default, alone, answer(default, alone)
                                if default is not None and alone is not None else None))
    jointly = (answer(default, trial) if default is not None and settings
               and default.trial_id != trial.trial_id else None)
    better = jointly is not None and jointly.decision.kind == "better"
    supported = tuple(s.key for s in settings if supports(
        s.comparison.decision.kind if s.comparison is not None else None, better))
    return Support(tuple(settings), tuple(k for k, v in under.items()
                                          if v != registry.get(k).default),
                   default, jointly, supported)


def only_supported(trial: TrialSummary, view: ExperimentView, registry: KnobRegistry,
                   s: Support) -> TrialSummary | None:
    """The measured trial beside `trial` that changes exactly its supported settings (to
    its values) and leaves the rest at their defaults; None when none was measured."""
    want = {x.key: x.value for x in s.settings if x.key in s.supported}
    return next((t for t in view.summaries if (t.stack, t.workload, t.concurrency) ==
                 (trial.stack, trial.workload, trial.concurrency) and t.runs_ok
                 and t.trial_id != trial.trial_id
                 and all(_value(t, x.key, registry) == want.get(x.key, x.default)
                         for x in s.settings)
                 and all(_value(t, k, registry) == _value(trial, k, registry)
                         for k in set(t.knobs) | set(trial.knobs)
                         if k not in {x.key for x in s.settings})), None)


def why_lines(trial: TrialSummary, view: ExperimentView, registry: KnobRegistry,
              fmt: Callable[[Comparison], str]) -> list[str]:
    """For each knob of `trial` away from its default: the measurement that chose it —
    the trial with only that knob changed against the all-defaults trial of the same
    experiment, stack, workload, concurrency and lab conditions — or that it was not
    measured alone; a condition of the lab (net, fs, machine, load) is said to be one,
    not a setting. Then the trial against the defaults, all its settings together."""
    s = support(trial, view, registry)
    lines = [f"{k} = {_value(trial, k, registry)!r} (default {registry.get(k).default!r}): "
             f"{registry.get(k).meaning}\n    a condition of the lab the variant was "
             "measured under, not a setting of this configuration" for k in s.conditions]
    for x in s.settings:
        head = f"{x.key} = {x.value!r} (default {x.default!r}): {registry.get(x.key).meaning}"
        if x.comparison is None or x.alone is None or s.default is None:
            lines.append(f"{head}\n    not measured alone against the defaults here")
            continue
        c = x.comparison
        lines.append(f"{head}\n    alone: {fmt(c.comparison)} {c.metric} against the "
                     f"defaults, {c.decision.kind} (experiment {view.name}: trial "
                     f"{x.alone.trial_id} vs {s.default.trial_id})")
    if s.jointly is not None and s.default is not None:
        lines.append(f"all {len(s.settings)} together: {fmt(s.jointly.comparison)} "
                     f"{s.jointly.metric} against the defaults, {s.jointly.decision.kind} "
                     f"(trial {trial.trial_id} vs {s.default.trial_id})")
    return lines
