"""repetitions = "auto": more interleaved rounds until the CI is narrow enough."""

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
    exp = store.new_experiment("a", "a.toml", "h", {}, [(t.id, t.label(), t.definition())
                                                        for t in plan.trials], {}, "0", None, "t")
    for t in plan.trials:
        for rep, rps in enumerate(rps_by_stack[t.stack], 1):
            store.add_run(RunRecord(
                experiment_id=exp, trial_id=t.id, repetition=rep,
                outcome=Outcome.OK if rps else Outcome.FAILED, started_at="t", ended_at="t",
                knobs={}, versions={}, configs={},
                load=fake_report(rps, 500, seed=rep) if rps else None))
    return store, exp


def test_auto_plans_six_rounds_first(spec_args):
    spec = auto_spec(spec_args)
    plan = make_plan(spec, STACKS)
    assert len(plan.runs) == 6 * len(plan.trials)   # fewer cannot give a 95% interval
    assert plan.max_runs(spec) == 10 * len(plan.trials)


def test_only_trials_with_a_wide_ci_get_another_round(tmp_path, spec_args):
    spec = auto_spec(spec_args, ci_target=0.03)
    plan = make_plan(spec, STACKS)
    store, exp = store_with(tmp_path, spec, plan, {"nginx": [1000, 1001, 999],
                                                   "apache": [1000, 1500, 700]})
    more = more_rounds(spec, plan, store, exp)
    assert [(r.trial.stack, r.repetition) for r in more] == [("apache", 4)]


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
