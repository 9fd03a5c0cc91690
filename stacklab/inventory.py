"""What this machine has for the lab, as plain data: each component and tool found or
not (with its version and how to install it), and every knob grouped by its owner.
`stacklab doctor` and `stacklab stacks` lay it out (report/listings.py)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from .drive import engine_version
from .errors import StacklabError
from .knobs import Knob
from .stacks import COMPONENTS, GROUPS, REGISTRY

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
    optional: bool = False   # a cross-check tool: missing is a note, not a problem

    @property
    def found(self) -> bool:
        return self.version is not None


@dataclass(frozen=True)
class KnobSection:
    """The knobs of one owner: the load engine, a shared group or a component."""

    owner: str
    heading: str | None      # None: no heading row (the load engine's, listed first)
    knobs: list[Knob]


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
                          f"apt-get install {package}", needed=False, optional=True))
    return found


def ready(found: list[Tool]) -> bool:
    """Whether the default experiment can run."""
    return all(t.found for t in found if t.needed)


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
