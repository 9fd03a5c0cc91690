"""The self-contained HTML report: inline SVG charts and CSS, no scripts, no external
resources, so it opens offline."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import jinja2

from ..errors import control_character

from .. import __version__
from ..analyze import Estimate, ExperimentView
from ..errors import control_character
from . import charts, common_knobs, series_name
from ..recommend import CAUTIONS, best_combinations, effects
from ..stacks import REGISTRY
from .headline import headlines

def _shown(value):
    """Every value the template prints, with the control characters a database written
    elsewhere (or a server's answer in a verdict) could bring removed: no NUL, no ESC
    ever reaches the page."""
    if isinstance(value, str) and control_character(value):
        return "".join(c for c in value if not control_character(c))
    return value


_env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent),
                          autoescape=True, undefined=jinja2.StrictUndefined,
                          finalize=_shown)


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _one(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f}"


def _ms(value_us: float | None) -> str:
    return "—" if value_us is None else f"{value_us / 1000:.2f}"


def _ci_ms(e: Estimate) -> str:
    if not e.ci:
        return "—"
    return ("range " if e.is_range else "") + f"{e.ci[0] / 1000:.2f}–{e.ci[1] / 1000:.2f}"


def _ci(e: Estimate) -> str:
    """A 95% CI, or with fewer than 6 values their range (min–max), called so."""
    if not e.ci:
        return "—"
    return ("range " if e.is_range else "") + f"{e.ci[0]:,.0f}–{e.ci[1]:,.0f}"


def _compression(view: ExperimentView, common: dict) -> list[tuple[str, dict]]:
    """(variant, content-verdict data) for text URLs, once per variant (lowest c)."""
    rows, seen = [], set()
    for s in sorted(view.summaries, key=lambda s: s.concurrency):
        name = series_name(s, common)
        for v in s.verdicts:
            data = v.get("data") or {}
            if "encoded_bytes" in data and (name, data["path"]) not in seen:
                seen.add((name, data["path"]))
                rows.append((name, data))
    return rows


def by_workload(view: ExperimentView) -> list[tuple[str, ExperimentView]]:
    """One part of the experiment per workload, for that workload's charts."""
    parts = []
    for workload in dict.fromkeys(s.workload for s in view.summaries):
        summaries = [s for s in view.summaries if s.workload == workload]
        ids = {s.trial_id for s in summaries}
        parts.append((workload, replace(view, summaries=summaries,
                                        runs=[r for r in view.runs if r.trial_id in ids])))
    return parts


def _vs(c) -> str:
    if c is None or c.ratio is None:
        return "—"
    return f"{c.ratio:.2f}× ({c.verdict})"


def render_html(view: ExperimentView) -> str:
    common = common_knobs(view.summaries)
    found = effects(view, REGISTRY)
    return _env.get_template("report.html.j2").render(
        v=view, version=__version__, num=_num, ms=_ms, one=_one, ci=_ci, ci_ms=_ci_ms, vs=_vs,
        name=lambda s: series_name(s, common), common=common,
        headlines=headlines(view),
        flagged=[s for s in view.summaries if s.flagged],
        first_concurrency=min((s.concurrency for s in view.summaries), default=None),
        compression=_compression(view, common),
        sections=[(w, charts.workload_charts(part)) for w, part in by_workload(view)],
        effects=found, bests=best_combinations(view, REGISTRY, found), cautions=CAUTIONS)


def write_html(view: ExperimentView, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(view))
    return path
