"""Plan: expand the matrix into trials with stable ids, then interleave repetitions."""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

from .errors import SpecError
from .knobs import KnobRegistry
from .spec import ExperimentSpec

# Seconds a run costs beyond warm-up and load: start, readiness, verify, stop.
RUN_OVERHEAD_S = 1.5


@dataclass(frozen=True)
class Trial:
    """One point of the matrix: what is measured, independent of repetition."""

    stack: str
    workload: str
    concurrency: int
    knobs: tuple[tuple[str, Any], ...]      # explicit knob values that apply to this stack
    measure: tuple[tuple[str, Any], ...]    # duration_s / requests / warmup_s
    id: str = field(init=False)

    def __post_init__(self) -> None:
        canon = json.dumps(self.definition(), sort_keys=True, separators=(",", ":"))
        object.__setattr__(self, "id", hashlib.sha256(canon.encode()).hexdigest()[:12])

    def definition(self) -> dict[str, Any]:
        return {"stack": self.stack, "workload": self.workload,
                "concurrency": self.concurrency, "knobs": dict(self.knobs),
                "measure": dict(self.measure)}

    def label(self) -> str:
        parts = [self.stack, self.workload, f"c={self.concurrency}"]
        parts += [f"{k}={v}" for k, v in self.knobs if not k.startswith("load.")]
        return " ".join(parts)


@dataclass(frozen=True)
class PlannedRun:
    trial: Trial
    repetition: int   # 1-based


@dataclass(frozen=True)
class Plan:
    trials: tuple[Trial, ...]
    runs: tuple[PlannedRun, ...]

    def estimated_s(self, spec: ExperimentSpec) -> float:
        """Every run's warm-up, load and overhead; a `requests` run paced by load.rate
        takes requests / rate (an unpaced one is guessed at 5 s)."""
        e = spec.experiment

        def load_s(trial: Trial) -> float:
            rate = dict(trial.knobs).get("load.rate")
            return e.requests / rate if e.requests and rate else (e.duration or 5.0)
        return sum(load_s(r.trial) + e.warmup + RUN_OVERHEAD_S for r in self.runs)

    def max_runs(self, spec: ExperimentSpec) -> int:
        e = spec.experiment
        return len(self.trials) * (e.max_repetitions if e.auto else e.repetitions)


class StackInfo(Protocol):
    knob_owners: tuple[str, ...]
    knobs: dict[str, Any]
    defaults: dict[str, Any]


def expand(spec: ExperimentSpec, stacks: Mapping[str, StackInfo]) -> list[Trial]:
    """Cartesian product of the axes, minus exclusions; knobs that do not apply to a
    trial's stack are dropped, and trials that then coincide are kept once."""
    names = list(spec.axes)
    measure = tuple(sorted(spec.measure.items()))
    trials: dict[str, Trial] = {}
    for values in itertools.product(*(spec.axes[n] for n in names)):
        point = dict(zip(names, values))
        if any(all(point.get(k) == v for k, v in rule.items()) for rule in spec.exclude):
            continue
        stack = stacks[point["stack"]]
        applies = set(stack.knob_owners) | {"load"}
        knobs = {**spec.fixed_knobs, **{k: v for k, v in point.items() if "." in k}}
        knobs = {k: v for k, v in knobs.items() if k.split(".", 1)[0] in applies}
        for key, value in knobs.items():
            if key in stack.knobs and stack.knobs[key] != value:
                raise SpecError(spec.path, key, value, f"stack {point['stack']!r} fixes "
                                f"{key} = {stack.knobs[key]!r}")
        trial = Trial(point["stack"], point["workload"], point["concurrency"],
                      tuple(sorted(knobs.items())), measure)
        trials.setdefault(trial.id, trial)
    return list(trials.values())


def interleave(trials: list[Trial], repetitions: int) -> list[PlannedRun]:
    """A B C A B C …, not A A B B C C: drift of the machine spreads over every trial."""
    return [PlannedRun(t, rep) for rep in range(1, repetitions + 1) for t in trials]


def effective_knobs(registry: KnobRegistry, stack: StackInfo,
                    trial: Trial) -> dict[str, dict[str, Any]]:
    """owner → {knob: value}: declared defaults < the stack's defaults < the trial's
    values < what the stack fixes."""
    owners = stack.knob_owners + ("load",)
    knobs = {owner: registry.defaults(owner) for owner in owners}
    for key, value in [*stack.defaults.items(), *trial.knobs, *stack.knobs.items()]:
        owner, name = key.split(".", 1)
        knobs[owner][name] = value
    return knobs


def make_plan(spec: ExperimentSpec, stacks: Mapping[str, StackInfo]) -> Plan:
    trials = expand(spec, stacks)
    return Plan(tuple(trials), tuple(interleave(trials, spec.experiment.first_repetitions)))
