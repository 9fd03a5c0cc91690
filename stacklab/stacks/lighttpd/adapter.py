"""lighttpd 1.4, started as `lighttpd -D -f <our config>`; never /etc/lighttpd."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ...host import procs
from ...host.net import Endpoint
from ...measure.verify import CHECK_PATH, Status, Verdict, check_gzip, check_keepalive
from ..base import Component, RenderContext, RunningComponent
from ..http2 import check_http2, protocol_problem
from ..templates import render_template
from ..tlsrules import tls_inert
from ..tlsverify import check_tls
from .knobs import KNOBS

HERE = Path(__file__).parent
MODULES = Path("/usr/lib/lighttpd")
# Modules Debian ships in packages of their own (mod_fastcgi is built into lighttpd).
MODULE_PACKAGES = {"deflate": "lighttpd-mod-deflate", "tls": "lighttpd-mod-openssl"}
MODULE_FILES = {"deflate": "mod_deflate.so", "tls": "mod_openssl.so"}


class Lighttpd(Component):
    name = "lighttpd"
    package = "lighttpd"
    binary = "/usr/sbin/lighttpd"
    version_args = ("-v",)
    version_pattern = r"lighttpd/(\S+)"
    knobs = KNOBS

    def check(self, knobs: dict[str, Any]) -> str | None:
        for knob, package in MODULE_PACKAGES.items():
            if knobs[knob] and not (MODULES / MODULE_FILES[knob]).exists():
                return (f"lighttpd.{knob} needs {MODULES / MODULE_FILES[knob]}: "
                        f"apt-get install {package}")
        return None

    def processes(self, knobs: dict[str, Any]) -> int:
        """One process, or a parent and server.max-worker forked workers."""
        return 1 + knobs["max_worker"]

    def inert(self, knobs: dict[str, dict[str, Any]]) -> dict[str, str]:
        """Knobs that cannot act with these values beyond their own `acts_with`, and why."""
        k, out = knobs[self.name], {}
        if k["max_keep_alive_requests"] == 0:
            out["lighttpd.max_keep_alive_idle"] = ("acts only with keep-alive on "
                                                   "(lighttpd.max_keep_alive_requests > 0)")
        return out | tls_inert(self.name, k)

    def endpoint(self, ctx: RenderContext, knobs: dict[str, Any]) -> Endpoint:
        return Endpoint(ctx.host, ctx.port, scheme="https" if knobs["tls"] else "http")

    def protocol_problem(self, knobs: dict[str, Any], protocol: str) -> str | None:
        return protocol_problem(self.name, knobs, protocol)

    def render(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str]:
        # lighttpd drops to ctx.user before it opens its logs and configures its modules.
        ctx.run_dir.chmod(0o755)
        for sub in ("tmp", "deflate-cache"):
            (ctx.run_dir / sub).mkdir(exist_ok=True)
        for log in ("error.log", "access.log"):
            (ctx.run_dir / log).touch()
        if ctx.user:
            for rel in ("tmp", "deflate-cache", "error.log", "access.log"):
                shutil.chown(ctx.run_dir / rel, ctx.user, ctx.group)
        return {"lighttpd.conf": render_template(HERE / "lighttpd.conf.j2", ctx, knobs,
                                                 protocols=knobs["tls_protocols"].split())}

    def command(self, ctx: RenderContext, knobs: dict[str, Any]) -> list[str]:
        return [self.binary, "-D", "-f", str(ctx.run_dir / "lighttpd.conf")]

    def verify(self, started: RunningComponent, front: RunningComponent) -> list[Verdict]:
        k, ep = started.knobs, started.endpoint
        verdicts = [check_keepalive(self.name, ep, CHECK_PATH, k["max_keep_alive_requests"] > 0),
                    check_gzip(self.name, ep, CHECK_PATH, k["deflate"]),
                    self._check_workers(started)]
        if k["tls"]:
            verdicts += check_tls(self.name, ep, k)
        return verdicts + [check_http2(self.name, ep, k["http2"])]

    def _check_workers(self, started: RunningComponent) -> Verdict:
        """server.max-worker = N forks N workers beside the parent; 0 is one process."""
        want = started.knobs["max_worker"] + 1 if started.knobs["max_worker"] else 1
        running = len(procs.group_members(started.proc.pgid))
        ok = running == want
        return Verdict(self.name, "workers", Status.PASS if ok else Status.FAIL,
                       f"{running} lighttpd processes" + ("" if ok else f", expected {want}"))
