"""A latency goal as an experiment file and the command line write it ("p99<50ms"), and
the share of failed requests a capacity step may have ("0.1%"): the experiment's words,
read here; what a step measured is judged against them in analysis/capacity.py."""

from __future__ import annotations

import re
from dataclasses import dataclass

_UNITS_US = {"us": 1, "µs": 1, "ms": 1_000, "s": 1_000_000}
_SLO = re.compile(r"p(\d+(?:\.\d+)?)\s*<\s*(\d+(?:\.\d+)?)\s*(us|µs|ms|s)")
_RATE = re.compile(r"(\d+(?:\.\d+)?)\s*%")


@dataclass(frozen=True)
class Slo:
    """A latency goal: the `percentile` (50..99.99) of latency stays under `limit_us`."""

    percentile: float
    limit_us: float


def parse_slo(text: str) -> Slo:
    """"p99<50ms" → Slo(99.0, 50000). Percentiles p50..p99.99, units us, µs, ms, s."""
    expected = 'expected pNN<LIMIT with a unit, e.g. "p99<50ms" (p50..p99.99; us, ms, s)'
    m = _SLO.fullmatch(text.strip())
    if not m:
        raise ValueError(f"SLO {text!r}: {expected}")
    percentile, limit = float(m.group(1)), float(m.group(2))
    if not 50 <= percentile <= 99.99:
        raise ValueError(f"SLO {text!r}: percentile p{m.group(1)} is out of range; "
                         f"{expected}")
    if limit <= 0:
        raise ValueError(f"SLO {text!r}: the limit must be above zero; {expected}")
    return Slo(percentile=percentile, limit_us=limit * _UNITS_US[m.group(3)])


def parse_error_rate(text: str) -> float:
    """"0.1%" → 0.001: the share of failed requests a passing step may have (0..100%)."""
    m = _RATE.fullmatch(text.strip())
    if not m or float(m.group(1)) > 100:
        raise ValueError(f"error rate {text!r}: expected a percentage from 0% to 100%, "
                         'e.g. "0.1%"')
    return float(m.group(1)) / 100
