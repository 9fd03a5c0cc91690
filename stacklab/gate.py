"""The CI gate: thresholds on NEW/BASE ratios (k6's thresholds, Gatling's assertions),
judged on the 95% interval of the ratio, never on the point estimate.

A threshold is a signed percent change of one metric: "rps<-5%" fails when req/s fell
by more than 5%, "p99>+10%" when p99 rose by more than 10%. The ratio and its interval
come from Welch's t-test on the logarithms of each run's value (stats.welch_log, what
`compare` shows). By default a threshold fails only when the WHOLE interval lies beyond
it (the change is shown); strict mode fails when ANY of it does (no such change is
ruled out). Without an interval (fewer than 2 runs a side) nothing is shown and nothing
ruled out: default mode passes, strict mode fails.

Pure functions of stored summaries: `compare --fail-if` and `run` with `[thresholds]`
both judge here and exit with ExitStatus.GATE when a threshold fails.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .analyze import TrialSummary
from .stats import welch_log

# metric -> each run's values of a trial (what the interval is computed from)
METRICS: dict[str, Callable[[TrialSummary], Sequence[float]]] = {
    "rps": lambda s: s.rps.values,
    "p50": lambda s: s.latency_runs_us["p50"].values if "p50" in s.latency_runs_us else (),
    "p99": lambda s: s.latency_runs_us["p99"].values if "p99" in s.latency_runs_us else (),
    "mbps": lambda s: s.mbps.values,
}
_LIMIT = re.compile(r"^\s*([<>])\s*([+-]?\d+(?:\.\d+)?)\s*%\s*$")
_THRESHOLD = re.compile(r"^\s*([A-Za-z0-9]+)\s*(.*)$", re.S)
KEYS = (*METRICS, "strict", "baseline")


@dataclass(frozen=True)
class Threshold:
    metric: str        # a key of METRICS
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


def parse_limit(metric: str, text: Any) -> Threshold:
    """`metric` with "<-5%" or ">+10%"; ValueError says what is wrong."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r} (known: {', '.join(METRICS)})")
    m = _LIMIT.match(text) if isinstance(text, str) else None
    if not m:
        raise ValueError('expected "<" or ">" and a signed percent change, such as '
                         '"<-5%" or ">+10%"')
    percent = float(m.group(2))
    if percent <= -100:
        raise ValueError("a change must be above -100% (a ratio above 0)")
    return Threshold(metric, m.group(1), percent)


def parse_threshold(text: str) -> Threshold:
    """"rps<-5%" → Threshold; ValueError says what is wrong."""
    m = _THRESHOLD.match(text)
    if not m or not m.group(2):
        raise ValueError('expected a metric, "<" or ">" and a signed percent change, '
                         'such as "rps<-5%" or "p99>+10%"')
    return parse_limit(m.group(1), m.group(2))


@dataclass(frozen=True)
class Gate:
    """What `[thresholds]` asks: the limits, the mode, and the baseline variant the
    others are judged against (axis or knob key -> value, as in matrix.exclude)."""

    limits: tuple[Threshold, ...]
    strict: bool = False
    baseline: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class Judgement:
    threshold: Threshold
    base: str                         # labels of the two trials
    new: str
    ratio: float | None
    ci: tuple[float, float] | None
    failed: bool

    def line(self) -> str:
        verdict = "FAIL" if self.failed else "pass"
        if self.ci is None:
            change = "no interval (fewer than 2 runs a side)"
        else:
            lo, hi = ((x - 1) * 100 for x in self.ci)
            change = f"{(self.ratio - 1) * 100:+.1f}% (95% CI {lo:+.1f}% .. {hi:+.1f}%)"
        return f"gate: {verdict} {self.threshold}: {self.new} vs {self.base}: {change}"


def judge(base: TrialSummary, new: TrialSummary, limits: Sequence[Threshold],
          strict: bool = False) -> list[Judgement]:
    """Each threshold on NEW/BASE: failed when the whole 95% interval is beyond it,
    or, `strict`, when any of it is."""
    out = []
    for t in limits:
        w = welch_log(METRICS[t.metric](base), METRICS[t.metric](new))
        if w is None:
            out.append(Judgement(t, base.label, new.label, None, None, strict))
            continue
        ends = [t.beyond(x) for x in w.ci]
        out.append(Judgement(t, base.label, new.label, w.ratio, w.ci,
                             any(ends) if strict else all(ends)))
    return out


def matches(s: TrialSummary, selector: Sequence[tuple[str, Any]]) -> bool:
    """The trial is the variant `selector` names (stack, workload, concurrency, knobs)."""
    coords = {"stack": s.stack, "workload": s.workload, "concurrency": s.concurrency,
              **s.knobs}
    return all(k in coords and coords[k] == v for k, v in selector)


def baseline_pairs(summaries: Sequence[TrialSummary], selector: Sequence[tuple[str, Any]]
                   ) -> list[tuple[TrialSummary, TrialSummary]]:
    """(baseline, other) for every trial that is not the baseline variant, against the
    baseline trial equal to it in everything the selector does not name: the same
    workload and concurrency, and the same value of every knob both set."""
    named = {k for k, _ in selector}
    bases = [s for s in summaries if matches(s, selector)]

    def same_point(a: TrialSummary, b: TrialSummary) -> bool:
        return all(getattr(a, k) == getattr(b, k) for k in ("stack", "workload",
                                                            "concurrency") if k not in named
                   ) and all(a.knobs[k] == b.knobs[k] for k in set(a.knobs) & set(b.knobs)
                             if k not in named)

    return [(b, s) for s in summaries if not matches(s, selector)
            for b in bases if same_point(b, s)]


def judge_pairs(pairs: Sequence[tuple[TrialSummary, TrialSummary]],
                limits: Sequence[Threshold], strict: bool) -> list[Judgement]:
    return [j for base, new in pairs for j in judge(base, new, limits, strict)]
