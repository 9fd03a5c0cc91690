"""Exports: one row per stored run, as CSV or JSON (JSON keeps the engine reports whole).

The JSON export is a versioned contract: `export.schema.json` beside this file describes
`SCHEMA_VERSION`, and CONTRIBUTING.md ("Export JSON: schema changelog") says what changed."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict

from ..analysis.analyze import ExperimentView, TrialSummary, _components, _per_request
from ..store import RunRecord
from ..store.records import verdict_doc

SCHEMA_VERSION = 10

# The CSV's columns before, between and after those that depend on the experiment: its
# knobs (after `concurrency`), then per error class, status class and component.
CSV_TRIAL = ("experiment_id", "trial_id", "label", "repetition", "outcome", "reason",
             "started_at", "ended_at", "stack", "workload", "concurrency")
CSV_LOAD = ("duration_s", "rps", "mb_per_s", "completed", "failed", "p50_ms", "p90_ms",
            "p99_ms", "p999_ms", "max_ms", "engine_cpu_s")
CSV_END = ("flags", "verdicts")


# A spreadsheet runs a cell that starts with one of these as a formula (OWASP's CSV
# injection rule): a label or knob value from a spec must stay text.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutral(value):
    """A CSV cell a spreadsheet will not run: a string that starts like a formula gets a
    leading single quote (which spreadsheets read as "text"). Only strings: a number
    such as -5.2 stays a number."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def knob_text(value) -> str:
    """A knob's value as a cell or label: a string as is, anything else as in JSON
    (true, 4, 1.5, [\"a\"]), so no value reads as Python's repr."""
    return value if isinstance(value, str) else json.dumps(value)


def knob_names(view: ExperimentView) -> list[str]:
    """Every knob some trial of the experiment sets (`component.name`), sorted."""
    return sorted({k for s in view.summaries for k in s.knobs})


def error_classes(view: ExperimentView) -> tuple[str, ...]:
    """The HTML report's error columns: the engine's fixed taxonomy in its order, then
    any class a newer engine reported. html.py holds the taxonomy; it is imported here,
    not at the top, because it draws charts (plotly) that `--help` should not load."""
    from .html import _error_classes, outcomes
    return _error_classes([(None, None, outcomes(view))])


def _status_classes(runs: list[RunRecord]) -> list[str]:
    return sorted({c for r in runs if r.load for c in r.load.status_classes})


def csv_columns(view: ExperimentView) -> list[str]:
    """The header: fixed columns, then one per knob, error class, status class and
    component of this experiment."""
    comps = _components(view.runs)
    errors = error_classes(view)      # of the measured runs; an invalid run's load too:
    errors += tuple(sorted({e for r in view.runs if r.load for e in r.load.errors}
                           - set(errors)))
    return [*CSV_TRIAL, *knob_names(view), *CSV_LOAD, *(f"errors.{e}" for e in errors),
            *(f"status.{c}" for c in _status_classes(view.runs)),
            *(f"cpu_us_per_request.{c}" for c in comps),
            *(f"rss_mib_peak.{c}" for c in comps),
            *(f"rss_mib_idle.{c}" for c in comps), *CSV_END]


def export_csv(view: ExperimentView) -> str:
    """One row per stored run. Latencies in ms (the engine's, per run: corrected for
    coordinated omission); `duration_s` is the measured load window, not the stack's
    start-up; per component, server CPU per request and RSS at peak and at rest."""
    summaries = {s.trial_id: s for s in view.summaries}
    columns = csv_columns(view)
    lines = [_csv_line(columns, dict(zip(columns, columns)))]
    for r in view.runs:
        s = summaries[r.trial_id]
        row = {"experiment_id": r.experiment_id, "trial_id": r.trial_id, "label": s.label,
               "repetition": r.repetition, "outcome": r.outcome, "reason": r.reason or "",
               "started_at": r.started_at, "ended_at": r.ended_at, "stack": s.stack,
               "workload": s.workload, "concurrency": s.concurrency,
               "flags": ";".join(r.flags),
               "verdicts": ";".join(f"{v.check}:{v.status.value}" for v in r.verdicts)}
        if r.load:
            row.update(_load_cells(r))
        row = {k: neutral(v) for k, v in row.items()}
        # a knob is judged by its value, not its text: 4 and -5.2 stay numbers
        row.update({k: knob_text(neutral(v)) for k, v in s.knobs.items()})
        lines.append(_csv_line(columns, row))
    return "".join(lines)


def _csv_line(columns: list[str], row: dict) -> str:
    """One CSV line ending in "\n". Python's writer quotes a field only for the
    characters of its own line terminator, so a lone CR in a label would end the row
    in a spreadsheet: the line is written with "\r\n", which quotes both, then ended
    with "\n" as the rest of the file."""
    out = io.StringIO()
    csv.DictWriter(out, columns, restval="", lineterminator="\r\n").writerow(row)
    return out.getvalue().removesuffix("\r\n") + "\n"


def _load_cells(r: RunRecord) -> dict:
    """A measured run's figures: the engine's report and the monitor's summaries."""
    load = r.load
    lat = load.latency_us
    row = {"duration_s": load.duration_s, "rps": load.rps,
           "mb_per_s": round(load.bytes_total / load.duration_s / 1e6, 6)
           if load.duration_s else "",
           "completed": load.completed, "failed": load.failed,
           "p50_ms": lat.p50 / 1e3, "p90_ms": lat.p90 / 1e3, "p99_ms": lat.p99 / 1e3,
           "p999_ms": "" if lat.p999 is None else lat.p999 / 1e3, "max_ms": lat.max / 1e3,
           "engine_cpu_s": round(load.engine_cpu_s, 6),
           **{f"errors.{e}": n for e, n in load.errors.items()},
           **{f"status.{c}": n for c, n in load.status_classes.items()}}
    for c, res in r.resources.components.items():
        if load.completed and res.get("cpu_s") is not None:
            row[f"cpu_us_per_request.{c}"] = round(_per_request(res["cpu_s"], r), 3)
        row[f"rss_mib_peak.{c}"] = _blank(res.get("rss_mib_peak"))
        row[f"rss_mib_idle.{c}"] = _blank(res.get("rss_mib_idle_before"))
    return row


def _blank(value) -> object:
    return "" if value is None else value


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
    doc = asdict(s)
    del doc["experiment"]             # the document's own experiment
    return {**doc, "verdicts": [verdict_doc(v) for v in s.verdicts],
            # infinite where a busy window could not be sized: JSON has no infinity
            "disturbance": s.disturbance if s.disturbance < float("inf") else None}


def _run(r: RunRecord) -> dict:
    """A stored run: `load` is the engine's report whole (its own schema_version)."""
    return {"experiment_id": r.experiment_id, "trial_id": r.trial_id,
            "repetition": r.repetition, "outcome": r.outcome.value, "reason": r.reason,
            "started_at": r.started_at, "ended_at": r.ended_at, "knobs": r.knobs,
            "versions": r.versions, "configs": r.configs,
            "verdicts": [verdict_doc(v) for v in r.verdicts],
            "load": r.load.raw if r.load else None, "resources": r.resources.to_json(),
            "flags": list(r.flags), "log_tail": r.log_tail, "run_dir": r.run_dir}
