"""PHP-FPM (Debian's version, found once in php/install.py) from our own php-fpm.conf and
php.ini (`-y`, PHPRC); never /etc/php. It provides php:fpm-fcgi to the web server in front."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path
from typing import Any

from ...host import lab
from ...host.net import Endpoint, socket_ready
from .. import php
from ..base import Component, RenderContext, RunningComponent
from ..php import install, php_env, render_php_config
from ..templates import render_template
from . import fcgi
from .knobs import KNOBS

HERE = Path(__file__).parent
STATUS_PATH = "/_stacklab/fpm-status"   # pm.status_path: asked over FastCGI, never routed
# The status page's counters (its other fields are levels: processes, the listen queue).
STATUS_COUNTERS = ("accepted conn", "max children reached", "slow requests")
# A child that died by a signal, in PHP-FPM's error log: "[pool www] child 13 exited on
# signal 9 (SIGKILL) after 2.0 seconds". Its pm ends idle children with SIGQUIT (the
# normal reaping of pm = dynamic and ondemand), which is not a death.
CHILD_DIED = re.compile(r"exited on signal (\d+)")
REAPING = signal.SIGQUIT


class PhpFpm(Component):
    name = "php-fpm"
    package = install.FPM_PACKAGE
    binary = install.FPM_BINARY
    version_args = ("-n", "-v")
    version_pattern = r"PHP (\S+)"
    knobs = KNOBS
    groups = ("php",)
    provides = (php.FPM_FCGI,)

    def check(self, knobs: dict[str, Any]) -> str | None:
        if knobs["pm"] == "dynamic":
            lo, start, hi = (knobs["min_spare_servers"], knobs["start_servers"],
                             knobs["max_spare_servers"])
            if not lo <= start <= hi <= knobs["max_children"]:
                return ("php-fpm pm = dynamic needs min_spare_servers <= start_servers <= "
                        f"max_spare_servers <= max_children (got {lo}, {start}, {hi}, "
                        f"{knobs['max_children']})")
        return None

    def endpoint(self, ctx: RenderContext, knobs: dict[str, Any]) -> Endpoint:
        unix = (lab.socket_path(ctx.run_dir, "php-fpm.sock", self.name)
                if knobs["listen"] == "unix" else None)
        return Endpoint(ctx.host, ctx.port, unix, scheme="fcgi")

    def render(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str]:
        ep = self.endpoint(ctx, knobs)
        listen = str(ep.unix) if ep.unix else f"{ep.host}:{ep.port}"
        ctx.run_dir.chmod(0o755)
        files = render_php_config(ctx.run_dir, ctx.groups["php"], ctx.upstreams)
        files["php-fpm.conf"] = render_template(HERE / "php-fpm.conf.j2", ctx, knobs,
                                                listen=listen, status_path=STATUS_PATH)
        log = ctx.run_dir / "php-error.log"
        log.touch()
        log.chmod(0o666)
        return files

    def command(self, ctx: RenderContext, knobs: dict[str, Any]) -> list[str]:
        argv = [self.binary, "--nodaemonize", "--fpm-config", str(ctx.run_dir / "php-fpm.conf"),
                "--php-ini", str(ctx.run_dir / "php.ini")]
        return argv + (["--allow-to-run-as-root"] if os.getuid() == 0 else [])

    def env(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str]:
        return php_env(ctx.run_dir)

    def processes(self, knobs: dict[str, Any]) -> int:
        """The master and the children the process manager forks at start."""
        children = {"static": knobs["max_children"], "dynamic": knobs["start_servers"],
                    "ondemand": 0}[knobs["pm"]]
        return 1 + children

    def ready(self, started: RunningComponent) -> bool:
        return socket_ready(started.endpoint)

    def counters(self, started: RunningComponent) -> dict[str, float]:
        """The pool's status page (?json): connections accepted, times pm.max_children
        was reached, slow requests."""
        _, body = fcgi.get(started.endpoint, STATUS_PATH, "json")
        status = json.loads(body)
        return {name: status[name] for name in STATUS_COUNTERS if name in status}

    def lost_worker(self, line: str) -> bool:
        died = CHILD_DIED.search(line)
        return died is not None and int(died[1]) != REAPING
