"""Run flags as pure functions of a stored run: each threshold from both sides."""

from types import SimpleNamespace

import pytest

from stacklab.analysis.analyze import bound, bounded_verdict, invalid
from stacklab.analysis.flags import (BOUNDING, DISTURBED, INVALIDATING, PRESSURE, dispersion,
                                     flag_names, host_busy, memory_pressure, run_flags)
from stacklab.analysis.stats import compare
from stacklab.store.records import Resources

from fakes import fake_load, load_report


from fakes import engine_histogram as histogram   # noqa: E402 (as the engine sends it)


EVEN = histogram([int(6_400 * (0.5 + i / 1000)) for i in range(1000)])


def load(rps=10_000.0, connections=64, mean_us=6_400.0, duration_s=3.0, rate=None,
         per_slot=(900, 950, 1000, 1100), idle=0, wait_us=20_000, in_flight=0,
         histogram=EVEN, schema=2):
    """An engine report (schema 1: without per-connection figures) with these figures."""
    lo, p1, median, hi = per_slot
    doc = fake_load(rps, mean_us, seed=1, duration_s=duration_s, engine_cpu_s=0.2,
                    threads=2, warmup_s=1.0, schema=schema)
    doc["config"].update(connections=connections, rate=rate)
    doc["latency_us"]["mean"] = mean_us
    doc["histogram"] = histogram
    if schema >= 2:
        doc["connections"] = {
            "slots": connections, "idle_slots": idle,
            "requests_per_slot": {"min": lo, "p1": p1, "median": median, "max": hi},
            "longest_wait_us": {"median": wait_us // 2, "max": wait_us}}
        doc["in_flight"] = {"count": in_flight, "age_us_max": 0, "age_us_median": 0,
                            "older_than_run": in_flight}
    return load_report(doc)


def test_an_evenly_served_run_has_no_flag():
    assert flag_names(load(), Resources()) == []


@pytest.mark.parametrize("kw, why", [
    ({"connections": 256, "idle": 200, "per_slot": (0, 0, 0, 4000), "in_flight": 200},
     "200 of 256 connections completed nothing"),
    ({"per_slot": (20, 30, 1000, 1100)}, "min 20"),
    ({"wait_us": 1_500_000, "histogram": histogram([300] * 9900 + [1_200_000] * 100)},
     "the slowest 1% of requests took 98% of the clients' time"),
])
def test_starved_connections_are_flagged_with_their_numbers(kw, why):
    flags = {f.name: f.detail for f in run_flags(load(**kw), Resources())}
    assert "starved" in flags and why in flags["starved"]


def test_a_slow_tenth_of_requests_is_not_starvation():
    """A mix of fast and slow pages (a tenth at 50 ms) puts a lot of time in its tail,
    but far from half of it in the slowest 1%."""
    mixed = histogram([100] * 900 + [50_000] * 100)
    assert "starved" not in flag_names(load(histogram=mixed, wait_us=60_000), Resources())


def test_starvation_is_judged_in_closed_loop_only():
    assert "starved" not in flag_names(load(idle=5, rate=10_000), Resources())


def test_reports_without_per_connection_figures_are_not_judged():
    """Engine schema 1 (runs stored before it) has no per-connection figures."""
    old = load(idle=5, schema=1)
    assert old.slots is None
    assert "starved" not in flag_names(old, Resources())


@pytest.mark.parametrize("mean_us, flagged", [(6_400, False), (5_000, False),
                                              (4_700, True), (8_100, True)])
def test_littles_law(mean_us, flagged):
    """64 connections at 10,000 req/s must spend 6.4 ms per request; ±25% tolerated."""
    flags = {f.name: f.detail for f in run_flags(load(mean_us=mean_us), Resources())}
    assert ("littles-law" in flags) == flagged
    if flagged:
        assert "6.4 ms" in flags["littles-law"]


@pytest.mark.parametrize("host, flagged", [
    ({"outside_cores": 0.02, "steal_share": 0.0}, False),
    ({"outside_cores": 0.35, "steal_share": 0.0}, True),
    ({"outside_cores": 0.02, "steal_share": 0.05}, True),
    # 256 processes' tick rounding can hide 0.1 core of the lab's own time
    ({"outside_cores": 0.12, "steal_share": 0.0, "tolerance_cores": 0.065}, False),
    ({"outside_cores": 0.20, "steal_share": 0.0, "tolerance_cores": 0.065}, True),
    ({}, False),
])
def test_host_busy(host, flagged):
    assert (host_busy(host) is not None) == flagged
    assert ("host-busy" in flag_names(load(), Resources(lab={"host": host}))) == flagged


@pytest.mark.parametrize("stall, machine, flagged", [
    (None, {}, None),                                       # a kernel without PSI
    (0.0, {}, None),
    (0.005, {}, None),                                      # under 1% of the window
    (0.05, {}, "memory-pressure"),                          # the host short of memory
    (0.596, {"memory_mb": 48, "memory_oom_kills": 0, "memory_peak_bytes": 48 << 20},
     "memory-limited"),
    (0.0, {"memory_mb": 48, "memory_oom_kills": 0, "memory_peak_bytes": 48 << 20}, None),
    (None, {"memory_mb": 48, "memory_oom_kills": 2, "memory_peak_bytes": 20 << 20},
     "memory-limited"),
    # a profile never reached: the wait was the host's
    (0.05, {"memory_mb": 48, "memory_oom_kills": 0, "memory_peak_bytes": 20 << 20},
     "memory-pressure"),
])
def test_memory_pressure(stall, machine, flagged):
    """A 48 MiB profile serving 192 MiB of large files: some task waited for memory
    59.6% of the window — what the profile asks, said as such; the same wait with no
    limit is the host's shortage, a bound."""
    host = {} if stall is None else {"memory_stall_share": stall}
    flag = memory_pressure(host, machine)
    assert (flag.name if flag else None) == flagged
    names = flag_names(load(), Resources(lab={"host": host,
                                              **({"machine": machine} if machine else {})}))
    assert [n for n in names if n.startswith("memory")] == ([flagged] if flagged else [])
    if flagged == "memory-limited":
        assert "48 MiB" in flag.detail and "as the profile asks" in flag.detail
    if flagged == "memory-pressure":
        assert "5.0%" in flag.detail and flagged in PRESSURE and flagged in DISTURBED
        assert ("peak 20 MiB" in flag.detail) == bool(machine)
    assert "memory-limited" not in BOUNDING and "memory-limited" not in INVALIDATING


def test_host_busy_is_the_cores_time_less_idle_interrupts_and_steal():
    """A tickless kernel keeps idle in nanoseconds while user and system ticks miss short
    bursts: busy is 2 cores × the span between the readings less idle (and iowait), irq
    and steal; the ticks' figure stays beside it; a core going offline between the two
    readings, or a reading without its time, falls back to the ticks."""
    from stacklab.measure.monitor import HostSample, Monitor, _busy_s
    a = HostSample(0.0, busy_s=100.0, steal_s=1.0, total_s=0.0, self_s=0.0, irq_s=2.0,
                   idle_s=50.0, read_s=0.01, cpus=2)
    b = HostSample(2.0, busy_s=102.9, steal_s=1.1, total_s=0.0, self_s=0.0, irq_s=2.1,
                   idle_s=50.6, read_s=2.01, cpus=2)
    assert _busy_s(a, b) == pytest.approx(4.0 - 0.6 - 0.1 - 0.1)
    m = Monitor({})
    m.host = [a, b]
    window = m.host_window(0.0, 2.0, 3.0)
    assert window["busy_cores"] == 1.6 and window["busy_ticks_cores"] == 1.45
    assert window["irq_cores"] == 0.05 and window["outside_cores"] == 0.1   # (3.2 - 3) / 2
    assert _busy_s(a, HostSample(**{**b.__dict__, "cpus": 1})) == pytest.approx(2.9)
    assert _busy_s(HostSample(**{**a.__dict__, "read_s": 0.0}),
                   HostSample(**{**b.__dict__, "read_s": 0.0})) == pytest.approx(2.9)


def test_host_window_memory_stall_is_a_share_of_the_window():
    from stacklab.measure.monitor import HostSample, Monitor
    m = Monitor({})
    m.host = [HostSample(0.0, 0.0, 0.0, 0.0, 0.0, read_s=0.01, cpus=2, memory_stall_us=5_000),
              HostSample(2.0, 3.0, 0.0, 4.0, 0.0, read_s=2.01, cpus=2,
                         memory_stall_us=1_205_000)]
    assert m.host_window(0.0, 2.0, 2.9)["memory_stall_share"] == 0.6
    m.host[0] = HostSample(0.0, 0.0, 0.0, 0.0, 0.0, read_s=0.01, cpus=2)
    assert m.host_window(0.0, 2.0, 2.9)["memory_stall_share"] is None


def test_repetitions_far_apart_are_flagged():
    """One trial's repetitions 3.7× apart must not pass silently."""
    assert dispersion([10_000, 9_800, 10_300]) is None
    spread = dispersion([10_000, 2_700, 9_900])
    assert spread and "3.7×" in spread.detail


def test_processes_taking_turns_on_the_cpus_are_not_starvation():
    """256 prefork servers on 2 cores: every client served, the slowest 1% waiting a
    scheduler round (~100 ms here) hold ~40% of the time — under the 75% limit."""
    turns = histogram([1_400] * 9_900 + [100_000] * 100)
    assert "starved" not in flag_names(load(histogram=turns, wait_us=400_000), Resources())


def test_host_window_tolerance_grows_with_the_processes_read():
    """The rounding allowance is three standard deviations of N floored tick readings."""
    from stacklab.measure.monitor import HostSample, Monitor, TICKS
    m = Monitor({})
    m.host = [HostSample(0.0, 0.0, 0.0, 0.0, 0.0), HostSample(2.0, 3.0, 0.0, 4.0, 0.0)]
    one, many = m.host_window(0.0, 2.0, 2.9, 1), m.host_window(0.0, 2.0, 2.9, 256)
    assert one["outside_cores"] == many["outside_cores"] == 0.05
    assert many["tolerance_cores"] == round(3 * (256 / 6) ** 0.5 / TICKS / 2.0, 3)
    assert one["tolerance_cores"] < 0.01 < 0.06 < many["tolerance_cores"]


def test_host_busy_says_when_short_lived_processes_may_be_the_lab_own():
    """apache+perl-cgi at 445 req/s: /proc/stat busy 1.95 cores, every live process's
    CPU (with its waited-for children) 0.35: each CGI script lives and dies between two
    samples. The flag stands (nothing proves the host was quiet) and says why it may not
    be other work."""
    cgi = {"window_s": 2.0, "outside_cores": 1.61, "tolerance_cores": 0.01,
           "steal_share": 0.0, "forks_per_s": 445.0}
    flag = host_busy(cgi)
    assert flag.name == "host-busy" and "445 tasks (processes or threads) were created a " \
        "second" in flag.detail and "thread per request" in flag.detail
    quiet = host_busy({**cgi, "forks_per_s": 3.0})
    assert quiet.name == "host-busy" and "created" not in quiet.detail


def test_the_monitor_counts_forks_in_the_window():
    from stacklab.measure.monitor import HostSample, Monitor
    m = Monitor({})
    m.host = [HostSample(0.0, 0.0, 0.0, 0.0, 0.0, 1000), HostSample(2.0, 1.0, 0.0, 4.0, 0.0, 1900)]
    assert m.host_window(0.0, 2.0, 1.0)["forks_per_s"] == 450.0


def answered(statuses: dict[str, int]):
    """load() with these status classes among its completed requests."""
    report = load()
    doc = dict(report.raw)
    doc["requests"] = {**doc["requests"], "completed": sum(statuses.values())}
    doc["status_classes"] = statuses
    return load_report(doc)


@pytest.mark.parametrize("statuses, flagged", [
    ({"2xx": 30_000}, False),
    ({"3xx": 30_000}, False),                        # conditional GETs answered 304
    ({"2xx": 29_800, "5xx": 200}, False),            # 0.67%: within the limit
    ({"2xx": 400, "5xx": 68_000}, True),             # nginx's 502s at S5's c=1024
    ({"2xx": 29_000, "4xx": 1_000}, True),
])
def test_error_responses_are_flagged(statuses, flagged):
    flags = {f.name: f.detail for f in run_flags(answered(statuses), Resources())}
    assert ("error-responses" in flags) == flagged
    if flagged and "5xx" in statuses:
        assert "68,000 5xx" in flags["error-responses"]


def test_a_side_answering_errors_gives_no_verdict_either_way():
    """A rate of 502 pages is no bound on the rate of pages: neither ≥ nor ≤."""
    ok = SimpleNamespace(label="apache", flagged=())
    bad = SimpleNamespace(label="nginx", flagged=("error-responses",))
    busy = SimpleNamespace(label="nginx", flagged=("host-busy",))
    b = bound(ok, bad, True)
    assert b.relation == "?" and "answered errors" in b.why
    verdict = bounded_verdict(compare([1.0, 1.1, 0.9], [11.0, 12.0, 10.0]), b)
    assert verdict.startswith("no verdict, not a measurement")
    assert invalid(ok, busy) is None and invalid(ok, bad).relation == "?"


def test_runs_too_short_for_a_p99_say_how_long_a_run_would_have_to_be():
    from stacklab.analysis.flags import P99_BOUNDED, few_requests
    assert P99_BOUNDED == 368                       # 0.99^368 ≤ 0.025 < 0.99^367
    flag = few_requests([6, 7, 6], 2.0)             # a 300 ms page, 2 s runs
    assert flag.name == "few-requests"
    assert "completed 6 requests (median of 3 runs)" in flag.detail
    assert "lengthen `duration` to about 123 s" in flag.detail
    assert few_requests([368, 400, 5000], 2.0) is None
