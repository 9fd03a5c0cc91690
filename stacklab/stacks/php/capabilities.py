"""The ways a stack runs PHP pages, as capabilities: which SAPI must answer, and whether
PHP processes outlive a request. Components provide them (PHP-FPM php:fpm-fcgi; Apache,
by its handler, php:apache2handler, php:cgi-fcgi or php:cgi); the php.* knob group applies
to a stack that provides one, and each puts the PHP probe in the docroot for its verifier."""

from __future__ import annotations

from ..base import Capability, Probe
from .probe import PROBE, PROBE_PATH
from .verify import verify_php


def php_capability(name: str, sapi: str, persistent: bool, meaning: str) -> Capability:
    """`sapi`: PHP_SAPI the pages must report; `persistent`: PHP processes outlive a
    request (false for plain CGI, where OPcache cannot hit)."""
    return Capability(name, meaning, (Probe(PROBE_PATH, PROBE),),
                      lambda provider, front: verify_php(front.endpoint,
                                                         provider.ctx.groups["php"], sapi,
                                                         persistent))


FPM_FCGI = php_capability("php:fpm-fcgi", "fpm-fcgi", True,
                          "PHP pages run by PHP-FPM, reached over FastCGI")
APACHE2HANDLER = php_capability("php:apache2handler", "apache2handler", True,
                                "PHP inside the Apache processes (mod_php)")
CGI_FCGI = php_capability("php:cgi-fcgi", "cgi-fcgi", True,
                          "php-cgi processes kept by the web server over FastCGI (mod_fcgid)")
CGI = php_capability("php:cgi", "cgi-fcgi", False,
                     "php-cgi started for every request (plain CGI)")

CAPABILITIES = {c.name: c for c in (FPM_FCGI, APACHE2HANDLER, CGI_FCGI, CGI)}
