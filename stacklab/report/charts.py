"""Charts as inline SVG (matplotlib, Agg backend), so the report works offline.

A workload whose trials vary in concurrency is drawn against it (one line per variant);
one whose trials share one concurrency is drawn by variant (one mark per variant with
whiskers), since every variant would otherwise sit on the same x. Each chart returns its
SVG with the figures it plotted (`Drawn`), which is what tests look at."""

from __future__ import annotations

import io
import textwrap
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import ticker  # noqa: E402

from ..analyze import Estimate, ExperimentView, TrialSummary  # noqa: E402
from ..stats import decode_histogram, value_at_percentile  # noqa: E402
from ..store import Outcome  # noqa: E402
from . import common_knobs, series_name  # noqa: E402


@dataclass(frozen=True)
class Drawn:
    """A chart as the page shows it (`svg`) and the figures it plotted (`data`)."""

    svg: str
    data: dict = field(default_factory=dict)


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


def by_variant(view: ExperimentView) -> bool:
    """Every trial of the view at one concurrency: the charts are drawn by variant."""
    return len({s.concurrency for s in view.summaries}) == 1


def _variants(view: ExperimentView) -> list[tuple[str, TrialSummary]]:
    """(variant name, summary) of the trials with successful runs, in the spec's order."""
    common = common_knobs(view.summaries)
    return [(series_name(s, common), s) for s in view.summaries
            if s.rps.median is not None and s.runs_ok]


def _legend(ax) -> None:
    """Beside the plot, never over its points."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  borderaxespad=0.0, frameon=False)
    else:
        ax.text(0.5, 0.5, "no successful runs", ha="center", va="center",
                transform=ax.transAxes, color="#888")


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.find("<svg"):]


def _ticklabels(fig, axis) -> list[str]:
    """The tick labels the figure really shows on `axis` (after layout)."""
    fig.canvas.draw()
    return [t.get_text() for t in axis.get_ticklabels() if t.get_text()]


def _concurrency_axis(ax, view: ExperimentView) -> None:
    levels = sorted({s.concurrency for s in view.summaries})
    ax.set_xscale("log", base=2)
    ax.set_xticks(levels)
    ax.set_xticklabels([str(c) for c in levels])
    ax.minorticks_off()
    ax.set_xlabel("concurrent connections")


def _variant_axis(ax, names: list[str], view: ExperimentView) -> None:
    """Variant names on x, wrapped and turned so long knob lists stay readable."""
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([textwrap.fill(n, 28) for n in names], rotation=30, ha="right",
                       fontsize=8)
    ax.set_xlim(-0.6, len(names) - 0.4)
    c = view.summaries[0].concurrency if view.summaries else "?"
    ax.set_xlabel(f"variant (every trial at {c} concurrent connections)")


def ms_axis(ax, low_ms: float, high_ms: float) -> None:
    """A log axis of milliseconds with labels at every scale: 1-2-5 ticks over a decade
    or more, every 1…9 step below one (where matplotlib's default shows none)."""
    ax.set_yscale("log")
    narrow = high_ms / max(low_ms, 1e-9) < 10
    subs = tuple(range(1, 10)) if narrow else (1.0, 2.0, 5.0)
    ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=subs, numticks=30))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_locator(ticker.NullLocator())
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_ylim(low_ms / 1.15, high_ms * 1.15)


def interval_kind(e: Estimate) -> str:
    """What a whisker is: the bootstrap 95% CI, or with fewer than 6 runs their range."""
    if not e.ci:
        return "none"
    return "min–max range" if e.is_range else "bootstrap 95% CI"


def _whiskers_title(kinds) -> str:
    kinds = sorted(set(kinds) - {"none"})
    return "whiskers: " + (" or ".join(kinds) if kinds else "none (one run)")


def _marks(ax, estimates: list[Estimate | None], offset: float, scale: float = 1.0,
           **style) -> list[dict]:
    """One mark per variant at x = index + offset, whiskers from its interval; returns
    what was plotted."""
    plotted = []
    for i, e in enumerate(estimates):
        if e is None or e.median is None:
            continue
        lo, hi = e.ci or (e.median, e.median)
        y = e.median * scale
        ax.errorbar([i + offset], [y], yerr=[[y - lo * scale], [hi * scale - y]],
                    fmt="o", capsize=4, **style)
        style.pop("label", None)                   # one legend entry per series
        plotted.append({"x": i + offset, "y": y, "low": lo * scale, "high": hi * scale,
                        "interval": interval_kind(e), "runs": len(e.values)})
    return plotted


def _finish(fig, ax, view: ExperimentView, ylabel: str, title: str, zero: bool = True) -> str:
    _concurrency_axis(ax, view)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if zero:
        ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3, which="both")
    _legend(ax)
    return _svg(fig)


def _finish_variants(fig, ax, view, names, ylabel, title, plotted, zero=True) -> Drawn:
    _variant_axis(ax, names, view)
    ax.set_ylabel(ylabel)
    ax.set_title(f"{title} ({_whiskers_title(m['interval'] for m in plotted)})", fontsize=10)
    if zero:
        ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3, axis="y", which="both")
    _legend(ax)
    data = {"mode": "variant", "variants": names, "marks": plotted,
            "xticklabels": _ticklabels(fig, ax.xaxis),
            "yticklabels": _ticklabels(fig, ax.yaxis)}
    return Drawn(_svg(fig), data)


def throughput_chart(view: ExperimentView) -> Drawn:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    series = _series(view)
    if by_variant(view):
        variants = _variants(view)
        plotted = _marks(ax, [s.rps for _, s in variants], 0.0, color="C0", label="median")
        for i, (_, s) in enumerate(variants):
            ax.scatter([i + 0.12] * len(s.rps.values), s.rps.values, s=10, color="#888",
                       label="each repetition" if i == 0 else None, zorder=3)
        return _finish_variants(fig, ax, view, [n for n, _ in variants], "requests/s",
                                "Throughput by variant: median, dots = repetitions",
                                plotted)
    for name, points in series.items():
        xs = [p[0] for p in points]
        line, = ax.plot(xs, [p[1].rps.median for p in points], marker="o", label=name)
        lo = [(p[1].rps.ci or (p[1].rps.median,) * 2)[0] for p in points]
        hi = [(p[1].rps.ci or (p[1].rps.median,) * 2)[1] for p in points]
        ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.15)
        for x, _, reps in points:
            ax.scatter([x] * len(reps), reps, s=10, color=line.get_color(), alpha=0.6)
    return Drawn(_finish(fig, ax, view, "requests/s",
                         "Throughput: median, CI band, dots = repetitions"),
                 {"mode": "concurrency", "series": list(series)})


def _latency_by_variant(view: ExperimentView) -> Drawn:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    variants = _variants(view)
    plotted = []
    for p, offset, color in (("p50", -0.1, "C0"), ("p99", 0.1, "C3")):
        marks = _marks(ax, [s.latency_runs_us.get(p) for _, s in variants], offset,
                       scale=1e-3, color=color, label=f"{p} (median of the runs)")
        plotted += [{**m, "percentile": p} for m in marks]
    ys = [v for m in plotted for v in (m["low"], m["high"]) if v > 0]
    if ys:
        ms_axis(ax, min(ys), max(ys))
    return _finish_variants(fig, ax, view, [n for n, _ in variants], "latency, ms",
                            "Latency p50 and p99 by variant", plotted, zero=False)


def latency_chart(view: ExperimentView) -> Drawn:
    if by_variant(view):
        return _latency_by_variant(view)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ys = []
    for name, points in _series(view).items():
        xs = [p[0] for p in points]
        lines = {q: [p[1].latency_us[q] / 1000 for p in points] for q in ("p50", "p90", "p99")}
        ys += [v for vs in lines.values() for v in vs if v > 0]
        line, = ax.plot(xs, lines["p50"], marker="o", label=f"{name} p50")
        ax.plot(xs, lines["p90"], linestyle=":", color=line.get_color(), label=f"{name} p90")
        ax.plot(xs, lines["p99"], marker="^", linestyle="--", color=line.get_color(),
                label=f"{name} p99")
    if ys:
        ms_axis(ax, min(ys), max(ys))
    svg = _finish(fig, ax, view, "latency, ms",
                  "Latency p50 (solid), p90 (dotted), p99 (dashed), merged histograms",
                  zero=False)
    return Drawn(svg, {"mode": "concurrency"})


SPECTRUM = (50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 99.995, 99.999)


def spectrum(histograms: list[str]) -> list[tuple[float, float]]:
    """(percentile, latency ms) of the runs' merged histogram, up to the percentiles the
    sample can resolve (1/(1-q) ≤ count), then its maximum."""
    merged = decode_histogram(histograms[0])
    for h in histograms[1:]:
        merged.add(decode_histogram(h))
    n = merged.get_total_count()
    points = [(q, value_at_percentile(merged, q) / 1000) for q in SPECTRUM
              if 100 / (100 - q) <= n]
    if n:
        points.append((100 * (1 - 1 / (2 * n)) if n > 1 else 50.0, merged.get_max_value() / 1000))
    return points


def spectrum_chart(view: ExperimentView) -> Drawn:
    """Each trial's latency by percentile on a 1/(1-q) axis, as HdrHistogram's plotter
    shows it: the tail is readable, not squeezed into the last pixel."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    common = common_knobs(view.summaries)
    several_c = not by_variant(view)
    lines, ys = {}, []
    for s in view.summaries:
        hists = [r.load.histogram for r in view.runs if r.trial_id == s.trial_id
                 and r.outcome is Outcome.OK and r.load and r.load.histogram]
        if not hists:
            continue
        name = series_name(s, common) + (f" c={s.concurrency}" if several_c else "")
        points = spectrum(hists)
        lines[name] = points
        ys += [v for _, v in points if v > 0]
        ax.plot([100 / (100 - q) for q, _ in points], [v for _, v in points],
                marker=".", label=name)
    ax.set_xscale("log")
    qs = [q for q in SPECTRUM if lines and 100 / (100 - q) <= max(
        100 / (100 - q2) for pts in lines.values() for q2, _ in pts)]
    ax.set_xticks([100 / (100 - q) for q in qs])
    ax.set_xticklabels([f"{q:g}%" for q in qs], fontsize=8)
    ax.xaxis.set_minor_locator(ticker.NullLocator())
    ax.set_xlabel("percentile (axis: 1/(1−q)); the last point of a line is its maximum")
    if ys:
        ms_axis(ax, min(ys), max(ys))
    ax.set_ylabel("latency, ms")
    ax.set_title("Latency by percentile, merged histograms of each trial's runs")
    ax.grid(alpha=0.3, which="both")
    _legend(ax)
    data = {"lines": lines, "yticklabels": _ticklabels(fig, ax.yaxis)}
    return Drawn(_svg(fig), data)


def _component_chart(view: ExperimentView, metric, ylabel: str, title: str) -> Drawn:
    fig, ax = plt.subplots(figsize=(8, 4))
    if by_variant(view):
        variants = _variants(view)
        comps = sorted({c for _, s in variants for c in metric(s)})
        plotted = []
        for k, comp in enumerate(comps):
            offset = (k - (len(comps) - 1) / 2) * 0.12
            plotted += _marks(ax, [metric(s).get(comp) for _, s in variants], offset,
                              color=f"C{k}", label=comp)
        return _finish_variants(fig, ax, view, [n for n, _ in variants], ylabel, title,
                                plotted)
    for name, points in _series(view).items():
        comps = sorted({c for _, s, _ in points for c in metric(s)})
        for comp in comps:
            xs = [x for x, s, _ in points if comp in metric(s)]
            ys = [metric(s)[comp].median for _, s, _ in points if comp in metric(s)]
            ax.plot(xs, ys, marker="o", label=f"{name}: {comp}")
    return Drawn(_finish(fig, ax, view, ylabel, title), {"mode": "concurrency"})


def cpu_chart(view: ExperimentView) -> Drawn:
    return _component_chart(view, lambda s: s.cpu_us_per_request, "CPU µs per request",
                            "Server CPU per request, by component")


def memory_chart(view: ExperimentView) -> Drawn:
    return _component_chart(view, lambda s: s.rss_mib_peak, "peak RSS, MiB",
                            "Memory during the load, by component")


def transfer_chart(view: ExperimentView) -> Drawn:
    fig, ax = plt.subplots(figsize=(8, 4))
    if by_variant(view):
        variants = _variants(view)
        plotted = _marks(ax, [s.mbps for _, s in variants], 0.0, color="C0",
                         label="median")
        return _finish_variants(fig, ax, view, [n for n, _ in variants],
                                "MB/s (HTTP bytes read by the client)", "Transfer rate",
                                plotted)
    for name, points in _series(view).items():
        ax.plot([p[0] for p in points], [p[1].mbps.median for p in points], marker="o",
                label=name)
    return Drawn(_finish(fig, ax, view, "MB/s (HTTP bytes read by the client)",
                         "Transfer rate"), {"mode": "concurrency"})


@dataclass(frozen=True)
class Chart:
    """One figure of a workload's section: one chart is one entry of CHARTS."""

    name: str                                  # the figure's class: chart-<name>
    draw: Callable[[ExperimentView], Drawn]    # the view of one workload → SVG and data
    caption: str


CHARTS = (
    Chart("throughput", throughput_chart,
          "Requests per second. Against concurrency: line = median of the repetitions, "
          "band = bootstrap 95% CI of the median (with fewer than 6 repetitions it is "
          "their min–max, a narrower level: see the table), dots = each repetition. "
          "At one concurrency: one mark per variant, whiskers = that interval."),
    Chart("latency", latency_chart,
          "Against concurrency: p50 / p90 / p99 from the merged HdrHistograms of all "
          "repetitions. At one concurrency: p50 and p99 per variant, the median of the "
          "runs' values with their 95% CI or min–max range as whiskers. Closed loop; "
          "open-loop runs are corrected for coordinated omission."),
    Chart("spectrum", spectrum_chart,
          "The latency spectrum: each trial's merged histogram read at p50, p90, p99, "
          "p99.9 … as far as its sample count resolves, on a 1/(1−q) axis."),
    Chart("transfer", transfer_chart,
          "Transfer rate: HTTP bytes read by the client per second."),
    Chart("cpu", cpu_chart,
          "Server CPU per request, per component (median over repetitions)."),
    Chart("memory", memory_chart,
          "Peak resident memory per component during the load."),
)


def draw(view: ExperimentView) -> list[tuple[Chart, Drawn]]:
    """Every chart of CHARTS for one workload's view, in order, with what it drew."""
    return [(chart, chart.draw(view)) for chart in CHARTS]
