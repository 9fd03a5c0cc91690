"""Reliability: nothing measured is lost, and what cannot be measured well is refused or
flagged. Each test reproduces one failure of the issue "Reliability" with real servers,
a real full disk, a real lock or a real signal."""

import dataclasses
import json
import os
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import stacklab.store as store_module
from stacklab.host import hostinfo, lab
from stacklab.netlab import rundir
from stacklab.netlab.sweep import SWEEPS
from stacklab.run import measurement, runner
from stacklab.cli import cli
from stacklab.stacks import COMPONENTS
from stacklab.store import Store

from fakes import fake_experiment, use_fake_engine
from helpers import require_engine, require_root, server_processes, wait_for


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def tmpfs():
    """mount(name, size) → a directory on a tmpfs of that size, unmounted afterwards;
    under a directory www-data can traverse (servers read their docroot from the lab)."""
    require_root("mount a tmpfs")
    base = Path(tempfile.mkdtemp(prefix="stacklab-test-"))
    base.chmod(0o755)
    mounted = []

    def mount(name: str, size: str) -> Path:
        path = base / name
        path.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=755", "tmpfs",
                        str(path)], check=True)
        mounted.append(path)
        return path

    yield mount
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", str(path)], check=True)
    shutil.rmtree(base)


def test_git_commit_leaves_a_users_index_alone(tmp_path, monkeypatch):
    """`git status` refreshes .git/index when it can; run as root in a user's checkout it
    would leave a root-owned index behind."""
    require_root("chown a checkout to another user")
    repo = tmp_path / "checkout"
    repo.mkdir()
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    (repo / "f").write_text("a\n")
    subprocess.run([*git, "add", "f"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "x"], cwd=repo, check=True)
    for path in [repo, *repo.rglob("*")]:
        os.lchown(path, 1000, 1000)
    index = repo / ".git" / "index"
    stat = index.stat()
    os.utime(repo / "f", ns=(stat.st_mtime_ns + 10**9, stat.st_mtime_ns + 10**9))
    # the user trusts their checkout, as root's git would after `safe.directory`
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "safe.directory")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "*")
    monkeypatch.setattr(hostinfo, "REPO", repo)
    assert hostinfo.git_commit() and not hostinfo.git_commit().endswith("-dirty")
    assert index.stat().st_uid == 1000


def test_a_read_only_database_can_be_read(tmpfs):
    """show and export only read: a database on a read-only filesystem (an archive, a
    snapshot) is read without being written, not called unusable."""
    results = tmpfs("results", "4m")
    db = results / "stacklab.db"
    fake_experiment(db, "ro", reps=1)
    subprocess.run(["mount", "-o", "remount,ro", str(results)], check=True)
    shown = invoke("show", "ro", "--db", db)
    assert shown.exit_code == 0, shown.output
    assert "ro (experiment 1" in shown.output
    exported = invoke("export", "ro", "--format", "csv", "--db", db)
    assert exported.exit_code == 0, exported.output
    assert len(exported.output.strip().splitlines()) == 5
    assert sorted(p.name for p in results.iterdir()) == ["stacklab.db"]


ONE_RUN = """
[experiment]
name = "{name}"
repetitions = 1
{measure}
warmup = "0s"
remeasure = 0
{extra}
[matrix]
stack = ["nginx"]
workload = ["static-page"]
concurrency = [2]
"""


def one_run(tmp_path, name="one", measure="requests = 200", extra="") -> Path:
    """One nginx run; a disturbed one is not measured again (two labs here measure each
    other on purpose, and the tests count the runs)."""
    spec = tmp_path / f"{name}.toml"
    spec.write_text(ONE_RUN.format(name=name, measure=measure, extra=extra))
    return spec


def rows(db, sql="SELECT outcome, reason, flags_json, resources_json FROM runs"):
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.mark.integration
def test_a_locked_database_keeps_the_measured_run_for_resume(tmp_path, monkeypatch):
    """A write lock held past the busy timeout: one line, the run kept in the journal,
    and `--resume` stores it without measuring it again."""
    require_engine()
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_S", 0.2)
    spec, db = one_run(tmp_path), tmp_path / "stacklab.db"
    measure = runner.execute_run
    holder = []

    def measure_then_lock(ctx, run):
        record = measure(ctx, run)
        holder.append(sqlite3.connect(db, isolation_level=None))
        holder[0].execute("BEGIN IMMEDIATE")
        return record

    monkeypatch.setattr(runner, "execute_run", measure_then_lock)
    result = invoke("run", spec, "--db", db)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    [line] = [x for x in result.output.splitlines() if x.startswith("stacklab: error")]
    assert "database is locked" in line and "--resume" in line
    [kept] = Path(f"{db}.journal").glob("*.json")
    holder[0].close()
    assert not rows(db)

    # the resume's engine: the fake one, refusing and writing down any load
    engine = use_fake_engine(monkeypatch, tmp_path / "engine", refuse="measured again")
    result = invoke("run", spec, "--db", db, "--resume")
    assert not engine.refused(), "measured again"
    assert result.exit_code == 0, result.output
    [(outcome, *_)] = rows(db)
    assert outcome == "ok" and not kept.exists()
    assert rows(db, "SELECT status FROM experiments")[0][0] == "complete"
    assert server_processes() == []


def fill(directory: Path, leave: int) -> None:
    """Fill the filesystem of `directory` until `leave` bytes are free."""
    st = os.statvfs(directory)
    (directory / "filler").write_bytes(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))


@pytest.mark.integration
@pytest.mark.parametrize("free_kib, why", [(160, "No space left on device"),
                                           (4096 + 100, "under the 4 MiB kept")],
                         ids=["full", "reserve"])
def test_a_full_results_disk_stores_the_run_without_its_logs(tmp_path, tmpfs, free_kib, why):
    """Keeping the logs meets ENOSPC after the run was measured (or would leave too little
    room for the run's row): the run is stored with a note, the experiment completes, and
    no traceback."""
    require_engine()
    results = tmpfs("results", "8m")
    db = results / "stacklab.db"
    Store.open(db).close()
    fill(results, free_kib << 10)
    spec = one_run(tmp_path, measure="requests = 4000")   # ~350 KB of access log
    result = invoke("run", spec, "--db", db)
    assert result.exit_code == 0, result.output
    [run] = rows(db, "SELECT outcome, reason, run_dir FROM runs")
    assert run["outcome"] == "ok", run["reason"]
    assert run["reason"].startswith("logs not kept: ENOSPC") and run["run_dir"] is None
    assert why in run["reason"]
    assert "logs not kept" in result.output
    assert rows(db, "SELECT status FROM experiments")[0][0] == "complete"
    assert not any((results / "runs").rglob("*.log"))          # no partial copies
    assert server_processes() == []


@pytest.fixture
def lab_on(tmpfs, monkeypatch):
    """lab_on(size) → the lab directory (/tmp/stacklab-<uid>) on a tmpfs of that size."""
    from stacklab.host import lab

    def on(size: str) -> Path:
        root = tmpfs("lab", size)
        monkeypatch.setattr(lab, "default_root", lambda: root)
        return root
    return on


def test_a_lab_directory_short_of_space_is_refused_before_measuring(tmp_path, lab_on):
    """Below the minimum, servers would cut their logs silently: refused, resumable."""
    require_engine()
    lab_on("8m")
    spec, db = one_run(tmp_path), tmp_path / "stacklab.db"
    result = invoke("run", spec, "--db", db)
    assert result.exit_code == 1, result.output
    [line] = [x for x in result.output.splitlines() if x.startswith("stacklab: error")]
    assert f"below the {runner.LAB_MIN_FREE_MIB} MiB" in line and "--resume" in line
    assert not rows(db)
    assert rows(db, "SELECT status FROM experiments")[0][0] == "interrupted"


@pytest.mark.integration
def test_a_run_directory_that_fills_up_during_the_run_fails_the_run(tmp_path, lab_on,
                                                                    monkeypatch):
    """The run directory's filesystem (its own tmpfs, 64 MiB here) filled up during the
    load: the server's log is cut, the run is failed, saying which filesystem filled,
    not stored ok. (The fake engine fills it, as a real load's access log would.)"""
    root = lab_on(f"{runner.LAB_MIN_FREE_MIB + 16}m")
    monkeypatch.setattr(rundir, "RUN_TMPFS_MAX_MIB", 64)
    filler = shlex.quote(str(root)) + "/s-*/*-r1"
    use_fake_engine(monkeypatch, tmp_path / "engine",
                    during=f"for d in {filler}; do cat /dev/zero > $d/filler; done "
                           "2>/dev/null || true")
    spec, db = one_run(tmp_path, measure="requests = 20000"), tmp_path / "stacklab.db"
    result = invoke("run", spec, "--db", db)
    assert result.exit_code == 0, result.output
    [run] = rows(db, "SELECT outcome, reason FROM runs")
    assert run["outcome"] == "failed", run["reason"]
    assert "the run directory's tmpfs (64 MiB, 32,768 inodes) filled up during the run" \
        in run["reason"]
    assert server_processes() == []


def children(exe: str, parent: int) -> list[int]:
    """Pids of live processes running `exe` (basename) whose parent is `parent`."""
    from stacklab.host.procs import proc_stat
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.path.basename(os.readlink(f"/proc/{pid}/exe")) != exe:
                continue
        except OSError:
            continue
        fields = proc_stat(int(pid))
        if fields and int(fields[1]) == parent and fields[0] != b"Z":
            found.append(int(pid))
    return found


def loads(parent: int) -> list[int]:
    """The engines `parent` runs a load with (not `stacklab-load --version`)."""
    def cmdline(pid: int) -> bytes:
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return b""
    return [pid for pid in children("stacklab-load", parent) if b"--urls" in cmdline(pid)]


def during_load(action) -> threading.Thread:
    """Run action(engine_pid) in a thread once the engine has run for a moment."""
    def watch():
        pids = wait_for(lambda: loads(os.getpid()), 30, "the engine")
        time.sleep(0.5)               # into the measured load
        action(pids[0])
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.integration
def test_an_engine_stopped_by_a_signal_is_a_failed_run(tmp_path):
    """kill -TERM of stacklab-load mid-run: the engine still reports (interrupted), but
    0.5 s of a planned 2 s is no measurement of the trial: failed, out of the medians."""
    require_engine()
    spec, db = one_run(tmp_path, measure='duration = "2s"'), tmp_path / "stacklab.db"
    thread = during_load(lambda pid: os.kill(pid, signal.SIGTERM))
    result = invoke("run", spec, "--db", db)
    thread.join(timeout=30)
    assert result.exit_code == 0, result.output
    [run] = rows(db, "SELECT outcome, reason, load_json FROM runs")
    assert json.loads(run["load_json"])["interrupted"] is True       # the report is kept
    assert run["outcome"] == "failed" and "engine interrupted" in run["reason"]
    assert server_processes() == []


def test_a_paced_requests_run_is_given_and_estimated_the_time_it_needs(tmp_path):
    """1000 requests at load.rate 1 take 1000 s: neither a fixed 660 s engine limit nor a
    5 s estimate."""
    from stacklab.commands.run import load
    from stacklab.measure.drive import ENGINE_MARGIN_S, LoadPlan, engine_timeout_s
    spec_path = one_run(tmp_path, measure="requests = 1000", extra="[load]\nrate = 1\n")
    spec, plan = load(spec_path)
    assert 1000 <= plan.estimated_s(spec) < 1010
    knobs = {"rate": 1, "timeout_s": 10.0}
    paced = LoadPlan((("http://127.0.0.1:1/", 1),), 2, None, 1000, 1.0, knobs)
    assert engine_timeout_s(paced) == 1000 / 1 + 1.0 + 10.0 + ENGINE_MARGIN_S
    timed = LoadPlan((("http://127.0.0.1:1/", 1),), 2, 3.0, None, 1.0, knobs)
    assert engine_timeout_s(timed) == 3.0 + 1.0 + 10.0 + ENGINE_MARGIN_S


@pytest.mark.integration
def test_an_engine_that_overruns_its_limit_is_a_failed_run(tmp_path, monkeypatch):
    """The engine stopped at its limit is a failed run; the experiment goes on."""
    require_engine()
    real = runner._load_plan
    monkeypatch.setattr(runner, "_load_plan", lambda *a: dataclasses.replace(
        real(*a), timeout_s=0.5))                  # 10 requests at 5/s take 2 s
    spec = one_run(tmp_path, measure="requests = 10", extra="[load]\nrate = 5\n")
    db = tmp_path / "stacklab.db"
    result = invoke("run", spec, "--db", db)
    assert result.exit_code == 0, result.output
    [run] = rows(db, "SELECT outcome, reason FROM runs")
    assert run["outcome"] == "failed" and "overran its 0.5 s limit" in run["reason"]
    assert rows(db, "SELECT status FROM experiments")[0][0] == "complete"
    assert server_processes() == [] and not children("stacklab-load", os.getpid())


@pytest.mark.integration
def test_a_server_worker_killed_during_the_load_flags_the_run(tmp_path):
    """SIGKILL of an nginx worker mid-load: the master respawns it and the run looks ok
    with a few read errors; it is flagged server-child-killed, from nginx's own log."""
    require_engine()
    spec = one_run(tmp_path, measure='duration = "2s"',
                   extra="[knobs]\nnginx.worker_processes = 2\n")
    db = tmp_path / "stacklab.db"

    def kill_a_worker(_engine):
        [master] = children("nginx", os.getpid())
        os.kill(children("nginx", master)[0], signal.SIGKILL)

    thread = during_load(kill_a_worker)
    result = invoke("run", spec, "--db", db)
    thread.join(timeout=30)
    assert result.exit_code == 0, result.output
    [run] = rows(db)
    assert "server-child-killed" in json.loads(run["flags_json"])
    [line] = json.loads(run["resources_json"])["_logs"]["child_signals"]
    assert line.startswith("nginx/error.log: ") and "exited on signal 9" in line
    assert server_processes() == []


def test_child_signals_are_told_from_the_reaping_of_idle_children(tmp_path):
    (tmp_path / "php-fpm").mkdir()
    (tmp_path / "php-fpm" / "error.log").write_text(
        "NOTICE: [pool www] child 11 exited on signal 3 (SIGQUIT) after 10.5 seconds\n"
        "NOTICE: [pool www] child 12 exited with code 0 after 3.1 seconds from start\n"
        "WARNING: [pool www] child 13 exited on signal 9 (SIGKILL) after 2.0 seconds\n")
    (tmp_path / "apache").mkdir()
    (tmp_path / "apache" / "error.log").write_text(
        "[mpm_event:notice] AH00052: child pid 14 exit signal Segmentation fault (11)\n")
    (tmp_path / "apache" / "access.log").write_text('"GET /exited on signal 9" 404\n')
    servers = [(COMPONENTS[name], tmp_path / name) for name in ("php-fpm", "apache")]
    assert measurement.child_signals(tmp_path, servers) == [
        "apache/error.log: [mpm_event:notice] AH00052: child pid 14 exit signal "
        "Segmentation fault (11)",
        "php-fpm/error.log: WARNING: [pool www] child 13 exited on signal 9 (SIGKILL) "
        "after 2.0 seconds"]


@pytest.mark.integration
def test_one_runner_per_experiment_and_other_labs_are_recorded(tmp_path):
    """While `stacklab run` measures an experiment, a second runner of it is refused
    naming the first's pid (they would measure each other, then collide on the same
    runs), and a run of another experiment records the other lab and warns."""
    require_engine()
    spec, db = one_run(tmp_path, measure='duration = "4s"'), tmp_path / "stacklab.db"
    first = subprocess.Popen([sys.executable, "-m", "stacklab.cli", "run", str(spec),
                              "--db", str(db)], cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: loads(first.pid), 30, "the first runner's load")
        second = invoke("run", spec, "--db", db, "--resume")
        assert second.exit_code == 1, second.output
        assert f"experiment 'one' (id 1) is being run by pid {first.pid}" in second.output
        other_db = tmp_path / "other.db"
        other = invoke("run", one_run(tmp_path, "other"), "--db", other_db)
        assert other.exit_code == 0, other.output
        assert f"another stacklab (pid {first.pid})" in other.output
        [run] = rows(other_db)
        labs = json.loads(run["resources_json"])["_system"]["other_labs"]
        assert first.pid in [lab["pid"] for lab in labs]
    finally:
        _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    [run] = rows(db)
    assert run["outcome"] == "ok"
    assert server_processes() == []


def test_any_sqlite_error_is_one_line(tmp_path):
    """Whatever SQLite says (here: a damaged database without its runs table) crosses
    the CLI's boundary as one line, never a traceback."""
    db = tmp_path / "stacklab.db"
    fake_experiment(db, "damaged", reps=1)
    conn = sqlite3.connect(db)
    conn.execute("DROP TABLE runs")
    conn.commit()
    conn.close()
    result = invoke("show", "damaged", "--db", db)
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "stacklab: error: results database: no such table: runs"]


def test_an_interrupt_waits_for_the_end_of_interrupts_held(tmp_path):
    """The engine's Popen runs inside interrupts_held(): a SIGTERM arriving between its
    fork and its return lands only once the caller knows the process and can stop it
    (one CI run left an engine behind that way)."""
    reached = []
    with lab.session_scope(sweeps=SWEEPS):          # tmp_path is 0700: no lab root for www-data
        with pytest.raises(KeyboardInterrupt):
            with lab.interrupts_held():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)              # the handler runs here and only notes it
                reached.append("the block's end")
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)                  # outside the block it lands at once
            reached.append("never")
    assert reached == ["the block's end"]
