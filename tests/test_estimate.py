"""The dry run's time estimate counts what a run costs besides its load, as this host's
stored runs measured it per stack, and says how long it can take at most: every trial's
`remeasure` runs measured again, each after --wait-quiet's wait (issue 39: 54 s
estimated, 3 min 22 s taken)."""

import pytest
from typer.testing import CliRunner

from stacklab.analysis.overhead import run_overhead, stored_overhead
from stacklab.cli import cli
from stacklab.experiment.plan import (EXPERIMENT_OVERHEAD_S, RUN_OVERHEAD_S, RunOverhead,
                                      make_plan)
from stacklab.experiment.spec import parse_spec
from stacklab.stacks import STACKS
from stacklab.store import Store

from fakes import fake_experiment

DOC = {"experiment": {"name": "e", "repetitions": 3, "duration": "2s", "warmup": "1s",
                      "remeasure": 2},
       "matrix": {"stack": ["nginx", "apache"], "workload": ["static-page"],
                  "concurrency": [1]}}
SPEC = """[experiment]
name = "e"
repetitions = 3
duration = "2s"
warmup = "1s"

[matrix]
stack = ["nginx"]
workload = ["static-page"]
concurrency = [1, 8]
"""


def test_the_estimate_counts_each_stacks_overhead_and_the_runs_measured_again(spec_args):
    spec = parse_spec(DOC, "e.toml", *spec_args)
    plan = make_plan(spec, STACKS)
    overhead = RunOverhead(2.0, {"nginx": 1.0, "apache": 4.0}, 30)
    est = plan.estimate(spec, overhead)
    # 3 runs of each: 2 s load + 1 s warm-up + the stack's overhead
    assert est.typical_s == pytest.approx(EXPERIMENT_OVERHEAD_S + 3 * 4.0 + 3 * 7.0)
    # at most 2 runs of each trial again
    assert est.most_s == pytest.approx(est.typical_s + 2 * 4.0 + 2 * 7.0)
    waited = plan.estimate(spec, overhead, wait_s=120.0)
    assert waited.most_s == pytest.approx(est.most_s + 4 * 120.0)
    assert plan.estimated_s(spec) == plan.estimate(spec).typical_s


def test_without_remeasuring_the_most_is_the_typical(spec_args):
    doc = {**DOC, "experiment": {**DOC["experiment"], "remeasure": 0}}
    spec = parse_spec(doc, "e.toml", *spec_args)
    est = make_plan(spec, STACKS).estimate(spec)
    assert est.most_s == est.typical_s


@pytest.mark.parametrize("samples, default, by_stack", [
    ([], RUN_OVERHEAD_S, {}),
    ([("nginx", 0.5), ("nginx", 0.7), ("nginx", 1.2)], RUN_OVERHEAD_S, {"nginx": 0.8}),
    ([("apache", 4.0), ("apache", 5.0), ("apache", 6.0), ("nginx", 1.0)], 4.0,
     {"apache": 5.0}),
    ([("nginx", -0.2), ("nginx", 0.0), ("nginx", 0.2)], RUN_OVERHEAD_S, {"nginx": 0.2 / 3}),
])
def test_the_overhead_is_the_mean_per_stack_of_the_stored_runs(samples, default, by_stack):
    o = run_overhead(samples)
    assert o.default_s == pytest.approx(default) and o.runs == len(samples)
    assert o.by_stack == pytest.approx(by_stack)


def test_the_overhead_is_read_from_the_stored_runs(tmp_path):
    db = tmp_path / "r.db"
    fake_experiment(db, reps=3)           # runs of 3 s, of which 2 s of load
    store = Store.open(db, readonly=True)
    try:
        o = stored_overhead(store)
    finally:
        store.close()
    assert o.runs == 12 and o.by_stack == pytest.approx({"nginx": 1.0, "apache": 1.0})


def test_the_dry_run_says_the_typical_and_the_longest_time(tmp_path):
    spec = tmp_path / "e.toml"
    spec.write_text(SPEC)
    db = tmp_path / "r.db"
    fake_experiment(db, reps=3)
    result = CliRunner().invoke(cli, ["run", str(spec), "--dry-run", "--db", str(db)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    # 2 s + 6 runs × (2 s + 1 s + 1.0 s); at most 2 runs of each of the 2 trials again
    assert ("6 runs, estimated 26 s typically, up to 42 s if a busy host has runs "
            "measured again (2 a trial, experiment.remeasure)") in text
    assert "nginx 1.0 s (the mean of 12 stored runs of this host)" in text
    fresh = CliRunner().invoke(cli, ["run", str(spec), "--dry-run", "--wait-quiet",
                                     "--db", str(tmp_path / "none.db")])
    text = " ".join(fresh.output.split())
    assert "each after --wait-quiet's wait" in text and "the lab's guess" in text
    assert not (tmp_path / "none.db").exists()


def test_a_capacity_search_is_bounded_and_its_longest_time_is_the_estimates_most():
    """Issue 40: each search's steps, doublings, confirmations and steps measured again
    are bounded; the dry run's "up to" has every search at its longest."""
    from stacklab.experiment.spec import Capacity
    c = Capacity(slo="p99<5ms", step=5.0, max_steps=10)
    # 10 steps: five doubling chains (1+2), the probe, 4 measured again at the longer of
    # 2 steps' length and the confirmation's, 3 profile steps, 8 confirmations of 10 s;
    # a warm-up of 1 s each
    searched = 5 * 3 * 5.0 + 10 * 1.0
    assert c.most_s(10.0, 1.0) == searched + 6.0 + 4 * 11.0 + 3 * 6.0 + 8 * 11.0
    # a longer step than the confirmation: measured again at 2 steps' length
    assert Capacity(slo="p99<5ms", step=8.0, max_steps=4).most_s(10.0, 1.0) == \
        2 * 3 * 8.0 + 4 * 1.0 + 9.0 + 4 * 17.0 + 3 * 9.0 + 8 * 11.0
