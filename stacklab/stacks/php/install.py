"""Where Debian's PHP is, found once: its version (the `php` alternative, else the
PHP-FPM installed, else Debian 12's 8.2 so that `doctor` can name the package to install),
and the binaries, Apache module and packages named from it; and a Debian package's
upstream version (the handlers'). Adapters and templates take these; none writes a
version of its own."""

from __future__ import annotations

import re
from pathlib import Path

from ...host.hostinfo import debian_version

DEBIAN_DEFAULT = "8.2"      # Debian 12 (bookworm)


def find_version(php: Path = Path("/usr/bin/php"), sbin: Path = Path("/usr/sbin")) -> str:
    """"8.2" from /usr/bin/php -> /etc/alternatives/php -> /usr/bin/php8.2, else from the
    newest /usr/sbin/php-fpmX.Y, else Debian's default."""
    m = re.fullmatch(r"php(\d+\.\d+)", php.resolve().name)
    if m:
        return m.group(1)
    found = sorted((tuple(map(int, m.groups())), m.group(0)[len("php-fpm"):])
                   for p in sbin.glob("php-fpm*")
                   if (m := re.fullmatch(r"php-fpm(\d+)\.(\d+)", p.name)))
    return found[-1][1] if found else DEBIAN_DEFAULT


VERSION = find_version()
FPM_BINARY = f"/usr/sbin/php-fpm{VERSION}"
FPM_PACKAGE = f"php{VERSION}-fpm"
CGI_BINARY = f"/usr/bin/php-cgi{VERSION}"
APACHE_MODULE = f"libphp{VERSION}.so"      # in Apache's modules directory (libapache2-mod-php)
# The packages PHP runs from inside Apache: the version a run records for them (PHP-FPM
# tells its own; mod_php and php-cgi are known by their Debian packages)
HANDLER_PACKAGES = {"mod_php": ("mod_php", f"libapache2-mod-php{VERSION}"),
                    "fcgid": ("php-cgi", f"php{VERSION}-cgi"),
                    "cgi": ("php-cgi", f"php{VERSION}-cgi")}


def package_version(package: str) -> str | None:
    """The upstream version of an installed Debian package ("8.2.36" of
    "8.2.36-1~deb12u1"), or None when it is not installed."""
    version = debian_version(package)
    return re.sub(r"^\d+:", "", version).split("-")[0] if version else None


def handler_versions(handlers: set[str]) -> dict[str, str]:
    """{"mod_php": "8.2.36"} and/or {"php-cgi": …} for the Apache PHP handlers used."""
    out = {}
    for handler in sorted(handlers & set(HANDLER_PACKAGES)):
        key, package = HANDLER_PACKAGES[handler]
        out[key] = package_version(package) or "not installed"
    return out
