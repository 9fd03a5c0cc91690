"""Load agents on real processes and namespaces: three Dask workers, each in a network
namespace of its own, against a real nginx in a fourth; the merged result exact (the
histogram equal, bucket for bucket, to one built from every agent's per-request records),
the open loop's arrivals split so that together they are the one-agent schedule, the
rate kept, the agents started together, the control overhead small, and an agent killed
midway failing the load within seconds."""

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram

from stacklab.agents.pool import AgentPool
from stacklab.analysis.stats import decode_histogram
from stacklab.errors import EngineError
from stacklab.measure.drive import LOAD_KNOBS, LoadPlan
from stacklab.netlab import net
from stacklab.netlab.netns import namespaces

from helpers import private_nginx, require_engine, require_root, wait_for

# Never skipped: without root or nginx these tests fail, as the rest of the suite does
# (a runner that skipped them would pass without ever loading through agents).
pytestmark = pytest.mark.integration

AGENTS = 3
RATE = 900                 # 3 x 300 req/s
LOAD = {k.name: k.default for k in LOAD_KNOBS} | {"threads": 1}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """nginx in a server namespace, and three agents joined to it."""
    require_lab()
    base = tmp_path_factory.mktemp("agents")
    run_id = f"t{uuid.uuid4().hex[:8]}"
    link = net.create_link(run_id, base)
    pool = None
    try:
        with private_nginx(base, f"    server {{ listen {link.server_addr}:80; }}",
                           prefix=link.exec_prefix(link.server_ns)) as www:
            (www / "page.html").write_bytes(b"p" * 600)
            pool = AgentPool.local(AGENTS, base, f"{run_id}-ag")
            pool.attach(link.server_ns, link.server_addr, AGENTS)
            yield {"pool": pool, "url": f"http://{link.server_addr}/page.html", "link": link}
    finally:
        if pool is not None:
            pool.close()
        link.close()


def require_lab() -> None:
    """Root (namespaces), the engine and nginx, or the test fails."""
    require_root("network namespaces")
    require_engine()
    if not shutil.which("nginx"):
        pytest.fail("nginx is not installed: `make test-deps` installs it")


def test_without_root_or_nginx_these_tests_fail_not_skip(monkeypatch):
    marks = pytestmark if isinstance(pytestmark, list) else [pytestmark]
    assert not [m for m in marks if m.name in ("skip", "skipif")]
    for missing, said in (((os, "getuid", lambda: 1000), "needs root"),
                          ((shutil, "which", lambda name, *a, **k: None),
                           "nginx is not installed")):
        with monkeypatch.context() as m:
            m.setattr(*missing)
            with pytest.raises(BaseException) as e:
                require_lab()
        assert e.type is pytest.fail.Exception and said in str(e.value), e


def plan(url: str, **given) -> LoadPlan:
    fields = {"urls": ((url, 1),), "connections": 6, "duration_s": 3.0, "requests": None,
              "warmup_s": 0.0, "load": LOAD} | given
    return LoadPlan(**fields)


def test_three_agents_send_the_one_agent_schedule_and_merge_exactly(lab, tmp_path):
    load = lab["pool"].run_load(plan(lab["url"], load=LOAD | {"rate": RATE}), tmp_path,
                                AGENTS, raw_log=True)
    agents = load.raw["agents"]
    print({k: agents[k] for k in ("start_skew_us", "clock_spread_us", "overhead_s")},
          [(a["name"], a["completed"], a["rps"]) for a in agents["per_agent"]])
    assert load.failed == 0 and agents["count"] == AGENTS
    records = [line.split() for k in range(AGENTS)
               for line in (tmp_path / f"raw-agent-{k}.txt").read_text().splitlines()]
    # the merged histogram is the one built from every request's record, bucket for bucket
    union = HdrHistogram(1, 3_600_000_000, 3)
    for _, latency in records:
        union.record_value(int(latency))
    merged = decode_histogram(load.histogram)
    assert merged.get_total_count() == union.get_total_count() == load.completed
    assert [merged.get_count_at_index(i) for i in range(union.counts_len)] == \
        [union.get_count_at_index(i) for i in range(union.counts_len)]
    # together the agents sent arrival i at i / RATE, each once: the one-agent schedule
    intended = sorted(int(at) for at, _ in records)
    assert all(abs(at - i * 1e6 / RATE) <= 1 for i, at in enumerate(intended)), intended[:10]
    # the rate kept, the agents started together, little time spent beside the load
    assert abs(load.rps - RATE) <= 0.005 * RATE
    assert agents["start_skew_us"] <= 2000
    assert agents["overhead_s"] <= 1.0
    assert {a["netns"] for a in agents["per_agent"]} == set(lab["pool"].net.agent_ns)
    assert all(abs(a["rps"] - RATE / AGENTS) <= 0.01 * RATE / AGENTS
               for a in agents["per_agent"])


def test_a_closed_loop_shares_its_connections_out(lab, tmp_path):
    load = lab["pool"].run_load(plan(lab["url"], connections=7, duration_s=1.0), tmp_path,
                                AGENTS)
    per = load.raw["agents"]["per_agent"]
    assert [a["connections"] for a in per] == [3, 2, 2]
    assert load.connections == 7 and load.completed == sum(a["completed"] for a in per)
    assert load.slots.slots == 7


def test_an_agent_that_cannot_reach_the_target_fails_the_load_at_once(lab, tmp_path):
    began = time.monotonic()
    with pytest.raises(EngineError, match=r"load agent agent-\d: cannot reach"):
        lab["pool"].run_load(plan(lab["url"].replace("/page", ":81/page"), duration_s=20.0),
                             tmp_path, AGENTS)
    assert time.monotonic() - began < 5


def test_an_agent_killed_midway_fails_the_load_within_5_s(lab, tmp_path):
    """And the next load starts it again: the experiment goes on."""
    pool = lab["pool"]
    killed: dict = {}
    in_tmp = set(Path(tempfile.gettempdir()).glob("stacklab-agent-*"))

    def kill():
        killed["at"] = time.monotonic()
        os.kill(pool.procs[1].pid, signal.SIGKILL)
    timer = threading.Timer(1.5, kill)
    timer.start()
    try:
        with pytest.raises(EngineError, match="agent-1 left during the load"):
            pool.run_load(plan(lab["url"], load=LOAD | {"rate": RATE}, duration_s=20.0),
                          tmp_path, AGENTS)
    finally:
        timer.cancel()
    took = time.monotonic() - killed["at"]
    print(f"failed {took:.2f} s after the kill")
    assert took < 5
    # the killed agent's engine went with it; the others' were stopped
    wait_for(lambda: not any(subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                                            text=True).stdout.split()
                             for ns in pool.net.agent_ns[1:2]), 5, "agent-1's processes")
    again = pool.run_load(plan(lab["url"], duration_s=1.0), tmp_path, AGENTS)
    assert again.failed == 0 and len(again.agents) == AGENTS
    # what the killed agent was working in is the pool's, removed at its close; none of
    # the agents' directories went to the system's temporary directory
    assert list((pool._work_root).glob("stacklab-agent-*")), "the killed agent's directory"
    assert set(Path(tempfile.gettempdir()).glob("stacklab-agent-*")) == in_tmp


def test_nothing_of_the_agents_is_left_after_the_pool_closes(tmp_path):
    require_root("network namespaces")
    require_engine()
    run_id = f"t{uuid.uuid4().hex[:8]}"
    pool = AgentPool.local(2, tmp_path, run_id)
    made = {pool.net.control_ns, *pool.net.agent_ns}
    pids = [p.pid for p in pool.procs]
    assert made <= namespaces()
    left = pool._work_root / "stacklab-agent-killed"      # as an agent killed mid-load
    left.mkdir(parents=True)
    (left / "urls.txt").write_text("http://198.18.0.1/\n")
    pool.close()
    assert not made & namespaces()
    assert not [p for p in pids if os.path.exists(f"/proc/{p}")]
    assert not pool._work_root.exists()
    assert not list(tmp_path.glob("netlab-*.json"))
