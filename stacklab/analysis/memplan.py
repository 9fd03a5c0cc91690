"""Memory plan: the largest worker limit whose memory fits a RAM budget (issue 25).

apache2buddy-style tools divide RAM by a guess of process size. Here the sizes are
measured under load, inside a machine profile (cgroup) of the budget, at two pool sizes
of the same stack and workload (every worker busy): the monitor's PSS per worker process
and Σ PSS of every component (a page shared by k processes counts 1/k in each, so the
sum is the memory they hold), and what the cgroup was charged (PSS plus page cache and
kernel memory: sockets, page tables). One more worker process costs the slope between
the two pools — not the PSS of one worker, which holds a share of pages that stay
shared however many workers there are (measured: 5.0 MiB per mod_php worker at 4
workers; the 31 more of a pool of 35 added 0.7 MiB each). The plan is

    limit = floor((budget − fixed) / per process) × workers per process

with `per process` the larger of the two slopes at the upper ends of their intervals,
`fixed` what the larger pool held besides its workers, and `budget` taken at PLAN_SHARE:
planned to the whole budget, Apache prefork + mod_php at 512 MiB got 435 workers whose
check charged the cgroup 508–512 MiB (Σ PSS only 340: the rest is each process's kernel
memory, page tables, and the page cache of what it wrote), a group living at its limit by
reclaiming. The plan is then verified, not trusted (commands/memplan.py runs the stack at
that limit in a cgroup of the budget, every worker busy), and `check` judges that run: it
fits when nothing was OOM-killed, no run was short of memory, and the charge stayed under
flags.PROFILE_REACHED of the budget. Pure: records in, figures out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

from ..errors import UsageError
from ..experiment.sizes import parse_mib
from ..store import Outcome, RunRecord
from .analyze import Estimate, pooled
from .flags import PROFILE_REACHED

MIB = 2 ** 20
# Binary units, as Apache, systemd and docker read "512M": M = MiB.
# Flags that say the stack was short of memory (flags.memory_pressure): no fit.
MEMORY_FLAGS = ("memory-pressure", "memory-limited")
# Flags after which the check served something else than the pages asked for.
SERVED_OTHER = ("error-responses",)
# The share of the budget a plan fills: under PROFILE_REACHED (0.9), where a profile's
# group counts as held at its limit, with 5% of the budget for what a check's run charges
# beyond the measuring runs' (its longer log, noise between runs).
PLAN_SHARE = 0.85


def parse_budget(text: str) -> int:
    """'512M', '1G', '300MiB', '1.5GB' → MiB (binary units, experiment/sizes.py), a whole
    number of MiB, as the machine profile's machine.memory_mb takes it. UsageError naming
    --memory."""
    try:
        return parse_mib(text)
    except ValueError as e:
        raise UsageError(f"--memory {text!r}: {e}") from None


@dataclass(frozen=True)
class WorkerLimit:
    """The knob that bounds how many workers a stack runs at once, and whose processes
    they are: `per_process` workers live in each of `component`'s worker processes
    (1 for processes, ThreadsPerChild for Apache's threaded MPMs)."""

    knob: str              # "apache.max_request_workers"
    component: str         # "apache"
    per_process: int = 1
    unit: str = "process"  # what one worker is: process, thread, child

    def processes(self, value: int) -> int:
        """Worker processes at limit `value`."""
        return math.ceil(value / self.per_process)


def worker_limit(components: Iterable[str], knobs: dict[str, Any]) -> WorkerLimit | str:
    """The limit to plan for a stack of `components` with effective knob values `knobs`
    ({"apache.mpm": "prefork", ...}), or why it has none."""
    components = tuple(components)
    if "php-fpm" in components:
        return WorkerLimit("php-fpm.max_children", "php-fpm", 1, "child")
    if "apache" in components:
        spawned = [f"apache.{k} = {knobs.get(f'apache.{k}')!r}"
                   for k in ("php_handler", "perl_handler")
                   if knobs.get(f"apache.{k}") in ("cgi", "fcgid")]
        if spawned:
            return (f"{' and '.join(spawned)}: its scripts run in processes started "
                    "per request or by mod_fcgid, outside MaxRequestWorkers; no worker "
                    "limit to plan")
        if knobs.get("apache.mpm", "event") in ("prefork", "itk"):
            return WorkerLimit("apache.max_request_workers", "apache", 1, "process")
        return WorkerLimit("apache.max_request_workers", "apache",
                           int(knobs.get("apache.threads_per_child", 25)), "thread")
    return (f"{' + '.join(components)}: no worker limit to plan (neither Apache nor "
            "PHP-FPM: its servers run a fixed set of processes, not one per request in "
            "progress)")


def upper(e: Estimate) -> float | None:
    """The upper end of an estimate's interval (its largest value when too few)."""
    if e.ci:
        return e.ci[1]
    return max(e.values) if e.values else None


def lower(e: Estimate) -> float | None:
    if e.ci:
        return e.ci[0]
    return min(e.values) if e.values else None


@dataclass(frozen=True)
class Point:
    """A measuring trial at one pool size: what its ok runs held, MiB, over the
    repetitions."""

    processes: int          # worker processes it ran (the most any run had)
    per_process: Estimate   # the monitor's PSS of one worker process (its last reading)
    pss: Estimate           # Σ over the stack's components of their PSS peak
    charged: Estimate       # the stack's cgroup: its peak charge (MiB)
    runs: int


def _mib(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def point(runs: Iterable[RunRecord], limit: WorkerLimit) -> Point | str:
    """One measuring trial's figures, or why its runs give none (no ok run; no PSS read
    during the load: a load shorter than the monitor's 2 s between PSS readings). A run
    short of memory (a MEMORY_FLAGS flag, an OOM kill) is left out: its peak is the
    limit's, not what the pool holds, and would flatten the slope."""
    per, pss, charged, procs = [], [], [], []
    ok = [r for r in pooled(list(runs))     # a run the host disturbed, measured again,
          if not short_of_memory(r)]        # is set aside
    for r in ok:
        worker = _mib(r.resources.figure(limit.component, "pss_mib_per_worker"))
        peaks = [_mib(v.get("pss_mib_peak")) for v in r.resources.components.values()]
        held = _mib(r.resources.charged_mib)
        if worker is None or held is None or not peaks or any(p is None for p in peaks):
            continue
        per.append(worker)
        pss.append(sum(peaks))
        charged.append(held)
        procs.append(max(1, int(r.resources.figure(limit.component, "processes_max")
                                or 2) - 1))
    if not per:
        return (f"none of its {len(ok)} ok run(s) has the PSS of every component and the "
                "cgroup's charge during the load (the monitor reads PSS every 2 s: a load "
                "of 3 s or more holds a reading)" if ok else "no run of it completed")
    return Point(max(procs), Estimate.of(per), Estimate.of(pss), Estimate.of(charged),
                 len(per))


@dataclass(frozen=True)
class Figures:
    """Two pool sizes of the same stack and workload. What one more worker process costs
    is the slope between them, not the PSS of one worker: a page shared by the workers
    counts 1/n in each, so PSS per worker shrinks as the pool grows, and a process's
    kernel memory (page tables, its stack) is in no PSS at all. The slope of the cgroup's
    charge holds both; the slope of Σ PSS is its floor."""

    small: Point
    large: Point

    def _slope(self, field: str) -> float:
        """The upper end of the slope: the large pool's highest value against the small
        one's lowest, per worker process added."""
        a, b = getattr(self.small, field), getattr(self.large, field)
        added = self.large.processes - self.small.processes
        return max(0.0, (upper(b) - lower(a)) / added) if added > 0 else float("inf")

    @property
    def marginal_pss_mib(self) -> float:
        return self._slope("pss")

    @property
    def marginal_charged_mib(self) -> float:
        return self._slope("charged")

    @property
    def per_process_mib(self) -> float:
        """What the plan counts per worker process: the larger of the two slopes."""
        return max(self.marginal_pss_mib, self.marginal_charged_mib)

    @property
    def fixed_mib(self) -> float:
        """What the stack holds besides its worker processes: the large pool's highest
        charge (or Σ PSS, if higher) less its workers at the per-process cost."""
        held = max(upper(self.large.charged), upper(self.large.pss))
        return max(0.0, held - self.large.processes * self.per_process_mib)


@dataclass(frozen=True)
class MemoryPlan:
    """The largest value of `limit.knob` whose workers fit `budget_mib` beside the rest
    of the stack; `value` 0 with `problem` when not even one worker process fits."""

    limit: WorkerLimit
    budget_mib: int
    figures: Figures
    value: int
    capped: bool = False       # at the knob's largest value
    problem: str | None = None

    @property
    def planned_mib(self) -> float:
        """What the plan expects the stack to hold at its limit."""
        f = self.figures
        return f.fixed_mib + self.limit.processes(self.value) * f.per_process_mib


def plan(limit: WorkerLimit, budget_mib: int, f: Figures, maximum: int) -> MemoryPlan:
    """The plan from measured figures; `maximum` is the knob's largest value."""
    per, fixed = f.per_process_mib, f.fixed_mib
    room = budget_mib * PLAN_SHARE - fixed
    processes = math.floor(room / per) if 0 < per < float("inf") and room > 0 else 0
    if per == 0 and room > 0:
        processes = maximum
    value = processes * limit.per_process
    capped = value > maximum
    value = min(value, maximum)
    problem = None
    if f.large.processes <= f.small.processes:
        problem = (f"both pools ran {f.large.processes} worker processes: no slope to "
                   "measure what one more costs")
        value = 0
    elif value < 1:
        problem = (f"not one worker fits: {PLAN_SHARE:.0%} of {budget_mib} MiB less what "
                   "the stack holds "
                   f"besides its workers ({fixed:.1f} MiB) leaves {room:.1f} MiB, under "
                   f"one worker process ({per:.2f} MiB)")
    return MemoryPlan(limit, budget_mib, f, value, capped, problem)


@dataclass(frozen=True)
class Check:
    """The verification at the planned limit: what its runs held against the budget."""

    runs_ok: int
    runs_failed: int             # failed or invalid
    pss_peak_mib: float | None   # Σ over components of their PSS peak, the largest run's
    charged_peak_mib: float | None   # the cgroup's peak charge (page cache included)
    oom_kills: int
    flags: tuple[str, ...]
    processes_seen: int          # worker processes, the most any run had
    processes_needed: int
    reasons: tuple[str, ...] = ()

    def failures(self, budget_mib: int) -> list[str]:
        """What keeps the plan from "fits"; empty when it fits."""
        out = []
        if self.runs_failed or not self.runs_ok:
            out.append(f"{self.runs_failed} run(s) failed, {self.runs_ok} ok"
                       + (f" ({'; '.join(self.reasons)})" if self.reasons else ""))
        if self.oom_kills:
            out.append(f"{self.oom_kills} process(es) OOM-killed in the budget's cgroup")
        for name in self.flags:
            if name in MEMORY_FLAGS or name in SERVED_OTHER:
                out.append(f"flagged {name}")
        if self.pss_peak_mib is None and self.runs_ok:
            out.append("no PSS reading during the load (load shorter than 3 s?)")
        elif self.pss_peak_mib is not None and self.pss_peak_mib >= budget_mib:
            out.append(f"PSS peak {self.pss_peak_mib:.1f} MiB reached the budget")
        held = self.charged_peak_mib
        if held is not None and held >= PROFILE_REACHED * budget_mib:
            out.append(f"the cgroup's charge reached {held:.1f} MiB, {held / budget_mib:.0%} "
                       f"of the budget (at least {PROFILE_REACHED:.0%}: held at its limit, "
                       "reclaiming)")
        if self.runs_ok and self.processes_seen < self.processes_needed:
            out.append(f"only {self.processes_seen} of the {self.processes_needed} worker "
                       "processes ran: the limit was not reached")
        return out


def short_of_memory(run: RunRecord) -> bool:
    """A run flagged short of memory (MEMORY_FLAGS) or whose group saw an OOM kill."""
    return (any(f in MEMORY_FLAGS for f in run.flags)
            or bool(run.resources.machine.get("memory_oom_kills")))


def check(runs: Iterable[RunRecord], limit: WorkerLimit, value: int) -> Check:
    runs = list(runs)
    ok = [r for r in runs if r.outcome is Outcome.OK]
    pss, charged, seen = [], [], []
    for r in ok:
        peaks = [_mib(v.get("pss_mib_peak")) for v in r.resources.components.values()]
        if peaks and all(p is not None for p in peaks):
            pss.append(sum(peaks))
        if (c := _mib(r.resources.machine.get("memory_peak_bytes"))) is not None:
            charged.append(c / MIB)
        seen.append(int(r.resources.figure(limit.component, "processes_max") or 1) - 1)
    return Check(
        runs_ok=len(ok), runs_failed=len(runs) - len(ok),
        pss_peak_mib=max(pss, default=None), charged_peak_mib=max(charged, default=None),
        oom_kills=sum(int(r.resources.machine.get("memory_oom_kills") or 0) for r in runs),
        flags=tuple(sorted({f for r in runs for f in r.flags})),
        processes_seen=max(seen, default=0), processes_needed=limit.processes(value),
        reasons=tuple(sorted({f"{r.outcome}: {r.reason}" for r in runs
                              if r.outcome is not Outcome.OK and r.reason})))
