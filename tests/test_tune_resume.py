"""`stacklab tune --resume` measures nothing twice and loses nothing (issue 38): the
final comparison an interrupt cut short is resumed, not measured again; a trial killed
with kill -9 is continued (its experiment completed, its journal's rooms removed); the
study is the database's own, and a study file that cannot be read is one line. Real
nginx and the fake engine (tests/fake_engine): what is at stake is which runs are
measured and stored, which its log tells, not their figures."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stacklab.cli import cli
from stacklab.store import Store

from fakes import use_fake_engine
from helpers import _descends_from, server_processes, wait_for

REPO = Path(__file__).resolve().parent.parent

# Two trials of two runs each, then the final comparison: the defaults, the best and the
# hand preset (which differs from the defaults whatever the search finds), two runs each
SPEC = """
[experiment]
name = "tn"
repetitions = 2
requests = 200
warmup = "0s"
remeasure = 0

[tune]
trials = 2
final_repetitions = 2
candidates = 1
prune = 0
seed = 1

[tune.hand]
"nginx.sendfile" = false

[tune.knobs]
"nginx.worker_processes" = [1, 2]

[matrix]
stack = ["nginx"]
workload = ["static-page"]
concurrency = [2]
"""
TRIAL_LOADS = 4


def invoke(*args) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.output


def write(directory: Path) -> Path:
    spec = directory / "tn.toml"
    spec.write_text(SPEC)
    return spec


def experiments(db: Path) -> list[tuple[str, str, int]]:
    """(name, status, runs stored) of each experiment, oldest first."""
    store = Store.open(db, readonly=True)
    try:
        return [(e.name, e.status, e.n_runs) for e in store.experiments()]
    finally:
        store.close()


def engine_again(monkeypatch, log: Path):
    """The fake engine from now on with nothing run during its loads."""
    monkeypatch.delenv("FAKE_ENGINE_DURING")
    return use_fake_engine(monkeypatch, log)


def killing_after(loads: int, how: str) -> str:
    """A FAKE_ENGINE_DURING command: during the load after `loads` loads (the engine logs
    each once it ends), the command running it gets `how` (a kill option)."""
    return (f'if [ $(ls "$FAKE_ENGINE_LOG" | grep -c "^run-") -ge {loads} ]; '
            f'then kill {how} "$TUNE_PID"; fi')


@pytest.mark.integration
def test_an_interrupted_final_comparison_is_resumed_not_measured_again(tmp_path,
                                                                      monkeypatch):
    """^C during the final comparison's second run: `tune --resume` measured its stored
    runs again in a second experiment `tn.tune-final`. It completes the one there is,
    measuring only the runs it lacks."""
    db, spec = tmp_path / "r.db", write(tmp_path)
    monkeypatch.setenv("TUNE_PID", str(os.getpid()))
    use_fake_engine(monkeypatch, tmp_path / "engine",
                    during=killing_after(TRIAL_LOADS + 1, "-INT"))
    status, out = invoke("tune", spec, "--db", db)
    assert status == 130, out
    [(_, final_status, kept)] = [e for e in experiments(db) if e[0] == "tn.tune-final"]
    assert final_status == "interrupted" and kept == 1, out
    engine = engine_again(monkeypatch, tmp_path / "engine-again")
    status, out = invoke("tune", spec, "--db", db, "--resume")
    assert status == 0, out
    finals = [e for e in experiments(db) if e[0] == "tn.tune-final"]
    assert len(finals) == 1, finals
    [(_, final_status, runs)] = finals
    assert final_status == "complete"
    # the run ^C stopped had finished its load (the fake engine's hook runs after it) and
    # its engine had written the report into the journal: the resume stores it (issue 38)
    assert len(engine.runs()) == runs - kept - 1, "a stored or finished run measured again"
    assert "against the defaults, measured again" in out, out
    assert server_processes() == []


KILLED = textwrap.dedent("""
    import os, sys
    os.environ["TUNE_PID"] = str(os.getpid())     # what the fake engine's hook kills
    from stacklab.cli import main
    sys.exit(main(sys.argv[1:]))
""")


def killed_tune(spec: Path, db: Path) -> None:
    """`tune` in a process of its own, which the fake engine's hook kills with -9; then
    that engine's end (it goes on alone, writes its report into the journal, exits)."""
    done = subprocess.run([sys.executable, "-c", KILLED, "tune", str(spec),
                           "--db", str(db)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stdout + done.stderr
    wait_for(lambda: not fake_engines(), 60, "the killed tune's engine to end")


def fake_engines() -> list[int]:
    """The fake engines this test run started that still run (orphans included: the test
    run is a child subreaper, conftest.py)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"fake_engine/engine.py" in cmdline and _descends_from(int(pid), os.getpid()):
            found.append(int(pid))
    return found


@pytest.mark.integration
def test_a_trial_killed_with_kill_9_is_completed_on_resume(tmp_path, monkeypatch):
    """kill -9 during trial 0's second run: its experiment stayed `running` for ever, the
    room its run's journal entry had (`.reserved`) was never removed, and the trial was
    measured again from its first run in another experiment. The resume continues trial
    0: its stored run kept, the room gone, nothing `running`; its second run, whose
    engine finished the load alone and wrote its report into the journal, stored from
    there (issue 38), not measured again."""
    db, spec = tmp_path / "r.db", write(tmp_path)
    use_fake_engine(monkeypatch, tmp_path / "engine", during=killing_after(1, "-9"))
    killed_tune(spec, db)
    assert experiments(db) == [("tn.tune-0", "running", 1)]
    assert list(Path(f"{db}.journal").glob("*.reserved"))
    engine = engine_again(monkeypatch, tmp_path / "engine-again")
    status, out = invoke("tune", spec, "--db", db, "--resume")
    assert status == 0, out
    stored = experiments(db)
    assert [e for e in stored if e[0] == "tn.tune-0"] == [("tn.tune-0", "complete", 2)]
    assert [e[0] for e in stored if e[0].startswith("tn.tune-") and e[0] != "tn.tune-final"
            ] == ["tn.tune-0", "tn.tune-1"], stored
    assert all(status == "complete" for _, status, _ in stored), stored
    assert not Path(f"{db}.journal").exists()
    # trial 1's two runs and the final's: neither of trial 0's again
    final = sum(n for name, _, n in stored if name == "tn.tune-final")
    assert len(engine.runs()) == 2 + final
    assert "trial 0:" in out and "trial 1:" in out, out
    assert server_processes() == []


@pytest.fixture(scope="module")
def searched(tmp_path_factory) -> Path:
    """A directory with a finished search `tn` in a.db (the fake engine's)."""
    directory = tmp_path_factory.mktemp("searched")
    with pytest.MonkeyPatch.context() as monkeypatch:
        use_fake_engine(monkeypatch, directory / "engine")
        status, out = invoke("tune", write(directory), "--db", directory / "a.db")
    assert status == 0, out
    return directory


def copied(searched: Path, tmp_path: Path) -> Path:
    """The finished search's directory, copied: each test alters its own."""
    target = tmp_path / "copy"
    shutil.copytree(searched, target, symlinks=True)
    return target


def test_a_resume_beside_another_databases_search_is_refused(searched, tmp_path):
    """`tune --db new.db --resume` beside a.db resumed a.db's search (its study was
    keyed on the directory and the name), and printed its best and importances although
    new.db holds none of its trials. Refused: new.db has no search, and nothing is
    measured into it."""
    directory = copied(searched, tmp_path)
    new = directory / "new.db"
    status, out = invoke("tune", directory / "tn.toml", "--db", new, "--resume")
    assert status == 2, out
    assert "no stored search named 'tn'" in out and "best:" not in out, out
    assert not new.exists() and not Path(f"{new}.tune").exists()


def test_a_study_whose_trials_are_not_in_the_database_is_refused(searched, tmp_path):
    """The study kept with a database that is not the one it measured into (the
    database replaced, the study copied beside another): a resume is refused, naming the
    trials the database lacks, and measures nothing."""
    directory = copied(searched, tmp_path)
    study = next(directory.glob("a.db.tune/tn.optuna.db"))
    other = directory / "other.db"
    Store.open(other).close()
    shutil.copytree(study.parent, Path(f"{other}.tune"))
    status, out = invoke("tune", directory / "tn.toml", "--db", other, "--resume")
    assert status == 2, out
    assert "tn.tune-0" in out and "does not hold" in out and "best:" not in out, out
    assert experiments(other) == []


def test_a_study_at_the_former_place_is_named_by_the_refusal(searched, tmp_path):
    """Where stacklab kept the study before (runs/tune/ beside the database, shared by
    every database of the directory): a resume does not take it, and says where it is."""
    directory = copied(searched, tmp_path)
    former = directory / "runs" / "tune" / "tn.optuna.db"
    former.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(directory / "a.db.tune" / "tn.optuna.db", former)
    status, out = invoke("tune", directory / "tn.toml", "--db", directory / "a.db",
                         "--resume")
    assert status == 2, out
    assert str(former) in out and "move it to" in out, out


def not_a_database(study: Path) -> None:
    study.write_bytes(b"not a database\n" * 100)


def truncated(study: Path) -> None:
    os.truncate(study, 4096)


def of_another_program(study: Path) -> None:
    study.unlink()
    with sqlite3.connect(study) as conn:
        conn.execute("CREATE TABLE trials (a, b)")
        conn.execute("CREATE TABLE studies (x)")


def of_another_optuna(study: Path) -> None:
    with sqlite3.connect(study) as conn:
        conn.execute("UPDATE alembic_version SET version_num = 'v99'")


@pytest.mark.parametrize("spoil", [not_a_database, truncated, of_another_program,
                                   of_another_optuna])
def test_an_unreadable_study_file_is_one_line_naming_it(searched, tmp_path, spoil):
    """A corrupt Optuna study file: a traceback. One line naming the file and what to
    do, and nothing measured."""
    directory = copied(searched, tmp_path)
    [study] = directory.glob("**/tn.optuna.db")
    spoil(study)
    result = CliRunner().invoke(cli, ["tune", str(directory / "tn.toml"), "--db",
                                      str(directory / "a.db"), "--resume"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), \
        result.exception      # not an exception the boundary left as a traceback
    line = result.output.strip().splitlines()[-1]
    assert line.startswith(f"stacklab: error: {study}: "), result.output
    assert "move it away" in line, result.output
