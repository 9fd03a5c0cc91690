"""A capacity experiment's searches as its runs stored them (the "capacity" part of each
run's resources, written by run/capacity.py), read once into typed records: what the
HTML report draws (capacity.py) and the text prints (capacitylines.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..analysis.analyze import Estimate, ExperimentView, TrialSummary, pooled
from ..analysis.capacity import PROFILE_SHARES, bracket
from ..store import RunRecord
from . import common_knobs, series_name

PART = "capacity"
# The shares of the capacity the search profiles, then the confirmation at the capacity.
SHARES = (*PROFILE_SHARES, 1.0)
# A profile step is at a share of the capacity when its rate is within 1 req/s or this
# much of it (the engine offers a whole number of requests per second).
SHARE_TOLERANCE = 0.02


def _need(doc: Mapping[str, Any], key: str, where: str) -> Any:
    """doc[key], or one error naming the record and the key it lacks."""
    if key not in doc:
        raise ValueError(f"{where}: its capacity part has no {key!r}")
    return doc[key]


@dataclass(frozen=True)
class Step:
    """One measured step of a search, as the record keeps it (latencies in µs)."""

    phase: str                     # probe | search | confirm | profile
    rate: float | None             # offered req/s; None for the closed-loop probe
    duration_s: float
    achieved: float
    errors: int
    p50_us: float | None
    value_us: float | None         # the SLO percentile
    low_us: float | None           # its 95% interval; None: unbounded on that side
    high_us: float | None
    decision: str | None           # pass | fail | longer; None for the probe
    reason: str
    flags: tuple[str, ...]
    cpu_us_per_request: Mapping[str, float]    # by component, over the step's window

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], percentile: float, where: str) -> "Step":
        """A step of the record. The percentile's point value is `slo_us` where the
        record has it, else the engine's p50 or p99 when the SLO is on one of those."""
        value = doc.get("slo_us")
        if value is None:
            value = doc.get({50.0: "p50_us", 99.0: "p99_us"}.get(percentile, ""))
        low, high = (doc.get("interval_us") or (None, None))
        return cls(phase=_need(doc, "phase", where), rate=_need(doc, "rate", where),
                   duration_s=doc.get("duration_s", 0.0), achieved=doc.get("achieved", 0.0),
                   errors=doc.get("errors", 0), p50_us=doc.get("p50_us"), value_us=value,
                   low_us=low, high_us=high, decision=doc.get("decision"),
                   reason=doc.get("reason", ""), flags=tuple(doc.get("flags", ())),
                   cpu_us_per_request=doc.get("cpu_us_per_request") or {})


@dataclass(frozen=True)
class Search:
    """One run's capacity search: its goal, what it found, and every step it measured."""

    repetition: int
    slo: str                       # as written: "p99<50ms"
    percentile: float
    limit_us: float
    connections: int
    max_error_rate: float          # the share of failed requests a passing step may have
    capacity: float | None         # the confirmed rate; None when none was
    searched: float | None         # the rate the search settled on (its profile's base)
    stopped: str                   # resolved | step-limit | no-pass | no-fail | …
    confirmed: bool
    steps: tuple[Step, ...]
    # the lowest rate above the capacity that failed (analysis/capacity.bracket):
    # the search puts the truth between the capacity and it; None: nothing above failed
    failed_above: float | None = None

    @classmethod
    def of(cls, run: RunRecord) -> "Search":
        doc = run.resources.part(PART)
        where = f"run {run.repetition} of trial {run.trial_id}"
        percentile = float(_need(doc, "percentile", where))
        capacity = _need(doc, "capacity", where)
        return cls(repetition=run.repetition, slo=doc.get("slo", f"p{percentile:g}"),
                   percentile=percentile, limit_us=float(_need(doc, "limit_us", where)),
                   connections=doc.get("connections", 0),
                   max_error_rate=doc.get("max_error_rate", 0.0), capacity=capacity,
                   searched=doc.get("searched", capacity),
                   stopped=doc.get("stopped", ""), confirmed=bool(doc.get("confirmed")),
                   steps=tuple(Step.from_json(s, percentile, where)
                               for s in _need(doc, "steps", where)),
                   failed_above=(bracket(doc) or (None, None))[1])

    @property
    def offered(self) -> list[Step]:
        """The open-loop steps (all but the closed-loop probe), in the order measured."""
        return [s for s in self.steps if s.phase != "probe" and s.rate is not None]

    def at(self, share: float) -> Step | None:
        """The step at `share` of the capacity: the profile step at that share of the
        rate confirmed (the last measured, where a disturbed one was
        measured again), or at 1.0 the confirmation that passed at the capacity."""
        if self.capacity is None:
            return None
        if share == 1.0:
            return next((s for s in reversed(self.steps) if s.phase == "confirm"
                         and s.decision == "pass"), None)
        base = self.capacity            # the profile is of the rate confirmed
        return next((s for s in reversed(self.steps) if s.phase == "profile"
                     and abs(s.rate - share * base) <= max(1.0, SHARE_TOLERANCE * base)),
                    None)


@dataclass(frozen=True)
class CapacityTrial:
    """One trial's capacity searches (its pooled runs that searched), drawn and tabled."""

    name: str
    summary: TrialSummary
    searches: tuple[Search, ...]

    @property
    def capacity(self) -> Estimate:
        """The capacities the searches confirmed: median, and its 95% CI (or range)."""
        return Estimate.of([s.capacity for s in self.searches if s.capacity is not None])

    @property
    def slo(self) -> Search:
        """The search whose goal titles the trial (every search of it has the same)."""
        return self.searches[0]


def capacity_trials(view: ExperimentView) -> list[CapacityTrial]:
    """The trials with capacity searches, in the view's order: [] for an experiment
    without any, whose page then has no capacity section. A trial's searches are the
    runs its figures come from (analyze.pooled: a disturbed run measured again is set
    aside), in the order they ran."""
    common = common_knobs(view.summaries)
    several_c = len({s.concurrency for s in view.summaries}) > 1
    found = []
    for s in view.summaries:
        runs = pooled([r for r in view.runs if r.trial_id == s.trial_id], view.runs)
        searches = tuple(Search.of(r) for r in sorted(runs, key=lambda r: r.repetition)
                         if r.resources.part(PART))
        if searches:
            name = series_name(s, common) + (f" c={s.concurrency}" if several_c else "")
            found.append(CapacityTrial(name, s, searches))
    return found
