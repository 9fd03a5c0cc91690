"""What apache-proxy's verifier checks through its own endpoint: a cacheable page is a
hit the second time exactly when a cache is on (by X-Cache and by the counters), /_stacklab/
is always passed, connections to the backends are reused exactly when backend_keepalive
says so, and a balancer spreads requests as its weights say."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ...measure.verify import CHECK_PATH, Response, Status, Verdict, check_keepalive, fetch
from .knobs import loadfactors

# Passed to the stack's CHECK_PATH and cached like any page (see the template): the cache
# check's URL. No nonce in a query string: mod_cache stores a URL with a query only when
# the response says how long it stays fresh, and the check page says nothing of that.
VERIFY_PATH = "/_apache-proxy-verify"
SPREAD_ROUNDS = 20        # requests per unit of loadfactor in the spread check
SPREAD_TOLERANCE = 0.10   # byrequests: each backend within ±10% of its share
COUNTED_WAIT_S = 2.0      # Apache logs a request just after answering it
# mod_cache may commit a stored response just after the client has it whole: the cache
# check asks again, up to HIT_TRIES times, before it calls a cache one that never hits.
HIT_TRIES, RETRY_S = 5, 0.02
QUIET_S = 0.05            # no request logged for this long: the counters have settled
ESTABLISHED = "01"        # a socket's state in /proc/net/tcp


def is_hit(resp: Response) -> bool:
    return resp.headers.get("x-cache", "").startswith("HIT")


def settled_counters(proxy, started) -> dict[str, float]:
    """The counters once a request answered just before (another check's) is logged:
    two readings QUIET_S apart that agree on hits and misses (or COUNTED_WAIT_S)."""
    deadline = time.monotonic() + COUNTED_WAIT_S
    now = proxy.counters(started)
    while time.monotonic() < deadline:
        time.sleep(QUIET_S)
        last, now = now, proxy.counters(started)
        if all(last[n] == now[n] for n in ("cache_hits", "cache_misses")):
            break
    return now


def fetch_counted(proxy, started, path: str, times: int,
                  until_hit: bool = False) -> tuple[list[Response], dict]:
    """GET `path` `times` times (with `until_hit`, up to `times` until a HIT); the
    responses and how cache_hits and cache_misses moved, waiting until both together
    moved by as many (or COUNTED_WAIT_S has passed)."""
    before, responses = settled_counters(proxy, started), []
    while len(responses) < times and not (until_hit and any(map(is_hit, responses))):
        if responses:
            time.sleep(RETRY_S)
        responses.append(fetch(started.endpoint, path))
    deadline = time.monotonic() + COUNTED_WAIT_S
    while True:
        now = proxy.counters(started)
        moved = {name: now[name] - before[name] for name in ("cache_hits", "cache_misses")}
        if sum(moved.values()) >= len(responses) or time.monotonic() > deadline:
            return responses, moved
        time.sleep(RETRY_S)


def _data(path: str, responses: list[Response], moved: dict) -> dict[str, Any]:
    return {"path": path, "statuses": [r.status for r in responses],
            "x_cache": [r.headers.get("x-cache") for r in responses], **moved}


def check_cache(proxy, started) -> Verdict:
    """The stack's check page under VERIFY_PATH: with a cache a HIT comes within
    HIT_TRIES requests, without one two requests are no HIT; either way the counters
    agree with what X-Cache said."""
    on = started.knobs["cache"] != "none"
    responses, moved = fetch_counted(proxy, started, VERIFY_PATH, HIT_TRIES if on else 2,
                                     until_hit=on)
    hits = sum(map(is_hit, responses))
    data = _data(VERIFY_PATH, responses, moved)
    seen = (f"{VERIFY_PATH} {len(responses)} times: X-Cache "
            f"{', '.join(str(x) for x in data['x_cache'])}; counters hits "
            f"+{moved['cache_hits']:g}, misses +{moved['cache_misses']:g}")
    ok = (all(r.status == 200 for r in responses) and bool(hits) == on
          and moved == {"cache_hits": hits, "cache_misses": len(responses) - hits})
    expected = "a HIT" if on else "no HIT"
    return Verdict(proxy.name, "cache", Status.PASS if ok else Status.FAIL,
                   seen if ok else f"cache {started.knobs['cache']}: {seen}; expected "
                   f"{expected}, counted as X-Cache said", data)


def check_passed(proxy, started) -> Verdict:
    """/_stacklab/ is always passed to the backend: CHECK_PATH twice, untouched by
    mod_cache (no X-Cache at all: not even looked up), two backend answers counted."""
    responses, moved = fetch_counted(proxy, started, CHECK_PATH, 2)
    data = _data(CHECK_PATH, responses, moved)
    ok = (all(r.status == 200 and "x-cache" not in r.headers for r in responses)
          and moved == {"cache_hits": 0, "cache_misses": 2})
    seen = (f"{CHECK_PATH} twice: statuses {data['statuses']}, X-Cache {data['x_cache']}; "
            f"hits +{moved['cache_hits']:g}, backend answers +{moved['cache_misses']:g}")
    return Verdict(proxy.name, "/_stacklab/ passed", Status.PASS if ok else Status.FAIL,
                   seen if ok else seen + "; expected two passes", data)


def check_spread(proxy, started) -> Verdict:
    """Requests to an uncached page spread over the backends by their loadfactors:
    byrequests within ±10% of each share; bybusyness (one request at a time: every
    member idle) to every backend."""
    weights = loadfactors(started.knobs["weights"], len(started.ctx.backends))
    sent = SPREAD_ROUNDS * sum(weights)
    before = proxy.counters(started)
    for _ in range(sent):
        fetch(started.endpoint, CHECK_PATH)
    after = proxy.counters(started)
    got = [after[f"backend:{i}"] - before[f"backend:{i}"] for i in range(len(weights))]
    want = [sent * w / sum(weights) for w in weights]
    if started.knobs["lbmethod"] == "byrequests":
        ok = all(abs(g - w) <= SPREAD_TOLERANCE * w for g, w in zip(got, want))
        rule = f"within ±{SPREAD_TOLERANCE:.0%} of {[round(w) for w in want]}"
    else:
        ok, rule = all(g > 0 for g in got), "every backend some"
    detail = f"{sent} requests: backends got {[round(g) for g in got]} ({rule})"
    return Verdict(proxy.name, "spread", Status.PASS if ok else Status.FAIL,
                   detail if ok else detail + ": not spread as the weights say",
                   {"sent": sent, "weights": weights, "got": got})


def open_backend_connections(pid: int, ports: set[int]) -> int:
    """Open (ESTABLISHED) TCP connections to `ports` (the backends') in the network
    namespace of process `pid`, as /proc/<pid>/net/tcp{,6} list them."""
    count = 0
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            count += (fields[3] == ESTABLISHED
                      and int(fields[2].rsplit(":", 1)[1], 16) in ports)
    return count


def check_backend_reuse(proxy, started) -> Verdict:
    """backend_keepalive acts: after requests passed to the backends, a connection to one
    stays open with reuse on, and none does (once closed) with disablereuse. Reuse on
    where the stack behind closes every connection itself (asked directly) is a WARN:
    nothing to reuse, not this proxy's doing."""
    backends = started.ctx.backends
    ports = {b.port for b in backends if not b.unix}
    if not ports:
        return Verdict(proxy.name, "backend reuse", Status.WARN, "backends on unix sockets: "
                       "connection reuse not checked")
    reuse, pid = started.knobs["backend_keepalive"], started.proc.popen.pid
    for _ in backends:
        fetch(started.endpoint, CHECK_PATH)
    deadline = time.monotonic() + COUNTED_WAIT_S
    while (open_now := open_backend_connections(pid, ports)) and not reuse \
            and time.monotonic() < deadline:
        time.sleep(0.02)
    seen = f"{open_now} connection(s) to the backends open after passing requests"
    data = {"reuse": reuse, "open_connections": open_now}
    if reuse and not open_now and not check_keepalive(
            proxy.name, backends[0], CHECK_PATH, True).data["second_request_reused"]:
        return Verdict(proxy.name, "backend reuse", Status.WARN, seen + ": the stack behind "
                       "closes every connection itself (its keep-alive off), nothing to "
                       "reuse", data)
    ok = bool(open_now) == reuse
    return Verdict(proxy.name, "backend reuse", Status.PASS if ok else Status.FAIL,
                   seen + ("" if ok else f" with backend_keepalive {'on' if reuse else 'off'}"),
                   data)
