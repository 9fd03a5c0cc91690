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
- The objective is the trial's median req/s (rps) or its server CPU per request at the
  spec's load.rate (cpu). With a memory budget, the stack's peak PSS over the trial's
  runs is a constraint (over budget: infeasible, never the best).
- Then `<name>.tune-defaults` and `<name>.tune-best`, final_repetitions runs each on
  fresh stacks: the best against the defaults with its interval and verdict.
"""

from __future__ import annotations

import copy
import shlex
import warnings
from pathlib import Path
from typing import Any

from ..analysis.analyze import ExperimentView, TrialSummary, compare_trials
from ..env import Environment
from ..errors import ExitStatus, StacklabError, UsageError
from ..experiment.sizes import parse_mib
from ..experiment.spec import TUNE, ExperimentSpec, load_doc, parse_file_doc
from ..experiment.tunespace import dimensions, suggest
from ..report.tunelines import final_lines, history_line, space_lines
from ..stacks import REGISTRY, STACKS
from ..store import Outcome
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
    again = shlex.join(["stacklab", "tune", str(spec_path),
                        *(["--db", str(db)] if db else []), "--resume"])
    while len(study.get_trials(deepcopy=False)) < t.trials:
        trial = study.ask()
        values = suggest(trial, dims, fixed)
        name = f"tune-{trial.number}"
        trial.set_user_attr("experiment", f"{spec.experiment.name}.{name}")
        trial.set_user_attr("values", values)
        view = measured(env, *planned(trial_spec(doc, spec_path, values, name)), db,
                        False, False, wait_quiet, allow_remote, again)
        value, peak = objective(view, t.objective)
        if value is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            env.stdout.print(history_line(trial.number, values, fixed, None, peak, budget),
                             markup=False)
            continue
        over = peak - budget if budget and peak is not None else 0.0
        trial.set_user_attr("peak_pss_mib", peak)
        trial.set_user_attr("over_budget_mib", over)
        trial.set_constraint("memory", over)      # TPE samples feasible regions
        study.tell(trial, value)
        env.stdout.print(history_line(trial.number, values, fixed, value, peak, budget),
                         markup=False)
    best = best_trial(study)
    if best is None:
        raise StacklabError(f"tune {spec.experiment.name}: no trial measured within the "
                            "memory budget; every trial is stored")
    base = final(env, doc, spec_path, {}, "defaults", t.final_repetitions, db,
                 wait_quiet, allow_remote, again)
    tuned = final(env, doc, spec_path, best.user_attrs["values"], "best",
                  t.final_repetitions, db, wait_quiet, allow_remote, again)
    rows = {m.metric: m for m in compare_trials(base, tuned)}
    for line in final_lines(best.number, best.user_attrs["values"], fixed, rows,
                            t.objective, importances(optuna, study), tuned.trial_id):
        env.stdout.print(line, markup=False)
    return ExitStatus.OK


def importances(optuna: Any, study: Any) -> dict[str, float]:
    """Each searched knob's share of the objective's variance over the complete trials
    (Optuna's fANOVA), over the knobs every trial had; {} with too few trials."""
    try:
        return optuna.importance.get_param_importances(study)
    except (RuntimeError, ValueError):
        return {}


def open_study(optuna: Any, db: Path, spec: ExperimentSpec, resume: bool) -> Any:
    """The search's study, beside the database; a new one refuses an existing search of
    the name (--resume continues it). A trial an interrupt left running is failed and
    asked again with the same values."""
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
    with warnings.catch_warnings():     # group: "experimental" since Optuna 2.8
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.TPESampler(
            seed=spec.tune.seed, multivariate=True, group=True,
            n_startup_trials=max(2, min(10, spec.tune.trials // 3)))
    direction = "maximize" if spec.tune.objective == "rps" else "minimize"
    study = optuna.create_study(study_name=name, storage=storage, sampler=sampler,
                                direction=direction, load_if_exists=True)
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
            if ft.user_attrs.get("over_budget_mib", 0.0) <= 0]
    if not done:
        return None
    pick = max if study.direction == optuna.study.StudyDirection.MAXIMIZE else min
    return pick(done, key=lambda ft: ft.value)


def defaults(spec: ExperimentSpec) -> dict[str, Any]:
    """Every knob of the stack's components at its default, then the spec's own: what a
    conditional knob's condition reads where the search does not set it."""
    stack = STACKS[spec.axes["stack"][0]]
    out = {f"{c}.{k}": v for c in stack.components for k, v in REGISTRY.defaults(c).items()}
    return {**out, **spec.fixed_knobs}


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
    value = s.rps.median if kind == "rps" else s.server_cpu_us
    return value, peak


def final(env: Environment, doc: dict, spec_path: Path, values: dict[str, Any],
          suffix: str, repetitions: int, db: Path, wait_quiet: bool, allow_remote: bool,
          again: str) -> TrialSummary:
    """One side of the final comparison, measured `repetitions` times on fresh stacks."""
    doc = copy.deepcopy(doc)
    doc.setdefault("experiment", {})["repetitions"] = repetitions
    view = measured(env, *planned(trial_spec(doc, spec_path, values, f"tune-{suffix}")),
                    db, False, False, wait_quiet, allow_remote, again)
    return view.summaries[0]

