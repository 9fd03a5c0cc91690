"""What a CI gate asks: thresholds on NEW/BASE ratios, as an experiment's
`[thresholds]` and `compare --fail-if` write them ("rps<-5%", "p99>+10%").

This is the spec's half of the gate: the words a threshold is written in and the typed
Gate they are read into. Judging them against measured trials is the analysis's half
(analysis/gate.py), which reads these types; the experiment reads nothing of the
analysis.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# The metrics a threshold may be on; analysis/gate.py says how each is read of a trial.
METRICS = ("rps", "p50", "p99", "mbps", "capacity")
# What `[thresholds]` may hold besides the limits.
KEYS = (*METRICS, "strict", "baseline")
_LIMIT = re.compile(r"^\s*([<>])\s*([+-]?\d+(?:\.\d+)?)\s*%\s*$")
_THRESHOLD = re.compile(r"^\s*([A-Za-z0-9]+)\s*(.*)$", re.S)


@dataclass(frozen=True)
class Threshold:
    metric: str        # one of METRICS
    op: str            # "<": fail below the limit; ">": fail above it
    percent: float     # signed change: -5.0 is a 5% drop

    @property
    def limit(self) -> float:
        """The ratio NEW/BASE the threshold is about: -5% is 0.95."""
        return 1 + self.percent / 100

    def beyond(self, ratio: float) -> bool:
        return ratio < self.limit if self.op == "<" else ratio > self.limit

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.percent:+g}%"


def parse_limit(metric: str, text: Any, named: bool = False) -> Threshold:
    """`metric` with "<-5%" or ">+10%"; ValueError says what is wrong (`named`: the
    threshold was written with its metric, "rps<-5%", and is quoted so)."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r} (known: {', '.join(METRICS)})")
    m = _LIMIT.match(text) if isinstance(text, str) else None
    if not m:
        raise ValueError('expected "<" or ">" and a signed percent change, such as '
                         '"<-5%" or ">+10%"')
    op, number = m.group(1), m.group(2)
    percent = float(number)
    if percent and number[0] not in "+-":
        raise ValueError(_unsigned(metric, op, number, named))
    if percent <= -100:
        raise ValueError("a change must be above -100% (a ratio above 0)")
    return Threshold(metric, op, percent)


def _unsigned(metric: str, op: str, number: str, named: bool) -> str:
    """"rps<5%" has two readings, a drop and a rise: both said, neither guessed."""
    write = (lambda sign: f'"{metric}{op}{sign}{number}%"') if named else (
        lambda sign: f'"{op}{sign}{number}%"')
    if op == "<":
        readings = (f"{write('-')} fails on a drop of more than {number}%, {write('+')} "
                    f"fails unless {metric} rose by {number}% or more")
    else:
        readings = (f"{write('+')} fails on a rise of more than {number}%, {write('-')} "
                    f"fails unless {metric} dropped by {number}% or more")
    return f"{number}% has no sign: {readings}; write the one meant"


def parse_threshold(text: str) -> Threshold:
    """"rps<-5%" → Threshold; ValueError says what is wrong."""
    m = _THRESHOLD.match(text)
    if not m or not m.group(2):
        raise ValueError('expected a metric, "<" or ">" and a signed percent change, '
                         'such as "rps<-5%" or "p99>+10%"')
    return parse_limit(m.group(1), m.group(2), named=True)


@dataclass(frozen=True)
class Gate:
    """What `[thresholds]` asks: the limits, the mode, and the baseline variant the
    others are judged against (axis or knob key -> value, as in matrix.exclude)."""

    limits: tuple[Threshold, ...]
    strict: bool = False
    baseline: tuple[tuple[str, Any], ...] = ()
