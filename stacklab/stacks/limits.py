"""Process limits a component's knobs ask for, in one place: the `nofile` knob is declared,
refused when this machine cannot grant it, applied when the server is spawned, and verified
on every process of the running server here (and nowhere else).

A component that has the knob only says what it means for that server (nginx also writes
worker_rlimit_nofile, lighttpd server.max-fds); the limit itself is set on the process
stacklab starts, which its workers inherit.
"""

from __future__ import annotations

import resource
from typing import Any

from ..knobs import Knob
from ..host.procs import group_members
from ..measure.verify import Status, Verdict

NOFILE = "nofile"


def nofile_knob(component: str, meaning: str) -> Knob:
    """The open-files limit of a component's processes (0 = inherit stacklab's)."""
    return Knob(component, NOFILE, int, 0, meaning, min=0, max=1_048_576)


def limits_problem(knobs: dict[str, Any]) -> str | None:
    """Why a process limit knob cannot be applied here (checked before anything starts)."""
    nofile = knobs.get(NOFILE)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if nofile and hard != resource.RLIM_INFINITY and nofile > hard:
        return (f"nofile = {nofile} is above this machine's hard open-files limit ({hard}), "
                "which stacklab cannot raise here")
    return None


def spawn_limits(knobs: dict[str, Any]) -> dict[str, Any]:
    """What procs.spawn applies to the new server process (None: inherit)."""
    return {"nofile": knobs.get(NOFILE) or None}


def verify_limits(component: str, pgid: int, knobs: dict[str, Any]) -> list[Verdict]:
    """Every process of the component runs with the limits its knobs ask for."""
    want = knobs.get(NOFILE)
    return [check_nofile(component, pgid, want)] if want else []


def check_nofile(component: str, pgid: int, want: int) -> Verdict:
    """Every process of the component runs with the open-files limit the knob asks."""
    limits = set()
    for pid in group_members(pgid):
        try:
            for line in open(f"/proc/{pid}/limits"):
                if line.startswith("Max open files"):
                    limits.add(int(line.split()[3]))
        except (OSError, ValueError):
            continue
    ok = limits == {want}
    return Verdict(component, NOFILE, Status.PASS if ok else Status.FAIL,
                   f"open-files limit of its processes: {sorted(limits)}"
                   + ("" if ok else f", expected {want}"))
