"""run: validate the whole plan, then measure it run by run (runner.py), storing each."""

from __future__ import annotations

import shlex
import sqlite3
from pathlib import Path
from typing import Any, Callable

from ..agents.rules import AgentsListen, check_bindable, check_listen
from ..host import lab
from ..analysis.analyze import ExperimentView, load_view
from ..analysis.overhead import stored_overhead
from ..env import Environment
from ..errors import ExitStatus, StacklabError
from ..analysis.gate import baseline_pairs, matches
from ..experiment.plan import Plan, PlannedRun, RunOverhead, make_plan
from ..run.quiet import QUIET_MAX_S
from ..run.validate import SpecOrigin, check_installed, validate_plan
from ..report.listings import print_notes, print_plan
from ..report.progress import RichProgress
from ..report.text import print_summary
from ..run.runner import Progress, agents_asked, check_agent_hosts, run_experiment
from ..experiment.spec import ExperimentSpec, load_spec
from ..stacks import REGISTRY, STACKS
from ..stacks.external.preflight import check_targets, verify_targets
from ..store import RunRecord, Store
from ..host.systune import CpuAwake
from ..workloads import WORKLOADS
from ..workloads.accesslog import read_log
from .results import gate_status

CPU_AWAKE_NOTE = ("cannot hold /dev/cpu_dma_latency (needs root): idle CPUs may sleep "
                  "between requests, which slows low-concurrency runs; recorded with each run")


def load(spec_path: Path) -> tuple[ExperimentSpec, Plan]:
    """The spec and its whole plan, validated (validate.validate_plan: every trial's knob
    combination), before anything starts: what run, run --dry-run and dbbench begin with."""
    return planned(load_spec(spec_path, REGISTRY, STACKS, set(WORKLOADS)))


def planned(spec: ExperimentSpec) -> tuple[ExperimentSpec, Plan]:
    plan = make_plan(spec, STACKS)
    validate_plan(plan, SpecOrigin(spec))
    return spec, plan


def replay_notes(spec: ExperimentSpec) -> list[str]:
    """What the replayed log holds besides what is replayed (unreadable lines, other
    methods and statuses), said before anything runs: never dropped silently."""
    log = spec.fixed_knobs.get("load.replay")
    return [f"load.replay {log}: {read_log(Path(log)).report.said()}"] if log else []


def run(env: Environment, spec_path: Path, db: Path | None, resume: bool,
        dry_run: bool, wait_quiet: bool = False, allow_remote: bool = False,
        agents_listen: str | None = None, agents_wait: float = 120.0) -> ExitStatus:
    spec, plan = load(spec_path)
    agents = None
    if agents_listen is not None:
        agents = AgentsListen(check_listen(agents_listen, allow_remote), agents_wait)
    view = measured(env, spec, plan, db, resume, dry_run, wait_quiet, allow_remote,
                    resume_command(spec_path, db), agents=agents)
    return ExitStatus.OK if view is None else gate(env, spec, view)


def measured(env: Environment, spec: ExperimentSpec, plan: Plan, db: Path | None,
             resume: bool, dry_run: bool, wait_quiet: bool, allow_remote: bool,
             again: str, watch: Callable[[PlannedRun, RunRecord], None] | None = None,
             agents: AgentsListen | None = None) -> ExperimentView | None:
    """A validated plan measured and stored, its summary printed (None on a dry run, which
    prints the plan): what `run` and `capacity` share. `again`: the command that resumes
    it, as an interrupted run's error says it. `watch`: handed each run once it is
    stored (tune's pruner); what it raises stops the experiment, as an interrupt does.
    `agents`: the user's --agents-listen (load.agents on other hosts)."""
    check_targets(spec, allow_remote)    # a remote server only with the user's flag
    check_agent_hosts(agents_asked(REGISTRY, plan.runs), agents)
    if agents is not None:
        check_bindable(agents.address)   # the scheduler can listen there, said before a run
    print_notes(plan.notes, env.stdout)     # knobs set where they cannot act in some trials
    print_notes(replay_notes(spec), env.stdout)
    if dry_run:
        print_plan(spec, plan, env.stdout, plan.estimate(
            spec, overhead_here(env, db), QUIET_MAX_S if wait_quiet else 0.0))
        return None
    check_installed(plan.components(STACKS), engine=True)
    verify_targets(spec)     # a server stacklab did not start answers each path, or FAIL
    lab.check_root(env.lab_root)     # before the database holds an experiment
    if spec.experiment.keep_cpus_awake and not CpuAwake().available():
        print_notes([CPU_AWAKE_NOTE], env.stdout)
    db = env.database(db)
    store = Store.open(db)
    try:
        exp_id = run_experiment(env, spec, plan, REGISTRY, store, logs_dir(db), resume,
                                Watched(RichProgress(env.stdout), watch),
                                wait_quiet_s=QUIET_MAX_S if wait_quiet else 0.0,
                                resume_command=again, allow_remote=allow_remote,
                                agents_listen=agents)
        view = load_view(store, exp_id)
        print_summary(view, env.stdout)
    finally:
        store.close()
    return view


def overhead_here(env: Environment, db: Path | None) -> RunOverhead:
    """What a run costs on this host beside its load, from the database's stored runs;
    the lab's guess where there are none (or the database cannot be read: a dry run
    estimates, it does not fail on that)."""
    path = env.database(db)
    if not path.is_file():
        return RunOverhead()
    try:
        store = Store.open(path, readonly=True)
    except (StacklabError, sqlite3.Error):
        return RunOverhead()
    try:
        return stored_overhead(store)
    except (StacklabError, sqlite3.Error):
        return RunOverhead()
    finally:
        store.close()


class Watched:
    """A progress that also hands each stored run to `watch` (None: nothing more)."""

    def __init__(self, progress: Progress,
                 watch: Callable[[PlannedRun, RunRecord], None] | None):
        self.progress, self.watch = progress, watch

    def __getattr__(self, name: str) -> Any:
        return getattr(self.progress, name)

    def run_finished(self, run: PlannedRun, record: RunRecord) -> None:
        self.progress.run_finished(run, record)
        if self.watch is not None:
            self.watch(run, record)


def resume_command(spec_path: Path, db: Path | None) -> str:
    """The command that completes an interrupted run, as the user can paste it: with the
    --db they gave (without one, the same default database is found again)."""
    return shlex.join(["stacklab", "run", str(spec_path),
                       *(["--db", str(db)] if db is not None else []), "--resume"])


def gate(env: Environment, spec: ExperimentSpec, view: ExperimentView) -> ExitStatus:
    """[thresholds], once every run is stored: each trial against its baseline trial;
    the gate's exit status (results.gate_status: GATE, INCONCLUSIVE, or an error when the
    baseline selector leaves no pair to judge; nothing is lost: the results are stored)."""
    g = spec.thresholds
    if g is None:
        return ExitStatus.OK
    selector = ", ".join(f"{k} = {v!r}" for k, v in g.baseline)
    bases = sum(matches(s, g.baseline) for s in view.summaries)
    nothing = (f"in experiment {view.name!r} (id {view.id}), [thresholds] baseline "
               f"{{{selector}}} matches "
               + ("no trial" if not bases else
                  "every trial" if bases == len(view.summaries) else
                  f"{bases} trials, and no other trial has the workload, concurrency "
                  "and knobs of one of them"))
    return gate_status(env, baseline_pairs(view.summaries, g.baseline), g.limits, g.strict,
                       nothing)


def logs_dir(db: Path) -> Path:
    """Where runs' server logs are kept: beside the database, one tree per database."""
    return db.parent / "runs" / db.stem
