"""Nothing measured is lost (issue 21): a database deleted under a running experiment,
two names for one database, the resume hint, a database on a read-only mount."""

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stacklab.cli import cli
from stacklab.commands.run import resume_command
from stacklab.commands.study import study_command
from stacklab.errors import StoreError
from stacklab.store import Store

from fakes import use_fake_engine
from helpers import require_root, server_processes
from test_store import new_exp, record


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_run_is_not_committed_into_a_database_file_no_longer_at_its_path(tmp_path, how):
    """`rm r.db r.db-wal r.db-shm` during the load: SQLite would commit every later run
    into the unlinked file, and exit 0 with nothing left. One line instead, naming the
    journal entry, which stays."""
    db = tmp_path / "r.db"
    store = Store.open(db)
    exp = new_exp(store)
    for name in ("r.db", "r.db-wal", "r.db-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    if how == "replaced":
        Store.open(db).close()         # another database now has the path
    with pytest.raises(StoreError) as raised:
        store.add_run(record(exp))
    message = str(raised.value)
    [kept] = (tmp_path / "r.db.journal").glob("*.json")
    assert "\n" not in message
    assert f"{db}: the database file was {how}" in message
    assert str(kept) in message
    with pytest.raises(StoreError, match=f"was {how}"):   # nor a new experiment
        new_exp(store, "next")
    store.close()


def test_a_run_is_committed_while_the_path_names_the_open_file(tmp_path):
    store = Store.open(tmp_path / "r.db")
    exp = new_exp(store)
    store.add_run(record(exp))
    assert list(store.runs(exp)) == [record(exp)]
    assert not (tmp_path / "r.db.journal").exists()
    store.close()


@pytest.mark.parametrize("other", ["link.db", "sub/../r.db"])
def test_two_names_for_one_database_take_one_runner_lock(tmp_path, other):
    """`--db r.db --resume` and `--db link.db --resume` both measured: the lock was keyed
    on the path given, not on the file. (A path with `..` already reached the same lock
    directory, the kernel resolving it alike: pinned here, it did not fail before.)"""
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.db").symlink_to(tmp_path / "r.db")
    first, second = Store.open(tmp_path / "r.db"), Store.open(tmp_path / other)
    try:
        with first.experiment_lock("e"):
            with pytest.raises(StoreError, match=f"being run by pid {os.getpid()}"):
                with second.experiment_lock("e"):
                    pass
        with second.experiment_lock("e"):  # released with the first runner's end
            pass
    finally:
        first.close()
        second.close()


@pytest.mark.integration
def test_the_resume_hint_carries_the_db_given(tmp_path, monkeypatch):
    """An interrupted run says how to complete it; without the --db it was given, the
    printed command would resume nothing (another database)."""
    spec = tmp_path / "one.toml"
    spec.write_text('[experiment]\nremeasure = 0\nname = "one"\nrepetitions = 1\nrequests = 200\n'
                    'warmup = "0s"\n[matrix]\nstack = ["nginx"]\n'
                    'workload = ["static-page"]\nconcurrency = [2]\n')
    db = tmp_path / "my results.db"
    # ^C during the load (the fake engine sends it to this process, which runs the CLI)
    use_fake_engine(monkeypatch, tmp_path / "engine", during=f"kill -INT {os.getpid()}")
    result = invoke("run", spec, "--db", db)
    assert result.exit_code == 130, result.output
    hint = f"`stacklab run {spec} --db {shlex.quote(str(db))} --resume` completes the rest"
    assert hint in result.output
    assert server_processes() == []        # the nginx it interrupted was stopped


def test_the_resume_hints_are_commands_that_run():
    assert (resume_command(Path("a b.toml"), None)
            == "stacklab run 'a b.toml' --resume")
    assert (resume_command(Path("e.toml"), Path("r.db"))
            == "stacklab run e.toml --db r.db --resume")
    # a study's step has no spec file of the user's: the study itself resumes its steps
    assert study_command("S1", True, Path("r.db")) == "stacklab study s1 --quick --db r.db"
    assert study_command("S2", False, None) == "stacklab study s2"


@pytest.fixture
def read_only_dir():
    """A directory, and what bind-mounts it read-only over itself (a snapshot, an
    archive's mount); always unmounted."""
    require_root("bind-mount a directory read-only")
    base = Path(tempfile.mkdtemp(prefix="stacklab-test-"))
    directory = base / "results"
    directory.mkdir()
    mounted = []

    def make_read_only() -> None:
        subprocess.run(["mount", "--bind", str(directory), str(directory)], check=True)
        mounted.append(directory)
        subprocess.run(["mount", "-o", "remount,ro,bind", str(directory)], check=True)

    try:
        yield directory, make_read_only
    finally:
        for path in mounted:
            subprocess.run(["umount", "-l", str(path)], check=True)
        shutil.rmtree(base)


@pytest.mark.parametrize("existing", [True, False])
def test_a_database_on_a_read_only_mount_is_said_read_only(read_only_dir, existing):
    """It was called "not a usable SQLite database", which sends the user looking for
    damage in a sound file."""
    directory, make_read_only = read_only_dir
    db = directory / "r.db"
    if existing:
        Store.open(db).close()
    make_read_only()
    with pytest.raises(StoreError) as raised:
        Store.open(db)
    message = str(raised.value)
    assert message.startswith(f"{db}: the database is read-only (its filesystem is "
                              "mounted read-only)"), message
    assert "not a usable" not in message


def test_a_journal_is_kept_beside_the_real_database_whatever_name_opened_it(tmp_path):
    """A run journaled through `--db link.db` is replayed by `--resume --db r.db` (and the
    other way round): the journal, like the lock, follows the real file."""
    real = tmp_path / "r.db"
    Store.open(real).close()
    (tmp_path / "link.db").symlink_to(real)
    through_link, direct = Store.open(tmp_path / "link.db"), Store.open(real)
    try:
        assert through_link.journal_dir() == direct.journal_dir() == Path(f"{real}.journal")
    finally:
        through_link.close()
        direct.close()
