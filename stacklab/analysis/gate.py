"""The CI gate: thresholds on NEW/BASE ratios (k6's thresholds, Gatling's assertions),
judged on the 95% interval of the ratio, never on the point estimate.

A threshold is a signed percent change of one metric: "rps<-5%" fails when req/s fell
by more than 5%, "p99>+10%" when p99 rose by more than 10%. The ratio and its interval
come from the t-test on the logarithms of each run's value, paired round by round when
both trials are of one experiment, else Welch's (stats.compare, what `compare` shows).
Each threshold has one of three outcomes:

- fail: the WHOLE interval lies beyond the limit (the change is shown);
- pass: the whole interval lies on the good side (such a change is ruled out);
- inconclusive: anything else: the interval reaches past the limit, there is no
  interval (fewer than 2 runs a side), or a limited side leaves only a bound that does
  not decide. A busy host is said beside the outcome, never used to widen the interval:
  the rounds' pairing cancels what hit both trials of a round.

What an inconclusive threshold does to the gate is the mode's: by default the gate is
inconclusive (ExitStatus.INCONCLUSIVE) unless a threshold failed; strict counts it as a
failure (ExitStatus.GATE). A gate that found nothing to judge is an error, never a pass.

Pure functions of stored summaries: `compare --fail-if` and `run` with `[thresholds]`
both judge here. The thresholds themselves, as a spec writes them, are the
experiment's (experiment/gate.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from ..experiment.gate import Threshold
from .analyze import (Bound, Estimate, Reach, TrialSummary, bound, capacity_bound, reach,
                      reachable, when_of)
from .stats import compare

# metric (experiment.gate.METRICS) -> each run's values of a trial, with when they ran
# (what the interval is computed from)
NONE = Estimate.of([])
VALUES: dict[str, Callable[[TrialSummary], Estimate]] = {
    "rps": lambda s: s.rps,
    "p50": lambda s: s.latency_runs_us.get("p50", NONE),
    "p99": lambda s: s.latency_runs_us.get("p99", NONE),
    "mbps": lambda s: s.mbps,
    "capacity": lambda s: s.capacity,
}
# Which way a limited or disturbed side's true value lies (analyze.bound): a held-back
# run served less than it could (throughput only higher), answered slower (latency only
# lower).
LIMITED_IS_LOW = {"rps": True, "p50": False, "p99": False, "mbps": True,
                  "capacity": True}
OUTCOMES = ("pass", "fail", "inconclusive")


def percent(ratio: float) -> str:
    """A ratio as the signed change thresholds are written in: 0.95 → "-5.0%"."""
    if ratio == float("inf"):
        return "+∞"
    return f"{(ratio - 1) * 100:+.1f}%"


def span(interval: tuple[float, float]) -> str:
    return f"{percent(interval[0])}..{percent(interval[1])}"


@dataclass(frozen=True)
class Judgement:
    """One threshold on one pair of trials: its outcome (OUTCOMES) and, unless it passed,
    `why` in words; `reason` is the code of an inconclusive one ("straddles", "few-runs",
    or the flag that left only a bound)."""

    threshold: Threshold
    base: str                         # labels of the two trials
    new: str
    ratio: float | None
    ci: tuple[float, float] | None    # the ratio's 95% interval as measured
    reach: tuple[float, float] | None  # where the true ratio can lie (ci opened by a bound)
    outcome: str
    why: str = ""
    reason: str | None = None
    interval_said: bool = False       # `why` opens with the interval it judged

    @property
    def failed(self) -> bool:
        return self.outcome == "fail"

    def what(self) -> str:
        """"p99>+10%: nginx vs apache": the threshold and the pair, as words name them."""
        return f"{self.threshold}: {self.new} vs {self.base}"

    def line(self) -> str:
        word = {"pass": "pass", "fail": "FAIL", "inconclusive": "inconclusive"}[self.outcome]
        if self.ci is None:
            change = self.why
        elif self.interval_said:
            change = f"{percent(self.ratio)}, {self.why}"
        else:
            change = (f"{percent(self.ratio)} (95% CI {span(self.ci)})"
                      + (f": {self.why}" if self.why else ""))
        return f"gate: {word} {self.what()}: {change}"


def judge(base: TrialSummary, new: TrialSummary,
          limits: Sequence[Threshold]) -> list[Judgement]:
    """Each threshold on NEW/BASE: failed when the whole 95% interval (opened by a limited
    side) is beyond it, passed when all of it is on the good side, else inconclusive."""
    r = reach(base, new, name=lambda s: s.label)
    return [judge_one(base, new, t, r) for t in limits]


def judge_one(base: TrialSummary, new: TrialSummary, t: Threshold,
              r: Reach | None) -> Judgement:
    low = LIMITED_IS_LOW[t.metric]
    ea, eb = VALUES[t.metric](base), VALUES[t.metric](new)
    c = compare(ea.values, eb.values, when=when_of(base, new, ea, eb))
    w = c if c.ci is not None and c.ratio is not None else None

    def made(outcome: str, why: str = "", reason: str | None = None,
             wide: tuple[float, float] | None = None) -> Judgement:
        return Judgement(t, base.label, new.label, w.ratio if w else None,
                         w.ci if w else None, wide, outcome, why, reason,
                         interval_said=why.startswith("95% CI"))

    if w is None:
        return made("inconclusive", "no interval: fewer than 2 runs a side", "few-runs")
    b = (capacity_bound(base, new, name=lambda s: s.label) if t.metric == "capacity" else
         bound(base, new, low, name=lambda s: s.label))
    if b is not None and b.relation == "?":
        return made("inconclusive", f"not a measurement: {b.why}", b.reason)
    lo, hi = reachable(w.ci, b, low)
    wide = (lo, hi) if (lo, hi) != w.ci else None
    interval = f"95% CI {span(w.ci)}" + (f", opened by a bound to {span(wide)}," if wide
                                          else "")
    if t.beyond(lo) and t.beyond(hi):
        return made("fail", f"{interval} lies wholly past {percent(t.limit)}"
                    + _because(b, r), wide=wide)
    if not t.beyond(lo) and not t.beyond(hi):
        return made("pass", wide=wide)
    return made("inconclusive", f"{interval} reaches past {percent(t.limit)}"
                + _because(b, r), _reason(b, w.ci, t), wide=wide)


def _because(b: Bound | None, r: Reach | None) -> str:
    """Who was limited or disturbed, in words ("" when no one was)."""
    said = ([b.why] if b else []) + ([r.why] if r else [])
    return f": {'; '.join(said)}" if said else ""


def _reason(b: Bound | None, ci: tuple[float, float], t: Threshold) -> str:
    """An inconclusive threshold's code: the measured interval itself reaches past the
    limit (straddles), else what opened it (the bound's flag)."""
    if t.beyond(ci[0]) != t.beyond(ci[1]) or b is None:
        return "straddles"
    return b.reason


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
                limits: Sequence[Threshold]) -> list[Judgement]:
    return [j for base, new in pairs for j in judge(base, new, limits)]


def overall(judged: Sequence[Judgement], strict: bool) -> str:
    """The gate's outcome: fail when a threshold failed (or, strict, was inconclusive),
    else inconclusive when one was, else pass. Nothing judged is not an outcome: the
    caller refuses it (gate_status)."""
    if any(j.outcome == "fail" for j in judged):
        return "fail"
    if any(j.outcome == "inconclusive" for j in judged):
        return "fail" if strict else "inconclusive"
    return "pass"
