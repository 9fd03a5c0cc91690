"""load.agents through `stacklab run`, as a user meets it: a trial's load from 1 and 3
agents stored as one run each, merged, with each agent's figures in `show` and the
report; an agent lost midway failing its run while the experiment goes on; the rule
that local agents need net.mode = "veth"; and nothing of the agents left afterwards."""

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import threading

import pytest
from typer.testing import CliRunner

from stacklab.agents.rules import agents_problem
from stacklab.agents.pool import DASK, AgentPool
from stacklab.cli import cli
from stacklab.netlab import net

from helpers import ROOT, require_engine, require_root

PRESETS = ROOT / "presets"

pytestmark = pytest.mark.integration

EXPERIMENT = """
[experiment]
remeasure = 0
name = "agents"
repetitions = 1
duration = "{duration}"
warmup = "0.3s"

[load]
rate = 600
threads = 1

[knobs]
net.mode = "veth"

[matrix]
stack = ["nginx"]
workload = ["static-page"]
concurrency = [6]
load.agents = {agents}
"""


def run(tmp_path, agents="[1, 3]", duration="1s", text=None):
    spec, db = tmp_path / "agents.toml", tmp_path / "r.db"
    spec.write_text(text or EXPERIMENT.format(agents=agents, duration=duration))
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    return result, db


def lab_namespaces() -> set[str]:
    return {ns for ns in net.namespaces() if ns.startswith("stacklab-")}


def test_one_and_three_agents_give_one_merged_run_each(tmp_path):
    require_root("network namespaces")
    require_engine()
    before = lab_namespaces()
    result, db = run(tmp_path)
    assert result.exit_code == 0, result.output
    rows = sqlite3.connect(db).execute("SELECT outcome, load_json, flags_json FROM runs")
    loads = {}
    for outcome, load, flags in rows:
        assert outcome == "ok"
        assert "generator-bound" not in json.loads(flags)
        doc = json.loads(load)
        loads[doc["agents"]["count"]] = doc
    assert sorted(loads) == [1, 3]
    three = loads[3]
    per = three["agents"]["per_agent"]
    assert [a["connections"] for a in per] == [2, 2, 2]
    assert three["requests"]["completed"] == sum(a["completed"] for a in per)
    assert abs(three["rps"] - 600) <= 6 and three["agents"]["start_skew_us"] <= 2000
    assert len({a["netns"] for a in per}) == 3
    shown = CliRunner().invoke(cli, ["show", "--db", str(db)]).output
    assert "load agents of" in shown and "agent-2 (stacklab-" in shown
    doc = json.loads(CliRunner().invoke(cli, ["show", "--db", str(db), "--json"]).output)
    counts = sorted(t["agents"]["count"] for t in doc["trials"])
    assert counts == [1, 3]
    report = tmp_path / "r.html"
    assert CliRunner().invoke(cli, ["report", "--db", str(db), "-o", str(report)]
                              ).exit_code == 0
    assert 'id="agents"' in report.read_text()
    # complete: a resume has nothing to load, and starts no agent for it
    again = CliRunner().invoke(cli, ["run", str(tmp_path / "agents.toml"), "--db", str(db),
                                     "--resume"])
    assert again.exit_code == 0, again.output
    assert "joined" not in again.output
    assert lab_namespaces() == before


def test_an_agent_lost_midway_fails_its_run_and_the_experiment_goes_on(tmp_path,
                                                                      monkeypatch):
    require_root("network namespaces")
    require_engine()
    timers = []
    run_load = AgentPool.run_load

    def killing(pool, plan, work_dir, count, raw_log=False):
        """The two-agent load loses agent-1 1.5 s in (of 3 s); agent-0 stays for the
        one-agent trial, whichever runs first."""
        if count == 2 and not timers:
            timers.append(threading.Timer(1.5, os.kill, (pool.procs[1].pid, signal.SIGKILL)))
            timers[0].start()
        return run_load(pool, plan, work_dir, count, raw_log)
    monkeypatch.setattr(AgentPool, "run_load", killing)
    try:
        result, db = run(tmp_path, agents="[2, 1]", duration="3s")
    finally:
        for t in timers:
            t.cancel()
    assert result.exit_code == 0, result.output
    rows = list(sqlite3.connect(db).execute("SELECT outcome, reason, knobs_json FROM runs"))
    by_agents = {json.loads(k)["load"]["agents"]: (o, r) for o, r, k in rows}
    print(by_agents)
    assert by_agents[2][0] == "failed" and "agent-1 left during the load" in by_agents[2][1]
    assert by_agents[1][0] == "ok"


def test_local_agents_need_their_own_namespaces():
    knobs = {"load": {"agents": 2}, "net": {"mode": "loopback"}}
    assert 'set net.mode = "veth"' in agents_problem(knobs)
    assert agents_problem({"load": {"agents": 2}, "net": {"mode": "veth"}}) is None
    assert agents_problem({"load": {"agents": 0}, "net": {"mode": "loopback"}}) is None
    shaped = {"load": {"agents": 2}, "net": {"mode": "veth", "link": "100mbit"}}
    assert "net.link" in agents_problem(shaped)
    pinned = {"load": {"agents": 2, "cpus": "1"}, "net": {"mode": "veth"}}
    assert "load.cpus" in agents_problem(pinned)


def test_agents_on_loopback_are_refused_before_anything_starts(tmp_path):
    spec = tmp_path / "agents.toml"
    spec.write_text(EXPERIMENT.format(agents="[2]", duration="1s").replace(
        'net.mode = "veth"', 'net.mode = "loopback"'))
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(tmp_path / "r.db"),
                                      "--dry-run"])
    assert result.exit_code == 2, result.output
    line = " ".join(result.output.split())
    assert "load.agents = 2" in line and 'net.mode = "veth"' in line


EXTERNAL = """
[experiment]
name = "agents-external"
repetitions = 1
duration = "1s"
warmup = "0.3s"
remeasure = 0
keep_cpus_awake = false

[load]
rate = 400
threads = 1
agents = 2

[external]
url = "{url}"

[matrix]
concurrency = [4]
"""


def test_agents_on_other_hosts_join_the_scheduler_the_user_names(tmp_path):
    """--agents-listen: two `dask worker`s started as a user starts them on each load
    host (here on this one, at loopback) join, and load the user's own server."""
    require_engine()
    from stacklab.host.net import free_port
    from test_external import own_nginx
    port = free_port()
    workers = [subprocess.Popen([str(DASK), "worker", f"tcp://127.0.0.1:{port}", "--name",
                                 f"host-{k}", "--nthreads", "1", "--no-nanny",
                                 "--no-dashboard"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for k in range(2)]
    try:
        with own_nginx(tmp_path) as (_, url):
            spec = tmp_path / "ext.toml"
            spec.write_text(EXTERNAL.format(url=url))
            result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(tmp_path / "r.db"),
                                              "--agents-listen", f"127.0.0.1:{port}",
                                              "--agents-wait", "30"])
            assert result.exit_code == 0, result.output
    finally:
        for w in workers:
            w.kill()
            w.wait()
    (outcome, load), = sqlite3.connect(tmp_path / "r.db").execute(
        "SELECT outcome, load_json FROM runs")
    doc = json.loads(load)
    assert outcome == "ok", doc
    assert [a["name"] for a in doc["agents"]["per_agent"]] == ["host-0", "host-1"]
    assert abs(doc["rps"] - 400) <= 4
    assert all(a["netns"] is None for a in doc["agents"]["per_agent"])


@pytest.mark.parametrize("argv, said", [
    (["--agents-listen", "nowhere"], "--agents-listen 'nowhere': expected HOST:PORT"),
    (["--agents-listen", "127.0.0.1:99999"], "expected HOST:PORT"),
])
def test_a_bad_listen_address_is_one_line(tmp_path, argv, said):
    spec = tmp_path / "ext.toml"
    spec.write_text(EXTERNAL.format(url="http://127.0.0.1:8080/"))
    result = CliRunner().invoke(cli, ["run", str(spec), "--dry-run", *argv])
    assert result.exit_code == 2 and said in " ".join(result.output.split()), result.output


def test_listening_for_agents_a_stack_stacklab_starts_cannot_use_is_refused(tmp_path):
    spec = tmp_path / "agents.toml"
    spec.write_text(EXPERIMENT.format(agents="[2]", duration="1s"))
    result = CliRunner().invoke(cli, ["run", str(spec), "--dry-run", "--agents-listen",
                                      "127.0.0.1:8786"])
    assert result.exit_code == 2, result.output
    assert "cannot reach stack 'nginx'" in " ".join(result.output.split())


def test_an_external_server_with_agents_needs_listen(tmp_path):
    spec = tmp_path / "ext.toml"
    spec.write_text(EXTERNAL.format(url="http://127.0.0.1:8080/"))
    result = CliRunner().invoke(cli, ["run", str(spec), "--dry-run"])
    assert result.exit_code == 2, result.output
    assert "give --agents-listen" in " ".join(result.output.split())


def test_a_replay_is_dealt_out_among_the_agents_and_added_up_again(tmp_path):
    """load.replay_times with agents: agent k plays the log's entries i ≡ k (mod N) at
    their own times; together they send every request once, as one engine does."""
    require_root("network namespaces")
    require_engine()
    shutil.copy(PRESETS / "sample-access.log", tmp_path)
    result, db = run(tmp_path, text=REPLAY)
    assert result.exit_code == 0, result.output
    rows = sqlite3.connect(db).execute("SELECT outcome, load_json FROM runs")
    loads = {}
    for outcome, load in rows:
        doc = json.loads(load)
        assert outcome == "ok"
        loads[(doc.get("agents") or {}).get("count", 0)] = doc
    one, three = loads[0], loads[3]
    assert three["config"]["schedule"]["requests"] == one["config"]["schedule"]["requests"]
    assert three["requests"]["completed"] == one["requests"]["completed"]
    assert [a["completed"] for a in three["agents"]["per_agent"]] == [
        len(range(k, one["requests"]["completed"], 3)) for k in range(3)]


REPLAY = """
[experiment]
name = "replay-agents"
repetitions = 1
duration = "3s"
warmup = "0s"
remeasure = 0

[load]
replay = "sample-access.log"
replay_times = true
rate = 400
threads = 1

[knobs]
net.mode = "veth"

[matrix]
stack = ["nginx"]
workload = ["portal-site"]
concurrency = [6]
load.agents = [0, 3]
"""
