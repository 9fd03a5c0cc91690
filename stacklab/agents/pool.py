"""Load agents on Dask distributed: a scheduler inside the orchestrator, one `dask worker`
per load host, one engine per agent per load, one report of the run.

`AgentPool.local(n, state_dir, run_id)` starts n agents on this machine, each a Dask
worker in a network namespace of its own (netlab.agentnet), the scheduler listening in
the lab's control namespace; `AgentPool.external(address, n)` listens where the user
says and waits for n workers started on other hosts (docs/load.md, "Load from several
hosts"). `run_load` splits a load plan among agents 0..k-1 (connections evenly; an open
loop's arrivals by index modulo k, the engine's --segment, so together they send the
one-agent schedule; a seed of their own each), starts them together (every agent ready,
then one start instant a little ahead, the engine's --start-at), watches them, and
merges their reports exactly (merge.merge_reports). An agent that dies, cannot reach
the target or fails stops the others and fails the load within seconds: no task is
retried on another worker, no partial merge is returned.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import warnings
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from ..errors import EngineError
from ..host.procs import proc_stat
from ..measure.drive import (REPORT_EXITS, LoadPlan, LoadReport, engine_argv, engine_path,
                             engine_timeout_s, schedule_lines, url_lines, write_report)
from ..measure.monitor import TICKS
from .merge import merge_reports
from .task import agent_load, ready_queue, start_variable, stop_engines
from .task import engine_version as task_engine_version

# The start instant is this far ahead of the moment every agent is ready: time for the
# start to reach each agent (a scheduler round trip) and its engine to be started.
START_AHEAD_S = 0.25
WORKERS_TIMEOUT_S = 30.0       # local workers joining the scheduler
READY_TIMEOUT_S = 30.0         # every agent ready for a load
WATCH_S = 0.05                 # how often the load's agents and tasks are looked at
STOP_GRACE_S = 10.0            # the others' reports after one failed
DASK = Path(sys.executable).with_name("dask")
# A local worker that has lost its scheduler (stacklab killed) exits after this long;
# its namespace goes with the next session's sweep (net.cleanup_stale)
DEATH_TIMEOUT_S = 30


@dataclass(frozen=True)
class Agent:
    name: str
    netns: str | None = None           # a local agent's own namespace
    address: str | None = None         # its address on the control link


class AgentPool:
    """Workers joined to a scheduler of the orchestrator's; `run_load` is one load."""

    def __init__(self, cluster, client, agents: list[Agent], procs=(), net=None,
                 scheduler: str = "", addresses=(), log_dir: Path | None = None):
        self.cluster, self.client, self.agents = cluster, client, agents
        self.procs, self.net, self.scheduler = list(procs), net, scheduler
        self.attached: str | None = None     # the server namespace the agents are joined to
        # this host's engine: every agent's must be the same version (_barrier)
        self.engine_version = task_engine_version(str(engine_path()))
        self._addresses = list(addresses)    # local workers' scheduler address each
        self._log_dir = log_dir
        # local agents' working directories (URL lists, raw logs): under the pool's own
        # directory, removed with it at close, so that an agent killed mid-load (or
        # stopped by close) leaves none behind in the system's temporary directory
        self._work_root = log_dir / "agent-work" if log_dir is not None else None
        if self._work_root is not None:
            self._work_root.mkdir(parents=True, exist_ok=True)
        self._loads = 0

    # --- making and closing ---------------------------------------------------------

    @classmethod
    def local(cls, count: int, state_dir: Path, run_id: str) -> "AgentPool":
        """`count` agents on this machine, each a Dask worker in its own network
        namespace joined to the control namespace, where the scheduler listens (on every
        address of that namespace, which holds nothing else)."""
        from distributed import Client

        from ..netlab.agentnet import create_agent_net
        from ..netlab.thread import in_netns

        net = create_agent_net(run_id, state_dir, count)
        procs: list[subprocess.Popen] = []
        cluster = client = None
        try:
            with in_netns(net.control_ns), warnings.catch_warnings():
                # the scheduler's threads begin inside; a namespace with no route out
                # makes distributed warn that it found no address for 8.8.8.8
                warnings.simplefilter("ignore", RuntimeWarning)
                cluster = _scheduler("0.0.0.0", 0)
                client = Client(cluster)
            # tcp://…, or tls://… when Dask's configuration requires encryption
            listening = cluster.scheduler_address
            protocol, port = listening.split("://")[0], listening.rsplit(":", 1)[1]
            agents = [Agent(f"agent-{k}", ns, addr) for k, (ns, addr) in
                      enumerate(zip(net.agent_ns, net.agent_addrs))]
            addresses = [f"{protocol}://{a}:{port}" for a in net.control_addrs]
            for agent, address in zip(agents, addresses):
                procs.append(_start_worker(["ip", "netns", "exec", agent.netns], address,
                                           agent.name, state_dir))
            pool = cls(cluster, client, agents, procs, net,
                       f"{net.control_ns} 0.0.0.0:{port}", addresses, state_dir)
            pool._wait_for_workers(WORKERS_TIMEOUT_S)
            return pool
        except BaseException:
            _close(client, cluster, procs, net)
            raise

    @classmethod
    def external(cls, address: str, count: int, timeout_s: float,
                 say: Callable[[str], None] = lambda line: None) -> "AgentPool":
        """A scheduler listening at `address` (host:port, the user's --agents-listen),
        waiting up to `timeout_s` for `count` workers started on the load hosts
        (`dask worker tcp://ADDRESS --name NAME --nthreads 1 --no-nanny`), used in the
        natural order of their names (loadhost-2 before loadhost-10)."""
        from distributed import Client

        host, _, port = address.rpartition(":")
        try:
            cluster = _scheduler(host, int(port))
        except RuntimeError as e:        # distributed's "Cluster failed to start"
            why: BaseException = e      # … from "Scheduler failed to start", from the
            while why.__cause__ is not None:    # OSError that says why
                why = why.__cause__
            raise EngineError(f"--agents-listen {address}: the scheduler cannot listen "
                              f"there: {why}") from None
        client = Client(cluster)
        pool = cls(cluster, client, [], scheduler=cluster.scheduler_address)
        try:
            tls = (" --tls-ca-file CA --tls-cert CERT --tls-key KEY"
                   if cluster.scheduler_address.startswith("tls://") else "")
            say(f"waiting for {count} load agent(s) at {cluster.scheduler_address}: on "
                f"each load host run `dask worker {cluster.scheduler_address} --name NAME "
                f"--nthreads 1 --no-nanny{tls}`")
            client.wait_for_workers(count, timeout=timeout_s)
        except BaseException as e:
            joined = len(pool._workers())
            pool.close()
            if isinstance(e, TimeoutError):
                raise EngineError(f"--agents-listen {address}: {count} load agent(s) asked, "
                                  f"{joined} joined within {timeout_s:g} s") from None
            raise
        pool.agents = sorted((Agent(w.name, address=w.host) for w in pool._worker_states()),
                             key=lambda a: _natural(str(a.name)))[:count]
        return pool

    def close(self) -> None:
        _close(self.client, self.cluster, self.procs, self.net)
        if self._work_root is not None:
            shutil.rmtree(self._work_root, ignore_errors=True)

    def __enter__(self) -> "AgentPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _worker_states(self) -> list:
        """The scheduler's WorkerStates, read from its own state (it runs in this process:
        no round trip, so watching a load costs next to nothing). Copied in one C-level
        call: its thread may remove a worker meanwhile, which a Python-level iteration
        of the SortedDict would meet as a KeyError."""
        return list(dict.values(self.cluster.scheduler.workers))

    def _workers(self) -> dict[str, str]:
        """The joined workers' addresses by name."""
        return {w.name: w.address for w in self._worker_states()}

    def _revive(self, count: int) -> None:
        """Local agents 0..count-1 whose worker died (an earlier load lost it) started
        again, in their own namespace, before this load: the experiment goes on."""
        dead = [k for k in range(min(count, len(self.procs)))
                if self.procs[k].poll() is not None]
        for k in dead:
            agent = self.agents[k]
            self.procs[k] = _start_worker(["ip", "netns", "exec", agent.netns],
                                          self._addresses[k], agent.name, self._log_dir)
        if dead:
            self._wait_for_workers(WORKERS_TIMEOUT_S)

    def _wait_for_workers(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        want = {a.name for a in self.agents}
        while not want <= set(self._workers()):
            dead = [p for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise EngineError(
                    f"load agents: {len(want & set(self._workers()))} of {len(want)} "
                    f"Dask workers joined ({'one exited' if dead else 'timed out'}; "
                    f"its log: {getattr(dead[0], 'log', '?') if dead else ''})")
            time.sleep(0.05)

    # --- one load -------------------------------------------------------------------

    def attach(self, server_ns: str, server_addr: str, count: int) -> None:
        """Join local agents 0..count-1 to a run's server namespace, once per run (a
        capacity search loads it many times; a run's agent count is its trial's)."""
        if self.net is not None and self.attached != server_ns:
            self.net.attach(server_ns, server_addr, count)
            self.attached = server_ns

    def run_load(self, plan: LoadPlan, work_dir: Path, count: int,
                 raw_log: bool = False) -> LoadReport:
        """`plan` on agents 0..count-1, as one report (see the module's doc)."""
        if not 1 <= count <= len(self.agents):
            raise EngineError(f"load.agents = {count}: {len(self.agents)} agent(s) joined")
        for what, n in (("connection(s)", plan.connections), ("request(s)", plan.requests)):
            if n is not None and n < count:
                raise EngineError(f"load.agents = {count} is more than the run's {n} {what}: "
                                  "each agent needs one")
        self._revive(count)
        began = time.monotonic()
        self._loads += 1
        key = f"{os.getpid()}-{id(self)}-{self._loads}"
        agents = self.agents[:count]
        from distributed import Queue, Variable
        start = Variable(start_variable(key), client=self.client)
        futures: list = []
        cpu_before = self._workers_cpu_s()
        try:
            for k, agent in enumerate(agents):
                futures.append(self.client.submit(
                    agent_load, self._job(plan, key, k, count, raw_log),
                    key=f"stacklab-load-{key}-{k}", workers=[agent.name],
                    allow_other_workers=False, pure=False, retries=0))
            self._barrier(Queue(ready_queue(key), client=self.client), agents, futures)
            start.set(time.time() + START_AHEAD_S)
            results = self._watch(futures, agents, engine_timeout_s(plan) + 30)
        except BaseException:
            try:
                start.set(None)          # an agent still waiting for the start ends
                self._stop(key, agents, futures)
            except Exception:            # noqa: BLE001 - the load's own error is the one
                pass
            raise
        finally:
            self.client.cancel(futures)
        overhead = time.monotonic() - began - max(
            (r["report"]["duration_s"] + (r["report"]["config"].get("warmup_s") or 0))
            for r in results)
        workers_cpu = (None if cpu_before is None
                       else self._workers_cpu_s() - cpu_before)
        merged = self._merged(results, agents, overhead, workers_cpu, work_dir, raw_log)
        if plan.report_file is not None:
            _write_report(plan.report_file, merged)
        return merged

    def _clock_offsets_us(self) -> dict[str, int]:
        """Each worker's clock against the scheduler's, from its last heartbeat (the
        scheduler's time on receipt less the worker's on sending: the offset plus one
        network delay); the agents' start times are each by its own clock."""
        return {w.name: round(w.time_delay * 1e6) for w in self._worker_states()}

    def _workers_cpu_s(self) -> float | None:
        """The local workers' own CPU seconds so far (their engines not included: those
        report their own); None for agents on other hosts."""
        if not self.procs:
            return None
        stats = [f for proc in self.procs if (f := proc_stat(proc.pid))]   # gone: fails
        return sum(int(f[11]) + int(f[12]) for f in stats) / TICKS      # utime + stime

    def _job(self, plan: LoadPlan, key: str, k: int, count: int, raw_log: bool) -> dict:
        """Agent k's share of `plan`: its connections, requests and seed, the whole
        rate (its --segment takes its arrivals), the lists as text."""
        share = replace(plan, connections=_share(plan.connections, k, count),
                        requests=(None if plan.requests is None
                                  else _share(plan.requests, k, count)),
                        seed=plan.seed + k, netns=None, report_file=None)
        argv = engine_argv(share, Path("urls.txt"))[1:] + ["--segment", f"{k}/{count}"]
        agent = self.agents[k]
        if agent.netns:
            argv += ["--lab-netns", agent.netns]
        if raw_log:
            argv += ["--raw-log", "raw.txt"]
        files = {"urls.txt": url_lines(plan)}
        if plan.schedule:
            files["schedule.txt"] = schedule_lines(plan)
        work_root = str(self._work_root) if agent.netns and self._work_root else None
        return {"key": key, "argv": argv, "files": files, "target": plan.urls[0][0],
                "work_root": work_root,
                "lab_netns": agent.netns, "allow_remote": plan.allow_remote,
                "timeout_s": engine_timeout_s(plan), "connections": share.connections}

    def _barrier(self, ready, agents: list[Agent], futures) -> None:
        """Every agent ready (files written, target reached, its engine the version this
        host runs), or the load fails."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        waiting = {a.name for a in agents}
        versions: dict[str, str] = {}
        while waiting:
            self._check_alive(agents, futures)
            try:
                said = ready.get(timeout=WATCH_S * 4)
            except TimeoutError:
                if time.monotonic() > deadline:
                    raise EngineError(f"load agents {', '.join(sorted(waiting))} not ready "
                                      f"within {READY_TIMEOUT_S:g} s") from None
                continue
            if said["error"]:
                raise EngineError(f"load agent {said['name']}: {said['error']}")
            waiting.discard(said["name"])
            versions[said["name"]] = said["version"]
        if len(set(versions.values()) | {self.engine_version}) > 1:
            named = ", ".join(f"{n} {v}" for n, v in sorted(versions.items()))
            raise EngineError(f"the load agents' engines ({named}) are not this host's "
                              f"({self.engine_version}): their figures would not be one "
                              "measurement; install one version on every load host")

    def _check_alive(self, agents: list[Agent], futures) -> None:
        joined = self._workers()
        for agent, future in zip(agents, futures):
            if agent.name not in joined:
                raise EngineError(f"load agent {agent.name} left during the load (its "
                                  "worker died or lost the scheduler): the run is failed, "
                                  "not merged from the others")
            if future.status == "error":
                raise EngineError(f"load agent {agent.name}: {future.exception()!r}")

    def _watch(self, futures, agents: list[Agent], limit_s: float) -> list[dict]:
        """Every agent's result, each fetched once as it finishes; the first failure
        (an agent gone, its task's error, its engine's) fails the load."""
        deadline = time.monotonic() + limit_s
        results: dict[int, dict] = {}
        while len(results) < len(futures):
            self._check_alive(agents, futures)
            for k, (agent, f) in enumerate(zip(agents, futures)):
                if k not in results and f.status == "finished":
                    results[k] = f.result()
                    if bad := _failure(results[k]):
                        raise EngineError(f"load agent {agent.name}: {bad}")
            if time.monotonic() > deadline:
                raise EngineError(f"load agents overran their {limit_s:g} s limit")
            time.sleep(WATCH_S)
        return [results[k] for k in range(len(futures))]

    def _stop(self, key: str, agents: list[Agent], futures) -> None:
        """After a failure: the engines still running stopped (SIGINT, on each live
        worker), and a little time for their tasks to end."""
        joined = self._workers()
        live = [joined[a.name] for a in agents if a.name in joined]
        if live:
            try:
                self.client.run(stop_engines, key, workers=live, on_error="return")
            except Exception:       # noqa: BLE001 - the load has failed already
                pass
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline and any(
                f.status == "pending" and a.name in self._workers()
                for a, f in zip(agents, futures)):
            time.sleep(WATCH_S)

    def _merged(self, results: list[dict], agents: list[Agent], overhead_s: float,
                workers_cpu_s: float | None, work_dir: Path, raw_log: bool) -> LoadReport:
        docs = [r["report"] for r in results]
        offsets = self._clock_offsets_us()
        about = [{"name": a.name, "host": r["host"], "netns": a.netns,
                  "address": a.address, "exit": r["exit"],
                  "clock_offset_us": offsets.get(a.name)}
                 for a, r in zip(agents, results)]
        merged = merge_reports(docs, about)
        merged["agents"] |= {"overhead_s": round(overhead_s, 3),
                             "scheduler": self.scheduler,
                             "workers_cpu_s": (None if workers_cpu_s is None
                                               else round(workers_cpu_s, 3))}
        if raw_log:
            for a, r in zip(agents, results):
                (work_dir / f"raw-{a.name}.txt").write_text(r.get("raw_log") or "")
        exits = [r["exit"] for r in results]
        status = 130 if 130 in exits else 0 if merged["requests"]["completed"] else 3
        return LoadReport.from_json(merged, status)


def _write_report(path: Path, merged: LoadReport) -> None:
    """The merged report where one engine would have written its own (the plan's
    report_file: the run's journal), as soon as it is made: from here on a stacklab
    stopped keeps the load for a resume. (From the last agent's exit to here, the
    results' transfer and the merge, it is kept by nothing but this process.) A report
    that cannot be written there is still returned, kept from its return on."""
    try:
        write_report(path, merged.raw)
    except OSError:
        pass


def _scheduler(host: str, port: int):
    """A scheduler in this process (a LocalCluster with no worker of its own) that never
    gives a lost worker's task to another one: a load's share runs where it was pinned
    or the load fails (allowed-failures 0: a task whose worker died is erred at once)."""
    import dask
    from distributed import LocalCluster
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        return LocalCluster(n_workers=0, host=host, scheduler_port=port,
                            dashboard_address=None, silence_logs=40)


def _natural(name: str) -> list:
    """Sort key: digits as numbers (agent-2 before agent-10)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _share(total: int, k: int, count: int) -> int:
    return total // count + (1 if k < total % count else 0)


def _failure(result: dict) -> str | None:
    """Why an agent's result is no share of the run, or None: its task's error, an exit
    without a report, or a share that completed nothing or ended early (merged, the
    others' requests would hide it)."""
    if result.get("error"):
        return result["error"]
    if result.get("exit") not in REPORT_EXITS:
        return f"stacklab-load exited {result.get('exit')}: {result.get('stderr', '').strip()}"
    report = result.get("report") or {}
    if result["exit"] == 3 or not report.get("requests", {}).get("completed"):
        errors = ", ".join(f"{n} {kind}" for kind, n in
                           (report.get("requests", {}).get("errors") or {}).items() if n)
        return f"its engine completed no request ({errors or 'none sent'})"
    if why := report.get("ended_early"):
        return f"its engine ended early: {why}"
    return None


def _start_worker(prefix: list[str], scheduler: str, name: str, log_dir: Path
                  ) -> subprocess.Popen:
    """One `dask worker` (no nanny: an agent that dies stays dead), its log a file."""
    if not DASK.exists() and not shutil.which("dask"):
        raise EngineError("dask not found: install the project's Python dependencies")
    dask = str(DASK) if DASK.exists() else "dask"
    log = Path(log_dir) / f"{name}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([*prefix, dask, "worker", scheduler, "--name", name,
                                 "--nthreads", "1", "--no-nanny", "--no-dashboard",
                                 "--death-timeout", str(DEATH_TIMEOUT_S)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True)
    proc.log = str(log)                     # type: ignore[attr-defined]
    return proc


def _close(client, cluster, procs: list, net) -> None:
    """Stop the workers, then the client, the scheduler and the agents' namespaces."""
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    for proc in procs:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    for closing in (client, cluster):
        if closing is not None:
            try:
                closing.close()
            except Exception:       # noqa: BLE001 - closing what may be broken already
                pass
    if net is not None and not net.closed:
        net.close()
