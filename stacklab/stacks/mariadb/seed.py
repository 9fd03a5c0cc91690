"""A seeded datadir, made once per experiment in the cache directory and reused.

mariadb-install-db into a temporary directory, a private mariadbd on a socket there,
the schema and LOAD DATA LOCAL of the generated rows, a clean shutdown, then a rename:
a datadir either exists complete (with its stamp) or not at all.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
from pathlib import Path

from ...host import lab, procs
from ...errors import StackError
from ..base import Database
from ..templates import quote
from .client import client_argv

INSTALL_DB = "/usr/bin/mariadb-install-db"
STAMP = ".stacklab-seeded"

# The workload's database and its application account; its schema and rows come from it.
ACCOUNT = """
CREATE DATABASE `{db}` CHARACTER SET utf8mb4;
CREATE USER '{user}'@'localhost' IDENTIFIED BY '{password}';
GRANT {grants} ON `{db}`.* TO '{user}'@'localhost';
USE `{db}`;
"""


def datadir_for(cache_dir: Path, version: str, database: Database | None, engine: str) -> Path:
    key = database.key if database is not None else "empty"
    return cache_dir / f"mariadb-{version}-{key}-{engine}"


def ensure_datadir(datadir: Path, database: Database | None, engine: str, log_dir: Path,
                   binary: str, timeout_s: float = 120.0) -> bool:
    """Make the seeded datadir unless it exists; True if it was made now."""
    datadir.parent.mkdir(parents=True, exist_ok=True)
    with open(datadir.parent / ".mariadb-seed.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (datadir / STAMP).exists():
            return False
        work = datadir.with_name(datadir.name + ".tmp")
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        _install(work, log_dir)
        if database is not None:
            _load(work, database, engine, log_dir, binary, timeout_s)
        (work / STAMP).write_text(f"{database!r} engine={engine}\n")
        shutil.rmtree(datadir, ignore_errors=True)
        work.rename(datadir)
        return True


def run_datadir(seeded: Path, run_dir: Path, database: Database | None) -> Path:
    """The datadir a run's server uses: the seeded one itself for a database the
    application only reads (its rows are the same whatever runs first), a copy of its own
    in the run directory for one it writes (a real application's options, transients,
    parser cache and sessions), so no run starts from what an earlier run or trial left
    and a run that breaks the data breaks only itself. The copy goes with the run
    directory; the run's sync before the load writes it back, not the measured window."""
    if database is None or database.grants.upper() == "SELECT":
        return seeded
    target = run_dir / "datadir"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(seeded, target, symlinks=True, ignore=shutil.ignore_patterns(STAMP))
    return target


def _root_args() -> list[str]:
    return ["--user=root"] if os.getuid() == 0 else []


def _install(work: Path, log_dir: Path) -> None:
    argv = [INSTALL_DB, "--no-defaults", f"--datadir={work}", *_root_args(),
            "--auth-root-authentication-method=normal", "--skip-test-db",
            "--skip-name-resolve"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    (log_dir / "install-db.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise StackError(f"mariadb: mariadb-install-db failed ({done.returncode})",
                         done.stderr[-2000:])


def _load(work: Path, db: Database, engine: str, log_dir: Path, binary: str,
          timeout_s: float) -> None:
    """Start a private server on the new datadir, create and fill the schema, stop it."""
    socket = lab.socket_path(work, "seed.sock", "mariadb")
    rows = work / "seed-rows"
    rows.mkdir()
    files = db.write_rows(rows)
    argv = [binary, "--no-defaults", f"--datadir={work}", f"--socket={socket}",
            f"--pid-file={work / 'seed.pid'}", f"--log-error={log_dir / 'seed-error.log'}",
            "--skip-networking", "--skip-log-bin", "--innodb-flush-log-at-trx-commit=0",
            "--innodb-buffer-pool-size=256M", "--local-infile=1",
            "--innodb-buffer-pool-dump-at-shutdown=0", f"--default-storage-engine={engine}",
            *_root_args()]
    proc = procs.spawn("mariadb-seed", argv, log_dir, log_dir / "seed.out")
    try:
        _wait_socket(proc, socket, timeout_s)
        sql = (ACCOUNT.format(db=db.name, user=db.user, password=db.password,
                              grants=db.grants)
               + db.schema(engine)
               + "".join(f"LOAD DATA LOCAL INFILE {quote(path, 'sql')} INTO TABLE {table};\n"
                         for table, path in files.items()))
        done = subprocess.run(client_argv(socket, "--local-infile=1"), input=sql,
                              capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0:
            raise StackError(f"mariadb: seeding failed: {done.stderr.strip()}")
        db.install(socket, engine, log_dir)     # an application's own installer, if any
    finally:
        procs.stop(proc, grace_s=60.0)
    shutil.rmtree(rows)
    for leftover in (socket, work / "seed.pid"):
        leftover.unlink(missing_ok=True)


def _wait_socket(proc: procs.Proc, socket: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not socket.exists():
        if not proc.alive():
            raise StackError("mariadb: the seeding server exited",
                             procs.log_tail(proc.log_path))
        if time.monotonic() > deadline:
            raise StackError(f"mariadb: the seeding server not ready after {timeout_s:g} s")
        time.sleep(0.05)
