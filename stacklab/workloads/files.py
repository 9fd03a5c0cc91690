"""What a workload's generators make: a file for the docroot, or a URL that is not a
file of its own, each with what it must return.

Apart from __init__.py because every generator (static.py, php.py, media.py, …) makes
these and the registry in __init__.py imports every generator: with the two types here,
below both, the generators never import their own package back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..measure.verify import Expect


@dataclass(frozen=True)
class File:
    path: str                    # URL path, also the path under the docroot
    # The bytes, or a function that makes them: made only when the docroot does not
    # already hold this file from an earlier deployment with the same seed (big corpora).
    content: bytes | Callable[[], bytes]
    expect: Expect | None = None  # None: exact bytes (static file)
    mode: int = 0o644
    check: bool = True           # verified before measuring (False: one of a large set)


@dataclass(frozen=True)
class Url:
    """A URL that is not a file of its own (a query string on a script) and what it returns."""

    path: str
    expect: Expect


@dataclass(frozen=True)
class Tree:
    """A real application's files, deployed from its Debian package's directory: copied
    (hard-linked where the docroot is on the same filesystem) once per docroot and
    package version, symlinks followed, `skip` (paths relative to the source: its own
    configuration, which the workload writes as Files) left out."""

    source: Path
    version: str                 # the package's: a new version is deployed again
    skip: tuple[str, ...] = ()
