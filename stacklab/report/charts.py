"""Charts as Plotly figures (hover values, legend toggles), drawn in the page by the one
copy of plotly.js it inlines, so the report works offline.

A workload whose trials vary in concurrency is drawn against it (one line per variant);
one whose trials share one concurrency is drawn by variant (one mark per variant with
whiskers), since every variant would otherwise sit on the same x. Each chart returns its
figure in Plotly's JSON form (data and layout, built here as plain dicts: plotly's own
figure classes validate every property and would cost seconds on a study; a test checks
every figure against them) with the figures it plotted (`Drawn`), which is what tests
look at. Axes whose labels matter (latency in ms, variants, concurrency, percentiles)
carry explicit ticks, so what the page shows is known here."""

from __future__ import annotations

import html
import json
import math
import textwrap
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

from ..analyze import Estimate, ExperimentView, TrialSummary
from ..errors import control_character
from ..stats import decode_histogram, value_at_percentile
from ..store import Outcome
from . import common_knobs, series_name

# Plotly's own default colours (D3 category10), named here so a line, its band and its
# repetitions share one.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")
GREY = "#888888"
# Beside the plot, never over its points: left edge just right of the plot area.
LEGEND = {"x": 1.02, "xanchor": "left", "y": 1.0, "yanchor": "top", "font": {"size": 11},
          "itemclick": "toggle", "itemdoubleclick": "toggleothers", "tracegroupgap": 3}


@dataclass(frozen=True)
class Drawn:
    """A chart as the page draws it (`figure`: Plotly's {data, layout}) and the figures
    it plotted (`data`)."""

    figure: dict
    data: dict = field(default_factory=dict)

    def json(self) -> str:
        """The figure for a <script type="application/json">: ASCII only (no control
        character reaches the page raw), and no `<`, `>` or `&` that could end the
        script element."""
        text = json.dumps(self.figure, separators=(",", ":"), allow_nan=False)
        return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def label(text: str) -> str:
    """Outside text (a stack, a workload, a knob value) as Plotly's pseudo-HTML shows it
    literally: control characters dropped, `<`, `>` and `&` as entities."""
    if control_character(text):
        text = "".join(c for c in text if not control_character(c))
    return html.escape(text, quote=False)


def _color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _rgba(color: str, alpha: float) -> str:
    r, g, b = (int(color[k:k + 2], 16) for k in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


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


def _figure(traces: list[dict], title: str, xaxis: dict, yaxis: dict, height: int = 430,
            **layout) -> dict:
    """A figure with the house layout: legend outside on the right (shown even for one
    trace, so it can be toggled), a note in the plot when there is nothing to draw."""
    layout = {"title": {"text": title, "font": {"size": 13}, "x": 0.0, "xanchor": "left"},
              "height": height, "margin": {"l": 70, "r": 20, "t": 50, "b": 60},
              "xaxis": {"showgrid": True, "zeroline": False, **xaxis},
              "yaxis": {"showgrid": True, "zeroline": False, **yaxis},
              "legend": LEGEND, "showlegend": True, "hovermode": "closest",
              "font": {"family": "system-ui, sans-serif", "size": 12},
              "plot_bgcolor": "#ffffff", **layout}
    if not traces:
        layout["annotations"] = [{"text": "no successful runs", "showarrow": False,
                                  "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5,
                                  "font": {"color": GREY}}]
    return {"data": traces, "layout": layout}


def _axis(title: str, **kw) -> dict:
    return {"title": {"text": title}, "gridcolor": "#e5e5e5", **kw}


def _concurrency_axis(view: ExperimentView) -> dict:
    levels = sorted({s.concurrency for s in view.summaries})
    return _axis("concurrent connections", type="log", tickvals=levels,
                 ticktext=[str(c) for c in levels])


def _wrapped(name: str) -> str:
    return "<br>".join(label(line) for line in textwrap.wrap(name, 28) or [""])


def _variant_axis(names: list[str], view: ExperimentView) -> dict:
    """Variant names on x, wrapped and turned so long knob lists stay readable."""
    c = view.summaries[0].concurrency if view.summaries else "?"
    return _axis(f"variant (every trial at {c} concurrent connections)",
                 tickvals=list(range(len(names))), ticktext=[_wrapped(n) for n in names],
                 tickangle=-30, tickfont={"size": 10}, range=[-0.6, len(names) - 0.4],
                 automargin=True)


def ms_ticks(low_ms: float, high_ms: float) -> list[float]:
    """Ticks of a log axis of milliseconds from low/1.15 to high×1.15, labelled at every
    scale: 1-2-5 over a decade or more, every 1…9 step below one, finer steps (1.1, 1.2,
    …) when even those leave fewer than two in range."""
    lo, hi = low_ms / 1.15, high_ms * 1.15
    steps = [(1.0, 2.0, 5.0)] if hi / lo >= 10 * 1.15 ** 2 else []
    steps += [tuple(range(1, 10)), tuple(k / 10 for k in range(10, 100)),
              tuple(k / 100 for k in range(100, 1000))]
    for subs in steps:
        ticks = [float(f"{m * 10.0 ** e:.6g}")
                 for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
                 for m in subs]
        ticks = [t for t in ticks if lo <= t <= hi]
        if len(ticks) >= 2:
            return ticks
    return [float(f"{lo:.3g}"), float(f"{hi:.3g}")]


def ms_axis(low_ms: float, high_ms: float, title: str = "latency, ms") -> dict:
    """A log y axis of milliseconds whose labels (ms_ticks) show at every scale."""
    ticks = ms_ticks(low_ms, high_ms)
    return _axis(title, type="log", tickvals=ticks, ticktext=[f"{t:g}" for t in ticks],
                 range=[math.log10(low_ms / 1.15), math.log10(high_ms * 1.15)])


def interval_kind(e: Estimate) -> str:
    """What a whisker is: the bootstrap 95% CI, or with fewer than 6 runs their range."""
    if not e.ci:
        return "none"
    return "min–max range" if e.is_range else "bootstrap 95% CI"


def _whiskers_title(kinds) -> str:
    kinds = sorted(set(kinds) - {"none"})
    return "whiskers: " + (" or ".join(kinds) if kinds else "none (one run)")


def _marks(names: list[str], estimates: list[Estimate | None], offset: float,
           legend: str, color: str, unit: str, scale: float = 1.0) -> tuple[dict, list[dict]]:
    """One mark per variant at x = index + offset, whiskers from its interval: the trace
    and what it plotted."""
    plotted = []
    for i, e in enumerate(estimates):
        if e is None or e.median is None:
            continue
        lo, hi = e.ci or (e.median, e.median)
        plotted.append({"x": i + offset, "y": e.median * scale, "low": lo * scale,
                        "high": hi * scale, "interval": interval_kind(e),
                        "runs": len(e.values), "variant": names[i]})
    trace = {"type": "scatter", "mode": "markers", "name": label(legend),
             "x": [m["x"] for m in plotted], "y": [m["y"] for m in plotted],
             "marker": {"color": color, "size": 9},
             "error_y": {"type": "data", "symmetric": False, "color": color, "width": 5,
                         "array": [m["high"] - m["y"] for m in plotted],
                         "arrayminus": [m["y"] - m["low"] for m in plotted]},
             "customdata": [[label(m["variant"]), m["low"], m["high"], m["interval"],
                             m["runs"]] for m in plotted],
             "hovertemplate": f"%{{customdata[0]}}<br>{label(legend)}: %{{y:.4~g}} {unit}"
                              "<br>%{customdata[3]}: %{customdata[1]:.4~g}–"
                              "%{customdata[2]:.4~g}<br>%{customdata[4]} runs<extra></extra>"}
    return trace, plotted


def _by_variant(view, names, traces, plotted, title, yaxis) -> Drawn:
    fig = _figure(traces, f"{title} ({_whiskers_title(m['interval'] for m in plotted)})",
                  _variant_axis(names, view), yaxis, height=470)
    xaxis = fig["layout"]["xaxis"]
    data = {"mode": "variant", "variants": names, "marks": plotted,
            "xticklabels": xaxis["ticktext"], "yticklabels": yaxis.get("ticktext", [])}
    return Drawn(fig, data)


def _lines(points: list[tuple[float, float]], name: str, color: str, unit: str,
           **style) -> dict:
    return {"type": "scatter", "mode": "lines+markers", "name": label(name),
            "x": [x for x, _ in points], "y": [y for _, y in points],
            "line": {"color": color, **style}, "legendgroup": label(name),
            "hovertemplate": f"{label(name)}<br>c=%{{x}}: %{{y:.4~g}} {unit}<extra></extra>"}


def throughput_chart(view: ExperimentView) -> Drawn:
    yaxis = _axis("requests/s", rangemode="tozero")
    if by_variant(view):
        variants = _variants(view)
        names = [n for n, _ in variants]
        trace, plotted = _marks(names, [s.rps for _, s in variants], 0.0, "median",
                                _color(0), "req/s")
        reps = [(i + 0.12, v, n) for i, (n, s) in enumerate(variants) for v in s.rps.values]
        dots = {"type": "scatter", "mode": "markers", "name": "each repetition",
                "x": [x for x, _, _ in reps], "y": [y for _, y, _ in reps],
                "customdata": [label(n) for _, _, n in reps],
                "marker": {"color": GREY, "size": 5},
                "hovertemplate": "%{customdata}<br>one repetition: %{y:.4~g} req/s"
                                 "<extra></extra>"}
        return _by_variant(view, names, [trace, dots] if plotted else [], plotted,
                           "Throughput by variant: median, dots = repetitions", yaxis)
    series = _series(view)
    traces = []
    for k, (name, points) in enumerate(series.items()):
        color = _color(k)
        xs = [p[0] for p in points]
        lo = [(p[1].rps.ci or (p[1].rps.median,) * 2)[0] for p in points]
        hi = [(p[1].rps.ci or (p[1].rps.median,) * 2)[1] for p in points]
        traces.append({"type": "scatter", "mode": "lines", "x": xs + xs[::-1],
                       "y": hi + lo[::-1], "fill": "toself", "line": {"width": 0},
                       "fillcolor": _rgba(color, 0.15), "hoverinfo": "skip",
                       "legendgroup": label(name), "showlegend": False,
                       "name": label(name) + " interval"})
        traces.append(_lines([(x, p[1].rps.median) for x, p in zip(xs, points)], name,
                             color, "req/s (median)"))
        reps = [(x, v) for x, _, vs in points for v in vs]
        traces.append({"type": "scatter", "mode": "markers", "x": [x for x, _ in reps],
                       "y": [v for _, v in reps], "legendgroup": label(name),
                       "showlegend": False, "name": label(name) + " repetitions",
                       "marker": {"color": _rgba(color, 0.6), "size": 5},
                       "hovertemplate": f"{label(name)}<br>c=%{{x}}: one repetition "
                                        "%{y:.4~g} req/s<extra></extra>"})
    fig = _figure(traces, "Throughput: median, CI band, dots = repetitions",
                  _concurrency_axis(view), yaxis)
    return Drawn(fig, {"mode": "concurrency", "series": list(series)})


def _latency_by_variant(view: ExperimentView) -> Drawn:
    variants = _variants(view)
    names = [n for n, _ in variants]
    traces, plotted = [], []
    for p, offset, color in (("p50", -0.1, _color(0)), ("p99", 0.1, _color(3))):
        trace, marks = _marks(names, [s.latency_runs_us.get(p) for _, s in variants],
                              offset, f"{p} (median of the runs)", color, "ms", scale=1e-3)
        if marks:
            traces.append(trace)
        plotted += [{**m, "percentile": p} for m in marks]
    ys = [v for m in plotted for v in (m["low"], m["high"]) if v > 0]
    yaxis = ms_axis(min(ys), max(ys)) if ys else _axis("latency, ms", type="log")
    return _by_variant(view, names, traces, plotted, "Latency p50 and p99 by variant",
                       yaxis)


def latency_chart(view: ExperimentView) -> Drawn:
    if by_variant(view):
        return _latency_by_variant(view)
    traces, ys = [], []
    for k, (name, points) in enumerate(_series(view).items()):
        for q, dash, symbol in (("p50", "solid", "circle"), ("p90", "dot", "circle-open"),
                                ("p99", "dash", "triangle-up")):
            line = [(c, s.latency_us[q] / 1000) for c, s, _ in points]
            ys += [v for _, v in line if v > 0]
            trace = _lines(line, f"{name} {q}", _color(k), "ms", dash=dash)
            trace["marker"] = {"symbol": symbol}
            trace["legendgroup"] = label(name)
            traces.append(trace)
    yaxis = ms_axis(min(ys), max(ys)) if ys else _axis("latency, ms", type="log")
    fig = _figure(traces, "Latency p50 (solid), p90 (dotted), p99 (dashed), merged "
                  "histograms", _concurrency_axis(view), yaxis)
    return Drawn(fig, {"mode": "concurrency", "yticklabels": yaxis.get("ticktext", [])})


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
    common = common_knobs(view.summaries)
    several_c = not by_variant(view)
    lines, ys, traces = {}, [], []
    for s in view.summaries:
        hists = [r.load.histogram for r in view.runs if r.trial_id == s.trial_id
                 and r.outcome is Outcome.OK and r.load and r.load.histogram]
        if not hists:
            continue
        name = series_name(s, common) + (f" c={s.concurrency}" if several_c else "")
        points = spectrum(hists)
        lines[name] = points
        ys += [v for _, v in points if v > 0]
        traces.append({"type": "scatter", "mode": "lines+markers", "name": label(name),
                       "x": [100 / (100 - q) for q, _ in points], "y": [v for _, v in points],
                       "line": {"color": _color(len(traces))}, "marker": {"size": 5},
                       "customdata": [f"p{q:g}" for q, _ in points[:-1]] + ["max"],
                       "hovertemplate": f"{label(name)}<br>%{{customdata}}: %{{y:.4~g}} ms"
                                        "<extra></extra>"})
    reach = max((100 / (100 - q) for pts in lines.values() for q, _ in pts), default=0)
    qs = [q for q in SPECTRUM if 100 / (100 - q) <= reach]
    xaxis = _axis("percentile (axis: 1/(1−q)); the last point of a line is its maximum",
                  type="log", tickvals=[100 / (100 - q) for q in qs],
                  ticktext=[f"{q:g}%" for q in qs], tickfont={"size": 10})
    yaxis = ms_axis(min(ys), max(ys)) if ys else _axis("latency, ms", type="log")
    fig = _figure(traces, "Latency by percentile, merged histograms of each trial's runs",
                  xaxis, yaxis)
    return Drawn(fig, {"lines": lines, "xticklabels": xaxis["ticktext"],
                       "yticklabels": yaxis.get("ticktext", [])})


def _component_chart(view: ExperimentView, metric, ylabel: str, unit: str,
                     title: str) -> Drawn:
    yaxis = _axis(ylabel, rangemode="tozero")
    if by_variant(view):
        variants = _variants(view)
        names = [n for n, _ in variants]
        comps = sorted({c for _, s in variants for c in metric(s)})
        traces, plotted = [], []
        for k, comp in enumerate(comps):
            offset = (k - (len(comps) - 1) / 2) * 0.12
            trace, marks = _marks(names, [metric(s).get(comp) for _, s in variants], offset,
                                  comp, _color(k), unit)
            traces.append(trace)
            plotted += marks
        return _by_variant(view, names, traces, plotted, title, yaxis)
    traces = []
    for k, (name, points) in enumerate(_series(view).items()):
        comps = sorted({c for _, s, _ in points for c in metric(s)})
        for j, comp in enumerate(comps):
            line = [(x, metric(s)[comp].median) for x, s, _ in points if comp in metric(s)]
            traces.append(_lines(line, f"{name}: {comp}", _color(k * len(comps) + j), unit))
    return Drawn(_figure(traces, title, _concurrency_axis(view), yaxis, height=400),
                 {"mode": "concurrency"})


def cpu_chart(view: ExperimentView) -> Drawn:
    return _component_chart(view, lambda s: s.cpu_us_per_request, "CPU µs per request",
                            "µs/req", "Server CPU per request, by component")


def memory_chart(view: ExperimentView) -> Drawn:
    return _component_chart(view, lambda s: s.rss_mib_peak, "peak RSS, MiB", "MiB",
                            "Memory during the load, by component")


def transfer_chart(view: ExperimentView) -> Drawn:
    ylabel = "MB/s (HTTP bytes read by the client)"
    yaxis = _axis(ylabel, rangemode="tozero")
    if by_variant(view):
        variants = _variants(view)
        names = [n for n, _ in variants]
        trace, plotted = _marks(names, [s.mbps for _, s in variants], 0.0, "median",
                                _color(0), "MB/s")
        return _by_variant(view, names, [trace] if plotted else [], plotted,
                           "Transfer rate", yaxis)
    traces = [_lines([(p[0], p[1].mbps.median) for p in points], name, _color(k), "MB/s")
              for k, (name, points) in enumerate(_series(view).items())]
    return Drawn(_figure(traces, "Transfer rate", _concurrency_axis(view), yaxis,
                         height=400), {"mode": "concurrency"})


def per_second(load) -> dict | None:
    """A run's per-second series from the engine report's `timeseries` (one bucket per
    second, coarser past an hour; `width_s` is absent from schema 1, where every bucket
    is 1 s): {t_s, rps, p99_ms, errors}, p99 None where a bucket completed nothing.
    LoadReport does not type the series: it is read from the stored report itself."""
    points = load.raw.get("timeseries") or []
    if not points:
        return None
    width = [p.get("width_s") or 1 for p in points]
    return {"t_s": [p["t_s"] for p in points],
            "rps": [p["completed"] / w for p, w in zip(points, width)],
            "p99_ms": [p["p99_us"] / 1000 if p["completed"] else None for p in points],
            "errors": [p["errors"] for p in points]}


def per_second_chart(view: ExperimentView) -> Drawn:
    """Throughput (top) and p99 (bottom) of every second of each trial's runs, one thin
    line per repetition, one colour and one legend entry per trial: a warm-up left in,
    a collapse or a stall mid-run shows here and nowhere else."""
    common = common_knobs(view.summaries)
    several_c = not by_variant(view)
    series, traces, p99s = {}, [], []
    for s in view.summaries:
        runs = [(r.repetition, per_second(r.load)) for r in view.runs
                if r.trial_id == s.trial_id and r.outcome is Outcome.OK and r.load]
        runs = [(rep, ts) for rep, ts in sorted(runs, key=lambda x: x[0]) if ts]
        if not runs:
            continue
        name = series_name(s, common) + (f" c={s.concurrency}" if several_c else "")
        series[name] = [{"repetition": rep, **ts} for rep, ts in runs]
        color = _color(len(series) - 1)
        for k, (rep, ts) in enumerate(runs):
            p99s += [v for v in ts["p99_ms"] if v]
            for metric, yref, unit in (("rps", "y", "req/s"), ("p99_ms", "y2", "ms p99")):
                traces.append({
                    "type": "scatter", "mode": "lines", "name": label(name),
                    "x": ts["t_s"], "y": ts[metric], "yaxis": yref,
                    "line": {"color": color, "width": 1}, "opacity": 0.8,
                    "legendgroup": label(name), "showlegend": k == 0 and yref == "y",
                    "customdata": ts["errors"],
                    "hovertemplate": f"{label(name)}, repetition {rep}<br>second %{{x}}: "
                                     f"%{{y:.4~g}} {unit}, %{{customdata}} errors"
                                     "<extra></extra>"})
    p99_axis = (ms_axis(min(p99s), max(p99s), "p99 per second, ms") if p99s
                else _axis("p99 per second, ms", type="log"))
    fig = _figure(traces, "Throughput and p99 latency per second of each run (the "
                  "engine's per-second buckets; thin lines = repetitions)",
                  _axis("seconds into the measured phase", anchor="y2"),
                  _axis("requests/s", rangemode="tozero", domain=[0.55, 1.0]), height=520,
                  yaxis2={**p99_axis, "domain": [0.0, 0.45], "showgrid": True})
    if not traces:
        fig["layout"]["annotations"][0]["text"] = "no per-second series stored for these runs"
    return Drawn(fig, {"series": series, "yticklabels": p99_axis.get("ticktext", [])})


@dataclass(frozen=True)
class Chart:
    """One figure of a workload's section: one chart is one entry of CHARTS."""

    name: str                                  # the figure's class: chart-<name>
    draw: Callable[[ExperimentView], Drawn]    # the view of one workload → figure and data
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
    Chart("persecond", per_second_chart,
          "Each run second by second, from the engine's per-second buckets of the "
          "measured phase: requests completed per second (top) and that second's p99 "
          "(bottom); one thin line per repetition, one colour per trial."),
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
