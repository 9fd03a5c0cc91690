"""Workloads: what is deployed into the docroot, and which URLs the load goes to."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..verify import CHECK_PATH, Expect
from .perl import PROBE as PERL_PROBE
from .perl import perl_page
from .php import PROBE, php_page
from .static import check_page, static_page


@dataclass(frozen=True)
class File:
    path: str                    # URL path, also the path under the docroot
    content: bytes
    expect: Expect | None = None  # None: exact bytes (static file)
    mode: int = 0o644


@dataclass(frozen=True)
class Deployed:
    """A workload in a docroot: URL paths with weights, and what each must return."""

    name: str
    docroot: Path
    urls: tuple[tuple[str, int], ...]          # (path, weight)
    expected: dict[str, Expect]                # path -> what it must return
    database: Any = None                       # what a database component must hold


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    build: Callable[[int], list[File]]   # seed -> files
    urls: tuple[tuple[str, int], ...]
    needs: str | None = None      # "php" or "perl": the stack must run it


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("static-page", "a few KB of lorem-ipsum HTML (index.html, as in S5)",
             static_page, (("/index.html", 1),)),
    Workload("php-page", "a PHP page that includes a ~60 KB generated library and renders "
             "a table: PHP start-up plus compile, where OPcache matters",
             php_page, (("/index.php", 1),), needs="php"),
    Workload("perl-page", "a Perl page that builds a 100-row table (S2's Perl CGI case)",
             perl_page, (("/index.pl", 1),), needs="perl"),
)}

PROBE_PATH = "/_stacklab/probe.php"
PERL_PROBE_PATH = "/_stacklab/probe.pl"
# Every deployed file gets this mtime: the same ETag/Last-Modified on every deployment, and
# never "just written" (OPcache will not cache a file younger than file_update_protection).
MTIME = 1_577_836_800   # 2020-01-01T00:00:00Z


def deploy(name: str, docroot: Path, seed: int = 1) -> Deployed:
    """Write the workload's files (and stacklab's PHP probe) under docroot, readable by
    any server user. URLs are checked against `expected` before every measurement."""
    workload = WORKLOADS[name]
    files = [*workload.build(seed), File(PROBE_PATH, PROBE),
             File(PERL_PROBE_PATH, PERL_PROBE, mode=0o755),
             File(CHECK_PATH, check_page())]
    docroot.mkdir(parents=True, exist_ok=True)
    docroot.chmod(0o755)
    urls = {path for path, _ in workload.urls}
    expected = {}
    for f in files:
        target = docroot / f.path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.parent.chmod(0o755)
        target.write_bytes(f.content)
        target.chmod(f.mode)
        os.utime(target, (MTIME, MTIME))
        if f.path in urls:
            expected[f.path] = f.expect or Expect(hashlib.sha256(f.content).hexdigest(),
                                                  len(f.content))
    for directory in [docroot, *(p for p in docroot.rglob("*") if p.is_dir())]:
        # Read by Apache on every request when apache.allow_override = "all".
        (directory / ".htaccess").write_text("# stacklab: parsed per request under "
                                             "AllowOverride All\n")
        (directory / ".htaccess").chmod(0o644)
        os.utime(directory / ".htaccess", (MTIME, MTIME))
    return Deployed(name, docroot, workload.urls, expected)
