"""A run's load as an access log replays it (load.replay): the log read, each of its URLs
fetched once from the deployed site before the load, and the engine's plan made of what
the site serves — the URL mix as weights, or (load.replay_times) the arrival times
scaled to load.rate as the engine's schedule.

A URL the site does not serve (a fetch answers 4xx/5xx or fails) is dropped from the
replay and named in the run's record; when such URLs carry more than MISSING_SHARE of
the log's replayable requests, the log is not this site's traffic and the run is refused
before the load (VerificationFailed: the run is invalid, one line naming the log and the
first missing URLs). A few stale links are what a real day's log holds; a log of another
site is not a measurement of this one."""

from __future__ import annotations

import http.client
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import VerificationFailed
from ..host.net import Endpoint
from ..measure.drive import LoadPlan
from ..measure.verify import Status, Verdict, connection
from ..workloads.accesslog import AccessLog, arrival_offsets, log_sha256, read_log

MISSING_SHARE = 0.01     # of the replayable requests, at most, on URLs the site lacks
SHOWN_MISSING = 5        # the refusal names this many missing URLs, most requested first
STORED_MISSING = 100     # the run's record names this many (in path order)

# One fetch: (method, path) -> None when served, else why not ("404", "connection refused").
Probe = Callable[[str, str], str | None]


@dataclass(frozen=True)
class Replay:
    """The plan the engine runs and what the run stores of the log (resources._replay)."""

    plan: LoadPlan
    record: dict


def replay_plan(plan: LoadPlan, front: Endpoint, probe: Probe | None = None) -> Replay | None:
    """`plan` with the log's requests instead of the workload's URLs, or None when the
    run replays nothing. `probe`: how a URL is fetched (default: over the wire, from
    `front`); raises VerificationFailed when the site lacks too much of the log."""
    if not (path := plan.load.get("replay")):
        return None
    log = read_log(Path(path))
    wire = WireProbe(front) if probe is None else None
    try:
        missing = missing_urls(log, probe or wire)
    finally:
        if wire is not None:
            wire.close()
    kept = [r for r in log.requests if r.path not in missing]
    lost = len(log.requests) - len(kept)
    if lost > MISSING_SHARE * len(log.requests):
        raise VerificationFailed("load.replay", (Verdict("load", "replay urls", Status.FAIL,
                                 refusal(path, log, missing, lost)),),
                                 refusal(path, log, missing, lost))
    mix = AccessLog(tuple(kept), log.report).mix()
    index = {key: i for i, (key, _) in enumerate(mix)}
    base = front.base_url
    times = bool(plan.load.get("replay_times"))
    schedule = ()
    if times:
        offsets = arrival_offsets([r.time_s for r in kept], float(plan.load["rate"]))
        schedule = tuple((at, index[(r.method, r.path)]) for at, r in zip(offsets, kept))
    urls = tuple((base + p, n) for (_, p), n in mix)
    replayed = replace(plan, urls=urls, methods=tuple(m for (m, _), _ in mix),
                       schedule=schedule, warmup_s=0.0 if times else plan.warmup_s,
                       varies=frozenset(u for u, _ in urls
                                        if u in plan.varies or may_vary(u[len(base):])))
    record = {"log": path, "sha256": log.sha256, **log.report.to_json(), "urls": len(mix),
              "missing": dict(sorted(missing.items())[:STORED_MISSING]),
              "missing_urls": len(missing), "missing_requests": lost,
              "replayed": len(kept), "times": times,
              "span_s": schedule[-1][0] if schedule else None}
    return Replay(replayed, record)


def replay_versions(path: str) -> dict[str, str]:
    """What a run records with the versions of the log it replays (load.replay's path):
    its sha256, so that a resume refuses to pool runs of an edited log with the stored
    ones, as of an edited include file."""
    return {f"load.replay {path}": f"sha256:{log_sha256(Path(path))}"}


def may_vary(path: str) -> bool:
    """Whether a replayed URL may answer with another length each time, so the engine
    must not count a length change as a failure: a query string, a PHP script, or a
    directory (its index may be a script). A static file's length is its own."""
    plain = path.partition("?")[0]
    return "?" in path or plain.endswith("/") or plain.endswith(".php")


def missing_urls(log: AccessLog, probe: Probe) -> dict[str, str]:
    """Each path of the log the site does not serve, and why: fetched once each, with
    GET (HEAD when the log only ever asked for its head)."""
    methods: dict[str, set[str]] = {}
    for r in log.requests:
        methods.setdefault(r.path, set()).add(r.method)
    found = {}
    for path, used in methods.items():
        if why := probe("GET" if "GET" in used else "HEAD", path):
            found[path] = why
    return found


def refusal(log_path: str, log: AccessLog, missing: dict[str, str], lost: int) -> str:
    """The one line a refused replay says: the log, the share lost, the first URLs."""
    count = {}
    for r in log.requests:
        if r.path in missing:
            count[r.path] = count.get(r.path, 0) + 1
    first = sorted(missing, key=lambda p: -count[p])[:SHOWN_MISSING]
    named = ", ".join(f"{p} ({missing[p]})" for p in first)
    more = f" and {len(missing) - len(first)} more" if len(missing) > len(first) else ""
    return (f"load.replay {log_path}: {len(missing)} of its URLs, {lost} of "
            f"{len(log.requests)} requests ({lost / len(log.requests):.1%}), are not on the "
            f"deployed site: {named}{more}; a replay drops at most {MISSING_SHARE:.0%} "
            "(is this the site the log is from?)")


class WireProbe:
    """Fetch over one kept-alive connection to `front`, a new one after a failure;
    closed by `close`."""

    def __init__(self, front: Endpoint):
        self.front = front
        self.conn: http.client.HTTPConnection | None = None

    def __call__(self, method: str, path: str) -> str | None:
        try:
            if self.conn is None:
                self.conn = connection(self.front)
            self.conn.request(method, path)
            response = self.conn.getresponse()
            response.read()
            if response.will_close:
                self.close()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            return f"{type(e).__name__}: {e}"[:120]
        return None if response.status < 400 else str(response.status)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
