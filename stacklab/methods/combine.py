"""Combine (S1's last step): from an experiment's one-at-a-time results, the knob values
that beat their default significantly are set together and measured against the
defaults — every subset of them, side by side in one new experiment — so the report can
say whether the gains add up (the product of the single ratios lies inside the
combination's interval) or interact."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from ..analysis.analyze import ExperimentView, TrialSummary, bound, decide, sure, when_of
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


def why_lines(trial: TrialSummary, view: ExperimentView, registry: KnobRegistry,
              fmt: Callable[[Comparison], str]) -> list[str]:
    """For each knob of `trial` away from its default: the measurement that chose it —
    the trial with only that knob changed against the all-defaults trial of the same
    experiment, stack, workload, concurrency and lab conditions — or that it was not
    measured alone; a condition of the lab (net, fs, machine, load) is said to be one,
    not a setting."""
    group = [s for s in view.summaries if (s.stack, s.workload, s.concurrency) ==
             (trial.stack, trial.workload, trial.concurrency) and s.runs_ok]
    keys = [k for k in varied(group) if registry.get(k) is not None]
    under = {k: _value(trial, k, registry) for k in keys if lab_condition(k)}
    same = [s for s in group if all(_value(s, k, registry) == v for k, v in under.items())]
    settings = [k for k in keys if k not in under]
    default = next((s for s in same if all(
        _value(s, k, registry) == registry.get(k).default for k in settings)), None)
    lines = []
    for key in keys:
        value = _value(trial, key, registry)
        knob = registry.get(key)
        if value == knob.default:
            continue
        head = f"{key} = {value!r} (default {knob.default!r}): {knob.meaning}"
        if key in under:
            lines.append(f"{head}\n    a condition of the lab the variant was measured "
                         "under, not a setting of this configuration")
            continue
        alone = next((s for s in same if _value(s, key, registry) == value and all(
            _value(s, k, registry) == registry.get(k).default for k in settings
            if k != key)), None)
        if default is None or alone is None:
            lines.append(f"{head}\n    not measured alone against the defaults here")
            continue
        c = compare(default.rps.values, alone.rps.values,
                    when=when_of(default, alone, default.rps, alone.rps))
        lines.append(f"{head}\n    alone: {fmt(c)} req/s against the defaults "
                     f"(experiment {view.name}: trial {alone.trial_id} vs {default.trial_id})")
    return lines
