"""Validate a plan whole before any server starts: every command that measures calls
validate_plan (run, run --dry-run, breakdown, dbbench), and what it refuses names the
value at fault where it was given (an experiment file, a command line)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Literal, Protocol

from ..measure.drive import engine_path
from ..errors import SpecError, StacklabError
from .layers import problems
from ..experiment.plan import Plan, Trial, effective_knobs
from ..host.procs import connections_problem
from ..experiment.spec import ExperimentSpec
from ..workloads import WORKLOADS

# What a trial's problem is about: its workload, its concurrency, or a component's knobs.
Field = Literal["workload", "concurrency", "component"]


class Origin(Protocol):
    """Where a plan's values were given (an experiment file, a command line): a problem
    found in a trial becomes the error that names the value there."""

    def refuse(self, trial: Trial, field: Field, value: Any, problem: str) -> StacklabError: ...


@dataclass(frozen=True)
class SpecOrigin:
    """A plan expanded from an experiment file: errors name the file, key and value."""

    spec: ExperimentSpec

    def refuse(self, trial: Trial, field: Field, value: Any, problem: str) -> SpecError:
        path = self.spec.path
        if field == "workload":
            return SpecError(path, "matrix.workload", value, f"{problem} (exclude the "
                             "combination or pick another stack)")
        if field == "concurrency":
            return SpecError(path, "matrix.concurrency", value, problem)
        return SpecError(path, f"trial {trial.label()}", trial.id, problem)


def validate_plan(plan: Plan, origin: Origin) -> None:
    """Refuse a plan that cannot run as planned, before any server starts, naming the value
    at fault where `origin` says it was given: in every trial, the stack runs what the
    workload needs, the engine can hold its connections, the stack accepts its knobs (each
    component its own, each front layer what is behind it), and each of the run's layers
    what it is asked (its plan rule: Layer.problem, every layer of a run asked through
    runner.plan_rules)."""
    from .runner import plan_rules
    from .stack import StackLayer
    from ..stacks import REGISTRY, STACKS, needs_problem
    rules = plan_rules()          # which layers have a rule: the same for every trial
    for trial in plan.trials:
        stack = STACKS[trial.stack]
        # a stack that serves its own content (a server stacklab did not start) runs
        # no deployed workload, so it needs nothing of one
        needs = WORKLOADS[trial.workload].needs if trial.workload in WORKLOADS else ()
        if problem := needs_problem(trial.stack, needs):
            raise origin.refuse(trial, "workload", trial.workload, problem)
        if problem := connections_problem(trial.concurrency):
            raise origin.refuse(trial, "concurrency", trial.concurrency, problem)
        knobs = effective_knobs(REGISTRY, stack, trial)
        if found := StackLayer.refusal(stack, knobs):
            raise origin.refuse(trial, "component", *found)
        if found := problems(rules, knobs):
            raise origin.refuse(trial, "component", *found)


def check_installed(components: Iterable[str], engine: bool) -> None:
    """What a command is about to start is on this machine: each component's binary (the
    error names its apt package) and, for a command that drives load, the engine."""
    from ..stacks import COMPONENTS
    for name in components:
        comp = COMPONENTS[name]
        if not comp.installed():
            raise StacklabError(f"{name} is not installed ({comp.binary} missing): "
                                f"apt-get install {comp.package}")
    if engine:
        engine_path()
