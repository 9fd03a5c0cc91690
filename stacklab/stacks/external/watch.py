"""The processes of a server stacklab did not start, found at run time from what the user
named ([external] watch): a pid, a cgroup, or a systemd unit (its cgroup and main pid, as
systemd reports them). Only read, never signalled: stacklab does not own them.

The monitor samples one process group per component (measure/monitor.py): a pid's group
(a server's master and the workers it forks), or, in a cgroup, the group most of its
processes are in; a cgroup's CPU time, which the kernel charges with every process that
ran there, is read as a component's own group's is.
"""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ...errors import StackError
from ...host.procs import proc_stat

SYSTEMCTL = "/usr/bin/systemctl"
CGROUP_ROOT = "/sys/fs/cgroup"


@dataclass(frozen=True)
class Popen:
    """What the lab's layers read of a started process (`popen.pid`): the watched one's."""

    pid: int
    returncode: int | None = None


@dataclass
class Watched:
    """What is watched of an external server (its `proc` in the running stack): `what` as
    the user named it ('' when nothing), the process group the monitor samples (None: no
    process is watched), and the cgroup whose CPU time is read (None: none)."""

    name: str
    what: str
    pgid: int | None = None
    cgroup: Path | None = None
    pid: int | None = None
    log_path: Path | None = None

    @property
    def popen(self) -> Popen:
        return Popen(self.pid or 0)

    def alive(self) -> bool:
        """The watched processes are still there (read from /proc: no signal is sent);
        with nothing watched, nothing says otherwise."""
        if self.pid is not None:
            return _exists(self.pid)
        if self.cgroup is not None:
            return bool(_cgroup_pids(self.cgroup))
        return True

    def cpu_s(self) -> float | None:
        """The cgroup's CPU seconds so far (cgroup v2 cpu.stat, v1 cpuacct.usage); None
        without a cgroup or a reading."""
        if self.cgroup is None:
            return None
        try:
            for line in (self.cgroup / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
        except (OSError, ValueError):
            pass
        try:
            return int((self.cgroup / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            return None

    def described(self) -> dict:
        """What was watched, for the run's record."""
        return {"watch": self.what or None, "pid": self.pid, "pgid": self.pgid,
                "cgroup": str(self.cgroup) if self.cgroup else None}


def watched(name: str, what: str) -> Watched:
    """The processes `what` names now ('' nothing, 'pid:N', 'cgroup:PATH',
    'unit:NAME'); a StackError saying which is not there."""
    kind, _, value = what.partition(":")
    if not what:
        return Watched(name, what)
    if kind == "pid":
        pid = int(value)
        if not _exists(pid):
            raise StackError(f"external.watch {what}: no such process")
        return Watched(name, what, os.getpgid(pid), None, pid)
    if kind == "cgroup":
        return _in_cgroup(name, what, Path(value))
    return _unit(name, what, value)


def _in_cgroup(name: str, what: str, cgroup: Path, pid: int | None = None) -> Watched:
    pids = _cgroup_pids(cgroup)
    if not pids:
        raise StackError(f"external.watch {what}: {cgroup} holds no process (or is no "
                         "cgroup directory)")
    groups = Counter(int(f[2]) for p in pids if (f := proc_stat(p)))
    pgid = groups.most_common(1)[0][0] if groups else None
    return Watched(name, what, pgid, cgroup, pid)


def _unit(name: str, what: str, unit: str) -> Watched:
    """A systemd unit's control group and main process, as `systemctl show` reports them
    (its machine-readable properties, one per line)."""
    try:
        out = subprocess.run([SYSTEMCTL, "show", "--property=ControlGroup,MainPID", "--",
                              unit], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as e:
        raise StackError(f"external.watch {what}: cannot ask systemd ({e})") from None
    props = dict(line.partition("=")[::2] for line in out.stdout.splitlines())
    group, main = props.get("ControlGroup", ""), props.get("MainPID", "0")
    if out.returncode != 0 or not group:
        raise StackError(f"external.watch {what}: systemd knows no running unit {unit!r}")
    pid = int(main) if main.isdigit() and int(main) > 0 else None
    found = next((d for d in _unit_dirs(group) if _cgroup_pids(d)), None)
    if found is None and pid is not None:
        return Watched(name, what, os.getpgid(pid), None, pid)
    return _in_cgroup(name, what, found or Path(CGROUP_ROOT) / group.lstrip("/"), pid)


def _unit_dirs(group: str) -> list[Path]:
    """Where a unit's ControlGroup is, counting CPU first: cgroup v2's unified tree, then
    v1's cpuacct hierarchy (systemd makes a unit's group there with CPUAccounting), then
    a hybrid's unified and systemd's named hierarchy (processes only)."""
    rel = group.lstrip("/")
    return [Path(CGROUP_ROOT) / sub / rel for sub in ("", "cpuacct", "cpu,cpuacct",
                                                      "unified", "systemd")]


def _cgroup_pids(cgroup: Path) -> list[int]:
    try:
        return [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _exists(pid: int) -> bool:
    fields = proc_stat(pid)
    return fields is not None and fields[0] != b"Z"
