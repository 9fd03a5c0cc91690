"""The engine as one of several agents of a load, against real nginx: `--segment 1/3
--rate 300` sends only the arrivals 1, 4, 7, … of a 300 req/s load, each at (1 + 3m)/300 s
(read from the test-only `--raw-log`), over HTTP/1.1 and h2c; `--start-at` starts the run
on the asked instant and the report's `start` says so; three agents' raw logs hold
exactly what their merged histogram holds."""

import json
import subprocess
import time

import jsonschema
import pytest
from hdrh.histogram import HdrHistogram

from stacklab.analysis.stats import decode_histogram
from stacklab.measure.drive import REPO_ENGINE

from helpers import ROOT, free_port, private_nginx, require_engine

SCHEMA = json.loads((ROOT / "engine" / "schema" / "report.schema.json").read_text())
RATE, AGENTS = 300, 3


@pytest.fixture(scope="module")
def nginx(tmp_path_factory):
    """A private nginx serving a small page over HTTP/1.1 and h2c: {protocol: URL}."""
    base = tmp_path_factory.mktemp("nginx-segments")
    ports = {"http/1.1": free_port(), "h2c": free_port()}
    with private_nginx(base, f"""
    server {{ listen 127.0.0.1:{ports['http/1.1']}; }}
    server {{ listen 127.0.0.1:{ports['h2c']} http2; }}""", ports.values()) as www:
        (www / "page.html").write_bytes(b"p" * 600)
        yield {p: f"http://127.0.0.1:{port}/page.html" for p, port in ports.items()}


def agent(k: int, url: str, raw_log, start_at: str, *more: str) -> subprocess.Popen:
    require_engine()
    return subprocess.Popen(
        [str(REPO_ENGINE), "--json", "-c", "2", "--rate", str(RATE), "-d", "1s",
         "--segment", f"{k}/{AGENTS}", "--start-at", start_at, "--raw-log", str(raw_log),
         *more, url],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)


def finished(proc: subprocess.Popen) -> dict:
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    doc = json.loads(out)
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    return doc


def raw_lines(path) -> list[tuple[int, int]]:
    return [tuple(map(int, line.split())) for line in path.read_text().splitlines()]


def arrival_us(i: int) -> int:
    """Arrival i of the whole load as the engine times it: i / rate s, whole µs."""
    return round(i / RATE * 1e9) // 1000


@pytest.mark.integration
@pytest.mark.parametrize("protocol", ["http/1.1", "h2c"])
def test_a_segment_sends_its_arrivals_from_the_asked_instant(nginx, tmp_path, protocol):
    asked = time.time() + 0.3
    more = ("--protocol", "h2c") if protocol == "h2c" else ()
    doc = finished(agent(1, nginx[protocol], tmp_path / "raw", f"{asked:.6f}", *more))
    assert doc["config"]["segment"] == {"index": 1, "of": AGENTS}
    assert doc["config"]["rate"] == RATE and doc["requests"]["failed"] == 0
    start = doc["start"]
    late_us = start["unix_us"] - start["asked_unix_us"]
    print(f"{protocol}: time zero {late_us} µs after the asked instant, first send "
          f"{start['first_send_unix_us'] - start['unix_us']} µs after time zero")
    assert abs(start["asked_unix_us"] - asked * 1e6) <= 1
    assert start["asked_unix_us"] <= start["unix_us"] <= start["first_send_unix_us"]
    assert late_us < 50_000
    lines = raw_lines(tmp_path / "raw")
    mine = {arrival_us(1 + 3 * m) for m in range(RATE)}
    assert lines and all(intended in mine for intended, _ in lines), lines[:10]
    assert len(lines) == doc["requests"]["completed"] >= 90     # about 100 in the second
    histogram = decode_histogram(doc["histogram"])
    assert histogram.get_total_count() == len(lines)
    for _, latency in lines:
        assert histogram.get_count_at_value(latency) > 0


@pytest.mark.integration
def test_three_agents_logs_hold_their_merged_histogram(nginx, tmp_path):
    asked = f"{time.time() + 0.5:.6f}"
    procs = [agent(k, nginx["http/1.1"], tmp_path / f"raw-{k}", asked) for k in range(AGENTS)]
    docs = [finished(p) for p in procs]
    zeros = [d["start"]["unix_us"] for d in docs]
    print(f"time zeros of the three agents within {max(zeros) - min(zeros)} µs")
    assert max(zeros) - min(zeros) < 50_000
    lines = [line for k in range(AGENTS) for line in raw_lines(tmp_path / f"raw-{k}")]
    assert len({intended for intended, _ in lines}) == len(lines), "each arrival once"
    merged = HdrHistogram(1, 3_600_000_000, 3)
    for d in docs:
        merged.add(decode_histogram(d["histogram"]))
    rebuilt = HdrHistogram(1, 3_600_000_000, 3)
    for _, latency in lines:
        rebuilt.record_value(latency)
    assert rebuilt.get_total_count() == merged.get_total_count() == len(lines)
    assert all(rebuilt.get_count_at_value(v) == merged.get_count_at_value(v) for _, v in lines)
    assert rebuilt.encode() == merged.encode()
