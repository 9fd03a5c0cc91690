"""Then against now: each finding of a study, its figures as the study gave them, and
today's measurement of its claim (a ratio B/A with its interval) with a verdict on
whether the direction still holds and how the size compares."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from ..analyze import Bound, ExperimentView, TrialSummary, bound, bounded_verdict, invalid
from ..knobs import KnobRegistry
from ..stats import Comparison, compare
from .plans import METRICS, Check, matches

# "b=a" holds when the whole interval lies within this band (the studies' "differ little")
SAME_BAND = (1 / 1.15, 1.15)
# metric -> (values per run, whether a limited side's true value is higher)
HIGHER_IS_LIMITED = {"ms": None, "rps": True, "mbps": True, "p50": False, "p99": False,
                     "bytes": None, "cpu": None, "rss": None,
                     "repeat_bytes": None, "repeat_requests": None}
# What a response or a page view weighs does not depend on how fast it was fetched: a
# limited side leaves such a verdict standing.
SIZE_METRICS = {"bytes", "repeat_bytes", "repeat_requests"}


def metric_values(s: TrialSummary, metric: str) -> list[float]:
    """One value per ok run of `s`, in the unit METRICS names."""
    if metric == "rps":
        return list(s.rps.values)
    if metric == "mbps":
        return list(s.mbps.values)
    if metric in ("p50", "p99"):
        e = s.latency_runs_us.get(metric)
        return [v / 1000 for v in e.values] if e else []
    if metric == "bytes":
        return [m * 1e6 / r for m, r in zip(s.mbps.values, s.rps.values) if r]
    if metric == "cpu":
        return [sum(v) for v in zip(*(e.values for e in s.cpu_us_per_request.values()))]
    if metric == "rss":
        return [sum(v) for v in zip(*(e.values for e in s.rss_mib_peak.values()))]
    if metric in ("repeat_bytes", "repeat_requests"):
        e = s.page_views.get(metric)
        return list(e.values) if e else []
    raise ValueError(metric)


@dataclass(frozen=True)
class Part:
    """One side of a breakdown check: a part of one request's time, as a trial would
    stand in a row (a label, no flags)."""

    label: str
    trial_id: str
    flagged: tuple[str, ...] = ()


@dataclass(frozen=True)
class Measured:
    """One check measured: the two trials and B/A on the check's metric."""

    experiment: str
    a: TrialSummary | Part
    b: TrialSummary | Part
    metric: str
    comparison: Comparison
    bound: Bound | None
    versions: dict[str, str] = field(default_factory=dict)   # the components both ran, now

    @property
    def verdict(self) -> str:
        return bounded_verdict(self.comparison, self.bound)


def measure_check(check: Check, view: ExperimentView,
                  registry: KnobRegistry) -> Measured | str:
    """The check's comparison in a stored experiment, or why there is none."""
    sides = {}
    for side in ("a", "b"):
        terms = []
        for sign, selector in check.terms(side):
            found = [s for s in view.summaries if matches(selector, s, registry)]
            if len(found) != 1:
                return f"{len(found)} stored trials match {side} = {selector}"
            if not found[0].runs_ok:
                return f"{found[0].label}: no run measured ({'; '.join(found[0].reasons)})"
            terms.append((sign, found[0]))
        sides[side] = terms
    a, a_values = combined(sides["a"], check.metric)
    b, b_values = combined(sides["b"], check.metric)
    c = compare(a_values, b_values)
    ids = {s.trial_id for terms in sides.values() for _, s in terms}
    versions = {k: v for r in view.runs if r.trial_id in ids
                for k, v in r.versions.items() if not k.startswith("stacklab")}
    # a response's size (or a page view's) does not depend on how fast it was fetched
    limit = (invalid(a, b) if check.metric in SIZE_METRICS
             else bound(a, b, HIGHER_IS_LIMITED[check.metric]))
    return Measured(view.name, a, b, check.metric, c, limit, dict(sorted(versions.items())))


def combined(terms: list[tuple[int, TrialSummary]],
             metric: str) -> tuple[TrialSummary, list[float]]:
    """One side's trial and its values per run; a sum of trials adds and takes away
    their values repetition by repetition (as many as the fewest has), and stands as
    one trial labelled with the sum and flagged with every flag of its terms."""
    if len(terms) == 1:
        return terms[0][1], metric_values(terms[0][1], metric)
    columns = [[sign * v for v in metric_values(s, metric)] for sign, s in terms]
    values = [sum(run) for run in zip(*columns)]
    label = " ".join(f"{'+' if sign > 0 else '−'} ({s.label})"
                     for sign, s in terms).removeprefix("+ ")
    flagged = tuple(dict.fromkeys(f for _, s in terms for f in s.flagged))
    first = terms[0][1]
    return replace(first, trial_id="+".join(s.trial_id for _, s in terms), label=label,
                   flagged=flagged, runs_ok=len(values)), values


def measurements(step, record) -> list[dict]:
    """A stored breakdown's measurement of each URL with the step's keep-alive mode."""
    return [m for url in record.result["urls"] for m in url["measurements"]
            if m["keepalive"] == step.keepalive]


def measure_breakdown(step, records: Sequence) -> Measured | str:
    """A breakdown check in a stored series (breakdown.BreakdownRecord, one per fresh
    stack): part B's milliseconds against part A's, one value per repetition (the median
    over the workload's URLs)."""
    def part(name: str) -> list[float] | str:
        values = []
        for r in records:
            per_url = []
            for m in measurements(step, r):
                ms = [row["ms"] for row in m["shares"] if row["component"].startswith(name)]
                if not ms or ms[0] is None:
                    return f"the breakdown has no {name} part (network: {step.network})"
                per_url.append(ms[0])
            values.append(statistics.median(per_url))
        return values
    a, b = part(step.a), part(step.b)
    for side in (a, b):
        if isinstance(side, str):
            return side
    for name, values in ((step.a, a), (step.b, b)):
        if min(values) <= 0:
            # web server and network are differences of medians: noise can take them
            # to zero or below, and a ratio of such parts means nothing
            return (f"the {name} part was {min(values):.3f} ms in a repetition (a "
                    f"difference of medians, within their noise): no ratio; parts per "
                    f"repetition {', '.join(f'{v:.3f}' for v in values)} ms")
    series = records[0].id
    c = compare(a, b)
    what = f"{step.stack} {step.workload}, keep-alive {'on' if step.keepalive else 'off'}"
    return Measured(f"breakdown {series} ({len(records)} fresh stacks)",
                    Part(f"{step.a} ms, {what}", f"{series}:{step.a}"),
                    Part(f"{step.b} ms, {what}", f"{series}:{step.b}"), "ms", c, None,
                    {k: v for k, v in sorted(records[0].versions.items())
                     if not k.startswith("stacklab")})


def shares_text(step, records: Sequence) -> str:
    """Every part's median milliseconds and share over the repetitions, as S1 gave them."""
    parts: dict[str, list[tuple[float, float]]] = {}
    for r in records:
        for m in measurements(step, r):
            for row in m["shares"]:
                if row["ms"] is not None:
                    parts.setdefault(row["component"], []).append((row["ms"], row["percent"]))
    return "; ".join(f"{name} {statistics.median(v[0] for v in got):.2f} ms "
                     f"({statistics.median(v[1] for v in got):.0f}%)"
                     for name, got in parts.items())


def direction_verdict(direction: str, m: Measured) -> str:
    """Whether today's measurement shows the study's direction: holds, reversed, does not
    hold, or not shown (no significant difference / interval too wide / a bound only)."""
    c = m.comparison
    if c.ratio is None or c.ci is None:
        return "no verdict"
    if m.bound is not None and m.verdict.startswith("no verdict"):
        # a limited side pointing against the ratio, or a side that is no measurement
        why = "not a measurement" if m.bound.relation == "?" else "a bound"
        return f"no verdict ({why})"
    if direction == "b=a":
        low, high = c.ci
        if SAME_BAND[0] <= low and high <= SAME_BAND[1]:
            return "holds"
        if c.significant and (high < SAME_BAND[0] or low > SAME_BAND[1]):
            return "does not hold"
        return "not shown"
    if not c.significant:
        return "not shown"
    up = c.ratio > 1
    return "holds" if up == (direction == "b>a") else "reversed"


def size_verdict(then: float | None, m: Measured) -> str:
    """The study's ratio against today's interval: inside it, or today's is smaller or
    larger (further from 1 or nearer)."""
    c = m.comparison
    if then is None or c.ci is None:
        return ""
    low, high = c.ci
    if low <= then <= high:
        return "same size"
    return "larger now" if low > then else "smaller now"


@dataclass(frozen=True)
class Row:
    """One finding in the study report."""

    finding: object                    # findings.Finding
    status: str                        # measured / not expressible / not measured
    why: str = ""                      # not expressible or not measured: the reason
    measured: Measured | None = None
    direction: str = ""                # direction_verdict
    size: str = ""                     # size_verdict
    note: str = ""                     # the check's note: how the condition was built


def rows(findings: Sequence, checks: dict, views: Callable[[str], ExperimentView | str],
         registry: KnobRegistry, unmeasured: dict[str, str] | None = None,
         breakdowns: dict[str, tuple] | None = None) -> list[Row]:
    """Every finding, in the study's order: not expressible (with its stated reason),
    measured (with its verdicts), or not measured (and why: no check planned, or the
    experiment failed). `breakdowns`: finding -> (its BreakdownStep, the stored series
    or why there is none)."""
    out = []
    for f in findings:
        if f.not_expressible is not None:
            out.append(Row(f, "not expressible",
                           f"{f.not_expressible.reason}: {f.not_expressible.detail}"))
            continue
        if f.id in (breakdowns or {}):
            out.append(breakdown_row(f, *breakdowns[f.id]))
            continue
        if f.id not in checks:
            why = (unmeasured or {}).get(f.id, "no check in the study's plan")
            out.append(Row(f, "not measured", why))
            continue
        step, check = checks[f.id]
        view = views(step.name)
        if isinstance(view, str):
            out.append(Row(f, "not measured", view, note=check.note))
            continue
        m = measure_check(check, view, registry)
        if isinstance(m, str):
            out.append(Row(f, "not measured", m, note=check.note))
            continue
        claim = f.claim
        out.append(Row(f, "measured", measured=m,
                       direction=direction_verdict(claim.direction, m),
                       size=size_verdict(claim.ratio, m), note=check.note))
    return out


def breakdown_row(f, step, records: Sequence | str) -> Row:
    m = records if isinstance(records, str) else measure_breakdown(step, records)
    if isinstance(m, str):
        return Row(f, "not measured", m, note=step.note)
    note = f"{step.note}; now: {shares_text(step, records)}".removeprefix("; ")
    return Row(f, "measured", measured=m, direction=direction_verdict(f.claim.direction, m),
               size=size_verdict(f.claim.ratio, m), note=note)


def metric_label(metric: str) -> str:
    return METRICS.get(metric) or {"ms": "ms of one request (breakdown)"}[metric]
