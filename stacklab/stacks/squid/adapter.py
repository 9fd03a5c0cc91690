"""Squid 5 as a caching reverse proxy (an accelerator) in front of a stack: one process
(-N) from our own squid.conf in the run directory, its logs, pid file and disk cache
there too; never /etc/squid, never /var/spool/squid."""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import subprocess
from pathlib import Path
from typing import Any

from ...host import procs
from ...errors import StackError
from ...host.net import Endpoint
from ...measure.verify import Verdict, fetch
from ..base import Component, RenderContext, RunningComponent
from ..templates import render_template
from .knobs import KNOBS
from .verify import VERIFY_PAGE, VERIFY_PATH, verify_cache

HERE = Path(__file__).parent
CONF = "squid.conf"
SWAP_DIR = "cache"              # the aufs cache_dir, under the run directory
SHM_DIR = Path("/dev/shm")      # where shm_open(3) puts squid's shared memory segments
MANAGER_PATH = "/squid-internal-mgr/counters"
# Debian's squid is built --with-default-user=proxy: what it drops to as root when its
# config names no cache_effective_user.
BUILT_IN_USER = "proxy"
# The manager's `counters` kept with a run: cumulative (its sample_time is a timestamp;
# cd.memory and cd.local_memory are levels).
COUNTERS = ("client_http.requests", "client_http.hits", "client_http.errors",
            "client_http.kbytes_in", "client_http.kbytes_out", "client_http.hit_kbytes_out",
            "server.all.requests", "server.all.errors", "server.http.requests",
            "server.http.errors", "server.http.kbytes_in", "server.http.kbytes_out",
            "swap.outs", "swap.ins", "swap.files_cleaned", "aborted_requests",
            "page_faults", "select_loops", "cpu_time")
ERRORPAGE_CSS = "/* squid's error pages, without Debian's /etc/squid/errorpage.css */\n"


class Squid(Component):
    name = "squid"
    package = "squid"
    binary = "/usr/sbin/squid"
    version_args = ("-v",)
    version_pattern = r"Version (\S+)"
    knobs = KNOBS
    layer = "cache"
    balances = False
    tls_to_backends = False   # plain HTTP to its backends only
    unix_to_backends = False  # … over TCP only
    requests_counter = "client_http.requests"

    def caches(self, knobs: dict[str, Any]) -> bool:
        return True

    def render(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str]:
        user, group = drops_to(ctx) or (None, None)
        conf = render_template(HERE / "squid.conf.j2", ctx, knobs, backend=backend_of(ctx),
                               effective_user=user, effective_group=group)
        return {CONF: conf, "errorpage.css": ERRORPAGE_CSS}

    def command(self, ctx: RenderContext, knobs: dict[str, Any]) -> list[str]:
        """-N: no daemon and no kids (the master serves); -n: its own shared memory
        segments; no -d: cache.log has it all."""
        return [self.binary, "-N", "-n", service_name(ctx), "-f", str(ctx.run_dir / CONF)]

    def start(self, ctx: RenderContext, knobs: dict[str, Any],
              ready_timeout_s: float = 15.0, run_as: str | None = None) -> RunningComponent:
        """Squid writes its logs, pid file and cache as the user it drops to (or
        `run_as`), so the run directory is that user's. A disk cache starts empty (a cold
        cache at every start, as the studies restarted servers) and needs `squid -z` to
        make its swap directories: squid refuses to start without them."""
        ctx.run_dir.mkdir(parents=True, exist_ok=True)
        if owner := writes_as(ctx, run_as):
            entry = pwd.getpwnam(owner)
            for path in (ctx.run_dir, *ctx.run_dir.iterdir()):   # logs of a start before
                os.chown(path, entry.pw_uid, entry.pw_gid)
        if knobs["disk_cache_mb"]:
            self._make_swap_dirs(ctx, knobs, run_as)
        remove_segments(ctx)          # of a squid killed in this run directory before
        return super().start(ctx, knobs, ready_timeout_s, run_as)

    def stop(self, started: RunningComponent) -> None:
        """A squid that had to be killed leaves its shared memory segments behind."""
        try:
            super().stop(started)
        finally:
            remove_segments(started.ctx)

    def _make_swap_dirs(self, ctx: RenderContext, knobs: dict[str, Any],
                        run_as: str | None) -> None:
        shutil.rmtree(ctx.run_dir / SWAP_DIR, ignore_errors=True)
        conf = ctx.run_dir / CONF
        conf.write_text(self.render(ctx, knobs)[CONF])
        argv = [self.binary, "-z", "-N", "-n", service_name(ctx), "-f", str(conf)]
        done = subprocess.run(argv, cwd=ctx.run_dir, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=60, user=run_as,
                              group=pwd.getpwnam(run_as).pw_gid if run_as else None)
        if done.returncode != 0:
            raise StackError(f"squid -z (creating the swap directories) exited with "
                             f"{done.returncode}", procs.log_tail(ctx.run_dir / "cache.log",
                                                                  20) + done.stderr)

    def processes(self, knobs: dict[str, Any]) -> int:
        """One: -N runs no kids, aufs does its disk I/O in threads (no unlinkd), the
        pinger is off and logs are written by squid itself (no log daemons)."""
        return 1

    def check(self, knobs: dict[str, Any]) -> str | None:
        mem, disk = knobs["cache_mem_mb"], knobs["disk_cache_mb"]
        if mem == 0 and disk == 0:
            return "squid.cache_mem_mb = 0 with squid.disk_cache_mb = 0 leaves no cache"
        if mem and knobs["maximum_object_size_in_memory_kb"] > mem * 1024:
            return (f"squid.maximum_object_size_in_memory_kb = "
                    f"{knobs['maximum_object_size_in_memory_kb']} is more than all of "
                    f"squid.cache_mem_mb = {mem}")
        if disk and knobs["maximum_object_size_kb"] > disk * 1024:
            return (f"squid.maximum_object_size_kb = {knobs['maximum_object_size_kb']} is "
                    f"more than the whole disk cache (squid.disk_cache_mb = {disk})")
        return None

    def inert(self, knobs: dict[str, dict[str, Any]]) -> dict[str, str]:
        """Without a disk cache an object is stored only if it fits in memory, so the
        larger limit cannot act; without a memory cache, the in-memory limit cannot."""
        k, out = knobs[self.name], {}
        if not k["disk_cache_mb"] and \
                k["maximum_object_size_kb"] > k["maximum_object_size_in_memory_kb"]:
            out["squid.maximum_object_size_kb"] = (
                "acts only with a disk cache (squid.disk_cache_mb > 0): in memory, "
                "squid.maximum_object_size_in_memory_kb is the limit")
        if not k["cache_mem_mb"]:
            out["squid.maximum_object_size_in_memory_kb"] = (
                "acts only with a memory cache (squid.cache_mem_mb > 0)")
        return out

    def counters(self, started: RunningComponent) -> dict[str, float]:
        """The cache manager's `counters`, asked from localhost on squid's own port: one
        small request for exact figures squid keeps whatever it logs, where counting an
        access log's TCP_HIT/TCP_MISS lines reads a file that grows by a line per request.
        Normalized: cache_hits = client_http.hits (served from the cache: TCP_HIT,
        TCP_MEM_HIT, and TCP_REFRESH_UNMODIFIED, a revalidation the backend answered with
        304); cache_misses = server.http.requests (every request that reached the backend:
        misses, passes, revalidations). The manager's own requests count in
        client_http.requests, never in either."""
        resp = fetch(started.endpoint, MANAGER_PATH)
        if resp.status != 200:
            raise OSError(f"{MANAGER_PATH}: status {resp.status}")
        found = parse_counters(resp.body.decode())
        missing = [name for name in COUNTERS if name not in found]
        if missing:
            raise ValueError(f"{MANAGER_PATH} lacks {', '.join(missing)}")
        return {**{name: found[name] for name in COUNTERS},
                "cache_hits": found["client_http.hits"],
                "cache_misses": found["server.http.requests"]}

    def docroot_files(self, docroot: Path, knobs: dict[str, Any]) -> dict[str, bytes]:
        """verify()'s cacheable page: every URL under /_stacklab/ is passed, so the
        check page cannot show a hit."""
        return {VERIFY_PATH: VERIFY_PAGE}

    def verify(self, started: RunningComponent, front: RunningComponent) -> list[Verdict]:
        return verify_cache(self, started)


def parse_counters(text: str) -> dict[str, float]:
    """The manager's `counters` report: one `name = value` line per counter (the
    sample_time line carries a date after its value)."""
    found = {}
    for line in text.splitlines():
        name, sep, value = line.partition(" = ")
        if sep:
            found[name.strip()] = float(value.split()[0])
    return found


def service_name(ctx: RenderContext) -> str:
    """squid's -n, one per run directory (alphanumeric, as squid requires). Even with -N
    squid makes shared memory segments named after it (/dev/shm/squid-cf__*.shm by
    default): a second squid on the machine under the same name dies at start
    (shm_open: File exists)."""
    return "stacklab" + hashlib.sha256(str(ctx.run_dir).encode()).hexdigest()[:16]


def remove_segments(ctx: RenderContext) -> None:
    for segment in SHM_DIR.glob(f"{service_name(ctx)}-*.shm"):
        segment.unlink(missing_ok=True)


def drops_to(ctx: RenderContext) -> tuple[str, str] | None:
    """cache_effective_user and group: the lab's server user, when squid starts as root
    and the lab names one (else none is written: as root squid drops to its built-in
    `proxy`, as anyone else it keeps the user that started it)."""
    if os.getuid() == 0 and ctx.user:
        return ctx.user, ctx.group or ctx.user
    return None


def writes_as(ctx: RenderContext, run_as: str | None) -> str | None:
    """The user squid writes its files as: `run_as`, or the user it drops to as root;
    None when it runs as whoever runs stacklab."""
    if run_as or os.getuid() != 0:
        return run_as
    return (drops_to(ctx) or (BUILT_IN_USER,))[0]


def backend_of(ctx: RenderContext) -> Endpoint:
    """The one HTTP backend squid talks to (it does not balance)."""
    if len(ctx.backends) != 1:
        raise StackError(f"squid needs exactly one backend (it does not balance); "
                         f"given {len(ctx.backends)}")
    backend = ctx.backends[0]
    if backend.unix or backend.scheme != "http":
        raise StackError(f"squid talks plain HTTP over TCP to its backend, not "
                         f"{backend.unix or backend.scheme + '://'}")
    return backend
