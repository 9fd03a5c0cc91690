"""Where Debian's PHP is, found once: its version (the `php` alternative, else the
PHP-FPM installed, else Debian 12's 8.2 so that `doctor` can name the package to install),
and the binaries, Apache module and packages named from it. Adapters and templates take
these; none writes a version of its own."""

from __future__ import annotations

import re
from pathlib import Path

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
