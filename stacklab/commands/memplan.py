"""capacity --memory: a RAM budget turned into worker limits, measured then verified.

Three stages, each an experiment stored like any other (nothing measured is lost):
  1. `<spec>.memory`: the spec's stacks and workloads at two fixed pools of workers (as
     many as the spec's largest concurrency, at least MIN_POOL, and GROWTH times that;
     all started before the load, twice as many connections, so every worker serves),
     with no memory limit (a pool held at the budget's limit would measure the limit,
     not what it holds, and flatten the slope): PSS per worker, Σ PSS of every
     component, and the charge of the run's own accounting group (the charge the check's
     cgroup has); a run short of memory all the same is left out;
  2. the plan (analysis/memplan.py): the largest MaxRequestWorkers / pm.max_children that
     fits the budget beside the rest of the stack, from the slope between the two pools;
  3. `<spec>.memory-check`: the stack at that limit, every worker busy (twice as many
     connections as workers), in a cgroup of the budget: its peak against the budget.
The spec's own duration is kept unless shorter than MIN_LOAD_S (the monitor reads PSS
every 2 s; a load without a reading has no peak).
"""

from __future__ import annotations

import copy
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis.analyze import Estimate, ExperimentView, load_view
from ..analysis.memplan import (PLAN_SHARE, Check, Figures, MemoryPlan, Point, WorkerLimit,
                                check, parse_budget, plan, point, worker_limit)
from ..env import Environment
from ..errors import ExitStatus, SpecError, UsageError
from ..experiment.plan import make_plan
from ..experiment.spec import AXES, ExperimentSpec, parse_duration, parse_spec, read_text
from ..host import lab
from ..report.listings import print_notes
from ..report.progress import RichProgress
from ..run.runner import run_experiment
from ..run.validate import SpecOrigin, check_installed, validate_plan
from ..stacks import REGISTRY, STACKS
from ..store import Store
from ..workloads import WORKLOADS
from .run import load, logs_dir

MIN_LOAD_S = 3.0       # a load that holds at least one of the monitor's PSS readings
BUSY = 2               # connections per worker: every worker has a request to serve
# The two pools measured: the spec's largest concurrency (at least MIN_POOL workers) and
# GROWTH times as many, far enough apart that the slope between them is not noise.
MIN_POOL = 4
GROWTH = 4


@dataclass(frozen=True)
class Target:
    """One trial of a derived experiment: a stack, a workload, and its own knob values
    (concurrency among them) where trials differ."""

    stack: str
    workload: str
    values: dict[str, Any]


def memory_plan(env: Environment, spec_path: Path, db: Path | None, budget: str,
                allow_remote: bool = False) -> ExitStatus:
    """`stacklab capacity SPEC --memory BUDGET`: measure, plan, verify, print; OK when
    every planned stack and workload fits, ERROR otherwise (everything stays stored)."""
    budget_mib = parse_budget(budget)
    spec, _ = load(spec_path)
    limits = stack_limits(spec)
    for stack, why in limits.items():
        if isinstance(why, str):
            print_notes([f"{stack}: {why}"], env.stdout)
    planned = {s: lim for s, lim in limits.items() if isinstance(lim, WorkerLimit)}
    if not planned:
        raise UsageError(f"--memory {budget}: no stack of {spec_path} has a worker limit to "
                         "plan (Apache or PHP-FPM)")
    doc = tomllib.loads(read_text(spec_path))
    small = max(max(spec.axes["concurrency"]), MIN_POOL)
    measure = derived(doc, spec, "memory", None, [
        Target(s, w, pool(lim, n)) for s, lim in planned.items()
        for w in spec.axes["workload"] for n in (small, GROWTH * small)])
    db = env.database(db)
    lab.check_root(env.lab_root)
    store = Store.open(db)
    try:
        measured = run(env, measure, store, db, allow_remote)
        plans = make_plans(measured, planned, budget_mib)
        targets = [Target(s, w, pool(p.limit, p.value)) for (s, w), p in plans.items()
                   if isinstance(p, MemoryPlan) and not p.problem]
        checked: ExperimentView | None = None
        if targets:
            checked = run(env, derived(doc, spec, "memory-check", budget_mib, targets),
                          store, db, allow_remote)
    finally:
        store.close()
    verdicts = [print_plan(env, key, p, checked, budget_mib) for key, p in plans.items()]
    return ExitStatus.OK if verdicts and all(verdicts) else ExitStatus.ERROR


def stack_limits(spec: ExperimentSpec) -> dict[str, WorkerLimit | str]:
    """Each stack of the spec: the knob that limits its workers, or why it has none. A
    knob axis of the matrix is refused: a plan is made for one setting of the stack."""
    for key, values in spec.axes.items():
        if key not in AXES:
            raise SpecError(spec.path, f"matrix.{key}", list(values), "a memory plan is "
                            "made for one setting of each stack: fix this knob in [knobs]")
    out = {}
    for name in spec.axes["stack"]:
        stack = STACKS[name]
        knobs = {f"{c}.{k}": v for c in stack.components
                 for k, v in stack.component_knobs(c).items()}
        knobs |= {k: v for k, v in spec.fixed_knobs.items() if k.split(".", 1)[0]
                  in stack.components}
        out[name] = worker_limit(stack.components, knobs | stack.knobs)
    return out


def pool(limit: WorkerLimit, value: int) -> dict[str, Any]:
    """The knobs that run exactly `value` workers, all started before the load and none
    reaped as a spare while it runs, with BUSY connections per worker."""
    out: dict[str, Any] = {"concurrency": BUSY * value, limit.knob: value}
    if limit.component == "php-fpm":
        out["php-fpm.pm"] = "static"
    elif limit.per_process == 1:
        out |= {"apache.start_servers": value, "apache.max_spare_servers": max(value, 6)}
    else:
        out |= {"apache.start_servers": limit.processes(value),
                "apache.max_spare_threads": value}
    for key, value in out.items():      # past its largest value (StartServers 1024)
        if key not in ("concurrency", limit.knob) and isinstance(value, int):
            out[key] = min(value, int(REGISTRY.get(key).max))   # Apache forks the rest
    return out


def derived(doc: dict, spec: ExperimentSpec, suffix: str, budget_mib: int | None,
            targets: list[Target]) -> ExperimentSpec:
    """The spec's file with its name suffixed, a load of at least MIN_LOAD_S, the machine
    profile at the budget (none when None), and each target's own values: a value shared
    by all targets is fixed, the others are matrix axes with exclusions leaving each
    target its own."""
    targets = completed(targets, spec)
    out = copy.deepcopy(doc)
    exp = out["experiment"]
    exp["name"] = f"{spec.experiment.name}.{suffix}"
    exp["description"] = (f"{suffix} of {spec.experiment.name} "
                          + (f"at a {budget_mib} MiB budget " if budget_mib else
                             "with no memory limit ")
                          + "(stacklab capacity --memory)")
    length = spec.experiment.duration or 0.0
    for key in ("requests", "requests_per_connection", "duration"):
        exp.pop(key, None)
    exp["duration"] = max(length, MIN_LOAD_S)
    knobs = out.setdefault("knobs", {})
    if budget_mib:
        knobs.setdefault("machine", {})["memory_mb"] = budget_mib
    matrix: dict[str, Any] = {"stack": sorted({t.stack for t in targets}),
                              "workload": sorted({t.workload for t in targets})}
    axes = {}
    for key in sorted({k for t in targets for k in t.values}):
        owner, _, name = key.partition(".")
        if name:
            knobs.get(owner, {}).pop(name, None)
        values = sorted({t.values[key] for t in targets if key in t.values}, key=repr)
        if len(values) == 1 and name:
            knobs.setdefault(owner, {})[name] = values[0]
        elif name:
            matrix.setdefault(owner, {})[name] = axes[key] = values
        else:
            matrix[key] = axes[key] = values
    if rules := exclusions(axes, targets):
        matrix["exclude"] = rules
    out["matrix"] = matrix
    parsed = parse_spec(out, spec.path, REGISTRY, STACKS, set(WORKLOADS))
    validate_plan(make_plan(parsed, STACKS), SpecOrigin(parsed))
    return parsed


def completed(targets: list[Target], spec: ExperimentSpec) -> list[Target]:
    """Each target with a value for every knob another target sets that its stack has
    too: the value it would have had (the spec's, else the stack's), so that a front
    Apache of a PHP-FPM stack keeps its own MaxRequestWorkers when a mod_php stack's is
    planned beside it."""
    keys = {k for t in targets for k in t.values if "." in k}
    out = []
    for t in targets:
        stack = STACKS[t.stack]
        own = {}
        for key in keys - t.values.keys():
            owner, _, name = key.partition(".")
            if owner in stack.components:
                own[key] = spec.fixed_knobs.get(key, stack.component_knobs(owner)[name])
        out.append(Target(t.stack, t.workload, {**t.values, **own}))
    return out


def exclusions(axes: dict[str, list], targets: list[Target]) -> list[dict]:
    """Rules leaving only the (completed) targets' points: no stack with a workload it has
    no target for, and each stack and workload only its targets' values. A target is
    known by its concurrency (BUSY × its workers: one per pool size); every other axis is
    pinned to the target's value at that concurrency. A knob its stack lacks is dropped
    from its trials: nothing to exclude."""
    pairs = list(dict.fromkeys((t.stack, t.workload) for t in targets))
    rules = [{"stack": s, "workload": w} for s in sorted({s for s, _ in pairs})
             for w in sorted({w for _, w in pairs}) if (s, w) not in pairs]
    for stack, workload in pairs:
        group = [t for t in targets if (t.stack, t.workload) == (stack, workload)]
        where = {"stack": stack, "workload": workload}
        by_c = {t.values["concurrency"]: t for t in group}
        for c in axes.get("concurrency", []):
            if c not in by_c:
                rules.append({**where, "concurrency": c})
        for key, values in axes.items():
            if key not in group[0].values or key == "concurrency":
                continue
            for c, t in by_c.items():
                own = t.values[key]
                at = {"concurrency": c} if len(axes.get("concurrency", [])) > 1 else {}
                rules += [{**where, **at, key: v} for v in values if v != own]
    return rules


def run(env: Environment, spec: ExperimentSpec, store: Store, db: Path,
        allow_remote: bool) -> ExperimentView:
    """One derived experiment, validated, run and stored like `run` does."""
    made = make_plan(spec, STACKS)
    print_notes(list(made.notes), env.stdout)
    check_installed(made.components(STACKS), engine=True)
    env.stdout.print(f"{spec.experiment.name}: {len(made.runs)} runs", markup=False,
                     highlight=False)
    exp_id = run_experiment(env, spec, made, REGISTRY, store, logs_dir(db), False,
                            RichProgress(env.stdout), allow_remote=allow_remote)
    return load_view(store, exp_id)


def make_plans(view: ExperimentView, limits: dict[str, WorkerLimit], budget_mib: int
               ) -> dict[tuple[str, str], MemoryPlan | str]:
    """(stack, workload) → its plan from its two pools, or why they give none."""
    points: dict[tuple[str, str], list[Point | str]] = {}
    for s in sorted(view.summaries, key=lambda s: s.concurrency):
        found = point([r for r in view.runs if r.trial_id == s.trial_id], limits[s.stack])
        points.setdefault((s.stack, s.workload), []).append(
            f"{s.label}: {found}" if isinstance(found, str) else found)
    out: dict[tuple[str, str], MemoryPlan | str] = {}
    for (stack, workload), found in points.items():
        limit = limits[stack]
        why = [p for p in found if isinstance(p, str)]
        if why or len(found) != 2:
            out[(stack, workload)] = "; ".join(why) or f"{len(found)} pool(s) measured, not 2"
            continue
        maximum = int(REGISTRY.get(limit.knob).max or 1 << 20)
        out[(stack, workload)] = plan(limit, budget_mib, Figures(*found), maximum)
    return out


def _est(e: Estimate) -> str:
    if e.median is None:
        return "—"
    if e.ci is None or len(e.values) < 2:
        return f"{e.median:.1f}"
    return f"{e.median:.1f} [{e.ci[0]:.1f}–{e.ci[1]:.1f}]"


def print_plan(env: Environment, key: tuple[str, str], p: MemoryPlan | str,
               checked: ExperimentView | None, budget_mib: int) -> bool:
    """The plan of one stack and workload, its check and the verdict line; True when it
    fits."""
    def say(text: str) -> None:
        env.stdout.print(text, markup=False, highlight=False)
    stack, workload = key
    say(f"\nmemory plan: {stack} {workload}, budget {budget_mib} MiB")
    if isinstance(p, str):
        say(f"  verdict: no plan: {p}")
        return False
    f, lim = p.figures, p.limit
    say("  measured, MiB (median [range, or 95% CI from 6 runs]):")
    for pt in (f.small, f.large):
        say(f"    {pt.processes:>4} worker processes ({pt.runs} run(s)): PSS per worker "
            f"process {_est(pt.per_process)}, Σ PSS {_est(pt.pss)}, cgroup's charge "
            f"{_est(pt.charged)}")
    each = f" ({lim.per_process} {lim.unit}s each)" if lim.per_process > 1 else ""
    say(f"    one more worker process{each} added {f.marginal_pss_mib:.2f} MiB of PSS, "
        f"{f.marginal_charged_mib:.2f} MiB of charge (upper ends)")
    say(f"  plan: ({PLAN_SHARE:.0%} of {budget_mib} − {f.fixed_mib:.1f} fixed) / "
        f"{f.per_process_mib:.2f} MiB per worker process (upper ends; verified below)")
    if p.problem:
        say(f"  verdict: no plan: {p.problem}")
        return False
    say(f"  {lim.knob} = {p.value}" + (" (the knob's largest value)" if p.capped else "")
        + f"   expected {p.planned_mib:.0f} MiB of {budget_mib}")
    c = _check_of(checked, key, lim, p.value)
    if c is None:
        say("  verdict: not verified: the check measured nothing")
        return False
    say(f"  check at {lim.knob} = {p.value}, {BUSY * p.value} connections: "
        f"{c.processes_seen} of {c.processes_needed} worker processes ran; "
        f"{c.runs_ok} ok, {c.runs_failed} failed")
    held, pss = c.charged_peak_mib, c.pss_peak_mib
    say("    peak charge of the budget's cgroup " + (
        "—" if held is None else f"{held:.1f} MiB of {budget_mib} (headroom "
        f"{budget_mib - held:.1f} MiB)") + "; Σ PSS peak "
        + ("—" if pss is None else f"{pss:.1f} MiB") + " (the charge adds kernel memory "
        "and page cache)")
    say(f"    OOM kills {c.oom_kills}; flags: {', '.join(c.flags) or 'none'}")
    failed = c.failures(budget_mib)
    say("  verdict: fits" if not failed else f"  verdict: does not fit: {'; '.join(failed)}")
    return not failed


def _check_of(view: ExperimentView | None, key: tuple[str, str], limit: WorkerLimit,
              value: int) -> Check | None:
    if view is None:
        return None
    for s in view.summaries:
        if (s.stack, s.workload) == key:
            return check([r for r in view.runs if r.trial_id == s.trial_id], limit, value)
    return None
