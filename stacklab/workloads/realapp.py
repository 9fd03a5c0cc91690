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
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

from ..errors import StackError

PHP_CLI = "/usr/bin/php8.2"


@lru_cache(maxsize=None)
def package_version(package: str) -> str:
    """The installed Debian package's version; one clear error when it is missing."""
    done = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package],
                          capture_output=True, text=True, timeout=30)
    if done.returncode != 0 or not done.stdout.strip():
        raise StackError(f"{package}: the Debian package is not installed (run "
                         "scripts/install-deps.sh)")
    return done.stdout.strip()


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


def run_php(script: str, work: Path, log_dir: Path, name: str, timeout_s: float = 600,
            args: tuple[str, ...] = ()) -> str:
    """Run a PHP script (written to work/<name>.php) with the command-line PHP and the
    system's CLI ini (it only needs mysqli); its output is logged to log_dir. One clear
    error with the output's tail when it fails."""
    path = work / f"{name}.php"
    path.write_text(script)
    done = subprocess.run([PHP_CLI, str(path), *args], capture_output=True, text=True,
                          timeout=timeout_s, cwd=work)
    out = done.stdout + done.stderr
    (log_dir / f"{name}.log").write_text(out)
    if done.returncode != 0:
        raise StackError(f"{name}: the application's installer failed ({done.returncode})",
                         out[-2000:])
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
