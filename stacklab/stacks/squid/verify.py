"""What squid's knobs claim, checked through it: a URL it may store is a hit the second
time (by its X-Cache header and by the manager's counters), /_stacklab/ never is, and a
disk cache is written to."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ...verify import CHECK_PATH, Response, Status, Verdict, fetch
from ..base import Component, RunningComponent

NAME = "squid"
# Files a web server sends as they are, with Last-Modified: squid may store them.
STATIC = (".html", ".htm", ".css", ".js", ".txt", ".json", ".svg", ".png", ".jpg",
          ".jpeg", ".gif")
HEADERS_ROOM = 1024      # bytes of an object's stored headers, besides its body
NEVER_CACHED = CHECK_PATH.split("/")[1]       # "_stacklab"
DISK_WAIT_S = 2.0        # aufs writes an object out in its threads, after the response


def verify_cache(component: Component, started: RunningComponent) -> list[Verdict]:
    path = cacheable_path(started.ctx.docroot, stored_limit(started.knobs))
    verdicts = [check_hit(component, started, path),
                check_never_cached(component, started)]
    if started.knobs["disk_cache_mb"]:
        verdicts.append(check_disk(component, started, path))
    return verdicts


def stored_limit(knobs: dict[str, Any]) -> int:
    """The largest body squid stores with these knobs: only what fits in memory without
    a disk cache."""
    kb = (knobs["maximum_object_size_kb"] if knobs["disk_cache_mb"]
          else knobs["maximum_object_size_in_memory_kb"])
    return kb * 1024 - HEADERS_ROOM


def cacheable_path(docroot: Path, limit: int) -> str | None:
    """The smallest static file of the workload squid may store (outside /_stacklab/,
    not hidden, at most `limit` bytes) as a URL path, or None. Not CHECK_PATH: that is
    under /_stacklab/, which is never cached."""
    sizes = {}
    for path in docroot.rglob("*"):
        rel = path.relative_to(docroot)
        if (rel.parts[0] == NEVER_CACHED or any(p.startswith(".") for p in rel.parts)
                or path.suffix not in STATIC or not path.is_file()):
            continue
        if (size := path.stat().st_size) <= limit:
            sizes["/" + rel.as_posix()] = size
    return min(sizes, key=lambda p: (sizes[p], p), default=None)


def _second(component: Component, started: RunningComponent, path: str) -> tuple[Response, dict[str, float]]:
    """`path` fetched twice; the second response and what it moved in the counters
    (the first is a miss that stores it, or already a hit)."""
    fetch(started.endpoint, path)
    before = component.counters(started)
    resp = fetch(started.endpoint, path)
    after = component.counters(started)
    return resp, {name: after[name] - before[name] for name in ("cache_hits", "cache_misses")}


def _seen(path: str, resp: Response, moved: dict[str, float]) -> tuple[str, dict]:
    x_cache = resp.headers.get("x-cache", "(none)")
    detail = (f"second GET {path}: {resp.status}, X-Cache: {x_cache}; cache_hits "
              f"+{moved['cache_hits']:g}, cache_misses +{moved['cache_misses']:g}")
    return detail, {"path": path, "status": resp.status, "x_cache": x_cache, **moved}


def check_hit(component: Component, started: RunningComponent, path: str | None) -> Verdict:
    """The second request of a URL squid may store is served from the cache: its header
    says HIT and the counters count one hit and no backend request."""
    if path is None:
        return Verdict(NAME, "cache hit", Status.WARN, "no static file in this docroot "
                       "that squid may store (outside /_stacklab/, within its object size "
                       "limits): hits not checked")
    resp, moved = _second(component, started, path)
    detail, data = _seen(path, resp, moved)
    ok = (resp.status == 200 and data["x_cache"].startswith("HIT")
          and moved == {"cache_hits": 1, "cache_misses": 0})
    return Verdict(NAME, "cache hit", Status.PASS if ok else Status.FAIL, detail, data)


def check_never_cached(component: Component, started: RunningComponent) -> Verdict:
    """/_stacklab/ (the stack's probes and status pages) always reaches the backend: the
    second request is a MISS too, counted as a backend request."""
    resp, moved = _second(component, started, CHECK_PATH)
    detail, data = _seen(CHECK_PATH, resp, moved)
    ok = (resp.status == 200 and data["x_cache"].startswith("MISS")
          and moved == {"cache_hits": 0, "cache_misses": 1})
    return Verdict(NAME, "/_stacklab/ never cached", Status.PASS if ok else Status.FAIL,
                   detail, data)


def check_disk(component: Component, started: RunningComponent, path: str | None) -> Verdict:
    """With a disk cache, what squid stores is also written out (swap.outs grows)."""
    if path is None:
        return Verdict(NAME, "disk cache", Status.WARN, "nothing in this docroot that "
                       "squid may store: disk writes not checked")
    deadline = time.monotonic() + DISK_WAIT_S
    while (outs := component.counters(started)["swap.outs"]) == 0 \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    size = started.knobs["disk_cache_mb"]
    if outs == 0:
        return Verdict(NAME, "disk cache", Status.FAIL, f"{path} is cached but nothing was "
                       f"written to the {size} MB disk cache within {DISK_WAIT_S:g} s "
                       "(swap.outs 0)", {"swap_outs": 0})
    return Verdict(NAME, "disk cache", Status.PASS, f"{outs:g} objects written to the "
                   f"{size} MB disk cache (swap.outs)", {"swap_outs": outs})
