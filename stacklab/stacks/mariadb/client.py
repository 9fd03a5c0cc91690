"""Statements through the `mariadb` client (argv, never a shell), results as rows.

--batch --skip-column-names is the client's tab-separated machine output; values here
are numbers and identifiers, never text with tabs or newlines.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from ...errors import StackError

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
