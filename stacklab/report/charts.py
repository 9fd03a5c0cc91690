"""Charts as inline SVG (matplotlib, Agg backend), so the report works offline."""

from __future__ import annotations

import io
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..analyze import ExperimentView  # noqa: E402
from . import common_knobs, series_name  # noqa: E402


def _series(view: ExperimentView):
    """series name → sorted [(concurrency, summary, [rps of each ok run])]."""
    rps_by_trial: dict[str, list[float]] = defaultdict(list)
    for r in view.runs:
        if r.outcome == "ok" and r.load:
            rps_by_trial[r.trial_id].append(r.load["rps"])
    series = defaultdict(list)
    common = common_knobs(view.summaries)
    for s in view.summaries:
        if s.rps_median is not None:
            series[series_name(s, common)].append((s.concurrency, s, rps_by_trial[s.trial_id]))
    return {name: sorted(points, key=lambda p: p[0]) for name, points in series.items()}


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.find("<svg"):]


def throughput_chart(view: ExperimentView) -> str:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, points in _series(view).items():
        xs = [p[0] for p in points]
        line, = ax.plot(xs, [p[1].rps_median for p in points], marker="o", label=name)
        ax.fill_between(xs, [p[1].rps_min for p in points], [p[1].rps_max for p in points],
                        color=line.get_color(), alpha=0.15)
        for x, _, reps in points:
            ax.scatter([x] * len(reps), reps, s=10, color=line.get_color(), alpha=0.6)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent connections")
    ax.set_ylabel("requests/s (median; band = min–max of repetitions)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _svg(fig)


def latency_chart(view: ExperimentView) -> str:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, points in _series(view).items():
        xs = [p[0] for p in points]
        line, = ax.plot(xs, [p[1].p50_us / 1000 for p in points], marker="o",
                        label=f"{name} p50")
        ax.plot(xs, [p[1].p99_us / 1000 for p in points], marker="^", linestyle="--",
                color=line.get_color(), label=f"{name} p99")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("concurrent connections")
    ax.set_ylabel("latency, ms (median of repetitions)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return _svg(fig)
