"""What each CLI command does, as plain functions (the CLI only parses and maps errors)."""

from __future__ import annotations

import shutil
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)
from rich.table import Table

from . import lab
from .analyze import load_view
from .drive import engine_path, engine_version
from .errors import NotFound, SpecError, StacklabError
from .plan import Plan, PlannedRun, effective_knobs, make_plan
from .report.export import export_csv, export_json
from .report.html import write_html
from .report.text import print_summary
from .procs import connections_problem, limits_problem
from .systune import CpuAwake
from .runner import run_experiment
from .spec import ExperimentSpec, load_spec
from .stacks import COMPONENTS, GROUPS, REGISTRY, STACKS
from .store import RunRecord, Store
from .workloads import WORKLOADS

DEFAULT_COMPONENTS = ("nginx", "apache")
OPTIONAL_TOOLS = (("wrk", "wrk"), ("ab", "apache2-utils"))


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


def run(spec_path: Path, db: Path, resume: bool, dry_run: bool, out: Console) -> None:
    spec, plan = load(spec_path)
    for note in plan.notes:     # knobs set where they cannot act in some trials
        out.print(f"[yellow]note:[/yellow] {escape(note)}", soft_wrap=True)
    if dry_run:
        print_plan(spec, plan, out)
        return
    _check_installed(plan)
    lab.check_root(lab.default_root())     # before the database holds an experiment
    if spec.experiment.keep_cpus_awake and not CpuAwake().available():
        out.print("[yellow]note:[/yellow] cannot hold /dev/cpu_dma_latency (needs root): idle "
                  "CPUs may sleep between requests, which slows low-concurrency runs; "
                  "recorded with each run")
    store = Store.open(db)
    try:
        exp_id = run_experiment(spec, plan, REGISTRY, store, logs_dir(db), resume,
                                RichProgress(out))
        print_summary(load_view(store, exp_id), out)
    finally:
        store.close()


def logs_dir(db: Path) -> Path:
    """Where runs' server logs are kept: beside the database, one tree per database."""
    return db.parent / "runs" / db.stem


def _check_installed(plan: Plan) -> None:
    """Validate the whole plan before starting any server."""
    for name in sorted({c for t in plan.trials for c in STACKS[t.stack].components}):
        comp = COMPONENTS[name]
        if not comp.installed():
            raise StacklabError(f"{name} is not installed ({comp.binary} missing): "
                                f"apt-get install {comp.package}")
    engine_path()


def print_plan(spec: ExperimentSpec, plan: Plan, out: Console) -> None:
    table = Table(title=f"plan: {spec.experiment.name}")
    for col in ("trial", "stack", "workload", "c", "knobs"):
        table.add_column(col)
    for t in plan.trials:
        table.add_row(t.id, t.stack, t.workload, str(t.concurrency),
                      " ".join(f"{k}={v}" for k, v in t.knobs) or "defaults")
    out.print(table)
    minutes, seconds = divmod(int(plan.estimated_s(spec)), 60)
    e = spec.experiment
    out.print(f"{len(plan.trials)} trials × {e.first_repetitions} repetitions = "
              f"{len(plan.runs)} runs, estimated {minutes} min {seconds} s")
    if e.auto:
        out.print(f"repetitions = auto: more rounds until each trial's req/s CI half-width is "
                  f"under {e.ci_target:.0%}, at most {e.max_repetitions} repetitions "
                  f"({plan.max_runs(spec)} runs)")


def show(experiment: str | None, db: Path, out: Console) -> None:
    with _store(db) as store:
        print_summary(load_view(store, experiment), out)


def report(experiment: str | None, db: Path, output: Path) -> Path:
    with _store(db) as store:
        return write_html(load_view(store, experiment), output)


def export(experiment: str | None, db: Path, fmt: str) -> str:
    with _store(db) as store:
        view = load_view(store, experiment)
    return export_csv(view) if fmt == "csv" else export_json(view)


class _store:
    def __init__(self, db: Path):
        if not db.exists():
            raise StacklabError(f"--db {db}: no results database there yet "
                                "(run an experiment first)")
        self.store = Store.open(db, readonly=True)     # these commands only read

    def __enter__(self) -> Store:
        return self.store

    def __exit__(self, *_):
        self.store.close()


def doctor(out: Console) -> bool:
    table = Table(title="stacklab doctor")
    for col in ("component", "status", "version", "install with"):
        table.add_column(col)
    ok = True
    for name, comp in COMPONENTS.items():
        try:
            version, status = comp.version(), "[green]found[/green]"
        except StacklabError:
            version, status = "", "[red]missing[/red]"
            ok = ok and name not in DEFAULT_COMPONENTS
        table.add_row(name, status, version, "" if version else f"apt-get install {comp.package}")
    try:
        table.add_row("stacklab-load", "[green]found[/green]", engine_version(), "")
    except (StacklabError, OSError):
        ok = False
        table.add_row("stacklab-load", "[red]missing[/red]", "",
                      "cargo build --release --manifest-path engine/Cargo.toml")
    for tool, package in OPTIONAL_TOOLS:
        found = shutil.which(tool)
        table.add_row(f"{tool} (optional, cross-checks)",
                      "[green]found[/green]" if found else "[yellow]missing[/yellow]", "",
                      "" if found else f"apt-get install {package}")
    out.print(table)
    out.print("the default experiment can run" if ok else
              "[red]the default experiment cannot run: install what is missing[/red]")
    return ok


def list_stacks(out: Console) -> None:
    stacks = Table(title="stacks")
    stacks.add_column("stack")
    stacks.add_column("components (front first)")
    stacks.add_column("description")
    for s in STACKS.values():
        stacks.add_row(s.name, " → ".join(s.components), s.description)
    out.print(stacks)
    knobs = Table(title="knobs")
    widest = max(len(k) for k in REGISTRY.knobs)
    knobs.add_column("knob", no_wrap=True, min_width=widest)    # never cut a knob's name
    for col in ("type", "default", "allowed", "meaning", "from"):
        knobs.add_column(col)
    for name in ["load", *GROUPS, *COMPONENTS]:
        version = ""
        if name in GROUPS:
            knobs.add_section()
            knobs.add_row(f"[bold]{name}[/bold] (shared settings)", "", "", "", "", "")
        if name in COMPONENTS:
            try:
                version = COMPONENTS[name].version()
            except StacklabError:
                version = "not installed"
            knobs.add_section()
            knobs.add_row(f"[bold]{name}[/bold] {version}", "", "", "", "", "")
        for k in REGISTRY.for_component(name):
            allowed = ", ".join(map(str, k.choices)) if k.choices else (
                f"{k.min:g}..{k.max:g}" if k.min is not None and k.max is not None else "")
            knobs.add_row(k.key, k.type.__name__, str(k.default), allowed, k.meaning, k.source)
    out.print(knobs)


class RichProgress:
    """Runner progress on a Rich bar: current trial, runs done / total, ETA."""

    def __init__(self, out: Console):
        self.out = out
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                            MofNCompleteColumn(), TimeElapsedColumn(),
                            TextColumn("ETA"), TimeRemainingColumn(), console=out)
        self.task = None

    def begin(self, total: int, done: int) -> None:
        self.bar.start()
        self.task = self.bar.add_task("starting", total=total, completed=done)
        if done:
            self.out.print(f"resuming: {done} of {total} runs already stored")

    def note(self, text: str) -> None:
        self.out.print(f"note: {text}", markup=False, highlight=False, soft_wrap=True)

    def extend(self, more: int) -> None:
        task = self.bar.tasks[0]
        self.bar.update(self.task, total=(task.total or 0) + more)

    def run_started(self, run: PlannedRun) -> None:
        self.bar.update(self.task, description=f"{run.trial.label()} #{run.repetition}")

    def run_finished(self, run: PlannedRun, record: RunRecord) -> None:
        if record.outcome != "ok":
            self.out.print(f"[red]{record.outcome}[/red] {run.trial.label()} "
                           f"#{run.repetition}: {record.reason}")
        elif record.reason:      # a note on a measured run (logs not kept, …)
            self.out.print(f"note: {run.trial.label()} #{run.repetition}: {record.reason}",
                           markup=False, highlight=False)
        self.bar.advance(self.task)

    def end(self) -> None:
        self.bar.stop()


def compare_cmd(a: str, b: str, db: Path, experiment: str | None, out: Console) -> None:
    """Two experiments (trial by trial, matched by definition) or two trials of one."""
    from .report.text import comparison_table, experiments_table
    with _store(db) as store:
        names = {str(r["id"]) for r in store.experiments()} | {
            r["name"] for r in store.experiments()}
        if a in names and b in names and experiment is None:
            out.print(experiments_table(load_view(store, a), load_view(store, b)))
            return
        view = load_view(store, experiment)
        ta, tb = _trial(view, a), _trial(view, b)
    out.print(comparison_table(ta, tb, f"trials of experiment {view.name} (id {view.id}):\n"
                                       f"B = {tb.trial_id} {tb.label}\n"
                                       f"A = {ta.trial_id} {ta.label}"))


def _trial(view, prefix: str):
    found = [s for s in view.summaries if prefix and s.trial_id.startswith(prefix)]
    if len(found) != 1:
        raise NotFound(f"{prefix!r}: {'no' if not found else 'more than one'} trial of "
                            f"experiment {view.name!r} (id {view.id}) has that id; "
                            f"`stacklab show {view.id}` lists them in its id column")
    return found[0]


def recommend_cmd(experiment: str | None, db: Path, out: Console) -> None:
    from .recommend import best_combinations, effects
    from .report.text import recommendations_tables
    with _store(db) as store:
        view = load_view(store, experiment)
    found = effects(view, REGISTRY)
    for table in recommendations_tables(view, found, best_combinations(view, REGISTRY, found)):
        out.print(table)


def export_config_cmd(trial: str, db: Path, experiment: str | None, output: Path) -> list[Path]:
    from .exportconfig import export_config
    with _store(db) as store:
        view = load_view(store, experiment)
    summary = _trial(view, trial)
    runs = [r for r in view.runs if r.trial_id == summary.trial_id and r.outcome == "ok"]
    if not runs:
        raise StacklabError(f"trial {summary.trial_id} has no successful run to export")
    return export_config(runs[-1], summary.label, output)


def breakdown_cmd(stack: str, workload: str, requests: int, knobs: list[str], db: Path,
                  out: Console) -> int:
    """S1's overview method: where one request's time goes; stored, then printed."""
    from .breakdown import breakdown_tables, plan_breakdown, run_breakdown, summary_line
    from .runner import now
    plan = plan_breakdown(stack, workload, knobs, requests)
    store = Store.open(db)
    try:
        record = run_breakdown(plan, now())
        breakdown_id = store.add_breakdown(record)
    finally:
        store.close()
    title = f"breakdown {breakdown_id}: {stack} {workload}" + "".join(
        f" {k}={v}" for k, v in sorted(plan.knobs.items()))
    for table in breakdown_tables(record.result, title):
        out.print(table)
    for url in record.result["urls"]:
        for m in url["measurements"]:
            out.print(f"{url['path']} keep-alive {'on' if m['keepalive'] else 'off'}: "
                      f"{summary_line(m)}", highlight=False, soft_wrap=True)
    return breakdown_id


def dbbench_cmd(spec_path: Path, loops: int, db: Path, out: Console) -> None:
    """S1's database method: the model application's SQL under each mariadb setting."""
    from .dbbench import dbbench_table, plan_variants, run_dbbench
    from .runner import now
    spec, plan = load(spec_path)
    variants = plan_variants(spec, plan)
    out.print(f"dbbench {spec.experiment.name}: {len(variants)} variant(s) × {loops} loops")
    store = Store.open(db)
    try:
        records = run_dbbench(spec, variants, loops, store, now, lambda r: out.print(
            f"stored dbbench {r.id}: {r.result['variant']}", highlight=False))
    finally:
        store.close()
    out.print(dbbench_table(records, f"dbbench: {spec.experiment.name}"))


def list_workloads(out: Console) -> None:
    table = Table(title="workloads")
    for col in ("workload", "needs", "URLs", "description"):
        table.add_column(col)
    for w in WORKLOADS.values():
        table.add_row(w.name, w.needs or "any server", str(len(w.urls)), w.description)
    out.print(table)
