"""The user's own site as a workload: `dir:PATH`, a directory of static files or a PHP
application, copied into the run's docroot (never served from where it lives).

Every servable file is a URL of the load, equally likely, and is checked through the
server before measuring: a static file by its exact bytes (sha256 and length, as the
generated corpora are), a PHP script by its status (200) — its output is the user's and
may change from request to request. Hidden files and directories (.git, .env) are never
copied; `.htaccess` files are, but not requested. A URL mix of one's own comes from an
access log (load.replay). A symlink is served as the file it points to while that
file is inside the directory; a symlink leading out of it (stacklab runs as root: it
would serve /etc/shadow), a symlink to a directory, a broken link, a FIFO, a socket or a
device is refused with one line naming it, never skipped unsaid. A missing, unreadable
or empty directory, or one past the limits below, is refused the same way.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from functools import lru_cache
from pathlib import Path

from ..host.regular import kind, open_regular
from ..measure.verify import Expect
from .files import File

MAX_FILES = 10_000
MAX_BYTES = 1024 ** 3          # copied into the run's docroot: at most 1 GiB
KEEP_HIDDEN = (".htaccess",)   # copied (Apache reads them), never requested
PHP_SUFFIXES = (".php",)
# A path that is its own URL: the file's path is the URL's, written as is into the
# engine's URL list and every server's request line.
URL_SAFE = re.compile(r"[A-Za-z0-9._~/!$&'()*+,;=:@-]+")


def resolve(text: str, base: Path | None = None) -> Path:
    """The directory `text` names (relative to base, else to the working directory),
    absolute; ValueError naming it when it is not a readable directory."""
    path = Path(text).expanduser()
    if not path.is_absolute():
        path = (base or Path.cwd()) / path
    path = Path(os.path.normpath(path))
    if not path.exists():
        raise ValueError(f"{path}: no such directory")
    if not path.is_dir():
        raise ValueError(f"{path}: not a directory")
    if not os.access(path, os.R_OK | os.X_OK):
        raise ValueError(f"{path}: not readable")
    files(path)       # refused here, at the spec, rather than at deployment
    return path


def files(root: Path) -> list[tuple[str, Path]]:
    """(URL path, file) for every file to copy, in a stable order: the file is the one
    to read, a symlink's target inside the directory. ValueError naming the first entry
    that cannot be served as it is (stacklab runs as root: a link to /etc/shadow would
    be copied into the docroot and served)."""
    real_root = root.resolve()
    found, total = [], 0
    for directory, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for d in dirs:
            if Path(directory, d).is_symlink():     # os.walk lists it, never enters it
                raise ValueError(f"{Path(directory, d)}: a symlink to a directory: not "
                                 "followed (copy the directory in, or leave it out)")
        for name in sorted(names):
            if name.startswith(".") and name not in KEEP_HIDDEN:
                continue
            path = Path(directory, name)
            source = _servable(path, real_root)
            url = "/" + path.relative_to(root).as_posix()
            if not URL_SAFE.fullmatch(url):
                raise ValueError(f"{path}: a name a URL must encode (space, %, ?, #, …): "
                                 "rename it or leave it out of the directory")
            total += source.stat().st_size
            found.append((url, source))
            if len(found) > MAX_FILES or total > MAX_BYTES:
                raise ValueError(f"{root}: more than {MAX_FILES} files or "
                                 f"{MAX_BYTES >> 30} GiB (the run copies them)")
    if not any(not _hidden(url) for url, _ in found):
        raise ValueError(f"{root}: holds no file to serve")
    return found


def _servable(path: Path, real_root: Path) -> Path:
    """The regular file to read for `path`: itself, or a symlink's target when that stays
    inside the directory; ValueError naming anything else (a link leaving it, a broken
    link, a FIFO, a socket, a device), never skipped unsaid."""
    source = path
    if path.is_symlink():
        source = path.resolve()
        if not source.is_relative_to(real_root):
            raise ValueError(f"{path}: a symlink out of the directory (to {source}): "
                             "refused, only the directory's own files are served")
        inside = source.relative_to(real_root).parts
        if any(p.startswith(".") for p in inside) and inside[-1] not in KEEP_HIDDEN:
            raise ValueError(f"{path}: a symlink to a hidden file ({source}): refused, "
                             "hidden files are never served")
    try:
        mode = source.stat().st_mode
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror or e}"
                         + (" (a broken symlink)" if path.is_symlink() else "")) from None
    if not stat.S_ISREG(mode):
        raise ValueError(f"{path}: {kind(mode)}, not a file: refused (a site is regular "
                         "files)")
    if not os.access(source, os.R_OK):
        raise ValueError(f"{path}: not readable")
    return source


def _hidden(url: str) -> bool:
    return url.rsplit("/", 1)[-1].startswith(".")


def is_php(url: str) -> bool:
    return url.endswith(PHP_SUFFIXES)


def urls(root: Path) -> tuple[tuple[str, int], ...]:
    """Every servable file, equally likely."""
    return tuple((url, 1) for url, _ in files(root) if not _hidden(url))


def build(root: Path) -> list[File]:
    """The directory's files, read now: what the run serves is what was there when it
    was deployed. A PHP script is checked by its status only."""
    return [File(url, _read(path, root), Expect() if is_php(url) else None,
                 mode=0o644, check=not _hidden(url))
            for url, path in files(root)]


def _read(path: Path, root: Path) -> bytes:
    """A file files() found, read as checked: a regular file, and the file opened is still
    inside the directory (the open descriptor's own path, read after opening: a link
    swapped in since is refused, not read)."""
    with _opened(path, root) as f:
        return f.read()


def _opened(path: Path, root: Path):
    """`path` opened as a regular file whose real place is inside `root`; ValueError."""
    f = open_regular(path)
    where = Path(os.readlink(f"/proc/self/fd/{f.fileno()}"))
    if not where.is_relative_to(root.resolve()):
        f.close()
        raise ValueError(f"{path}: left the directory {root} since it was listed")
    return f


def versions(root: Path) -> dict[str, str]:
    """What a run records of the directory with the versions (a resume refuses to pool
    runs of an edited site with the stored ones, as of an edited include file)."""
    return {f"dir {root}": f"sha256:{digest(root)}"}


def digest(root: Path) -> str:
    """sha256 over the copied files' URL paths and contents, in files()'s order. Hashed
    once per process for the same files, sizes and modification times (a listing is
    cheap, reading 1 GiB is not); an edit changes a time, so it is hashed again."""
    stats = [(url, path.stat()) for url, path in files(root)]
    return _digest(root, tuple((url, s.st_size, s.st_mtime_ns) for url, s in stats))


@lru_cache(maxsize=64)
def _digest(root: Path, stamp: tuple[tuple[str, int, int], ...]) -> str:
    total = hashlib.sha256()
    for url, *_ in stamp:
        with _opened(root / url.lstrip("/"), root) as f:
            data = hashlib.file_digest(f, "sha256").digest()
        total.update(url.encode() + b"\0" + data)
    return total.hexdigest()


def needs(root: Path) -> tuple[str, ...]:
    return ("php",) if any(is_php(url) for url, _ in files(root)) else ()
