"""Text summary table (Rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..analyze import ExperimentView


def fmt(value: float | None, spec: str = ",.0f") -> str:
    return "—" if value is None else format(value, spec)


def summary_table(view: ExperimentView) -> Table:
    table = Table(title=f"{view.name} (experiment {view.id}, {view.status})")
    for col, justify in (("stack", "left"), ("workload", "left"), ("knobs", "left"),
                         ("c", "right"), ("runs", "right"), ("req/s median", "right"),
                         ("req/s min–max", "right"), ("p50 ms", "right"), ("p99 ms", "right"),
                         ("server CPU µs/req", "right"), ("errors", "right")):
        table.add_column(col, justify=justify)
    for s in view.summaries:
        knobs = " ".join(f"{k}={v}" for k, v in sorted(s.knobs.items())) or "defaults"
        runs = f"{s.runs_ok}" + (f" (+{s.runs_failed} failed)" if s.runs_failed else "")
        spread = (f"{fmt(s.rps_min)}–{fmt(s.rps_max)}" if s.rps_min is not None else "—")
        table.add_row(s.stack, s.workload, knobs, str(s.concurrency), runs, fmt(s.rps_median),
                      spread, fmt(s.p50_us and s.p50_us / 1000, ".2f"),
                      fmt(s.p99_us and s.p99_us / 1000, ".2f"), fmt(s.server_cpu_us, ".1f"),
                      str(s.errors))
    return table


def print_summary(view: ExperimentView, console: Console) -> None:
    console.print(summary_table(view))
    for s in view.summaries:
        for reason in s.reasons:
            console.print(f"[red]failed[/red] {s.label}: {reason}")
