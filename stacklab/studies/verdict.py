"""Then against now: each finding of a study, its figures as the study gave them, and
today's measurement of its claim (a ratio B/A with its interval) with a verdict on
whether the direction still holds and how the size compares.

The verdict on B against A is the one of every command (analyze.decide: better, worse,
same or no-verdict with a reason code); a finding's direction (holds, reversed, …) is read
from it, so a study and `compare` never disagree on the same two trials. A side that ran
on a busy host is said beside the verdict (analyze.reach), never used to widen its
interval."""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from ..analysis.analyze import (MARGIN, Bound, Decision, Estimate, ExperimentView, Reach,
                                TrialSummary, bound, bounded_verdict, decide, invalid, reach,
                                reachable, sure)
from ..knobs import KnobRegistry
from ..analysis.stats import Comparison, compare
from .plans import METRICS, Check, matches

# "b=a" holds when the whole interval lies within a band (the studies' "differ little"):
# at most this wide, and never wider than the smallest effect the same study calls real
# (same_band), so a study's "no difference" cannot swallow a difference it reports.
SAME_BAND = (1 / 1.15, 1.15)
# metric -> (values per run, whether a limited side's true value is higher)
HIGHER_IS_LIMITED = {"ms": None, "rps": True, "mbps": True, "p50": False, "p99": False,
                     "bytes": None, "cpu": None, "rss": None,
                     "repeat_bytes": None, "repeat_requests": None}
# What a response or a page view weighs does not depend on how fast it was fetched: a
# limited side leaves such a verdict standing, and a busy host cannot move it.
SIZE_METRICS = {"bytes", "repeat_bytes", "repeat_requests"}
# Metrics where B above A is better (the verdict's better/worse); on the others less is.
HIGHER_IS_BETTER = {"rps", "mbps"}
# Today's answer to a finding's direction (direction_verdict).
DIRECTIONS = ("holds", "reversed", "does not hold", "not shown", "no verdict")


def metric_values(s: TrialSummary, metric: str) -> list[float]:
    """One value per ok run of `s`, in the unit METRICS names."""
    return metric_runs(s, metric)[0]


def metric_runs(s: TrialSummary, metric: str) -> tuple[list[float], tuple]:
    """One value per ok run of `s`, in the unit METRICS names, and when each of those
    runs ran (analyze.Estimate.when; () where a value is not one run's), so that two
    trials of one experiment are compared round by round."""
    def of(e: Estimate | None, scale: float = 1.0) -> tuple[list[float], tuple]:
        return ([v * scale for v in e.values], e.when) if e else ([], ())
    if metric in ("rps", "mbps", "cpu"):
        return of({"rps": s.rps, "mbps": s.mbps, "cpu": s.server_cpu}[metric])
    if metric in ("p50", "p99"):
        return of(s.latency_runs_us.get(metric), 1 / 1000)
    if metric == "bytes":
        values = [m * 1e6 / r for m, r in zip(s.mbps.values, s.rps.values) if r]
        return values, s.rps.when if len(values) == len(s.rps.values) else ()
    if metric == "rss":
        return [sum(v) for v in zip(*(e.values for e in s.rss_mib_peak.values()))], ()
    if metric in ("repeat_bytes", "repeat_requests"):
        return of(s.page_views.get(metric))
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
    reach: Reach | None = None        # which sides ran on a busy host (said, not weighed)
    medians: tuple[float | None, float | None] = (None, None)   # today's A and B, as such
    then: float | None = None         # the study's own ratio at the levels compared
    # the best run of each side, the seeds' own statistic (S1 best of 5, S5 best of 3):
    # shown beside the medians so a reader can set today's number beside the study's
    # exactly as it was taken; never judged (one run says nothing about the spread)
    best: tuple[float | None, float | None] = (None, None)
    per: object = None                # plans.Per: today's quantity per unit, as the study's
    then_source: str = ""             # where the study gives those values
    margin: float = MARGIN            # "same" within ±margin (the experiment's)

    @property
    def limited_is_low(self) -> bool | None:
        return HIGHER_IS_LIMITED[self.metric]

    @property
    def decision(self) -> Decision:
        """B against A in the one vocabulary (better, worse, same, no-verdict)."""
        return decide(self.comparison, self.bound, self.limited_is_low,
                      self.metric in HIGHER_IS_BETTER, self.margin)

    @property
    def verdict(self) -> str:
        """The decision in words, with the bound's or the busy host's numbers."""
        return bounded_verdict(self.comparison, self.bound, self.reach, self.limited_is_low,
                               self.margin)

    @property
    def interval(self) -> tuple[float, float] | None:
        """Where the true ratio can lie, as decide weighs it: the 95% CI left open on the
        side a limited run leaves unknown (0 and inf stand for no limit)."""
        ci = self.comparison.ci
        if ci is None or (self.bound is not None and self.bound.relation == "?"):
            return None
        return reachable(ci, self.bound, self.limited_is_low)


def measure_check(check: Check, view: ExperimentView,
                  registry: KnobRegistry) -> Measured | str:
    """The check's comparison in a stored experiment, or why there is none."""
    levels = check.levels(view.summaries)
    if check.mean_over is not None and not levels:
        axis, wanted = check.mean_over
        return f"no stored trial at any {axis} of {', '.join(map(str, wanted))}"
    sides: dict[str, tuple[TrialSummary, list[float], tuple]] = {}
    for side in ("a", "b"):
        terms = []
        for sign, one in check.selectors(side, levels):
            found = one_trial(view, one, side, registry)
            if isinstance(found, str):
                return found
            terms.append((sign, found))
        sides[side] = (averaged(terms, check.metric, check.mean_over[0], levels) if levels
                       else combined(terms, check.metric))
    (a, a_values, a_when), (b, b_values, b_when) = sides["a"], sides["b"]
    # two sides of one experiment ran in the same rounds: compared round by round
    alpha, margin = sure(a, b)
    c = compare(a_values, b_values, alpha,
                when=(a_when, b_when) if a.experiment == b.experiment else None)
    ids = {tid for s in (a, b) for tid in s.trial_id.split("+")}
    versions = {k: v for r in view.runs if r.trial_id in ids
                for k, v in r.versions.items() if not k.startswith("stacklab")}
    # a response's size (or a page view's) does not depend on how fast it was fetched
    if check.metric in SIZE_METRICS:
        limit, within = invalid(a, b), None
    else:
        limit = bound(a, b, HIGHER_IS_LIMITED[check.metric])
        within = reach(a, b)
    return Measured(view.name, a, b, check.metric, c, limit, dict(sorted(versions.items())),
                    within, medians=(median(a_values), median(b_values)),
                    then=check.then_ratio(levels or (a.concurrency,)),
                    then_source=check.then.source if check.then else "",
                    best=(best(a_values, check.metric), best(b_values, check.metric)),
                    per=check.per, margin=margin)


def one_trial(view: ExperimentView, selector: dict, side: str,
              registry: KnobRegistry) -> TrialSummary | str:
    """The one stored trial a selector names, with runs measured; or why not."""
    found = [s for s in view.summaries if matches(selector, s, registry)]
    if len(found) != 1:
        return f"{len(found)} stored trials match {side} = {selector}"
    if not found[0].runs_ok:
        return f"{found[0].label}: no run measured ({'; '.join(found[0].reasons)})"
    return found[0]


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def best(values: Sequence[float], metric: str) -> float | None:
    """The best run: the highest rate, the lowest time or cost."""
    if not values:
        return None
    return max(values) if metric in HIGHER_IS_BETTER else min(values)


def averaged(trials: list[tuple[int, TrialSummary]], metric: str, axis: str,
             levels: tuple) -> tuple[TrialSummary, list[float], tuple]:
    """One side as the geometric mean over its trials at `levels`, repetition by
    repetition (as many as the fewest has): B/A is then the geometric mean of the ratios
    level by level, the study's "mean over its levels". It stands as one trial labelled
    with the levels and flagged with every flag of its trials; its disturbance is their
    largest (a busy host slows a product by no more than its largest factor's share).
    A value stands at the first level's round (when it ran)."""
    columns = [metric_values(s, metric) for _, s in trials]
    values = [math.exp(sum(math.log(v) for v in run) / len(run)) for run in zip(*columns)
              if all(v > 0 for v in run)]
    first_when = metric_runs(trials[0][1], metric)[1]
    when = first_when[:len(values)] if len(values) == min(map(len, columns)) else ()
    first = trials[0][1]
    # the first level's "c=N" (a whole word) stands for the levels
    label = (re.sub(rf"(?<!\S)c={first.concurrency}(?!\S)", f"c={levels[0]}…{levels[-1]}",
                    first.label, count=1)
             + f" (geometric mean over {axis} {', '.join(map(str, levels))})")
    return replace(first, trial_id="+".join(s.trial_id for _, s in trials), label=label,
                   flagged=tuple(dict.fromkeys(f for _, s in trials for f in s.flagged)),
                   runs_ok=len(values), disturbance=max(s.disturbance for _, s in trials),
                   runs_set_aside=sum(s.runs_set_aside for _, s in trials)), values, when


def combined(terms: list[tuple[int, TrialSummary]],
             metric: str) -> tuple[TrialSummary, list[float], tuple]:
    """One side's trial and its values per run; a sum of trials adds and takes away
    their values repetition by repetition (as many as the fewest has), and stands as
    one trial labelled with the sum and flagged with every flag of its terms. Its
    disturbance is its terms' largest, but unsized when a term is taken away: a busy host
    that slowed what is subtracted can move a difference by more than any one factor."""
    if len(terms) == 1:
        return (terms[0][1], *metric_runs(terms[0][1], metric))
    columns = [[sign * v for v in metric_values(s, metric)] for sign, s in terms]
    values = [sum(run) for run in zip(*columns)]
    first_when = metric_runs(terms[0][1], metric)[1]
    when = first_when[:len(values)] if len(first_when) >= len(values) else ()
    label = " ".join(f"{'+' if sign > 0 else '−'} ({s.label})"
                     for sign, s in terms).removeprefix("+ ")
    flagged = tuple(dict.fromkeys(f for _, s in terms for f in s.flagged))
    first = terms[0][1]
    disturbance = max(s.disturbance for _, s in terms)
    if disturbance > 1.0 and any(sign < 0 for sign, _ in terms):
        disturbance = float("inf")
    return replace(first, trial_id="+".join(s.trial_id for _, s in terms), label=label,
                   flagged=flagged, runs_ok=len(values), disturbance=disturbance,
                   runs_set_aside=sum(s.runs_set_aside for _, s in terms)), values, when


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
    same_run = tuple((str(i), 0) for i in range(len(records)))   # both parts: one stack's
    c = compare(a, b, when=(same_run, same_run))
    what = f"{step.stack} {step.workload}, keep-alive {'on' if step.keepalive else 'off'}"
    return Measured(f"breakdown {series} ({len(records)} fresh stacks)",
                    Part(f"{step.a} ms, {what}", f"{series}:{step.a}"),
                    Part(f"{step.b} ms, {what}", f"{series}:{step.b}"), "ms", c, None,
                    {k: v for k, v in sorted(records[0].versions.items())
                     if not k.startswith("stacklab")}, medians=(median(a), median(b)))


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


def same_band(findings: Sequence) -> tuple[float, float]:
    """The band a study's "no difference" (b=a) must lie in: SAME_BAND, narrowed to the
    smallest effect the same study reports as real (a b>a or b<a finding with a ratio),
    so that S1's "+5% from the sysctls" is not also "no difference" by S1's own rule."""
    edge = SAME_BAND[1]
    for f in findings:
        c = f.claim
        if (c.ratio is not None and c.direction != "b=a" and f.not_expressible is None
                and c.ratio != 1):
            edge = min(edge, math.exp(abs(math.log(c.ratio))))
    return (1 / edge, edge)


def claim_band(band: tuple[float, float], *own: float | None) -> tuple[float, float]:
    """A claim of no difference's band: the study's (same_band), widened to the claim's
    own figures where the study called more than that "no difference" (S2's 1 Gbit link
    with keep-alive: 1.08, beside a 1.05 it reports as real elsewhere) — the study's
    words decide what it meant, and its own figure must be able to hold."""
    edge = band[1]
    for ratio in own:
        if ratio is not None and ratio > 0:
            edge = max(edge, math.exp(abs(math.log(ratio))))
    return (1 / edge, edge)


def direction_verdict(direction: str, m: Measured,
                      band: tuple[float, float] = SAME_BAND) -> str:
    """Whether today's measurement shows the study's direction (one of DIRECTIONS), read
    from its decision: holds or reversed when B is better or worse; not shown when the
    interval holds 1 (same, or too wide to say: imprecise); no verdict when the decision
    is no-verdict for another reason (a limited side, too few runs). A claim of no
    difference (b=a) holds when the whole interval lies within `band` (same_band) and
    does not hold when it lies wholly outside."""
    d = m.decision
    if d.kind == "no-verdict" and d.reason != "imprecise":
        return "no verdict"
    lo, hi = m.interval
    if direction == "b=a":
        if band[0] <= lo and hi <= band[1]:
            return "holds"
        if hi < band[0] or lo > band[1]:
            return "does not hold"
        return "not shown"
    if d.kind in ("same", "no-verdict"):
        return "not shown"
    up = lo > 1
    return "holds" if up == (direction == "b>a") else "reversed"


# Today's effect against the study's, by distance from 1 on the study's side (size_verdict).
SIZES = ("same size", "stronger now", "weaker now")


def size_verdict(then: float | None, m: Measured, direction: str = "") -> str:
    """How today's effect compares with the study's (one of SIZES, "" when there is
    nothing to say): stronger or weaker by its distance from 1 in the study's direction,
    whichever side of 1 the study's ratio lies (Squid at 0.85 against the study's 0.53 is
    weaker). Only where the direction has a verdict: a bound or a busy host that could
    explain the ratio leaves the size unknown too; an interval open on one side (a bound
    that still decided) says only what its closed side shows. A claim of no difference
    has no size beyond its band."""
    if then is None or then == 1 or direction == "b=a" or m.interval is None:
        return ""
    if m.decision.kind == "no-verdict" or reversed_(then, m):
        return ""
    toward = 1 if then > 1 else -1             # the study's side of 1, as +log distance
    ends = sorted(toward * _log(x) for x in m.interval)
    size = abs(math.log(then))
    if ends[0] > size:
        return "stronger now"
    if ends[1] < size:
        return "weaker now"
    return "same size" if all(math.isfinite(e) for e in ends) else ""


def reversed_(then: float, m: Measured) -> bool:
    """Whether today's interval lies wholly on the other side of 1 from the study's
    ratio: a reversal has no size to compare ("weaker" would say nothing)."""
    lo, hi = m.interval
    return hi < 1 if then > 1 else lo > 1


def _log(x: float) -> float:
    return math.log(x) if x > 0 else -math.inf


@dataclass(frozen=True)
class Row:
    """One finding in the study report."""

    finding: object                    # findings.Finding
    status: str                        # measured / not expressible / not measured
    why: str = ""                      # not expressible or not measured: the reason
    measured: Measured | None = None
    direction: str = ""                # direction_verdict: one of DIRECTIONS
    size: str = ""                     # size_verdict
    note: str = ""                     # the check's note: how the condition was built
    then: float | None = None          # the study's ratio the size was judged against

    @property
    def decision(self) -> Decision:
        """B against A; a finding not measured has no data to decide on."""
        return self.measured.decision if self.measured else Decision("no-verdict", "no-data")

    @property
    def demonstration(self) -> str:
        """Why the finding holds by construction ("" when it could have failed)."""
        return self.finding.demonstration

    @property
    def direction_text(self) -> str:
        """The direction, with its reason when there is no verdict."""
        d = self.decision
        if self.direction == "no verdict" and d.reason:
            return f"no verdict ({d.reason})"
        return self.direction


def rows(findings: Sequence, checks: dict, views: Callable[[str], ExperimentView | str],
         registry: KnobRegistry, unmeasured: dict[str, str] | None = None,
         breakdowns: dict[str, tuple] | None = None) -> list[Row]:
    """Every finding, in the study's order: not expressible (with its stated reason),
    measured (with its verdicts), or not measured (and why: no check planned, or the
    experiment failed). `breakdowns`: finding -> (its BreakdownStep, the stored series
    or why there is none)."""
    out = []
    band = same_band(findings)
    for f in findings:
        if f.not_expressible is not None:
            out.append(Row(f, "not expressible",
                           f"{f.not_expressible.reason}: {f.not_expressible.detail}"))
            continue
        if f.id in (breakdowns or {}):
            out.append(breakdown_row(f, *breakdowns[f.id], band=band))
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
        then = m.then if m.then is not None else claim.ratio
        out.append(Row(f, "measured", measured=m,
                       direction=direction_verdict(claim.direction, m,
                                                   claim_band(band, claim.ratio, m.then)),
                       size=size_verdict(then, m, claim.direction), note=check.note,
                       then=then))
    return out


def breakdown_row(f, step, records: Sequence | str,
                  band: tuple[float, float] = SAME_BAND) -> Row:
    m = records if isinstance(records, str) else measure_breakdown(step, records)
    if isinstance(m, str):
        return Row(f, "not measured", m, note=step.note)
    note = f"{step.note}; now: {shares_text(step, records)}".removeprefix("; ")
    return Row(f, "measured", measured=m,
               direction=direction_verdict(f.claim.direction, m,
                                           claim_band(band, f.claim.ratio)),
               size=size_verdict(f.claim.ratio, m, f.claim.direction), note=note,
               then=f.claim.ratio)


def metric_label(metric: str) -> str:
    return METRICS.get(metric) or {"ms": "ms of one request (breakdown)"}[metric]
