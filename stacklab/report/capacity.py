"""A capacity experiment in the HTML report: each trial's searches drawn as latency
against offered rate, and a table of the capacity each search found.

A capacity run keeps every step of its search in its record (the "capacity" part of its
resources, written by run/capacity.py): the rate offered, the SLO percentile measured
with its 95% interval, and the step's decision. The chart puts the steps where the
search put them — pass, fail and "measure longer" apart, the interval as whiskers —
against the SLO's limit and the capacity each search settled on, so a reader sees how
close to the limit the answer is and how sharply latency turns there. The table gives
each search's capacity, their median with its interval, and the latency at 50, 80, 90
and 100% of it (the profile steps and the confirmation).

The records are read here, once, into `Search` and `Step`; an experiment whose runs have
no "capacity" part gives no section, and the page is the one it always was."""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median
from typing import Any, Mapping

from ..analysis.analyze import ExperimentView
from . import fmt
from .searches import PART, SHARES, CapacityTrial, Search, Step, capacity_trials
from .charts import (GREY, PALETTE, VERDICT_COLORS, Drawn, _figure, label, ms_axis,
                     value_axis)

# Each decision's mark: pass as the verdicts' "better" green, fail as "worse" red, an
# undecided step (measured longer) amber and hollow, never read as a result.
DECISIONS = {"pass": ("circle", VERDICT_COLORS["better"]),
             "fail": ("x", VERDICT_COLORS["worse"]),
             "longer": ("diamond-open", VERDICT_COLORS["no-verdict"])}
SLO_COLOR = "#d62728"
# Each search's capacity line: the palette without the decisions' green and red.
CAPACITY_COLORS = tuple(c for c in PALETTE if c not in (DECISIONS["pass"][1],
                                                        DECISIONS["fail"][1]))


@dataclass(frozen=True)
class Table:
    """A table as the page prints it: its header and each row's cells, written."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def _ms(value_us: float | None) -> float | None:
    return None if value_us is None else value_us / 1000


def _step_marks(trial: CapacityTrial, top_ms: float, bottom_ms: float
                ) -> tuple[list[dict], list[dict]]:
    """One trace per decision over the trial's searches (whiskers: the percentile's
    interval, drawn to the plot's edge where it is unbounded), and what each plotted."""
    traces, plotted = [], []
    for decision, (symbol, color) in DECISIONS.items():
        marks = [{"run": search.repetition, "phase": st.phase, "rate": st.rate,
                  "y": _ms(st.value_us), "low": _ms(st.low_us), "high": _ms(st.high_us),
                  "decision": decision, "reason": st.reason, "flags": list(st.flags)}
                 for search in trial.searches for st in search.offered
                 if st.decision == decision and st.value_us is not None]
        if not marks:
            continue
        plotted += marks
        traces.append({
            "type": "scatter", "mode": "markers", "name": decision,
            "x": [m["rate"] for m in marks], "y": [m["y"] for m in marks],
            "marker": {"symbol": symbol, "color": color, "size": 9,
                       "line": {"width": 2, "color": color}},
            "error_y": {"type": "data", "symmetric": False, "color": color, "width": 4,
                        "array": [(m["high"] or top_ms) - m["y"] for m in marks],
                        "arrayminus": [m["y"] - (m["low"] or bottom_ms) for m in marks]},
            "customdata": [[m["run"], m["phase"], _interval_text(m), label(m["reason"]),
                            label(", ".join(m["flags"]) or "none")] for m in marks],
            "hovertemplate": f"run %{{customdata[0]}}, %{{customdata[1]}} step: {decision}"
                             f"<br>%{{x:,.0f}} req/s offered: p{trial.slo.percentile:g} "
                             "%{y:.4~g} ms, 95% interval %{customdata[2]}"
                             "<br>%{customdata[3]}<br>flags: %{customdata[4]}"
                             "<extra></extra>"})
    return traces, plotted


def _interval_text(mark: dict) -> str:
    low = "0" if mark["low"] is None else f"{mark['low']:.4g}"
    high = "unbounded" if mark["high"] is None else f"{mark['high']:.4g} ms"
    return f"{low}–{high}"


def _p50_traces(trial: CapacityTrial) -> list[dict]:
    """Each search's p50 against rate, faint: the body of the distribution beside its
    tail."""
    traces = []
    for k, search in enumerate(trial.searches):
        points = sorted((st.rate, _ms(st.p50_us)) for st in search.offered
                        if st.p50_us is not None)
        traces.append({
            "type": "scatter", "mode": "lines+markers", "name": "p50",
            "x": [x for x, _ in points], "y": [y for _, y in points],
            "line": {"color": GREY, "width": 1, "dash": "dot"}, "opacity": 0.5,
            "marker": {"color": GREY, "size": 4}, "legendgroup": "p50",
            "showlegend": k == 0,
            "hovertemplate": f"run {search.repetition}: p50 %{{y:.4~g}} ms at "
                             "%{x:,.0f} req/s<extra></extra>"})
    return traces


def capacity_chart(trial: CapacityTrial) -> Drawn:
    """Latency against offered rate over the trial's searches: the SLO percentile of
    each step with its 95% interval, marked by the step's decision; p50 faint; the
    SLO's limit across; each search's capacity as a vertical line in its own colour.
    The rate axis is logarithmic once the rates span more than a decade."""
    goal = trial.slo
    limit_ms = goal.limit_us / 1000
    steps = [st for s in trial.searches for st in s.offered]
    capacities = [(s.repetition, s.capacity) for s in trial.searches if s.capacity]
    ys = [limit_ms] + [_ms(v) for st in steps for v in (st.value_us, st.low_us, st.high_us,
                                                         st.p50_us) if v]
    bottom, top = min(ys), max(ys)
    # the axis spans bottom/1.1 to top×1.1 and ms_axis pads it by 1.15: an unbounded
    # whisker reaches its edge
    traces, plotted = _step_marks(trial, top * 1.1 * 1.15, bottom / 1.1 / 1.15)
    traces += _p50_traces(trial)
    rates = [st.rate for st in steps] + [c for _, c in capacities]
    xaxis = value_axis("offered rate, requests/s (open loop)", rates)
    low_x = min(rates, default=1.0) / (1.15 if xaxis.get("type") == "log" else 1.0)
    traces.append({"type": "scatter", "mode": "lines", "name": label(f"SLO {goal.slo}"),
                   "x": [0 if xaxis.get("type") != "log" else low_x,
                         max(rates, default=1.0) * 1.15], "y": [limit_ms, limit_ms],
                   "line": {"color": SLO_COLOR, "dash": "dash", "width": 1.5},
                   "hoverinfo": "skip"})
    for k, (rep, c) in enumerate(capacities):
        color = CAPACITY_COLORS[k % len(CAPACITY_COLORS)]
        traces.append({"type": "scatter", "mode": "lines",
                       "name": f"run {rep} capacity {fmt.number(c)} req/s",
                       "x": [c, c], "y": [bottom / 1.1, top * 1.1],
                       "line": {"color": color, "width": 1.5},
                       "hovertemplate": f"run {rep}: capacity {fmt.number(c)} req/s"
                                        "<extra></extra>"})
    yaxis = ms_axis(bottom / 1.1, top * 1.1, f"p{goal.percentile:g} latency, ms")
    title = (f"{label(trial.name)}: latency against offered rate, {label(goal.slo)} at "
             f"{goal.connections} connections ({len(trial.searches)} search"
             f"{'es' if len(trial.searches) != 1 else ''})")
    fig = _figure(traces if plotted or capacities else [], title, xaxis, yaxis, height=460)
    if not (plotted or capacities):
        fig["layout"]["annotations"][0]["text"] = "no open-loop step measured"
    return Drawn(fig, {"trial": trial.summary.trial_id, "slo_ms": limit_ms,
                       "points": plotted, "capacities": capacities,
                       "xtype": xaxis.get("type", "linear"),
                       "rates": sorted({m["rate"] for m in plotted})})


def _latency(steps: list[Step | None]) -> str:
    """p50 / the SLO percentile in ms of a step, or the medians over several."""
    found = [s for s in steps if s is not None and s.p50_us is not None
             and s.value_us is not None]
    if not found:
        return fmt.DASH
    return (f"{fmt.ms(median(s.p50_us for s in found))} / "
            f"{fmt.ms(median(s.value_us for s in found))}")


def _ended(search: Search) -> str:
    return search.stopped + ("" if search.confirmed else ", not confirmed")


def capacity_table(trial: CapacityTrial) -> Table:
    """A row per search (its capacity, how it ended, its steps, its latency at each
    share), then their median with its interval."""
    pct = f"p{trial.slo.percentile:g}"
    header = ("run", "capacity req/s", "95% CI or range", "ended", "steps", "flags",
              *(f"{share:.0%}: p50 / {pct} ms" for share in SHARES))
    rows = [(str(s.repetition), fmt.number(s.capacity), "", _ended(s), str(len(s.steps)),
             ", ".join(sorted({f for st in s.steps for f in st.flags})) or fmt.DASH,
             *(_latency([s.at(share)]) for share in SHARES))
            for s in trial.searches]
    e = trial.capacity
    rows.append(("median", fmt.number(e.median), fmt.ci(e), "", "", "",
                 *(_latency([s.at(share) for s in trial.searches]) for share in SHARES)))
    return Table(header, tuple(rows))


@dataclass(frozen=True)
class Section:
    """A trial's part of the page's capacity section."""

    trial: CapacityTrial
    chart: Drawn
    table: Table


def capacity_sections(view: ExperimentView) -> list[Section]:
    """Every trial's chart and table; [] when no run searched (no section at all)."""
    return [Section(t, capacity_chart(t), capacity_table(t)) for t in capacity_trials(view)]

