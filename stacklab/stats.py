"""Statistics over repetitions: bootstrap confidence intervals, Mann-Whitney U, ratios.

Pure functions, seeded, no clock: the same samples always give the same answer.
"""

from __future__ import annotations

import base64
import itertools
import math
import random
import statistics
import struct
import zlib
from dataclasses import dataclass
from typing import Callable, Sequence

from hdrh.histogram import HdrHistogram

RESAMPLES = 4000
ALPHA = 0.05
_V2_COMPRESSED_COOKIE = 0x1C849314


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def bootstrap_ci(values: Sequence[float], stat: Callable = statistics.median,
                 level: float = 0.95, seed: int = 0) -> tuple[float, float] | None:
    """Percentile bootstrap CI of `stat`; None with fewer than two values."""
    if len(values) < 2:
        return None
    rng = random.Random(seed)
    n = len(values)
    boots = sorted(stat([values[rng.randrange(n)] for _ in range(n)])
                   for _ in range(RESAMPLES))
    return _percentile_pair(boots, level)


def ratio_ci(a: Sequence[float], b: Sequence[float], level: float = 0.95,
             seed: int = 0) -> tuple[float, float] | None:
    """Bootstrap CI of median(b) / median(a), resampling each side on its own."""
    if len(a) < 2 or len(b) < 2:
        return None
    rng = random.Random(seed)
    boots = []
    for _ in range(RESAMPLES):
        ma = statistics.median([a[rng.randrange(len(a))] for _ in a])
        mb = statistics.median([b[rng.randrange(len(b))] for _ in b])
        if ma:
            boots.append(mb / ma)
    return _percentile_pair(sorted(boots), level) if boots else None


def _percentile_pair(sorted_values: list[float], level: float) -> tuple[float, float]:
    lo_q, hi_q = (1 - level) / 2, 1 - (1 - level) / 2
    last = len(sorted_values) - 1
    return (sorted_values[round(lo_q * last)], sorted_values[round(hi_q * last)])


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


@dataclass(frozen=True)
class Comparison:
    """B relative to A: ratio of medians with its CI, p-value, and a verdict that says
    plainly when there is no significant difference."""

    median_a: float | None
    median_b: float | None
    ratio: float | None
    ci: tuple[float, float] | None
    p: float | None
    significant: bool

    @property
    def verdict(self) -> str:
        if self.ratio is None:
            return "n/a"
        if not self.significant:
            return "~ no significant difference"
        return f"{(self.ratio - 1) * 100:+.1f}%"


def compare(a: Sequence[float], b: Sequence[float], alpha: float = ALPHA) -> Comparison:
    ma, mb = median(a), median(b)
    ratio = mb / ma if ma and mb is not None else None
    ci = ratio_ci(a, b)
    p = mann_whitney_p(a, b)
    significant = (p is not None and p < alpha and ci is not None
                   and not (ci[0] <= 1.0 <= ci[1]))
    return Comparison(ma, mb, ratio, ci, p, significant)


def decode_histogram(b64: str) -> HdrHistogram:
    """The engine's histogram (HdrHistogram V2, uncompressed, base64) as an HdrHistogram."""
    raw = base64.b64decode(b64)
    packed = zlib.compress(raw)
    wrapped = struct.pack(">ii", _V2_COMPRESSED_COOKIE, len(packed)) + packed
    return HdrHistogram.decode(base64.b64encode(wrapped))


def merged_percentiles(histograms: Sequence[str],
                       percentiles: Sequence[float] = (50, 90, 99, 99.9)) -> dict | None:
    """Latency percentiles of several runs from their merged histograms (never an
    average of percentiles)."""
    if not histograms:
        return None
    merged = decode_histogram(histograms[0])
    for h in histograms[1:]:
        merged.add(decode_histogram(h))
    out = {f"p{p:g}".replace(".", ""): merged.get_value_at_percentile(p) for p in percentiles}
    out["count"] = merged.get_total_count()
    out["max"] = merged.get_max_value()
    return out
