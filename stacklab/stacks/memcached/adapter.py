"""memcached on loopback TCP (UDP off): PHP's session store (S3's memcache handler). It
provides sessions:memcached, whose probe (a page that starts a session) goes into the
docroot and whose verifier reads the session back from memcached."""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from ...host.net import Endpoint, check_reachable, socket_ready
from ...measure.verify import Status, Verdict, fetch
from ..base import Capability, Component, Probe, RenderContext, RunningComponent
from .knobs import KNOBS

# A page that starts a session: stacklab's own (the capability's probe) if the docroot has
# it, else the workload's.
PROBE_PATH = "/_stacklab/session.php"
SESSION_PAGES = (PROBE_PATH, "/session.php")
SESSION_PREFIX = "memc.sess.key."   # php-memcached's memcached.sess_prefix (its default)
PROBE = b"""<?php
session_start();
$_SESSION['stacklab'] = ($_SESSION['stacklab'] ?? 0) + 1;
header('Content-Type: text/plain');
header('Cache-Control: no-store');
echo 'session ', session_id(), ' in ', ini_get('session.save_handler'), "\n";
"""
# `stats` counters kept with a run (cumulative; curr_* and the limits are levels).
STATS_COUNTERS = ("cmd_get", "cmd_set", "cmd_touch", "get_hits", "get_misses", "get_expired",
                  "delete_hits", "delete_misses", "touch_hits", "touch_misses",
                  "total_connections", "rejected_connections", "total_items", "evictions",
                  "expired_unfetched", "evicted_unfetched", "bytes_read", "bytes_written")


def _ask(ep: Endpoint, command: bytes, end: tuple[bytes, ...]) -> bytes:
    """One text-protocol command; its whole answer (up to a line in `end`)."""
    check_reachable(ep.host)
    with socket.create_connection((ep.host, ep.port), 2.0) as s:
        s.sendall(command)
        data = b""
        while not data.endswith(end):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return data


def stats(ep: Endpoint) -> dict[str, str]:
    """The text protocol's `stats` (a machine protocol: STAT name value, then END)."""
    data = _ask(ep, b"stats\r\n", (b"END\r\n",))
    return {parts[1]: parts[2] for parts in (line.split(" ", 2)
            for line in data.decode().splitlines()) if parts[0] == "STAT" and len(parts) == 3}


def get(ep: Endpoint, key: str) -> bytes | None:
    """The value stored under key (`get`: VALUE key flags bytes, data, END), or None."""
    data = _ask(ep, f"get {key}\r\n".encode(), (b"END\r\n", b"ERROR\r\n"))
    if not data.startswith(b"VALUE "):
        return None
    head, _, rest = data.partition(b"\r\n")
    return rest[:int(head.split()[3])]


def session_id(set_cookie: str | None) -> str | None:
    """PHPSESSID from a Set-Cookie header (PHP's default session name)."""
    for part in (set_cookie or "").replace(",", ";").split(";"):
        name, _, value = part.strip().partition("=")
        if name == "PHPSESSID" and value:
            return value
    return None


def verify_sessions(started: RunningComponent, front: RunningComponent) -> list[Verdict]:
    """Sessions really land here: a new session through the front is then read back
    from memcached under its key (`get` on the text protocol), and its counter of items
    stored (total_items) grew."""
    ep = started.endpoint
    before = counters(ep).get("total_items", 0)
    for path in SESSION_PAGES:
        try:
            resp = fetch(front.endpoint, path)
        except OSError as e:
            return [Verdict(started.name, "sessions", Status.FAIL, f"{path}: {e}")]
        if resp.status != 404:
            break
    else:
        return [Verdict(started.name, "sessions", Status.WARN, f"no {' or '.join(SESSION_PAGES)}"
                        " in this docroot: session store not checked")]
    sid = session_id(resp.headers.get("set-cookie"))
    key = SESSION_PREFIX + (sid or "")
    value = _wait_for(lambda: get(ep, key), 2.0) if sid else None
    added = counters(ep).get("total_items", 0) - before
    data = {"page": path, "status": resp.status, "session_id": sid,
            "found": value is not None, "total_items_added": added}
    if resp.status != 200 or value is None:
        where = (f"session {sid} is not in memcached (get {key}: not found)" if sid else
                 "no PHPSESSID cookie was set")
        return [Verdict(started.name, "sessions", Status.FAIL, f"{path} answered "
                        f"{resp.status}; {where}; total_items +{added}", data)]
    return [Verdict(started.name, "sessions", Status.PASS, f"session {sid[:8]}… stored in "
                    f"memcached ({len(value)} B under {SESSION_PREFIX}…; total_items "
                    f"+{added})", data)]


SESSIONS = Capability("sessions:memcached", "PHP's sessions kept in memcached (php-memcached's "
                      "session handler)", (Probe(PROBE_PATH, PROBE),), verify_sessions)


def counters(ep: Endpoint) -> dict[str, int]:
    """The cumulative counters of `stats`."""
    found = stats(ep)
    return {name: int(found[name]) for name in STATS_COUNTERS if name in found}


class Memcached(Component):
    name = "memcached"
    package = "memcached"
    binary = "/usr/bin/memcached"
    version_args = ("-V",)
    version_pattern = r"memcached (\S+)"
    knobs = KNOBS
    provides = (SESSIONS,)

    def endpoint(self, ctx: RenderContext, knobs: dict[str, Any]) -> Endpoint:
        return Endpoint(ctx.host, ctx.port, scheme="memcache")

    def render(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str]:
        return {}   # configured entirely by its argv

    def command(self, ctx: RenderContext, knobs: dict[str, Any]) -> list[str]:
        argv = [self.binary, "-l", ctx.host, "-p", str(ctx.port), "-U", "0",
                "-m", str(knobs["memory_mb"]), "-t", str(knobs["threads"])]
        return argv + (["-u", "root"] if os.getuid() == 0 else [])

    def ready(self, started: RunningComponent) -> bool:
        return socket_ready(started.endpoint)

    def counters(self, started: RunningComponent) -> dict[str, float]:
        """`stats`: gets, sets, hits and misses, connections, items stored, bytes."""
        return counters(started.endpoint)


def _wait_for(probe, timeout_s: float):
    """probe() until it returns something other than None, or the deadline passes (PHP
    writes the session as the request ends)."""
    deadline = time.monotonic() + timeout_s
    while (found := probe()) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return found
