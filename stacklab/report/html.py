"""The self-contained HTML report: CSS, plotly.js once and every chart's figure inline,
no external resource, so it opens offline."""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import jinja2
from markupsafe import Markup

from .. import __version__
from ..analyze import ExperimentView
from ..errors import control_character
from ..recommend import CAUTIONS, best_combinations, effects
from ..stacks import REGISTRY
from ..store import Outcome
from ..verify import Status, Verdict
from . import charts, common_knobs, fmt, series_name
from .baseline import Baseline
from .headline import headlines


class Verbatim(Markup):
    """Text of our own that the page carries as it is: plotly.js (whose string literals
    hold control characters its code needs, and whose 4.8 MB a per-character check
    would take 0.4 s over) and the figures' ASCII-only JSON (charts.Drawn.json)."""


def _shown(value):
    """Every value the template prints, with the control characters a database written
    elsewhere (or a server's answer in a verdict) could bring removed: no NUL, no ESC
    ever reaches the page (Verbatim: our own, checked where it is made)."""
    if (isinstance(value, str) and not isinstance(value, Verbatim)
            and control_character(value)):
        return "".join(c for c in value if not control_character(c))
    return value


# The engine's fixed taxonomy of failed requests (engine/README.md), in its order.
ERROR_CLASSES = ("connect", "read", "write", "timeout", "tls", "bad_response",
                 "length_mismatch")

_env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent),
                          autoescape=True, undefined=jinja2.StrictUndefined,
                          finalize=_shown)


def _compression(view: ExperimentView, common: dict) -> list[tuple[str, dict]]:
    """(variant, content-verdict data) for text URLs, once per variant (lowest c)."""
    rows, seen = [], set()
    for s in sorted(view.summaries, key=lambda s: s.concurrency):
        name = series_name(s, common)
        for v in s.verdicts:
            data = v.data
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


@dataclass(frozen=True)
class TrialOutcomes:
    """One trial's row of its workload's outcome table: failed requests by error class
    and responses by status class over its successful runs, and its verdicts."""

    name: str
    concurrency: int
    completed: int
    errors: dict[str, int]          # engine error class → failed requests (all classes)
    status_classes: dict[str, int]  # "2xx", "5xx", … → responses
    verdicts: tuple[Verdict, ...]

    def count(self, status: Status) -> int:
        return sum(v.status is status for v in self.verdicts)


def outcomes(view: ExperimentView) -> list[TrialOutcomes]:
    """Each trial's error classes, status classes and verdicts, in the view's order."""
    common = common_knobs(view.summaries)
    rows = []
    for s in view.summaries:
        ok = [r.load for r in view.runs
              if r.trial_id == s.trial_id and r.outcome is Outcome.OK and r.load]
        errors, statuses = Counter(), Counter()
        for load in ok:
            errors.update(load.errors)
            # LoadReport does not type the status classes yet: the one figure read from
            # the stored report itself.
            statuses.update(load.raw.get("status_classes") or {})
        rows.append(TrialOutcomes(series_name(s, common), s.concurrency,
                                  sum(load.completed for load in ok), dict(errors),
                                  dict(sorted(statuses.items())), s.verdicts))
    return rows


def _figure(drawn: charts.Drawn) -> Verbatim:
    return Verbatim(drawn.json())


def _error_classes(sections) -> tuple[str, ...]:
    """The engine's classes, then any class a newer engine reported that it lacks."""
    seen = {e for _, _, trials in sections for t in trials for e in t.errors}
    return ERROR_CLASSES + tuple(sorted(seen - set(ERROR_CLASSES)))


@functools.cache
def plotly_js() -> Verbatim:
    """The plotly.js bundle shipped with the plotly package, inlined once per page (no
    CDN, no MathJax: nothing is fetched)."""
    from plotly.offline import get_plotlyjs
    return Verbatim(get_plotlyjs())


def render_html(view: ExperimentView, baseline: Baseline | None = None) -> str:
    common = common_knobs(view.summaries)
    sections = [(w, charts.draw(part), outcomes(part)) for w, part in by_workload(view)]
    found = effects(view, REGISTRY)
    return _env.get_template("report.html.j2").render(
        v=view, version=__version__, fmt=fmt, plotly_js=plotly_js(), figure=_figure,
        name=lambda s: series_name(s, common), common=common,
        headlines=headlines(view),
        flagged=[s for s in view.summaries if s.flagged],
        first_concurrency=min((s.concurrency for s in view.summaries), default=None),
        compression=_compression(view, common),
        sections=sections, error_classes=_error_classes(sections), Status=Status,
        effects=found, bests=best_combinations(view, REGISTRY, found), cautions=CAUTIONS,
        baseline=baseline)


def write_html(view: ExperimentView, path: Path, baseline: Baseline | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(view, baseline))
    return path
