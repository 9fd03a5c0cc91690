"""Statements through the `mariadb` client (argv, never a shell), results as rows; and
MariaDB as a command talks to it (Client: the component's SqlClient) and words its errors.

--batch --skip-column-names is the client's tab-separated machine output; values here
are numbers and identifiers, never text with tabs or newlines.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pymysql

from ...errors import StackError
from ..base import RunningComponent

CLIENT = "/usr/bin/mariadb"


def client_argv(socket: Path, *extra: str) -> list[str]:
    return [CLIENT, "--no-defaults", f"--socket={socket}", "--user=root", "--batch",
            "--skip-column-names", *extra]


def query(socket: Path, sql: str, timeout_s: float = 30.0) -> list[list[str]]:
    """Run SQL (from stacklab's own code, never from a spec) and return its rows."""
    try:
        done = subprocess.run(client_argv(socket), input=sql, capture_output=True, text=True,
                              timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise StackError(f"mariadb client: {e}") from e
    if done.returncode != 0:
        raise StackError(f"mariadb client failed ({done.returncode}): {done.stderr.strip()}")
    return [line.split("\t") for line in done.stdout.splitlines()]


def status(socket: Path, names: tuple[str, ...]) -> dict[str, int]:
    """SHOW GLOBAL STATUS counters by name."""
    wanted = ", ".join(f"'{n}'" for n in names)
    rows = query(socket, f"SHOW GLOBAL STATUS WHERE Variable_name IN ({wanted})")
    return {name: int(value) for name, value in rows}


class Client:
    """MariaDB as a command talks to it (base.SqlClient, for dbbench): the administrator's
    statements through the `mariadb` client above, the application's connection through
    PyMySQL over the unix socket, autocommit like mysqli."""

    errors = pymysql.MySQLError

    def library_versions(self) -> dict[str, str]:
        return {"pymysql": pymysql.__version__}

    def query(self, started: RunningComponent, sql: str) -> list[list[str]]:
        return query(started.endpoint.unix, sql)

    def status(self, started: RunningComponent, names: tuple[str, ...]) -> dict[str, int]:
        return status(started.endpoint.unix, names)

    def connect(self, started: RunningComponent, user: str, password: str,
                database: str) -> pymysql.connections.Connection:
        return pymysql.connect(unix_socket=str(started.endpoint.unix), user=user,
                               password=password, database=database, autocommit=True,
                               charset="utf8mb4")


def client_error_line(e: BaseException) -> str | None:
    """PyMySQL's error as one line, MariaDB's message and its error number when it has
    one ("MariaDB: Access denied (error 1045)"); None for any other error."""
    if not isinstance(e, pymysql.MySQLError):
        return None
    code, message = e.args if len(e.args) == 2 else ("", e)
    return f"MariaDB: {message}" + (f" (error {code})" if code else "")
