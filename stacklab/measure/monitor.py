"""Monitor: sample every component's processes while the load runs.

Each component is one process group. Every `interval_s` (100 ms) the sampler reads
/proc for the group's processes: CPU seconds (user, sys — a live process's own time
plus that of the children it has reaped, so CPU of short-lived workers is not lost),
RSS, process and thread counts; every `pss_every` samples (2 s) also PSS and USS
from smaps_rollup — the kernel walks every page table for it, so it is read less
often — and the host's available memory. The sampler measures its own CPU so its
cost can be checked (it must stay under 1% of a core). Between full scans of /proc
for the group (every `scan_every` samples: the dearest read), new workers are found
every `children_every` samples through /proc/<pid>/task/<pid>/children of the
processes already known, which is how server masters fork them; a worker's CPU is
cumulative (and moves to its parent when reaped), so finding it late loses none.

What no reading of processes can see is a process born and gone between two samples
whose parent never waits for it (Apache's CGI scripts): its CPU is charged to no live
process. Where a component runs in a cgroup of its own (netlab's run group), the
sampler also reads the group's cumulative CPU time (`counters`), which the kernel
charges with every process that ever ran there; that is the component's CPU, and the
per-process figures stay for what they alone give (memory per worker, process counts).
"""

from __future__ import annotations

import math
import os
import statistics
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from ..host.procs import group_members, proc_stat

TICKS = os.sysconf("SC_CLK_TCK")
PAGE_MIB = os.sysconf("SC_PAGE_SIZE") / (1 << 20)


@dataclass
class Sample:
    t_s: float
    cpu_user_s: float      # cumulative since the trace began
    cpu_sys_s: float
    rss_mib: float
    pss_mib: float | None  # only on the samples that read smaps_rollup
    uss_mib: float | None
    processes: int
    threads: int
    cgroup_cpu_s: float | None = None   # the component's cgroup, cumulative (None: no group)


@dataclass
class ComponentTrace:
    component: str
    samples: list[Sample] = field(default_factory=list)
    per_process_pss_mib: list[float] = field(default_factory=list)  # latest PSS reading
    idle_pss_mib: list[float] | None = None   # per process, the reading before any load

    def cpu_between(self, t0: float, t1: float) -> tuple[float, float]:
        """(user, sys) CPU seconds used between two moments (nearest samples)."""
        if not self.samples:
            return 0.0, 0.0
        a = min(self.samples, key=lambda s: abs(s.t_s - t0))
        b = min(self.samples, key=lambda s: abs(s.t_s - t1))
        return max(0.0, b.cpu_user_s - a.cpu_user_s), max(0.0, b.cpu_sys_s - a.cpu_sys_s)

    def cgroup_cpu_between(self, t0: float, t1: float) -> float | None:
        """CPU seconds the component's cgroup used between two moments (nearest samples,
        as cpu_between and the host window take them); None without a group reading."""
        if not self.samples:
            return None
        a = min(self.samples, key=lambda s: abs(s.t_s - t0))
        b = min(self.samples, key=lambda s: abs(s.t_s - t1))
        if a.cgroup_cpu_s is None or b.cgroup_cpu_s is None:
            return None
        return max(0.0, b.cgroup_cpu_s - a.cgroup_cpu_s)

    def summary(self, load_from_s: float, load_to_s: float) -> dict:
        """Figures of the measured part of the load [load_from_s, load_to_s]. `cpu_s` is
        the component's cgroup's CPU time where it has one (`cpu_source` "cgroup"), else
        its processes' (user + sys, "processes"); `cpu_processes_s` is always theirs."""
        during = [s for s in self.samples if load_from_s <= s.t_s <= load_to_s] or self.samples
        user, sys = self.cpu_between(load_from_s, load_to_s)
        group = self.cgroup_cpu_between(load_from_s, load_to_s)
        pss = [s.pss_mib for s in during if s.pss_mib is not None]
        uss = [s.uss_mib for s in during if s.uss_mib is not None]
        workers = self.per_process_pss_mib[1:] or self.per_process_pss_mib
        return {
            "cpu_user_s": round(user, 4), "cpu_sys_s": round(sys, 4),
            "cpu_s": round(user + sys if group is None else group, 4),
            "cpu_source": "processes" if group is None else "cgroup",
            "cpu_processes_s": round(user + sys, 4),
            "rss_mib_peak": _r(max((s.rss_mib for s in during), default=None)),
            "rss_mib_mean": _r(statistics.fmean(s.rss_mib for s in during) if during else None),
            "pss_mib_peak": _r(max(pss, default=None)),
            "uss_mib_peak": _r(max(uss, default=None)),
            "processes_max": max((s.processes for s in during), default=0),
            "threads_max": max((s.threads for s in during), default=0),
            "pss_mib_per_worker": _r(statistics.fmean(workers) if workers else None),
            "rss_mib_idle_before": _r(self.samples[0].rss_mib if self.samples else None),
            **self.idle(),
            "rss_mib_after": _r(self.samples[-1].rss_mib if self.samples else None),
            "samples": [asdict(s) for s in self.samples],
        }


    def idle(self) -> dict:
        """Memory after ready and before load (the monitor's first sample): what each
        process costs at rest (S2, S4), measured, not inferred from a light load."""
        if self.idle_pss_mib is None or not self.samples:
            return {}
        workers = self.idle_pss_mib[1:] or self.idle_pss_mib
        return {"idle_processes": self.samples[0].processes,
                "idle_pss_mib": _r(sum(self.idle_pss_mib)),
                "idle_pss_mib_per_worker": _r(statistics.fmean(workers) if workers else None)}


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 2)


def _smaps_rollup(pid: int) -> tuple[float, float] | None:
    """(PSS, USS) in MiB."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    kb = {}
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 2 and parts[1].isdigit():
            kb[parts[0].rstrip(":")] = int(parts[1])
    uss = kb.get("Private_Clean", 0) + kb.get("Private_Dirty", 0)
    return kb.get("Pss", 0) / 1024, uss / 1024


def _with_children(pids: list[int]) -> list[int]:
    """Known pids plus every descendant forked by a known process's main thread (how
    server masters fork workers): cheaper than scanning all of /proc."""
    seen, todo = set(pids), list(pids)
    while todo:
        pid = todo.pop()
        try:
            fd = os.open(f"/proc/{pid}/task/{pid}/children", os.O_RDONLY)
        except OSError:
            continue
        try:
            kids = [int(k) for k in os.read(fd, 65536).split()]
        except OSError:
            kids = []
        finally:
            os.close(fd)
        for kid in kids:
            if kid not in seen:
                seen.add(kid)
                todo.append(kid)
    return sorted(seen)


@dataclass(frozen=True)
class HostSample:
    """Whole-host CPU (from /proc/stat) and stacklab's own, at one sample."""

    t_s: float
    busy_s: float       # CPU seconds of all cores in user, nice or system (whole ticks)
    steal_s: float      # stolen by the hypervisor
    total_s: float      # every state, all cores
    self_s: float       # this process (the orchestrator and the sampler)
    forks: int = 0      # processes created since boot (/proc/stat "processes")
    irq_s: float = 0.0  # in interrupts (irq, softirq): not in busy_s
    idle_s: float = 0.0  # idle and iowait: kept in nanoseconds by a tickless kernel
    read_s: float = 0.0  # when /proc/stat was read (the sampler's clock)
    cpus: int = 0        # cores online then
    memory_stall_us: int | None = None  # PSI: time some task waited for memory, since boot
    io_stall_us: int | None = None      # PSI: time some task waited for disk I/O, since boot


def host_cpu() -> tuple[float, float, float, int, float, float, int]:
    """(busy, steal, total) CPU seconds since boot, summed over cores, the processes
    created since boot, the seconds in interrupts, the seconds idle (or in iowait), and
    the cores online."""
    with open("/proc/stat", "rb") as f:
        text = f.read()
    fields = [int(x) for x in text.split(b"\n", 1)[0].split()[1:]]
    at = text.find(b"\nprocesses ")
    forks = int(text[at + 11:text.index(b"\n", at + 1)]) if at >= 0 else 0
    cpus = text.count(b"\ncpu")
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    # Interrupt time is left out of busy: much of it runs while no lab process does (the
    # lab's loopback traffic as softirq on an idle CPU), so it would count as "outside the
    # lab". Without IRQ_TIME_ACCOUNTING the share handled while a task ran is also in that
    # task's time (and its cgroup's): "outside" can be low by up to irq_cores then.
    # Guest time is in user.
    busy = user + nice + system
    total = busy + irq + softirq + idle + iowait + steal
    return (busy / TICKS, steal / TICKS, total / TICKS, forks, (irq + softirq) / TICKS,
            (idle + iowait) / TICKS, cpus)


@dataclass(frozen=True)
class CpuMark:
    """The host's CPU (host_cpu) and this process's own at one moment: the start of a
    span whose others' work `others_cores` reads at its end (a spell of --wait-quiet, a
    server's readiness wait)."""

    read_s: float
    cpu: tuple[float, float, float, int, float, float, int]
    own_s: float


def cpu_mark() -> CpuMark:
    own = os.times()
    return CpuMark(time.monotonic(), host_cpu(), own.user + own.system)


def others_cores(mark: CpuMark, mine_s: float = 0.0) -> float:
    """Cores' worth of CPU the host's other work used since `mark`: its busy time (as
    _busy_s reads it) less this process's and `mine_s` (seconds of processes of the
    lab's own: a server being started)."""
    now, cpu = cpu_mark(), mark.cpu
    span = now.read_s - mark.read_s
    if span <= 0:
        return 0.0
    b0, steal0, _, _, irq0, idle0, cpus = cpu
    b1, steal1, _, _, irq1, idle1, _ = now.cpu
    away = (idle1 - idle0) + (irq1 - irq0) + (steal1 - steal0)
    busy = max(0.0, cpus * span - away) if cpus else b1 - b0
    return max(0.0, busy - (now.own_s - mark.own_s) - mine_s) / span


def group_cpu_s(pgid: int) -> float:
    """CPU seconds the live processes of a process group used, their reaped children's
    included."""
    total = 0
    for pid in group_members(pgid):
        if f := proc_stat(pid):
            total += int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])
    return total / TICKS


def _busy_s(a: HostSample, b: HostSample) -> float:
    """All cores' busy CPU seconds between two samples: their time less idle, interrupts
    and steal, when both samples know when they were read and the same cores were online;
    else the user, nice and system ticks."""
    if not (a.cpus and a.cpus == b.cpus and b.read_s > a.read_s):
        return b.busy_s - a.busy_s
    away = (b.idle_s - a.idle_s) + (b.irq_s - a.irq_s) + (b.steal_s - a.steal_s)
    return max(0.0, a.cpus * (b.read_s - a.read_s) - away)


def host_memory_stall_us() -> int | None:
    """Microseconds since boot in which some task waited for memory — reclaim, a refault
    of a page evicted too early, swap-in — from /proc/pressure/memory ("some ... total=");
    None on a kernel without PSI."""
    return _stall_us("memory")


def host_io_stall_us() -> int | None:
    """Microseconds since boot in which some task waited for disk I/O (writeback, a
    read from disk), from /proc/pressure/io; None on a kernel without PSI."""
    return _stall_us("io")


def _stall_us(resource: str) -> int | None:
    try:
        with open(f"/proc/pressure/{resource}", "rb") as f:
            some = f.readline()
    except OSError:
        return None
    at = some.find(b"total=")
    return int(some[at + 6:]) if some.startswith(b"some") and at >= 0 else None


def host_available_mib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _stall_share(a: int | None, b: int | None, span_s: float) -> float | None:
    return None if a is None or b is None else round((b - a) / (span_s * 1e6), 4)


class Monitor:
    """Samples process groups {component: pgid} from __enter__ until __exit__, and the
    cumulative CPU seconds of the components that have a cgroup ({component: reader})."""

    def __init__(self, groups: dict[str, int], interval_s: float = 0.1,
                 pss_every: int = 20, scan_every: int = 50, children_every: int = 3,
                 counters: dict[str, Callable[[], float | None]] | None = None):
        self.groups = groups
        self.counters = counters or {}
        self.interval_s, self.pss_every, self.scan_every = interval_s, pss_every, scan_every
        self.children_every = children_every
        self.traces = {name: ComponentTrace(name) for name in groups}
        self.host_mib: list[float] = []
        self.host: list[HostSample] = []
        self.sampler_cpu_s = 0.0
        self.elapsed_s = 0.0
        self._members: dict[str, list[int]] = {name: [] for name in groups}
        self._base: dict[str, tuple[float, float]] = {}
        self._cgroup_base: dict[str, float] = {}
        self._count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._t0 = 0.0

    def __enter__(self) -> "Monitor":
        self._t0 = time.monotonic()
        self._thread.start()
        while not self.host and self._thread.is_alive():
            time.sleep(0.005)   # the idle "before" sample exists before load starts
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._thread.join()

    def now_s(self) -> float:
        return time.monotonic() - self._t0

    def _loop(self) -> None:
        cpu0 = time.thread_time()
        self.sample(pss=True)
        next_at = time.monotonic()
        while not self._stop.is_set():
            next_at += self.interval_s
            time.sleep(max(0.0, next_at - time.monotonic()))   # cheaper than Event.wait
            if not self._stop.is_set():
                self.sample(pss=self._count % self.pss_every == 0)
        self.sample(pss=True)
        self.sampler_cpu_s = time.thread_time() - cpu0
        self.elapsed_s = self.now_s()

    def sample(self, pss: bool = False) -> None:
        t = self.now_s()
        rescan = self._count % self.scan_every == 0
        look_for_children = self._count % self.children_every == 0
        self._count += 1
        for name, pgid in self.groups.items():
            if rescan:
                self._members[name] = group_members(pgid)
            elif look_for_children:
                self._members[name] = _with_children(self._members[name] or [pgid])
            user = sys = rss = 0.0
            threads = 0
            live = []
            for pid in self._members[name]:
                f = proc_stat(pid)
                if not f or f[0] == b"Z":
                    continue
                live.append(pid)
                user += (int(f[11]) + int(f[13])) / TICKS   # utime + cutime
                sys += (int(f[12]) + int(f[14])) / TICKS    # stime + cstime
                threads += int(f[17])
                rss += int(f[21]) * PAGE_MIB
            self._members[name] = live
            base = self._base.setdefault(name, (user, sys))
            pss_total = uss_total = None
            trace = self.traces[name]
            if pss:
                readings = [r for r in map(_smaps_rollup, live) if r]
                pss_total = sum(r[0] for r in readings)
                uss_total = sum(r[1] for r in readings)
                trace.per_process_pss_mib = [round(r[0], 2) for r in readings]
                if trace.idle_pss_mib is None:
                    trace.idle_pss_mib = trace.per_process_pss_mib
            trace.samples.append(Sample(round(t, 3), round(user - base[0], 4),
                                        round(sys - base[1], 4), round(rss, 2),
                                        _r(pss_total), _r(uss_total), len(live), threads,
                                        self._cgroup_cpu(name)))
        own = os.times()
        read_s = self.now_s()
        busy, steal, total, forks, irq, idle, cpus = host_cpu()
        self.host.append(HostSample(round(t, 3), busy, steal, total, own.user + own.system,
                                    forks, irq, idle, read_s, cpus, host_memory_stall_us(),
                                    host_io_stall_us()))
        mem = host_available_mib() if pss else None
        if mem is not None:
            self.host_mib.append(mem)

    def _cgroup_cpu(self, name: str) -> float | None:
        """The component's cgroup CPU seconds since the first sample (None: no group, or
        its reading failed)."""
        read = self.counters.get(name)
        value = read() if read else None
        if value is None:
            return None
        return round(value - self._cgroup_base.setdefault(name, value), 6)

    def host_window(self, t0: float, t1: float, lab_cpu_s: float, processes: int = 0,
                    lab_source: str = "processes") -> dict:
        """CPU used on the host between two moments by everything outside the lab:
        all cores' busy time minus the components' (`lab_cpu_s`, which also holds the
        load engine's; `lab_source` says whether the components' came from their
        cgroups, their processes, or both: "cgroup", "processes", "mixed") and this
        process's own. A process's CPU is read in whole clock ticks, floored: over
        `processes` readings (those of components counted per process) the lab's sum is
        off by a random amount whose standard deviation is sqrt(processes / 6) ticks (the
        difference of two uniform roundings), so `tolerance_cores` (three of them) says
        how much of "outside" can be the lab's own uncounted time — 0.1 of a core for 256
        prefork children over 2 s (a quiet host showed 0.01–0.10 there). A cgroup's time
        is the scheduler's, in nanoseconds: nothing to round.

        The host's busy time is the cores' time less their idle, iowait, interrupt and
        stolen time: a tickless kernel keeps idle in nanoseconds, while user and system
        are charged a tick at a time to whatever runs at the tick, and miss short bursts
        between idle spells (a CGI load of 400 scripts a second: 1.54 cores by ticks,
        1.59 by idle time, 1.58 in the lab's cgroups). `busy_ticks_cores` keeps the
        ticks' figure."""
        if len(self.host) < 2:
            return {}
        a = min(self.host, key=lambda h: abs(h.t_s - t0))
        b = min(self.host, key=lambda h: abs(h.t_s - t1))
        window = b.t_s - a.t_s
        if window <= 0:
            return {}
        # /proc/stat is read after the components, a little later in each sample: its
        # figures are rates over the span between its own readings
        span = b.read_s - a.read_s if b.read_s > a.read_s else window
        busy_cores = _busy_s(a, b) / span
        outside = busy_cores * window - lab_cpu_s - (b.self_s - a.self_s)
        total = b.total_s - a.total_s
        tolerance = 3 * math.sqrt(processes / 6) / TICKS / window
        return {"window_s": round(window, 3),
                "busy_cores": round(busy_cores, 3),
                "busy_ticks_cores": round((b.busy_s - a.busy_s) / span, 3),
                "lab_cores": round(lab_cpu_s / window, 3),
                # without IRQ_TIME_ACCOUNTING a task's (and so a cgroup's) time holds the
                # interrupts handled while it ran, which /proc/stat counts here instead
                "irq_cores": round((b.irq_s - a.irq_s) / span, 3),
                "lab_cpu_source": lab_source,
                "outside_cores": round(max(0.0, outside) / window, 3),
                # a process born and gone between two samples (a CGI script) is charged to
                # nobody when its parent does not wait for it: many forks a second make
                # "outside" the lab's own CPU (flags.host_busy says so)
                "forks_per_s": round((b.forks - a.forks) / window, 1),
                "tolerance_cores": round(tolerance, 3),
                "steal_share": round((b.steal_s - a.steal_s) / total, 4) if total else 0.0,
                "cpus": b.cpus,
                # the share of the window in which some task waited for memory, for I/O
                "memory_stall_share": _stall_share(a.memory_stall_us, b.memory_stall_us,
                                                   span),
                "io_stall_share": _stall_share(a.io_stall_us, b.io_stall_us, span)}

    def overhead(self) -> dict:
        """The sampler's own cost, as a fraction of one core."""
        share = self.sampler_cpu_s / self.elapsed_s if self.elapsed_s else 0.0
        return {"sampler_cpu_s": round(self.sampler_cpu_s, 4),
                "sampler_core_share": round(share, 5),
                "host_available_mib_min": _r(min(self.host_mib, default=None))}
