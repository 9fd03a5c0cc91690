"""The self-contained HTML report: inline SVG charts and CSS, no external resources."""

from __future__ import annotations

from pathlib import Path

import jinja2

from .. import __version__
from ..analyze import ExperimentView
from .charts import latency_chart, throughput_chart

_env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent),
                          autoescape=True, undefined=jinja2.StrictUndefined)


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _one(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def _ms(value_us: float | None) -> str:
    return "—" if value_us is None else f"{value_us / 1000:.2f}"


def render_html(view: ExperimentView) -> str:
    return _env.get_template("report.html.j2").render(
        v=view, version=__version__, num=_num, ms=_ms, one=_one,
        throughput_svg=throughput_chart(view), latency_svg=latency_chart(view))


def write_html(view: ExperimentView, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(view))
    return path
