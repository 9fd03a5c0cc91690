"""The instrument's own honesty on real servers: ready means the configured processes
exist, CPU placement holds for every process, and distorted runs are flagged."""

import os
from pathlib import Path

import pytest

from stacklab.host import procs
from stacklab.run.stack import RunningStack, start_stack, stop_stack
from stacklab.stacks import REGISTRY, STACKS
from stacklab.stacks.tls import make_certificate
from stacklab.workloads import deploy

from test_stacks import knobs_for

pytestmark = pytest.mark.integration


def started(session, stack, **overrides) -> RunningStack:
    deployed = deploy("static-page", session.run_dir("docroot-static-page"))
    running = RunningStack(STACKS[stack])
    try:
        start_stack(running, knobs_for(stack, **overrides), deployed,
                    session.run_dir(f"run-{len(list(session.dir.iterdir()))}"),
                    make_certificate(session.dir), session.run_dir("cache"))
    except BaseException:
        stop_stack(running)
        raise
    return running


def members(running: RunningStack, name: str) -> list[int]:
    s = next(s for s in running.started if s.name == name)
    return procs.group_members(s.proc.pgid)


@pytest.mark.parametrize("stack, overrides, component, want", [
    ("apache+mod_php", {"apache__start_servers": 200, "apache__max_request_workers": 256,
                        "apache__max_spare_servers": 256}, "apache", 201),
    ("apache", {"apache__mpm": "event", "apache__start_servers": 4}, "apache", 5),
    ("nginx+php-fpm", {"php_fpm__pm": "static", "php_fpm__max_children": 120}, "php-fpm",
     121),
    ("nginx", {"nginx__worker_processes": 4}, "nginx", 5),
])
def test_ready_means_the_configured_processes_exist(session, stack, overrides, component,
                                                     want):
    running = started(session, stack, **overrides)
    try:
        assert len(members(running, component)) >= want   # at once, no waiting here
    finally:
        assert stop_stack(running) == []


def test_prefork_starts_debians_five_servers_by_default(session):
    running = started(session, "apache+mod_php")
    try:
        assert "StartServers 5\n" in running.files()["apache/httpd.conf"]
        assert len(members(running, "apache")) >= 6
    finally:
        stop_stack(running)


def allowed_cpus(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no Cpus_allowed_list for {pid}")


def test_every_process_of_a_pinned_component_stays_on_its_cpus(session):
    cpu = str(max(os.sched_getaffinity(0)))
    running = started(session, "nginx+php-fpm", nginx__cpus=cpu, nginx__worker_processes=2,
                      php_fpm__cpus="0", php_fpm__pm="static", php_fpm__max_children=3)
    try:
        assert {allowed_cpus(p) for p in members(running, "nginx")} == {cpu}
        assert len(members(running, "nginx")) == 3
        assert {allowed_cpus(p) for p in members(running, "php-fpm")} == {"0"}
    finally:
        stop_stack(running)


@pytest.mark.parametrize("value, why", [("999", "CPU 999 is not available here"),
                                        ("0-x", "is not a CPU list"),
                                        ("1-0", "runs backwards")])
def test_a_cpu_list_that_cannot_be_used_is_refused_naming_it(value, why):
    with pytest.raises(ValueError, match=why):
        REGISTRY.get("nginx.cpus").check(value)
    with pytest.raises(ValueError, match="load.cpus"):
        REGISTRY.get("load.cpus").check(value)


HOLD = """
import sys, time
block = bytearray(int(sys.argv[1]) * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:      # burn a core (0: just hold the memory)
    pass
time.sleep(30)
"""


def hold(mib: int, burn_s: float):
    import subprocess
    import sys
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(mib), str(burn_s)],
                            start_new_session=True, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def release(proc) -> None:
    procs.stop_group(proc.pid)
    proc.wait()


def test_idle_memory_is_the_reading_before_load():
    from stacklab.measure.monitor import Monitor
    idle = hold(120, 0)
    try:
        with Monitor({"holder": idle.pid}) as monitor:
            pass
        summary = monitor.traces["holder"].summary(0, monitor.now_s())
        assert summary["idle_processes"] == 1
        assert 120 <= summary["idle_pss_mib"] < 160
    finally:
        release(idle)


def cpu_s(pid: int) -> float:
    from stacklab.measure.monitor import TICKS
    f = procs.proc_stat(pid)
    return (int(f[11]) + int(f[12])) / TICKS


def test_cpu_outside_the_lab_is_measured_and_the_lab_own_is_not():
    """A core burnt by a process the lab does not own counts as outside; the same burn
    inside a monitored component does not (judged against the burner's own CPU, read
    independently, so other work on the machine does not decide the test)."""
    import time
    from stacklab.measure.monitor import Monitor
    for owned in (False, True):
        burner = hold(1, 1.5)
        try:
            with Monitor({"component": burner.pid} if owned else {}) as monitor:
                time.sleep(0.1)
                t0, before = monitor.now_s(), cpu_s(burner.pid)
                time.sleep(1.0)
                t1, burnt = monitor.now_s(), cpu_s(burner.pid) - before
                time.sleep(0.15)
            lab_cpu = (monitor.traces["component"].summary(t0, t1)["cpu_s"] if owned
                       else 0.0)
            host = monitor.host_window(t0, t1, lab_cpu)
        finally:
            release(burner)
        share = burnt / (t1 - t0)
        assert share > 0.2, "the burner hardly ran: the machine is overloaded"
        if owned:
            assert host["outside_cores"] <= host["busy_cores"] - share + 0.15, (host, share)
        else:
            assert host["outside_cores"] >= share - 0.15, (host, share)


PREFORK = """
[experiment]
remeasure = 0   # runs are counted: none measured again on a busy host
name = "prefork-256"
repetitions = 1
duration = "2s"
warmup = "1s"

[knobs]
apache.mpm = "prefork"

[matrix]
stack = ["apache"]
workload = ["static-page"]
concurrency = [256]
apache.start_servers = [0, 256]
apache.max_request_workers = [150, 256]
exclude = [{ "apache.start_servers" = 256, "apache.max_request_workers" = 150 },
           { "apache.start_servers" = 0, "apache.max_request_workers" = 256 }]
"""


def test_prefork_with_too_few_workers_for_its_connections_is_flagged_starved(tmp_path):
    """Debian's prefork defaults (5 start servers, 150 workers) at 256 keep-alive
    connections serve clients in turns: flagged, with the numbers, in show. With 256
    servers started and allowed, every connection is served alike: no flag."""
    import json
    import sqlite3
    from typer.testing import CliRunner
    from stacklab.cli import cli
    from helpers import require_engine
    require_engine()
    spec = tmp_path / "prefork.toml"
    spec.write_text(PREFORK)
    # Served alike — on a quiet host. Other work on the machine can take the CPU the 256
    # servers need; such a run says so (host-busy) and cannot judge: measured again, up
    # to three times; the test fails if no attempt was quiet. (Starved once fired here on
    # a correctly sized server: the least-served of 256 connections at 5% of the median
    # in 1 of 15 runs. The rule now reads the least-served 1%, which went down to 8% of the
    # median in 42 runs, under the 5% limit; the slowest 1% of requests held 13–65% of the
    # clients' time, under the 75% limit.)
    busy = []
    for attempt in range(3):
        db = tmp_path / f"r{attempt}.db"
        result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
        assert result.exit_code == 0, result.output
        rows = sqlite3.connect(db).execute(
            "SELECT knobs_json, flags_json, resources_json FROM runs").fetchall()
        flags = {json.loads(k)["apache"]["max_request_workers"]: json.loads(f)
                 for k, f, _ in rows}
        busy += [json.loads(r)["_host"] for k, _, r in rows
                 if json.loads(k)["apache"]["max_request_workers"] == 256]
        assert "starved" in flags[150]
        if "host-busy" not in flags[256]:
            break
    assert "host-busy" not in flags[256], f"the host was busy three times: {busy}"
    shown = " ".join(CliRunner().invoke(cli, ["show", "--db", str(db)]).output.split())
    assert "starved" not in flags[256], shown
    assert "starved — 1 of 1 runs" in shown and "of the clients' time" in shown
    ids = [t for (t,) in sqlite3.connect(db).execute("SELECT trial_id FROM runs")]
    compared = CliRunner().invoke(cli, ["compare", *ids, "--db", str(db)])
    assert compared.exit_code == 0, compared.output
    assert "p50 ms ⚑" in compared.output and "req/s ⚑" not in compared.output


PINNED = """
[experiment]
remeasure = 0   # runs are counted: none measured again on a busy host
name = "pinned"
repetitions = 1
requests = 2000
warmup = "0s"

[knobs]
nginx.cpus = "0"
load.cpus = "{cpu}"

[matrix]
stack = ["nginx"]
workload = ["static-page"]
concurrency = [4]
"""


def test_the_classic_layout_server_on_one_cpu_client_on_another(tmp_path):
    """The engine runs pinned too: with one CPU allowed it starts one thread (it sizes
    its threads by the CPUs it may use), and the placement is stored with the run."""
    import json
    import sqlite3
    from typer.testing import CliRunner
    from stacklab.cli import cli
    from helpers import require_engine
    require_engine()
    cpu = str(max(os.sched_getaffinity(0)))
    spec, db = tmp_path / "pinned.toml", tmp_path / "r.db"
    spec.write_text(PINNED.format(cpu=cpu))
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 0, result.output
    knobs, load = sqlite3.connect(db).execute("SELECT knobs_json, load_json FROM runs").fetchone()
    knobs, load = json.loads(knobs), json.loads(load)
    assert knobs["nginx"]["cpus"] == "0" and knobs["load"]["cpus"] == cpu
    assert load["config"]["threads"] == 1
    assert load["requests"]["completed"] == 2000


TLS = """
[experiment]
remeasure = 0   # runs are counted: none measured again on a busy host
name = "tls"
repetitions = 1
requests = 400
warmup = "0s"

[knobs]
nginx.tls = true
load.keepalive = false

[matrix]
stack = ["nginx"]
workload = ["static-page"]
concurrency = [2]
"""


def test_show_and_the_report_say_which_tls_protocol_was_negotiated(tmp_path):
    from typer.testing import CliRunner
    from stacklab.cli import cli
    from helpers import require_engine
    require_engine()
    spec, db = tmp_path / "tls.toml", tmp_path / "r.db"
    spec.write_text(TLS)
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 0, result.output
    shown = " ".join(result.output.split())
    assert "TLS nginx static-page c=2 load.keepalive=False nginx.tls=True: TLSv1.3" in shown
    import re
    resumed = re.search(r"400 handshakes, (\d+) resumed", shown)
    assert resumed and int(resumed.group(1)) >= 390      # all but the first per connection
    report = tmp_path / "r.html"
    assert CliRunner().invoke(cli, ["report", "tls", "--db", str(db), "-o",
                                    str(report)]).exit_code == 0
    html = report.read_text()
    assert '<table id="tls">' in html and "TLSv1.3" in html


def test_each_server_counts_the_run_itself_and_the_count_is_stored(tmp_path):
    """nginx's stub_status over warm-up and load agrees with what the engine sent (the
    engine counts only the measured phase; here there is no warm-up)."""
    import json
    import sqlite3
    from typer.testing import CliRunner
    from stacklab.cli import cli
    from helpers import require_engine
    require_engine()
    spec, db = tmp_path / "pinned.toml", tmp_path / "r.db"
    spec.write_text(PINNED.format(cpu=str(max(os.sched_getaffinity(0)))))
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 0, result.output
    resources = json.loads(sqlite3.connect(db).execute(
        "SELECT resources_json FROM runs").fetchone()[0])
    counted = resources["_counters"]["nginx"]["requests"]
    assert 2000 <= counted <= 2000 + 5      # the status readings count themselves
