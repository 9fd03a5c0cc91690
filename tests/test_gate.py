"""The CI gate (gate.py) on stored runs, never timed ones: `compare --fail-if` and a
run's [thresholds] judge the whole 95% interval of NEW/BASE (default) or any of it
(strict), and exit with ExitStatus.GATE (3) when a threshold fails. The fixed runs of
tests/fakes.py vary ±1% over 3 repetitions: the ratio's interval is about ±2.3%."""

from dataclasses import replace

import pytest
from rich.console import Console
from typer.testing import CliRunner

from stacklab.analyze import load_view
from stacklab.cli import cli
from stacklab.commands import run as running
from stacklab.env import Environment
from stacklab.errors import ExitStatus, SpecError
from stacklab.gate import Threshold, baseline_pairs, judge, parse_threshold
from stacklab.spec import parse_spec
from stacklab.store import Store

from fakes import fake_experiment
from test_spec import with_

BASE, NEW = "ng0000000001", "ap0000000001"    # nginx and apache at c=1 (fakes.py)


def db_with(tmp_path, apache_share: float, name: str = "fixed"):
    """A results database where apache serves `apache_share` of nginx's req/s."""
    db = tmp_path / "r.db"
    fake_experiment(db, name=name, flag_apache_256=False,
                    speed={"nginx": 20000.0, "apache": 20000.0 * apache_share})
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
    (" p50 > 2.5 % ", Threshold("p50", ">", 2.5)),
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


def test_a_worse_variant_fails_the_gate(tmp_path):
    db = db_with(tmp_path, 0.5)
    result = invoke("compare", BASE, NEW, "--db", db, "--fail-if", "rps<-5%",
                    "--fail-if", "p99>+10%")
    assert result.exit_code == ExitStatus.GATE == 3, result.output
    lines = gate_lines(result.output)
    assert len(lines) == 2 and all(line.startswith("gate: FAIL") for line in lines), lines
    assert "rps<-5%" in lines[0] and "-50.0%" in lines[0] and "95% CI" in lines[0]
    assert "p99>+10%" in lines[1]


def test_an_equal_variant_passes(tmp_path):
    db = db_with(tmp_path, 1.0)
    result = invoke("compare", BASE, NEW, "--db", db, "--fail-if", "rps<-5%",
                    "--fail-if", "p99>+10%")
    assert result.exit_code == 0, result.output
    lines = gate_lines(result.output)
    assert len(lines) == 2 and all(line.startswith("gate: pass") for line in lines), lines
    assert "+0.0% (95% CI -2.2% .. +2.3%)" in lines[0]
    # strict: p99's interval (3 runs a side, about ±12%) must lie within the limit
    strict = invoke("compare", BASE, NEW, "--db", db, "--strict", "--fail-if", "rps<-5%",
                    "--fail-if", "p99>+10%")
    assert strict.exit_code == ExitStatus.GATE, strict.output
    assert gate_lines(strict.output)[1].startswith("gate: FAIL p99>+10%")
    assert invoke("compare", BASE, NEW, "--db", db, "--strict", "--fail-if", "rps<-5%",
                  "--fail-if", "p99>+20%").exit_code == 0


def test_an_ambiguous_variant_passes_by_default_and_fails_when_strict(tmp_path):
    db = db_with(tmp_path, 0.95)      # the ratio's interval straddles -5%
    view = view_of(db)
    base, new = (next(s for s in view.summaries if s.trial_id == t) for t in (BASE, NEW))
    [j] = judge(base, new, [parse_threshold("rps<-5%")])
    assert j.ci[0] < 0.95 < j.ci[1] and not j.failed
    assert judge(base, new, [parse_threshold("rps<-5%")], strict=True)[0].failed

    assert invoke("compare", BASE, NEW, "--db", db, "--fail-if", "rps<-5%").exit_code == 0
    result = invoke("compare", BASE, NEW, "--db", db, "--fail-if", "rps<-5%", "--strict")
    assert result.exit_code == ExitStatus.GATE, result.output


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
    lines = gate_lines(result.output)
    assert len(lines) == 4          # nginx and apache at c = 1 and 16
    assert sum(line.startswith("gate: FAIL") for line in lines) == 2   # apache's two


@pytest.mark.parametrize("args, fragment", [
    (("--fail-if", "rps<-5"), "--fail-if 'rps<-5': "),
    (("--fail-if", "latency>+10%"), "--fail-if 'latency>+10%': unknown metric"),
    (("--fail-if", "rps<-5%", "--fail-if", "p99>>1%"), "--fail-if 'p99>>1%': "),
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
    lines = gate_lines(text)
    assert len(lines) == 2, text     # apache against nginx at c = 1 and at c = 16
    assert all(line.startswith("gate: FAIL rps<-5%: apache static-page c=") for line in lines)
    assert "c=1 vs nginx static-page c=1:" in lines[0]
    assert "c=16 vs nginx static-page c=16:" in lines[1]


def test_a_run_passes_its_gate_and_strict_judges_ambiguity(tmp_path, spec_args):
    db = db_with(tmp_path, 0.95)
    loose = spec_with(spec_args, {"rps": "<-5%", "baseline": {"stack": "nginx"}})
    strict = spec_with(spec_args, {"rps": "<-5%", "strict": True,
                                   "baseline": {"stack": "nginx"}})
    assert printed_gate(db, loose)[0] == ExitStatus.OK
    assert printed_gate(db, strict)[0] == ExitStatus.GATE


def test_baseline_pairs_match_everything_the_baseline_does_not_name(tmp_path):
    view = view_of(db_with(tmp_path, 1.0))
    pairs = baseline_pairs(view.summaries, (("stack", "nginx"),))
    assert sorted((b.trial_id, n.trial_id) for b, n in pairs) == [
        ("ng0000000001", "ap0000000001"), ("ng0000000016", "ap0000000016")]
    pairs = baseline_pairs(view.summaries, (("concurrency", 1),))
    assert sorted((b.trial_id, n.trial_id) for b, n in pairs) == [
        ("ap0000000001", "ap0000000016"), ("ng0000000001", "ng0000000016")]
