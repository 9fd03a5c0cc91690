"""The self-contained HTML report: inline SVG charts and CSS, no scripts, no external
resources, so it opens offline."""

from __future__ import annotations

from pathlib import Path

import jinja2

from .. import __version__
from ..analyze import Estimate, ExperimentView
from . import charts, common_knobs, series_name
from .headline import headlines

_env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent),
                          autoescape=True, undefined=jinja2.StrictUndefined)


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _one(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f}"


def _ms(value_us: float | None) -> str:
    return "—" if value_us is None else f"{value_us / 1000:.2f}"


def _ci(e: Estimate) -> str:
    return "—" if not e.ci else f"{e.ci[0]:,.0f}–{e.ci[1]:,.0f}"


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


def render_html(view: ExperimentView) -> str:
    common = common_knobs(view.summaries)
    return _env.get_template("report.html.j2").render(
        v=view, version=__version__, num=_num, ms=_ms, one=_one, ci=_ci,
        name=lambda s: series_name(s, common), common=common,
        headlines=headlines(view),
        flagged=[s for s in view.summaries if s.flagged],
        first_concurrency=min((s.concurrency for s in view.summaries), default=None),
        compression=_compression(view, common),
        charts={"throughput": charts.throughput_chart(view),
                "latency": charts.latency_chart(view),
                "cpu": charts.cpu_chart(view), "memory": charts.memory_chart(view)})


def write_html(view: ExperimentView, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(view))
    return path
