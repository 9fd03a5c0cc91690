"""Drive: run the load engine (stacklab-load) against a running stack, read its JSON report."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import EngineError
from .knobs import Knob
from .placement import pin

ENGINE_NAME = "stacklab-load"
REPO_ENGINE = Path(__file__).resolve().parent.parent / "engine/target/release" / ENGINE_NAME
# Report versions this side reads: the engine prints 2; stored runs hold 1. Keys new in 2
# (connections, in_flight, ended_early, timeseries width_s) are read with .get.
SUPPORTED_SCHEMAS = (1, 2)
# Exit statuses after which the engine has printed its full report (engine/README.md,
# "Exit status"): a run that completed nothing or was interrupted is data, not a crash.
REPORT_EXITS = {0: "ok", 3: "no request completed", 4: "error share above --max-error-rate",
                130: "interrupted"}

LOAD_KNOBS = [
    Knob("load", "keepalive", bool, True, "Reuse connections (HTTP/1.1 keep-alive); off opens "
         "a new connection per request, like ab without -k.", source="S1, S5"),
    Knob("load", "threads", int, 0, "Engine threads (0 = one per core, at most one per "
         "connection).", min=0, max=256),
    Knob("load", "rate", int, 0, "Open loop: requests per second in total, latency timed from "
         "the intended send time (0 = closed loop).", min=0, max=10_000_000),
    Knob("load", "compressed", bool, False, "Send Accept-Encoding: gzip, deflate."),
    Knob("load", "tls_resume", bool, True, "Resume TLS sessions on new connections (off: a "
         "full handshake every time).", source="S2"),
    Knob("load", "timeout_s", float, 10.0, "Per-request timeout in seconds.", min=0.01,
         max=600),
]


def engine_path() -> Path:
    """The engine built in this checkout, else one on PATH."""
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


@dataclass(frozen=True)
class LoadReport:
    """The engine's JSON report with the figures the orchestrator uses most."""

    raw: dict
    completed: int
    failed: int
    rps: float
    p50_us: float
    p99_us: float
    engine_cpu_s: float
    exit_status: int = 0                # one of REPORT_EXITS

    @classmethod
    def from_json(cls, doc: dict, exit_status: int = 0) -> "LoadReport":
        if doc.get("schema_version") not in SUPPORTED_SCHEMAS:
            raise EngineError(f"engine report schema_version {doc.get('schema_version')!r}, "
                              f"expected one of {SUPPORTED_SCHEMAS}")
        lat, eng = doc["latency_us"], doc["engine"]
        return cls(doc, doc["requests"]["completed"], doc["requests"]["failed"], doc["rps"],
                   lat["p50"], lat["p99"], eng["cpu_user_s"] + eng["cpu_sys_s"], exit_status)


# Beyond the planned load and one per-request timeout: start-up and the last responses.
ENGINE_MARGIN_S = 60.0
# A closed-loop `requests` run has no planned length: it may take this long.
UNPACED_REQUESTS_S = 600.0


def planned_s(plan: LoadPlan) -> float:
    """How long the engine should run: warm-up plus the duration, or plus requests / rate
    for a paced `requests` run."""
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
    load = plan.load
    argv = [str(engine_path()), "--json", "-c", str(plan.connections),
            "--urls", str(urls_file), "--seed", str(plan.seed),
            "--timeout", f"{load['timeout_s']}s"]
    if plan.requests is not None:
        argv += ["-n", str(plan.requests)]
    else:
        argv += ["-d", f"{plan.duration_s}s"]
    if plan.warmup_s > 0:
        argv += ["--warmup", f"{plan.warmup_s}s"]
    if load["threads"]:
        argv += ["--threads", str(load["threads"])]
    if load["rate"]:
        argv += ["--rate", str(load["rate"])]
    if not load["keepalive"]:
        argv.append("--no-keepalive")
    if load["compressed"]:
        argv.append("--compressed")
    if any(url.startswith("https://") for url, _ in plan.urls):
        argv.append("--insecure")        # the lab's own self-signed certificate
        if not load["tls_resume"]:
            argv.append("--no-tls-resume")
    return argv


def run_load(plan: LoadPlan, work_dir: Path) -> LoadReport:
    """Run the engine to completion; a Ctrl-C reaching us stops it and is re-raised."""
    urls_file = work_dir / "urls.txt"
    urls_file.write_text("".join(f"{u} {w}{' varies' if u in plan.varies else ''}\n"
                                 for u, w in plan.urls))
    argv = engine_argv(plan, urls_file)
    limit = engine_timeout_s(plan)
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL,
                          preexec_fn=pin(plan.load.get("cpus", ""))) as proc:
        try:
            out, err = proc.communicate(timeout=limit)
        except BaseException as e:
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
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


def engine_version() -> str:
    out = subprocess.run([str(engine_path()), "--version"], capture_output=True, text=True,
                         timeout=10).stdout.strip()
    return out.split()[-1] if out else "unknown"
