"""Apache httpd 2.4 as a reverse proxy and cache in front of a stack: mod_proxy_http to
one backend, mod_proxy_balancer over several, mod_cache (disk or socache) optionally in
front. Started as `apache2 -f <our config> -DFOREGROUND` under the event MPM; a component
of its own beside `apache`, so `apache-proxy > apache` has no knob named twice."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ...errors import StackError
from ...host.net import Endpoint
from ...measure.verify import CHECK_PATH, Verdict, check_keepalive, fetch
from ..apache.adapter import MODULES, child_died, number
from ..base import Component, RenderContext, RunningComponent
from ..templates import render_template
from .knobs import KNOBS, loadfactors, weights_problem
from .proxyverify import (VERIFY_PATH, check_backend_reuse, check_cache, check_passed,
                          check_spread)

HERE = Path(__file__).parent
# mod_status of the proxy itself, never passed: the stack behind has its own under
# /_stacklab/ (Apache's /_stacklab/server-status goes through to the backend).
STATUS_PATH = "/_stacklab/apache-proxy-status"
START_SERVERS = 2                  # Debian's for the event MPM
BASE_MODULES = ("authz_core", "authz_host", "status", "proxy", "proxy_http")
CACHE_MODULES = {"none": (), "disk": ("headers", "cache", "cache_disk"),
                 "socache": ("headers", "cache", "socache_shmcb", "cache_socache")}
BALANCER_MODULES = ("slotmem_shm", "proxy_balancer")
# Requests the balancer sent to member i (mod_status ?auto with ProxyStatus On).
ELECTED = "ProxyBalancer[0]Worker[{}]Elected"
# The fixed-width counter logs (see the template): two bytes a request. Not *.log: they
# are not what a failed start's log tail should show.
HITS_LOG, BACKEND_LOG, LINE_BYTES = "cache-hits.count", "backend.count", 2


class ApacheProxy(Component):
    name = "apache-proxy"
    package = "apache2"
    binary = "/usr/sbin/apache2"
    version_args = ("-v",)
    version_pattern = r"Apache/(\S+)"
    knobs = KNOBS
    layer = "proxy"
    balances = True
    spread_knobs = ("lbmethod",)
    requests_counter = "requests"

    def check(self, knobs: dict[str, Any]) -> str | None:
        if knobs["max_request_workers"] < knobs["threads_per_child"]:
            return (f"apache-proxy.max_request_workers ({knobs['max_request_workers']}) is "
                    f"below apache-proxy.threads_per_child ({knobs['threads_per_child']}): "
                    "not even one child's threads")
        problem = weights_problem(knobs["weights"])
        return f"apache-proxy.weights: {problem}" if problem else None

    def caches(self, knobs: dict[str, Any]) -> bool:
        return knobs["cache"] != "none"

    def shares(self, knobs: dict[str, Any], backends: int) -> list[float] | None:
        """byrequests promises each backend its loadfactor's share; bybusyness none. A
        StackError names the knob when the weights do not match the backends."""
        factors = loadfactors(knobs["weights"], backends)
        if knobs["lbmethod"] != "byrequests":
            return None
        return [f / sum(factors) for f in factors]

    def modules(self, knobs: dict[str, Any], backends: int, tls: bool) -> list[str]:
        mods = [*BASE_MODULES, *CACHE_MODULES[knobs["cache"]]]
        if backends > 1:
            mods += (*BALANCER_MODULES, f"lbmethod_{knobs['lbmethod']}")
        if tls:
            mods.append("ssl")
        return list(dict.fromkeys(mods))

    def render(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str]:
        if not ctx.backends:
            raise StackError("apache-proxy needs at least one backend (nothing behind it)")
        ctx.run_dir.chmod(0o755)
        (ctx.run_dir / "htdocs").mkdir(exist_ok=True)    # DocumentRoot: nothing served
        if knobs["cache"] == "disk":
            server_dir(ctx, "cache")
        if knobs["cache"] != "none" and knobs["cache_lock"]:
            server_dir(ctx, "cache-lock")
        tls = any(b.scheme == "https" for b in ctx.backends)
        text = render_template(
            HERE / "httpd-proxy.conf.j2", ctx, knobs, modules=MODULES,
            load_modules=self.modules(knobs, len(ctx.backends), tls),
            start_servers=START_SERVERS, status_path=STATUS_PATH, verify_path=VERIFY_PATH,
            check_path=CHECK_PATH, hits_log=HITS_LOG,
            backend_log=BACKEND_LOG,
            members=members(ctx.backends, knobs["weights"]), tls_backends=tls,
            reuse="" if knobs["backend_keepalive"] else " disablereuse=On")
        return {"httpd.conf": text}

    def command(self, ctx: RenderContext, knobs: dict[str, Any]) -> list[str]:
        return [self.binary, "-f", str(ctx.run_dir / "httpd.conf"), "-DFOREGROUND"]

    def processes(self, knobs: dict[str, Any]) -> int:
        """The parent and StartServers children (fewer when MaxRequestWorkers needs
        fewer)."""
        children = -(-knobs["max_request_workers"] // knobs["threads_per_child"])
        return 1 + min(START_SERVERS, children)

    def ready(self, started: RunningComponent) -> bool:
        """Its own status page answers (whether the stack behind answers is the stack's
        readiness, not the proxy's)."""
        status_fields(started.endpoint)
        return True

    def lost_worker(self, line: str) -> bool:
        return child_died(line)       # httpd's own wording

    def counters(self, started: RunningComponent) -> dict[str, float]:
        """mod_status's Total Accesses as `requests` (its own status page included); hits
        and backend answers from the fixed-width logs; per backend, the balancer's
        Elected count from mod_status (one backend: every backend answer)."""
        fields = status_fields(started.endpoint)
        run_dir = started.ctx.run_dir
        hits, passed = (log_lines(run_dir / name) for name in (HITS_LOG, BACKEND_LOG))
        out = {"requests": status_number(fields, "Total Accesses"), "cache_hits": hits,
               "cache_misses": passed}
        backends = started.ctx.backends
        if len(backends) == 1:
            return out | {"backend:0": passed}
        return out | {f"backend:{i}": status_number(fields, ELECTED.format(i))
                      for i in range(len(backends))}

    def verify(self, started: RunningComponent, front: RunningComponent) -> list[Verdict]:
        k, ep = started.knobs, started.endpoint
        verdicts = [check_keepalive(self.name, ep, STATUS_PATH + "?auto", k["keepalive"]),
                    check_passed(self, started), check_cache(self, started),
                    check_backend_reuse(self, started)]
        if len(started.ctx.backends) > 1:
            verdicts.append(check_spread(self, started))
        return verdicts


def server_dir(ctx: RenderContext, name: str) -> None:
    """A directory of the run the children write (as ctx.user), emptied: mod_cache_disk's
    CacheRoot (every start begins with a cold cache, as socache's shared memory does),
    CacheLockPath."""
    path = ctx.run_dir / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir()
    if ctx.user:
        shutil.chown(path, ctx.user, ctx.group)


def members(backends: tuple[Endpoint, ...], weights: str) -> list[dict[str, Any]]:
    """Each backend's URL for mod_proxy and its loadfactor; a StackError naming the knob
    when `weights` does not give one per backend."""
    factors = loadfactors(weights, len(backends))
    return [{"url": backend_url(b), "weight": w} for b, w in zip(backends, factors)]


def backend_url(ep: Endpoint) -> str:
    """mod_proxy's URL of a backend, without a path (a balancer appends the request's):
    TCP, or a unix socket (`unix:/path|http://localhost`)."""
    if ep.unix:
        return f"unix:{ep.unix}|{ep.scheme}://localhost"
    return f"{ep.scheme}://{ep.host}:{ep.port}"


def status_fields(ep: Endpoint) -> dict[str, str]:
    """The proxy's mod_status in machine-readable form (?auto): `Name: value` lines."""
    resp = fetch(ep, STATUS_PATH + "?auto")
    if resp.status != 200:
        raise OSError(f"{STATUS_PATH}: status {resp.status}")
    return dict(line.split(": ", 1) for line in resp.body.decode().splitlines() if ": " in line)


def status_number(fields: dict[str, str], name: str) -> float:
    """A counter of the status page; a ValueError naming it when the page lacks it."""
    if name not in fields:
        raise ValueError(f"{STATUS_PATH}?auto has no {name!r}")
    return number(fields[name])


def log_lines(path: Path) -> int:
    """Requests counted in a fixed-width log (Apache opens it as it starts)."""
    return path.stat().st_size // LINE_BYTES
