"""Adding a component is one directory plus one registry line (README "Adding a component"):
tests/dummy_component/ (adapter, knobs, a template; the server is the machine's own
python3 -m http.server) is registered the way stacklab/stacks/__init__.py registers a
component, and runs through the whole lifecycle of `stacklab run` — validate, start,
ready, verify, measure with the real engine, stop, store — then `stacklab show`."""

import json
import os
import sqlite3

import pytest
from typer.testing import CliRunner

from stacklab import stacks
from stacklab.cli import cli
from stacklab.stacks import STACKS

from helpers import require_engine, server_binaries, server_processes

pytestmark = pytest.mark.integration

EXPERIMENT = """
[experiment]
name = "new-component"
repetitions = 1
requests = 200
warmup = "0s"
remeasure = 0

[matrix]
stack = ["py-http"]
workload = ["static-page"]
concurrency = [2]
py-http.keepalive = [true, false]
"""



def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_the_registry_line_is_all_the_lab_needs_to_know_it(registered):
    assert stacks.REGISTRY.defaults("py-http") == {"keepalive": True, "cpus": ""}
    assert STACKS["py-http"].knob_owners == ("py-http",)
    listed = invoke("stacks")
    assert listed.exit_code == 0, listed.output
    assert "py-http" in listed.output and "keepalive" in listed.output


def test_a_new_component_runs_through_the_whole_lifecycle(registered, tmp_path):
    require_engine()
    spec = tmp_path / "new.toml"
    spec.write_text(EXPERIMENT)
    db = tmp_path / "stacklab.db"
    dry = invoke("run", spec, "--dry-run", "--db", db)
    assert dry.exit_code == 0, dry.output
    assert "2 trials × 1 repetitions = 2 runs" in dry.output and not db.exists()

    result = invoke("run", spec, "--db", db)
    assert result.exit_code == 0, result.output
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    runs = conn.execute("SELECT * FROM runs ORDER BY id").fetchall()
    assert len(runs) == 2 and {r["outcome"] for r in runs} == {"ok"}, [
        (r["outcome"], r["reason"]) for r in runs]
    for r in runs:
        load = json.loads(r["load_json"])
        assert load["requests"]["completed"] == 200 and load["requests"]["failed"] == 0
        assert load["status"] == {"200": 200}
        verdicts = json.loads(r["verdicts_json"])
        assert {v["status"] for v in verdicts} == {"PASS"}
        checks = {v["check"] for v in verdicts}
        assert "content /index.html" in checks and "keep-alive" in checks
        assert "/usr/bin/python3" in json.loads(r["configs_json"])["py-http/serve.sh"]
        assert "py-http" in json.loads(r["versions_json"])
    # its processes count as servers (for the leftover check) by its registry line alone
    assert os.path.basename(os.path.realpath(registered.binary)) in server_binaries()
    assert server_processes() == []

    shown = invoke("show", "new-component", "--db", db)
    assert shown.exit_code == 0, shown.output
    assert "py-http" in shown.output
