"""tune: a joint search of a stack's settings ([tune]) with Optuna, each trial one
experiment of the one run lifecycle, then the best measured again against the defaults.

- The search space is the knob registry's (experiment/tunespace.py); Optuna's TPE
  (multivariate, grouped over the conditional knobs) asks, stacklab measures, Optuna is
  told. Its study lives beside the results database (`tune/<name>.optuna.db`), so
  `--resume` continues a search: a trial an interrupt cut short is asked again with
  the same values.
- Each trial is an experiment `<name>.tune-<n>`: the spec's point with the trial's
  values as fixed knobs, the experiment's repetitions, stored like any run (nothing
  lost). A trial whose runs all failed is a failed trial (Optuna samples elsewhere).
- The objective is the trial's median req/s (rps), its server CPU per request at the
  spec's load.rate (cpu), or its median capacity under the spec's [capacity] goal
  (capacity: each of its runs a capacity search, run/capacity.py). With a memory budget, the stack's peak PSS over the trial's
  runs is a constraint (over budget: infeasible, never the best).
- Then `<name>.tune-final`: the best and the defaults interleaved, final_repetitions
  runs each on fresh stacks: the best against the defaults with its interval and
  verdict.
"""

from __future__ import annotations

import copy
import itertools
import json
import shlex
import warnings
from pathlib import Path
from typing import Any, Callable

from ..analysis.analyze import (ExperimentView, MetricComparison, TrialSummary,
                                compare_trials, disturbed, summarize)
from ..analysis.memplan import WorkerLimit, worker_limit
from ..analysis.tunebudget import Held, Prediction, pool_of, predict
from ..analysis.stats import compare
from ..env import Environment
from ..errors import ExitStatus, StacklabError, UsageError
from ..experiment.sizes import parse_mib
from ..experiment.spec import TUNE, ExperimentSpec, load_doc, parse_file_doc
from ..experiment.plan import PlannedRun
from ..experiment.tunespace import dimensions, suggest
from ..report.tunelines import final_lines, history_line, space_lines, tally_line
from ..stacks import REGISTRY, STACKS
from ..store import Outcome, RunRecord
from ..workloads import WORKLOADS
from .run import logs_dir, measured, planned


def tune(env: Environment, spec_path: Path, db: Path | None, resume: bool, dry_run: bool,
         wait_quiet: bool = False, allow_remote: bool = False) -> ExitStatus:
    doc = load_doc(spec_path)
    spec = parse_file_doc(doc, spec_path, REGISTRY, STACKS, set(WORKLOADS))
    if spec.tune is None:
        raise UsageError(f"{spec_path}: no [tune] section: name the knobs to search, e.g. "
                         '[tune.knobs] "nginx.worker_processes" = { min = 1, max = 4 }')
    t = spec.tune
    dims = dimensions(REGISTRY, t.knobs)
    components = STACKS[spec.axes["stack"][0]].components
    for d in dims:
        if d.key.split(".", 1)[0] not in components:
            raise UsageError(f"{spec_path}: tune.knobs.{d.key}: not a knob of stack "
                             f"{spec.axes['stack'][0]} (its components: "
                             f"{', '.join(components)}): the search tunes the stack")
    for line in space_lines(spec, dims):
        env.stdout.print(line, markup=False)
    planned(trial_spec(doc, spec_path, {}, "defaults"))   # the point itself is valid
    if dry_run:
        return ExitStatus.OK
    import optuna      # its import costs a second: only when a search runs
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    db = env.database(db)
    study = open_study(optuna, db, spec, resume)
    fixed = defaults(spec)
    budget = parse_mib(t.memory) if t.memory else None
    again = shlex.join(["stacklab", "tune", str(spec_path), "--db", str(db), "--resume"])
    limit = worker_limit(components, fixed)     # a str: no worker limit to predict by
    while counted(optuna, study) < t.trials:
        trial = study.ask()
        values = suggest(trial, dims, fixed)
        name = f"tune-{trial.number}"
        trial.set_user_attr("experiment", f"{spec.experiment.name}.{name}")
        trial.set_user_attr("values", values)
        knobs = {**fixed, **values}
        if budget and (guess := predicted(limit, knobs, values, study)) \
                and guess.peak_mib > budget:
            # the known constraint: never started; told as pruned and infeasible, with
            # no value, so TPE learns where the budget ends and no figure is made up
            trial.set_user_attr("predicted", guess.said(budget))
            trial.set_constraint("memory", guess.peak_mib - budget)
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            env.stdout.print(f"trial {trial.number}: not started: {guess.said(budget)}",
                             markup=False)
            if (n := tally(optuna, study)[0].get("predicted", 0)) >= 2 * t.trials:
                env.stdout.print(f"search stopped: {n} trials predicted over the budget "
                                 f"of {budget} MiB, twice the trials asked for; widen "
                                 "tune.memory or narrow the worker limit's range",
                                 markup=False)
                break
            continue
        try:
            point = planned(trial_spec(doc, spec_path, values, name))
        except StacklabError as e:       # a combination the plan refuses: not measured
            trial.set_user_attr("refused", str(e))
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            env.stdout.print(f"trial {trial.number}: refused, not measured: {e}",
                             markup=False)
            continue
        watch = (pruning(trial, t.objective, spec.experiment.repetitions)
                 if t.prune else None)
        try:
            view = measured(env, *point, db, False, False, wait_quiet, allow_remote, again,
                            watch)
        except Pruned as e:
            trial.set_user_attr("pruned", str(e))
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            env.stdout.print(f"trial {trial.number}: pruned, {e}; its runs are stored "
                             f"({spec.experiment.name}.{name})", markup=False)
            continue
        value, peak = objective(view, t.objective)
        over = (None if budget and peak is None else
                peak - budget if budget else 0.0)
        trial.set_user_attr("peak_pss_mib", peak)
        trial.set_user_attr("over_budget_mib", over)
        if isinstance(limit, WorkerLimit) and peak is not None:
            trial.set_user_attr("held", held(view, limit, knobs, values, peak))
        if value is None:
            trial.set_user_attr("failed", "no run of it was measured")
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            # TPE learns where the infeasible trials are; unread PSS counts as over
            trial.set_constraint("memory", 1.0 if over is None else over)
            study.tell(trial, value)
        env.stdout.print(history_line(trial.number, values, fixed, value, peak, budget),
                         markup=False)
    env.stdout.print(tally_line(*tally(optuna, study), budget), markup=False)
    best = best_trial(study)
    if best is None:
        raise StacklabError(f"tune {spec.experiment.name}: no trial measured within the "
                            "memory budget; every trial is stored")
    differ = {k: v for k, v in best.user_attrs["values"].items() if fixed.get(k) != v}
    if not differ:
        env.stdout.print(f"best: trial {best.number}: the defaults themselves; nothing to "
                         "measure against them", markup=False)
        return ExitStatus.OK
    base, tuned = final(env, doc, spec_path, differ, fixed, t.final_repetitions, db,
                        wait_quiet, allow_remote, again)
    rows = {m.metric: m for m in compare_trials(base, tuned)}
    if t.objective == "cpu":
        rows[SERVER_CPU] = server_cpu(base, tuned)
    for line in final_lines(best.number, best.user_attrs["values"], fixed, rows,
                            t.objective, importances(optuna, study), tuned.trial_id):
        env.stdout.print(line, markup=False)
    return ExitStatus.OK


SERVER_CPU = "server CPU µs/req"


class Pruned(Exception):
    """A trial the pruner stopped after a run; what it says: when and why."""


def pruning(trial: Any, kind: str, repetitions: int
            ) -> Callable[[PlannedRun, RunRecord], None]:
    """What a trial's experiment hands each stored run: its objective reported to Optuna
    (the repetition as the step, so the Wilcoxon pruner pairs it with the best trial's run
    of that repetition), and Pruned raised when the pruner finds the trial worse than the
    best while runs remain. A run the host disturbed is not reported (it is measured
    again)."""
    def watch(run: PlannedRun, record: RunRecord) -> None:
        if disturbed(record):
            return
        value = figure(summarize(run.trial.definition(), "", run.trial.id, [record]), kind)
        if value is None:
            return
        trial.report(value, run.repetition)
        if run.repetition < repetitions and trial.should_prune():
            raise Pruned(f"after {run.repetition} of {repetitions} runs: worse than the "
                         "best trial's runs of the same repetitions (Wilcoxon, one-sided)")
    return watch


def held(view: ExperimentView, limit: WorkerLimit, knobs: dict[str, Any],
         values: dict[str, Any], peak: float) -> dict[str, Any]:
    """What a measured trial's stack held, as the memory prediction reads it (Held)."""
    ok = [r for r in view.runs if r.outcome is Outcome.OK]
    procs = [int(p) for r in ok
             if (p := r.resources.figure(limit.component, "processes_max")) is not None]
    return {"limit_value": int(knobs[limit.knob]),
            "processes": max(1, max(procs, default=2) - 1),     # less the master
            "peak_mib": peak, "pool": [list(p) for p in pool_of(limit, values)]}


def predicted(limit: WorkerLimit | str, knobs: dict[str, Any], values: dict[str, Any],
              study: Any) -> Prediction | None:
    """The trial's stack's peak predicted from the trials measured so far
    (analysis/tunebudget.py), or None (no worker limit; nothing measured yet)."""
    if not isinstance(limit, WorkerLimit):
        return None
    seen = [Held(h["limit_value"], h["processes"], h["peak_mib"],
                 tuple(tuple(p) for p in h["pool"]))
            for ft in study.get_trials(deepcopy=False)
            if (h := ft.user_attrs.get("held"))]
    return predict(limit, int(knobs[limit.knob]), pool_of(limit, values), seen)


def importances(optuna: Any, study: Any) -> dict[str, float]:
    """Each searched knob's importance over the complete trials, by Optuna's default
    evaluator (PED-ANOVA since 5.0: how much the best trials' values of the knob differ
    from all trials'; fANOVA would need scikit-learn), over the knobs every trial had;
    {} with too few trials to tell."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        try:
            found = optuna.importance.get_param_importances(study)
        except (RuntimeError, ValueError):
            return {}
    too_few = any("too small to compute importances" in str(w.message) for w in said)
    return {} if too_few else found


def tally(optuna: Any, study: Any) -> tuple[dict[str, int], list[float]]:
    """The trials by how they ended, and the measured ones' peak PSS (MiB)."""
    states = optuna.trial.TrialState
    counts: dict[str, int] = {}
    peaks = []
    for ft in study.get_trials(deepcopy=False):
        kind = ("measured" if ft.state == states.COMPLETE else
                next((k for k in ENDED if k in ft.user_attrs),
                     "pruned" if ft.state == states.PRUNED else None))
        if kind:
            counts[kind] = counts.get(kind, 0) + 1
        if ft.state == states.COMPLETE and ft.user_attrs.get("peak_pss_mib") is not None:
            peaks.append(ft.user_attrs["peak_pss_mib"])
    return counts, peaks


# How a failed trial ended, by its user attribute (an interrupted one has none of them)
ENDED = ("predicted", "refused", "failed")


def counted(optuna: Any, study: Any) -> int:
    """Trials that count against `trials`: measured, pruned, failed, or refused by the
    plan; not one predicted over the memory budget (nothing was started: the search is
    stopped at twice `trials` of them), nor one an interrupt cut short (it is asked
    again on --resume)."""
    states = optuna.trial.TrialState
    return sum(1 for ft in study.get_trials(deepcopy=False)
               if "predicted" not in ft.user_attrs
               and (ft.state in (states.COMPLETE, states.PRUNED) or ft.state == states.FAIL
                    and any(k in ft.user_attrs for k in ENDED)))


def searched_space(spec: ExperimentSpec) -> str:
    """What a search is of, as a resume compares it: the knobs and how, the objective,
    the budget, the point and its fixed knobs (not the number of trials)."""
    t = spec.tune
    return json.dumps({"knobs": t.knobs, "objective": t.objective, "memory": t.memory,
                       "point": {k: list(v) for k, v in spec.axes.items()},
                       "fixed": spec.fixed_knobs, "measure": spec.measure},
                      sort_keys=True, default=str)


def open_study(optuna: Any, db: Path, spec: ExperimentSpec, resume: bool) -> Any:
    """The search's study, beside the database; a new one refuses an existing search of
    the name (--resume continues it, when it is of the same space). A trial an interrupt
    left running is failed and asked again with the same values. The sampler's seed moves
    on with the trials stored, so a resume does not draw the first trials again."""
    name = spec.experiment.name
    path = logs_dir(db).parent / "tune" / f"{name}.optuna.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    storage = optuna.storages.RDBStorage(f"sqlite:///{path}")
    exists = name in {s.study_name for s in optuna.get_all_study_summaries(storage)}
    if exists and not resume:
        raise UsageError(f"tune {name}: a search of this name is stored ({path}); "
                         "--resume continues it, or rename [experiment] name")
    if resume and not exists:
        raise UsageError(f"--resume: no stored search named {name!r} ({path})")
    stored = optuna.load_study(study_name=name, storage=storage) if exists else None
    if stored is not None and stored.user_attrs.get("space") != searched_space(spec):
        raise UsageError(f"--resume: the stored search {name!r} was of another space "
                         "([tune], the matrix point, [knobs] or [load] changed); rename "
                         "[experiment] name to start anew")
    done = len(stored.get_trials(deepcopy=False)) if stored is not None else 0
    with warnings.catch_warnings():     # group: "experimental" since Optuna 2.8
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.TPESampler(
            seed=spec.tune.seed + done, multivariate=True, group=True,
            n_startup_trials=max(2, min(10, spec.tune.trials // 3)))
        pruner = (optuna.pruners.WilcoxonPruner(p_threshold=spec.tune.prune)
                  if spec.tune.prune else optuna.pruners.NopPruner())   # "experimental"
    direction = "minimize" if spec.tune.objective == "cpu" else "maximize"
    study = optuna.create_study(study_name=name, storage=storage, sampler=sampler,
                                pruner=pruner, direction=direction, load_if_exists=True)
    study.set_user_attr("space", searched_space(spec))
    for ft in study.get_trials(deepcopy=False,
                               states=(optuna.trial.TrialState.RUNNING,)):
        study.tell(ft.number, state=optuna.trial.TrialState.FAIL)
        study.enqueue_trial(ft.params, skip_if_exists=False)
    return study


def best_trial(study: Any) -> Any:
    """The best complete trial within the budget, or None."""
    import optuna
    done = [ft for ft in study.get_trials(deepcopy=False,
                                          states=(optuna.trial.TrialState.COMPLETE,))
            if (over := ft.user_attrs.get("over_budget_mib", 0.0)) is not None and over <= 0]
    if not done:
        return None
    pick = max if study.direction == optuna.study.StudyDirection.MAXIMIZE else min
    return pick(done, key=lambda ft: ft.value)


def defaults(spec: ExperimentSpec) -> dict[str, Any]:
    """Every knob of the stack's components at its default, then the spec's own: what a
    conditional knob's condition reads where the search does not set it."""
    stack = STACKS[spec.axes["stack"][0]]
    out = {f"{c}.{k}": v for c in stack.components for k, v in REGISTRY.defaults(c).items()}
    axes = {k: v[0] for k, v in spec.axes.items() if "." in k}     # one-value knob axes
    return {**out, **spec.fixed_knobs, **axes}


def trial_spec(doc: dict, spec_path: Path, values: dict[str, Any], suffix: str
               ) -> ExperimentSpec:
    """The spec's point with `values` (knob key -> value) as fixed knobs, named
    `<name>.<suffix>`, without [tune]."""
    doc = copy.deepcopy(doc)
    doc.pop(TUNE, None)
    experiment = doc.setdefault("experiment", {})
    experiment["name"] = f"{experiment.get('name', '')}.{suffix}"
    knobs = doc.setdefault("knobs", {})
    for key, value in values.items():
        component, name = key.split(".", 1)
        if component == "load":
            doc.setdefault("load", {})[name] = value
        else:
            knobs.setdefault(component, {})[name] = value
    return parse_file_doc(doc, spec_path, REGISTRY, STACKS, set(WORKLOADS))


def objective(view: ExperimentView, kind: str) -> tuple[float | None, float | None]:
    """The trial's objective (None when no run measured) and its stack's peak PSS in MiB
    over its runs (each run's components summed; None when unread)."""
    s: TrialSummary = view.summaries[0]
    read = [[v for c in r.resources.components
             if (v := r.resources.figure(c, "pss_mib_peak")) is not None]
            for r in view.runs if r.outcome is Outcome.OK]
    peaks = [sum(values) for values in read if values]
    peak = max(peaks) if peaks else None
    return figure(s, kind), peak


def figure(s: TrialSummary, kind: str) -> float | None:
    """A trial's (or one run's) figure the objective `kind` optimises."""
    return {"rps": s.rps.median, "cpu": s.server_cpu_us,
            "capacity": s.capacity.median}[kind]


def final(env: Environment, doc: dict, spec_path: Path, differ: dict[str, Any],
          fixed: dict[str, Any], repetitions: int, db: Path, wait_quiet: bool,
          allow_remote: bool, again: str) -> tuple[TrialSummary, TrialSummary]:
    """The defaults and the best measured side by side, interleaved in one experiment
    `<name>.tune-final` (`repetitions` fresh stacks each): a matrix of the knobs in which
    they differ, each at its default and its best value, every other combination
    excluded. (defaults, best)."""
    doc = copy.deepcopy(doc)
    doc.setdefault("experiment", {})["repetitions"] = repetitions
    matrix = doc.setdefault("matrix", {})
    keys = sorted(differ)
    for key in keys:
        component, name = key.split(".", 1)
        matrix.setdefault(component, {})[name] = [fixed.get(key), differ[key]]
    matrix["exclude"] = [_nested(dict(zip(keys, combo)))
                         for combo in itertools.product(*([fixed.get(k), differ[k]]
                                                          for k in keys))
                         if list(combo) not in ([fixed.get(k) for k in keys],
                                                [differ[k] for k in keys])]
    view = measured(env, *planned(trial_spec(doc, spec_path, {}, "tune-final")), db,
                    False, False, wait_quiet, allow_remote, again)
    best = next(s for s in view.summaries
                if all(s.knobs.get(k) == differ[k] for k in keys))
    base = next(s for s in view.summaries if s is not best)
    return base, best


def _nested(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{"nginx.sendfile": False} → {"nginx": {"sendfile": False}}, as a matrix writes it."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        component, name = key.split(".", 1)
        out.setdefault(component, {})[name] = value
    return out

