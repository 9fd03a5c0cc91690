"""Provenance: host facts (the installed Debian packages' versions among them) and
stacklab's own commit, recorded with every run."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]      # stacklab/host/hostinfo.py -> the repository


# The Python libraries whose code computes what is stored and reported: statistics,
# histograms, validation, rendering.
LIBRARIES = ("numpy", "scipy", "hdrhistogram", "pydantic", "jinja2", "plotly", "rich",
             "typer", "pymysql", "minify-html", "cachecontrol", "requests")


def host_facts() -> dict:
    return {
        "hostname": platform.node(),
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "memory_mib": _mem_total_mib(),
        "os": _os_name(),
        "python": platform.python_version(),
        "python_libraries": python_libraries(),
    }


def python_libraries() -> dict[str, str | None]:
    """The installed version of each library in LIBRARIES (None: not installed)."""
    from importlib import metadata
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def debian_version(package: str) -> str | None:
    """An installed Debian package's whole version ("8.2.36-1~deb12u1"), or None when it
    is not installed: a package removed with its configuration kept is still listed by
    dpkg-query, with a status that does not end in "installed"."""
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Status}\t${Version}", package],
                             capture_output=True, text=True, timeout=10)
    except OSError:
        return None
    status, _, version = out.stdout.partition("\t")
    if out.returncode != 0 or not status.endswith(" installed") or not version:
        return None
    return version


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_mib() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return None


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.system()


def git_commit() -> str | None:
    """HEAD of the stacklab checkout, with '-dirty' if it has uncommitted changes.

    `--no-optional-locks`: `git status` would otherwise refresh .git/index, and run as
    root in a user's checkout it would leave a root-owned index behind."""
    git = ["git", "--no-optional-locks"]
    try:
        head = subprocess.run([*git, "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"],
                               cwd=REPO, capture_output=True, text=True, timeout=10)
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.TimeoutExpired):
        return None
