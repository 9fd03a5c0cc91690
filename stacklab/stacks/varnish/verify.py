"""What verify() proves through Varnish itself: a page is cached (or not) as the knobs and
the backend's headers say, by the response's X-Varnish header AND by varnishstat; the
cached object lives varnish.ttl (or what the backend said); a Cookie passes or not as
varnish.honour_cookies says.

Everything under /_stacklab/ is passed, so the checks ask for VERIFY_PREFIX, which the VCL
fetches from the stack's check page: a URL cached by the same rules as any page."""

from __future__ import annotations

import re
import time
import uuid
from email.utils import parsedate_to_datetime
from typing import Any

from ...measure.verify import Response, Status, Verdict, fetch
from ..base import Component, RunningComponent

VERIFY_PREFIX = "/_varnish-verify/"
TTL_SLACK_S = 1.5      # Age is whole seconds, and the checks' requests take time
SETTLE_S = 3.0         # longest wait for varnishstat to hold every request sent
QUIET_S = 0.05
UNCACHEABLE = re.compile(r"no-cache|no-store|private", re.I)   # the built-in VCL's rule


def fresh_path() -> str:
    """A URL no earlier check has cached."""
    return f"{VERIFY_PREFIX}check.html?{uuid.uuid4().hex}"


def is_hit(resp: Response) -> bool:
    """X-Varnish carries two transaction ids on a hit (this one, the one that stored it)."""
    return len(resp.headers.get("x-varnish", "").split()) == 2


def expected_ttl(headers: dict[str, str], knobs: dict[str, Any]) -> float:
    """Seconds the first response should be kept (0: not cached), from what the backend
    sent and the knobs: with honour_cache_control off, varnish.ttl for any response; on,
    Varnish's reading of Cache-Control (s-maxage, then max-age) and Expires, else ttl."""
    if (knobs["honour_cookies"] and "set-cookie" in headers) or headers.get("vary") == "*":
        return 0
    if not knobs["honour_cache_control"]:
        return knobs["ttl"]
    control = headers.get("cache-control", "")
    if UNCACHEABLE.search(control):
        return 0
    for name in ("s-maxage", "max-age"):
        m = re.search(rf"(?:^|[,\s]){name}=(\d+)", control, re.I)
        if m:
            return int(m.group(1))
    if "expires" in headers:
        try:
            expires = parsedate_to_datetime(headers["expires"])
            date = parsedate_to_datetime(headers.get("date", headers["expires"]))
        except (TypeError, ValueError):
            return 0        # an Expires that cannot be read is already past
        return max(0.0, (expires - date).total_seconds())
    return knobs["ttl"]


def quiet(varnish: Component, started: RunningComponent, sent: int = 0,
          before: dict[str, float] | None = None) -> dict[str, float]:
    """The counters once every request is in them: `sent` more client requests than
    `before`, and two readings QUIET_S apart that agree. A worker adds its counts when it
    goes idle, just after its response, so a reading right after a response may lack it
    (12 of 50 did here); nothing else is sent meanwhile. As they stand after SETTLE_S."""
    deadline = time.monotonic() + SETTLE_S
    want = (before or {}).get("client_req", 0) + sent
    last = varnish.counters(started)
    while time.monotonic() < deadline:
        time.sleep(QUIET_S)
        now = varnish.counters(started)
        if now == last and now["client_req"] >= want:
            break
        last = now
    return last


def change(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {name: after[name] - before.get(name, 0) for name in after}


def check_cached(varnish: Component, started: RunningComponent) -> Verdict:
    """The same URL twice: the second a hit by X-Varnish and by cache_hit (+1), its object
    kept the TTL expected; or, where nothing should be cached, a miss by both."""
    ep, knobs, path = started.endpoint, started.knobs, fresh_path()
    before = quiet(varnish, started)
    first, second = fetch(ep, path), fetch(ep, path)
    delta = change(before, quiet(varnish, started, 2, before))
    want = expected_ttl(first.headers, knobs)
    ttl = float(second.headers.get("x-stacklab-ttl", "nan")) + int(second.headers.get("age", 0))
    grace = float(second.headers.get("x-stacklab-grace", "nan"))
    data = {"status": first.status, "expected_ttl_s": want, "hit": is_hit(second),
            "cache_hit_delta": delta["cache_hit"], "ttl_s": ttl, "grace_s": grace,
            "backend_cache_control": first.headers.get("cache-control"),
            "backend_expires": first.headers.get("expires")}
    seen = (f"second response X-Varnish: {second.headers.get('x-varnish', '(none)')}, "
            f"cache_hit +{delta['cache_hit']:g}")
    if first.status != 200:
        return Verdict(varnish.name, "cached", Status.FAIL, f"{path} answered "
                       f"{first.status}", data)
    if want <= 0:
        ok = not data["hit"] and delta["cache_hit"] == 0
        return Verdict(varnish.name, "cached", Status.PASS if ok else Status.FAIL,
                       f"{'not cached' if ok else 'cached'}, and nothing should be (the "
                       f"backend's Cache-Control: {data['backend_cache_control']}, Expires: "
                       f"{data['backend_expires']}): {seen}", data)
    ok = (data["hit"] and delta["cache_hit"] == 1 and abs(ttl - want) <= TTL_SLACK_S
          and grace == expected_grace(first.headers, knobs))
    return Verdict(varnish.name, "cached", Status.PASS if ok else Status.FAIL,
                   f"{seen}; kept {ttl:.1f} s (expected {want:g}), grace {grace:g} s", data)


def expected_grace(headers: dict[str, str], knobs: dict[str, Any]) -> float:
    """varnish.grace, unless an honoured backend said stale-while-revalidate."""
    m = re.search(r"stale-while-revalidate=(\d+)", headers.get("cache-control", ""), re.I)
    return int(m.group(1)) if m and knobs["honour_cache_control"] else knobs["grace"]


def check_cookies(varnish: Component, started: RunningComponent, cached: Verdict) -> Verdict:
    """A cached page asked for with a Cookie: passed to the backend (varnish.honour_cookies
    on: X-Varnish has one id, s_pass +1, cache_hit +0) or served from the cache (off)."""
    if not cached.data.get("hit"):
        return Verdict(varnish.name, "cookies", Status.WARN, "not checked: the check page "
                       "is not cached here (see the cached check)")
    ep, path, want_hit = started.endpoint, fresh_path(), not started.knobs["honour_cookies"]
    fetch(ep, path)
    before = quiet(varnish, started)
    resp = fetch(ep, path, {"Cookie": "stacklab=verify"})
    delta = change(before, quiet(varnish, started, 1, before))
    hit = is_hit(resp)
    ok = (hit == want_hit and delta["cache_hit"] == int(want_hit)
          and delta["s_pass"] == int(not want_hit))
    data = {"hit": hit, "cache_hit_delta": delta["cache_hit"], "s_pass_delta": delta["s_pass"]}
    seen = (f"X-Varnish: {resp.headers.get('x-varnish', '(none)')}, cache_hit "
            f"+{delta['cache_hit']:g}, s_pass +{delta['s_pass']:g}")
    what = "served from the cache" if hit else "passed to the backend"
    return Verdict(varnish.name, "cookies", Status.PASS if ok else Status.FAIL,
                   f"a request with a Cookie was {what} (varnish.honour_cookies "
                   f"{'off' if want_hit else 'on'}): {seen}", data)
