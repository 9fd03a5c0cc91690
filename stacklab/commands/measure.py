"""breakdown and dbbench: S1's two methods, each validated before anything starts,
measured in the stack lifecycle, stored as it finishes, then printed."""

from __future__ import annotations

from pathlib import Path

from ..breakdown import plan_breakdown, run_breakdown
from ..dbbench import plan_dbbench, run_dbbench
from ..env import Environment
from ..errors import ExitStatus
from ..report.measures import breakdown_lines, breakdown_tables, dbbench_table
from ..store import Store
from .run import load


def breakdown(env: Environment, stack: str, workload: str, requests: int, knobs: list[str],
              db: Path | None, network: str = "loopback",
              link: str | None = None) -> ExitStatus:
    """S1's overview method: where one request's time goes (with veth, the network's
    share too)."""
    plan = plan_breakdown(stack, workload, knobs, requests, network=network, link=link)
    store = Store.open(env.database(db))
    try:
        record = run_breakdown(plan, env)
        breakdown_id = store.add_breakdown(record)
    finally:
        store.close()
    title = f"breakdown {breakdown_id}: {stack} {workload}" + "".join(
        f" {k}={v}" for k, v in sorted(plan.knobs.items())) + (
        f" over veth ({plan.link})" if plan.network == "veth" else "")
    for table in breakdown_tables(record.result, title):
        env.stdout.print(table)
    for line in breakdown_lines(record.result):
        env.stdout.print(line, highlight=False, soft_wrap=True)
    return ExitStatus.OK


def dbbench(env: Environment, spec_path: Path, loops: int, db: Path | None) -> ExitStatus:
    """S1's database method: the model application's SQL under each mariadb setting."""
    spec, plan = load(spec_path)
    bench = plan_dbbench(spec, plan, loops)
    out = env.stdout
    out.print(f"dbbench {bench.experiment}: {len(bench.variants)} variant(s) × {loops} loops")
    store = Store.open(env.database(db))
    try:
        records = run_dbbench(env, bench, store, lambda r: out.print(
            f"stored dbbench {r.id}: {r.result['variant']}", highlight=False))
    finally:
        store.close()
    out.print(dbbench_table(records, f"dbbench: {bench.experiment}"))
    return ExitStatus.OK
