"""Statistics over repetitions: a median's interval from order statistics, bootstrap
confidence intervals, the comparison of two
samples (the t-test on logarithms, paired by round or Welch's), Mann-Whitney U, merged latency percentiles.

Pure functions, seeded, no clock: the same samples always give the same answer.
"""

from __future__ import annotations

import base64
import functools
import itertools
import math
import statistics
import struct
import zlib
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from hdrh.histogram import HdrHistogram

RESAMPLES = 4000
ALPHA = 0.05
_V2_COOKIE = 0x1C849313             # uncompressed V2: engine schema 1 (stored runs)
_V2_COMPRESSED_COOKIE = 0x1C849314  # the standard compressed V2: engine schema 2 and later


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def median_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """A median's distribution-free interval from order statistics: [x(k), x(n+1-k)] of
    the sorted values, k the largest rank whose interval covers the true median with
    probability at least `level` (1 - 2·P(Binomial(n, 1/2) < k)); under 6 values no rank
    reaches 95% and the interval is [min, max] (its coverage: median_ci_level). None with
    fewer than two values. The percentile bootstrap it replaces covered the true median
    in 88-94% of lognormal samples at 6-8 values while called a 95% CI."""
    if len(values) < 2:
        return None
    ordered = sorted(values)
    k = _median_rank(len(ordered), level)
    return float(ordered[k - 1]), float(ordered[len(ordered) - k])


def median_ci_level(n: int, level: float = 0.95) -> float | None:
    """How often median_ci's interval over n values covers the true median (any
    continuous distribution); None under two values."""
    if n < 2:
        return None
    return _coverage(n, _median_rank(n, level))


@functools.lru_cache(maxsize=256)
def _median_rank(n: int, level: float) -> int:
    k = 1
    while k + 1 <= (n + 1) // 2 and _coverage(n, k + 1) >= level:
        k += 1
    return k


def _coverage(n: int, k: int) -> float:
    """P(x(k) ≤ true median ≤ x(n+1-k)) = 1 - 2·P(Binomial(n, 1/2) ≤ k - 1)."""
    return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n


def bootstrap_ci(values: Sequence[float], stat: Callable = statistics.median,
                 level: float = 0.95, seed: int = 0) -> tuple[float, float] | None:
    """Percentile bootstrap CI of `stat`; None with fewer than two values.

    The resamples are drawn from the values sorted (so the interval depends on the
    values, not on the order the runs came in), all at once, by numpy's generator seeded
    with `seed`: the same values always give the same interval. For the median the
    draws are positions in the sorted values, and a resample's median is the value at
    its middle position (the mean of the two middle ones for an even count, as
    statistics.median): those positions depend only on (n, seed), so they are computed
    once per sample size and each interval costs a sort and an index. Another `stat`
    is applied to each resample in turn."""
    if len(values) < 2:
        return None
    ordered = np.sort(np.asarray(values, dtype=float))
    n = len(ordered)
    if stat is statistics.median:
        low, high = _resample_median_positions(n, seed)
        boots = (ordered[low] + ordered[high]) / 2 if n % 2 == 0 else ordered[low]
    else:
        boots = np.fromiter((stat(row.tolist()) for row in ordered[_draws(n, seed)]),
                            float, RESAMPLES)
    boots.sort()        # already sorted for an odd n: numpy's sort is quick on that
    return _percentile_pair(boots, level)


def _draws(n: int, seed: int) -> np.ndarray:
    """RESAMPLES rows of n positions drawn with replacement from range(n)."""
    return np.random.default_rng(seed).integers(0, n, size=(RESAMPLES, n))


@functools.lru_cache(maxsize=256)
def _resample_median_positions(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Each resample's two middle positions (equal for an odd n) in sorted values, the
    resamples ordered by them (for an odd n that orders their medians too)."""
    rows = np.sort(_draws(n, seed), axis=1)
    low, high = rows[:, (n - 1) // 2], rows[:, n // 2]
    order = np.lexsort((high, low))
    low, high = low[order], high[order]
    low.flags.writeable = high.flags.writeable = False   # shared by every call
    return low, high


def _percentile_pair(sorted_values: np.ndarray, level: float) -> tuple[float, float]:
    lo_q, hi_q = (1 - level) / 2, 1 - (1 - level) / 2
    last = len(sorted_values) - 1
    return (float(sorted_values[round(lo_q * last)]),
            float(sorted_values[round(hi_q * last)]))


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Two-sided p-value of the Mann-Whitney U test: exact (all splits) for small
    samples, normal approximation with tie correction for large ones."""
    n, m = len(a), len(b)
    if n == 0 or m == 0:
        return None
    pooled = list(a) + list(b)
    ranks = _ranks(pooled)
    u_obs = _u(ranks[:n], n)
    mean_u = n * m / 2
    if math.comb(n + m, n) <= 50_000:
        total = extreme = 0
        for idx in itertools.combinations(range(n + m), n):
            u = _u([ranks[i] for i in idx], n)
            total += 1
            if abs(u - mean_u) >= abs(u_obs - mean_u) - 1e-9:
                extreme += 1
        return extreme / total
    ties = _tie_term(pooled)
    var = n * m / 12 * ((n + m + 1) - ties / ((n + m) * (n + m - 1)))
    if var <= 0:
        return 1.0
    z = (abs(u_obs - mean_u) - 0.5) / math.sqrt(var)
    return min(1.0, math.erfc(z / math.sqrt(2)))


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _u(ranks_of_a: list[float], n: int) -> float:
    return sum(ranks_of_a) - n * (n + 1) / 2


def _tie_term(values: list[float]) -> float:
    counts: dict[float, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return sum(t ** 3 - t for t in counts.values())


RANK_TEST_MIN_N = 5   # Mann-Whitney is reported (never decisive) from 5 runs a side


@dataclass(frozen=True)
class Welch:
    """Welch's t-test on log(values): one procedure gives the ratio of geometric means,
    its confidence interval and the p-value, so p < alpha exactly when the interval
    excludes 1."""

    ratio: float                  # geomean(b) / geomean(a)
    ci: tuple[float, float]       # at level 1 - alpha
    p: float
    df: float | None              # Welch-Satterthwaite; None when both sides are constant


def welch_log(a: Sequence[float], b: Sequence[float], alpha: float = ALPHA) -> Welch | None:
    """None with fewer than two values a side or a value that is not positive."""
    if len(a) < 2 or len(b) < 2 or min(a) <= 0 or min(b) <= 0:
        return None
    la, lb = [math.log(x) for x in a], [math.log(x) for x in b]
    diff = statistics.fmean(lb) - statistics.fmean(la)
    ea, eb = statistics.variance(la) / len(la), statistics.variance(lb) / len(lb)
    if ea + eb == 0:
        # identical values on each side: the difference is exact, no noise to test against
        return Welch(math.exp(diff), (math.exp(diff), math.exp(diff)),
                     1.0 if diff == 0 else 0.0, None)
    # Student's t CDF and quantile; scipy is imported here, where it is needed, so that
    # commands that compare nothing (--help, stacks, list) start without it.
    from scipy.special import stdtr, stdtrit
    se = math.sqrt(ea + eb)
    df = (ea + eb) ** 2 / (ea ** 2 / (len(la) - 1) + eb ** 2 / (len(lb) - 1))
    q = float(stdtrit(df, 1 - alpha / 2))
    p = float(2 * stdtr(df, -abs(diff) / se))
    return Welch(math.exp(diff), (math.exp(diff - q * se), math.exp(diff + q * se)), p, df)


@dataclass(frozen=True)
class Comparison:
    """B relative to A: the ratio of geometric means with its CI and p-value from the
    t-test on logarithms (paired by round where the runs allow, else Welch's), and a verdict that says plainly when there is no significant
    difference. The medians are for display; `p_rank` (Mann-Whitney, both sides ≥ 5
    runs) is secondary information and never decides the verdict."""

    median_a: float | None
    median_b: float | None
    ratio: float | None           # geomean(b) / geomean(a): what `ci` and `p` are about
    ci: tuple[float, float] | None
    p: float | None
    significant: bool
    n: tuple[int, int] = (0, 0)
    p_rank: float | None = None
    paired: int = 0               # pairs of runs the test paired (0: Welch's, unpaired)
    alpha: float = ALPHA          # `ci` is at level 1 - alpha (below 0.05: stats.look_alpha)

    @property
    def verdict(self) -> str:
        if self.ratio is None:
            return "n/a"
        if self.p is None:
            return "no verdict: fewer than 2 runs a side"
        if not self.significant:
            return "~ no significant difference"
        return signed_change(self.ratio)


def signed_change(ratio: float) -> str:
    """B against A: a change below 3× as a percentage (1.2 → "+20.0%", 0.06 → "-94.0%"),
    a larger one as a multiple (349.4 → "349×", 1481.7 → "1,482×"), not as "+34840.0%"."""
    return multiple(ratio) if ratio >= 3 else f"{(ratio - 1) * 100:+.1f}%"


def ratio_text(x: float, decimals: int = 2) -> str:
    """A ratio in the one form every command writes it: `decimals` decimals below 10, one
    below 100, none above with the thousands grouped (1,482); two significant digits
    below 0.1 (0.0072, not 0.01: OPcache off at -99% read "0.01–0.01×"); never an
    exponent at either end."""
    if x >= 99.95:
        return f"{x:,.0f}"
    if x >= 9.995:
        return f"{x:.{min(decimals, 1)}f}"
    if x >= 0.095 or x <= 0:
        return f"{x:.{decimals}f}"
    return f"{x:.{1 - math.floor(math.log10(x))}f}".rstrip("0")


def multiple(ratio: float) -> str:
    """`ratio_text` in words rather than a column: without the zeros that end its
    decimals ("2×", "0.5×", "34.9×", "1,482×")."""
    text = ratio_text(ratio)
    return (text.rstrip("0").rstrip(".") if "." in text else text) + "×"


PAIRED_MIN = 2     # pairs of runs that ran next to each other: paired from here


def pairs(a: Sequence[float], b: Sequence[float], when_a: Sequence, when_b: Sequence
          ) -> list[tuple[float, float]]:
    """(A's value, B's value) of each two runs of A and B that ran next to each other, in
    the order they ran: both sides' runs are put in the order they were measured
    (`when`: a sortable key per value, its run's start then its repetition) and each
    run of A next to a run of B is paired with it, earliest first. The rounds of an
    experiment hold every trial once, so A's and B's runs of a round are neighbours
    whatever the round's order; a run measured again right after a disturbed one takes
    its place, and one left without a neighbour is left out."""
    if len(when_a) != len(a) or len(when_b) != len(b):
        return []
    runs = sorted([(w, 0, v) for w, v in zip(when_a, a)] +
                  [(w, 1, v) for w, v in zip(when_b, b)], key=lambda x: (x[0], x[1]))
    found, i = [], 0
    while i + 1 < len(runs):
        (_, side, v), (_, other, u) = runs[i], runs[i + 1]
        if side != other:
            found.append((v, u) if side == 0 else (u, v))
            i += 2
        else:
            i += 1
    return found


def paired_log(pairs_ab: Sequence[tuple[float, float]], alpha: float = ALPHA) -> Welch | None:
    """The paired t-test on log(B/A) of each round: the ratio of geometric means over the
    rounds, its (1 - alpha) interval and p-value, df = rounds - 1. A slow-down that hit
    both runs of a round alike cancels in its log-ratio; what is left is each round's
    own noise, which the interval carries. None with fewer than PAIRED_MIN rounds or a
    value that is not positive."""
    if len(pairs_ab) < PAIRED_MIN or min(min(p) for p in pairs_ab) <= 0:
        return None
    d = [math.log(b) - math.log(a) for a, b in pairs_ab]
    mean = statistics.fmean(d)
    var = statistics.variance(d)
    if var == 0:
        return Welch(math.exp(mean), (math.exp(mean), math.exp(mean)),
                     1.0 if mean == 0 else 0.0, None)
    from scipy.special import stdtr, stdtrit
    se = math.sqrt(var / len(d))
    df = len(d) - 1
    q = float(stdtrit(df, 1 - alpha / 2))
    p = float(2 * stdtr(df, -abs(mean) / se))
    return Welch(math.exp(mean), (math.exp(mean - q * se), math.exp(mean + q * se)), p, df)


def compare(a: Sequence[float], b: Sequence[float], alpha: float = ALPHA,
            when: tuple[Sequence, Sequence] | None = None) -> Comparison:
    """The decision rule: B differs from A when the t-test on log(values) gives p < alpha,
    which is exactly when the (1 - alpha) CI of the ratio excludes 1. With when each
    value's run ran (`when`: A's and B's keys) and at least PAIRED_MIN pairs of runs that
    ran next to each other (pairs), the test is paired (paired_log: what the host did
    to both cancels); otherwise Welch's, on the two samples."""
    ma, mb = median(a), median(b)
    n = (len(a), len(b))
    p_rank = mann_whitney_p(a, b) if min(n) >= RANK_TEST_MIN_N else None
    matched = pairs(a, b, *when) if when else []
    if len(matched) >= PAIRED_MIN and (w := paired_log(matched, alpha)) is not None:
        return Comparison(ma, mb, w.ratio, w.ci, w.p, w.p < alpha, n, p_rank, len(matched),
                          alpha)
    w = welch_log(a, b, alpha)
    if w is None:
        positive = bool(a) and bool(b) and min(a) > 0 and min(b) > 0
        ratio = math.exp(statistics.fmean(map(math.log, b)) - statistics.fmean(
            map(math.log, a))) if positive else None
        return Comparison(ma, mb, ratio, None, None, False, n, p_rank, alpha=alpha)
    return Comparison(ma, mb, w.ratio, w.ci, w.p, w.p < alpha, n, p_rank, alpha=alpha)


SEQUENTIAL_SIMS = 40_000


@functools.lru_cache(maxsize=64)
def look_alpha(first: int, last: int, alpha: float = ALPHA) -> float:
    """The level each look of a sequential experiment judges at, so that the chance that
    any look's interval misses the truth stays `alpha` over all its looks: an experiment
    that adds rounds until its comparisons are decided looks at `first`, `first + 1` …
    `last` rounds, and judging each look at `alpha` would err more often the more it
    looked (optional stopping). Pocock's rule, one level for every look, found for the
    paired t-interval by simulating normal log-ratios (seeded: always the same level);
    `alpha` itself when there is one look. Its error under disturbed, correlated runs is
    measured, not assumed (tests/test_paired.py, bench/calibration.py)."""
    if last <= first:
        return alpha
    from scipy.special import stdtrit
    draws = np.random.default_rng(1).standard_normal((SEQUENTIAL_SIMS, last))
    n = np.arange(first, last + 1)
    sums, squares = np.cumsum(draws, 1)[:, n - 1], np.cumsum(draws ** 2, 1)[:, n - 1]
    sd = np.sqrt((squares - sums ** 2 / n) / (n - 1))
    t = np.abs(sums / n) / (sd / np.sqrt(n))

    def errs(level: float) -> float:
        return float(np.mean((t > stdtrit(n - 1, 1 - level / 2)).any(axis=1)))

    low, high = alpha / (last - first + 1), alpha     # Bonferroni errs less, alpha more
    for _ in range(30):
        mid = (low + high) / 2
        low, high = (mid, high) if errs(mid) <= alpha else (low, mid)
    return low


def decode_histogram(b64: str) -> HdrHistogram:
    """The engine's histogram (HdrHistogram V2, base64) as an HdrHistogram. Schema 2
    reports hold the standard compressed form, which hdrh decodes as it is; schema 1
    reports (stored runs) hold the uncompressed form hdrh refuses, so it is wrapped in
    the compressed one first. The cookie (first 4 bytes) says which."""
    raw = base64.b64decode(b64)
    cookie = int.from_bytes(raw[:4], "big")
    if cookie == _V2_COMPRESSED_COOKIE:
        return HdrHistogram.decode(b64)
    if cookie != _V2_COOKIE:
        raise ValueError(f"not an HdrHistogram V2 encoding (cookie {cookie:#010x})")
    packed = zlib.compress(raw)
    wrapped = struct.pack(">ii", _V2_COMPRESSED_COOKIE, len(packed)) + packed
    return HdrHistogram.decode(base64.b64encode(wrapped))


def tail_time_share(histogram: str, share: float) -> float:
    """The fraction of all recorded time that the slowest `share` of values hold (0.01:
    the slowest 1% of requests). A closed loop whose clients take turns in an accept
    queue puts nearly all its time there while its percentiles stay small."""
    h = decode_histogram(histogram)
    steps = sorted(((it.value_iterated_to, it.count_added_in_this_iter_step)
                    for it in h.get_recorded_iterator()), reverse=True)
    total = sum(v * n for v, n in steps)
    left, top = h.get_total_count() * share, 0.0
    for value, count in steps:
        if left <= 0:
            break
        take = min(count, left)
        top, left = top + take * value, left - take
    return top / total if total else 0.0


def value_at_percentile(h: HdrHistogram, percentile: float) -> int:
    """The engine's rank rule (its README, "Percentiles"): nearest rank, the value at
    1-based rank max(1, ⌈q·n⌉) of the n values sorted ascending, never interpolated,
    reported as the highest value equivalent to it in the histogram. hdrh's own
    get_value_at_percentile rounds the rank instead, which can be one rank off."""
    return values_at_percentiles(h, [percentile])[0]


def values_at_percentiles(h: HdrHistogram, percentiles: Sequence[float]) -> list[int]:
    """value_at_percentile of each percentile, from one cumulative sum of the counts
    (numpy over hdrh's counts array, read as get_count_at_index reads it: a decoded
    histogram's counts past its payload's length are zero)."""
    n = h.get_total_count()
    if n == 0:
        return [0] * len(percentiles)
    used = min(h.counts_len, h.encoder.payload.counts_len)
    seen = np.cumsum(np.ctypeslib.as_array(h.counts)[:used], dtype=np.int64)
    out = []
    for percentile in percentiles:
        rank = max(1, math.ceil(round(percentile / 100 * n, 9)))
        index = int(np.searchsorted(seen, rank, side="left"))
        out.append(h.get_highest_equivalent_value(h.get_value_from_index(index))
                   if index < used else h.get_max_value())
    return out


def merged_percentiles(histograms: Sequence[str],
                       percentiles: Sequence[float] = (50, 90, 99, 99.9)) -> dict | None:
    """Latency percentiles of several runs from their merged histograms (never an
    average of percentiles)."""
    if not histograms:
        return None
    merged = decode_histogram(histograms[0])
    for h in histograms[1:]:
        merged.add(decode_histogram(h))
    out = {f"p{p:g}".replace(".", ""): v
           for p, v in zip(percentiles, values_at_percentiles(merged, percentiles))}
    out["count"] = merged.get_total_count()
    out["max"] = merged.get_max_value()
    return out
