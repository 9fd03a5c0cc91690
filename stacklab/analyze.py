"""Analyze: summarize the repetitions of each trial (medians and spread)."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from typing import Any

from .store import RunRecord, Store


@dataclass(frozen=True)
class TrialSummary:
    trial_id: str
    label: str
    stack: str
    workload: str
    concurrency: int
    knobs: dict[str, Any]
    runs_ok: int
    runs_failed: int          # failed or invalid
    rps_median: float | None
    rps_min: float | None
    rps_max: float | None
    p50_us: float | None      # median over repetitions
    p99_us: float | None
    server_cpu_us: float | None   # server CPU per completed request, median (all components)
    engine_cpu_us: float | None   # load engine CPU per completed request, median
    errors: int               # failed requests over all ok runs
    reasons: tuple[str, ...]  # why runs failed


@dataclass(frozen=True)
class ExperimentView:
    """Everything a report shows: the experiment row, trials, summaries and runs."""

    id: int
    name: str
    description: str
    created_at: str
    status: str
    host: dict
    commit: str | None
    versions: dict[str, str]
    summaries: list[TrialSummary]
    runs: list[RunRecord]


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def per_request_us(cpu_s: float, run: RunRecord) -> float:
    return cpu_s / run.load["requests"]["completed"] * 1e6


def summarize(definition: dict, label: str, trial_id: str,
              runs: list[RunRecord]) -> TrialSummary:
    ok = [r for r in runs if r.outcome == "ok" and r.load]
    rps = [r.load["rps"] for r in ok]
    return TrialSummary(
        trial_id, label, definition["stack"], definition["workload"],
        definition["concurrency"], definition["knobs"], len(ok), len(runs) - len(ok),
        _median(rps), min(rps, default=None), max(rps, default=None),
        _median([r.load["latency_us"]["p50"] for r in ok]),
        _median([r.load["latency_us"]["p99"] for r in ok]),
        _median([per_request_us(sum(c["cpu_s"] for c in r.resources.values()), r) for r in ok
                 if r.load["requests"]["completed"]]),
        _median([per_request_us(r.load["engine"]["cpu_user_s"] + r.load["engine"]["cpu_sys_s"],
                                r) for r in ok if r.load["requests"]["completed"]]),
        sum(r.load["requests"]["failed"] for r in ok),
        tuple(sorted({r.reason for r in runs if r.outcome != "ok" and r.reason})))


def load_view(store: Store, experiment: str | int | None) -> ExperimentView:
    row = store.experiment(experiment)
    runs = list(store.runs(row["id"]))
    by_trial: dict[str, list[RunRecord]] = {}
    for r in runs:
        by_trial.setdefault(r.trial_id, []).append(r)
    summaries = [summarize(json.loads(t["definition_json"]), t["label"], t["trial_id"],
                           by_trial.get(t["trial_id"], []))
                 for t in store.trials(row["id"])]
    versions = runs[-1].versions if runs else {}
    spec = json.loads(row["spec_json"])
    return ExperimentView(row["id"], row["name"], spec["experiment"].get("description", ""),
                          row["created_at"], row["status"], json.loads(row["host_json"]),
                          row["stacklab_commit"], versions, summaries, runs)
