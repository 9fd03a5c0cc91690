"""Several agents' engine reports as one (agents.merge): counts add up, the latency is
the agents' histograms merged bucket for bucket, what no report holds whole is bounded
and named, one agent's report passes through unchanged, and agents running different
engines are refused."""

import pytest

from stacklab.agents.merge import merge_reports
from stacklab.analysis.stats import decode_histogram, values_at_percentiles
from stacklab.errors import EngineError
from stacklab.measure.drive import LoadReport

from fakes import fake_load

ABOUT = [{"name": f"agent-{k}", "host": "lab", "netns": None, "address": None}
         for k in range(3)]


def docs(n=3):
    return [fake_load(300 + 10 * k, 2000 + 500 * k, seed=k + 1, completed=600 + k)
            for k in range(n)]


def test_counts_add_up_and_the_latency_is_the_merged_histogram():
    parts = docs()
    merged = merge_reports(parts, ABOUT)
    report = LoadReport.from_json(merged)
    assert report.completed == sum(d["requests"]["completed"] for d in parts)
    # the engine's rule: completed over the measured phase (the agents' overlap)
    assert report.rps == pytest.approx(report.completed / max(d["duration_s"] for d in parts))
    assert report.connections == sum(d["config"]["connections"] for d in parts)
    assert report.engine_cpu_s == pytest.approx(sum(d["engine"]["cpu_user_s"]
                                                    + d["engine"]["cpu_sys_s"] for d in parts))
    union = decode_histogram(parts[0]["histogram"])
    for d in parts[1:]:
        union.add(decode_histogram(d["histogram"]))
    h = decode_histogram(merged["histogram"])
    assert h.get_total_count() == union.get_total_count() == report.completed
    assert [h.get_count_at_index(i) for i in range(h.counts_len)] == \
        [union.get_count_at_index(i) for i in range(union.counts_len)]
    p50, p99 = values_at_percentiles(union, [50, 99])
    assert (report.latency_us.p50, report.latency_us.p99) == (p50, p99)
    assert report.latency_us.max == max(d["latency_us"]["max"] for d in parts)
    # time to first byte and connect: their histograms merge the same way
    for kind, key in (("ttfb", "ttfb_us"), ("connect", "connect_us")):
        union = decode_histogram(parts[0]["histograms"][kind])
        for d in parts[1:]:
            union.add(decode_histogram(d["histograms"][kind]))
        assert merged[key]["count"] == union.get_total_count()
        assert merged[key]["p99"] == values_at_percentiles(union, [99])[0]
        assert decode_histogram(merged["histograms"][kind]).get_total_count() == \
            union.get_total_count()


def test_what_no_report_holds_whole_is_an_upper_bound_and_said_so():
    parts = docs()
    merged = merge_reports(parts, ABOUT)
    assert merged["latency_uncorrected_us"]["p99"] == max(
        d["latency_uncorrected_us"]["p99"] for d in parts)
    # pooled mean: exact
    n = sum(d["latency_uncorrected_us"]["count"] for d in parts)
    mean = sum(d["latency_uncorrected_us"]["count"] * d["latency_uncorrected_us"]["mean"]
               for d in parts) / n
    assert merged["latency_uncorrected_us"]["mean"] == pytest.approx(mean, abs=1e-3)
    said = " ".join(merged["agents"]["approximate"])
    assert "latency_uncorrected_us" in said and "connections" in said


def test_each_agent_is_described_beside_the_merged_figures():
    parts = docs()
    per = merge_reports(parts, ABOUT)["agents"]["per_agent"]
    assert [a["name"] for a in per] == ["agent-0", "agent-1", "agent-2"]
    assert [a["completed"] for a in per] == [600, 601, 602]
    assert all(0 < a["busy"] < 1 for a in per)


def test_one_agent_passes_through():
    (one,) = docs(1)
    merged = merge_reports([one], ABOUT[:1])
    assert {k: v for k, v in merged.items() if k != "agents"} == \
        {k: v for k, v in one.items() if k in merged}


def test_agents_running_different_engines_are_refused():
    parts = docs(2)
    parts[1]["engine"]["version"] = "0.0.9"
    with pytest.raises(EngineError, match="agent-0 0.1.0, agent-1 0.0.9"):
        merge_reports(parts, ABOUT[:2])


def merged_report(starts_us, offsets_us=None, cpu=None, duration_s=2.0):
    parts = [fake_load(300, 2000, seed=k + 1, completed=600, duration_s=duration_s,
                       threads=1, engine_cpu_s=(cpu or [0.2] * 3)[k]) for k in range(3)]
    for doc, start in zip(parts, starts_us):
        doc["start"] = {"asked_unix_us": 1_000_000, "unix_us": start,
                        "first_send_unix_us": start + 10}
    about = [dict(a, clock_offset_us=o) for a, o in
             zip(ABOUT, offsets_us or [0, 0, 0])]
    return LoadReport.from_json(merge_reports(parts, about))


def flag(load, name):
    from stacklab.analysis.flags import run_flags
    from stacklab.store.records import Resources
    return next((f for f in run_flags(load, Resources()) if f.name == name), None)


def test_agents_that_start_apart_are_flagged_with_both_spreads():
    assert flag(merged_report([1_000_000, 1_000_400, 1_001_500]), "agents-skewed") is None
    late = flag(merged_report([1_000_000, 1_000_400, 1_030_000]), "agents-skewed")
    assert late and "30.0 ms apart" in late.detail and "limit 20 ms" in late.detail
    # started together by their own clocks, which disagree by 50 ms
    clocks = flag(merged_report([1_000_000] * 3, [0, 50_000, -1_000]), "agents-skewed")
    assert clocks and "disagree by up to 51.0 ms" in clocks.detail
    # 1% of a 10 s run is 100 ms
    assert flag(merged_report([1_000_000, 1_000_000, 1_090_000], duration_s=10.0),
                "agents-skewed") is None


@pytest.mark.parametrize("duration_s, limit_ms", [
    (0.5, 20),       # 1% is 5 ms: the 20 ms floor rules
    (1.0, 20),       # 1% is 10 ms
    (3.0, 30),       # 1% of the run above the floor
    (10.0, 100),
])
def test_agents_skewed_holds_at_its_edges(duration_s, limit_ms):
    """The rule's edges: at the limit, max(20 ms, 1% of the measured phase), not flagged;
    1 µs past it, flagged, by the start skew or by the clocks' spread alike. Moving the
    floor (to 5 ms, say) or the share fails a row."""
    limit_us = limit_ms * 1000
    for at, flagged in ((limit_us, False), (limit_us + 1, True)):
        skewed = merged_report([1_000_000, 1_000_000 + at // 2, 1_000_000 + at],
                               duration_s=duration_s)
        clocks = merged_report([1_000_000] * 3, [0, at, at // 3], duration_s=duration_s)
        for load in (skewed, clocks):
            found = flag(load, "agents-skewed")
            assert (found is not None) == flagged, (duration_s, at, found)
            if found:
                assert f"limit {limit_ms} ms: 1% of the {duration_s:g} s measured, at " \
                    "least 20 ms" in found.detail


def test_one_saturated_agent_is_generator_bound_by_name():
    fine = merged_report([1_000_000] * 3, cpu=[0.4, 0.4, 0.4])
    assert flag(fine, "generator-bound") is None
    bound = flag(merged_report([1_000_000] * 3, cpu=[0.4, 1.95, 0.4]), "generator-bound")
    assert bound and "agent-1 (1 thread(s) busy 98%)" in bound.detail
    assert "agent-0" not in bound.detail


def test_a_replays_schedule_is_the_agents_shares_added_up():
    parts = docs()
    for k, d in enumerate(parts):
        d["config"]["schedule"] = {"requests": 100 + k, "span_s": 10.0 - k / 100}
    merged = LoadReport.from_json(merge_reports(parts, ABOUT))
    # as one engine's replay of all 303: 302 gaps over the longest span (drive's rule)
    assert merged.rate == pytest.approx((303 - 1) / 10.0)


def test_agents_whose_responses_came_in_different_protocols_are_refused():
    parts = docs(2)
    parts[1]["protocol"] = "h2c"
    with pytest.raises(EngineError, match="agent-0 http/1.1, agent-1 h2c"):
        merge_reports(parts, ABOUT[:2])


@pytest.mark.parametrize("skew_us, said", [(1, "at most 1 µs apart"),
                                           (1500, "at most 1.50 ms apart"),
                                           (None, None)])     # no start reported
def test_show_says_how_far_apart_the_agents_started_in_a_unit_that_shows_it(skew_us, said):
    from types import SimpleNamespace
    from stacklab.report.text import agent_lines
    agents = {"count": 2, "start_skew_us_max": skew_us, "overhead_s": 0.37, "per_agent": {
        "agent-0": {"host": "vm", "netns": "ns0", "connections": 2, "rps": 1000.0,
                    "busy": 0.07, "p99_us": 418}}}
    [head, agent] = agent_lines(SimpleNamespace(agents=agents), "nginx")
    assert head == (f"load agents of nginx: 2, started {said}, 0.37 s spent beside each load"
                    if said else "load agents of nginx: 2")
    assert agent == "  agent-0 (ns0): 2 connections, 1,000 req/s, engine busy 7%, p99 0.42 ms"


def test_each_seconds_mean_latency_is_weighted_by_the_requests_each_agent_completed():
    parts = docs(2)
    for doc, (completed, mean) in zip(parts, [(100, 1_000.0), (300, 2_000.0)]):
        doc["timeseries"] = [{"t_s": 0, "width_s": 1, "completed": completed, "errors": 0,
                              "p50_us": int(mean), "p99_us": int(mean), "mean_us": mean,
                              "bytes": 0}]
    [second] = merge_reports(parts, ABOUT[:2])["timeseries"]
    assert second["completed"] == 400
    assert second["mean_us"] == pytest.approx((100 * 1_000 + 300 * 2_000) / 400)
    assert LoadReport.from_json(merge_reports(parts, ABOUT[:2])).timeseries[0].mean_us == \
        pytest.approx(1_750.0)
