"""Composed stacks: front layers (caches, proxies, balancers) in front of a named stack,
and a balancer over replicas of it, written in the experiment file as

    varnish > nginx+php-fpm                 a cache in front of a stack
    haproxy > apache+mod_php * 3            a balancer over three replicas
    varnish > haproxy > apache * 2          layers stack up, front first

Only a named stack replicates (each replica is the whole stack: its own processes, run
directory, ports and monitor trace) and only a layer that balances sits directly in front
of replicas. A component appears once per stack, so `varnish.ttl` names one thing; nginx
and Apache in front of a stack are the components nginx-proxy and apache-proxy, whose
knobs (`nginx-proxy.cache`) never collide with the stack's own nginx or Apache.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Collection, Mapping, Protocol

MAX_REPLICAS = 8
# Layers the studies used that this machine cannot build, and why.
UNAVAILABLE = {"lvs": "S2's balancer (IPVS) needs the kernel's ip_vs module, which this "
                      "kernel lacks: haproxy and nginx-proxy stand in for it"}
_REPLICAS = re.compile(r"^(?P<base>[^*]+?)\s*\*\s*(?P<n>\S+)$")


class Layer(Protocol):
    layer: str | None      # "cache", "proxy", "balancer"; None for a stack's own servers
    balances: bool


@dataclass(frozen=True)
class Composition:
    layers: tuple[str, ...]     # front first
    base: str                   # a named stack
    replicas: int = 1

    @property
    def name(self) -> str:
        """The one spelling trial ids are made from (spaces around > and *)."""
        base = self.base + (f" * {self.replicas}" if self.replicas > 1 else "")
        return " > ".join((*self.layers, base))


def compose(text: str, components: Mapping[str, Layer], named: Collection[str]
            ) -> Composition:
    """Parse a stack expression; a ValueError says in one line which layer is at fault."""
    parts = [part.strip() for part in text.split(">")]
    if not all(parts):
        raise ValueError("a layer is empty (layers are separated by '>': "
                         "'varnish > nginx+php-fpm')")
    *front, last = parts
    base, replicas = _replicas(last)
    fronts = front_layers(components)
    if base not in named:
        if base in fronts:
            raise ValueError(f"{base} is a front layer: it needs a stack behind it "
                             f"('{base} > nginx')")
        raise ValueError(f"unknown stack {base!r} (known: {', '.join(sorted(named))}; "
                         f"front layers: {', '.join(fronts)})")
    for i, layer in enumerate(front):
        behind = parts[i + 1]
        if layer in UNAVAILABLE:
            raise ValueError(f"{layer} is not available here: {UNAVAILABLE[layer]}")
        if layer in named or layer not in components:
            hint = f"; in front of a stack it is {layer}-proxy" if f"{layer}-proxy" in \
                fronts else ""
            raise ValueError(f"{layer} cannot sit in front of {behind}: it is not a cache, "
                             f"proxy or balancer (those are: {', '.join(fronts)}){hint}")
        if components[layer].layer is None:
            raise ValueError(f"{layer} cannot sit in front of {behind}: it is a stack's own "
                             f"server, not a front layer (those are: {', '.join(fronts)})")
        if front.index(layer) != i:
            raise ValueError(f"{layer} appears twice: each layer's knobs ({layer}.*) "
                             "would be ambiguous")
    if replicas > 1:
        if not front:
            raise ValueError(f"{last}: replicas need a balancer in front "
                             f"({', '.join(n for n in fronts if components[n].balances)})")
        if not components[front[-1]].balances:
            balancers = ", ".join(n for n in fronts if components[n].balances)
            raise ValueError(f"{front[-1]} cannot spread over {replicas} replicas of "
                             f"{base}: it does not balance (balancers: {balancers})")
    return Composition(tuple(front), base, replicas)


def front_layers(components: Mapping[str, Layer]) -> list[str]:
    """The components that can sit in front of a stack, by name (for errors and lists)."""
    return sorted(name for name, c in components.items() if c.layer is not None)


def _replicas(text: str) -> tuple[str, int]:
    """'apache * 3' -> ('apache', 3); 'apache' -> ('apache', 1)."""
    m = _REPLICAS.match(text)
    if not m:
        return text, 1
    count = m["n"]
    if not (count.isascii() and count.isdigit()) or not 1 <= int(count) <= MAX_REPLICAS:
        raise ValueError(f"{text}: replicas must be a whole number 1..{MAX_REPLICAS}, "
                         f"not {count!r}")
    return m["base"], int(count)
