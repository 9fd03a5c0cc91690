"""Where the cgroup hierarchies are: which mounted hierarchy (v1 or v2) holds each
controller, where it is mounted, and which cgroup the creating process sits in, all read
from the kernel's mount table and /proc/self/cgroup.

Apart from cgroups.py because validation and the inventory ask it before any group is
made, and because it only reads: nothing here creates, writes or removes a cgroup.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

KNOWN = frozenset({"cpu", "cpuacct", "cpuset", "memory", "io", "blkio", "pids", "hugetlb",
                   "devices", "freezer", "net_cls", "net_prio", "perf_event", "rdma", "misc"})
PROC = Path("/proc")
MOUNTINFO = PROC / "self/mountinfo"
SELF_CGROUP = PROC / "self/cgroup"


@dataclass(frozen=True)
class Hierarchy:
    """One mounted cgroup hierarchy: its version, where it is mounted, the cgroup its
    mount shows as its top (`root`), and the cgroup the creating process is in (`own`)."""

    version: int
    mount: Path
    root: str = "/"
    own: str = "/"

    def dir_of(self, cgroup: str) -> Path:
        """The directory of a cgroup path as /proc/<pid>/cgroup names it."""
        top = self.root.rstrip("/")
        rel = cgroup[len(top):] if cgroup == top or cgroup.startswith(top + "/") else cgroup
        return self.mount / rel.lstrip("/")


@dataclass
class Place:
    """The group's directory in one hierarchy, and the controllers it serves there."""

    dir: Path
    hierarchy: Hierarchy
    controllers: tuple[str, ...]


def place_of(places: list[Place], controller: str) -> Place | None:
    """The place that serves a controller, None where the group has none for it."""
    return next((p for p in places if controller in p.controllers), None)


def detect(mountinfo: Path = MOUNTINFO, self_cgroup: Path = SELF_CGROUP) -> dict[str, Hierarchy]:
    """Which hierarchy holds each controller here, from the kernel's mount table.

    v1 and v2 are told apart by filesystem type in /proc/self/mountinfo: a `cgroup`
    mount is a v1 hierarchy whose super options name the controllers bound to it (cpu,
    or cpu,cpuacct co-mounted); a `cgroup2` mount is the unified hierarchy, whose
    controllers are those its top's cgroup.controllers lists. A controller bound to a v1
    hierarchy is never offered by v2, so each controller has one answer. Where the
    creating process sits comes from /proc/self/cgroup ("N:ctrl,…:/path" for v1,
    "0::/path" for v2).
    """
    own_v1, own_v2 = {}, "/"
    for line in self_cgroup.read_text().splitlines():
        num, _, rest = line.partition(":")
        ctrls, _, path = rest.partition(":")
        if num == "0" and not ctrls:
            own_v2 = path
        for c in ctrls.split(","):
            own_v1[c] = path
    found: dict[str, Hierarchy] = {}
    for line in mountinfo.read_text().splitlines():
        fields = line.split(" ")
        sep = fields.index("-")
        fstype, options = fields[sep + 1], fields[sep + 3].split(",")
        root, mount = _unescape(fields[3]), Path(_unescape(fields[4]))
        if fstype == "cgroup":
            ctrls = [o for o in options if o in KNOWN]
            own = next((own_v1[c] for c in ctrls if c in own_v1), "/")
            for c in ctrls:
                found.setdefault(c, Hierarchy(1, mount, root, own))
        elif fstype == "cgroup2":
            try:
                ctrls = (mount / "cgroup.controllers").read_text().split()
            except OSError:
                continue
            for c in ctrls:
                found.setdefault(c, Hierarchy(2, mount, root, own_v2))
    return found


def _unescape(text: str) -> str:
    """A mountinfo path: space, tab, newline and backslash are written as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def _cgroup_mounts(mountinfo: Path) -> list[Path]:
    mounts = []
    for line in mountinfo.read_text().splitlines():
        fields = line.split(" ")
        if fields[fields.index("-") + 1] in ("cgroup", "cgroup2"):
            mounts.append(Path(_unescape(fields[4])))
    return mounts
