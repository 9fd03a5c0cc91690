"""Monitor: sample the processes of every running component (CPU seconds, RSS, count).

A background thread reads /proc every `interval_s` while the load runs; each component
is its process group. CPU of a process that exits between samples is kept at its last
reading, so a trace never goes backwards.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import procs

TICKS = os.sysconf("SC_CLK_TCK")
PAGE_MIB = os.sysconf("SC_PAGE_SIZE") / (1 << 20)


@dataclass
class Sample:
    t_s: float
    cpu_s: float       # cumulative since the trace began
    rss_mib: float
    processes: int


@dataclass
class ComponentTrace:
    component: str
    samples: list[Sample] = field(default_factory=list)

    def cpu_between(self, t0: float, t1: float) -> float:
        """CPU seconds used between two moments of the trace (nearest samples)."""
        if not self.samples:
            return 0.0
        at = lambda t: min(self.samples, key=lambda s: abs(s.t_s - t)).cpu_s  # noqa: E731
        return max(0.0, at(t1) - at(t0))

    def summary(self, measured_from_s: float) -> dict:
        end = self.samples[-1].t_s if self.samples else 0.0
        measured = [s for s in self.samples if s.t_s >= measured_from_s] or self.samples
        return {
            "cpu_s": round(self.cpu_between(measured_from_s, end), 4),
            "rss_mib_max": round(max((s.rss_mib for s in measured), default=0.0), 2),
            "processes_max": max((s.processes for s in measured), default=0),
            "samples": [asdict(s) for s in self.samples],
        }


def _read(pid: int) -> tuple[float, float] | None:
    """(cpu seconds, rss MiB) of one process, or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        rss_pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TICKS, rss_pages * PAGE_MIB


class Monitor:
    """Samples process groups {component: pgid} from start() until stop()."""

    def __init__(self, groups: dict[str, int], interval_s: float = 0.1):
        self.groups = groups
        self.interval_s = interval_s
        self.traces = {name: ComponentTrace(name) for name in groups}
        self._cpu_seen: dict[str, dict[int, float]] = {name: {} for name in groups}
        self._base: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._t0 = 0.0

    def __enter__(self) -> "Monitor":
        self._t0 = time.monotonic()
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        t = time.monotonic() - self._t0
        for name, pgid in self.groups.items():
            seen = self._cpu_seen[name]
            rss, count = 0.0, 0
            for pid in procs.group_members(pgid):
                reading = _read(pid)
                if reading:
                    seen[pid] = reading[0]
                    rss += reading[1]
                    count += 1
            total = sum(seen.values())
            base = self._base.setdefault(name, total)
            self.traces[name].samples.append(Sample(round(t, 3), total - base, rss, count))
