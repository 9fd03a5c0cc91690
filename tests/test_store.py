"""Store: round trip, migrations, never overwriting a run."""

import json
import sqlite3

import pytest

from stacklab.errors import NotFound, StoreError
from stacklab.store import SCHEMA_VERSION, Outcome, RunRecord, Store
from stacklab.measure.verify import Status, Verdict

from fakes import fake_load, load_report


def record(exp_id, rep=1, outcome=Outcome.OK):
    load = fake_load(1234.5, 800, seed=1)
    load["latency_us"].update(p50=100, p99=900)
    load["engine"].update(cpu_user_s=0.25, cpu_sys_s=0.5)
    return RunRecord(experiment_id=exp_id, trial_id="abc123", repetition=rep,
                     outcome=outcome, started_at="t0", ended_at="t1",
                     knobs={"nginx": {"a": 1}}, versions={"nginx": "1.22.1"},
                     configs={"nginx/nginx.conf": "x"},
                     verdicts=(Verdict("nginx", "c", Status.PASS, ""),),
                     load=load_report(load), resources={"nginx": {"cpu_s": 0.5}},
                     flags=("generator-bound",), run_dir="/r")


def new_exp(store, name="e"):
    return store.new_experiment(name, "e.toml", "h", {"experiment": {}},
                                [("abc123", "nginx c=1", {"stack": "nginx"})],
                                {"cores": 2}, "0.1.0", None, "now")


def test_round_trip(tmp_path):
    store = Store.open(tmp_path / "r.db")
    exp = new_exp(store)
    store.add_run(record(exp))
    store.close()
    store = Store.open(tmp_path / "r.db")
    [got] = list(store.runs(exp))
    assert got == record(exp)
    assert store.done(exp) == {("abc123", 1)}
    row = store.conn.execute("SELECT rps, p99_us, engine_cpu_s FROM runs").fetchone()
    assert tuple(row) == (1234.5, 900, 0.75)
    assert store.experiment("e").id == exp
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_run_is_never_overwritten(tmp_path):
    store = Store.open(tmp_path / "r.db")
    exp = new_exp(store)
    store.add_run(record(exp))
    with pytest.raises(StoreError, match="already stored"):
        store.add_run(record(exp, outcome=Outcome.FAILED))
    assert [r.outcome for r in store.runs(exp)] == ["ok"]


def test_newest_experiment_of_a_name_wins(tmp_path):
    store = Store.open(tmp_path / "r.db")
    first, second = new_exp(store), new_exp(store)
    assert store.experiment("e").id == second != first
    assert store.experiment(str(first)).id == first
    with pytest.raises(NotFound, match="no experiment .zzz."):
        store.experiment("zzz")


def test_migrates_an_empty_database_and_records_the_version(tmp_path):
    db = tmp_path / "r.db"
    sqlite3.connect(db).close()
    store = Store.open(db)
    assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    tables = {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master")}
    assert {"experiments", "trials", "runs"} <= tables


def test_refuses_a_database_from_a_newer_stacklab(tmp_path):
    db = tmp_path / "r.db"
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer than this stacklab"):
        Store.open(db)


def test_a_failed_migration_leaves_the_database_untouched(tmp_path, monkeypatch):
    from stacklab.store import migrations
    monkeypatch.setattr(migrations, "MIGRATIONS", ["CREATE TABLE a (x); CREATE TABLE a (x);"])
    import stacklab.store as st
    monkeypatch.setattr(st, "MIGRATIONS", migrations.MIGRATIONS)
    monkeypatch.setattr(st, "SCHEMA_VERSION", 1)
    db = tmp_path / "r.db"
    with pytest.raises(StoreError, match="migration to schema 1 failed"):
        Store.open(db)
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    assert not conn.execute("SELECT name FROM sqlite_master").fetchall()


def locked(db):
    """Another connection holding the write lock (as a second stacklab or a sqlite3 shell
    in a transaction would)."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    return conn


def test_a_locked_database_is_one_error_and_the_run_waits_in_the_journal(tmp_path,
                                                                         monkeypatch):
    import stacklab.store as st
    monkeypatch.setattr(st, "BUSY_TIMEOUT_S", 0.1)
    db = tmp_path / "r.db"
    store = Store.open(db)
    exp = new_exp(store)
    holder = locked(db)
    with pytest.raises(StoreError) as raised:
        store.add_run(record(exp))
    message = str(raised.value)
    assert "database is locked" in message and "--resume" in message
    assert "\n" not in message
    [kept] = (tmp_path / "r.db.journal").glob("*.json")
    assert str(kept) in message
    with pytest.raises(StoreError, match="database is locked"):
        store.set_status(exp, "interrupted")
    holder.close()
    assert store.replay_journal(exp) == 1
    assert list(store.runs(exp)) == [record(exp)]
    assert not kept.exists()


def test_a_journal_entry_already_stored_is_dropped_and_others_wait(tmp_path):
    db = tmp_path / "r.db"
    store = Store.open(db)
    exp, other = new_exp(store), new_exp(store, "other")
    journal = tmp_path / "r.db.journal"
    store.add_run(record(exp))
    assert not journal.exists() or not list(journal.iterdir())
    created = store.experiment(str(exp)).created_at
    journal.mkdir(exist_ok=True)
    entry = {"experiment": {"id": exp, "created_at": created},
             "row": record(exp).to_row()}
    (journal / f"{exp}-abc123-r1.json").write_text(json.dumps(entry))   # committed, not removed
    stale = {"experiment": {"id": exp, "created_at": "another database"},
             "row": record(exp, rep=2).to_row()}
    (journal / f"{exp}-abc123-r2.json").write_text(json.dumps(stale))
    theirs = {"experiment": {"id": other, "created_at": created},
              "row": record(other).to_row()}
    (journal / f"{other}-abc123-r1.json").write_text(json.dumps(theirs))
    assert store.replay_journal(exp) == 0
    assert sorted(p.name for p in journal.iterdir()) == [f"{exp}-abc123-r2.json",
                                                        f"{other}-abc123-r1.json"]
    assert len(list(store.runs(exp))) == 1


def test_writes_wait_for_the_busy_timeout(tmp_path):
    import stacklab.store as st
    store = Store.open(tmp_path / "r.db")
    assert st.BUSY_TIMEOUT_S >= 30
    assert store.conn.execute("PRAGMA busy_timeout").fetchone()[0] == st.BUSY_TIMEOUT_S * 1000


def test_a_record_is_one_row_of_the_runs_table_and_back(tmp_path):
    """to_row names exactly the runs table's columns; what it stores reads back typed:
    the outcome an Outcome, verdicts Verdicts with their Status, the engine's report a
    LoadReport holding the JSON it was read from."""
    store = Store.open(tmp_path / "r.db")
    exp = new_exp(store)
    columns = {r[1] for r in store.conn.execute("PRAGMA table_info(runs)")} - {"id"}
    assert set(record(exp).to_row()) == columns
    store.add_run(record(exp))
    row = store.conn.execute("SELECT outcome, verdicts_json, flags_json FROM runs").fetchone()
    assert tuple(row) == ("ok", '[{"component": "nginx", "check": "c", "status": "PASS", '
                                '"detail": "", "data": {}}]', '["generator-bound"]')
    [got] = store.runs(exp)
    assert got.outcome is Outcome.OK and got.verdicts[0].status is Status.PASS
    assert got.load.p99_us == 900 and got.load.raw == record(exp).load.raw


def test_a_journal_entry_of_the_older_form_is_stored(tmp_path):
    """Entries written before records were rows hold the record's fields by name."""
    store = Store.open(tmp_path / "r.db")
    exp = new_exp(store)
    journal = tmp_path / "r.db.journal"
    journal.mkdir()
    r = record(exp)
    fields = {"experiment_id": exp, "trial_id": "abc123", "repetition": 1, "outcome": "ok",
              "reason": None, "started_at": "t0", "ended_at": "t1",
              "knobs": {"nginx": {"a": 1}}, "versions": {"nginx": "1.22.1"},
              "configs": {"nginx/nginx.conf": "x"},
              "verdicts": [{"component": "nginx", "check": "c", "status": "PASS",
                            "detail": "", "data": {}}],
              "load": r.load.raw, "resources": {"nginx": {"cpu_s": 0.5}},
              "flags": ["generator-bound"], "log_tail": None, "run_dir": "/r"}
    created = store.experiment(str(exp)).created_at
    (journal / f"{exp}-abc123-r1.json").write_text(json.dumps(
        {"experiment": {"id": exp, "created_at": created}, "run": fields}))
    assert store.replay_journal(exp) == 1
    assert list(store.runs(exp)) == [r]


def test_a_reader_in_another_process_during_a_run_loses_nothing(tmp_path):
    """The writer's store calls check its files' attributes (chattr +i) before SQLite
    touches them. Read by opening the files, each close dropped every POSIX lock the
    process held on them — SQLite's too — so a reader in another process (`stacklab show`
    during a run) took itself for the last connection and deleted the WAL under the
    writer: every run stored afterwards was lost. Now two runs stored around such a
    reader are both there for a third process."""
    import subprocess
    import sys
    db = tmp_path / "r.db"
    store = Store.open(db)
    exp = new_exp(store)
    store.add_run(record(exp, rep=1))
    count = [sys.executable, "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
             "print(c.execute('SELECT COUNT(*) FROM runs').fetchone()[0]); c.close()", str(db)]
    assert subprocess.run(count, capture_output=True, text=True).stdout.strip() == "1"
    store.add_run(record(exp, rep=2))
    assert subprocess.run(count, capture_output=True, text=True).stdout.strip() == "2"
    store.close()
