"""Exports: one row per stored run, as CSV or JSON (JSON keeps the engine reports whole).

The JSON export is a versioned contract: `export.schema.json` beside this file describes
`SCHEMA_VERSION`, and README.md ("Export JSON: schema changelog") says what changed."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict

from ..analyze import ExperimentView, TrialSummary
from ..store import RunRecord
from ..store.records import verdict_doc

SCHEMA_VERSION = 3

CSV_COLUMNS = ("experiment_id", "trial_id", "label", "repetition", "outcome", "reason",
               "started_at", "ended_at", "stack", "workload", "concurrency", "rps",
               "completed", "failed", "p50_us", "p90_us", "p99_us", "max_us", "engine_cpu_s")


def export_csv(view: ExperimentView) -> str:
    labels = {s.trial_id: s for s in view.summaries}
    out = io.StringIO()
    writer = csv.DictWriter(out, CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for r in view.runs:
        s = labels[r.trial_id]
        row = {"experiment_id": r.experiment_id, "trial_id": r.trial_id, "label": s.label,
               "repetition": r.repetition, "outcome": r.outcome, "reason": r.reason or "",
               "started_at": r.started_at, "ended_at": r.ended_at, "stack": s.stack,
               "workload": s.workload, "concurrency": s.concurrency}
        if load := r.load:
            lat = load.latency_us
            row.update(rps=load.rps, completed=load.completed, failed=load.failed,
                       p50_us=lat.p50, p90_us=lat.p90, p99_us=lat.p99, max_us=lat.max,
                       engine_cpu_s=round(load.engine_cpu_s, 6))
        writer.writerow(row)
    return out.getvalue()


def export_json(view: ExperimentView) -> str:
    doc = {"schema_version": SCHEMA_VERSION, "experiment": {
        "id": view.id, "name": view.name, "description": view.description,
        "created_at": view.created_at, "status": view.status, "host": view.host,
        "stacklab_commit": view.commit, "versions": view.versions},
        "trials": [_trial(s) for s in view.summaries],
        "runs": [_run(r) for r in view.runs]}
    return json.dumps(doc, indent=2)


def _trial(s: TrialSummary) -> dict:
    """Every field of the summary (estimates as {median, ci, values})."""
    return {**asdict(s), "verdicts": [verdict_doc(v) for v in s.verdicts]}


def _run(r: RunRecord) -> dict:
    """A stored run: `load` is the engine's report whole (its own schema_version)."""
    return {"experiment_id": r.experiment_id, "trial_id": r.trial_id,
            "repetition": r.repetition, "outcome": r.outcome.value, "reason": r.reason,
            "started_at": r.started_at, "ended_at": r.ended_at, "knobs": r.knobs,
            "versions": r.versions, "configs": r.configs,
            "verdicts": [verdict_doc(v) for v in r.verdicts],
            "load": r.load.raw if r.load else None, "resources": r.resources,
            "flags": list(r.flags), "log_tail": r.log_tail, "run_dir": r.run_dir}
