"""The HTML report of a capacity experiment (report/capacity.py): each trial's searches
drawn as latency against offered rate (steps by decision with their intervals, the SLO's
limit, each search's capacity), a table of the capacities and the latency profile, and
an experiment without capacity searches rendered as it always was. Synthetic records,
stored and read back as a report reads them; no server runs."""

from __future__ import annotations

import dataclasses
import json

import pytest

from stacklab.analysis.analyze import load_view
from stacklab.report.capacity import capacity_chart, capacity_table, capacity_trials
from stacklab.report.html import render_html
from stacklab.store import Outcome, RunRecord, Store
from stacklab.store.records import Resources

from fakes import fake_report, fake_resources

SLO = {"slo": "p99<50ms", "percentile": 99.0, "limit_us": 50_000.0,
       "max_error_rate": 0.001, "connections": 16}


def step(phase: str, rate: float | None, p99_ms: float, decision: str | None,
         high_ms: float | None = -1.0, flags: tuple[str, ...] = ()) -> dict:
    """A step as run/capacity.py stores it: p50 a tenth of p99, its interval ±10%
    unless `high_ms` is given (None: unbounded above)."""
    p99 = p99_ms * 1000
    high = p99 * 1.1 if high_ms == -1.0 else high_ms and high_ms * 1000
    return {"phase": phase, "rate": rate, "duration_s": 5.0 if phase != "confirm" else 20.0,
            "achieved": rate or 9000.0, "completed": int(5 * (rate or 9000)), "errors": 0,
            "p50_us": p99 / 10, "p99_us": p99, "interval_us": [p99 * 0.9, high],
            "decision": decision, "reason": f"p99 {decision or 'probe'}",
            "flags": list(flags)}


def search(capacity: float, start: float) -> dict:
    """A search from `start` that resolves at `capacity`: doubling until it fails, one
    undecided step, bisecting, then the profile and the confirmation."""
    steps = [step("probe", None, 3.0, None),
             step("search", start, 2.0, "pass"),
             step("search", start * 2, 4.0, "pass"),
             step("search", start * 4, 400.0, "fail", high_ms=None),
             step("search", capacity, 45.0, "longer"),
             step("search", capacity, 40.0, "pass"),
             step("search", capacity * 1.1, 90.0, "fail", flags=("host-busy",))]
    steps += [step("profile", round(capacity * s), 3.0 + 20 * s, "pass")
              for s in (0.5, 0.8, 0.9)]
    steps.append(step("confirm", round(capacity), 42.0, "pass"))
    return {**SLO, "capacity": capacity, "searched": capacity, "stopped": "resolved",
            "confirmed": True, "steps": steps}


# trial id → (stack, its searches: (capacity, first rate)); apache's rates span > 10×
TRIALS = {"ng": ("nginx", [(7500.0, 2500.0), (7600.0, 2500.0), (7400.0, 2500.0)]),
          "ap": ("apache", [(3000.0, 100.0), (3100.0, 100.0), (2900.0, 100.0)])}


def capacity_experiment(db, with_parts: bool = True) -> int:
    """nginx and apache at 16 connections, three capacity searches each (or, without
    `with_parts`, the same runs with no capacity part: a plain experiment)."""
    store = Store.open(db)
    trials = [(tid, f"{stack} static-page c=16",
               {"stack": stack, "workload": "static-page", "concurrency": 16,
                "knobs": {"load.keepalive": True}, "measure": {"duration_s": 20.0}})
              for tid, (stack, _) in TRIALS.items()]
    exp = store.new_experiment("cap", "cap.toml", "h", {"experiment": {
        "description": "capacity searches"}}, trials,
        {"cores": 2, "cpu_model": "Test CPU", "kernel": "6.1", "memory_mib": 1024},
        "0.1.0", "abc123", "2026-01-01T00:00:00+00:00")
    for tid, (stack, searches) in TRIALS.items():
        for rep, (capacity, start) in enumerate(searches, 1):
            resources = fake_resources(stack, 0.5, 12.0)
            if with_parts:
                resources["_capacity"] = search(capacity, start)
            store.add_run(RunRecord(
                experiment_id=exp, trial_id=tid, repetition=rep, outcome=Outcome.OK,
                started_at="2026-01-01T00:00:00", ended_at="2026-01-01T00:01:00",
                knobs={stack: {}}, versions={stack: "1.0", "stacklab-load": "0.1.0"},
                configs={}, load=fake_report(capacity, 40_000.0, seed=rep),
                resources=resources, run_dir="/tmp/x"))
    store.close()
    return exp


@pytest.fixture(scope="module")
def views(tmp_path_factory):
    found = {}
    for kind, with_parts in (("with", True), ("without", False)):
        db = tmp_path_factory.mktemp(kind) / "c.db"
        capacity_experiment(db, with_parts)
        store = Store.open(db)
        found[kind] = load_view(store, "cap")
        store.close()
    return found


def trial(view, tid: str):
    return next(t for t in capacity_trials(view) if t.summary.trial_id == tid)


def test_the_chart_puts_each_step_at_its_rate_by_decision(views):
    d = capacity_chart(trial(views["with"], "ng")).data
    assert d["rates"] == pytest.approx([2500, 3700, 3750, 3800, 5000, 5920, 6000, 6080, 6660,
                                        6750, 6840, 7400, 7500, 7600, 8140, 8250, 8360, 10000])
    points = d["points"]
    assert len(points) == 3 * 10                        # every step but the probe
    assert {p["phase"] for p in points} == {"search", "profile", "confirm"}
    assert [sum(p["decision"] == k for p in points) for k in ("pass", "fail", "longer")] \
        == [3 * 7, 3 * 2, 3 * 1]
    longer = next(p for p in points if p["decision"] == "longer" and p["run"] == 1)
    assert (longer["rate"], longer["y"]) == (7500.0, 45.0)
    assert longer["low"] == pytest.approx(40.5) and longer["high"] == pytest.approx(49.5)
    assert d["slo_ms"] == 50.0
    assert d["capacities"] == [(1, 7500.0), (2, 7600.0), (3, 7400.0)]
    assert d["xtype"] == "linear"                       # 2,500 to 10,000 req/s


def test_the_chart_draws_the_slo_line_the_capacities_and_unbounded_whiskers(views):
    drawn = capacity_chart(trial(views["with"], "ng"))
    traces = {t["name"]: t for t in drawn.figure["data"]}
    assert traces["SLO p99&lt;50ms"]["y"] == [50.0, 50.0]
    assert traces["run 1 capacity 7,500 req/s"]["x"] == [7500.0, 7500.0]
    assert traces["run 3 capacity 7,400 req/s"]["x"] == [7400.0, 7400.0]
    fail = traces["fail"]
    top = max(fail["y"][i] + fail["error_y"]["array"][i] for i in range(len(fail["y"])))
    edge = 10 ** drawn.figure["layout"]["yaxis"]["range"][1]
    assert top == pytest.approx(edge) and edge > 400     # unbounded: to the plot's edge
    p50 = [t for t in drawn.figure["data"] if t["name"] == "p50"]
    assert len(p50) == 3 and sum(t["showlegend"] for t in p50) == 1
    assert p50[0]["x"] == sorted(p50[0]["x"]) and p50[0]["y"][0] == pytest.approx(0.2)
    import plotly.graph_objects as go
    go.Figure(json.loads(drawn.json()))                 # one plotly accepts


def test_rates_over_more_than_a_decade_are_drawn_on_a_log_axis(views):
    drawn = capacity_chart(trial(views["with"], "ap"))
    assert drawn.data["xtype"] == "log"                  # 100 to 3,410 req/s
    assert drawn.figure["layout"]["xaxis"]["type"] == "log"


def test_the_table_gives_each_search_its_median_and_the_latency_profile(views):
    table = capacity_table(trial(views["with"], "ng"))
    assert table.header == ("run", "capacity req/s", "95% CI or range", "ended", "steps",
                            "flags", "50%: p50 / p99 ms", "80%: p50 / p99 ms",
                            "90%: p50 / p99 ms", "100%: p50 / p99 ms")
    assert table.rows == (
        ("1", "7,500", "", "resolved", "11", "host-busy",
         "1.30 / 13.00", "1.90 / 19.00", "2.10 / 21.00", "4.20 / 42.00"),
        ("2", "7,600", "", "resolved", "11", "host-busy",
         "1.30 / 13.00", "1.90 / 19.00", "2.10 / 21.00", "4.20 / 42.00"),
        ("3", "7,400", "", "resolved", "11", "host-busy",
         "1.30 / 13.00", "1.90 / 19.00", "2.10 / 21.00", "4.20 / 42.00"),
        ("median", "7,500", "range 7,400–7,600", "", "", "",
         "1.30 / 13.00", "1.90 / 19.00", "2.10 / 21.00", "4.20 / 42.00"))


def test_a_search_without_a_confirmed_capacity_has_no_profile(views):
    view = views["with"]
    run = next(r for r in view.runs if r.trial_id == "ng" and r.repetition == 2)
    part = {**run.resources.part("capacity"), "capacity": None, "confirmed": False,
            "stopped": "no-pass"}
    changed = dataclasses.replace(run, resources=Resources(
        run.resources.components, {**run.resources.lab, "capacity": part}))
    view = dataclasses.replace(view, runs=[changed if r is run else r for r in view.runs])
    rows = capacity_table(trial(view, "ng")).rows
    assert rows[1][:4] == ("2", "—", "", "no-pass, not confirmed")
    assert rows[1][6:] == ("—",) * 4
    assert rows[3][1:3] == ("7,450", "range 7,400–7,500")
    assert capacity_chart(trial(view, "ng")).data["capacities"] == [(1, 7500.0), (3, 7400.0)]


def test_a_capacity_part_without_its_steps_is_refused_by_name(views):
    view = views["with"]
    run = view.runs[0]
    part = {k: v for k, v in run.resources.part("capacity").items() if k != "steps"}
    broken = dataclasses.replace(run, resources=Resources(
        run.resources.components, {**run.resources.lab, "capacity": part}))
    with pytest.raises(ValueError,
                       match=r"run 1 of trial \w+: its capacity part has no 'steps'"):
        capacity_trials(dataclasses.replace(view, runs=[broken, *view.runs[1:]]))


def test_the_page_has_a_capacity_section_only_with_capacity_searches(views):
    page = render_html(views["with"])
    start = page.index('\n\n<section id="capacity">')
    end = page.index("</section>\n", start) + len("</section>")
    section = page[start:end]
    assert section.count('<figure class="chart-capacity">') == 2
    assert '<table class="capacity" id="capacity-ng">' in section
    assert "<td>7,500</td><td>range 7,400–7,600</td>" in section
    assert "<td>4.20 / 42.00</td>" in section
    # without capacity parts, the page is the same page with no section: nothing else
    # of it changed
    plain = render_html(views["without"])
    assert 'id="capacity' not in plain and "chart-capacity" not in plain
    assert plain == page[:start] + page[end:]
    assert capacity_trials(views["without"]) == []
