"""Text summary table (Rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..analyze import ExperimentView
from . import common_knobs, series_name


def fmt(value: float | None, spec: str = ",.0f") -> str:
    return "—" if value is None else format(value, spec)


def summary_table(view: ExperimentView) -> Table:
    table = Table(title=f"{view.name} (experiment {view.id}, {view.status})")
    for col, justify in (("trial", "left"), ("c", "right"), ("runs", "right"),
                         ("req/s", "right"), ("spread", "right"), ("p50 ms", "right"),
                         ("p99 ms", "right"), ("srv CPU µs/req", "right"),
                         ("errors", "right")):
        table.add_column(col, justify=justify, no_wrap=col != "trial",
                         min_width=20 if col == "trial" else None)
    common = common_knobs(view.summaries)
    for s in view.summaries:
        runs = f"{s.runs_ok}" + (f" +{s.runs_failed} failed" if s.runs_failed else "")
        spread = (f"{(s.rps_max - s.rps_min) / s.rps_median * 100:.0f}%"
                  if s.rps_median else "—")
        table.add_row(series_name(s, common), str(s.concurrency), runs, fmt(s.rps_median),
                      spread, fmt(s.p50_us and s.p50_us / 1000, ".2f"),
                      fmt(s.p99_us and s.p99_us / 1000, ".2f"), fmt(s.server_cpu_us, ".1f"),
                      str(s.errors))
    return table


def print_summary(view: ExperimentView, console: Console) -> None:
    console.print(summary_table(view))
    common = common_knobs(view.summaries)
    if common:
        console.print("every trial: " + " ".join(f"{k}={v}" for k, v in sorted(common.items())))
    console.print("req/s: median of the repetitions; spread: (max − min) / median; "
                  "latency: medians of each run's p50/p99; srv CPU: all server processes")
    for s in view.summaries:
        for reason in s.reasons:
            console.print(f"[red]failed[/red] {s.label}: {reason}")
