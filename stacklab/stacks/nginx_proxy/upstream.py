"""The proxy's backends as nginx names them, and what its upstream log counts: requests
sent to each backend and cache hits and misses (nginx has no counters of its own for
either; the log holds one short line per request that went to a backend or the cache)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from ...errors import StackError
from ...host.net import Endpoint
from ..weights import weights_for
from .knobs import MAX_WEIGHT

UPSTREAM_LOG = "upstream.log"   # "$upstream_cache_status $upstream_addr" per request
# $upstream_cache_status values: served from the cache, or the backend answered.
HITS = frozenset({"HIT", "STALE", "UPDATING", "REVALIDATED"})
MISSES = frozenset({"MISS", "EXPIRED", "BYPASS"})
# $upstream_addr lists every backend a request was sent to: ", " between tries,
# " : " between internal redirects.
ADDRESS_SEPARATOR = re.compile(r", | : ")


def address(backend: Endpoint) -> str:
    """A backend as nginx names it, in `server` and in $upstream_addr."""
    if backend.unix is not None:
        return f"unix:{backend.unix}"
    return f"[{backend.host}]:{backend.port}" if ":" in backend.host else \
        f"{backend.host}:{backend.port}"


def backend_weights(count: int, weights: str) -> list[int]:
    """One weight per backend: the knob's, or 1 each when it is empty."""
    if count == 0:
        raise StackError("nginx-proxy has no backend to pass requests to")
    return weights_for("nginx-proxy", weights, count, MAX_WEIGHT)


def upstream_counts(log: Path, addresses: list[str], cache: bool) -> dict[str, float]:
    """Requests sent to each backend, and cache hits and misses, from the upstream log.
    A line still being written (no newline yet) is left for the next reading."""
    data = log.read_bytes()
    lines = Counter(data[:data.rfind(b"\n") + 1].splitlines())
    sent: Counter[str] = Counter()
    hits = misses = 0
    for line, n in lines.items():
        status, _, addrs = line.decode().partition(" ")
        hits += n * (status in HITS)
        misses += n * (status in MISSES)
        for addr in ADDRESS_SEPARATOR.split(addrs):
            sent[addr] += n
    out: dict[str, float] = {f"backend:{i}": sent[a] for i, a in enumerate(addresses)}
    return out | ({"cache_hits": hits, "cache_misses": misses} if cache else {})
