"""What squid's knobs claim, checked through it: a page it may store is a hit the second
time (by its X-Cache header and by the manager's counters), /_stacklab/ never is, and a
disk cache is written to."""

from __future__ import annotations

import time

from ...measure.verify import CHECK_PATH, Response, Status, Verdict, fetch
from ..base import Component, RunningComponent

NAME = "squid"
# verify()'s cacheable URL: a static file outside /_stacklab/ (which is never cached) that
# the stack places in the docroot while it runs (Squid.docroot_files), Last-Modified
# 2020-01-01 as every deployed file, so cached by the rules any static file is. Small
# enough for any object size the knobs allow (at least 1 KB with its headers).
VERIFY_PATH = "/_squid-verify.html"
VERIFY_PAGE = b"<!DOCTYPE html><title>stacklab</title><p>squid's cacheable check page</p>\n"
DISK_WAIT_S = 2.0        # aufs writes an object out in its threads, after the response


def verify_cache(component: Component, started: RunningComponent) -> list[Verdict]:
    verdicts = [check_hit(component, started), check_never_cached(component, started)]
    if started.knobs["disk_cache_mb"]:
        verdicts.append(check_disk(component, started))
    return verdicts


def _second(component: Component, started: RunningComponent,
            path: str) -> tuple[Response, dict[str, float]]:
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


def check_hit(component: Component, started: RunningComponent) -> Verdict:
    """The second request of a page squid may store is served from the cache: its header
    says HIT and the counters count one hit and no backend request."""
    resp, moved = _second(component, started, VERIFY_PATH)
    detail, data = _seen(VERIFY_PATH, resp, moved)
    if resp.status != 200 or resp.body != VERIFY_PAGE:
        return Verdict(NAME, "cache hit", Status.FAIL, f"{detail}: not squid's check page "
                       f"(placed in the docroot by the stack while it runs)", data)
    ok = data["x_cache"].startswith("HIT") and moved == {"cache_hits": 1, "cache_misses": 0}
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


def check_disk(component: Component, started: RunningComponent) -> Verdict:
    """With a disk cache, what squid stores is also written out (swap.outs grows; the
    hit check stored its page)."""
    deadline = time.monotonic() + DISK_WAIT_S
    while (outs := component.counters(started)["swap.outs"]) == 0 \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    size = started.knobs["disk_cache_mb"]
    if outs == 0:
        return Verdict(NAME, "disk cache", Status.FAIL, f"{VERIFY_PATH} is cached but "
                       f"nothing was written to the {size} MB disk cache within "
                       f"{DISK_WAIT_S:g} s (swap.outs 0)", {"swap_outs": 0})
    return Verdict(NAME, "disk cache", Status.PASS, f"{outs:g} objects written to the "
                   f"{size} MB disk cache (swap.outs)", {"swap_outs": outs})
