"""The report's charts and per-trial tables for the usual question: one concurrency and a
knob axis. Charts are drawn by variant (one mark each, with whiskers and named ticks),
latency axes carry ms labels at every scale, each workload has its latency spectrum and
its runs second by second, every figure is one Plotly accepts, and error classes and
verdicts appear per trial."""

import dataclasses
import json
import random

import pytest

from stacklab.analysis.analyze import load_view
from stacklab.report import charts
from stacklab.report.html import by_workload, write_html
from stacklab.store import Outcome, RunRecord, Store
from stacklab.measure.verify import Status, Verdict

from fakes import VERDICTS, fake_experiment, fake_load, fake_resources, load_report

WORKERS = ("1", "2", "4", "auto")


def with_timeseries(doc: dict, seed: int, tail_s: float = 0.0) -> dict:
    """`doc` with the engine's per-second buckets over its measured phase: its rate and
    its p99 within a few percent each second. With `tail_s`, the phase lasted that much
    past its last whole second, as a real run's does (its in-flight requests finish
    after the deadline): the engine's last bucket then covers only `tail_s`."""
    rng = random.Random(seed)
    rate = doc["requests"]["completed"] / doc["duration_s"]
    lat = doc["latency_us"]
    points = []
    for t in range(int(doc["duration_s"])):
        completed = int(rate * rng.uniform(0.95, 1.05))
        points.append({"t_s": t, "width_s": 1, "completed": completed, "errors": 0,
                       "p50_us": lat["p50"], "p99_us": int(lat["p99"] * rng.uniform(0.9, 1.1)),
                       "bytes": completed * 3500})
    if tail_s:
        completed = max(1, int(rate * tail_s))
        points.append({"t_s": int(doc["duration_s"]), "width_s": 1, "completed": completed,
                       "errors": 0, "p50_us": lat["p50"], "p99_us": lat["p99"],
                       "bytes": completed * 3500})
        doc["duration_s"] = round(doc["duration_s"] + tail_s, 6)
    doc["timeseries"] = points
    return doc


def knob_experiment(db, reps: int = 3, name: str = "knobs", speeds=None, flags=None,
                    tail_s: float = 0.0) -> int:
    """nginx at one concurrency (16) over nginx.worker_processes, `reps` runs each; the
    variant with 1 worker loses a few requests to timeouts and answers some 503s and has
    a WARN verdict, so the per-trial tables have something to show. `speeds`: each
    variant's req/s (default 10,000 × 1, 1.3, 1.6, 1.9); `flags`: trial id → the flags
    its runs are stored with; `tail_s`: with_timeseries's."""
    speeds = speeds or [10000.0 * (1 + 0.3 * k) for k in range(len(WORKERS))]
    flags = flags or {}
    store = Store.open(db)
    trials = [(f"wp{w}", f"nginx static-page c=16 nginx.worker_processes={w}",
               {"stack": "nginx", "workload": "static-page", "concurrency": 16,
                "knobs": {"nginx.worker_processes": w, "load.keepalive": True},
                "measure": {"duration_s": 2.0}}) for w in WORKERS]
    exp = store.new_experiment(name, f"{name}.toml", "h", {"experiment": {
        "description": "one concurrency, a knob axis"}}, trials,
        {"cores": 2, "cpu_model": "Test CPU", "kernel": "6.1", "memory_mib": 1024},
        "0.1.0", "abc123", "2026-01-01T00:00:00+00:00")
    for rep in range(1, reps + 1):
        for k, (tid, _, d) in enumerate(trials):
            rps = speeds[k] * (1 + (rep - 2) * 0.02)
            doc = with_timeseries(fake_load(rps, 1e6 * 16 / rps, seed=rep + 10 * k), rep,
                                  tail_s)
            verdicts = VERDICTS
            if tid == "wp1":
                doc["requests"]["failed"] = 7
                doc["requests"]["errors"]["timeout"] = 5
                doc["requests"]["errors"]["connect"] = 2
                doc["status_classes"]["5xx"] = 3
                verdicts = VERDICTS + (Verdict("nginx", "workers", Status.WARN,
                                               "1 worker on 2 cores"),)
            store.add_run(RunRecord(
                experiment_id=exp, trial_id=tid, repetition=rep, outcome=Outcome.OK,
                started_at="2026-01-01T00:00:00", ended_at="2026-01-01T00:00:03",
                knobs={"nginx": {"worker_processes": d["knobs"]["nginx.worker_processes"]}},
                versions={"nginx": "1.0", "stacklab-load": "0.1.0"},
                configs={"nginx/x.conf": "listen 127.0.0.1:8080;"}, verdicts=verdicts,
                load=load_report(doc), resources=fake_resources("nginx", 2.0 * rps * 2e-5, 12.0),
                flags=list(flags.get(tid, ())), run_dir="/tmp/x"))
    store.close()
    return exp


@pytest.fixture
def knob_view(tmp_path):
    knob_experiment(tmp_path / "k.db")
    store = Store.open(tmp_path / "k.db")
    yield load_view(store, "knobs")
    store.close()


def drawn(view):
    (_, part), = by_workload(view)
    return {chart.name: d for chart, d in charts.draw(part)}


def test_one_concurrency_draws_one_mark_per_variant_with_whiskers(knob_view):
    d = drawn(knob_view)
    tp = d["throughput"].data
    assert tp["mode"] == "variant"
    assert len(tp["variants"]) == len(tp["marks"]) == 4
    assert [any(f"={w}" in label for label in tp["xticklabels"]) for w in WORKERS] == [True] * 4
    for m in tp["marks"]:
        assert m["low"] < m["y"] < m["high"]           # a whisker, not a zero-width band
        assert m["interval"] == "min–max range" and m["runs"] == 3
    assert "min–max range" in d["throughput"].figure["layout"]["title"]["text"]
    lat = d["latency"].data
    assert sorted(m["percentile"] for m in lat["marks"]) == ["p50"] * 4 + ["p99"] * 4
    assert all(m["low"] <= m["y"] <= m["high"] for m in lat["marks"])
    assert lat["yticklabels"]                          # ms labels though < a decade
    for name in ("transfer", "cpu", "memory"):
        assert len(d[name].data["marks"]) == 4


def test_six_runs_give_a_bootstrap_ci_whisker(tmp_path):
    knob_experiment(tmp_path / "k6.db", reps=6)
    store = Store.open(tmp_path / "k6.db")
    d = drawn(load_view(store, "knobs"))
    store.close()
    assert {m["interval"] for m in d["throughput"].data["marks"]} == {"95% CI of the median"}


def test_several_concurrencies_are_still_drawn_against_concurrency(tmp_path):
    fake_experiment(tmp_path / "r.db")
    store = Store.open(tmp_path / "r.db")
    d = drawn(load_view(store, "fixed"))
    store.close()
    assert d["throughput"].data["mode"] == "concurrency"
    assert len(d["spectrum"].data["lines"]) == 4      # one per trial (stack × c)


@pytest.mark.parametrize("low, high", [(0.8, 1.5), (2.1, 2.9), (2.05, 2.2), (0.05, 40.0),
                                       (0.012, 9000.0)])
def test_ms_axis_labels_every_scale(low, high):
    axis = charts.ms_axis(low, high)
    ticks = axis["tickvals"]
    assert len(ticks) >= 2, ticks
    assert all(low / 1.15 <= t <= high * 1.15 for t in ticks)
    assert axis["ticktext"] == [f"{t:g}" for t in ticks]
    assert len(ticks) <= 20                            # 1-2-5 over several decades
    assert axis["type"] == "log" and axis["title"]["text"] == "latency, ms"


def test_every_figure_is_one_plotly_accepts_with_its_legend_outside(knob_view, tmp_path):
    """The figures are plain dicts (fast); plotly's own classes validate every property
    here, for both layouts of the charts."""
    import plotly.graph_objects as go
    fake_experiment(tmp_path / "r.db")
    store = Store.open(tmp_path / "r.db")
    views = [knob_view, load_view(store, "fixed")]
    for view in views:
        for name, d in drawn(view).items():
            go.Figure(json.loads(d.json()))            # raises on an unknown property
            legend = d.figure["layout"]["legend"]
            assert legend["x"] > 1 and legend["xanchor"] == "left", name
            assert d.figure["layout"]["showlegend"] is True
    store.close()


def test_a_figure_carries_no_markup_or_control_character_from_outside():
    s = charts.label("nginx a<b>&c\x1b[31m\x00")
    assert s == "nginx a&lt;b&gt;&amp;c[31m"
    fig = charts.Drawn({"data": [{"name": "</script><script>alert(1)</script>"}]}).json()
    assert "<" not in fig and ">" not in fig and json.loads(fig)["data"][0]["name"].startswith(
        "</script>")


def test_per_second_series_of_every_repetition(knob_view):
    d = drawn(knob_view)["persecond"]
    series = d.data["series"]
    assert len(series) == 4                            # one per variant
    for name, runs in series.items():
        assert [r["repetition"] for r in runs] == [1, 2, 3]
        for r in runs:
            assert r["t_s"] == [0, 1]
            assert all(v is not None and v > 0 for v in r["p99_ms"])
    wp4 = next(runs for name, runs in series.items() if "worker_processes=4" in name)
    assert wp4[1]["rps"][0] == pytest.approx(10000 * 1.6, rel=0.06)   # rep 2: no drift
    assert d.data["yticklabels"]                       # the p99 axis, in ms
    shown = [t for t in d.figure["data"] if t.get("showlegend")]
    assert len(shown) == 4 and len(d.figure["data"]) == 4 * 3 * 2   # rps and p99 lines
    assert "p99" in d.figure["layout"]["title"]["text"]


def test_runs_without_a_per_second_series_say_so(tmp_path):
    fake_experiment(tmp_path / "r.db")                 # timeseries: [] in every run
    store = Store.open(tmp_path / "r.db")
    d = drawn(load_view(store, "fixed"))["persecond"]
    store.close()
    assert d.data["series"] == {}
    assert "no per-second series" in d.figure["layout"]["annotations"][0]["text"]


def test_spectrum_per_variant_up_to_what_the_sample_resolves(knob_view):
    """A histogram of n values shows q where 1/(1-q) ≤ n, then its maximum: 3 runs of
    2 s at 10,000 req/s (60,000 values) reach p99.995, at 19,000 (114,000) p99.999."""
    lines = drawn(knob_view)["spectrum"].data["lines"]
    assert len(lines) == 4
    counts = {s.label.split()[-1]: s.latency_us["count"] for s in knob_view.summaries}
    assert sorted(counts.values()) == [60_000, 78_000, 96_000, 114_000]
    for name, points in lines.items():
        qs, n = [q for q, _ in points], counts[name.split()[-1]]
        top = 99.999 if n >= 100_000 else 99.995
        assert qs[:-1] == [q for q in charts.SPECTRUM if q <= top]
        assert qs[-1] == pytest.approx(100 * (1 - 1 / (2 * n)))
        values = [v for _, v in points]
        assert values == sorted(values)


def test_error_classes_and_verdicts_per_trial_in_the_html(knob_view, tmp_path):
    html = write_html(knob_view, tmp_path / "k.html").read_text()
    table = html[html.index('id="outcomes-static-page"'):]
    table = table[:table.index("</table>")]
    assert table.count("<tr>") == 1 + 4
    row = next(r for r in table.split("<tr>") if "worker_processes=1<" in r)
    assert '<td class="fail">15</td>' in row          # 5 timeouts × 3 runs
    assert "5xx 9" in row
    assert "<details>" in row and "1 WARN" in row and "1 worker on 2 cores" in row
    assert "chart-spectrum" in html


def series_of(duration_s: float, tail_s: float, rate: float = 1000.0) -> dict:
    """per_second of one run of `duration_s` whole seconds at `rate` and `tail_s` more."""
    doc = with_timeseries(fake_load(rate, 16000, seed=1, duration_s=duration_s), 1, tail_s)
    return charts.per_second(load_report(doc))


@pytest.mark.parametrize("tail_s", [0.3, 0.5, 0.95])
def test_the_last_partial_bucket_is_divided_by_its_real_length(tail_s):
    ts = series_of(3.0, tail_s)
    assert ts["t_s"] == [0, 1, 2, 3]
    assert ts["length_s"] == [1, 1, 1, pytest.approx(tail_s)]
    # at the run's rate, not tail_s × it (the drop every run showed at its end)
    assert ts["rps"][-1] == pytest.approx(1000, rel=0.05)
    assert min(ts["rps"]) > 0.9 * max(ts["rps"])


@pytest.mark.parametrize("tail_s", [0.002, 0.05, 0.099])
def test_a_bucket_shorter_than_a_tenth_of_a_second_is_left_out(tail_s):
    ts = series_of(3.0, tail_s)
    assert ts["t_s"] == [0, 1, 2]                    # no spike, no drop to zero
    assert all(v == pytest.approx(1000, rel=0.06) for v in ts["rps"])


def test_a_stall_up_to_the_end_shows_as_seconds_at_zero():
    """The engine makes buckets as requests end: after the last one, the seconds in
    which nothing ended are zeros (the run's duration says they passed)."""
    doc = with_timeseries(fake_load(1000.0, 16000, seed=1, duration_s=2.0), 1)
    doc["duration_s"] = 4.5                          # 2.5 s in which nothing completed
    ts = charts.per_second(load_report(doc))
    assert ts["t_s"] == [0, 1, 2, 3, 4]
    assert ts["rps"][2:] == [0, 0, 0] and ts["p99_ms"][2:] == [None, None, None]
    assert ts["length_s"][-1] == pytest.approx(0.5)


@pytest.mark.parametrize("values, kind", [([1000, 9000], "linear"), ([1000, 10000], "linear"),
                                          ([1000, 10001], "log"), ([0.3, 40], "log"),
                                          ([0, 1000, 50000], "linear"), ([], "linear")])
def test_a_value_axis_turns_log_past_a_decade(values, kind):
    axis = charts.value_axis("requests/s", values)
    assert axis.get("type", "linear") == kind
    if kind == "log":
        assert len(axis["tickvals"]) >= 2 and axis["ticktext"][0] in ("1,000", "0.5")
    else:
        assert axis["rangemode"] == "tozero"


def test_charts_spanning_more_than_a_decade_are_drawn_on_log_axes(tmp_path):
    """nginx 20× apache: throughput and transfer span more than a decade, so do their
    per-second rates; each chart decides by its own values."""
    fake_experiment(tmp_path / "r.db", speed={"nginx": 200000.0, "apache": 10000.0})
    store = Store.open(tmp_path / "r.db")
    d = drawn(load_view(store, "fixed"))
    store.close()
    assert d["throughput"].data["ytype"] == "log"
    assert d["throughput"].figure["layout"]["yaxis"]["type"] == "log"
    assert d["transfer"].data["ytype"] == "log"
    assert d["memory"].data["ytype"] == "linear"       # 11 to 26 MiB


def test_a_chart_within_a_decade_stays_linear(knob_view):
    d = drawn(knob_view)
    assert {d[n].data["ytype"] for n in ("throughput", "transfer", "persecond")} == {"linear"}


def distorted_view(view, trial_ids, flag="starved"):
    """`view` with the trials `trial_ids` flagged `flag` (their percentiles distorted)."""
    return dataclasses.replace(view, summaries=[
        dataclasses.replace(s, flagged=(*s.flagged, flag)) if s.trial_id in trial_ids else s
        for s in view.summaries])


def test_a_distorted_percentile_is_drawn_hollow_and_dashed_by_variant(knob_view):
    d = drawn(distorted_view(knob_view, {"wp2"}))
    marks = d["latency"].data["marks"]
    bad = [m for m in marks if m["distorted"]]
    assert {(m["percentile"], m["distorted"]) for m in bad} == {("p50", "starved"),
                                                                ("p99", "starved")}
    assert all("worker_processes=2" in m["variant"] for m in bad)
    traces = d["latency"].figure["data"]
    hollow = [t for t in traces if "distorted" in t["name"]]
    assert {t["marker"]["symbol"] for t in hollow if t["mode"] == "markers"} == {"circle-open"}
    assert {t["line"]["dash"] for t in hollow if t["mode"] == "lines"} == {"dash"}
    assert all("error_y" not in t for t in hollow)   # a dashed whisker, not a solid one
    solid = [t for t in traces if "distorted" not in t["name"]]
    assert sum(len(t["x"]) for t in solid) == 2 * 3   # p50 and p99 of the three others
    assert sorted(t["name"] for t in hollow if t.get("showlegend", True)) == [
        "p50, distorted (starved)", "p99, distorted (starved)"]     # the legend says so
    assert "hollow, dashed = distorted" in d["latency"].figure["layout"]["title"]["text"]
    spectrum = d["spectrum"]
    assert len(spectrum.data["distorted"]) == 1
    line = next(t for t in spectrum.figure["data"] if "distorted" in t["name"])
    assert line["line"]["dash"] == "dash" and line["marker"]["symbol"] == "circle-open"


def test_a_distorted_percentile_breaks_its_line_against_concurrency(tmp_path):
    fake_experiment(tmp_path / "r.db")
    store = Store.open(tmp_path / "r.db")
    view = load_view(store, "fixed")
    store.close()
    d = drawn(distorted_view(view, {"ap0000000016"}, "littles-law"))["latency"]
    assert d.data["distorted"] == ["apache static-page p50", "apache static-page p90",
                                   "apache static-page p99"]
    traces = {t["name"]: t for t in d.figure["data"]}
    solid = traces["apache static-page p99"]
    assert solid["x"] == [1, 16] and solid["y"][1] is None and solid["y"][0] > 0
    dashed = traces["apache static-page p99, distorted (littles-law)"]
    assert dashed["line"]["dash"] == "dash"
    assert dashed["x"] == [1, 16]                     # from its neighbour to the point
    assert dashed["marker"]["symbol"] == ["diamond", "diamond-open"]
    assert dashed["marker"]["size"][0] == 0           # the neighbour keeps its own mark
    assert all("distorted" not in n for n in traces if n.startswith("nginx"))


def test_the_baseline_is_drawn_beside_each_variant(knob_view):
    reference = charts.Reference("base", {s.trial_id: s for s in knob_view.summaries})
    d = charts.throughput_chart(knob_view, reference)
    base = next(t for t in d.figure["data"] if t["name"] == "baseline base")
    assert base["y"] == [s.rps.median for s in knob_view.summaries]
    assert len(d.data["baseline"]) == 4
    partial = charts.Reference("base", {"wp4": knob_view.summaries[0]})
    d = charts.throughput_chart(knob_view, partial)
    base = next(t for t in d.figure["data"] if t["name"] == "baseline base")
    assert base["x"] == [2] and base["y"] == [knob_view.summaries[0].rps.median]
    assert all(t["name"] != "baseline base" for t in charts.throughput_chart(knob_view)
               .figure["data"])


def test_distorted_baseline_and_log_figures_are_ones_plotly_accepts(knob_view, tmp_path):
    import plotly.graph_objects as go
    from stacklab.analysis.analyze import Decision
    fake_experiment(tmp_path / "r.db", speed={"nginx": 200000.0, "apache": 10000.0})
    store = Store.open(tmp_path / "r.db")
    fixed = distorted_view(load_view(store, "fixed"), {"ap0000000016"})
    store.close()
    reference = charts.Reference("base", {s.trial_id: s for s in knob_view.summaries})
    figures = [*drawn(distorted_view(knob_view, {"wp1"})).values(), *drawn(fixed).values(),
               charts.throughput_chart(knob_view, reference),
               charts.baseline_chart([charts.Ratio("a", "req/s", 2.0, (1.8, 2.2),
                                                   Decision("better")),
                                      charts.Ratio("a", "p99 ms", 0.9, (0.5, 1.6),
                                                   Decision("no-verdict", "host-busy"))],
                                     "base")]
    for d in figures:
        go.Figure(json.loads(d.json()))


@pytest.mark.parametrize("low, high, expected", [
    (0.6, 1.6, [0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5]),
    (0.004, 1.0, [0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.67, 0.8, 0.9, 1.0, 1.1])])
def test_a_ratio_axis_has_ticks_either_side_of_one(low, high, expected):
    assert charts.ratio_ticks(low, high) == expected
