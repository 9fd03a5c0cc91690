"""The lab's layers of a run (stacklab.layer.Layer), over what run.py makes: the network,
the machine profile, the filesystem, and the cold cache just before the load. Each says
what it refuses in a plan, what it finds once the servers run under it, and its own part
of the run's record ("_net", "_accounting" and "_machine", "_fs")."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..errors import StacklabError
from ..layer import Place, Running
from ..measure.verify import Verdict
from ..workloads import Deployed
from . import cgroups, fs, net, rundir
from .knobs import sysctls
from .run import (Machine, Network, cool, cool_verdicts, filesystem, fs_verdicts, machine,
                  machine_verdicts, network)


def _pids(running: Running) -> list[int]:
    return [s.proc.popen.pid for s in running.started]


@dataclass(eq=False)
class NetworkLayer:
    """The run's network (net.* knobs): loopback, or a veth link between two namespaces
    of its own, whose rate is judged (with the stack's verdicts, unless `waits` is off:
    a breakdown judges the link before it starts a stack)."""

    knobs: dict[str, Any]
    place: Place
    waits: bool = True
    name = "net"
    network: Network = field(default_factory=lambda: Network("loopback"))

    @classmethod
    def problem(cls, knobs: dict[str, dict[str, Any]]) -> str | None:
        return net_problem(knobs["net"])

    @contextmanager
    def entered(self) -> Iterator[Network]:
        with network(self.knobs, self.place.run_id, self.place.state_dir) as self.network:
            yield self.network

    def verdicts(self) -> tuple[Verdict, ...]:
        return tuple(self.network.verdicts())

    def record(self) -> dict[str, Any]:
        return {"_net": self.network.record()}


@dataclass(eq=False)
class MachineLayer:
    """The run's cgroup (machine.* knobs): a profile's limits, and in any case a group
    per component counting its CPU time; its verdicts judge the servers' processes."""

    knobs: dict[str, Any]
    place: Place
    running: Running
    name = "machine"
    waits = True
    machine: Machine = field(default_factory=lambda: Machine(None))
    counted: list[str] = field(default_factory=list)

    @classmethod
    def problem(cls, knobs: dict[str, dict[str, Any]]) -> str | None:
        if problem := machine_problem(knobs["machine"]):
            return problem
        if knobs["machine"]["memory_mb"] and knobs["fs"]["type"] == "tmpfs":
            return ("machine.memory_mb with fs.type = \"tmpfs\": the files would live in "
                    "memory charged to stacklab, which wrote them, not to the profile's "
                    "limit; put them on a disk filesystem (fs.type = \"ext4\", \"xfs\", "
                    "\"btrfs\")")
        return None

    @contextmanager
    def entered(self) -> Iterator[Machine]:
        with machine(self.knobs, self.place.run_id, self.place.state_dir) as self.machine:
            yield self.machine

    def counters(self) -> dict[str, Callable[[], float | None]]:
        """The running components' CPU-time readers (by label), for the measurement; the
        record says which were counted so."""
        found = self.machine.counters(self.running.started)
        self.counted = sorted(found)
        return found

    def verdicts(self) -> tuple[Verdict, ...]:
        return tuple(machine_verdicts(self.machine, _pids(self.running)))

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"_accounting": self.machine.record(self.counted)}
        if self.machine.limited:
            out["_machine"] = {**self.knobs, **self.machine.usage()}
        return out


@dataclass(eq=False)
class FilesystemLayer:
    """The workload on a filesystem of the run's own (fs.* knobs), or as deployed with
    its writable directories fresh; its verdict judges the docroot in the server's view.
    Its plan rule is also the run directory's filesystem's (rundir.problem), which the
    runner mounts around the run."""

    knobs: dict[str, Any]
    deployed: Deployed
    place: Place
    running: Running
    name = "fs"
    waits = True
    mount: fs.Mount | None = None
    dirs: list[dict[str, Any]] = field(default_factory=list)   # the writable ones

    @classmethod
    def problem(cls, knobs: dict[str, dict[str, Any]]) -> str | None:
        return fs_problem(knobs["fs"]) or rundir.problem(knobs)

    @contextmanager
    def entered(self) -> Iterator[Deployed]:
        with filesystem(self.knobs, self.deployed, self.place.run_id, self.place.state_dir,
                        host_memory_mb()) as (self.deployed, self.mount, self.dirs):
            yield self.deployed

    def verdicts(self) -> tuple[Verdict, ...]:
        return tuple(fs_verdicts(self.mount, _pids(self.running)[0]))

    def record(self) -> dict[str, Any]:
        return {"_fs": {**self.knobs, "mounted": bool(self.mount)},
                "_writable": {"docroot_dirs": self.dirs}}


@dataclass(eq=False)
class ColdCacheLayer:
    """The docroot dropped from the page cache just before the load where the run needs
    it (a cold cache on the run's own filesystem, a machine profile's memory limit), and
    checked: pages left fail the run before it is measured (run.cool, cool_verdicts)."""

    knobs: dict[str, dict[str, Any]]
    fs: FilesystemLayer
    name = "fs"
    waits = False
    cooled: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def problem(cls, knobs: dict[str, dict[str, Any]]) -> str | None:
        return None          # fs.cold_cache's own rule is the filesystem's

    @property
    def limited(self) -> bool:
        return self.knobs["machine"]["memory_mb"] > 0

    @contextmanager
    def entered(self) -> Iterator[dict[str, Any]]:
        self.cooled = cool(self.fs.deployed.docroot,
                           bool(self.fs.mount) and self.knobs["fs"]["cold_cache"],
                           self.limited)
        yield self.cooled

    def verdicts(self) -> tuple[Verdict, ...]:
        return tuple(cool_verdicts(self.cooled, self.limited))

    def record(self) -> dict[str, Any]:
        return {"_fs": self.cooled}


# The lab's plan rules, in the order a plan is checked: a trial refused by several is
# refused for the first.
PLAN_ORDER = (NetworkLayer, FilesystemLayer, MachineLayer)


def net_problem(knobs: dict) -> str | None:
    """What this machine cannot do of a trial's net.* knobs: namespaces need root; added
    latency needs the kernel's netem; a sysctl that is not per network namespace would
    change the host's."""
    if knobs["mode"] != "veth":
        return None
    if os.geteuid() != 0:
        return "net.mode = \"veth\" creates network namespaces, which needs root"
    if knobs["rtt_ms"]:
        ok, why = net.netem_available()
        return (f"net.rtt_ms = {knobs['rtt_ms']} needs tc netem, which this kernel lacks "
                f"({why}); latency cannot be added here" if not ok else
                f"net.rtt_ms = {knobs['rtt_ms']}: adding latency with netem is not built yet "
                "(it was developed on a kernel without netem, where it could not be tested)")
    for key in sysctls(knobs):
        if key not in net.NAMESPACED_SYSCTLS:
            return (f"{key} is not per network namespace on this kernel (read-only inside "
                    "one): setting it would change the host's")
    return None


def fs_problem(knobs: dict) -> str | None:
    """A filesystem this machine cannot make, options it does not take, or a cold cache
    on a ramdisk (its files are only in memory)."""
    if knobs["type"] == "none":
        return None
    if why := fs.why_not(knobs["type"]):
        return f"fs.type = {knobs['type']!r} cannot be had here: {why}"
    if knobs["cold_cache"] and knobs["type"] == "tmpfs":
        return "fs.cold_cache on tmpfs: a ramdisk holds its files only in memory"
    try:
        fs.check_args("check", knobs["type"], knobs["size_mb"],
                      tuple(o for o in knobs["options"].split(",") if o))
    except ValueError as e:
        return f"fs: {e}"
    return None


def machine_problem(knobs: dict) -> str | None:
    """A profile this machine cannot give (more CPUs or memory than it has, a controller
    missing)."""
    if knobs["memory_mb"] and knobs["memory_mb"] > (host := host_memory_mb()):
        return (f"machine.memory_mb = {knobs['memory_mb']} is more than this host's "
                f"{host} MiB (MemTotal in /proc/meminfo): the limit would never act")
    try:
        profile = cgroups.Profile(knobs["cpus"] or None, knobs["cpu_quota"] or None,
                                  knobs["memory_mb"] or None)
    except ValueError as e:
        return f"machine.{e}"
    needed = profile.controllers()
    found = cgroups.detect() if needed else {}      # mountinfo read only for a profile
    missing = [c for c in needed if c not in found]
    if missing:
        return (f"machine profile needs the {', '.join(missing)} cgroup controller(s), "
                "which this machine has neither as v1 nor v2")
    return None


def host_memory_mb() -> int:
    """This host's memory in MiB, as /proc/meminfo's MemTotal says."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    raise StacklabError("/proc/meminfo has no MemTotal line: the host's memory is unknown")
