"""Exports: one row per stored run, as CSV or JSON (JSON keeps the engine reports whole)."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict

from ..analyze import ExperimentView

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
        if r.load:
            lat, eng = r.load["latency_us"], r.load["engine"]
            row.update(rps=r.load["rps"], completed=r.load["requests"]["completed"],
                       failed=r.load["requests"]["failed"], p50_us=lat["p50"],
                       p90_us=lat["p90"], p99_us=lat["p99"], max_us=lat["max"],
                       engine_cpu_s=round(eng["cpu_user_s"] + eng["cpu_sys_s"], 6))
        writer.writerow(row)
    return out.getvalue()


def export_json(view: ExperimentView) -> str:
    doc = {"schema_version": 2, "experiment": {
        "id": view.id, "name": view.name, "description": view.description,
        "created_at": view.created_at, "status": view.status, "host": view.host,
        "stacklab_commit": view.commit, "versions": view.versions},
        "trials": [asdict(s) for s in view.summaries],
        "runs": [asdict(r) for r in view.runs]}
    return json.dumps(doc, indent=2)
