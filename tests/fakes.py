"""Synthetic stored runs with the engine's real report shape, for report and analysis
tests that must not depend on a noisy machine. Every fake engine report is checked
against the engine's schema (engine/schema/report.schema.json) before a test uses it;
the fake engine (tests/fake_engine, use_fake_engine) prints them for the orchestrator.
The fake process runner (FakeProcesses; the fake_processes fixture is conftest.py's) stands placeholders
in for servers at procs.spawn's one seam."""

import base64
import copy
import errno
import json
import os
import random
import struct
import subprocess
import sys
import zlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import jsonschema
from hdrh.histogram import HdrHistogram

from stacklab.host import procs
from stacklab.measure.drive import LoadReport
from stacklab.store import Outcome, RunRecord, Store
from stacklab.measure.verify import Status, Verdict

ENGINE_SCHEMA = Path(__file__).resolve().parent.parent / "engine/schema/report.schema.json"


@cache
def engine_schema(version: int = 5) -> dict:
    """The engine's report schema: version 5 is the file; versions 4, 3, 2 and 1 are
    derived from it by the changelog (engine/README.md): 4 has no `start`, `histograms` nor
    `config.segment`; 3 neither, and no `protocol`, `config.protocol`,
    `config.streams`, `tls.alpn` nor `requests.retried`; 2 neither, and no `config.schedule` nor a `method`
    per URL; 1 neither, and no `connections`, `in_flight`, timeseries `width_s` or
    `config.max_error_rate`."""
    schema = copy.deepcopy(json.loads(ENGINE_SCHEMA.read_text()))
    if version <= 4:
        props = schema["properties"]
        props["schema_version"] = {"const": 4}
        for key in ("start", "histograms"):
            schema["required"].remove(key)
            del props[key]
        props["config"]["required"].remove("segment")
        del props["config"]["properties"]["segment"]
    if version <= 3:
        props = schema["properties"]
        props["schema_version"] = {"const": 3}
        schema["required"].remove("protocol")
        del props["protocol"]
        for key in ("protocol", "streams"):
            props["config"]["required"].remove(key)
            del props["config"]["properties"][key]
        props["tls"]["required"].remove("alpn")
        del props["tls"]["properties"]["alpn"]
        props["requests"]["required"].remove("retried")
        del props["requests"]["properties"]["retried"]
    if version <= 2:
        props = schema["properties"]
        props["schema_version"] = {"const": 2}
        config = props["config"]
        config["required"].remove("schedule")
        del config["properties"]["schedule"]
        config["properties"]["urls"]["items"]["required"].remove("method")
        del config["properties"]["urls"]["items"]["properties"]["method"]
    if version == 1:
        props = schema["properties"]
        props["schema_version"] = {"const": 1}
        for key in ("connections", "in_flight"):
            schema["required"].remove(key)
            del props[key]
        props["timeseries"]["items"]["required"].remove("width_s")
        props["config"]["properties"].pop("max_error_rate", None)
    return schema


def checked(doc: dict) -> dict:
    """`doc`, once it follows the engine's schema of its version (else the test fails)."""
    jsonschema.Draft202012Validator(engine_schema(doc["schema_version"])).validate(doc)
    return doc


def load_report(doc: dict) -> LoadReport:
    """A (fake or altered) engine report as the orchestrator reads it, checked first."""
    return LoadReport.from_json(checked(doc))


def engine_histogram(values, schema: int = 2, total: int | None = None) -> str:
    """Latencies (µs) as the engine serializes them, base64: the standard compressed V2
    (schema 2), or the uncompressed V2 of schema 1 reports (stored runs). With `total`,
    the values stand for `total` requests, each recorded `total // len(values)` times
    and the first `total % len(values)` once more: the engine records every completed
    request, so a report's histogram holds as many values as it claims requests."""
    h = HdrHistogram(1, 3_600_000_000, 3)
    values = list(values)
    each, extra = divmod(len(values) if total is None else total, len(values) or 1)
    for i, v in enumerate(values):
        if count := each + (i < extra):
            h.record_value(int(v), count)
    if schema >= 2:
        return h.encode().decode()
    wrapped = base64.b64decode(h.encode())
    _, length = struct.unpack(">ii", wrapped[:8])
    return base64.b64encode(zlib.decompress(wrapped[8:8 + length])).decode()


def _stats(s: list[float], count: int) -> dict:
    """As the engine summarizes latencies: whole µs, a mean and stdev with decimals."""
    if not s:
        return {"count": 0, "min": 0, "mean": 0.0, "stdev": 0.0, "p50": 0, "p90": 0,
                "p99": 0, "p999": 0, "max": 0}
    pct = lambda q: round(s[min(len(s) - 1, int(q * len(s)))])  # noqa: E731
    return {"count": count, "min": round(s[0]), "mean": sum(s) / len(s), "stdev": 1.0,
            "p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "p999": pct(0.999),
            "max": round(s[-1])}


ERROR_CLASSES = ("connect", "read", "write", "timeout", "tls", "bad_response",
                 "length_mismatch")


# When fake runs began (2026-11-29 10:00 UTC, plus a second per seed): a fixed instant,
# so that fake reports stay reproducible.
FAKE_START_UNIX_US = 1_764_410_400_000_000


def fake_load(rps: float, latency_us: float, seed: int, duration_s: float = 2.0,
              engine_cpu_s: float = 0.5, threads: int = 2, warmup_s: float = 0.0,
              schema: int = 5, *, completed: int | None = None,
              config: dict | None = None, interrupted: bool = False) -> dict:
    """An engine report. Connections follow Little's law (latency × rate), every one
    served evenly. The uncorrected latency is lower than the corrected one, as in an
    open loop, so that code reading the wrong one shows in a test. `engine_cpu_s` is the
    whole process's CPU, warm-up included, as the engine reports it. `completed` (else
    rps × duration) and `config` (keys over the derived ones: what a command line asked
    for) are how the fake engine (tests/fake_engine) reports the run it was asked for."""
    rng = random.Random(seed)
    completed = int(rps * duration_s) if completed is None else completed
    samples = [latency_us * rng.lognormvariate(0, 0.3) for _ in range(400)]
    s = sorted(samples)
    connections = max(1, round(latency_us * rps / 1e6))
    config = {"urls": [{"url": "http://127.0.0.1:8080/index.html", "weight": 1}],
              "connections": connections, "threads": threads, "requests": None,
              "duration_s": duration_s, "rate": None, "warmup_s": warmup_s,
              "keepalive": True, "method": "GET", "headers": [], "compressed": False,
              "timeout_s": 10.0, "insecure": False, "tls_resume": True, "seed": seed,
              **(config or {})}
    connections = config["connections"]
    timed = s if completed else []        # nothing completed: no latency was timed
    if schema >= 2:
        config.setdefault("max_error_rate", None)
    if schema >= 3:       # a replay's schedule (null unless given), each URL's method
        config.setdefault("schedule", None)
        config["urls"] = [{"method": config["method"], **u} for u in config["urls"]]
    if schema >= 4:       # HTTP/2: the protocol asked for and its streams per connection
        config.setdefault("protocol", "http/1.1")
        config.setdefault("streams", 1)
    if schema >= 5:       # one agent of several: null unless --segment
        config.setdefault("segment", None)
    doc = {"schema_version": schema, "config": config,
           "duration_s": duration_s, "rps": rps,
           "requests": {"completed": completed, "failed": 0,
                        "errors": dict.fromkeys(ERROR_CLASSES, 0)},
           "status": {"200": completed}, "status_classes": {"2xx": completed},
           "bytes": {"total": completed * 3500, "body": completed * 3306,
                     "decoded_body": None},
           "latency_us": _stats(timed, completed),
           "latency_uncorrected_us": _stats([v * 0.8 for v in timed], completed),
           "connect_us": _stats([50.0] * connections, connections),
           "tls_us": _stats([], 0), "ttfb_us": _stats([v * 0.9 for v in timed], completed),
           "tls": {"protocol": None, "cipher": None, "handshakes": None, "resumed": None},
           "connections_opened": connections,
           "engine": {"version": "0.1.0", "cpu_user_s": engine_cpu_s * 0.4,
                      "cpu_sys_s": engine_cpu_s * 0.6},
           # the engine records every completed request: the 400 drawn latencies stand
           # for all of them (the first `completed` alone, when fewer)
           "histogram": engine_histogram(samples[:completed], schema, completed),
           "timeseries": [], "interrupted": interrupted}
    if schema >= 5:       # time zero on the system clock, the first send just after
        unix_us = FAKE_START_UNIX_US + seed * 1_000_000
        doc["start"] = {"asked_unix_us": None, "unix_us": unix_us,
                        "first_send_unix_us": unix_us + 150}
        doc["histograms"] = {"ttfb": engine_histogram([v * 0.9 for v in samples[:completed]],
                                                      schema, completed),
                             "connect": engine_histogram([50] * connections, schema)}
    if schema >= 4:
        doc["protocol"] = config["protocol"] if completed else None
        doc["tls"]["alpn"] = None
        doc["requests"]["retried"] = 0
    if schema >= 2:
        per_slot = completed // connections
        doc["connections"] = {
            "slots": connections,
            "requests_per_slot": {"min": per_slot * 95 // 100, "p1": per_slot * 95 // 100,
                                  "median": per_slot, "max": per_slot * 105 // 100 + 1},
            "idle_slots": 0,
            "longest_wait_us": {"median": int(s[-1] * 0.8), "max": int(s[-1])}}
        doc["in_flight"] = {"count": connections, "age_us_max": int(s[-1]),
                            "age_us_median": int(s[len(s) // 2]), "older_than_run": 0}
    return checked(doc)


def fake_report(rps: float, latency_us: float, seed: int, **kw) -> LoadReport:
    """fake_load's report as the orchestrator reads it (drive.LoadReport)."""
    return LoadReport.from_json(fake_load(rps, latency_us, seed, **kw))


FAKE_ENGINE = Path(__file__).resolve().parent / "fake_engine" / "stacklab-load"


class FakeEngine:
    """The fake engine a test's runs use (tests/fake_engine): what each load was asked
    and what it claimed, read from its log, in order."""

    def __init__(self, log: Path):
        self.log = log

    def runs(self) -> list[dict]:
        """{"argv", "report"} of each load so far."""
        found = sorted(self.log.glob("run-*.json"), key=lambda p: int(p.stem[4:]))
        return [json.loads(p.read_text()) for p in found]

    def reports(self) -> list[LoadReport]:
        return [LoadReport.from_json(run["report"]) for run in self.runs()]

    def refused(self) -> list[list[str]]:
        """The argv of each load it refused (use_fake_engine's `refuse`), in order."""
        found = sorted(self.log.glob("refused-*.json"), key=lambda p: int(p.stem[8:]))
        return [json.loads(p.read_text())["argv"] for p in found]


def use_fake_engine(monkeypatch, log: Path, during: str | None = None,
                    refuse: str | None = None) -> FakeEngine:
    """From now on (for this test, and the stacklab processes it starts) the orchestrator
    runs the fake engine (drive.engine_path reads STACKLAB_ENGINE); it logs each load
    under `log` and runs the shell command `during` during each load. With `refuse`, it
    refuses every load instead, with that line (FakeEngine.refused: nothing measured)."""
    monkeypatch.setenv("STACKLAB_ENGINE", str(FAKE_ENGINE))
    monkeypatch.setenv("FAKE_ENGINE_PYTHON", sys.executable)
    monkeypatch.setenv("FAKE_ENGINE_LOG", str(log))
    if during is not None:
        monkeypatch.setenv("FAKE_ENGINE_DURING", during)
    if refuse is None:
        monkeypatch.delenv("FAKE_ENGINE_REFUSE", raising=False)
    else:
        monkeypatch.setenv("FAKE_ENGINE_REFUSE", refuse)
    return FakeEngine(log)


@dataclass(frozen=True)
class Started:
    """A server process stacklab asked for: what would have run, where, with what
    environment, and the pid of what ran instead (or of itself, when run for real)."""
    name: str
    argv: list[str]
    run_dir: Path
    env: dict[str, str]
    pid: int | None            # None: its start failed (a missing binary)


HOLD = ["sleep", "infinity"]      # what stands in for a server by default
REAL, MISSING = "real", "missing"


class FakeProcesses:
    """The process runner of a test (procs.started_by): every server start is recorded
    and, unless the test lets a component run for real, a harmless placeholder runs in
    its place — a real process in its own session, with the real log, environment, cgroup
    and limits — so pids, process groups, the pgids file and stop_group() work as for a
    server. A placeholder never answers a request: a start that needs its server ready
    is one the test makes fail, or lets run for real."""

    def __init__(self):
        self.started: list[Started] = []
        self._fate: dict[str, list[str] | str] = {}     # argv, REAL or MISSING; last word wins

    def real(self, *names: str) -> None:
        """These components run their own binaries (still recorded)."""
        self._fate.update(dict.fromkeys(names, REAL))

    def fail(self, name: str, code: int = 1, says: str = "") -> None:
        """`name`'s process exits at once with `code`, after writing `says` to its log:
        as a binary that refuses its config."""
        self._fate[name] = ["sh", "-c", 'test -z "$1" || echo "$1"; exit "$2"', "sh", says,
                            str(code)]

    def die(self, name: str, after_s: float, signal: int = 9) -> None:
        """`name`'s process runs, then dies by `signal` after `after_s` seconds."""
        self._fate[name] = ["sh", "-c", f"sleep {after_s}; kill -{signal} $$"]

    def missing(self, name: str) -> None:
        """`name`'s binary is not there: the start raises what Popen raises for it."""
        self._fate[name] = MISSING

    def names(self) -> list[str]:
        """The components asked to start, in order."""
        return [s.name for s in self.started]

    def __call__(self, name: str, argv: list[str], *, cwd: Path, env: dict[str, str],
                 **popen) -> subprocess.Popen:
        fate = self._fate.get(name, HOLD)
        if fate == MISSING:
            self.started.append(Started(name, list(argv), Path(cwd), dict(env), None))
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), argv[0])
        proc = subprocess.Popen(argv if fate == REAL else fate, cwd=cwd, env=env, **popen)
        self.started.append(Started(name, list(argv), Path(cwd), dict(env), proc.pid))
        return proc


def fake_resources(component: str, cpu_s: float, rss: float,
                   capacity: float | None = None) -> dict:
    """`capacity`: the run was a capacity search that found it (a search step 5% above
    it failed, the confirmation at it passed)."""
    searched = {"_capacity": {
        "slo": "p99<50ms", "percentile": 99.0, "limit_us": 50_000.0, "max_error_rate": 0.0,
        "connections": 16, "capacity": capacity, "searched": capacity,
        "stopped": "resolved", "confirmed": True,
        "steps": [{"phase": "search", "rate": round(capacity * 1.05), "duration_s": 1.0,
                   "achieved": capacity, "completed": int(capacity), "errors": 0,
                   "p50_us": 9_000.0, "p99_us": 80_000.0, "slo_us": 80_000.0,
                   "interval_us": [70_000.0, 90_000.0], "decision": "fail",
                   "reason": "p99 over 50000 us", "flags": []},
                  {"phase": "confirm", "rate": round(capacity), "duration_s": 2.0,
                   "achieved": capacity, "completed": int(capacity * 2), "errors": 0,
                   "p50_us": 900.0, "p99_us": 20_000.0, "slo_us": 20_000.0,
                   "interval_us": [18_000.0, 22_000.0], "decision": "pass",
                   "reason": "p99 under 50000 us", "flags": []}]}} if capacity else {}
    return {**searched, component: {"cpu_user_s": cpu_s / 2, "cpu_sys_s": cpu_s / 2, "cpu_s": cpu_s,
                        "rss_mib_peak": rss, "rss_mib_mean": rss, "pss_mib_peak": rss,
                        "uss_mib_peak": rss, "processes_max": 3, "threads_max": 3,
                        "pss_mib_per_worker": rss / 3, "rss_mib_idle_before": rss,
                        "rss_mib_after": rss, "samples": []},
            "_monitor": {"sampler_cpu_s": 0.001, "sampler_core_share": 0.002}}


VERDICTS = (Verdict("stack", "content /index.html", Status.PASS,
                    "200, 3306 B, sha256 5dcc74102e21",
                    {"path": "/index.html", "bytes": 3306, "encoded_bytes": 1240,
                     "content_encoding": "gzip"}),
            Verdict("nginx", "gzip", Status.PASS, "not compressed (1740 B)"))


def fake_experiment(db, name="fixed", speed=None, flag_apache_256=True, reps=3,
                    rps_of: dict[str, list[float]] | None = None,
                    capacity: float | None = None, rate: int = 0,
                    cpu_of: dict[str, float] | None = None) -> int:
    """nginx vs apache at c = 1 and 16, `reps` repetitions each, deterministic figures.
    `rps_of`: a trial id's req/s in each repetition, instead of its 1% steps;
    `capacity`: each run a capacity search too, its capacity `capacity` × its req/s;
    `rate`: load.rate (a fixed rate) in every trial; `cpu_of`: a stack's server CPU per
    request as a multiple of the fakes' own."""
    speed = speed or {"nginx": 20000.0, "apache": 10000.0}
    store = Store.open(db)
    trials = []
    for stack in ("nginx", "apache"):
        for c in (1, 16):
            d = {"stack": stack, "workload": "static-page", "concurrency": c,
                 "knobs": {"load.keepalive": True, **({"load.rate": rate} if rate else {})},
                 "measure": {"duration_s": 2.0}}
            trials.append((f"{stack[:2]}{c:010d}", f"{stack} static-page c={c}", d))
    exp = store.new_experiment(name, f"{name}.toml", "h", {"experiment": {
        "description": "fixed figures for report tests", "repetitions": reps}}, trials,
        {"cores": 2, "cpu_model": "Test CPU", "kernel": "6.1", "memory_mib": 1024},
        "0.1.0", "abc123", "2026-01-01T00:00:00+00:00")
    for rep in range(1, reps + 1):
        for tid, _, d in trials:
            base = speed[d["stack"]] * (1 + d["concurrency"] / 100)
            rps = (rps_of[tid][rep - 1] if tid in (rps_of or {})
                   else base * (1 + (rep - 2) * 0.01))
            flags = (["generator-bound"] if flag_apache_256 and d["stack"] == "apache"
                     and d["concurrency"] == 16 and rep == 1 else [])
            store.add_run(RunRecord(
                experiment_id=exp, trial_id=tid, repetition=rep, outcome=Outcome.OK,
                started_at="2026-01-01T00:00:00", ended_at="2026-01-01T00:00:03",
                knobs={d["stack"]: {}},
                versions={d["stack"]: "1.0", "stacklab-load": "0.1.0"},
                configs={f"{d['stack']}/x.conf": "listen 127.0.0.1:8080;"},
                verdicts=VERDICTS,
                load=fake_report(rps, 1e6 * d["concurrency"] / rps, seed=rep),
                resources=fake_resources(d["stack"], 2.0 * rps * 2e-5 * (cpu_of or {}).get(
                                             d["stack"], 1.0),
                                         10.0 + d["concurrency"], capacity and rps * capacity),
                flags=flags, run_dir="/tmp/x"))
    store.close()
    return exp
