"""The explicit registry of components, stacks and their knobs (no globbing)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..knobs import KnobRegistry
from . import php
from .apache import Apache
from .base import Component
from .nginx import Nginx
from .php_fpm import PhpFpm
from .lighttpd import Lighttpd
from .minihttpd import MiniHttpd
from .webfs import Webfs
from .mariadb import MariaDB
from .memcached import Memcached

COMPONENTS: dict[str, Component] = {c.name: c for c in (
    Nginx(), Apache(), PhpFpm(), Lighttpd(), MiniHttpd(), Webfs(), MariaDB(), Memcached())}

# Knob groups: shared settings that are not processes (rendered by the components above).
GROUPS = {"php": php.KNOBS}


@dataclass(frozen=True)
class StackDef:
    name: str
    components: tuple[str, ...]           # front first
    description: str
    knobs: dict[str, Any] = field(default_factory=dict)     # fixed by the stack itself
    defaults: dict[str, Any] = field(default_factory=dict)  # the stack's own defaults
    php_sapi: str | None = None           # PHP_SAPI its PHP pages must report
    php_persistent: bool = True           # PHP processes outlive a request
    perl: str | None = None               # how its Perl pages run: cgi, registry, perlrun

    @property
    def runs(self) -> set[str]:
        """Languages its pages can be written in (static files always work)."""
        return {lang for lang, on in (("php", self.php_sapi), ("perl", self.perl)) if on}

    @property
    def groups(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(g for c in self.components for g in COMPONENTS[c].groups
                                   if self.php_sapi or g != "php"))

    @property
    def knob_owners(self) -> tuple[str, ...]:
        """Components and groups whose knobs apply to this stack."""
        return self.components + self.groups


STACKS: dict[str, StackDef] = {s.name: s for s in (
    StackDef("nginx", ("nginx",), "nginx serving files itself"),
    StackDef("apache", ("apache",), "Apache httpd 2.4 serving files itself (event MPM "
             "unless apache.mpm says otherwise)"),
    StackDef("nginx+php-fpm", ("nginx", "php-fpm"), "nginx, .php by FastCGI to PHP-FPM",
             {"nginx.php": "fpm"}, php_sapi="fpm-fcgi"),
    StackDef("apache+mod_php", ("apache",), "Apache prefork with PHP inside (mod_php)",
             {"apache.php_handler": "mod_php"}, {"apache.mpm": "prefork"},
             php_sapi="apache2handler"),
    StackDef("apache+php-fpm", ("apache", "php-fpm"), "Apache, .php by proxy_fcgi to PHP-FPM",
             {"apache.php_handler": "fpm"}, php_sapi="fpm-fcgi"),
    StackDef("apache+fcgid", ("apache",), "Apache, .php by mod_fcgid to php-cgi processes",
             {"apache.php_handler": "fcgid"}, php_sapi="cgi-fcgi"),
    StackDef("apache+cgi", ("apache",), "Apache, .php by plain CGI: php-cgi per request",
             {"apache.php_handler": "cgi"}, php_sapi="cgi-fcgi", php_persistent=False),
    StackDef("lighttpd", ("lighttpd",), "lighttpd serving files itself (one event-driven "
             "process unless lighttpd.max_worker says otherwise)"),
    StackDef("lighttpd+php-fpm", ("lighttpd", "php-fpm"), "lighttpd, .php by mod_fastcgi to "
             "PHP-FPM", {"lighttpd.php": "fpm"}, php_sapi="fpm-fcgi"),
    StackDef("mini-httpd", ("mini-httpd",), "mini_httpd serving files itself (for the "
             "studies' thttpd): a process per connection, no keep-alive"),
    StackDef("webfs", ("webfs",), "webfsd serving files itself (for the studies' boa): one "
             "select() process, keep-alive always on"),
    StackDef("apache+perl-cgi", ("apache",), "Apache, .pl by plain CGI: perl per request",
             {"apache.perl_handler": "cgi"}, perl="cgi"),
    StackDef("apache+mod_perl", ("apache",), "Apache prefork, .pl by mod_perl's "
             "ModPerl::Registry (compiled once per process)",
             {"apache.perl_handler": "registry"}, {"apache.mpm": "prefork"}, perl="registry"),
    StackDef("apache+mod_perl-perlrun", ("apache",), "Apache prefork, .pl by mod_perl's "
             "ModPerl::PerlRun (compiled every request)",
             {"apache.perl_handler": "perlrun"}, {"apache.mpm": "prefork"}, perl="perlrun"),
    StackDef("nginx+php-fpm+mariadb", ("nginx", "php-fpm", "mariadb"), "nginx, PHP-FPM and "
             "MariaDB: S1's model application on FastCGI", {"nginx.php": "fpm"},
             php_sapi="fpm-fcgi"),
    StackDef("apache+mod_php+mariadb", ("apache", "mariadb"), "Apache prefork with mod_php "
             "and MariaDB: S1's LAMP", {"apache.php_handler": "mod_php"},
             {"apache.mpm": "prefork"}, php_sapi="apache2handler"),
    StackDef("apache+php-fpm+mariadb", ("apache", "php-fpm", "mariadb"), "Apache, PHP-FPM "
             "and MariaDB", {"apache.php_handler": "fpm"}, php_sapi="fpm-fcgi"),
    StackDef("nginx+php-fpm+memcached", ("nginx", "php-fpm", "memcached"), "nginx and "
             "PHP-FPM with sessions in memcached (S3)",
             {"nginx.php": "fpm", "php.session_handler": "memcached"}, php_sapi="fpm-fcgi"),
)}


def build_registry() -> KnobRegistry:
    from ..drive import LOAD_KNOBS
    from ..placement import cpus_knob
    registry = KnobRegistry()
    registry.add(*LOAD_KNOBS, cpus_knob("load"))
    for knobs in GROUPS.values():
        registry.add(*knobs)
    for component in COMPONENTS.values():
        registry.add(*component.knobs, cpus_knob(component.name))
    return registry


REGISTRY = build_registry()
