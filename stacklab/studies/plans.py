"""A study's plan: the experiments that re-measure its findings and, for each finding,
which two trials of which experiment answer it (stacklab/studies/plans/s1.toml …).

A step is an experiment file's tables (experiment, load, knobs, matrix) plus `quick`,
the overrides `--quick` applies (fewer levels and repetitions, shorter runs), and its
checks. A check names a finding of findings/sN.toml, a metric and two trial selectors
(stack, workload, concurrency, knob values); each selector matches exactly one trial
of the step in both modes, which `load_plan` verifies before anything starts."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import SpecError
from ..knobs import KnobRegistry
from ..plan import Plan, Trial, make_plan
from ..spec import ExperimentSpec, flatten, parse_spec
from ..validate import SpecOrigin, validate_plan

PLANS = Path(__file__).parent / "plans"
# What a check compares: the rows of analyze.compare_trials, plus bytes per response.
METRICS = {"rps": "req/s", "p50": "p50 ms", "p99": "p99 ms", "mbps": "MB/s",
           "bytes": "bytes/response", "cpu": "server CPU µs/req",
           "rss": "server RSS MiB (peak)"}
QUICK_KEYS = {"concurrency", "repetitions", "duration", "warmup", "requests", "workload"}
SELECTOR_AXES = ("stack", "workload", "concurrency")


@dataclass(frozen=True)
class Check:
    finding: str
    metric: str                       # a key of METRICS
    a: dict[str, Any]                 # selector: stack / workload / concurrency / knob keys
    b: dict[str, Any]
    note: str = ""                    # how this measurement maps to the study's condition

    def selects(self, side: str, trial: Trial | Any, registry: KnobRegistry) -> bool:
        return matches(getattr(self, side), trial, registry)


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
        if "requests" in self.quick:
            exp.pop("duration", None)
        elif "duration" in self.quick:
            exp.pop("requests", None)
        return doc


@dataclass(frozen=True)
class StudyPlan:
    study: str
    file: str
    steps: tuple[Step, ...]
    # expressible findings this plan does not measure yet, each with why: the report
    # lists them as "not measured" with that reason
    unmeasured: dict[str, str] = field(default_factory=dict)

    def checks(self) -> dict[str, tuple[Step, Check]]:
        return {c.finding: (s, c) for s in self.steps for c in s.checks}


@dataclass(frozen=True)
class PlannedStep:
    step: Step
    spec: ExperimentSpec
    plan: Plan


def plan_path(study: str) -> Path:
    return PLANS / f"{study.lower()}.toml"


def load_plan(study: str) -> StudyPlan:
    path = plan_path(study)
    file = str(path)
    try:
        doc = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SpecError(file, "(file)", file, f"no plan for study {study}") from None
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
    return StudyPlan(study, file, tuple(steps), unmeasured)


def _check(raw: Mapping[str, Any], file: str, where: str) -> Check:
    for key in ("finding", "metric", "a", "b"):
        if key not in raw:
            raise SpecError(file, f"{where}.{key}", None, "missing")
    if raw["metric"] not in METRICS:
        raise SpecError(file, f"{where}.metric", raw["metric"],
                        f"expected one of {', '.join(METRICS)}")
    extra = set(raw) - {"finding", "metric", "a", "b", "note"}
    if extra:
        raise SpecError(file, f"{where}.{sorted(extra)[0]}", raw[sorted(extra)[0]],
                        "unknown key (expected finding, metric, a, b, note)")
    return Check(raw["finding"], raw["metric"], flatten(raw["a"]), flatten(raw["b"]),
                 raw.get("note", ""))


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
            for side in ("a", "b"):
                found = [t for t in made.trials if check.selects(side, t, registry)]
                if len(found) != 1:
                    raise SpecError(file, f"check[{j}].{side}", getattr(check, side),
                                    f"matches {len(found)} trials of {step.name}; a "
                                    "selector must match exactly one")
        out.append(PlannedStep(step, spec, made))
    return out
