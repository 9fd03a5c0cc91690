"""A study's plan: the experiments that re-measure its findings and, for each finding,
which two trials of which experiment answer it (stacklab/studies/plans/s1.toml …).

A step is an experiment file's tables (experiment, load, knobs, matrix) plus `quick`,
the overrides `--quick` applies (fewer levels and repetitions, shorter runs), and its
checks. A check names a finding of findings/sN.toml, a metric and two trial selectors
(stack, workload, concurrency, knob values); each selector matches exactly one trial
of the step in both modes, which `load_plan` verifies before anything starts.

A side may also be a sum of trials, `{ plus = [SEL, SEL], minus = [SEL] }`: its value
per repetition is the plus trials' values added and the minus trials' taken away, for a
claim such as S5's "TLS with gzip costs what the two cost apart" (TLS + gzip − raw).

Like with like: where the study quotes a mean over its concurrency levels (S1's 2.97×
for nginx's photos is the mean over ten levels), a check can average today's ratio over
the same levels, `mean_over = { concurrency = [1, 2, 5, 10, 50, 150] }`: each side's
value per repetition is the geometric mean over the levels the step planned in that mode
(so B/A is the geometric mean of the ratios level by level). `then = { levels = [...],
a = [...], b = [...], source = "..." }` gives the study's own values at those levels (from
its tables), so the size verdict sets today's ratio against the study's at the same
levels, not against a mean over others.

A finding about where one request's time goes is a `[[breakdown]]`: S1's overview method
(`stacklab breakdown`) on one stack and workload, repeated on fresh stacks, and two of its
parts (database, php, web server, network) compared in milliseconds."""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..methods.breakdown import plan_breakdown
from ..errors import SpecError, StacklabError
from ..knobs import KnobRegistry
from ..experiment.plan import Plan, Trial, make_plan
from ..experiment.spec import ExperimentSpec, flatten, parse_spec
from ..run.validate import SpecOrigin, validate_plan

PLANS = Path(__file__).parent / "plans"
# What a check compares: the rows of analyze.compare_trials, plus bytes per response.
METRICS = {"rps": "req/s", "p50": "p50 ms", "p99": "p99 ms", "mbps": "MB/s",
           "bytes": "bytes/response", "cpu": "server CPU µs/req",
           "rss": "server RSS MiB (peak)",
           # a page's repeat view by a caching client (pageview.py), not the load's
           "repeat_bytes": "bytes per repeat view", "repeat_requests": "requests per repeat view"}
QUICK_KEYS = {"concurrency", "repetitions", "duration", "warmup", "requests",
              "requests_per_connection", "workload"}
# how a run is bounded: a quick override of one drops the others
BOUNDS = ("duration", "requests", "requests_per_connection")
SELECTOR_AXES = ("stack", "workload", "concurrency")


@dataclass(frozen=True)
class Sum:
    """A side made of several trials: the plus ones' values added, the minus ones'
    taken away, run by run."""

    plus: tuple[dict[str, Any], ...]
    minus: tuple[dict[str, Any], ...] = ()

    def terms(self) -> list[tuple[int, dict[str, Any]]]:
        return [(1, s) for s in self.plus] + [(-1, s) for s in self.minus]


MEAN_AXES = ("concurrency",)


@dataclass(frozen=True)
class Then:
    """The study's own values at the levels a check compares (from its tables): A's and
    B's, level by level, and where the study gives them."""

    levels: tuple[Any, ...]
    a: tuple[float, ...]
    b: tuple[float, ...]
    source: str

    def ratio(self, levels: tuple[Any, ...]) -> float:
        """The study's B/A at `levels`: the geometric mean of its ratios there, as a
        check's mean_over takes today's."""
        ratios = [self.b[self.levels.index(v)] / self.a[self.levels.index(v)] for v in levels]
        return math.exp(sum(math.log(r) for r in ratios) / len(ratios))


@dataclass(frozen=True)
class Per:
    """Today's quantity as the study gave its own: B's value, or B's less A's, divided
    by a count (S4: 100 processes less 5 = 43 MB, 430 KB each; one lighttpd holding
    10,000 connections in 32 MB)."""

    count: float
    what: str                         # "Apache process", "connection"
    of: str = "difference"            # "difference" (B − A) or "b"

    def value(self, a: float, b: float) -> float:
        return ((b - a) if self.of == "difference" else b) / self.count


@dataclass(frozen=True)
class Check:
    finding: str
    metric: str                       # a key of METRICS
    a: dict[str, Any] | Sum           # selector: stack / workload / concurrency / knob keys
    b: dict[str, Any] | Sum
    note: str = ""                    # how this measurement maps to the study's condition
    mean_over: tuple[str, tuple[Any, ...]] | None = None   # (axis, its levels)
    then: Then | None = None          # the study's values at the compared levels
    per: Per | None = None            # today's quantity per unit, beside the study's

    def terms(self, side: str) -> list[tuple[int, dict[str, Any]]]:
        """The side's selectors, each with its sign (a plain selector: one, plus)."""
        sel = getattr(self, side)
        return sel.terms() if isinstance(sel, Sum) else [(1, sel)]

    def levels(self, trials: Sequence[Any]) -> tuple[Any, ...]:
        """The mean_over levels among `trials` (a step's planned trials or a stored
        experiment's summaries): those this mode measures; () without mean_over."""
        if self.mean_over is None:
            return ()
        axis, wanted = self.mean_over
        have = {getattr(t, axis) for t in trials}
        return tuple(v for v in wanted if v in have)

    def at(self, selector: dict[str, Any], level: Any) -> dict[str, Any]:
        """A side's selector at one level of its mean_over axis."""
        return {**selector, self.mean_over[0]: level} if self.mean_over else selector

    def then_ratio(self, levels: tuple[Any, ...]) -> float | None:
        """The study's ratio like with like, at the levels compared (mean_over's that
        were measured, or the one level of a plain check's trials), when `then` gives
        them (prepare refuses a `then` that lacks a level a mode compares)."""
        if self.then is None:
            return None
        return self.then.ratio(levels)

    def selectors(self, side: str, levels: tuple[Any, ...]) -> list[tuple[int, dict[str, Any]]]:
        """The side's selectors with their signs, one per level under mean_over."""
        return [(sign, one) for sign, selector in self.terms(side)
                for one in ([self.at(selector, v) for v in levels] or [selector])]


@dataclass(frozen=True)
class Step:
    name: str                         # the experiment's name (quick mode adds "-quick")
    doc: dict[str, Any]               # experiment, load, knobs, matrix: an experiment file
    quick: dict[str, Any]
    checks: tuple[Check, ...]
    scaling: str                      # how this step scales the study's condition
    memory: bool = False              # the study report lists its memory per process

    def experiment_doc(self, quick: bool) -> dict[str, Any]:
        """The experiment file this step runs, with --quick's overrides applied and its
        own name, so quick and full runs are never mixed in one experiment."""
        doc = {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.doc.items()}
        if not quick:
            return doc
        exp, matrix = doc["experiment"], doc.setdefault("matrix", {})
        exp["name"] = f"{exp['name']}-quick"
        for key, value in self.quick.items():
            if key in ("concurrency", "workload"):
                matrix[key] = value
            else:
                exp[key] = value
        for bound in BOUNDS:
            if bound in self.quick:
                for other in BOUNDS:
                    if other != bound:
                        exp.pop(other, None)
        return doc


BREAKDOWN_PARTS = ("database", "php", "web server", "network")
BREAKDOWN_QUICK_KEYS = {"requests", "repetitions"}


@dataclass(frozen=True)
class BreakdownStep:
    """A finding answered by `stacklab breakdown`: parts `a` and `b` of one request's
    time, one value per repetition (the median over the workload's URLs)."""

    finding: str
    stack: str
    workload: str
    a: str                            # a part of BREAKDOWN_PARTS
    b: str
    network: str = "loopback"
    requests: int = 200
    repetitions: int = 3
    keepalive: bool = False           # which of the two measurements the parts come from
    quick: dict[str, Any] = field(default_factory=dict)
    scaling: str = ""
    note: str = ""

    def arguments(self, quick: bool) -> dict[str, int]:
        out = {"requests": self.requests, "repetitions": self.repetitions}
        return {**out, **self.quick} if quick else out


@dataclass(frozen=True)
class StudyPlan:
    study: str
    file: str
    steps: tuple[Step, ...]
    # expressible findings this plan does not measure yet, each with why: the report
    # lists them as "not measured" with that reason
    unmeasured: dict[str, str] = field(default_factory=dict)
    breakdowns: tuple[BreakdownStep, ...] = ()

    def checks(self) -> dict[str, tuple[Step, Check]]:
        return {c.finding: (s, c) for s in self.steps for c in s.checks}

    def answered(self) -> list[str]:
        """Every finding a step's check or a breakdown answers."""
        return [*self.checks(), *(b.finding for b in self.breakdowns)]


@dataclass(frozen=True)
class PlannedStep:
    step: Step
    spec: ExperimentSpec
    plan: Plan


@dataclass(frozen=True)
class PlannedBreakdown:
    step: BreakdownStep
    plan: Any                         # breakdown.BreakdownPlan


def plan_path(study: str) -> Path:
    return PLANS / f"{study.lower()}.toml"


def load_plan(study: str) -> StudyPlan:
    return load_plan_file(plan_path(study), study)


def load_plan_file(path: Path, study: str = "") -> StudyPlan:
    file = str(path)
    try:
        doc = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SpecError(file, "(file)", file, f"no plan for study {study or path.stem}") from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(file, "(syntax)", str(e), "not valid TOML") from None
    steps = []
    for i, raw in enumerate(doc.get("step", []), 1):
        where = f"step[{i}]"
        raw = dict(raw)
        checks = tuple(_check(c, file, f"{where}.check[{j}]")
                       for j, c in enumerate(raw.pop("check", []), 1))
        quick = raw.pop("quick", {})
        scaling = raw.pop("scaling", "")
        memory = raw.pop("memory", False)
        for key in quick:
            if key not in QUICK_KEYS:
                raise SpecError(file, f"{where}.quick.{key}", quick[key],
                                f"not a quick override (expected {', '.join(sorted(QUICK_KEYS))})")
        if "experiment" not in raw or "name" not in raw["experiment"]:
            raise SpecError(file, f"{where}.experiment.name", None, "missing")
        steps.append(Step(raw["experiment"]["name"], raw, quick, checks, scaling, memory))
    unmeasured = {}
    for i, raw in enumerate(doc.get("unmeasured", []), 1):
        if set(raw) != {"finding", "why"}:
            raise SpecError(file, f"unmeasured[{i}]", raw, "expected finding and why")
        unmeasured[raw["finding"]] = raw["why"]
    breakdowns = tuple(_breakdown(raw, file, f"breakdown[{i}]")
                       for i, raw in enumerate(doc.get("breakdown", []), 1))
    return StudyPlan(study or path.stem.upper(), file, tuple(steps), unmeasured, breakdowns)


def _breakdown(raw: Mapping[str, Any], file: str, where: str) -> BreakdownStep:
    known = set(BreakdownStep.__dataclass_fields__)
    for key in ("finding", "stack", "workload", "a", "b"):
        if key not in raw:
            raise SpecError(file, f"{where}.{key}", None, "missing")
    extra = sorted(set(raw) - known)
    if extra:
        raise SpecError(file, f"{where}.{extra[0]}", raw[extra[0]],
                        f"unknown key (expected {', '.join(sorted(known))})")
    for side in ("a", "b"):
        if raw[side] not in BREAKDOWN_PARTS:
            raise SpecError(file, f"{where}.{side}", raw[side],
                            f"expected one of {', '.join(BREAKDOWN_PARTS)}")
    for key in raw.get("quick", {}):
        if key not in BREAKDOWN_QUICK_KEYS:
            raise SpecError(file, f"{where}.quick.{key}", raw["quick"][key],
                            f"not a quick override (expected {', '.join(sorted(BREAKDOWN_QUICK_KEYS))})")
    return BreakdownStep(**raw)


def _check(raw: Mapping[str, Any], file: str, where: str) -> Check:
    for key in ("finding", "metric", "a", "b"):
        if key not in raw:
            raise SpecError(file, f"{where}.{key}", None, "missing")
    if raw["metric"] not in METRICS:
        raise SpecError(file, f"{where}.metric", raw["metric"],
                        f"expected one of {', '.join(METRICS)}")
    extra = set(raw) - {"finding", "metric", "a", "b", "note", "mean_over", "then", "per"}
    if extra:
        raise SpecError(file, f"{where}.{sorted(extra)[0]}", raw[sorted(extra)[0]],
                        "unknown key (expected finding, metric, a, b, note, mean_over, then, "
                        "per)")
    a, b = _side(raw["a"], file, f"{where}.a"), _side(raw["b"], file, f"{where}.b")
    mean_over = _mean_over(raw.get("mean_over"), (a, b), file, f"{where}.mean_over")
    then = _then(raw.get("then"), mean_over, file, f"{where}.then")
    if then is not None and (isinstance(a, Sum) or isinstance(b, Sum)):
        raise SpecError(file, f"{where}.then", raw["then"], "a sum of trials has no one "
                        "level to set the study's values at")
    return Check(raw["finding"], raw["metric"], a, b, raw.get("note", ""), mean_over, then,
                 _per(raw.get("per"), file, f"{where}.per"))


def _per(raw: Any, file: str, where: str) -> Per | None:
    """`{ count = 95, what = "Apache process", of = "difference" }`."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not {"count", "what"} <= set(raw) <= {"count", "what", "of"}:
        raise SpecError(file, where, raw, "expected count, what and optionally of")
    count = raw["count"]
    if isinstance(count, bool) or not isinstance(count, (int, float)) or count <= 0:
        raise SpecError(file, f"{where}.count", count, "expected a positive number")
    if raw.get("of", "difference") not in ("difference", "b"):
        raise SpecError(file, f"{where}.of", raw["of"], "expected difference or b")
    return Per(float(count), str(raw["what"]), raw.get("of", "difference"))


def _mean_over(raw: Any, sides: tuple, file: str,
               where: str) -> tuple[str, tuple[Any, ...]] | None:
    """`{ concurrency = [levels] }`: one axis of MEAN_AXES, at least two levels, on plain
    sides that do not name a level themselves."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or len(raw) != 1 or next(iter(raw)) not in MEAN_AXES:
        raise SpecError(file, where, raw, f"expected one axis ({', '.join(MEAN_AXES)}) "
                        "and its levels")
    axis, levels = next(iter(raw.items()))
    if not isinstance(levels, list) or len(levels) < 2 or len(set(levels)) != len(levels):
        raise SpecError(file, f"{where}.{axis}", levels, "expected at least two different levels")
    for side in sides:
        if isinstance(side, Sum) or axis in side:
            raise SpecError(file, where, raw, f"a mean over {axis} takes plain sides that "
                            f"do not name a {axis}")
    return axis, tuple(levels)


def _then(raw: Any, mean_over: tuple[str, tuple[Any, ...]] | None, file: str,
          where: str) -> Then | None:
    """The study's values at its levels: as many A and B values as levels, all positive,
    with their source; under mean_over, every level of it."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or set(raw) != {"levels", "a", "b", "source"}:
        raise SpecError(file, where, raw, "expected levels, a, b and source")
    levels, a, b = raw["levels"], raw["a"], raw["b"]
    if (not isinstance(levels, list) or not levels or not isinstance(a, list)
            or not isinstance(b, list) or not len(levels) == len(a) == len(b)):
        raise SpecError(file, where, raw, "expected lists of levels and of A's and B's "
                        "values, one value a side per level")
    for side, values in (("a", a), ("b", b)):
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
                   for v in values):
            raise SpecError(file, f"{where}.{side}", values, "expected positive numbers")
    if mean_over is not None and set(mean_over[1]) - set(levels):
        missing = sorted(set(mean_over[1]) - set(levels))
        raise SpecError(file, f"{where}.levels", levels, f"the study's values are missing "
                        f"at {mean_over[0]} {', '.join(map(str, missing))} of mean_over")
    return Then(tuple(levels), tuple(float(v) for v in a), tuple(float(v) for v in b),
                str(raw["source"]))


def _side(raw: Mapping[str, Any], file: str, where: str) -> dict[str, Any] | Sum:
    if "plus" not in raw and "minus" not in raw:
        return flatten(raw)
    extra = set(raw) - {"plus", "minus"}
    if extra:
        key = sorted(extra)[0]
        raise SpecError(file, f"{where}.{key}", raw[key],
                        "a sum of trials takes only plus and minus")
    plus, minus = raw.get("plus", []), raw.get("minus", [])
    if not isinstance(plus, list) or len(plus) < 2 or not isinstance(minus, list):
        raise SpecError(file, f"{where}.plus", plus,
                        "expected a list of at least two trial selectors (and minus a list)")
    return Sum(tuple(flatten(s) for s in plus), tuple(flatten(s) for s in minus))


def matches(selector: Mapping[str, Any], trial: Any, registry: KnobRegistry) -> bool:
    """Whether a planned Trial or a stored TrialSummary is the one `selector` names; a
    knob the trial does not set counts at its default."""
    knobs = dict(trial.knobs)
    for key, want in selector.items():
        if key in SELECTOR_AXES:
            if getattr(trial, key) != want:
                return False
            continue
        knob = registry.get(key)
        have = knobs.get(key, knob.default if knob else None)
        if have != want:
            return False
    return True


def prepare(plan: StudyPlan, quick: bool, registry: KnobRegistry, stacks,
            workloads: set[str]) -> list[PlannedStep]:
    """Every step's experiment parsed, planned and validated, and every check's two
    selectors matched to exactly one trial: the whole study before any server starts."""
    out = []
    for i, step in enumerate(plan.steps, 1):
        doc = step.experiment_doc(quick)
        file = f"{plan.file} step[{i}]" + (" (--quick)" if quick else "")
        spec = parse_spec(doc, file, registry, stacks, workloads)
        made = make_plan(spec, stacks)
        validate_plan(made, SpecOrigin(spec))
        for j, check in enumerate(step.checks, 1):
            levels = check.levels(made.trials)
            if check.mean_over is not None and not levels:
                raise SpecError(file, f"check[{j}].mean_over", dict([check.mean_over]),
                                f"none of these levels is planned in {step.name}")
            for side in ("a", "b"):
                for _, one in check.selectors(side, levels):
                    found = [t for t in made.trials if matches(one, t, registry)]
                    if len(found) != 1:
                        raise SpecError(file, f"check[{j}].{side}", one,
                                        f"matches {len(found)} trials of {step.name}; a "
                                        "selector must match exactly one")
                    compared = levels or (found[0].concurrency,)
                    if check.then and side == "a" and set(compared) - set(check.then.levels):
                        raise SpecError(file, f"check[{j}].then.levels",
                                        list(check.then.levels), "lacks the level compared: "
                                        f"concurrency {', '.join(map(str, compared))}")
        out.append(PlannedStep(step, spec, made))
    return out


def prepare_breakdowns(plan: StudyPlan, quick: bool) -> list[PlannedBreakdown]:
    """Each breakdown validated as `stacklab breakdown` validates its arguments, the
    error naming the plan's entry."""
    out = []
    for i, b in enumerate(plan.breakdowns, 1):
        args = b.arguments(quick)
        try:
            made = plan_breakdown(b.stack, b.workload, [], args["requests"],
                                  network=b.network, repetitions=args["repetitions"])
        except StacklabError as e:
            raise SpecError(plan.file, f"breakdown[{i}]", b.finding, str(e)) from None
        out.append(PlannedBreakdown(b, made))
    return out
