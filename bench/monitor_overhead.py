"""What the monitor's sampler costs, as a share of one core: run by hand (not by
`make test`, where a busy CI machine would make a speed assertion flaky).

    .venv/bin/python bench/monitor_overhead.py [--seconds 10] [--workers 4]

A server-like process group (a master and forked workers, idle) is sampled as during a
run; the sampler's own thread CPU over the wall time is printed against the budget of
1% of a core. Exit code 1 when over budget.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from stacklab.host import procs
from stacklab.measure.monitor import Monitor

BUDGET = 0.01   # of one core


def server_group(workers: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import os, sys, time\n"
                             f"for _ in range({workers}):\n    os.fork() or time.sleep(3600)\n"
                             "time.sleep(3600)"], start_new_session=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    server = server_group(args.workers)
    try:
        deadline = time.monotonic() + 10
        while len(procs.group_members(server.pid)) < args.workers + 1:
            if time.monotonic() > deadline:
                print("the process group did not start its workers", file=sys.stderr)
                return 2
            time.sleep(0.01)
        with Monitor({"server": server.pid}) as monitor:
            time.sleep(args.seconds)      # the measured span itself: nothing to wait for
    finally:
        procs.stop_group(server.pid)
        server.wait()
    o = monitor.overhead()
    seen = max(s.processes for s in monitor.traces["server"].samples)
    share = o["sampler_core_share"]
    print(f"sampler: {o['sampler_cpu_s']:.4f} CPU s over {monitor.elapsed_s:.1f} s = "
          f"{share:.3%} of a core (budget {BUDGET:.0%}); {seen} processes, "
          f"{len(monitor.traces['server'].samples)} samples")
    return 0 if share < BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
