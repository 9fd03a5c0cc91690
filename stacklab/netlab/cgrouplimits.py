"""A machine profile, what it writes into a group and what is read back from it, in each
hierarchy version's own files: the settings (cpuset, CFS quota, memory limit, in the
order the kernel needs them), the v2 controllers its ancestors must pass down, and the
group's CPU and memory counters.

Apart from cgroups.py because this is the v1/v2 vocabulary of the kernel's interface
files, a table of names and units, while cgroups.py holds the group's lifecycle. The
Profile lives here, not there, because the settings are computed from it: cgroups.py
imports this module, never the reverse.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .cgroupfiles import _read, _write
from .cgroupmounts import Hierarchy, Place, place_of

PERIOD_US = 100_000              # the CFS period the quota is a share of
MIN_QUOTA = 0.01                 # the kernel's smallest quota: 1 ms per 100 ms period
MIN_MEMORY_MB = 32


@dataclass(frozen=True)
class Profile:
    """A machine: how many CPUs (a cpuset), how many cores' worth of CPU time (CFS quota,
    0.5 = half a core), how much memory (a hard limit, in MiB). None = no limit."""

    cpus: int | None = None
    cpu_quota: float | None = None
    memory_mb: int | None = None

    def __post_init__(self):
        ncpu = os.cpu_count() or 1
        if self.cpus is not None and (type(self.cpus) is not int or not 1 <= self.cpus <= ncpu):
            raise ValueError(f"cpus={self.cpus!r}: a whole number of CPUs from 1 to {ncpu}, "
                             "this machine's count")
        q = self.cpu_quota
        if q is not None and (type(q) not in (int, float) or not MIN_QUOTA <= q <= ncpu):
            raise ValueError(f"cpu_quota={q!r}: cores' worth of CPU time, above 0 (at least "
                             f"{MIN_QUOTA}, the kernel's smallest quota) and at most {ncpu}")
        m = self.memory_mb
        if m is not None and (type(m) is not int or m < MIN_MEMORY_MB):
            raise ValueError(f"memory_mb={m!r}: a whole number of MiB, at least {MIN_MEMORY_MB}")

    def controllers(self) -> dict[str, str]:
        """The controllers this profile limits, each with the field that needs it."""
        wanted = {"cpuset": "cpus", "cpu": "cpu_quota", "memory": "memory_mb"}
        return {c: f for c, f in wanted.items() if getattr(self, f) is not None}


@dataclass(frozen=True)
class Setting:
    """One interface file written with one value, read back by verify()."""

    controller: str
    file: str
    value: str
    optional: bool = False       # written only where the kernel has it (swap accounting)


def settings(profile: Profile, versions: dict[str, int], cpus: str = "",
             mems: str = "") -> list[Setting]:
    """What a profile writes, given each controller's hierarchy version, in the order
    the kernel needs it: a v1 cpuset takes tasks only once it has mems; a v1 memsw
    limit may not be below the memory limit. The swap limits make the memory limit one
    on RAM (this machine has no swap; where there is, the limit would spill into it)."""
    out = []
    if profile.cpus is not None:
        out += [Setting("cpuset", "cpuset.cpus", cpus), Setting("cpuset", "cpuset.mems", mems)]
    if profile.cpu_quota is not None:
        quota = str(round(profile.cpu_quota * PERIOD_US))
        out += ([Setting("cpu", "cpu.cfs_period_us", str(PERIOD_US)),
                 Setting("cpu", "cpu.cfs_quota_us", quota)] if versions["cpu"] == 1 else
                [Setting("cpu", "cpu.max", f"{quota} {PERIOD_US}")])
    if profile.memory_mb is not None:
        limit = str(profile.memory_mb * 2**20)
        out += ([Setting("memory", "memory.limit_in_bytes", limit),
                 Setting("memory", "memory.memsw.limit_in_bytes", limit, optional=True)]
                if versions["memory"] == 1 else
                [Setting("memory", "memory.max", limit),
                 Setting("memory", "memory.swap.max", "0", optional=True)])
    return out


def format_cpus(cpus: list[int]) -> str:
    """A CPU list as the kernel prints one: runs as ranges ("0-2,5")."""
    runs: list[list[int]] = []
    for c in sorted(cpus):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}-{b}" if b > a else str(a) for a, b in runs)


def _enable_v2(h: Hierarchy, ctrls: list[str]) -> None:
    """Make the v2 controllers available to the group: each ancestor from the top of
    the mount down to the parent must list them in its cgroup.subtree_control."""
    parent = h.dir_of(h.own)
    chain = [parent, *parent.parents]
    chain = [d for d in reversed(chain) if d == h.mount or h.mount in d.parents]
    for d in chain:
        control = d / "cgroup.subtree_control"
        missing = [c for c in ctrls if c not in _read(control).split()]
        if missing:
            _write(control, " ".join("+" + c for c in missing))


def _flat(path: Path) -> dict[str, int]:
    """A flat-keyed file ("key value" lines), or {} when it is not there."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    return {k: int(v) for k, _, v in (line.partition(" ") for line in text.splitlines())
            if v.strip().lstrip("-").isdigit()}


def _number(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def cpu_usage_s(directory: Path, version: int) -> float | None:
    """A group's cumulative CPU time, its children's included, in seconds: v1 cpuacct.usage
    (nanoseconds), v2 cpu.stat's usage_usec (in every v2 group, whatever controllers it
    has); None when the file is not there or not a number."""
    if version == 1:
        ns = _number(directory / "cpuacct.usage")
        return None if ns is None else ns / 1e9
    usec = _flat(directory / "cpu.stat").get("usage_usec")
    return None if usec is None else usec / 1e6


def _usage(places: list[Place]) -> dict:
    """The counters of a group's places (see Group.usage); None where not measured."""
    out = dict.fromkeys(("cpu_usage_s", "cpu_periods", "cpu_throttled_periods",
                         "cpu_throttled_s", "memory_current_bytes", "memory_peak_bytes",
                         "memory_limit_hits", "memory_oom_kills"))
    cpu, acct, mem = (place_of(places, c) for c in ("cpu", "cpuacct", "memory"))
    v2 = next((p for p in places if p.hierarchy.version == 2), None)
    if v2:                                       # one directory, cpu.stat always there
        stat = _flat(v2.dir / "cpu.stat")
        out["cpu_usage_s"] = cpu_usage_s(v2.dir, 2)
        if "nr_periods" in stat:
            out.update(cpu_periods=stat["nr_periods"], cpu_throttled_periods=stat["nr_throttled"],
                       cpu_throttled_s=stat["throttled_usec"] / 1e6)
    if acct and acct.hierarchy.version == 1:
        out["cpu_usage_s"] = cpu_usage_s(acct.dir, 1)
    if cpu and cpu.hierarchy.version == 1 and (stat := _flat(cpu.dir / "cpu.stat")):
        out.update(cpu_periods=stat["nr_periods"], cpu_throttled_periods=stat["nr_throttled"],
                   cpu_throttled_s=stat["throttled_time"] / 1e9)
    if mem and mem.hierarchy.version == 1:
        out.update(memory_current_bytes=_number(mem.dir / "memory.usage_in_bytes"),
                   memory_peak_bytes=_number(mem.dir / "memory.max_usage_in_bytes"),
                   # a charge that fails is counted by the first counter it hits: with
                   # swap accounting, memory+swap (equal limits) is checked first
                   memory_limit_hits=sum(_number(mem.dir / f) or 0 for f in
                                         ("memory.failcnt", "memory.memsw.failcnt")),
                   memory_oom_kills=_flat(mem.dir / "memory.oom_control").get("oom_kill"))
    elif mem:
        events = _flat(mem.dir / "memory.events")
        out.update(memory_current_bytes=_number(mem.dir / "memory.current"),
                   memory_peak_bytes=_number(mem.dir / "memory.peak"),
                   memory_limit_hits=events.get("max"), memory_oom_kills=events.get("oom_kill"))
    return out
