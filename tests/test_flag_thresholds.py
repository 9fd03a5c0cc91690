"""Every flag's threshold, just inside and just outside the value stacklab/analysis/flags.py names
and the manual's flags table (docs/flags.md) states (and on it, where the figure is exact in floating
point): a threshold moved or a comparison turned (> for ≥) fails a row here. The values
are written out, not read from flags.py, so the tables are what the manual promises."""

import re
from dataclasses import replace

import pytest

from stacklab.analysis.flags import dispersion, flag_names, host_busy, io_pressure, memory_pressure
from stacklab.analysis.stats import tail_time_share
from stacklab.store.records import Resources

from fakes import engine_histogram, fake_load, load_report
from helpers import ROOT

EVEN = engine_histogram([6_400] * 1000)


def report(rps=10_000.0, connections=64, mean_us=6_400.0, rate=None, cpu_s=0.2,
           per_slot=(900, 1000), histogram=EVEN, statuses=None):
    """A 3 s run (1 s warm-up, 2 threads) with these figures, as the engine reports it
    and the orchestrator reads it; by default it earns no flag."""
    doc = fake_load(rps, mean_us, seed=1, duration_s=3.0, threads=2, warmup_s=1.0)
    doc["config"].update(connections=connections, rate=rate)
    doc["engine"].update(cpu_user_s=cpu_s, cpu_sys_s=0.0)
    doc["latency_us"]["mean"] = mean_us
    doc["histogram"] = histogram
    lo, median = per_slot
    doc["connections"].update(slots=connections, idle_slots=0, requests_per_slot={
        "min": lo, "p1": lo, "median": median, "max": median + 100})
    if statuses:
        doc["status_classes"] = statuses
        doc["status"] = {{"2xx": "200", "5xx": "502"}[c]: n for c, n in statuses.items()}
    return load_report(doc)


def flagged(name: str, load) -> bool:
    return name in flag_names(load, Resources())


def test_the_baseline_report_earns_no_flag():
    assert flag_names(report(), Resources()) == []


@pytest.mark.parametrize("rps, raised", [
    ([1000.0, 1490.0], False), ([1000.0, 1500.0], False),   # 1.5× apart: not over
    ([1000.0, 1510.0], True), ([1000.0, 1200.0, 1510.0], True),
    ([1000.0, 1600.0], True)])
def test_dispersion_over_one_and_a_half(rps, raised):
    assert (dispersion(rps) is not None) == raised


def tail(top_us: int) -> str:
    """9,900 requests of 100 µs and the slowest 1% (100) of `top_us` each."""
    return engine_histogram([100] * 99 + [top_us], total=10_000)


# the slowest 1% hold 100·t / (9,900·100 + 100·t): 75% at t = 29,700 µs; the histogram
# keeps 3 significant digits, so the shares are read back, not assumed
@pytest.mark.parametrize("top_us, raised", [(29_000, False), (29_600, False),
                                            (29_700, True), (30_000, True)])
def test_starved_when_the_slowest_percent_takes_three_quarters(top_us, raised):
    h = tail(top_us)
    share = tail_time_share(h, 0.01)
    assert abs(share - 0.75) < 0.005 and (share >= 0.75) == raised
    assert flagged("starved", report(histogram=h)) == raised


@pytest.mark.parametrize("least, raised", [(51, False), (50, False), (49, True)])
def test_starved_when_the_least_served_percent_has_under_a_twentieth_of_the_median(least,
                                                                             raised):
    assert flagged("starved", report(per_slot=(least, 1000))) == raised


def test_one_connection_served_little_is_not_starvation():
    """The least-served connection alone at 5% of the median, the next ones at 18%: what a
    correctly sized prefork (256 servers, 256 connections, 2 cores) gave in 1 of 15 runs."""
    load = report(connections=256, per_slot=(37, 206))
    load = replace(load, slots=replace(load.slots, requests_min=11))
    assert not flagged("starved", load)


# limit 0.10 core + tolerance_cores + 0.01 s of stray work / window_s, or 2% steal
@pytest.mark.parametrize("host, raised", [
    ({"outside_cores": 0.099}, False), ({"outside_cores": 0.101}, True),
    ({"outside_cores": 0.149, "tolerance_cores": 0.05}, False),
    ({"outside_cores": 0.151, "tolerance_cores": 0.05}, True),
    ({"outside_cores": 0.199, "window_s": 0.1}, False),       # 10 ms over 0.1 s: +0.1
    ({"outside_cores": 0.201, "window_s": 0.1}, True),
    ({"outside_cores": 0.1009, "window_s": 10.0}, False),     # 10 ms over 10 s: +0.001
    ({"outside_cores": 0.1011, "window_s": 10.0}, True),
    ({"outside_cores": 0.24, "tolerance_cores": 0.1, "window_s": 0.25}, False),
    ({"outside_cores": 0.25, "tolerance_cores": 0.1, "window_s": 0.25}, True),
    ({"outside_cores": 0.0, "steal_share": 0.019}, False),
    ({"outside_cores": 0.0, "steal_share": 0.021}, True)])
def test_host_busy_over_a_tenth_of_a_core(host, raised):
    assert (host_busy(host) is not None) == raised


# 64 connections at 10,000 req/s spend 6.4 ms a request: 4.8 and 8.0 ms are ±25%
@pytest.mark.parametrize("mean_us, raised", [(4_790, True), (4_810, False), (6_400, False),
                                             (7_990, False), (8_000, False), (8_010, True)])
def test_littles_law_beyond_a_quarter(mean_us, raised):
    assert flagged("littles-law", report(mean_us=mean_us)) == raised


# 2 threads over 1 s of warm-up and 3 s measured: 8 thread-seconds, 90% of them 7.2 s
@pytest.mark.parametrize("cpu_s, raised", [(7.1, False), (7.2, True), (7.3, True)])
def test_generator_bound_from_nine_tenths_busy(cpu_s, raised):
    assert flagged("generator-bound", report(cpu_s=cpu_s)) == raised


@pytest.mark.parametrize("rps, raised", [(8_990.0, True), (9_000.0, False),
                                         (9_010.0, False)])
def test_rate_not_kept_under_nine_tenths_of_the_rate(rps, raised):
    assert flagged("rate-not-kept", report(rps=rps, rate=10_000)) == raised


# 30,000 completed requests (10,000 req/s for 3 s): 1% is 300
@pytest.mark.parametrize("errors, raised", [(299, False), (300, False), (301, True)])
def test_error_responses_over_one_percent(errors, raised):
    statuses = {"2xx": 30_000 - errors, "5xx": errors}
    assert flagged("error-responses", report(statuses=statuses)) == raised


@pytest.mark.parametrize("stall, raised", [(0.0099, False), (0.01, False), (0.0101, True)])
def test_memory_pressure_over_one_percent_of_the_window(stall, raised):
    flag = memory_pressure({"memory_stall_share": stall}, {})
    assert (flag is not None and flag.name == "memory-pressure") == raised


# A 40 MiB profile, 90% of it 36 MiB (exact in floating point): its group peaking under
# that left memory the run did not use, so a wait was the host's (memory-pressure); at it
# and over, the profile held the run (memory-limited). 0.5 or 0.99 fails a row, ≥ turned
# to > fails the row on it.
MIB = 2**20


@pytest.mark.parametrize("peak_bytes, flagged", [
    (20 * MIB, "memory-pressure"),                          # 50%
    (int(35.6 * MIB), "memory-pressure"),                   # 89%
    (36 * MIB - 1, "memory-pressure"),
    (36 * MIB, "memory-limited"),                           # 90%, on it
    (int(36.4 * MIB), "memory-limited"),                    # 91%
    (int(39.6 * MIB), "memory-limited")])                   # 99%
def test_memory_limited_from_nine_tenths_of_the_profile(peak_bytes, flagged):
    machine = {"memory_mb": 40, "memory_oom_kills": 0, "memory_peak_bytes": peak_bytes}
    flag = memory_pressure({"memory_stall_share": 0.05}, machine)
    assert flag is not None and flag.name == flagged, (peak_bytes / MIB, flag)


@pytest.mark.parametrize("stall, raised", [(0.049, False), (0.05, False), (0.051, True)])
def test_io_pressure_over_five_percent_of_the_window(stall, raised):
    assert (io_pressure({"io_stall_share": stall}, {}, {}) is not None) == raised


def test_the_manual_states_the_thresholds_tested_here():
    """The tables above test the manual's figures; they must still be its figures."""
    table = (ROOT / "docs" / "flags.md").read_text().split("\n## ", 1)[0]
    rows = {m[1]: m[2] for m in re.finditer(r"^\| `([a-z-]+)` \| ([^|]+) \|", table, re.M)}
    for name, stated in {"starved": ("1% least-served connections completed < 5%", "slowest 1%", "≥ 75%"),
                         "littles-law": ("more than 25%",),
                         "generator-bound": ("≥ 90%",), "rate-not-kept": ("< 90%",),
                         "host-busy": ("> 0.10 of a core", "> 2%"),
                         "io-pressure": ("more than 5%",),
                         "memory-pressure": ("more than 1%",),
                         "memory-limited": ("≥ 90%",),
                         "error-responses": ("more than 1%",),
                         "high-dispersion": ("> 1.5×",),
                         "history-dependent": ("2× their spread", "25% of their median")}.items():
        for words in stated:
            assert words in rows[name], (name, words)
