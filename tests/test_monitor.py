"""The monitor against processes of known memory and CPU use."""

import subprocess
import sys
import time

import pytest

from stacklab import procs
from stacklab.monitor import Monitor

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
        time.sleep(2.2)                          # a PSS reading (every 2 s) lands
        end = monitor.now_s()
    trace = monitor.traces["w"]
    summary = trace.summary(0.0, end)
    # 0.6 s in the reaped child + 0.6 s in the parent (plus interpreter start-up)
    assert 1.1 <= summary["cpu_s"] <= 2.1, summary["cpu_s"]
    # RSS counts the 200 MiB the forked child shares with its parent twice; PSS does not
    assert 390 <= summary["rss_mib_peak"] <= 470, summary["rss_mib_peak"]
    assert 195 <= summary["pss_mib_peak"] <= 250, summary["pss_mib_peak"]
    assert summary["processes_max"] == 2          # the child was seen while it ran
    assert len(trace.samples) >= 10


def test_the_sampler_costs_under_one_percent_of_a_core():
    """A server-like group: a master with a few forked workers."""
    server = subprocess.Popen([sys.executable, "-c", "import os, time\n"
                               "for _ in range(4):\n    os.fork() or time.sleep(60)\n"
                               "time.sleep(60)"], start_new_session=True)
    try:
        time.sleep(0.3)
        with Monitor({"server": server.pid}) as m:
            time.sleep(5.0)                 # a short run: start-up reads included
    finally:
        procs.stop_group(server.pid)
        server.wait()
    assert max(s.processes for s in m.traces["server"].samples) == 5
    assert m.overhead()["sampler_core_share"] < 0.01, m.overhead()
