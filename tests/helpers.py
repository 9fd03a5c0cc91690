"""Helpers shared by the tests (fixtures live in conftest.py)."""

import os
from pathlib import Path

import pytest

from stacklab.drive import REPO_ENGINE

ROOT = Path(__file__).resolve().parent.parent


def require_engine():
    if not REPO_ENGINE.exists():
        pytest.fail(f"{REPO_ENGINE} is not built: run `make test` (it builds the engine)")


def server_processes() -> list[str]:
    """Command lines of running nginx/apache2 processes (any owner)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        except OSError:
            continue
        if exe in ("nginx", "apache2"):
            found.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
    return found
