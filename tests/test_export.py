"""The JSON export is a contract: a real export (real servers, the real engine, an invalid
run beside measured ones, TLS) follows stacklab/report/export.schema.json, the engine
reports it carries follow the engine's schema, and the version is the one CONTRIBUTING.md's
changelog describes. The CSV has a row per stored run and carries its stored figures:
a column per knob, the load window, percentiles, error and status classes, per
component CPU and memory, flags and verdicts."""

import csv
import io
import json
import re

import jsonschema
import pytest
from typer.testing import CliRunner

from stacklab.analysis.analyze import load_view
from stacklab.cli import cli
from stacklab.report import export
from stacklab.store import Outcome, RunRecord, Store
from stacklab.measure.verify import Status, Verdict

from fakes import VERDICTS, checked, fake_experiment, fake_load, fake_resources, load_report
from helpers import ROOT, require_engine, server_processes, tamper

SCHEMA = json.loads((ROOT / "stacklab" / "report" / "export.schema.json").read_text())

MIXED = """
[experiment]
remeasure = 0   # runs are counted: none measured again on a busy host
name = "mixed"
repetitions = 1
requests = 200
warmup = "0s"

[matrix]
stack = ["nginx", "apache"]
workload = ["static-page"]
concurrency = [2]
nginx.tls = [false, true]
"""


def exported(db, name: str) -> dict:
    result = CliRunner().invoke(cli, ["export", name, "--format", "json", "--db", str(db)])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_the_schema_is_a_schema_of_this_version():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["properties"]["schema_version"] == {"const": export.SCHEMA_VERSION}
    readme = (ROOT / "CONTRIBUTING.md").read_text()
    changelog = readme.split("## Export JSON: schema changelog", 1)[1].split("\n## ", 1)[0]
    assert re.search(rf"^\*\*{export.SCHEMA_VERSION}\*\* \(this version\)", changelog, re.M)


@pytest.mark.integration
def test_a_real_export_follows_its_schema(tmp_path, monkeypatch):
    """Apache's config says KeepAlive Off while its knob says on: its run is invalid (no
    load); nginx's runs are measured, one over TLS."""
    require_engine()
    tamper(monkeypatch, "apache", "httpd.conf", r"^KeepAlive On$", "KeepAlive Off")
    spec, db = tmp_path / "mixed.toml", tmp_path / "stacklab.db"
    spec.write_text(MIXED)
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert server_processes() == []
    doc = exported(db, "mixed")
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    assert doc["schema_version"] == export.SCHEMA_VERSION
    assert sorted(r["outcome"] for r in doc["runs"]) == ["invalid", "ok", "ok"]
    for run in doc["runs"]:
        if run["load"] is not None:
            checked(run["load"])                   # the engine's report, whole
    assert [t["tls"]["protocols"] for t in doc["trials"] if t["tls"]] == [["TLSv1.3"]]
    invalid = next(t for t in doc["trials"] if t["runs_invalid"])
    assert invalid["stack"] == "apache" and invalid["rps"]["median"] is None
    assert any(v["status"] == "FAIL" for v in invalid["verdicts"])


def test_the_fixed_export_follows_its_schema(tmp_path):
    """Flags with their details, several repetitions and estimates with intervals."""
    fake_experiment(tmp_path / "r.db")
    doc = exported(tmp_path / "r.db", "fixed")
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    assert any(t["flag_details"] for t in doc["trials"])
    assert all(t["rps"]["ci"] for t in doc["trials"])


# A knob value a label or a cell must carry whole: a quote, a backslash, a newline.
AWKWARD = 'say "hi" \\ then\nbye'


def knobbed_experiment(db, name: str = "knobbed") -> int:
    """Three trials whose knob sets differ (one lacks `nginx.worker_processes`, one is
    apache's), two measured runs each with a 3.5 s load window in a 20 s run, errors,
    a 5xx class and a WARN verdict on one; and an invalid run (no load) of apache."""
    store = Store.open(db)
    variants = (("nginx", {"nginx.worker_processes": 1, "nginx.root": AWKWARD}),
                ("nginx", {"nginx.root": "/srv"}),
                ("apache", {"apache.mpm": "event", "load.keepalive": False}))
    trials = [(f"t{k}", f"trial {k}", {"stack": stack, "workload": "static-page",
                                       "concurrency": 4, "knobs": knobs,
                                       "measure": {"duration_s": 3.5}})
              for k, (stack, knobs) in enumerate(variants)]
    exp = store.new_experiment(name, f"{name}.toml", "h", {"experiment": {
        "description": "knob sets that differ"}}, trials,
        {"cores": 2, "cpu_model": "Test CPU", "kernel": "6.1", "memory_mib": 1024},
        "0.1.0", "abc123", "2026-01-01T00:00:00+00:00")
    for rep in (1, 2):
        for k, (tid, _, d) in enumerate(trials):
            stack = d["stack"]
            if stack == "apache" and rep == 2:
                store.add_run(RunRecord(
                    experiment_id=exp, trial_id=tid, repetition=rep,
                    outcome=Outcome.INVALID, reason="verification FAILed",
                    started_at="2026-01-01T00:01:00", ended_at="2026-01-01T00:01:05",
                    knobs={stack: {}}, versions={},
                    configs={}, verdicts=(Verdict(stack, "keepalive", Status.FAIL, "off"),),
                    run_dir="/tmp/x"))
                continue
            doc = fake_load(1000.0 * (k + 1) + rep, 4000.0, seed=rep + 10 * k,
                            duration_s=3.5, warmup_s=1.0)
            if k == 0:
                doc["requests"]["failed"] = 5
                doc["requests"]["errors"]["timeout"] = 3
                doc["requests"]["errors"]["read"] = 2
                doc["status_classes"]["5xx"] = 4
            store.add_run(RunRecord(
                experiment_id=exp, trial_id=tid, repetition=rep, outcome=Outcome.OK,
                started_at="2026-01-01T00:00:00", ended_at="2026-01-01T00:00:20",
                knobs={stack: {}}, versions={stack: "1.0"}, configs={},
                verdicts=VERDICTS + ((Verdict(stack, "workers", Status.WARN, "1"),)
                                     if k == 0 else ()),
                load=load_report(doc),
                resources=fake_resources(stack, 0.5 * (k + 1), 10.0 + k + rep),
                flags=["generator-bound"] if k == 1 and rep == 1 else [],
                run_dir="/tmp/x"))
    store.close()
    return exp


def csv_rows(db, name: str = "knobbed") -> list[dict]:
    result = CliRunner().invoke(cli, ["export", name, "--format", "csv", "--db", str(db)])
    assert result.exit_code == 0, result.output
    return list(csv.DictReader(io.StringIO(result.output)))


def stored_runs(db, name: str = "knobbed") -> list:
    store = Store.open(db, readonly=True)
    try:
        return load_view(store, name).runs
    finally:
        store.close()


def test_the_csv_has_a_column_per_knob_empty_where_a_trial_lacks_it(tmp_path):
    knobbed_experiment(tmp_path / "k.db")
    rows = csv_rows(tmp_path / "k.db")
    header = list(rows[0])
    knob_columns = ["apache.mpm", "load.keepalive", "nginx.root", "nginx.worker_processes"]
    start, end = header.index("concurrency") + 1, header.index("duration_s")
    assert header[start:end] == knob_columns
    by_trial = {r["trial_id"]: r for r in rows}
    assert {k: by_trial["t0"][k] for k in knob_columns} == {
        "apache.mpm": "", "load.keepalive": "", "nginx.root": AWKWARD,
        "nginx.worker_processes": "1"}
    assert {k: by_trial["t1"][k] for k in knob_columns} == {
        "apache.mpm": "", "load.keepalive": "", "nginx.root": "/srv",
        "nginx.worker_processes": ""}
    t2 = by_trial["t2"]
    assert (t2["load.keepalive"], t2["apache.mpm"]) == ("false", "event")


def test_the_csv_carries_each_runs_stored_figures(tmp_path):
    """Duration is the load window (3.5 s), not the 20 s the run took with start-up;
    percentiles are the engine's, in ms; the invalid run has its verdicts and no load."""
    knobbed_experiment(tmp_path / "k.db")
    rows = csv_rows(tmp_path / "k.db")
    runs = stored_runs(tmp_path / "k.db")
    assert [(r["trial_id"], int(r["repetition"])) for r in rows] == [
        (r.trial_id, r.repetition) for r in runs]
    header = list(rows[0])
    assert [c for c in header if c.startswith("errors.")] == [
        f"errors.{e}" for e in ("connect", "read", "write", "timeout", "tls",
                                "bad_response", "length_mismatch")]
    assert [c for c in header if c.startswith("status.")] == ["status.2xx", "status.5xx"]
    assert [c for c in header if "." in c and c.split(".")[0] in (
        "cpu_us_per_request", "rss_mib_peak", "rss_mib_idle")] == [
        "cpu_us_per_request.apache", "cpu_us_per_request.nginx", "rss_mib_peak.apache",
        "rss_mib_peak.nginx", "rss_mib_idle.apache", "rss_mib_idle.nginx"]
    for row, run in zip(rows, runs):
        if run.load is None:
            assert row["outcome"] == "invalid" and row["duration_s"] == row["p999_ms"] == ""
            assert row["verdicts"] == "keepalive:FAIL"
            continue
        stored = run.load.raw
        assert float(row["duration_s"]) == stored["duration_s"] == 3.5
        assert float(row["p999_ms"]) == stored["latency_us"]["p999"] / 1e3
        assert float(row["p99_ms"]) == stored["latency_us"]["p99"] / 1e3
        assert float(row["rps"]) == stored["rps"]
        assert float(row["mb_per_s"]) == pytest.approx(stored["bytes"]["total"] / 3.5 / 1e6)
        assert {e: int(row[f"errors.{e}"]) for e in stored["requests"]["errors"]} == \
            stored["requests"]["errors"]
        assert int(row["status.2xx"]) == stored["status_classes"]["2xx"]
        stack = row["stack"]
        res = run.resources.components[stack]
        assert float(row[f"cpu_us_per_request.{stack}"]) == pytest.approx(
            res["cpu_s"] / stored["requests"]["completed"] * 1e6, abs=1e-3)
        assert float(row[f"rss_mib_peak.{stack}"]) == res["rss_mib_peak"]
        assert float(row[f"rss_mib_idle.{stack}"]) == res["rss_mib_idle_before"]
        other = "apache" if stack == "nginx" else "nginx"
        assert row[f"rss_mib_peak.{other}"] == ""
        assert row["flags"] == ";".join(run.flags)
        assert row["verdicts"] == ";".join(f"{v.check}:{v.status.value}"
                                           for v in run.verdicts)
    t0 = next(r for r in rows if r["trial_id"] == "t0")
    assert (t0["errors.timeout"], t0["errors.read"], t0["status.5xx"]) == ("3", "2", "4")
    assert t0["verdicts"].endswith(";workers:WARN")
    assert next(r for r in rows if r["trial_id"] == "t1")["flags"] == "generator-bound"


# Cells a spreadsheet would run as formulas (OWASP's CSV injection rule): each as a trial
# label and as a knob value, with the text that reaches the CSV.
FORMULAS = ('=HYPERLINK("http://x","y")', "+1+1", "-2+3", "@SUM(A1:A2)", "\tx", "\rx")


def formula_experiment(db) -> None:
    """A trial per formula, its label and its `nginx.root` that formula, and numbers
    that are negative (`nginx.offset` -5.2, `nginx.shift` -3): one run each."""
    store = Store.open(db)
    trials = [(f"f{k}", text, {"stack": "nginx", "workload": "static-page",
                               "concurrency": 1, "measure": {"duration_s": 2.0},
                               "knobs": {"nginx.root": text, "nginx.offset": -5.2,
                                         "nginx.shift": -3, "nginx.note": "a=b"}})
              for k, text in enumerate(FORMULAS)]
    exp = store.new_experiment("formulas", "formulas.toml", "h", {"experiment": {}},
                               trials, {"cores": 2}, "0.1.0", None,
                               "2026-01-01T00:00:00+00:00")
    for k, (tid, _, _) in enumerate(trials):
        store.add_run(RunRecord(
            experiment_id=exp, trial_id=tid, repetition=1, outcome=Outcome.INVALID,
            reason="-1 workers", started_at="2026-01-01T00:00:00",
            ended_at="2026-01-01T00:00:03", knobs={"nginx": {}}, versions={},
            configs={}, verdicts=(), run_dir="/tmp/x"))
    store.close()


def test_the_csv_never_starts_a_text_cell_like_a_formula(tmp_path):
    """A label or knob value that starts with = + - @, a tab or a CR is prefixed with a
    single quote, so a spreadsheet shows it as text; negative numbers stay numbers."""
    formula_experiment(tmp_path / "f.db")
    rows = csv_rows(tmp_path / "f.db", "formulas")
    assert [(r["label"], r["nginx.root"]) for r in rows] == [
        ("'" + text, "'" + text) for text in FORMULAS]
    for r in rows:
        assert (r["nginx.offset"], r["nginx.shift"], r["nginx.note"]) == ("-5.2", "-3", "a=b")
        assert r["reason"] == "'-1 workers"
        assert not [c for c in r.values() if c and c[0] in "=+-@\t\r"
                    and c not in ("-5.2", "-3")]
