"""No finished load is lost in the moment after the engine exits (issue 38): a SIGTERM
0.05 s after its exit lost the load, a kill -9 then left only the journal's empty room.
The engine writes its report (synced) into the run's journal before it exits, beside the
run as known before the load, so whatever stops stacklab once the engine has exited,
`--resume` stores the run and measures nothing again.

Real nginx; the fake engine where the point is exact (a hook where stacklab first holds
the engine's report), the real engine where the moment is the process table's (stacklab
killed as soon as its engine is seen gone); a disk full during the load as well; load
agents, whose merged report is written into the journal as soon as it is made; then the
store's side without servers, and the report file as both engines write it."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from stacklab.analysis.flags import disturbance_factor
from stacklab.errors import EngineError
from stacklab.measure import drive
from stacklab.run import journaled
from stacklab.store import Outcome, RunRecord, Store

from fakes import FAKE_ENGINE, use_fake_engine
from helpers import require_engine, require_root, server_processes, wait_for
from test_reliability import invoke, loads, one_run, rows, tmpfs  # noqa: F401 (a fixture)
from test_store import new_exp, record

LOAD = {k.name: k.default for k in drive.LOAD_KNOBS}

REPO = Path(__file__).resolve().parent.parent
MEASURED_AGAIN = "measured again: its load was lost"


def measuring_nothing(monkeypatch, tmp_path):
    """From now on the fake engine refuses every load and writes it down."""
    return use_fake_engine(monkeypatch, tmp_path / "refusing", refuse=MEASURED_AGAIN)


def resumed_without_measuring(monkeypatch, tmp_path, spec: Path, db: Path) -> None:
    """`--resume` stores the run the journal kept, without a load; the journal is gone."""
    refusing = measuring_nothing(monkeypatch, tmp_path)
    result = invoke("run", spec, "--db", db, "--resume")     # and sweeps the servers left
    assert not refusing.refused(), MEASURED_AGAIN
    assert result.exit_code == 0, result.output
    assert rows(db, "SELECT status FROM experiments")[0][0] == "complete"
    assert not Path(f"{db}.journal").exists()
    assert server_processes() == []


def stored_from_the_journal(db: Path) -> dict:
    """The one stored run, checked to be the journal's: ok, said so, window unread."""
    [run] = rows(db, "SELECT outcome, reason, flags_json, resources_json, load_json "
                     "FROM runs")
    assert run["outcome"] == "ok" and "stored from the journal" in run["reason"]
    assert "host-busy" in json.loads(run["flags_json"])       # its window was never read
    assert disturbance_factor(json.loads(run["resources_json"])["_host"]) == float("inf")
    return json.loads(run["load_json"])


KILLED_AS_THE_REPORT_IS_READ = textwrap.dedent("""
    import os, signal, sys
    from stacklab.measure import drive
    from stacklab.cli import main

    def killed(cls, doc, exit_status=0):       # the engine has exited: its report is read
        os.kill(os.getpid(), signal.SIGKILL)

    drive.LoadReport.from_json = classmethod(killed)
    sys.exit(main(sys.argv[1:]))
""")


def test_a_kill_9_as_the_engine_exits_leaves_what_a_resume_stores(tmp_path, monkeypatch):
    """kill -9 the moment stacklab first holds the exited engine's report: only the
    journal's empty room was left, and a resume measured the run again."""
    spec, db = one_run(tmp_path), tmp_path / "r.db"
    engine = use_fake_engine(monkeypatch, tmp_path / "engine")
    killed = subprocess.run([sys.executable, "-c", KILLED_AS_THE_REPORT_IS_READ,
                             "run", str(spec), "--db", str(db)],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not rows(db)
    resumed_without_measuring(monkeypatch, tmp_path, spec, db)
    [measured] = engine.runs()
    assert stored_from_the_journal(db) == measured["report"]


@pytest.mark.integration
def test_a_sigterm_as_the_engine_exits_keeps_the_load_for_resume(tmp_path, monkeypatch):
    """SIGTERM the moment stacklab first holds the exited engine's report: the load was
    thrown away with the interrupted run. The command is interrupted, and the resume
    stores the run without measuring it again."""
    spec, db = one_run(tmp_path), tmp_path / "r.db"
    engine = use_fake_engine(monkeypatch, tmp_path / "engine")
    read = drive.LoadReport.from_json

    def signalled(doc, exit_status=0):
        os.kill(os.getpid(), signal.SIGTERM)
        return read(doc, exit_status)

    monkeypatch.setattr(drive.LoadReport, "from_json", signalled)
    result = invoke("run", spec, "--db", db)
    monkeypatch.setattr(drive.LoadReport, "from_json", read)
    assert result.exit_code == 130, result.output
    assert "interrupted" in result.output
    assert not rows(db)
    resumed_without_measuring(monkeypatch, tmp_path, spec, db)
    [measured] = engine.runs()
    assert stored_from_the_journal(db) == measured["report"]


STACKLAB = "import sys; from stacklab.cli import main; sys.exit(main(sys.argv[1:]))"


def gone(pid: int) -> bool:
    """The process has exited (a zombie its parent has not reaped yet, or reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return True


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "term"])
def test_stacklab_stopped_as_soon_as_its_engine_is_gone_keeps_the_run(tmp_path,
                                                                       monkeypatch, sig):
    """The hostile pass's way, with the real engine: stacklab is signalled as soon as the
    process table shows its engine gone (polled every 0.5 ms). A resume stores the run."""
    require_engine()
    spec, db = one_run(tmp_path, measure='duration = "1s"'), tmp_path / "r.db"
    stacklab = subprocess.Popen([sys.executable, "-c", STACKLAB, "run", str(spec),
                                 "--db", str(db)], cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    try:
        [engine] = wait_for(lambda: loads(stacklab.pid), 120, "the engine's load")
        while not gone(engine):
            time.sleep(0.0005)
        stacklab.send_signal(sig)
        output, _ = stacklab.communicate(timeout=120)
    finally:
        if stacklab.poll() is None:
            stacklab.kill()
            stacklab.communicate()
    expected = -signal.SIGKILL if sig == signal.SIGKILL else 130
    assert stacklab.returncode == expected, output
    stored_before = bool(rows(db))    # the signal landed after the commit: a late one
    resumed_without_measuring(monkeypatch, tmp_path, spec, db)
    [(report,)] = rows(db, "SELECT load_json FROM runs")
    if not stored_before:
        assert stored_from_the_journal(db) == json.loads(report)
    assert json.loads(report)["interrupted"] is False


def test_a_disk_full_during_the_load_and_a_kill_9_as_the_engine_exits_keep_the_run(
        tmp_path, monkeypatch, tmpfs):  # noqa: F811
    """Both at once: the database's disk fills during the load, then stacklab is killed as
    it first holds the report. The engine wrote its report into the room reserved for it
    before the run, so the resume (once there is space) stores the run."""
    results = tmpfs("results", "4M")
    spec, db = one_run(tmp_path), results / "r.db"
    filler = results / "filler"
    engine = use_fake_engine(monkeypatch, tmp_path / "engine",
                             during=f"cat /dev/zero > {filler} 2>/dev/null || true")
    killed = subprocess.run([sys.executable, "-c", KILLED_AS_THE_REPORT_IS_READ,
                             "run", str(spec), "--db", str(db)],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    st = os.statvfs(results)       # the disk did fill during the load: what is left is
    assert st.f_bavail * st.f_frsize < 32 << 10     # what the report left of its room
    filler.unlink()
    resumed_without_measuring(monkeypatch, tmp_path, spec, db)
    [measured] = engine.runs()
    assert stored_from_the_journal(db) == measured["report"]


# The store's side, without servers ----------------------------------------------------


def before_load(exp: int, rep: int) -> RunRecord:
    return journaled.before_load(exp, "abc123", rep, "t0", {"nginx": {"a": 1}},
                                 {"nginx": "1.22.1"}, {"nginx/nginx.conf": "x"}, ())


def test_a_run_before_its_load_is_stored_with_the_report_its_engine_finished(tmp_path):
    """#1: the engine finished and wrote its report: stored whole, as the resume's
    completion makes it. #2: stopped before its engine wrote (the room's zeros): dropped.
    #3: a report the engine was interrupted in (stacklab stopping it mid-load): dropped,
    the run is measured again. #4: no run journaled before the load: nothing to store."""
    store = Store.open(tmp_path / "r.db")
    exp = new_exp(store)
    for rep in (1, 2, 3, 4):
        store.reserve(exp, "abc123", rep, 64 << 10, 16 << 10)
    reports = {rep: store.pending(before_load(exp, rep)) for rep in (1, 2, 3)}
    journal = tmp_path / "r.db.journal"
    assert reports[1] == journal / f"{exp}-abc123-r1.report"
    assert reports[1].stat().st_size == 16 << 10 and not any(reports[1].read_bytes())
    finished = record(exp).load.raw
    drive.write_report(reports[1], finished)
    drive.write_report(reports[3], {**finished, "interrupted": True})
    drive.write_report(journal / f"{exp}-abc123-r4.report", finished)
    assert store.replay_journal(exp, journaled.from_the_journal) == 1
    [run] = store.runs(exp)
    assert (run.repetition, run.outcome, run.load.raw) == (1, Outcome.OK, finished)
    assert run.reason == journaled.REPORT_UNREAD and "host-busy" in run.flags
    assert run.configs == {"nginx/nginx.conf": "x"} and run.started_at == "t0"
    assert not journal.exists()
    store.close()


def test_a_finished_report_waits_for_a_resume_that_can_make_its_run_whole(tmp_path):
    """replay_journal without a completion leaves a finished load where it is; an
    interrupt before the run was stored (unreserve) keeps it too, but not a load the
    engine did not finish."""
    store = Store.open(tmp_path / "r.db")
    exp = new_exp(store)
    for rep in (1, 2):
        store.reserve(exp, "abc123", rep, 64 << 10)
        report = store.pending(before_load(exp, rep))
    drive.write_report(report, record(exp).load.raw)          # #2's
    store.unreserve(exp, "abc123", 1)
    store.unreserve(exp, "abc123", 2)
    journal = tmp_path / "r.db.journal"
    assert sorted(p.name for p in journal.iterdir()) == [f"{exp}-abc123-r2.pending",
                                                         f"{exp}-abc123-r2.report"]
    assert store.replay_journal(exp) == 0 and len(list(journal.iterdir())) == 2
    assert store.replay_journal(exp, journaled.from_the_journal) == 1
    assert [r.repetition for r in store.runs(exp)] == [2]
    store.close()


def test_no_report_file_without_a_room_for_it(tmp_path):
    """A run with no room reserved (or no journal: a database in memory) gives its engine
    no report file; its load is kept from its return on, as before."""
    store = Store.open(tmp_path / "r.db")
    exp = new_exp(store)
    assert store.pending(before_load(exp, 1)) is None
    assert not (tmp_path / "r.db.journal").exists()
    store.close()


def test_a_report_file_is_read_only_when_written_whole(tmp_path):
    """What the engine (or write_report) leaves is read back as the report; the zeros of
    a room and a write cut short are no report yet; a whole document that is no report
    is said, not dropped unseen."""
    path = tmp_path / "r.report"
    assert drive.report_in(path) is None
    path.write_bytes(bytes(4096))
    assert drive.report_in(path) is None
    doc = record(1).load.raw
    drive.write_report(path, doc)
    assert drive.report_in(path).raw == doc
    text = path.read_bytes()
    path.write_bytes(text[:len(text) // 2] + bytes(4096))
    assert drive.report_in(path) is None
    path.write_text('{"schema_version": 5}')
    with pytest.raises(EngineError, match="not an engine report"):
        drive.report_in(path)


def test_the_engine_is_given_the_report_file(tmp_path):
    plan = drive.LoadPlan(urls=(("http://127.0.0.1:1/", 1),), connections=1, duration_s=None,
                          requests=10, warmup_s=0.0, load=LOAD,
                          report_file=tmp_path / "r.report")
    argv = drive.engine_argv(plan, tmp_path / "urls.txt")
    assert argv[argv.index("--report-file") + 1] == str(tmp_path / "r.report")
    assert "--report-file" not in drive.engine_argv(replace(plan, report_file=None),
                                                    tmp_path / "urls.txt")


@pytest.mark.integration
def test_the_fake_engine_writes_its_report_file_as_the_engine_does(tmp_path, monkeypatch):
    """Over a zero-filled room, cut to the report, before the exit; a file that cannot be
    opened is refused with nothing run (exit 2), as the real engine refuses it."""
    room = tmp_path / "r.report"
    room.write_bytes(bytes(64 << 10))
    use_fake_engine(monkeypatch, tmp_path / "engine")
    plan = drive.LoadPlan(urls=(("http://127.0.0.1:1/", 1),), connections=1, duration_s=None,
                          requests=10, warmup_s=0.0, load=LOAD, report_file=room)
    load = drive.run_load(plan, tmp_path)
    assert json.loads(room.read_bytes()) == load.raw
    for engine in (FAKE_ENGINE, *([drive.REPO_ENGINE] if drive.REPO_ENGINE.exists() else [])):
        out = subprocess.run([str(engine), "--json", "-n", "1", "--report-file",
                              str(room / "none"), "http://127.0.0.1:1/"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and out.stdout == "", (engine, out)
        assert out.stderr.startswith("error: --report-file"), (engine, out.stderr)


AGENTS = """
[experiment]
remeasure = 0
name = "agents"
repetitions = 1
duration = "1s"
warmup = "0s"

[load]
agents = 1

[knobs]
net.mode = "veth"

[matrix]
stack = ["nginx"]
workload = ["static-page"]
concurrency = [2]
"""

KILLED_AS_THE_MERGED_REPORT_IS_WRITTEN = textwrap.dedent("""
    import os, signal, sys
    from stacklab.agents import pool
    from stacklab.cli import main
    write = pool._write_report

    def killed(path, merged):
        write(path, merged)
        os.kill(os.getpid(), signal.SIGKILL)

    pool._write_report = killed
    sys.exit(main(sys.argv[1:]))
""")


@pytest.mark.integration
def test_a_load_of_agents_is_kept_from_the_moment_its_merge_is_written(tmp_path,
                                                                        monkeypatch):
    """Load agents' reports come back to stacklab and are merged there: the merged report
    is written into the run's journal as soon as it is made, so a kill -9 from then on
    leaves what a resume stores. (Between the agents' exit and the merge, only this
    process holds their reports.)"""
    require_root("network namespaces")
    require_engine()
    spec, db = tmp_path / "agents.toml", tmp_path / "r.db"
    spec.write_text(AGENTS)
    killed = subprocess.run([sys.executable, "-c", KILLED_AS_THE_MERGED_REPORT_IS_WRITTEN,
                             "run", str(spec), "--db", str(db)],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    assert not rows(db)
    resumed_without_measuring(monkeypatch, tmp_path, spec, db)
    report = stored_from_the_journal(db)
    assert report["agents"]["count"] == 1 and report["requests"]["completed"] > 0
