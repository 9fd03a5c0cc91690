"""study: one of the five studies re-measured. Its findings (studies/findings) and its
plan (studies/plans) are loaded and every step validated before anything starts; each
step is an experiment, run (or resumed) and stored like `run`; then each finding is
set against today's measurement and written as a study report (text and HTML, and the
study JSON beside the HTML: each finding's verdict in the one vocabulary)."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from ..host import lab
from ..analysis.analyze import ExperimentView, load_view
from ..env import Environment
from ..errors import ExitStatus, Interrupted, NotFound, SpecError, StacklabError, UsageError
from ..methods.breakdown import group_series, run_breakdowns
from ..report.measures import StepProgress
from ..report.progress import RichProgress
from ..run.quiet import QUIET_MAX_S
from ..run.runner import plan_hash, run_experiment
from ..stacks import REGISTRY, STACKS
from ..store import Store, stored
from ..studies.findings import STUDY_IDS, load_study, missing_figures, seeds_text
from ..studies.memory import memory_rows
from ..studies.plans import (PlannedBreakdown, PlannedStep, StudyPlan, load_plan, prepare,
                              prepare_breakdowns)
from ..studies.report import (StudyReport, all_document, print_all, print_study,
                              study_document, write_all_html, write_study_html)
from ..studies.verdict import rows
from ..run.validate import check_installed
from ..workloads import WORKLOADS
from .run import logs_dir

# a breakdown's time per fresh stack (start, verify, stop) and per engine request at one
# connection: what --dry-run's estimate uses (measured: 26 s for 3 × 2 stacks of
# apache+mod_php+mariadb app-show at 100 requests, about 4.3 s a stack)
BREAKDOWN_STACK_S = 4.0
BREAKDOWN_REQUEST_S = 0.005


def study(env: Environment, name: str, quick: bool, db: Path | None, output: Path | None,
          dry_run: bool, report_only: bool, wait_quiet: bool = False,
          as_json: bool = False) -> ExitStatus:
    """`as_json`: stdout carries the study JSON alone (what measuring says goes to stderr).
    `name` "all": the five in one go, with one report over them (study_all)."""
    sid = name.upper()
    if sid == "ALL":
        return study_all(env, quick, db, output, dry_run, report_only, wait_quiet, as_json)
    if sid not in STUDY_IDS:
        raise UsageError(f"study {name!r}: expected one of {', '.join(STUDY_IDS)} or all")
    one = Planned.of(sid, quick)
    if dry_run:
        print_steps(env, one.steps, one.breakdowns)
        return ExitStatus.OK
    path = report_path(output, sid.lower(), quick)
    if not report_only:
        ready(env, one.steps)
    failed = ({} if report_only else
              one.measure(env, db, wait_quiet, study_command(sid, quick, db), as_json))
    report = one.report(env, env.database(db), failed)
    document, html, stored_at = write_report(report, path)
    if as_json:
        env.stdout.print_json(data=document)
    else:
        print_study(report, env.stdout)
        env.stdout.print(f"study report: {html.resolve()} (data: {stored_at.resolve()})",
                         markup=False, highlight=False)
    return ExitStatus.ERROR if failed else ExitStatus.OK


@dataclass(frozen=True)
class Planned:
    """One study loaded and validated whole: its findings, plan, steps and breakdowns."""

    id: str
    quick: bool
    findings: object                    # findings.Study
    plan: StudyPlan
    steps: list[PlannedStep]
    breakdowns: list[PlannedBreakdown]

    @classmethod
    def of(cls, sid: str, quick: bool) -> "Planned":
        findings, plan = load_study(sid), load_plan(sid)
        covered(findings, plan)
        return cls(sid, quick, findings, plan, prepare(plan, quick, REGISTRY, STACKS,
                                                       set(WORKLOADS)),
                   prepare_breakdowns(plan, quick))

    def measure(self, env: Environment, db: Path | None, wait_quiet: bool, again: str,
                as_json: bool) -> dict[str, str]:
        """Every step run or resumed; the steps that failed, with why."""
        return run_steps(replace(env, stdout=env.stderr) if as_json else env, self.steps,
                         self.breakdowns, env.database(db),
                         QUIET_MAX_S if wait_quiet else 0.0, again)

    def report(self, env: Environment, db: Path, failed: dict[str, str]) -> StudyReport:
        return evaluate(env, self.findings, self.plan, self.steps, self.breakdowns, db,
                        self.quick, failed)


def report_path(output: Path | None, stem: str, quick: bool) -> Path:
    """The report's HTML: -o, else study-<stem>[-quick].html in the current directory,
    where the user looks (the database is in a per-user one)."""
    path = output or Path(f"study-{stem}{'-quick' if quick else ''}.html")
    if not path.parent.is_dir():
        raise UsageError(f"-o {path}: no directory {path.parent} (create it first)")
    return path


def write_report(report: StudyReport, path: Path) -> tuple[dict, Path, Path]:
    """The study's HTML at `path` and its JSON beside it: (document, html, json)."""
    document = study_document(report)
    html = write_study_html(report, path)
    return document, html, write_json(document, path)


def write_json(document: dict, path: Path) -> Path:
    stored_at = path.with_suffix(".json" if path.suffix != ".json" else ".data.json")
    stored_at.write_text(json.dumps(document, indent=1, ensure_ascii=False, allow_nan=False)
                         + "\n")
    return stored_at


def study_all(env: Environment, quick: bool, db: Path | None, output: Path | None,
              dry_run: bool, report_only: bool, wait_quiet: bool,
              as_json: bool) -> ExitStatus:
    """The five studies in one go: all validated before anything starts, each measured in
    turn (an interrupted one resumes where it stopped: run the same command again), each
    study's own report written beside one report over all five."""
    planned = [Planned.of(sid, quick) for sid in STUDY_IDS]
    if dry_run:
        total = 0.0
        for one in planned:
            env.stdout.print(f"{one.id}:", markup=False, highlight=False)
            total += print_steps(env, one.steps, one.breakdowns)
        env.stdout.print(f"all five: ~{total / 60:.0f} min", markup=False)
        return ExitStatus.OK
    path = report_path(output, "all", quick)
    again = study_command("all", quick, db)
    failed: dict[str, str] = {}
    if not report_only:
        # every study's servers checked before the first is measured: a component
        # missing for S5 is said before S1-S4 have run
        ready(env, [ps for one in planned for ps in one.steps])
        for one in planned:
            env.stderr.print(f"study {one.id}", markup=False, highlight=False)
            failed.update(one.measure(env, db, wait_quiet, again, as_json))
    reports = []
    for one in planned:
        report = one.report(env, env.database(db), failed)
        write_report(report, path.with_name(f"study-{one.id.lower()}"
                                            f"{'-quick' if quick else ''}.html"))
        reports.append(report)
    document = all_document(reports)
    html = write_all_html(reports, path)
    stored_at = write_json(document, path)
    if as_json:
        env.stdout.print_json(data=document)
    else:
        print_all(reports, env.stdout)
        env.stdout.print(f"report over the five: {html.resolve()} (data: "
                         f"{stored_at.resolve()}; each study's beside it)",
                         markup=False, highlight=False)
    return ExitStatus.ERROR if failed else ExitStatus.OK


def study_command(sid: str, quick: bool, db: Path | None) -> str:
    """What resumes an interrupted study, as the user can paste it: the study again (its
    steps are resumed by themselves), with the --db they gave; a step's own spec is
    not a file they have."""
    return shlex.join(["stacklab", "study", sid.lower(), *(["--quick"] if quick else []),
                       *(["--db", str(db)] if db is not None else [])])


def covered(findings, plan: StudyPlan) -> None:
    """Each check answers a finding of the study that is expressible, and every
    expressible finding has a check: the plan and the findings agree before anything
    runs."""
    by_id = {f.id: f for f in findings.findings}
    answered = plan.answered()
    for fid in [*answered, *plan.unmeasured]:
        if fid not in by_id:
            raise SpecError(plan.file, "check.finding", fid,
                            f"no such finding in {findings.id} (findings/{findings.id.lower()}.toml)")
        if by_id[fid].not_expressible is not None:
            raise SpecError(plan.file, "check.finding", fid, "the finding is marked not "
                            "expressible; measure it or drop its not_expressible")
    for f in findings.findings:
        if f.not_expressible is None and f.id not in answered and f.id not in plan.unmeasured:
            raise SpecError(plan.file, "check.finding", f.id, "an expressible finding "
                            "without a check: plan it or give its reason not to")


def print_steps(env: Environment, steps: list[PlannedStep],
                breakdowns: list[PlannedBreakdown]) -> float:
    """Each step's experiment or breakdown with its estimate; returns the total (s)."""
    estimates = [ps.plan.estimate(ps.spec) for ps in steps]
    lines = [(f"{ps.spec.experiment.name}: {len(ps.plan.trials)} trials, "
              f"{len(ps.plan.runs)} runs", est.typical_s,
              ", ".join(c.finding for c in ps.step.checks), ps.step.scaling)
             for ps, est in zip(steps, estimates)]
    lines += [(f"{breakdown_name(pb)}: {pb.plan.repetitions} fresh stack(s) × "
               f"{len(pb.plan.passes())} network(s)", breakdown_estimate_s(pb),
               pb.step.finding, pb.step.scaling) for pb in breakdowns]
    for head, est, findings, scaling in lines:
        env.stdout.print(f"{head}, ~{est / 60:.1f} min — {findings}"
                         + (f"\n  scaling: {scaling}" if scaling else ""),
                         markup=False, highlight=False)
    total = sum(est for _, est, _, _ in lines)
    again = sum(est.most_s - est.typical_s for est in estimates)
    env.stdout.print(f"{len(steps)} experiments, {len(breakdowns)} breakdowns, "
                     f"~{total / 60:.0f} min typically, up to ~{(total + again) / 60:.0f} min "
                     "if a busy host has runs measured again (at the planned repetitions; "
                     "auto repetitions may add rounds)", markup=False)
    return total


def breakdown_name(pb: PlannedBreakdown) -> str:
    return f"breakdown {pb.plan.stack} {pb.plan.workload} ({pb.plan.network})"


def breakdown_estimate_s(pb: PlannedBreakdown) -> float:
    """A stack's start, verification and stop, and one connection's requests at a few
    milliseconds each, per repetition and network."""
    per_stack = BREAKDOWN_STACK_S + pb.plan.requests * 2 * BREAKDOWN_REQUEST_S
    return pb.plan.repetitions * len(pb.plan.passes()) * per_stack


def run_steps(env: Environment, steps: list[PlannedStep],
              breakdowns: list[PlannedBreakdown], db: Path,
              wait_quiet_s: float = 0.0, again: str | None = None) -> dict[str, str]:
    """Each step's experiment, resumed when one of its name was planned the same way,
    then each breakdown's series unless one planned the same is stored whole; a step
    that fails is reported and the study goes on (Ctrl-C stops it: run the study again
    to resume: `again` is the command that does, as an interrupted step says it). The
    caller has checked the components first (ready)."""
    failed: dict[str, str] = {}
    store = Store.open(db)
    try:
        for i, ps in enumerate(steps, 1):
            name = ps.spec.experiment.name
            env.stdout.print(f"[{i}/{len(steps)}] {name}: {len(ps.plan.runs)} runs",
                             markup=False, highlight=False)
            attempt(env, name, failed, lambda: run_experiment(
                env, ps.spec, ps.plan, REGISTRY, store, logs_dir(db),
                same_plan_stored(store, ps), RichProgress(env.stdout), anew_if_changed=True,
                wait_quiet_s=wait_quiet_s, resume_command=again))
        for i, pb in enumerate(breakdowns, 1):
            name = breakdown_name(pb)
            whole = stored_series(store, pb) is not None
            env.stdout.print(f"[breakdown {i}/{len(breakdowns)}] {name}: " + (
                "stored" if whole else f"{pb.plan.repetitions} fresh stack(s)"),
                markup=False, highlight=False)
            if not whole:
                attempt(env, name, failed, lambda: run_series(env, pb, store))
    finally:
        store.close()
    return failed


def ready(env: Environment, steps: list[PlannedStep]) -> None:
    """Every component the steps start is installed, the engine is built and the lab
    root is usable: refused in one line before anything is measured."""
    check_installed(sorted({c for ps in steps for c in ps.plan.components(STACKS)}),
                    engine=True)
    lab.check_root(env.lab_root)


def attempt(env: Environment, name: str, failed: dict[str, str],
            measure: Callable[[], object]) -> None:
    """One step measured; a failure is reported and recorded in `failed`, and the study
    goes on. Ctrl-C is not a failure: it stops the study."""
    try:
        measure()
    except Interrupted:
        raise
    except StacklabError as e:
        failed[name] = str(e)
        env.stderr.print(f"stacklab: {name}: {e}", markup=False, highlight=False)


def run_series(env: Environment, pb: PlannedBreakdown, store: Store) -> None:
    with StepProgress(env.stdout, pb.plan.repetitions * len(pb.plan.passes())) as progress:
        run_breakdowns(pb.plan, env, store, progress.step)


def stored_series(store: Store, pb: PlannedBreakdown) -> list | None:
    """The newest whole series stored for this breakdown's plan (stack, workload, no
    knobs, network, requests and repetitions alike), or None."""
    plan = pb.plan
    for records in reversed(group_series(store.breakdowns()).values()):
        first = records[0]
        network = (first.result.get("network") or {"mode": "loopback"})["mode"]
        if ((first.stack, first.workload, first.knobs, network, first.result["requests"],
             first.result.get("repetitions", 1), len(records))
                == (plan.stack, plan.workload, plan.knobs, plan.network, plan.requests,
                    plan.repetitions, plan.repetitions)):
            return records
    return None


def same_plan_stored(store: Store, ps: PlannedStep) -> bool:
    """Whether the newest experiment of this name was planned exactly so: resume it."""
    try:
        stored_hash = store.experiment(ps.spec.experiment.name).spec_hash
    except NotFound:
        return False
    return stored_hash == plan_hash(ps.plan)


def evaluate(env: Environment, findings, plan: StudyPlan, steps: list[PlannedStep],
             breakdowns: list[PlannedBreakdown], db: Path, quick: bool,
             failed: dict[str, str]) -> StudyReport:
    names = {ps.step.name: ps.spec.experiment.name for ps in steps}
    views: dict[str, ExperimentView | str] = {}
    with stored(db) as store:
        for step, name in names.items():
            try:
                views[step] = load_view(store, name)
            except NotFound:
                views[step] = failed.get(name, f"experiment {name} not run yet")
        series = {}
        for pb in breakdowns:
            name = breakdown_name(pb)
            found = stored_series(store, pb)
            series[pb.step.finding] = (pb.step, found if found is not None else
                                       failed.get(name, f"{name} not run yet"))
    measured = [v for v in views.values() if not isinstance(v, str)]
    now: dict[str, str] = {}
    host: dict = {}
    for _, got in series.values():
        if not isinstance(got, str):
            now.update(got[0].versions)
            host = got[0].host
    for v in measured:
        now.update(v.versions)
    experiments = [(names[s], v if isinstance(v, str) else
                    f"{v.status}, {len(v.runs)} runs (id {v.id})") for s, v in views.items()]
    experiments += [(f"breakdown {step.stack} {step.workload} ({step.network})",
                     got if isinstance(got, str) else
                     f"series {got[0].id}, {len(got)} fresh stacks")
                    for step, got in series.values()]
    memory = [m for ps in steps if ps.step.memory and not isinstance(views[ps.step.name], str)
              for m in memory_rows(views[ps.step.name])]
    return StudyReport(findings, quick,
                       rows(findings.findings, plan.checks(), views.__getitem__, REGISTRY,
                            plan.unmeasured, series),
                       now, measured[-1].host if measured else host, experiments,
                       missing_figures(findings, seeds_text()), memory)
