"""What the store keeps, typed, and the one mapping between each record and its row.

`RunRecord.to_row` / `RunRecord.from_row` are the only code that knows the runs table's
column names and how each value is encoded (JSON columns, verdicts, the engine's
report); the insert, the reads and the journal all go through them. Experiments and
their trials leave the store as `ExperimentRecord` and `TrialRecord` (`from_row`), so
no reader indexes a row by column name or decodes a JSON column itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..measure.drive import LoadReport
from ..measure.verify import Status, Verdict


class Outcome(StrEnum):
    """How a run ended. The values are what the runs table stores (its CHECK)."""

    OK = "ok"              # measured
    FAILED = "failed"      # a server or the engine broke (the reason says how)
    INVALID = "invalid"    # verification FAILed: not measured


class ExperimentStatus(StrEnum):
    """Where an experiment stands. The values are what the experiments table stores."""

    RUNNING = "running"            # being run, or stopped without a word (kill -9)
    COMPLETE = "complete"
    INTERRUPTED = "interrupted"    # stopped by the user, or by an error: --resume goes on


@dataclass(frozen=True, kw_only=True)
class ExperimentRecord:
    """One stored experiment: the spec it was planned from and the host it ran on."""

    id: int
    name: str
    spec_path: str
    spec_hash: str                 # the plan's hash: a resume must plan the same runs
    spec: dict                     # the spec as validated (its JSON document)
    created_at: str
    status: ExperimentStatus
    stacklab_version: str
    stacklab_commit: str | None
    host: dict                     # host facts when it was created
    n_runs: int | None = None      # its stored runs, where the read counted them

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "ExperimentRecord":
        """From an experiments row (with an `n_runs` column where the query adds one)."""
        return cls(id=row["id"], name=row["name"], spec_path=row["spec_path"],
                   spec_hash=row["spec_hash"], spec=json.loads(row["spec_json"]),
                   created_at=row["created_at"], status=ExperimentStatus(row["status"]),
                   stacklab_version=row["stacklab_version"],
                   stacklab_commit=row["stacklab_commit"], host=json.loads(row["host_json"]),
                   n_runs=row["n_runs"] if "n_runs" in row.keys() else None)


@dataclass(frozen=True, kw_only=True)
class TrialRecord:
    """One planned trial of a stored experiment, in the order the plan made them."""

    experiment_id: int
    trial_id: str
    position: int
    label: str
    definition: dict               # what the trial is (plan.Trial.definition)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "TrialRecord":
        return cls(experiment_id=row["experiment_id"], trial_id=row["trial_id"],
                   position=row["position"], label=row["label"],
                   definition=json.loads(row["definition_json"]))


@dataclass(frozen=True, kw_only=True)
class HeldTrial:
    """A stored trial found by the start of its id, and the experiment that holds it."""

    experiment_id: int
    experiment: str                # the experiment's name
    trial_id: str
    label: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "HeldTrial":
        return cls(experiment_id=row["experiment_id"], experiment=row["experiment"],
                   trial_id=row["trial_id"], label=row["label"])


# The lab's own parts of a run's record, stored beside the components' summaries under
# these names with a "_" before them (a component's label never starts with one).
_LAB = "_"


@dataclass(frozen=True)
class Resources:
    """What a run used and what its layers recorded, typed: `components` is each server
    component's monitor summary of the measured window, by label; `lab` is each layer's
    and the run's own part (host, machine, fs, layers, accounting, pageview, net, system,
    counters, logs, monitor, or a new layer's), by name.

    Stored and exported as one flat object whose lab keys start with "_" (the export
    schema's `resources`); `from_json` / `to_json` are the only code that knows it, so no
    reader filters keys by their first character."""

    components: dict[str, dict[str, Any]] = field(default_factory=dict)
    lab: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "Resources":
        """From the stored (or a layer's) flat object."""
        return cls(
            components={k: v for k, v in doc.items() if not k.startswith(_LAB)},
            lab={k.removeprefix(_LAB): v for k, v in doc.items() if k.startswith(_LAB)})

    def to_json(self) -> dict[str, Any]:
        """The flat object as stored and exported: components, then the lab's parts."""
        return {**self.components, **{_LAB + k: v for k, v in self.lab.items()}}

    def figure(self, component: str, key: str) -> Any:
        """One figure of a component's summary, None where the run has none (the
        component was not in it, or the monitor could not read that figure)."""
        return self.components.get(component, {}).get(key)

    def part(self, name: str) -> dict[str, Any]:
        """A lab part by name, {} where the run has none (a run that failed early, a
        layer not used); the parts a reader needs often have a property below."""
        return self.lab.get(name) or {}

    @property
    def host(self) -> dict[str, Any]:
        """The monitor's summary of the host over the measured window (and the lab's
        writeback settled before it)."""
        return self.part("host")

    @property
    def machine(self) -> dict[str, Any]:
        """The machine profile's knobs and its group's usage (only with a profile)."""
        return self.part("machine")

    @property
    def charged_mib(self) -> float | None:
        """The stack's peak memory as the kernel charged its cgroup (its processes and
        the page cache they read), in MiB: the machine profile's group, or the
        accounting group every run makes; None where neither counted memory."""
        peak = (self.machine.get("memory_peak_bytes")
                or self.part("accounting").get("memory_peak_bytes"))
        return None if peak is None else peak / 2**20

    @property
    def fs(self) -> dict[str, Any]:
        """The filesystem layer's knobs and the cold cache's figures."""
        return self.part("fs")

    @property
    def layers(self) -> dict[str, Any]:
        """Each front layer's figures of the measured window (layercheck)."""
        return self.part("layers")

    @property
    def pageview(self) -> dict[str, Any]:
        """A page's first and repeat view by a client with a cache (pageview.py)."""
        return self.part("pageview")

    @property
    def net(self) -> dict[str, Any]:
        return self.part("net")

    @property
    def logs(self) -> dict[str, Any]:
        return self.part("logs")


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """One finished run, as stored: its outcome, the verdicts that allowed (or refused)
    measuring it, the engine's report and the monitor's summaries."""

    experiment_id: int
    trial_id: str
    repetition: int
    outcome: Outcome
    reason: str | None = None      # failed/invalid: why; ok: a note (logs not kept, …)
    started_at: str
    ended_at: str
    knobs: dict[str, Any]
    versions: dict[str, str]
    configs: dict[str, str]
    verdicts: tuple[Verdict, ...] = ()
    load: LoadReport | None = None
    resources: Resources = field(default_factory=Resources)
    flags: tuple[str, ...] = ()    # flags.py names, e.g. generator-bound
    log_tail: str | None = None
    run_dir: str | None = None     # where the servers' logs are kept

    def __post_init__(self):
        # an Outcome from its stored value; sequences as tuples, so records compare equal
        object.__setattr__(self, "outcome", Outcome(self.outcome))
        object.__setattr__(self, "verdicts", tuple(self.verdicts))
        object.__setattr__(self, "flags", tuple(self.flags))
        if not isinstance(self.resources, Resources):    # the stored flat object
            object.__setattr__(self, "resources", Resources.from_json(self.resources))

    def to_row(self) -> dict[str, Any]:
        """The runs table's columns. The figures after `run_dir` are copies of the load
        report's, for SQL queries: `from_row` reads the report itself."""
        load = self.load
        return {
            "experiment_id": self.experiment_id, "trial_id": self.trial_id,
            "repetition": self.repetition, "outcome": self.outcome.value,
            "reason": self.reason, "started_at": self.started_at, "ended_at": self.ended_at,
            "knobs_json": json.dumps(self.knobs), "versions_json": json.dumps(self.versions),
            "configs_json": json.dumps(self.configs),
            "verdicts_json": json.dumps([verdict_doc(v) for v in self.verdicts]),
            "load_json": None if load is None else json.dumps(load.raw),
            "resources_json": json.dumps(self.resources.to_json()),
            "flags_json": json.dumps(list(self.flags)),
            "log_tail": self.log_tail, "run_dir": self.run_dir,
            "rps": load and load.rps, "p50_us": load and load.p50_us,
            "p99_us": load and load.p99_us, "completed": load and load.completed,
            "failed_requests": load and load.failed,
            "engine_cpu_s": load and load.engine_cpu_s}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "RunRecord":
        """From a runs row (or `to_row`'s dict, as the journal keeps it)."""
        load = row["load_json"]
        return cls(
            experiment_id=row["experiment_id"], trial_id=row["trial_id"],
            repetition=row["repetition"], outcome=Outcome(row["outcome"]),
            reason=row["reason"], started_at=row["started_at"], ended_at=row["ended_at"],
            knobs=json.loads(row["knobs_json"]), versions=json.loads(row["versions_json"]),
            configs=json.loads(row["configs_json"]),
            verdicts=tuple(verdict_of(d) for d in json.loads(row["verdicts_json"])),
            load=LoadReport.from_json(json.loads(load)) if load else None,
            resources=Resources.from_json(json.loads(row["resources_json"])),
            flags=tuple(json.loads(row["flags_json"])),
            log_tail=row["log_tail"], run_dir=row["run_dir"])


def verdict_doc(v: Verdict) -> dict:
    """A verdict as stored and exported."""
    return {"component": v.component, "check": v.check, "status": v.status.value,
            "detail": v.detail, "data": v.data}


def verdict_of(doc: dict) -> Verdict:
    return Verdict(doc["component"], doc["check"], Status(doc["status"]), doc["detail"],
                   doc.get("data") or {})


# The fields a RunRecord had by name, JSON-encoded into these columns. Journal entries
# written before records were rows hold the fields ("run"), not the row.
_JSON_FIELDS = ("knobs", "versions", "configs", "verdicts", "load", "resources", "flags")


def row_of_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """An old journal entry's run (the record's fields by name) as a row."""
    row = {k: v for k, v in fields.items() if k not in _JSON_FIELDS}
    for name in _JSON_FIELDS:
        value = fields[name]
        row[f"{name}_json"] = None if value is None else json.dumps(value)
    return row
