"""Charts as inline SVG (matplotlib, Agg backend), so the report works offline."""

from __future__ import annotations

import io
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..analyze import ExperimentView  # noqa: E402
from ..store import Outcome  # noqa: E402
from . import common_knobs, series_name  # noqa: E402


def _series(view: ExperimentView):
    """series name → sorted [(concurrency, summary, [rps of each ok run])]."""
    rps_by_trial: dict[str, list[float]] = defaultdict(list)
    for r in view.runs:
        if r.outcome is Outcome.OK and r.load:
            rps_by_trial[r.trial_id].append(r.load.rps)
    series = defaultdict(list)
    common = common_knobs(view.summaries)
    for s in view.summaries:
        if s.rps.median is not None and s.latency_us:
            series[series_name(s, common)].append((s.concurrency, s, rps_by_trial[s.trial_id]))
    return {name: sorted(points, key=lambda p: p[0]) for name, points in series.items()}


def _legend(ax) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no successful runs", ha="center", va="center",
                transform=ax.transAxes, color="#888")


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.find("<svg"):]


def _concurrency_axis(ax, view: ExperimentView) -> None:
    levels = sorted({s.concurrency for s in view.summaries})
    ax.set_xscale("log", base=2)
    ax.set_xticks(levels)
    ax.set_xticklabels([str(c) for c in levels])
    ax.minorticks_off()
    ax.set_xlabel("concurrent connections")


def _finish(fig, ax, view: ExperimentView, ylabel: str, title: str, zero: bool = True) -> str:
    _concurrency_axis(ax, view)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if zero:
        ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3, which="both")
    _legend(ax)
    return _svg(fig)


def throughput_chart(view: ExperimentView) -> str:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, points in _series(view).items():
        xs = [p[0] for p in points]
        line, = ax.plot(xs, [p[1].rps.median for p in points], marker="o", label=name)
        lo = [(p[1].rps.ci or (p[1].rps.median,) * 2)[0] for p in points]
        hi = [(p[1].rps.ci or (p[1].rps.median,) * 2)[1] for p in points]
        ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.15)
        for x, _, reps in points:
            ax.scatter([x] * len(reps), reps, s=10, color=line.get_color(), alpha=0.6)
    return _finish(fig, ax, view, "requests/s",
                   "Throughput: median, CI band, dots = repetitions")


def latency_chart(view: ExperimentView) -> str:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, points in _series(view).items():
        xs = [p[0] for p in points]
        line, = ax.plot(xs, [p[1].p50_us / 1000 for p in points], marker="o",
                        label=f"{name} p50")
        ax.plot(xs, [p[1].latency_us["p90"] / 1000 for p in points], linestyle=":",
                color=line.get_color(), label=f"{name} p90")
        ax.plot(xs, [p[1].p99_us / 1000 for p in points], marker="^", linestyle="--",
                color=line.get_color(), label=f"{name} p99")
    ax.set_yscale("log")
    return _finish(fig, ax, view, "latency, ms",
                   "Latency p50 (solid), p90 (dotted), p99 (dashed), merged histograms",
                   zero=False)


def _component_chart(view: ExperimentView, metric, ylabel: str, title: str) -> str:
    fig, ax = plt.subplots(figsize=(8, 4))
    for name, points in _series(view).items():
        comps = sorted({c for _, s, _ in points for c in metric(s)})
        for comp in comps:
            xs = [x for x, s, _ in points if comp in metric(s)]
            ys = [metric(s)[comp].median for _, s, _ in points if comp in metric(s)]
            ax.plot(xs, ys, marker="o", label=f"{name}: {comp}")
    return _finish(fig, ax, view, ylabel, title)


def cpu_chart(view: ExperimentView) -> str:
    return _component_chart(view, lambda s: s.cpu_us_per_request, "CPU µs per request",
                            "Server CPU per request, by component")


def memory_chart(view: ExperimentView) -> str:
    return _component_chart(view, lambda s: s.rss_mib_peak, "peak RSS, MiB",
                            "Memory during the load, by component")


def transfer_chart(view: ExperimentView) -> str:
    fig, ax = plt.subplots(figsize=(8, 4))
    for name, points in _series(view).items():
        ax.plot([p[0] for p in points], [p[1].mbps.median for p in points], marker="o",
                label=name)
    return _finish(fig, ax, view, "MB/s (HTTP bytes read by the client)", "Transfer rate")


@dataclass(frozen=True)
class Chart:
    """One figure of a workload's section: one chart is one entry of CHARTS."""

    name: str                                # the figure's class: chart-<name>
    draw: Callable[[ExperimentView], str]    # the view of one workload → inline SVG
    caption: str


CHARTS = (
    Chart("throughput", throughput_chart,
          "Requests per second against concurrency: line = median of the repetitions, "
          "band = bootstrap 95% CI of the median (with fewer than 6 repetitions it is "
          "their min–max, a narrower level: see the table), dots = each repetition."),
    Chart("latency", latency_chart,
          "p50 / p90 / p99 against concurrency, from the merged HdrHistograms of all "
          "repetitions (closed loop; open-loop runs are corrected for coordinated "
          "omission)."),
    Chart("transfer", transfer_chart,
          "Transfer rate: HTTP bytes read by the client per second."),
    Chart("cpu", cpu_chart,
          "Server CPU per request, per component (median over repetitions)."),
    Chart("memory", memory_chart,
          "Peak resident memory per component during the load."),
)


def draw(view: ExperimentView) -> list[tuple[Chart, str]]:
    """Every chart of CHARTS for one workload's view, in order, with its SVG."""
    return [(chart, chart.draw(view)) for chart in CHARTS]
