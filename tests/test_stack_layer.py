"""The stack's layer carries its lifecycle's own check and readiness deadline (as dbbench
uses it: a database variant's check of its settings and data), so that dbbench, like a
run and a breakdown, is a composition of layers: a FAIL of that check stops it in the
composition, before the loops, and the stack is stopped all the same. Start and stop
are replaced as in test_lifecycle (nothing runs)."""

import pytest

from stacklab.run import stack as stack_module
from stacklab.errors import VerificationFailed
from stacklab.run.layers import Composition
from stacklab.run.stack import RunningStack, StackLayer
from stacklab.stacks import STACKS
from stacklab.measure.verify import Status, Verdict

PASS = Verdict("mariadb", "settings and data", Status.PASS, "as configured")
FAIL = Verdict("mariadb", "settings and data", Status.FAIL, "engine = myisam (wanted innodb)")


@pytest.fixture
def steps(monkeypatch):
    seen = []

    def start(running, *args, ready_timeout_s=None, **kwargs):
        seen.append(("start", ready_timeout_s))

    def stop(running):
        seen.append("stop")
        return []

    monkeypatch.setattr(stack_module, "start_stack", start)
    monkeypatch.setattr(stack_module, "stop_stack", stop)
    return seen


def layer(steps, verdict):
    def verify(running, deployed):
        steps.append("verify")
        return [verdict]
    return StackLayer(RunningStack(STACKS["nginx"]), {}, None, lambda: None,
                      what="mariadb (defaults)", verify=verify, ready_timeout_s=60.0)


def test_the_layers_own_check_and_deadline_are_its_lifecycles(steps):
    with Composition((layer(steps, PASS),), "mariadb (defaults)").entered() as composed:
        steps.append("loops")
    assert steps == [("start", 60.0), "verify", "loops", "stop"]
    assert composed.verdicts == (PASS,)


def test_a_fail_of_its_check_stops_the_composition_before_the_loops(steps):
    with pytest.raises(VerificationFailed) as e:
        with Composition((layer(steps, FAIL),), "mariadb (defaults)").entered():
            steps.append("loops")
    assert steps == [("start", 60.0), "verify", "stop"]
    assert str(e.value) == ("mariadb (defaults) failed verification, not measured: "
                            "settings and data: engine = myisam (wanted innodb)")
