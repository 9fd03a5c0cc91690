"""A tuner's search in words (`stacklab tune`): the space before it starts, one line per
trial as it is told, and the best against the defaults at the end."""

from __future__ import annotations

from typing import Any, Mapping

from ..analysis.analyze import MetricComparison
from ..analysis.answered import supports
from ..experiment.spec import ExperimentSpec
from ..experiment.tunespace import Dimension
from .fmt import number, ratio_ci
from .text import verdict_words


def space_lines(spec: ExperimentSpec, dims: tuple[Dimension, ...]) -> list[str]:
    t = spec.tune
    point = ", ".join(f"{k} {v[0]}" for k, v in spec.axes.items())
    goal = ("the most req/s" if t.objective == "rps" else
            f"the highest capacity under {spec.capacity.slo}" if t.objective == "capacity"
            else f"the least server CPU per request at {spec.fixed_knobs['load.rate']:,} "
                 "req/s")
    out = [f"tune {spec.experiment.name}: {t.trials} trials for {goal} at {point}"
           + (f", within {t.memory} of peak memory" if t.memory else "")
           + f"; each trial {spec.experiment.first_repetitions} run(s)"]
    if t.prune:
        out.append(prune_line(t.prune, spec.experiment.first_repetitions))
    for d in dims:
        where = (", ".join(map(repr, d.choices)) if d.kind == "categorical" else
                 f"{d.low:g}..{d.high:g}" + (" (log)" if d.log else ""))
        when = (" — only with " + ", ".join(f"{k} = {v!r}" for k, v in d.acts_with.items())
                if d.acts_with else "")
        out.append(f"  {d.key}: {where} (default {d.default!r}){when}")
    return out


def prune_line(p: float, runs: int) -> str:
    """When the Wilcoxon pruner can stop a trial at all: after n runs all worse than the
    best's, its one-sided p is 1/2^n at the least, so no earlier than the first n with
    1/2^n < p, and only while runs remain."""
    first = next(n for n in range(1, 64) if 0.5 ** n < p)
    if first >= runs:
        return (f"  pruning: none (the Wilcoxon test reaches p < {p:g} after run {first} "
                f"at the soonest, and a trial has {runs} run(s): give {first + 1} or more "
                "repetitions to prune)")
    return (f"  pruning: a trial clearly worse than the best stops after run {first} or "
            f"later of {runs} (Wilcoxon, one-sided p < {p:g})")


def changed(values: Mapping[str, Any], fixed: Mapping[str, Any]) -> str:
    """The values that differ from the defaults, or "the defaults"."""
    diff = [f"{k}={v!r}" for k, v in values.items() if fixed.get(k) != v]
    return " ".join(diff) or "the defaults"


def history_line(number_: int, values: Mapping[str, Any], fixed: Mapping[str, Any],
                 value: float | None, peak: float | None, budget: int | None) -> str:
    shown = "failed" if value is None else f"{value:,.1f}"
    mem = ("" if peak is None and not budget else
           ", peak memory unread: counted over the budget" if peak is None else
           f", peak memory {peak:,.0f} MiB" + (" (over budget)" if budget and peak > budget
                                            else ""))
    return f"trial {number_}: {shown}{mem}: {changed(values, fixed)}"


def tally_line(counts: Mapping[str, int], peaks: list[float], budget: int | None) -> str:
    """What the search did with its trials, and how its measured peaks stood against the
    budget: `counts` by how a trial ended (measured, pruned, predicted, refused, failed)."""
    said = {"measured": "measured", "pruned": "pruned (stopped early, worse than the best)",
            "predicted": "not started (predicted over the memory budget)",
            "refused": "refused by the plan", "failed": "failed"}
    out = "search: " + ", ".join(f"{counts[k]} {words}" for k, words in said.items()
                                 if counts.get(k))
    if budget:
        over = sum(p > budget for p in peaks)
        out += (f"; {over} of {len(peaks)} measured trial(s) over the budget of {budget} MiB "
                f"(highest peak {max(peaks):,.0f} MiB)" if peaks else
                "; no peak memory read")
    return out


def final_lines(best: int, values: Mapping[str, Any], fixed: Mapping[str, Any],
                against: Mapping[str, Mapping[str, MetricComparison]], objective: str,
                importance: Mapping[str, Any], trials: int, best_trial_id: str,
                hand: Mapping[str, Any],
                alone: Mapping[str, Mapping[str, MetricComparison]]) -> list[str]:
    """The best trial's values, each knob's importance, and the objective against the
    defaults' and the hand preset's (`against`: "defaults" / "hand" -> metric -> the
    comparison, the best as B; req/s, or each server component's CPU per request) with
    the ratio's interval and the verdict; each of its settings alone against the
    defaults (`alone`: knob key -> rows); how to get its configuration."""
    out = [f"best: trial {best}: {changed(values, fixed)}"]
    if importance:
        out.append(f"  importance (fANOVA: each knob's share of the variance over the "
                   f"{trials} trials, with its 95% bootstrap interval): " + ", ".join(
                       f"{k} {v.share:.0%} [{v.low:.0%}–{v.high:.0%}]"
                       for k, v in importance.items()))
    else:
        out.append(f"  importance: not estimated from {trials} trials (too few for fANOVA "
                   "to say more than noise)")
    left = unsupported([k for k, v in values.items() if fixed.get(k) != v],
                       against.get("defaults", {}), alone, objective)
    out.append(f"  its configuration: stacklab export-config {best_trial_id} -o DIR "
               "(each setting with its reason)" if not left else
               f"  its configuration: no verdict supports {', '.join(left)} against the "
               f"defaults, so `stacklab export-config {best_trial_id}` writes only the "
               "settings one supports (as a trial that changes just those, if measured) "
               "or nothing; --unsupported writes them all, each marked")
    if hand and "hand" not in against:
        out.append(f"  the hand preset ({changed(hand, fixed)}) comes to the best's or the "
                   "defaults' settings: nothing more to measure")
    for name, rows in against.items():
        what = ("the defaults" if name == "defaults" else
                f"the hand preset ({changed(hand, fixed)})")
        side = "defaults" if name == "defaults" else "hand"
        judged = _judged(rows, objective)
        if not judged:
            out.append(f"  against {what}: nothing measured on both sides")
        for m in judged:
            c = m.comparison
            out.append(f"  against {what}, measured again: {m.metric} "
                       f"{number(c.median_a, 1)} → {number(c.median_b, 1)}, best/{side} "
                       f"{ratio_ci(c.ci)} (95% CI): {verdict_words(m)}")
    for key, rows in alone.items():
        for m in _judged(rows, objective):
            out.append(f"  {key}={values[key]!r} alone against the defaults: {m.metric} "
                       f"{ratio_ci(m.comparison.ci)} (95% CI): {verdict_words(m)}")
    return out


def unsupported(keys: list[str], defaults: Mapping[str, MetricComparison],
                alone: Mapping[str, Mapping[str, MetricComparison]], objective: str
                ) -> list[str]:
    """Of the best's settings away from the defaults (`keys`), those no verdict supports
    (analysis.answered.supports): `defaults` the best against the defaults, `alone`
    each setting alone against them (a key it lacks was not measured alone)."""
    def kind(rows: Mapping[str, MetricComparison]) -> str | None:
        kinds = {m.decision.kind for m in _judged(rows, objective)}
        return ("better" if kinds == {"better"} else "worse" if "worse" in kinds
                else None)
    better = kind(defaults) == "better"
    return [key for key in keys
            if not supports(kind(alone[key]) if key in alone else None, better)]


def _judged(rows: Mapping[str, MetricComparison], objective: str) -> list[MetricComparison]:
    """The comparisons the objective is judged by: req/s, capacity, or each server
    component's CPU per request (and their sum)."""
    wanted = {"rps": "req/s", "capacity": "capacity req/s"}.get(objective)
    if wanted in rows:
        return [rows[wanted]]
    return ([m for k, m in rows.items() if k.endswith("CPU µs/req")
             and not k.startswith("engine")] if objective == "cpu" else [])
