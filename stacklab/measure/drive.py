"""Drive: run the load engine (stacklab-load) against a running stack, read its JSON report."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EngineError
from ..knobs import Knob
from ..host.interrupts import interrupts_held
from ..host.placement import pin
from ..host.regular import write_in_place

ENGINE_NAME = "stacklab-load"
REPO_ENGINE = Path(__file__).resolve().parents[2] / "engine/target/release" / ENGINE_NAME
ENGINE_VARIABLE = "STACKLAB_ENGINE"   # another engine: for tests and tools (engine_path)
# Report versions this side reads: the engine prints 5; stored runs hold 1 to 4. Keys new
# in 2 (connections, in_flight, ended_early, timeseries width_s), in 3 (config.schedule,
# each URL's method), in 4 (protocol, tls.alpn) and in 5 (config.segment, start,
# histograms: for a load split over agents) are read with .get.
SUPPORTED_SCHEMAS = (1, 2, 3, 4, 5)
# Exit statuses after which the engine has printed its full report (engine/README.md,
# "Exit status"): a run that completed nothing or was interrupted is data, not a crash.
REPORT_EXITS = {0: "ok", 3: "no request completed", 4: "error share above --max-error-rate",
                130: "interrupted"}

# Request headers load.headers may not set, and why: each would make the load other than
# what the trial records and verification checked.
REFUSED_HEADERS = {
    "host": "the engine sends the URL's own Host; another one would reach a virtual host "
            "that verification never checked",
    "content-length": "a GET here has no body, so a length would leave the server waiting "
                      "for bytes that never come",
    "transfer-encoding": "a GET here has no body, so a body framing would make the server "
                         "read the next request as this one's body",
    "connection": "connection reuse is load.keepalive (the engine reuses a connection by "
                  "the server's answer); a header would contradict what the trial records",
}
# The conditions load.conditional sends (and that a literal header may send instead).
CONDITIONAL_HEADERS = ("if-none-match", "if-modified-since")
CONDITIONS = ("none", "etag", "last-modified")
# What load.protocol asks the engine to speak (its --protocol): HTTP/1.1, HTTP/2 over TLS
# by ALPN (https URLs), cleartext HTTP/2 by prior knowledge (http URLs).
PROTOCOLS = ("http/1.1", "h2", "h2c")
HTTP2 = ("h2", "h2c")
MAX_HEADERS = 32
MAX_AGENTS = 16            # load.agents: local ones are a namespace and a worker each
MAX_HEADER_CHARS = 4096    # servers refuse a field past 8 KiB (Apache 8190, nginx 8k)
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def header_problem(entry: object) -> str | None:
    """Why `entry` cannot be one of load.headers ("Name: value"), or None. Strict: the
    name an HTTP token, the value visible ASCII, spaces and tabs, nothing that would end
    the header early (CR, LF, NUL) and so add a request field the trial does not say."""
    if not isinstance(entry, str):
        return "expected a string 'Name: value'"
    if bad := next((c for c in entry if c in "\r\n\0"), None):
        return (f"contains {bad!r}: a line break or NUL would end the header there and "
                "send what follows as another field")
    name, colon, value = entry.partition(":")
    if not colon:
        return "expected 'Name: value' (no colon)"
    if not _TOKEN.fullmatch(name):
        return (f"header name {name!r} is not an HTTP token (letters, digits and "
                "!#$%&'*+-.^_`|~, no spaces)")
    if why := REFUSED_HEADERS.get(name.lower()):
        return f"{name} may not be set: {why}"
    if any(not (c == "\t" or " " <= c <= "~") for c in value):
        return ("the value holds a control or non-ASCII character (visible ASCII, spaces "
                "and tabs only)")
    if len(entry) > MAX_HEADER_CHARS:
        return f"longer than {MAX_HEADER_CHARS} characters"
    return None


def parse_header(entry: str) -> tuple[str, str]:
    """A valid load.headers entry as (name, value), the value trimmed as the engine does."""
    name, _, value = entry.partition(":")
    return name, value.strip()


def conditional_conflict(headers: list[str], conditional: str) -> str | None:
    """Why load.headers and load.conditional cannot both be had, or None: a literal
    condition next to the one stacklab resolves would send two."""
    if conditional == "none":
        return None
    clash = [h for h in headers if parse_header(h)[0].lower() in CONDITIONAL_HEADERS]
    return (f"load.headers already sends {clash[0].partition(':')[0]}; with load.conditional "
            f"= {conditional!r} stacklab sends the condition itself: set one of them"
            if clash else None)


def replay_problem(value: str) -> str | None:
    """Why `value` cannot be load.replay's path, or None ("" is no replay); whether the
    file is there and reads as a log is checked with the experiment file
    (workloads.accesslog.resolve_replay), where a relative path has its directory."""
    if any(c in value for c in "\0\n\r"):
        return "a path may not hold NUL or a line break"
    if len(value) > 4096:
        return "longer than 4096 characters"
    return None


LOAD_KNOBS = [
    Knob("load", "keepalive", bool, True, "Reuse connections (HTTP/1.1 keep-alive); off opens "
         "a new connection per request, like ab without -k.", source="S1, S5"),
    Knob("load", "threads", int, 0, "Engine threads (0 = one per core, at most one per "
         "connection).", min=0, max=256),
    Knob("load", "rate", int, 0, "Open loop: requests per second in total, latency timed from "
         "the intended send time (0 = closed loop).", min=0, max=10_000_000, unit="req/s"),
    Knob("load", "compressed", bool, False, "Send Accept-Encoding: gzip, deflate."),
    Knob("load", "tls_resume", bool, True, "Resume TLS sessions on new connections (off: a "
         "full handshake every time).", source="S2"),
    Knob("load", "timeout_s", float, 10.0, "Per-request timeout in seconds.", min=0.01,
         max=600, unit="s"),
    Knob("load", "headers", list, [], "Extra request headers, each 'Name: value', sent with "
         "every request (wrk -H, ab -H); not Host, Content-Length, Transfer-Encoding or "
         "Connection.",
         validate=lambda v: f"at most {MAX_HEADERS} headers" if len(v) > MAX_HEADERS else None,
         each=header_problem),
    Knob("load", "conditional", str, "none", "Conditional GETs: each URL fetched once before "
         "the load, its validator sent back with every request (etag: If-None-Match; "
         "last-modified: If-Modified-Since); verified to be answered 304 without a body.",
         choices=CONDITIONS, source="S4"),
    Knob("load", "replay", str, "", "Replay an access log (Common or Combined Log Format, "
         "nginx's and Apache's default; a path relative to the experiment file): its GET "
         "and HEAD requests answered 2xx/3xx, with their frequencies, replace the "
         "workload's URL list on its docroot; unreadable lines, other methods and "
         "statuses are counted and stored with each run (resources _replay), URLs the "
         "deployed site does not serve are dropped, and past 1% of the requests the run "
         "is refused (\"\" = the workload's own URLs).", validate=replay_problem),
    Knob("load", "protocol", str, "http/1.1", "What the engine speaks: http/1.1, h2 "
         "(HTTP/2 over TLS, chosen by ALPN: the front's tls on) or h2c (cleartext HTTP/2 "
         "by prior knowledge: the front's tls off); HTTP/2 needs the front's http2 knob "
         "on, and the run is invalid unless the responses came in it.",
         choices=PROTOCOLS),
    Knob("load", "streams", int, 1, "HTTP/2: concurrent streams per connection (h2load's "
         "-m); each stream is a client, so the run holds concurrency × streams requests "
         "in flight.", min=1, max=1024, acts_with={"protocol": HTTP2}),
    Knob("load", "agents", int, 0, "Load agents: the load split among this many Dask "
         "workers, each on a host of its own (a network namespace of the lab's, with "
         "net.mode = \"veth\"; other hosts with run --agents-listen), started together and "
         "merged into one exact result (connections shared out evenly; an open loop's "
         "arrivals dealt out by index, so together they send the one-agent schedule); 0: "
         "one engine, no agents.", min=0, max=MAX_AGENTS),
    Knob("load", "replay_times", bool, False, "With load.replay: send each request at its "
         "logged arrival time, the log scaled to load.rate requests per second on average "
         "and played once (open loop; experiment.duration and warm-up are not used)."),
]


# What each HTTP/2 protocol needs of the server the load speaks to (its knobs `tls` and
# `http2`): h2 is over TLS with HTTP/2 on, h2c cleartext with it on. The one rule the
# front's check (stacks/http2.protocol_problem) and the plan (plan.implied_by_protocol)
# read.
PROTOCOL_NEEDS = {"h2": {"tls": True, "http2": True}, "h2c": {"tls": False, "http2": True}}


def protocol_conflict(load: dict[str, Any]) -> str | None:
    """Why load.protocol cannot go with the other load knobs, or None: HTTP/2 keeps its
    connections (the engine refuses --no-keepalive with it)."""
    if load.get("protocol", "http/1.1") in HTTP2 and not load.get("keepalive", True):
        return ("HTTP/2 keeps its connections, and load.keepalive = false asks a new one "
                "per request: set load.keepalive = true, or load.protocol = 'http/1.1'")
    return None


def engine_path() -> Path:
    """The engine named by STACKLAB_ENGINE, else the one built in this checkout, else one
    on PATH. The variable is the one seam for another engine (tests/fake_engine, a
    tool's own build), like hyperfine's mock executor: an environment variable, so that
    a stacklab process a test starts runs the same engine."""
    if chosen := os.environ.get(ENGINE_VARIABLE):
        if not os.access(chosen, os.X_OK) or not Path(chosen).is_file():
            raise EngineError(f"{ENGINE_VARIABLE}={chosen}: not an executable file")
        return Path(chosen)
    if REPO_ENGINE.exists():
        return REPO_ENGINE
    found = shutil.which(ENGINE_NAME)
    if not found:
        raise EngineError(f"{ENGINE_NAME} not found: build it with "
                          "`cargo build --release --manifest-path engine/Cargo.toml`")
    return Path(found)


@dataclass(frozen=True)
class LoadPlan:
    """Everything the engine needs for one run; built by the runner from a trial."""

    urls: tuple[tuple[str, int], ...]   # (absolute URL, weight)
    connections: int
    duration_s: float | None
    requests: int | None
    warmup_s: float
    load: dict[str, Any]                # the `load.*` knob values
    seed: int = 1
    varies: frozenset[str] = frozenset()  # URLs whose body length changes by design
    timeout_s: float | None = None      # the engine's limit; None: engine_timeout_s(plan)
    netns: str | None = None            # the lab's client namespace the engine runs in
    # The condition load.conditional resolved to (verify.verify_requests): the validators
    # are the server's, read once it runs; load.headers are sent as written.
    headers: tuple[tuple[str, str], ...] = ()
    # Each URL's own method, in the order of `urls` (a replay's HEAD lines); () : GET.
    methods: tuple[str, ...] = ()
    # A replay's arrival times: (send offset in s, index into `urls`), in order, each
    # sent once (open loop); the run then has no duration, request count or warm-up.
    schedule: tuple[tuple[float, int], ...] = ()
    allow_remote: bool = False          # the user's --allow-remote (command line only)
    # Where the engine writes its report, synced, before it exits (its --report-file; the
    # run's room in the journal, Store.pending), besides printing it; None: printed only
    report_file: Path | None = None


@dataclass(frozen=True, kw_only=True)
class Latency:
    """One of the engine's latency summaries, in µs (its `*_us` objects)."""

    p50: float
    p90: float
    p99: float
    max: float
    mean: float | None = None
    p999: float | None = None

    @classmethod
    def from_json(cls, doc: dict) -> "Latency":
        return cls(p50=doc["p50"], p90=doc["p90"], p99=doc["p99"], max=doc["max"],
                   mean=doc.get("mean"), p999=doc.get("p999"))


@dataclass(frozen=True, kw_only=True)
class Bucket:
    """One bucket of the engine's time series: the requests that ended in it."""

    t_s: int                         # its start, seconds into the measured phase
    width_s: int                     # 1, coarser past an hour (schema 1: always 1)
    completed: int
    errors: int
    p99_us: int
    # the completed requests' exact mean latency; None from an engine without it
    mean_us: float | None = None

    @classmethod
    def from_json(cls, doc: dict) -> "Bucket":
        return cls(t_s=doc["t_s"], width_s=doc.get("width_s") or 1,
                   completed=doc["completed"], errors=doc["errors"], p99_us=doc["p99_us"],
                   mean_us=doc.get("mean_us"))


@dataclass(frozen=True, kw_only=True)
class Slots:
    """Per connection ("slot") figures of a closed loop (engine schema 2 on): how evenly
    the clients were served."""

    slots: int
    idle: int                        # connections that completed nothing
    requests_min: int                # requests per connection: min, p1, median, max
    requests_p1: int
    requests_median: int
    requests_max: int
    longest_wait_median_us: int      # each connection's longest wait for one response
    longest_wait_max_us: int

    @classmethod
    def from_json(cls, doc: dict) -> "Slots":
        per, wait = doc["requests_per_slot"], doc["longest_wait_us"]
        return cls(slots=doc["slots"], idle=doc["idle_slots"], requests_min=per["min"],
                   requests_p1=per["p1"], requests_median=per["median"],
                   requests_max=per["max"], longest_wait_median_us=wait["median"],
                   longest_wait_max_us=wait["max"])


@dataclass(frozen=True, kw_only=True)
class InFlight:
    """Requests still in flight when the run ended (engine schema 2 on)."""

    count: int
    age_us_max: int
    older_than_run: int              # of them, waiting longer than the run lasted

    @classmethod
    def from_json(cls, doc: dict) -> "InFlight":
        return cls(count=doc["count"], age_us_max=doc["age_us_max"],
                   older_than_run=doc["older_than_run"])


@dataclass(frozen=True, kw_only=True)
class TlsSession:
    """What the engine negotiated over TLS, and how many handshakes resumed a session."""

    protocol: str
    cipher: str | None
    handshakes: int
    resumed: int
    alpn: str | None = None            # what the server chose by ALPN (schema 4 on)


@dataclass(frozen=True, kw_only=True)
class AgentFigures:
    """What one load agent did (a merged report's `agents.per_agent`, agents.merge)."""

    name: str
    host: str
    netns: str | None
    connections: int
    threads: int
    completed: int
    rps: float
    wall_s: float                      # its engine's warm-up and measured phase
    cpu_s: float                       # its engine's CPU, warm-up included
    busy: float | None                 # the share of its engine threads' time busy
    p99_us: int
    start_unix_us: int | None          # its engine's time zero, by its host's clock

    @classmethod
    def from_json(cls, doc: dict) -> "AgentFigures":
        return cls(name=doc["name"], host=doc["host"], netns=doc.get("netns"),
                   connections=doc["connections"], threads=doc["threads"],
                   completed=doc["completed"], rps=doc["rps"], wall_s=doc["wall_s"],
                   cpu_s=doc["cpu_s"], busy=doc.get("busy"), p99_us=doc["latency_us"]["p99"],
                   start_unix_us=doc.get("start_unix_us"))


@dataclass(frozen=True, kw_only=True)
class LoadReport:
    """The engine's JSON report, read once: the figures the orchestrator uses, typed.

    `raw` is the report whole, for storage and exports only; nothing reads figures from
    it but `from_json`, the one place that knows the engine's JSON layout (versions 1
    and 2, engine/README.md "Schema changelog")."""

    raw: dict = field(repr=False)
    completed: int
    failed: int
    errors: dict[str, int]             # failed requests by class (connect, read, …)
    rps: float
    duration_s: float                  # the measured phase
    warmup_s: float
    threads: int
    connections: int | None            # asked for (config)
    rate: float | None                 # open loop: the asked-for rate; None: closed loop
    bytes_total: int                   # read from the socket, HTTP heads included
    latency_us: Latency                # from the intended send time
    ttfb_us: Latency                   # from the request's write to the first byte back
    connect_us: Latency                # each new connection's connect
    histogram: str | None              # corrected latency, base64 HdrHistogram
    engine_cpu_s: float                # the engine's whole process, warm-up included
    tls: TlsSession | None             # None: no TLS negotiated
    slots: Slots | None                # None: engine schema 1
    in_flight: InFlight | None         # None: engine schema 1
    interrupted: bool                  # stopped early by a signal from outside
    exit_status: int = field(default=0, compare=False)   # one of REPORT_EXITS; not stored
    # completed responses by status class ("2xx", "5xx", …): a 502 completes a request
    status_classes: dict[str, int] = field(default_factory=dict)
    timeseries: tuple[Bucket, ...] = ()   # the measured phase, bucket by bucket
    # What the responses came in ("http/1.1", "h2", "h2c"); None when none completed,
    # or in a report older than schema 4
    protocol: str | None = None
    asked_protocol: str = "http/1.1"      # config.protocol (schema 4 on)
    streams: int = 1                      # HTTP/2 streams per connection (config.streams)
    # A load from several agents (load.agents; agents.merge): each one's figures, how far
    # apart their engines started, the time spent beside the load (barrier, start,
    # results), and the CPU of the local agents' own processes (Dask workers, their
    # engines not counted: those are in engine_cpu_s), which is the lab's
    agents: tuple[AgentFigures, ...] = ()
    agents_start_skew_us: int | None = None
    agents_clock_spread_us: int | None = None   # the agents' clocks, by the scheduler's
    agents_overhead_s: float | None = None
    agents_workers_cpu_s: float = 0.0

    @classmethod
    def from_json(cls, doc: dict, exit_status: int = 0) -> "LoadReport":
        if doc.get("schema_version") not in SUPPORTED_SCHEMAS:
            raise EngineError(f"engine report schema_version {doc.get('schema_version')!r}, "
                              f"expected one of {SUPPORTED_SCHEMAS}")
        config, req, eng = doc["config"], doc["requests"], doc["engine"]
        tls = doc.get("tls") or {}
        return cls(
            raw=doc, completed=req["completed"], failed=req["failed"],
            errors=req.get("errors") or {}, rps=doc["rps"], duration_s=doc["duration_s"],
            warmup_s=config.get("warmup_s") or 0.0, threads=config.get("threads") or 1,
            connections=config.get("connections"),
            rate=config.get("rate") or _average_rate(config.get("schedule")),
            bytes_total=doc["bytes"]["total"], latency_us=Latency.from_json(doc["latency_us"]),
            ttfb_us=Latency.from_json(doc["ttfb_us"]),
            connect_us=Latency.from_json(doc["connect_us"]),
            histogram=doc.get("histogram") or None,
            engine_cpu_s=eng["cpu_user_s"] + eng["cpu_sys_s"],
            tls=TlsSession(protocol=tls["protocol"], cipher=tls.get("cipher"),
                           handshakes=tls.get("handshakes") or 0,
                           resumed=tls.get("resumed") or 0,
                           alpn=tls.get("alpn")) if tls.get("protocol") else None,
            slots=Slots.from_json(doc["connections"]) if doc.get("connections") else None,
            in_flight=InFlight.from_json(doc["in_flight"]) if doc.get("in_flight") else None,
            interrupted=bool(doc.get("interrupted")), exit_status=exit_status,
            status_classes=doc.get("status_classes") or {},
            timeseries=tuple(Bucket.from_json(b) for b in doc.get("timeseries") or ()),
            protocol=doc.get("protocol"),
            asked_protocol=config.get("protocol") or "http/1.1",
            streams=config.get("streams") or 1,
            **_agents(doc.get("agents")))

    @property
    def p50_us(self) -> float:
        return self.latency_us.p50

    @property
    def p99_us(self) -> float:
        return self.latency_us.p99

    @property
    def clients(self) -> int | None:
        """The closed loop's requests in flight: each connection's, or with HTTP/2 each
        of its streams' (the engine's slots)."""
        return self.connections and self.connections * self.streams

    @property
    def closed_loop(self) -> bool:
        return not self.rate

    @property
    def wall_s(self) -> float:
        """Warm-up and measured phase: the time the engine's CPU was spent over."""
        return self.duration_s + self.warmup_s

    @property
    def engine_cpu_measured_s(self) -> float:
        """The engine's CPU during the measured phase. It reports its whole process
        (warm-up included), so the warm-up's share is taken out in proportion to time."""
        if self.wall_s <= 0:
            return self.engine_cpu_s
        return self.engine_cpu_s * self.duration_s / self.wall_s


def _agents(doc: dict | None) -> dict:
    """LoadReport's agents fields from a merged report's `agents` (none: one engine)."""
    if not doc:
        return {}
    return {"agents": tuple(AgentFigures.from_json(a) for a in doc["per_agent"]),
            "agents_start_skew_us": doc.get("start_skew_us"),
            "agents_clock_spread_us": doc.get("clock_spread_us"),
            "agents_overhead_s": doc.get("overhead_s"),
            "agents_workers_cpu_s": doc.get("workers_cpu_s") or 0.0}


def _average_rate(schedule: dict | None) -> float | None:
    """A replay's average rate (schema 3 on): the gaps between its requests over its span
    (n requests span n - 1 gaps: 3 sent 10 ms apart are 100/s, not 150/s; all at once:
    as fast as can be); None when there is no schedule (a closed loop unless
    config.rate says otherwise)."""
    if not schedule:
        return None
    if schedule["requests"] >= 2 and schedule["span_s"] > 0:
        return (schedule["requests"] - 1) / schedule["span_s"]
    return schedule["requests"] / max(schedule["span_s"], 1e-6)


# Beyond the planned load and one per-request timeout: start-up and the last responses.
ENGINE_MARGIN_S = 60.0
# A closed-loop `requests` run has no planned length: it may take this long.
UNPACED_REQUESTS_S = 600.0


def planned_s(plan: LoadPlan) -> float:
    """How long the engine should run: warm-up plus the duration, or plus requests / rate
    for a paced `requests` run; a replay's schedule, its last send offset."""
    if plan.schedule:
        return plan.schedule[-1][0]
    if plan.requests is None:
        return plan.warmup_s + (plan.duration_s or 0.0)
    rate = plan.load.get("rate")
    return plan.warmup_s + (plan.requests / rate if rate else UNPACED_REQUESTS_S)


def engine_timeout_s(plan: LoadPlan) -> float:
    """After this long the engine has overrun its plan: it is stopped, the run failed."""
    if plan.timeout_s is not None:
        return plan.timeout_s
    return planned_s(plan) + plan.load.get("timeout_s", 10.0) + ENGINE_MARGIN_S


def engine_argv(plan: LoadPlan, urls_file: Path) -> list[str]:
    """The engine's command line; a replay's schedule is `schedule_file(urls_file)`."""
    load = plan.load
    argv = [str(engine_path()), "--json", "-c", str(plan.connections),
            "--urls", str(urls_file), "--seed", str(plan.seed),
            "--timeout", f"{load['timeout_s']}s"]
    if plan.schedule:         # played once at its own times: no count, duration or rate
        argv += ["--schedule", str(schedule_file(urls_file))]
    elif plan.requests is not None:
        argv += ["-n", str(plan.requests)]
    else:
        argv += ["-d", f"{plan.duration_s}s"]
    if plan.warmup_s > 0 and not plan.schedule:
        argv += ["--warmup", f"{plan.warmup_s}s"]
    if load["threads"]:
        argv += ["--threads", str(load["threads"])]
    if load["rate"] and not plan.schedule:
        argv += ["--rate", str(load["rate"])]
    if not load["keepalive"]:
        argv.append("--no-keepalive")
    if load["compressed"]:
        argv.append("--compressed")
    if (protocol := load.get("protocol", "http/1.1")) != "http/1.1":
        argv += ["--protocol", protocol, "--streams", str(load.get("streams", 1))]
    if load.get("conditional", "none") != "none" and not plan.headers:
        raise EngineError(f"load.conditional = {load['conditional']!r}: no validator was read "
                          "before the load (verify.verify_requests), so no condition to send")
    # one argv element each ("--header=…", never a shell): a value starting with '-'
    # stays a value
    argv += [f"--header={entry}" for entry in load.get("headers", ())]
    argv += [f"--header={name}: {value}" for name, value in plan.headers]
    if any(url.startswith("https://") for url, _ in plan.urls):
        argv.append("--insecure")        # the lab's own self-signed certificate
        if not load["tls_resume"]:
            argv.append("--no-tls-resume")
    if plan.allow_remote:   # the user's flag on stacklab's command line, never a file's
        argv.append("--allow-remote")
    if plan.report_file is not None:
        argv += ["--report-file", str(plan.report_file)]
    if plan.netns:      # inside the lab's client namespace, where its targets are allowed
        argv = ["ip", "netns", "exec", plan.netns, *argv, "--lab-netns", plan.netns]
    return argv


def schedule_file(urls_file: Path) -> Path:
    return urls_file.with_name("schedule.txt")


def url_lines(plan: LoadPlan) -> str:
    """The engine's URL list: "[METHOD] URL weight [varies]" per line."""
    methods = plan.methods or ("",) * len(plan.urls)
    return "".join(f"{m + ' ' if m else ''}{u} {w}{' varies' if u in plan.varies else ''}\n"
                   for (u, w), m in zip(plan.urls, methods, strict=True))


def schedule_lines(plan: LoadPlan) -> str:
    """The engine's schedule: "OFFSET_US URL_INDEX" per line."""
    return "".join(f"{round(at * 1e6)} {url}\n" for at, url in plan.schedule)


def run_load(plan: LoadPlan, work_dir: Path) -> LoadReport:
    """Run the engine to completion; a Ctrl-C reaching us stops it and is re-raised."""
    urls_file = work_dir / "urls.txt"
    urls_file.write_text(url_lines(plan))
    if plan.schedule:
        schedule_file(urls_file).write_text(schedule_lines(plan))
    argv = engine_argv(plan, urls_file)
    limit = engine_timeout_s(plan)
    proc = None
    try:
        with interrupts_held():       # an interrupt lands once proc is known
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    stdin=subprocess.DEVNULL,
                                    preexec_fn=pin(plan.load.get("cpus", "")))
        out, err = proc.communicate(timeout=limit)     # reaped, its pipes closed
    except BaseException as e:
        if proc is not None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()                        # reaped here, not left behind
        if isinstance(e, subprocess.TimeoutExpired):
            raise EngineError(f"{ENGINE_NAME} overran its {limit:g} s limit (planned "
                              f"{planned_s(plan):g} s) and was stopped") from None
        raise
    if proc.returncode not in REPORT_EXITS:
        raise EngineError(f"{ENGINE_NAME} exited {proc.returncode}: "
                          f"{err.decode(errors='replace').strip()[-500:]}")
    try:
        doc = json.loads(out)
    except json.JSONDecodeError as e:
        raise EngineError(f"{ENGINE_NAME} printed no JSON report (exit {proc.returncode}): "
                          f"{e}") from e
    return LoadReport.from_json(doc, proc.returncode)


def report_in(path: Path) -> LoadReport | None:
    """The report an engine wrote to its --report-file (or write_report put there), or
    None while the file holds none: no file, the zeros of a room, a write cut short (no
    whole JSON document). EngineError for a whole document that is no report."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(data)
    except ValueError:                 # undecodable, or not one whole document
        return None
    try:
        return LoadReport.from_json(doc)
    except (KeyError, TypeError, AttributeError) as e:
        raise EngineError(f"{path}: not an engine report (no {e})") from None


def write_report(path: Path, doc: dict) -> None:
    """A report made here (agents.merge's) into `path` as the engine writes its
    --report-file: over the file's start, the file cut to it and synced."""
    write_in_place(path, (json.dumps(doc) + "\n").encode())


def engine_version() -> str:
    """The engine's version as each run stores it; an engine chosen by STACKLAB_ENGINE
    says so beside its version, so a run measured by another build (a fake, a local one
    reporting the same version) is never stored as the release engine's."""
    path = engine_path()
    out = subprocess.run([str(path), "--version"], capture_output=True, text=True,
                         timeout=10).stdout.strip()
    version = out.split()[-1] if out else "unknown"
    chosen = os.environ.get(ENGINE_VARIABLE)
    return f"{version} ({ENGINE_VARIABLE}={chosen})" if chosen else version
