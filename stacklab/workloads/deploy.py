"""Deployment: a workload's files written into a docroot once per session, each with
what it must return; a real application's package tree linked in; the files a stack
places there while it runs."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..measure.verify import CHECK_PATH, Expect
from .files import File, Tree, Url
from .static import check_page


@dataclass(frozen=True)
class Deployed:
    """A workload in a docroot: URL paths with weights, and what each must return."""

    name: str
    docroot: Path
    urls: tuple[tuple[str, int], ...]          # (path, weight)
    expected: dict[str, Expect]                # path -> what it must return
    database: Any = None                       # what a database component must hold
    # URLs whose body length differs between requests by design (random rows, phpinfo):
    # a length check like ab's "Failed requests: Length" must not count them as failures.
    varying_length: frozenset[str] = frozenset()
    cacheable: float | None = None             # see Workload.cacheable
    php_log: Path | None = None                # see Workload.php_log
    headers: tuple[tuple[str, str], ...] = ()  # see Workload.headers
    writable: tuple[str, ...] = ()             # see Workload.writable



# Every deployed file gets this mtime: the same ETag/Last-Modified on every deployment, and
# never "just written" (OPcache will not cache a file younger than file_update_protection).
MTIME = 1_577_836_800   # 2020-01-01T00:00:00Z
# What the docroot already holds from earlier deployments: {path: [key, sha256, length]}.
MANIFEST = ".stacklab-corpus.json"
# Text files get a gzip -9 copy beside them (index.html.gz), as a site prepares them for
# nginx.gzip_static and apache.precompressed; a server without those knobs never reads it.
PRECOMPRESSED = (".html", ".htm", ".css", ".js", ".txt", ".json", ".svg")


def deploy_workload(workload: Any, docroot: Path, seed: int = 1) -> Deployed:
    """Write a workload's (a workloads.Workload's) files (and the small page every server's checks fetch) under
    docroot, readable by any server user. URLs are checked against `expected` before
    every measurement. What a stack itself needs there (its capabilities' probes, Apache's
    .htaccess files) it places while it runs (stack.py)."""
    name = workload.name
    files = [*workload.build(seed), File(CHECK_PATH, check_page())]
    docroot.mkdir(parents=True, exist_ok=True)
    docroot.chmod(0o755)
    manifest_path = docroot / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for tree in (f for f in files if isinstance(f, Tree)):
        _copy_tree(tree, docroot, manifest)
    urls = {path for path, _ in workload.urls}
    expected = {}
    for f in files:
        if isinstance(f, Tree):
            continue
        if isinstance(f, Url):
            if f.path in urls:
                expected[f.path] = f.expect
            continue
        # ":gz-named": generated files from before gzip_named are written again once
        digest, length = _write(docroot, f, f"{name}:{seed}:gz-named", manifest)
        if f.path in urls and f.check:
            expected[f.path] = f.expect or Expect(digest, length)
    manifest_path.write_text(json.dumps(manifest))
    for rel in workload.writable:
        _writable_dir(docroot / rel.strip("/"))
    database = workload.database(seed) if workload.database else None
    php_log = _php_log(docroot) if workload.php_log else None
    return Deployed(name, docroot, workload.urls, expected, database,
                    workload.varying_length, workload.cacheable, php_log, workload.headers,
                    workload.writable)


def php_log_path(docroot: Path) -> Path:
    """Where a real application's configuration sends PHP's error log: beside the
    docroot (never served), named after it (`docroot-wordpress.php.log`)."""
    return docroot.with_name(docroot.name + ".php.log")


def _php_log(docroot: Path) -> Path:
    """The log, emptied and writable by whichever user the PHP handler runs as."""
    path = php_log_path(docroot)
    path.write_bytes(b"")
    path.chmod(0o666)
    return path


def _copy_tree(tree: Tree, docroot: Path, manifest: dict) -> None:
    """The package's files under the docroot, once per package version: hard links
    where the filesystem allows (no bytes copied, the package's own mtimes), copies
    otherwise; symlinks followed (Debian links configuration and data directories
    out of /usr/share), the tree's own configuration skipped."""
    key, stamp = f"tree:{tree.source}", f"{tree.version}"
    if manifest.get(key) == stamp:
        return
    skip = {tree.source / rel for rel in tree.skip}

    def ignore(directory: str, names: list[str]) -> set[str]:
        return {n for n in names if Path(directory, n) in skip}

    shutil.copytree(tree.source, docroot, symlinks=False, ignore=ignore,
                    copy_function=_link_or_copy, dirs_exist_ok=True)
    manifest[key] = stamp


def _link_or_copy(src: str, dst: str) -> None:
    target = Path(dst)
    target.unlink(missing_ok=True)
    try:
        os.link(Path(src).resolve(), target)
    except OSError:        # another filesystem (a netlab profile), or links refused
        shutil.copy2(src, target)


def _write(docroot: Path, f: File, key: str, manifest: dict) -> tuple[str, int]:
    """Write one file (a generated one only if the docroot lacks it); its sha256 and size."""
    target = docroot / f.path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.parent.chmod(0o755)
    text = target.suffix in PRECOMPRESSED
    if callable(f.content):
        known = manifest.get(f.path)
        if (known and known[0] == key and target.is_file()
                and target.stat().st_size == known[2]
                and (not text or _gz(target).is_file())):
            return known[1], known[2]
        content = f.content()
    else:
        content = f.content
    if target.is_file() and target.stat().st_nlink > 1:
        target.unlink()     # a link into a package's tree: never write through it
    target.write_bytes(content)
    target.chmod(f.mode)
    os.utime(target, (MTIME, MTIME))
    if text:
        _gz(target).write_bytes(gzip_named(content, target.name))
        _gz(target).chmod(0o644)
        os.utime(_gz(target), (MTIME, MTIME))
    digest = hashlib.sha256(content).hexdigest()
    if callable(f.content):
        manifest[f.path] = [key, digest, len(content)]
    return digest, len(content)


def place(docroot: Path, path: str, content: bytes, mode: int = 0o644) -> Path:
    """One file a stack puts into a deployed docroot (a probe, a .htaccess), written as
    deploy writes its own: readable by any server user, with the fixed MTIME."""
    target = docroot / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_file() and target.stat().st_nlink > 1:
        target.unlink()     # a link into a package's tree: never write through it
    target.write_bytes(content)
    target.chmod(mode)
    os.utime(target, (MTIME, MTIME))
    return target


def _gz(path: Path) -> Path:
    return path.with_name(path.name + ".gz")


def gzip_named(content: bytes, name: str) -> bytes:
    """What `gzip -9 -n`'s sibling `gzip -9` writes: level 9, mtime 0, and the original
    file name in the header (FNAME). A server compressing on the fly writes no name, so
    even at level 9 its bytes differ from the .gz file's: the precompressed check can
    tell which was sent."""
    out = io.BytesIO()
    with gzip.GzipFile(filename=name, mode="wb", compresslevel=9, fileobj=out,
                       mtime=0) as z:
        z.write(content)
    return out.getvalue()


def _writable_dir(path: Path) -> None:
    """A directory the server user writes into, emptied on every deployment."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    path.chmod(0o1777)
