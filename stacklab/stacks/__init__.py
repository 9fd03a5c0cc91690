"""The explicit registry of components, stacks and their knobs (no globbing).

A new component is its directory (stacks/<name>/: adapter, knobs, templates) and one line in
COMPONENTS; a stack is one StackDef line. What a stack can serve follows from what its
components provide with the stack's knob values (their capabilities: php:fpm-fcgi,
database:mysql…), and is matched against what a workload needs.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from ..knobs import KnobRegistry
from . import php
from .apache import Apache
from .base import Capability, Component, satisfies
from .compose import compose, front_layers
from .nginx import Nginx
from .php_fpm import PhpFpm
from .lighttpd import Lighttpd
from .minihttpd import MiniHttpd
from .webfs import Webfs
from .mariadb import MariaDB
from .memcached import Memcached
from .haproxy import HAProxy
from .varnish import Varnish
from .nginx_proxy import NginxProxy
from .apache_proxy import ApacheProxy
from .squid import Squid
from .external import External

COMPONENTS: dict[str, Component] = {c.name: c for c in (
    Nginx(), Apache(), PhpFpm(), Lighttpd(), MiniHttpd(), Webfs(), MariaDB(), Memcached(),
    HAProxy(), Varnish(), NginxProxy(), ApacheProxy(), Squid(), External())}

# Knob groups: shared settings that are not processes (rendered by the components above).
GROUPS = {"php": php.KNOBS}


@dataclass(frozen=True)
class StackDef:
    name: str
    components: tuple[str, ...]           # front first
    description: str
    knobs: dict[str, Any] = field(default_factory=dict)     # fixed by the stack itself
    defaults: dict[str, Any] = field(default_factory=dict)  # the stack's own defaults
    layers: tuple[str, ...] = ()     # front layers in front of the rest, front first
    replicas: int = 1                # copies of the rest (behind a balancing layer)

    @property
    def base(self) -> tuple[str, ...]:
        """The components that are replicated: all but the front layers, front first."""
        return self.components[len(self.layers):]

    def component_knobs(self, name: str) -> dict[str, Any]:
        """A component's knobs as the stack sets them: declared defaults < the stack's
        defaults < what it fixes."""
        values = REGISTRY.defaults(name)
        for key, value in [*self.defaults.items(), *self.knobs.items()]:
            owner, knob = key.split(".", 1)
            if owner == name:
                values[knob] = value
        return values

    @property
    def capabilities(self) -> tuple[Capability, ...]:
        """What its components provide with the stack's own knob values (the handler
        knobs a stack fixes decide it), front first."""
        return tuple(cap for c in self.components
                     for cap in COMPONENTS[c].capabilities(self.component_knobs(c)))

    @property
    def provides(self) -> tuple[str, ...]:
        return tuple(cap.name for cap in self.capabilities)

    def unmet(self, needs: Iterable[str]) -> tuple[str, ...]:
        """What of `needs` (capabilities or kinds: "php", "database:mysql") it lacks."""
        return tuple(need for need in needs if not satisfies(self.provides, need))

    @property
    def groups(self) -> tuple[str, ...]:
        """Shared knob groups its components render, where it provides their kind (the
        php.* knobs on a stack that runs PHP)."""
        kinds = {cap.kind for cap in self.capabilities}
        return tuple(dict.fromkeys(g for c in self.components for g in COMPONENTS[c].groups
                                   if g in kinds))

    @property
    def knob_owners(self) -> tuple[str, ...]:
        """Components and groups whose knobs apply to this stack."""
        return self.components + self.groups

    def backends(self, layer: str) -> int:
        """How many backends front layer `layer` has: the replicas for the layer in front
        of them, one (the next layer) for the others."""
        return self.replicas if layer == self.layers[-1] else 1

    def layout_inert(self) -> dict[str, str]:
        """{knob key: why} for the knobs its layout leaves nothing to act on: how a layer
        spreads requests, where it has one backend (haproxy > nginx, or haproxy in front of
        varnish, whose director spreads the replicas)."""
        out = {}
        for layer in self.layers:
            if self.backends(layer) == 1:
                out |= {f"{layer}.{k}": f"{layer} has one backend in {self.name}: nothing to "
                        "spread" for k in COMPONENTS[layer].spread_knobs}
        return out


# Capability kinds whose state a cluster's nodes share (one database, one session store).
SHARED_STATE = ("database", "sessions")


class StackCatalog(MutableMapping[str, StackDef]):
    """The named stacks, and every composition of them (compose.py) looked up by its
    expression: `STACKS["varnish > nginx+php-fpm"]`. Iterating lists the named ones."""

    def __init__(self, named: dict[str, StackDef]):
        self.named = named

    def canonical(self, text: str) -> str:
        """The one spelling of a stack expression; ValueError naming the layer at fault."""
        if text in self.named:
            return text
        return self._compose(text).name

    def __getitem__(self, text: str) -> StackDef:
        if text in self.named:
            return self.named[text]
        try:
            c = self._compose(text)
        except ValueError:
            raise KeyError(text) from None
        base = self.named[c.base]
        behind = base.name + (f" ({c.replicas} replicas)" if c.replicas > 1 else "")
        return StackDef(c.name, (*c.layers, *base.components),
                        f"{' in front of '.join(c.layers)} in front of {behind}",
                        base.knobs, base.defaults, c.layers, c.replicas)

    def _compose(self, text: str):
        """compose.py's parse, and what only the stacks know: state that replicas would
        each hold apart (a database, a session store) cannot be replicated yet."""
        c = compose(text, COMPONENTS, self.named)
        held = [cap.name for cap in self.named[c.base].capabilities
                if cap.kind in SHARED_STATE]
        if c.replicas > 1 and held:
            raise ValueError(f"{c.base} * {c.replicas}: each replica would hold its own "
                             f"{', '.join(held)}, which a cluster shares; replicate a stack "
                             "without it")
        return c

    def __setitem__(self, name: str, stack: StackDef) -> None:
        self.named[name] = stack

    def __delitem__(self, name: str) -> None:
        del self.named[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.named)

    def __len__(self) -> int:
        return len(self.named)


STACKS = StackCatalog({s.name: s for s in (
    StackDef("nginx", ("nginx",), "nginx serving files itself"),
    StackDef("apache", ("apache",), "Apache httpd 2.4 serving files itself (event MPM "
             "unless apache.mpm says otherwise)"),
    StackDef("nginx+php-fpm", ("nginx", "php-fpm"), "nginx, .php by FastCGI to PHP-FPM",
             {"nginx.php": "fpm"}),
    StackDef("apache+mod_php", ("apache",), "Apache prefork with PHP inside (mod_php)",
             {"apache.php_handler": "mod_php"}, {"apache.mpm": "prefork"}),
    StackDef("apache+php-fpm", ("apache", "php-fpm"), "Apache, .php by proxy_fcgi to PHP-FPM",
             {"apache.php_handler": "fpm"}),
    StackDef("apache+fcgid", ("apache",), "Apache, .php by mod_fcgid to php-cgi processes",
             {"apache.php_handler": "fcgid"}),
    StackDef("apache+cgi", ("apache",), "Apache, .php by plain CGI: php-cgi per request",
             {"apache.php_handler": "cgi"}),
    StackDef("lighttpd", ("lighttpd",), "lighttpd serving files itself (one event-driven "
             "process unless lighttpd.max_worker says otherwise)"),
    StackDef("lighttpd+php-fpm", ("lighttpd", "php-fpm"), "lighttpd, .php by mod_fastcgi to "
             "PHP-FPM", {"lighttpd.php": "fpm"}),
    StackDef("mini-httpd", ("mini-httpd",), "mini_httpd serving files itself (for the "
             "studies' thttpd): a process per connection, no keep-alive"),
    StackDef("webfs", ("webfs",), "webfsd serving files itself (for the studies' boa): one "
             "select() process, keep-alive always on"),
    StackDef("apache+perl-cgi", ("apache",), "Apache, .pl by plain CGI: perl per request",
             {"apache.perl_handler": "cgi"}),
    StackDef("apache+mod_perl", ("apache",), "Apache prefork, .pl by mod_perl's "
             "ModPerl::Registry (compiled once per process)",
             {"apache.perl_handler": "registry"}, {"apache.mpm": "prefork"}),
    StackDef("apache+mod_perl-perlrun", ("apache",), "Apache prefork, .pl by mod_perl's "
             "ModPerl::PerlRun (compiled every request)",
             {"apache.perl_handler": "perlrun"}, {"apache.mpm": "prefork"}),
    StackDef("nginx+php-fpm+mariadb", ("nginx", "php-fpm", "mariadb"), "nginx, PHP-FPM and "
             "MariaDB: S1's model application on FastCGI", {"nginx.php": "fpm"}),
    StackDef("apache+mod_php+mariadb", ("apache", "mariadb"), "Apache prefork with mod_php "
             "and MariaDB: S1's LAMP", {"apache.php_handler": "mod_php"},
             {"apache.mpm": "prefork"}),
    StackDef("apache+php-fpm+mariadb", ("apache", "php-fpm", "mariadb"), "Apache, PHP-FPM "
             "and MariaDB", {"apache.php_handler": "fpm"}),
    StackDef("apache+fcgid+mariadb", ("apache", "mariadb"), "Apache, .php by mod_fcgid to "
             "php-cgi processes, and MariaDB", {"apache.php_handler": "fcgid"}),
    StackDef("apache+cgi+mariadb", ("apache", "mariadb"), "Apache, .php by plain CGI "
             "(php-cgi per request), and MariaDB", {"apache.php_handler": "cgi"}),
    StackDef("lighttpd+php-fpm+mariadb", ("lighttpd", "php-fpm", "mariadb"), "lighttpd, "
             ".php by mod_fastcgi to PHP-FPM, and MariaDB", {"lighttpd.php": "fpm"}),
    StackDef("nginx+php-fpm+memcached", ("nginx", "php-fpm", "memcached"), "nginx and "
             "PHP-FPM with sessions in memcached (S3)",
             {"nginx.php": "fpm", "php.session_handler": "memcached"}),
    StackDef("external", ("external",), "a server you run yourself, at [external] url: "
             "stacklab starts nothing, verifies its paths, measures it, leaves it running"),
)})


def needs_problem(stack: str, needs: Iterable[str]) -> str | None:
    """Why stack `stack` cannot serve a workload that needs `needs`, or None if it can."""
    needs = tuple(needs)
    unmet = STACKS[stack].unmet(needs)
    if not unmet:
        return None
    able = [name for name, s in STACKS.items() if not s.unmet(needs)]   # the named ones
    return (f"needs {', '.join(unmet)}, which stack {stack!r} does not provide (stacks that "
            f"do: {', '.join(able) or 'none'})")


def known_slow(knobs: dict[str, dict[str, Any]]) -> tuple[str, ...]:
    """What the components among these owners (owner → {knob: value}, a run's effective
    knobs) say they serve pathologically slowly with them and the run's load knobs
    (Component.known_slow)."""
    load = knobs.get("load", {})
    return tuple(why for name, component in COMPONENTS.items()
                 if name in knobs and (why := component.known_slow(knobs[name], load)))


def starve_causes(knobs: dict[str, dict[str, Any]], connections: int) -> tuple[str, ...]:
    """Why the components among these owners would leave some of `connections` waiting
    for a worker, and what would change it (Component.starve_cause)."""
    return tuple(why for name, component in COMPONENTS.items()
                 if name in knobs and (why := component.starve_cause(knobs[name],
                                                                     connections)))


def build_registry() -> KnobRegistry:
    from ..measure.drive import LOAD_KNOBS
    from ..netlab.knobs import FS_KNOBS, KNOBS as NET_KNOBS, MACHINE_KNOBS
    from ..host.placement import cpus_knob
    registry = KnobRegistry()
    registry.add(*LOAD_KNOBS, cpus_knob("load"), *NET_KNOBS, *FS_KNOBS, *MACHINE_KNOBS)
    for knobs in GROUPS.values():
        registry.add(*knobs)
    for component in COMPONENTS.values():
        registry.add(*component.knobs, cpus_knob(component.name))
    return registry


REGISTRY = build_registry()
