"""show, report, export, compare, recommend, export-config: what the results database
holds. These only read: the database is opened read-only (an archive on a read-only
mount can be read)."""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator, Sequence

from ..analyze import ExperimentView, TrialSummary, load_view, same_definition_pairs
from ..env import Environment
from ..errors import ExitStatus, NotFound, StacklabError, UsageError
from ..exportconfig import export_config as write_config
from ..combine import why_lines
from ..gate import Judgement, Threshold, judge_pairs, parse_threshold
from ..recommend import best_combinations, effects
from ..report.baseline import Baseline, compare_to_baseline, table, warning
from ..report.export import export_csv, export_json
from ..report.fmt import p_value, ratio_ci, times
from ..report.openmetrics import export_openmetrics
from ..report.text import (experiment_list_table, experiments_doc, experiments_table, gate_doc,
                           print_summary, recommendations_doc, recommendations_tables,
                           show_doc, trials_doc, trials_table)
from ..stacks import REGISTRY
from ..store import Outcome, Store


@contextmanager
def stored(db: Path, flag: str = "--db") -> Iterator[Store]:
    """The results database, read-only; a missing one is said as such (never created),
    naming the `flag` that chose it."""
    if not db.exists():
        raise StacklabError(f"{flag} {db}: no results database there yet "
                            "(run an experiment first)")
    store = Store.open(db, readonly=True)
    try:
        yield store
    finally:
        store.close()


def view_of(env: Environment, db: Path | None, experiment: str | None) -> ExperimentView:
    with stored(env.database(db)) as store:
        return load_view(store, experiment)


def list_experiments(env: Environment, db: Path | None, as_json: bool) -> ExitStatus:
    """The experiments a results database holds: id, name, status, runs, when."""
    path = env.database(db)
    with stored(path) as store:
        rows = [{"id": r["id"], "name": r["name"], "status": r["status"],
                 "runs": r["n_runs"], "created_at": r["created_at"],
                 "spec": r["spec_path"]} for r in store.experiments()]
    if as_json:
        env.stdout.print_json(data={"database": str(path), "experiments": rows})
    else:
        env.stdout.print(experiment_list_table(rows, path))
    return ExitStatus.OK


def show(env: Environment, experiment: str | None, db: Path | None,
         as_json: bool = False) -> ExitStatus:
    view = view_of(env, db, experiment)
    if as_json:
        env.stdout.print_json(data=show_doc(view))
    else:
        print_summary(view, env.stdout)
    return ExitStatus.OK


def report(env: Environment, experiment: str | None, db: Path | None,
           output: Path, baseline: str | None = None,
           baseline_db: Path | None = None) -> ExitStatus:
    """The HTML report; with `baseline`, also against that experiment (of `baseline_db`,
    else of the same database), its rows printed here too."""
    if baseline_db is not None and baseline is None:
        raise UsageError(f"--baseline-db {baseline_db}: is where --baseline's experiment "
                         "is; give --baseline too")
    from ..report.html import write_html     # jinja2, plotly: only when a report is drawn
    view = view_of(env, db, experiment)
    against = None if baseline is None else against_baseline(
        env, view, baseline, *((baseline_db, "--baseline-db") if baseline_db
                               else (env.database(db), "--db")))
    path = write_html(view, output, against)
    env.stdout.print(f"report: {path.resolve()}")
    return ExitStatus.OK


def against_baseline(env: Environment, view: ExperimentView, name: str, db: Path,
                     flag: str) -> Baseline:
    """`view` against the experiment `name` of `db` (--baseline): its rows printed, and
    a warning on stderr when the two ran on different hosts, versions or settings."""
    with stored(db, flag) as store:
        try:
            base = load_view(store, name)
        except NotFound:
            raise NotFound(f"--baseline {name!r}: no experiment of that name or id in "
                           f"{db}; `stacklab list --db {db}` lists them") from None
    found = compare_to_baseline(view, base, same_definition_pairs(view, base), str(db))
    env.stdout.print(table(found, view))
    warn(env, found.warning)
    return found


def warn(env: Environment, line: str | None) -> None:
    if line:
        env.stderr.print(line, style="yellow", markup=False, highlight=False,
                         soft_wrap=True)


def export(env: Environment, experiment: str | None, db: Path | None, fmt: str,
           output: Path | None) -> ExitStatus:
    view = view_of(env, db, experiment)
    text = {"csv": export_csv, "json": export_json,
            "openmetrics": export_openmetrics}[fmt](view)
    if output:
        output.write_text(text)
    else:
        env.stdout.file.write(text)     # as is: no wrapping, no markup
    return ExitStatus.OK


def compare(env: Environment, a: str, b: str, db: Path | None,
            experiment: str | None, fail_if: Sequence[str] = (),
            strict: bool = False, db_b: Path | None = None,
            as_json: bool = False) -> ExitStatus:
    """Two experiments (trial by trial, matched by definition) or two trials of one;
    with `fail_if`, the CI gate on B/A (gate.py): ExitStatus.GATE when a threshold fails.
    B's experiment is read from `db_b` when given; a warning names every host fact and
    component version the two experiments differ in."""
    limits = fail_if_thresholds(fail_if, strict)
    with stored(env.database(db)) as store, (
            nullcontext(store) if db_b is None else stored(db_b, "--db-b")) as store_b:
        names = {str(r["id"]) for r in store.experiments()} | {
            r["name"] for r in store.experiments()}
        names_b = {str(r["id"]) for r in store_b.experiments()} | {
            r["name"] for r in store_b.experiments()}
        if a in names and b in names_b and experiment is None:
            va, vb = load_view(store, a), load_view(store_b, b)
            warn(env, warning(va, vb))
            if as_json:
                return print_gated(env, experiments_doc(va, vb),
                                   same_definition_pairs(va, vb), limits, strict)
            env.stdout.print(experiments_table(va, vb))
            return gate_status(env, same_definition_pairs(va, vb), limits, strict)
        if db_b is not None:
            raise UsageError(f"--db-b {db_b}: compares two experiments, A {a!r} of --db "
                             f"and B {b!r} of --db-b (names or ids), without --experiment")
        view = load_view(store, experiment)
    ta, tb = find_trial(view, a), find_trial(view, b)
    if as_json:
        return print_gated(env, trials_doc(view, ta, tb), [(ta, tb)], limits, strict)
    env.stdout.print(trials_table(view, ta, tb))
    return gate_status(env, [(ta, tb)], limits, strict)


def fail_if_thresholds(fail_if: Sequence[str], strict: bool) -> list[Threshold]:
    """--fail-if values, each checked before the database is opened."""
    limits = []
    for text in fail_if:
        try:
            limits.append(parse_threshold(text))
        except ValueError as e:
            raise UsageError(f"--fail-if {text!r}: {e}") from None
    if strict and not limits:
        raise UsageError("--strict: judges --fail-if thresholds; give at least one")
    return limits


def gate_status(env: Environment, pairs, limits: Sequence[Threshold],
                strict: bool) -> ExitStatus:
    """Each threshold's judgement, one line each; GATE when one failed."""
    if not limits:
        return ExitStatus.OK
    judged = judge_pairs(pairs, limits, strict)
    for j in judged:
        env.stdout.print(j.line(), markup=False, highlight=False, soft_wrap=True)
    if not judged:
        env.stdout.print("gate: no pair of trials to judge", markup=False)
    return gate_exit(judged)


def print_gated(env: Environment, doc: dict, pairs, limits: Sequence[Threshold],
                strict: bool) -> ExitStatus:
    """`compare --json`: the comparison with the gate in it (null without --fail-if);
    GATE when a threshold failed, as without --json."""
    judged = judge_pairs(pairs, limits, strict)
    env.stdout.print_json(data={**doc, "gate": gate_doc(limits, strict, judged)})
    return gate_exit(judged)


def gate_exit(judged: Sequence[Judgement]) -> ExitStatus:
    return ExitStatus.GATE if any(j.failed for j in judged) else ExitStatus.OK


def find_trial(view: ExperimentView, prefix: str) -> TrialSummary:
    """The one trial whose id starts with `prefix`, or NotFound pointing at `show`."""
    found = [s for s in view.summaries if prefix and s.trial_id.startswith(prefix)]
    if len(found) != 1:
        raise NotFound(f"{prefix!r}: {'no' if not found else 'more than one'} trial of "
                       f"experiment {view.name!r} (id {view.id}) has that id; "
                       f"`stacklab show {view.id}` lists them in its id column")
    return found[0]


def recommend(env: Environment, experiment: str | None, db: Path | None,
              as_json: bool = False) -> ExitStatus:
    view = view_of(env, db, experiment)
    found = effects(view, REGISTRY)
    bests = best_combinations(view, REGISTRY, found)
    if as_json:
        env.stdout.print_json(data=recommendations_doc(view, found, bests))
        return ExitStatus.OK
    for table in recommendations_tables(view, found, bests):
        env.stdout.print(table)
    return ExitStatus.OK


def export_config(env: Environment, trial: str, db: Path | None, experiment: str | None,
                  output: Path) -> ExitStatus:
    """The latest successful run's config files of one trial, one path a line."""
    view = view_of(env, db, experiment)
    summary = find_trial(view, trial)
    runs = [r for r in view.runs if r.trial_id == summary.trial_id and r.outcome is Outcome.OK]
    if not runs:
        raise StacklabError(f"trial {summary.trial_id} has no successful run to export")
    why = why_lines(summary, view, REGISTRY, lambda c: f"{times(c.ratio)} [{ratio_ci(c.ci)}]"
                    f" p {p_value(c.p)}")
    for path in write_config(runs[-1], summary.label, output, why):
        env.stdout.print(str(path))
    return ExitStatus.OK
