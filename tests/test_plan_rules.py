"""Every layer of a run refuses what it cannot do at plan time (Layer.problem), asked by
validate_plan through the run's own layers (runner.LAYERS, runner.plan_rules): a new
layer's rule is asked with no change to validate.py, and the order a plan is checked in
stays the one its errors were always given in (the lab's rules, then the load's)."""

from typer.testing import CliRunner

from stacklab.run import runner
from stacklab.cli import cli
from stacklab.run.layers import kinds, makes
from stacklab.netlab.layers import (ColdCacheLayer, FilesystemLayer, MachineLayer,
                                    NetworkLayer)
from stacklab.run.pageview import PageViewLayer
from stacklab.run.stack import StackLayer
from stacklab.measure.verify import RequestChecks

SPEC = """
[experiment]
name = "rules"
duration = "1s"

[matrix]
stack = ["nginx"]
workload = ["static-page"]
concurrency = [4]
"""


def dry_run(tmp_path, text=SPEC):
    spec = tmp_path / "rules.toml"
    spec.write_text(text)
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(tmp_path / "r.db"),
                                      "--dry-run"])
    return spec, result


class Refusing:
    """A layer of a test's own whose plan rule refuses every trial."""

    name = "dummy"

    @classmethod
    def problem(cls, knobs):
        return "the dummy layer refuses every trial"


def test_the_plan_is_checked_against_every_layer_of_the_run_in_the_lab_order_first():
    assert runner.plan_rules() == (NetworkLayer, FilesystemLayer, MachineLayer, StackLayer,
                                   RequestChecks, ColdCacheLayer, runner.Measurement,
                                   PageViewLayer)
    assert kinds(runner.LAYERS)[:3] == (NetworkLayer, MachineLayer, FilesystemLayer)


def test_a_new_layers_rule_is_asked_with_no_change_to_validate(tmp_path, monkeypatch):
    @makes(Refusing)
    def refusing(scope):
        raise AssertionError("a refused plan makes no layer")
    monkeypatch.setattr(runner, "LAYERS", (*runner.LAYERS, refusing))
    spec, result = dry_run(tmp_path)
    assert result.exit_code == 2, result.output
    line = " ".join(result.output.split())
    assert str(spec) in line and "the dummy layer refuses every trial" in line


def test_a_factory_that_names_no_class_has_no_rule():
    def plain(scope):
        raise AssertionError("not made here")
    assert kinds((plain, runner.Measurement)) == (runner.Measurement,)


def test_the_engine_threads_rule_is_the_measurements():
    knobs = {"load": {"cpus": "0", "threads": 2}}
    assert runner.Measurement.problem(knobs) == (
        "load.threads = 2 is more than the 1 CPU(s) load.cpus = '0' allows: the engine's "
        "busy share could not show it saturated")
    assert runner.Measurement.problem({"load": {"cpus": "0", "threads": 1}}) is None
    assert runner.Measurement.problem({"load": {"cpus": "", "threads": 8}}) is None
    assert runner.Measurement.problem({"load": {"cpus": "0-1", "threads": 0}}) is None
