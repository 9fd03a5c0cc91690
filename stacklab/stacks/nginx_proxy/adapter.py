"""nginx as a reverse proxy in front of a whole stack: it spreads requests over the
stack's replicas (ctx.backends), may cache their answers on disk, and may serve the
docroot's files itself (S1's "nginx for static, the cache and Apache for dynamic").
Started from our own template with `-p <run dir>`; never /etc/nginx."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ...errors import StackError
from ...measure.verify import Verdict, fetch
from ..base import Component, RenderContext, RunningComponent
from ..nginx.adapter import parse_stub_status, worker_died
from ..templates import render_template
from .checks import verify_proxy
from .knobs import KNOBS, weights_problem
from .upstream import UPSTREAM_LOG, address, backend_weights, upstream_counts

HERE = Path(__file__).parent
STATUS_PATH = "/_stacklab/nginx-proxy-status"   # stub_status, answered here, not passed


class NginxProxy(Component):
    name = "nginx-proxy"
    package = "nginx"
    binary = "/usr/sbin/nginx"
    version_args = ("-v",)
    version_pattern = r"nginx/(\S+)"
    knobs = KNOBS
    layer = "proxy"
    balances = True
    spread_knobs = ("balance",)
    requests_counter = "requests"

    def check(self, knobs: dict[str, Any]) -> str | None:
        problem = weights_problem(knobs["weights"])
        if problem:
            return f"nginx-proxy.weights {problem}"
        if knobs["upstream_keepalive"] * 2 > knobs["worker_connections"]:
            return (f"nginx-proxy.upstream_keepalive = {knobs['upstream_keepalive']} idle "
                    f"backend connections leave no room for clients in "
                    f"nginx-proxy.worker_connections = {knobs['worker_connections']} "
                    "(at most half of it)")
        return None

    def caches(self, knobs: dict[str, Any]) -> bool:
        return knobs["cache"]

    def shares(self, knobs: dict[str, Any], backends: int) -> list[float] | None:
        """round_robin promises each backend its weight's share (one state shared by the
        workers); least_conn none (it follows open connections). A StackError names the
        knob when the weights do not match the backends."""
        weights = backend_weights(backends, knobs["weights"])
        if knobs["balance"] == "least_conn":
            return None
        return [w / sum(weights) for w in weights]

    def render(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str]:
        (ctx.run_dir / "tmp").mkdir(parents=True, exist_ok=True)
        weights = backend_weights(len(ctx.backends), knobs["weights"])
        schemes = {b.scheme for b in ctx.backends}
        if len(schemes) != 1:
            raise StackError(f"nginx-proxy needs backends of one scheme, got "
                             f"{', '.join(sorted(schemes)) or 'no backend'}")
        servers = [(address(b), w, b.unix is not None) for b, w in zip(ctx.backends, weights)]
        return {"nginx-proxy.conf": render_template(HERE / "nginx-proxy.conf.j2", ctx, knobs,
                                                    servers=servers, scheme=schemes.pop())}

    def processes(self, knobs: dict[str, Any]) -> int:
        """The master and its workers (auto: one per core), and with a cache its manager
        (the cache loader also runs, but exits a minute after the start)."""
        return 1 + (knobs["worker_processes"] or (os.cpu_count() or 1)) + knobs["cache"]

    def command(self, ctx: RenderContext, knobs: dict[str, Any]) -> list[str]:
        return [self.binary, "-p", str(ctx.run_dir),
                "-c", str(ctx.run_dir / "nginx-proxy.conf"), "-e", str(ctx.run_dir / "error.log")]

    def ready(self, started: RunningComponent) -> bool:
        """Its own status page: "/" would go to a backend, and into the cache and the
        counters, before any run."""
        return fetch(started.endpoint, STATUS_PATH, timeout_s=0.5).status == 200

    def counters(self, started: RunningComponent) -> dict[str, float]:
        """stub_status (connections accepted and handled, requests: this one included),
        requests sent to each backend (`backend:<i>`) and, with the cache on, cache_hits
        and cache_misses, counted from the upstream log."""
        resp = fetch(started.endpoint, STATUS_PATH)
        if resp.status != 200:
            raise OSError(f"{STATUS_PATH}: status {resp.status}")
        return parse_stub_status(resp.body.decode()) | upstream_counts(
            started.ctx.run_dir / UPSTREAM_LOG, [address(b) for b in started.ctx.backends],
            started.knobs["cache"])

    def lost_worker(self, line: str) -> bool:
        return worker_died(line)      # nginx's own wording

    def verify(self, started: RunningComponent, front: RunningComponent) -> list[Verdict]:
        return verify_proxy(started, lambda: self.counters(started))
