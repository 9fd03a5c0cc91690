"""The one interface every server component has: render, start, ready, verify, counters,
version, stop; and what it provides to the components in front of it (capabilities)."""

from __future__ import annotations

import http.client
import os
import pwd
import re
import subprocess
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol

from ..host import procs
from ..errors import StackError
from ..knobs import Knob
from ..host.net import Endpoint, free_port, socket_ready  # noqa: F401 (re-exported)
from ..measure.monitor import CpuMark, cpu_mark, group_cpu_s, others_cores
from ..measure.verify import Verdict
from .limits import limits_problem, spawn_limits


def satisfies(provided: Iterable[str], need: str) -> bool:
    """Whether capabilities `provided` meet `need`: a capability's name ("php:fpm-fcgi")
    or its kind, the part before the colon ("php": any PHP)."""
    return any(name == need or name.split(":", 1)[0] == need for name in provided)


@dataclass(frozen=True)
class Probe:
    """A file a capability puts into the docroot of a stack that has it (under /_stacklab/),
    for its verifier to request through the stack's front; removed when the stack stops."""

    path: str          # URL path, also the path under the docroot
    content: bytes
    mode: int = 0o644


@dataclass(frozen=True)
class Capability:
    """Something a component provides to the stack: `kind:variant`, e.g. php:fpm-fcgi (PHP
    pages over FastCGI), perl:registry, database:mysql, sessions:<store>.
    Workloads name what they need by capability or kind; components in front find their
    upstream by it; the verifier checks, through the stack's front, that the stack really
    does it."""

    name: str
    meaning: str
    probes: tuple[Probe, ...] = ()
    # (the component that provides it, the stack's front) -> verdicts
    verify: Callable[[RunningComponent, RunningComponent], list[Verdict]] | None = None

    @property
    def kind(self) -> str:
        return self.name.split(":", 1)[0]


class SqlClient(Protocol):
    """A database component as a command talks to it (dbbench), through the component's
    own client: the administrator's statements (rows as text) and the server's status
    counters, and a connection as the application holds one (DB-API 2.0: cursor(),
    execute, fetchall, close), whose calls raise `errors`."""

    errors: type[Exception]   # what the connection raises (error_line words it)

    def library_versions(self) -> dict[str, str]: ...   # its library's, for provenance
    def query(self, started: RunningComponent, sql: str) -> list[list[str]]: ...
    def status(self, started: RunningComponent,
               names: tuple[str, ...]) -> dict[str, int]: ...
    def connect(self, started: RunningComponent, user: str, password: str,
                database: str) -> Any: ...


class Database(Protocol):
    """What a workload's database holds, as a database component is handed it to create
    (once per experiment) and to check: the workload's, not the component's, knowledge."""

    key: str                 # identifies the content: a seeded datadir is reused for it
    name: str                # the database, and the application's account
    user: str
    password: str
    grants: str              # what the account may do: "SELECT", "ALL PRIVILEGES"
    tables: dict[str, int]   # rows each table must hold (at least, unless exact)
    exact: bool              # the counts are exact (generated rows), not a floor
    cacheable_page: str | None   # a page sending the same statements every time, if any

    def schema(self, engine: str) -> str: ...            # CREATE TABLE statements
    def write_rows(self, directory: Path) -> dict[str, Path]: ...   # table -> rows file
    # URL -> statements it sends (None: some, a number the application does not fix)
    def page_queries(self) -> dict[str, int | None]: ...
    # The application's own installer, run once against the seeding server's socket
    # after the schema and rows (a real application makes its tables itself).
    def install(self, socket: Path, engine: str, log_dir: Path) -> None: ...


@dataclass(frozen=True)
class Upstream:
    """A component started behind this one: where it is, and what it provides."""

    name: str
    endpoint: Endpoint
    provides: tuple[str, ...] = ()


def find_upstream(upstreams: Iterable[Upstream], need: str) -> Endpoint | None:
    """The nearest upstream (the last started) that provides `need`, or None."""
    return next((u.endpoint for u in reversed(tuple(upstreams))
                 if satisfies(u.provides, need)), None)


@dataclass(frozen=True)
class RenderContext:
    """Where and as whom a component runs, and what it talks to; plain data for templates."""

    run_dir: Path          # this component's own directory (configs, logs, pid files)
    docroot: Path          # the deployed workload
    host: str              # loopback address it listens on
    port: int
    user: str | None       # user the server drops to (root only), None otherwise
    group: str | None
    upstreams: tuple[Upstream, ...] = ()  # started backends, back first
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)  # shared knob groups (php)
    tls_cert: Path | None = None   # the lab's self-signed certificate and key
    tls_key: Path | None = None
    cache_dir: Path | None = None  # kept for the whole experiment (e.g. a seeded datadir)
    database: Database | None = None   # the workload's database (schema and data), if any
    # A front layer's (cache, proxy, balancer) HTTP backends: the front of the stack behind
    # it, one endpoint per replica. Empty for a component that is not a front layer.
    backends: tuple[Endpoint, ...] = ()
    # A machine profile's cgroup (netlab), joined by the server before it execs, so that
    # every worker it forks is inside from the first moment; None: no profile.
    join: Callable[[], None] | None = None

    def upstream(self, need: str) -> Endpoint:
        """The backend that provides `need` (templates: `upstream("php")`); a StackError
        when none was started behind this component."""
        found = find_upstream(self.upstreams, need)
        if found is None:
            have = ", ".join(f"{u.name} ({', '.join(u.provides) or 'nothing'})"
                             for u in self.upstreams) or "none"
            raise StackError(f"no upstream provides {need} (started behind: {have})")
        return found


@dataclass
class RunningComponent:
    """A running component: its process, its knobs and where it can be reached."""

    name: str
    ctx: RenderContext
    proc: procs.Proc
    knobs: dict[str, Any]
    endpoint: Endpoint
    files: dict[str, str] = field(default_factory=dict)  # rendered configs by name
    # Which instance it is in its stack: the component's name, or "apache.2" for the
    # second replica (run directory, monitor trace, counters and configs go by it).
    label: str = ""

    def __post_init__(self) -> None:
        self.label = self.label or self.name


class Component(ABC):
    name: str
    package: str   # the Debian package that provides it
    binary: str    # absolute path of the binary started
    knobs: list[Knob]
    # Shared knob groups it renders (e.g. "php"); a group applies to a stack that provides
    # a capability of the group's kind (the php.* knobs where PHP runs).
    groups: tuple[str, ...] = ()
    provides: tuple[Capability, ...] = ()   # what it always provides
    # A front layer sits in front of a whole stack and talks HTTP to its front
    # (ctx.backends): "cache", "proxy" or "balancer". None: a server of the stack itself.
    layer: str | None = None
    balances: bool = False        # a front layer that spreads over several backends
    tls_to_backends: bool = True  # a front layer that can speak HTTPS to what is behind it
    unix_to_backends: bool = True  # … and reach it on a unix socket
    spread_knobs: tuple[str, ...] = ()  # its knobs that choose how to spread over backends
    # Its counter of requests served (in counters()), by which a balancer's spread over
    # replicas is checked; None: it counts none.
    requests_counter: str | None = None

    def capabilities(self, knobs: dict[str, Any]) -> tuple[Capability, ...]:
        """What it provides with these knob values (Apache runs PHP only with a PHP
        handler); by default `provides`."""
        return self.provides

    def inert(self, knobs: dict[str, dict[str, Any]]) -> dict[str, str]:
        """Its knobs that cannot act with these values (owner -> {name: value}), and why,
        beyond what the knobs' own `acts_with` say (the plan notes them)."""
        return {}

    def counters(self, started: RunningComponent) -> dict[str, float]:
        """The server's own cumulative counters now, from its status source (stub_status,
        mod_status, SHOW GLOBAL STATUS…), named as the server names them; {} without one.
        Levels (connections open, busy workers) are not counters. A cache also reports
        `cache_hits` and `cache_misses` (passes and misses both count as misses: the
        backend answered), from which the runner computes each run's hit ratio."""
        return {}

    def cpu_counter(self, started: RunningComponent) -> Callable[[], float | None] | None:
        """A reader of its processes' CPU seconds so far, for a component whose CPU the
        monitor cannot count by the process group it started (a server stacklab did not
        start, counted by its cgroup); None: the monitor counts its group."""
        return None

    def caches(self, knobs: dict[str, Any]) -> bool:
        """Whether it stores responses with these knobs (a proxy may or may not): only
        then is its hit ratio measured and judged."""
        return False

    def overrides_headers(self, knobs: dict[str, Any]) -> bool:
        """A cache told to store what the backend's headers forbid (a TTL forced on every
        page): then hits on an uncacheable workload are what was asked for."""
        return False

    def shares(self, knobs: dict[str, Any], backends: int) -> list[float] | None:
        """A balancer's promise: the share of requests each backend gets (round robin,
        weights), or None where it promises none (least connections)."""
        return None

    def docroot_files(self, docroot: Path, knobs: dict[str, Any]) -> dict[str, bytes]:
        """Files (URL path -> bytes) this server's knobs expect in the deployed docroot,
        placed while the stack runs (Apache's .htaccess files)."""
        return {}

    def knob(self, name: str) -> Knob:
        return next(k for k in self.knobs if k.name == name)

    @abstractmethod
    def render(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str]:
        """Config files (relative name → text) for these knob values."""

    @abstractmethod
    def command(self, ctx: RenderContext, knobs: dict[str, Any]) -> list[str]:
        """argv that starts the server in the foreground from the rendered configs."""

    version_args: tuple[str, ...] = ("-v",)   # how the binary tells its version…
    version_pattern: str = ""                 # …and where it is in what it prints

    def versions(self, knobs: dict[str, Any]) -> dict[str, str]:
        """What a run with these knobs records as this component's versions: its own, and
        that of any runtime its knobs load into it (a component that embeds one says so;
        generic code names none)."""
        return {self.name: self.version()}

    def versions_depend_on(self, knobs: dict[str, Any]) -> tuple:
        """The knob values `versions` depends on: none for a component whose versions
        are its binary's alone, so a run asks each binary once however many knob sets
        its trials have."""
        return ()

    def version(self) -> str:
        """The installed version, or raise StackError if it is missing."""
        try:
            out = subprocess.run([self.binary, *self.version_args], capture_output=True,
                                 text=True, timeout=10)
        except OSError as e:
            raise StackError(f"{self.name}: cannot run {self.binary}: {e}") from e
        m = re.search(self.version_pattern, out.stdout + out.stderr)
        if not m:
            raise StackError(f"{self.name}: unexpected version output "
                             f"{(out.stdout + out.stderr).strip()[:200]!r}")
        return m.group(1)

    def env(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str] | None:
        """Environment of the server process (None: inherit stacklab's)."""
        return None

    def endpoint(self, ctx: RenderContext, knobs: dict[str, Any]) -> Endpoint:
        return Endpoint(ctx.host, ctx.port)

    def check(self, knobs: dict[str, Any]) -> str | None:
        """Why this combination of knob values cannot run, or None if it can."""
        return None

    def http1_on_unix_only(self, knobs: dict[str, Any]) -> str | None:
        """Why, with these knobs, a front layer reaches this component's HTTP/1.1 on a
        unix socket only (its port speaks something else), or None."""
        return None

    def known_slow(self, knobs: dict[str, Any], load: dict[str, Any]) -> str | None:
        """A setting of these knobs, under a load with these knobs (load.protocol, …),
        that this server is known, by a measurement here, to serve pathologically slowly — a stall, not the cost the trial means to measure —
        in one sentence with the figures; None otherwise. Its runs are flagged
        `known-slow` with it (analysis/flags.py)."""
        return None

    def starve_cause(self, knobs: dict[str, Any], connections: int) -> str | None:
        """Why, with these knobs, this server would leave some of `connections` busy
        connections waiting for a worker, and the setting that would change it, in one
        sentence with the figures; None when its workers are enough. Said with a
        `starved` flag (analysis/analyze.py) and offered by `recommend`."""
        return None

    def protocol_problem(self, knobs: dict[str, Any], protocol: str) -> str | None:
        """Why the load cannot speak `protocol` (load.protocol: http/1.1, h2, h2c) to this
        component as the stack's front with these knobs, or None. HTTP/1.1 only unless it
        says otherwise (a server with an http2 knob: stacks/http2.py)."""
        if protocol == "http/1.1":
            return None
        return f"{self.name} speaks HTTP/1.1 only here (it has no {self.name}.http2 knob)"

    def problem(self, knobs: dict[str, Any]) -> str | None:
        """Why these knob values cannot run here: its own rules, then the process limits
        this machine can grant (checked for every trial before anything starts)."""
        return self.check(knobs) or limits_problem(knobs)

    def installed(self) -> bool:
        return os.access(self.binary, os.X_OK)

    def verify(self, started: RunningComponent, front: RunningComponent) -> list[Verdict]:
        """Checks, through the stack's front, that this component does what its knobs
        claim (content is checked for the whole stack by verify.check_content)."""
        return []

    def start(self, ctx: RenderContext, knobs: dict[str, Any],
              ready_timeout_s: float = 15.0, run_as: str | None = None) -> RunningComponent:
        """Render, start and wait until ready. `run_as` starts the server as that user
        (root only): how tests check the unprivileged path when CI runs as root."""
        ctx.run_dir.mkdir(parents=True, exist_ok=True)
        files = self.render(ctx, knobs)
        for rel, text in files.items():
            (ctx.run_dir / rel).write_text(text)
            if text.startswith("#!"):
                (ctx.run_dir / rel).chmod(0o755)   # a rendered script
        if run_as:
            _chown_tree(ctx.run_dir, run_as)
        proc = procs.spawn(self.name, self.command(ctx, knobs), ctx.run_dir,
                           ctx.run_dir / "server.out", user=run_as,
                           env=self.env(ctx, knobs), cpus=knobs.get("cpus", ""),
                           join=ctx.join, **spawn_limits(knobs))
        started = RunningComponent(self.name, ctx, proc, knobs, self.endpoint(ctx, knobs),
                                   files)
        try:
            self.wait_ready(started, ready_timeout_s)
        except BaseException:
            self.stop(started)
            raise
        return started

    def processes(self, knobs: dict[str, Any]) -> int:
        """How many processes the config starts (master included) before it is ready:
        StartServers, pm.start_servers, static children… Ready waits for them all, so
        a run never begins while the server is still forking what its config asks for."""
        return 1

    def wait_ready(self, started: RunningComponent, timeout_s: float) -> None:
        """Poll until `ready` says yes and the configured processes exist, while checking
        the process is alive."""
        deadline = time.monotonic() + timeout_s
        want = self.processes(started.knobs)
        mark = cpu_mark()          # what else the host did meanwhile, said on a timeout
        while True:
            if not started.proc.alive():
                raise StackError(f"{self.name} exited with code {started.proc.popen.returncode} "
                                 "before becoming ready", self.log_tail(started))
            try:
                if (self.ready(started) and started.proc.alive()
                        and len(procs.group_members(started.proc.pgid)) >= want):
                    return
            except (OSError, http.client.HTTPException):
                pass
            if time.monotonic() > deadline:
                have = len(procs.group_members(started.proc.pgid))
                raise StackError(f"{self.name} not ready on {started.endpoint.unix or ''}"
                                 f"{started.ctx.host}:{started.ctx.port} after {timeout_s:g} s "
                                 f"({have} of {want} configured processes)"
                                 + busy_host(mark, group_cpu_s(started.proc.pgid)),
                                 self.log_tail(started))
            time.sleep(0.05)

    def ready(self, started: RunningComponent) -> bool:
        """One readiness probe: an HTTP answer (a port that merely accepts may belong to
        another program). Raise OSError or return False while not ready."""
        from ..measure.verify import fetch
        fetch(started.endpoint, "/", timeout_s=0.5)
        return True

    def log_files(self, started: RunningComponent) -> list[Path]:
        return sorted(p for p in started.ctx.run_dir.iterdir()
                      if p.suffix in (".log", ".out"))

    def log_tail(self, started: RunningComponent, lines: int = 20) -> str:
        return "\n".join(f"[{p.name}] {procs.log_tail(p, lines)}"
                         for p in self.log_files(started) if p.stat().st_size)

    def error_logs(self, run_dir: Path) -> list[Path]:
        """Its logs in its run directory where a lost worker is told (lost_worker): every
        log but the access logs, whose lines are requests and may say anything."""
        return sorted(p for p in run_dir.rglob("*.log") if "access" not in p.name)

    def lost_worker(self, line: str) -> bool:
        """Whether a line of its error logs says it lost a worker: a child process that
        died by a signal (the master forks another, and the run looks well but for a few
        errors: the run is flagged). In its own words, which only it knows; a server
        without workers, or one that does not log their deaths, says no."""
        return False

    def sql_client(self) -> SqlClient | None:
        """Its own client, for a command that talks to it as to a SQL database (dbbench,
        through whichever component provides the database); None: it is not one."""
        return None

    def error_line(self, e: BaseException) -> str | None:
        """One line for an error its own client library raised and a command let through
        (the CLI's error boundary asks every component before it calls `e` a bug, so that
        it names no product), or None when `e` is not one of its own."""
        return None

    def stop(self, started: RunningComponent) -> None:
        procs.stop(started.proc)
        if procs.group_members(started.proc.pgid):
            raise StackError(f"{self.name}: processes of group {started.proc.pgid} survived stop")


# Others' work during a readiness wait worth naming in the timeout's message: half a core
# of it slows a starting server's every step (nginx missed 15 s on a host running the
# test suite), as does a load average at or above the host's cores.
READY_BUSY_CORES = 0.5


def busy_host(mark: CpuMark, server_s: float, others=others_cores,
              load=os.getloadavg) -> str:
    """"; the host was busy meanwhile: …" for a readiness timeout, when others' work since
    `mark` (less the starting server's `server_s`) reached READY_BUSY_CORES or the load
    average the host's cores; "" otherwise."""
    cores = mark.cpu[6] or os.cpu_count() or 1
    busy, load1 = others(mark, server_s), load()[0]
    if busy < READY_BUSY_CORES and load1 < cores:
        return ""
    return (f"; the host was busy meanwhile: {busy:.2f} cores of other work of its {cores} "
            f"(load average {load1:.2f}), which can delay a server's start")


def _chown_tree(root: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    for path in [root, *root.rglob("*")]:
        os.chown(path, entry.pw_uid, entry.pw_gid)


def versions_of(used: Iterable[tuple[Component, dict[str, Any]]]) -> dict[str, str]:
    """The versions of the components used, each with the knobs it runs with (a component
    may appear once per trial): each component's own first, in the order given, then the
    runtimes their knobs load, by name; each asked once per distinct value of the knobs
    its versions depend on (Component.versions_depend_on)."""
    own: dict[str, str] = {}
    loaded: dict[str, str] = {}
    asked: set[tuple[str, str]] = set()
    for component, knobs in used:
        key = (component.name, repr(component.versions_depend_on(knobs)))
        if key in asked:
            continue
        asked.add(key)
        for name, version in component.versions(knobs).items():
            (own if name == component.name else loaded)[name] = version
    return own | dict(sorted(loaded.items()))
