"""Varnish Cache 7.1 in front of a stack: varnishd in the foreground (-F) from our own VCL,
with its own instance directory (-n) in the run directory; never /etc/varnish."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from ...errors import StackError
from ...measure.verify import CHECK_PATH, Verdict, fetch
from ..base import Component, RenderContext, RunningComponent
from ..templates import render_template
from .knobs import KNOBS
from .verify import VERIFY_PREFIX, check_cached, check_cookies

HERE = Path(__file__).parent
VARNISHSTAT = "/usr/bin/varnishstat"
# MAIN counters kept with a run, under their own names. n_object is a level, kept because
# its change over a run is the number of objects the run added to the cache.
KEPT = ("client_req", "cache_hit", "cache_hit_grace", "cache_hitpass", "cache_hitmiss",
        "cache_miss", "s_pass", "s_pipe", "s_synth", "s_fetch", "backend_req",
        "backend_conn", "backend_reuse", "backend_fail", "fetch_failed", "n_expired",
        "n_lru_nuked", "sess_dropped", "thread_queue_len", "n_object")
# Requests the backend answered: misses and passes. A hit on a hit-for-miss marker is
# counted in cache_hitmiss AND cache_miss, one on a hit-for-pass marker in cache_hitpass
# AND s_pass (3 requests for an uncacheable page: cache_miss +3, cache_hitmiss +2), so
# those two are kept but not added again.
MISSES = ("cache_miss", "s_pass")


class Varnish(Component):
    name = "varnish"
    package = "varnish"
    binary = "/usr/sbin/varnishd"
    version_args = ("-V",)
    version_pattern = r"varnish-(\S+)"
    knobs = KNOBS
    layer = "cache"
    balances = True
    tls_to_backends = False   # plain HTTP to its backends only
    requests_counter = "client_req"

    def caches(self, knobs: dict[str, Any]) -> bool:
        return True

    def check(self, knobs: dict[str, Any]) -> str | None:
        if knobs["thread_pool_min"] > knobs["thread_pool_max"]:
            return (f"varnish.thread_pool_min ({knobs['thread_pool_min']}) is above "
                    f"varnish.thread_pool_max ({knobs['thread_pool_max']})")
        return None

    def overrides_headers(self, knobs: dict[str, Any]) -> bool:
        """Either rule set aside stores pages the backend's headers keep out of a cache:
        no-store or expired ones (honour_cache_control off), Set-Cookie ones (honour_cookies
        off)."""
        return not (knobs["honour_cache_control"] and knobs["honour_cookies"])

    def shares(self, knobs: dict[str, Any], backends: int) -> list[float] | None:
        """Round robin: each backend an equal share of what reaches the backends."""
        return [1 / backends] * backends

    def render(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str]:
        if not ctx.backends:
            raise StackError("varnish needs a stack behind it (no backends given)")
        tls = [f"{b.host}:{b.port}" for b in ctx.backends if b.scheme != "http"]
        if tls:
            raise StackError(f"varnish speaks plain HTTP to its backends, not "
                             f"{ctx.backends[0].scheme} ({', '.join(tls)})")
        return {"default.vcl": render_template(HERE / "default.vcl.j2", ctx, knobs,
                                               check_path=CHECK_PATH,
                                               verify_prefix=VERIFY_PREFIX)}

    def command(self, ctx: RenderContext, knobs: dict[str, Any]) -> list[str]:
        # The thread pool's lower bound first: it may not pass the upper one at any time,
        # and thread_pool_min's largest value is thread_pool_max's default.
        params = {"default_grace": knobs["grace"], "thread_pools": knobs["thread_pools"],
                  "thread_pool_min": knobs["thread_pool_min"],
                  "thread_pool_max": knobs["thread_pool_max"]}
        # -T none: no management port; nothing here talks to it, and the ephemeral port
        # it would take could be one free_port() has just handed to another server.
        argv = [self.binary, "-F", "-a", f"{ctx.host}:{ctx.port}", "-T", "none",
                "-f", str(ctx.run_dir / "default.vcl"), "-n", str(workdir(ctx)),
                "-s", f"malloc,{knobs['storage_mb']}M", "-t", str(knobs["ttl"]),
                *jail(ctx)]
        for name, value in params.items():
            argv += ["-p", f"{name}={value}"]
        return argv

    def processes(self, knobs: dict[str, Any]) -> int:
        """The manager and its cache child (the VCL compiler comes and goes before)."""
        return 2

    def ready(self, started: RunningComponent) -> bool:
        """An answer on the check page, which is passed: readiness leaves the cache empty
        (on "/" it would hand the first measured request a hit)."""
        fetch(started.endpoint, CHECK_PATH, timeout_s=0.5)
        return True

    def counters(self, started: RunningComponent) -> dict[str, float]:
        """varnishstat's JSON for this instance (-n): the MAIN counters in KEPT, hits and
        misses normalized, and the requests each backend was sent (VBE.*.b<i>.req)."""
        try:
            out = subprocess.run([VARNISHSTAT, "-n", str(workdir(started.ctx)), "-j",
                                  "-t", "2", "-I", "MAIN.*", "-I", "VBE.*"],
                                 capture_output=True, text=True, timeout=10)
        except subprocess.TimeoutExpired as e:
            raise OSError(f"varnishstat did not answer within {e.timeout:g} s") from e
        if out.returncode != 0:
            raise OSError(f"varnishstat exited {out.returncode}: {out.stderr.strip()[:200]}")
        return parse_varnishstat(out.stdout, len(started.ctx.backends))

    def verify(self, started: RunningComponent, front: RunningComponent) -> list[Verdict]:
        """Through Varnish itself (the checks' URL must reach its cache, whatever stands in
        front): a page cached as the knobs say, then the Cookie rule on a cached page."""
        cached = check_cached(self, started)
        return [cached, check_cookies(self, started, cached)]


def workdir(ctx: RenderContext) -> Path:
    """This instance's directory (-n): its shared memory (what varnishstat reads), the
    compiled VCL and the secret of its management port."""
    return ctx.run_dir / "varnishd"


def jail(ctx: RenderContext) -> list[str]:
    """The unix jail with the lab's server user as both its users (user= the manager's
    effective uid and the VCL compiler, workuser= the cache child), instead of Debian's
    varnish and vcache: the stack's processes all run as one user, as the other components
    do, and the instance directory in the run directory belongs to it, not to accounts
    stacklab does not own. The manager keeps root only as its saved uid, to open the VCL
    and the listening socket. The group is the user's own (the jail has no group option;
    the lab's users are www-data or nobody, with their own groups). Without a user to drop
    to (not root), jail none: it already runs as whoever started it."""
    if ctx.user and os.getuid() == 0:
        return ["-j", f"unix,user={ctx.user},workuser={ctx.user}"]
    return ["-j", "none"]


def parse_varnishstat(text: str, backends: int) -> dict[str, float]:
    """`varnishstat -j` (version 1: {"counters": {"MAIN.cache_hit": {"value": n}}}) as
    stacklab's counters; a ValueError when it is not that format."""
    doc = json.loads(text)
    if doc.get("version") != 1 or not isinstance(doc.get("counters"), dict):
        raise ValueError(f"unexpected varnishstat output {text[:200]!r}")
    values = {name: entry["value"] for name, entry in doc["counters"].items()}
    out = {name: values[f"MAIN.{name}"] for name in KEPT if f"MAIN.{name}" in values}
    missing = [name for name in ("cache_hit", *MISSES) if name not in out]
    if missing:
        raise ValueError(f"varnishstat has no MAIN.{', MAIN.'.join(missing)}")
    out["cache_hits"] = out["cache_hit"]
    out["cache_misses"] = sum(out[name] for name in MISSES)
    for i in range(backends):     # VBE.<vcl>.b<i>.req: "boot", the only VCL loaded
        sent = [v for name, v in values.items()
                if name.startswith("VBE.") and name.endswith(f".b{i}.req")]
        if sent:
            out[f"backend:{i}"] = sum(sent)
    return out
