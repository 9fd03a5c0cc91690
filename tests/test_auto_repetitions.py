"""repetitions = "auto": more interleaved rounds until every comparison the answers make
is decided (better, worse, or the same within the margin); a trial compared with none
until its own CI is narrow enough."""

import json

import pytest

from stacklab.errors import SpecError
from stacklab.experiment.plan import make_plan
from stacklab.run.runner import more_rounds
from stacklab.experiment.spec import parse_spec
from stacklab.stacks import STACKS
from stacklab.store import Outcome, RunRecord, Store

from fakes import fake_report


def auto_spec(spec_args, **experiment):
    doc = {"experiment": {"name": "a", "repetitions": "auto", "requests": 10, **experiment},
           "matrix": {"stack": ["nginx", "apache"], "workload": ["static-page"],
                      "concurrency": [1]}}
    return parse_spec(doc, "a.toml", *spec_args)


def store_with(tmp_path, spec, plan, rps_by_stack):
    store = Store.open(tmp_path / "a.db")
    exp = store.new_experiment("a", "a.toml", "h", json.loads(spec.model_dump_json()),
                               [(t.id, t.label(), t.definition()) for t in plan.trials],
                               {}, "0", None, "t")
    for t in plan.trials:
        for rep, rps in enumerate(rps_by_stack[t.stack], 1):
            at = f"2026-12-07T10:{rep:02d}:{plan.trials.index(t):02d}"   # round by round
            store.add_run(RunRecord(
                experiment_id=exp, trial_id=t.id, repetition=rep,
                outcome=Outcome.OK if rps else Outcome.FAILED, started_at=at, ended_at=at,
                knobs={}, versions={}, configs={},
                load=fake_report(rps, 500, seed=rep) if rps else None))
    return store, exp


def test_auto_plans_six_rounds_first(spec_args):
    spec = auto_spec(spec_args)
    plan = make_plan(spec, STACKS)
    assert len(plan.runs) == 6 * len(plan.trials)   # fewer cannot give a 95% interval
    assert plan.max_runs(spec) == 10 * len(plan.trials)


def test_an_undecided_comparison_gets_another_round_of_both_trials(tmp_path, spec_args):
    spec = auto_spec(spec_args)
    plan = make_plan(spec, STACKS)
    store, exp = store_with(tmp_path, spec, plan, {
        "nginx": [1000, 1001, 999, 1000, 1002, 998],
        "apache": [1000, 1500, 700, 1100, 900, 1000]})       # holds 1, reaches past ±5%
    more = more_rounds(spec, plan, store, exp)
    assert sorted((r.trial.stack, r.repetition) for r in more) == [("apache", 7),
                                                                   ("nginx", 7)]


@pytest.mark.parametrize("apache", [[500, 502, 498, 501, 499, 500],      # worse: decided
                                    [1000, 1004, 997, 1001, 999, 1002]])  # same within 5%
def test_a_decided_comparison_adds_no_round_however_wide_a_trial_is(tmp_path, spec_args,
                                                                     apache):
    spec = auto_spec(spec_args, ci_target=0.0001)     # no trial's own CI is that narrow
    plan = make_plan(spec, STACKS)
    store, exp = store_with(tmp_path, spec, plan, {
        "nginx": [1000, 1003, 998, 1002, 999, 1001], "apache": apache})
    assert more_rounds(spec, plan, store, exp) == []


def test_a_wider_margin_decides_sooner(tmp_path, spec_args):
    runs = {"nginx": [1000, 1001, 999, 1000, 1002, 998],
            "apache": [1000, 1080, 950, 1050, 960, 1000]}
    spec = auto_spec(spec_args)
    plan = make_plan(spec, STACKS)
    store, exp = store_with(tmp_path, spec, plan, runs)
    assert len(more_rounds(spec, plan, store, exp)) == 2
    wide = auto_spec(spec_args, margin="20%")
    (tmp_path / "w").mkdir()
    store, exp = store_with(tmp_path / "w", wide, make_plan(wide, STACKS), runs)
    assert more_rounds(wide, make_plan(wide, STACKS), store, exp) == []


def test_a_trial_compared_with_none_stops_at_its_ci_target(tmp_path, spec_args):
    doc = {"experiment": {"name": "a", "repetitions": "auto", "requests": 10,
                          "ci_target": 0.03},
           "matrix": {"stack": ["nginx"], "workload": ["static-page", "php-page"],
                      "concurrency": [1]}}
    spec = parse_spec(doc, "a.toml", *spec_args)
    plan = make_plan(spec, STACKS)
    store, exp = store_with(tmp_path, spec, plan, {"nginx": [1000, 1500, 700, 1100, 900,
                                                             1000]})
    assert sorted(r.trial.workload for r in more_rounds(spec, plan, store, exp)) == [
        "php-page", "static-page"]


@pytest.mark.parametrize("margin,want", [("5%", 0.05), (0.1, 0.1), ("2.5 %", 0.025)])
def test_the_margin_is_a_percent_or_a_fraction(spec_args, margin, want):
    assert auto_spec(spec_args, margin=margin).experiment.margin == want


@pytest.mark.parametrize("margin,words", [(5, '"5%"'), ("five", "percent"),
                                          ("0%", "0.5%..50%")])
def test_a_bad_margin_is_named(spec_args, margin, words):
    with pytest.raises(SpecError) as e:
        auto_spec(spec_args, margin=margin)
    assert e.value.key == "experiment.margin" and words in str(e.value)


def test_no_round_beyond_the_maximum(tmp_path, spec_args):
    spec = auto_spec(spec_args, max_repetitions=6)     # auto never stops below 6
    plan = make_plan(spec, STACKS)
    store, exp = store_with(tmp_path, spec, plan, {"nginx": [1, 50, 100] * 2,
                                                   "apache": [1, 50, 100] * 2})
    assert more_rounds(spec, plan, store, exp) == []


def test_trials_that_only_fail_are_not_repeated(tmp_path, spec_args):
    spec = auto_spec(spec_args)
    plan = make_plan(spec, STACKS)
    store, exp = store_with(tmp_path, spec, plan, {"nginx": [0] * 6,
                                                   "apache": [1000] * 6})
    assert more_rounds(spec, plan, store, exp) == []


@pytest.mark.parametrize("value", ["often", 0, 101])
def test_bad_repetitions_are_named(spec_args, value):
    with pytest.raises(SpecError) as e:
        auto_spec(spec_args, repetitions=value)
    assert e.value.key == "experiment.repetitions"


def test_auto_is_the_default_and_a_spec_may_still_fix_a_count(spec_args):
    doc = {"experiment": {"name": "d", "requests": 10},
           "matrix": {"stack": ["nginx"], "workload": ["static-page"], "concurrency": [1]}}
    spec = parse_spec(doc, "d.toml", *spec_args)
    assert spec.experiment.auto and spec.experiment.first_repetitions == 6
    doc["experiment"]["repetitions"] = 4
    fixed = parse_spec(doc, "d.toml", *spec_args)
    assert not fixed.experiment.auto and len(make_plan(fixed, STACKS).runs) == 4
