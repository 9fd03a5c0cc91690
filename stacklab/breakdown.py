"""S1's overview method: where the time of one request goes.

A fresh stack (like a run), verified, then one connection to each of the workload's URLs:
the engine fetches it `requests` times with keep-alive off and again with it on (the
request's total and time to first byte, medians), and right after each, a sample fetched
here the same way reads the page's own `Server-Timing: db;dur=X, php;dur=Y` (database
calls, and the rest of the script; medians). One request's median time then splits into

    database    = db                      (mysqli calls as PHP sees them: the round trips
                                           over the socket included)
    php         = php                     (the script without its database calls)
    web server  = total - db - php        (the server, FastCGI/handler hand-over, PHP's
                                           start-up outside the script, loopback TCP)
    network     = None                    loopback only: S1 fetched once locally and once
                                           over the network minus the ping RTT; that needs
                                           client and server on separate (virtual) hosts.

Pages without Server-Timing (static files) are all web server. The measurement plugs
into the one stack lifecycle (stack.lifecycle). Plain data out: a versioned JSON document
(`schema_version`, units in field names), laid out by report/measures.py.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import __version__, lab
from .drive import LoadPlan, engine_version, run_load
from .env import Environment
from .errors import StacklabError, UsageError
from .hostinfo import host_facts
from .plan import Plan, PlannedRun, Trial, effective_knobs, fixed_conflict
from .validate import Field, check_installed, validate_plan
from .stack import RunningStack, lifecycle
from .stacks import COMPONENTS, REGISTRY, STACKS
from .stacks.tls import make_certificate
from .stats import merged_percentiles
from .store import BreakdownRecord
from .systune import CpuAwake
from .verify import connection, request
from .workloads import WORKLOADS, deploy

SCHEMA_VERSION = 1
TIMING_SAMPLES = 50          # Server-Timing readings per URL and keep-alive mode
WARMUP_REQUESTS = 10         # before each mode's measurement, not counted
ROUNDS = 5                   # engine requests and Server-Timing samples alternate
NETWORK_NOTE = ("loopback only: client and server share the host, so no network share is "
                "measured; with network namespaces this becomes local vs across a virtual link")
_TIMING = re.compile(r"([A-Za-z][\w-]*);dur=([0-9.]+)")


@dataclass(frozen=True)
class BreakdownPlan:
    """A validated request for a breakdown: nothing has started yet."""

    stack: str
    workload: str
    knobs: dict[str, Any]                  # explicit values, "component.name" -> value
    effective: dict[str, dict[str, Any]]   # owner -> {knob: value}, as a run would use
    requests: int
    seed: int = 1
    timing_samples: int = TIMING_SAMPLES


# validation (pure) ---------------------------------------------------------------

def parse_knob(arg: str) -> tuple[str, Any]:
    """`component.name=value` from the command line, typed and checked by the registry."""
    key, sep, text = arg.partition("=")
    key = key.strip()
    knob = REGISTRY.get(key)
    if not sep or knob is None:
        raise UsageError(f"--knob {arg!r}: " + ("expected component.name=value" if not sep
                         else f"unknown knob {key!r} (`stacklab stacks` lists them)"))
    text = text.strip()
    try:
        if knob.type is bool:
            words = {"true": True, "on": True, "yes": True, "1": True,
                     "false": False, "off": False, "no": False, "0": False}
            if text.lower() not in words:
                raise ValueError(f"{key} takes true or false")
            value = words[text.lower()]
        else:
            value = knob.type(text)
        return key, knob.check(value)
    except ValueError as e:
        raise UsageError(f"--knob {arg!r}: {e}") from None


@dataclass(frozen=True)
class Arguments:
    """breakdown's command line as the origin of its one-trial plan: a problem that
    validate.validate_plan finds names the WORKLOAD or the --knob values given."""

    knobs: dict[str, Any]

    def refuse(self, trial: Trial, field: Field, value: Any, problem: str) -> UsageError:
        if field == "workload":
            return UsageError(f"WORKLOAD {value!r} {problem}")
        if field == "component":
            return UsageError(f"{value} with {self.knobs or 'default knobs'}: {problem}")
        return UsageError(f"{field} {value!r}: {problem}")


def plan_breakdown(stack: str, workload: str, knob_args: list[str], requests: int,
                   seed: int = 1) -> BreakdownPlan:
    """Validate everything before any server starts (the arguments, then the one-trial
    plan as every command does); every error names the value."""
    try:
        stack = STACKS.canonical(stack)
    except ValueError as e:
        raise UsageError(f"STACK {stack!r}: {e}") from None
    if STACKS[stack].layers:
        raise UsageError(f"STACK {stack!r}: breakdown splits one server's time with its "
                         f"own Server-Timing; {STACKS[stack].layers[0]} in front would "
                         "replay stored headers (measure the stack behind it alone)")
    if workload not in WORKLOADS:
        raise UsageError(f"WORKLOAD {workload!r}: unknown workload; one of "
                         f"{', '.join(WORKLOADS)}")
    if requests < 1:
        raise UsageError(f"--requests {requests}: must be at least 1")
    sdef = STACKS[stack]
    knobs = dict(parse_knob(a) for a in knob_args)
    for key, value in knobs.items():
        owner = key.split(".", 1)[0]
        if owner == "load":
            raise UsageError(f"--knob {key}={value}: breakdown sets the load itself (one "
                             "connection, keep-alive off and on)")
        if owner not in sdef.knob_owners:
            raise UsageError(f"--knob {key}={value}: does not apply to stack {stack!r}")
        if problem := fixed_conflict(sdef, key, value):
            raise UsageError(f"--knob {key}={value}: {problem}")
    trial = Trial(stack, workload, 1, tuple(sorted(knobs.items())), ())
    validate_plan(Plan((trial,), (PlannedRun(trial, 1),)), Arguments(knobs))
    check_installed(sdef.components, engine=True)
    return BreakdownPlan(stack, workload, knobs, effective_knobs(REGISTRY, sdef, trial),
                         requests, seed)


def server_timing(header: str | None) -> dict[str, float]:
    """`db;dur=0.8, php;dur=0.6` -> {"db": 0.8, "php": 0.6} (ms); {} without the header."""
    return {name: float(dur) for name, dur in _TIMING.findall(header or "")}


def shares(total_ms: float, db_ms: float | None, php_ms: float | None,
           front: str) -> list[dict[str, Any]]:
    """One request's median time split into components; the measured ones add up to
    `total_ms` by construction (network is not measured on loopback)."""
    parts = []
    if db_ms is not None:
        parts.append(("database", db_ms))
    if php_ms is not None:
        parts.append(("php", php_ms))
    parts.append((f"web server ({front})", total_ms - (db_ms or 0.0) - (php_ms or 0.0)))
    rows = [{"component": c, "ms": ms, "percent": 100.0 * ms / total_ms if total_ms else None}
            for c, ms in parts]
    rows.append({"component": "network", "ms": None, "percent": None,
                 "note": NETWORK_NOTE})
    return rows


# measuring -----------------------------------------------------------------------

def measure_breakdown(plan: BreakdownPlan, session: lab.Session) -> dict[str, Any]:
    """Every URL of the workload, measured in the lifecycle of a fresh stack (started,
    verified, always stopped)."""
    deployed = deploy(plan.workload, session.docroot(plan.workload), plan.seed)
    running = RunningStack(STACKS[plan.stack])
    run_dir = session.run_dir("breakdown")
    with lifecycle(running, plan.effective, deployed, run_dir, make_certificate(session.dir),
                   session.cache(), what=f"{plan.stack} with {plan.workload}"):
        urls = [_measure_url(plan, running, path, path in deployed.varying_length, run_dir)
                for path, _ in deployed.urls]
        if not running.alive():
            raise StacklabError(f"{plan.stack}: a server exited during the breakdown")
    return {"schema_version": SCHEMA_VERSION, "stack": plan.stack, "workload": plan.workload,
            "front": running.stack.components[0], "requests": plan.requests,
            "timing_samples": plan.timing_samples, "network_ms": None,
            "network_note": NETWORK_NOTE, "urls": urls}


def _measure_url(plan: BreakdownPlan, running: RunningStack, path: str, varies: bool,
                 run_dir: Path) -> dict[str, Any]:
    """Per keep-alive mode: a short warm-up, then ROUNDS rounds of the engine's requests
    each followed by a part of the Server-Timing sample under the same mode, so that both
    medians describe the same stretch of time (drift of a busy machine spreads over both)."""
    front = running.stack.components[0]
    measurements = []
    for keepalive in (False, True):
        _fetch_timings(running, path, WARMUP_REQUESTS, keepalive)
        load = dict(plan.effective["load"], keepalive=keepalive, threads=1, rate=0)
        reports, timings = [], []
        for n, k in zip(_split(plan.requests, ROUNDS), _split(plan.timing_samples, ROUNDS)):
            if n:
                url = running.front.endpoint.base_url + path
                lp = LoadPlan(((url, 1),), 1, None, n, 0.0, load, plan.seed,
                              frozenset({url}) if varies else frozenset())
                reports.append(run_load(lp, run_dir).raw)
            timings += _fetch_timings(running, path, k, keepalive)
        measurements.append(_measurement(path, keepalive, reports, _median_timing(timings),
                                         front))
    return {"path": path, "measurements": measurements}


def _split(total: int, parts: int) -> list[int]:
    """`total` in `parts` near-equal whole parts: _split(10, 4) == [3, 3, 2, 2]."""
    return [total // parts + (i < total % parts) for i in range(parts)]


def _measurement(path: str, keepalive: bool, reports: list[dict], timing: dict | None,
                 front: str) -> dict[str, Any]:
    completed = sum(r["requests"]["completed"] for r in reports)
    if not completed:
        errors = [r["requests"]["errors"] for r in reports]
        raise StacklabError(f"{path}: none of the engine's requests completed ({errors})")
    done = [r for r in reports if r["requests"]["completed"]]
    total_ms = merged_percentiles([r["histogram"] for r in done], (50,))["p50"] / 1000
    db_ms, php_ms = (timing["db_ms"], timing["php_ms"]) if timing else (None, None)
    rows = shares(total_ms, db_ms, php_ms, front)
    return {
        "keepalive": keepalive, "completed": completed,
        "failed": sum(r["requests"]["failed"] for r in reports),
        "total_ms": total_ms,       # p50 of the rounds' merged histograms
        # The engine gives these as statistics only: the median of the rounds' medians.
        "ttfb_ms": statistics.median(r["ttfb_us"]["p50"] for r in done) / 1000,
        "connect_ms": (None if keepalive else
                       statistics.median(r["connect_us"]["p50"] for r in done) / 1000),
        "server_timing": timing, "shares": rows,
        # Medians of two samples: on a busy machine the script's median can still exceed
        # the request's. Said, not hidden or clamped.
        "flags": ["script-longer-than-request"] if _web_ms(rows) < 0 else []}


def _web_ms(rows: list[dict[str, Any]]) -> float:
    return next(r["ms"] for r in rows if r["component"].startswith("web server"))


def _fetch_timings(running: RunningStack, path: str, count: int,
                   keepalive: bool) -> list[dict[str, float]]:
    """`count` GETs (one kept-alive connection, or a new one each), their Server-Timing."""
    found = []
    conn = connection(running.front.endpoint)
    try:
        for _ in range(count):
            resp = request(conn, path)
            if resp.status != 200:
                raise StacklabError(f"{path}: status {resp.status} while reading "
                                    "Server-Timing")
            found.append(server_timing(resp.headers.get("server-timing")))
            if resp.will_close or not keepalive:
                conn.close()
                conn = connection(running.front.endpoint)
    finally:
        conn.close()
    return found


def _median_timing(timings: list[dict[str, float]]) -> dict[str, Any] | None:
    """Medians of db and php (ms); None if the page sends no Server-Timing (static)."""
    both = [t for t in timings if "db" in t and "php" in t]
    if not both:
        return None
    return {"samples": len(both), "db_ms": statistics.median(t["db"] for t in both),
            "php_ms": statistics.median(t["php"] for t in both)}


def run_breakdown(plan: BreakdownPlan, env: Environment) -> BreakdownRecord:
    """Measure in a lab session of its own under env's lab root; the record to store, with
    provenance, dated by env's clock as it begins."""
    created_at = env.clock()
    versions = {name: COMPONENTS[name].version() for name in STACKS[plan.stack].components}
    versions["stacklab-load"] = engine_version()
    versions["stacklab"] = __version__
    with lab.session_scope(env.lab_root) as session, CpuAwake() as cpus:
        system = cpus.state()   # one connection: idle-CPU wake-ups would dominate
        result = measure_breakdown(plan, session)
    return BreakdownRecord(created_at, plan.stack, plan.workload, plan.knobs, result,
                           versions, {**host_facts(), **system})
