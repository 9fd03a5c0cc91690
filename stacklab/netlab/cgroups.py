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

Each group is made under the cgroup the creating process is in, in every hierarchy
(with v1 cpu and cpuset at the root: /sys/fs/cgroup/cpu/stacklab-<id>), so a lab that
itself runs under limits cannot lift them from its servers. With v2, controllers the
parent does not pass down are enabled in its ancestors' cgroup.subtree_control and left
enabled: other groups may rely on them, and it only offers them to children.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import StacklabError
from ..placement import parse_cpus

STATE_FILE = "cgroups"
PREFIX = "stacklab-"
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
PERIOD_US = 100_000              # the CFS period the quota is a share of
MIN_QUOTA = 0.01                 # the kernel's smallest quota: 1 ms per 100 ms period
MIN_MEMORY_MB = 32
ACCOUNTING = ("cpuacct", "memory")   # made whenever present: CPU time and peak memory
KNOWN = frozenset({"cpu", "cpuacct", "cpuset", "memory", "io", "blkio", "pids", "hugetlb",
                   "devices", "freezer", "net_cls", "net_prio", "perf_event", "rdma", "misc"})
PROC = Path("/proc")
MOUNTINFO = PROC / "self/mountinfo"
SELF_CGROUP = PROC / "self/cgroup"


class CgroupError(StacklabError):
    """A group could not be made, filled, read or removed (the file and value named)."""


class CgroupBusyError(CgroupError):
    """close() refused a group that still holds processes: the caller stops them first."""

    def __init__(self, busy: dict[Path, list[int]]):
        self.busy = busy
        super().__init__("cgroups still hold processes, not removed (stop them first): " +
                         "; ".join(f"{d}: pids {', '.join(map(str, p))}" for d, p in busy.items()))


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
class Hierarchy:
    """One mounted cgroup hierarchy: its version, where it is mounted, the cgroup its
    mount shows as its top (`root`), and the cgroup the creating process is in (`own`)."""

    version: int
    mount: Path
    root: str = "/"
    own: str = "/"

    def dir_of(self, cgroup: str) -> Path:
        """The directory of a cgroup path as /proc/<pid>/cgroup names it."""
        top = self.root.rstrip("/")
        rel = cgroup[len(top):] if cgroup == top or cgroup.startswith(top + "/") else cgroup
        return self.mount / rel.lstrip("/")


def detect(mountinfo: Path = MOUNTINFO, self_cgroup: Path = SELF_CGROUP) -> dict[str, Hierarchy]:
    """Which hierarchy holds each controller here, from the kernel's mount table.

    v1 and v2 are told apart by filesystem type in /proc/self/mountinfo: a `cgroup`
    mount is a v1 hierarchy whose super options name the controllers bound to it (cpu,
    or cpu,cpuacct co-mounted); a `cgroup2` mount is the unified hierarchy, whose
    controllers are those its top's cgroup.controllers lists. A controller bound to a v1
    hierarchy is never offered by v2, so each controller has one answer. Where the
    creating process sits comes from /proc/self/cgroup ("N:ctrl,…:/path" for v1,
    "0::/path" for v2).
    """
    own_v1, own_v2 = {}, "/"
    for line in self_cgroup.read_text().splitlines():
        num, _, rest = line.partition(":")
        ctrls, _, path = rest.partition(":")
        if num == "0" and not ctrls:
            own_v2 = path
        for c in ctrls.split(","):
            own_v1[c] = path
    found: dict[str, Hierarchy] = {}
    for line in mountinfo.read_text().splitlines():
        fields = line.split(" ")
        sep = fields.index("-")
        fstype, options = fields[sep + 1], fields[sep + 3].split(",")
        root, mount = _unescape(fields[3]), Path(_unescape(fields[4]))
        if fstype == "cgroup":
            ctrls = [o for o in options if o in KNOWN]
            own = next((own_v1[c] for c in ctrls if c in own_v1), "/")
            for c in ctrls:
                found.setdefault(c, Hierarchy(1, mount, root, own))
        elif fstype == "cgroup2":
            try:
                ctrls = (mount / "cgroup.controllers").read_text().split()
            except OSError:
                continue
            for c in ctrls:
                found.setdefault(c, Hierarchy(2, mount, root, own_v2))
    return found


def _unescape(text: str) -> str:
    """A mountinfo path: space, tab, newline and backslash are written as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


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


@dataclass
class Place:
    """The group's directory in one hierarchy, and the controllers it serves there."""

    dir: Path
    hierarchy: Hierarchy
    controllers: tuple[str, ...]


@dataclass
class Group:
    """One machine profile made real: `stacklab-<id>` in each hierarchy it needs."""

    name: str
    state_dir: Path
    profile: Profile
    places: list[Place]
    cpus: str = ""                       # the CPUs of its cpuset ("" = not limited)
    written: list[Setting] = field(default_factory=list)

    def place_of(self, controller: str) -> Place | None:
        return next((p for p in self.places if controller in p.controllers), None)

    def add(self, pid: int) -> None:
        """Move a running process (all its threads) in; its future children follow it.
        Children it already has stay where they are."""
        if type(pid) is not int or pid <= 0:
            raise ValueError(f"pid {pid!r} is not a process id")
        for place in self.places:
            _write(place.dir / "cgroup.procs", str(pid))

    def preexec(self) -> Callable[[], None]:
        """A preexec_fn for subprocess: the starting process joins the group before it
        execs, so a server and every worker it forks run inside from the first moment.
        Plain os calls only (it runs between fork and exec)."""
        paths = [os.fsencode(p.dir / "cgroup.procs") for p in self.places]

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
        return {p.dir: _procs(p.dir) for p in self.places if p.dir.is_dir()}

    def usage(self) -> dict:
        """CPU time, throttling and memory of the group so far; None where not measured
        (no such controller here). Counters are the kernel's, read as they stand. The v1
        memory.failcnt behind memory_limit_hits stayed 0 on a 6.18 kernel even as a
        process was OOM-killed at the limit: read memory_oom_kills and the peak."""
        return _usage(self)

    def verify(self, pid: int) -> tuple[bool, str]:
        """Whether `pid` is in every one of the group's directories and every limit reads
        back as written; the detail names each thing checked or found wrong."""
        problems, seen = [], []
        try:
            lines = (PROC / str(pid) / "cgroup").read_text().splitlines()
        except OSError:
            return False, f"pid {pid} is not running"
        for place in self.places:
            where = _membership(lines, place)
            wanted = place.hierarchy.own.rstrip("/") + "/" + self.name
            if where != wanted:
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
        busy = {}
        for place in self.places:
            if not place.dir.is_dir():
                continue
            pids = _wait_empty(place.dir, grace_s)
            if pids:
                busy[place.dir] = pids
            else:
                _rmdir(place.dir, grace_s)
        _forget(self.state_dir, {p.dir for p in self.places} - set(busy))
        if busy:
            raise CgroupBusyError(busy)


def create_group(run_id: str, state_dir: Path, profile: Profile,
                 hierarchies: dict[str, Hierarchy] | None = None) -> Group:
    """Make `stacklab-<run_id>` under each controller the profile needs (and cpuacct and
    memory for accounting where present), recorded first, with its limits written.
    On any failure what was made is removed again and CgroupError names the cause."""
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise ValueError(f"run id {run_id!r}: 1-64 letters, digits, '_' or '-', "
                         "starting with a letter or digit")
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
    group = Group(name, Path(state_dir), profile, list(places.values()))
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
    for line in _records(Path(state_dir)):
        path = Path(line)
        if not _is_ours(path, mounts):
            report.refused.append(line)
        elif path.is_dir():
            pids = _procs(path)
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


def _cgroup_mounts(mountinfo: Path) -> list[Path]:
    mounts = []
    for line in mountinfo.read_text().splitlines():
        fields = line.split(" ")
        if fields[fields.index("-") + 1] in ("cgroup", "cgroup2"):
            mounts.append(Path(_unescape(fields[4])))
    return mounts


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


def _make_dir(path: Path) -> None:
    """mkdir: the kernel fills the new directory with its interface files (a test's
    fake tree replaces this to do the same)."""
    os.mkdir(path)


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


def _usage(group: Group) -> dict:
    out = dict.fromkeys(("cpu_usage_s", "cpu_periods", "cpu_throttled_periods",
                         "cpu_throttled_s", "memory_current_bytes", "memory_peak_bytes",
                         "memory_limit_hits", "memory_oom_kills"))
    cpu, acct, mem = (group.place_of(c) for c in ("cpu", "cpuacct", "memory"))
    v2 = next((p for p in group.places if p.hierarchy.version == 2), None)
    if v2:                                       # one directory, cpu.stat always there
        stat = _flat(v2.dir / "cpu.stat")
        if "usage_usec" in stat:
            out["cpu_usage_s"] = stat["usage_usec"] / 1e6
        if "nr_periods" in stat:
            out.update(cpu_periods=stat["nr_periods"], cpu_throttled_periods=stat["nr_throttled"],
                       cpu_throttled_s=stat["throttled_usec"] / 1e6)
    if acct and acct.hierarchy.version == 1:
        ns = _number(acct.dir / "cpuacct.usage")
        out["cpu_usage_s"] = None if ns is None else ns / 1e9
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
