"""A dead session's lab layers are swept by the next session a command opens (issue 22).

The lab directory (host/lab.py) no longer knows netlab: the sweeps that remove a dead
session's namespaces, filesystems and cgroups are given to it by whoever opens the
session, and every command hands it netlab.sweep.SWEEPS. These tests hold that a
session opened that way still removes what a killed one left, and that no kind of
netlab layer that leaves records is missing from the sweeps."""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
from pathlib import Path

import pytest

import stacklab.netlab
from stacklab.host import lab
from stacklab.netlab import fs, net, sweep

from helpers import require_root


def lab_namespaces(rid: str) -> set[str]:
    return {ns for ns in net.namespaces() if ns.startswith(f"stacklab-{rid}")}


def mounted(path) -> bool:
    return any(line.split()[4] == str(path)
               for line in open("/proc/self/mountinfo").read().splitlines())


@pytest.mark.integration
def test_a_session_opened_as_the_commands_open_it_sweeps_a_dead_sessions_layers():
    require_root("network namespaces and mounts")
    rid = f"t{os.getpid() % 100000:05d}sw"
    dead = lab.open_session(sweeps=sweep.SWEEPS)
    net.create_link(rid, dead.dir)                       # left open: the session "dies"
    mount_point = dead.dir / "mnt"
    fs.mount_fs(rid, dead.dir, mount_point, "tmpfs", 4)
    assert lab_namespaces(rid) and mounted(mount_point)
    os.close(dead._lock_fd)                              # its stacklab is killed: both
    os.close(dead._entry_fd)                             # locks are free
    try:
        with lab.session_scope(sweeps=sweep.SWEEPS) as fresh:   # as runner, breakdown, dbbench
            assert not lab_namespaces(rid)
            assert not mounted(mount_point)
            assert not dead.dir.exists() and not dead.entry.exists()
    finally:
        lab.cleanup_stale(lab.default_root(), sweeps=sweep.SWEEPS)


def test_every_netlab_layer_that_leaves_records_is_swept():
    """A netlab module with a cleanup_stale (its records of what a killed run made) is
    one of the sweeps a command's session runs, in one place."""
    sweepers = set()
    for info in pkgutil.iter_modules(stacklab.netlab.__path__):
        module = importlib.import_module(f"stacklab.netlab.{info.name}")
        found = getattr(module, "cleanup_stale", None)
        if found is not None and found.__module__ == module.__name__:
            sweepers.add(found)
    assert sweepers and sweepers == set(sweep.SWEEPS)


def test_every_session_the_commands_open_names_the_lab_layers_sweeps():
    """`sweeps` is a required keyword, so a call without it fails at once; what it must
    name in stacklab's own code is SWEEPS, all of them (a subset would leave a dead
    session's other layers behind for good)."""
    package = Path(__file__).resolve().parent.parent / "stacklab"
    calls = [(p.relative_to(package), line.strip()) for p in package.rglob("*.py")
             if p.name != "lab.py" for line in p.read_text().splitlines()
             if re.search(r"\b(session_scope|open_session)\(", line)]
    assert calls, "no session is opened in the package"
    assert [c for c in calls if "sweeps=SWEEPS" not in c[1]] == []
