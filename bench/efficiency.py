"""Efficiency at a fixed rate against req/s at saturation, side by side in one run: run
by hand (not by `make test`: a benchmark's figures, not a test's assertion).

    .venv/bin/python bench/efficiency.py [--rounds 3] [--rate 10000] [--db PATH]

Each round measures nginx on the static page twice, 3 repetitions each (every one a
fresh stack): open loop at a fixed rate well under its capacity, and closed loop at 32
connections (saturation). Printed per round and as the median over rounds: the relative
half-width of the repetitions' spread (their range / 2 / median, which is all 3 values
allow) of nginx's CPU µs per request at the fixed rate, of req/s at saturation, and of
CPU µs per request at saturation. The issue's target: ≤ 2% for CPU per request at the
fixed rate. Exit code 1 when the median over rounds is above it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from statistics import median

from stacklab.analysis.analyze import load_view
from stacklab.commands.run import measured, planned
from stacklab.env import Environment
from stacklab.experiment.spec import parse_spec
from stacklab.stacks import REGISTRY, STACKS
from stacklab.store import Store
from stacklab.workloads import WORKLOADS

TARGET = 0.02


def spec(name: str, load: dict, concurrency: int):
    doc = {"experiment": {"name": name, "repetitions": 3, "duration": 5.0, "warmup": 1.0,
                          "remeasure": 0},
           "load": {"keepalive": True, **load},
           "matrix": {"stack": ["nginx"], "workload": ["static-page"],
                      "concurrency": [concurrency]}}
    return parse_spec(doc, f"bench/efficiency.py:{name}", REGISTRY, STACKS, set(WORKLOADS))


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / 2 / median(values)


def measure(env: Environment, db: Path, name: str, load: dict) -> tuple[list, list]:
    """(nginx CPU µs per request, req/s) of each repetition."""
    s, plan = planned(spec(name, load, 32))
    measured(env, s, plan, db, False, False, False, False, "bench/efficiency.py")
    store = Store.open(db)
    try:
        [summary] = load_view(store, name).summaries
    finally:
        store.close()
    return list(summary.cpu_us_per_request["nginx"].values), list(summary.rps.values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--db", type=Path, default=None)
    args = parser.parse_args()
    db = args.db or Path(tempfile.mkdtemp(prefix="stacklab-efficiency-")) / "bench.db"
    env = Environment.default()
    fixed, rps, cpu_sat = [], [], []
    for i in range(1, args.rounds + 1):
        cpu, _ = measure(env, db, f"efficiency-fixed-{i}", {"rate": args.rate})
        cpu_s, saturated = measure(env, db, f"efficiency-saturated-{i}", {})
        fixed.append(spread(cpu))
        rps.append(spread(saturated))
        cpu_sat.append(spread(cpu_s))
        print(f"round {i}: nginx CPU µs/req at {args.rate:,} req/s {median(cpu):.2f} "
              f"(±{fixed[-1]:.1%}); at saturation {median(saturated):,.0f} req/s "
              f"(±{rps[-1]:.1%}), CPU {median(cpu_s):.2f} µs/req (±{cpu_sat[-1]:.1%})")
    print(f"median over {args.rounds} rounds, half-width of 3 repetitions: CPU µs/req at a "
          f"fixed rate ±{median(fixed):.1%} (target ≤ {TARGET:.0%}); req/s at saturation "
          f"±{median(rps):.1%}; CPU µs/req at saturation ±{median(cpu_sat):.1%}; "
          f"ratio req/s spread / fixed-rate CPU spread {median(rps) / median(fixed):.1f}×"
          if median(fixed) else "fixed-rate spread is 0")
    return 0 if median(fixed) <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
