"""What nginx-proxy's verifier checks, through the proxy's own endpoint and counters:
/_stacklab/ always reaches a backend uncached; a workload URL is cached (a hit by its
header and by the counters) or, with the cache off, passed every time; files are served
here with static=files; requests spread over the backends as the weights say."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable
from urllib.parse import quote, unquote

from ...measure.verify import CHECK_PATH, Response, Status, Verdict, check_keepalive, fetch
from ..base import RunningComponent
from .upstream import HITS, backend_weights

DYNAMIC = (".php", ".pl")    # what static=files passes to the backends
SPREAD_ROUNDS = 20           # requests per unit of weight in the spread check
# Of each backend's expected share (at least one request). least_conn counts a backend
# busy until its connection is released, which may come after the client has its answer:
# on sequential requests it strays from the weights towards an even spread (22, 38, 20
# and, in 1 of 20 quiet runs, 26, 29, 25 for 20, 40, 20): a backend's share may lie
# anywhere from its weighted to its even share, each widened by the tolerance.
SPREAD_TOLERANCE = {"round_robin": 0.10, "least_conn": 0.20}
SETTLE_S = 3.0               # longest wait for a check's requests to reach the log
QUIET_S = 0.1                # the log is caught up when it stays the same this long
                             # (a worker preempted between answer and log line on a busy host)

Read = Callable[[], dict[str, float]]


def verify_proxy(started: RunningComponent, read: Read) -> list[Verdict]:
    """The checks for these knobs; `read` gives the proxy's counters now."""
    k, ep, name = started.knobs, started.endpoint, started.name
    weights = backend_weights(len(started.ctx.backends), k["weights"])
    docroot, files = started.ctx.docroot, k["static"] == "files"
    # The workload URL the cache sees: with static=files only what is passed (scripts).
    passed = (first_file(docroot, _dynamic) if files else
              first_file(docroot, _static) or first_file(docroot, _dynamic))
    verdicts = [check_passed(name, read, ep, CHECK_PATH, "stacklab paths passed"),
                check_spread(name, read, ep, weights, SPREAD_TOLERANCE[k["balance"]],
                             towards_even=k["balance"] == "least_conn"),
                check_keepalive(name, ep, CHECK_PATH, k["keepalive_timeout"] > 0)]
    if passed is None:
        verdicts.append(Verdict(name, "cache" if k["cache"] else "pass-through", Status.WARN,
                                "no file in this docroot goes to the backends "
                                "(outside /_stacklab/): not checked"))
    elif k["cache"]:
        verdicts.append(check_cache(name, read, ep, passed, k["cache_valid_s"]))
    else:
        verdicts.append(check_passed(name, read, ep, passed, "pass-through"))
    if files:
        verdicts.append(check_static(name, read, ep, docroot, first_file(docroot, _static)))
    return verdicts


def first_file(docroot: Path, wanted: Callable[[str], bool]) -> str | None:
    """The URL of the first file (top level first, then by name) that `wanted` accepts,
    outside /_stacklab/, hidden files and precompressed copies; None if there is none."""
    for top, dirs, names in os.walk(docroot):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and
                         not (top == str(docroot) and d == "_stacklab"))
        for file in sorted(names):
            if not file.startswith(".") and not file.endswith(".gz") and wanted(file):
                return quote("/" + os.path.relpath(os.path.join(top, file), docroot))
    return None


def _dynamic(file: str) -> bool:
    return file.endswith(DYNAMIC)


def _static(file: str) -> bool:
    return not file.endswith(DYNAMIC)


def _sent(before: dict[str, float], after: dict[str, float]) -> list[float]:
    """Requests each backend got between two readings, in the backends' order."""
    count = sum(key.startswith("backend:") for key in before)
    return [after[f"backend:{i}"] - before[f"backend:{i}"] for i in range(count)]


def _baseline(read: Read) -> dict[str, float]:
    """A reading the log has caught up with (two readings QUIET_S apart agree): requests
    sent just before (the content checks') are not counted in the check that follows."""
    deadline = time.monotonic() + SETTLE_S
    last = read()
    while True:
        time.sleep(QUIET_S)
        now = read()
        if _logged(now) == _logged(last) or time.monotonic() > deadline:
            return now
        last = now


def _logged(counters: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in counters.items() if k.startswith(("backend:", "cache_"))}


def _total_sent(before: dict[str, float], now: dict[str, float]) -> float:
    return sum(_sent(before, now))


def _cache_answers(before: dict[str, float], now: dict[str, float]) -> float:
    return (now["cache_hits"] + now["cache_misses"]
            - before["cache_hits"] - before["cache_misses"])


def _settled(read: Read, before: dict[str, float], want: float,
             counted: Callable[[dict, dict], float] = _total_sent) -> dict[str, float]:
    """A reading once `counted` finds `want` requests logged since `before` (or after
    SETTLE_S). nginx logs a request after its response is sent, so a client can read the
    counters before its last request is in them."""
    deadline = time.monotonic() + SETTLE_S
    while counted(before, after := read()) < want and time.monotonic() < deadline:
        time.sleep(0.01)
    return after


def check_passed(name: str, read: Read, ep, path: str, check: str) -> Verdict:
    """Two requests of `path` both reach a backend (the counters) and neither says it
    came from the cache (no X-Cache-Status)."""
    before = _baseline(read)
    marks = [fetch(ep, path).headers.get("x-cache-status") for _ in range(2)]
    sent = _total_sent(before, _settled(read, before, 2))
    data = {"path": path, "x_cache_status": marks, "sent_to_backends": sent}
    if sent == 2 and not any(marks):
        return Verdict(name, check, Status.PASS, f"{path} twice: both reached a backend, "
                       "no X-Cache-Status", data)
    return Verdict(name, check, Status.FAIL, f"{path} twice: {sent:g} of 2 reached a "
                   f"backend; X-Cache-Status {marks}", data)


def check_cache(name: str, read: Read, ep, path: str, valid_s: int) -> Verdict:
    """The same URL twice: the second is a hit by its X-Cache-Status, with the same body,
    and the counters' hits and misses moved as the headers say."""
    before = _baseline(read)
    resps = [fetch(ep, path) for _ in range(2)]
    after = _settled(read, before, 2, _cache_answers)
    marks = [r.headers.get("x-cache-status", "(none)") for r in resps]
    hits = after["cache_hits"] - before["cache_hits"]
    misses = after["cache_misses"] - before["cache_misses"]
    agree = hits == sum(m in HITS for m in marks) and hits + misses == 2
    data = {"path": path, "x_cache_status": marks, "cache_hits": hits, "cache_misses": misses}
    seen = (f"{path} twice: X-Cache-Status {marks[0]}, then {marks[1]}; counters "
            f"+{hits:g} hits +{misses:g} misses")
    if marks[1] in HITS and agree and resps[0].body == resps[1].body:
        return Verdict(name, "cache", Status.PASS, seen, data)
    why = uncacheable(resps[1], valid_s) if marks[1] not in HITS else None
    if why:
        return Verdict(name, "cache", Status.WARN, f"{seen}: uncacheable ({why})", data)
    return Verdict(name, "cache", Status.FAIL, seen + ("" if agree else
                   ": the counters disagree with the headers"), data)


def uncacheable(resp: Response, valid_s: int) -> str | None:
    """Why nginx may not cache this response by its own headers (not the proxy's fault),
    or None."""
    headers = resp.headers
    control = headers.get("cache-control", "").lower()
    if "set-cookie" in headers:
        return "the backend sets a cookie"
    if any(word in control for word in ("no-store", "no-cache", "private")):
        return f"Cache-Control: {control}"
    if headers.get("vary", "").strip() == "*":
        return "Vary: *"
    lifetime = "max-age" in control or "expires" in headers
    if resp.status != 200 and not lifetime:
        return f"status {resp.status} without a lifetime; only 200 is cached by default"
    if valid_s == 0 and not lifetime:
        return "no lifetime in its headers and nginx-proxy.cache_valid_s = 0"
    return None


def check_static(name: str, read: Read, ep, docroot: Path, path: str | None) -> Verdict:
    """static=files: a file is answered here with its bytes, no request sent to a backend.
    A passed request of /_stacklab/ follows it, so that a line the file's request would
    have logged is in the log once that one's is."""
    if path is None:
        return Verdict(name, "static files", Status.WARN, "no static file in this docroot "
                       "(outside /_stacklab/): not checked")
    before = _baseline(read)
    resp = fetch(ep, path)
    fetch(ep, CHECK_PATH)
    sent = _total_sent(before, _settled(read, before, 1))
    exact = resp.body == (docroot / unquote(path).lstrip("/")).read_bytes()
    data = {"path": path, "status": resp.status, "file_bytes": exact,
            "sent_to_backends": sent - 1}
    ok = resp.status == 200 and exact and sent == 1
    return Verdict(name, "static files", Status.PASS if ok else Status.FAIL,
                   f"{path}: {resp.status}, {'the file' if exact else 'not the file'}'s bytes, "
                   f"{sent - 1:g} sent to a backend", data)


def spread_fits(got: list[float], weights: list[int], tolerance: float,
                towards_even: bool = False) -> bool:
    """Each backend's count within `tolerance` (at least one request) of its weighted
    share, or, `towards_even`, of anything from its weighted to its even share."""
    total, n = sum(got), len(weights)
    for g, w in zip(got, weights):
        weighted = total * w / sum(weights)
        low, high = sorted((weighted, total / n if towards_even else weighted))
        if not low - max(1.0, tolerance * low) <= g <= high + max(1.0, tolerance * high):
            return False
    return True


def check_spread(name: str, read: Read, ep, weights: list[int], tolerance: float,
                 towards_even: bool = False) -> Verdict:
    """SPREAD_ROUNDS requests per unit of weight of /_stacklab/ (never cached): each
    backend gets its weighted share within `tolerance` of it — or, `towards_even`
    (least_conn), anything from its weighted to its even share, within `tolerance`."""
    total = SPREAD_ROUNDS * sum(weights)
    before = _baseline(read)
    for _ in range(total):
        fetch(ep, CHECK_PATH)
    got = _sent(before, _settled(read, before, total))
    want = [total * w / sum(weights) for w in weights]
    ok = sum(got) == total and spread_fits(got, weights, tolerance, towards_even)
    check = "spread" if len(weights) > 1 else "backend counted"
    data = {"requests": total, "weights": weights, "sent": got, "expected": want}
    return Verdict(name, check, Status.PASS if ok else Status.FAIL,
                   f"{total} requests: backends got {', '.join(f'{g:g}' for g in got)} for "
                   f"weights {', '.join(map(str, weights))} (±{tolerance:.0%}"
                   f"{', or towards an even spread: least_conn' if towards_even else ''})",
                   data)
