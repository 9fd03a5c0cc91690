"""The lab's network namespaces: their names, the one way commands are run on them
(argv lists, never a shell), listing and deleting them, and throw-away probe namespaces.

Apart from net.py because three modules stand on it: the link (net.py), what the kernel
lets a namespace do (netkernel.py) and the measurements over a link (netmeasure.py).
Nothing here knows of a link, so each of them imports it without importing the others.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import uuid

from ..errors import StacklabError, printable

PREFIX = "stacklab-"
LAB_NS = re.compile(r"stacklab-[a-z0-9][a-z0-9-]{0,59}")
PROBE_NS = re.compile(r"stacklab-probe-(\d+)-[0-9a-f]{8}")

CMD_TIMEOUT_S = 15.0


class NetlabError(StacklabError):
    """A namespace, link, qdisc or measurement could not be set up or did not work."""


def check_namespace(ns: str) -> str:
    if not isinstance(ns, str) or not LAB_NS.fullmatch(ns):
        raise ValueError(f"namespace {ns!r} is not one of the lab's (stacklab-…)")
    return ns


# --- commands -------------------------------------------------------------------------

def _run(argv: list[str], timeout: float = CMD_TIMEOUT_S) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise NetlabError(f"{' '.join(argv)}: no answer within {timeout:g} s") from None
    if done.returncode != 0:
        raise NetlabError(f"{' '.join(argv)}: {printable(done.stderr.strip())} "
                          f"(exit {done.returncode})")
    return done.stdout


def namespaces() -> set[str]:
    """Names of the network namespaces `ip netns` knows."""
    out = _run(["ip", "-j", "netns", "list"]).strip()
    return {entry["name"] for entry in json.loads(out)} if out else set()


def _delete_namespace(ns: str) -> None:
    """Kill what still runs inside (only the lab starts processes in its namespaces; a
    live process would keep the namespace and its veth alive), then delete it."""
    check_namespace(ns)
    if ns not in namespaces():
        return
    for pid in _run(["ip", "netns", "pids", ns]).split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    _run(["ip", "netns", "delete", ns])


class _probe_namespace:
    """A throw-away namespace named with this process's pid (so cleanup_stale removes
    it once this process is gone, even after a kill -9)."""

    def __enter__(self) -> str:
        self.ns = f"{PREFIX}probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        _run(["ip", "netns", "add", self.ns])
        return self.ns

    def __exit__(self, *exc) -> None:
        _delete_namespace(self.ns)
