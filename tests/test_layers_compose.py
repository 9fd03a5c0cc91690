"""A run is a stack of layers (stacklab.run.layers): entered in order, left in reverse whatever
happens, a FAIL among their verdicts stopping the run before the load, each layer's
record landing in the stored run. A new layer is one factory in runner.LAYERS (as a new
component is one registry line): shown with a dummy layer around the dummy component
(tests/dummy_component), through `stacklab run`, with no change to generic code."""

import json
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
from typer.testing import CliRunner

from stacklab.run import runner
from stacklab.cli import cli
from stacklab.errors import VerificationFailed
from stacklab.run.layers import Composition
from stacklab.measure.verify import Status, Verdict

from helpers import require_engine, server_processes


@dataclass(eq=False)
class Dummy:
    """A layer that notes when it is entered and left (and what it saw then), gives one
    verdict and records its own part."""

    tag: str
    events: list
    status: Status = Status.PASS
    seen: dict = field(default_factory=dict)     # what it reads when entered and left
    name = "dummy"
    waits = False

    @classmethod
    def problem(cls, knobs):
        return None

    @contextmanager
    def entered(self):
        self.events.append(("enter", self.tag, *self._seen()))
        try:
            yield self
        finally:
            self.events.append(("exit", self.tag, *self._seen()))

    def _seen(self):
        return tuple(look() for look in self.seen.values())

    def verdicts(self):
        return (Verdict("dummy", f"{self.tag} check", self.status, f"{self.tag} said so"),)

    def record(self):
        return {f"_dummy_{self.tag}": {"tag": self.tag}}


# --- the composition alone ----------------------------------------------------------

def test_layers_are_left_in_reverse_and_records_merge_outer_first():
    events = []
    layers = [Dummy("a", events), Dummy("b", events), Dummy("c", events)]
    with Composition(layers, "stack").entered() as composed:
        events.append(("body",))
        assert composed.record() == {"_dummy_a": {"tag": "a"}, "_dummy_b": {"tag": "b"},
                                     "_dummy_c": {"tag": "c"}}
    assert events == [("enter", "a"), ("enter", "b"), ("enter", "c"), ("body",),
                      ("exit", "c"), ("exit", "b"), ("exit", "a")]
    assert [v.check for v in composed.verdicts] == ["a check", "b check", "c check"]


def test_a_fail_stops_the_composition_before_the_layers_inside_and_leaves_the_rest():
    events = []
    layers = [Dummy("a", events), Dummy("b", events, Status.FAIL), Dummy("c", events)]
    with pytest.raises(VerificationFailed) as e:
        with Composition(layers, "stack").entered():
            events.append(("body",))
    assert events == [("enter", "a"), ("enter", "b"), ("exit", "b"), ("exit", "a")]
    assert e.value.reason == "b check: b said so"
    assert [v.check for v in e.value.verdicts] == ["a check", "b check"]
    assert str(e.value) == "stack failed verification, not measured: b check: b said so"


def test_a_layer_that_waits_is_judged_with_the_next_one_that_does_not():
    events = []
    waiting = Dummy("a", events, Status.FAIL)
    waiting.waits = True
    with pytest.raises(VerificationFailed) as e:
        with Composition([waiting, Dummy("b", events), Dummy("c", events)],
                         "stack").entered():
            pass
    assert events == [("enter", "a"), ("enter", "b"), ("exit", "b"), ("exit", "a")]
    assert [v.check for v in e.value.verdicts] == ["b check", "a check"]


def test_two_layers_filling_one_key_merge_the_outer_ones_fields_first():
    class Part(Dummy):
        def record(self):
            return {"_fs": {self.tag: 1}}
    composed = Composition([Part("outer", []), Part("inner", [])], "stack")
    assert list(composed.record()["_fs"]) == ["outer", "inner"]


# --- a run made of a dummy layer and a dummy component ------------------------------

EXPERIMENT = """
[experiment]
name = "layered"
repetitions = 1
requests = 200
warmup = "0s"
remeasure = 0

[matrix]
stack = ["py-http"]
workload = ["static-page"]
concurrency = [2]
"""



def layered(monkeypatch, events, inner_status=Status.PASS):
    """Two dummy layers in the run's layers: one outermost, one just inside the cold
    cache (around the measurement); each sees whether the servers run and whether the
    load has been measured, when it is entered and when it is left."""
    def seeing(tag, status=Status.PASS):
        def make(scope):
            layer = Dummy(tag, events, status)
            layer.seen = {"servers": lambda: bool(scope.running.started)
                          and scope.running.alive(),
                          "measured": lambda: runner._load(scope) is not None}
            return layer
        return make
    layers = list(runner.LAYERS)
    at = layers.index(runner._measurement)
    layers[at:at] = [seeing("inner", inner_status)]
    monkeypatch.setattr(runner, "LAYERS", (seeing("outer"), *layers))


def stored(db):
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    return conn.execute("SELECT * FROM runs ORDER BY id").fetchall()


@pytest.mark.integration
def test_a_run_enters_its_layers_in_order_and_stores_each_ones_record(
        registered, monkeypatch, tmp_path):
    require_engine()
    events = []
    layered(monkeypatch, events)
    spec, db = tmp_path / "l.toml", tmp_path / "r.db"
    spec.write_text(EXPERIMENT)
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 0, result.output
    # (what, layer, servers up, load measured)
    assert events == [("enter", "outer", False, False), ("enter", "inner", True, False),
                      ("exit", "inner", True, True), ("exit", "outer", False, True)]
    [run] = stored(db)
    assert run["outcome"] == "ok", run["reason"]
    resources = json.loads(run["resources_json"])
    assert resources["_dummy_outer"] == {"tag": "outer"}
    assert resources["_dummy_inner"] == {"tag": "inner"}
    assert "py-http" in resources and "_host" in resources and "_net" in resources
    checks = [v["check"] for v in json.loads(run["verdicts_json"])]
    assert checks.index("outer check") < checks.index("inner check")
    assert json.loads(run["load_json"])["requests"]["completed"] == 200
    assert server_processes() == []


@pytest.mark.integration
def test_a_fail_from_a_layer_stops_the_run_before_the_load(registered, monkeypatch,
                                                           tmp_path):
    require_engine()
    events = []
    layered(monkeypatch, events, inner_status=Status.FAIL)
    spec, db = tmp_path / "l.toml", tmp_path / "r.db"
    spec.write_text(EXPERIMENT)
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert events == [("enter", "outer", False, False), ("enter", "inner", True, False),
                      ("exit", "inner", True, False), ("exit", "outer", False, False)]
    [run] = stored(db)
    assert run["outcome"] == "invalid"
    assert run["reason"] == "inner check: inner said so"
    assert run["load_json"] is None              # not measured
    verdicts = json.loads(run["verdicts_json"])
    assert verdicts[-1]["check"] == "inner check" and verdicts[-1]["status"] == "FAIL"
    assert server_processes() == []
