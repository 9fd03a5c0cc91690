"""Text output (Rich) of stored results: the summary table, comparisons and
recommendations."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..analyze import ExperimentView, TrialSummary, compare_trials
from ..recommend import CAUTIONS
from . import common_knobs, series_name
from .fmt import DASH, ci_header, ci_text, change, ms, number, p_value, ratio_ci, vs
from .headline import headlines


def summary_table(view: ExperimentView) -> Table:
    table = Table(title=f"{view.name} (experiment {view.id}, {view.status})")
    for col in ("id", "trial", "c", "runs", "req/s", ci_header(s.rps for s in view.summaries),
                "p50 ms", "p99 ms", "MB/s", "srv CPU µs/req", "errors"):
        table.add_column(col, justify="left" if col == "trial" else "right",
                         no_wrap=col != "trial", min_width=20 if col == "trial" else None)
    common = common_knobs(view.summaries)
    for s in view.summaries:
        runs = (f"{s.runs_ok}" + (f" +{s.runs_failed} failed" if s.runs_failed else "")
                + (f" +{s.runs_invalid} invalid" if s.runs_invalid else ""))
        if s.flagged:
            runs += " ⚑"
        table.add_row(s.trial_id, series_name(s, common), str(s.concurrency), runs,
                      number(s.rps.median), ci_text(s.rps), _latency(s, s.p50_us),
                      _latency(s, s.p99_us), number(s.mbps.median, 1),
                      number(s.server_cpu_us, 1), str(s.errors))
    return table


def _latency(s: TrialSummary, value_us: float | None) -> str:
    """A percentile in ms, marked ⚑ when the trial's clients were not all served alike."""
    return ms(value_us) + (" ⚑" if s.latency_distorted else "")


def print_summary(view: ExperimentView, console: Console) -> None:
    console.print(summary_table(view))
    common = common_knobs(view.summaries)
    if common:
        console.print("every trial: " + " ".join(f"{k}={v}" for k, v in sorted(common.items())))
    console.print("req/s: median of the repetitions with a bootstrap 95% CI (fewer than 6 "
                  "repetitions: their range, min…max relative to the median, which is no "
                  "95% interval); latency: percentiles of all runs' merged histograms; "
                  "srv CPU: every server process", markup=False)
    for h in headlines(view):
        console.print(f"• {h.workload}, {h.concurrency} connections: "
                      f"{h.sentence(lambda s: series_name(s, common))}", markup=False)
    for s in view.summaries:
        for name, detail in s.flag_details:
            console.print(f"⚑ {s.label}: {name} — {detail}", style="yellow", markup=False)
        if s.latency_distorted:
            console.print(f"⚑ {s.label}: its p50/p99 describe the clients that were served, "
                          "not the trial's latency", style="yellow", markup=False)
        for line in [*layer_lines(s), *condition_lines(s)]:
            console.print(line, markup=False)
        if s.tls:
            console.print(f"TLS {s.label}: {', '.join(s.tls['protocols'])} "
                          f"{', '.join(s.tls['ciphers'])}, {s.tls['handshakes']:,} handshakes, "
                          f"{s.tls['resumed']:,} resumed", markup=False)
        for reason in s.reasons:     # "failed: …" or "invalid: …"
            outcome, _, why = reason.partition(": ")
            console.print(f"[red]{outcome}[/red] {s.label}: {why}")


def layer_lines(s: TrialSummary) -> list[str]:
    """A cache's hit ratio and a balancer's spread, one line per front layer."""
    out = []
    for layer, fig in s.layers.items():
        parts = []
        if fig["hit_ratio"] is not None:
            parts.append(f"hit ratio {fig['hit_ratio'].median:.1%} "
                         f"(runs {min(fig['hit_ratio'].values):.1%}…"
                         f"{max(fig['hit_ratio'].values):.1%})")
        if fig["spread"]:
            parts.append("requests per replica " + ", ".join(
                f"{replica} {share:.0%}" for replica, share in fig["spread"].items()))
        out.append(f"{layer} in {s.label}: {'; '.join(parts)}")
    return out


def condition_lines(s: TrialSummary) -> list[str]:
    """The network, filesystem and machine a trial ran on, where not the default."""
    c, parts = s.conditions, []
    if "net" in c:
        n = c["net"]
        parts.append(f"veth link {n.get('link')}, measured {n.get('rate_bytes_s', 0) / 1e6:,.1f}"
                     f" MB/s, RTT {n.get('rtt_ms')} ms"
                     + (f", sysctls {n['sysctls']}" if n.get("sysctls") else ""))
    if "fs" in c:
        f = c["fs"]
        parts.append(f"docroot on {f['type']} ({f['options'] or 'default options'}"
                     f"{', cold cache' if f['cold_cache'] else ''})")
    if "machine" in c:
        m = c["machine"]
        parts.append("machine " + ", ".join(f"{k} {v}" for k, v in m.items() if v))
    return [f"lab under {s.label}: {'; '.join(parts)}"] if parts else []


COMPARISON_NOTE = ("A, B: medians of the runs (latency: each run's p50/p99); B/A: ratio of "
                   "geometric means, with its 95% CI and p from Welch's t-test on log values "
                   "(p < 0.05 exactly when the CI excludes 1); ≥/≤: a side was limited, the "
                   "ratio is a bound")
RANK_NOTE = "MW p: Mann-Whitney U (5 or more runs a side), for information, not the verdict"


def _ratio(m) -> str:
    c, b = m.comparison, m.bound
    rel = f"{b.relation} " if b and b.relation != "?" else ""
    return DASH if c.ratio is None else f"{rel}{c.ratio:.3f}"


def _comparison_columns(table: Table, first: tuple[str, ...], rank: bool) -> None:
    for col in (*first, "A", "B", "B/A", "95% CI", "p", *(("MW p",) if rank else ()),
                "verdict"):
        table.add_column(col, justify="right" if col not in ("id", "trial", "metric",
                                                            "verdict") else "left",
                         no_wrap=col in ("id", "95% CI"))


def _comparison_cells(m, rank: bool) -> list[str]:
    c = m.comparison
    decimals = 2 if "ms" in m.metric else 1
    return [number(c.median_a, decimals), number(c.median_b, decimals), _ratio(m),
            ratio_ci(c.ci, 3, ""), p_value(c.p), *((p_value(c.p_rank),) if rank else ()),
            m.verdict]


def comparison_table(a: TrialSummary, b: TrialSummary, title: str) -> Table:
    rows = compare_trials(a, b)
    rank = any(m.comparison.p_rank is not None for m in rows)
    table = Table(title=title, caption=COMPARISON_NOTE + ("; " + RANK_NOTE if rank else ""))
    _comparison_columns(table, ("metric",), rank)
    for m in rows:
        table.add_row(_metric(m.metric, a, b), *_comparison_cells(m, rank))
    if a.latency_distorted or b.latency_distorted:
        table.caption += ("; ⚑ latency: a starved or Little's-law-flagged side's percentiles "
                          "describe only the clients it served")
    return table


def trials_table(view: ExperimentView, a: TrialSummary, b: TrialSummary) -> Table:
    """Two trials of one experiment, B against A."""
    return comparison_table(a, b, f"trials of experiment {view.name} (id {view.id}):\n"
                                  f"B = {b.trial_id} {b.label}\n"
                                  f"A = {a.trial_id} {a.label}")


def _metric(metric: str, a: TrialSummary, b: TrialSummary) -> str:
    """A latency metric is marked ⚑ when either side's percentiles are distorted."""
    distorted = metric.startswith("p") and (a.latency_distorted or b.latency_distorted)
    return metric + (" ⚑" if distorted else "")


def experiment_list_table(rows: list[dict], db) -> Table:
    """`stacklab list`: one line per stored experiment."""
    table = Table(title=f"experiments in {db}")
    for col in ("id", "name", "status", "runs", "created", "spec"):
        table.add_column(col, justify="right" if col in ("id", "runs") else "left")
    for r in rows:
        table.add_row(str(r["id"]), r["name"], r["status"], str(r["runs"]),
                      r["created_at"][:19].replace("T", " "), r["spec"] or "")
    return table


def experiments_table(a: ExperimentView, b: ExperimentView) -> Table:
    """Trials present in both experiments (same definition): req/s, p50 and p99, B
    against A. The same definition gives the same trial id in both."""
    key = lambda s: (s.stack, s.workload, s.concurrency, tuple(sorted(s.knobs.items())))  # noqa
    b_by_key = {key(s): s for s in b.summaries}
    common = common_knobs(a.summaries)
    pairs = [(sa, b_by_key[key(sa)]) for sa in a.summaries
             if key(sa) in b_by_key and sa.rps.values and b_by_key[key(sa)].rps.values]
    rows = [(sa, m) for sa, sb in pairs for m in compare_trials(sa, sb)
            if m.metric in ("req/s", "p50 ms", "p99 ms")]
    rank = any(m.comparison.p_rank is not None for _, m in rows)
    table = Table(title=f"B = {b.name} (experiment {b.id})  vs  A = {a.name} "
                        f"(experiment {a.id})",
                  caption=COMPARISON_NOTE + ("; " + RANK_NOTE if rank else ""))
    _comparison_columns(table, ("id", "trial", "c", "metric"), rank)
    for sa, m in rows:
        table.add_row(sa.trial_id, series_name(sa, common), str(sa.concurrency),
                      _metric(m.metric, sa, b_by_key[key(sa)]),
                      *_comparison_cells(m, rank))
    if not pairs:
        table.caption = "no trial of A has the same definition as one of B"
    return table


def recommendations_tables(view: ExperimentView, effects, bests) -> list[Table]:
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
                  change(e.gain), ratio_ci(c.ci), p_value(c.p), e.verdict, why)
    t.caption = ("gain: ratio of geometric means - 1; its 95% CI and p from Welch's t-test "
                 "on log req/s")
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
                  best.label(lambda s: series_name(s, common)), number(best.trial.rps.median),
                  vs(best.over_default),
                  (vs(best.over_best_single) + f" ({best.best_single.knob} = "
                   f"{best.best_single.value})") if best.best_single else DASH)
    return [t, b]

