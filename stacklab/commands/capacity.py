"""capacity: the experiment file's stacks, each run a capacity search under the SLO
(run/capacity.py), stored as an experiment of its own, then the capacity of each trial
with its interval; with --memory, the worker limits that fit a RAM budget (memplan.py).

A spec with its own [capacity] section runs as it is (as `run` would run it); any
other spec becomes `<name>.capacity`: its [capacity] from the flags, the open loop at
one connection count (--connections, else the spec's largest concurrency) and three
repetitions unless --repetitions says otherwise: each repetition is a fresh stack, so
the spread of their capacities is the run-to-run one.
"""

from __future__ import annotations

import copy
import shlex
from pathlib import Path

from ..env import Environment
from ..errors import ExitStatus, UsageError
from ..experiment.spec import (CAPACITY, Capacity, ExperimentSpec, load_doc, parse_duration,
                               parse_file_doc)
from ..experiment.slo import parse_error_rate, parse_slo
from ..stacks import REGISTRY, STACKS
from ..workloads import WORKLOADS
from .results import writable_file
from .run import gate, measured, planned

REPETITIONS = 3
# What a spec written for `run` may leave out and a search still needs: the length of
# its confirmation (experiment.duration) and the connections of its open loop.
CONFIRMATION = "10s"
CONNECTIONS = 64


def capacity(env: Environment, spec_path: Path, db: Path | None, slo: str | None,
             max_error_rate: str | None, step: str | None, connections: int | None,
             repetitions: int | None, memory: str | None, resume: bool, dry_run: bool,
             wait_quiet: bool = False, allow_remote: bool = False,
             output: Path | None = None) -> ExitStatus:
    """`output`: the HTML report of the searches, written once they are stored."""
    if output is not None:
        writable_file(output, "-o")      # before anything is measured
    doc = load_doc(spec_path)
    if slo is None and CAPACITY not in doc and memory is None:
        raise UsageError(f"--slo: missing; say the latency goal, e.g. --slo \"p99<50ms\" "
                         f"({spec_path} has no [capacity] section to take it from)")
    status = ExitStatus.OK
    if slo is not None or CAPACITY in doc:
        for note in defaulted(doc, connections):
            env.stderr.print(f"note: {note}", markup=False, highlight=False)
        spec = searched_spec(doc, spec_path, slo, max_error_rate, step, connections,
                             repetitions)
        spec, plan = planned(spec)
        view = measured(env, spec, plan, db, resume, dry_run, wait_quiet, allow_remote,
                        resume_command(spec_path, db, slo, max_error_rate, step,
                                       connections, repetitions, memory))
        if view is None:
            return ExitStatus.OK
        if output is not None:
            from ..report.html import write_html    # jinja2, plotly: only when drawn
            env.stdout.print(f"report: {write_html(view, output).resolve()}")
        status = gate(env, spec, view)
    if memory is not None and not dry_run:
        from .memplan import memory_plan
        planned_status = memory_plan(env, spec_path, db, memory, allow_remote)
        status = status or planned_status
    return status


def searched_spec(doc: dict, spec_path: Path, slo: str | None, max_error_rate: str | None,
                  step: str | None, connections: int | None,
                  repetitions: int | None) -> ExperimentSpec:
    """The spec each run of which is a capacity search: the file's, with the flags'
    goal in its [capacity] (each flag checked first, and named when it is at fault)."""
    checked(slo, max_error_rate, step, connections, repetitions)
    doc = copy.deepcopy(doc)
    own = CAPACITY in doc
    table = dict(doc.get(CAPACITY) or {})
    for key, value in (("slo", slo), ("max_error_rate", max_error_rate), ("step", step)):
        if value is not None:
            table[key] = value
    doc[CAPACITY] = table
    experiment = doc.setdefault("experiment", {})
    matrix = doc.setdefault("matrix", {})
    if not own and isinstance(experiment.get("name"), str):
        experiment["name"] = f"{experiment['name']}.capacity"
    if repetitions is not None or not own:
        experiment["repetitions"] = repetitions or REPETITIONS
    if connections is not None:
        matrix["concurrency"] = [connections]
    elif not own and isinstance(levels := matrix.get("concurrency"), list) and levels:
        matrix["concurrency"] = [max(levels)]
    elif "concurrency" not in matrix:
        matrix["concurrency"] = [CONNECTIONS]
    if not any(k in experiment for k in LENGTHS):
        experiment["duration"] = CONFIRMATION
    return parse_file_doc(doc, spec_path, REGISTRY, STACKS, set(WORKLOADS))


LENGTHS = ("duration", "requests", "requests_per_connection")


def defaulted(doc: dict, connections: int | None) -> list[str]:
    """What searched_spec gives a spec that leaves it out, said once before the search."""
    experiment, matrix = doc.get("experiment") or {}, doc.get("matrix") or {}
    out = []
    if not any(k in experiment for k in LENGTHS):
        out.append(f"experiment.duration not set: each search's confirmation holds the "
                   f"rate found for {CONFIRMATION}")
    if connections is None and "concurrency" not in matrix:
        out.append(f"matrix.concurrency not set and no --connections: the open loop uses "
                   f"{CONNECTIONS} connections (a search that says connections-bound "
                   "needs more)")
    return out


def checked(slo: str | None, max_error_rate: str | None, step: str | None,
            connections: int | None, repetitions: int | None) -> None:
    """Each flag's value, refused with the flag's name before the file is looked at."""
    for flag, value, parse in (("--slo", slo, parse_slo),
                               ("--max-error-rate", max_error_rate, parse_error_rate)):
        if value is not None:
            try:
                parse(value)
            except ValueError as e:
                raise UsageError(f"{flag} {value!r}: {e}") from None
    if step is not None:
        try:
            Capacity(slo="p99<1s", step=parse_duration(step))
        except ValueError as e:
            raise UsageError(f"--step {step!r}: {_said(e)}") from None
    if connections is not None and not 1 <= connections <= 100_000:
        raise UsageError(f"--connections {connections}: expected 1 to 100000")
    if repetitions is not None and not 1 <= repetitions <= 100:
        raise UsageError(f"--repetitions {repetitions}: expected 1 to 100")


def _said(e: ValueError) -> str:
    """A pydantic error's own message, without its frame."""
    errors = getattr(e, "errors", None)
    return errors()[0]["msg"] if callable(errors) else str(e)


def resume_command(spec_path: Path, db: Path | None, slo: str | None,
                   max_error_rate: str | None, step: str | None, connections: int | None,
                   repetitions: int | None, memory: str | None) -> str:
    """The command that completes an interrupted search, as the user can paste it."""
    argv = ["stacklab", "capacity", str(spec_path)]
    for flag, value in (("--db", db), ("--slo", slo), ("--max-error-rate", max_error_rate),
                        ("--step", step), ("--connections", connections),
                        ("--repetitions", repetitions), ("--memory", memory)):
        if value is not None:
            argv += [flag, str(value)]
    return shlex.join([*argv, "--resume"])
