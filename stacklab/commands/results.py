"""show, report, export, compare, recommend, export-config: what the results database
holds. These only read: the database is opened read-only (an archive on a read-only
mount can be read)."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

from ..analysis.analyze import ExperimentView, TrialSummary, load_view, same_definition_pairs
from ..env import Environment
from ..errors import ExitStatus, NotFound, NothingJudged, StacklabError, UsageError
from ..run.exportconfig import export_config as write_config
from ..methods.combine import Support, only_supported, support, why_lines
from ..analysis.gate import Judgement, judge_pairs, overall
from ..experiment.gate import Threshold, parse_threshold
from ..experiment.spec import read_margin
from ..analysis.recommend import best_combinations, effects
from ..report.baseline import Baseline, compare_to_baseline, table, warning
from ..report.export import export_csv, export_json
from ..report.fmt import p_value, ratio_ci, times
from ..report.openmetrics import export_openmetrics
from ..report.text import (brief_experiments, brief_show, brief_trials,
                           experiments_doc, experiments_table, gate_doc,
                           print_summary, recommendations_doc, recommendations_tables,
                           show_doc, trials_doc, trials_table)
from ..stacks import REGISTRY
from ..store import ExperimentRecord, HeldTrial, Outcome, Store, stored


def view_of(env: Environment, db: Path | None, experiment: str | None) -> ExperimentView:
    with stored(env.database(db)) as store:
        return load_view(store, experiment)


def show(env: Environment, experiment: str | None, db: Path | None,
         as_json: bool = False, brief: bool = False) -> ExitStatus:
    view = view_of(env, db, experiment)
    if as_json:
        env.stdout.print_json(data=show_doc(view))
    elif brief:
        env.stdout.print(brief_show(view))
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
    writable_file(output, "-o")
    from ..report.html import write_html     # jinja2, plotly: only when a report is drawn
    view = view_of(env, db, experiment)
    against = None if baseline is None else against_baseline(
        env, view, baseline, *((baseline_db, "--baseline-db") if baseline_db
                               else (env.database(db), "--db")))
    path = write_html(view, output, against)
    env.stdout.print(f"report: {path.resolve()}")
    return ExitStatus.OK


def writable_file(path: Path, flag: str) -> None:
    """UsageError naming `flag` and `path` when the file cannot go there: a missing
    directory is the user's to create (a typo must not become a new tree), as everywhere
    else; checked before anything is drawn."""
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a directory; name the file to write")
    if not path.parent.is_dir():
        raise UsageError(f"{flag} {path}: no directory {path.parent} to write it in "
                         f"(create it first, e.g. `mkdir -p {path.parent}`)")


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
            as_json: bool = False, brief: bool = False,
            margin: str | None = None) -> ExitStatus:
    """Two experiments (trial by trial, matched by definition) or two trials; with
    `fail_if`, the CI gate on B/A (gate.py). B's experiment is read from `db_b` when
    given; a warning names every host fact and component version the two experiments
    differ in. Trials are found in any experiment (the newest holding both) unless
    `experiment` names one. `margin` ("10%"): "same" within it, not the experiments'."""
    limits = fail_if_thresholds(fail_if, strict)
    judged = _margin_flag(margin)
    path = env.database(db)
    with stored(path) as store, (
            nullcontext(store) if db_b is None else stored(db_b, "--db-b")) as store_b:
        if experiment is None:
            same = db_b is None or db_b.resolve() == path.resolve()
            rows = experiment_pair(store, a, store_b, b, same, path)
            if rows is not None:
                va, vb = (judged(load_view(store, rows[0].id)),
                          judged(load_view(store_b, rows[1].id)))
                return compared_experiments(env, va, vb, limits, strict, as_json, brief)
            if db_b is not None:
                raise UsageError(f"--db-b {db_b}: compares two experiments, A {a!r} of --db "
                                 f"and B {b!r} of --db-b (names or ids), without "
                                 "--experiment; " + not_experiment(store, a, store_b, b))
            view = judged(load_view(store, trials_experiment(env, store, a, b, path)))
        else:
            view = judged(load_view(store, experiment))
    ta, tb = find_trial(view, a), find_trial(view, b)
    if ta.trial_id == tb.trial_id:
        raise UsageError(f"A {a!r} and B {b!r} are the same trial, {ta.trial_id} "
                         f"({ta.label}): a trial is never compared with itself")
    if as_json:
        return print_gated(env, trials_doc(view, ta, tb), [(ta, tb)], limits, strict)
    env.stdout.print(brief_trials(ta, tb) if brief else trials_table(view, ta, tb))
    return gate_status(env, [(ta, tb)], limits, strict)


def _margin_flag(margin: str | None) -> Callable[[ExperimentView], ExperimentView]:
    """The view with every trial judged within --margin (the view itself without it); a
    bad value is refused naming the flag, before anything is read."""
    if margin is None:
        return lambda view: view
    try:
        m = read_margin(margin)
    except ValueError as e:
        raise UsageError(f"--margin {margin}: {e}") from None
    return lambda view: replace(view, summaries=[replace(s, margin=m)
                                                 for s in view.summaries])


def compared_experiments(env: Environment, va: ExperimentView, vb: ExperimentView,
                         limits: Sequence[Threshold], strict: bool,
                         as_json: bool, brief: bool = False) -> ExitStatus:
    """Two experiments trial by trial; the gate judges the trials of the same definition,
    and refuses to pass when there are none."""
    warn(env, warning(va, vb))
    pairs = same_definition_pairs(va, vb)
    nothing = (f"no trial of A {va.name!r} (experiment {va.id}) has the definition of a "
               f"trial of B {vb.name!r} (experiment {vb.id}): a trial is its stack, "
               "workload, concurrency and knobs, so an edit of any of them in the spec "
               "makes another trial; compare two runs of the same spec")
    if as_json:
        return print_gated(env, experiments_doc(va, vb), pairs, limits, strict, nothing)
    env.stdout.print(brief_experiments(va, vb) if brief else experiments_table(va, vb))
    return gate_status(env, pairs, limits, strict, nothing)


def experiment_row(store: Store, name_or_id: str) -> ExperimentRecord | None:
    """The experiment `name_or_id` names (the newest of a name), or None."""
    try:
        return store.experiment(name_or_id)
    except NotFound:
        return None


def experiment_pair(store: Store, a: str, store_b: Store, b: str, same_store: bool,
                    path: Path) -> tuple[ExperimentRecord, ExperimentRecord] | None:
    """The experiments A and B name, or None when they do not both name one. The same
    name twice is the newest run of that name (B) against the one before it (A); an
    experiment is never compared with itself."""
    ra, rb = experiment_row(store, a), experiment_row(store_b, b)
    if ra is None or rb is None:
        return None
    if not same_store:
        return ra, rb
    if a == b and not a.isdigit():
        runs = store.named(a)
        if len(runs) < 2:
            raise UsageError(f"compare {a} {a}: compares the newest experiment named {a!r} "
                             f"with the one before it, and {path} holds only one (id "
                             f"{runs[0].id}); an experiment is never compared with "
                             "itself: run it again, or give two ids (`stacklab list`)")
        return runs[1], runs[0]
    if ra.id == rb.id:
        raise UsageError(f"A {a!r} and B {b!r} are both experiment {ra.id} "
                         f"({ra.name!r}): an experiment is never compared with itself; "
                         "`stacklab list` lists the others")
    return ra, rb


def not_experiment(store: Store, a: str, store_b: Store, b: str) -> str:
    """Which of A and B names no experiment, in words."""
    return "; ".join(f"{side} {arg!r} names no experiment there"
                     for side, arg, s in (("A", a, store), ("B", b, store_b))
                     if experiment_row(s, arg) is None)


def trials_experiment(env: Environment, store: Store, a: str, b: str, path: Path) -> int:
    """The experiment whose trials A and B are, found in the whole database: the newest
    that holds both (said on stderr when others do too). An argument that names neither
    an experiment nor a trial is NotFound; an ambiguous prefix names the trials it fits."""
    held = {side: store.holding(arg) if arg else [] for side, arg in (("A", a), ("B", b))}
    named = {side: experiment_row(store, arg) for side, arg in (("A", a), ("B", b))}
    for side, arg in (("A", a), ("B", b)):
        if not held[side] and named[side] is None:
            raise NotFound(f"{side} {arg!r}: " + (
                f"no experiment {arg} and no trial whose id starts with {arg!r}"
                if arg.isdigit() else
                f"no experiment named {arg!r} and no trial whose id starts with it")
                + f" in {path}; `stacklab list` lists the experiments, `stacklab show "
                "NAME` an experiment's trials in its id column")
    if not held["A"] or not held["B"]:
        what = {side: f"experiment {named[side].id} ({named[side].name!r})"
                if not held[side] else "a trial" for side in held}
        raise UsageError(f"A {a!r} is {what['A']} and B {b!r} is {what['B']}: compare "
                         "two experiments, or two trials")
    for side, arg in (("A", a), ("B", b)):
        ambiguous(side, arg, held[side])
    ea, eb = ({r.experiment_id: r for r in held[side]} for side in ("A", "B"))
    both = sorted(set(ea) & set(eb), reverse=True)
    if not both:
        raise UsageError(f"no experiment holds both trials: A {held['A'][0].trial_id} is "
                         f"in {_experiments(ea)}, B {held['B'][0].trial_id} in "
                         f"{_experiments(eb)}; `stacklab compare EXPERIMENT EXPERIMENT` "
                         "compares two experiments trial by trial")
    if len(both) > 1:
        warn(env, f"compare: the trials of experiment {both[0]} ({ea[both[0]].experiment!r}"
                  f"), the newest of the {len(both)} holding both; --experiment names "
                  "another")
    return both[0]


def ambiguous(side: str, arg: str, rows: Sequence[HeldTrial]) -> None:
    """UsageError when `arg` starts the ids of more than one trial, naming them (and an
    experiment each is in)."""
    first = {}
    for r in rows:
        first.setdefault(r.trial_id, r)
    if len(first) < 2:
        return
    fits = list(first.values())
    raise UsageError(f"{side} {arg!r}: more than one trial's id starts with it: "
                     + " and ".join(f"{r.trial_id} ({r.label}, experiment "
                                    f"{r.experiment_id} {r.experiment!r})"
                                    for r in fits[:3])
                     + ("" if len(fits) <= 3 else f" and {len(fits) - 3} more")
                     + "; give more of the id")


def _experiments(rows: dict[int, HeldTrial]) -> str:
    """"experiment 3 ('quick')" or "experiments 1, 3 ('quick')"."""
    names = sorted({r.experiment for r in rows.values()})
    ids = ", ".join(map(str, sorted(rows)))
    return (f"experiment{'s' if len(rows) > 1 else ''} {ids} "
            f"({', '.join(map(repr, names))})")


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


GATE_STATUS = {"pass": ExitStatus.OK, "fail": ExitStatus.GATE,
               "inconclusive": ExitStatus.INCONCLUSIVE}


def gate_status(env: Environment, pairs, limits: Sequence[Threshold], strict: bool,
                nothing: str = "") -> ExitStatus:
    """Each threshold's judgement, one line each, then the gate's outcome in words and
    its exit status (GATE_STATUS). No pair to judge is NothingJudged, saying `nothing`
    (why there may be none): a gate that judged nothing never passes."""
    if not limits:
        return ExitStatus.OK
    judged = judge_pairs(pairs, limits)
    if not judged:
        raise NothingJudged(f"gate: no pair of trials to judge, so nothing passed: {nothing}")
    for j in judged:
        env.stdout.print(j.line(), markup=False, highlight=False, soft_wrap=True)
    env.stdout.print(gate_result(judged, strict), markup=False, highlight=False,
                     soft_wrap=True)
    return gate_exit(judged, strict)


def gate_result(judged: Sequence[Judgement], strict: bool) -> str:
    """The gate's last line: its outcome and, unless it passed, what decided it and why
    ("p99>+10%: B vs A: 95% CI +2.0%..+25.0% reaches past +10.0%")."""
    outcome = overall(judged, strict)
    if outcome == "pass":
        return (f"gate result: pass: the interval of every judgement ({len(judged)}) lies "
                "wholly on the good side of its threshold")
    deciding = [j for j in judged if j.outcome == "fail" or (
        j.outcome == "inconclusive" and (strict or outcome == "inconclusive"))]
    said = "; ".join(f"{j.what()}: {j.why}" for j in deciding)
    status = int(GATE_STATUS[outcome])
    if outcome == "inconclusive":
        return (f"gate result: inconclusive (exit {status}): {len(deciding)} of "
                f"{len(judged)} judgements could not be decided, none failed (--strict "
                f"counts them as failed): {said}")
    counted = ("--strict: an inconclusive judgement counts as failed; "
               if strict and any(j.outcome == "inconclusive" for j in deciding) else "")
    return (f"gate result: FAIL (exit {status}): {counted}{len(deciding)} of {len(judged)} "
            f"judgements: {said}")


def print_gated(env: Environment, doc: dict, pairs, limits: Sequence[Threshold],
                strict: bool, nothing: str = "") -> ExitStatus:
    """`compare --json`: the comparison with the gate in it (null without --fail-if),
    exiting as without --json; with nothing to judge the document says so too."""
    judged = judge_pairs(pairs, limits)
    env.stdout.print_json(data={**doc, "gate": gate_doc(limits, strict, judged)})
    if limits and not judged:
        raise NothingJudged(f"gate: no pair of trials to judge, so nothing passed: {nothing}")
    return gate_exit(judged, strict) if limits else ExitStatus.OK


def gate_exit(judged: Sequence[Judgement], strict: bool) -> ExitStatus:
    """pass: OK; a threshold failed (or, strict, was inconclusive): GATE; else
    INCONCLUSIVE. Called only with judgements: nothing judged is NothingJudged."""
    return GATE_STATUS[overall(judged, strict)]


def find_trial(view: ExperimentView, prefix: str) -> TrialSummary:
    """The one trial of `view` whose id starts with `prefix`, or NotFound naming the
    trials it fits (or pointing at `show` when it fits none)."""
    found = [s for s in view.summaries if prefix and s.trial_id.startswith(prefix)]
    if len(found) > 1:
        raise UsageError(f"{prefix!r}: more than one trial of experiment {view.name!r} "
                         f"(id {view.id}) has an id starting with it: "
                         + " and ".join(f"{s.trial_id} ({s.label})" for s in found[:3])
                         + ("" if len(found) <= 3 else f" and {len(found) - 3} more")
                         + "; give more of the id")
    if not found:
        raise NotFound(f"{prefix!r}: no trial of experiment {view.name!r} (id {view.id}) "
                       f"has that id; `stacklab show {view.id}` lists them in its id column")
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
                  output: Path, unsupported: bool = False) -> ExitStatus:
    """The latest successful run's config files of one trial (of the newest experiment
    holding it, unless `experiment` names one), one path a line. Only settings the
    measurements support are written (methods.combine.support): a trial with others is
    exported as the measured trial that changes only the supported ones, or not at all
    (an error saying why) unless `unsupported`."""
    path = env.database(db)
    with stored(path) as store:
        if experiment is None:
            rows = store.holding(trial) if trial else []
            if not rows:
                raise NotFound(f"{trial!r}: no trial of {path} has an id starting with it; "
                               "`stacklab show NAME` lists an experiment's trials in its id "
                               "column")
            ambiguous("TRIAL", trial, rows)
            experiment = str(rows[0].experiment_id)
        view = load_view(store, experiment)
    asked = find_trial(view, trial)
    s = support(asked, view, REGISTRY)
    summary, left = asked, ()
    if s.unsupported and not unsupported:
        summary = only_supported(asked, view, REGISTRY, s) if s.supported else None
        if summary is None:
            raise StacklabError(unsupported_refusal(asked, s))
        left = s.unsupported
    runs = [r for r in view.runs if r.trial_id == summary.trial_id and r.outcome is Outcome.OK]
    if not runs:
        raise StacklabError(f"trial {summary.trial_id} has no successful run to export")
    fmt = lambda c: f"{times(c.ratio)} [{ratio_ci(c.ci)}] p {p_value(c.p)}"   # noqa: E731
    why = why_lines(summary, view, REGISTRY, fmt)
    if left:
        why += [f"left at its default: {key} = {value!r} of trial {asked.trial_id}: its effect "
                "is not supported by the measurements (no verdict for it alone, nor for "
                "the trial against the defaults)"
                for key, value in ((x.key, x.value) for x in s.settings if x.key in left)]
        env.stderr.print(f"exported trial {summary.trial_id}, the settings of "
                         f"{asked.trial_id} the measurements support; left at their "
                         f"defaults: {', '.join(left)}")
    elif s.unsupported:
        why += [f"NOT SUPPORTED (--unsupported): {key}: no verdict for it alone, nor for "
                "the trial against the defaults" for key in s.unsupported]
    for path in write_config(runs[-1], summary.label, output, why):
        env.stdout.print(str(path))
    return ExitStatus.OK


def unsupported_refusal(trial: TrialSummary, s: Support) -> str:
    """Why export-config writes nothing for `trial`: which of its settings no verdict
    supports, what the verdicts were, and what would."""
    def said(m) -> str:
        return ("not measured" if m is None else
                f"{m.decision.kind} ({times(m.comparison.ratio)} {m.metric})")
    alone = "; ".join(f"{x.key} = {x.value!r} alone: {said(x.comparison)}" for x in s.settings)
    return (f"export-config {trial.trial_id}: {len(s.unsupported)} of its {len(s.settings)} "
            f"changed settings have no verdict that supports them ({alone}; all together "
            f"against the defaults: {said(s.jointly)})"
            + (f", and no measured trial changes only the supported ones "
               f"({', '.join(s.supported)})" if s.supported else "")
            + ": nothing exported, since a configuration changed by settings no "
            "measurement chose would be deployed as if one had. Measure more rounds "
            "(repetitions) or the supported settings alone, or pass --unsupported to "
            "write it anyway, each such setting marked in its README.txt")
