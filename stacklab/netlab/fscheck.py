"""Which filesystems this machine can give, and whether a request for one is sound: the
filesystems, their tools and packages, sizes and allowed mount options; `available`
(kernel, modules, tools, loop devices), `check_args` for the values and the checks of
the state directory and mount point, each refusal naming the value at fault.

Apart from fs.py because validation and the inventory ask these questions before any
run starts, and none of it makes or mounts anything.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from ..errors import StacklabError
from ..host.pathchars import unsafe_char

FILESYSTEMS = ("ext3", "ext4", "xfs", "btrfs", "jfs", "reiserfs", "tmpfs")
PACKAGES = {"ext3": "e2fsprogs", "ext4": "e2fsprogs", "xfs": "xfsprogs",
            "btrfs": "btrfs-progs", "jfs": "jfsutils", "reiserfs": "reiserfsprogs"}
# The smallest filesystem each mkfs makes (mkfs.xfs: "must be larger than 300MB";
# mkfs.btrfs: at least 114294784 bytes per device).
MIN_MB = {"ext3": 16, "ext4": 16, "xfs": 300, "btrfs": 110, "jfs": 16, "reiserfs": 64,
          "tmpfs": 1}
MAX_MB = 65536

# The mount options allowed: the access-time family for every filesystem (at most one
# of noatime/relatime/strictatime), ext3/4's journalling mode, and nobarrier where the
# kernel still takes it (XFS dropped it in Linux 4.19; ext3/4 and btrfs keep it).
ATIME = ("noatime", "relatime", "strictatime")
OPTIONS = {fs: {"noatime", "nodiratime", "relatime", "strictatime"} for fs in FILESYSTEMS}
for _fs in ("ext3", "ext4"):
    OPTIONS[_fs] |= {"data=ordered", "data=writeback", "data=journal", "nobarrier"}
OPTIONS["btrfs"] |= {"nobarrier"}

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
TOOL_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


class FilesystemUnavailable(StacklabError):
    """This machine cannot make or mount the filesystem asked for; says why."""


def available() -> dict[str, str | None]:
    """Each of FILESYSTEMS: None when this machine can make and mount it, else why not."""
    kernel = _kernel_filesystems()
    return {fs: _why_not(fs, kernel) for fs in FILESYSTEMS}


def why_not(fs: str) -> str | None:
    """One filesystem's availability (available()'s entry for it), probing only it: a
    plan checks each trial's type, not all seven each time."""
    return _why_not(fs, _kernel_filesystems())


def _kernel_filesystems() -> set[str]:
    return {line.split()[-1] for line in Path("/proc/filesystems").read_text().splitlines()
            if line.strip()}


def _why_not(fs: str, kernel: set[str]) -> str | None:
    if os.geteuid() != 0:
        return "mounting needs root"
    if fs not in kernel:
        problem = _load_module(fs)
        if problem:
            return f"the kernel has no {fs} ({problem})"
    tools = [("mount", "mount"), ("umount", "mount")]
    if fs != "tmpfs":
        tools += [("losetup", "mount"), (f"mkfs.{fs}", PACKAGES[fs])]
    for tool, package in tools:
        if not _tool(tool):
            return f"{tool} missing: apt-get install {package}"
    if fs != "tmpfs" and not Path("/dev/loop-control").exists():
        return "no loop devices (/dev/loop-control missing)"
    return None


def _load_module(fs: str) -> str | None:
    """None once the kernel has `fs` after trying to load its module, else why not."""
    if not Path("/proc/modules").exists():
        return "not in /proc/filesystems, and this kernel cannot load modules"
    modprobe = _tool("modprobe")
    if not modprobe:
        return "not in /proc/filesystems; modprobe missing: apt-get install kmod"
    out = subprocess.run([modprobe, "-q", fs], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        return f"not in /proc/filesystems, and modprobe {fs} failed"
    return None if fs in _kernel_filesystems() else f"modprobe {fs} did not register it"


def _tool(name: str) -> str | None:
    return shutil.which(name, path=TOOL_PATH)


def check_args(run_id: str, fs: str, size_mb: int, options: tuple[str, ...]) -> None:
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise ValueError(f"run id {run_id!r} is not 1-64 letters, digits, '-' or '_'")
    if fs not in FILESYSTEMS:
        raise ValueError(f"filesystem {fs!r} is not one of {', '.join(FILESYSTEMS)}")
    if (not isinstance(size_mb, int) or isinstance(size_mb, bool)
            or not MIN_MB[fs] <= size_mb <= MAX_MB):
        raise ValueError(f"size {size_mb!r} MB for {fs} is not {MIN_MB[fs]}-{MAX_MB}")
    if isinstance(options, str):
        raise ValueError(f"options {options!r}: give a tuple of options, not a string")
    for option in options:
        if option not in OPTIONS[fs]:
            raise ValueError(f"mount option {option!r} is not allowed for {fs} "
                             f"(allowed: {', '.join(sorted(OPTIONS[fs]))})")
    for family in (ATIME, [o for o in OPTIONS[fs] if o.startswith("data=")]):
        if len([o for o in options if o in family]) > 1:
            raise ValueError(f"mount options {options!r}: at most one of {', '.join(family)}")


def _check_dirs(state_dir: Path, mount_point: Path, lab_dir: Path | None) -> tuple[Path, Path]:
    state_dir, mount_point = _check_path(state_dir), _check_path(mount_point)
    lab = _check_path(lab_dir) if lab_dir is not None else state_dir
    if lab not in mount_point.parents:
        raise ValueError(f"mount point {str(mount_point)!r} is not inside {str(lab)!r}")
    state_dir.mkdir(parents=True, exist_ok=True)
    mount_point.mkdir(mode=0o755, parents=True, exist_ok=True)
    if os.path.ismount(mount_point):
        raise ValueError(f"mount point {str(mount_point)!r} is already a mount point")
    if any(mount_point.iterdir()):
        raise ValueError(f"mount point {str(mount_point)!r} is not empty: mounting "
                         "would hide its files")
    return state_dir, mount_point


def _check_path(path: Path) -> Path:
    """The path, absolute and with symlinks resolved; ValueError if /proc/mounts or a
    command line could not carry it as it is (pathchars.UNSAFE: ',', '\\', whitespace…)."""
    text = str(path)
    bad = unsafe_char(text)
    if not Path(text).is_absolute() or bad is not None:
        raise ValueError(f"path {text!r} is not absolute or contains {bad!r}")
    return Path(text).resolve()
