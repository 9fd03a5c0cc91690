"""The fake engine (tests/fake_engine) keeps the real one's contract, so a test that
passes with it would pass with the real engine: the orchestrator's own command line
(drive.engine_argv) is accepted, the report follows the engine's schema and its
histogram holds one value per completed request, `-n N` completes N, bad arguments are
one line and exit 2 (as the real binary's are), a signal ends the run with its report
and exit 130. And the orchestrator finds it through its one seam, STACKLAB_ENGINE."""

import json
import signal
import subprocess
import sys
import time

import jsonschema
import pytest

from stacklab.measure.drive import (LOAD_KNOBS, REPO_ENGINE, LoadPlan, engine_path, engine_version,
                            run_load)
from stacklab.errors import EngineError
from stacklab.analysis.stats import decode_histogram

from fakes import FAKE_ENGINE, engine_schema, use_fake_engine
from helpers import require_engine

LOAD = {k.name: k.default for k in LOAD_KNOBS}
URLS = (("http://127.0.0.1:1/index.html", 3), ("http://127.0.0.1:1/page.php", 1))


def fake(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(FAKE_ENGINE), *args], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL,
                          env={"FAKE_ENGINE_PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
                          **kw)


def follows_the_engine_contract(doc: dict) -> None:
    jsonschema.Draft202012Validator(engine_schema(5)).validate(doc)
    assert decode_histogram(doc["histogram"]).get_total_count() == \
        doc["requests"]["completed"] == doc["latency_us"]["count"]


def test_the_orchestrator_runs_it_through_stacklab_engine(tmp_path, monkeypatch):
    """run_load with the argv drive builds: a report of exactly the requests asked for,
    its config what the command line said, the load in the fake's log."""
    engine = use_fake_engine(monkeypatch, tmp_path / "log")
    assert engine_path() == FAKE_ENGINE
    # stored as the engine that measured, never as the release engine's version alone
    assert engine_version() == f"0.0.0-fake (STACKLAB_ENGINE={FAKE_ENGINE})"
    plan = LoadPlan(urls=URLS, connections=4, duration_s=None, requests=300, warmup_s=0.0,
                    load=dict(LOAD, headers=["X-Trial: 1"]), seed=7,
                    varies=frozenset({URLS[1][0]}))
    report = run_load(plan, tmp_path)
    follows_the_engine_contract(report.raw)
    assert (report.exit_status, report.completed, report.failed) == (0, 300, 0)
    config = report.raw["config"]
    assert (config["connections"], config["requests"], config["seed"]) == (4, 300, 7)
    assert config["urls"] == [{"url": u, "weight": w, "varies": u == URLS[1][0],
                               "method": "GET"} for u, w in URLS]
    assert config["headers"] == ["X-Trial: 1"] and report.raw["engine"]["version"] == \
        "0.0.0-fake"
    [run] = engine.runs()
    assert run["report"] == report.raw and "--urls" in run["argv"]
    assert engine.reports() == [report]


@pytest.mark.parametrize("args", [("-n", "1"), ("-n", "12345"), ("-d", "300ms"),
                                  ("-d", "0.2s", "--warmup", "0.1s", "-c", "7"),
                                  ("-n", "5", "--rate", "50")])
def test_every_report_follows_the_schema_and_the_histogram_invariant(args):
    out = fake("--json", *args, "http://127.0.0.1:1/")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    follows_the_engine_contract(doc)
    if "-n" in args:
        assert doc["requests"]["completed"] == int(args[args.index("-n") + 1])


def test_an_agent_of_several_says_its_segment_and_when_it_began():
    """--segment K/N and --start-at, as the real engine takes them (schema 5)."""
    asked = time.time() + 0.3
    out = fake("--json", "-n", "10", "--segment", "1/3", "--start-at", f"{asked:.6f}",
               "http://127.0.0.1:1/")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    follows_the_engine_contract(doc)
    start = doc["start"]
    assert doc["config"]["segment"] == {"index": 1, "of": 3}
    assert abs(start["asked_unix_us"] - asked * 1e6) < 2
    assert start["asked_unix_us"] <= start["unix_us"] <= start["first_send_unix_us"]
    plain = json.loads(fake("--json", "-n", "10", "http://127.0.0.1:1/").stdout)
    assert plain["config"]["segment"] is None and plain["start"]["asked_unix_us"] is None


BAD = [("-c", "0"), ("--bogus",), ("-n", "3", "-d", "1s"), ("-d", "5x"), ("-n", "0"),
       ("--rate", "-1"), (), ("-d", "0s"), ("--timeout", "0s"), ("--max-error-rate", "2"),
       ("-m", "get"), ("--decode",), ("-H", "Bad Name: x"), ("ftp://127.0.0.1/",),
       ("--segment", "3/3"), ("--segment", "1"), ("--start-at", "soon"),
       ("--start-at", "99999999999.5")]


@pytest.mark.parametrize("args", BAD, ids=lambda a: " ".join(a) or "no URL")
def test_a_bad_argument_is_one_line_and_exit_2_with_nothing_run(args):
    url = () if not args else ("http://127.0.0.1:1/",)
    out = fake("--json", *args, *url)
    assert out.returncode == 2
    assert out.stdout == "" and out.stderr.startswith("error: ")
    assert out.stderr.count("\n") == 1, out.stderr


@pytest.mark.integration
@pytest.mark.parametrize("args", BAD, ids=lambda a: " ".join(a) or "no URL")
def test_the_real_engine_refuses_the_same_arguments(args):
    """What the fake refuses, the real engine refuses too (exit 2): the fake is no
    stricter than the engine; BAD lists what the engine refuses (its cli.rs and
    target.rs), so the fake refusing all of it makes it no laxer on these."""
    require_engine()
    url = () if not args else ("http://127.0.0.1:1/",)
    out = subprocess.run([str(REPO_ENGINE), "--json", *args, *url], capture_output=True,
                         text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and out.stdout == ""


def test_a_missing_urls_file_is_a_setup_error(tmp_path):
    out = fake("--json", "--urls", str(tmp_path / "none.txt"))
    assert out.returncode == 2 and out.stderr.startswith("error: --urls ")


def test_a_signal_ends_the_run_with_its_report_and_exit_130():
    proc = subprocess.Popen([str(FAKE_ENGINE), "--json", "-d", "30s", "http://127.0.0.1:1/"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={"FAKE_ENGINE_PYTHON": sys.executable,
                                 "PATH": "/usr/bin:/bin"})
    time.sleep(1.0)                   # into the load (its imports done)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    doc = json.loads(out)
    follows_the_engine_contract(doc)
    assert doc["interrupted"] is True and doc["duration_s"] < 30


def test_a_command_during_the_load_runs_before_the_report(tmp_path, monkeypatch):
    engine = use_fake_engine(monkeypatch, tmp_path / "log",
                             during=f"echo ran > {tmp_path / 'during'}")
    plan = LoadPlan(urls=URLS[:1], connections=1, duration_s=None, requests=10,
                    warmup_s=0.0, load=LOAD)
    run_load(plan, tmp_path)
    assert (tmp_path / "during").read_text() == "ran\n" and len(engine.runs()) == 1


def test_a_failing_command_during_the_load_is_an_engine_error(tmp_path, monkeypatch):
    use_fake_engine(monkeypatch, tmp_path / "log", during="exit 7")
    plan = LoadPlan(urls=URLS[:1], connections=1, duration_s=None, requests=10,
                    warmup_s=0.0, load=LOAD)
    with pytest.raises(EngineError, match="exited 2: error: FAKE_ENGINE_DURING exited 7"):
        run_load(plan, tmp_path)


def test_stacklab_engine_naming_no_executable_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("STACKLAB_ENGINE", str(tmp_path / "none"))
    with pytest.raises(EngineError, match=f"^STACKLAB_ENGINE={tmp_path}/none: not an "
                                          "executable file$"):
        engine_path()


def test_a_refusing_fake_measures_nothing_and_says_what_it_refused(tmp_path, monkeypatch):
    """FAKE_ENGINE_REFUSE: each load is refused as a bad argument is (one line, exit 2)
    and written down, so a test reads that nothing was measured; --version answers."""
    engine = use_fake_engine(monkeypatch, tmp_path / "log", refuse="measured again")
    assert engine_version().startswith("0.0.0-fake ")      # --version answers
    plan = LoadPlan(urls=URLS[:1], connections=1, duration_s=None, requests=10,
                    warmup_s=0.0, load=LOAD)
    with pytest.raises(EngineError, match="exited 2: error: measured again"):
        run_load(plan, tmp_path)
    [argv] = engine.refused()
    assert "--urls" in argv and engine.runs() == []
    use_fake_engine(monkeypatch, tmp_path / "log")          # measures again
    run_load(plan, tmp_path)
    assert len(engine.runs()) == 1 and len(engine.refused()) == 1
