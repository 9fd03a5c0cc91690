"""HAProxy's own counters, from its stats socket (a unix socket in the run directory, or
in the lab's short socket directory when that path is too long: lab.socket_path; mode
600): `show stat` answers CSV, HAProxy's machine format, one row per frontend,
backend and server. Read there rather than from a stats page over HTTP, so that reading
them sends no request through the frontend (they do not count themselves) and takes no
URL away from the stack behind (everything under /_stacklab/ stays the backends')."""

from __future__ import annotations

import csv
import socket
from pathlib import Path

from ...host import lab

SOCKET = "haproxy.sock"
# HAProxy binds <path>.<pid>.tmp, then renames it to <path>: the path leaves room for that
# suffix with the longest pid (pid_max 4194304). Its own message says "limit usually 97",
# at 5-digit pids.
SOCKET_MAX = lab.SUN_PATH_MAX - len(".4194304.tmp")
FRONTEND, BACKEND = "fe", "be"    # the proxies' names in haproxy.cfg.j2
# What clients saw, from the frontend's row: requests (req_tot, renamed: the runner's
# requests counter), client connections, bad requests, the error statuses returned.
FRONTEND_COUNTERS = {"req_tot": "requests", "stot": "stot", "ereq": "ereq",
                     "hrsp_4xx": "hrsp_4xx", "hrsp_5xx": "hrsp_5xx"}
# What happened towards the backends, from the backend's row: connection and response
# errors, retries and redispatches, backend connections opened and reused.
BACKEND_COUNTERS = ("econ", "eresp", "wretr", "wredis", "connect", "reuse")


def socket_path(run_dir: Path) -> Path:
    """Where the stats socket of the HAProxy in `run_dir` is (UnsafePathError if no path
    HAProxy can bind is found)."""
    return lab.socket_path(run_dir, SOCKET, "haproxy", SOCKET_MAX)


def server_name(i: int) -> str:
    """The `server` line of ctx.backends[i]."""
    return f"b{i}"


def ask(path: Path, command: str, timeout_s: float = 2.0) -> str:
    """One command on the stats socket; HAProxy answers and closes (non-interactive)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(timeout_s)
        s.connect(str(path))
        s.sendall(command.encode() + b"\n")
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode()


def show_stat(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    """`show stat`: (proxy, service) -> {field: value}; the header line starts `# `."""
    lines = ask(path, "show stat").splitlines()
    if not lines or not lines[0].startswith("# pxname,"):
        raise ValueError(f"unexpected `show stat` answer {lines[:1]!r}")
    rows = csv.DictReader([lines[0][2:], *filter(None, lines[1:])])
    return {(row["pxname"], row["svname"]): row for row in rows}


def counters(path: Path, backends: int) -> dict[str, float]:
    """The frontend's and backend's totals, and `backend:<i>`: requests ctx.backends[i]
    answered (its server's req_tot; a request whose connection was refused is not one,
    it counts in econ)."""
    rows = show_stat(path)
    front, back = _row(rows, FRONTEND, "FRONTEND"), _row(rows, BACKEND, "BACKEND")
    out = {name: _number(front, field) for field, name in FRONTEND_COUNTERS.items()}
    out |= {field: _number(back, field) for field in BACKEND_COUNTERS}
    for i in range(backends):
        out[f"backend:{i}"] = _number(_row(rows, BACKEND, server_name(i)), "req_tot")
    return out


def _row(rows: dict[tuple[str, str], dict[str, str]], proxy: str,
         service: str) -> dict[str, str]:
    if (proxy, service) not in rows:
        raise ValueError(f"`show stat` has no row for {proxy}/{service}")
    return rows[(proxy, service)]


def _number(row: dict[str, str], field: str) -> int:
    value = row.get(field)
    if value is None or not value.isdigit():
        raise ValueError(f"`show stat` has no number in {field} of {row.get('svname')}: "
                         f"{value!r}")
    return int(value)
