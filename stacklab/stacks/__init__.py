"""The explicit registry of components, stacks and their knobs (no globbing)."""

from __future__ import annotations

from dataclasses import dataclass

from ..knobs import KnobRegistry
from .apache import Apache
from .base import Component
from .nginx import Nginx

COMPONENTS: dict[str, Component] = {c.name: c for c in (Nginx(), Apache())}


@dataclass(frozen=True)
class StackDef:
    name: str
    components: tuple[str, ...]   # front first
    description: str


STACKS: dict[str, StackDef] = {s.name: s for s in (
    StackDef("nginx", ("nginx",), "nginx serving files itself"),
    StackDef("apache", ("apache",), "Apache httpd 2.4 (event MPM) serving files itself"),
)}


def build_registry() -> KnobRegistry:
    from ..drive import LOAD_KNOBS
    registry = KnobRegistry()
    registry.add(*LOAD_KNOBS)
    for component in COMPONENTS.values():
        registry.add(*component.knobs)
    return registry


REGISTRY = build_registry()
