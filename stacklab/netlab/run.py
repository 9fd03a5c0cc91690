"""What one run does with the lab's layers under its stack, each made for the run and
removed when it ends (also after a kill: the session's cleanup reads their records).

- network (`net.*`): on loopback, nothing; with veth, two namespaces of its own joined by
  a veth pair (net.py), the link's rate and round trip measured before the load, the
  calling thread inside the server's namespace while the stack starts, is verified and
  measured (thread.py: the servers it forks and the sockets it opens are there), the
  engine in the client's;
- filesystem (`fs.*`): the docroot copied onto a filesystem of its own (fs.py), or as
  deployed with its writable directories each on a fresh tmpfs (rundir.py);
- machine (`machine.*`): a cgroup the servers join before exec (cgroups.py); with or
  without a profile, each component's processes in a group of their own, whose CPU time
  the monitor reads (CGI scripts included), where this machine lets the lab make cgroups.
"""

from __future__ import annotations

import mmap
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable

from ..measure.verify import Status, Verdict
from ..workloads import Deployed
from . import cgroups, fs, net, netkernel
from .knobs import sysctls
from .rundir import fresh_docroot_dirs
from .thread import in_netns

LOOPBACK = "127.0.0.1"
RATE_TOLERANCE = 0.15    # a shaped link's measured rate within ±15% of what it is set to
RATE_TRIES = 3           # transfers at most before the link's rate is judged


@dataclass
class Network:
    """Where a run's stack listens and its engine runs, and what the link measured."""

    mode: str
    host: str = LOOPBACK               # the address the servers listen on
    link: net.Link | None = None
    rate: str = "unlimited"
    measured: dict[str, Any] = field(default_factory=dict)
    before: dict = field(default_factory=dict)    # the veth ends' counters at the start

    @property
    def client_ns(self) -> str | None:
        return self.link.client_ns if self.link else None

    @property
    def server_ns(self) -> str | None:
        return self.link.server_ns if self.link else None

    def verdicts(self) -> list[Verdict]:
        """A shaped link delivers its rate (a transfer measured before the run)."""
        if not self.link or self.rate == "unlimited":
            return []
        want = net.check_rate(self.rate) / 8
        got = self.measured["rate_bytes_s"]
        ok = abs(got - want) <= RATE_TOLERANCE * want
        return [Verdict("net", "link rate", Status.PASS if ok else Status.FAIL,
                        f"{got / 1e6:,.1f} MB/s measured over the veth link set to "
                        f"{self.rate} ({want / 1e6:,.1f} MB/s)",
                        {"measured_bytes_s": got, "set_bytes_s": want})]

    def record(self) -> dict:
        """The run's network, for its provenance: mode, link, what was measured, and the
        bytes that crossed the veth pair during the run (proof the load went through)."""
        out: dict[str, Any] = {"mode": self.mode}
        if self.link:
            after = self.link.counters()
            out |= {"link": self.rate, "server_addr": self.link.server_addr,
                    "client_addr": self.link.client_addr, **self.measured,
                    "crossed": {side: {k: after[side][k] - self.before[side][k]
                                       for k in ("rx_bytes", "tx_bytes", "rx_packets",
                                                 "tx_packets")}
                                for side in ("server", "client")}}
        return out


@contextmanager
def network(knobs: dict[str, Any], run_id: str, state_dir: Path) -> Iterator[Network]:
    """The run's network for as long as the block runs; with veth the calling thread is
    inside the server's namespace meanwhile, and the namespaces are gone afterwards."""
    if knobs["mode"] != "veth":
        yield Network("loopback")
        return
    with net.create_link(run_id, state_dir, knobs["link"], sysctls(knobs)) as link:
        rate, transfers = link_rate(link, knobs["link"])
        measured = {"rate_bytes_s": round(rate), "rate_transfers": transfers,
                    "rtt_ms": round(link.measure_rtt() * 1000, 3),
                    "sysctls": sysctls(knobs), "effective": _effective(link.server_ns)}
        found = Network("veth", link.server_addr, link, knobs["link"], measured,
                        link.counters())
        with in_netns(link.server_ns):
            yield found


def link_rate(link: net.Link, rate: str) -> tuple[float, int]:
    """The link's rate in bytes a second, and the transfers it took: the fastest of up to
    RATE_TRIES, stopping at the first within RATE_TOLERANCE of the rate set (an unshaped
    link: one). A busy host only ever slows a transfer (a peer waiting for a core), so
    the fastest is the link's; a link faster than set stays faster however often it is
    measured."""
    want = None if rate == "unlimited" else net.check_rate(rate) / 8
    best = 0.0
    for transfers in range(1, RATE_TRIES + 1):
        best = max(best, link.measure_rate())
        if want is None or abs(best - want) <= RATE_TOLERANCE * want:
            break
    return best, transfers


def _effective(server_ns: str) -> dict[str, dict[str, str]]:
    """S1's and S5's TCP settings as the server's namespace has them and as the host has
    them: a new namespace starts from the kernel's defaults, not the host's values, so a
    veth run can differ from a loopback one in settings nobody set — recorded, not hidden."""
    keys = net.NAMESPACED_SYSCTLS
    return {"server": {k: netkernel.ns_sysctl(server_ns, k) for k in keys},
            "host": {k: net._host_sysctl(k) for k in keys}}


@contextmanager
def filesystem(knobs: dict[str, Any], deployed: Deployed, run_id: str, state_dir: Path,
               host_mib: int) -> Iterator[tuple[Deployed, fs.Mount | None, list[dict]]]:
    """The workload on a filesystem of the run's own (fs.* knobs): made, filled with a
    copy of the deployed docroot, its cache dropped if asked (before any server opens a
    file), and removed when the block ends; with fs.type none, the deployment as it is,
    its writable directories each on a fresh tmpfs (rundir.fresh_docroot_dirs). Also
    yields where each writable directory was, for the record."""
    if knobs["type"] == "none":
        with fresh_docroot_dirs(deployed.docroot, deployed.writable, run_id, state_dir,
                                host_mib) as dirs:
            yield deployed, None, dirs
        return
    options = tuple(o for o in knobs["options"].split(",") if o)
    mount = fs.mount_fs(run_id, state_dir, state_dir / f"docroot-{run_id}", knobs["type"],
                        knobs["size_mb"], options)
    try:
        shutil.copytree(deployed.docroot, mount.mount_point, dirs_exist_ok=True,
                        symlinks=True)
        if knobs["cold_cache"]:
            mount.drop_cache()
        yield (replace(deployed, docroot=mount.mount_point), mount,
               [{"dir": rel, "fs": knobs["type"], "fresh": True} for rel in deployed.writable])
    finally:
        mount.close()


COOL_TRIES = 5           # drops at most before the load, COOL_WAIT_S apart
COOL_WAIT_S = 0.05
# Pages still cached after the drops fail the run when they are more than COOL_LEFT of
# the docroot and more than COOL_LEFT_MIB: sendfile(2) leaves a few pages of a file it
# sent held by the kernel (8 of a 100 KiB file's 25, in 1 of 4 runs here, for 10 s and
# more, the nginx worker killed or not; none with nginx.sendfile off) — a few requests'
# worth, said as a WARN, where a docroot left in memory fails. A small docroot left
# mostly cached fails whatever its size (under 1 MiB, 100% of it stayed a WARN): more than
# COOL_LEFT_SMALL of it is more than a sendfile's leftovers (8 of 25 pages: 32%).
COOL_LEFT = 0.01
COOL_LEFT_MIB = 1.0
COOL_LEFT_SMALL = 0.5


def cool(docroot: Path, cold: bool, memory_limited: bool) -> dict[str, Any]:
    """Just before the load, the docroot's pages are dropped from the page cache
    (POSIX_FADV_DONTNEED on each file, written back first: these files only, never the
    host's cache):

    - for a cold cache (`cold`: fs.cold_cache on the run's own filesystem), since
      starting and verifying the stack read some of them;
    - under a machine profile's memory limit (`memory_limited`), since a page is charged
      to the group that first read it: stacklab wrote these files (or an earlier run read
      them), so without the drop the servers read them from memory charged to nobody's
      limit (a 48 MiB profile served 192 MiB of large files holding 2 MiB).

    A page in use is not dropped (one being written back, one the kernel holds after a
    sendfile), so the drop is repeated until none is cached or COOL_TRIES have passed. A
    docroot in memory (tmpfs) cannot be dropped at all. Returns the share and the MiB of
    the files' pages still cached, as measured (mincore), the drops it took and the
    docroot's filesystem, for the record and for cool_verdicts."""
    if not (cold or memory_limited):
        return {}
    files = [p for p in docroot.rglob("*") if p.is_file()]
    fs_type = fs.fs_type_of(docroot)
    tries = 1 if fs_type in fs.MEMORY_FS else COOL_TRIES
    drops = 0
    while True:
        drops += 1
        for path in files:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fdatasync(fd)        # a dirty page is not dropped: write it back first
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        resident, pages = fs.cached_pages(files)
        if resident == 0 or drops == tries:
            return {"cached_before_load": round(resident / pages, 4) if pages else 0.0,
                    "cached_mib": round(resident * mmap.PAGESIZE / 2**20, 3),
                    "drops": drops, "docroot_fs": fs_type}
        time.sleep(COOL_WAIT_S)


def cool_verdicts(cooled: dict[str, Any], memory_limited: bool) -> list[Verdict]:
    """The docroot out of the cache before the load, where cool dropped it: pages left
    over COOL_LEFT of it and COOL_LEFT_MIB fail the run (a cold cache that is warm; files
    a memory limit does not hold); fewer left are a WARN with their size, but on a
    filesystem in memory any page left fails (none can leave)."""
    if not cooled:
        return []
    left, mib, where = cooled["cached_before_load"], cooled["cached_mib"], cooled["docroot_fs"]
    why = ("a cold cache" if not memory_limited else
           "the machine profile's memory limit to hold the files the servers read")
    said = (f"{left:.1%} of the docroot's pages ({mib:,.2f} MiB) cached before the load, "
            f"after {cooled['drops']} drop(s)")
    if left == 0:
        return [Verdict("fs", "docroot out of the cache", Status.PASS,
                        f"{said}, as {why} needs", cooled)]
    if where not in fs.MEMORY_FS and (left <= COOL_LEFT or (mib <= COOL_LEFT_MIB
                                                          and left <= COOL_LEFT_SMALL)):
        return [Verdict("fs", "docroot out of the cache", Status.WARN,
                        f"{said}: held by the kernel (pages a sendfile sent stay so), served "
                        f"from memory to the first requests, not {why}", cooled)]
    in_memory = (f": it lies on {where}, in memory, charged to stacklab that wrote it "
                 "(put it on a disk filesystem: fs.type = \"ext4\")"
                 if where in fs.MEMORY_FS else "")
    return [Verdict("fs", "docroot out of the cache", Status.FAIL,
                    f"{said}, so not {why}{in_memory}", cooled)]


def fs_verdicts(mount: fs.Mount | None, server_pid: int) -> list[Verdict]:
    """The docroot really is that filesystem, with its options, in the server's view."""
    if mount is None:
        return []
    ok, detail = mount.verify(server_pid)
    return [Verdict("fs", "filesystem", Status.PASS if ok else Status.FAIL, detail)]


@dataclass
class Machine:
    """The run's cgroup: a machine profile's limits (`limited`), and in any case a group
    per component counting its CPU time. `group` is None where this machine does not let
    the lab make one (`why`): CPU is then counted per process, as the record says."""

    group: cgroups.Group | None
    limited: bool = False
    why: str = ""

    def join(self) -> Joiner | None:
        """What the servers run before exec (the stack's Site.join)."""
        return Joiner(self.group) if self.group else None

    def counters(self, started) -> dict[str, Callable[[], float | None]]:
        """Each running component's CPU-time reader (by label), for those in a group of
        their own (keyed by run directory, as spawn made them)."""
        if self.group is None:
            return {}
        return {s.label: partial(self.group.cpu_s, s.ctx.run_dir.name) for s in started
                if s.ctx.run_dir.name in self.group.parts}

    def usage(self) -> dict:
        return self.group.usage() if self.group else {}

    def record(self, counted: list[str]) -> dict:
        """How the run's CPU was counted, for its provenance; and what the kernel charged
        the stack's group in memory at its peak (`memory_peak_bytes`, from the servers'
        start, page cache they read included: what a memory limit is held to), where the
        group counts memory."""
        charged = ({"memory_peak_bytes": peak} if self.group is not None and
                   (peak := self.usage().get("memory_peak_bytes")) is not None else {})
        if self.group is None or not counted:
            return {"cpu": "processes", "why": self.why or "no component in a group",
                    **charged}
        place = self.group.counting
        return {"cpu": "cgroup", "hierarchy": f"v{place.hierarchy.version} "
                f"{'cpuacct' if place.hierarchy.version == 1 else 'cpu.stat'}",
                "group": str(place.dir), "components": counted, **charged}


@dataclass(frozen=True, eq=False)
class Joiner:
    """Called before exec, joins the whole group; through spawn (procs.PerComponent),
    the component's own group inside it."""

    group: cgroups.Group

    def __call__(self) -> None:
        self.group.preexec()()

    def preexec_for(self, run_dir: Path) -> Callable[[], None]:
        return self.group.preexec(run_dir.name if self.group.counting else None)


@contextmanager
def machine(knobs: dict[str, Any], run_id: str, state_dir: Path) -> Iterator[Machine]:
    """The run's cgroup for the stack's processes — with the machine profile's limits
    (machine.* knobs), else only counting — removed when the block ends (after the stack
    stopped). A profile that cannot be made is an error; a counting group that cannot,
    a Machine without one (CPU counted per process)."""
    profile = cgroups.Profile(knobs["cpus"] or None, knobs["cpu_quota"] or None,
                              knobs["memory_mb"] or None)
    if profile.controllers():
        group = cgroups.create_group(run_id, state_dir, profile)
        found = Machine(group, True, "" if group.counting else "the profile's group has no "
                        "directory that counts CPU time (no v1 cpuacct, no cgroup v2)")
    else:
        try:
            group = cgroups.accounting_group(run_id, state_dir)
        except (cgroups.CgroupError, OSError) as e:
            yield Machine(None, why=f"no cgroup for counting CPU: {e}")
            return
        found = Machine(group)
    try:
        yield found
    finally:
        try:
            group.close()
        except cgroups.CgroupError:
            if found.limited:
                raise
            # only counting: left recorded for the session's cleanup, after its servers
            # stop; the run's own error (a server that would not stop) is the one to show


def machine_verdicts(found: Machine, pids: list[int]) -> list[Verdict]:
    """Every server process is in the profile's groups, whose limits read back as set."""
    if not found.limited:
        return []
    out = []
    for pid in pids:
        ok, detail = found.group.verify(pid)
        out.append(Verdict("machine", "profile", Status.PASS if ok else Status.FAIL, detail))
    return out
