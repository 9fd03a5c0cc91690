"""What the store keeps of one run, typed, and the one mapping between it and a row.

`RunRecord.to_row` / `RunRecord.from_row` are the only code that knows the runs table's
column names and how each value is encoded (JSON columns, verdicts, the engine's
report); the insert, the reads and the journal all go through them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..drive import LoadReport
from ..verify import Status, Verdict


class Outcome(StrEnum):
    """How a run ended. The values are what the runs table stores (its CHECK)."""

    OK = "ok"              # measured
    FAILED = "failed"      # a server or the engine broke (the reason says how)
    INVALID = "invalid"    # verification FAILed: not measured


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
    resources: dict = field(default_factory=dict)   # component -> monitor summary, _host …
    flags: tuple[str, ...] = ()    # flags.py names, e.g. generator-bound
    log_tail: str | None = None
    run_dir: str | None = None     # where the servers' logs are kept

    def __post_init__(self):
        # an Outcome from its stored value; sequences as tuples, so records compare equal
        object.__setattr__(self, "outcome", Outcome(self.outcome))
        object.__setattr__(self, "verdicts", tuple(self.verdicts))
        object.__setattr__(self, "flags", tuple(self.flags))

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
            "resources_json": json.dumps(self.resources),
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
            resources=json.loads(row["resources_json"]),
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
