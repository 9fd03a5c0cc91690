"""A breakdown reads the engine's reports through LoadReport's typed fields (issue 22):
each keep-alive mode's measurement holds the same figures, in the same shape, as the
engine's JSON says, and a URL none of whose requests completed is one error naming the
engine's error classes."""

import statistics

import pytest

from stacklab.methods.breakdown import _measurement
from stacklab.errors import StacklabError
from stacklab.analysis.stats import merged_percentiles

from fakes import fake_load, load_report

TIMING = {"samples": 5, "db_ms": 0.4, "php_ms": 1.1}


def rounds():
    docs = [fake_load(500.0, 2000, seed=n, duration_s=0.1) for n in (1, 2, 3)]
    docs[1]["requests"]["failed"] = 2
    return docs


@pytest.mark.parametrize("keepalive", [False, True])
def test_a_measurement_holds_the_engines_figures_as_its_json_says(keepalive):
    docs = rounds()
    got = _measurement("/p", keepalive, [load_report(d) for d in docs], TIMING)
    assert got == {
        "keepalive": keepalive, "completed": sum(d["requests"]["completed"] for d in docs),
        "failed": 2,
        "total_ms": merged_percentiles([d["histogram"] for d in docs], (50,))["p50"] / 1000,
        "ttfb_ms": statistics.median(d["ttfb_us"]["p50"] for d in docs) / 1000,
        "connect_ms": None if keepalive else
        statistics.median(d["connect_us"]["p50"] for d in docs) / 1000,
        "server_timing": TIMING}
    assert list(got) == ["keepalive", "completed", "failed", "total_ms", "ttfb_ms",
                         "connect_ms", "server_timing"]


def test_a_round_that_completed_nothing_is_left_out_of_the_figures():
    docs = rounds()
    docs[0]["requests"]["completed"] = 0
    got = _measurement("/p", True, [load_report(d) for d in docs], None)
    assert got["ttfb_ms"] == statistics.median(d["ttfb_us"]["p50"] for d in docs[1:]) / 1000


def test_no_request_completed_is_one_error_with_the_engines_error_classes():
    doc = fake_load(500.0, 2000, seed=1, duration_s=0.1)
    doc["requests"].update(completed=0, failed=4)
    doc["requests"]["errors"]["connect"] = 4
    with pytest.raises(StacklabError) as e:
        _measurement("/p", False, [load_report(doc)], None)
    assert str(e.value).startswith("/p: none of the engine's requests completed ([{")
    assert "'connect': 4" in str(e.value)
