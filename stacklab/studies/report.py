"""The study report, as text (Rich), as one self-contained HTML page and as a JSON
document: per finding the study's figures and claim with their source, today's ratio with
its interval and verdicts, or why the finding is not expressible; the software then and
now. The page draws a forest plot (each finding's ratio today against the study's figure)
with the plotly.js it inlines, and links to nothing but the digest the package ships."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import jinja2
from rich.console import Console
from rich.table import Table

from .. import __version__
from ..errors import SpecError
from ..report.charts import Drawn, label, ms_ticks
from ..report.fmt import DASH, multiple, p_value, ratio_ci, times
from ..report.html import Verbatim, plotly_js
from .findings import DIGEST, seeds_section
from .memory import FIELDS, MemoryRow
from .verdict import DIRECTIONS, SIZES, Row, metric_label, same_band

_env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent),
                          autoescape=True, undefined=jinja2.StrictUndefined)

# The study JSON (study_document; written beside the HTML, printed by `study --json`).
# 1: each finding's verdict (better, worse, same, no-verdict) with its reason code.
# 2: counts.measured leaves out the demonstrations (counts.demonstrations, holds_by_size);
#    same_band; per finding `demonstration`, and in `now` the unit, the medians, the best
#    runs, `per` and the study's ratio at the levels compared (then_ratio, then_source).
DOCUMENT_VERSION = 2
# The report over the five (all_document, `study all`): its own kind and version.
# 1: counts per study and overall, and each study's document whole.
ALL_DOCUMENT_VERSION = 1


@dataclass(frozen=True)
class Source:
    """A study's full text, as a report cites it. None of the five grants a right to
    redistribute it (`notice`: its own words, "" when it states none, which reserves
    every right), so none ships: a finding is cited by the digest the package ships
    (SEEDS.md) and by the full text's title and section, without a link."""

    title: str                # as the text gives it
    author: str
    published: str
    lang: str                 # BCP 47: the page marks the text's title and sections
                              # with it, so a CJK section is drawn with a CJK font
    notice: str


SOURCES = {
    "seeds/000_86f3627d2001f616.txt": Source(
        "Možnosti optimalizace výkonu LAMP (Linux/Apache/MySQL/PHP)", "Pavel Kotlář",
        "master's thesis, Brno University of Technology, 2009", "cs",
        "© Pavel Kotlář, 2009"),
    "seeds/001_f38280f916ed1095.txt": Source(
        "Optymalizacja wydajności serwera WWW (fragment pracy)", "Zatorski.Net",
        "master's thesis excerpt, 2007", "pl", "© 2002-2018 Zatorski.Net"),
    "seeds/002_60cb8b6f359db973.txt": Source(
        "apache/php 性能大幅提升关键参数", "", "blog post", "zh", ""),
    "seeds/003_7a7a1757cd01034e.txt": Source(
        "Webserver Performance Tuning", "Jan Kneschke", "talk slides", "de", ""),
    "seeds/004_2a310da3b5b5c4e8.txt": Source(
        "Implementering av prestandatest för att undersöka skalbarheten utav två webbservrar",
        "Niclas Tall", "bachelor's thesis, Lund University, 2011", "sv",
        "© Copyright Niclas Tall"),
}

# What the mark before a ratio says (now_text), with the forest plot's symbol for it.
BOUND_MARKS = (
    ("≥", "a triangle pointing right", "a bound: a side was held back (by the load "
     "engine, by memory), the true ratio is at least this"),
    ("≤", "a triangle pointing left", "a bound: the true ratio is at most this"),
    ("?", "an open circle", "not a measurement: both sides were held back, a side served "
     "errors, or the metric has no known direction under a limit; shown, never judged"),
)
# The forest plot's colour per direction, and its symbol per bound.
DIRECTION_COLORS = {"holds": "#2ca02c", "reversed": "#d62728", "does not hold": "#d62728",
                    "not shown": "#ff7f0e", "no verdict": "#888888"}
BOUND_SYMBOLS = {None: "circle", "≥": "triangle-right", "≤": "triangle-left",
                 "?": "circle-open"}
THEN_COLOR = "#000000"
REACH_COLOR = "#9ecae1"


def source_of(study) -> Source:
    try:
        return SOURCES[study.source]
    except KeyError:
        raise SpecError(study.file, "study.source", study.source, "not among the texts a "
                        "report can cite (studies/report.py SOURCES)") from None


def source_text(study) -> str:
    """The full text's reference, as the report writes it (no link: it does not ship)."""
    src = source_of(study)
    who = f"{src.author}, " if src.author else ""
    return f"{who}“{src.title}” ({src.published})"


def notice_text(study) -> str:
    src = source_of(study)
    said = f"its notice: {src.notice}" if src.notice else "it states no licence"
    return (f"Its full text is not shipped ({said}; no right to redistribute it is "
            "granted): each finding names its section.")


@dataclass(frozen=True)
class StudyReport:
    study: object                          # findings.Study
    quick: bool
    rows: list[Row]
    now: dict[str, str]                    # component -> version measured today
    host: dict                             # host facts of the newest experiment
    experiments: list[tuple[str, str]]     # (experiment, status or why it is missing)
    figures_missing: list[str]             # SEEDS.md figures no finding quotes
    memory: list[MemoryRow] = field(default_factory=list)   # steps that list memory

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.rows)

    def tested(self) -> list[Row]:
        """The measured findings that could have failed (demonstrations apart)."""
        return [r for r in self.rows if r.status == "measured" and not r.demonstration]

    def demonstrations(self) -> list[Row]:
        """The measured findings that hold by construction, counted apart."""
        return [r for r in self.rows if r.status == "measured" and r.demonstration]

    def held(self) -> dict[str, int]:
        """How many findings that could have failed have each direction, in DIRECTIONS'
        order."""
        out = {d: sum(r.direction == d for r in self.tested()) for d in DIRECTIONS}
        return {d: n for d, n in out.items() if n}

    def sized(self, direction: str = "holds") -> dict[str, int]:
        """Of the findings with `direction`, how many have each size (SIZES' order, then
        "no size": the study gave no ratio, or today's interval is open on the side that
        would say it)."""
        mine = [r for r in self.tested() if r.direction == direction]
        out = {z: sum(r.size == z for r in mine) for z in SIZES}
        out["no size"] = sum(not r.size for r in mine)
        return {z: n for z, n in out.items() if n}

    @cached_property
    def band(self) -> tuple[float, float]:
        """The band a claim of no difference must lie in (verdict.same_band)."""
        return same_band(self.study.findings)


def counts_text(report: StudyReport) -> str:
    """The summary: findings measured by verdict, those that hold by size, the
    demonstrations apart, the rest."""
    parts = []
    for v, n in report.held().items():
        sized = report.sized(v) if v == "holds" else {}
        parts.append(f"{n} {v}" + (f" ({', '.join(f'{k} {z}' for z, k in sized.items())})"
                                   if sized else ""))
    demos = report.demonstrations()
    shown = sum(r.direction == "holds" for r in demos)
    return (f"{len(report.rows)} findings: {len(report.tested())} measured "
            f"({', '.join(parts) or 'none'}), {len(demos)} "
            f"demonstration{'' if len(demos) == 1 else 's'} ({shown} shown), "
            f"{report.count('not expressible')} not expressible, "
            f"{report.count('not measured')} not measured")


def band_text(report: StudyReport) -> str:
    return f"±{(report.band[1] - 1) * 100:.0f}%"


# What the report's words mean (docs/studies.md says the same).
MEANINGS = ('"holds": today\'s interval lies wholly on the study\'s side of 1; "reversed": '
            'wholly on the other; "not shown": it holds 1. A claim of no difference holds '
            'when the whole interval lies within {band} (no wider than the smallest effect '
            'the study calls real, widened only to the claim\'s own figure where the study '
            'called that much no difference) and "does not hold" when it lies wholly '
            'outside. Size, by distance from 1 on the study\'s side: "stronger now" or '
            '"weaker now" when the study\'s ratio lies outside today\'s interval, "same size" '
            'when inside; none for a reversal or where the direction has no verdict. A '
            'demonstration holds by construction (the run was verified to do what the claim '
            'says) and is counted apart; one not shown points at the measurement, not at the '
            'study. "not expressible": the condition cannot be built here, for the reason '
            'given.')


def claim_text(f) -> str:
    c = f.claim
    then = f" ({times(c.ratio)})" if c.ratio is not None else ""
    sign = {"b>a": ">", "b<a": "<", "b=a": "≈"}[c.direction]
    return f"{c.b} {sign} {c.a} on {c.metric}{then}"


def figures_text(f) -> str:
    return "; ".join(f"{fig.value:g} {fig.unit} ({fig.what})" for fig in f.figures)


def now_text(r: Row) -> str:
    """Today's ratio: a bound's mark (BOUND_MARKS) before it, its 95% CI and p."""
    if r.measured is None:
        return DASH
    c = r.measured.comparison
    bound = f"{r.measured.bound.relation} " if r.measured.bound else ""
    return (f"{bound}{times(c.ratio)} [{ratio_ci(c.ci)}] p {p_value(c.p)}"
            f" ({metric_label(r.measured.metric)})")


def sides_text(r: Row) -> str:
    """Today's A and B in the metric's own unit (the quantity beside the study's)."""
    m = r.measured
    if m is None or None in m.medians:
        return ""
    unit = metric_label(m.metric)
    text = f"now A {m.medians[0]:.4g}, B {m.medians[1]:.4g} ({unit}, medians)"
    if m.per is not None:
        q = m.per.value(*m.medians)
        how = "(B − A)" if m.per.of == "difference" else "B"
        text += f"; {how} / {m.per.count:g} = {q:.4g} {unit.split(' (')[0]} per {m.per.what}"
    if None not in m.best:
        n = min(m.comparison.n)
        # a side over several trials (a mean over levels, a sum) has a best repetition,
        # not the study's best run at each level
        what = (f"best of {n} repetitions" if "+" in m.a.trial_id + m.b.trial_id
                else f"best of {n} runs, as the studies took it")
        text += (f"; {what}: A {m.best[0]:.4g}, B {m.best[1]:.4g}"
                 + (f" ({times(m.best[1] / m.best[0])})" if m.best[0] else ""))
    return text


def then_text(r: Row) -> str:
    """The study's own ratio at the levels compared, where the check gives it: what the
    size verdict sets today's against (the claim's ratio may be a mean over others)."""
    m = r.measured
    if m is None or m.then is None:
        return ""
    return f"the study at these levels: {times(m.then)} ({m.then_source})"


def why_text(r: Row) -> str:
    """The bound's words behind a verdict, or the busy host's beside it ("" when neither)."""
    m = r.measured
    if m is None or (m.bound is None and m.reach is None):
        return ""
    return m.verdict


def software_rows(report: StudyReport) -> list[tuple[str, str, str, str]]:
    """(component, then: name version, where the study says it, now)."""
    return [(s.component, f"{s.name} {s.version}".strip(), s.section, now_version(report, s.component))
            for s in report.study.software]


def now_version(report: StudyReport, component: str) -> str:
    """Today's version of a component the study names: its own entry in the runs'
    versions, else its variants' (php: php-fpm, php-cgi, mod_php), the kernel from the
    host facts."""
    if component == "kernel":
        return report.host.get("kernel", DASH)
    if component in report.now:
        return report.now[component]
    found = [f"{k} {v}" for k, v in sorted(report.now.items())
             if k.startswith(component) or k == f"mod_{component}"]
    return ", ".join(found) or DASH


# --- the JSON document ----------------------------------------------------------------

def _finite(x: float | None) -> float | None:
    """JSON has no infinity: an interval open on one side says so with null."""
    return x if x is not None and math.isfinite(x) else None


def _kebab(words: str) -> str | None:
    return words.replace(" ", "-") if words else None


def finding_document(r: Row) -> dict:
    """One finding: the study's claim, today's measurement and the verdicts, the verdict
    in the one vocabulary of every command (analyze.VERDICTS) with its reason code (a
    finding not measured: no-verdict, no-data; `status` and `why` say more)."""
    f, m, d = r.finding, r.measured, r.decision
    now = None
    if m is not None:
        c, within = m.comparison, m.interval
        now = {"experiment": m.experiment, "metric": m.metric,
               "a": m.a.label, "b": m.b.label, "ratio": c.ratio,
               "ci_low": c.ci[0] if c.ci else None, "ci_high": c.ci[1] if c.ci else None,
               "p": c.p, "runs": list(c.n),
               # where the true ratio can lie: the CI, opened by a bound (null: no limit
               # that way)
               "reach_low": _finite(within[0]) if within else None,
               "reach_high": _finite(within[1]) if within else None,
               "bound": None if m.bound is None else {
                   "relation": m.bound.relation, "reason": m.bound.reason, "why": m.bound.why},
               "host": None if m.reach is None else {
                   "slowdown_a": _finite(m.reach.a), "slowdown_b": _finite(m.reach.b),
                   "why": m.reach.why},
               "versions": m.versions,
               "unit": metric_label(m.metric),    # of the medians, best runs and per
               "median_a": m.medians[0], "median_b": m.medians[1],
               # the best run a side, the seeds' statistic: shown, never judged
               "best_a": m.best[0], "best_b": m.best[1],
               # today's quantity per unit, set beside the study's (S4's 430 KB a process)
               "per": None if m.per is None or None in m.medians else {
                   "value": m.per.value(*m.medians), "count": m.per.count,
                   "what": m.per.what, "of": m.per.of},
               # the study's ratio at the levels compared (the size is judged against it)
               "then_ratio": m.then, "then_source": m.then_source or None}
    return {"id": f.id, "title": f.title, "section": f.section, "status": r.status,
            "why": r.why or None, "note": r.note or None,
            "claim": {"metric": f.claim.metric, "a": f.claim.a, "b": f.claim.b,
                      "direction": f.claim.direction, "ratio": f.claim.ratio},
            "figures": [{"value": g.value, "unit": g.unit, "what": g.what} for g in f.figures],
            "now": now, "verdict": d.kind, "reason": d.reason,
            "demonstration": f.demonstration or None,
            "direction": _kebab(r.direction), "size": _kebab(r.size)}


def study_document(report: StudyReport) -> dict:
    """The study as data: what `study --json` prints and what is written beside the
    HTML report."""
    s = report.study
    return {"schema_version": DOCUMENT_VERSION, "study": s.id, "title": s.title,
            "kind": s.kind, "quick": report.quick, "stacklab": __version__,
            "source": {"digest": f"stacklab/studies/{DIGEST.name}", "section": s.id,
                       "full_text": source_text(s), "shipped": False},
            "counts": {"measured": len(report.tested()),
                       "demonstrations": len(report.demonstrations()),
                       "not_expressible": report.count("not expressible"),
                       "not_measured": report.count("not measured"),
                       **{d.replace(" ", "_"): n for d, n in report.held().items()},
                       "holds_by_size": {z.replace(" ", "_"): n
                                         for z, n in report.sized("holds").items()}},
            "same_band": list(report.band),
            "findings": [finding_document(r) for r in report.rows],
            "experiments": [{"name": n, "status": st} for n, st in report.experiments],
            "figures_missing": report.figures_missing}


# --- the forest plot --------------------------------------------------------------------

def forest_plot(report: StudyReport) -> Drawn:
    """One row per finding: today's ratio B/A with its 95% CI as a horizontal bar on a
    log axis (a symbol for a bound), coloured by its direction; the study's own ratio as
    an open diamond; where a busy host could have moved it, a pale bar; a line at 1."""
    ids = [r.finding.id for r in report.rows]
    marks, xs, traces = [], [], []
    for r in report.rows:
        m = r.measured
        if m is None or m.comparison.ratio is None:
            continue
        c = m.comparison
        lo, hi = c.ci or (c.ratio, c.ratio)
        marks.append({"id": r.finding.id, "ratio": c.ratio, "low": lo, "high": hi,
                      "direction": r.direction, "verdict": r.decision.kind,
                      "bound": m.bound.relation if m.bound else None,
                      "reach": m.interval if m.bound else None, "text": now_text(r),
                      "said": r.direction_text})
        xs += [c.ratio, lo, hi]
    # the ratio each size was judged against: the study's at the levels compared where
    # its tables give them (Row.then), else its claim's
    then = [(r.finding.id, r.then if r.measured else r.finding.claim.ratio)
            for r in report.rows]
    then = [(i, t) for i, t in then if t is not None]
    xs += [t for _, t in then]
    reach = [(mk["id"], *mk["reach"]) for mk in marks if mk["reach"]]
    xs += [x for _, lo, hi in reach for x in (lo, hi) if 0 < x < math.inf]
    low, high = min([1.0, *xs]), max([1.0, *xs])
    # every finding gets its row, measured or not
    traces.append({"type": "scatter", "mode": "markers", "x": [1.0] * len(ids), "y": ids,
                   "marker": {"opacity": 0}, "showlegend": False, "hoverinfo": "skip"})
    if reach:
        def clip(x: float) -> float:          # an open side (0 or inf) ends at the axis
            return min(max(x, low), high)
        traces.append({"type": "scatter", "mode": "lines", "name": "where a limited side leaves it",
                       "x": [x for _, lo, hi in reach for x in (clip(lo), clip(hi), None)],
                       "y": [y for i, _, _ in reach for y in (i, i, None)],
                       "line": {"color": REACH_COLOR, "width": 8}, "hoverinfo": "skip"})
    for direction in DIRECTIONS:
        mine = [mk for mk in marks if mk["direction"] == direction]
        if not mine:
            continue
        color = DIRECTION_COLORS[direction]
        traces.append({
            "type": "scatter", "mode": "markers", "name": direction,
            "x": [mk["ratio"] for mk in mine], "y": [mk["id"] for mk in mine],
            "marker": {"color": color, "size": 10,
                       "symbol": [BOUND_SYMBOLS[mk["bound"]] for mk in mine]},
            "error_x": {"type": "data", "symmetric": False, "color": color, "width": 4,
                        "array": [mk["high"] - mk["ratio"] for mk in mine],
                        "arrayminus": [mk["ratio"] - mk["low"] for mk in mine]},
            "customdata": [[label(mk["text"]), label(mk["said"])] for mk in mine],
            "hovertemplate": "%{y}: %{customdata[0]}<br>%{customdata[1]}<extra></extra>"})
    if then:
        traces.append({"type": "scatter", "mode": "markers", "name": "the study's figure",
                       "x": [t for _, t in then], "y": [i for i, _ in then],
                       "marker": {"color": THEN_COLOR, "size": 11, "symbol": "diamond-open",
                                  "line": {"width": 2}},
                       "customdata": [times(t) for _, t in then],
                       "hovertemplate": "%{y}: then %{customdata}<extra></extra>"})
    ticks = ms_ticks(low, high)
    layout = {
        "title": {"text": f"{label(report.study.id)}: today's B/A (95% CI) against the "
                          "study's figure", "font": {"size": 13}, "x": 0.0, "xanchor": "left"},
        "height": 140 + 26 * len(ids), "margin": {"l": 200, "r": 20, "t": 50, "b": 50},
        "xaxis": {"type": "log", "title": {"text": "B/A (log scale; 1 = no difference)"},
                  "tickvals": ticks, "ticktext": [multiple(t) for t in ticks],
                  "range": [math.log10(low / 1.15), math.log10(high * 1.15)],
                  "gridcolor": "#e5e5e5", "zeroline": False},
        "yaxis": {"type": "category", "categoryorder": "array", "categoryarray": ids,
                  "autorange": "reversed", "automargin": True, "gridcolor": "#f0f0f0"},
        "shapes": [{"type": "line", "xref": "x", "x0": 1, "x1": 1, "yref": "paper",
                    "y0": 0, "y1": 1, "line": {"color": "#444444", "width": 1,
                                               "dash": "dash"}}],
        "legend": {"x": 1.02, "xanchor": "left", "y": 1.0, "yanchor": "top",
                   "font": {"size": 11}},
        "showlegend": True, "hovermode": "closest", "plot_bgcolor": "#ffffff",
        "font": {"family": "system-ui, sans-serif", "size": 12}}
    return Drawn({"data": traces, "layout": layout},
                 {"rows": ids, "marks": marks, "then": then, "xticks": ticks})


# --- text -------------------------------------------------------------------------------

def print_study(report: StudyReport, out: Console) -> None:
    s = report.study
    out.print(f"{s.id}: {s.title} ({s.kind}; SEEDS.md § {s.id}; {source_text(s)})"
              + (" — quick" if report.quick else ""), markup=False, highlight=False)
    out.print(counts_text(report), markup=False, highlight=False)
    table = Table(title=f"{s.id}: then and now")
    for col in ("finding", "then (study)", "now: B/A [95% CI]", "B vs A", "direction",
                "size", "section"):
        table.add_column(col, overflow="fold")
    for r in report.rows:
        f = r.finding
        now = now_text(r) if r.status == "measured" else f"{r.status}: {r.why}"
        direction = r.direction_text + (" (demonstration)" if r.demonstration else "")
        table.add_row(f"{f.id}\n{f.title}", claim_text(f), now,
                      r.decision.kind if r.measured else DASH, direction, r.size,
                      f.section)
    out.print(table)
    out.print("Before a ratio: " + "; ".join(f"{mark} {what}" for mark, _, what in BOUND_MARKS),
              markup=False, highlight=False)
    out.print(MEANINGS.format(band=band_text(report)), markup=False, highlight=False)
    for r in report.rows:
        if r.measured is not None:
            now = ", ".join(f"{c} {v}" for c, v in r.measured.versions.items())
            why = why_text(r)
            sides = "; ".join(t for t in (sides_text(r), then_text(r)) if t)
            demo = (f" — demonstration: {r.demonstration}" if r.demonstration else "")
            out.print(f"  {r.finding.id}: A = {r.measured.a.label}; B = {r.measured.b.label}"
                      f" ({r.measured.experiment}; now {now})"
                      + (f" — {sides}" if sides else "") + demo
                      + (f" — {r.note}" if r.note else "") + (f" — {why}" if why else ""),
                      markup=False, highlight=False)
    sw = Table(title="software: then (the study) and now (this run's provenance)")
    for col in ("component", "then", "where the study says it", "now"):
        sw.add_column(col, overflow="fold")
    for row in software_rows(report):
        sw.add_row(*row)
    out.print(sw)
    if report.memory:
        out.print(memory_table(report.memory))
    if report.figures_missing:
        out.print(f"SEEDS.md figures no finding quotes: {', '.join(report.figures_missing)}",
                  style="yellow", markup=False)


def memory_table(rows: list[MemoryRow]) -> Table:
    table = Table(title="memory per component and worker process (S2, S4): idle, under "
                        "load, after; median over the runs")
    for col in ("trial", "component", *(c for c, _ in FIELDS), "per client MiB"):
        table.add_column(col, justify="left" if col in ("trial", "component") else "right",
                         overflow="fold")
    for m in rows:
        table.add_row(m.trial, m.component, *(_mib(m.figures[c]) for c, _ in FIELDS),
                      _mib(m.per_client_mib, 3))
    return table


def _mib(value: float | None, decimals: int = 1) -> str:
    return DASH if value is None else f"{value:,.{decimals}f}"


# --- HTML -------------------------------------------------------------------------------

def digest_href(page: Path) -> str:
    """The shipped digest, relative to the page's directory: the only file the page links
    to (a relative link works wherever the package lies beside the page's disk)."""
    return Path(os.path.relpath(DIGEST.resolve(), page.resolve().parent)).as_posix()


def render_study_html(report: StudyReport, page: Path) -> str:
    s = report.study
    return _env.get_template("study.html.j2").render(
        r=report, s=s, claim_text=claim_text, figures_text=figures_text,
        now_text=now_text, why_text=why_text, software=software_rows(report),
        counts_text=counts_text, sides_text=sides_text, then_text=then_text,
        meanings=MEANINGS.format(band=band_text(report)),
        version=__version__, metric_label=metric_label,
        memory_columns=[c for c, _ in FIELDS], mib=_mib, plotly_js=plotly_js(),
        forest=Verbatim(forest_plot(report).json()), bound_marks=BOUND_MARKS,
        colors=DIRECTION_COLORS, source=source_of(s), source_text=source_text(s),
        notice=notice_text(s), digest=digest_href(page),
        digest_section=seeds_section(DIGEST.read_text(encoding="utf-8"), s.id).strip())


def write_study_html(report: StudyReport, path: Path) -> Path:
    html = render_study_html(report, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html)
    return path


# --- the five in one report -------------------------------------------------------------

# The columns of the report over the five, in order: what study_counts gives.
COUNT_COLUMNS = ("findings", "measured", "holds", "holds: stronger now", "holds: same size",
                 "holds: weaker now", "holds: no size", "not shown", "reversed",
                 "does not hold", "no verdict", "demonstrations",
                 "demonstrations not shown", "not expressible", "not measured")


def study_counts(report: StudyReport) -> dict[str, int]:
    """A study's findings counted as the report over the five shows them (COUNT_COLUMNS):
    the verdicts of those that could have failed, "holds" split by size, the
    demonstrations (and those not shown), the findings not expressible and those not
    measured."""
    held, sized = report.held(), report.sized("holds")
    demos = report.demonstrations()
    return {"findings": len(report.rows), "measured": len(report.tested()),
            "holds": held.get("holds", 0),
            **{f"holds: {z}": sized.get(z, 0) for z in (*SIZES, "no size")},
            **{d: held.get(d, 0) for d in DIRECTIONS if d != "holds"},
            "demonstrations": len(demos),
            "demonstrations not shown": sum(r.direction != "holds" for r in demos),
            "not expressible": report.count("not expressible"),
            "not measured": report.count("not measured")}


def overall_counts(per: list[dict[str, int]]) -> dict[str, int]:
    return {c: sum(counts[c] for counts in per) for c in COUNT_COLUMNS}


def counts_table(reports: list[StudyReport]) -> list[tuple[str, list[int]]]:
    """One row per study and one for all five, in COUNT_COLUMNS' order."""
    per = [study_counts(r) for r in reports]
    rows = [(r.study.id, [c[k] for k in COUNT_COLUMNS]) for r, c in zip(reports, per)]
    return rows + [("all five", [overall_counts(per)[k] for k in COUNT_COLUMNS])]


def all_document(reports: list[StudyReport]) -> dict:
    """The five studies as data: the counts per study and overall, and each study's
    document (study_document) whole."""
    key = {c: c.replace(": ", "_").replace(" ", "_") for c in COUNT_COLUMNS}
    per = [study_counts(r) for r in reports]
    return {"kind": "studies", "schema_version": ALL_DOCUMENT_VERSION,
            "stacklab": __version__, "quick": all(r.quick for r in reports),
            "counts": {"all": {key[c]: n for c, n in overall_counts(per).items()},
                       **{r.study.id: {key[c]: counts[c] for c in COUNT_COLUMNS}
                          for r, counts in zip(reports, per)}},
            "studies": [study_document(r) for r in reports]}


def print_all(reports: list[StudyReport], out: Console) -> None:
    """The counts per study and for all five, then every finding's line."""
    table = Table(title="the five studies: then and now")
    for col in ("study", *COUNT_COLUMNS):
        table.add_column(col, justify="left" if col == "study" else "right", overflow="fold")
    for label_, cells in counts_table(reports):
        table.add_row(label_, *(str(n) for n in cells))
    out.print(table)
    out.print(MEANINGS.format(band="the study's band (each study's report says it)"),
              markup=False, highlight=False)
    lines = Table(title="every finding")
    for col in ("study", "finding", "then (study)", "now: B/A [95% CI]", "direction", "size"):
        lines.add_column(col, overflow="fold")
    for r in reports:
        for row in r.rows:
            now = now_text(row) if row.status == "measured" else f"{row.status}: {row.why}"
            direction = row.direction_text + (" (demonstration)" if row.demonstration else "")
            lines.add_row(r.study.id, row.finding.id, claim_text(row.finding), now,
                          direction, row.size)
    out.print(lines)


def write_all_html(reports: list[StudyReport], path: Path) -> Path:
    """The page over the five, beside each study's own page (study-sN[-quick].html)."""
    quick = all(r.quick for r in reports)
    pages = [(r, f"study-{r.study.id.lower()}{'-quick' if quick else ''}.html")
             for r in reports]
    html = _env.get_template("studies.html.j2").render(
        quick=quick, version=__version__, pages=pages, columns=("study", *COUNT_COLUMNS),
        table=counts_table(reports), claim_text=claim_text, now_text=now_text,
        meanings=MEANINGS.format(band="the study's band (each study's page says it)"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html)
    return path
