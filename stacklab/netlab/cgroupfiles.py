"""The files a group lives by: the kernel's interface files (written, read and polled,
each failure a CgroupError naming the file and the value) and the lab's own `cgroups`
state file, which records each group directory before it is made.

Apart from cgroups.py because both the group's lifecycle and the settings it writes
(cgrouplimits.py) stand on these few system calls, and the state file's format (one
directory per line, a line counting once its newline is written) is kept in one place
for create_group, Group.close and cleanup_stale.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path

from ..errors import StacklabError

STATE_FILE = "cgroups"


class CgroupError(StacklabError):
    """A group could not be made, filled, read or removed (the file and value named)."""


# --- the state file: one directory per line, a line counting once its newline is written


def _record(state_dir: Path, path: Path) -> None:
    fd = os.open(state_dir / STATE_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, f"{path}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _records(state_dir: Path) -> list[str]:
    try:
        text = (state_dir / STATE_FILE).read_text()
    except FileNotFoundError:
        return []
    return [line for line in text.split("\n")[:-1] if line]   # the last piece: unfinished


def _forget(state_dir: Path, paths: set[Path]) -> None:
    """Drop these directories from the record (the file goes when it is empty)."""
    try:
        fd = os.open(state_dir / STATE_FILE, os.O_RDWR)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        text = os.read(fd, 1 << 20).decode()
        keep = [r for r in text.split("\n")[:-1] if r and Path(r) not in paths]
        if keep:
            os.lseek(fd, 0, os.SEEK_SET)
            os.truncate(fd, 0)
            os.write(fd, "".join(r + "\n" for r in keep).encode())
        else:
            os.unlink(state_dir / STATE_FILE)
    finally:
        os.close(fd)


# --- cgroup files


def _write(path: Path, value: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)
    except OSError as e:
        raise CgroupError(f"writing {value!r} to {path}: {e.strerror}") from e


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError as e:
        raise CgroupError(f"reading {path}: {e.strerror}") from e


def _procs(path: Path) -> list[int]:
    try:
        return [int(p) for p in (path / "cgroup.procs").read_text().split()]
    except FileNotFoundError:
        return []


def _wait_empty(path: Path, grace_s: float) -> list[int]:
    deadline = time.monotonic() + grace_s
    while (pids := _procs(path)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return pids


def _rmdir(path: Path, grace_s: float) -> None:
    """rmdir, retried on EBUSY while the last tasks finish leaving."""
    deadline = time.monotonic() + grace_s
    while True:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError as e:
            if e.errno != errno.EBUSY or time.monotonic() >= deadline:
                raise CgroupError(f"cannot remove cgroup {path}: {e.strerror}") from e
            time.sleep(0.05)
