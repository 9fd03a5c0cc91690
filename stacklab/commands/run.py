"""run: validate the whole plan, then measure it run by run (runner.py), storing each."""

from __future__ import annotations

from pathlib import Path

from .. import lab
from ..analyze import load_view
from ..drive import engine_path
from ..env import Environment
from ..errors import ExitStatus, SpecError, StacklabError
from ..plan import Plan, effective_knobs, make_plan
from ..procs import connections_problem, limits_problem
from ..report.listings import print_notes, print_plan
from ..report.progress import RichProgress
from ..report.text import print_summary
from ..runner import run_experiment
from ..spec import ExperimentSpec, load_spec
from ..stacks import COMPONENTS, REGISTRY, STACKS
from ..store import Store
from ..systune import CpuAwake
from ..workloads import WORKLOADS

CPU_AWAKE_NOTE = ("cannot hold /dev/cpu_dma_latency (needs root): idle CPUs may sleep "
                  "between requests, which slows low-concurrency runs; recorded with each run")


def load(spec_path: Path) -> tuple[ExperimentSpec, Plan]:
    """Validate the spec and the whole plan (every trial's knob combination)."""
    spec = load_spec(spec_path, REGISTRY, set(STACKS), set(WORKLOADS))
    plan = make_plan(spec, STACKS)
    for trial in plan.trials:
        stack = STACKS[trial.stack]
        needs = WORKLOADS[trial.workload].needs
        if needs and needs not in stack.runs:
            raise SpecError(spec.path, "matrix.workload", trial.workload,
                            f"needs {needs}, which stack {trial.stack!r} does not run "
                            "(exclude the combination or pick another stack)")
        knobs = effective_knobs(REGISTRY, stack, trial)
        problem = connections_problem(trial.concurrency)
        if problem:
            raise SpecError(spec.path, "matrix.concurrency", trial.concurrency, problem)
        for name in stack.components:
            problem = COMPONENTS[name].check(knobs[name]) or limits_problem(knobs[name])
            if problem:
                raise SpecError(spec.path, f"trial {trial.label()}", trial.id, problem)
    return spec, plan


def run(env: Environment, spec_path: Path, db: Path | None, resume: bool,
        dry_run: bool) -> ExitStatus:
    spec, plan = load(spec_path)
    print_notes(plan.notes, env.stdout)     # knobs set where they cannot act in some trials
    if dry_run:
        print_plan(spec, plan, env.stdout)
        return ExitStatus.OK
    check_installed(plan)
    lab.check_root(env.lab_root)     # before the database holds an experiment
    if spec.experiment.keep_cpus_awake and not CpuAwake().available():
        print_notes([CPU_AWAKE_NOTE], env.stdout)
    db = env.database(db)
    store = Store.open(db)
    try:
        exp_id = run_experiment(spec, plan, REGISTRY, store, logs_dir(db), resume,
                                RichProgress(env.stdout))
        print_summary(load_view(store, exp_id), env.stdout)
    finally:
        store.close()
    return ExitStatus.OK


def logs_dir(db: Path) -> Path:
    """Where runs' server logs are kept: beside the database, one tree per database."""
    return db.parent / "runs" / db.stem


def check_installed(plan: Plan) -> None:
    """Every component the plan starts, and the engine, before any server starts."""
    for name in sorted({c for t in plan.trials for c in STACKS[t.stack].components}):
        comp = COMPONENTS[name]
        if not comp.installed():
            raise StacklabError(f"{name} is not installed ({comp.binary} missing): "
                                f"apt-get install {comp.package}")
    engine_path()
