"""Plan: expand the matrix into trials with stable ids, check every trial's knobs, then
interleave repetitions (validate.py then checks a plan whole before any server starts).

A knob the user sets may not act in every trial: `nginx.tcp_nopush` acts only with
`nginx.sendfile` on, `apache.mpm` only where the stack has Apache. Set where it cannot act
in *some* trials, it is kept (the config says it) and the plan carries a note; where it
cannot act in *any* trial, the spec is refused. Trials that differ only in knobs that cannot
act in them (a link rate on loopback) would measure the same thing twice: they are folded
into one, and the plan says which. Which knobs act when is the knobs' own knowledge
(`acts_with` in the registry), and for rules beyond "A acts only when B has value V", the
components' (`inert(knobs)`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Protocol, Sequence

from ..measure.drive import LOAD_KNOBS, PROTOCOL_NEEDS, conditional_conflict, protocol_conflict
from ..errors import SpecError
from ..knobs import KnobRegistry
from .spec import Experiment, ExperimentSpec

# Knob owners that apply to every trial, whatever its stack: the load engine, the
# network the stack and the engine meet over, the docroot's filesystem, the machine.
LAB_OWNERS = ("load", "net", "fs", "machine")


def lab_condition(key: str) -> bool:
    """A knob of the lab's conditions (`net.*`, `fs.*`, `machine.*`, `load.*`): what the
    stack was measured under, never a setting of the server to recommend or export."""
    return key.split(".", 1)[0] in LAB_OWNERS


# A trial's label says a load knob only away from its default (an axis of any of them,
# load.keepalive or load.agents as much as load.protocol, would otherwise give trials the
# same label), so labels of trials that leave the load alone stay short.
LOAD_DEFAULTS = {f"load.{k.name}": k.default for k in LOAD_KNOBS}
# Seconds a run costs beyond warm-up and load (start, readiness, verify, stop) where no
# stored run of the stack says otherwise (RunOverhead): nginx took 0.5-1.7 s here, a stack
# with PHP and a database about 4 s (commands/study.py's BREAKDOWN_STACK_S).
RUN_OVERHEAD_S = 1.5
# Seconds an experiment costs before its first run: the components' versions, the lab's
# checks, the database.
EXPERIMENT_OVERHEAD_S = 2.0


@dataclass(frozen=True)
class RunOverhead:
    """What a run costs beyond its warm-up and load, in seconds: per stack as the stored
    runs of this host measured it (`runs` of them), else `default_s`."""

    default_s: float = RUN_OVERHEAD_S
    by_stack: Mapping[str, float] = field(default_factory=dict, hash=False)
    runs: int = 0

    def of(self, stack: str) -> float:
        return self.by_stack.get(stack, self.default_s)


@dataclass(frozen=True)
class TimeEstimate:
    """How long an experiment takes: `typical_s` its planned runs, each with its start,
    verification and stop; `most_s` also every run a busy host may have measured again
    (`remeasure` a trial), each after `wait_s` (--wait-quiet's longest wait)."""

    typical_s: float
    most_s: float
    overhead: RunOverhead
    wait_s: float = 0.0
    searches: bool = False     # capacity searches: `most_s` has each at its longest


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

    def requests(self, experiment: Experiment) -> int | None:
        """How many requests a run of this trial makes: the experiment's count, or c ×
        its requests_per_connection; None for a run of a fixed duration."""
        per = experiment.requests_per_connection
        return experiment.requests or (per * self.concurrency if per else None)

    def label(self) -> str:
        parts = [self.stack, self.workload, f"c={self.concurrency}"]
        parts += [f"{k}={v}" for k, v in self.knobs
                  if k not in LOAD_DEFAULTS or LOAD_DEFAULTS[k] != v]
        return " ".join(parts)


@dataclass(frozen=True)
class PlannedRun:
    trial: Trial
    repetition: int   # 1-based


@dataclass(frozen=True)
class Plan:
    trials: tuple[Trial, ...]
    runs: tuple[PlannedRun, ...]
    notes: tuple[str, ...] = ()   # knobs set where they cannot act in some trials

    def estimated_s(self, spec: ExperimentSpec) -> float:
        """`estimate`'s typical time."""
        return self.estimate(spec).typical_s

    def estimate(self, spec: ExperimentSpec, overhead: RunOverhead = RunOverhead(),
                 wait_s: float = 0.0) -> TimeEstimate:
        """Every run's warm-up, load and overhead (its stack's), after the experiment's
        own start; a `requests` run paced by load.rate takes requests / rate (an unpaced
        one is guessed at 5 s); a capacity search at most its steps (fewer when it
        resolves early). At most, each trial also has `remeasure` runs measured again."""
        e = spec.experiment

        def run_s(trial: Trial) -> float:
            if (c := spec.capacity) is not None:
                # a search: the probe, its steps, three profile steps, the confirmation
                load = (1 + c.max_steps + 3) * (c.step + e.warmup) + (e.duration or 0.0)
            else:
                rate = dict(trial.knobs).get("load.rate")
                requests = trial.requests(e)
                load = (requests / rate if requests and rate else (e.duration or 5.0)
                        ) + e.warmup
            return load + overhead.of(trial.stack)
        typical = EXPERIMENT_OVERHEAD_S + sum(run_s(r.trial) for r in self.runs)
        again = sum(e.remeasure * (run_s(t) + wait_s) for t in self.trials)
        if (c := spec.capacity) is not None:    # every search at its longest
            longest = c.most_s(e.duration or 0.0, e.warmup)
            again += sum(max(0.0, longest + overhead.of(r.trial.stack) - run_s(r.trial))
                         for r in self.runs)
        return TimeEstimate(typical, typical + again, overhead, wait_s,
                            spec.capacity is not None)

    def max_runs(self, spec: ExperimentSpec) -> int:
        e = spec.experiment
        return len(self.trials) * (e.max_repetitions if e.auto else e.repetitions)

    def components(self, stacks: Mapping[str, StackInfo]) -> tuple[str, ...]:
        """Every component some trial starts, sorted by name."""
        return tuple(sorted({c for t in self.trials for c in stacks[t.stack].components}))


class StackInfo(Protocol):
    name: str
    components: tuple[str, ...]
    knob_owners: tuple[str, ...]
    knobs: dict[str, Any]
    defaults: dict[str, Any]

    def layout_inert(self) -> dict[str, str]: ...


def expand(spec: ExperimentSpec, stacks: Mapping[str, StackInfo]) -> list[Trial]:
    """Cartesian product of the axes, minus exclusions; knobs that do not apply to a
    trial's stack are dropped, and trials that then coincide are kept once. An exclusion
    that removes nothing is refused: it matches no point, or every point it matches is a
    trial that runs anyway. A rule that only repeats what others exclude is harmless and
    stays (S3's plan spells out each case)."""
    names = list(spec.axes)
    measure = tuple(sorted(spec.measure.items()))
    trials: dict[str, Trial] = {}
    hit: list[set[str]] = [set() for _ in spec.exclude]    # trial ids rule i excludes
    for values in itertools.product(*(spec.axes[n] for n in names)):
        point = dict(zip(names, values))
        matched = [i for i, rule in enumerate(spec.exclude)
                   if all(point.get(k) == v for k, v in rule.items())]
        trial = _trial(spec, stacks[point["stack"]], point, measure, check=not matched)
        for i in matched:
            hit[i].add(trial.id)
        if not matched:
            trials.setdefault(trial.id, trial)
    if not trials:
        raise SpecError(spec.path, "matrix.exclude", list(spec.exclude),
                        "excludes every point of the matrix: nothing would run")
    for i, ids in enumerate(hit):
        if ids <= trials.keys():
            raise SpecError(spec.path, f"matrix.exclude[{i}]", spec.exclude[i],
                            "excludes no trial: it matches no point of the matrix, or "
                            "every point it matches is a trial that runs anyway (a knob "
                            "a stack lacks is dropped from its trials)")
    return list(trials.values())


def _trial(spec: ExperimentSpec, stack: StackInfo, point: dict[str, Any],
           measure: tuple, check: bool) -> Trial:
    """The trial at one point of the matrix, with the knobs that apply to its stack;
    with `check`, knob values the stack cannot take are refused."""
    applies = set(stack.knob_owners) | set(LAB_OWNERS)
    knobs = {**spec.fixed_knobs, **{k: v for k, v in point.items() if "." in k}}
    knobs = {k: v for k, v in knobs.items() if k.split(".", 1)[0] in applies}
    if check:
        for key, value in knobs.items():
            if problem := fixed_conflict(stack, key, value):
                raise SpecError(spec.path, key, value, problem)
        conditional = knobs.get("load.conditional", "none")
        if problem := conditional_conflict(knobs.get("load.headers", []), conditional):
            raise SpecError(spec.path, where(spec, "load.conditional"), conditional, problem)
    return Trial(point["stack"], point["workload"], point["concurrency"],
                 tuple(sorted(knobs.items())), measure)


def fixed_conflict(stack: StackInfo, key: str, value: Any) -> str | None:
    """Why knob `key` cannot take `value` on `stack` (the stack fixes it), or None."""
    if key in stack.knobs and stack.knobs[key] != value:
        return f"stack {stack.name!r} fixes {key} = {stack.knobs[key]!r}"
    return None


def interleave(trials: list[Trial], repetitions: int) -> list[PlannedRun]:
    """Rounds of every trial once (A B C, C A B, …), not A A B B C C: drift of the machine
    spreads over every trial, and two trials' runs of one round ran close together, so a
    comparison pairs them (stats.paired_log). Each round's order is drawn anew
    (round_order), so a run's place in its round (first after the previous round's
    writeback, last before the next) favours no trial."""
    return [PlannedRun(t, rep) for rep in range(1, repetitions + 1)
            for t in round_order(trials, rep)]


def round_order(trials: Sequence[Trial], repetition: int) -> list[Trial]:
    """The trials in round `repetition`'s order: a permutation seeded by the round and the
    trials' ids, so a resume and a dry run plan the same order."""
    seed = hashlib.sha256(f"{repetition}:{','.join(t.id for t in trials)}".encode())
    order = list(trials)
    random.Random(seed.digest()).shuffle(order)
    return order


def effective_knobs(registry: KnobRegistry, stack: StackInfo,
                    trial: Trial) -> dict[str, dict[str, Any]]:
    """owner → {knob: value}: declared defaults < the stack's defaults < the trial's
    values < what the stack fixes."""
    owners = stack.knob_owners + LAB_OWNERS
    knobs = {owner: registry.defaults(owner) for owner in owners}
    for key, value in [*stack.defaults.items(), *trial.knobs, *stack.knobs.items()]:
        owner, name = key.split(".", 1)
        knobs[owner][name] = value
    return knobs


# A component's rule: effective knobs (owner → {name: value}) → {knob key: why it is inert}.
InertRule = Callable[[dict[str, dict[str, Any]]], dict[str, str]]
# A front's rule: its knobs and load.protocol → why the load cannot speak it there, or None.
ProtocolRule = Callable[[dict[str, Any], str], str | None]


def make_plan(spec: ExperimentSpec, stacks: Mapping[str, StackInfo],
              registry: KnobRegistry | None = None,
              rules: Mapping[str, InertRule] | None = None,
              fronts: Mapping[str, ProtocolRule] | None = None) -> Plan:
    """Trials, runs and notes; raises SpecError for a plan that cannot run as written.
    `registry`, `rules` and `fronts` default to the lab's own (stacks.REGISTRY, whose
    knobs say when they act, each component's `inert` and `protocol_problem`)."""
    if registry is None or rules is None:
        lab_registry, lab_rules = _lab()
        registry = lab_registry if registry is None else registry
        rules = lab_rules if rules is None else rules
    trials = implied_by_protocol(spec, stacks, expand(spec, stacks), registry)
    check_stack_knobs(spec, stacks, trials, registry)
    check_protocols(spec, stacks, trials, registry,
                    _lab_fronts() if fronts is None else fronts)
    notes = inert_notes(spec, stacks, trials, registry, rules)
    trials, folded = fold_inert(stacks, trials, registry, rules)
    return Plan(tuple(trials), tuple(interleave(trials, spec.experiment.first_repetitions)),
                tuple(notes + folded))


def check_stack_knobs(spec: ExperimentSpec, stacks: Mapping[str, StackInfo],
                      trials: list[Trial], registry: KnobRegistry) -> None:
    """A knob that stacks set themselves (nginx.php, apache.php_handler, …) may not be set
    away from its default on a stack that does not: its config would lack the backend."""
    setters: dict[str, list[str]] = {}
    for stack in stacks.values():
        for key in stack.knobs:
            setters.setdefault(key, []).append(stack.name)
    for trial in trials:
        stack = stacks[trial.stack]
        for key, value in trial.knobs:
            knob = registry.get(key)
            if key in setters and key not in stack.knobs and knob and value != knob.default:
                use = [n for n in setters[key] if stacks[n].knobs[key] == value]
                hint = (f"use a stack that sets it: {', '.join(use)}" if use else
                        f"no stack sets it to {value!r}")
                raise SpecError(spec.path, where(spec, key), value,
                                f"set by the stack itself, and stack {trial.stack!r} does "
                                f"not set it; {hint}")


def implied_by_protocol(spec: ExperimentSpec, stacks: Mapping[str, StackInfo],
                        trials: list[Trial], registry: KnobRegistry) -> list[Trial]:
    """Each trial's front set as its load.protocol needs it, where the spec says nothing
    of that knob (neither an axis nor a fixed value): load.protocol = ["http/1.1", "h2",
    "h2c"] alone gives each protocol its server settings, with no exclude rules to copy.
    A knob the spec does set is left as written (check_protocols then refuses a
    combination that cannot be spoken, and says the rule that leaves it out)."""
    said = set(spec.axes) | set(spec.fixed_knobs)
    out: dict[str, Trial] = {}
    for trial in trials:
        knobs = dict(trial.knobs)
        stack = stacks[trial.stack]
        front = stack.components[0]
        for name, value in PROTOCOL_NEEDS.get(knobs.get("load.protocol", ""), {}).items():
            key = f"{front}.{name}"
            knob = registry.get(key)
            if key in said or knob is None:
                continue
            if stack.knobs.get(key, stack.defaults.get(key, knob.default)) != value:
                knobs[key] = value       # only what differs: the trial's id stays its own
        implied = replace(trial, knobs=tuple(sorted(knobs.items())))
        out.setdefault(implied.id, implied)
    return list(out.values())


def check_protocols(spec: ExperimentSpec, stacks: Mapping[str, StackInfo],
                    trials: list[Trial], registry: KnobRegistry,
                    fronts: Mapping[str, ProtocolRule]) -> None:
    """load.protocol is one the stack's front can be spoken to with its knobs (h2 needs
    its tls on, h2c its tls off, either its http2 knob on: the front's own rule) and
    goes with the other load knobs; refused naming load.protocol, its value and the
    trial, before any server starts."""
    for trial in trials:
        stack = stacks[trial.stack]
        knobs = effective_knobs(registry, stack, trial)
        protocol = knobs["load"].get("protocol", "http/1.1")
        front = stack.components[0]
        problem = protocol_conflict(knobs["load"])
        if not problem and front in fronts:
            problem = fronts[front](knobs[front], protocol)
        if problem:
            hint = _exclude_hint(spec, trial, front)
            raise SpecError(spec.path, where(spec, "load.protocol"), protocol,
                            f"{problem} (trial {trial.label()}){hint}")


def _exclude_hint(spec: ExperimentSpec, trial: Trial, front: str) -> str:
    """Where axes meet in a combination that cannot be spoken (load.protocol = ["h2",
    "h2c"] × nginx.tls = [true, false]), no one value is wrong: the fix is to leave that
    combination out, and this says the rule that would."""
    values = dict(trial.knobs)
    keys = [k for k in spec.axes if k in values and k.split(".", 1)[0] in ("load", front)]
    stacks = len(spec.axes.get("stack", ())) > 1
    if len(keys) + stacks < 2:
        return ""
    parts = [f"stack = {_toml(trial.stack)}"] * stacks
    parts += [f"{k} = {_toml(values[k])}" for k in keys]
    return f"; or leave such trials out: exclude = [{{ {', '.join(parts)} }}] in [matrix]"


def _toml(value: Any) -> str:
    """A scalar as an experiment file writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value) if isinstance(value, str) else str(value)


def inert_notes(spec: ExperimentSpec, stacks: Mapping[str, StackInfo], trials: list[Trial],
                registry: KnobRegistry, rules: Mapping[str, InertRule]) -> list[str]:
    """For every knob the spec sets: the trials where it cannot act. In all of them: a
    SpecError saying why; in some: a note."""
    keys = [*spec.fixed_knobs, *(k for k in spec.axes if "." in k)]
    absent, inert = _where_inert(keys, stacks, trials, registry, rules)
    notes, only = [], {}    # only: owner -> (knobs, stacks without it), one note each
    for key in keys:
        count = len(absent[key]) + len(inert[key])
        if not count:
            continue
        value = list(spec.axes[key]) if key in spec.axes else spec.fixed_knobs[key]
        owner = key.split(".", 1)[0]
        reasons = list(dict.fromkeys(inert[key]))
        if count == len(trials):
            if absent[key]:
                reasons.insert(0, f"no {owner} in stack "
                                  f"{', '.join(dict.fromkeys(absent[key]))}")
            said = (f"no stack in the matrix has {owner}" if not inert[key] else
                    "; ".join(reasons))
            raise SpecError(spec.path, where(spec, key), value,
                            f"inert in every trial of the matrix: {said}")
        if inert[key]:
            with_owner = len(trials) - len(absent[key])
            notes.append(f"{key} = {value!r} cannot act in {len(inert[key])} of {with_owner} "
                         f"trials with {owner} ({'; '.join(reasons)}); it is applied where "
                         "it can")
        if absent[key]:
            knobs_of, without = only.setdefault(owner, ([], []))
            knobs_of.append(key)
            without.extend(s for s in absent[key] if s not in without)
    for owner, (knobs_of, without) in only.items():
        notes.append(f"{', '.join(knobs_of)}: only in the trials with {owner} (not in "
                     f"{', '.join(without)})")
    return notes


def _where_inert(keys: list[str], stacks: Mapping[str, StackInfo], trials: list[Trial],
                 registry: KnobRegistry, rules: Mapping[str, InertRule]
                 ) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Per knob key: the stacks of the trials without its owner, and why it cannot act in
    each other trial where it cannot."""
    absent: dict[str, list[str]] = {key: [] for key in keys}
    inert: dict[str, list[str]] = {key: [] for key in keys}
    for trial in trials:
        stack = stacks[trial.stack]
        owners = set(stack.knob_owners) | set(LAB_OWNERS)
        why = inert_in(trial, stack, registry, rules)
        for key in keys:
            if key.split(".", 1)[0] not in owners:
                absent[key].append(trial.stack)
            elif key in why:
                inert[key].append(why[key])
    return absent, inert


def inert_in(trial: Trial, stack: StackInfo, registry: KnobRegistry,
             rules: Mapping[str, InertRule]) -> dict[str, str]:
    """{knob key: why it cannot act} in this trial: by the knobs' own `acts_with`, the
    stack's layout and its components' rules."""
    knobs = effective_knobs(registry, stack, trial)
    why = registry.inert(knobs) | stack.layout_inert()
    for component in stack.components:
        if component in rules:
            why |= rules[component](knobs)
    # A knob it needs whose value the stack gave, not the spec (a stack built on one
    # process model): say so, since the spec never set it.
    given = dict(trial.knobs)
    from_stack = {k: v for k, v in stack.defaults.items() if k not in given} | stack.knobs
    for key in why:
        knob = registry.get(key)
        owner = key.split(".", 1)[0]
        needed = [f"{owner}.{name}" for name in (knob.acts_with if knob else ())]
        said = [f"{k} = {from_stack[k]!r}" for k in needed if k in from_stack]
        if said:
            why[key] += f" (stack {trial.stack} runs {', '.join(said)})"
    return why


def fold_inert(stacks: Mapping[str, StackInfo], trials: list[Trial],
               registry: KnobRegistry, rules: Mapping[str, InertRule]
               ) -> tuple[list[Trial], list[str]]:
    """Trials that differ only in knobs that cannot act in them measure the same thing
    (net.link on loopback): each such group is planned once, as its trial whose inert
    knobs are at their defaults (else the first), with a note naming what was folded."""
    groups: dict[tuple, list[Trial]] = {}
    why: dict[str, dict[str, str]] = {}
    for trial in trials:
        inert = inert_in(trial, stacks[trial.stack], registry, rules)
        why[trial.id] = {k: inert[k] for k, _ in trial.knobs if k in inert}
        acting = tuple((k, json.dumps(v)) for k, v in trial.knobs if k not in inert)
        key = (trial.stack, trial.workload, trial.concurrency, trial.measure, acting)
        groups.setdefault(key, []).append(trial)
    kept, notes = [], []
    for group in groups.values():
        if len(group) == 1:
            kept.append(group[0])
            continue
        reasons = {k: v for t in group for k, v in why[t.id].items()}
        differ = _folded_values(group, reasons)
        stack = stacks[group[0].stack]
        keep = next((t for t in group if all(dict(t.knobs)[k] == _unset(stack, registry, k)
                                             for k in differ)), group[0])
        kept.append(keep)
        notes.append(_fold_note(keep, differ, reasons, len(group)))
    return kept, notes


def _folded_values(group: list[Trial], why: dict[str, str]) -> dict[str, list]:
    """The inert knobs whose values differ within a group: key -> its values."""
    values: dict[str, list] = {}
    for trial in group:
        for key, value in trial.knobs:
            if key in why and value not in values.setdefault(key, []):
                values[key].append(value)
    return {k: v for k, v in values.items() if len(v) > 1}


def _unset(stack: StackInfo, registry: KnobRegistry, key: str) -> Any:
    """The value knob `key` has on `stack` where a trial does not set it."""
    knob = registry.get(key)
    return stack.defaults.get(key, knob.default if knob else None)


def _fold_note(keep: Trial, differ: dict[str, list], why: dict[str, str], n: int) -> str:
    """Which knobs' values were folded, why they cannot act, and the trial measured."""
    said = "; ".join(f"{k} = {', '.join(map(repr, v))}: {why[k]}" for k, v in differ.items())
    return (f"{n} trials of {keep.stack} {keep.workload} c={keep.concurrency} "
            f"differ only in knobs that cannot act there ({said}): measured once, as "
            f"{keep.label()} (trial {keep.id})")


def where(spec: ExperimentSpec, key: str) -> str:
    """The key path in the experiment file that sets knob `key`."""
    if key in spec.axes:
        return f"matrix.{key}"
    return key if key.startswith("load.") else f"knobs.{key}"


def _lab() -> tuple[KnobRegistry, dict[str, InertRule]]:
    from ..stacks import COMPONENTS, REGISTRY
    return REGISTRY, {name: c.inert for name, c in COMPONENTS.items()}


def _lab_fronts() -> dict[str, ProtocolRule]:
    from ..stacks import COMPONENTS
    return {name: c.protocol_problem for name, c in COMPONENTS.items()}
