"""The engine against known delays: what its latency numbers mean, pinned by a server whose
answer times are set. Every request waits 10 ms, every 50th waits 100 ms (2% of them,
so the 99th percentile falls among the slow ones and the 98th does not).

Tolerances. `time.sleep` never returns early, so 10 ms and 100 ms are floors, exact to
the histogram's resolution; above them is the Python server's own work and the wake-up
of a thread on a host whose two cores are shared (a few hundred µs quiet, a few ms busy).
The upper bounds leave 5 ms of that: wide enough for a busy host, narrow enough that a
slow answer counted as a fast one (or the reverse), or a unit off by 1000, fails."""

import json
import subprocess
import threading
from http.server import ThreadingHTTPServer

import pytest

from stacklab.measure.drive import REPO_ENGINE
from stacklab.analysis.stats import decode_histogram, merged_percentiles, values_at_percentiles

from helpers import BodyHandler, require_engine, serving

FAST_S, SLOW_S, SLOW_EVERY = 0.010, 0.100, 50
FAST_US, SLOW_US = int(FAST_S * 1e6), int(SLOW_S * 1e6)
SLACK_US = 5_000
BODY = b"x" * 100


class DelayServer(ThreadingHTTPServer):
    """Counts requests in arrival order; the n-th waits SLOW_S when n % SLOW_EVERY == 0."""
    daemon_threads = True
    # socketserver's default backlog is 5: the engine's 10 simultaneous connects would
    # overflow it and one SYN would be retried after 1 s, a latency no delay here set.
    request_queue_size = 64

    def __init__(self):
        super().__init__(("127.0.0.1", 0), BodyHandler)
        self.body = BODY
        self.lock = threading.Lock()
        self.served = 0

    def delay_s(self) -> float:
        with self.lock:
            self.served += 1
            return SLOW_S if self.served % SLOW_EVERY == 0 else FAST_S


@pytest.fixture
def server():
    """A fresh server per test: its request count starts at 0, so exactly every 50th
    request of the run is slow."""
    with serving(DelayServer()) as httpd:
        yield httpd


def run_engine(server: DelayServer, *args: str) -> dict:
    require_engine()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    out = subprocess.run([str(REPO_ENGINE), "--json", "--threads", "1", *args, url],
                         capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    doc = json.loads(out.stdout)
    assert doc["requests"]["failed"] == 0, doc["requests"]
    return doc


@pytest.mark.integration
def test_closed_loop_median_is_the_fast_delay_and_p99_the_slow_one(server):
    # 1000 requests: 20 slow. p99 is rank 990, among the slowest 20 (ranks 981-1000);
    # p90 (rank 900) is a fast one.
    doc = run_engine(server, "-c", "10", "-n", "1000")
    lat = doc["latency_us"]
    assert server.served == lat["count"] == 1000
    assert FAST_US <= lat["p50"] < FAST_US + SLACK_US, lat
    assert FAST_US <= lat["p90"] < FAST_US + SLACK_US, lat
    assert SLOW_US <= lat["p99"] < SLOW_US + SLACK_US, lat
    assert SLOW_US <= lat["max"] < SLOW_US + SLACK_US, lat
    # Exactly 20 values at or above the slow delay: the histogram holds what was served.
    h = decode_histogram(doc["histogram"])
    assert h.get_total_count() == 1000
    p98, p981 = values_at_percentiles(h, [98.0, 98.1])     # ranks 980 and 981
    assert p98 < SLOW_US <= p981, (p98, p981)


@pytest.mark.integration
def test_python_percentiles_from_the_histogram_equal_the_engines(server):
    # Stacklab's own reading of the engine's histogram (stats.merged_percentiles, which
    # analyze and the reports use) must give the engine's numbers exactly, not nearly:
    # the same values, the same rank rule. 999 requests: no percentile is a whole rank,
    # where a rounded rank and the ceiling part ways.
    doc = run_engine(server, "-c", "10", "-n", "999")
    ours = merged_percentiles([doc["histogram"]])
    engine = doc["latency_us"]
    assert {k: ours[k] for k in ("count", "p50", "p90", "p99", "p999", "max")} == \
        {k: engine[k] for k in ("count", "p50", "p90", "p99", "p999", "max")}
    listed = doc["latency_percentiles_us"]
    assert listed
    h = decode_histogram(doc["histogram"])
    assert values_at_percentiles(h, [p["percentile"] for p in listed]) == \
        [p["value"] for p in listed]


@pytest.mark.integration
def test_open_loop_below_capacity_needs_no_correction(server):
    # 100 requests/s over 10 connections: each connection sends every 100 ms, and takes
    # 10 ms (100 ms every 50th request) to be answered, so no request waits for its
    # connection and the corrected p99 (timed from the intended send) is the uncorrected
    # one (timed from the actual send). They differ only by the pacer's wake-up lateness
    # (µs; 1 ms allows a busy host). 200 requests: 4 slow, p99 is rank 198 among them.
    doc = run_engine(server, "-c", "10", "--rate", "100", "-n", "200")
    corrected, uncorrected = doc["latency_us"], doc["latency_uncorrected_us"]
    assert corrected["count"] == uncorrected["count"] == 200
    assert SLOW_US <= uncorrected["p99"] < SLOW_US + SLACK_US, uncorrected
    assert abs(corrected["p99"] - uncorrected["p99"]) <= 1_000, (corrected, uncorrected)
    assert abs(corrected["p50"] - uncorrected["p50"]) <= 1_000, (corrected, uncorrected)


@pytest.mark.integration
def test_open_loop_above_capacity_is_corrected(server):
    # The contrast that lets the test above fail: one connection asked for 200/s can
    # serve at most ~85/s (11.8 ms each on average), so requests queue behind it and the
    # corrected latency grows with the queue while the uncorrected stays ~10 ms.
    doc = run_engine(server, "-c", "1", "--rate", "200", "-d", "1s")
    corrected, uncorrected = doc["latency_us"], doc["latency_uncorrected_us"]
    assert uncorrected["p50"] < FAST_US + SLACK_US, uncorrected
    assert corrected["p99"] > uncorrected["p99"] + 100_000, (corrected, uncorrected)
