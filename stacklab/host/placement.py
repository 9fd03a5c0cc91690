"""CPU placement: which CPUs the load engine and each component may run on.

One mechanism for every process stacklab starts: a `cpus` knob per component and for
the load engine (`load.cpus = "1"`, `nginx.cpus = "0"`), a Linux CPU list ("0", "0,1",
"0-3"), applied with sched_setaffinity in the child before it execs, so a server's
workers inherit it. The classic layout — server on CPU 0, client on CPU 1 — is then
two knobs, and the knobs are stored with every run. (The netlab issue's machine
profiles will add cgroup cpusets on top of this.)
"""

from __future__ import annotations

import os
from typing import Callable

from ..knobs import Knob


def parse_cpus(text: str) -> frozenset[int]:
    """A CPU list ("0", "0,2", "0-3") as a set; ValueError naming what is wrong."""
    cpus: set[int] = set()
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"{text!r} is not a CPU list such as \"0\", \"0,1\" or \"0-3\"")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise ValueError(f"{text!r}: range {part.strip()} runs backwards")
        cpus.update(range(first, last + 1))
    return frozenset(cpus)


def check_cpus(text: str) -> str | None:
    """Why this CPU list cannot be used on this machine, or None ("" = no pinning)."""
    if text == "":
        return None
    try:
        cpus = parse_cpus(text)
    except ValueError as e:
        return str(e)
    usable = os.sched_getaffinity(0)
    missing = sorted(cpus - usable)
    if missing:
        return (f"CPU {', '.join(map(str, missing))} is not available here "
                f"(usable: {', '.join(map(str, sorted(usable)))})")
    return None


def cpus_knob(component: str) -> Knob:
    what = "the load engine" if component == "load" else f"every {component} process"
    return Knob(component, "cpus", str, "", f"CPUs {what} may run on, a Linux CPU list "
                "(\"0\", \"0,1\", \"0-3\"; empty = any): pin the server and the client "
                "apart as the classic tests did.", validate=check_cpus)


def pin(text: str) -> Callable[[], None] | None:
    """A preexec function that pins the calling child to these CPUs (None: no pinning)."""
    if not text:
        return None
    cpus = parse_cpus(text)
    return lambda: os.sched_setaffinity(0, cpus)
