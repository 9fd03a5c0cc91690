"""mini_httpd 1.30 (for the studies' thttpd), started in the foreground (`-D`) from our
own arguments (its config file does not take every option, e.g. maxage); never
/etc/mini-httpd.conf."""

from __future__ import annotations

from typing import Any

from ...measure.verify import CHECK_PATH, Verdict, check_gzip, check_keepalive
from ..base import Component, RenderContext, RunningComponent
from .knobs import KNOBS


class MiniHttpd(Component):
    name = "mini-httpd"
    package = "mini-httpd"
    binary = "/usr/sbin/mini_httpd"
    version_args = ("-V",)
    version_pattern = r"mini_httpd/(\S+)"
    knobs = KNOBS

    def render(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str]:
        return {}   # everything is in its arguments; it opens its log before dropping user

    def command(self, ctx: RenderContext, knobs: dict[str, Any]) -> list[str]:
        argv = [self.binary, "-D", "-h", ctx.host, "-p", str(ctx.port),
                "-d", str(ctx.docroot), "-i", str(ctx.run_dir / "mini_httpd.pid")]
        if ctx.user:   # as root it would otherwise become nobody
            argv += ["-u", ctx.user]
        if knobs["access_log"]:
            argv += ["-l", str(ctx.run_dir / "access.log")]
        if knobs["max_age"]:
            argv += ["-M", str(knobs["max_age"])]
        return argv

    def verify(self, started: RunningComponent, front: RunningComponent) -> list[Verdict]:
        # What it cannot change, checked all the same: every connection closes after one
        # response, and nothing is compressed.
        ep = started.endpoint
        return [check_keepalive(self.name, ep, CHECK_PATH, False),
                check_gzip(self.name, ep, CHECK_PATH, False)]
