"""What HAProxy's knobs claim, checked through its frontend and its own counters: the
backends are all up, requests spread as `balance` and `weights` say, and connections
are kept or closed on each side as `http_mode` says."""

from __future__ import annotations

import dataclasses
import http.client
from collections import Counter
from typing import Callable

from ...host.net import Endpoint
from ...measure.verify import (CHECK_PATH, Status, Verdict, check_keepalive, connection, fetch,
                       request)
from .stats import server_name

SPREAD_ROUNDS = 4     # whole rounds of the weights' sum sent by the spread check

Counters = Callable[[], dict[str, float]]    # HAProxy's counters now


def check_backends_up(component: str, backends: tuple[Endpoint, ...]) -> Verdict:
    """Every backend answers CHECK_PATH when asked directly. HAProxy runs without health
    checks (a dead replica must show as errors, not as a smaller stack), so a dead one
    would get its share of requests and answer each with a 503 after 3 s of retries:
    the spread and connection checks mean nothing until all are up."""
    down = []
    for i, ep in enumerate(backends):
        try:
            status = fetch(ep, CHECK_PATH, timeout_s=2.0).status
        except (OSError, http.client.HTTPException) as e:
            status = f"{type(e).__name__}: {e}"
        if status != 200:
            down.append(f"{server_name(i)} ({ep.host}:{ep.port}): {status}")
    if down:
        return Verdict(component, "backends up", Status.FAIL, f"{len(down)} of "
                       f"{len(backends)} backends do not answer {CHECK_PATH}: "
                       + "; ".join(down), {"down": down})
    return Verdict(component, "backends up", Status.PASS,
                   f"all {len(backends)} backends answer {CHECK_PATH}")


def check_spread(component: str, ep: Endpoint, counters: Counters, balance: str,
                 weights: tuple[int, ...]) -> Verdict:
    """SPREAD_ROUNDS x sum(weights) requests, a new connection each, and each backend's
    share by HAProxy's per-server counters. Sent one after another with nothing else
    going on, roundrobin and static-rr hand out a fixed cycle of sum(weights) turns, so
    whole cycles give each backend exactly its weight's count: the tolerance is 0 (10%
    of 4 requests would be less than one anyway). leastconn sees every backend idle at
    each request and lets them take turns whatever the weights: each must get at least
    half its equal share, 1/(2N)."""
    sent = SPREAD_ROUNDS * sum(weights)
    before = counters()
    statuses = Counter(fetch(ep, CHECK_PATH).status for _ in range(sent))
    after = counters()
    got = [int(after[f"backend:{i}"] - before[f"backend:{i}"]) for i in range(len(weights))]
    counted = int(after["requests"] - before["requests"])
    if balance == "leastconn":
        floor = sent / (2 * len(weights))
        ok, want = all(g >= floor for g in got), f"at least {floor:.1f} each (1/(2N))"
    else:
        expected = [SPREAD_ROUNDS * w for w in weights]
        ok, want = got == expected, "exactly " + ", ".join(map(str, expected))
    ok = ok and statuses == Counter({200: sent}) and counted == sent
    spread = ", ".join(f"{server_name(i)} {g}" for i, g in enumerate(got))
    detail = (f"{balance}, weights {','.join(map(str, weights))}: {sent} requests "
              f"(new connection each) went {spread}; {want} expected; frontend counted "
              f"{counted}; statuses {dict(statuses)}")
    data = {"sent": sent, "per_backend": got, "frontend_requests": counted,
            "statuses": dict(statuses), "balance": balance, "weights": list(weights)}
    return Verdict(component, "spread", Status.PASS if ok else Status.FAIL, detail, data)


def check_client_side(component: str, ep: Endpoint, mode: str) -> Verdict:
    """Towards clients: keep-alive and server-close keep the connection for a second
    request; close answers `Connection: close` and closes."""
    verdict = check_keepalive(component, ep, CHECK_PATH, on=mode != "close")
    header = verdict.data["connection_header"]
    if mode == "close" and header.lower() != "close" and verdict.status is Status.PASS:
        verdict = dataclasses.replace(verdict, status=Status.FAIL, detail="closed without "
                                      "Connection: close; " + verdict.detail)
    return dataclasses.replace(verdict, check="http_mode clients",
                               detail=f"{mode}: {verdict.detail}")


def check_server_side(component: str, ep: Endpoint, counters: Counters, mode: str,
                      backends: int) -> Verdict:
    """Towards the backends: 2N requests over one client connection (reopened where the
    mode closes it) visit every backend twice; HAProxy's backend counters say how many
    backend connections it opened (connect) and how many requests went over one already
    open (reuse). server-close and close must open one per request and reuse none;
    keep-alive reuses some, unless the backends themselves close (their keep-alive off:
    a WARN, since that is the stack behind, not HAProxy)."""
    sent = 2 * backends
    before = counters()
    conn = connection(ep)
    try:
        statuses = Counter(request(conn, CHECK_PATH).status for _ in range(sent))
    finally:
        conn.close()
    after = counters()
    opened, reused = (int(after[k] - before[k]) for k in ("connect", "reuse"))
    seen = (f"{mode}: {sent} requests over one client connection: {opened} went over a "
            f"new backend connection, {reused} over one already open; statuses "
            f"{dict(statuses)}")
    data = {"sent": sent, "connect": opened, "reuse": reused, "statuses": dict(statuses)}
    if statuses != Counter({200: sent}):
        status = Status.FAIL
    elif mode == "keep-alive":
        status = Status.PASS if reused else Status.WARN
        seen += "" if reused else " (the backends closed every connection)"
    else:
        status = Status.PASS if (opened, reused) == (sent, 0) else Status.FAIL
    return Verdict(component, "http_mode backends", status, seen, data)
