"""The monitor against processes of known memory and CPU use."""

import subprocess
import sys

import pytest

from stacklab.host import procs
from stacklab.measure.monitor import Monitor

from helpers import wait_for

# Holds ~MIB MiB resident, burns CPU for BURN seconds in a child that exits (reaped), then
# in itself, then sleeps.
WORKLOAD = """
import os, sys, time
mib, burn = int(sys.argv[1]), float(sys.argv[2])
block = bytearray(mib * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
pid = os.fork()
if pid == 0:
    spin(burn)
    os._exit(0)
os.waitpid(pid, 0)
spin(burn)
print("done", flush=True)
time.sleep(30)
"""


@pytest.fixture
def worker():
    proc = subprocess.Popen([sys.executable, "-c", WORKLOAD, "200", "0.6"],
                            start_new_session=True, stdout=subprocess.PIPE, text=True)
    yield proc
    procs.stop_group(proc.pid)
    proc.wait()


def test_monitor_measures_known_memory_and_cpu(worker):
    with Monitor({"w": worker.pid}) as monitor:
        assert worker.stdout.readline().strip() == "done"
        done_at = monitor.now_s()
        trace = monitor.traces["w"]
        wait_for(lambda: [s for s in list(trace.samples) if s.t_s >= done_at and s.pss_mib],
                 5.0, "a PSS reading (every 2 s) after the worker holds its memory")
        end = monitor.now_s()
    summary = trace.summary(0.0, end)
    # 0.6 s in the reaped child + 0.6 s in the parent (plus interpreter start-up)
    assert 1.1 <= summary["cpu_s"] <= 2.1, summary["cpu_s"]
    # RSS counts the 200 MiB the forked child shares with its parent twice; PSS does not
    assert 390 <= summary["rss_mib_peak"] <= 470, summary["rss_mib_peak"]
    assert 195 <= summary["pss_mib_peak"] <= 250, summary["pss_mib_peak"]
    assert summary["processes_max"] == 2          # the child was seen while it ran
    assert len(trace.samples) >= 10


def test_the_sampler_finds_every_forked_worker():
    """A server-like group: a master with a few forked workers. (What the sampler costs
    is measured by bench/monitor_overhead.py, by hand: a speed, not a correctness test.)"""
    server = subprocess.Popen([sys.executable, "-c", "import os, time\n"
                               "for _ in range(4):\n    os.fork() or time.sleep(60)\n"
                               "time.sleep(60)"], start_new_session=True)
    try:
        wait_for(lambda: len(procs.group_members(server.pid)) == 5, 5.0,
                 "the master and its 4 workers running")
        with Monitor({"server": server.pid}) as m:
            wait_for(lambda: len(m.traces["server"].samples) >= 3, 5.0, "three samples")
    finally:
        procs.stop_group(server.pid)
        server.wait()
    assert max(s.processes for s in m.traces["server"].samples) == 5
    # the sampler read /proc for every sample: it used some CPU, and far less than a core
    overhead = m.overhead()
    assert 0 < overhead["sampler_cpu_s"] and overhead["sampler_core_share"] < 0.5
