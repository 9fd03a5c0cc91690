"""Access-log replay (issue 24): the log parsed (Common and Combined Log Format, bad
lines counted by reason with their first line), its arrival times scaled to a rate, the
experiment file's load.replay checked before anything starts, the URLs the site lacks
reported before the load (and a run refused past the share), the engine's URL list and
schedule; and one short replay through the real engine on a real nginx on loopback."""

import json
import os
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest

from stacklab.errors import SpecError, VerificationFailed
from stacklab.experiment.spec import parse_spec
from stacklab.host.net import Endpoint
from stacklab.measure.drive import (LOAD_KNOBS, LoadPlan, _average_rate, engine_argv,
                                     schedule_lines, url_lines)
from stacklab.run.replay import MISSING_SHARE, replay_plan
from stacklab.workloads.accesslog import (Request, arrival_offsets, parse_line, parse_log,
                                          read_log)

from fakes import use_fake_engine
from helpers import ROOT, require_engine, server_processes
from test_reliability import invoke, rows

SAMPLE = ROOT / "presets" / "sample-access.log"
T = "10/Oct/2026:13:55:36 -0700"
EPOCH = datetime(2026, 10, 10, 20, 55, 36, tzinfo=timezone.utc).timestamp()   # T
COMBINED = ('203.0.113.5 - frank [{t}] "{req}" {status} 2326 "http://example.com/" '
            '"Mozilla/5.0 (X11; \\"quoted\\")"')
CLF = '203.0.113.5 - - [{t}] "{req}" {status} {size}'


def combined(req="GET /a.html HTTP/1.1", status="200", t=T):
    return COMBINED.format(t=t, req=req, status=status)


def clf(req="GET /a.html HTTP/1.0", status="200", size="512", t=T):
    return CLF.format(t=t, req=req, status=status, size=size)


@pytest.mark.parametrize("text, want", [
    (clf(), Request(0, "GET", "/a.html", EPOCH)),
    (clf(size="-"), Request(0, "GET", "/a.html", EPOCH)),          # no body: "-"
    (combined(), Request(0, "GET", "/a.html", EPOCH)),
    (combined("HEAD /a.html HTTP/1.1"), Request(0, "HEAD", "/a.html", EPOCH)),
    (combined("GET /s?q=a+b&p=2 HTTP/1.1"), Request(0, "GET", "/s?q=a+b&p=2", EPOCH)),
    (combined("GET /old", "301"), Request(0, "GET", "/old", EPOCH)),  # HTTP/0.9, 3xx
    (combined(status="304"), Request(0, "GET", "/a.html", EPOCH)),
    (combined("POST /form HTTP/1.1"), "method POST"),
    (combined("DELETE /a HTTP/1.1", "204"), "method DELETE"),
    (combined(status="404"), "status 4xx"),
    (combined(status="502"), "status 5xx"),
    (combined(status="101"), "status 1xx"),
    ("", "empty line"),
    ("   ", "empty line"),
    ("just some words", "not Common or Combined Log Format"),
    (combined()[:60], "not Common or Combined Log Format"),           # cut short
    (combined(t="2026-10-10T13:55:36Z"), "bad timestamp"),
    (combined("\\x16\\x03\\x01\\x02\\x00\\x01", "400"), "bad request line"),
    (combined("-", "400"), "bad request line"),
    (combined("get /a HTTP/1.1"), "bad request line"),
    (combined("GET http://other.example/x HTTP/1.1"), "absolute URL (a proxy's request)"),
    (combined("GET /caf\u00e9 HTTP/1.1"), "path not /… in visible ASCII"),
    (combined("GET * HTTP/1.1"), "path not /… in visible ASCII"),
])
def test_a_line_is_a_request_or_says_why_not(text, want):
    assert parse_line(text) == want


def test_bad_lines_are_counted_by_reason_with_their_first_line():
    lines = [combined(), "garbage", combined("POST /f HTTP/1.1"), clf(), "", "more garbage",
             combined(status="404"), combined("HEAD /a.html HTTP/1.1"),
             combined(t="yesterday")]
    log = parse_log(lines)
    assert [(r.line, r.method, r.path) for r in log.requests] == [
        (1, "GET", "/a.html"), (4, "GET", "/a.html"), (8, "HEAD", "/a.html")]
    report = log.report
    assert (report.lines, report.replayable) == (9, 3)
    assert report.to_json()["unreadable"] == {
        "not Common or Combined Log Format": {"lines": 2, "first_line": 2},
        "empty line": {"lines": 1, "first_line": 5},
        "bad timestamp": {"lines": 1, "first_line": 9}}
    assert dict(report.other_methods) == {"POST": 1}
    assert dict(report.other_statuses) == {"4xx": 1}
    said = report.said()
    assert said.startswith("3 of 9 lines replayable")
    assert "2 not Common or Combined Log Format (first line 2)" in said
    assert "1 POST" in said and "1 4xx" in said
    # every line is accounted for: replayed, counted apart, or unreadable
    assert report.replayable + sum(report.bad.values()) + sum(
        report.other_methods.values()) + sum(report.other_statuses.values()) == len(lines)


def test_the_mix_is_each_method_and_path_by_frequency():
    log = parse_log([combined("GET /b HTTP/1.1"), combined("GET /a HTTP/1.1"),
                     combined("GET /a HTTP/1.1"), combined("HEAD /a HTTP/1.1"),
                     combined("GET /a?x=1 HTTP/1.1")])
    assert log.mix() == [(("GET", "/a"), 2), (("GET", "/b"), 1), (("HEAD", "/a"), 1),
                         (("GET", "/a?x=1"), 1)]


@pytest.mark.parametrize("times, rate, want", [
    ([], 10, []),
    ([100.0], 10, [0.0]),
    # 4 requests over 2 logged seconds (window 2 s) at 4 req/s: played in 1 s, halved
    ([100.0, 100.0, 101.0, 101.0], 4, [0.0, 0.25, 0.5, 0.75]),
    # a quiet minute keeps its gap: 3 requests, window 61 s, at 3 req/s: 1 s in all
    ([0.0, 0.0, 60.0], 3, [0.0, 0.5 / 61, 60 / 61]),
    # same second, three at once: spread evenly over it, not sent together
    ([7.0, 7.0, 7.0], 3, [0.0, 1 / 3, 2 / 3]),
    # a clock going back (merged logs): never earlier than the line before
    ([10.0, 9.0, 11.0], 1, [1.0, 1.0, 2.0]),
])
def test_arrival_times_are_scaled_to_the_rate(times, rate, want):
    assert arrival_offsets(times, rate) == pytest.approx(want)


def test_a_scaled_log_is_played_at_the_rate_on_average():
    times = [r.time_s for r in read_log(SAMPLE).requests]
    for rate in (50, 250, 5000):
        offsets = arrival_offsets(times, rate)
        assert offsets == sorted(offsets)
        assert offsets[-1] < len(times) / rate             # the window: N / rate
        assert offsets[-1] > 0.9 * len(times) / rate       # the whole of it is used
    # the shape is kept: the peak's middle minute holds more than the first minute
    offsets, window = arrival_offsets(times, 100), len(times) / 100
    first = sum(o < window / 20 for o in offsets)
    middle = sum(window * 10 / 20 <= o < window * 11 / 20 for o in offsets)
    assert middle > 2 * first


# ---- the experiment file's load.replay


def spec_doc(load: dict, matrix: dict | None = None) -> dict:
    return {"experiment": {"name": "r", "duration": "1s"}, "load": load,
            "matrix": {"stack": ["nginx"], "workload": ["portal-site"], "concurrency": [2],
                       **(matrix or {})}}


def test_the_log_is_found_beside_the_experiment_file(tmp_path, spec_args):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "day.log").write_text(combined() + "\n")
    file = str(tmp_path / "exp.toml")
    spec = parse_spec(spec_doc({"replay": "logs/day.log"}), file, *spec_args)
    assert spec.fixed_knobs["load.replay"] == str(tmp_path / "logs" / "day.log")


@pytest.mark.parametrize("load, matrix, key, words", [
    ({"replay": "nope.log"}, None, "load.replay", "No such file"),
    ({"replay": "empty.log"}, None, "load.replay", "nothing to replay: 0 of 2 lines"),
    ({"replay": "day.log", "replay_times": True}, None, "load.replay_times",
     "needs load.rate"),
    ({"replay": "day.log", "replay_times": True}, {"load": {"rate": [10, 0]}},
     "load.replay_times", "needs load.rate"),
    ({"replay_times": True, "rate": 5}, None, "load.replay_times", "needs load.replay"),
    ({}, {"load": {"replay": ["day.log", "other.log"]}}, "matrix.load.replay",
     "one log per experiment"),
    ({"replay": "bad\nname"}, None, "load.replay", "line break"),
])
def test_a_replay_that_cannot_be_is_one_line_naming_the_key(tmp_path, spec_args, load,
                                                            matrix, key, words):
    (tmp_path / "day.log").write_text(combined() + "\n")
    (tmp_path / "empty.log").write_text("garbage\n" + combined("POST /x HTTP/1.1") + "\n")
    with pytest.raises(SpecError) as caught:
        parse_spec(spec_doc(load, matrix), str(tmp_path / "exp.toml"), *spec_args)
    line = str(caught.value)
    assert key in line and words in line and "\n" not in line
    if key == "load.replay" and "nope" in line:
        assert str(tmp_path / "nope.log") in line        # the path it looked at


# ---- before the load: the site's URLs, and the engine's plan


FRONT = Endpoint("127.0.0.1", 8080)
LOAD = {k.name: k.default for k in LOAD_KNOBS}


def plan_for(log: Path, **load) -> LoadPlan:
    return LoadPlan(urls=(("http://127.0.0.1:8080/portal.html", 1),), connections=4,
                    duration_s=2.0, requests=None, warmup_s=1.0,
                    load=dict(LOAD, replay=str(log), **load))


def write_log(path: Path, paths: list[str], head: int = 0) -> Path:
    lines = [combined(f"GET {p} HTTP/1.1", t=f"10/Oct/2026:13:55:{k % 60:02d} -0700")
             for k, p in enumerate(paths)]
    lines += [combined("HEAD /a HTTP/1.1")] * head
    path.write_text("\n".join(lines) + "\n")
    return path


def test_no_replay_leaves_the_plan_alone():
    plan = LoadPlan(urls=(("http://127.0.0.1:8080/", 1),), connections=1, duration_s=1.0,
                    requests=None, warmup_s=0.0, load=LOAD)
    assert replay_plan(plan, FRONT, probe=lambda m, p: pytest.fail("fetched")) is None


def test_the_mix_replaces_the_workloads_urls(tmp_path):
    log = write_log(tmp_path / "a.log", ["/a", "/a", "/b?q=1", "/a"], head=2)
    fetched = []
    replay = replay_plan(plan_for(log), FRONT, probe=lambda m, p: fetched.append((m, p)))
    assert sorted(fetched) == [("GET", "/a"), ("GET", "/b?q=1")]   # once each
    plan = replay.plan
    assert plan.urls == (("http://127.0.0.1:8080/a", 3), ("http://127.0.0.1:8080/a", 2),
                         ("http://127.0.0.1:8080/b?q=1", 1))
    assert plan.methods == ("GET", "HEAD", "GET")
    assert plan.schedule == () and plan.warmup_s == 1.0 and plan.duration_s == 2.0
    assert url_lines(plan).splitlines() == ["GET http://127.0.0.1:8080/a 3",
                                            "HEAD http://127.0.0.1:8080/a 2",
                                            "GET http://127.0.0.1:8080/b?q=1 1 varies"]
    assert replay.record["replayed"] == 6 and replay.record["urls"] == 3
    assert replay.record["missing"] == {} and replay.record["times"] is False


def test_arrival_times_become_the_engines_schedule(tmp_path, monkeypatch):
    use_fake_engine(monkeypatch, tmp_path / "engine")    # argv needs an engine, not a build
    log = write_log(tmp_path / "a.log", ["/a", "/b", "/a", "/b"])   # 4 seconds
    plan = replay_plan(plan_for(log, replay_times=True, rate=2), FRONT,
                       probe=lambda m, p: None).plan
    # 4 requests at 2 req/s: 2 s; each second's request at its start
    assert plan.schedule == ((0.0, 0), (0.5, 1), (1.0, 0), (1.5, 1))
    assert plan.warmup_s == 0.0
    assert schedule_lines(plan) == "0 0\n500000 1\n1000000 0\n1500000 1\n"
    argv = engine_argv(plan, tmp_path / "urls.txt")
    assert argv[argv.index("--schedule") + 1] == str(tmp_path / "schedule.txt")
    for flag in ("-d", "-n", "--rate", "--warmup"):
        assert flag not in argv


def test_a_few_missing_urls_are_dropped_and_said(tmp_path):
    paths = ["/a"] * 199 + ["/gone"]         # 0.5 % of the requests: under the share
    log = write_log(tmp_path / "a.log", paths)
    replay = replay_plan(plan_for(log), FRONT,
                         probe=lambda m, p: "404" if p == "/gone" else None)
    assert replay.plan.urls == (("http://127.0.0.1:8080/a", 199),)
    assert replay.record["missing"] == {"/gone": "404"}
    assert (replay.record["missing_requests"], replay.record["replayed"]) == (1, 199)


def test_a_log_of_another_site_is_refused_before_the_load(tmp_path):
    paths = ["/a"] * 90 + ["/x"] * 6 + ["/y"] * 3 + ["/z"]
    log = write_log(tmp_path / "a.log", paths)
    assert 10 / 100 > MISSING_SHARE
    why = {"/x": "404", "/y": "ConnectionRefusedError: refused", "/z": "500"}
    with pytest.raises(VerificationFailed) as caught:
        replay_plan(plan_for(log), FRONT, probe=lambda m, p: why.get(p))
    line = caught.value.reason
    assert "\n" not in line and str(log) in line
    assert "3 of its URLs, 10 of 100 requests (10.0%)" in line
    assert line.index("/x (404)") < line.index("/y (Connection") < line.index("/z (500)")
    [verdict] = caught.value.verdicts
    assert verdict.status.name == "FAIL"


# ---- one real replay: the engine, a real nginx, loopback


REAL = """
[experiment]
name = "{name}"
repetitions = 1
duration = "1s"
warmup = "0s"
remeasure = 0

[load]
replay = "{log}"
replay_times = true
rate = 1000

[matrix]
stack = ["nginx"]
workload = ["portal-site"]
concurrency = [8]
"""


@pytest.mark.integration
def test_the_sample_log_replays_through_the_engine_on_nginx(tmp_path):
    require_engine()
    spec, db = tmp_path / "replay.toml", tmp_path / "r.db"
    spec.write_text(REAL.format(name="replay", log=SAMPLE))
    result = invoke("run", spec, "--db", db)
    assert result.exit_code == 0, result.output
    [(outcome, reason, _, resources)] = rows(db)
    assert (outcome, reason) == ("ok", None)
    [(stored,)] = rows(db, "SELECT load_json FROM runs")
    load, record = json.loads(stored), json.loads(resources)["_replay"]
    log = read_log(SAMPLE)
    assert record["replayed"] == len(log.requests) and record["missing"] == {}
    assert record["unreadable"]["bad timestamp"]["lines"] == 1
    assert record["other_methods"] == {"POST": 7}
    # every request of the log sent once, at its time: open loop, nothing left out
    assert load["config"]["schedule"]["requests"] == len(log.requests)
    assert load["requests"]["completed"] == len(log.requests)
    assert load["requests"]["failed"] == 0
    assert {u["method"] for u in load["config"]["urls"]} == {"GET", "HEAD"}
    assert any("?ref=news" in u["url"] for u in load["config"]["urls"])
    assert set(load["status_classes"]) <= {"2xx", "3xx"}
    assert server_processes() == []


@pytest.mark.integration
def test_a_log_of_urls_the_site_lacks_refuses_the_run(tmp_path):
    require_engine()
    # 120 requests: at load.rate = 1000 a replay of 0.12 s, past the least measured (0.1 s)
    log = write_log(tmp_path / "other.log", ["/portal.html"] * 60 + ["/wp-login.php"] * 60)
    spec, db = tmp_path / "refused.toml", tmp_path / "r.db"
    spec.write_text(REAL.format(name="refused", log=log.name))
    result = invoke("run", spec, "--db", db)
    [(outcome, reason, _, _)] = rows(db)
    assert outcome == "invalid", result.output
    assert f"load.replay {log}" in reason and "/wp-login.php (404)" in reason
    assert server_processes() == []


def test_what_the_log_holds_besides_is_said_before_anything_runs():
    result = invoke("run", ROOT / "presets" / "replay.toml", "--dry-run")
    assert result.exit_code == 0, result.output
    note = next(line for line in result.output.splitlines() if "load.replay" in line)
    assert "sample-access.log" in note and "unreadable" in note and "POST" in note


@pytest.mark.parametrize("path, varies", [
    ("/portal.html", False), ("/img/a.png", False), ("/", True), ("/blog/", True),
    ("/index.php", True), ("/?p=5", True), ("/a.html?x=1", True)])
def test_a_replayed_url_may_vary_where_the_site_may_compute_it(path, varies):
    from stacklab.run.replay import may_vary
    assert may_vary(path) is varies


# ---- what is not a log, and a replay too short to measure


def _refused_replay(tmp_path, spec_args, load: dict) -> str:
    with pytest.raises(SpecError) as caught:
        parse_spec(spec_doc(load), str(tmp_path / "exp.toml"), *spec_args)
    line = str(caught.value)
    assert "\n" not in line
    return line


def test_a_fifo_or_dev_zero_as_the_log_is_refused_not_read(tmp_path, spec_args):
    """load.replay naming a FIFO hung; a symlink to /dev/zero grew to 1.3 GB in 12 s."""
    os.mkfifo(tmp_path / "pipe.log")
    (tmp_path / "zero.log").symlink_to("/dev/zero")
    done = {}

    def parse(name):
        done[name] = _refused_replay(tmp_path, spec_args, {"replay": name})
    for name in ("pipe.log", "zero.log"):
        worker = threading.Thread(target=parse, args=(name,), daemon=True)
        worker.start()
        worker.join(10)
        if worker.is_alive():
            if name == "pipe.log":
                with open(tmp_path / name, "w"):     # let the blocked reader end
                    pass
            pytest.fail(f"reading {name} as a replay log did not end")
    assert "load.replay" in done["pipe.log"] and "not a regular file (a FIFO)" in done[
        "pipe.log"]
    assert "not a regular file (a character device)" in done["zero.log"]


def test_a_line_without_an_end_is_refused_not_grown(tmp_path, spec_args):
    (tmp_path / "one.log").write_bytes(b"x" * (200 << 10))
    assert "line 1 is longer than 64 KiB" in _refused_replay(tmp_path, spec_args,
                                                             {"replay": "one.log"})


def test_a_timed_replay_too_short_to_measure_is_refused(tmp_path, spec_args):
    """3 requests at 100/s were played in 0.03 s and stored as an `ok` run."""
    write_log(tmp_path / "short.log", ["/a", "/b", "/c"])
    line = _refused_replay(tmp_path, spec_args,
                           {"replay": "short.log", "replay_times": True, "rate": 100})
    assert "load.rate = 100" in line and "played in 0.03 s" in line and "0.1 s" in line
    parse_spec(spec_doc({"replay": "short.log", "replay_times": True, "rate": 30}),
               str(tmp_path / "exp.toml"), *spec_args)                 # 0.1 s: measured


@pytest.mark.parametrize("requests, span_s, rate", [(3, 0.02, 100.0), (1001, 10.0, 100.0),
                                                    (1, 0.0, 1e6), (2, 0.0, 2e6)])
def test_a_replays_asked_rate_is_its_gaps_over_its_span(requests, span_s, rate):
    """n requests span n - 1 gaps: 3 sent 10 ms apart asked for 100/s, not '150' (the
    flag said '250 asked for' of load.rate = 100)."""
    assert _average_rate({"requests": requests, "span_s": span_s}) == rate
