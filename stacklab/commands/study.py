"""study: one of the five studies re-measured. Its findings (studies/findings) and its
plan (studies/plans) are loaded and every step validated before anything starts; each
step is an experiment, run (or resumed) and stored like `run`; then each finding is
set against today's measurement and written as a study report (text and HTML)."""

from __future__ import annotations

from pathlib import Path

from .. import lab
from ..analyze import ExperimentView, load_view
from ..env import Environment
from ..errors import ExitStatus, Interrupted, NotFound, SpecError, StacklabError, UsageError
from ..report.progress import RichProgress
from ..runner import plan_hash, run_experiment
from ..stacks import REGISTRY, STACKS
from ..store import Store
from ..studies.findings import STUDY_IDS, load_study, missing_figures, seeds_text
from ..studies.memory import memory_rows
from ..studies.plans import PlannedStep, StudyPlan, load_plan, prepare
from ..studies.report import StudyReport, print_study, write_study_html
from ..studies.verdict import rows
from ..validate import check_installed
from ..workloads import WORKLOADS
from .results import stored
from .run import logs_dir


def study(env: Environment, name: str, quick: bool, db: Path | None, output: Path | None,
          dry_run: bool, report_only: bool) -> ExitStatus:
    sid = name.upper()
    if sid not in STUDY_IDS:
        raise UsageError(f"study {name!r}: expected one of {', '.join(STUDY_IDS)}")
    findings = load_study(sid)
    plan = load_plan(sid)
    covered(findings, plan)
    steps = prepare(plan, quick, REGISTRY, STACKS, set(WORKLOADS))
    if dry_run:
        print_steps(env, steps)
        return ExitStatus.OK
    db = env.database(db)
    failed: dict[str, str] = {}
    if not report_only:
        failed = run_steps(env, steps, db)
    report = evaluate(env, findings, plan, steps, db, quick, failed)
    print_study(report, env.stdout)
    path = output or db.parent / f"study-{sid.lower()}{'-quick' if quick else ''}.html"
    env.stdout.print(f"study report: {write_study_html(report, path).resolve()}",
                     markup=False, highlight=False)
    return ExitStatus.ERROR if failed else ExitStatus.OK


def covered(findings, plan: StudyPlan) -> None:
    """Each check answers a finding of the study that is expressible, and every
    expressible finding has a check: the plan and the findings agree before anything
    runs."""
    by_id = {f.id: f for f in findings.findings}
    checks = plan.checks()
    for fid in [*checks, *plan.unmeasured]:
        if fid not in by_id:
            raise SpecError(plan.file, "check.finding", fid,
                            f"no such finding in {findings.id} (findings/{findings.id.lower()}.toml)")
        if by_id[fid].not_expressible is not None:
            raise SpecError(plan.file, "check.finding", fid, "the finding is marked not "
                            "expressible; measure it or drop its not_expressible")
    for f in findings.findings:
        if f.not_expressible is None and f.id not in checks and f.id not in plan.unmeasured:
            raise SpecError(plan.file, "check.finding", f.id, "an expressible finding "
                            "without a check: plan it or give its reason not to")


def print_steps(env: Environment, steps: list[PlannedStep]) -> None:
    total = 0.0
    for ps in steps:
        est = ps.plan.estimated_s(ps.spec)
        total += est
        env.stdout.print(f"{ps.spec.experiment.name}: {len(ps.plan.trials)} trials, "
                         f"{len(ps.plan.runs)} runs, ~{est / 60:.1f} min — "
                         f"{', '.join(c.finding for c in ps.step.checks)}"
                         + (f"\n  scaling: {ps.step.scaling}" if ps.step.scaling else ""),
                         markup=False, highlight=False)
    env.stdout.print(f"{len(steps)} experiments, ~{total / 60:.0f} min (at the planned "
                     "repetitions; auto repetitions may add rounds)", markup=False)


def run_steps(env: Environment, steps: list[PlannedStep], db: Path) -> dict[str, str]:
    """Each step's experiment, resumed when one of its name was planned the same way;
    a step that fails is reported and the study goes on (Ctrl-C stops it: run the
    study again to resume)."""
    components = sorted({c for ps in steps for c in ps.plan.components(STACKS)})
    check_installed(components, engine=True)
    lab.check_root(env.lab_root)
    failed = {}
    store = Store.open(db)
    try:
        for i, ps in enumerate(steps, 1):
            name = ps.spec.experiment.name
            env.stdout.print(f"[{i}/{len(steps)}] {name}: {len(ps.plan.runs)} runs",
                             markup=False, highlight=False)
            try:
                run_experiment(env, ps.spec, ps.plan, REGISTRY, store, logs_dir(db),
                               same_plan_stored(store, ps), RichProgress(env.stdout))
            except Interrupted:
                raise
            except StacklabError as e:
                failed[name] = str(e)
                env.stderr.print(f"stacklab: {name}: {e}", markup=False, highlight=False)
    finally:
        store.close()
    return failed


def same_plan_stored(store: Store, ps: PlannedStep) -> bool:
    """Whether the newest experiment of this name was planned exactly so: resume it."""
    try:
        row = store.experiment(ps.spec.experiment.name)
    except NotFound:
        return False
    return row["spec_hash"] == plan_hash(ps.plan)


def evaluate(env: Environment, findings, plan: StudyPlan, steps: list[PlannedStep],
             db: Path, quick: bool, failed: dict[str, str]) -> StudyReport:
    names = {ps.step.name: ps.spec.experiment.name for ps in steps}
    views: dict[str, ExperimentView | str] = {}
    with stored(db) as store:
        for step, name in names.items():
            try:
                views[step] = load_view(store, name)
            except NotFound:
                views[step] = failed.get(name, f"experiment {name} not run yet")
    measured = [v for v in views.values() if not isinstance(v, str)]
    now: dict[str, str] = {}
    for v in measured:
        now.update(v.versions)
    experiments = [(names[s], v if isinstance(v, str) else
                    f"{v.status}, {len(v.runs)} runs (id {v.id})") for s, v in views.items()]
    memory = [m for ps in steps if ps.step.memory and not isinstance(views[ps.step.name], str)
              for m in memory_rows(views[ps.step.name])]
    return StudyReport(findings, quick,
                       rows(findings.findings, plan.checks(), views.__getitem__, REGISTRY,
                            plan.unmeasured),
                       now, measured[-1].host if measured else {}, experiments,
                       missing_figures(findings, seeds_text()), memory)
