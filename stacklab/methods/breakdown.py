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
    network     = total over veth         (--network veth: S1 fetched once locally and
                  - total on loopback      once over the network; here a second fresh
                                           stack in a namespace of its own, the engine in
                                           another, joined by a veth pair whose round-trip
                                           time is measured and shown beside it)

With `--network loopback` (the default) the network row is None: client and server share
the host. With veth, database, php and web server are the loopback stack's figures (as
S1 computed them from the local fetch), so the four add up to the total over veth and
percentages are of that total. Server-Timing over veth is read from the server's own
namespace (it describes the server, not the link).

Pages without Server-Timing (static files) are all web server. Each measurement is a
composition of a run's layers (layers.Composition): the lab's network
(netlab.layers.NetworkLayer) and the one stack lifecycle (stack.StackLayer). Plain data
out: a versioned JSON document (`schema_version`, units in field names), laid out by
report/measures.py.

Schema changes:
  1  network_ms None and the network row empty (loopback only).
  2  `network`: what the stack ran over ({"mode": "loopback"}, or the veth link's record:
     `link`, measured `rtt_ms` and `rate_bytes_s`, the bytes that crossed it); each
     measurement's `veth` (the same figures over the link, or None) and `network_ms`;
     the network row's `ms`, `percent` and `rtt_ms`; top-level `network_ms` the median
     over the URLs per keep-alive mode ({"keepalive_off": ms, "keepalive_on": ms}) or
     None; `network_note` says the method. Old documents still lay out.
  3  a repetition of a series: `repetition` (1-based), `repetitions` (how many were
     planned) and `series` (the stored id of the series' first repetition; None in that
     first one, whose own id names the series). Each repetition is a fresh stack, stored
     as it finishes. Documents 1 and 2 read as a series of one (their own id).

`series_summary` gives a series' medians with their intervals (stats via
analyze.Estimate: the median's order-statistic CI, called a range below 6 repetitions).
"""

from __future__ import annotations

import os
import re
import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from .. import __version__
from ..host import lab
from ..analysis.analyze import Estimate
from ..measure.drive import LoadPlan, LoadReport, engine_version, run_load
from ..env import Environment
from ..errors import StacklabError, UsageError
from ..host.hostinfo import host_facts
from ..layer import Place
from ..run.layers import Composition
from ..netlab.layers import NetworkLayer
from ..netlab.sweep import SWEEPS
from ..experiment.plan import Plan, PlannedRun, Trial, effective_knobs, fixed_conflict
from ..run.validate import Field, check_installed, validate_plan
from ..run.stack import RunningStack, Site, StackLayer
from ..stacks import COMPONENTS, REGISTRY, STACKS
from ..stacks.base import versions_of
from ..stacks.tls import make_certificate
from ..analysis.stats import merged_percentiles
from ..store import BreakdownRecord, Store
from ..host.systune import CpuAwake
from ..measure.verify import connection, request
from ..workloads import WORKLOADS, Deployed, deploy

SCHEMA_VERSION = 3
SUMMARY_VERSION = 1     # series_summary's document (schemas/breakdown.schema.json)
TIMING_SAMPLES = 50          # Server-Timing readings per URL and keep-alive mode
WARMUP_REQUESTS = 10         # before each mode's measurement, not counted
ROUNDS = 5                   # engine requests and Server-Timing samples alternate
NETWORKS = ("loopback", "veth")
LINKS = REGISTRY.get("net.link").choices   # the rates a run's veth link takes
NETWORK_NOTE = ("loopback only: client and server share the host, so no network share is "
                "measured; --network veth measures it across a virtual link")
VETH_NOTE = ("S1's method: network = the median over the veth link minus the median on "
             "loopback, each in a fresh stack; database, php and web server are the "
             "loopback stack's (web server = loopback total - db - php), so the shares add "
             "up to the total over veth")
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
    network: str = "loopback"              # "veth": measured again over a veth link
    link: str = "unlimited"                # that link's rate (net.link)
    repetitions: int = 1                   # fresh stacks measured one after another

    def passes(self) -> list[dict[str, dict[str, Any]]]:
        """The effective knobs of each stack to measure: loopback, then (with veth) the
        same over a veth link."""
        over = {**self.effective["net"], "mode": "veth", "link": self.link}
        return [self.effective] + ([{**self.effective, "net": over}]
                                   if self.network == "veth" else [])


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


def check_network(network: str, link: str | None) -> str:
    """--network and --link as given: the link's rate ("unlimited" if not given); a bad
    value, a link without veth, or veth without root is one line naming the flag."""
    if network not in NETWORKS:
        raise UsageError(f"--network {network!r}: one of {', '.join(NETWORKS)}")
    if link is not None and link not in LINKS:
        raise UsageError(f"--link {link!r}: one of {', '.join(LINKS)}")
    if link is not None and network != "veth":
        raise UsageError(f"--link {link}: acts only with --network veth (loopback has no "
                         "link)")
    if network == "veth" and os.geteuid() != 0:
        raise UsageError("--network veth: creates network namespaces, which needs root "
                         "(run as root, or measure on loopback)")
    return link or "unlimited"


def plan_breakdown(stack: str, workload: str, knob_args: list[str], requests: int,
                   seed: int = 1, *, network: str = "loopback",
                   link: str | None = None, repetitions: int = 1) -> BreakdownPlan:
    """Validate everything before any server starts (the arguments, then the one-trial
    plan as every command does); every error names the value."""
    link = check_network(network, link)
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
    if repetitions < 1:
        raise UsageError(f"--repetitions {repetitions}: must be at least 1")
    sdef = STACKS[stack]
    knobs = dict(parse_knob(a) for a in knob_args)
    for key, value in knobs.items():
        owner = key.split(".", 1)[0]
        if owner == "load":
            raise UsageError(f"--knob {key}={value}: breakdown sets the load itself (one "
                             "connection, keep-alive off and on)")
        if owner == "net":
            raise UsageError(f"--knob {key}={value}: breakdown sets the network with "
                             "--network and --link")
        if owner not in sdef.knob_owners:
            raise UsageError(f"--knob {key}={value}: does not apply to stack {stack!r}")
        if problem := fixed_conflict(sdef, key, value):
            raise UsageError(f"--knob {key}={value}: {problem}")
    trial = Trial(stack, workload, 1, tuple(sorted(knobs.items())), ())
    over = {"net.mode": network, "net.link": link} if network == "veth" else {}
    checked = Trial(stack, workload, 1, tuple(sorted({**knobs, **over}.items())), ())
    validate_plan(Plan((checked,), (PlannedRun(checked, 1),)), Arguments(knobs))
    check_installed(sdef.components, engine=True)
    return BreakdownPlan(stack, workload, knobs, effective_knobs(REGISTRY, sdef, trial),
                         requests, seed, network=network, link=link,
                         repetitions=repetitions)


def server_timing(header: str | None) -> dict[str, float]:
    """`db;dur=0.8, php;dur=0.6` -> {"db": 0.8, "php": 0.6} (ms); {} without the header."""
    return {name: float(dur) for name, dur in _TIMING.findall(header or "")}


def shares(total_ms: float, db_ms: float | None, php_ms: float | None, front: str,
           network_ms: float | None = None, rtt_ms: float | None = None
           ) -> list[dict[str, Any]]:
    """One request's median time on loopback (`total_ms`) split into components, and
    with `network_ms` (total over veth - total on loopback) the network's share beside
    the link's `rtt_ms`: the measured ones add up to `total_ms + network_ms` (the total
    over veth), percentages are of that sum. Without it (loopback) network is None."""
    parts = []
    if db_ms is not None:
        parts.append(("database", db_ms))
    if php_ms is not None:
        parts.append(("php", php_ms))
    parts.append((f"web server ({front})", total_ms - (db_ms or 0.0) - (php_ms or 0.0)))
    whole = total_ms + (network_ms or 0.0)
    if network_ms is not None:
        parts.append(("network", network_ms))
    rows = [{"component": c, "ms": ms, "percent": 100.0 * ms / whole if whole else None}
            for c, ms in parts]
    if network_ms is None:
        rows.append({"component": "network", "ms": None, "percent": None,
                     "note": NETWORK_NOTE})
    else:
        rows[-1] |= {"rtt_ms": rtt_ms, "note": VETH_NOTE}
    return rows


# measuring -----------------------------------------------------------------------

Step = Callable[[str], None]    # told what starts next: "loopback", "veth", "1/3 veth"


def measure_breakdown(plan: BreakdownPlan, session: lab.Session,
                      on_step: Step = lambda what: None, label: str = "") -> dict[str, Any]:
    """Every URL of the workload, measured in the lifecycle of a fresh stack (started,
    verified, always stopped) on loopback, and with veth again in another one across the
    link; then split into shares. `on_step` hears each stack's start."""
    deployed = deploy(plan.workload, session.docroot(plan.workload), plan.seed)
    tls = make_certificate(session.dir)
    passes = []
    for knobs in plan.passes():
        on_step(f"{label}{knobs['net']['mode']}")
        passes.append(_measure_over(plan, knobs, deployed, session, tls))
    front, local, _ = passes[0]
    _, remote, link = passes[-1]       # the loopback pass again when there is no veth one
    veth = len(passes) > 1
    urls = [{"path": path, "measurements": [
                _combined(here, there if veth else None, front, link.get("rtt_ms"))
                for here, there in zip(modes, remote_modes)]}
            for (path, modes), (_, remote_modes) in zip(local, remote)]
    return {"schema_version": SCHEMA_VERSION, "stack": plan.stack, "workload": plan.workload,
            "front": front, "requests": plan.requests,
            "timing_samples": plan.timing_samples, "network": link,
            "network_ms": _network_summary(urls) if veth else None,
            "network_note": VETH_NOTE if veth else NETWORK_NOTE, "urls": urls}


Figures = list[tuple[str, list[dict[str, Any]]]]   # (path, [keep-alive off, on])


def _measure_over(plan: BreakdownPlan, knobs: dict[str, dict[str, Any]], deployed: Deployed,
                  session: lab.Session, tls: tuple[Path, Path]
                  ) -> tuple[str, Figures, dict[str, Any]]:
    """One fresh stack on the network `knobs["net"]` gives (netlab.run.network: with
    veth this thread is inside the server's namespace meanwhile, where the servers start
    and the Server-Timing samples are fetched, and the engine runs in the client's): the
    front's name, each URL's figures and the network's record (the link's RTT and rate,
    the bytes that crossed it)."""
    mode = knobs["net"]["mode"]
    run_dir = session.run_dir(f"breakdown-{mode}")
    running = RunningStack(STACKS[plan.stack])
    # the link is judged alone, before any server starts; the stack by its lifecycle
    net = NetworkLayer(knobs["net"], Place(session.layer_id("breakdown"), session.dir),
                       waits=False)
    stack = StackLayer(running, knobs, run_dir, lambda: deployed,
                       lambda: Site(net.network.host), tls, session.cache(),
                       what=f"{plan.stack} with {plan.workload} ({mode})")
    with Composition((net, stack), f"{plan.stack}'s veth link").entered() as composed:
        urls = [(path, _measure_url(plan, knobs["load"], running, path,
                                    path in deployed.varying_length, run_dir,
                                    net.network.client_ns))
                for path, _ in deployed.urls]
        if not running.alive():
            raise StacklabError(f"{plan.stack}: a server exited during the breakdown "
                                f"({mode})")
        return running.stack.components[0], urls, composed.record()["_net"]


def _measure_url(plan: BreakdownPlan, load: dict[str, Any], running: RunningStack,
                 path: str, varies: bool, run_dir: Path,
                 netns: str | None) -> list[dict[str, Any]]:
    """Per keep-alive mode: a short warm-up, then ROUNDS rounds of the engine's requests
    (in `netns`, the client's namespace, if given) each followed by a part of the
    Server-Timing sample under the same mode, so that both medians describe the same
    stretch of time (drift of a busy machine spreads over both)."""
    measurements = []
    for keepalive in (False, True):
        _fetch_timings(running, path, WARMUP_REQUESTS, keepalive)
        mode = dict(load, keepalive=keepalive, threads=1, rate=0)
        reports, timings = [], []
        for n, k in zip(_split(plan.requests, ROUNDS), _split(plan.timing_samples, ROUNDS)):
            if n:
                url = running.front.endpoint.base_url + path
                lp = LoadPlan(((url, 1),), 1, None, n, 0.0, mode, plan.seed,
                              frozenset({url}) if varies else frozenset(), netns=netns)
                reports.append(run_load(lp, run_dir))
            timings += _fetch_timings(running, path, k, keepalive)
        measurements.append(_measurement(path, keepalive, reports, _median_timing(timings)))
    return measurements


def _split(total: int, parts: int) -> list[int]:
    """`total` in `parts` near-equal whole parts: _split(10, 4) == [3, 3, 2, 2]."""
    return [total // parts + (i < total % parts) for i in range(parts)]


def _measurement(path: str, keepalive: bool, reports: list[LoadReport],
                 timing: dict | None) -> dict[str, Any]:
    completed = sum(r.completed for r in reports)
    if not completed:
        errors = [r.errors for r in reports]
        raise StacklabError(f"{path}: none of the engine's requests completed ({errors})")
    done = [r for r in reports if r.completed]
    return {
        "keepalive": keepalive, "completed": completed,
        "failed": sum(r.failed for r in reports),
        "total_ms": merged_percentiles([r.histogram for r in done], (50,))["p50"] / 1000,
        # The engine gives these as statistics only: the median of the rounds' medians.
        "ttfb_ms": statistics.median(r.ttfb_us.p50 for r in done) / 1000,
        "connect_ms": (None if keepalive else
                       statistics.median(r.connect_us.p50 for r in done) / 1000),
        "server_timing": timing}


def _combined(here: dict[str, Any], there: dict[str, Any] | None, front: str,
              rtt_ms: float | None) -> dict[str, Any]:
    """One keep-alive mode's figures on loopback (`here`) and over veth (`there`, None
    on loopback only), split into shares, with what is odd about them flagged."""
    timing = here["server_timing"]
    db_ms, php_ms = (timing["db_ms"], timing["php_ms"]) if timing else (None, None)
    network_ms = round(there["total_ms"] - here["total_ms"], 6) if there else None
    rows = shares(here["total_ms"], db_ms, php_ms, front, network_ms, rtt_ms)
    # Medians of separate samples: on a busy machine the script's median can exceed the
    # request's, and on an unshaped link the veth stack's median can be the lower one.
    # Said, not hidden or clamped.
    flags = ["script-longer-than-request"] if _web_ms(rows) < 0 else []
    if network_ms is not None and network_ms < 0:
        flags.append("veth-faster-than-loopback")
    veth = {k: v for k, v in there.items() if k != "keepalive"} if there else None
    return {**here, "veth": veth, "network_ms": network_ms, "shares": rows, "flags": flags}


def _network_summary(urls: list[dict[str, Any]]) -> dict[str, float]:
    """The network share per keep-alive mode: the median over the workload's URLs."""
    return {f"keepalive_{'on' if on else 'off'}": statistics.median(
                m["network_ms"] for u in urls for m in u["measurements"]
                if m["keepalive"] == on)
            for on in (False, True)}


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
    """One repetition in a lab session of its own under env's lab root; the record to
    store, with provenance, dated by env's clock as it begins."""
    records: list[BreakdownRecord] = []
    _run_series(plan, env, records.append, lambda what: None, repetitions=1)
    return records[0]


def run_breakdowns(plan: BreakdownPlan, env: Environment, store: Store,
                   on_step: Step = lambda what: None,
                   on_stored: Callable[[BreakdownRecord], None] = lambda r: None
                   ) -> list[BreakdownRecord]:
    """plan.repetitions repetitions, each a fresh stack, each stored as it finishes (a
    later failure loses nothing measured); the stored records, ids set."""
    stored: list[BreakdownRecord] = []

    def keep(record: BreakdownRecord) -> None:
        if stored:                        # the series is named by its first record's id
            record = replace(record, result={**record.result, "series": stored[0].id})
        record = replace(record, id=store.add_breakdown(record))
        stored.append(record)
        on_stored(record)
    _run_series(plan, env, keep, on_step, plan.repetitions)
    return stored


def _run_series(plan: BreakdownPlan, env: Environment,
                keep: Callable[[BreakdownRecord], None], on_step: Step,
                repetitions: int) -> None:
    versions = versions_of((COMPONENTS[name], plan.effective[name])
                           for name in STACKS[plan.stack].components)
    versions["stacklab-load"] = engine_version()
    versions["stacklab"] = __version__
    with lab.session_scope(env.lab_root, sweeps=SWEEPS) as session, CpuAwake() as cpus:
        system = cpus.state()   # one connection: idle-CPU wake-ups would dominate
        for i in range(1, repetitions + 1):
            created_at = env.clock()
            label = f"{i}/{repetitions} " if repetitions > 1 else ""
            result = measure_breakdown(plan, session, on_step, label)
            result |= {"repetition": i, "repetitions": repetitions, "series": None}
            keep(BreakdownRecord(created_at, plan.stack, plan.workload, plan.knobs, result,
                                 versions, {**host_facts(), **system}))


# a stored series -----------------------------------------------------------------

def series_id(record: BreakdownRecord) -> int:
    """The series a stored record belongs to: named by its first record's id (schema 3);
    an older record is a series of its own."""
    return record.result.get("series") or record.id


def group_series(records: list[BreakdownRecord]) -> dict[int, list[BreakdownRecord]]:
    """Stored records by series, oldest first within each."""
    groups: dict[int, list[BreakdownRecord]] = {}
    for r in sorted(records, key=lambda r: r.id):
        groups.setdefault(series_id(r), []).append(r)
    return groups


def estimate_doc(values: list[float | None]) -> dict[str, Any] | None:
    """A figure over the repetitions: median, interval (None below two values) and what
    the interval is (0.95, or a range's real coverage below 6 values); None when no
    repetition has the figure (the network row on loopback)."""
    got = [v for v in values if v is not None]
    if not got:
        return None
    e = Estimate.of(got)
    return {"median": e.median, "ci": list(e.ci) if e.ci else None, "ci_level": e.ci_level,
            "is_range": e.is_range, "values": got}


def series_summary(records: list[BreakdownRecord]) -> dict[str, Any]:
    """One series' medians over its repetitions with their intervals, per URL, keep-alive
    mode and component (schemas/breakdown.schema.json, "series")."""
    first = records[0]
    results = [r.result for r in records]
    urls = []
    for u, url in enumerate(first.result["urls"]):
        measurements = []
        for m, head in enumerate(url["measurements"]):
            each = [res["urls"][u]["measurements"][m] for res in results]
            rows = [{"component": row["component"],
                     "ms": estimate_doc([e["shares"][k]["ms"] for e in each]),
                     "percent": estimate_doc([e["shares"][k]["percent"] for e in each]),
                     "rtt_ms": estimate_doc([e["shares"][k].get("rtt_ms") for e in each])}
                    for k, row in enumerate(head["shares"])]
            veth = [e.get("veth") for e in each]
            measurements.append({
                "keepalive": head["keepalive"], "shares": rows,
                "total_ms": estimate_doc([e["total_ms"] for e in each]),
                "ttfb_ms": estimate_doc([e["ttfb_ms"] for e in each]),
                "veth_total_ms": estimate_doc([v["total_ms"] if v else None for v in veth]),
                "flags": sorted({f for e in each for f in e["flags"]})})
        urls.append({"path": url["path"], "measurements": measurements})
    network = first.result.get("network") or {"mode": "loopback"}
    return {"schema_version": SUMMARY_VERSION, "kind": "breakdown",
            "series": series_id(first),
            "ids": [r.id for r in records], "created_at": first.created_at,
            "stack": first.stack, "workload": first.workload, "knobs": first.knobs,
            "network": network["mode"], "link": network.get("link"),
            "requests": first.result["requests"], "repetitions": len(records),
            "planned_repetitions": first.result.get("repetitions", 1),
            "front": first.result["front"], "urls": urls}


def series_entry(records: list[BreakdownRecord]) -> dict[str, Any]:
    """One line of `breakdown --list`."""
    first = records[0]
    network = first.result.get("network") or {"mode": "loopback"}
    return {"series": series_id(first), "ids": [r.id for r in records],
            "created_at": first.created_at, "stack": first.stack,
            "workload": first.workload, "knobs": first.knobs, "network": network["mode"],
            "repetitions": len(records),
            "planned_repetitions": first.result.get("repetitions", 1)}
