"""Filesystems under the docroot: the filesystem as a layer of an experiment.

S1 served the same files from ext3, ext4, XFS, JFS and ReiserFS, with and without
`noatime`, and its scripts from a tmpfs ramdisk; it rebooted between runs for a cold
cache. Here each filesystem is an image file in the caller's state directory, attached
to a loop device with direct I/O (so the image's blocks are never kept in the host's
page cache: an unmounted filesystem is really cold) and mounted on the docroot; tmpfs
is mounted directly. The caller deploys its workload into the mount point afterwards.

What is created is recorded in `stacklab-fs-<run_id>.json` in the state directory
BEFORE each step, so a kill -9 at any moment leaves a record `cleanup_stale` acts on.

Which filesystems can be had here and the checks of a request (values, state
directory, mount point) are fscheck.py's: they run before anything is made.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..errors import StacklabError
from .fscheck import (FILESYSTEMS, RUN_ID, FilesystemUnavailable, _check_dirs, _check_path,
                      _tool, available, check_args, why_not)

# Quiet, never ask, and for ext3/4 initialise inode tables and journal now: lazy init
# would have a kernel thread writing to the disk during the first runs' measurements.
MKFS_FLAGS = {"ext3": ("-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"),
              "ext4": ("-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"),
              "xfs": ("-q", "-f"), "btrfs": ("-q", "-f"), "jfs": ("-q",),
              "reiserfs": ("-q", "-f", "-f")}

STATE = "stacklab-fs-{run_id}.json"
IMAGE = "stacklab-fs-{run_id}.img"
SOURCE = "stacklab-{run_id}"          # the device name a tmpfs is mounted from
MEMORY_FS = {"tmpfs", "ramfs"}


class MountError(StacklabError):
    """A command that makes, mounts or removes a lab filesystem failed."""


def _run(argv: list[str], timeout_s: float = 60) -> str:
    """Run a command (never a shell); MountError naming it and its last words on failure."""
    tool = _tool(argv[0])
    if tool is None:
        raise MountError(f"{argv[0]} missing")
    try:
        out = subprocess.run([tool, *argv[1:]], capture_output=True, text=True,
                             timeout=timeout_s, check=True)
    except subprocess.CalledProcessError as e:
        said = (e.stderr or e.stdout or "").strip().splitlines()
        raise MountError(f"{' '.join(argv)} failed ({e.returncode}): "
                         f"{said[-1] if said else 'no message'}") from None
    except subprocess.TimeoutExpired:
        raise MountError(f"{' '.join(argv)} did not finish in {timeout_s:.0f} s") from None
    return out.stdout.strip()


@dataclass
class Mount:
    """One lab filesystem, mounted on `mount_point` (image and loop device unless tmpfs)."""

    run_id: str
    fs: str
    mount_point: Path
    size_mb: int
    options: tuple[str, ...]
    state_file: Path
    image: Path | None = None
    device: str | None = None            # /dev/loopN
    direct_io: bool = False              # the loop device bypasses the host's page cache
    inodes: int | None = None            # a tmpfs's nr_inodes (None: the kernel's default)

    @property
    def source(self) -> str:
        return self.device if self.image else SOURCE.format(run_id=self.run_id)

    def verify(self, pid: int | None = None) -> tuple[bool, str]:
        """Whether the filesystem is mounted with its type, source and options, as
        /proc/self/mounts says — or /proc/<pid>/mounts: in that process's view (a server
        in its own mount namespace)."""
        view = "this process's view" if pid is None else f"pid {pid}'s view"
        entry = _mounted(self.mount_point, pid)
        if entry is None:
            return False, f"nothing is mounted at {self.mount_point} in {view}"
        source, fstype, shown = entry
        problems = []
        if fstype != self.fs:
            problems.append(f"type {fstype}, not {self.fs}")
        if source != self.source:
            problems.append(f"mounted from {source}, not {self.source}")
        problems += [f"{o} did not take" for o in self.options if not _took(o, shown)]
        if self.fs == "tmpfs" and f"size={self.size_mb * 1024}k" not in shown:
            problems.append(f"size is not {self.size_mb} MB")
        if self.inodes is not None and f"nr_inodes={self.inodes}" not in shown:
            problems.append(f"nr_inodes is not {self.inodes}")
        said = f"{fstype} at {self.mount_point} from {source} in {view}: {','.join(shown)}"
        if self.image:
            said += f"; loop direct I/O {'on' if self.direct_io else 'off'}"
        return (not problems), (said if not problems else f"{'; '.join(problems)} ({said})")

    def drop_cache(self) -> None:
        """A cold cache, as S1's reboot gave: unmount (the kernel forgets the files'
        pages and the loop device's), drop the image's own pages from the host's cache,
        mount again. Nothing of the rest of the machine is dropped. Servers must not hold
        files on it (the unmount would fail: busy)."""
        if self.image is None:
            raise ValueError("a tmpfs holds its files only in memory: no cold cache")
        host = fs_type_of(self.image.parent)
        if host in MEMORY_FS:
            raise ValueError(f"the image {self.image} lies on {host}: its blocks stay in "
                             "memory, no cold cache (give a state directory on a disk)")
        _unmount(self.mount_point, {self.device})
        _forget_pages(self.image)
        _mount(self.fs, self.options, self.device, self.mount_point)

    def close(self, lazy: bool = False) -> None:
        """Unmount, detach the loop device, delete the image and the record. `lazy`: a
        mount still in use is detached from the tree now and goes when its last file
        is closed (umount -l), where a plain unmount would fail: busy."""
        _teardown(self.run_id, self.fs, self.mount_point, self.state_file, lazy)


def mount_fs(run_id: str, state_dir: Path, mount_point: Path, fs: str, size_mb: int,
             options: tuple[str, ...] = (), lab_dir: Path | None = None,
             inodes: int | None = None) -> Mount:
    """Mount a fresh `fs` of size_mb on mount_point (created if missing, must be empty,
    inside lab_dir — by default state_dir), its root mode 0755 so a server user reads it;
    a tmpfs holds at most `inodes` files and directories (None: the kernel's default,
    half the host's pages). ValueError names an invalid value; FilesystemUnavailable says
    why `fs` cannot be had here; MountError names a failed command (what was made is
    removed again)."""
    check_args(run_id, fs, size_mb, options)
    if inodes is not None and (fs != "tmpfs" or isinstance(inodes, bool)
                               or not isinstance(inodes, int) or inodes < 1):
        raise ValueError(f"inodes {inodes!r}: a positive count, for a tmpfs only")
    state_dir, mount_point = _check_dirs(state_dir, mount_point, lab_dir)
    reason = why_not(fs)
    if reason:
        raise FilesystemUnavailable(f"{fs} cannot be mounted here: {reason}")
    state_file = state_dir / STATE.format(run_id=run_id)
    if state_file.exists():
        raise ValueError(f"run id {run_id!r} already has a filesystem ({state_file}): "
                         "close it or cleanup_stale first")
    image = None if fs == "tmpfs" else state_dir / IMAGE.format(run_id=run_id)
    mount = Mount(run_id, fs, mount_point, size_mb, tuple(options), state_file, image,
                  inodes=inodes)
    record = {"version": 1, "run_id": run_id, "fs": fs, "mount_point": str(mount_point),
              "image": str(image) if image else None, "device": None}
    try:
        _make(mount, record)
        mount_point.chmod(0o755)
    except BaseException:
        mount.close()
        raise
    return mount


def _make(mount: Mount, record: dict) -> None:
    if mount.image is None:
        _record(mount.state_file, record, "mount")
        options = (f"size={mount.size_mb}m", "mode=0755", *mount.options,
                   *([f"nr_inodes={mount.inodes}"] if mount.inodes is not None else []))
        _run(["mount", "-t", "tmpfs", "-o", ",".join(options), mount.source,
              str(mount.mount_point)])
        return
    _record(mount.state_file, record, "image")
    with open(mount.image, "xb") as f:          # sparse: only what mkfs writes takes room
        f.truncate(mount.size_mb * 2**20)
    _record(mount.state_file, record, "losetup")
    mount.device = _run(["losetup", "--find", "--show", "--direct-io=on", str(mount.image)],
                        timeout_s=30)
    mount.direct_io = _loop_attr(mount.device, "dio") == "1"
    _record(mount.state_file, {**record, "device": mount.device}, "mkfs")
    _run([f"mkfs.{mount.fs}", *MKFS_FLAGS[mount.fs], mount.device], timeout_s=300)
    _record(mount.state_file, {**record, "device": mount.device}, "mount")
    _mount(mount.fs, mount.options, mount.device, mount.mount_point)


def _record(state_file: Path, record: dict, step: str) -> None:
    """Write the record (about to do `step`) whole, then rename it into place."""
    tmp = state_file.with_name(state_file.name + ".tmp")
    tmp.write_text(json.dumps({**record, "step": step}) + "\n")
    os.replace(tmp, state_file)


def _mount(fs: str, options: tuple[str, ...], device: str, mount_point: Path) -> None:
    _run(["mount", "-t", fs, *(["-o", ",".join(options)] if options else []), device,
          str(mount_point)])


def _took(option: str, shown: tuple[str, ...]) -> bool:
    """Whether a requested option shows in /proc/mounts (strictatime shows as neither
    noatime nor relatime)."""
    if option == "strictatime":
        return "noatime" not in shown and "relatime" not in shown
    return option in shown


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _mounted(mount_point: Path, pid: int | None = None) -> tuple[str, str, tuple] | None:
    """(source, type, options) of the topmost mount at mount_point, or None."""
    table = Path(f"/proc/{pid}/mounts" if pid is not None else "/proc/self/mounts")
    top = None
    for line in table.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 4 and _unescape(fields[1]) == str(mount_point):
            top = (_unescape(fields[0]), fields[2], tuple(fields[3].split(",")))
    return top


def fs_type_of(path: Path) -> str:
    """The type of the filesystem holding path (the longest mount point above it)."""
    best, kind = "", ""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        where = _unescape(fields[1])
        if (str(path) == where or str(path).startswith(where.rstrip("/") + "/")) \
                and len(where) >= len(best):
            best, kind = where, fields[2]
    return kind


def _loop_attr(device: str, attr: str) -> str:
    try:
        return (Path("/sys/block") / Path(device).name / "loop" / attr).read_text().strip()
    except OSError:
        return ""


def _loops_backed_by(image: Path) -> list[str]:
    """The loop devices whose backing file is image (the kernel's own record)."""
    return sorted(f"/dev/{d.name}" for d in Path("/sys/block").glob("loop*")
                  if _loop_attr(d.name, "backing_file") == str(image))


def _unmount(mount_point: Path, sources: set[str], lazy: bool = False) -> bool:
    """Unmount mount_point while its topmost mount is from one of sources (ours); `lazy`
    detaches one still in use (umount -l)."""
    done = False
    while (entry := _mounted(mount_point)) is not None and entry[0] in sources:
        _run(["umount", *(["-l"] if lazy else []), str(mount_point)])
        done = True
    return done


def _forget_pages(image: Path) -> None:
    """Write back and drop the image file's pages from the host's page cache: this file
    only (with direct I/O there are none; without, they would make a remount warm)."""
    fd = os.open(image, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _teardown(run_id: str, fs: str, mount_point: Path, state_file: Path,
              lazy: bool = False) -> list[str]:
    """Remove what a record names, each thing only if it is really the lab's: a mount
    from our loop device or our tmpfs name, loop devices backed by our image, the image
    at its fixed name. Returns what was removed."""
    removed = []
    image = state_file.parent / IMAGE.format(run_id=run_id)
    loops = set(_loops_backed_by(image))
    sources = loops if fs != "tmpfs" else {SOURCE.format(run_id=run_id)}
    if _unmount(mount_point, sources, lazy):
        removed.append(f"mount {mount_point}")
    for device in sorted(loops):
        _run(["losetup", "--detach", device], timeout_s=30)
        removed.append(f"loop {device}")
    for path in (image, state_file, state_file.with_name(state_file.name + ".tmp")):
        if path.exists():
            path.unlink()
            removed.append(f"file {path}" if path != image else f"image {path}")
    return removed


def cleanup_stale(state_dir: Path, lab_dir: Path | None = None) -> list[str]:
    """Remove the filesystems recorded in state_dir by a stacklab that died: unmount the
    recorded mount points (only those inside lab_dir, by default state_dir), detach the
    loop devices backed by the recorded images, delete the images and the records.
    Returns what was removed ("mount /…", "loop /dev/loopN", "image /…", "file /…").
    Only for a state directory no live stacklab holds (lab.cleanup_stale's sessions)."""
    state_dir = _check_path(state_dir)
    lab = _check_path(lab_dir) if lab_dir is not None else state_dir
    removed = []
    for tmp in state_dir.glob(STATE.format(run_id="*") + ".tmp"):
        if not tmp.with_name(tmp.name[:-len(".tmp")]).exists():
            tmp.unlink()                     # killed writing its first record: nothing made
            removed.append(f"file {tmp}")
    for state_file in sorted(state_dir.glob(STATE.format(run_id="*"))):
        run_id = state_file.name[len("stacklab-fs-"):-len(".json")]
        try:
            record = json.loads(state_file.read_text())
            mount_point = _check_path(Path(record["mount_point"]))
            fs = record["fs"]
        except (OSError, ValueError, KeyError, TypeError):
            continue                         # cut short or not ours: leave it be
        if (RUN_ID.fullmatch(run_id) and record.get("run_id") == run_id
                and fs in FILESYSTEMS and lab in mount_point.parents):
            removed += _teardown(run_id, fs, mount_point, state_file)
    return removed


def cached_fraction(paths: Iterable[Path]) -> float:
    """The fraction of these files' pages that are in the page cache now (mincore(2)):
    0.0 after drop_cache, 1.0 once read. A check that a cold cache really is cold."""
    resident, total = cached_pages(paths)
    return resident / total if total else 0.0


def cached_pages(paths: Iterable[Path]) -> tuple[int, int]:
    """(pages in the page cache now, pages) of these files, by mincore(2)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    total = resident = 0
    for path in paths:
        size = os.path.getsize(path)
        if size == 0:
            continue
        pages = -(-size // mmap.PAGESIZE)
        fd = os.open(path, os.O_RDONLY)
        try:
            addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            if addr in (None, ctypes.c_void_p(-1).value):
                raise OSError(ctypes.get_errno(), f"mmap {path}")
            try:
                vec = (ctypes.c_ubyte * pages)()
                if libc.mincore(addr, size, vec) != 0:
                    raise OSError(ctypes.get_errno(), f"mincore {path}")
                resident += sum(b & 1 for b in vec)
            finally:
                libc.munmap(addr, size)
        finally:
            os.close(fd)
        total += pages
    return resident, total
