"""A run's writable directories on a filesystem of their own, made for the run and
removed after it.

What a run writes goes to its run directory: its servers' logs, pid files and sockets,
PHP's file sessions, temp files, a MariaDB datadir the workload writes to. What a run
does to a disk outlives it. PHP file sessions (session.auto_start, nginx + PHP-FPM,
php-blank, c=32) on the lab root's ext4, mounted with discard, ran at 6,555 req/s in a
trial's first run and at 1,860-2,012 in the three after it, while the I/O pressure over
each window was 0.0-0.1%: the settle step before each load (sync, then no I/O stall) did
not see what the earlier runs had left. On a tmpfs lab root every run of the trial read
alike. So each run's directory is a fresh filesystem mounted on it for the run:

- a tmpfs by default, of at most RUN_TMPFS_MAX_MIB (a quarter of the host's memory on a
  smaller host) and one inode per INODE_BYTES of it: a tmpfs takes memory only for what
  is written, and the inode limit bounds what its files' inodes take besides;
- with fs.type set, a fresh filesystem of that type (on a loop device, made as fs.py
  makes the docroot's) with the experiment's mount options and at least its size: a run
  that asks for a disk filesystem measures its writes there too;
- with a machine profile's memory limit (machine.memory_mb) and no fs.type, a fresh
  ext4: a tmpfs's pages are charged to the servers that write them and are never
  reclaimed, so the profile's limit would hold the run's logs and sessions, where a
  disk's page cache is written back and reclaimed.

What is not written per run stays where it is: the docroot deployed once per session
(large corpora shared by every run; its writable directories get a tmpfs of their own
per run, netlab.run.filesystem), the seeded database datadirs in the session's cache,
the loop images of the fs layer. The run directory keeps its path, so a unix socket
that fits there still fits (107 bytes: lab.socket_path).

The mount is recorded before each step like every lab filesystem (fs.py), so a kill at
any moment leaves a record the next start sweeps. A full filesystem answers ENOSPC to
the writer at once (no hang); the run is then failed, saying so (FreshDir.full). Without
root nothing can be mounted: the run directory stays on the lab root's filesystem and
the record says so (`fresh` false, and why).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import fs

RUN_TMPFS_MAX_MIB = 2048          # the run directory's tmpfs, at most…
RUN_TMPFS_HOST_SHARE = 4          # …and at most 1/4 of the host's memory
RUN_TMPFS_MIN_MIB = 64            # (a host too small for that still gets this much)
RUN_LOOP_MIN_MIB = 2048           # a loop filesystem's size, at least (sparse: only
                                  # what is written takes room on the lab root)
INODE_BYTES = 2048                # a tmpfs's inodes: one per this many bytes of its size
FULL_MIB = 1                      # under this left after a run, its writes were cut
SUFFIX = "-w"                     # the mount's run id: the run's layer id and this


@dataclass(frozen=True)
class Choice:
    """The filesystem a run's directory gets, from its knobs alone."""

    fs: str                       # tmpfs, ext4, xfs…
    size_mib: int
    options: tuple[str, ...]
    inodes: int | None            # a tmpfs's nr_inodes; None on a disk filesystem
    why: str                      # what chose it, for the record


def choose(knobs: dict[str, dict[str, Any]], host_mib: int) -> Choice:
    """The run directory's filesystem for a trial's effective knobs on a host of
    `host_mib` MiB: fs.type's (its options, at least its size), else an ext4 under a
    machine profile's memory limit, else a tmpfs (module docstring)."""
    kind = knobs["fs"]["type"]
    if kind != "none":
        options = tuple(o for o in knobs["fs"]["options"].split(",") if o)
        why = f"fs.type = {kind!r}"
        if kind == "tmpfs":
            return _tmpfs(host_mib, options, why)
        return Choice(kind, max(knobs["fs"]["size_mb"], RUN_LOOP_MIN_MIB), options, None, why)
    if knobs["machine"]["memory_mb"]:
        return Choice("ext4", RUN_LOOP_MIN_MIB, (), None,
                      "machine.memory_mb: a tmpfs's pages would count against the "
                      "profile's limit and never be reclaimed")
    return _tmpfs(host_mib, (), "default")


def _tmpfs(host_mib: int, options: tuple[str, ...], why: str) -> Choice:
    size = max(RUN_TMPFS_MIN_MIB, min(RUN_TMPFS_MAX_MIB, host_mib // RUN_TMPFS_HOST_SHARE))
    return Choice("tmpfs", size, options, size * 2**20 // INODE_BYTES, why)


def problem(knobs: dict[str, dict[str, Any]]) -> str | None:
    """What this machine cannot give of the run directory's filesystem, as root (a user
    who cannot mount keeps the run directory on the lab root, said in the record)."""
    if os.geteuid() != 0:
        return None
    kind = choose(knobs, RUN_TMPFS_MAX_MIB * RUN_TMPFS_HOST_SHARE).fs
    if why := fs.why_not(kind):
        return (f"the run directory's fresh {kind} cannot be had here: {why}" +
                (" (machine.memory_mb puts it on ext4; set fs.type to another disk "
                 "filesystem)" if knobs["fs"]["type"] == "none" else ""))
    return None


@dataclass(frozen=True)
class Writable:
    """Where a run's writable directories were: its part of the record (`_writable`)."""

    dir: str                      # the run directory
    fs: str                       # the filesystem it was on
    fresh: bool                   # made for the run (False: the lab root's own)
    size_mib: int | None
    inodes: int | None            # a tmpfs's inode limit
    options: tuple[str, ...]
    why: str                      # what chose that filesystem, or why none was made

    def record(self) -> dict[str, Any]:
        return {**asdict(self), "options": list(self.options)}


@dataclass(frozen=True)
class FreshDir:
    """A run directory as the run has it: its path, what the record says of it, and the
    check of what was left in it."""

    dir: Path
    writable: Writable

    def full(self) -> str | None:
        """Why the run's writes were cut, if its directory's filesystem filled up (under
        FULL_MIB or no inode left), else None."""
        st = os.statvfs(self.dir)
        free_mib = st.f_bavail * st.f_frsize / 2**20
        no_inodes = st.f_files > 0 and st.f_favail == 0
        if free_mib >= FULL_MIB and not no_inodes:
            return None
        left = f"{free_mib:.2f} MiB" + (", no inode" if no_inodes else "") + " left"
        w = self.writable
        if not w.fresh:
            return (f"the lab directory filled up during the run ({left}): the servers' "
                    "logs are cut")
        size = (f"{w.size_mib:,} MiB" + (f", {w.inodes:,} inodes" if w.inodes else ""))
        return (f"the run directory's {w.fs} ({size}) filled up during the run ({left}): "
                "its servers' writes failed (no space), their logs are cut")


@contextmanager
def fresh_dir(run_id: str, state_dir: Path, run_dir: Path,
              knobs: dict[str, dict[str, Any]], host_mib: int) -> Iterator[FreshDir]:
    """`run_dir` (new and empty, inside `state_dir`) on a fresh filesystem (choose) for
    the block, its mount recorded in `state_dir` under the run id `run_id` + SUFFIX;
    unmounted when the block ends (lazily if something still holds it open), the
    directory removed. Without root, the directory as it is, said in the record.
    MountError names a mount that failed; what was made is removed again."""
    choice = choose(knobs, host_mib)
    if os.geteuid() != 0:
        yield FreshDir(run_dir, Writable(str(run_dir), fs.fs_type_of(run_dir), False, None,
                                         None, (), "not fresh: mounting needs root"))
        return
    mount = fs.mount_fs(run_id + SUFFIX, state_dir, run_dir, choice.fs, choice.size_mib,
                        choice.options, inodes=choice.inodes)
    try:
        yield FreshDir(run_dir, Writable(str(run_dir), choice.fs, True, choice.size_mib,
                                         choice.inodes, choice.options, choice.why))
    finally:
        _remove(mount)


@contextmanager
def fresh_docroot_dirs(docroot: Path, writable: tuple[str, ...], run_id: str,
                       state_dir: Path, host_mib: int) -> Iterator[list[dict[str, Any]]]:
    """Each of a deployed docroot's writable directories (Workload.writable, URL paths:
    an output cache, a localisation cache, compiled templates) on a tmpfs of its own for
    the block, sized as the run directory's, recorded in `state_dir` under the run id
    `run_id`-d<N>, with the directory's own mode: the docroot is deployed once for the
    session's runs, and what one run wrote there would be the next one's start. Yields
    where each was ({"dir", "fs", "fresh"}); without root, each as it is (not fresh)."""
    paths = [(rel, docroot / rel.strip("/")) for rel in writable]
    if os.geteuid() != 0:
        yield [{"dir": rel, "fs": fs.fs_type_of(path), "fresh": False} for rel, path in paths]
        return
    choice = _tmpfs(host_mib, (), "")
    with ExitStack() as held:
        for n, (_, path) in enumerate(paths):
            mode = path.stat().st_mode & 0o7777
            mount = fs.mount_fs(f"{run_id}-d{n}", state_dir, path, "tmpfs", choice.size_mib,
                                inodes=choice.inodes)
            held.callback(_remove, mount, keep_dir=True)
            path.chmod(mode)      # as deployed: the server's user writes into it
        yield [{"dir": rel, "fs": "tmpfs", "fresh": True} for rel, _ in paths]


def _remove(mount: fs.Mount, keep_dir: bool = False) -> None:
    """Unmount; a mount a straggler still holds is detached (umount -l) and goes with
    its last open file. The mount point, empty again, is removed unless `keep_dir`."""
    try:
        mount.close()
    except fs.MountError:
        mount.close(lazy=True)
    if keep_dir:
        return
    try:
        mount.mount_point.rmdir()
    except OSError:
        pass                      # something was written under it before the mount
