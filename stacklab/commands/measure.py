"""breakdown and dbbench: S1's two methods, each validated before anything starts,
measured in the stack lifecycle repetition by repetition (progress on run's bar), each
stored as it finishes, then printed; and their stored series listed or shown again."""

from __future__ import annotations

from pathlib import Path

from ..methods import breakdown as bd, dbbench as dbb
from ..env import Environment
from ..errors import ExitStatus, UsageError
from ..report.measures import (StepProgress, breakdown_list_table, breakdown_series_lines,
                               breakdown_series_tables, dbbench_list_table,
                               dbbench_series_table)
from ..store import Store, stored
from .run import load


def breakdown(env: Environment, stack: str | None, workload: str | None, requests: int,
              knobs: list[str], db: Path | None, network: str = "loopback",
              link: str | None = None, repetitions: int = 3, list_: bool = False,
              show: str | None = None, as_json: bool = False) -> ExitStatus:
    """S1's overview method: where one request's time goes (with veth, the network's
    share too); or, with --list / --show ID, the stored series."""
    if _stored_form("STACK WORKLOAD", (stack, workload), list_, show, as_json):
        return breakdown_stored(env, db, show, as_json)
    if stack is None or workload is None:
        raise UsageError("STACK and WORKLOAD: both needed to measure (or --list, --show ID)")
    plan = bd.plan_breakdown(stack, workload, knobs, requests, network=network, link=link,
                             repetitions=repetitions)
    store = Store.open(env.database(db))
    try:
        with StepProgress(env.stdout, repetitions * len(plan.passes())) as progress:
            records = bd.run_breakdowns(plan, env, store, progress.step,
                                        lambda r: progress.note(
                                            f"stored breakdown {r.id}: repetition "
                                            f"{r.result['repetition']} of {repetitions}"))
    finally:
        store.close()
    _print_breakdown(env, bd.series_summary(records))
    return ExitStatus.OK


def breakdown_stored(env: Environment, db: Path | None, show: str | None,
                     as_json: bool) -> ExitStatus:
    """--list: every stored series; --show ID: one again (ID: the series' first record's
    id, or any of its records')."""
    with stored(env.database(db)) as store:
        groups = bd.group_series(store.breakdowns())
    if show is None:
        entries = [bd.series_entry(rs) for rs in groups.values()]
        if as_json:
            env.stdout.print_json(data={"schema_version": bd.SUMMARY_VERSION,
                                        "kind": "breakdown-list", "breakdowns": entries})
        else:
            env.stdout.print(breakdown_list_table(entries, env.database(db)))
        return ExitStatus.OK
    wanted = _id("--show", show)
    found = next((rs for rs in groups.values() if wanted in {r.id for r in rs}), None)
    if found is None:
        raise UsageError(f"--show {show}: no breakdown {show} in {env.database(db)} "
                         "(`stacklab breakdown --list` lists them)")
    summary = bd.series_summary(found)
    if as_json:
        env.stdout.print_json(data=summary)
    else:
        _print_breakdown(env, summary)
    return ExitStatus.OK


def _print_breakdown(env: Environment, summary: dict) -> None:
    for table in breakdown_series_tables(summary):
        env.stdout.print(table)
    for line in breakdown_series_lines(summary):
        env.stdout.print(line, highlight=False, soft_wrap=True)


def dbbench(env: Environment, spec_path: Path | None, loops: int, db: Path | None,
            repetitions: int = 3, list_: bool = False, show: str | None = None,
            as_json: bool = False) -> ExitStatus:
    """S1's database method: the model application's SQL under each mariadb setting,
    each variant `repetitions` times; or, with --list / --show, the stored series."""
    if _stored_form("SPEC", (spec_path,), list_, show, as_json):
        return dbbench_stored(env, db, show, as_json)
    if spec_path is None:
        raise UsageError("SPEC: needed to measure (or --list, --show EXPERIMENT)")
    spec, plan = load(spec_path)
    bench = dbb.plan_dbbench(spec, plan, loops, repetitions)
    out = env.stdout
    out.print(f"dbbench {bench.experiment}: {len(bench.variants)} variant(s) × "
              f"{repetitions} repetition(s) × {loops} loops")
    store = Store.open(env.database(db))
    try:
        with StepProgress(out, len(bench.steps())) as progress:
            records = dbb.run_dbbench(env, bench, store, lambda r: progress.note(
                f"stored dbbench {r.id}: {r.result['variant']} #{r.result['repetition']}"),
                progress.step)
    finally:
        store.close()
    out.print(dbbench_series_table(dbb.series_summary(records)))
    return ExitStatus.OK


def dbbench_stored(env: Environment, db: Path | None, show: str | None,
                   as_json: bool) -> ExitStatus:
    """--list: every stored series; --show EXPERIMENT (its latest series) or ID (the
    series holding that record)."""
    with stored(env.database(db)) as store:
        groups = dbb.group_series(store.dbbenches())
    if show is None:
        entries = [dbb.series_entry(rs) for rs in groups.values()]
        if as_json:
            env.stdout.print_json(data={"schema_version": dbb.SUMMARY_VERSION,
                                        "kind": "dbbench-list", "dbbenches": entries})
        else:
            env.stdout.print(dbbench_list_table(entries, env.database(db)))
        return ExitStatus.OK
    if show.isdigit():
        found = [rs for rs in groups.values() if int(show) in {r.id for r in rs}]
    else:
        found = [rs for rs in groups.values() if rs[0].experiment == show]
    if not found:
        raise UsageError(f"--show {show}: no dbbench of experiment or id {show!r} in "
                         f"{env.database(db)} (`stacklab dbbench --list` lists them)")
    summary = dbb.series_summary(found[-1])
    if as_json:
        env.stdout.print_json(data=summary)
    else:
        env.stdout.print(dbbench_series_table(summary))
    return ExitStatus.OK


def _stored_form(args: str, given: tuple, list_: bool, show: str | None,
                 as_json: bool) -> bool:
    """Whether the command line asks for stored results (--list, --show) rather than a
    measurement; mixing both, or --json without either, is refused naming the flags."""
    if list_ and show is not None:
        raise UsageError(f"--list and --show {show}: one or the other")
    if (list_ or show is not None) and any(g is not None for g in given):
        raise UsageError(f"{args}: measures; --list and --show read stored results "
                         "without measuring (give one or the other)")
    if as_json and not (list_ or show is not None):
        raise UsageError("--json: with --list or --show (a measurement prints tables)")
    return list_ or show is not None


def _id(flag: str, text: str) -> int:
    if not text.isdigit():
        raise UsageError(f"{flag} {text}: an id (a whole number, see --list)")
    return int(text)
