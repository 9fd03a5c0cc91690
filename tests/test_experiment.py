"""End to end: experiment file → real servers → stacklab-load → SQLite → show/report/export."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from stacklab.cli import cli

from helpers import ROOT, require_engine, server_processes, wait_for

pytestmark = pytest.mark.integration

TINY = """
[experiment]
name = "tiny"
repetitions = 2
requests = 300
warmup = "0s"
remeasure = 0

[matrix]
stack = ["nginx", "apache"]
workload = ["static-page"]
concurrency = [1, 4]
"""


@pytest.fixture(autouse=True)
def engine_built():
    require_engine()


def invoke(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result


def test_tiny_experiment_end_to_end(tmp_path):
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY)
    db = tmp_path / "r" / "stacklab.db"
    result = invoke("run", spec, "--db", db)
    assert result.exit_code == 0, result.output
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    runs = conn.execute("SELECT * FROM runs ORDER BY id").fetchall()
    assert len(runs) == 8
    assert {r["outcome"] for r in runs} == {"ok"}
    for r in runs:
        load = json.loads(r["load_json"])
        assert load["requests"]["completed"] == 300 and load["requests"]["failed"] == 0
        assert load["status"] == {"200": 300}
        assert r["rps"] > 0 and r["p99_us"] >= r["p50_us"] > 0
        system = json.loads(r["resources_json"])["_system"]
        assert system["cpus_kept_awake"] == os.access("/dev/cpu_dma_latency", os.W_OK)
        verdicts = json.loads(r["verdicts_json"])
        assert {v["status"] for v in verdicts} == {"PASS"}
        assert "content /index.html" in {v["check"] for v in verdicts}
        versions = json.loads(r["versions_json"])
        assert {"stacklab-load", "stacklab"} <= set(versions)
        configs = json.loads(r["configs_json"])
        assert any(name.endswith((".conf")) for name in configs)
        assert (db.parent / "runs").exists() and os.path.isdir(r["run_dir"])
        assert any(f.endswith(".log") for f in os.listdir(os.path.join(
            r["run_dir"], "nginx" if "nginx/nginx.conf" in configs else "apache")))
    # interleaved: every trial's first repetition before any second one
    reps = [r["repetition"] for r in runs]
    assert reps == [1, 1, 1, 1, 2, 2, 2, 2]
    exp = conn.execute("SELECT * FROM experiments").fetchone()
    assert exp["status"] == "complete"
    host = json.loads(exp["host_json"])
    assert host["cores"] >= 1 and host["cpu_model"] and host["kernel"]
    assert server_processes() == []

    shown = invoke("show", "tiny", "--db", db)
    assert shown.exit_code == 0 and "nginx" in shown.output and "apache" in shown.output
    out = tmp_path / "report.html"
    rep = invoke("report", "tiny", "-o", out, "--db", db)
    assert rep.exit_code == 0, rep.output
    html = out.read_text()
    assert html.count('<script type="application/json" class="figure">') >= 2
    assert "<script src" not in html and "<link" not in html
    assert "cpu_model" in html
    csv = invoke("export", "tiny", "--format", "csv", "--db", db)
    assert csv.exit_code == 0 and len(csv.output.strip().splitlines()) == 9
    js = json.loads(invoke("export", "--format", "json", "--db", db).output)
    assert len(js["runs"]) == 8 and js["runs"][0]["load"]["histogram"]


def test_a_server_that_fails_is_a_recorded_failed_run_and_the_rest_goes_on(
        tmp_path, fake_processes):
    fake_processes.fail("nginx", code=1)    # as a binary that refuses to run: exit 1
    fake_processes.real("apache")
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY.replace("repetitions = 2", "repetitions = 1"))
    db = tmp_path / "stacklab.db"
    result = invoke("run", spec, "--db", db)
    assert result.exit_code == 0, result.output
    rows = sqlite3.connect(db).execute(
        "SELECT t.label, r.outcome, r.reason FROM runs r JOIN trials t USING (trial_id)"
    ).fetchall()
    outcomes = {label.split()[0]: outcome for label, outcome, _ in rows}
    assert outcomes == {"nginx": "failed", "apache": "ok"}
    assert all("exited with code 1" in reason for _, o, reason in rows if o == "failed")
    assert set(fake_processes.names()) == {"nginx", "apache"}


def test_dry_run_prints_the_plan_and_starts_nothing(tmp_path):
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY)
    result = invoke("run", spec, "--dry-run", "--db", tmp_path / "x.db")
    assert result.exit_code == 0
    assert "4 trials × 2 repetitions = 8 runs" in result.output
    assert not (tmp_path / "x.db").exists()


def test_bad_spec_is_one_line_naming_file_key_value(tmp_path):
    spec = tmp_path / "bad.toml"
    spec.write_text(TINY.replace('concurrency = [1, 4]', 'concurrency = [1, "many"]'))
    result = subprocess.run([sys.executable, "-m", "stacklab.cli", "run", str(spec)],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(spec) in lines[0] and "matrix.concurrency" in lines[0] and "'many'" in lines[0]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_interrupt_stops_every_server_and_resume_finishes_the_rest(tmp_path, sig):
    spec = tmp_path / "slow.toml"
    spec.write_text(TINY.replace("requests = 300", 'duration = "1s"'))
    db = tmp_path / "stacklab.db"
    argv = [sys.executable, "-m", "stacklab.cli", "run", str(spec), "--db", str(db)]
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_for(lambda: stored_runs(db) >= 2, 60, "two runs stored")
    # into the next run: its servers up and the engine loading them
    wait_for(lambda: engine_of(proc.pid), 30, "the engine running the next run")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "--resume" in err
    assert server_processes() == []
    conn = sqlite3.connect(db)
    before = conn.execute("SELECT id, trial_id, repetition, load_json FROM runs").fetchall()
    assert 2 <= len(before) < 8
    assert conn.execute("SELECT status FROM experiments").fetchone()[0] == "interrupted"

    result = subprocess.run(argv + ["--resume"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    after = conn.execute("SELECT id, trial_id, repetition, load_json FROM runs").fetchall()
    assert len(after) == 8
    assert after[:len(before)] == before                       # nothing redone or rewritten
    assert len({(t, r) for _, t, r, _ in after}) == 8
    assert conn.execute("SELECT COUNT(*) FROM experiments").fetchone()[0] == 1
    assert conn.execute("SELECT status FROM experiments").fetchone()[0] == "complete"
    assert server_processes() == []


ONE_NGINX = """
[experiment]
name = "upgraded"
repetitions = 2
requests = 200
warmup = "0s"

[matrix]
stack = ["nginx"]
workload = ["static-page"]
concurrency = [2]
"""


@pytest.mark.parametrize("column, path, then, named", [
    ("knobs_json", ("nginx", "sendfile"), False,
     "nginx.sendfile = False when its runs were measured, True now"),
    ("versions_json", ("nginx",), "1.18.0-6.1", "nginx was 1.18.0-6.1 when its runs"),
], ids=["a default changed", "a package upgraded"])
def test_resume_is_refused_when_the_stored_runs_ran_otherwise(tmp_path, column, path, then,
                                                                named):
    """Trial ids come from the spec: a run stored before a default changed (nginx shipped
    with sendfile off) or before an upgrade keeps its trial's id, and a resume would pool
    it with runs measured otherwise. The resume says which setting and stores nothing."""
    spec, db = tmp_path / "up.toml", tmp_path / "r.db"
    spec.write_text(ONE_NGINX)
    assert invoke("run", spec, "--db", db).exit_code == 0
    conn = sqlite3.connect(db)
    with conn:      # as an older stacklab or package would have stored run 1, run 2 to come
        conn.execute("DELETE FROM runs WHERE repetition = 2")
        conn.execute("UPDATE experiments SET status = 'interrupted'")
        [(text,)] = conn.execute(f"SELECT {column} FROM runs")
        doc = json.loads(text)
        *parents, leaf = path
        place = doc
        for key in parents:
            place = place[key]
        place[leaf] = then
        conn.execute(f"UPDATE runs SET {column} = ?", (json.dumps(doc),))
    result = subprocess.run([sys.executable, "-m", "stacklab.cli", "run", str(spec), "--db",
                             str(db), "--resume"], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "--resume" in line and "'upgraded'" in line and named in line, line
    assert "run without --resume" in line
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1
    assert conn.execute("SELECT status FROM experiments").fetchone()[0] == "interrupted"
    assert server_processes() == []
    # unchanged, the same resume completes the experiment
    with conn:
        conn.execute("UPDATE runs SET knobs_json = ?, versions_json = ?",
                     _as_now(tmp_path, spec))
    assert invoke("run", spec, "--db", db, "--resume").exit_code == 0
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 2
    # complete, then changed: nothing is left to run, so nothing would be pooled; the
    # resume is not refused and the experiment stays complete
    with conn:
        conn.execute(f"UPDATE runs SET {column} = ?", (json.dumps(doc),))
    assert invoke("run", spec, "--db", db, "--resume").exit_code == 0
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 2
    assert conn.execute("SELECT status FROM experiments").fetchone()[0] == "complete"


def _as_now(tmp_path, spec) -> tuple[str, str]:
    """The knobs and versions a fresh run of `spec` stores now."""
    fresh = tmp_path / "fresh.db"
    assert invoke("run", spec, "--db", fresh).exit_code == 0
    return sqlite3.connect(fresh).execute(
        "SELECT knobs_json, versions_json FROM runs LIMIT 1").fetchone()


def stored_runs(db) -> int:
    try:
        return sqlite3.connect(db).execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    except sqlite3.Error:
        return 0


def engine_of(parent: int) -> list[int]:
    """Pids of stacklab-load processes whose parent is `parent`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
            ppid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if exe == "stacklab-load" and ppid == parent:
            found.append(int(pid))
    return found


def test_php_handlers_with_opcache_on_and_off_end_to_end(tmp_path):
    """The issue's comparison: Apache+mod_php, Apache+PHP-FPM, nginx+PHP-FPM × OPcache."""
    spec = tmp_path / "php.toml"
    text = (ROOT / "presets" / "php-handlers.toml").read_text()
    text = text.replace('repetitions = 3', 'repetitions = 1\nremeasure = 0').replace(
        'duration = "3s"', 'requests = 200').replace('concurrency = [1, 8, 32]',
                                                      'concurrency = [4]')
    spec.write_text(text)
    db = tmp_path / "stacklab.db"
    result = invoke("run", spec, "--db", db)
    assert result.exit_code == 0, result.output
    rows = sqlite3.connect(db).execute(
        "SELECT t.definition_json, r.outcome, r.verdicts_json, r.completed "
        "FROM runs r JOIN trials t USING (trial_id)").fetchall()
    assert len(rows) == 6
    seen = set()
    for definition, outcome, verdicts, completed in rows:
        d = json.loads(definition)
        assert outcome == "ok" and completed == 200
        checks = {v["check"]: v for v in json.loads(verdicts)}
        assert checks["sapi"]["status"] == "PASS"
        assert checks["opcache"]["status"] == "PASS"
        assert ("hits" in checks["opcache"]["detail"]) == d["knobs"]["php.opcache"]
        seen.add((d["stack"], d["knobs"]["php.opcache"]))
    assert len(seen) == 6


def test_a_server_that_dies_during_verification_is_a_failed_run(tmp_path, monkeypatch):
    """Verification talks to the server over the wire; a server that dies under it is a
    recorded failed run, and the experiment goes on."""
    import stacklab.run.stack as stack
    from stacklab.host import procs
    real_verify = stack.verify_stack

    def verify_after_killing_nginx(running, deployed):
        if running.stack.name == "nginx":
            procs.stop_group(running.front.proc.pgid, grace_s=0.1)
        return real_verify(running, deployed)

    monkeypatch.setattr(stack, "verify_stack", verify_after_killing_nginx)
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY.replace("repetitions = 2", "repetitions = 1"))
    db = tmp_path / "stacklab.db"
    result = invoke("run", spec, "--db", db)
    assert result.exit_code == 0, result.output
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT t.label, r.outcome, r.reason FROM runs r "
                        "JOIN trials t USING (trial_id)").fetchall()
    assert len(rows) == 4
    assert {o for label, o, _ in rows if label.startswith("nginx")} == {"failed"}
    assert {o for label, o, _ in rows if label.startswith("apache")} == {"ok"}
    assert all("ConnectionRefusedError" in reason for label, _, reason in rows
               if label.startswith("nginx"))
    assert conn.execute("SELECT status FROM experiments").fetchone()[0] == "complete"
    assert server_processes() == []


@pytest.mark.parametrize("then, named", [
    (ONE_NGINX.replace("requests = 200", "requests = 300"), "measure.requests: 200 → 300"),
    (ONE_NGINX.replace("concurrency = [2]", "concurrency = [2, 4]"), "concurrency: 2 → 2, 4"),
    (ONE_NGINX.replace("repetitions = 2", "repetitions = 3"), "experiment.repetitions: 1 → 3"),
], ids=["requests", "an axis", "repetitions"])
def test_a_resume_of_another_plan_says_what_differs(tmp_path, then, named):
    spec, db = tmp_path / "up.toml", tmp_path / "r.db"
    spec.write_text(ONE_NGINX.replace("repetitions = 2", "repetitions = 1"))
    assert invoke("run", spec, "--db", db).exit_code == 0
    spec.write_text(then.replace("repetitions = 2", "repetitions = 1"))
    result = subprocess.run([sys.executable, "-m", "stacklab.cli", "run", str(spec), "--db",
                             str(db), "--resume"], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert f"planned from a different spec ({named}); run without --resume" in line, line
