"""The CI gate (gate.py) on stored runs, never timed ones: `compare --fail-if` and a
run's [thresholds] judge each threshold on the 95% interval of NEW/BASE: pass (exit 0)
when all of it is on the good side, fail (ExitStatus.GATE, 3) when all of it is beyond,
else inconclusive (ExitStatus.INCONCLUSIVE, 4, unless one failed; strict: 3, said in
words). Nothing to judge is an error (1), never a pass. The fixed runs of tests/fakes.py
vary ±1% over 3 repetitions: the ratio's interval is about ±2.3% (p99's about ±12%)."""

import json
from dataclasses import replace

import pytest
from rich.console import Console
from typer.testing import CliRunner

from stacklab.analysis.analyze import load_view
from stacklab.cli import cli
from stacklab.commands import run as running
from stacklab.env import Environment
from stacklab.errors import ExitStatus, NothingJudged, SpecError
from stacklab.analysis.gate import LIMITED_IS_LOW, VALUES, baseline_pairs, judge
from stacklab.experiment.gate import METRICS, Threshold, parse_threshold
from stacklab.experiment.spec import parse_spec
from stacklab.store import Store

from fakes import fake_experiment
from test_spec import with_

BASE, NEW = "ng0000000001", "ap0000000001"    # nginx and apache at c=1 (fakes.py)


# Apache's run-to-run steps in rounds 1..3, not nginx's (-1%, 0, +1%): the rounds' pairs
# then differ as real runs do (with the same steps the paired ratio would be exact)
APACHE_STEPS = (1.01, 0.99, 1.00)


def db_with(tmp_path, apache_share: float, name: str = "fixed"):
    """A results database where apache serves `apache_share` of nginx's req/s."""
    db = tmp_path / "r.db"
    apache = 20000.0 * apache_share
    fake_experiment(db, name=name, flag_apache_256=False,
                    speed={"nginx": 20000.0, "apache": apache},
                    rps_of={f"ap{c:010d}": [apache * (1 + c / 100) * k for k in APACHE_STEPS]
                            for c in (1, 16)})
    return db


def view_of(db):
    store = Store.open(db)
    try:
        return load_view(store, "fixed")
    finally:
        store.close()


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def gate_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("gate: ")]


@pytest.mark.parametrize("text, threshold", [
    ("rps<-5%", Threshold("rps", "<", -5.0)),
    ("p99>+10%", Threshold("p99", ">", 10.0)),
    (" p50 > +2.5 % ", Threshold("p50", ">", 2.5)),
    ("rps<0%", Threshold("rps", "<", 0.0)),
    ("mbps<-0.5%", Threshold("mbps", "<", -0.5)),
])
def test_thresholds_parse(text, threshold):
    assert parse_threshold(text) == threshold
    assert threshold.limit == pytest.approx(1 + threshold.percent / 100)


@pytest.mark.parametrize("text, fragment", [
    ("rps<-5", "percent"), ("rps=-5%", "percent"), ("qps<-5%", "unknown metric"),
    ("rps<-100%", "above -100%"), ("", "expected a metric"), ("<-5%", "expected a metric"),
    ("rps<-5%%", "percent"), ("rps<five%", "percent"),
])
def test_bad_thresholds_say_why(text, fragment):
    with pytest.raises(ValueError, match=fragment):
        parse_threshold(text)


@pytest.mark.parametrize("text, readings", [
    ("rps<5%", '"rps<-5%" fails on a drop of more than 5%, "rps<+5%" fails unless rps '
               'rose by 5% or more'),
    ("p99>10%", '"p99>+10%" fails on a rise of more than 10%, "p99>-10%" fails unless '
                'p99 dropped by 10% or more'),
])
def test_a_threshold_without_a_sign_is_refused_with_both_readings(text, readings):
    with pytest.raises(ValueError) as e:
        parse_threshold(text)
    assert "no sign" in str(e.value) and readings in str(e.value)
    assert "\n" not in str(e.value)


def test_every_metric_a_threshold_names_can_be_judged():
    """The spec's metrics (experiment/gate.py) and the judge's readings of a trial
    (analysis/gate.py) live apart: a metric added to one only is found here."""
    assert set(VALUES) == set(LIMITED_IS_LOW) == set(METRICS)


def judged(output: str) -> list[str]:
    """The gate's lines about one threshold each (not its result line)."""
    return [line for line in gate_lines(output) if not line.startswith("gate result")]


def result_line(output: str) -> str:
    [line] = [x for x in " ".join(output.split("\n")).split("gate result: ")[1:]]
    return " ".join(line.split())


def test_a_worse_variant_fails_the_gate(tmp_path):
    db = db_with(tmp_path, 0.5)
    result = invoke("compare", BASE, NEW, "--db", db, "--fail-if", "rps<-5%",
                    "--fail-if", "p99>+10%")
    assert result.exit_code == ExitStatus.GATE == 3, result.output
    lines = judged(result.output)
    assert len(lines) == 2 and all(line.startswith("gate: FAIL") for line in lines), lines
    assert "rps<-5%" in lines[0] and "-50.0%" in lines[0] and "95% CI" in lines[0]
    assert "lies wholly past -5.0%" in lines[0]
    assert "p99>+10%" in lines[1]
    assert result_line(result.output).startswith("FAIL (exit 3): 2 of 2 judgements")


def test_an_equal_variant_passes(tmp_path):
    db = db_with(tmp_path, 1.0)
    result = invoke("compare", BASE, NEW, "--db", db, "--fail-if", "rps<-5%",
                    "--fail-if", "p99>+20%")
    assert result.exit_code == 0, result.output
    lines = judged(result.output)
    assert len(lines) == 2 and all(line.startswith("gate: pass") for line in lines), lines
    assert "+0.0% (95% CI -4.2%..+4.4%)" in lines[0]       # paired round by round
    assert result_line(result.output).startswith("pass")
    # p99's interval (3 rounds, about ±4%) reaches past +3%: neither pass nor fail
    loose = invoke("compare", BASE, NEW, "--db", db, "--fail-if", "rps<-5%",
                   "--fail-if", "p99>+3%")
    assert loose.exit_code == ExitStatus.INCONCLUSIVE == 4, loose.output
    assert judged(loose.output)[1].startswith("gate: inconclusive p99>+3%")
    # strict: an inconclusive threshold fails, said with what and why
    strict = invoke("compare", BASE, NEW, "--db", db, "--strict", "--fail-if", "rps<-5%",
                    "--fail-if", "p99>+3%")
    assert strict.exit_code == ExitStatus.GATE, strict.output
    said = result_line(strict.output)
    assert said.startswith("FAIL (exit 3): --strict: an inconclusive judgement counts as "
                           "failed; 1 of 2 judgements: p99>+3%: apache static-page c=1 vs "
                           "nginx static-page c=1: 95% CI -4.3%..+4.5% reaches past "
                           "+3.0%"), said
    assert "rps<-5%" not in said          # it passed: not what failed
    assert invoke("compare", BASE, NEW, "--db", db, "--strict", "--fail-if", "rps<-5%",
                  "--fail-if", "p99>+20%").exit_code == 0


def test_an_ambiguous_variant_is_inconclusive_and_fails_when_strict(tmp_path):
    db = db_with(tmp_path, 0.95)      # the ratio's interval straddles -5%
    view = view_of(db)
    base, new = (next(s for s in view.summaries if s.trial_id == t) for t in (BASE, NEW))
    [j] = judge(base, new, [parse_threshold("rps<-5%")])
    assert j.ci[0] < 0.95 < j.ci[1] and j.outcome == "inconclusive"
    assert j.reason == "straddles" and not j.failed

    result = invoke("compare", BASE, NEW, "--db", db, "--fail-if", "rps<-5%")
    assert result.exit_code == ExitStatus.INCONCLUSIVE, result.output
    assert result_line(result.output).startswith("inconclusive (exit 4): 1 of 1")
    result = invoke("compare", BASE, NEW, "--db", db, "--fail-if", "rps<-5%", "--strict")
    assert result.exit_code == ExitStatus.GATE, result.output


def test_a_failure_outweighs_an_inconclusive_threshold(tmp_path):
    db = db_with(tmp_path, 0.5)       # p99 doubles, give or take about 12%
    result = invoke("compare", BASE, NEW, "--db", db, "--fail-if", "rps<-5%",
                    "--fail-if", "p99>+100%")
    assert result.exit_code == ExitStatus.GATE, result.output
    assert [line.split()[1] for line in judged(result.output)] == ["FAIL", "inconclusive"]
    said = result_line(result.output)
    assert said.startswith("FAIL (exit 3): 1 of 2 judgements: rps<-5%") and "p99" not in said


def test_without_thresholds_compare_exits_as_before(tmp_path):
    result = invoke("compare", BASE, NEW, "--db", db_with(tmp_path, 0.5))
    assert result.exit_code == 0 and not gate_lines(result.output)


def test_two_experiments_are_gated_trial_by_trial(tmp_path):
    db = tmp_path / "r.db"
    fake_experiment(db, name="base", flag_apache_256=False)
    fake_experiment(db, name="new", flag_apache_256=False,
                    speed={"nginx": 20000.0, "apache": 9000.0})
    result = invoke("compare", "base", "new", "--db", db, "--fail-if", "rps<-5%")
    assert result.exit_code == ExitStatus.GATE, result.output
    lines = judged(result.output)
    assert len(lines) == 4          # nginx and apache at c = 1 and 16
    assert sum(line.startswith("gate: FAIL") for line in lines) == 2   # apache's two
    assert sum(line.startswith("gate: pass") for line in lines) == 2   # nginx's two


def test_two_experiments_with_no_trial_in_common_never_pass(tmp_path):
    """A spec edit that changes every trial's definition (here a knob) leaves no pair:
    the gate is an error, with --json too, never a silent pass."""
    db = tmp_path / "r.db"
    fake_experiment(db, name="base", flag_apache_256=False)
    fake_experiment(db, name="new", flag_apache_256=False)
    store = Store.open(db)
    try:
        store.conn.execute("UPDATE trials SET definition_json = replace(definition_json, "
                           "'\"load.keepalive\": true', '\"load.keepalive\": false') "
                           "WHERE experiment_id = 2")
    finally:
        store.close()
    result = invoke("compare", "base", "new", "--db", db, "--fail-if", "rps<-5%")
    assert result.exit_code == ExitStatus.ERROR == 1, result.output
    said = " ".join(result.stderr.split())
    assert "gate: no pair of trials to judge" in said and "definition" in said
    assert not gate_lines(result.stdout)
    as_json = invoke("compare", "base", "new", "--db", db, "--fail-if", "rps<-5%", "--json")
    assert as_json.exit_code == ExitStatus.ERROR, as_json.output
    doc = json.loads(as_json.stdout)
    assert doc["gate"] == {"strict": False, "outcome": "nothing-judged", "judgements": []}
    # without --fail-if, nothing is judged and nothing refused
    assert invoke("compare", "base", "new", "--db", db).exit_code == 0


# what a busy host or a limited side leaves (analyze.reach, analyze.bound) ---------------

def pair(tmp_path, share: float):
    view = view_of(db_with(tmp_path, share))
    return tuple(next(s for s in view.summaries if s.trial_id == t) for t in (BASE, NEW))


def test_a_busy_host_is_named_never_widens_the_interval(tmp_path):
    """Beside other work the threshold is judged on the measured (paired) interval: a
    worst-case widening by what the host could have done (1.5× a side) made a gate on a
    shared CI runner inconclusive whatever it measured."""
    base, new = pair(tmp_path, 0.5)
    for busy in (1.5, 2.5, float("inf")):
        [j] = judge(base, replace(new, disturbance=busy), [parse_threshold("rps<-5%")])
        assert j.outcome == "fail" and j.reach is None, j
        assert "ran on a busy host" in j.why
    [j] = judge(replace(base, disturbance=1.1), new, [parse_threshold("p99>+10%")])
    assert j.outcome == "fail", j


def test_a_limited_side_leaves_a_bound_that_decides_only_one_way(tmp_path):
    base, new = pair(tmp_path, 0.5)
    rps = [parse_threshold("rps<-5%")]
    held_new = replace(new, flagged=("generator-bound",))     # NEW could be faster: ≥ 0.5
    [j] = judge(base, held_new, rps)
    assert j.outcome == "inconclusive" and j.reason == "generator-bound"
    assert j.reach[1] == float("inf") and "limited by the load engine" in j.why
    held_base = replace(base, flagged=("generator-bound",))   # BASE could be faster: ≤ 0.5
    [j] = judge(held_base, new, rps)
    assert j.outcome == "fail" and j.reach[0] == 0.0
    same_base, same_new = pair(tmp_path / "same", 1.0)
    [j] = judge(same_base, replace(same_new, flagged=("generator-bound",)), rps)
    assert j.outcome == "pass"                              # ≥ 0.978: not below 0.95
    [j] = judge(base, replace(new, flagged=("error-responses",)), rps)
    assert j.outcome == "inconclusive" and j.reason == "error-responses"
    assert j.why.startswith("not a measurement")


def test_fewer_than_two_runs_a_side_is_inconclusive(tmp_path):
    db = tmp_path / "r.db"
    fake_experiment(db, name="fixed", flag_apache_256=False, reps=1)
    result = invoke("compare", BASE, NEW, "--db", db, "--fail-if", "rps<-5%")
    assert result.exit_code == ExitStatus.INCONCLUSIVE, result.output
    [line] = judged(result.output)
    assert "no interval: fewer than 2 runs a side" in line


@pytest.mark.parametrize("args, fragment", [
    (("--fail-if", "rps<-5"), "--fail-if 'rps<-5': "),
    (("--fail-if", "latency>+10%"), "--fail-if 'latency>+10%': unknown metric"),
    (("--fail-if", "rps<-5%", "--fail-if", "p99>>1%"), "--fail-if 'p99>>1%': "),
    (("--fail-if", "rps<5%"), "--fail-if 'rps<5%': 5% has no sign: \"rps<-5%\" fails on a "
                              "drop of more than 5%, \"rps<+5%\" fails unless"),
    (("--strict",), "--strict: "),
])
def test_bad_fail_if_is_one_line(tmp_path, args, fragment):
    result = invoke("compare", BASE, NEW, "--db", db_with(tmp_path, 0.5), *args)
    assert result.exit_code == ExitStatus.BAD_INPUT, result.output
    [line] = [x for x in result.output.splitlines() if x.strip()]
    assert line.startswith("stacklab: error: ") and fragment in line, line


# [thresholds] in the experiment file -------------------------------------------------

def spec_with(spec_args, thresholds):
    doc = with_(("thresholds",), thresholds)
    doc["matrix"]["nginx"] = {}          # one trial per stack × concurrency, as in fakes.py
    doc["matrix"]["exclude"] = []
    return parse_spec(doc, "x.toml", *spec_args)


def test_thresholds_parse_in_the_spec(spec_args):
    spec = spec_with(spec_args, {"rps": "<-5%", "p99": ">+10%", "strict": True,
                                 "baseline": {"stack": "nginx"}})
    g = spec.thresholds
    assert g.limits == (Threshold("rps", "<", -5.0), Threshold("p99", ">", 10.0))
    assert g.strict and g.baseline == (("stack", "nginx"),)
    spelled = spec_with(spec_args, {"rps": "<-5%", "baseline": {"stack": "nginx",
                                                                "workload": "static-page"}})
    assert spelled.thresholds.baseline == (("stack", "nginx"), ("workload", "static-page"))
    assert "thresholds" not in spec.model_dump()     # not part of the stored spec
    assert parse_spec(with_(("experiment", "seed"), 1), "x.toml", *spec_args).thresholds is None


@pytest.mark.parametrize("thresholds, key, fragment", [
    ({"rps": "-5%", "baseline": {"stack": "nginx"}}, "thresholds.rps", "percent"),
    ({"rps": -5, "baseline": {"stack": "nginx"}}, "thresholds.rps", "percent"),
    ({"rps": "<5%", "baseline": {"stack": "nginx"}}, "thresholds.rps",
     '5% has no sign: "<-5%" fails on a drop of more than 5%, "<+5%" fails unless rps rose'),
    ({"qps": "<-5%", "baseline": {"stack": "nginx"}}, "thresholds.qps", "unknown key"),
    ({"rps": "<-5%", "strict": "yes", "baseline": {"stack": "nginx"}}, "thresholds.strict",
     "true or false"),
    ({"rps": "<-5%"}, "thresholds.baseline", "missing"),
    ({"baseline": {"stack": "nginx"}}, "thresholds", "no limit"),
    ({"rps": "<-5%", "baseline": "nginx"}, "thresholds.baseline", "expected a table"),
    ({"rps": "<-5%", "baseline": {"stack": "caddy"}}, "thresholds.baseline.stack",
     "not a value"),
    ({"rps": "<-5%", "baseline": {"threads": 2}}, "thresholds.baseline.threads",
     "not an axis"),
    ("fast", "thresholds", "expected a table"),
])
def test_bad_thresholds_name_the_key(spec_args, thresholds, key, fragment):
    with pytest.raises(SpecError) as e:
        spec_with(spec_args, thresholds)
    assert e.value.key == key and fragment in e.value.problem, str(e.value)
    assert "\n" not in str(e.value)


def printed_gate(db, spec) -> tuple[ExitStatus, str]:
    console = Console(width=250, record=True, color_system=None)
    env = replace(Environment.default(), stdout=console)
    return running.gate(env, spec, view_of(db)), console.export_text()


def test_a_run_fails_its_gate_against_the_baseline_variant(tmp_path, spec_args):
    spec = spec_with(spec_args, {"rps": "<-5%", "baseline": {"stack": "nginx"}})
    status, text = printed_gate(db_with(tmp_path, 0.5), spec)
    assert status == ExitStatus.GATE
    lines = judged(text)
    assert len(lines) == 2, text     # apache against nginx at c = 1 and at c = 16
    assert all(line.startswith("gate: FAIL rps<-5%: apache static-page c=") for line in lines)
    assert "c=1 vs nginx static-page c=1:" in lines[0]
    assert "c=16 vs nginx static-page c=16:" in lines[1]


def test_a_run_passes_its_gate_and_strict_judges_ambiguity(tmp_path, spec_args):
    loose = spec_with(spec_args, {"rps": "<-5%", "baseline": {"stack": "nginx"}})
    strict = spec_with(spec_args, {"rps": "<-5%", "strict": True,
                                   "baseline": {"stack": "nginx"}})
    assert printed_gate(db_with(tmp_path / "same", 1.0), loose)[0] == ExitStatus.OK
    db = db_with(tmp_path, 0.95)
    assert printed_gate(db, loose)[0] == ExitStatus.INCONCLUSIVE
    assert printed_gate(db, strict)[0] == ExitStatus.GATE


def test_a_baseline_that_matches_nothing_is_an_error_not_a_pass(tmp_path, spec_args):
    spec = spec_with(spec_args, {"rps": "<-5%", "baseline": {"stack": "nginx"}})
    db = db_with(tmp_path, 1.0)
    g = spec.thresholds
    for selector, said in [((("stack", "nginx"), ("concurrency", 64)), "matches no trial"),
                           ((("workload", "static-page"),), "matches every trial")]:
        nothing = spec.model_copy(update={"thresholds": replace(g, baseline=selector)})
        with pytest.raises(NothingJudged) as e:
            printed_gate(db, nothing)
        assert e.value.exit_status == ExitStatus.ERROR
        assert "no pair of trials to judge" in str(e.value) and said in str(e.value)
        assert "[thresholds] baseline {" in str(e.value)


def test_baseline_pairs_match_everything_the_baseline_does_not_name(tmp_path):
    view = view_of(db_with(tmp_path, 1.0))
    pairs = baseline_pairs(view.summaries, (("stack", "nginx"),))
    assert sorted((b.trial_id, n.trial_id) for b, n in pairs) == [
        ("ng0000000001", "ap0000000001"), ("ng0000000016", "ap0000000016")]
    pairs = baseline_pairs(view.summaries, (("concurrency", 1),))
    assert sorted((b.trial_id, n.trial_id) for b, n in pairs) == [
        ("ap0000000001", "ap0000000016"), ("ng0000000001", "ng0000000016")]


def test_capacity_is_judged_like_req_s(tmp_path):
    """`compare --fail-if capacity<-5%` on two capacity trials: the same interval rule;
    a trial without capacity searches leaves nothing to judge (an error, never a pass)."""
    db = tmp_path / "r.db"
    fake_experiment(db, name="fixed", flag_apache_256=False, capacity=0.8,
                    speed={"nginx": 20000.0, "apache": 10000.0})
    result = invoke("compare", BASE, NEW, "--db", db, "--fail-if", "capacity<-5%")
    assert result.exit_code == ExitStatus.GATE, result.output
    [line] = judged(result.output)
    assert line.startswith("gate: FAIL capacity<-5%") and "-50.0%" in line, line
    assert "capacity req/s" in result.output
    plain = tmp_path / "plain.db"
    fake_experiment(plain, name="fixed", flag_apache_256=False)
    nothing = invoke("compare", BASE, NEW, "--db", plain, "--fail-if", "capacity<-5%")
    assert nothing.exit_code != 0 and "capacity req/s" not in nothing.output, nothing.output


def test_a_capacity_that_is_only_a_lower_bound_is_judged_as_one(tmp_path):
    """Issue 40: a search that ended passing at its ceiling, or whose failed steps were
    the connections', found a capacity of at least its figure: compare, the gate and
    tune (compare_trials' rows) read it as "≥", never as an exact rate."""
    from stacklab.analysis.analyze import compare_trials
    from stacklab.analysis.capacity import lower_bound_reasons
    step = {"phase": "search", "decision": "fail", "rate": 1200, "flags": []}
    assert lower_bound_reasons({"capacity": 1000, "stopped": "resolved",
                                "steps": [step]}) == ()
    assert lower_bound_reasons({"capacity": 1000, "stopped": "no-fail",
                                "steps": []}) == ("capacity-ceiling",)
    bound_by_connections = {**step, "flags": ["connections-bound"]}
    assert lower_bound_reasons({"capacity": 1000, "stopped": "resolved",
                                "steps": [bound_by_connections]}) == ("connections-bound",)
    assert lower_bound_reasons({"capacity": None, "stopped": "no-pass"}) == ()
    # out of steps while still rising: nothing above it failed, it is at least that
    rising = {"phase": "search", "decision": "pass", "rate": 1000, "flags": []}
    assert lower_bound_reasons({"capacity": 1000, "stopped": "step-limit",
                                "steps": [rising]}) == ("capacity-ceiling",)
    # one failure above it that was the server's: an exact capacity
    assert lower_bound_reasons({"capacity": 1000, "stopped": "resolved",
                                "steps": [bound_by_connections, step]}) == ()
    db = tmp_path / "r.db"
    fake_experiment(db, name="fixed", flag_apache_256=False, capacity=0.8,
                    speed={"nginx": 20000.0, "apache": 10000.0})
    store = Store.open(db)
    view = load_view(store, "fixed")
    store.close()
    by = {s.trial_id: s for s in view.summaries}
    base, new = by[BASE], by[NEW]
    ceiling = replace(new, capacity_limits=("capacity-ceiling",))
    [row] = [m for m in compare_trials(base, ceiling) if m.metric == "capacity req/s"]
    assert row.bound.relation == "≥" and "no rate above its capacity fail" in row.bound.why
    assert row.decision.kind == "no-verdict" and row.decision.reason == "capacity-ceiling"
    # apache at half nginx's capacity, but only at least that: a drop past 5% is not shown
    [j] = judge(base, ceiling, [parse_threshold("capacity<-5%")])
    assert j.outcome == "inconclusive" and j.reason == "capacity-ceiling", j
    # the base's capacity only a lower bound: the true drop is larger still, the FAIL stands
    [j] = judge(replace(base, capacity_limits=("connections-bound",)), new,
                [parse_threshold("capacity<-5%")])
    assert j.outcome == "fail", j
