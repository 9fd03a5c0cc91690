"""tune: a joint search of a stack's settings ([tune]) with Optuna, each trial one
experiment of the one run lifecycle, then the best measured again against the defaults.

- The search space is the knob registry's (experiment/tunespace.py); Optuna's TPE
  (multivariate, grouped over the conditional knobs) asks, stacklab measures, Optuna is
  told. Its study is the results database's own (`<db>.tune/<name>.optuna.db`,
  store/tunestudy.py), so `--resume` continues a search: a trial an interrupt or a kill
  cut short is continued as the same trial, with its values, in its experiment (its
  stored runs kept; what a kill left `running` settled first), and the final comparison
  is resumed like any experiment. Nothing measured is measured again.
- Each trial is an experiment `<name>.tune-<n>`: the spec's point with the trial's
  values as fixed knobs, the experiment's repetitions, stored like any run (nothing
  lost). A trial whose runs all failed is a failed trial (Optuna samples elsewhere).
- The objective is the trial's median req/s (rps), its server CPU per request at the
  spec's load.rate (cpu), or its median capacity under the spec's [capacity] goal
  (capacity: each of its runs a capacity search, run/capacity.py). With a memory budget, the stack's peak memory over the trial's
  runs (the larger of its PSS and its cgroup's charge) is a constraint (over budget: infeasible, never the best).
- Then `<name>.tune-choose`: the search's `candidates` best trials and the defaults
  interleaved, final_repetitions runs each on fresh stacks; the best of them on those
  runs is chosen (the search's own best is its luckiest as much as its best).
- Then `<name>.tune-final`: the chosen and the defaults interleaved, final_repetitions
  runs each on fresh stacks again (the choice's runs are not reused, so the figure
  reported is not the one it was chosen on): the chosen against the defaults with its
  interval and verdict.
"""

from __future__ import annotations

import copy
import json
import shlex
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..analysis.analyze import (Estimate, ExperimentView, MetricComparison, TrialSummary,
                                compare_trials, disturbed, summarize, when_of)
from ..analysis.memplan import WorkerLimit, worker_limit
from ..analysis.tunebudget import Held, Prediction, pool_of, predict
from ..analysis.stats import compare
from ..env import Environment
from ..errors import ExitStatus, StacklabError, UsageError
from ..experiment.sizes import parse_mib
from ..experiment.spec import TUNE, ExperimentSpec, load_doc, parse_file_doc
from ..experiment.plan import Plan, PlannedRun, interleave, make_plan
from ..experiment.tunespace import Dimension, dimensions, suggest
from ..report.tunelines import final_lines, history_line, space_lines, tally_line
from ..stacks import REGISTRY, STACKS
from ..store import Outcome, RunRecord
from ..store.tunestudy import (absent, former_study_file, planned_as, settle, storage,
                               study_errors, study_file)
from ..workloads import WORKLOADS
from ..run.runner import plan_hash
from ..run.validate import SpecOrigin, validate_plan
from .run import measured, planned


def tune(env: Environment, spec_path: Path, db: Path | None, resume: bool, dry_run: bool,
         wait_quiet: bool = False, allow_remote: bool = False) -> ExitStatus:
    doc = load_doc(spec_path)
    spec = parse_file_doc(doc, spec_path, REGISTRY, STACKS, set(WORKLOADS))
    if spec.tune is None:
        raise UsageError(f"{spec_path}: no [tune] section: name the knobs to search, e.g. "
                         '[tune.knobs] "nginx.worker_processes" = { min = 1, max = 4 }')
    t = spec.tune
    dims = dimensions(REGISTRY, t.knobs)
    stack = STACKS[spec.axes["stack"][0]]
    for table, keys in (("knobs", [d.key for d in dims]), ("hand", list(t.hand))):
        for key in keys:
            if key.split(".", 1)[0] not in stack.knob_owners:
                raise UsageError(f"{spec_path}: tune.{table}.{key}: not a knob of stack "
                                 f"{stack.name} (its knobs' owners: "
                                 f"{', '.join(stack.knob_owners)}): the search tunes the "
                                 "stack")
    for line in space_lines(spec, dims):
        env.stdout.print(line, markup=False)
    planned(trial_spec(doc, spec_path, {}, "defaults"))   # the point itself is valid
    if dry_run:
        return ExitStatus.OK
    import optuna      # its import costs a second: only when a search runs
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    db = env.database(db)
    fixed = defaults(spec)
    search = Search(env, optuna, doc, spec_path, spec, dims, fixed,
                    parse_mib(t.memory) if t.memory else None, db, wait_quiet, allow_remote,
                    shlex.join(["stacklab", "tune", str(spec_path), "--db", str(db),
                                "--resume"]), resume)
    path = study_file(db, spec.experiment.name)
    with study_errors(path, db):       # a study file gone bad mid-search too: one line
        study = open_study(optuna, db, path, spec, resume)
        for trial in cut_short(optuna, study):
            search.step(study, trial)
        while counted(optuna, study) < t.trials and search.step(study):
            pass
        env.stdout.print(tally_line(*tally(optuna, study), search.budget), markup=False)
        search.answer(study)
    return ExitStatus.OK


@dataclass(frozen=True)
class Search:
    """One search's settings as its trials and its answer share them."""

    env: Environment
    optuna: Any
    doc: dict
    spec_path: Path
    spec: ExperimentSpec
    dims: tuple[Dimension, ...]
    fixed: dict[str, Any]           # every other knob's value (defaults())
    budget: int | None              # MiB of peak memory (PSS or the cgroup's charge)
    db: Path
    wait_quiet: bool
    allow_remote: bool
    again: str                      # the command that resumes it
    resume: bool                    # --resume: a stored final comparison is resumed

    @property
    def spec_stack(self) -> Any:
        return STACKS[self.spec.axes["stack"][0]]

    def say(self, line: str) -> None:
        self.env.stdout.print(line, markup=False)

    def step(self, study: Any, trial: Any = None) -> bool:
        """Ask one trial (or continue `trial`, one cut short: cut_short), measure it
        (unless its memory is predicted over the budget or the plan refuses it) and tell
        Optuna; False when the search must stop."""
        states = self.optuna.trial.TrialState
        continued = trial is not None and "experiment" in trial.user_attrs
        trial = trial or study.ask()
        values = suggest(trial, self.dims, self.fixed)
        name = f"{self.spec.experiment.name}.tune-{trial.number}"
        trial.set_user_attr("experiment", name)
        trial.set_user_attr("values", values)
        knobs = {**self.fixed, **values}
        limit = worker_limit(self.spec_stack.components, knobs)   # its MPM's, per trial
        if self.budget and (guess := predicted(limit, knobs, values, study)) \
                and guess.peak_mib > self.budget:
            # the known constraint: never started; told as pruned and infeasible, with
            # no value, so TPE learns where the budget ends and no figure is made up
            trial.set_user_attr("predicted", guess.said(self.budget))
            trial.set_constraint("memory", guess.peak_mib - self.budget)
            study.tell(trial, state=states.PRUNED)
            self.say(f"trial {trial.number}: not started: {guess.said(self.budget)}")
            return self.unstarted(study)
        try:
            point = planned(trial_spec(self.doc, self.spec_path, values,
                                       f"tune-{trial.number}"))
        except StacklabError as e:       # a combination the plan refuses: not measured
            trial.set_user_attr("refused", str(e))
            study.tell(trial, state=states.FAIL)
            self.say(f"trial {trial.number}: refused, not measured: {e}")
            return True
        t = self.spec.tune
        watch = (pruning(trial, t.objective, self.spec.experiment.first_repetitions)
                 if t.prune else None)
        try:    # a trial cut short goes on in its experiment, if one was stored
            view = measured(self.env, *point, self.db,
                            continued and resumable(self.db, *point), False,
                            self.wait_quiet, self.allow_remote, self.again, watch)
        except Pruned as e:
            trial.set_user_attr("pruned", str(e))
            study.tell(trial, state=states.PRUNED)
            self.say(f"trial {trial.number}: pruned, {e}; its runs are stored ({name})")
            return True
        value, peak = objective(view, t.objective)
        over = (None if self.budget and peak is None else
                peak - self.budget if self.budget else 0.0)
        trial.set_user_attr("peak_mib", peak)
        trial.set_user_attr("over_budget_mib", over)
        if isinstance(limit, WorkerLimit) and peak is not None:
            trial.set_user_attr("held", held(view, limit, knobs, values, peak))
        if value is None:
            trial.set_user_attr("failed", "no run of it was measured")
            study.tell(trial, state=states.FAIL)
        else:
            # TPE learns where the infeasible trials are; unread PSS counts as over
            trial.set_constraint("memory", 1.0 if over is None else over)
            study.tell(trial, value)
        self.say(history_line(trial.number, values, self.fixed, value, peak, self.budget))
        return True

    def unstarted(self, study: Any) -> bool:
        """False once twice `trials` trials were predicted over the budget (they do not
        count against `trials`: the search would ask on and on)."""
        n = tally(self.optuna, study)[0].get("predicted", 0)
        if n < 2 * self.spec.tune.trials:
            return True
        self.say(f"search stopped: {n} trials predicted over the budget of {self.budget} "
                 "MiB, twice the trials asked for; widen tune.memory or narrow the worker "
                 "limit's range")
        return False

    def answer(self, study: Any) -> None:
        """The chosen trial (choose) measured again against the defaults and the hand
        preset, side by side in one experiment (final), and said."""
        t = self.spec.tune
        tops = top_trials(study, t.candidates, self.fixed)
        if not tops:
            raise StacklabError(f"tune {self.spec.experiment.name}: no trial measured "
                                "within the memory budget; every trial is stored")
        best = self.choose(tops)
        differ = self.differ(best)
        hand = {k: v for k, v in t.hand.items() if self.fixed.get(k) != v}
        if not differ and not hand:
            self.say(f"best: trial {best.number}: the defaults themselves; nothing to "
                     "measure against them")
            return
        arms = {"defaults": {}, "best": differ, **({"hand": hand} if hand else {}),
                **({f"alone {k}": self.alone(k, differ) for k in differ}
                   if t.alone and len(differ) > 1 else {})}
        got = final(self.env, self.doc, self.spec_path, arms, t.final_repetitions,
                    self.db, self.wait_quiet, self.allow_remote, self.again, self.resume,
                    "tune-final")
        # an arm that came to the best's or the defaults' own trial is not set against it
        against = {name: self.rows(got[name], got["best"]) for name in ("defaults", "hand")
                   if name in got and got[name] is not got["best"]}
        alone = {name.split(" ", 1)[1]: self.rows(got["defaults"], s)
                 for name, s in got.items() if name.startswith("alone ")
                 and s is not got["defaults"] and s is not got["best"]}
        for line in final_lines(best.number, best.user_attrs["values"], self.fixed,
                                against, t.objective, *importances(self.optuna, study),
                                got["best"].trial_id, hand, alone):
            self.say(line)

    def differ(self, ft: Any) -> dict[str, Any]:
        """A trial's values where they differ from the defaults."""
        return {k: v for k, v in ft.user_attrs["values"].items() if self.fixed.get(k) != v}

    def choose(self, tops: list[Any]) -> Any:
        """Of the search's best trials (best first), the one best on runs measured again:
        each, with the defaults, final_repetitions runs on fresh stacks interleaved in
        one experiment `<name>.tune-choose`, chosen on the median of the objective's
        figure there (the defaults are measured beside them so that each round's drift
        falls on all alike, and for the record). One trial: itself, measured no more."""
        t = self.spec.tune
        if len(tops) == 1:
            return tops[0]
        arms = {"defaults": {}, **{f"trial {ft.number}": self.differ(ft) for ft in tops}}
        self.say(f"choosing among the search's best {len(tops)}: trials "
                 f"{', '.join(str(ft.number) for ft in tops)}, measured again "
                 f"({t.final_repetitions} runs each beside the defaults)")
        got = final(self.env, self.doc, self.spec_path, arms, t.final_repetitions,
                    self.db, self.wait_quiet, self.allow_remote, self.again, self.resume,
                    "tune-choose")
        figures = {ft.number: figure(got[f"trial {ft.number}"], t.objective) for ft in tops}
        measured_ = [ft for ft in tops if figures[ft.number] is not None]
        if not measured_:
            self.say("no candidate's runs measured again: the search's best is kept")
            return tops[0]
        pick = min if t.objective == "cpu" else max
        chosen = pick(measured_, key=lambda ft: figures[ft.number])    # ties: search order
        unit = {"rps": "req/s", "cpu": "µs/req", "capacity": "req/s"}[t.objective]
        self.say(f"chosen: trial {chosen.number} (medians measured again: " + "; ".join(
            f"trial {ft.number} " + (f"{figures[ft.number]:,.1f} {unit}"
                                     if figures[ft.number] is not None else "not measured")
            for ft in tops) + f"; {self.spec.experiment.name}.tune-choose)")
        return chosen

    def alone(self, key: str, differ: dict[str, Any]) -> dict[str, Any]:
        """One of the best's settings on the defaults, with the best's values of the
        searched knobs it acts with (tcp_nopush alone is tcp_nopush with sendfile on)."""
        dim = next(d for d in self.dims if d.key == key)
        return {**{k: differ[k] for k in dim.acts_with if k in differ}, key: differ[key]}

    def rows(self, a: TrialSummary, b: TrialSummary) -> dict[str, MetricComparison]:
        """B against A by metric, with the servers' summed CPU for objective cpu."""
        rows = {m.metric: m for m in compare_trials(a, b)}
        if self.spec.tune.objective == "cpu":
            rows[SERVER_CPU] = server_cpu(a, b)
        return rows


SERVER_CPU = "server CPU µs/req"


def server_cpu(a: TrialSummary, b: TrialSummary) -> MetricComparison:
    """The objective `cpu` optimised: every server component's CPU per request summed,
    run by run (runs that have every component), B against A, paired as compare_trials
    pairs."""
    def sums(s: TrialSummary) -> Estimate:
        estimates = s.cpu_us_per_request.values()
        if not all(e.when for e in estimates):        # not known: position by position
            return Estimate.of([sum(v) for v in zip(*(e.values for e in estimates))])
        each = [dict(zip(e.when, e.values)) for e in estimates]
        runs = sorted(set.intersection(*(set(d) for d in each))) if each else []
        return Estimate.of([sum(d[w] for d in each) for w in runs], runs)
    sa, sb = sums(a), sums(b)
    return MetricComparison(SERVER_CPU, compare(sa.values, sb.values,
                                                when=when_of(a, b, sa, sb)),
                            None, None, None, False)


class Pruned(Exception):
    """A trial the pruner stopped after a run; what it says: when and why."""


def pruning(trial: Any, kind: str, repetitions: int
            ) -> Callable[[PlannedRun, RunRecord], None]:
    """What a trial's experiment hands each stored run: its objective reported to Optuna
    (the repetition as the step, so the Wilcoxon pruner pairs it with the best trial's run
    of that repetition), and Pruned raised when the pruner finds the trial worse than the
    best while runs remain. A run the host disturbed is not reported (the runner
    measures it again where `remeasure` allows; its figure would weigh the host)."""
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
    return {"limit": [limit.knob, limit.per_process], "limit_value": int(knobs[limit.knob]),
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
            if (h := ft.user_attrs.get("held"))
            and h.get("limit") == [limit.knob, limit.per_process]]
    return predict(limit, int(knobs[limit.knob]), pool_of(limit, values), seen)


# fANOVA on fewer trials than this is a forest fitted to noise: not printed. With more,
# each knob's importance is given with its spread over IMPORTANCE_RESAMPLES studies of
# the trials drawn again with replacement (a bootstrap), so a share a handful of trials
# decided shows as the wide interval it is.
IMPORTANCE_MIN_TRIALS = 10
IMPORTANCE_RESAMPLES = 20


@dataclass(frozen=True)
class Importance:
    """A searched knob's fANOVA share of the objective's variance over the trials, with
    the 2.5th to 97.5th percentile of its bootstrap resamples."""

    share: float
    low: float
    high: float


def importances(optuna: Any, study: Any) -> tuple[dict[str, Importance], int]:
    """Each searched knob's importance over the complete trials, by fANOVA (Optuna's
    FanovaImportanceEvaluator: the share of the objective's variance a random forest
    fitted to the trials puts on each knob), over the knobs every trial had, with its
    bootstrap interval; and how many trials it is read from. {} under
    IMPORTANCE_MIN_TRIALS trials, or when fANOVA cannot tell. Not Optuna's default,
    PED-ANOVA, which asks how the best trials' values differ from all trials': once TPE
    has settled a knob, nearly every trial has the best's value and the knob reads as
    unimportant (S1's LAMP here: MariaDB's query cache, 10× between off and on, came out
    at 2%; fANOVA puts it at 93%)."""
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if len(complete) < IMPORTANCE_MIN_TRIALS:
        return {}, len(complete)
    found = _fanova(optuna, study, 0)
    if not found:
        return {}, len(complete)
    rng = np.random.default_rng(0)
    draws: dict[str, list[float]] = {k: [] for k in found}
    for r in range(IMPORTANCE_RESAMPLES):
        resampled = optuna.create_study(directions=study.directions)
        resampled.add_trials([complete[i] for i in rng.integers(0, len(complete),
                                                                 len(complete))])
        for k, v in (_fanova(optuna, resampled, r + 1) or {}).items():
            if k in draws:
                draws[k].append(v)
    return {k: Importance(v, *(float(q) for q in np.percentile(draws[k] or [v], [2.5, 97.5])))
            for k, v in found.items()}, len(complete)


def _fanova(optuna: Any, study: Any, seed: int) -> dict[str, float] | None:
    """fANOVA's shares over `study`'s trials; None when it cannot tell."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        try:
            found = optuna.importance.get_param_importances(
                study, evaluator=optuna.importance.FanovaImportanceEvaluator(seed=seed))
        except (RuntimeError, ValueError):
            return None
    too_few = any("too small to compute importances" in str(w.message) for w in said)
    return None if too_few else dict(found)


def tally(optuna: Any, study: Any) -> tuple[dict[str, int], list[float]]:
    """The trials by how they ended, and the measured ones' peak memory (MiB)."""
    states = optuna.trial.TrialState
    counts: dict[str, int] = {}
    peaks = []
    for ft in study.get_trials(deepcopy=False):
        kind = ("measured" if ft.state == states.COMPLETE else
                next((k for k in ENDED if k in ft.user_attrs),
                     "pruned" if ft.state == states.PRUNED else None))
        if kind:
            counts[kind] = counts.get(kind, 0) + 1
        # a study begun before the charge counted named its PSS-only peak so
        peak = ft.user_attrs.get("peak_mib", ft.user_attrs.get("peak_pss_mib"))
        if ft.state == states.COMPLETE and peak is not None:
            peaks.append(peak)
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


def open_study(optuna: Any, db: Path, path: Path, spec: ExperimentSpec,
               resume: bool) -> Any:
    """The search's study, the database's own (at `path`: tunestudy.study_file); a new
    one refuses an existing search of the name (--resume continues it, when it is of the
    same space and its trials are in the database). On a resume, what a kill left
    `running` is settled first (tunestudy.settle). The sampler's seed moves on with the
    trials stored, so a resume does not draw the first trials again."""
    name = spec.experiment.name
    if resume and not path.exists():      # refused without leaving an empty study
        raise UsageError(f"--resume: no stored search named {name!r} for {db} ({path})"
                         + moved_hint(db, path, name))
    kept = storage(optuna, path, db)
    exists = name in {s.study_name for s in optuna.get_all_study_summaries(kept)}
    if exists and not resume:
        raise UsageError(f"tune {name}: a search of this name is stored ({path}); "
                         "--resume continues it, or rename [experiment] name")
    if resume and not exists:
        raise UsageError(f"--resume: no stored search named {name!r} for {db} ({path})")
    stored = optuna.load_study(study_name=name, storage=kept) if exists else None
    if stored is not None and stored.user_attrs.get("space") != searched_space(spec):
        raise UsageError(f"--resume: the stored search {name!r} was of another space "
                         "([tune], the matrix point, [knobs] or [load] changed); rename "
                         "[experiment] name to start anew")
    if stored is not None and (gone := absent(db, measured_in(optuna, stored))):
        raise UsageError(f"--resume: the stored search {name!r} ({path}) measured "
                         f"trials the results database {db} does not hold "
                         f"({', '.join(gone[:3])}{', …' if len(gone) > 3 else ''}): it is "
                         "another database's search; give --db the database it measured "
                         "into, or move the study away to start anew")
    if resume:
        settle(db, f"{name}.tune-")
    done = len(stored.get_trials(deepcopy=False)) if stored is not None else 0
    with warnings.catch_warnings():     # WilcoxonPruner: "experimental"
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        pruner = (optuna.pruners.WilcoxonPruner(p_threshold=spec.tune.prune)
                  if spec.tune.prune else optuna.pruners.NopPruner())
    direction = "minimize" if spec.tune.objective == "cpu" else "maximize"
    study = optuna.create_study(study_name=name, storage=kept,
                                sampler=sampler(optuna, spec.tune.seed + done,
                                                spec.tune.trials),
                                pruner=pruner, direction=direction, load_if_exists=True)
    study.set_user_attr("space", searched_space(spec))
    return study


def moved_hint(db: Path, path: Path, name: str) -> str:
    """Where a study of the name is at the place stacklab kept studies before, if one is."""
    former = former_study_file(db, name).absolute()
    if not former.exists():
        return ""
    return (f"; one is at {former}, where stacklab kept searches before, shared by every "
            f"database in {db.absolute().parent}: if it measured into {db}, move it to "
            f"{path}")


def measured_in(optuna: Any, study: Any) -> list[str]:
    """The experiments of the study's trials that stored runs: complete, pruned after a
    run, or failed (every run of it failed, and is stored)."""
    states = optuna.trial.TrialState
    return [ft.user_attrs["experiment"] for ft in study.get_trials(deepcopy=False)
            if "experiment" in ft.user_attrs
            and (ft.state == states.COMPLETE or "pruned" in ft.user_attrs
                 or "failed" in ft.user_attrs)]


def cut_short(optuna: Any, study: Any) -> list[Any]:
    """The trials an interrupt or a kill left running, to be continued as they were: the
    same number (so still `<name>.tune-<n>`'s trial), the same values, the reports the
    pruner had. Made as Optuna's own ask() makes a trial of a stored one."""
    return [optuna.trial.Trial(study, ft._trial_id)
            for ft in study.get_trials(deepcopy=False,
                                       states=(optuna.trial.TrialState.RUNNING,))]


def resumable(db: Path, spec: ExperimentSpec, plan: Plan) -> bool:
    """Whether the database's newest experiment of the spec's name was planned as
    `plan`: it is then resumed, its stored runs kept, not measured anew."""
    return planned_as(db, spec.experiment.name) == plan_hash(plan)


def sampler(optuna: Any, seed: int, trials: int) -> Any:
    """The search's sampler: TPE, multivariate and grouped over the conditional knobs,
    its first trials (a third of them, 2 to 10) drawn at random (bench/tune_reference.py
    replays it)."""
    with warnings.catch_warnings():     # group: "experimental" since Optuna 2.8
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True,
                                          n_startup_trials=max(2, min(10, trials // 3)))


def best_trial(study: Any) -> Any:
    """The best complete trial within the budget, or None."""
    tops = top_trials(study, 1, {})
    return tops[0] if tops else None


def top_trials(study: Any, count: int, fixed: dict[str, Any]) -> list[Any]:
    """The `count` best complete trials within the budget, best first, each of other
    values (where they differ from `fixed`) than those before it."""
    import optuna
    done = [ft for ft in study.get_trials(deepcopy=False,
                                          states=(optuna.trial.TrialState.COMPLETE,))
            if (over := ft.user_attrs.get("over_budget_mib", 0.0)) is not None and over <= 0]
    maximize = study.direction == optuna.study.StudyDirection.MAXIMIZE
    done.sort(key=lambda ft: -ft.value if maximize else ft.value)
    out, seen = [], set()
    for ft in done:
        told = ft.user_attrs.get("values")       # every trial tune measured has them
        values = (f"#{ft.number}" if told is None else json.dumps(
            {k: v for k, v in told.items() if fixed.get(k) != v}, sort_keys=True, default=str))
        if values not in seen:
            seen.add(values)
            out.append(ft)
        if len(out) == count:
            break
    return out


def defaults(spec: ExperimentSpec) -> dict[str, Any]:
    """Every knob of the stack (its components' and groups') at its default, the
    stack's own defaults, then the spec's: what a conditional knob's condition reads
    where the search does not set it, and what the search's values are compared with."""
    stack = STACKS[spec.axes["stack"][0]]
    out = {f"{c}.{k}": v for c in stack.knob_owners for k, v in REGISTRY.defaults(c).items()}
    axes = {k: v[0] for k, v in spec.axes.items() if "." in k}     # one-value knob axes
    # the stack's own defaults (apache+mod_php: prefork), then the spec's, then what the
    # stack fixes, as the plan makes a trial's effective knobs (plan.effective_knobs)
    return {**out, **stack.defaults, **spec.fixed_knobs, **axes, **stack.knobs}


def trial_spec(doc: dict, spec_path: Path, values: dict[str, Any], suffix: str
               ) -> ExperimentSpec:
    """The spec's point with `values` (knob key -> value) as fixed knobs, named
    `<name>.<suffix>`, without [tune]."""
    doc = copy.deepcopy(doc)
    doc.pop(TUNE, None)
    experiment = doc.setdefault("experiment", {})
    experiment["name"] = f"{experiment.get('name', '')}.{suffix}"
    knobs = doc.setdefault("knobs", {})
    for key, value in values.items():       # the stack's knobs only (tune checks)
        component, name = key.split(".", 1)
        knobs.setdefault(component, {})[name] = value
    return parse_file_doc(doc, spec_path, REGISTRY, STACKS, set(WORKLOADS))


def objective(view: ExperimentView, kind: str) -> tuple[float | None, float | None]:
    """The trial's objective (None when no run measured) and its stack's peak memory in
    MiB over its runs (None when unread): per run, the larger of its components' peak PSS
    summed and what the kernel charged the stack's cgroup at its peak. The charge holds
    the page cache the servers read and what PSS shares out among processes; a machine
    profile's limit is held to it, and the memory plan measured it about 1.5 times the
    PSS (issue 40), so a "fits 512M" judged on PSS alone may not fit."""
    s: TrialSummary = view.summaries[0]
    peaks = [peak for r in view.runs if r.outcome is Outcome.OK
             if (peak := run_peak_mib(r)) is not None]
    return figure(s, kind), max(peaks) if peaks else None


def run_peak_mib(run) -> float | None:
    """One run's peak memory (see objective): the larger of PSS summed and the charge."""
    pss = [v for c in run.resources.components
           if (v := run.resources.figure(c, "pss_mib_peak")) is not None]
    read = [v for v in (sum(pss) if pss else None, run.resources.charged_mib) if v is not None]
    return max(read) if read else None


def figure(s: TrialSummary, kind: str) -> float | None:
    """A trial's (or one run's) figure the objective `kind` optimises."""
    return {"rps": s.rps.median, "cpu": s.server_cpu_us,
            "capacity": s.capacity.median}[kind]


def final(env: Environment, doc: dict, spec_path: Path, arms: dict[str, dict[str, Any]],
          repetitions: int, db: Path, wait_quiet: bool, allow_remote: bool,
          again: str, resume: bool, suffix: str) -> dict[str, TrialSummary]:
    """The arms (name -> the knob values in which it differs from the defaults; the
    defaults' is {}) measured side by side, interleaved in one experiment
    `<name>.<suffix>` (`repetitions` fresh stacks each): each arm planned as its own
    point (so the plan folds a setting that cannot act as it would anywhere), their
    trials in one plan, validated once, repetition by repetition. Arms that come to the
    same trial are measured once and share its summary (the same object). With `resume`,
    a stored one of the same plan is resumed: its stored runs kept, the rest measured.
    Each arm's summary by name."""
    doc = copy.deepcopy(doc)
    doc.setdefault("experiment", {})["repetitions"] = repetitions
    specs = {name: trial_spec(doc, spec_path, values, suffix)
             for name, values in arms.items()}
    plans = {name: make_plan(spec, STACKS) for name, spec in specs.items()}
    trials = list({p.trials[0].id: p.trials[0] for p in plans.values()}.values())
    plan = Plan(tuple(trials), tuple(interleave(trials, repetitions)),
                tuple(dict.fromkeys(n for p in plans.values() for n in p.notes)))
    validate_plan(plan, SpecOrigin(specs["defaults"]))
    view = measured(env, specs["defaults"], plan, db,
                    resume and resumable(db, specs["defaults"], plan), False, wait_quiet,
                    allow_remote, again)
    by_id = {s.trial_id: s for s in view.summaries}
    return {name: by_id[p.trials[0].id] for name, p in plans.items()}


