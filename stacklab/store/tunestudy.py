"""A tune search's Optuna study, kept with the results database it measures into.

The study lives beside the database's real file, as its journal and its locks do:
`<db>.tune/<name>.optuna.db`, one per database, whatever path names it. (It was
`runs/tune/<name>.optuna.db` beside the database, keyed on the directory and the name:
`tune --db new.db --resume` beside another database continued that database's search.)
What ties the two together is checked on a resume: the experiments of the trials the
study measured must be in the database. A study file SQLite or Optuna cannot use is one
StoreError line naming it. Optuna is handed in by the caller, which imports it only when
a search runs.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..errors import StoreError
from . import ExperimentStatus, Store


def study_file(db: Path, name: str) -> Path:
    """Where the search `name` of the database `db` keeps its study."""
    return Path(f"{db.resolve()}.tune") / (re.sub(r"[^\w.-]", "_", name) + ".optuna.db")


def former_study_file(db: Path, name: str) -> Path:
    """Where stacklab kept it before: shared by every database of `db`'s directory."""
    return db.parent / "runs" / "tune" / f"{name}.optuna.db"


def storage(optuna: Any, path: Path, db: Path) -> Any:
    """The study file's Optuna storage (created when missing)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StoreError(f"{path.parent}: cannot hold the tune study: "
                         f"{e.strerror or e}") from None
    with study_errors(path, db):
        try:
            return optuna.storages.RDBStorage(f"sqlite:///{path}")
        except RuntimeError as e:      # a table schema of another Optuna version
            raise StoreError(unusable(path, db, e)) from e


@contextmanager
def study_errors(path: Path, db: Path) -> Iterator[None]:
    """What SQLite or Optuna raise on the study file, as one StoreError line naming it
    (the results database's own errors are StoreErrors already)."""
    import optuna
    import sqlalchemy.exc
    try:
        yield
    except (sqlalchemy.exc.SQLAlchemyError, optuna.exceptions.StorageInternalError) as e:
        raise StoreError(unusable(path, db, e)) from e


def unusable(path: Path, db: Path, e: BaseException) -> str:
    """What StoreError says of the study file: SQLite's own words where it has them."""
    cause = e
    while (inner := getattr(cause, "orig", None) or cause.__cause__) is not None:
        cause = inner
    why = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
    if "locked" in why:
        return (f"{path}: the tune study is locked ({why}): another `stacklab tune` of "
                "this search is writing it; wait for it to end or stop it")
    return (f"{path}: not a usable Optuna study ({why}): move it away to start the search "
            f"anew (the runs of its trials stay in {db})")


def absent(db: Path, names: Iterable[str]) -> list[str]:
    """Of these experiment names, those the results database does not hold."""
    names = list(dict.fromkeys(names))
    if not names or not db.exists():
        return names
    store = Store.open(db, readonly=True)
    try:
        held = {e.name for e in store.experiments()}
    finally:
        store.close()
    return [n for n in names if n not in held]


def planned_as(db: Path, name: str) -> str | None:
    """The plan hash of the newest experiment of that name in the database, or None."""
    if not db.exists():
        return None
    store = Store.open(db, readonly=True)
    try:
        named = store.named(name)
    finally:
        store.close()
    return named[0].spec_hash if named else None


def settle(db: Path, prefix: str) -> list[str]:
    """The experiments whose names start with `prefix` that a kill left `running`, set
    as a resume of each would begin: the runs that landed in its journal stored, the
    rooms of runs whose load never returned (`.reserved`) removed, and marked
    interrupted. Each under its runner lock: one a live process runs is refused (one
    line naming the pid), not touched. Their names."""
    if not db.exists():
        return []
    store = Store.open(db)
    try:
        settled = []
        for e in store.experiments():
            if not e.name.startswith(prefix) or e.status is not ExperimentStatus.RUNNING:
                continue
            with store.experiment_lock(e.name):
                if store.experiment(str(e.id)).status is ExperimentStatus.RUNNING:
                    store.replay_journal(e.id)
                    store.set_status(e.id, ExperimentStatus.INTERRUPTED)
                    settled.append(e.name)
        return settled
    finally:
        store.close()
