"""Run flags: a measured run that does not describe what it seems to is flagged, with
the numbers that say why.

Pure functions of what a run stores (the engine's report, as drive.LoadReport reads
it, and the monitor's summary), so the runner decides the flags once and `show`, the report and the export
explain them later from the same data. Every threshold is named here and documented
in the manual's "Flags" page (docs/flags.md).

- generator-bound: the engine's threads were busy ≥ 90% of the time, so the load
  generator, not the server, may have set the pace.
- rate-not-kept: an open-loop run completed < 90% of the asked-for rate.
- starved: in a closed loop some connections were hardly served while others were,
  or clients were served in turns: a server with fewer workers than connections leaves
  the rest in the accept queue, and a waiting connection sends nothing, so it leaves
  few samples and the percentiles describe only the lucky requests. Measured here by
  the share of all the clients' time that the slowest 1% of requests took: about 5–15%
  when every connection is served alike, 13–65% (median 41%, 15 runs) for 256 prefork
  servers at 256 connections on 2 cores (256 processes taking turns on the CPUs: waits of
  0.2–1 s, every client served), 97% for Apache prefork with 150 workers at 256
  keep-alive connections (clients waiting in the accept queue).
- littles-law: concurrency / throughput disagrees with the mean latency by more than
  25% (requests lost from the latency record, or time spent outside requests).
- host-busy: processes outside the lab used more than 10% of a core, or the
  hypervisor stole more than 2% of the CPU time, during the measured window. The core
  limit is raised by what the lab's own per-process readings (whole clock ticks) can
  miss: three standard deviations of their rounding, 0.1 core for 256 processes over 2 s
  (a quiet host showed 0.01–0.10 "outside" with 256 prefork children), and by 10 ms of
  stray work (kernel threads, timers) over the window, which matters only for runs of a
  fraction of a second. Where the components' CPU comes from their cgroups, short-lived
  processes (CGI scripts) are in it; where it comes from their processes, many forks a
  second are named as a possible cause (the lab's own CPU charged to nobody). It is
  sized, not a veto: disturbance_factor bounds the slow-down it could have caused, the
  runner measures the run again, and a verdict beyond the bound stands (analyze.decide).
- io-pressure: some task waited for disk I/O during more than 5% of the window in a run
  that reads nothing from disk (no cold cache, no memory profile): the host's writeback
  or other I/O slowed it. A direction-only bound; the run is measured again.
- error-responses: more than 1% of the completed requests were answered 4xx or 5xx. The
  engine completes a request when a response arrives, whatever its status, so such a
  run's rate counts error pages (nginx's 502 when PHP-FPM's socket refused it), not the
  pages asked for: a comparison with it is no measurement.
- memory-pressure / memory-limited: some task waited for memory (reclaim, refaults,
  swap) during more than 1% of the measured window, by the kernel's pressure stall
  information (/proc/pressure/memory, host-wide), or the machine profile's memory group
  OOM-killed a process. With the profile's group at its memory limit (memory-limited:
  its peak ≥ 90% of it) that is what the run measures: the stack short of memory, as
  S1's large files on a small machine. Otherwise (memory-pressure) the host was short
  of memory, which the run did not ask for: a ratio against it is a bound.
- server-child-killed: a server's child process died by a signal during the run (its
  own error log says so; the runner records those lines), not the normal reaping of idle
  children: the requests it held were lost and the server ran short of a worker.
- agents-skewed: a load from several agents (load.agents) whose engines started further
  apart than 1% of the measured phase, or at least 20 ms, by their own clocks or by how
  far their clocks disagree (the scheduler's heartbeats): for that long at each end of
  the run fewer agents loaded the server than the trial says. Local agents started
  0.1–1.6 ms apart here; hosts without a synchronized clock can be seconds apart.
- known-slow: the run's knobs are a setting a component knows, by a measurement here,
  that it serves pathologically slowly (nginx serving h2c with sendfile on: each small
  response held ~48 ms), and the run's p99 shows such a stall (at least 20 ms: 1% of its
  responses, or more, held as long): the run measures that stall, not the cost its trial
  compares. A run with the setting whose p99 stayed under it was not held (nginx's stall
  needs a connection with one stream open: with 2 streams per connection, measured
  30,244 req/s at p99 0.51 ms), and is not flagged. The component's own sentence, with
  its figures (Component.known_slow), and the run's p99 are the detail.

Three flags are a trial's: few-requests (its runs too short for a p99: few_requests),
and from its repetitions' req/s high-dispersion (max / min over 1.5×) and
history-dependent (the first run measured apart from the rest, beyond their spread:
history_dependent). Each is said with the trial, not held against a verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median

from ..measure.drive import LoadReport
from .stats import multiple, tail_time_share
from ..store.records import Resources

GENERATOR_BOUND_SHARE = 0.9
# agents-skewed: the agents' start spread allowed, as a share of the measured phase and
# at least this many µs (local agents start 0.1-1.6 ms apart; a heartbeat's delay is in
# the clocks' spread too)
AGENTS_SKEW_SHARE = 0.01
AGENTS_SKEW_MIN_US = 20_000
RATE_KEPT_SHARE = 0.9
# The 1% least-served connections (p1) served < 5% of the median connection's requests.
# Not the least-served one alone: 256 prefork servers at 256 connections on 2 cores
# (correctly sized) gave min / median 0.05-0.59 over 15 runs. p1 / median stayed
# 0.18-0.77 there, but 42 later runs went down to 0.08 and 0.09 (2 of 42 under 0.10,
# none under 0.05; a CI run failed on it). The truly starved server (150 workers at 256
# connections) is never caught by this rule alone: its keep-alive rotation gives every
# connection half the median (p1 / median 0.50, 8 of 8 runs) and its slowest 1% hold
# 96-97% of the time; a server that never rotates leaves connections idle.
STARVED_SHARE = 0.05
STARVED_TAIL = 0.01           # … or the slowest 1% of requests took ≥ 3/4 of all the
STARVED_TAIL_TIME = 0.75      # clients' time (each waited its turn in the accept queue)
LITTLE_TOLERANCE = 0.25       # |mean latency / (concurrency / req/s) - 1|
HOST_BUSY_CORE_SHARE = 0.10   # CPU outside the lab, in cores
HOST_STEAL_SHARE = 0.02       # steal time, share of all CPU time
# CPU seconds of stray work (kernel threads writing back, timers) that any window may
# hold: a share of a core over a long window, most of one over a run of 200 requests
# (0.1 s), which was flagged host-busy on a quiet host and measured again
HOST_BUSY_STRAY_S = 0.01
ERROR_RESPONSE_SHARE = 0.01   # 4xx and 5xx, share of the completed requests
KNOWN_STALL_US = 20_000       # a p99 at least this long shows a known-slow stall
MEMORY_STALL_SHARE = 0.01     # some task waiting for memory, share of the window (PSI)
IO_STALL_SHARE = 0.05         # some task waiting for disk I/O, share of the window (PSI)
PROFILE_REACHED = 0.9         # a profile's group at this share of its memory limit: held

# Flags after which a run's percentiles are not the trial's latency.
LATENCY_DISTORTING = ("starved", "littles-law")
# Flags after which a ratio against the run is a bound, not a measurement, with what
# held the run back (the words a comparison gives).
BOUNDING = {"generator-bound": "was limited by the load engine"}
# The host short of memory or busy with disk I/O during a run: like other work on its
# CPUs, a disturbance of the host, not of what the run measures. Said beside a verdict
# (analyze.reach), never a bound that vetoes it: the runs of a round shared the host, and
# the paired comparison cancels what they shared (it was a bound until issue 39: a run
# of one side pressured made every ratio against that side no verdict).
PRESSURE = {"memory-pressure": "ran while the host was short of memory",
            "io-pressure": "waited on disk I/O it did not ask for"}
# Flags of a run disturbed by the host rather than by what it measures: such a run is
# measured again (runner.remeasure) and, when it was, replaced by the run made again
# (analyze.pooled). host-busy is sized (disturbance_factor); each is said beside a
# verdict; the comparison pairs the runs that ran next to each other, so none widens it.
DISTURBED = ("host-busy", "io-pressure", "memory-pressure")
# Flags after which a ratio against the run is no measurement at all, either way.
INVALIDATING = {"error-responses": "answered errors (4xx/5xx) to more than "
                                   f"{ERROR_RESPONSE_SHARE:.0%} of its requests"}


@dataclass(frozen=True)
class Flag:
    name: str
    detail: str      # the numbers that raised it, in one sentence


def run_flags(load: LoadReport, resources: Resources,
              known: tuple[str, ...] = ()) -> list[Flag]:
    """Every flag a finished run earns, in a fixed order. `known`: what the stack's
    components say of its knobs (stacks.known_slow)."""
    checks = (_generator_bound, _rate_not_kept, _starved, _littles_law, _error_responses,
              _agents_skewed)
    flags = [f for check in checks if (f := check(load))]
    host = resources.host
    busy = host_busy(host)
    memory = memory_pressure(host, resources.machine)
    io = io_pressure(host, resources.fs, resources.machine)
    killed = server_child_killed(resources.logs)
    slow = _known_slow(load, known)
    return flags + [f for f in (busy, memory, io, killed, slow) if f]


def _known_slow(load: LoadReport, known: tuple[str, ...]) -> Flag | None:
    """A setting the components know to stall responses, in a run that held 1% of its
    responses or more as long (p99 at least KNOWN_STALL_US): where only some responses
    stall (a connection's lone stream, some of the time) the median can stay short."""
    p99 = load.latency_us.p99
    if not known or p99 is None or p99 < KNOWN_STALL_US:
        return None
    return Flag("known-slow", f"{'; '.join(known)} (this run's p99: {p99 / 1000:.1f} ms)")


def flag_names(load: LoadReport, resources: Resources,
               known: tuple[str, ...] = ()) -> list[str]:
    return [f.name for f in run_flags(load, resources, known)]


DISPERSION_MAX_MIN = 1.5      # a trial's repetitions: max / min req/s


def dispersion(rps: list[float]) -> Flag | None:
    """A trial whose repetitions disagree this much measured different conditions
    (a busy host, a cache filling, a server that sometimes stalls), not noise."""
    if len(rps) < 2 or min(rps) <= 0 or max(rps) / min(rps) <= DISPERSION_MAX_MIN:
        return None
    return Flag("high-dispersion", f"req/s over {len(rps)} repetitions from "
                f"{min(rps):,.0f} to {max(rps):,.0f} ({multiple(max(rps) / min(rps))} apart, "
                f"limit {DISPERSION_MAX_MIN}×)")


# few-requests: runs too short for their p99 to be a percentile. The largest of n values
# bounds the p99 from above with 95% confidence only from n = 367 on (0.99^n ≤ 0.025);
# a 2 s run of a 300 ms page holds a few dozen, and its "p99" is its slowest request.
P99_BOUNDED = math.ceil(math.log(0.025) / math.log(0.99))


def few_requests(completed: list[int], duration_s: float | None) -> Flag | None:
    """A trial whose runs completed too few requests for a p99 (median over its runs
    under P99_BOUNDED): said with how long a run would have to be."""
    if not completed or median(completed) >= P99_BOUNDED:
        return None
    n = median(completed)
    longer = (f"; lengthen `duration` to about {math.ceil(duration_s * P99_BOUNDED / n)} s"
              if duration_s and n else "")
    return Flag("few-requests", f"a run completed {n:,.0f} requests (median of "
                f"{len(completed)} runs): a p99 needs {P99_BOUNDED} a run before it is more "
                f"than the slowest one or two{longer}")


# history-dependent: the first run of a trial outside the range of the others by more
# than HISTORY_SPREADS × their spread and more than HISTORY_SHARE of their median, with
# HISTORY_MIN_RUNS runs at least. With normal noise of 8% (this VM's run-to-run sd) a
# first run like the others is flagged in 0.4% of trials of 3 runs, 0.2% of 4; at 15% in
# 7% and 2%. PHP file sessions on the lab root's disk gave 6,555 then 1,860-2,012 req/s
# (its gap 30× the others' spread and over twice their median).
HISTORY_MIN_RUNS = 3
HISTORY_SPREADS = 2.0
HISTORY_SHARE = 0.25


def history_dependent(rps: list[float]) -> Flag | None:
    """A trial whose first run (`rps` in the order the runs were measured) measured
    other conditions than the runs after it: what earlier runs left behind (files, a
    disk's writeback, a cache filled) changed what the later ones measured, or the first
    one paid for a start the warm-up did not cover. Raised when the first lies outside
    the others' range by more than HISTORY_SPREADS × their spread (max - min) and by
    more than HISTORY_SHARE of their median: a run as far off as the others' own spread
    is noise, and a few per cent off a tight group is still the same run."""
    if len(rps) < HISTORY_MIN_RUNS or min(rps) <= 0:
        return None
    first, rest = rps[0], rps[1:]
    low, high = min(rest), max(rest)
    gap = low - first if first < low else first - high if first > high else 0.0
    spread, middle = high - low, median(rest)
    if gap <= HISTORY_SPREADS * spread or gap <= HISTORY_SHARE * middle:
        return None
    times = f"{gap / spread:,.1f}× their spread" if spread else "their spread is 0"
    side = "faster" if first > high else "slower"
    return Flag("history-dependent", f"the first of {len(rps)} runs measured "
                f"{first:,.0f} req/s, the {len(rest)} after it {low:,.0f} to {high:,.0f} "
                f"(median {middle:,.0f}): it was {gap:,.0f} req/s {side} than their range, "
                f"{times} (limit {HISTORY_SPREADS:g}×) and {gap / middle:.0%} of their "
                f"median (limit {HISTORY_SHARE:.0%}); what earlier runs left changed what "
                "the later ones measured, or the first paid for a start its warm-up did "
                "not cover")


def _generator_bound(load: LoadReport) -> Flag | None:
    if load.agents:
        return _agent_bound(load)
    threads, wall = load.threads, load.wall_s
    # under a second, the engine's own start-up is too large a share to judge by
    if wall < 1.0:
        return None
    busy = load.engine_cpu_s / (wall * threads)
    if busy < GENERATOR_BOUND_SHARE:
        return None
    return Flag("generator-bound", f"the load engine's {threads} thread(s) were busy "
                f"{busy:.0%} of the run: the generator, not the server, may have set the pace")


def _agent_bound(load: LoadReport) -> Flag | None:
    """Agents judged one by one (one saturated agent sets the pace of its share
    whatever the others do): the rule above on each agent's engine."""
    bound = [(a, busy) for a in load.agents if a.wall_s >= 1.0 and (busy := a.busy)
             and busy >= GENERATOR_BOUND_SHARE]
    if not bound:
        return None
    said = ", ".join(f"{a.name} ({a.threads} thread(s) busy {busy:.0%})" for a, busy in bound)
    return Flag("generator-bound", f"load agent(s) {said} of {len(load.agents)}: the "
                "generator, not the server, may have set the pace")


def _agents_skewed(load: LoadReport) -> Flag | None:
    if not load.agents:
        return None
    skew, clocks = load.agents_start_skew_us or 0, load.agents_clock_spread_us or 0
    limit_us = max(AGENTS_SKEW_MIN_US, AGENTS_SKEW_SHARE * load.duration_s * 1e6)
    if max(skew, clocks) <= limit_us:
        return None
    return Flag("agents-skewed", f"the {len(load.agents)} load agents started "
                f"{skew / 1000:,.1f} ms apart by their own clocks, which disagree by up to "
                f"{clocks / 1000:,.1f} ms (limit {limit_us / 1000:,.0f} ms: 1% of the "
                f"{load.duration_s:g} s measured, at least {AGENTS_SKEW_MIN_US / 1000:g} "
                "ms): at each end of the run fewer agents loaded the server; synchronize "
                "the load hosts' clocks (NTP, chrony)")


def _rate_not_kept(load: LoadReport) -> Flag | None:
    rate = load.rate
    if not rate or load.rps >= RATE_KEPT_SHARE * rate:
        return None
    return Flag("rate-not-kept", f"{load.rps:,.0f} req/s completed of {rate:,.0f} asked for")


def _error_responses(load: LoadReport) -> Flag | None:
    errors = {c: n for c, n in load.status_classes.items() if c[0] in "45" and n}
    share = sum(errors.values()) / load.completed if load.completed else 0.0
    if share <= ERROR_RESPONSE_SHARE:
        return None
    classes = ", ".join(f"{n:,} {c}" for c, n in sorted(errors.items()))
    return Flag("error-responses", f"{share:.1%} of {load.completed:,} completed requests "
                f"were answered with an error ({classes}; limit {ERROR_RESPONSE_SHARE:.0%}): "
                "the rate counts error pages, not the pages asked for")


def _starved(load: LoadReport) -> Flag | None:
    conns = load.slots                   # engine schema 2 and later
    if not conns or not load.closed_loop:
        return None
    idle, slots, median = conns.idle, conns.slots, conns.requests_median
    wait_s = conns.longest_wait_max_us / 1e6
    few = conns.requests_p1 < STARVED_SHARE * median
    tail = tail_time_share(load.histogram, STARVED_TAIL) if load.histogram else 0.0
    if not (idle or few or tail >= STARVED_TAIL_TIME):
        return None
    parts = [f"the slowest {STARVED_TAIL:.0%} of requests took {tail:.0%} of the clients' "
             f"time; half the connections waited ≥ {conns.longest_wait_median_us / 1000:,.0f} "
             f"ms for one response, one {wait_s * 1000:,.0f} ms"]
    if idle:
        parts.append(f"{idle} of {slots} connections completed nothing")
    if few or idle:
        parts.append(f"requests per connection: min {conns.requests_min:,}, p1 "
                     f"{conns.requests_p1:,}, median {median:,}, max {conns.requests_max:,}")
    waiting = load.in_flight
    if waiting and waiting.older_than_run:
        parts.append(f"{waiting.older_than_run} requests waited longer than the run "
                     f"(oldest {waiting.age_us_max / 1000:,.0f} ms)")
    return Flag("starved", "; ".join(parts) +
                ": clients waited in turn, the percentiles describe the served requests")


def _littles_law(load: LoadReport) -> Flag | None:
    if not load.closed_loop or not load.rps:
        return None
    mean_us, clients = load.latency_us.mean, load.clients
    if not mean_us or not clients:
        return None
    expected_us = clients / load.rps * 1e6
    if abs(mean_us / expected_us - 1) <= LITTLE_TOLERANCE:
        return None
    said = (f"{clients} clients ({load.connections} connections × {load.streams} "
            "streams)" if load.streams > 1 else f"{clients} connections")
    return Flag("littles-law", f"mean latency {mean_us / 1000:,.3g} ms, but "
                f"{said} / {load.rps:,.0f} req/s = "
                f"{expected_us / 1000:,.3g} ms: some requests are missing from the latency "
                "record (in flight at the end, failed) or time went outside requests")


# Processes created per second above which "outside" CPU may be the lab's own: CGI at a
# few hundred requests a second forks that many; a quiet host forks a handful.
FORKS_UNSEEN = 50


def host_busy(host: dict) -> Flag | None:
    """`host` is the monitor's summary of the measured window (Resources.host)."""
    if host.get("window_unread"):
        return Flag("host-busy", "the host's window was not read (stacklab was stopped "
                    "after the load, before it could be): whether other work disturbed the "
                    "run is unknown, so it is taken as disturbed and not sized")
    outside, steal = host.get("outside_cores"), host.get("steal_share")
    if outside is None:
        return None
    window = host.get("window_s") or 0.0
    core_limit = (HOST_BUSY_CORE_SHARE + host.get("tolerance_cores", 0.0)
                  + (HOST_BUSY_STRAY_S / window if window else 0.0))
    if outside <= core_limit and (steal or 0) <= HOST_STEAL_SHARE:
        return None
    forks = host.get("forks_per_s") or 0
    counted_by_cgroup = host.get("lab_cpu_source") == "cgroup"   # absent: stored before
    why = (f"; but {forks:,.0f} tasks (processes or threads) were created a second: "
           "short-lived ones (CGI scripts, a server's thread per request) are charged to no "
           "lab process, so this may be the lab's own CPU"
           if forks >= FORKS_UNSEEN and not counted_by_cgroup else "")
    return Flag("host-busy", f"processes outside the lab used {outside:.2f} of a core "
                f"and steal was {(steal or 0):.1%} during the measured window "
                f"(limits {core_limit:.2f} core, {HOST_STEAL_SHARE:.0%} steal){why}")


# How much a core of others' work can slow the lab, per core the lab itself used. Had
# the others been idle the lab could have had their cores (others / lab more), but it
# also loses more than their share: it is woken onto a CPU a hog holds, its engine and
# server stop running side by side, each request costs more CPU (nginx c=16 beside one
# hog: +40% CPU a request). Measured on 2 cores, nginx static-page at c=1 and c=16 beside
# one and two one-thread hogs (others 0.45-1.08 cores): slow-down - 1 was 0.14-2.6 times
# others / lab; the gain is that worst case with half again as margin, and
# tests/test_disturbance.py measures it against real hogs each time the tests run.
DISTURBANCE_GAIN = 4.0


def disturbance_factor(host: dict) -> float:
    """The largest slow-down the work measured outside the lab could have caused the
    run: 1 + DISTURBANCE_GAIN × others / lab, where the lab used `lab_cores` of the CPUs
    and others `outside_cores` (plus what the readings cannot tell from the lab's own,
    `tolerance_cores`, and what the hypervisor stole, `steal_share` of the cores). 1.0
    for a run not flagged host-busy; infinite where the window was not measured (no way
    to size it). It sizes throughput and the median latency; a tail percentile waits for
    a hog's whole time slice (p99 0.45 → 4 ms beside one hog) and is not sized."""
    if host_busy(host) is None:
        return 1.0
    lab, outside = host.get("lab_cores"), host.get("outside_cores")
    if not lab or outside is None:
        return float("inf")
    steal = host.get("steal_share") or 0.0
    if steal > HOST_STEAL_SHARE and not host.get("cpus"):
        return float("inf")       # stored before the window said how many cores
    stolen = steal * (host.get("cpus") or 0)
    others = outside + (host.get("tolerance_cores") or 0.0) + stolen
    return 1.0 + DISTURBANCE_GAIN * others / lab


def io_pressure(host: dict, fs: dict, machine: dict) -> Flag | None:
    """Some task waited for disk I/O during more than IO_STALL_SHARE of the window
    (/proc/pressure/io, host-wide) in a run that did not ask for I/O: not a cold cache,
    not a memory profile. The previous run's writeback (16,000 PHP session files) is
    what it caught: a run is settled before it starts (lab.settle), and one that still
    waited is measured again."""
    share = host.get("io_stall_share")
    if share is None or share <= IO_STALL_SHARE:
        return None
    if fs.get("cold_cache") or machine.get("memory_mb"):
        return None       # reading from disk is what the run measures
    return Flag("io-pressure", f"some task waited for disk I/O during {share:.1%} of the "
                f"measured window (limit {IO_STALL_SHARE:.0%}) in a run that reads nothing "
                "from disk: writeback or other I/O on the host slowed it")


def memory_pressure(host: dict, machine: dict) -> Flag | None:
    """`host` is the monitor's summary of the measured window (Resources.host),
    `machine` the machine profile's record (Resources.machine: its knobs and its group's
    usage; empty without a profile)."""
    share = host.get("memory_stall_share")
    kills = machine.get("memory_oom_kills") or 0
    if (share is None or share <= MEMORY_STALL_SHARE) and not kills:
        return None
    waited = ("some task waited for memory during "
              f"{share:.1%} of the measured window (limit {MEMORY_STALL_SHARE:.0%})"
              if share is not None else "no pressure reading")
    limit, peak = machine.get("memory_mb"), machine.get("memory_peak_bytes")
    if limit and (kills or peak is None or peak >= PROFILE_REACHED * limit * 2**20):
        return Flag("memory-limited", f"{waited}, under the machine profile's {limit} MiB "
                    f"limit ({kills} process(es) OOM-killed in its group): the run measures "
                    "the stack short of memory, as the profile asks")
    unlimited = (f"while the machine profile's group stayed under its {limit} MiB "
                 f"(peak {peak / 2**20:,.0f} MiB)" if limit else
                 "with no machine profile limiting the lab's memory")
    return Flag("memory-pressure", f"{waited}, {unlimited}: the host was short of memory "
                "(the lab's own processes or others')")


def server_child_killed(logs: dict) -> Flag | None:
    """`logs` is the runner's (Resources.logs): the server log lines about children that
    died by a signal."""
    died = logs.get("child_signals") or []
    if not died:
        return None
    return Flag("server-child-killed", f"{len(died)} server child process(es) died by a "
                f"signal during the run ({died[0]}): requests were lost and the server ran "
                "short of a worker")
