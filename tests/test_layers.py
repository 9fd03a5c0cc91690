"""Front layers over a measured run: a cache's hit ratio against the workload's cacheable
share, a balancer's spread over replicas by the replicas' own counters; and a composed
stack through `stacklab run`, each replica in its own directory, nothing left behind."""

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stacklab.cli import cli
from stacklab.run.layercheck import layer_figures, layer_verdicts
from stacklab.stacks import REGISTRY, STACKS
from stacklab.measure.verify import Status

from helpers import require_engine, server_processes


def knobs_of(stack):
    return {name: REGISTRY.defaults(name) for name in STACKS[stack].components}


def test_a_balancer_that_sends_everything_to_one_replica_fails():
    stack = "haproxy > nginx * 3"
    counted = {"nginx.1": {"requests": 9000}, "nginx.2": {"requests": 2},
               "nginx.3": {"requests": 1}, "haproxy": {"requests": 9003}}
    figures = layer_figures(STACKS[stack], counted, knobs_of(stack))
    assert figures["haproxy"]["spread"] == {"nginx.1": 9000, "nginx.2": 2, "nginx.3": 1}
    [verdict] = layer_verdicts(STACKS[stack], figures, None, knobs_of(stack))
    assert verdict.status is Status.FAIL
    assert "nginx.2, nginx.3 got less than half of the share its weight promises" \
        in verdict.detail


@pytest.mark.parametrize("counts, status", [
    ((3000, 3010, 2990), Status.PASS),
    ((2000, 4000, 3000), Status.FAIL),     # round robin promised a third each
])
def test_round_robin_is_held_to_its_promise(counts, status):
    stack = "haproxy > nginx * 3"
    counted = {f"nginx.{i}": {"requests": n} for i, n in enumerate(counts, 1)}
    figures = layer_figures(STACKS[stack], counted, knobs_of(stack))
    [verdict] = layer_verdicts(STACKS[stack], figures, None, knobs_of(stack))
    assert verdict.status is status, verdict.detail


def test_without_the_replicas_counters_the_balancers_own_are_used():
    stack = "haproxy > apache * 2"        # Apache counts nothing without extended status
    counted = {"apache.1": {}, "apache.2": {}, "haproxy": {"backend:0": 50, "backend:1": 50}}
    figures = layer_figures(STACKS[stack], counted, knobs_of(stack))
    assert figures["haproxy"]["spread_source"] == "haproxy's per-backend counters"
    assert layer_verdicts(STACKS[stack], figures, None, knobs_of(stack))[0].status \
        is Status.PASS


@pytest.mark.parametrize("hits, misses, cacheable, status", [
    (9990, 10, 1.0, Status.PASS),
    (0, 10000, 1.0, Status.FAIL),         # the cache did not cache
    (5000, 5000, 0.0, Status.FAIL),       # it served pages that forbid it
    (10, 9990, 0.0, Status.PASS),
    (5000, 5000, 0.5, Status.PASS),
    (2000, 8000, 0.5, Status.WARN),       # a URL set larger than the cache
    (800, 9200, 1.0, Status.WARN),        # a cache smaller than the set: still measured
])
def test_a_caches_hit_ratio_is_judged_by_the_workloads_cacheable_share(hits, misses,
                                                                        cacheable, status):
    stack = "varnish > nginx"
    figures = {"varnish": {"hits": hits, "misses": misses,
                           "hit_ratio": hits / (hits + misses)}}
    [verdict] = layer_verdicts(STACKS[stack], figures, cacheable, knobs_of(stack))
    assert verdict.status is status, verdict.detail
    assert f"cacheable share is {cacheable:.0%}" in verdict.detail


CLUSTER = """
[experiment]
remeasure = 0   # runs are counted: none measured again on a busy host
name = "cluster"
repetitions = 1
duration = "1s"
warmup = "0.3s"

[knobs]
haproxy.balance = "static-rr"
haproxy.weights = "1,2,1"

[matrix]
stack = ["haproxy > nginx * 3"]
workload = ["static-page"]
concurrency = [8]
"""


@pytest.mark.integration
def test_a_three_replica_cluster_runs_with_its_spread_verified(tmp_path):
    require_engine()
    spec, db = tmp_path / "cluster.toml", tmp_path / "r.db"
    spec.write_text(CLUSTER)
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 0, result.output
    outcome, verdicts, resources, run_dir = sqlite3.connect(db).execute(
        "SELECT outcome, verdicts_json, resources_json, run_dir FROM runs").fetchone()
    assert outcome == "ok"
    resources = json.loads(resources)
    assert {"nginx.1", "nginx.2", "nginx.3", "haproxy"} <= set(resources)
    spread = resources["_layers"]["haproxy"]["spread"]
    total = sum(spread.values())
    for replica, weight in zip(("nginx.1", "nginx.2", "nginx.3"), (1, 2, 1)):
        assert abs(spread[replica] / total - weight / 4) <= 0.1 * weight / 4, spread
    [after] = [v for v in json.loads(verdicts) if v["check"] == "spread over replicas"]
    assert after["status"] == "PASS", after
    kept = {p.name for p in Path(run_dir).iterdir() if p.is_dir()}
    assert kept == {"nginx.1", "nginx.2", "nginx.3", "haproxy"}, kept   # each its own logs
    # the shares as measured (25%, 50%, 25% on a quiet host; a replica's counter read a
    # few ms after another's can round one to 26%)
    shares = ", ".join(f"{r} {round(spread[r] / total, 4):.0%}"     # as stored: 4 places
                       for r in ("nginx.1", "nginx.2", "nginx.3"))
    shown = " ".join(CliRunner().invoke(cli, ["show", "--db", str(db)]).output.split())
    assert f"requests per replica {shares}" in shown
    report = tmp_path / "report.html"
    assert CliRunner().invoke(cli, ["report", "--db", str(db), "-o", str(report)]).exit_code == 0
    html = report.read_text()
    assert '<table id="layers">' in html and shares in html
    assert not server_processes()


def test_a_weighted_balancer_that_keeps_its_weights_passes():
    """1,4 promises 20% and 80%: 20% is not "less than half a fair share"."""
    stack = "haproxy > nginx * 2"
    knobs = knobs_of(stack)
    knobs["haproxy"]["weights"] = "1,4"
    counted = {"nginx.1": {"requests": 2000}, "nginx.2": {"requests": 8000}}
    figures = layer_figures(STACKS[stack], counted, knobs)
    [verdict] = layer_verdicts(STACKS[stack], figures, None, knobs)
    assert verdict.status is Status.PASS, verdict.detail


def test_only_the_outermost_cache_is_held_to_the_workloads_share():
    """The inner cache sees only the outer one's misses; and a cache whose counters were
    not read is said to be unknown, not passed."""
    stack = "varnish > squid > nginx"
    knobs = knobs_of(stack)
    figures = layer_figures(STACKS[stack], {
        "varnish": {"cache_hits": 5000, "cache_misses": 5000},
        "squid": {"cache_hits": 0, "cache_misses": 5000}}, knobs)
    verdicts = layer_verdicts(STACKS[stack], figures, 0.5, knobs)
    assert [(v.component, v.status) for v in verdicts] == [("varnish", Status.PASS)]
    figures = layer_figures(STACKS[stack], {"squid": {"cache_hits": 0,
                                                      "cache_misses": 5000}}, knobs)
    [unknown] = layer_verdicts(STACKS[stack], figures, 0.5, knobs)
    assert unknown.component == "varnish" and unknown.status is Status.WARN


def test_a_proxy_that_does_not_cache_has_no_hit_ratio():
    stack = "apache-proxy > nginx"
    counted = {"apache-proxy": {"cache_hits": 0, "cache_misses": 9000}}
    assert layer_figures(STACKS[stack], counted, knobs_of(stack)) == {}


def test_a_spread_over_the_few_requests_a_cache_let_through_is_not_judged():
    stack = "nginx-proxy > nginx * 3"
    counted = {"nginx.1": {"requests": 2}, "nginx.2": {"requests": 1},
               "nginx.3": {"requests": 1}}
    figures = layer_figures(STACKS[stack], counted, knobs_of(stack))
    [verdict] = layer_verdicts(STACKS[stack], figures, None, knobs_of(stack))
    assert verdict.status is Status.WARN and "too few to judge" in verdict.detail


CACHED = """
[experiment]
remeasure = 0   # runs are counted: none measured again on a busy host
name = "cached"
repetitions = 1
duration = "1s"
warmup = "0.3s"

[matrix]
stack = ["varnish > nginx+php-fpm"]
workload = ["php-cacheable", "php-uncacheable", "php-cache-mix:50"]
concurrency = [4]
"""


@pytest.mark.integration
def test_varnish_in_front_of_php_hits_what_may_be_cached_and_nothing_else(tmp_path):
    """The hit ratio over the measured window follows the workload's cacheable share —
    all, none, half — and each is verified after the load."""
    require_engine()
    spec, db = tmp_path / "cached.toml", tmp_path / "r.db"
    spec.write_text(CACHED)
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 0, result.output
    got = {}
    for label, outcome, resources, verdicts in sqlite3.connect(db).execute(
            "SELECT t.label, r.outcome, r.resources_json, r.verdicts_json "
            "FROM runs r JOIN trials t USING (trial_id)"):
        assert outcome == "ok", (label, outcome)
        [hits] = [v for v in json.loads(verdicts) if v["check"] == "hit ratio"]
        assert hits["status"] == "PASS", hits
        got[label.split()[-2]] = json.loads(resources)["_layers"]["varnish"]["hit_ratio"]
    assert got["php-cacheable"] > 0.99 and got["php-uncacheable"] == 0
    assert 0.4 < got["php-cache-mix"] < 0.6, got
    assert not server_processes()
