"""webfsd 1.21 (for the studies' boa), started in the foreground (`-F`) from our own
arguments and mime.types; never /etc/webfsd.conf nor /etc/mime.types."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from ...errors import StackError
from ...measure.verify import CHECK_PATH, Verdict, check_gzip, check_keepalive
from ..base import Component, RenderContext, RunningComponent
from ..templates import render_template
from .knobs import KNOBS

HERE = Path(__file__).parent


class Webfs(Component):
    name = "webfs"
    package = "webfs"
    binary = "/usr/bin/webfsd"
    knobs = KNOBS

    def render(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str]:
        if knobs["access_log"]:   # webfsd opens its log after dropping to user
            log = ctx.run_dir / "access.log"
            log.touch()
            if ctx.user:
                shutil.chown(log, ctx.user, ctx.group)
        return {"mime.types": render_template(HERE / "mime.types.j2", ctx, knobs)}

    def command(self, ctx: RenderContext, knobs: dict[str, Any]) -> list[str]:
        argv = [self.binary, "-F", "-4", "-i", ctx.host, "-p", str(ctx.port),
                "-r", str(ctx.docroot), "-f", "index.html", "-j", "-n", "localhost",
                "-m", str(ctx.run_dir / "mime.types"),
                "-t", str(knobs["timeout"]), "-c", str(knobs["max_connections"]),
                "-a", str(knobs["dir_cache"])]
        if knobs["access_log"]:
            argv += ["-L", str(ctx.run_dir / "access.log")]
        if knobs["expires"]:
            argv += ["-e", str(knobs["expires"])]
        if ctx.user:
            argv += ["-u", ctx.user, "-g", ctx.group]
        return argv

    def verify(self, started: RunningComponent, front: RunningComponent) -> list[Verdict]:
        # What it cannot change, checked all the same: keep-alive on, nothing compressed.
        ep = started.endpoint
        return [check_keepalive(self.name, ep, CHECK_PATH, True),
                check_gzip(self.name, ep, CHECK_PATH, False)]

    def version(self) -> str:
        # webfsd has no version flag: its usage text names none either, so ask dpkg.
        try:
            out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", self.package],
                                 capture_output=True, text=True, timeout=10)
        except OSError as e:
            raise StackError(f"webfs: cannot run dpkg-query: {e}") from e
        m = re.match(r"(?:\d+:)?([\d.]+)", out.stdout)
        if out.returncode != 0 or not m:
            raise StackError(f"webfs: package {self.package} not installed")
        return m.group(1)
