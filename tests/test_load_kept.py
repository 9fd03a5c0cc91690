"""A finished load is not lost (issue 21): a signal between the engine's exit and the
commit, a kill -9 there, a database disk filling during the load. Real nginx and the fake
engine (tests/fake_engine: what is at stake is the orchestrator's hold on a report, not
its figures), which logs each report it gives and runs what happens during the load; the
signal, the kill and the full disk are real too, the signal and the kill sent from a hook
placed where the issue found each window."""

import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from stacklab.run import measurement, runner
from stacklab.analysis.flags import disturbance_factor

from fakes import use_fake_engine
from helpers import require_root, server_processes
from test_reliability import invoke, one_run, rows, tmpfs  # noqa: F401 (tmpfs: a fixture)

REPO = Path(__file__).resolve().parent.parent


MEASURED_AGAIN = "measured again: its load was lost"


def measuring_nothing(monkeypatch, tmp_path):
    """From now on the fake engine refuses every load and writes it down: what follows
    (a resume) must store what was measured, not measure it again."""
    return use_fake_engine(monkeypatch, tmp_path / "engine", refuse=MEASURED_AGAIN)


@pytest.mark.integration
@pytest.mark.parametrize("where", ["counters", "logs"])
def test_a_sigterm_after_the_load_waits_for_the_run_to_be_stored(tmp_path, monkeypatch,
                                                                 where):
    """SIGTERM while the servers' counters are read just after the load, or while the
    logs are kept after the stack stopped: the finished load was thrown away. It is
    stored (whole: resources and counters too), then the command is interrupted."""
    spec, db = one_run(tmp_path), tmp_path / "r.db"
    engine = use_fake_engine(monkeypatch, tmp_path / "engine")
    module, name = ((measurement, "stack_counters") if where == "counters"
                    else (runner, "keep_logs"))
    inner = getattr(module, name)

    def signalled(*args, **kwargs):
        if engine.runs():              # after the load: not the warm-up's reading
            os.kill(os.getpid(), signal.SIGTERM)
        return inner(*args, **kwargs)

    monkeypatch.setattr(module, name, signalled)
    result = invoke("run", spec, "--db", db)
    assert result.exit_code == 130, result.output
    assert "interrupted" in result.output
    [load] = engine.reports()
    [(outcome, reason, _, resources)] = rows(db)
    assert outcome == "ok" and reason is None
    assert "_counters" in json.loads(resources)
    [(stored,)] = rows(db, "SELECT load_json FROM runs")
    assert json.loads(stored) == load.raw
    assert not Path(f"{db}.journal").exists()
    refusing = measuring_nothing(monkeypatch, tmp_path)
    result = invoke("run", spec, "--db", db, "--resume")
    assert not refusing.refused(), MEASURED_AGAIN
    assert result.exit_code == 0, result.output
    assert rows(db, "SELECT status FROM experiments")[0][0] == "complete"
    assert server_processes() == []


KILLED_AFTER_THE_LOAD = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from stacklab.run import measurement
    from stacklab.cli import main
    counters = measurement.stack_counters

    def killed(*args):
        if any(Path(sys.argv[1]).glob("run-*.json")):     # the fake engine's log
            os.kill(os.getpid(), signal.SIGKILL)
        return counters(*args)

    measurement.stack_counters = killed
    sys.exit(main(sys.argv[2:]))
""")


def test_a_kill_9_after_the_load_leaves_what_a_resume_stores(tmp_path, monkeypatch):
    """kill -9 while the counters are read after the load: the load was lost. Its journal
    entry, written as the load returned, is stored by `--resume` without measuring."""
    spec, db = one_run(tmp_path), tmp_path / "r.db"
    engine = use_fake_engine(monkeypatch, tmp_path / "engine")
    killed = subprocess.run([sys.executable, "-c", KILLED_AFTER_THE_LOAD, str(engine.log),
                             "run", str(spec), "--db", str(db)],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not rows(db)
    [entry] = Path(f"{db}.journal").glob("*.json")
    refusing = measuring_nothing(monkeypatch, tmp_path)
    result = invoke("run", spec, "--db", db, "--resume")   # and sweeps the servers left
    assert not refusing.refused(), MEASURED_AGAIN
    assert result.exit_code == 0, result.output
    [(outcome, reason, _, _)] = rows(db)
    assert outcome == "ok" and "stored from the journal" in reason
    # its host window was never read: taken as disturbed, and not sized
    [(flags, resources)] = rows(db, "SELECT flags_json, resources_json FROM runs")
    assert "host-busy" in json.loads(flags)
    assert disturbance_factor(json.loads(resources)["_host"]) == float("inf")
    [(stored,)] = rows(db, "SELECT load_json FROM runs")
    [measured] = engine.runs()
    assert json.loads(stored) == measured["report"]
    assert not entry.exists()
    assert server_processes() == []


def fill(directory: Path, leave: int = 0, name: str = "filler") -> Path:
    """A file taking all the space of `directory`'s filesystem but `leave` bytes."""
    filler = directory / name
    with open(filler, "wb") as f:
        st = os.statvfs(directory)
        room = st.f_bavail * st.f_frsize - leave
        try:
            while room > 0:
                room -= f.write(bytes(min(room, 1 << 16)))
                f.flush()
        except OSError:
            pass                       # full before `room` counted down: full it is
    return filler


@pytest.mark.integration
def test_a_database_disk_filling_during_the_load_keeps_the_load(tmp_path, monkeypatch,
                                                               tmpfs):  # noqa: F811
    """The database's filesystem fills up during the load: the run was lost (neither the
    journal nor the database had room). The room reserved before the load holds it; one
    line says where, and `--resume` stores it once there is space again."""
    results = tmpfs("results", "4M")
    spec, db = one_run(tmp_path), results / "r.db"
    # during the load, a file takes all the space left (cat stops at ENOSPC)
    filler = shlex.quote(str(results / "filler"))
    use_fake_engine(monkeypatch, tmp_path / "engine",
                    during=f"cat /dev/zero > {filler} 2>/dev/null || true")
    counters = measurement.stack_counters

    def filled() -> list[Path]:
        return sorted(results.glob("filler*"))

    def full_still(*args):             # what the entry gave back is taken again
        if so_far := filled():
            fill(results, name=f"filler{len(so_far)}")
        return counters(*args)

    monkeypatch.setattr(measurement, "stack_counters", full_still)
    result = invoke("run", spec, "--db", db)
    assert result.exit_code == 1, result.output
    [line] = [x for x in result.output.splitlines() if x.startswith("stacklab: error")]
    [entry] = Path(f"{db}.journal").glob("*.json")
    assert "not stored" in line and f"it is kept in {entry}" in line, line
    assert filled()                    # the disk did fill during the load
    for filler in filled():
        filler.unlink()
    refusing = measuring_nothing(monkeypatch, tmp_path)
    result = invoke("run", spec, "--db", db, "--resume")
    assert not refusing.refused(), MEASURED_AGAIN
    assert result.exit_code == 0, result.output
    [(outcome, reason, _, _)] = rows(db)
    assert outcome == "ok" and "stored from the journal" in reason
    assert server_processes() == []


def test_no_load_starts_without_room_for_its_journal_entry(
        tmp_path, monkeypatch, tmpfs, fake_processes):
    """Less free than a journal entry's room: one line naming the journal, before any
    server or load is started (the fake process runner and the fake engine say what
    was)."""
    results = tmpfs("results", "4M")
    spec, db = one_run(tmp_path), results / "r.db"
    engine = use_fake_engine(monkeypatch, tmp_path / "engine",
                             refuse="a load started without room for its journal entry")
    monkeypatch.setattr(runner, "_check_other_labs",
                        lambda ctx, progress: fill(results, leave=16 << 10))
    result = invoke("run", spec, "--db", db)
    assert result.exit_code == 1, result.output
    [line] = [x for x in result.output.splitlines() if x.startswith("stacklab: error")]
    assert line.startswith(f"stacklab: error: {db}.journal: no room for a run's journal "
                           "entry"), line
    assert f"`stacklab run {spec} --db {db} --resume`" in line
    assert fake_processes.started == [], "a server started without room for its journal"
    assert engine.refused() == []               # no load was even tried
    assert server_processes() == []


STACKLAB = "import sys; from stacklab.cli import main; sys.exit(main(sys.argv[1:]))"


def test_database_files_made_immutable_mid_run_say_so_and_resume(tmp_path, monkeypatch):
    """`chattr +i` on the database's files during the load: SQLite died of SIGBUS on its
    mapped WAL index, with no message and the experiment left `running`. One line names
    the file and what to do; the run waits in the journal, and `--resume` stores it once
    the files are writable again. (tmp_path is on the disk: tmpfs has no chattr.)"""
    require_root("chattr +i")
    spec, db = one_run(tmp_path), tmp_path / "r.db"
    files = [str(db), f"{db}-wal", f"{db}-shm"]
    use_fake_engine(monkeypatch, tmp_path / "engine",
                    during=shlex.join(["chattr", "+i", *files]))
    try:
        frozen = subprocess.run([sys.executable, "-c", STACKLAB,
                                 "run", str(spec), "--db", str(db)],
                                cwd=REPO, capture_output=True, text=True, timeout=300)
    finally:
        subprocess.run(["chattr", "-i", *files], check=True)
    assert frozen.returncode == 1, (frozen.returncode, frozen.stderr)
    output = frozen.stdout + frozen.stderr
    assert "Traceback" not in output and "Fatal Python error" not in output, output
    [line] = [x for x in output.splitlines() if x.startswith("stacklab: error")]
    [entry] = Path(f"{db}.journal").glob("*.json")
    assert any(line.startswith(f"stacklab: error: {f}: made immutable") for f in files), line
    assert "chattr -i" in line and f"it is kept in {entry}" in line, line
    refusing = measuring_nothing(monkeypatch, tmp_path)
    result = invoke("run", spec, "--db", db, "--resume")   # sweeps the servers left
    assert not refusing.refused(), MEASURED_AGAIN
    assert result.exit_code == 0, result.output
    [(outcome, reason, _, _)] = rows(db)
    assert outcome == "ok"
    assert rows(db, "SELECT status FROM experiments")[0][0] == "complete"
    assert server_processes() == []


def test_a_landed_entry_is_replayed_and_an_unfilled_room_is_dropped(tmp_path):
    """The store's side, without servers: an entry written into its room is what a resume
    stores; a room whose load never returned (or was torn by a kill -9 mid-write) is not
    an entry, and goes."""
    from stacklab.store import Store
    from test_store import new_exp, record
    store = Store.open(tmp_path / "r.db")
    exp = new_exp(store)
    store.reserve(exp, "abc123", 1, 64 << 10)
    store.reserve(exp, "abc123", 2, 64 << 10)
    journal = tmp_path / "r.db.journal"
    assert (journal / f"{exp}-abc123-r1.reserved").stat().st_size == 64 << 10
    entry = store.landed(record(exp, rep=1))
    assert entry == journal / f"{exp}-abc123-r1.json"
    assert store.replay_journal(exp) == 1
    assert [r.repetition for r in store.runs(exp)] == [1]
    assert not journal.exists()        # the unfilled room of #2 went with it
    store.close()
