"""What this machine has for the lab, as plain data: each component and tool found or
not (with its version and how to install it), each feature the lab's own layers can use
(network namespaces, qdiscs, filesystems, cgroup controllers) or why not, and every knob
grouped by its owner. `stacklab doctor` and `stacklab stacks` lay it out
(report/listings.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Callable

from .measure.drive import engine_version
from .errors import StacklabError
from .host.hostinfo import debian_version
from .knobs import Knob
from .netlab import cgroups, fs, net
from .measure.monitor import host_io_stall_us, host_memory_stall_us
from .stacks import COMPONENTS, GROUPS, REGISTRY
from .workloads import APPLICATIONS

DEFAULT_COMPONENTS = ("nginx", "apache")     # what presets/quick.toml needs
OPTIONAL_TOOLS = (("wrk", "wrk"), ("ab", "apache2-utils"))
ENGINE_BUILD = "cargo build --release --manifest-path engine/Cargo.toml"


@dataclass(frozen=True)
class Tool:
    """One thing doctor looks for."""

    name: str
    version: str | None      # None: not found
    install: str             # how to get it
    needed: bool             # the default experiment cannot run without it
    optional: bool = False   # missing is a note, not a problem
    role: str = ""           # what an optional tool is for ("cross-checks")

    @property
    def found(self) -> bool:
        return self.version is not None


@dataclass(frozen=True)
class KnobSection:
    """The knobs of one owner: the load engine, a shared group or a component."""

    owner: str
    heading: str | None      # None: no heading row (the load engine's, listed first)
    knobs: list[Knob]


@dataclass(frozen=True)
class Feature:
    """One thing a lab layer (net.*, fs.*, machine.*) needs from this machine, probed."""

    name: str
    available: bool
    detail: str              # why not; when available, what it uses
    knob: str | None         # the knob (and value) that needs it; None: no knob uses it yet


def _version(component) -> str | None:
    try:
        return component.version()
    except StacklabError:
        return None


def tools() -> list[Tool]:
    """Every component, the engine, and the optional cross-check tools."""
    found = [Tool(name, _version(comp), f"apt-get install {comp.package}",
                  needed=name in DEFAULT_COMPONENTS) for name, comp in COMPONENTS.items()]
    try:
        engine = engine_version()
    except (StacklabError, OSError):
        engine = None
    found.append(Tool("stacklab-load", engine, ENGINE_BUILD, needed=True))
    for tool, package in OPTIONAL_TOOLS:
        found.append(Tool(tool, "" if shutil.which(tool) else None,
                          f"apt-get install {package}", needed=False, optional=True,
                          role="optional, cross-checks"))
    for name, app in APPLICATIONS.items():       # only their workloads need them
        found += [Tool(package, debian_version(package), f"apt-get install {package}",
                       needed=False, optional=True, role=f"{name}'s workloads")
                  for package in app.packages]
    return found


def ready(found: list[Tool]) -> bool:
    """Whether the default experiment can run."""
    return all(t.found for t in found if t.needed)


# --- the lab's features ---------------------------------------------------------------

# The tbf probe adds the qdisc with the lab's own arguments for this rate (net.tbf_args).
TBF_PROBE_RATE = "100mbit"
# The qdiscs probed in a throw-away namespace: (feature, knob, probe); each probe looked
# up when called, so a test can stand in for it.
QDISCS: tuple[tuple[str, str | None, Callable[[], tuple[bool, str]]], ...] = (
    ("rate shaping (tc tbf)", "net.link", lambda: _tbf_available()),
    ("added latency (tc netem)", "net.rtt_ms", lambda: net.netem_available()),
    ("pacing (tc fq)", None, lambda: net.fq_available()),
)
# The cgroup controller each machine.* knob limits with.
CGROUP_KNOBS = (("cpuset", "machine.cpus"), ("cpu", "machine.cpu_quota"),
                ("memory", "machine.memory_mb"))
PROBE_ERRORS = (StacklabError, OSError, ValueError, subprocess.SubprocessError)


def features() -> list[Feature]:
    """Each feature the lab's layers can use here, or why not, from the same checks a
    plan is validated with (so doctor's "yes" is what a run would get): network
    namespaces, then each qdisc tried in a throw-away namespace, each filesystem, each
    cgroup controller. A missing feature is data, never an error: only the experiments
    whose knobs need it are refused."""
    return [*_network_features(), *_filesystem_features(), *_cgroup_features(),
            *_pressure_features()]


# The kernel's pressure stall information (PSI) per resource: what it measures in a run
# when present, what is lost without it. No knob asks for it; every run reads it.
PRESSURE = (
    ("memory", lambda: host_memory_stall_us(),
     "a run's wait for memory (flags memory-pressure, memory-limited)",
     "a run's wait for memory is not measured"),
    ("I/O", lambda: host_io_stall_us(),
     "the disk settled before each load, a run's wait for I/O (flag io-pressure)",
     "runs start after a sync only, and a run's wait for I/O is not measured"),
)


def _pressure_features() -> list[Feature]:
    out = []
    for name, read, used, lost in PRESSURE:
        path = f"/proc/pressure/{'io' if name == 'I/O' else name}"
        found = read() is not None
        out.append(Feature(f"{name} pressure (PSI)", found, f"{path}: {used}" if found else
                           f"no {path} (a kernel without CONFIG_PSI, or psi=0): {lost}",
                           None))
    return out


def _network_features() -> list[Feature]:
    namespaces = _namespaces()
    found = [namespaces]
    for name, knob, probe in QDISCS:
        if not namespaces.available:
            found.append(Feature(name, False, f"probed in a network namespace, which "
                                 f"cannot be had: {namespaces.detail}", knob))
            continue
        try:
            ok, detail = probe()
        except PROBE_ERRORS as e:
            ok, detail = False, f"the probe failed: {e}"
        found.append(Feature(name, ok, detail, knob))
    return found


def _namespaces() -> Feature:
    """Whether this process can create a network namespace: root, and `ip` to do it."""
    name, knob = "network namespaces (ip netns)", "net.mode=veth"
    ip = shutil.which("ip")
    if os.geteuid() != 0:
        return Feature(name, False, "creating one needs root", knob)
    if ip is None:
        return Feature(name, False, "ip missing: apt-get install iproute2", knob)
    return Feature(name, True, f"ip netns as root ({ip})", knob)


def _tbf_available() -> tuple[bool, str]:
    args = net.tbf_args(TBF_PROBE_RATE)           # ["root", "tbf", *parameters]
    return net.qdisc_available("tbf", tuple(args[args.index("tbf") + 1:]))


def _filesystem_features() -> list[Feature]:
    try:
        why_not = fs.available()
    except PROBE_ERRORS as e:
        why_not = {name: f"the probe failed: {e}" for name in fs.FILESYSTEMS}
    return [Feature(f"filesystem {name}", why is None,
                    why or ("mounted directly, in memory" if name == "tmpfs" else
                            f"mkfs.{name} on a loop device"), f"fs.type={name}")
            for name, why in why_not.items()]


def _cgroup_features() -> list[Feature]:
    try:
        found, problem = cgroups.detect(), ""
    except PROBE_ERRORS as e:
        found, problem = {}, f"the probe failed: {e}"
    out = []
    for controller, knob in CGROUP_KNOBS:
        h = found.get(controller)
        detail = (f"cgroup v{h.version} at {h.mount}" if h else problem or
                  "mounted neither as v1 nor in the v2 hierarchy (/proc/self/mountinfo)")
        out.append(Feature(f"cgroup {controller}", h is not None, detail, knob))
    return out


def knob_sections() -> list[KnobSection]:
    """The load engine's knobs, then each shared group's, then each component's with
    its installed version."""
    sections = [KnobSection("load", None, REGISTRY.for_component("load")),
                KnobSection("net", "(the network between engine and stack)",
                            REGISTRY.for_component("net")),
                KnobSection("fs", "(the docroot's filesystem)", REGISTRY.for_component("fs")),
                KnobSection("machine", "(the stack's CPUs and memory)",
                            REGISTRY.for_component("machine"))]
    sections += [KnobSection(name, "(shared settings)", REGISTRY.for_component(name))
                 for name in GROUPS]
    for name, comp in COMPONENTS.items():
        version = _version(comp)
        sections.append(KnobSection(name, "not installed" if version is None else version,
                                    REGISTRY.for_component(name)))
    return sections
