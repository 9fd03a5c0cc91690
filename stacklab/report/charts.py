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
from typing import Callable, Mapping

from ..analysis.analyze import Decision, Estimate, ExperimentView, TrialSummary
from ..measure.drive import Bucket, LoadReport
from ..errors import control_character
from ..analysis.flags import LATENCY_DISTORTING
from ..analysis.stats import decode_histogram, value_at_percentile
from ..store import Outcome
from . import common_knobs, series_name
from .fmt import multiple, times

# Plotly's own default colours (D3 category10), named here so a line, its band and its
# repetitions share one.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")
GREY = "#888888"
# The one verdict vocabulary (analyze.VERDICTS) as colours: better green, worse red, same
# grey, and no verdict amber and hollow, so that it is never read as a result (nor drawn
# green because its ratio happens to be above 1).
VERDICT_COLORS = {"better": "#2ca02c", "worse": "#d62728", "same": GREY,
                  "no-verdict": "#e08e0b"}
VERDICT_WORDS = {"better": "better", "worse": "worse", "same": "same",
                 "no-verdict": "no verdict"}
# A value axis turns logarithmic once what it shows spans more than this factor (a
# decade): on a linear one the smaller figures sit on the floor, unreadable.
LOG_SPAN = 10.0
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


def _tick(value: float) -> str:
    """A 1-2-5 tick of a log value axis: "20,000", "0.5"."""
    return f"{value:,.0f}" if value >= 1 else f"{value:g}"


def value_axis(title: str, values) -> dict:
    """A y axis for `values` (everything the chart plots, whiskers included): linear from
    zero, or logarithmic with labelled 1-2-5 ticks once they span more than a decade
    (max/min > LOG_SPAN). A zero keeps it linear: a log axis cannot show one, and a
    second in which nothing completed is what a chart must not hide."""
    values = [v for v in values if v is not None]
    if not values or min(values) <= 0 or max(values) / min(values) <= LOG_SPAN:
        return _axis(title, rangemode="tozero")
    low, high = min(values), max(values)
    ticks = ms_ticks(low, high)
    return _axis(title, type="log", tickvals=ticks, ticktext=[_tick(t) for t in ticks],
                 range=[math.log10(low / 1.15), math.log10(high * 1.15)])


def distortion(s: TrialSummary) -> str | None:
    """The flags (starved, littles-law) after which a trial's percentiles describe only
    the clients that were served, or None: such a percentile is drawn hollow and dashed,
    never as an ordinary point."""
    return ", ".join(f for f in s.flagged if f in LATENCY_DISTORTING) or None


# A distorted percentile's legend entry; the chart's title says it is hollow and dashed.
DISTORTED = ", distorted ({})"
DISTORTED_TITLE = "; hollow, dashed = distorted: the served clients only"


def interval_kind(e: Estimate) -> str:
    """What a whisker is: the median's 95% CI, or with fewer than 6 runs their range."""
    if not e.ci:
        return "none"
    return "min–max range" if e.is_range else "95% CI of the median"


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
            "xticklabels": xaxis["ticktext"], "yticklabels": yaxis.get("ticktext", []),
            "ytype": yaxis.get("type", "linear")}
    return Drawn(fig, data)


def _lines(points: list[tuple[float, float]], name: str, color: str, unit: str,
           **style) -> dict:
    return {"type": "scatter", "mode": "lines+markers", "name": label(name),
            "x": [x for x, _ in points], "y": [y for _, y in points],
            "line": {"color": color, **style}, "legendgroup": label(name),
            "hovertemplate": f"{label(name)}<br>c=%{{x}}: %{{y:.4~g}} {unit}<extra></extra>"}


@dataclass(frozen=True)
class Reference:
    """The baseline experiment on the charts (report --baseline): its name, and for each
    trial of the report the baseline's trial of the same definition."""

    name: str
    trials: Mapping[str, TrialSummary]     # the report's trial_id → the baseline's trial

    def of(self, s: TrialSummary) -> TrialSummary | None:
        found = self.trials.get(s.trial_id)
        return found if found is not None and found.rps.median is not None else None


BASELINE_COLOR = "#333333"


def _baseline_marks(names: list[str], trials: list[TrialSummary],
                    reference: Reference) -> dict | None:
    """The baseline's median req/s per variant: a dark bar across the variant's x, the
    reference its own mark is read against; None when no variant has a partner."""
    marks = [(i, b.rps.median, names[i]) for i, s in enumerate(trials)
             if (b := reference.of(s)) is not None]
    if not marks:
        return None
    return {"type": "scatter", "mode": "markers", "name": label(f"baseline {reference.name}"),
            "x": [i for i, _, _ in marks], "y": [v for _, v, _ in marks],
            "customdata": [label(n) for _, _, n in marks],
            "marker": {"symbol": "line-ew", "size": 30, "color": BASELINE_COLOR,
                       "line": {"width": 3, "color": BASELINE_COLOR}},
            "hovertemplate": f"%{{customdata}}<br>baseline {label(reference.name)}: "
                             "%{y:.4~g} req/s (median)<extra></extra>"}


def _throughput_by_variant(view: ExperimentView, reference: Reference | None) -> Drawn:
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
    traces = [trace, dots] if plotted else []
    base = reference and _baseline_marks(names, [s for _, s in variants], reference)
    if base and plotted:
        traces.append(base)
    values = _plotted(plotted) + [y for _, y, _ in reps]
    yaxis = value_axis("requests/s", values + (base["y"] if base else []))
    drawn = _by_variant(view, names, traces, plotted,
                        "Throughput by variant: median, dots = repetitions"
                        + (f", bars = baseline {label(reference.name)}" if base else ""),
                        yaxis)
    drawn.data["baseline"] = dict(zip(base["customdata"], base["y"])) if base else {}
    return drawn


def throughput_chart(view: ExperimentView, reference: Reference | None = None) -> Drawn:
    """Requests per second, against concurrency or by variant; with `reference`, the
    baseline's medians beside them, named for it."""
    if by_variant(view):
        return _throughput_by_variant(view, reference)
    series = _series(view)
    traces, values, baselines = [], [], {}
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
        values += lo + hi + [v for _, v in reps]
        base = [(c, b.rps.median) for c, s, _ in points
                if reference and (b := reference.of(s)) is not None]
        if base:
            baselines[name] = base
            values += [v for _, v in base]
            traces.append(_lines(base, f"baseline {reference.name}: {name}", BASELINE_COLOR,
                                 "req/s (baseline median)", dash="dot"))
            traces[-1]["marker"] = {"symbol": "x", "color": color, "size": 8}
    title = "Throughput: median, CI band, dots = repetitions" + (
        f", dotted = baseline {label(reference.name)}" if baselines else "")
    yaxis = value_axis("requests/s", values)
    fig = _figure(traces, title, _concurrency_axis(view), yaxis)
    return Drawn(fig, {"mode": "concurrency", "series": list(series), "baseline": baselines,
                       "ytype": yaxis.get("type", "linear")})


def _hollow(trace: dict, plotted: list[dict]) -> list[dict]:
    """`trace` (a _marks trace of distorted percentiles) drawn hollow, its whiskers as
    dashed lines (an error bar cannot be dashed)."""
    trace["marker"] = {**trace["marker"], "symbol": "circle-open", "size": 11,
                       "line": {"width": 2, "color": trace["marker"]["color"]}}
    del trace["error_y"]
    xs, ys = [], []
    for m in plotted:
        xs += [m["x"], m["x"], None]
        ys += [m["low"], m["high"], None]
    whiskers = {"type": "scatter", "mode": "lines", "x": xs, "y": ys,
                "name": trace["name"] + " interval", "showlegend": False,
                "legendgroup": trace["name"], "hoverinfo": "skip",
                "line": {"color": trace["marker"]["color"], "dash": "dash", "width": 1.5}}
    trace["legendgroup"] = trace["name"]
    return [trace, whiskers]


def _latency_by_variant(view: ExperimentView) -> Drawn:
    """p50 and p99 per variant; a variant whose percentiles are distorted (starved,
    Little's law) in traces of their own, hollow and dashed, named so in the legend."""
    variants = _variants(view)
    names = [n for n, _ in variants]
    why = [distortion(s) for _, s in variants]
    traces, plotted = [], []
    for p, offset, color in (("p50", -0.1, _color(0)), ("p99", 0.1, _color(3))):
        estimates = [s.latency_runs_us.get(p) for _, s in variants]
        trace, marks = _marks(names, [e if not w else None for e, w in zip(estimates, why)],
                              offset, f"{p} (median of the runs)", color, "ms", scale=1e-3)
        if marks:
            traces.append(trace)
        plotted += [{**m, "percentile": p, "distorted": None} for m in marks]
        for reason in dict.fromkeys(w for w in why if w):
            trace, marks = _marks(names, [e if w == reason else None
                                          for e, w in zip(estimates, why)],
                                  offset, p + DISTORTED.format(reason), color, "ms",
                                  scale=1e-3)
            traces += _hollow(trace, marks)
            plotted += [{**m, "percentile": p, "distorted": reason} for m in marks]
    ys = [v for m in plotted for v in (m["low"], m["high"]) if v > 0]
    yaxis = ms_axis(min(ys), max(ys)) if ys else _axis("latency, ms", type="log")
    title = "Latency p50 and p99 by variant" + (DISTORTED_TITLE if any(why) else "")
    return _by_variant(view, names, traces, plotted, title, yaxis)


def _broken(points: list[tuple[float, float, bool]]) -> tuple[list, list]:
    """A line's ordinary part (None at a distorted point, so the line breaks there) and
    its distorted part: each distorted point with the segments to its neighbours."""
    solid = [(x, None if bad else y) for x, y, bad in points]
    dashed: list[tuple] = []
    for i, (x, y, bad) in enumerate(points):
        if not bad:
            continue
        if i and not points[i - 1][2]:
            dashed += [(None, None), points[i - 1][:2]]
        dashed.append((x, y))
        if i + 1 < len(points) and not points[i + 1][2]:
            dashed += [points[i + 1][:2], (None, None)]
    while dashed and dashed[0][0] is None:
        dashed.pop(0)
    while dashed and dashed[-1][0] is None:
        dashed.pop()
    return solid, dashed


# Against concurrency each percentile has its marker; a distorted one is hollow and its
# segments dashed.
PERCENTILE_SYMBOLS = (("p50", "circle", 2.5), ("p90", "square", 1.5),
                      ("p99", "diamond", 1.5))


def latency_chart(view: ExperimentView) -> Drawn:
    if by_variant(view):
        return _latency_by_variant(view)
    traces, ys, distorted = [], [], []
    for k, (name, points) in enumerate(_series(view).items()):
        for q, symbol, width in PERCENTILE_SYMBOLS:
            line = [(c, s.latency_us[q] / 1000, bool(distortion(s))) for c, s, _ in points]
            ys += [v for _, v, _ in line if v > 0]
            solid, dashed = _broken(line)
            trace = _lines(solid, f"{name} {q}", _color(k), "ms", width=width)
            trace["marker"] = {"symbol": symbol, "size": 8}
            trace["legendgroup"] = label(name)
            traces.append(trace)
            if dashed:
                why = ", ".join(dict.fromkeys(distortion(s) for _, s, _ in points
                                              if distortion(s)))
                bad = {x for x, _, b in line if b}
                trace = _lines(dashed, f"{name} {q}{DISTORTED.format(why)}", _color(k), "ms",
                               dash="dash", width=width)
                trace["marker"] = {"symbol": [f"{symbol}-open" if x in bad else symbol
                                              for x, _ in dashed],
                                   "size": [11 if x in bad else 0 for x, _ in dashed],
                                   "line": {"width": 2, "color": _color(k)}}
                traces.append(trace)
                distorted.append(f"{name} {q}")
    yaxis = ms_axis(min(ys), max(ys)) if ys else _axis("latency, ms", type="log")
    fig = _figure(traces, "Latency p50 (●), p90 (■), p99 (◆), merged histograms"
                  + (DISTORTED_TITLE if distorted else ""),
                  _concurrency_axis(view), yaxis)
    return Drawn(fig, {"mode": "concurrency", "yticklabels": yaxis.get("ticktext", []),
                       "distorted": distorted})


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
    lines, ys, traces, distorted = {}, [], [], []
    for s in view.summaries:
        hists = [r.load.histogram for r in view.runs if r.trial_id == s.trial_id
                 and r.outcome is Outcome.OK and r.load and r.load.histogram]
        if not hists:
            continue
        name = series_name(s, common) + (f" c={s.concurrency}" if several_c else "")
        points = spectrum(hists)
        lines[name] = points
        ys += [v for _, v in points if v > 0]
        why, color = distortion(s), _color(len(traces))
        if why:
            distorted.append(name)
        traces.append({"type": "scatter", "mode": "lines+markers",
                       "name": label(name + (DISTORTED.format(why) if why else "")),
                       "x": [100 / (100 - q) for q, _ in points], "y": [v for _, v in points],
                       "line": {"color": color, **({"dash": "dash"} if why else {})},
                       "marker": {"size": 8, "symbol": "circle-open", "color": color}
                       if why else {"size": 5},
                       "customdata": [f"p{q:g}" for q, _ in points[:-1]] + ["max"],
                       "hovertemplate": f"{label(name)}<br>%{{customdata}}: %{{y:.4~g}} ms"
                                        "<extra></extra>"})
    reach = max((100 / (100 - q) for pts in lines.values() for q, _ in pts), default=0)
    qs = [q for q in SPECTRUM if 100 / (100 - q) <= reach]
    xaxis = _axis("percentile (axis: 1/(1−q)); the last point of a line is its maximum",
                  type="log", tickvals=[100 / (100 - q) for q in qs],
                  ticktext=[f"{q:g}%" for q in qs], tickfont={"size": 10})
    yaxis = ms_axis(min(ys), max(ys)) if ys else _axis("latency, ms", type="log")
    fig = _figure(traces, "Latency by percentile, merged histograms of each trial's runs"
                  + (DISTORTED_TITLE if distorted else ""),
                  xaxis, yaxis)
    return Drawn(fig, {"lines": lines, "xticklabels": xaxis["ticktext"],
                       "yticklabels": yaxis.get("ticktext", []), "distorted": distorted})


def _plotted(plotted: list[dict]) -> list[float]:
    """What marks with whiskers span: each one's low and high."""
    return [v for m in plotted for v in (m["low"], m["high"])]


def _concurrency_lines(view: ExperimentView, traces: list[dict], title: str,
                       ylabel: str) -> Drawn:
    """Lines against concurrency, on a value axis fitted to what they plot."""
    yaxis = value_axis(ylabel, [y for t in traces for y in t["y"]])
    return Drawn(_figure(traces, title, _concurrency_axis(view), yaxis, height=400),
                 {"mode": "concurrency", "ytype": yaxis.get("type", "linear")})


def _component_chart(view: ExperimentView, metric, ylabel: str, unit: str,
                     title: str) -> Drawn:
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
        return _by_variant(view, names, traces, plotted, title,
                           value_axis(ylabel, _plotted(plotted)))
    traces = []
    for k, (name, points) in enumerate(_series(view).items()):
        comps = sorted({c for _, s, _ in points for c in metric(s)})
        for j, comp in enumerate(comps):
            line = [(x, metric(s)[comp].median) for x, s, _ in points if comp in metric(s)]
            traces.append(_lines(line, f"{name}: {comp}", _color(k * len(comps) + j), unit))
    return _concurrency_lines(view, traces, title, ylabel)


def cpu_chart(view: ExperimentView) -> Drawn:
    return _component_chart(view, lambda s: s.cpu_us_per_request, "CPU µs per request",
                            "µs/req", "Server CPU per request, by component")


def memory_chart(view: ExperimentView) -> Drawn:
    return _component_chart(view, lambda s: s.rss_mib_peak, "peak RSS, MiB", "MiB",
                            "Memory during the load, by component")


def transfer_chart(view: ExperimentView) -> Drawn:
    ylabel = "MB/s (HTTP bytes read by the client)"
    if by_variant(view):
        variants = _variants(view)
        names = [n for n, _ in variants]
        trace, plotted = _marks(names, [s.mbps for _, s in variants], 0.0, "median",
                                _color(0), "MB/s")
        return _by_variant(view, names, [trace] if plotted else [], plotted,
                           "Transfer rate", value_axis(ylabel, _plotted(plotted)))
    traces = [_lines([(p[0], p[1].mbps.median) for p in points], name, _color(k), "MB/s")
              for k, (name, points) in enumerate(_series(view).items())]
    return _concurrency_lines(view, traces, "Transfer rate", ylabel)


# A bucket shorter than this (the run's last, cut by its end) is left out: divided by a
# whole second its few requests drew every run falling to zero at its end; divided by its
# own length they would be a spike measured over a few milliseconds.
MIN_BUCKET_S = 0.1


def _buckets(load: LoadReport) -> list[tuple[Bucket, float]]:
    """The engine's buckets with the length each really covers: its width, but the last
    ends with the measured phase (`duration_s`, the same origin); seconds after the last
    bucket in which nothing completed nor failed (a stall up to the end) as empty
    buckets, so that a line does not stop where the run did not."""
    points = load.timeseries
    found = [(p, min(p.width_s, load.duration_s - p.t_s)) for p in points]
    if points:
        width = points[-1].width_s
        t = points[-1].t_s + width
        while load.duration_s - t >= MIN_BUCKET_S:
            found.append((Bucket(t_s=t, width_s=width, completed=0, errors=0, p99_us=0),
                          min(width, load.duration_s - t)))
            t += width
    return [(p, length) for p, length in found if length >= MIN_BUCKET_S]


def per_second(load: LoadReport) -> dict | None:
    """A run's per-second series from the engine report's time series (one bucket per
    second, coarser past an hour): {t_s, length_s, rps, p99_ms, errors}, each bucket's
    requests divided by the time it really covers (_buckets), p99 None where a bucket
    completed nothing."""
    kept = _buckets(load)
    if not kept:
        return None
    return {"t_s": [p.t_s for p, _ in kept],
            "length_s": [round(length, 6) for _, length in kept],
            "rps": [p.completed / length for p, length in kept],
            "p99_ms": [p.p99_us / 1000 if p.completed else None for p, _ in kept],
            "errors": [p.errors for p, _ in kept]}


def per_second_chart(view: ExperimentView) -> Drawn:
    """Throughput (top) and p99 (bottom) of every second of each trial's runs, one thin
    line per repetition, one colour and one legend entry per trial: a warm-up left in,
    a collapse or a stall mid-run shows here and nowhere else."""
    common = common_knobs(view.summaries)
    several_c = not by_variant(view)
    series, traces, p99s, distorted = {}, [], [], []
    for s in view.summaries:
        runs = [(r.repetition, per_second(r.load)) for r in view.runs
                if r.trial_id == s.trial_id and r.outcome is Outcome.OK and r.load]
        runs = [(rep, ts) for rep, ts in sorted(runs, key=lambda x: x[0]) if ts]
        if not runs:
            continue
        name = series_name(s, common) + (f" c={s.concurrency}" if several_c else "")
        series[name] = [{"repetition": rep, **ts} for rep, ts in runs]
        color, why = _color(len(series) - 1), distortion(s)
        if why:
            distorted.append(name)
            name += f", p99{DISTORTED.format(why)}"
        for k, (rep, ts) in enumerate(runs):
            p99s += [v for v in ts["p99_ms"] if v]
            for metric, yref, unit in (("rps", "y", "req/s"), ("p99_ms", "y2", "ms p99")):
                dash = {"dash": "dash"} if why and metric == "p99_ms" else {}
                traces.append({
                    "type": "scatter", "mode": "lines", "name": label(name),
                    "x": ts["t_s"], "y": ts[metric], "yaxis": yref,
                    "line": {"color": color, "width": 1, **dash}, "opacity": 0.8,
                    "legendgroup": label(name), "showlegend": k == 0 and yref == "y",
                    "customdata": ts["errors"],
                    "hovertemplate": f"{label(name)}, repetition {rep}<br>second %{{x}}: "
                                     f"%{{y:.4~g}} {unit}, %{{customdata}} errors"
                                     "<extra></extra>"})
    p99_axis = (ms_axis(min(p99s), max(p99s), "p99 per second, ms") if p99s
                else _axis("p99 per second, ms", type="log"))
    rps_axis = value_axis("requests/s", [v for runs in series.values() for ts in runs
                                         for v in ts["rps"]])
    fig = _figure(traces, "Throughput and p99 latency per second of each run (the "
                  "engine's per-second buckets; thin lines = repetitions)"
                  + ("; dashed p99 = distorted" if distorted else ""),
                  _axis("seconds into the measured phase", anchor="y2"),
                  {**rps_axis, "domain": [0.55, 1.0]}, height=520,
                  yaxis2={**p99_axis, "domain": [0.0, 0.45], "showgrid": True})
    if not traces:
        fig["layout"]["annotations"][0]["text"] = "no per-second series stored for these runs"
    return Drawn(fig, {"series": series, "yticklabels": p99_axis.get("ticktext", []),
                       "ytype": rps_axis.get("type", "linear"), "distorted": distorted})


@dataclass(frozen=True)
class Chart:
    """One figure of a workload's section: one chart is one entry of CHARTS."""

    name: str                                  # the figure's class: chart-<name>
    draw: Callable[..., Drawn]                 # the view of one workload → figure and data
    caption: str
    # draw(view, reference) takes the baseline (report --baseline) and draws it too
    baseline: bool = False


CHARTS = (
    Chart("throughput", throughput_chart,
          "Requests per second. Against concurrency: line = median of the repetitions, "
          "band = 95% CI of the median, from order statistics (with fewer than 6 "
          "repetitions it is "
          "their min–max, a narrower level: see the table), dots = each repetition. "
          "At one concurrency: one mark per variant, whiskers = that interval. With "
          "--baseline, the baseline's median of the same trial beside each.", baseline=True),
    Chart("latency", latency_chart,
          "Against concurrency: p50 / p90 / p99 from the merged HdrHistograms of all "
          "repetitions. At one concurrency: p50 and p99 per variant, the median of the "
          "runs' values with their 95% CI or min–max range as whiskers. Closed loop; "
          "open-loop runs are corrected for coordinated omission. A percentile drawn "
          "hollow and dashed is distorted (starved clients, Little's law): it describes "
          "only the clients that were served."),
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


def draw(view: ExperimentView, reference: Reference | None = None
         ) -> list[tuple[Chart, Drawn]]:
    """Every chart of CHARTS for one workload's view, in order, with what it drew; the
    baseline on those that draw one."""
    return [(chart, chart.draw(view, reference) if chart.baseline and reference
             else chart.draw(view)) for chart in CHARTS]


@dataclass(frozen=True)
class Ratio:
    """One trial's NEW/BASELINE on one metric with its interval and its verdict in the
    one vocabulary (analyze.Decision): what the baseline chart draws."""

    trial: str                 # the trial's name
    metric: str                # "req/s", "p99 ms"
    ratio: float | None
    ci: tuple[float, float] | None
    decision: Decision


# The metrics of the baseline chart, each at its offset from the trial's row and marker.
RATIO_METRICS = (("req/s", -0.15, "circle"), ("p99 ms", 0.15, "diamond"))


def _ratio_trace(found: list[tuple[int, Ratio]], metric: str, offset: float,
                 symbol: str, kind: str) -> dict:
    """The ratios of one metric with one verdict: its colour, hollow for no verdict."""
    color = VERDICT_COLORS[kind]
    hollow = kind == "no-verdict"
    rows = [r for _, r in found]
    return {"type": "scatter", "mode": "markers", "name": f"{metric}: {VERDICT_WORDS[kind]}",
            "x": [r.ratio for r in rows], "y": [i + offset for i, _ in found],
            "marker": {"color": color, "size": 11 if hollow else 9,
                       "symbol": f"{symbol}-open" if hollow else symbol,
                       "line": {"width": 2, "color": color}},
            "error_x": {"type": "data", "symmetric": False, "color": color, "width": 4,
                        "array": [(r.ci or (r.ratio,) * 2)[1] - r.ratio for r in rows],
                        "arrayminus": [r.ratio - (r.ci or (r.ratio,) * 2)[0] for r in rows]},
            "customdata": [[label(r.trial), label(r.decision.reason or ""),
                            times(r.ratio)] for r in rows],
            "hovertemplate": f"%{{customdata[0]}}<br>{metric} new/baseline "
                             f"%{{customdata[2]}}, {VERDICT_WORDS[kind]} "
                             "%{customdata[1]}<extra></extra>"}


# Ratios a reader knows (×½, ×⅔, ×1.25 …), for the ticks of a ratio axis.
RATIOS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0,
          3.0, 5.0, 10.0, 20.0, 50.0, 100.0)


def ratio_ticks(low: float, high: float) -> list[float]:
    """Ticks of a log axis of ratios from low/1.15 to high×1.15: the familiar ones in
    range, else (a narrow or extreme range) ms_ticks's."""
    ticks = [t for t in RATIOS if low / 1.15 <= t <= high * 1.15]
    return ticks if len(ticks) >= 3 else ms_ticks(low, high)


def baseline_chart(ratios: list[Ratio], baseline: str) -> Drawn:
    """NEW/BASELINE of each trial (req/s and p99) with its 95% CI on a log axis, coloured
    by its verdict (better green, worse red, same grey, no verdict amber and hollow: never
    by the ratio's side of 1), against a reference line at 1× named for the baseline."""
    trials = list(dict.fromkeys(r.trial for r in ratios))
    traces, xs, kinds = [], [], {}
    for metric, offset, symbol in RATIO_METRICS:
        for kind in VERDICT_COLORS:
            found = [(trials.index(r.trial), r) for r in ratios if r.metric == metric
                     and r.decision.kind == kind and r.ratio is not None]
            if found:
                traces.append(_ratio_trace(found, metric, offset, symbol, kind))
                xs += [v for _, r in found for v in (r.ci or (r.ratio, r.ratio))]
                kinds.update({(r.trial, metric): kind for _, r in found})
    traces.append({"type": "scatter", "mode": "lines", "x": [1, 1],
                   "y": [-0.5, max(len(trials), 1) - 0.5],
                   "name": label(f"baseline {baseline} (1×)"), "hoverinfo": "skip",
                   "line": {"color": BASELINE_COLOR, "dash": "dash", "width": 1.5}})
    xs = [v for v in xs + [1.0] if v > 0]
    ticks = ratio_ticks(min(xs), max(xs))
    xaxis = _axis(f"new / baseline {label(baseline)} (log axis; req/s: higher is better, "
                  "p99: lower is better)", type="log", tickvals=ticks,
                  ticktext=[multiple(t) for t in ticks],
                  range=[math.log10(min(xs) / 1.15), math.log10(max(xs) * 1.15)])
    yaxis = _axis("", tickvals=list(range(len(trials))),
                  ticktext=[_wrapped(t) for t in trials], autorange="reversed",
                  tickfont={"size": 10}, automargin=True)
    fig = _figure(traces, f"Against the baseline {label(baseline)}: new/baseline with its "
                  "95% CI, coloured by verdict", xaxis, yaxis,
                  height=max(300, 120 + 60 * len(trials)))
    return Drawn(fig, {"trials": trials, "kinds": kinds, "xtype": "log"})
