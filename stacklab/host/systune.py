"""System settings held while an experiment runs, in pyperf's style: each an operation
that says whether it is available, what the current state is, and applies itself for
as long as it is held.

Idle CPUs that sleep deeply take hundreds of microseconds to wake. A lightly loaded
run (one connection: the client and the server take turns, each waking the other)
then measures wake-ups rather than the server: on this project's VM, nginx at one
connection did 2,300 req/s with the CPUs allowed to sleep and 17,000 with them kept
awake. Holding /dev/cpu_dma_latency open at 0 µs (the kernel's PM QoS request, as
tuned's latency-performance profile does) keeps idle CPUs polling instead.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

DMA_LATENCY = Path("/dev/cpu_dma_latency")
CPUIDLE = Path("/sys/devices/system/cpu/cpuidle")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


@dataclass
class CpuAwake:
    """Hold /dev/cpu_dma_latency at 0 while the experiment runs."""

    _fd: int | None = field(default=None, repr=False)

    def available(self) -> bool:
        return os.access(DMA_LATENCY, os.W_OK)

    def state(self) -> dict:
        return {"cpuidle_driver": _read(CPUIDLE / "current_driver"),
                "cpuidle_governor": _read(CPUIDLE / "current_governor"),
                "cpus_kept_awake": self._fd is not None}

    def __enter__(self) -> "CpuAwake":
        if self.available():
            fd = os.open(DMA_LATENCY, os.O_WRONLY)
            os.write(fd, struct.pack("i", 0))   # held while the file stays open
            self._fd = fd
        return self

    def __exit__(self, *_) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
