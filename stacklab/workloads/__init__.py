"""Workloads: what is deployed into the docroot, and which URLs the load goes to."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .static import static_page


@dataclass(frozen=True)
class File:
    path: str        # URL path, also the path under the docroot
    content: bytes


@dataclass(frozen=True)
class Deployed:
    """A workload in a docroot: URL paths with weights, and each path's expected bytes."""

    name: str
    docroot: Path
    urls: tuple[tuple[str, int], ...]          # (path, weight)
    expected: dict[str, tuple[str, int]]       # path -> (sha256, length)


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    build: Callable[[int], list[File]]   # seed -> files
    urls: tuple[tuple[str, int], ...]


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("static-page", "a few KB of lorem-ipsum HTML (index.html, as in S5)",
             static_page, (("/index.html", 1),)),
)}


def deploy(name: str, docroot: Path, seed: int = 1) -> Deployed:
    """Write the workload's files under docroot (readable by any server user)."""
    workload = WORKLOADS[name]
    files = workload.build(seed)
    docroot.mkdir(parents=True, exist_ok=True)
    docroot.chmod(0o755)
    expected = {}
    for f in files:
        target = docroot / f.path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(f.content)
        target.chmod(0o644)
        expected[f.path] = (hashlib.sha256(f.content).hexdigest(), len(f.content))
    return Deployed(name, docroot, workload.urls, expected)
