"""Text output (Rich): the summary table and comparisons."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..analyze import Estimate, ExperimentView, TrialSummary, compare_trials
from . import common_knobs, series_name


def fmt(value: float | None, spec: str = ",.0f") -> str:
    return "—" if value is None else format(value, spec)


def ci_text(e: Estimate, spec: str = ",.0f") -> str:
    """A 95% CI as ± its half-width relative to the median; with fewer than 6 values their
    range, min–max, called so (it is not a 95% interval)."""
    if e.is_range:
        return f"range {min(e.values):{spec}}–{max(e.values):{spec}}"
    hw = e.half_width
    return "—" if hw is None else f"±{hw * 100:.0f}%"


def ci_header(estimates) -> str:
    """The column's name: "95% CI" only when no cell is a range."""
    ranges = [e.is_range for e in estimates if e.values]
    return "range" if ranges and all(ranges) else (
        "95% CI or range" if any(ranges) else "95% CI")


def summary_table(view: ExperimentView) -> Table:
    table = Table(title=f"{view.name} (experiment {view.id}, {view.status})")
    for col in ("trial", "c", "runs", "req/s", "95% CI", "p50 ms", "p99 ms", "MB/s",
                "srv CPU µs/req", "errors"):
        table.add_column(col, justify="left" if col == "trial" else "right",
                         no_wrap=col != "trial", min_width=20 if col == "trial" else None)
    common = common_knobs(view.summaries)
    for s in view.summaries:
        runs = f"{s.runs_ok}" + (f" +{s.runs_failed} failed" if s.runs_failed else "")
        if s.flagged:
            runs += " ⚑"
        table.add_row(series_name(s, common), str(s.concurrency), runs, fmt(s.rps.median),
                      ci_text(s.rps), _latency(s, s.p50_us), _latency(s, s.p99_us), fmt(s.mbps.median, ".1f"),
                      fmt(s.server_cpu_us, ".1f"), str(s.errors))
    return table


def _latency(s: TrialSummary, value_us: float | None) -> str:
    """A percentile in ms, marked ⚑ when the trial's clients were not all served alike."""
    return fmt(value_us and value_us / 1000, ".2f") + (" ⚑" if s.latency_distorted else "")


def print_summary(view: ExperimentView, console: Console) -> None:
    console.print(summary_table(view))
    common = common_knobs(view.summaries)
    if common:
        console.print("every trial: " + " ".join(f"{k}={v}" for k, v in sorted(common.items())))
    console.print("req/s: median of the repetitions with a bootstrap 95% CI (fewer than 6 "
                  "repetitions: [min, max], at the level in brackets); latency: "
                  "percentiles of all runs' merged histograms; srv CPU: every server process",
                  markup=False)
    from .headline import headlines
    for h in headlines(view):
        console.print(f"• {h.workload}, {h.concurrency} connections: "
                      f"{h.sentence(lambda s: series_name(s, common))}", markup=False)
    for s in view.summaries:
        for name, detail in s.flag_details:
            console.print(f"⚑ {s.label}: {name} — {detail}", style="yellow", markup=False)
        if s.latency_distorted:
            console.print(f"⚑ {s.label}: its p50/p99 describe the clients that were served, "
                          "not the trial's latency", style="yellow", markup=False)
        for reason in s.reasons:
            console.print(f"[red]failed[/red] {s.label}: {reason}")


def comparison_table(a: TrialSummary, b: TrialSummary, title: str) -> Table:
    table = Table(title=title)
    for col in ("metric", "A", "B", "B/A", "95% CI", "p", "verdict"):
        table.add_column(col, justify="left" if col in ("metric", "verdict") else "right")
    for metric, c in compare_trials(a, b):
        table.add_row(metric, fmt(c.median_a, ",.1f"), fmt(c.median_b, ",.1f"),
                      fmt(c.ratio, ".3f"),
                      f"{c.ci[0]:.3f}–{c.ci[1]:.3f}" if c.ci else "—",
                      fmt(c.p, ".3f"), c.verdict)
    return table


def experiments_table(a: ExperimentView, b: ExperimentView) -> Table:
    """Trials present in both experiments (same definition), req/s B against A."""
    from ..stats import compare
    table = Table(title=f"B = {b.name} (id {b.id})  vs  A = {a.name} (id {a.id}): req/s")
    for col in ("trial", "c", "A", "B", "B/A", "95% CI", "p", "verdict"):
        table.add_column(col, justify="left" if col in ("trial", "verdict") else "right")
    key = lambda s: (s.stack, s.workload, s.concurrency, tuple(sorted(s.knobs.items())))  # noqa
    b_by_key = {key(s): s for s in b.summaries}
    common = common_knobs(a.summaries)
    matched = 0
    for sa in a.summaries:
        sb = b_by_key.get(key(sa))
        if not sb or not sa.rps.values or not sb.rps.values:
            continue
        matched += 1
        c = compare(sa.rps.values, sb.rps.values)
        table.add_row(series_name(sa, common), str(sa.concurrency), fmt(c.median_a),
                      fmt(c.median_b), fmt(c.ratio, ".3f"),
                      f"{c.ci[0]:.3f}–{c.ci[1]:.3f}" if c.ci else "—", fmt(c.p, ".3f"),
                      c.verdict)
    if not matched:
        table.caption = "no trial of A has the same definition as one of B"
    return table


def recommendations_tables(view: ExperimentView, effects, bests) -> list[Table]:
    from ..recommend import CAUTIONS
    t = Table(title=f"{view.name}: effect of each knob against its default, all else equal "
                    "(req/s)")
    for col in ("knob = value", "default", "stack / workload / c", "gain", "95% CI", "p",
                "verdict", "why (registry, study)"):
        t.add_column(col, justify="right" if col in ("gain", "p") else "left")
    for e in effects:
        c = e.comparison
        why = e.meaning + (f" [{e.source}]" if e.source else "")
        if e.knob in CAUTIONS:
            why += f" — caution: {CAUTIONS[e.knob]}"
        t.add_row(f"{e.knob} = {e.value}", str(e.default),
                  f"{e.stack} / {e.workload} / {e.concurrency}",
                  f"{e.gain * 100:+.1f}%", f"{c.ci[0]:.2f}–{c.ci[1]:.2f}×" if c.ci else "—",
                  fmt(c.p, ".3f"), ("hurts" if e.hurts else c.verdict), why)
    if not effects:
        t.caption = ("no knob was varied against its default with everything else equal; "
                     "add a knob axis that includes the default value")
    b = Table(title="best combination per stack, workload and concurrency")
    for col in ("stack / workload / c", "best variant", "req/s", "vs defaults",
                "vs best single change"):
        b.add_column(col)
    common = common_knobs(view.summaries)
    for best in bests:
        b.add_row(f"{best.stack} / {best.workload} / {best.concurrency}",
                  series_name(best.trial, common), fmt(best.trial.rps.median),
                  _vs(best.over_default),
                  (_vs(best.over_best_single) + f" ({best.best_single.knob} = "
                   f"{best.best_single.value})") if best.best_single else "—")
    return [t, b]


def _vs(c) -> str:
    if c is None or c.ratio is None:
        return "—"
    if c.ratio == 1.0 and c.p == 1.0:
        return "same variant"
    return f"{c.ratio:.2f}× ({c.verdict})"
