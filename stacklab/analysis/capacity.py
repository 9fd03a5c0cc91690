"""Capacity: the highest offered rate whose latency percentile meets an SLO.

The pure core of `stacklab capacity`: the SLO (experiment/slo.py), the
decision on one step from its latency histogram, and the search over rates. No clock,
no engine, no server: the search calls `measure(rate, duration_s)` and is tested
against synthetic servers whose capacity is known by construction.

A step is decided on the percentile's distribution-free confidence interval, not on a
point value: a p99 read off 2,000 requests is 20 requests deep into the tail, and a
point value one bucket either side of the limit would decide by noise. Undecided steps
are lengthened, so the search spends time only where the answer is close.

The interval counts the step's requests as independent draws only when they are. In a
queue they are not: a busy period holds many slow answers together, and near capacity
a 5 s step may hold a handful of busy periods, so an interval that counts 5,000 draws
covers the true p99 in 14% of steps at 90% load (bench/capacity_coverage.py). The
step's one-second windows size it: the spread of their mean latencies against the
spread of single latencies tells how many requests count as one draw (`per_draw`, the
batch-means estimate of the integrated autocorrelation time), and the interval is the
one of n / per_draw draws. A step whose latency rose from its first half to its second
beyond what that spread explains is not stationary and does not pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Sequence

from ..experiment.slo import Slo
from .flags import DISTURBED
from .stats import decode_histogram

LEVEL = 0.95            # the interval's coverage
MIN_KEPT = 0.99         # a step whose achieved rate is under 99% of the offered one failed
# A step's flags that are not the server's doing (the host's other work, the engine at
# its own limit): they add latency, so a step they mark that did not pass is measured
# again, and a fail that stays so makes the capacity a lower bound.
NOT_THE_SERVER = (*DISTURBED, "generator-bound")
# The shares of the capacity found at which a search profiles latency (and CPU per
# request at the first: a fixed rate well under capacity).
PROFILE_SHARES = (0.5, 0.8, 0.9)
# A step whose connections, not the server, kept it from the offered rate: the
# capacity found may then be the connections' (run/capacity.connections_bound).
CONNECTIONS_BOUND = "connections-bound"


@dataclass(frozen=True)
class Bin:
    """Latency histogram bin: `count` requests whose latency lies in [low_us, high_us]."""

    low_us: float
    high_us: float
    count: int


def bins_from_histogram(b64: str) -> tuple[Bin, ...]:
    """The engine's histogram (LoadReport.histogram, base64 HdrHistogram) as bins."""
    return bins_of(decode_histogram(b64))


def bins_of(h: Any) -> tuple[Bin, ...]:
    """A decoded HdrHistogram as bins, each spanning the values it cannot tell apart."""
    return tuple(Bin(h.get_lowest_equivalent_value(it.value_iterated_to),
                     h.get_highest_equivalent_value(it.value_iterated_to),
                     it.count_added_in_this_iter_step)
                 for it in h.get_recorded_iterator() if it.count_added_in_this_iter_step)


def quantile_ranks(n: int, q: float, level: float = LEVEL) -> tuple[int, int]:
    """1-based ranks (l, u) with P(x(l) ≤ true q-quantile ≤ x(u)) ≥ level, any continuous
    distribution: B, the count of n values under the quantile, is Binomial(n, q), and the
    interval covers it when l ≤ B < u. Each tail gets at most (1 - level)/2. l may be 0
    (no lower bound) and u may be n + 1 (no upper bound) when n is too small."""
    tail = (1 - level) / 2
    mean, sd = n * q, math.sqrt(n * q * (1 - q))
    start = max(0, int(mean - 12 * sd) - 2)
    stop = min(n, int(mean + 12 * sd) + 2)
    cdf, low, high = _binom_cdf_below(n, q, start), 0, n + 1
    for k in range(start, stop + 1):
        # cdf = P(B < k) on entry
        if cdf <= tail:
            low = k
        cdf += _binom_pmf(n, q, k)
        if high == n + 1 and 1 - cdf <= tail:   # P(B ≥ k + 1) ≤ tail
            high = k + 1
    return low, high


def _binom_pmf(n: int, q: float, k: int) -> float:
    if q <= 0 or q >= 1:
        return float(k == round(n * q))
    return math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                    + k * math.log(q) + (n - k) * math.log1p(-q))


def _binom_cdf_below(n: int, q: float, k: int) -> float:
    """P(B < k); the window starts 12 sd below the mean, where it is negligible, so
    only small windows starting at 0 are summed."""
    return sum(_binom_pmf(n, q, i) for i in range(k)) if k <= 64 else 0.0


def percentile_interval(bins: Sequence[Bin], percentile: float,
                        level: float = LEVEL, per_draw: float = 1.0) -> tuple[float, float]:
    """The percentile's confidence interval in µs: its order-statistic ranks mapped to
    the bins that hold them (lower edge of the lower rank's bin, upper edge of the upper
    rank's), so the interval is wide by a bin at most. (0, inf) bounds when the ranks
    fall outside the sample. With `per_draw` > 1 the n requests count as n / per_draw
    independent draws: the ranks are those of that smaller sample, scaled back to the
    requests' and rounded outward."""
    ordered = sorted((b for b in bins if b.count), key=lambda b: b.low_us)
    n = sum(b.count for b in ordered)
    if n == 0:
        return 0.0, math.inf
    draws = max(1, int(n / max(1.0, per_draw)))
    low_rank, high_rank = quantile_ranks(draws, percentile / 100, level)
    low_rank = math.floor(low_rank * n / draws) if low_rank >= 1 else 0
    high_rank = math.ceil(high_rank * n / draws) if high_rank <= draws else n + 1
    return (_edge(ordered, low_rank, lower=True) if low_rank >= 1 else 0.0,
            _edge(ordered, min(high_rank, n), lower=False) if high_rank <= n else math.inf)


def _edge(ordered: Sequence[Bin], rank: int, lower: bool) -> float:
    seen = 0
    for b in ordered:
        seen += b.count
        if seen >= rank:
            return b.low_us if lower else b.high_us
    return ordered[-1].high_us


class StepDecision(Enum):
    """A step's outcome; not analyze.Decision, which compares two trials."""

    PASS = "pass"
    FAIL = "fail"
    LONGER = "longer"      # undecided: lengthen the step


@dataclass(frozen=True)
class Window:
    """One second of a step (the engine's time series): its completed requests and
    their mean latency."""

    completed: int
    mean_us: float


@dataclass(frozen=True)
class StepOutcome:
    """What one step at a fixed offered rate measured."""

    offered_rate: float
    achieved_rate: float
    completed: int
    errors: int
    bins: tuple[Bin, ...]
    # Requests in flight at the step's end, and the oldest one's age; 0 when not known.
    # (Requests never sent lower the achieved rate, which fails the step past 1%.)
    in_flight: int = 0
    in_flight_age_us: float = 0.0
    in_flight_old: int = 0         # of them, waiting longer than the step lasted
    # The step second by second; () when not known (its requests then count as
    # independent draws).
    windows: tuple[Window, ...] = ()


@dataclass(frozen=True)
class Verdict:
    decision: StepDecision
    interval_us: tuple[float, float]
    reason: str            # why, in words a report can print


Z_RISING = 1.96        # a second half this many standard errors slower is a trend


def _spread(outcome: StepOutcome, limit_us: float) -> float:
    """The variance (µs²) of single latencies the step's bins hold (each at its
    middle), taken at least (limit_us / LIMIT_SCALE)²."""
    finite = [(b.count, (b.low_us + b.high_us) / 2) for b in outcome.bins
              if b.count and math.isfinite(b.high_us)]
    n = sum(c for c, _ in finite)
    variance = 0.0
    if n >= 2:
        mean = sum(c * v for c, v in finite) / n
        variance = sum(c * (v - mean) ** 2 for c, v in finite) / (n - 1)
    return max(variance, (limit_us / LIMIT_SCALE) ** 2)


def _full_windows(outcome: StepOutcome) -> list[Window]:
    """The step's windows that hold at least half the typical window's requests (the
    last, cut short by the step's end, does not)."""
    held = sorted(w.completed for w in outcome.windows if w.completed)
    if not held:
        return []
    typical = held[len(held) // 2]
    return [w for w in outcome.windows if w.completed * 2 >= typical]


# The spread that counts is the limit's scale: latencies spread over less than a tenth
# of the limit (an answer in 11 ms ± 0.3 ms against 20 ms) drift from second to second
# by amounts that cannot carry a window's tail across the limit, yet against their own
# tiny spread that drift reads as strong correlation.
LIMIT_SCALE = 10


def per_draw(outcome: StepOutcome, limit_us: float = 0.0) -> float:
    """How many of the step's requests count as one independent draw: the variance of
    its windows' mean latencies, each weighted by its requests, over the variance of
    single latencies (batch means: for independent requests it is 1; a queue's busy
    periods make it tens to hundreds near capacity), that variance taken at least
    (limit_us / LIMIT_SCALE)². 1 with fewer than 3 windows. Windows shorter than the
    correlation make it an underestimate; a second is long against a server's busy
    periods at its own time scale (milliseconds)."""
    full = _full_windows(outcome)
    if len(full) < 3:
        return 1.0
    variance = _spread(outcome, limit_us)
    if variance <= 0:
        return 1.0
    n = sum(w.completed for w in full)
    grand = sum(w.completed * w.mean_us for w in full) / n
    between = sum(w.completed * (w.mean_us - grand) ** 2 for w in full) / (len(full) - 1)
    return max(1.0, between / variance)


def rising(outcome: StepOutcome, draws_per: float, limit_us: float = 0.0
           ) -> tuple[float, float] | None:
    """The mean latency of the step's first and second halves when the second is slower
    by more than Z_RISING standard errors (each half's requests counted as
    n / draws_per draws, single latencies' variance at least (limit_us /
    LIMIT_SCALE)², as in per_draw: 140 to 206 us is no trend against 5 ms): a queue
    still growing, whose percentile the step's length decided. None when it is not, or
    with fewer than 4 windows."""
    full = _full_windows(outcome)
    if len(full) < 4:
        return None
    half = len(full) // 2
    first, second = full[:half], full[len(full) - half:]
    n1, n2 = sum(w.completed for w in first), sum(w.completed for w in second)
    variance = _spread(outcome, limit_us)
    if not n1 or not n2 or variance <= 0:
        return None
    m1 = sum(w.completed * w.mean_us for w in first) / n1
    m2 = sum(w.completed * w.mean_us for w in second) / n2
    se = math.sqrt(variance * draws_per * (1 / n1 + 1 / n2))
    return (m1, m2) if m2 - m1 > Z_RISING * se else None


def decide(outcome: StepOutcome, slo: Slo, max_error_rate: float = 0.0) -> Verdict:
    """PASS when the percentile's upper bound is under the limit, FAIL when its lower
    bound is over it, LONGER otherwise. A step that did not keep its rate (achieved
    under 99% of offered) or had too many errors fails whatever its latency: a server
    that sheds or stalls load is past its capacity however fast its answers are.
    Every request that failed, was answered with an error or got no answer counts as
    over the limit in the percentile (a bin at infinity): a server that timed out 0.8%
    of its requests does not meet "p99 < L" however fast its other answers were. Of those
    still in flight at the step's end, the ones known to be past the limit count: the
    oldest when it is, and every one older than the step (the rest are the window's cut,
    as those in flight at its start were, whose answers are in the histogram). The
    errors `max_error_rate` allows count too: a cap of 1% or more cannot let "p99 < L"
    pass on them. An error response is also in the histogram
    with its latency, so it weighs twice: the step is judged a little harder, never
    easier. The requests count as n / per_draw(outcome) independent draws, and a step
    whose latency rose within it (`rising`) does not pass: it is lengthened."""
    over = outcome.errors + (
        max(1, outcome.in_flight_old) if outcome.in_flight_age_us > slo.limit_us else 0)
    draws_per = per_draw(outcome, slo.limit_us)
    interval = percentile_interval(
        outcome.bins + ((Bin(math.inf, math.inf, over),) if over else ()), slo.percentile,
        per_draw=draws_per)
    if outcome.achieved_rate < MIN_KEPT * outcome.offered_rate:
        return Verdict(StepDecision.FAIL, interval,
                       f"rate-not-kept: {outcome.achieved_rate:.6g}/s of "
                       f"{outcome.offered_rate:.6g}/s offered")
    total = outcome.completed + outcome.errors
    if total and outcome.errors / total > max_error_rate:
        return Verdict(StepDecision.FAIL, interval,
                       f"errors: {outcome.errors / total:.3%} over the "
                       f"{max_error_rate:.3%} cap")
    p = f"p{slo.percentile:g}"
    draws = (f" ({_draws(outcome, draws_per)} independent draws: {draws_per:.0f} "
             f"correlated requests count as one)" if draws_per >= 1.5 else "")
    if interval[1] < slo.limit_us:
        trend = rising(outcome, draws_per, slo.limit_us)
        if trend:
            return Verdict(StepDecision.LONGER, interval,
                           f"{p} under {slo.limit_us:g} us, but the mean latency rose "
                           f"from {trend[0]:.0f} to {trend[1]:.0f} us within the step")
        return Verdict(StepDecision.PASS, interval, f"{p} under {slo.limit_us:g} us{draws}")
    if interval[0] > slo.limit_us:
        return Verdict(StepDecision.FAIL, interval, f"{p} over {slo.limit_us:g} us{draws}")
    return Verdict(StepDecision.LONGER, interval,
                   f"{p} interval holds {slo.limit_us:g} us{draws}")


def _draws(outcome: StepOutcome, draws_per: float) -> str:
    return f"{max(1, int(sum(b.count for b in outcome.bins) / draws_per)):,}"


@dataclass(frozen=True)
class SearchPlan:
    start_rate: float
    step_s: float = 5.0
    max_step_s: float = 40.0       # LONGER steps double their duration up to this
    resolution: float = 0.02       # stop when (fail - pass) ≤ resolution × pass
    max_steps: int = 10            # measurements, repeated (longer) steps included
    max_rate: float = 1e9
    min_rate: float = 1.0
    min_requests: int = 0          # a step lasts long enough to send this many (needed)


def needed(percentile: float, level: float = LEVEL) -> int:
    """Requests a step should hold for the percentile's interval to have an upper bound
    with room to spare: twice the n at which even the largest value bounds it, q^n ≤
    (1 - level)/2 (p99: 367, so 734; p99.9: 7,376); fewer leave every step undecided."""
    q = percentile / 100
    return 2 * math.ceil(math.log((1 - level) / 2) / math.log(q))


@dataclass(frozen=True)
class Step:
    rate: float
    duration_s: float
    decision: StepDecision
    interval_us: tuple[float, float]
    reason: str


@dataclass(frozen=True)
class SearchResult:
    capacity: float | None         # the highest rate that passed; None if none did
    steps: tuple[Step, ...]
    stopped: str                   # resolved, step-limit, no-pass, no-fail


def search(measure: Callable[[float, float], StepOutcome], slo: Slo, plan: SearchPlan,
           max_error_rate: float = 0.0) -> SearchResult:
    """Double from the start rate until a step fails (halve if the start fails), then
    bisect between the highest pass and the lowest fail. A step still undecided at
    max_step_s counts as a fail: it was not shown to meet the SLO."""
    steps: list[Step] = []
    passed: float | None = None
    failed: float | None = None
    rate = plan.start_rate
    while True:
        if len(steps) >= plan.max_steps:
            return SearchResult(passed, tuple(steps), "step-limit")
        ok = _settle(measure, slo, plan, max_error_rate, rate, steps)
        if ok is None:
            return SearchResult(passed, tuple(steps), "step-limit")
        if ok:
            passed = rate
        else:
            failed = rate
        if passed is not None and failed is not None:
            if failed - passed <= plan.resolution * passed:
                return SearchResult(passed, tuple(steps), "resolved")
            rate = (passed + failed) / 2
        elif passed is not None:
            if rate >= plan.max_rate:
                return SearchResult(passed, tuple(steps), "no-fail")
            rate = min(rate * 2, plan.max_rate)
        else:
            if rate <= plan.min_rate:
                return SearchResult(None, tuple(steps), "no-pass")
            rate = max(rate / 2, plan.min_rate)


def _settle(measure, slo, plan, max_error_rate, rate, steps) -> bool | None:
    """Measure one rate, doubling the step while undecided; True on PASS, False on FAIL
    (or still undecided at max_step_s), None when the step budget ran out first. A step
    lasts at least long enough for min_requests at that rate."""
    duration = max(plan.step_s, plan.min_requests / rate)
    while len(steps) < plan.max_steps:
        verdict = decide(measure(rate, duration), slo, max_error_rate)
        steps.append(Step(rate, duration, verdict.decision, verdict.interval_us,
                          verdict.reason))
        if verdict.decision is not StepDecision.LONGER:
            return verdict.decision is StepDecision.PASS
        if duration * 2 > max(plan.max_step_s, plan.min_requests / rate * 2):
            return False
        duration *= 2
    return None


# Why a search's capacity is only a lower bound (analyze.capacity_bound): the figure
# enters compare, the gate and tune as "≥", never as an exact rate.
CAPACITY_LIMITS = {
    "capacity-ceiling": "had no rate above its capacity fail (its search ended at its "
                        "ceiling or its step limit), so its capacity is at least the figure",
    CONNECTIONS_BOUND: "failed steps above its capacity lost rate while the server "
                       "answered within the limit: its connections may have held it",
}


def lower_bound_reasons(record: dict) -> tuple[str, ...]:
    """The CAPACITY_LIMITS codes of one run's capacity search (its stored record): no
    step at a rate above the capacity found failed (the search passed at its ceiling,
    or ran out of steps while still rising), or those that failed were all
    connections-bound."""
    found = record.get("capacity")
    if not found:
        return ()
    failed = [st for st in record.get("steps") or () if st.get("decision") == "fail"
              and st.get("phase") in ("search", "confirm") and (st.get("rate") or 0) > found]
    if not failed:
        return ("capacity-ceiling",)
    if all(CONNECTIONS_BOUND in (st.get("flags") or ()) for st in failed):
        return (CONNECTIONS_BOUND,)
    return ()


def bracket(record: dict) -> tuple[float, float | None] | None:
    """The rates between which one search puts the capacity (its stored record): the
    rate that held (two full-length passes) and the lowest rate above it that failed
    (its interval wholly over the limit, its rate not kept, or its errors over the cap;
    a step still undecided shows neither, though the search does not count it as a
    pass), each step as decided, not one measured again. None without a capacity;
    (capacity, None) when nothing above it failed (a lower bound: lower_bound_reasons).
    The truth lies between them when both decisions were right
    (bench/capacity_search.py measures how often)."""
    found = record.get("capacity")
    if not found:
        return None
    above = [st["rate"] for st in record.get("steps") or ()
             if st.get("phase") in ("search", "confirm") and st.get("rate")
             and st["rate"] > found and st.get("decision") == "fail"
             and "measured again" not in (st.get("reason") or "")]
    return found, min(above, default=None)
