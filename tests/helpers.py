"""Helpers shared by the tests (fixtures live in conftest.py)."""

import os
from pathlib import Path

import pytest

from stacklab.drive import REPO_ENGINE

ROOT = Path(__file__).resolve().parent.parent


def require_engine():
    if not REPO_ENGINE.exists():
        pytest.fail(f"{REPO_ENGINE} is not built: run `make test` (it builds the engine)")


SERVER_BINARIES = {"nginx", "apache2", "php-fpm8.2", "php-cgi8.2", "mariadbd", "memcached",
                   "lighttpd", "mini_httpd", "webfsd", "stacklab-load"}


def server_processes() -> list[str]:
    """Command lines of server (or engine) processes started from stacklab's lab dir."""
    from stacklab.lab import default_root
    lab_root = str(default_root())
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
            if exe not in SERVER_BINARIES:
                continue
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if lab_root in cmdline or cwd.startswith(lab_root):
            found.append(cmdline)
    return found
