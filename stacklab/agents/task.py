"""What a load agent runs: the one task the orchestrator gives each Dask worker per load.

It runs on the agent's host, in the worker's process: it writes the URL list (and a
replay's schedule) into a directory of its own, checks that the target answers a TCP
connect, says it is ready, waits for the run's start time, and runs stacklab-load to
start at that instant (its --start-at), stopping it if the orchestrator says stop. It
returns the engine's report and exit status, or why there is none. The engine is the
agent host's own (drive.engine_path there: STACKLAB_ENGINE, a checkout's build, or
PATH). Imported by reference on the workers: stacklab must be installed on every load
host (docs/load.md, "Load from several hosts").
"""

from __future__ import annotations

import ctypes
import ipaddress
import json
import os
import signal
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

# How long an agent waits for the start time after saying it is ready.
START_WAIT_S = 60.0
CONNECT_TIMEOUT_S = 2.0
LAB_NETWORK = ipaddress.ip_network("198.18.0.0/15")
STOP_GRACE_S = 5.0             # an engine sent SIGINT has this long to report, then killed
_PR_SET_PDEATHSIG = 1
# Looked up here, in the worker before any fork: the child may not load symbols itself
# (a multi-threaded parent's loader lock may be held at the fork)
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl


def ready_queue(key: str) -> str:
    return f"stacklab-ready-{key}"


def start_variable(key: str) -> str:
    return f"stacklab-start-{key}"


# The engines running in this worker, by load: what stop_engines signals, and the loads
# stopped (an engine started after its load was stopped is stopped at once). A task
# waits on its engine without polling anything, so an agent costs no CPU while it runs.
_RUNNING: dict[str, subprocess.Popen] = {}
_STOPPED: set[str] = set()


def stop_engines(key: str) -> int:
    """Run on a worker by the orchestrator (Client.run) when a load fails: SIGINT to
    its engine of load `key` (it then prints its report and exits); how many."""
    _STOPPED.add(key)
    proc = _RUNNING.get(key)
    if proc is None or proc.poll() is not None:
        return 0
    proc.send_signal(signal.SIGINT)
    return 1


def engine_version(engine: str) -> str:
    """The engine's version, as `stacklab-load --version` prints it (its last word)."""
    out = subprocess.run([engine, "--version"], capture_output=True, text=True,
                         timeout=10).stdout.split()
    return out[-1] if out else "unknown"


def agent_load(job: dict[str, Any]) -> dict[str, Any]:
    """Run job's engine (argv after the program, file names relative to its own
    directory; files: {name: text}) once the orchestrator's start time comes."""
    from distributed import Queue, Variable, get_worker

    from ..measure.drive import engine_path

    key, name = job["key"], get_worker().name
    out: dict[str, Any] = {"name": name, "host": socket.gethostname(),
                           "report": None, "exit": None, "error": None}
    # a local agent's under its pool's directory (removed at the pool's close, should this
    # process be killed first); an agent on another host's in that host's temporary one
    with tempfile.TemporaryDirectory(prefix="stacklab-agent-", dir=job.get("work_root")) as work:
        version = None
        try:
            engine = str(engine_path())
            version = engine_version(engine)
            for file, text in job["files"].items():
                (Path(work) / file).write_text(text)
            if why := unreachable(job["target"], job.get("lab_netns"),
                                  job.get("allow_remote", False)):
                out["error"] = why
                Queue(ready_queue(key)).put({"name": name, "error": why})
                return out
        except Exception as e:          # noqa: BLE001 - said to the orchestrator
            out["error"] = f"{type(e).__name__}: {e}"
            Queue(ready_queue(key)).put({"name": name, "error": out["error"]})
            return out
        Queue(ready_queue(key)).put({"name": name, "error": None, "version": version})
        start_at = Variable(start_variable(key)).get(timeout=START_WAIT_S)
        if start_at is None or key in _STOPPED:
            out["error"] = "stopped before the start"
            return out
        argv = [engine, *job["argv"], "--start-at", f"{start_at:.6f}"]
        proc = subprocess.Popen(argv, cwd=work, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=_die_with_parent)
        _RUNNING[key] = proc
        if key in _STOPPED:               # stopped between the start and the line above
            proc.send_signal(signal.SIGINT)
        try:
            stdout, stderr = proc.communicate(timeout=job["timeout_s"])
        except subprocess.TimeoutExpired:
            out["error"] = (f"stacklab-load overran its {job['timeout_s']:g} s limit and "
                            "was stopped")
            stdout, stderr = _stopped(proc)
        finally:
            _RUNNING.pop(key, None)
        out["exit"] = proc.returncode
        out["stderr"] = stderr.decode(errors="replace")[-500:]
        try:
            out["report"] = json.loads(stdout)
        except json.JSONDecodeError:
            out["error"] = out["error"] or (
                f"stacklab-load printed no JSON report (exit {proc.returncode}): "
                f"{out['stderr'].strip()}")
        raw = Path(work) / "raw.txt"
        if raw.exists():
            out["raw_log"] = raw.read_text()
    return out


def unreachable(target: str, lab_netns: str | None, allow_remote: bool) -> str | None:
    """Why the agent cannot reach `target` (a URL) by TCP, or None. Only a host the
    engine itself may load is tried (loopback; the lab's range inside a lab namespace;
    any with the user's --allow-remote); the engine's own rule refuses the rest."""
    parts = urlsplit(target)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        ip = ipaddress.ip_address(socket.getaddrinfo(host, port)[0][4][0])
    except (OSError, ValueError) as e:
        return f"cannot resolve {host!r}: {e}"
    if not (ip.is_loopback or allow_remote or (lab_netns and ip in LAB_NETWORK)):
        return None
    try:
        with socket.create_connection((str(ip), port), timeout=CONNECT_TIMEOUT_S):
            return None
    except OSError as e:
        return f"cannot reach {host}:{port} from {socket.gethostname()}: {e}"


def _stopped(proc: subprocess.Popen) -> tuple[bytes, bytes]:
    """SIGINT, STOP_GRACE_S for its report, then SIGKILL: a stuck engine never keeps the
    worker's one thread from the next load."""
    proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()


def _die_with_parent() -> None:
    """The engine dies with the agent (a killed worker leaves no load running)."""
    _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:
        os._exit(1)
