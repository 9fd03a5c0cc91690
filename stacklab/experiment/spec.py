"""Experiment file (TOML) → ExperimentSpec. Every error names the file, key path and value."""

from __future__ import annotations

import math
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import (BaseModel, ConfigDict, Field, ValidationError, ValidationInfo,
                      field_validator)

from ..errors import SpecError, plain_text
from ..host.regular import NotRegular, read_regular
from .gate import KEYS as GATE_KEYS, Gate, parse_limit
from .slo import Slo, parse_error_rate, parse_slo
from .sizes import parse_mib
from .tunespace import SpaceError, dimensions
from ..knobs import ItemError, KnobRegistry
from ..workloads import canonical
from ..workloads.accesslog import resolve_replay

AXES = ("stack", "workload", "concurrency")
# [external]: a server the user runs (stacks/external). Its keys are the external
# component's knobs; `watch` is written as a table ({ pid = N }, { cgroup = "..." },
# { unit = "..." }) and kept as the knob's "kind:value".
EXTERNAL = "external"
EXTERNAL_KEYS = ("url", "paths", "weights", "watch")
WATCH_KINDS = {"pid": int, "cgroup": str, "unit": str}
OBSERVED = (f"{EXTERNAL}.watch",)      # ExperimentSpec.observe: outside trial ids
# The lab's conditions act on servers it starts (their namespace, docroot, cgroup): none
# can act on a server it did not start.
LAB_CONDITIONS = ("net.", "fs.", "machine.")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
# The shortest load the lab can measure: the monitor samples every 100 ms (monitor.py),
# and the engine itself has no floor, so 1 ms of load was a failed run that exited 0.
MIN_DURATION_S = 0.1
# The longest duration or warm-up, and the most requests, a run may ask for: beyond a
# day nothing is a benchmark run any more, and a value like 1e308 s overflowed only
# after the servers had started.
MAX_DURATION_S = 24 * 3600.0
MAX_REQUESTS = 1_000_000_000   # a day at 11,600 req/s; the engine's count stays exact
# The most trials a matrix may hold, counted by multiplying the axes' lengths before
# the product is built: 6.4 M trials were still being planned after 180 s at 2 GB.
MAX_TRIALS = 10_000
# The largest experiment file read: checked before reading, so /dev/zero cannot fill
# the memory; the presets are a few KiB.
MAX_FILE_BYTES = 1 << 20


def parse_duration(value: Any) -> float:
    """'500ms', '5s', '2m', 3 → seconds. Raises ValueError. A string must name its unit:
    "2000" read as 2000 s was meant as 2 s as often as not."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (m := _DURATION.match(value)):
        if m.group(2) is None:
            number = m.group(1)
            raise ValueError(f"{number!r} has no unit: write it with one, "
                             f"'{number}ms' or '{number}s'")
        seconds = float(m.group(1)) * _UNIT_S[m.group(2)]
    else:
        raise ValueError("expected a duration such as '500ms', '5s' or '2m'")
    if not math.isfinite(seconds):
        raise ValueError("a duration must be a finite number")
    if seconds < 0:
        raise ValueError("a duration cannot be negative")
    return seconds


class StackNames(Protocol):
    """The stacks an experiment may name (stacks.STACKS): named ones and compositions."""

    def canonical(self, text: str) -> str: ...   # ValueError: why it is no stack


AUTO_FIRST = 6     # repetitions = "auto": rounds measured before the first look
MARGINS = (0.005, 0.5)   # what `margin` may be: ±0.5% to ±50%


def read_margin(v: Any) -> Any:
    """experiment.margin or compare --margin: "5%" or 0.05 (ValueError says what is
    expected); a bare number above 0.5 would be a percent meant (5 for 5%)."""
    if isinstance(v, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*%\s*", v)
        if not m:
            try:
                number = float(v)
            except ValueError:
                raise ValueError(f'expected a percent such as "5%" or a fraction such as '
                                 f'0.05, not {v!r}') from None
            return read_margin(number)
        v = float(m.group(1)) / 100
    elif isinstance(v, (int, float)) and not isinstance(v, bool) and v > MARGINS[1]:
        raise ValueError(f'{v:g} would be {v:g}× (a fraction): write "{v:g}%" for a '
                         f"percent, or a fraction {MARGINS[0]}..{MARGINS[1]}")
    if isinstance(v, (int, float)) and not isinstance(v, bool) and not (
            MARGINS[0] <= v <= MARGINS[1]):
        raise ValueError(f"a margin is {MARGINS[0]:.1%}..{MARGINS[1]:.0%}, not {v:.2%}")
    return float(v) if isinstance(v, int) and not isinstance(v, bool) else v


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Experiment(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    description: str = ""
    _description = field_validator("description")(plain_text)
    repetitions: int | Literal["auto"] = "auto"   # a spec may fix a count
    ci_target: float = Field(0.03, gt=0, lt=1)     # auto: stop at this CI half-width…
    max_repetitions: int = Field(10, ge=3, le=100)  # …or at this many repetitions
    duration: float | None = None
    requests: int | None = Field(None, ge=1, le=MAX_REQUESTS)
    # requests in proportion to the concurrency: c × this many per run (S5 sent c × 52),
    # so every connection makes as many requests at every level
    requests_per_connection: int | None = Field(None, ge=1, le=MAX_REQUESTS)
    warmup: float = 1.0
    seed: int = Field(1, ge=0, le=2**63 - 1)   # the engine's URL choice and the corpora
    keep_cpus_awake: bool = True   # hold /dev/cpu_dma_latency at 0 (see systune.py)
    # Runs of one trial measured again because the host disturbed them (flags.DISTURBED:
    # host-busy, io-pressure); the disturbed run stays stored and is set aside. Not part
    # of a trial's definition: it changes which runs are made, not what they measure.
    remeasure: int = Field(2, ge=0, le=20)
    # Two trials are "the same" only when the interval of their ratio lies within
    # ±margin of 1 ("5%" or 0.05); not part of a trial's definition (it judges, it
    # measures nothing), so a changed margin judges stored runs anew.
    margin: float = Field(0.05, ge=0.005, le=0.5)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if v.isdigit():   # a number names an experiment by id on the command line
            raise ValueError("a name cannot be only digits (those are experiment ids)")
        return v

    @field_validator("repetitions", mode="before")
    @classmethod
    def _repetitions(cls, v: Any) -> Any:
        if v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 100):
            return v
        raise ValueError('expected an integer 1..100 or "auto"')

    @field_validator("margin", mode="before")
    @classmethod
    def _margin(cls, v: Any) -> Any:
        return read_margin(v)

    @field_validator("max_repetitions")
    @classmethod
    def _max_repetitions(cls, v: int, info: ValidationInfo) -> int:
        if info.data.get("repetitions", "auto") == "auto" and v < 6:
            raise ValueError('with repetitions = "auto" it must be at least 6 (auto '
                             "starts with 6 rounds)")
        return v

    @property
    def auto(self) -> bool:
        return self.repetitions == "auto"

    @property
    def first_repetitions(self) -> int:
        """Repetitions planned up front: auto starts with 6 (fewer cannot give a 95%
        interval for a median) and adds rounds as needed."""
        return AUTO_FIRST if self.auto else self.repetitions

    @field_validator("duration", "warmup", mode="before")
    @classmethod
    def _duration(cls, v: Any, info: ValidationInfo) -> Any:
        """Bounded on both sides here, where the value is still as the file spells it,
        so the error shows '1ms' rather than 0.001."""
        if v is None:
            return None
        seconds = parse_duration(v)
        if seconds > MAX_DURATION_S:
            raise ValueError(f"at most 24 h ({MAX_DURATION_S:.0f} s)")
        if info.field_name == "duration" and seconds < MIN_DURATION_S:
            raise ValueError(f"at least {MIN_DURATION_S} s: a shorter load cannot be "
                             "measured (the monitor samples every 100 ms)")
        return seconds


CAPACITY = "capacity"
TUNE = "tune"
OBJECTIVES = ("rps", "cpu", "capacity")
TUNE_MEMORY_MIN_S = 3.0      # the monitor reads PSS every 2 s (monitor.py)


# What bounds one capacity search besides its max_steps (run/capacity.py): a step
# undecided is doubled up to LONGEST_STEP × step; PROFILE_STEPS steps of `step` profile
# the rate found; CONFIRM_STEPS steps of the experiment's duration at most confirm it
# (a rate holds once it passed REPLICATED of them);
# REMEASURES steps in all (the probe's included) are measured again because the host or
# the engine disturbed them, and no more.
LONGEST_STEP = 2
STEP_WARMUP_S = 0.5     # a step's warm-up at least
PROFILE_STEPS = 3
CONFIRM_STEPS = 8       # full-length steps: a fail, two step-downs, then two rates passed twice
REPLICATED = 2
REMEASURES = 4


class Capacity(_Strict):
    """[capacity] (or `stacklab capacity`'s flags): each run searches the highest open-loop
    rate whose latency percentile meets the SLO (run/capacity.py), in steps of `step`
    seconds, at most `max_steps` of them, until the highest pass and the lowest fail are
    within `resolution` of each other; the experiment's duration is the confirmation's."""

    slo: str
    max_error_rate: str = "0%"
    step: float = 5.0
    max_steps: int = Field(8, ge=3, le=50)
    resolution: float = Field(0.02, ge=0.005, le=0.2)

    def most_s(self, duration_s: float, warmup_s: float) -> float:
        """The longest one search can take (its load and warm-ups, not the stack's start):
        the probe, every step at its longest, the profile, every confirmation and every
        step measured again at its longest (a confirmation's or a search step's). A step
        at a rate too low to hold the requests its percentile needs in `step` is longer
        (run/capacity.py): not counted here."""
        w = max(warmup_s, STEP_WARMUP_S)
        chain = LONGEST_STEP.bit_length()         # 1, 2, … LONGEST_STEP steps' length
        whole, rest = divmod(self.max_steps, chain)
        searched = (whole * (2 * LONGEST_STEP - 1) + 2 ** rest - 1) * self.step
        return (searched + self.max_steps * w + self.step + w
                + REMEASURES * (max(LONGEST_STEP * self.step, duration_s) + w)
                + PROFILE_STEPS * (self.step + w) + CONFIRM_STEPS * (duration_s + w))

    @field_validator("slo")
    @classmethod
    def _slo(cls, v: str) -> str:
        parse_slo(v)
        return v

    @field_validator("max_error_rate")
    @classmethod
    def _error_rate(cls, v: str) -> str:
        parse_error_rate(v)
        return v

    @field_validator("step", mode="before")
    @classmethod
    def _step(cls, v: Any) -> Any:
        seconds = parse_duration(v)
        if not 1.0 <= seconds <= 600:
            raise ValueError("a step lasts from 1 s (a shorter one holds too few requests "
                             "to bound a percentile) to 10 minutes")
        return seconds

    @property
    def goal(self) -> Slo:
        return parse_slo(self.slo)

    @property
    def error_share(self) -> float:
        return parse_error_rate(self.max_error_rate)


class Tune(_Strict):
    """[tune] (`stacklab tune`): a joint search of `knobs` (key -> true, a list of values
    or { min, max }: tunespace.py) at the spec's one point, `trials` trials each
    measured with the experiment's repetitions, for the objective: the most req/s
    (rps), the least server CPU per request at the spec's load.rate (cpu), or the highest
    capacity under the spec's [capacity] goal (capacity: each trial's runs searched); within
    `memory` (the stack's peak memory: the larger of PSS and its cgroup's charge) when
    given; the `candidates` best trials then measured again beside the defaults and the
    best of those runs chosen; the chosen measured again against the defaults (and
    `hand`, the best hand preset, when given), `final_repetitions` runs each; a trial
    clearly worse than the best stopped early (`prune`)."""

    knobs: dict[str, Any]
    objective: str = "rps"
    trials: int = Field(20, ge=2, le=500)
    seed: int = Field(1, ge=0, le=2**32 - 1)
    memory: str | None = None
    final_repetitions: int = Field(5, ge=2, le=30)
    # the search's best this many, measured again (final_repetitions runs each, on fresh
    # stacks, interleaved with the defaults) before one is chosen: the search's best is
    # its luckiest as much as its best (1: the search's best, as told)
    candidates: int = Field(3, ge=1, le=10)
    # Optuna's Wilcoxon pruner over a trial's repetitions: a trial stops after a run when
    # its runs so far are worse than the best trial's, one-sided p below this (0: never)
    prune: float = Field(0.1, ge=0.0, le=0.5)
    # the best hand preset (knob key -> value): measured in the final comparison too
    hand: dict[str, Any] = Field(default_factory=dict)
    # each of the best's settings also measured alone on the defaults in the final
    # comparison (S1's method: what each gives by itself, and export-config's reasons)
    alone: bool = True

    @field_validator("objective")
    @classmethod
    def _objective(cls, v: str) -> str:
        if v not in OBJECTIVES:
            raise ValueError(f"expected one of {', '.join(OBJECTIVES)}")
        return v


class ExperimentSpec(_Strict):
    """A validated experiment: fixed settings plus the matrix axes (never empty)."""

    path: str
    experiment: Experiment
    axes: dict[str, tuple]                  # 'stack' | 'workload' | 'concurrency' | knob key
    exclude: tuple[dict[str, Any], ...]
    fixed_knobs: dict[str, Any]             # knob key -> value, from [load] and [knobs]
    # [thresholds]: the CI gate `run` applies after storing everything (gate.py); not
    # part of the stored spec, so a gate added later leaves trials and --resume alone
    thresholds: Gate | None = Field(None, exclude=True)
    # Knob values that say what to watch, not what is measured ([external] watch: a
    # pid, a cgroup, a unit): applied to every run and recorded with it, never part of
    # a trial's definition, so a server restarted under a new pid is the same trial
    # (--resume, compare)
    observe: dict[str, Any] = Field(default_factory=dict)
    # [capacity]: each run is a capacity search under this goal (None: a plain load)
    capacity: Capacity | None = None
    # [tune]: what `stacklab tune` searches (None: nothing); not part of any trial
    tune: Tune | None = Field(None, exclude=True)

    @property
    def measure(self) -> dict[str, Any]:
        """How each run measures, the same for every trial: part of each trial's
        definition (and id), so runs measured differently are never mixed on --resume."""
        e = self.experiment
        out = {"duration_s": e.duration, "requests": e.requests, "warmup_s": e.warmup,
               "seed": e.seed, "keep_cpus_awake": e.keep_cpus_awake}
        if e.requests_per_connection is not None:   # only when set: no trial id changes
            out["requests_per_connection"] = e.requests_per_connection
        if self.capacity is not None:               # likewise
            out |= {f"capacity_{k}": v for k, v in self.capacity.model_dump().items()}
        return out


def load_spec(path: Path, registry: KnobRegistry, stacks: StackNames,
              workloads: set[str]) -> ExperimentSpec:
    return parse_file_doc(load_doc(path), path, registry, stacks, workloads)


def load_doc(path: Path) -> dict:
    """The experiment file as TOML reads it, before any checking of what it says."""
    file = str(path)
    try:
        return tomllib.loads(read_text(path))
    except FileNotFoundError:
        raise SpecError(file, "(file)", file, "no such file") from None
    except UnicodeDecodeError:
        raise SpecError(file, "(file)", file, "not a text file") from None
    except OSError as e:
        raise SpecError(file, "(file)", file, e.strerror or str(e)) from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(file, "(syntax)", str(e), "not valid TOML") from None
    except RecursionError:
        raise SpecError(file, "(syntax)", "(nesting)", "values nested too deeply") from None


def parse_file_doc(doc: dict, path: Path, registry: KnobRegistry, stacks: StackNames,
                   workloads: set[str]) -> ExperimentSpec:
    """parse_spec of a file's document (load_doc, perhaps with a command's additions)."""
    try:
        return parse_spec(doc, str(path), registry, stacks, workloads)
    except RecursionError:
        raise SpecError(str(path), "(value)", "(nesting)", "a value or exclude nested too "
                        "deeply: knob values are flat (a number, a string, a list)") from None


def read_text(path: Path) -> str:
    """The experiment file's text, refused before reading unless it is a regular file
    of at most MAX_FILE_BYTES: /dev/zero would be read until memory ran out, and a FIFO
    would block forever (host.regular: checked on the open file, so what is read is
    what was checked)."""
    file = str(path)
    try:
        data = read_regular(path, MAX_FILE_BYTES, "an experiment file")
    except NotRegular as e:
        raise SpecError(file, "(file)", file, str(e)) from None
    return data.decode("utf-8")


def parse_spec(doc: dict, file: str, registry: KnobRegistry, stacks: StackNames,
               workloads: set[str]) -> ExperimentSpec:
    for key in doc:
        if key not in ("experiment", "load", "knobs", "matrix", "thresholds", EXTERNAL,
                       CAPACITY, TUNE):
            raise SpecError(file, key, doc[key], "unknown section (expected experiment, "
                            "load, knobs, matrix, thresholds, external, capacity, tune)")
    if "experiment" not in doc:
        raise SpecError(file, "experiment", None, "missing section")
    experiment = _model(Experiment, doc["experiment"], file, "experiment")
    given = [k for k in ("duration", "requests", "requests_per_connection")
             if getattr(experiment, k) is not None]
    if len(given) != 1:
        key = (given or ["duration"])[0]
        raise SpecError(file, f"experiment.{key}", getattr(experiment, key),
                        "give exactly one of duration, requests and requests_per_connection")

    fixed: dict[str, Any] = {}
    for key, value in _table(doc.get("load", {}), file, "load").items():
        fixed[_knob(registry, file, f"load.{key}", "load", key, value)] = value
    for component, table in _table(doc.get("knobs", {}), file, "knobs").items():
        if "." in component and not isinstance(table, dict):
            raise _quoted_key(file, "knobs", component, table)
        for name, value in _table(table, file, f"knobs.{component}").items():
            value = _file_value(registry, f"{component}.{name}", value, file)
            fixed[_knob(registry, file, f"knobs.{component}.{name}", component, name,
                        value)] = value
    external = EXTERNAL in doc
    observe: dict[str, Any] = {}
    if external:
        fixed.update(_external(_table(doc[EXTERNAL], file, EXTERNAL), file, registry))
        observe = {k: fixed.pop(k) for k in OBSERVED if k in fixed}

    matrix = _table(doc.get("matrix", {}), file, "matrix")
    if external:
        matrix = _external_matrix(matrix, file)
    axes = _axes(matrix, file, registry, stacks, workloads,
                 {"stack": (EXTERNAL,), "workload": (EXTERNAL,)} if external else {})
    if EXTERNAL in axes["stack"] and not external:
        raise SpecError(file, "matrix.stack", EXTERNAL, "needs an [external] section "
                        "naming the server, e.g. url = \"http://127.0.0.1:8080/\"")
    if external:
        _external_alone(fixed, axes, file)
    _bound(axes, file)
    per = experiment.requests_per_connection
    if per is not None and per * max(axes["concurrency"]) > MAX_REQUESTS:
        raise SpecError(file, "experiment.requests_per_connection", per,
                        f"× concurrency {max(axes['concurrency'])} is more than the "
                        f"{MAX_REQUESTS:,} requests a run may make")
    exclude = _exclude(matrix.get("exclude", []), file, axes, registry, stacks)
    for key in axes:
        if key in fixed:
            raise SpecError(file, f"matrix.{key}", list(axes[key]),
                            "also set as a fixed value; set it in one place")
    resolve_replay(file, fixed, axes)      # load.replay: beside this file, read now
    thresholds = (_thresholds(_table(doc["thresholds"], file, "thresholds"), file, axes,
                              registry, stacks) if "thresholds" in doc else None)
    capacity = (_capacity(doc[CAPACITY], file, experiment, fixed, axes)
                if CAPACITY in doc else None)
    tune = (_tune(doc[TUNE], file, registry, fixed, axes, experiment.duration,
                  capacity is not None) if TUNE in doc else None)
    return ExperimentSpec(path=file, experiment=experiment, axes=axes, exclude=exclude,
                          fixed_knobs=fixed, thresholds=thresholds, observe=observe,
                          capacity=capacity, tune=tune)


def _tune(table: Any, file: str, registry: KnobRegistry, fixed: dict[str, Any],
          axes: dict[str, tuple], duration: float | None, has_capacity: bool) -> Tune:
    """[tune]: its knobs searchable as asked (tunespace.dimensions), none of them also
    fixed, at one point of the matrix; the cpu objective at a fixed rate."""
    tune = _model(Tune, table, file, TUNE)
    if not tune.knobs:
        raise SpecError(file, "tune.knobs", tune.knobs, "names no knob to search")
    try:
        dimensions(registry, tune.knobs)
    except SpaceError as e:
        raise SpecError(file, f"tune.knobs.{e.key}", e.value, e.why) from None
    for key in tune.knobs:
        if key in fixed or key in axes:
            raise SpecError(file, f"tune.knobs.{key}", tune.knobs[key], "also set in "
                            "[knobs], [load] or the matrix; a searched knob is set by the "
                            "search only")
    for axis, values in axes.items():
        if len(values) != 1:
            raise SpecError(file, f"matrix.{axis}", list(values), "a search tunes one "
                            "point: give this axis one value")
    for key, value in tune.hand.items():
        knob = registry.get(key)
        if knob is None:
            raise SpecError(file, f"tune.hand.{key}", value, "no such knob (stacklab "
                            "stacks lists them; name each whole, quoted)")
        try:
            knob.check(value)
        except ValueError as e:
            raise SpecError(file, f"tune.hand.{key}", value, str(e)) from None
        if key in fixed or key in axes:
            raise SpecError(file, f"tune.hand.{key}", value, "also set in [knobs], [load] "
                            "or the matrix, which every trial and the hand preset share")
    if tune.objective == "capacity" and not has_capacity:
        raise SpecError(file, "tune.objective", "capacity", "each trial's capacity is "
                        "searched under the spec's goal: add a [capacity] section, e.g. "
                        'slo = "p99<50ms"')
    if tune.objective == "cpu" and not fixed.get("load.rate"):
        raise SpecError(file, "tune.objective", "cpu", "CPU per request is compared at a "
                        "fixed rate: set load.rate well under the stack's capacity")
    if tune.memory is not None:
        try:
            parse_mib(tune.memory)
        except ValueError as e:
            raise SpecError(file, "tune.memory", tune.memory, str(e)) from None
        if (duration or 0) < TUNE_MEMORY_MIN_S:
            raise SpecError(file, "experiment.duration", duration, "a memory budget is "
                            "judged on the stack's peak PSS (and its cgroup's charge), PSS read every "
                            f"2 s: give a duration of at least {TUNE_MEMORY_MIN_S:g} s")
    return tune


def _capacity(table: Any, file: str, experiment: Experiment, fixed: dict[str, Any],
              axes: dict[str, tuple]) -> Capacity:
    """[capacity]: the goal, and what a search cannot share with it: the rate is the
    search's, a replay has its own times, and the confirmation lasts the duration."""
    capacity = _model(Capacity, table, file, CAPACITY)
    if experiment.duration is None:
        given = "requests" if experiment.requests is not None else "requests_per_connection"
        raise SpecError(file, f"experiment.{given}", getattr(experiment, given),
                        "a capacity search confirms its result for a duration: give "
                        "experiment.duration instead")
    for key in ("load.rate", "load.replay"):
        if key in fixed or key in axes:
            raise SpecError(file, key, fixed.get(key, axes.get(key)),
                            "a capacity search sets the rate itself, step by step: "
                            "leave it out of a spec with [capacity]")
    return capacity


def _bound(axes: dict[str, tuple], file: str) -> None:
    """Refuse a matrix of more than MAX_TRIALS points, counted before it is built."""
    count = math.prod(len(values) for values in axes.values())
    if count > MAX_TRIALS:
        sizes = " x ".join(f"{key} {len(values)}" for key, values in axes.items())
        raise SpecError(file, "matrix", count, f"its axes make {count} trials ({sizes}), "
                        f"more than the {MAX_TRIALS} a plan may hold; split the experiment "
                        "or give the axes fewer values")


def _thresholds(table: dict, file: str, axes: dict[str, tuple], registry: KnobRegistry,
                stacks: StackNames) -> Gate:
    """[thresholds]: limits such as rps = "<-5%", strict = true, and the baseline
    variant every other trial is judged against, e.g. baseline = { stack = "nginx" }."""
    limits = []
    for key, value in table.items():
        if key not in GATE_KEYS:
            raise SpecError(file, f"thresholds.{key}", value, "unknown key (expected "
                            f"{', '.join(GATE_KEYS)})")
        if key in ("strict", "baseline"):
            continue
        try:
            limits.append(parse_limit(key, value))
        except ValueError as e:
            raise SpecError(file, f"thresholds.{key}", value, str(e)) from None
    strict = table.get("strict", False)
    if not isinstance(strict, bool):
        raise SpecError(file, "thresholds.strict", strict, "expected true or false")
    if not limits:
        raise SpecError(file, "thresholds", table, "no limit (give e.g. rps = \"<-5%\")")
    if "baseline" not in table:
        raise SpecError(file, "thresholds.baseline", None, "missing: name the variant the "
                        "others are judged against, e.g. baseline = { stack = \"nginx\" }")
    baseline = flatten(_table(table["baseline"], file, "thresholds.baseline"))
    if not baseline:
        raise SpecError(file, "thresholds.baseline", baseline, "names no variant")
    baseline = _spelled(baseline, file, registry, stacks)
    for key, value in baseline.items():
        where = f"thresholds.baseline.{key}"
        if key not in axes:
            raise SpecError(file, where, value, "not an axis of this matrix")
        if value not in axes[key]:
            raise SpecError(file, where, value, "not a value of that axis")
    return Gate(tuple(limits), strict, tuple(baseline.items()))


def _model(model: type[BaseModel], data: Any, file: str, where: str) -> Any:
    try:
        return model.model_validate(_table(data, file, where))
    except ValidationError as e:
        err = e.errors()[0]
        key = ".".join([where, *map(str, err["loc"])])
        value = err.get("input")
        if err["type"] == "missing":
            value = None
        raise SpecError(file, key, value, err["msg"]) from None


def _table(value: Any, file: str, where: str) -> dict:
    if not isinstance(value, dict):
        raise SpecError(file, where, value, "expected a table")
    return value


def _knob(registry: KnobRegistry, file: str, where: str, component: str, name: str,
          value: Any) -> str:
    knob = registry.get(f"{component}.{name}")
    if knob is None:
        if component not in registry.components():
            raise SpecError(file, where, value, f"unknown component {component!r} (known: "
                            f"{', '.join(sorted(registry.components()))})")
        known = ", ".join(k.name for k in registry.for_component(component))
        raise SpecError(file, where, value, f"unknown knob {name!r} for {component} "
                        f"(known: {known})")
    try:
        knob.check(value)
    except ItemError as e:       # one entry of a list (load.headers): name that entry
        raise SpecError(file, f"{where}[{e.index}]", e.item, f"{knob.key}: {e}") from None
    except ValueError as e:
        raise SpecError(file, where, value, str(e)) from None
    return knob.key


def _file_value(registry: KnobRegistry, key: str, value: Any, file: str) -> Any:
    """A knob that names a file (Knob.path: nginx.include) names it relative to the
    experiment file's directory: checked, planned and stored as that absolute path, so
    the run reads what the file meant wherever stacklab is started from."""
    knob = registry.get(key)
    if knob is None or not knob.path or not isinstance(value, str) or not value:
        return value
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(file)), value))


def _external(table: dict, file: str, registry: KnobRegistry) -> dict[str, Any]:
    """[external] as the external component's fixed knobs (knob key -> value), each
    refused with its key: url (required), paths, weights, watch."""
    for key, value in table.items():
        if key not in EXTERNAL_KEYS:
            raise SpecError(file, f"{EXTERNAL}.{key}", value, "unknown key (expected "
                            f"{', '.join(EXTERNAL_KEYS)})")
    if "url" not in table:
        raise SpecError(file, f"{EXTERNAL}.url", None, "missing: the server's origin, "
                        "e.g. \"http://127.0.0.1:8080/\" (start your server first)")
    out = {}
    for key, value in table.items():
        if key == "watch":
            value = _watch(value, file)
        out[_knob(registry, file, f"{EXTERNAL}.{key}", EXTERNAL, key, value)] = value
    return out


def _watch(value: Any, file: str) -> str:
    """{ pid = 1234 } -> "pid:1234" (the knob's spelling); one kind, of its type."""
    where = f"{EXTERNAL}.watch"
    if not isinstance(value, dict) or len(value) != 1:
        raise SpecError(file, where, value, "expected one of { pid = N }, "
                        "{ cgroup = \"/sys/fs/cgroup/...\" }, { unit = \"NAME.service\" }")
    (kind, what), = value.items()
    want = WATCH_KINDS.get(kind)
    if want is None:
        raise SpecError(file, f"{where}.{kind}", what, "unknown kind (expected pid, cgroup "
                        "or unit)")
    if isinstance(what, bool) or not isinstance(what, want):
        raise SpecError(file, f"{where}.{kind}", what,
                        "expected an integer" if want is int else "expected a string")
    return f"{kind}:{what}"


def _external_matrix(matrix: dict, file: str) -> dict:
    """The matrix of an experiment on an external server: its stack and workload are the
    server itself (given or not: no other value); concurrency and knob axes as usual."""
    for axis in ("stack", "workload"):
        value = matrix.get(axis, EXTERNAL)
        if value not in (EXTERNAL, [EXTERNAL]):
            raise SpecError(file, f"matrix.{axis}", value, "with an [external] section the "
                            f"{axis} is the server itself: leave it out, or give "
                            f"\"{EXTERNAL}\"")
    return {k: v for k, v in matrix.items() if k not in ("stack", "workload")}


def _external_alone(fixed: dict[str, Any], axes: dict[str, tuple], file: str) -> None:
    """Refuse what cannot act on a server stacklab did not start: the lab's conditions
    (net.*, fs.*, machine.*) and other components' knobs."""
    given = [(f"knobs.{k}", k, v) for k, v in fixed.items()] + [
        (f"matrix.{k}", k, list(v)) for k, v in axes.items() if k not in AXES]
    for where, key, value in given:
        owner = key.split(".", 1)[0]
        if key.startswith(LAB_CONDITIONS):
            raise SpecError(file, where, value, "the lab's conditions act on servers it "
                            "starts; an [external] server runs as you started it")
        if owner not in (EXTERNAL, "load"):
            raise SpecError(file, where, value, f"a knob of {owner}, which an [external] "
                            "experiment does not start")


def _quoted_key(file: str, section: str, key: str, value: object) -> SpecError:
    """A knob's dotted name written in quotes: TOML reads "nginx.workers" as one key,
    not the table nginx holding workers, so it reaches no component."""
    owner, name = key.split(".", 1)
    return SpecError(file, f'{section}."{key}"', value, f"a quoted key is one name to "
                     f"TOML, not {owner}'s knob {name!r}: write {key} without the quotes")


def _axes(matrix: dict, file: str, registry: KnobRegistry, stacks: StackNames,
          workloads: set[str], given: dict[str, tuple] | None = None) -> dict[str, tuple]:
    """The matrix's axes; `given` are axes already decided (an external server's stack
    and workload), not looked up."""
    given = given or {}
    axes: dict[str, tuple] = dict(given)
    for key, value in matrix.items():
        if key == "exclude":
            continue
        if key in AXES:
            axes[key] = _axis_values(value, file, f"matrix.{key}")
        elif isinstance(value, dict):
            for name, values in value.items():
                where = f"matrix.{key}.{name}"
                values = tuple(_file_value(registry, f"{key}.{name}", v, file)
                               for v in _axis_values(values, file, where))
                for v in values:
                    knob_key = _knob(registry, file, where, key, name, v)
                axes[knob_key] = values
        elif "." in key:
            raise _quoted_key(file, "matrix", key, value)
        else:
            raise SpecError(file, f"matrix.{key}", value, "unknown axis (expected stack, "
                            "workload, concurrency or a component's knobs such as "
                            "nginx.worker_processes = [1, 2])")
    for axis in AXES:
        if axis not in axes:
            raise SpecError(file, f"matrix.{axis}", None, "missing axis")
    for axis in ("stack", "workload"):
        for v in axes[axis]:
            if not isinstance(v, str):
                raise SpecError(file, f"matrix.{axis}", v, "expected a name (a string)")
    if "stack" not in given:
        axes["stack"] = _stacks(axes["stack"], file, stacks)
    if "workload" not in given:
        axes["workload"] = _workloads(axes["workload"], file, workloads)
    for v in axes["concurrency"]:
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 100_000:
            raise SpecError(file, "matrix.concurrency", v, "expected an integer 1..100000")
    return axes


def _stacks(names: tuple, file: str, stacks: StackNames) -> tuple:
    """Stack names and expressions ('varnish>nginx' -> 'varnish > nginx'), spelled one
    way so that a trial's id does not depend on the spacing."""
    out = []
    for v in names:
        try:
            out.append(stacks.canonical(v))
        except ValueError as e:
            raise SpecError(file, "matrix.stack", v, str(e)) from None
    if len(set(out)) != len(out):
        raise SpecError(file, "matrix.stack", list(names), f"values repeat (as {', '.join(out)})")
    return tuple(out)


def _workloads(names: tuple, file: str, workloads: set[str]) -> tuple:
    """Workload names, parameters validated and spelled one way ('portal-page:26624' ->
    'portal-page:26k'); a bare name stays as it is, and so do its trial ids."""
    out = []
    for v in names:
        if v.partition(":")[0] not in workloads:
            raise SpecError(file, "matrix.workload", v,
                            f"unknown workload (known: {', '.join(sorted(workloads))})")
        try:
            out.append(canonical(v, Path(file).parent))    # dir:PATH from the file's own
        except (KeyError, ValueError) as e:
            raise SpecError(file, "matrix.workload", v, str(e).strip("'\"")) from None
    if len(set(out)) != len(out):
        raise SpecError(file, "matrix.workload", list(names),
                        f"values repeat (as {', '.join(out)})")
    return tuple(out)


def _axis_values(value: Any, file: str, where: str) -> tuple:
    if not isinstance(value, list):
        value = [value]
    for v in value:
        if isinstance(v, (list, dict)):
            raise SpecError(file, where, v, "an axis value must be a single value, not a "
                            "list or table")
    if not value:
        raise SpecError(file, where, value, "an axis needs at least one value")
    if len(set(map(repr, value))) != len(value):
        raise SpecError(file, where, value, "values repeat")
    return tuple(value)


def _exclude(rules: Any, file: str, axes: dict[str, tuple], registry: KnobRegistry,
             stacks: StackNames) -> tuple[dict, ...]:
    if not isinstance(rules, list):
        raise SpecError(file, "matrix.exclude", rules, "expected a list of tables")
    out = []
    for i, rule in enumerate(rules):
        where = f"matrix.exclude[{i}]"
        rule = flatten(_table(rule, file, where))
        if not rule:
            raise SpecError(file, where, rule, "an empty rule would exclude everything")
        rule = _spelled(rule, file, registry, stacks)
        for key, value in rule.items():
            if key not in axes:
                raise SpecError(file, f"{where}.{key}", value, "not an axis of this matrix")
            if value not in axes[key]:
                raise SpecError(file, f"{where}.{key}", value, "not a value of that axis")
        out.append(rule)
    return tuple(out)


def _spelled(rule: dict[str, Any], file: str, registry: KnobRegistry, stacks: StackNames
             ) -> dict[str, Any]:
    """A rule's values (matrix.exclude, thresholds.baseline) spelled as the axes spell
    theirs, so that a rule matches the value it names however it is written: a stack as
    its expression ('varnish>nginx'), a workload with its parameter ('dir:site' beside
    the experiment file), a file knob's path absolute (_file_value). A value that cannot
    be spelled stays as written: the caller reports it as not a value of its axis."""
    out = {}
    for key, value in rule.items():
        try:
            if key == "stack" and isinstance(value, str):
                value = stacks.canonical(value)
            elif key == "workload" and isinstance(value, str):
                value = canonical(value, Path(file).parent)
            else:
                value = _file_value(registry, key, value, file)
        except (KeyError, ValueError):
            pass
        out[key] = value
    return out


def flatten(rule: dict, prefix: str = "") -> dict:
    """{php = {session_auto_start = true}} (how TOML reads php.session_auto_start = true)
    as {"php.session_auto_start": true}."""
    flat = {}
    for key, value in rule.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
