"""The engine's JSON report as the Python side reads it: the real binary against a small
loopback server, its histogram decoded by the independent `hdrh` decoder, the report
checked against the engine's own schema; old (schema 1 to 4) and new (schema 5) reports and
both histogram encodings read; the exit statuses after which a report is data."""

import base64
import json
import subprocess
from http.server import ThreadingHTTPServer

import jsonschema
import pytest
from hdrh.histogram import HdrHistogram

from stacklab.measure.drive import LOAD_KNOBS, REPO_ENGINE, LoadPlan, LoadReport, run_load
from stacklab.errors import EngineError
from stacklab.analysis.stats import decode_histogram, merged_percentiles

from fakes import engine_histogram, engine_schema, fake_load, fake_report
from helpers import ROOT, BodyHandler, require_engine, serving

SCHEMA = json.loads((ROOT / "engine" / "schema" / "report.schema.json").read_text())
BODY = b"x" * 600


@pytest.fixture(scope="module")
def server_url():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), BodyHandler)
    httpd.daemon_threads = True
    httpd.body = BODY
    with serving(httpd):
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"


@pytest.fixture
def refused_url():
    """A loopback port nothing listens on (bound, then closed)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/"


def run_engine(*args: str) -> tuple[int, dict]:
    require_engine()
    out = subprocess.run([str(REPO_ENGINE), "--json", *args], capture_output=True,
                         timeout=60, stdin=subprocess.DEVNULL)
    return out.returncode, json.loads(out.stdout)


@pytest.mark.integration
def test_real_histogram_decodes_with_hdrh_and_matches_the_report(server_url):
    # 1000 requests: 99% of them is a whole rank, where hdrh's rounded rank and the
    # engine's ceiling agree (see engine/README.md, "Percentiles: one rank rule").
    code, doc = run_engine("-c", "2", "--threads", "1", "-n", "1000", server_url)
    assert code == 0
    raw = base64.b64decode(doc["histogram"])
    assert int.from_bytes(raw[:4], "big") == 0x1C849314     # standard compressed V2
    h = HdrHistogram.decode(doc["histogram"])                # the independent decoder
    assert h.get_total_count() == doc["requests"]["completed"] == 1000
    assert h.get_value_at_percentile(99) == pytest.approx(doc["latency_us"]["p99"], rel=1e-3)
    assert decode_histogram(doc["histogram"]).get_total_count() == 1000


@pytest.mark.integration
def test_real_report_follows_its_schema(server_url):
    code, doc = run_engine("-c", "3", "-n", "300", server_url)
    assert code == 0
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    assert doc["schema_version"] == 5 and doc["protocol"] == "http/1.1"
    assert doc["connections"]["slots"] == 3 and doc["connections"]["idle_slots"] == 0
    assert doc["in_flight"]["count"] == 0
    assert "ended_early" not in doc


@pytest.mark.integration
def test_a_run_that_completed_nothing_is_a_report_not_a_crash(refused_url, tmp_path):
    load = {k.name: k.default for k in LOAD_KNOBS}
    plan = LoadPlan(urls=((refused_url, 1),), connections=2, duration_s=None, requests=6,
                    warmup_s=0.0, load=load)
    require_engine()
    report = run_load(plan, tmp_path)          # the engine exits 3 and prints its report
    assert (report.exit_status, report.completed, report.failed) == (3, 0, 6)
    assert report.raw["requests"]["errors"]["connect"] == 6


def test_reports_of_both_schemas_load_and_others_are_refused():
    for schema in (1, 2, 3, 4, 5):
        doc = fake_load(1000, 500, seed=1, schema=schema)
        report = LoadReport.from_json(doc)
        assert report.completed == 2000 and report.p99_us == doc["latency_us"]["p99"]
    assert "connections" not in fake_load(1000, 500, seed=1, schema=1)
    with pytest.raises(EngineError, match="schema_version 6"):
        LoadReport.from_json(dict(fake_load(1000, 500, seed=1), schema_version=6))


def test_both_histogram_encodings_decode_to_the_same_histogram():
    values = [100 + (i * 7919) % 50_000 for i in range(500)]
    old, new = engine_histogram(values, schema=1), engine_histogram(values, schema=2)
    assert int.from_bytes(base64.b64decode(old)[:4], "big") == 0x1C849313
    a, b = decode_histogram(old), decode_histogram(new)
    for p in (50, 90, 99, 99.9, 100):
        assert a.get_value_at_percentile(p) == b.get_value_at_percentile(p)
    merged = merged_percentiles([old, new])
    assert merged["count"] == 1000 and merged["p99"] == a.get_value_at_percentile(99)
    with pytest.raises(ValueError, match="cookie"):
        decode_histogram(base64.b64encode(b"\0" * 40).decode())


def test_fakes_keep_the_contract():
    doc = fake_load(10_000, 1600, seed=2)
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)     # the whole report
    assert doc["connections"]["slots"] == doc["config"]["connections"] == 16
    assert doc["latency_uncorrected_us"]["p99"] < doc["latency_us"]["p99"]
    old = fake_load(10_000, 1600, seed=2, schema=1)
    jsonschema.Draft202012Validator(engine_schema(1)).validate(old)
    with pytest.raises(jsonschema.ValidationError):   # schema 1 lacks what 2 requires
        jsonschema.Draft202012Validator(SCHEMA).validate(old)


def test_a_fake_that_breaks_the_contract_is_refused():
    """fake_load checks what it returns: a report the engine could not print fails."""
    from fakes import checked
    doc = fake_load(1000, 500, seed=1)
    doc["latency_us"]["p99"] = 812.5           # the engine's percentiles are whole µs
    with pytest.raises(jsonschema.ValidationError):
        checked(doc)


def test_engine_cpu_of_the_measured_phase_leaves_out_the_warmup():
    # The engine reports its whole process: 1.2 s over 1 s of warm-up + 2 s measured.
    load = fake_report(1000, 500, seed=1, duration_s=2.0, engine_cpu_s=1.2, warmup_s=1.0)
    assert load.engine_cpu_measured_s == pytest.approx(0.8)
    assert fake_report(1000, 500, seed=1, engine_cpu_s=1.2).engine_cpu_measured_s == \
        pytest.approx(1.2)
