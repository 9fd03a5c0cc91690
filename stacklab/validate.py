"""Validate a plan whole before any server starts: every command that measures calls
validate_plan (run, run --dry-run, breakdown, dbbench), and what it refuses names the
value at fault where it was given (an experiment file, a command line)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterable, Literal, Protocol

from .drive import engine_path
from .errors import SpecError, StacklabError
from .plan import Plan, Trial, effective_knobs
from .procs import connections_problem
from .spec import ExperimentSpec
from .workloads import WORKLOADS

# What a trial's problem is about: its workload, its concurrency, or a component's knobs.
Field = Literal["workload", "concurrency", "component"]


class Origin(Protocol):
    """Where a plan's values were given (an experiment file, a command line): a problem
    found in a trial becomes the error that names the value there."""

    def refuse(self, trial: Trial, field: Field, value: Any, problem: str) -> StacklabError: ...


@dataclass(frozen=True)
class SpecOrigin:
    """A plan expanded from an experiment file: errors name the file, key and value."""

    spec: ExperimentSpec

    def refuse(self, trial: Trial, field: Field, value: Any, problem: str) -> SpecError:
        path = self.spec.path
        if field == "workload":
            return SpecError(path, "matrix.workload", value, f"{problem} (exclude the "
                             "combination or pick another stack)")
        if field == "concurrency":
            return SpecError(path, "matrix.concurrency", value, problem)
        return SpecError(path, f"trial {trial.label()}", trial.id, problem)


def validate_plan(plan: Plan, origin: Origin) -> None:
    """Refuse a plan that cannot run as planned, before any server starts, naming the value
    at fault where `origin` says it was given: in every trial, the stack runs what the
    workload needs, the engine can hold its connections, and every component accepts its
    knobs (their combination, and the process limits they ask for)."""
    from .stacks import COMPONENTS, REGISTRY, STACKS, needs_problem
    for trial in plan.trials:
        stack = STACKS[trial.stack]
        if problem := needs_problem(trial.stack, WORKLOADS[trial.workload].needs):
            raise origin.refuse(trial, "workload", trial.workload, problem)
        if problem := connections_problem(trial.concurrency):
            raise origin.refuse(trial, "concurrency", trial.concurrency, problem)
        knobs = effective_knobs(REGISTRY, stack, trial)
        for name in stack.components:
            if problem := COMPONENTS[name].problem(knobs[name]):
                raise origin.refuse(trial, "component", name, problem)
        if found := layers_problem(stack, knobs):
            raise origin.refuse(trial, "component", *found)
        for owner, check in (("net", net_problem), ("fs", fs_problem),
                             ("machine", machine_problem)):
            if problem := check(knobs[owner]):
                raise origin.refuse(trial, "component", owner, problem)
        if knobs["machine"]["memory_mb"] and knobs["fs"]["type"] == "tmpfs":
            raise origin.refuse(trial, "component", "machine", (
                "machine.memory_mb with fs.type = \"tmpfs\": the files would live in "
                "memory charged to stacklab, which wrote them, not to the profile's limit; "
                "put them on a disk filesystem (fs.type = \"ext4\", \"xfs\", \"btrfs\")"))
        if problem := threads_problem(knobs["load"]):
            raise origin.refuse(trial, "component", "load", problem)


def layers_problem(stack, knobs: dict[str, dict]) -> tuple[str, str] | None:
    """(layer, why) when a front layer cannot split what is behind it as its knobs say —
    as many weights as backends: the replicas for the layer in front of them, one for
    the others — or cannot speak to it: HTTPS behind a layer that speaks only HTTP
    (Varnish, Squid)."""
    from .stacks import COMPONENTS
    behind = (*stack.layers[1:], stack.base[0])
    for layer, next_one in zip(stack.layers, behind):
        try:
            COMPONENTS[layer].shares(knobs[layer], stack.backends(layer))
        except StacklabError as e:
            return layer, str(e)
        if knobs[next_one].get("tls") and not COMPONENTS[layer].tls_to_backends:
            https = ", ".join(n for n, c in COMPONENTS.items() if c.layer and c.tls_to_backends)
            return layer, (f"{layer} speaks plain HTTP to what is behind it, and "
                           f"{next_one}.tls is on; leave {next_one}.tls off (TLS in front "
                           f"of {layer} is not built), or put a layer that speaks HTTPS to "
                           f"its backends there ({https})")
    return None


def net_problem(knobs: dict) -> str | None:
    """What this machine cannot do of a trial's net.* knobs: namespaces need root; added
    latency needs the kernel's netem; a sysctl that is not per network namespace would
    change the host's."""
    if knobs["mode"] != "veth":
        return None
    from .netlab import net
    from .netlab.knobs import sysctls
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
    from .netlab import fs
    if why := fs.available()[knobs["type"]]:
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
    from .netlab import cgroups
    if knobs["memory_mb"] and knobs["memory_mb"] > (host := host_memory_mb()):
        return (f"machine.memory_mb = {knobs['memory_mb']} is more than this host's "
                f"{host} MiB (MemTotal in /proc/meminfo): the limit would never act")
    try:
        profile = cgroups.Profile(knobs["cpus"] or None, knobs["cpu_quota"] or None,
                                  knobs["memory_mb"] or None)
    except ValueError as e:
        return f"machine.{e}"
    found = cgroups.detect()
    missing = [c for c in profile.controllers() if c not in found]
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


def threads_problem(load: dict) -> str | None:
    """More engine threads than the CPUs `load.cpus` allows would share those CPUs, and
    the generator-bound check (busy time per thread) could no longer see a saturated
    engine: refused. Unpinned, or threads = 0 (one per usable CPU), is always fine."""
    from .placement import parse_cpus
    if not load.get("cpus") or not load.get("threads"):
        return None
    cpus = len(parse_cpus(load["cpus"]))
    if load["threads"] <= cpus:
        return None
    return (f"load.threads = {load['threads']} is more than the {cpus} CPU(s) load.cpus = "
            f"{load['cpus']!r} allows: the engine's busy share could not show it saturated")


def check_installed(components: Iterable[str], engine: bool) -> None:
    """What a command is about to start is on this machine: each component's binary (the
    error names its apt package) and, for a command that drives load, the engine."""
    from .stacks import COMPONENTS
    for name in components:
        comp = COMPONENTS[name]
        if not comp.installed():
            raise StacklabError(f"{name} is not installed ({comp.binary} missing): "
                                f"apt-get install {comp.package}")
    if engine:
        engine_path()
