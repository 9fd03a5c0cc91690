"""Analyze: per-trial statistics over repetitions, and comparisons between trials.

Throughput and resource figures: median over repetitions with its distribution-free
interval from order statistics (stats.median_ci: ≥ 95% from 6 repetitions).
Latency percentiles: from the runs' merged HdrHistograms, never averaged.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from .capacity import CAPACITY_LIMITS, lower_bound_reasons
from .flags import (BOUNDING, DISTURBED, INVALIDATING, PRESSURE, LATENCY_DISTORTING, disturbance_factor,
                    dispersion, few_requests, history_dependent, run_flags)
from .stats import (ALPHA, Comparison, compare, look_alpha, median, median_ci, median_ci_level,
                    merged_percentiles, multiple, ratio_text)
from ..store import ExperimentStatus, Outcome, RunRecord, Store
from ..measure.verify import Verdict
from ..experiment.spec import AUTO_FIRST
from ..stacks import known_slow, starve_causes


# "same" only when the whole interval of the ratio lies within ±MARGIN of 1 (an
# equivalence test at the interval's level): an interval that merely holds 1, as
# 0.60–1.07× does with 2 runs a side, cannot tell a 20% drop from none.
MARGIN = 0.05   # the default; an experiment sets its own (experiment.margin)


@dataclass(frozen=True)
class Estimate:
    median: float | None
    ci: tuple[float, float] | None
    values: tuple[float, ...]
    # when each value's run ran (its start, then its repetition: the order the runs were
    # measured in), so that a comparison pairs the runs that ran next to each other;
    # () when not known
    when: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, values: list[float], when: Sequence[tuple[str, int]] = ()) -> "Estimate":
        return cls(median(values), median_ci(values), tuple(values),
                   tuple(tuple(w) for w in when))

    @classmethod
    def per_run(cls, runs: list[RunRecord], value: Callable[[RunRecord], float | None]
                ) -> "Estimate":
        """One value a run (None: the run has none), each with its round."""
        got = [(v, (r.started_at, r.repetition)) for r in runs
               if (v := value(r)) is not None]
        return cls.of([v for v, _ in got], [k for _, k in got])

    @property
    def ci_level(self) -> float | None:
        """The interval's real confidence (stats.median_ci_level): at least 95% from 6
        values on; under 6 the interval is [min, max], which covers the true median with
        probability 1 - 2^(1-n) only (75% at n = 3, 94% at n = 5), so that is what it is
        called."""
        return median_ci_level(len(self.values))

    @property
    def is_range(self) -> bool:
        """Fewer than 6 values: the interval is their [min, max], to be called a range,
        never a 95% CI."""
        return 2 <= len(self.values) < 6

    @property
    def mean(self) -> float | None:
        return sum(self.values) / len(self.values) if self.values else None

    @property
    def half_width(self) -> float | None:
        """CI half-width relative to the median (0.03 = ±3%)."""
        if not self.ci or not self.median:
            return None
        return (self.ci[1] - self.ci[0]) / 2 / self.median


@dataclass(frozen=True, kw_only=True)
class TrialSummary:
    trial_id: str
    label: str
    stack: str
    workload: str
    concurrency: int
    knobs: dict[str, Any]
    runs_ok: int
    runs_failed: int                      # failed: a server or the engine broke
    rps: Estimate
    mbps: Estimate                        # transfer rate, MB/s on the wire
    latency_us: dict | None               # pooled p50/p90/p99/p999/max from merged histograms
    latency_runs_us: dict[str, Estimate]  # p50/p99 per run: their spread over repetitions
    cpu_us_per_request: dict[str, Estimate]   # component -> server CPU per request
    # every server component's CPU per request together, a value a run
    server_cpu: Estimate = field(default_factory=lambda: Estimate.of([]))
    engine_cpu_us_per_request: Estimate
    rss_mib_peak: dict[str, Estimate]         # component -> peak RSS
    pss_mib_per_worker: dict[str, Estimate]   # component -> PSS of one worker process
    errors: int                           # failed requests over all ok runs
    flagged: tuple[str, ...]              # run flags seen (generator-bound, …)
    reasons: tuple[str, ...]              # "failed: why" / "invalid: which check FAILed"
    verdicts: tuple[Verdict, ...] = ()    # of the latest run
    flag_details: tuple[tuple[str, str], ...] = ()   # (flag, the numbers that raised it)
    idle_pss_mib_per_worker: dict[str, Estimate] = field(default_factory=dict)  # before load
    runs_invalid: int = 0                 # a verification FAILed, before or after the load
    tls: dict | None = None               # what the engine negotiated, over the ok runs
    # HTTP/2 asked (load.protocol): what the ok runs' responses came in, and their streams
    # per connection (_protocol); None: HTTP/1.1
    protocol: dict | None = None
    # A load from several agents (load.agents), over the ok runs: how many, how far apart
    # they started at most, the time spent beside each load, and each agent's figures
    # (_agents); None: one engine
    agents: dict | None = None
    # front layer -> {"hit_ratio": Estimate | None, "spread": {replica: median share}}
    layers: dict[str, dict] = field(default_factory=dict)
    # The lab's layers under the stack where they are not the default: "net" (mode, link,
    # measured rate and RTT, sysctls), "fs" (type, options, cold cache), "machine".
    conditions: dict[str, dict] = field(default_factory=dict)
    # A page's first and repeat view by a caching client (pageview.py), per run:
    # first_/repeat_ requests (over the wire) and bytes (received); {} without one.
    page_views: dict[str, Estimate] = field(default_factory=dict)
    # The largest slow-down the work measured outside the lab could have caused one of
    # the pooled runs (flags.disturbance_factor): 1.0 when none ran on a busy host.
    disturbance: float = 1.0
    # What the busy host measurably did to it: the median req/s of its runs on a busy
    # host over that of its others (None unless it has both), the figure its notes give
    # instead of the worst case above, which is no measurement of what happened
    busy_ratio: float | None = None
    # Runs disturbed by the host (flags.DISTURBED) and measured again: stored with their
    # flags, not pooled while enough undisturbed runs of the trial remain.
    runs_set_aside: int = 0
    # A capacity experiment's ([capacity]): each run's confirmed capacity, req/s offered
    # under the SLO (a search that found none gives no value)
    capacity: Estimate = field(default_factory=lambda: Estimate.of([]))
    # Why its capacity is only a lower bound (capacity.CAPACITY_LIMITS codes, over its
    # runs): compared as "≥" (capacity_bound)
    capacity_limits: tuple[str, ...] = ()
    # The experiment its runs belong to, as "<database>#<id>" (ids are per database): two
    # trials of one experiment ran in the same rounds, so their comparison is paired
    # (compare_trials); None: not known
    experiment: str | None = None
    # How sure its comparisons are: the level each judges at (below ALPHA when the
    # experiment added rounds until its comparisons were decided: sure_of) and the
    # margin within which two trials are the same (experiment.margin)
    alpha: float = ALPHA
    margin: float = MARGIN

    @property
    def latency_distorted(self) -> bool:
        """Its percentiles describe only part of the clients (starved, Little's law)."""
        return any(f in LATENCY_DISTORTING for f in self.flagged)

    @property
    def rps_median(self) -> float | None:
        return self.rps.median

    @property
    def p50_us(self) -> float | None:
        return self.latency_us["p50"] if self.latency_us else None

    @property
    def p99_us(self) -> float | None:
        return self.latency_us["p99"] if self.latency_us else None

    @property
    def server_cpu_us(self) -> float | None:
        """All server components' CPU per request (median over repetitions)."""
        return self.server_cpu.median

    @property
    def fixed_rate(self) -> bool:
        """Its load came at a rate set in advance (load.rate, or a log replayed at its own
        timing): req/s is what was asked, not what the stack did; what the stack did is
        its CPU per request and its latency."""
        k = self.knobs
        return bool(k.get("load.rate")) or bool(k.get("load.replay") and
                                                k.get("load.replay_times"))


@dataclass(frozen=True, kw_only=True)
class ExperimentView:
    """Everything a report shows: the experiment, its trials, summaries and runs."""

    id: int
    name: str
    description: str
    created_at: str
    status: ExperimentStatus
    host: dict
    commit: str | None
    versions: dict[str, str]
    summaries: list[TrialSummary]
    runs: list[RunRecord]


def _per_request(cpu_s: float, run: RunRecord) -> float:
    return cpu_s / run.load.completed * 1e6


def _server_cpu(run: RunRecord) -> float | None:
    """Every server component's CPU per request in one run; None when one has none."""
    used = [c.get("cpu_s") for c in run.resources.components.values()]
    return _per_request(sum(used), run) if used and None not in used else None


def _components(runs: list[RunRecord]) -> list[str]:
    return sorted({c for r in runs for c in r.resources.components})


def disturbed(run: RunRecord) -> bool:
    """Its host disturbed it (flags.DISTURBED): the runner measures such a run again."""
    return any(f in DISTURBED for f in run.flags)


POOL_MIN = 2     # undisturbed runs a trial needs before its disturbed ones are set aside


def pooled(runs: list[RunRecord], everything: Sequence[RunRecord] | None = None
           ) -> list[RunRecord]:
    """The measured runs a trial's figures come from: each disturbed run that was
    measured again (made_again: followed at once by its trial's next run) is replaced by
    it, where at least POOL_MIN undisturbed runs remain; every other run counts. A
    disturbed run nothing replaced stays: its round's other runs ran beside the same
    disturbance, and the paired comparison cancels what they shared.
    `everything`: the experiment's runs, which tell what followed each (default `runs`)."""
    ok = [r for r in runs if r.outcome is Outcome.OK and r.load and r.load.completed]
    again = made_again(runs if everything is None else everything)
    kept = [r for r in ok if (r.trial_id, r.repetition) not in again]
    return kept if len([r for r in kept if not disturbed(r)]) >= POOL_MIN else ok


def made_again(runs: Sequence[RunRecord]) -> set[tuple[str, int]]:
    """(trial, repetition) of each disturbed run the runner measured again: the next run
    of the experiment, in the order they started, is of the same trial (the runner makes
    it at once, runner._again) and is no next round's run of it — a run made again takes
    a repetition past every planned one, a next round's run the next repetition (a round
    can end and the next begin with the same trial). One made again in the last round,
    whose repetition is also the next, counts as measured in a round of its own: kept."""
    order = sorted(runs, key=lambda r: (r.started_at, r.repetition))
    return {(r.trial_id, r.repetition) for r, after in zip(order, order[1:])
            if disturbed(r) and after.trial_id == r.trial_id
            and after.repetition != r.repetition + 1}


def summarize(definition: dict, label: str, trial_id: str,
              runs: list[RunRecord], experiment: str | None = None,
              sure: tuple[float, float] = (ALPHA, MARGIN),
              everything: Sequence[RunRecord] | None = None) -> TrialSummary:
    measured = [r for r in runs if r.outcome is Outcome.OK and r.load and r.load.completed]
    ok = pooled(runs, everything)
    comps = _components(ok)
    details = _flag_details(ok)

    def per_component(key: str, per_request: bool = False) -> dict[str, Estimate]:
        out = {}
        for c in comps:
            if per_request:
                e = Estimate.per_run(ok, lambda r: _per_request(
                    r.resources.components[c][key], r) if c in r.resources.components
                    else None)
            else:
                e = Estimate.per_run(ok, lambda r: r.resources.figure(c, key))
            if e.values:
                out[c] = e
        return out

    invalid = len([r for r in runs if r.outcome is Outcome.INVALID])
    return TrialSummary(
        trial_id=trial_id, label=label, stack=definition["stack"],
        workload=definition["workload"], concurrency=definition["concurrency"],
        knobs=definition["knobs"], runs_ok=len(ok),
        runs_failed=len(runs) - invalid - len(measured),
        rps=Estimate.per_run(ok, lambda r: r.load.rps),
        mbps=Estimate.per_run(ok, lambda r: r.load.bytes_total / r.load.duration_s / 1e6
                              if r.load.duration_s else None),
        latency_us=merged_percentiles([r.load.histogram for r in ok if r.load.histogram]),
        latency_runs_us={"p50": Estimate.per_run(ok, lambda r: r.load.p50_us),
                         "p99": Estimate.per_run(ok, lambda r: r.load.p99_us)},
        cpu_us_per_request=per_component("cpu_s", per_request=True),
        server_cpu=Estimate.per_run(ok, _server_cpu),
        engine_cpu_us_per_request=Estimate.per_run(
            ok, lambda r: _per_request(r.load.engine_cpu_measured_s, r)),
        rss_mib_peak=per_component("rss_mib_peak"),
        pss_mib_per_worker=per_component("pss_mib_per_worker"),
        errors=sum(r.load.failed for r in ok),
        flagged=tuple(name for name, _ in details),
        reasons=tuple(sorted({f"{r.outcome}: {r.reason}" for r in runs
                              if r.outcome is not Outcome.OK and r.reason})),
        verdicts=runs[-1].verdicts if runs else (), flag_details=tuple(details),
        idle_pss_mib_per_worker=per_component("idle_pss_mib_per_worker"),
        runs_invalid=invalid, tls=_tls(ok), protocol=_protocol(ok), agents=_agents(ok),
        layers=_layers(ok),
        conditions=_conditions(ok), page_views=_page_views(ok),
        disturbance=max((disturbance_factor(r.resources.host) for r in ok),
                        default=1.0),
        busy_ratio=_busy_ratio(ok),
        runs_set_aside=len(measured) - len(ok),
        capacity=Estimate.per_run(
            ok, lambda r: r.resources.part("capacity").get("capacity") or None),
        capacity_limits=tuple(sorted({why for r in ok for why in lower_bound_reasons(
            r.resources.part("capacity"))})),
        experiment=experiment, alpha=sure[0], margin=sure[1])


def _busy_ratio(ok: list[RunRecord]) -> float | None:
    """Median req/s of the runs on a busy host (whose window was read) over the
    others'; None without both, or at a fixed rate (req/s is then what was asked)."""
    if any(r.load.rate for r in ok):
        return None
    factors = [(r.load.rps, disturbance_factor(r.resources.host)) for r in ok]
    busy = [rps for rps, f in factors if 1.0 < f < math.inf]
    quiet = [rps for rps, f in factors if f == 1.0]
    return median(busy) / median(quiet) if busy and quiet and median(quiet) else None


def _page_views(ok: list[RunRecord]) -> dict[str, Estimate]:
    """Requests and bytes of each view over the runs that made one without an error."""
    views = [v for r in ok if (v := r.resources.pageview) and not v.get("error")]
    if not views:
        return {}
    return {f"{view}_{what}": Estimate.of([v[view][what] for v in views])
            for view in ("first", "repeat") for what in ("requests", "bytes")}


def _conditions(ok: list[RunRecord]) -> dict[str, dict]:
    """The network, filesystem and machine profile the runs had (the latest's: the knobs
    are the trial's; the measured rate and RTT are that run's), where not the default."""
    if not ok:
        return {}
    res, out = ok[-1].resources, {}
    net = res.net
    if net.get("mode") == "veth":
        out["net"] = {k: net[k] for k in ("mode", "link", "rate_bytes_s", "rtt_ms",
                                          "sysctls") if k in net}
    if res.fs.get("mounted"):
        out["fs"] = {k: res.fs[k] for k in ("type", "options", "cold_cache", "size_mb")}
    if res.machine:
        out["machine"] = {k: res.machine[k] for k in ("cpus", "cpu_quota", "memory_mb")}
    return out


def _layers(ok: list[RunRecord]) -> dict[str, dict]:
    """Each front layer's hit ratio over the repetitions, and a balancer's median share
    per replica (layercheck's figures of each run's measured window)."""
    ratios: dict[str, list[float]] = {}
    shares: dict[str, dict[str, list[float]]] = {}
    for r in ok:
        for layer, fig in r.resources.layers.items():
            if fig.get("hit_ratio") is not None:
                ratios.setdefault(layer, []).append(fig["hit_ratio"])
            total = sum(fig.get("spread", {}).values())
            for replica, n in fig.get("spread", {}).items():
                if total:
                    shares.setdefault(layer, {}).setdefault(replica, []).append(n / total)
    return {layer: {"hit_ratio": Estimate.of(ratios[layer]) if layer in ratios else None,
                    "spread": {k: round(median(v), 4) for k, v in shares.get(layer, {}).items()}}
            for layer in dict.fromkeys([*ratios, *shares])}


def _tls(ok: list[RunRecord]) -> dict | None:
    """The protocol and cipher the engine negotiated, and how many handshakes resumed a
    session, so "resumed" means what it did (TLS 1.3 resumption still runs ECDHE)."""
    seen = [r.load.tls for r in ok if r.load.tls]
    if not seen:
        return None
    return {"protocols": sorted({t.protocol for t in seen}),
            "ciphers": sorted({t.cipher for t in seen if t.cipher}),
            "handshakes": sum(t.handshakes for t in seen),
            "resumed": sum(t.resumed for t in seen)}


def _protocol(ok: list[RunRecord]) -> dict | None:
    """For runs that asked for HTTP/2: the protocols asked and spoken (the engine's report:
    what the responses came in) and the streams per connection."""
    h2 = [r.load for r in ok if r.load.asked_protocol != "http/1.1"]
    if not h2:
        return None
    return {"asked": sorted({x.asked_protocol for x in h2}),
            "spoken": sorted({x.protocol or "none" for x in h2}),
            "streams": sorted({x.streams for x in h2})}


def _agents(ok: list[RunRecord]) -> dict | None:
    """The runs' load agents: their count, the largest start skew, the median time spent
    beside a load, and per agent (by name) where it ran, its connections, and the
    medians over the runs of its req/s, busy share and p99."""
    loads = [r.load for r in ok if r.load.agents]
    if not loads:
        return None
    per: dict[str, list] = {}
    for load in loads:
        for a in load.agents:
            per.setdefault(a.name, []).append(a)
    skews = [x.agents_start_skew_us for x in loads if x.agents_start_skew_us is not None]
    return {"count": max(len(x.agents) for x in loads),
            "start_skew_us_max": max(skews, default=None),
            "overhead_s": median([x.agents_overhead_s for x in loads
                                  if x.agents_overhead_s is not None] or [0.0]),
            "per_agent": {name: {"host": runs[-1].host, "netns": runs[-1].netns,
                                 "connections": runs[-1].connections,
                                 "rps": median([a.rps for a in runs]),
                                 "busy": median([a.busy or 0.0 for a in runs]),
                                 "p99_us": median([a.p99_us for a in runs])}
                          for name, runs in sorted(per.items())}}


def _flag_details(ok: list[RunRecord]) -> list[tuple[str, str]]:
    """Each flag of the trial once, with how many runs carry it and one run's numbers
    (the flags stored with the runs decide; their details are derived again)."""
    out = []
    for name in sorted({f for r in ok for f in r.flags}):
        runs = [r for r in ok if name in r.flags]
        known = known_slow(runs[0].knobs)
        details = {f.name: f.detail for f in run_flags(runs[0].load, runs[0].resources, known)}
        # A run stored under an older rule keeps its flag; known-slow then says the
        # setting, as that rule did, since today's rule no longer derives its numbers.
        detail = details.get(name) or ("; ".join(known) if name == "known-slow" else "")
        if name == "starved" and (why := starve_causes(runs[0].knobs, runs[0].load.clients or 0)):
            detail += f"; likely cause: {'; '.join(why)}"
        out.append((name, f"{len(runs)} of {len(ok)} runs; run {runs[0].repetition}: "
                    f"{detail}" if detail else f"{len(runs)} of {len(ok)} runs"))
    spread = dispersion([r.load.rps for r in ok])
    if spread:
        out.append((spread.name, spread.detail))
    few = few_requests([r.load.completed for r in ok],
                       median([r.load.duration_s for r in ok]) if ok else None)
    if few:
        out.append((few.name, few.detail))
    # the runs in the order they were measured: a run measured again comes last
    history = history_dependent([r.load.rps for r in sorted(ok, key=lambda r: r.started_at)])
    if history:
        out.append((history.name, history.detail))
    return out


def sure_of(experiment: dict) -> tuple[float, float]:
    """(alpha, margin) of an experiment's comparisons, from its stored spec: with
    repetitions = "auto" its rounds were added until decided, looking after each round
    from the first AUTO_FIRST to max_repetitions, so each look judges at look_alpha
    (the 95% holds whichever round it stopped at); a fixed count looks once, at ALPHA."""
    margin = float(experiment.get("margin", MARGIN))
    if experiment.get("repetitions", "auto") != "auto":
        return ALPHA, margin
    return look_alpha(AUTO_FIRST, int(experiment.get("max_repetitions", 10))), margin


def load_view(store: Store, experiment: str | int | None) -> ExperimentView:
    exp = store.experiment(experiment)
    runs = list(store.runs(exp.id))
    by_trial: dict[str, list[RunRecord]] = {}
    for r in runs:
        by_trial.setdefault(r.trial_id, []).append(r)
    experiment = f"{store.path.resolve() if store.path else hex(id(store))}#{exp.id}"
    sure = sure_of(exp.spec.get("experiment", {}))
    summaries = [summarize(t.definition, t.label, t.trial_id, by_trial.get(t.trial_id, []),
                           experiment, sure, runs)
                 for t in store.trials(exp.id)]
    versions = runs[-1].versions if runs else {}
    return ExperimentView(id=exp.id, name=exp.name,
                          description=exp.spec["experiment"].get("description", ""),
                          created_at=exp.created_at, status=exp.status, host=exp.host,
                          commit=exp.stacklab_commit, versions=versions,
                          summaries=summaries, runs=runs)


# A run held back by the load engine (flags.BOUNDING) served less
# than the server could: a ratio against it is a limit, not a measurement.
@dataclass(frozen=True)
class Bound:
    """A ratio B/A with a limited side is a bound: the true ratio is at least (≥) or at
    most (≤) the measured one, or unknown both ways (?) when both sides were limited or
    the metric has no known direction."""

    relation: str     # "≥", "≤" or "?"
    why: str          # "B (nginx static-page c=16) was limited by the load engine"
    reason: str = "limited"   # the verdict's reason code: the flag that set the bound


def bound(a: TrialSummary, b: TrialSummary, limited_is_low: bool | None,
          name=None) -> Bound | None:
    """`limited_is_low`: a limited side's true value can only be higher than measured
    (True: throughput), only lower (False: latency), or either way (None: CPU, memory).
    `name` names a trial in `why` (default: "A (its label)", "B (its label)"). A side
    flagged INVALIDATING (error responses) leaves no bound either way."""
    return _limited(a, b, {**BOUNDING, **INVALIDATING}, limited_is_low, name)


def capacity_bound(a: TrialSummary, b: TrialSummary, name=None) -> Bound | None:
    """bound() for capacity: a side whose search ended at its ceiling or whose failed
    steps were the connections' (capacity.CAPACITY_LIMITS) has a capacity of at least
    its figure, as a side limited by the load engine does."""
    return _limited(replace(a, flagged=(*a.flagged, *a.capacity_limits)),
                    replace(b, flagged=(*b.flagged, *b.capacity_limits)),
                    {**BOUNDING, **INVALIDATING, **CAPACITY_LIMITS}, True, name)


def invalid(a: TrialSummary, b: TrialSummary, name=None) -> Bound | None:
    """A side flagged INVALIDATING, for a metric no limit bends (bytes per response): a
    run of error pages weighs what error pages weigh."""
    return _limited(a, b, INVALIDATING, None, name)


def _side(side: str, s: TrialSummary, name) -> str:
    return name(s) if name else f"{side} ({s.label})"


def _limited(a: TrialSummary, b: TrialSummary, flags: dict[str, str],
             limited_is_low: bool | None, name) -> Bound | None:
    why_a = [flags[f] for f in a.flagged if f in flags]
    why_b = [flags[f] for f in b.flagged if f in flags]
    if not why_a and not why_b:
        return None
    why = "; ".join(f"{_side(side, s, name)} {' and '.join(w)}"
                    for side, s, w in (("A", a, why_a), ("B", b, why_b)) if w)
    reason = next(f for f in (*a.flagged, *b.flagged) if f in flags)
    invalidated = [f for f in (*a.flagged, *b.flagged) if f in INVALIDATING]
    if invalidated:
        return Bound("?", why, invalidated[0])
    if (why_a and why_b) or limited_is_low is None:
        return Bound("?", why, reason)
    # A's true value beyond its measured one moves B/A one way, B's the other way
    return Bound("≥" if bool(why_b) == limited_is_low else "≤", why, reason)


@dataclass(frozen=True)
class Reach:
    """Which sides ran on a busy host, for the words beside a verdict: the largest
    slow-down a worst-case bound gives other work on A's and B's runs
    (TrialSummary.disturbance, ≥ 1). Said, never used to widen an interval: two trials of
    one experiment are compared round by round (stats.paired_log), so what the host did
    to both runs of a round cancels, and what it did to one is noise the interval carries
    (its coverage measured beside CPU hogs: tests/test_paired.py)."""

    a: float
    b: float
    why: str          # "A (apache c=16) ran on a busy host"


def reach(a: TrialSummary, b: TrialSummary, name=None) -> Reach | None:
    """None when neither side ran on a busy host, short of memory or waiting on I/O it
    did not ask for (flags.PRESSURE)."""
    said = []
    for side, s in (("A", a), ("B", b)):
        what = (["ran on a busy host" + ("" if s.disturbance < float("inf")
                                         else " (its window was not read)")]
                if s.disturbance > 1.0 else [])
        what += [PRESSURE[f] for f in PRESSURE if f in s.flagged]
        if what:
            said.append(f"{_side(side, s, name)} {' and '.join(what)}")
    return Reach(a.disturbance, b.disturbance, "; ".join(said)) if said else None


# The one verdict vocabulary of every command and document (show, compare, recommend,
# the study, the gate): B against A is better, worse, the same within the margin, or no
# verdict with a reason code.
VERDICTS = ("better", "worse", "same", "no-verdict")
# Reason codes of "no-verdict": fewer than 2 runs a side, nothing to compare, a flag that
# bounds or invalidates a side (its name), an interval too wide to call it the same.
# (memory-pressure and io-pressure stay among the codes of stored documents; they no
# longer bound a ratio: flags.PRESSURE)
REASONS = ("few-runs", "no-data", "limited", "imprecise", *BOUNDING, *PRESSURE,
           *INVALIDATING, *CAPACITY_LIMITS)


@dataclass(frozen=True)
class Decision:
    kind: str                 # one of VERDICTS
    reason: str | None = None  # for no-verdict: one of REASONS

    def doc(self) -> dict:
        return {"verdict": self.kind, "reason": self.reason}


def reachable(ci: tuple[float, float], b: Bound | None, limited_is_low: bool | None
              ) -> tuple[float, float]:
    """Where the true ratio can lie: the interval `ci`, left open (0 or inf) on the side a
    limited run leaves unknown. What decide, the gate and a study's finding judge."""
    lo, hi = ci
    if b is not None and b.relation in ("≥", "≤"):   # the true ratio only larger/smaller
        lo, hi = (lo, float("inf")) if b.relation == "≥" else (0.0, hi)
    return lo, hi


def within_margin(lo: float, hi: float, margin: float = MARGIN) -> bool:
    """The whole interval within ±margin of 1."""
    return 1 - margin <= lo and hi <= 1 + margin


def decide(c: Comparison, b: Bound | None, limited_is_low: bool | None,
           higher_is_better: bool = True, margin: float = MARGIN) -> Decision:
    """B against A: better or worse when the interval of the ratio — open on the side a
    limited run leaves unknown (`b`) — lies wholly on one side of 1; the same when it lies
    wholly within ±margin of 1 and nothing bent it; else no verdict, with the reason
    (`imprecise`: more rounds would narrow it)."""
    if c.ratio is None:
        return Decision("no-verdict", "no-data")
    if c.p is None or c.ci is None:
        return Decision("no-verdict", "few-runs")
    if b is not None and b.relation == "?":
        return Decision("no-verdict", b.reason)
    lo, hi = reachable(c.ci, b, limited_is_low)
    if lo > 1 or hi < 1:
        return Decision("better" if (lo > 1) == higher_is_better else "worse")
    if b is not None:
        return Decision("no-verdict", b.reason)
    return Decision("same") if within_margin(lo, hi, margin) else Decision("no-verdict",
                                                                           "imprecise")


def bounded_verdict(c: Comparison, b: Bound | None, r: Reach | None = None,
                    limited_is_low: bool | None = True, margin: float = MARGIN) -> str:
    """The verdict in words: the comparison's own, unless a limited side leaves only a
    bound (then it stands only when the bound points the same way: B measured faster and
    only B was held back), or the interval is too wide to call it the same (with about
    how many more rounds would decide it). A busy host is said, not weighed."""
    if c.ratio is None or c.p is None or c.ci is None:
        return c.verdict
    if b is not None and b.relation == "?":
        return f"no verdict, not a measurement: {b.why}"
    d = decide(c, b, limited_is_low, margin=margin)
    busy = f"; {r.why}" + (" (compared round by round)" if c.paired else "") if r else ""
    if b is not None:
        agrees = d.kind in ("better", "worse")
        return (f"{c.verdict if agrees else 'no verdict'}, a bound "
                f"({b.relation} {multiple(c.ratio)}): {b.why}") + busy
    if d.kind == "no-verdict":
        return f"no verdict: {imprecise(c, margin)}" + busy
    return (c.verdict if d.kind != "same" else f"same within ±{margin:.0%}") + busy


def imprecise(c: Comparison, margin: float = MARGIN) -> str:
    """Why an interval that holds 1 is no 'same', and about how many rounds would decide."""
    more = rounds_to_decide(c, margin)
    lo, hi = c.ci or (0.0, 0.0)
    return (f"{ratio_text(lo)}–{ratio_text(hi)}× holds 1 but reaches past ±{margin:.0%}"
            + (f": about {more} rounds in all would decide it" if more else
               ": more rounds than a run would take to decide it"))


def rounds_to_decide(c: Comparison, margin: float = MARGIN, most: int = 200) -> int | None:
    """About how many rounds (runs a side) would give an interval that decides — wholly
    past 1 or wholly within ±margin — if the spread stayed as measured; None past `most`
    (normal quantiles: a planning figure, not a promise)."""
    if c.ci is None or c.ratio is None or c.ci[0] <= 0:
        return None
    n = c.paired or min(c.n)
    if n < 2:
        return None
    from scipy.special import stdtrit
    q = float(stdtrit(max(n - 1, 1), 1 - c.alpha / 2))
    spread = (math.log(c.ci[1]) - math.log(c.ci[0])) / 2 / q * math.sqrt(n)  # sd per round
    d, m = abs(math.log(c.ratio)), math.log(1 + margin)
    for k in range(n + 1, most + 1):
        h = float(stdtrit(k - 1, 1 - c.alpha / 2)) * spread / math.sqrt(k)
        if h < d or d + h < m:
            return k
    return None


@dataclass(frozen=True)
class MetricComparison:
    metric: str
    comparison: Comparison
    bound: Bound | None
    reach: Reach | None = None
    limited_is_low: bool | None = True
    higher_is_better: bool = True
    margin: float = MARGIN          # "same" within ±margin (the experiment's)

    @property
    def verdict(self) -> str:
        return bounded_verdict(self.comparison, self.bound, self.reach, self.limited_is_low,
                               self.margin)

    @property
    def decision(self) -> Decision:
        return decide(self.comparison, self.bound, self.limited_is_low,
                      self.higher_is_better, self.margin)

    @property
    def imprecise(self) -> str:
        return imprecise(self.comparison, self.margin)


def when_of(a: TrialSummary, b: TrialSummary, ea: Estimate, eb: Estimate) -> tuple | None:
    """When A's and B's values' runs ran, if the two trials are of one experiment (their
    runs alternated round by round: the comparison pairs them), else None."""
    if a.experiment is None or a.experiment != b.experiment:
        return None
    return ea.when, eb.when


def sure(a: TrialSummary, b: TrialSummary) -> tuple[float, float]:
    """The level and margin two trials are compared at: the stricter of each."""
    return min(a.alpha, b.alpha), min(a.margin, b.margin)


SERVER_CPU = "server CPU µs/req"     # every server component's, together


def compare_trials(a: TrialSummary, b: TrialSummary, name=None) -> list[MetricComparison]:
    """B against A on every metric both have, benchstat style; latency from each run's
    p50 and p99, in ms. Two trials of one experiment are compared round by round (their
    runs alternated: stats.compare, paired); trials of two experiments as two samples."""
    r = reach(a, b, name)
    alpha, margin = sure(a, b)

    def row(metric: str, ea: Estimate, eb: Estimate, limited_is_low: bool | None,
            higher_is_better: bool) -> MetricComparison:
        limits = (capacity_bound(a, b, name) if metric == "capacity req/s" else
                  bound(a, b, limited_is_low, name))
        return MetricComparison(metric, compare(ea.values, eb.values, alpha,
                                                when=when_of(a, b, ea, eb)),
                                limits, r, limited_is_low, higher_is_better, margin)

    def ms(s: TrialSummary, p: str) -> Estimate:
        e = s.latency_runs_us.get(p) or Estimate.of([])
        return Estimate.of([v / 1000 for v in e.values], e.when)

    rows = [row("capacity req/s", a.capacity, b.capacity, True, True)]
    if not (a.capacity.values and b.capacity.values):
        rows = []
    rows += [row("req/s", a.rps, b.rps, True, True),
             row("p50 ms", ms(a, "p50"), ms(b, "p50"), False, False),
             row("p99 ms", ms(a, "p99"), ms(b, "p99"), False, False),
             row(SERVER_CPU, a.server_cpu, b.server_cpu, None, False),
             row("MB/s", a.mbps, b.mbps, True, True),
             row("engine CPU µs/req", a.engine_cpu_us_per_request,
                 b.engine_cpu_us_per_request, None, False)]
    for c in sorted(set(a.cpu_us_per_request) & set(b.cpu_us_per_request)):
        rows.append(row(f"{c} CPU µs/req", a.cpu_us_per_request[c],
                        b.cpu_us_per_request[c], None, False))
    for c in sorted(set(a.rss_mib_peak) & set(b.rss_mib_peak)):
        rows.append(row(f"{c} RSS MiB", a.rss_mib_peak[c], b.rss_mib_peak[c], None, False))
    return rows


def rel_spread(e: Estimate) -> float | None:
    if not e.values or not e.median:
        return None
    return (max(e.values) - min(e.values)) / e.median


def same_definition_pairs(a: ExperimentView, b: ExperimentView
                          ) -> list[tuple[TrialSummary, TrialSummary]]:
    """Trials of A and B with the same definition (as experiments_table pairs them)."""
    def key(s: TrialSummary) -> tuple:       # knob values may be lists (load.headers)
        return s.stack, s.workload, s.concurrency, json.dumps(s.knobs, sort_keys=True)
    by_key = {key(s): s for s in b.summaries}
    return [(s, by_key[key(s)]) for s in a.summaries if key(s) in by_key]
