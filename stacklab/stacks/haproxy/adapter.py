"""HAProxy, a balancer in front of a stack's replicas (ctx.backends), started from our
own haproxy.cfg in the run directory; never /etc/haproxy.

It runs in master-worker mode in the foreground (`-W`, no daemon), as Debian's own unit
does (`-Ws`): the master writes the pid file (HAProxy writes none with `-db`), stays
idle, and stops its worker when the process group is signalled. The worker does the
work, with `nbthread` threads. No health checks (`check`): a replica that dies during a
run must show as errors (503s, econ), not as a smaller stack quietly measured in its
place; verify refuses to pass until every backend answers.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from ...errors import StackError
from ...measure.verify import Status, Verdict
from ..base import Component, RenderContext, RunningComponent
from ..templates import render_template
from . import stats
from .knobs import COMPONENT, KNOBS, weights_for, weights_problem
from .verify import check_backends_up, check_client_side, check_server_side, check_spread

HERE = Path(__file__).parent


class HAProxy(Component):
    name = COMPONENT
    package = "haproxy"
    binary = "/usr/sbin/haproxy"
    version_args = ("-v",)
    version_pattern = r"HAProxy version (\S+)"
    knobs = KNOBS
    layer = "balancer"
    balances = True
    spread_knobs = ("balance",)
    requests_counter = "requests"

    def render(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str]:
        if not ctx.backends:
            raise StackError(f"{self.name} needs at least one backend (none given)")
        weights = weights_for(knobs["weights"], len(ctx.backends))
        servers = [{"name": stats.server_name(i), "endpoint": ep, "weight": w}
                   for i, (ep, w) in enumerate(zip(ctx.backends, weights))]
        return {"haproxy.cfg": render_template(HERE / "haproxy.cfg.j2", ctx, knobs,
                                               servers=servers,
                                               stats_socket=stats.socket_path(ctx.run_dir))}

    def command(self, ctx: RenderContext, knobs: dict[str, Any]) -> list[str]:
        return [self.binary, "-W", "-f", str(ctx.run_dir / "haproxy.cfg")]

    def processes(self, knobs: dict[str, Any]) -> int:
        """The master and its one worker (threads are not processes)."""
        return 2

    def ready(self, started: RunningComponent) -> bool:
        """The worker answers on the stats socket in our run directory (so it is ours,
        and its listeners are bound). Not a request through the frontend: that would
        wait on the backends, which need not be up for HAProxy to be."""
        return "Pid: " in stats.ask(stats.socket_path(started.ctx.run_dir), "show info", 0.5)

    def check(self, knobs: dict[str, Any]) -> str | None:
        """Only the weights' format: their count is checked against the backends when
        the config is rendered (a knob's value alone does not know them)."""
        problem = weights_problem(knobs["weights"])
        return f"{self.name}.weights: {problem}" if problem else None

    def shares(self, knobs: dict[str, Any], backends: int) -> list[float] | None:
        """roundrobin and static-rr promise each backend its weight's share; leastconn
        promises none (it follows open connections)."""
        weights = weights_for(knobs["weights"], backends)
        if knobs["balance"] == "leastconn":
            return None
        return [w / sum(weights) for w in weights]

    def counters(self, started: RunningComponent) -> dict[str, float]:
        """`show stat` on the stats socket: requests (the frontend's req_tot), client
        connections (stot), ereq, hrsp_4xx, hrsp_5xx; towards the backends econ, eresp,
        wretr, wredis, connect, reuse; and backend:<i>, requests ctx.backends[i]
        answered."""
        return stats.counters(stats.socket_path(started.ctx.run_dir), len(started.ctx.backends))

    def verify(self, started: RunningComponent, front: RunningComponent) -> list[Verdict]:
        k, ep, backends = started.knobs, started.endpoint, started.ctx.backends
        up = check_backends_up(self.name, backends)
        if up.status is not Status.PASS:
            return [up]
        counters = partial(self.counters, started)
        weights = weights_for(k["weights"], len(backends))
        return [up, check_spread(self.name, ep, counters, k["balance"], weights),
                check_client_side(self.name, ep, k["http_mode"]),
                check_server_side(self.name, ep, counters, k["http_mode"], len(backends))]
