"""Machine profiles: CPU and memory limits for a stack's processes, with cgroups.

S2 compares machines of different power, and some experiments need files larger than
RAM; on one host those machines are cgroups: a cpuset (how many CPUs), a CFS quota (how
many cores' worth of CPU time) and a hard memory limit (RAM, with no swap to spill into).

The lifecycle: `create_group` records each directory in the state directory's
`cgroups` file before it makes it (so a kill -9 at any moment leaves a record), then
writes the limits; servers start with `preexec()` (or are moved with `add(pid)`) so
that their children are born inside; `usage()` and `verify(pid)` read back; the caller
stops its processes, then `close()` removes the directories. `cleanup_stale` removes
what a killed stacklab left, and kills nothing.

Every run also counts each component's CPU time by group, not by process: a CGI script
born and gone between two samples of /proc is charged to no process its parent waits
for, but the kernel charges it to its cgroup. `part(key)` makes a component's own group
(`stacklab-<key>`) inside the group's CPU-counting directory (v1 cpuacct, or the v2
directory), and `preexec(key)` puts a server there, and in the group's other places;
the limits of a machine profile, set on the group, hold the parts too. Without a
profile, `accounting_group` makes a group with no limits that only counts.

Each group is made under the cgroup the creating process is in, in every hierarchy
(with v1 cpu and cpuset at the root: /sys/fs/cgroup/cpu/stacklab-<id>), so a lab that
itself runs under limits cannot lift them from its servers. With v2, controllers the
parent does not pass down are enabled in its ancestors' cgroup.subtree_control and left
enabled: other groups may rely on them, and it only offers them to children.

Which hierarchies there are is cgroupmounts.py's to find; what a profile writes and
what the group's counters read is cgrouplimits.py's, with the Profile itself; the
interface files and the state file are read and written through cgroupfiles.py.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..host.placement import parse_cpus
from .cgroupfiles import (CgroupError, _forget, _procs, _read, _record, _records, _rmdir,
                          _wait_empty, _write)
from .cgrouplimits import (Profile, Setting, _enable_v2, _usage, cpu_usage_s, format_cpus,
                           settings)
from .cgroupmounts import MOUNTINFO, PROC, Hierarchy, Place, _cgroup_mounts, detect, place_of

PREFIX = "stacklab-"
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
ACCOUNTING = ("cpuacct", "memory")   # made whenever present: CPU time and peak memory


class CgroupBusyError(CgroupError):
    """close() refused a group that still holds processes: the caller stops them first."""

    def __init__(self, busy: dict[Path, list[int]]):
        self.busy = busy
        super().__init__("cgroups still hold processes, not removed (stop them first): " +
                         "; ".join(f"{d}: pids {', '.join(map(str, p))}" for d, p in busy.items()))


@dataclass
class Group:
    """One machine profile made real: `stacklab-<id>` in each hierarchy it needs."""

    name: str
    state_dir: Path
    profile: Profile
    places: list[Place]
    cpus: str = ""                       # the CPUs of its cpuset ("" = not limited)
    written: list[Setting] = field(default_factory=list)
    parts: dict[str, Path] = field(default_factory=dict)   # a component's group, by key

    def place_of(self, controller: str) -> Place | None:
        return place_of(self.places, controller)

    @property
    def counting(self) -> Place | None:
        """The place whose directories count CPU time: v1 cpuacct, else the v2 one."""
        acct = self.place_of("cpuacct")
        if acct and acct.hierarchy.version == 1:
            return acct
        return next((p for p in self.places if p.hierarchy.version == 2), None)

    def part(self, key: str) -> Path:
        """The group of one component, `stacklab-<key>` inside the counting directory:
        made (recorded first) the first time it is asked for."""
        if key in self.parts:
            return self.parts[key]
        place = self.counting
        if place is None:
            raise CgroupError(f"{self.name} has no directory that counts CPU time "
                              "(no v1 cpuacct, no cgroup v2)")
        name = PREFIX + _part_name(key)
        if any(d.name == name for d in self.parts.values()):
            name += f"-{len(self.parts)}"
        path = place.dir / name
        _record(self.state_dir, path)
        try:
            _make_dir(path)
        except OSError as e:
            _forget(self.state_dir, {path})
            raise CgroupError(f"cannot create cgroup {path}: {e.strerror}") from e
        self.parts[key] = path
        return path

    def cpu_s(self, key: str | None = None) -> float | None:
        """CPU seconds used so far by a component's group (key) or the whole group."""
        place = self.counting
        if place is None:
            return None
        return cpu_usage_s(self.parts[key] if key else place.dir, place.hierarchy.version)

    def add(self, pid: int) -> None:
        """Move a running process (all its threads) in; its future children follow it.
        Children it already has stay where they are."""
        if type(pid) is not int or pid <= 0:
            raise ValueError(f"pid {pid!r} is not a process id")
        for place in self.places:
            _write(place.dir / "cgroup.procs", str(pid))

    def preexec(self, part: str | None = None) -> Callable[[], None]:
        """A preexec_fn for subprocess: the starting process joins the group before it
        execs, so a server and every worker it forks run inside from the first moment;
        with `part`, that component's group (made now, in this process) in the
        counting directory. Plain os calls only (it runs between fork and exec)."""
        counting = self.counting if part is not None else None
        paths = [os.fsencode((self.part(part) if p is counting else p.dir) / "cgroup.procs")
                 for p in self.places]

        def join():
            pid = str(os.getpid()).encode()
            for path in paths:
                fd = os.open(path, os.O_WRONLY)
                try:
                    os.write(fd, pid)
                finally:
                    os.close(fd)
        return join

    def pids(self) -> dict[Path, list[int]]:
        """The processes in each of the group's directories (those that exist)."""
        dirs = [*self.parts.values(), *(p.dir for p in self.places)]
        return {d: _procs(d) for d in dirs if d.is_dir()}

    def usage(self) -> dict:
        """CPU time, throttling and memory of the group so far; None where not measured
        (no such controller here). Counters are the kernel's, read as they stand. The v1
        memory.failcnt behind memory_limit_hits stayed 0 on a 6.18 kernel even as a
        process was OOM-killed at the limit: read memory_oom_kills and the peak."""
        return _usage(self.places)

    def verify(self, pid: int) -> tuple[bool, str]:
        """Whether `pid` is in every one of the group's directories and every limit reads
        back as written; the detail names each thing checked or found wrong."""
        problems, seen = [], []
        try:
            lines = (PROC / str(pid) / "cgroup").read_text().splitlines()
        except OSError:
            return False, f"pid {pid} is not running"
        counting = self.counting
        for place in self.places:
            where = _membership(lines, place)
            wanted = place.hierarchy.own.rstrip("/") + "/" + self.name
            inside = {wanted + "/" + d.name for d in self.parts.values()
                      } if place is counting else set()
            if where != wanted and where not in inside:
                problems.append(f"pid {pid} is in {where or 'no cgroup'} for "
                                f"{','.join(place.controllers)}, not {wanted}")
        for s in self.written:
            value = _read(self.place_of(s.controller).dir / s.file)
            (seen if value == s.value else problems).append(
                f"{s.file}={value}" if value == s.value else
                f"{s.file} reads {value!r}, was set to {s.value!r}")
        if problems:
            return False, "; ".join(problems)
        return True, (f"pid {pid} in {self.name} "
                      f"({', '.join(c for p in self.places for c in p.controllers)}); "
                      f"limits read back: {', '.join(seen) or 'none set'}")

    def close(self, grace_s: float = 2.0) -> None:
        """Remove the group's directories once its processes have left (waiting up to
        grace_s for stopped ones to finish exiting). A directory that still holds
        processes is left, with its record, and CgroupBusyError names them: processes
        are the caller's to stop, never this module's."""
        busy: dict[Path, list[int]] = {}
        for d in [*self.parts.values(), *(p.dir for p in self.places)]:   # parts first
            if not d.is_dir():
                continue
            pids = _wait_empty(d, grace_s) + [q for b, ps in busy.items()
                                              if b.parent == d for q in ps]
            if pids:
                busy[d] = pids
            else:
                _rmdir(d, grace_s)
        _forget(self.state_dir, ({p.dir for p in self.places} | set(self.parts.values()))
                - set(busy))
        if busy:
            raise CgroupBusyError(busy)


def create_group(run_id: str, state_dir: Path, profile: Profile,
                 hierarchies: dict[str, Hierarchy] | None = None) -> Group:
    """Make `stacklab-<run_id>` under each controller the profile needs (and cpuacct and
    memory for accounting where present), recorded first, with its limits written.
    On any failure what was made is removed again and CgroupError names the cause."""
    _check_run_id(run_id)
    found = detect() if hierarchies is None else hierarchies
    for ctrl, what in profile.controllers().items():
        if ctrl not in found:
            raise CgroupError(f"{what}={getattr(profile, what)!r} needs the {ctrl} cgroup "
                              "controller, which this machine has neither as a v1 mount nor "
                              "in the v2 cgroup.controllers")
    wanted = [c for c in (*profile.controllers(), *ACCOUNTING) if c in found]
    name = PREFIX + run_id
    places: dict[Hierarchy, Place] = {}
    for ctrl in dict.fromkeys(wanted):
        h = found[ctrl]
        place = places.setdefault(h, Place(h.dir_of(h.own) / name, h, ()))
        place.controllers += (ctrl,)
    return _made(Group(name, Path(state_dir), profile, list(places.values())))


def accounting_group(run_id: str, state_dir: Path,
                     hierarchies: dict[str, Hierarchy] | None = None) -> Group:
    """`stacklab-<run_id>` with no limits, in the one hierarchy that counts CPU time (v1
    cpuacct; else cgroup v2, whose cpu.stat every group has): the home of the run's
    components' parts; and beside it, with v1, in the memory hierarchy, whose peak is
    what the kernel charged the stack (tune's memory budget is judged on it). With v2
    only where the memory controller is already offered to it. CgroupError when there
    is none or it cannot be made."""
    _check_run_id(run_id)
    found = detect() if hierarchies is None else hierarchies
    acct = found.get("cpuacct")
    h = acct if acct and acct.version == 1 else next(
        (h for h in found.values() if h.version == 2), None)
    if h is None:
        raise CgroupError("no cgroup hierarchy counts CPU time here: neither a v1 cpuacct "
                          "mount nor a cgroup v2 one")
    name = PREFIX + run_id
    counting = Place(h.dir_of(h.own) / name, h, ("cpuacct",) if h is acct else ())
    places = [counting]
    memory = found.get("memory")
    if memory is not None and memory.version == 1:
        if memory == h:                   # co-mounted with cpuacct: the one directory
            counting.controllers += ("memory",)
        else:
            places.append(Place(memory.dir_of(memory.own) / name, memory, ("memory",)))
    return _made(Group(name, Path(state_dir), Profile(), places))


def _check_run_id(run_id: str) -> None:
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise ValueError(f"run id {run_id!r}: 1-64 letters, digits, '_' or '-', "
                         "starting with a letter or digit")


def _part_name(key: str) -> str:
    """A component's key as a group name: what RUN_ID allows ("apache.2" → apache_2)."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", key)[:64]
    return name if name[:1].isalnum() else ("p" + name)[:64]


def _made(group: Group) -> Group:
    """Record every directory of the group, then make them and write its limits; on any
    failure what was made is removed again (or left recorded, for cleanup_stale)."""
    for place in group.places:
        _record(group.state_dir, place.dir)
    try:
        _build(group)
    except BaseException:
        try:
            group.close(grace_s=0.5)
        except CgroupError:
            pass                     # left recorded, for cleanup_stale
        raise
    return group


def _build(group: Group) -> None:
    for place in group.places:
        h = place.hierarchy
        if h.version == 2:
            _enable_v2(h, [c for c in place.controllers if c != "cpuacct"])
        try:
            _make_dir(place.dir)
        except OSError as e:
            raise CgroupError(f"cannot create cgroup {place.dir}: {e.strerror}"
                              + (" (creating cgroups needs root)"
                                 if e.errno in (errno.EACCES, errno.EPERM) else "")) from e
    cpuset = group.place_of("cpuset")
    cpus = mems = ""
    if group.profile.cpus is not None:
        v2 = cpuset.hierarchy.version == 2
        parent = cpuset.dir.parent
        usable = sorted(parse_cpus(_read(parent / ("cpuset.cpus.effective" if v2 else
                                                    "cpuset.effective_cpus"))))
        if len(usable) < group.profile.cpus:
            raise CgroupError(f"cpus={group.profile.cpus}: only {len(usable)} CPUs are usable "
                              f"under {parent}")
        cpus = format_cpus(usable[:group.profile.cpus])
        mems = _read(parent / ("cpuset.mems.effective" if v2 else "cpuset.effective_mems"))
        group.cpus = cpus
    versions = {c: p.hierarchy.version for p in group.places for c in p.controllers}
    for s in settings(group.profile, versions, cpus, mems):
        path = group.place_of(s.controller).dir / s.file
        if s.optional and not path.exists():
            continue
        _write(path, s.value)
        group.written.append(s)


@dataclass
class Stale:
    """What cleanup_stale did: removed directories, directories left because processes
    are still in them (pids), records it would not act on (not the lab's), and
    directories the kernel would not remove (why). Busy and failed stay recorded."""

    removed: list[Path] = field(default_factory=list)
    busy: dict[Path, list[int]] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    failed: dict[Path, str] = field(default_factory=dict)


def cleanup_stale(state_dir: Path, mountinfo: Path = MOUNTINFO) -> Stale:
    """Remove the groups a state directory records, killing nothing.

    A record is acted on only if it names a `stacklab-<id>` directory inside a mounted
    cgroup hierarchy; a group still holding processes is reported and kept recorded (the
    caller's process cleanup stops servers first, then calls this again)."""
    report = Stale()
    mounts = _cgroup_mounts(mountinfo)
    records = _records(Path(state_dir))
    report.refused = [r for r in records if not _is_ours(Path(r), mounts)]
    # deepest first: a component's part before the group holding it
    ours = [r for r in dict.fromkeys(records) if r not in report.refused]
    for line in sorted(ours, key=lambda r: -r.count("/")):
        path = Path(line)
        if path.is_dir():
            pids = _procs(path) + [p for b, ps in report.busy.items() if b.parent == path
                                   for p in ps]
            if pids:
                report.busy[path] = pids
                continue
            try:
                _rmdir(path, 1.0)
                report.removed.append(path)
            except CgroupError as e:
                report.failed[path] = str(e)
    kept = set(report.busy) | set(report.failed)
    _forget(Path(state_dir), {Path(r) for r in _records(Path(state_dir))} - kept)
    return report


def _is_ours(path: Path, mounts: list[Path]) -> bool:
    name = path.name
    return (path.is_absolute() and os.path.normpath(path) == str(path)
            and name.startswith(PREFIX) and bool(RUN_ID.fullmatch(name[len(PREFIX):]))
            and os.path.realpath(path) == str(path)
            and any(m in path.parents for m in mounts))


# --- a group's directory, and where /proc/<pid>/cgroup puts a process


def _make_dir(path: Path) -> None:
    """mkdir: the kernel fills the new directory with its interface files (a test's
    fake tree replaces this to do the same)."""
    os.mkdir(path)


def _membership(lines: list[str], place: Place) -> str | None:
    """The cgroup a /proc/<pid>/cgroup text puts the process in for this place."""
    for line in lines:
        num, _, rest = line.partition(":")
        ctrls, _, path = rest.partition(":")
        if place.hierarchy.version == 2 and num == "0" and not ctrls:
            return path
        if place.hierarchy.version == 1 and set(ctrls.split(",")) & set(place.controllers):
            return path
    return None
