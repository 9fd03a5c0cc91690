"""One run's measurement inside its stack's lifecycle: the engine's warm-up and load while
the monitor samples every component; then the resources of the measured window, what
each server counted itself over it, the front layers' figures, and the servers' child
deaths (read before the servers stop)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Callable

from ..measure.drive import LoadPlan, LoadReport, run_load
from .layercheck import layer_figures
from .replay import replay_plan
from ..measure.monitor import Monitor
from ..netlab.thread import in_netns
from .stack import RunningStack, counters_delta, stack_counters
from ..stacks import COMPONENTS
from ..stacks.base import Component
from ..store import Outcome


def measure(plan: LoadPlan, running: RunningStack, knobs: dict[str, dict],
            run_dir: Path, netns: str | None = None,
            counters: dict[str, Callable[[], float | None]] | None = None,
            landed: Callable[[LoadReport], None] | None = None,
            load_with: Callable[[LoadPlan, Path], LoadReport] = run_load
            ) -> tuple[LoadReport, dict]:
    """The engine's report and the resources of the measured window (`netns`: the
    servers' namespace, where their status pages are reached; `counters`: the CPU-time
    readers of the components' cgroups, by label, where they have one; `landed`: given
    the report the moment the load returns, before anything else is read; `load_with`:
    what runs the load, the one engine or the run's agents, AgentPool.run_load). With
    load.replay, the log's requests are the load (replay.replay_plan: its URLs fetched
    first, from the servers' namespace) and what the log held is stored as `_replay`."""
    replay = None
    if plan.load.get("replay"):
        with in_netns(netns):
            replay = replay_plan(plan, running.front.endpoint)
        plan = replay.plan if replay else plan
    # What each server counted itself over the measured window: read when the warm-up
    # ends (one engine process runs both) and after the load. They cost: read on a timer
    # thread at the boundary, not by the monitor.
    at_warm = _Later(plan.warmup_s, partial(_counters_in, netns, running))
    try:
        # a component with no process group to sample (a server stacklab did not start
        # and nothing of which is watched) has no figures: unknown, not zero
        with Monitor({s.label: s.proc.pgid for s in running.started
                      if s.proc.pgid is not None},
                     counters=counters) as monitor:
            began = monitor.now_s()
            at_warm.start()
            load = load_with(plan, run_dir)
            ended = monitor.now_s()
            if landed is not None:
                landed(load)
    finally:        # a load that raised: no reading may come later, into the next run
        at_warm.cancel()
    # A reading inside the window is the lab's work, not the host's other work.
    resources = _resources(monitor, began + plan.warmup_s, ended, load,
                           at_warm.children_cpu_s)
    resources["_counters"] = counters_delta(at_warm.result, stack_counters(running))
    if figures := layer_figures(running.stack, resources["_counters"], knobs):
        resources["_layers"] = figures
    resources["_logs"] = {"child_signals": child_signals(run_dir, [
        (COMPONENTS[s.name], s.ctx.run_dir) for s in running.started])}
    if replay is not None:
        resources["_replay"] = replay.record
    return load, resources


def _counters_in(netns: str | None, running: RunningStack) -> dict:
    """stack_counters from a thread of its own: inside the servers' namespace first."""
    with in_netns(netns):
        return stack_counters(running)


class _Later(threading.Thread):
    """`read()` after `delay_s` (at once, in the caller, when 0); its answer in `result`.
    A thread, so that the reading happens while the engine runs; cancellable, so that a
    run that ends early never reads its stopped stack (whose ports may then be another
    run's) after the fact."""

    def __init__(self, delay_s: float, read: Callable[[], dict]):
        super().__init__(daemon=True)
        self.delay_s, self.read, self.result = delay_s, read, {}
        self.children_cpu_s = 0.0   # of the programs the reading ran (varnishstat)
        self._cancelled = threading.Event()
        if not delay_s:
            self.result = read()

    def run(self) -> None:
        if self.delay_s and not self._cancelled.wait(self.delay_s):
            before = os.times()
            self.result = self.read()
            after = os.times()
            self.children_cpu_s = (after.children_user + after.children_system
                                   - before.children_user - before.children_system)

    def cancel(self) -> None:
        """Stop a reading that has not begun, and wait for one that has."""
        self._cancelled.set()
        if self.is_alive():
            self.join()


def load_outcome(load: LoadReport, alive: bool) -> tuple[Outcome, str | None]:
    """A report is not a measurement of the trial when the engine was stopped early by a
    signal (stacklab sends none mid-run: it came from outside), when the server died, or
    when no request completed; such runs are failed, out of every median."""
    if load.interrupted:
        return Outcome.FAILED, (f"engine interrupted: a signal from outside stopped "
                                f"stacklab-load after {load.duration_s or 0:.2f} s of "
                                "measured load")
    if not alive:
        return Outcome.FAILED, "server exited during the load"
    if not load.completed:
        errors = ", ".join(f"{n} {kind}" for kind, n in load.errors.items() if n)
        return Outcome.FAILED, f"no request completed ({errors or 'no request was sent'})"
    return Outcome.OK, None


def _resources(monitor: Monitor, t0: float, t1: float, load: LoadReport,
               readings_cpu_s: float = 0.0) -> dict:
    """Each component's summary of the measured window, the sampler's cost, and the CPU
    the rest of the host used meanwhile (components — by cgroup where they have one —,
    the engine, and local load agents' own processes are the lab's)."""
    out: dict = {name: trace.summary(t0, t1) for name, trace in monitor.traces.items()}
    lab_cpu = (sum(r["cpu_s"] for r in out.values()) + load.engine_cpu_measured_s
               + load.agents_workers_cpu_s + readings_cpu_s)
    per_process = [r for r in out.values() if r["cpu_source"] == "processes"]
    processes = sum(r["processes_max"] for r in per_process)
    source = ("processes" if len(per_process) == len(out) else
              "cgroup" if not per_process else "mixed")
    out["_monitor"] = monitor.overhead()
    out["_host"] = monitor.host_window(t0, t1, lab_cpu, processes, source)
    return out


def child_signals(run_dir: Path, servers: Iterable[tuple[Component, Path]],
                  most: int = 20) -> list[str]:
    """The lines of the servers' logs saying a child process died by a signal, each as
    "<log>: <line>" (the log under `run_dir`), logs in path order. `servers`: each
    component with its own run directory; each tells its own lost workers
    (Component.lost_worker), in its own error logs. Read before the servers are stopped,
    so that their own shutdown is not counted."""
    logs = sorted(((log, component) for component, own in servers
                   for log in component.error_logs(own)), key=lambda pair: pair[0])
    found = []
    for log, component in logs:
        try:
            with open(log, errors="replace") as f:
                found += [f"{log.relative_to(run_dir)}: {line.strip()[:300]}"
                          for line in f if component.lost_worker(line)]
        except OSError:
            continue
    return found[:most]
