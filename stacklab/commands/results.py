"""show, report, export, compare, recommend, export-config: what the results database
holds. These only read: the database is opened read-only (an archive on a read-only
mount can be read)."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from ..analyze import ExperimentView, TrialSummary, load_view
from ..env import Environment
from ..errors import ExitStatus, NotFound, StacklabError, UsageError
from ..exportconfig import export_config as write_config
from ..gate import Threshold, judge_pairs, parse_threshold
from ..recommend import best_combinations, effects
from ..report.export import export_csv, export_json
from ..report.text import (experiment_list_table, experiments_table, print_summary,
                           recommendations_tables, trials_table)
from ..stacks import REGISTRY
from ..store import Outcome, Store


@contextmanager
def stored(db: Path) -> Iterator[Store]:
    """The results database, read-only; a missing one is said as such (never created)."""
    if not db.exists():
        raise StacklabError(f"--db {db}: no results database there yet "
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


def show(env: Environment, experiment: str | None, db: Path | None) -> ExitStatus:
    print_summary(view_of(env, db, experiment), env.stdout)
    return ExitStatus.OK


def report(env: Environment, experiment: str | None, db: Path | None,
           output: Path) -> ExitStatus:
    from ..report.html import write_html     # matplotlib: only when a report is drawn
    path = write_html(view_of(env, db, experiment), output)
    env.stdout.print(f"report: {path.resolve()}")
    return ExitStatus.OK


def export(env: Environment, experiment: str | None, db: Path | None, fmt: str,
           output: Path | None) -> ExitStatus:
    view = view_of(env, db, experiment)
    text = export_csv(view) if fmt == "csv" else export_json(view)
    if output:
        output.write_text(text)
    else:
        env.stdout.file.write(text)     # as is: no wrapping, no markup
    return ExitStatus.OK


def compare(env: Environment, a: str, b: str, db: Path | None,
            experiment: str | None, fail_if: Sequence[str] = (),
            strict: bool = False) -> ExitStatus:
    """Two experiments (trial by trial, matched by definition) or two trials of one;
    with `fail_if`, the CI gate on B/A (gate.py): ExitStatus.GATE when a threshold fails."""
    limits = fail_if_thresholds(fail_if, strict)
    with stored(env.database(db)) as store:
        names = {str(r["id"]) for r in store.experiments()} | {
            r["name"] for r in store.experiments()}
        if a in names and b in names and experiment is None:
            va, vb = load_view(store, a), load_view(store, b)
            env.stdout.print(experiments_table(va, vb))
            return gate_status(env, same_definition_pairs(va, vb), limits, strict)
        view = load_view(store, experiment)
    ta, tb = find_trial(view, a), find_trial(view, b)
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


def same_definition_pairs(a: ExperimentView, b: ExperimentView
                          ) -> list[tuple[TrialSummary, TrialSummary]]:
    """Trials of A and B with the same definition (as experiments_table pairs them)."""
    def key(s: TrialSummary) -> tuple:
        return s.stack, s.workload, s.concurrency, tuple(sorted(s.knobs.items()))
    by_key = {key(s): s for s in b.summaries}
    return [(s, by_key[key(s)]) for s in a.summaries if key(s) in by_key]


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
    return ExitStatus.GATE if any(j.failed for j in judged) else ExitStatus.OK


def find_trial(view: ExperimentView, prefix: str) -> TrialSummary:
    """The one trial whose id starts with `prefix`, or NotFound pointing at `show`."""
    found = [s for s in view.summaries if prefix and s.trial_id.startswith(prefix)]
    if len(found) != 1:
        raise NotFound(f"{prefix!r}: {'no' if not found else 'more than one'} trial of "
                       f"experiment {view.name!r} (id {view.id}) has that id; "
                       f"`stacklab show {view.id}` lists them in its id column")
    return found[0]


def recommend(env: Environment, experiment: str | None, db: Path | None) -> ExitStatus:
    view = view_of(env, db, experiment)
    found = effects(view, REGISTRY)
    for table in recommendations_tables(view, found, best_combinations(view, REGISTRY, found)):
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
    for path in write_config(runs[-1], summary.label, output):
        env.stdout.print(str(path))
    return ExitStatus.OK
