"""A run's measurement as a capacity search: the highest open-loop rate whose latency
percentile meets the experiment's SLO ([capacity], experiment/spec.py), found on the
run's one stack by the pure search (analysis/capacity.py) over loads of the run's own
measurement (Measurement: the same plan, monitor and record), then confirmed.

In order, on one stack, its writeback settled once:

1. a probe: a closed-loop step at the trial's connections, whose req/s X bounds what
   an open loop can reach (each connection sends its next request after its answer);
2. the search, from X/2, doubling (up to 1.25 X) then bisecting, each step `step`
   seconds (longer while undecided, and long enough to bound the percentile: needed),
   decided on the percentile's 95% interval;
3. the confirmation: the rate found, held for the experiment's duration; if it fails,
   lower rates at full length (_confirm). Its load is the run's load and record;
4. the profile: p50 and the percentile at 50, 80 and 90% of the rate confirmed.

A step the host disturbed or whose engine was the bottleneck is measured again (twice
at most) unless it passed: a disturbance only ever adds latency and takes rate, so a
pass under it stands; a fail that stays disturbed counts, and the run is flagged
(host-busy or generator-bound on its steps), its capacity a lower bound.

Every step is kept in the run's record (resources' "capacity" part): rate, duration,
what was achieved, p50, p99, the percentile's interval, the decision and why, flags.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Protocol

from ..analysis.capacity import (CONNECTIONS_BOUND, MIN_KEPT, NOT_THE_SERVER, PROFILE_SHARES,
                                 SearchPlan,
                                 StepDecision, StepOutcome, Window, Verdict, bins_of,
                                 decide, needed, search)
from ..analysis.flags import disturbance_factor, flag_names
from ..analysis.stats import decode_histogram
from ..experiment.spec import (CONFIRM_STEPS, LONGEST_STEP, REMEASURES, REPLICATED,
                               STEP_WARMUP_S, Capacity)
from ..errors import EngineError
from ..measure.drive import LoadPlan, LoadReport
from ..measure.verify import Verdict as CheckVerdict
from ..store.records import Resources
from .quiet import Settled, settle

# An open loop at the probe's connections cannot keep a rate far above what they
# carried closed-loop (each sends its next request once answered): the search's
# ceiling, with room for the probe's own noise.
CEILING_ROOM = 1.25
STEP_DOWN = 4               # after a fail at full length: this many resolutions lower
CONFIRM_GAP = 2             # a rate held this many resolutions or fewer under a fail: confirmed
AGAIN = 2                   # a disturbed step that did not pass: measured again
# The slots' busy share (rate × time to answer / connections × streams) from which
# requests wait at the client for a free one often enough to fail a tail latency: c
# slots busy 80% of the time make far more than the 1% a p99 allows wait (Erlang C:
# 46% of arrivals at 8 slots, 16% at 32, 6% at 64).
CLIENT_BUSY = 0.8


class Measures(Protocol):
    """What the search needs of the run's measurement (runner.Measurement)."""

    def plan(self) -> LoadPlan: ...

    def landed(self) -> Callable[[LoadReport], None]: ...

    def measured(self, plan: LoadPlan, settled: Settled,
                 landed: Callable[[LoadReport], None] | None = None
                 ) -> tuple[LoadReport, dict]: ...


@dataclass(frozen=True)
class Measured:
    """One step's load and its window's resources, as the run's measurement gave them."""

    load: LoadReport
    resources: dict

    @cached_property
    def flags(self) -> tuple[str, ...]:
        """The run flags of the step's load and window, read once."""
        return tuple(flag_names(self.load, Resources.from_json(self.resources)))

    @cached_property
    def _histogram(self) -> Any:
        """The step's latency histogram, decoded once (None without one)."""
        return decode_histogram(self.load.histogram) if self.load.histogram else None

    @cached_property
    def errors(self) -> int:
        """Requests that failed outright, and responses with a 4xx or 5xx status."""
        return self.load.failed + self._answered_badly

    @cached_property
    def _answered_badly(self) -> int:
        return sum(n for c, n in self.load.status_classes.items() if c[0] in "45")

    def point(self, percentile: float) -> float | None:
        """The percentile read off the step's histogram (the engine reports p50..p999)."""
        h = self._histogram
        return None if h is None else float(h.get_value_at_percentile(percentile))

    def explains(self, rate: float) -> bool:
        """Whether the host's disturbance could account for the rate the step lost
        (flags.disturbance_factor sizes the slow-down it could cause): a server that
        kept half the rate offered beside a host 10% busy was past its capacity all the
        same. A step that kept its rate failed on latency, which a busy host can move by
        any amount (a tail is not sized)."""
        lost = min(1.0, self.load.rps / rate) if rate else 1.0
        return lost * disturbance_factor(self.resources.get("_host", {})) >= MIN_KEPT

    def cpu_us_per_request(self) -> dict[str, float]:
        """Each component's CPU per completed request over the step's window: at a rate
        under capacity, the steadiest figure of what a request costs."""
        done = self.load.completed
        return {c: round(r["cpu_s"] / done * 1e6, 2) for c, r in
                Resources.from_json(self.resources).components.items()
                if done and r.get("cpu_s") is not None}

    @cached_property
    def _bins(self) -> tuple:
        return bins_of(self._histogram) if self._histogram is not None else ()

    def outcome(self, rate: float) -> StepOutcome:
        """As the search judges it: a response with a 4xx or 5xx status is an error
        like a request that failed outright."""
        load = self.load
        flight = load.in_flight
        return StepOutcome(offered_rate=rate, achieved_rate=load.rps,
                           completed=load.completed - self._answered_badly,
                           errors=self.errors, bins=self._bins,
                           in_flight=flight.count if flight else 0,
                           in_flight_old=flight.older_than_run if flight else 0,
                           in_flight_age_us=flight.age_us_max if flight else 0.0,
                           windows=self._windows)

    @cached_property
    def _windows(self) -> tuple[Window, ...]:
        """The step's seconds, when the engine gave each one's mean latency."""
        series = self.load.timeseries
        if not series or any(b.mean_us is None or b.width_s != 1 for b in series):
            return ()
        return tuple(Window(b.completed, b.mean_us) for b in series)


@dataclass(eq=False)
class CapacitySearch:
    """The measurement layer of a capacity experiment (see the module's docstring)."""

    measurement: Measures
    goal: Capacity
    warmup_s: float
    name = "load"
    waits = False
    load: LoadReport | None = None
    resources: dict = field(default_factory=dict)
    steps: list[dict] = field(default_factory=list)
    light_us: float | None = None    # time to first byte under light load (connections_bound)
    again_left: int = REMEASURES     # steps it may still measure again (the search's budget)
    say: Callable[[str], None] = lambda text: None    # each step decided, as it is

    @classmethod
    def problem(cls, knobs: dict[str, dict]) -> str | None:
        return None     # the plan's rules are the measurement's (runner.Measurement)

    @contextmanager
    def entered(self) -> Iterator[LoadReport]:
        settled = settle()     # once: the previous run's writeback is not this run's
        base = self.measurement.plan()
        final, record = self._search(base, settled)
        self.measurement.landed()(final.load)
        self.load = final.load
        self.resources = {**final.resources, "_capacity": record}
        yield self.load

    def verdicts(self) -> tuple[CheckVerdict, ...]:
        return ()

    def record(self) -> dict:
        return self.resources

    def _search(self, base: LoadPlan, settled: Settled) -> tuple[Measured, dict]:
        g = self.goal
        slo, cap = g.goal, g.error_share
        probe = self._probe(base, settled)
        ceiling = probe.load.rps
        record: dict[str, Any] = {
            "slo": g.slo, "percentile": slo.percentile, "limit_us": slo.limit_us,
            "max_error_rate": cap, "connections": base.connections, "capacity": None,
            "searched": None, "stopped": "no-pass", "confirmed": False,
            "steps": self.steps}
        if not probe.load.completed:
            record["stopped"] = "probe-failed"
            return probe, record
        last = [probe]

        def measure(rate: float, duration_s: float) -> StepOutcome:
            measured, _ = self._decided(base, settled, "search", rate, duration_s)
            if measured is None:        # the engine failed at this rate: not kept
                return StepOutcome(offered_rate=offered(rate), achieved_rate=0.0,
                                   completed=0, errors=1, bins=())
            last[0] = measured
            return measured.outcome(offered(rate))

        found = search(measure, slo, SearchPlan(
            start_rate=max(1.0, ceiling / 2), step_s=g.step, max_step_s=g.step * LONGEST_STEP,
            resolution=g.resolution, max_steps=g.max_steps,
            max_rate=max(2.0, ceiling * CEILING_ROOM), min_requests=needed(slo.percentile)),
            cap)
        record.update(searched=found.capacity, stopped=found.stopped)
        if found.capacity is None:
            return last[0], record
        confirmed, rate = self._confirm(base, settled, found.capacity)
        record.update(capacity=rate, confirmed=rate is not None)
        if rate is None:
            return confirmed or last[0], record
        for share in PROFILE_SHARES:        # of the capacity confirmed
            self._decided(base, settled, "profile", rate * share, g.step)
        return confirmed, record

    def _probe(self, base: LoadPlan, settled: Settled) -> Measured:
        """The closed-loop probe, measured again (AGAIN times at most) while the host or
        the engine disturbed it: a slowed probe would lower the search's ceiling."""
        for attempt in range(AGAIN + 1):
            probe = self._step(base, settled, "probe", None, self.goal.step)
            disturbed = [f for f in probe.flags if f in NOT_THE_SERVER]
            if (not disturbed or not probe.load.completed or attempt == AGAIN
                    or not self.again_left):
                return probe
            self.again_left -= 1
            self.steps[-1]["reason"] = f"{', '.join(disturbed)}: measured again"
        raise AssertionError("unreachable")

    def _confirm(self, base: LoadPlan, settled: Settled, found: float
                 ) -> tuple[Measured | None, float | None]:
        """The rate found, held for the experiment's duration; a short step can pass by
        luck where a long one does not, so on a fail the search goes on at full length:
        down by STEP_DOWN resolutions (or to just under the rate the failed step carried,
        when that is lower) until a rate holds, then bisecting between it and
        the lowest that failed until they are CONFIRM_GAP resolutions apart,
        CONFIRM_STEPS full-length steps at most. A rate holds
        when it passed REPLICATED full-length steps, each on its own: one step near
        capacity passes by luck far more often than its interval says
        (bench/capacity_coverage.py), two in a row less. The highest rate that held,
        with its load (the run's), or None with the last load measured."""
        g = self.goal
        duration = base.duration_s or g.step
        held: tuple[Measured, float] | None = None
        last: Measured | None = None
        failed, rate = None, offered(found)
        passes: dict[float, int] = {}
        for _ in range(CONFIRM_STEPS):
            measured, verdict = self._decided(base, settled, "confirm", rate, duration)
            if measured is not None and verdict.decision is StepDecision.PASS:
                passes[rate] = passes.get(rate, 0) + 1
                if passes[rate] < REPLICATED:
                    continue            # the same rate again, on its own step
                held = (measured, rate)
                if failed is None or failed - rate <= CONFIRM_GAP * g.resolution * rate:
                    break
                rate = offered((rate + failed) / 2)
            else:
                last, failed = measured or last, rate
                # down to what the server carried when it could not keep the rate (a
                # short step's rate can be far above what holds at full length)
                carried = (measured.load.rps * (1 - g.resolution)
                           if measured is not None and measured.load.rps else rate)
                rate = offered((rate + held[1]) / 2 if held else
                               min(rate * (1 - STEP_DOWN * g.resolution), carried))
            if held and rate in (held[1], failed):
                break                   # whole req/s: nothing left between them
        if held is None:
            return last, None
        return held

    def _decided(self, base: LoadPlan, settled: Settled, phase: str, rate: float,
                 duration_s: float) -> tuple[Measured | None, Verdict]:
        """One step at `rate` (offered as a whole number of requests a second, and judged
        against what was offered), measured again while the host or the engine disturbed
        a step that did not pass (AGAIN times at most); each measurement is kept. An
        engine that fails at this rate (EngineError) is a failed step, with no load."""
        rate = offered(rate)
        for attempt in range(AGAIN + 1):
            try:
                measured = self._step(base, settled, phase, rate, duration_s)
            except EngineError as e:
                verdict = Verdict(StepDecision.FAIL, (0.0, float("inf")),
                                  f"the engine failed at this rate: {e}")
                self.steps.append({"phase": phase, "rate": rate, "duration_s": duration_s,
                                   "achieved": 0.0, "completed": 0, "errors": 0,
                                   "p50_us": None, "p99_us": None, "slo_us": None,
                                   "interval_us": None, "decision": "fail",
                                   "reason": verdict.reason, "flags": [],
                                   "cpu_us_per_request": {}})
                return None, verdict
            verdict = decide(measured.outcome(rate), self.goal.goal, self.goal.error_share)
            disturbed = [f for f in measured.flags if f in NOT_THE_SERVER]
            again = bool(disturbed and verdict.decision is not StepDecision.PASS
                         and attempt < AGAIN and self.again_left and measured.explains(rate))
            self.again_left -= again
            self.steps[-1].update(decision=verdict.decision.value,
                                  interval_us=_interval(verdict.interval_us),
                                  reason=verdict.reason + (
                                      f"; {', '.join(disturbed)}: measured again"
                                      if again else ""))
            if not again:
                self.say(f"capacity {phase} at {rate:,.0f} req/s for {duration_s:g} s: "
                         f"{verdict.decision.value} ({verdict.reason})")
                if self.light_us is None and verdict.decision is StepDecision.PASS:
                    self.light_us = measured.load.ttfb_us.mean or measured.load.ttfb_us.p50
                return measured, verdict
        raise AssertionError("unreachable")

    def _step(self, base: LoadPlan, settled: Settled, phase: str, rate: float | None,
              duration_s: float) -> Measured:
        load = {**base.load, "rate": 0 if rate is None else offered(rate)}
        if rate:    # long enough for the percentile to be bounded (the search's rule)
            duration_s = max(duration_s, needed(self.goal.goal.percentile) / rate)
        # each step warms up: the previous step's backlog (an overload) drains first
        plan = replace(base, duration_s=duration_s, requests=None,
                       warmup_s=max(self.warmup_s, STEP_WARMUP_S), load=load)
        measured = Measured(*self.measurement.measured(plan, settled))
        done = measured.load
        flags = list(measured.flags)
        answered = done.completed + done.failed
        if (rate and connections_bound(done, plan.connections, rate,
                                       self.goal.goal.limit_us, self.light_us)
                # a server that sheds load answers its errors fast: its own limit
                and measured.errors <= self.goal.error_share * answered):
            flags.append(CONNECTIONS_BOUND)
        self.steps.append({
            "phase": phase, "rate": None if rate is None else load["rate"],
            "duration_s": duration_s, "achieved": done.rps, "completed": done.completed,
            "errors": measured.errors,
            "p50_us": done.latency_us.p50, "p99_us": done.latency_us.p99,
            "slo_us": measured.point(self.goal.goal.percentile),
            "interval_us": None, "decision": None, "reason": "", "flags": flags,
            "cpu_us_per_request": measured.cpu_us_per_request()})
        return measured


def offered(rate: float) -> int:
    """The rate the engine is given: a whole number of requests a second, at least 1."""
    return max(1, round(rate))


def connections_bound(load: LoadReport, connections: int, rate: float, limit_us: float,
                      light_us: float | None) -> bool:
    """The step's connections, not the server, held it: in the open loop each connection
    (each HTTP/2 stream of one) sends its next request once answered, so `connections`
    × streams carry at most that many / (time to answer) requests a second, and a
    request whose slot is busy waits at the client, its latency counted from when it
    should have gone. Flagged when the server answered as fast as under light load
    (`light_us`: the time to first byte of the search's first passing step, at half
    the probe's rate; at most twice it) and within the SLO's limit, and either the step
    lost rate the slots could not carry, or the slots were busy CLIENT_BUSY of the time
    or more (rate × time to answer / slots), where requests queue at the client: the
    latency that failed the step was the client's queue. A saturated server also keeps
    every connection waiting, but its answers slow down as its queue grows: that is its
    capacity, not the connections'."""
    answer_us = load.ttfb_us.mean or load.ttfb_us.p50
    if (not answer_us or not light_us or load.ttfb_us.p99 >= limit_us
            or answer_us > 2 * light_us):
        return False
    slots = connections * max(1, load.streams)
    busy = rate * answer_us / 1e6 / slots
    return busy >= CLIENT_BUSY or (load.rps < MIN_KEPT * rate and busy > 1)


def _interval(interval: tuple[float, float]) -> list[float | None]:
    """As JSON holds it: an unbounded side is null."""
    return [v if v not in (float("inf"), float("-inf")) else None for v in interval]
