"""SQLite store: every finished run is committed at once; nothing is overwritten.

A run that cannot be committed (the database locked by another connection past the busy
timeout, the disk full) is not lost: it was written to a journal beside the database
(`<db>.journal/<experiment>-<trial>-r<repetition>.json`) before the insert, and stays
there until `stacklab run SPEC --resume` stores it. The runner gives each entry its room
before the load (`reserve`), journals the run as known before the load just before the
engine starts (`pending`; the engine writes its report beside it, synced, before it
exits) and the whole run the moment the load returns (`landed`), so a full disk, an
interrupt or a kill -9 at any moment after the engine's exit loses nothing (the files:
journal.py). Every SQLite error
a command meets becomes one StoreError line; database files made immutable under an open
connection too, before SQLite would touch them (a SIGBUS).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import functools
import json
import os
import re
import sqlite3
import struct
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import quote

from ..errors import EngineError, NotFound, StacklabError, StoreError
from ..host.regular import write_in_place
from ..measure.drive import LoadReport, report_in
from . import journal
from .migrations import MIGRATIONS
from .records import (ExperimentRecord, ExperimentStatus, HeldTrial, Outcome, RunRecord,
                      TrialRecord, row_of_fields)

__all__ = ["AlreadyStored", "BreakdownRecord", "DbBenchRecord", "ExperimentRecord",
           "ExperimentStatus", "HeldTrial", "Outcome", "RunRecord", "SCHEMA_VERSION",
           "Store", "TrialRecord", "stored"]

SCHEMA_VERSION = len(MIGRATIONS)
# How long a write waits for another connection's write lock before it fails.
BUSY_TIMEOUT_S = 30.0
# A file's attributes (chattr, as statx(2) reads them): the two under which no
# write to it is allowed. SQLite keeps the WAL index (`-shm`) mapped in memory; a write
# there once the file is immutable is a SIGBUS (no error, no message), and every read
# and write of the connection writes there, its close too.
STATX_ATTR_IMMUTABLE, STATX_ATTR_APPEND = 0x10, 0x20
STATX_SIZE, STATX_ATTRIBUTES_AT = 256, 8      # struct statx, and stx_attributes in it
AT_FDCWD, AT_SYMLINK_NOFOLLOW = -100, 0x100
_LIBC = ctypes.CDLL(None, use_errno=True)
# statx(2) is in glibc since 2.28 (Debian 12 has 2.36); without it no attribute can be
# read and every file counts as writable, as on a filesystem that keeps none
_STATX = getattr(_LIBC, "statx", None)
if _STATX is not None:
    _STATX.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint,
                       ctypes.c_char_p]


# What makes a run journaled before its load (`pending`) whole, once its engine finished
# the load: (the run as known before the load, its load, when the report was written)
# -> the run to store. The runner's: it knows what a load's outcome and flags are.
Completion = Callable[[RunRecord, LoadReport, str], RunRecord]


class AlreadyStored(StoreError):
    """That run of that experiment is in the database: a run is never overwritten."""


def _sqlite_errors(what: str):
    """A method whose sqlite3 errors become one StoreError line naming the database."""
    def wrap(method):
        @functools.wraps(method)
        def guarded(self, *args, **kwargs):
            self.check_not_frozen(what)
            try:
                return method(self, *args, **kwargs)
            except sqlite3.Error as e:
                raise StoreError(f"{self.path or 'results database'}: {what}: "
                                 f"{_explained(e)}") from e
        return guarded
    return wrap


def _explained(e: sqlite3.Error) -> str:
    if "locked" in str(e):
        return (f"{e} (another connection held its write lock for more than "
                f"{BUSY_TIMEOUT_S:g} s)")
    return str(e)


class Store:
    def __init__(self, conn: sqlite3.Connection, path: Path | None = None):
        self.conn = conn
        self.path = path            # None: no journal (an in-memory database)
        # the file the connection has open: deleted or replaced, the path no longer
        # names it, and a commit would go into a file nobody can find
        self.identity = _identity(path) if path is not None else None
        # its files made immutable since: the connection can no longer be touched (its
        # WAL index is mapped writable: SIGBUS); those that were so when it was opened
        # are read as such by SQLite, and are no danger
        self.frozen_at_open = _frozen_files(path) if path is not None else set()
        self.frozen: str | None = None
        self.created: dict[int, str | None] = {}   # experiment id -> created_at

    def check_not_frozen(self, what: str) -> None:
        """StoreError, one line naming the file, once a database file was made immutable
        (or append-only) under this connection: SQLite would die of SIGBUS on it, with no
        message and the experiment left `running`. From then on the connection is never
        touched again, not even to close it."""
        if self.frozen is None and self.path is not None:
            if now := sorted(_frozen_files(self.path) - self.frozen_at_open):
                self.frozen = (f"{now[0]}: made immutable (chattr +i) or append-only while "
                               "stacklab had it open, so SQLite cannot write to it")
        if self.frozen is not None:
            raise StoreError(f"{self.frozen}: {what}; `chattr -i` the database's files, "
                             "then resume")

    @classmethod
    def open(cls, path: Path, readonly: bool = False) -> "Store":
        """Open (and migrate) the database; `readonly` for commands that only read: such
        a database is never written, so it may be on a read-only filesystem."""
        if readonly:
            return cls(_connect_readonly(path), path)
        conn = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA foreign_keys=ON")
        except (sqlite3.DatabaseError, OSError) as e:
            if conn is not None:
                conn.close()           # not left holding the file (a mount to unmount)
            if (why := _read_only(path, e)) is not None:
                raise StoreError(f"{path}: the database is read-only ({why}) and this "
                                 f"command writes to it: give --db a writable path ({e})"
                                 ) from e
            if isinstance(e, OSError):
                raise StoreError(f"{path}: cannot create its directory: {e}") from e
            raise StoreError(f"{path}: not a usable SQLite database: {e}") from e
        store = cls(conn, path)
        store.migrate(path)
        return store

    def migrate(self, path: Path) -> None:
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(f"{path}: schema version {version} is newer than this stacklab "
                             f"({SCHEMA_VERSION}); upgrade stacklab")
        for number in range(version + 1, SCHEMA_VERSION + 1):
            try:
                self.conn.executescript(f"BEGIN; {MIGRATIONS[number - 1]}; "
                                        f"PRAGMA user_version = {number}; COMMIT;")
            except sqlite3.Error as e:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise StoreError(f"{path}: migration to schema {number} failed: {e}") from e

    def transaction(self):
        return _Tx(self.conn)

    @contextmanager
    def experiment_lock(self, name: str):
        """One runner per experiment: two would measure each other, then store the same
        runs twice. An flock on `<db>.locks/<name>.lock` beside the database's real path,
        which holds the runner's pid."""
        if self.path is None:
            yield
            return
        # keyed on the file, not on how it was named: a symlink or a path with `..` to
        # the same database takes the same lock
        directory = Path(f"{self.path.resolve()}.locks")
        directory.mkdir(exist_ok=True)
        fd = os.open(directory / (re.sub(r"[^\w.-]", "_", name) + ".lock"),
                     os.O_CREAT | os.O_RDWR, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                raise StoreError(f"experiment {self._named(name)} is being run by pid {pid}: "
                                 "one runner per experiment (two would measure each "
                                 "other); wait for it to end or stop it") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            yield
        finally:
            os.close(fd)               # closing releases the lock

    def _named(self, name: str) -> str:
        try:
            return f"{name!r} (id {self.experiment(name).id})"
        except (NotFound, StoreError):
            return repr(name)

    def close(self) -> None:
        if self.frozen is not None:
            _abandon(self.conn)        # closing writes to the mapped WAL index: SIGBUS
            return
        self.conn.close()

    # experiments -----------------------------------------------------------

    @_sqlite_errors("cannot record the experiment")
    def new_experiment(self, name: str, spec_path: str, spec_hash: str, spec: dict,
                       trials: list[tuple[str, str, dict]], host: dict, version: str,
                       commit: str | None, now: str) -> int:
        if (gone := self._moved()) is not None:
            raise StoreError(f"{self.path}: {gone} since it was opened: no experiment is "
                             "recorded in a file nobody would find")
        with self.transaction():
            cur = self.conn.execute(
                "INSERT INTO experiments (name, spec_path, spec_hash, spec_json, created_at,"
                " status, stacklab_version, stacklab_commit, host_json)"
                " VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?)",
                (name, spec_path, spec_hash, json.dumps(spec), now, version, commit,
                 json.dumps(host)))
            exp_id = cur.lastrowid
            self.conn.executemany(
                "INSERT INTO trials VALUES (?, ?, ?, ?, ?)",
                [(exp_id, tid, i, label, json.dumps(d)) for i, (tid, label, d)
                 in enumerate(trials)])
        return exp_id

    @_sqlite_errors("cannot read the experiments")
    def experiment(self, name_or_id: str | int | None = None) -> ExperimentRecord:
        """The newest experiment with that name (or that id; or the newest of all)."""
        if name_or_id is None:
            row = self.conn.execute("SELECT * FROM experiments ORDER BY id DESC").fetchone()
        elif str(name_or_id).isdigit():
            row = self.conn.execute("SELECT * FROM experiments WHERE id = ?",
                                    (int(name_or_id),)).fetchone()
        else:
            row = self.conn.execute("SELECT * FROM experiments WHERE name = ? "
                                    "ORDER BY id DESC", (name_or_id,)).fetchone()
        if row is None:
            what = "no experiments" if name_or_id is None else f"no experiment {name_or_id!r}"
            raise NotFound(f"{what} in the results database"
                           + (f" {self.path}; `stacklab list` lists its experiments"
                              if self.path else ""))
        return ExperimentRecord.from_row(row)

    @_sqlite_errors("cannot read the experiments")
    def named(self, name: str) -> list[ExperimentRecord]:
        """Every experiment of that name, newest first: `compare NAME NAME` is the newest
        run of that name against the one before it."""
        return [ExperimentRecord.from_row(row) for row in self.conn.execute(
            "SELECT * FROM experiments WHERE name = ? ORDER BY id DESC", (name,))]

    @_sqlite_errors("cannot read the experiments")
    def holding(self, prefix: str) -> list[HeldTrial]:
        """Every stored trial whose id starts with `prefix`, newest experiment first: a
        trial id is found in any experiment. A trial's id is its definition's hash, so a
        spec run again holds the same ids."""
        return [HeldTrial.from_row(row) for row in self.conn.execute(
            "SELECT t.experiment_id, e.name AS experiment, t.trial_id, t.label "
            "FROM trials t JOIN experiments e ON e.id = t.experiment_id "
            "WHERE substr(t.trial_id, 1, ?) = ? ORDER BY t.experiment_id DESC, t.position",
            (len(prefix), prefix))]

    @_sqlite_errors("cannot read the experiments")
    def experiments(self) -> list[ExperimentRecord]:
        """Every experiment, oldest first, each with its number of stored runs."""
        return [ExperimentRecord.from_row(row) for row in self.conn.execute(
            "SELECT e.*, (SELECT COUNT(*) FROM runs r WHERE r.experiment_id = e.id) AS n_runs "
            "FROM experiments e ORDER BY id")]

    @_sqlite_errors("cannot set the experiment's status")
    def set_status(self, exp_id: int, status: str) -> None:
        self.conn.execute("UPDATE experiments SET status = ? WHERE id = ?", (status, exp_id))

    @_sqlite_errors("cannot read the experiments")
    def trials(self, exp_id: int) -> list[TrialRecord]:
        """The experiment's planned trials, in the plan's order."""
        return [TrialRecord.from_row(row) for row in self.conn.execute(
            "SELECT * FROM trials WHERE experiment_id = ? ORDER BY position", (exp_id,))]

    # runs ------------------------------------------------------------------

    def add_run(self, r: RunRecord) -> None:
        """Commit one finished run at once (a run is never overwritten); journaled first,
        so that a run the database refuses is kept for `--resume`."""
        row = r.to_row()             # serialized once, for the journal and the insert
        entry = self._journal(r, row)
        kept = (f"it is kept in {entry}" if entry
                else "and it could not be journaled either: it is lost")
        self.check_not_frozen(f"run {r.trial_id} #{r.repetition} of experiment "
                              f"{r.experiment_id} not stored; {kept}")
        if (gone := self._moved()) is not None:
            raise StoreError(f"{self.path}: {gone} while the experiment ran: run "
                             f"{r.trial_id} #{r.repetition} of experiment {r.experiment_id} "
                             f"not stored (nothing would find it); {kept}")
        try:
            self._insert_run(r, row)
        except AlreadyStored:
            if entry:
                journal.remove(entry)
            raise
        except sqlite3.Error as e:
            kept = (f"it is kept in {entry}; `stacklab run SPEC --resume` stores it"
                    if entry else "and it could not be journaled either: it is lost")
            raise StoreError(f"{self.path or 'results database'}: run {r.trial_id} "
                             f"#{r.repetition} of experiment {r.experiment_id} not stored: "
                             f"{_explained(e)}; {kept}") from e
        if entry:
            journal.remove(entry)
        if (path := self._entry(r.experiment_id, r.trial_id, r.repetition)) is not None:
            self._release(path)        # stored: its rooms, and a load's report, go

    def _moved(self) -> str | None:
        """What became of the database file since it was opened (deleted, or another file
        put in its place), or None while its path still names the open file."""
        if self.identity is None:
            return None
        now = _identity(self.path)
        if now == self.identity:
            return None
        return ("the database file was deleted" if now is None
                else "the database file was replaced by another")

    def _insert_run(self, r: RunRecord, row: dict) -> None:
        try:
            with self.transaction():
                self.conn.execute(f"INSERT INTO runs ({', '.join(row)}) "
                                  f"VALUES ({', '.join('?' * len(row))})", tuple(row.values()))
        except sqlite3.IntegrityError as e:
            raise AlreadyStored(f"run {r.trial_id} #{r.repetition} of experiment "
                                f"{r.experiment_id} is already stored: {e}") from e

    def journal_dir(self) -> Path | None:
        """Beside the database's real file, as its locks are: a run journaled through a
        symlink is replayed by a resume through the real path, and the other way round."""
        return None if self.path is None else Path(f"{self.path.resolve()}.journal")

    def _entry(self, experiment_id: int, trial_id: str, repetition: int) -> Path | None:
        """Where one run's journal entry goes (`.json`; its rooms, by their suffixes:
        journal.py); None without a journal."""
        directory = self.journal_dir()
        return None if directory is None else directory / (
            f"{experiment_id}-{trial_id}-r{repetition}.json")

    def _journal(self, r: RunRecord, row: dict) -> Path | None:
        """Write the run beside the database before inserting it; None if it cannot be
        written (no space) and no entry of it was kept when its load ended (`landed`):
        the insert is still tried."""
        path = self._entry(r.experiment_id, r.trial_id, r.repetition)
        if path is None:
            return None
        partial = path.with_suffix(".partial")
        try:
            path.parent.mkdir(exist_ok=True)
            with open(partial, "w") as f:
                json.dump(self._entry_doc(r, row), f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(partial, path)
        except OSError:
            partial.unlink(missing_ok=True)
            return path if path.exists() else None
        return path

    def _entry_doc(self, r: RunRecord, row: dict) -> dict:
        exp_id = r.experiment_id
        return {"experiment": {"id": exp_id, "created_at": self._created(exp_id)}, "row": row}

    def reserve(self, experiment_id: int, trial_id: str, repetition: int,
                room_bytes: int, report_bytes: int | None = None) -> None:
        """Give the run's journal entry its room (`room_bytes`) and its engine's report
        its own (`report_bytes`; None: as much), written and synced, before its load
        starts: a filesystem that fills during the load would otherwise keep the
        finished load from both the journal and the database. StoreError, one line, when
        the room cannot be had: no load is started that could not be kept."""
        path = self._entry(experiment_id, trial_id, repetition)
        if path is None:
            return
        self.check_not_frozen(f"no run of experiment {experiment_id} is measured that "
                              "could not be stored")
        self._created(experiment_id)
        sizes = {journal.ROOM: room_bytes, journal.REPORT: report_bytes or room_bytes}
        try:
            path.parent.mkdir(exist_ok=True)
            for suffix, size in sizes.items():
                journal.make_room(path.with_suffix(suffix), size)
        except OSError as e:
            self._release(path)
            raise StoreError(f"{path.parent}: no room for a run's journal entry "
                             f"({sum(sizes.values()) >> 10} KiB): {e.strerror or e}; a load "
                             "measured now would be lost if the database's disk filled: "
                             "free some space") from None

    def pending(self, r: RunRecord) -> Path | None:
        """Journal the run as known before its load (`r`: no load yet), synced, just
        before the engine starts, and say where the engine is to write its report (its
        --report-file: the room `reserve` gave it): from the engine's exit on, a resume
        stores the run (replay_journal) whatever stops stacklab. None without a room (no
        journal, or none reserved) or when it could not be written (a disk full before
        the load): the load is then kept from its return on (`landed`)."""
        path = self._entry(r.experiment_id, r.trial_id, r.repetition)
        if path is None or not path.with_suffix(journal.REPORT).is_file():
            return None
        pending = path.with_suffix(journal.PENDING)
        try:
            write_in_place(pending,
                                   json.dumps(self._entry_doc(r, r.to_row())).encode())
        except OSError:
            journal.remove(pending)
            return None
        return path.with_suffix(journal.REPORT)

    def landed(self, r: RunRecord) -> Path | None:
        """Journal a run whose load has just returned, into the room `reserve` gave it, so
        that an interrupt or a kill -9 before the run is stored loses nothing: a resume
        stores it. Written in place (the room's blocks are its own, whatever the disk
        has left), synced, then named `.json`. None when it could not be written."""
        path = self._entry(r.experiment_id, r.trial_id, r.repetition)
        if path is None:
            return None
        room = path.with_suffix(journal.ROOM)
        try:
            path.parent.mkdir(exist_ok=True)
            write_in_place(room, json.dumps(self._entry_doc(r, r.to_row())).encode())
            os.replace(room, path)
        except OSError:
            return None
        self._release(path)   # the report and the run before it: their space back now
        return path

    def unreserve(self, experiment_id: int, trial_id: str, repetition: int) -> None:
        """Give back the rooms of a run that ended before it was stored, but for a load
        the engine finished: its report and the run before it stay for a resume (and so
        does a report that cannot be read: the resume says so)."""
        if (path := self._entry(experiment_id, trial_id, repetition)) is None:
            return
        try:
            finished = self._finished(path.with_suffix(journal.REPORT)) is not None
        except StoreError:               # called as the run ends on an error of its own
            finished = True
        if finished:
            journal.remove(path.with_suffix(journal.ROOM))
        else:
            self._release(path)

    def _release(self, path: Path) -> None:
        """Remove the files of the run whose entry is `path` but the entry itself: its
        rooms, its report and the run before its load (stored, whole, or never to be)."""
        for suffix in journal.BESIDE:
            journal.remove(path.with_suffix(suffix))

    def _finished(self, report: Path) -> LoadReport | None:
        """The load the engine finished and wrote to `report`, or None: not written whole
        (zeros, a write cut short, no file), or stopped early by a signal (an interrupted
        run is measured again, not kept). StoreError for a whole document that is no
        report, which a resume would otherwise drop unseen."""
        try:
            load = report_in(report)
        except (OSError, EngineError) as e:
            raise StoreError(f"{report}: unreadable engine report ({e}): move it and its "
                             f"{journal.PENDING} away to resume without it") from e
        return None if load is None or load.interrupted else load

    def _created(self, exp_id: int) -> str | None:
        """The experiment's creation time: tells its journal entries from those of a
        deleted database whose ids were reused. Read once (by `reserve`, before the
        load): a journal entry is written when the database may no longer be read."""
        if exp_id in self.created:
            return self.created[exp_id]
        try:
            self.check_not_frozen("cannot read the experiment")
            row = self.conn.execute("SELECT created_at FROM experiments WHERE id = ?",
                                    (exp_id,)).fetchone()
        except (sqlite3.Error, StoreError):
            return None
        self.created[exp_id] = row[0] if row else None
        return self.created[exp_id]

    @_sqlite_errors("cannot store the journaled runs")
    def replay_journal(self, exp_id: int, complete: Completion | None = None) -> int:
        """Store the runs of this experiment that wait in the journal; how many. An entry
        already stored (committed, then the process died) is dropped; one from another
        database (same id, another creation time) is left alone. A run known only from
        before its load (`.pending`) is stored when its engine finished the load: made
        whole by `complete` (the run, its load, when the report was written; without
        it, left for a caller that has one); one whose load did not finish is dropped."""
        directory = self.journal_dir()
        if directory is None or not directory.is_dir():
            return 0
        created = self.experiment(str(exp_id)).created_at
        for room in directory.glob(f"{exp_id}-*{journal.ROOM}"):
            journal.remove(room)     # a run stopped before its load ended: nothing in it
        for report in directory.glob(f"{exp_id}-*{journal.REPORT}"):
            if not report.with_suffix(journal.PENDING).exists():
                journal.remove(report)   # no run to make whole: its load never started
        stored = 0
        for path in sorted(directory.glob(f"{exp_id}-*{journal.ENTRY}")):
            record, ours = self._read_entry(path, exp_id, created)
            if not ours:
                continue
            stored += self._insert_journaled(record)
            self._release(path)
            journal.remove(path)
        for pending in sorted(directory.glob(f"{exp_id}-*{journal.PENDING}")):
            stored += self._replay_pending(pending, exp_id, created, complete)
        return stored

    def _read_entry(self, path: Path, exp_id: int, created: str | None
                    ) -> tuple[RunRecord, bool]:
        """A journal entry's run, and whether it is of this database's experiment."""
        try:
            entry = json.loads(path.read_text())
            # "run": an entry written before records were rows (the fields by name)
            record = RunRecord.from_row(entry["row"] if "row" in entry
                                        else row_of_fields(entry["run"]))
        except (OSError, ValueError, KeyError, TypeError, EngineError) as e:
            raise StoreError(f"{path}: unreadable journal entry ({e}): move it away to "
                             "resume without it") from e
        return record, entry["experiment"] == {"id": exp_id, "created_at": created}

    def _insert_journaled(self, record: RunRecord) -> int:
        """1 once inserted, 0 when it was already stored (committed, then the process
        died before its journal went)."""
        try:
            self._insert_run(record, record.to_row())
        except AlreadyStored:
            return 0
        return 1

    def _replay_pending(self, pending: Path, exp_id: int, created: str | None,
                        complete: Completion | None) -> int:
        entry = pending.with_suffix(journal.ENTRY)
        load = self._finished(pending.with_suffix(journal.REPORT))
        if load is None:
            self._release(entry)     # its load never finished: nothing to store
            return 0
        record, ours = self._read_entry(pending, exp_id, created)
        if not ours or complete is None:
            return 0
        written = pending.with_suffix(journal.REPORT).stat().st_mtime
        stored = self._insert_journaled(complete(record, load, datetime.fromtimestamp(
            written, timezone.utc).isoformat(timespec="milliseconds")))
        self._release(entry)
        return stored

    @_sqlite_errors("cannot read the stored runs")
    def done(self, exp_id: int) -> set[tuple[str, int]]:
        return {(row[0], row[1]) for row in self.conn.execute(
            "SELECT trial_id, repetition FROM runs WHERE experiment_id = ?", (exp_id,))}

    def runs(self, exp_id: int) -> Iterator[RunRecord]:
        self.check_not_frozen("cannot read the stored runs")
        for row in self.conn.execute("SELECT * FROM runs WHERE experiment_id = ? ORDER BY id",
                                     (exp_id,)):
            yield RunRecord.from_row(row)


    # S1's overview and database methods (schema 2) ----------------------------

    @_sqlite_errors("cannot store the breakdown")
    def add_breakdown(self, r: "BreakdownRecord") -> int:
        """Commit one `stacklab breakdown` result at once; its id."""
        with self.transaction():
            cur = self.conn.execute(
                "INSERT INTO breakdowns (created_at, stack, workload, knobs_json, result_json,"
                " versions_json, host_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (r.created_at, r.stack, r.workload, json.dumps(r.knobs), json.dumps(r.result),
                 json.dumps(r.versions), json.dumps(r.host)))
        return cur.lastrowid

    def breakdown(self, breakdown_id: int) -> "BreakdownRecord":
        row = self.conn.execute("SELECT * FROM breakdowns WHERE id = ?",
                                (breakdown_id,)).fetchone()
        if row is None:
            raise StoreError(f"no breakdown {breakdown_id} in the results database")
        return _breakdown_of(row)

    def breakdowns(self) -> list["BreakdownRecord"]:
        """Every stored breakdown (each repetition its own), oldest first."""
        return [_breakdown_of(row)
                for row in self.conn.execute("SELECT * FROM breakdowns ORDER BY id")]

    @_sqlite_errors("cannot store the dbbench result")
    def add_dbbench(self, r: "DbBenchRecord") -> int:
        """Commit one `stacklab dbbench` variant at once; its id."""
        with self.transaction():
            cur = self.conn.execute(
                "INSERT INTO dbbenches (created_at, experiment, knobs_json, loops, result_json,"
                " versions_json, host_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (r.created_at, r.experiment, json.dumps(r.knobs), r.loops,
                 json.dumps(r.result), json.dumps(r.versions), json.dumps(r.host)))
        return cur.lastrowid

    def dbbenches(self, experiment: str | None = None) -> list["DbBenchRecord"]:
        """Every stored dbbench variant of an experiment (of all, without one), oldest
        first."""
        rows = (self.conn.execute("SELECT * FROM dbbenches ORDER BY id") if experiment is None
                else self.conn.execute("SELECT * FROM dbbenches WHERE experiment = ? "
                                       "ORDER BY id", (experiment,)))
        return [DbBenchRecord(row["created_at"], row["experiment"], json.loads(row["knobs_json"]),
                              row["loops"], json.loads(row["result_json"]),
                              json.loads(row["versions_json"]), json.loads(row["host_json"]),
                              row["id"])
                for row in rows]


def _breakdown_of(row: sqlite3.Row) -> "BreakdownRecord":
    return BreakdownRecord(row["created_at"], row["stack"], row["workload"],
                           json.loads(row["knobs_json"]), json.loads(row["result_json"]),
                           json.loads(row["versions_json"]), json.loads(row["host_json"]),
                           row["id"])


@dataclass(frozen=True)
class BreakdownRecord:
    """Where one request's time goes (S1's overview method); `result` is breakdown.py's
    versioned JSON."""

    created_at: str
    stack: str
    workload: str
    knobs: dict[str, Any]        # explicit knob values, "component.name" -> value
    result: dict
    versions: dict[str, str]
    host: dict
    id: int | None = None


@dataclass(frozen=True)
class DbBenchRecord:
    """One MariaDB variant under the model application's queries (S1's database method);
    `result` is dbbench.py's versioned JSON."""

    created_at: str
    experiment: str
    knobs: dict[str, Any]        # the mariadb.* knob values of the variant
    loops: int
    result: dict
    versions: dict[str, str]
    host: dict
    id: int | None = None

def _frozen_files(path: Path) -> set[str]:
    """The database's files (itself, its WAL and its WAL index) that are immutable or
    append-only; none where the filesystem keeps no such attributes (tmpfs)."""
    real = path.resolve()
    return {name for name in (str(real), f"{real}-wal", f"{real}-shm")
            if _attributes(name) & (STATX_ATTR_IMMUTABLE | STATX_ATTR_APPEND)}


def _attributes(name: str) -> int:
    """A file's attributes (statx's stx_attributes), 0 where it has none or is missing.
    Read by statx(2), by name: not by opening the file, whose close would drop every
    POSIX lock this process holds on it — SQLite's among them, after which another
    process's reader, seeing no other connection, deletes the WAL under the writer (a
    `stacklab show` during a run lost every run it stored)."""
    buf = ctypes.create_string_buffer(STATX_SIZE)
    if _STATX is None or _STATX(AT_FDCWD, os.fsencode(name), AT_SYMLINK_NOFOLLOW, 0, buf) != 0:
        return 0
    attributes, = struct.unpack_from("Q", buf, STATX_ATTRIBUTES_AT)
    return attributes


@contextmanager
def stored(db: Path, flag: str = "--db") -> Iterator[Store]:
    """The results database, read-only; a missing one is said as such (never created),
    naming the `flag` that chose it."""
    if not db.exists():
        raise StacklabError(f"{flag} {db}: no results database there yet "
                            "(run an experiment first)")
    store = Store.open(db, readonly=True)
    try:
        yield store
    finally:
        store.close()


def _abandon(conn: sqlite3.Connection) -> None:
    """Keep a connection from ever being closed, even when the interpreter exits: its
    close would write to a WAL index that can no longer be written (SIGBUS). The process
    ends with it open; the kernel releases its locks and its mapping."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(conn))


def _identity(path: Path) -> tuple[int, int] | None:
    """The file a path names (device, inode), or None when it names none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _read_only(path: Path, e: Exception) -> str | None:
    """Why opening `path` for writing failed, when it is read-only: its filesystem is
    mounted so (SQLite then says "unable to open": a WAL database gets no -shm), or
    SQLite found the file "readonly"; None for any other failure."""
    if isinstance(e, OSError) and e.errno != errno.EROFS:
        return None
    directory = next((p for p in (path, *path.parents) if p.exists()), None)
    try:
        if directory is not None and os.statvfs(directory).f_flag & os.ST_RDONLY:
            return "its filesystem is mounted read-only"
    except OSError:
        pass
    if isinstance(e, OSError):
        return "its filesystem is read-only"
    return "the file cannot be written" if "readonly" in str(e) else None


def _connect_readonly(path: Path) -> sqlite3.Connection:
    """mode=ro. A WAL database whose directory cannot be written (a read-only mount) has
    no -shm file to share with writers, and none can exist: it is then opened immutable."""
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    if not os.access(path.parent, os.W_OK) and not Path(f"{path}-shm").exists():
        uri += "&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
        conn.row_factory = sqlite3.Row
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{path}: not a usable SQLite database: {e}") from e
    if version > SCHEMA_VERSION:
        raise StoreError(f"{path}: schema version {version} is newer than this stacklab "
                         f"({SCHEMA_VERSION}); upgrade stacklab")
    return conn


class _Tx:
    """BEGIN … COMMIT, or ROLLBACK on any exception (including KeyboardInterrupt)."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def __enter__(self):
        if not self.conn.in_transaction:
            self.conn.execute("BEGIN IMMEDIATE")   # the write lock now, waiting the busy timeout
            self.own = True
        else:
            self.own = False
        return self.conn

    def __exit__(self, exc_type, *_):
        if self.own and self.conn.in_transaction:
            self.conn.execute("ROLLBACK" if exc_type else "COMMIT")
        return False
