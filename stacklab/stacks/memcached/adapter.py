"""memcached on loopback TCP (UDP off): PHP's session store (S3's memcache handler)."""

from __future__ import annotations

import os
import socket
from typing import Any

from ...net import Endpoint, socket_ready
from ...verify import Status, Verdict, fetch
from ..base import Component, RenderContext, Started
from .knobs import KNOBS

SESSION_PAGE = "/session.php"


def stats(ep: Endpoint) -> dict[str, str]:
    """The text protocol's `stats` (a machine protocol: STAT name value, then END)."""
    with socket.create_connection((ep.host, ep.port), 2.0) as s:
        s.sendall(b"stats\r\n")
        data = b""
        while not data.endswith(b"END\r\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return {parts[1]: parts[2] for parts in (line.split(" ", 2)
            for line in data.decode().splitlines()) if parts[0] == "STAT" and len(parts) == 3}


class Memcached(Component):
    name = "memcached"
    package = "memcached"
    binary = "/usr/bin/memcached"
    version_args = ("-V",)
    version_pattern = r"memcached (\S+)"
    knobs = KNOBS

    def endpoint(self, ctx: RenderContext, knobs: dict[str, Any]) -> Endpoint:
        return Endpoint(ctx.host, ctx.port, scheme="memcache")

    def render(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str]:
        return {}   # configured entirely by its argv

    def command(self, ctx: RenderContext, knobs: dict[str, Any]) -> list[str]:
        argv = [self.binary, "-l", ctx.host, "-p", str(ctx.port), "-U", "0",
                "-m", str(knobs["memory_mb"]), "-t", str(knobs["threads"])]
        return argv + (["-u", "root"] if os.getuid() == 0 else [])

    def ready(self, started: Started) -> bool:
        return socket_ready(started.endpoint)

    def verify(self, started: Started, front: Started) -> list[Verdict]:
        """Sessions really land here: a new session through the front stores one item."""
        ep = started.endpoint
        before = int(stats(ep).get("cmd_set", 0))
        try:
            resp = fetch(front.endpoint, SESSION_PAGE)
        except OSError as e:
            return [Verdict(self.name, "sessions", Status.FAIL, f"{SESSION_PAGE}: {e}")]
        sets = int(stats(ep).get("cmd_set", 0)) - before
        if resp.status == 404:
            return [Verdict(self.name, "sessions", Status.WARN,
                            f"no {SESSION_PAGE} in this workload: session store not checked")]
        if resp.status != 200 or sets < 1:
            return [Verdict(self.name, "sessions", Status.FAIL, f"{SESSION_PAGE} answered "
                            f"{resp.status} and stored {sets} items in memcached")]
        return [Verdict(self.name, "sessions", Status.PASS, f"a new session stored {sets} "
                        "item(s) in memcached")]
