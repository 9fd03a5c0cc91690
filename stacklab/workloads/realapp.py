"""What the real applications (WordPress, MediaWiki, phpMyAdmin) share: their Debian
package's version, their database as the mariadb component is handed it, and their own
installers run with PHP's command line against the seeding server.

A real application makes its tables itself: its database carries no schema or rows of
ours, only the account (with every privilege on its own database: the applications
write options, caches and sessions as they run) and an installer, run once per seeded
datadir (the datadir is reused for the same key: application, package version, seed,
sizes). Row counts are floors (the installer adds rows of its own), and a page's
statements are "some" (the application decides how many).
"""

from __future__ import annotations

import hashlib
import subprocess
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

from ..errors import StackError
from ..host.hostinfo import debian_version

# The command-line PHP: the `php` alternative, the very link stacks/php/install.py reads
# the PHP version from, so the installers run the PHP the stacks serve (its module
# imports the stacks' registry, which imports the workloads: not importable from here).
PHP_CLI = "/usr/bin/php"

# Where a served application's configuration sends PHP's errors, as a PHP expression
# evaluated in a file at the docroot's top (__DIR__): beside the docroot, named
# <docroot name>.php.log (workloads.php_log_path), where verification reads them.
SERVED_PHP_LOG = "dirname(__DIR__) . '/' . basename(__DIR__) . '.php.log'"


def php_string(value: str) -> str:
    """A PHP single-quoted literal of `value` (nothing in it is interpolated)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def php_error_log_lines(log: str = SERVED_PHP_LOG) -> str:
    """The lines of an application's configuration that send PHP's errors to `log` (a
    PHP expression): stacklab's php.ini leaves the application to say where."""
    return f"ini_set('log_errors', '1');\nini_set('error_log', {log});\n"


@lru_cache(maxsize=None)
def package_version(package: str) -> str:
    """The installed Debian package's version; one clear error when it is not installed."""
    version = debian_version(package)
    if version is None:
        raise StackError(f"{package}: the Debian package is not installed (run "
                         "scripts/install-deps.sh)")
    return version


@dataclass(frozen=True)
class AppDatabase:
    """A real application's database (stacks.base.Database): made by its installer."""

    app: str                               # "wordpress"
    seed: int
    version: str                           # the package's
    sizes: tuple[tuple[str, int], ...]     # what the seeding made ("posts", 200), keyed
    installer: Callable[[AppDatabase, Path, str, Path], None] = field(compare=False)
    tables: dict[str, int] = field(default_factory=dict, compare=False)   # floors
    pages: tuple[str, ...] = ()            # the URLs whose statements are checked
    name: str = "stacklab_app"
    user: str = "stacklab"
    password: str = "stacklab"
    grants: str = "ALL PRIVILEGES"
    exact: bool = False
    cacheable_page: str | None = None

    @property
    def key(self) -> str:
        text = f"{self.app}:{self.version}:{self.seed}:{self.sizes}:{self.name}:{self.user}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def schema(self, engine: str) -> str:
        return ""                  # the installer's

    def write_rows(self, directory: Path) -> dict[str, Path]:
        return {}                  # the installer's

    def page_queries(self) -> dict[str, int | None]:
        return dict.fromkeys(self.pages)

    def install(self, socket: Path, engine: str, log_dir: Path) -> None:
        self.installer(self, socket, engine, log_dir)


def run_php(argv: list[str], work: Path, socket: Path, log: Path, name: str,
            timeout_s: float = 600) -> str:
    """One run of an application's installer with the command-line PHP (argv: the script
    and its arguments) in `work`, with the system's CLI ini and mysqli's default socket
    the seeding server's (so the application's 'localhost' is it). Its output is appended
    to `log` under a heading with its time; one clear error with the output's tail when it
    fails or PHP reports a fatal error. Returns its standard output."""
    cmd = [PHP_CLI, "-d", f"mysqli.default_socket={socket}", "-d", "memory_limit=512M",
           *argv]
    started = time.monotonic()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                              cwd=work)
    except FileNotFoundError:
        raise StackError(f"{name}: {PHP_CLI} is missing (php-cli: run "
                         "scripts/install-deps.sh)") from None
    out = done.stdout + done.stderr
    with log.open("a") as f:
        f.write(f"== {name} ({time.monotonic() - started:.1f} s, exit {done.returncode})\n"
                f"{out}\n")
    if done.returncode != 0 or "PHP Fatal error" in out:
        raise StackError(f"{name}: the application's installer failed ({done.returncode}; "
                         f"see {log})", out[-2000:])
    return done.stdout


@dataclass(frozen=True)
class AppPage:
    """One workload of a real application: a named page (or a URL mix) as users ask it."""

    name: str                                  # the workload's name: "wordpress-post"
    description: str
    urls: tuple[tuple[str, int], ...]          # (path, weight)
    headers: tuple[tuple[str, str], ...] = ()  # sent with every request (a login cookie)
    cacheable: float | None = None             # see workloads.Workload.cacheable
    varying: frozenset[str] = frozenset()      # URLs whose length varies by design


@dataclass(frozen=True)
class RealApp:
    """A real application as the workload registry takes it: its pages, and, for a seed,
    its files (a Tree of the package, its configuration, Urls with what each returns)
    and its database."""

    pages: tuple[AppPage, ...]
    files: Callable[[int], list]
    database: Callable[[int], AppDatabase]
    # Directories (URL paths) the server's user writes into (a template cache), emptied
    # on every deployment.
    writable: tuple[str, ...] = ()
    # The Debian packages it is deployed from (WordPress and its theme): their versions
    # are recorded with each run's (versions).
    packages: tuple[str, ...] = ()

    def versions(self) -> dict[str, str]:
        return {p: package_version(p) for p in self.packages}
