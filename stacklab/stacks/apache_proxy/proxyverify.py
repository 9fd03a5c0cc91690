"""What apache-proxy's verifier checks through its own endpoint: a cacheable page is a
hit the second time exactly when a cache is on (by X-Cache and by the counters), /_stacklab/
is always passed, connections to the backends are reused exactly when backend_keepalive
says so, and a balancer spreads requests as its weights say."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ...verify import CHECK_PATH, Response, Status, Verdict, check_keepalive, fetch
from .knobs import loadfactors

SCRIPTS = (".php", ".pl", ".cgi", ".gz")   # not static files (.gz: precompressed copies)
SPREAD_ROUNDS = 20        # requests per unit of loadfactor in the spread check
SPREAD_TOLERANCE = 0.10   # byrequests: each backend within ±10% of its share
COUNTED_WAIT_S = 2.0      # Apache logs a request just after answering it
ESTABLISHED = "01"        # a socket's state in /proc/net/tcp


def cacheable_path(docroot: Path) -> str | None:
    """A static file of the workload outside /_stacklab/ (which is never cached), as a
    URL path: /index.html if there is one, else the smallest; None when it has none."""
    if (docroot / "index.html").is_file():
        return "/index.html"
    files = [p for p in docroot.rglob("*") if p.is_file() and p.suffix not in SCRIPTS
             and not any(part.startswith((".", "_stacklab"))
                         for part in p.relative_to(docroot).parts)]
    if not files:
        return None
    smallest = min(files, key=lambda p: (p.stat().st_size, str(p)))
    return "/" + str(smallest.relative_to(docroot))


def is_hit(resp: Response) -> bool:
    return resp.headers.get("x-cache", "").startswith("HIT")


def fetch_counted(proxy, started, path: str, times: int) -> tuple[list[Response], dict]:
    """GET `path` `times` times; the responses and how cache_hits and cache_misses moved
    (waiting until both together moved by `times`, or COUNTED_WAIT_S has passed)."""
    before = proxy.counters(started)
    responses = [fetch(started.endpoint, path) for _ in range(times)]
    deadline = time.monotonic() + COUNTED_WAIT_S
    while True:
        now = proxy.counters(started)
        moved = {name: now[name] - before[name] for name in ("cache_hits", "cache_misses")}
        if sum(moved.values()) >= times or time.monotonic() > deadline:
            return responses, moved
        time.sleep(0.02)


def _data(path: str, responses: list[Response], moved: dict) -> dict[str, Any]:
    return {"path": path, "statuses": [r.status for r in responses],
            "x_cache": [r.headers.get("x-cache") for r in responses], **moved}


def check_cache(proxy, started) -> Verdict:
    """A static page twice: with a cache the second is a HIT by X-Cache and the hits
    counter moved by the HITs seen; without one, neither is a hit by either."""
    on = started.knobs["cache"] != "none"
    path = cacheable_path(started.ctx.docroot)
    if path is None:
        return Verdict(proxy.name, "cache", Status.WARN, "no static file outside /_stacklab/ "
                       "in this workload: caching not checked")
    responses, moved = fetch_counted(proxy, started, path, 2)
    hits_seen = sum(map(is_hit, responses))
    data = _data(path, responses, moved)
    seen = (f"{path} twice: X-Cache {', '.join(str(x) for x in data['x_cache'])}; counters "
            f"hits +{moved['cache_hits']:g}, misses +{moved['cache_misses']:g}")
    counted = moved["cache_hits"] == hits_seen and moved["cache_misses"] == 2 - hits_seen
    want = is_hit(responses[1]) if on else hits_seen == 0
    ok = all(r.status == 200 for r in responses) and want and counted
    expected = ("the second a HIT" if on else "no HIT") + " and counters agreeing"
    return Verdict(proxy.name, "cache", Status.PASS if ok else Status.FAIL,
                   seen if ok else f"cache {started.knobs['cache']}: {seen}; expected "
                   f"{expected}", data)


def check_passed(proxy, started) -> Verdict:
    """/_stacklab/ is always passed to the backend: CHECK_PATH twice, never a hit, two
    backend answers counted."""
    responses, moved = fetch_counted(proxy, started, CHECK_PATH, 2)
    data = _data(CHECK_PATH, responses, moved)
    ok = (all(r.status == 200 and not is_hit(r) for r in responses)
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
