"""One lifecycle (stack.lifecycle: start → ready → verify → measure → always stop) that
every measurement plugs into, one plan validation (validate.validate_plan) that every
measuring command calls, and the lab's names made and matched from one definition."""

import contextlib
import re

import pytest

from stacklab.host import lab
from stacklab.run import stack as stack_module
from stacklab.methods.breakdown import Arguments
from stacklab.errors import EngineError, SpecError, StackError, UsageError, VerificationFailed
from stacklab.run.exportconfig import clean
from stacklab.experiment.plan import Plan, PlannedRun, Trial, effective_knobs
from stacklab.run.validate import SpecOrigin, validate_plan
from stacklab.run.keep import kept_dir
from stacklab.experiment.spec import parse_spec
from stacklab.run.stack import RunningStack, lifecycle
from stacklab.stacks import REGISTRY, STACKS
from stacklab.stacks.tls import make_certificate
from stacklab.measure.verify import Status, Verdict, fetch
from stacklab.workloads import deploy

from helpers import server_processes

PASS = Verdict("nginx", "content", Status.PASS, "as deployed")
FAIL = Verdict("nginx", "gzip", Status.FAIL, "not compressed")


# the lifecycle's order, without servers ---------------------------------------------

@pytest.fixture
def steps(monkeypatch):
    """The lifecycle's steps, recorded in order; start and stop replaced (nothing runs).
    steps.start_error / steps.stop_errors make them fail."""
    class Steps(list):
        start_error = None
        stop_errors: list = []

    seen = Steps()

    def start(running, *args, **kwargs):
        seen.append("start")
        if seen.start_error:
            raise seen.start_error

    def stop(running):
        seen.append("stop")
        return list(seen.stop_errors)

    monkeypatch.setattr(stack_module, "start_stack", start)
    monkeypatch.setattr(stack_module, "stop_stack", stop)
    return seen


def verifying(steps, *verdicts):
    def verify(running, deployed):
        steps.append("verify")
        return list(verdicts)
    return verify


def life(steps, *verdicts):
    return lifecycle(RunningStack(STACKS["nginx"]), {}, None, None,
                     verify=verifying(steps, *verdicts))


def test_start_verify_measure_stop_once_each_in_that_order(steps):
    with life(steps, PASS) as verdicts:
        steps.append("measure")
    assert steps == ["start", "verify", "measure", "stop"]
    assert verdicts == (PASS,)


def test_a_fail_is_not_measured_and_the_stack_still_stops(steps):
    with pytest.raises(VerificationFailed) as e:
        with life(steps, PASS, FAIL):
            steps.append("measure")
    assert steps == ["start", "verify", "stop"]
    assert e.value.verdicts == (PASS, FAIL) and e.value.reason == "gzip: not compressed"
    assert str(e.value) == "nginx failed verification, not measured: gzip: not compressed"


def test_a_stack_that_cannot_start_is_stopped_and_not_verified(steps):
    steps.start_error = StackError("nginx exited with code 1 before becoming ready", "tail")
    with pytest.raises(StackError, match="before becoming ready"):
        with life(steps, PASS):
            steps.append("measure")
    assert steps == ["start", "stop"]


def test_stop_errors_fail_a_measurement_that_ended_normally(steps):
    steps.stop_errors = ["nginx: processes of group 42 survived stop"]
    with pytest.raises(StackError, match="survived stop"):
        with life(steps, PASS):
            steps.append("measure")
    assert steps == ["start", "verify", "measure", "stop"]


def test_a_measurement_that_raised_keeps_its_error_with_the_stop_errors_noted(steps):
    steps.stop_errors = ["nginx: processes of group 42 survived stop"]
    with pytest.raises(EngineError, match="engine broke") as e:
        with life(steps, PASS):
            raise EngineError("engine broke")
    assert steps == ["start", "verify", "stop"]
    assert any("survived stop" in note for note in e.value.__notes__)


# the lifecycle with a real server ------------------------------------------------------

@pytest.mark.integration
@pytest.mark.parametrize("fail", [False, True])
def test_a_real_stack_is_served_while_measured_and_gone_after(session, fail):
    deployed = deploy("static-page", session.docroot("static-page"))
    running = RunningStack(STACKS["nginx"])
    knobs = effective_knobs(REGISTRY, STACKS["nginx"], Trial("nginx", "static-page", 1, (), ()))
    verify = (lambda r, d: [FAIL]) if fail else None
    with pytest.raises(VerificationFailed) if fail else contextlib.nullcontext():
        with lifecycle(running, knobs, deployed, session.run_dir("r"),
                       make_certificate(session.dir), session.cache(), verify=verify):
            assert fetch(running.front.endpoint, "/index.html").status == 200
    assert running.files() and server_processes() == []


# one validation, errors where the value was given ---------------------------------------

def one_trial(stack, workload, **knobs) -> Plan:
    trial = Trial(stack, workload, 1, tuple(sorted(knobs.items())), ())
    return Plan((trial,), (PlannedRun(trial, 1),))


@pytest.fixture
def spec(spec_args):
    doc = {"experiment": {"name": "v", "requests": 10},
           "matrix": {"stack": ["nginx"], "workload": ["static-page"], "concurrency": [1]}}
    return parse_spec(doc, "v.toml", *spec_args)


def test_a_workload_the_stack_cannot_run_is_named_in_the_file_or_on_the_command_line(spec):
    plan = one_trial("nginx", "php-page")
    with pytest.raises(SpecError) as e:
        validate_plan(plan, SpecOrigin(spec))
    assert (e.value.file, e.value.key, e.value.value) == ("v.toml", "matrix.workload",
                                                          "php-page")
    assert "needs php" in e.value.problem and "exclude the combination" in e.value.problem
    with pytest.raises(UsageError, match=r"^WORKLOAD 'php-page' needs php"):
        validate_plan(plan, Arguments({}))


def test_a_knob_combination_a_component_refuses_is_named_with_its_trial(spec):
    plan = one_trial("apache+mod_php", "php-page", **{"apache.mpm": "event"})
    [trial] = plan.trials
    with pytest.raises(SpecError) as e:
        validate_plan(plan, SpecOrigin(spec))
    assert (e.value.key, e.value.value) == (f"trial {trial.label()}", trial.id)
    assert "prefork" in e.value.problem
    with pytest.raises(UsageError, match=r"^apache with \{'apache.mpm': 'event'\}: mod_php"):
        validate_plan(plan, Arguments({"apache.mpm": "event"}))


def test_a_plan_that_can_run_passes(spec):
    validate_plan(one_trial("nginx", "static-page"), SpecOrigin(spec))


# the lab's names ------------------------------------------------------------------------

def test_run_directories_are_named_and_matched_from_one_template(session):
    name = lab.run_name(Trial("nginx", "static-page", 16, (), ()).id, 12)
    assert re.fullmatch(lab.pattern(lab.RUN), name)
    assert clean(f"pid {session.dir / name}/nginx/nginx.pid;") == (
        "pid /var/lib/stacklab/nginx/nginx.pid;")
    assert clean(f"root {session.docroot('static-page')};") == "root /var/www/html;"
    assert re.fullmatch(lab.pattern(lab.SESSION), session.dir.name)


def test_kept_logs_never_overwrite_an_earlier_runs(tmp_path):
    def clock():
        return "2026-01-02T03:04:05.678+00:00"
    first = kept_dir(tmp_path, "0123456789ab-r1", clock)
    assert first == tmp_path / "0123456789ab-r1"
    first.mkdir()
    second = kept_dir(tmp_path, "0123456789ab-r1", clock)
    assert second.name == "0123456789ab-r1-20260102T030405678000"
    second.mkdir()
    assert kept_dir(tmp_path, "0123456789ab-r1", clock).name == second.name + "-2"
