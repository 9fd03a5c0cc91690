"""The self-contained HTML report: CSS, plotly.js once and every chart's figure inline,
no external resource, so it opens offline."""

from __future__ import annotations

import functools
import math
import sys
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import jinja2
from markupsafe import Markup

from .. import __version__
from ..analysis.analyze import (Decision, ExperimentView, MetricComparison, compare_trials)
from ..errors import control_character
from ..analysis.recommend import CAUTIONS, best_combinations, effects
from ..stacks import REGISTRY
from ..store import Outcome
from ..measure.verify import Status, Verdict
from . import charts, common_knobs, fmt, series_name
from .baseline import METRICS, Baseline
from .capacity import capacity_sections
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

    @property
    def checks(self) -> "Checks":
        return Checks(self.verdicts)


@dataclass(frozen=True)
class Checks:
    """A verification table, folded: what its summary says while it is closed."""

    verdicts: tuple[Verdict, ...]

    @property
    def line(self) -> str:
        """"12 checks: all PASS", or the WARNs and FAILs ("12 checks: 1 WARN, 2 FAIL")."""
        found = Counter(v.status for v in self.verdicts)
        bad = [f"{found[s]} {s}" for s in (Status.WARN, Status.FAIL) if found[s]]
        n = len(self.verdicts)
        if not n:
            return "no checks stored"
        return f"{n} check{'s' if n != 1 else ''}: " + (", ".join(bad) if bad else "all PASS")

    @property
    def css(self) -> str:
        """The class of its worst status: fail, warn or pass."""
        statuses = {v.status for v in self.verdicts}
        return next((s.lower() for s in (Status.FAIL, Status.WARN) if s in statuses), "pass")


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
            statuses.update(load.status_classes)
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
    """The plotly.js bundle inlined once per page (no CDN, no MathJax: nothing is
    fetched): its basic bundle (scatter, bar, pie: every trace the reports draw) where
    scripts/fetch-plotly-basic.py put it for the plotly package's own plotly.js version,
    else the full bundle that package ships (4.9 MB instead of 1.1)."""
    from plotly.offline import get_plotlyjs, get_plotlyjs_version
    return Verbatim(_basic_bundle(get_plotlyjs_version()) or get_plotlyjs())


def _basic_bundle(version: str) -> str | None:
    path = Path(sys.prefix) / "share" / "stacklab" / f"plotly-basic-{version}.min.js"
    return path.read_text() if path.is_file() else None


def judged(baseline: Baseline) -> dict[tuple[str, str], MetricComparison]:
    """(trial_id, metric) → the new trial against the baseline's (A the baseline), as
    analyze.compare_trials judges it: its `decision` (better, worse, same, no-verdict) is
    what the page colours by, a busy host's reach included."""
    return {(r.trial.trial_id, m.metric): m for r in baseline.rows
            for m in compare_trials(r.base, r.trial) if m.metric in METRICS}


def ratios(baseline: Baseline, found: dict[tuple[str, str], MetricComparison]
           ) -> list[charts.Ratio]:
    """Each row's req/s and p99 as the baseline chart draws them."""
    return [charts.Ratio(r.trial.label, metric, m.comparison.ratio, m.comparison.ci,
                         m.decision)
            for r in baseline.rows for metric in METRICS
            for m in (found[(r.trial.trial_id, metric)],)]


def against_baseline(baseline: Baseline, found: dict[tuple[str, str], MetricComparison]
                     ) -> str:
    """The report's first sentence with --baseline: how many trials are better, worse,
    the same or without a verdict on req/s, and the largest change that has a verdict."""
    rps = [(r, found[(r.trial.trial_id, "req/s")]) for r in baseline.rows]
    if not rps:
        return "no trial has the same definition as one of the baseline's"
    kinds = Counter(m.decision.kind for _, m in rps)
    said = "req/s " + ", ".join(f"{charts.VERDICT_WORDS[k]} in {kinds[k]}"
                                for k in charts.VERDICT_COLORS if kinds[k])
    said += f" of {len(rps)} trial{'s' if len(rps) != 1 else ''}"
    decided = [(r, m) for r, m in rps if m.decision.kind in ("better", "worse")]
    if decided:
        r, m = max(decided, key=lambda x: abs(math.log(x[1].comparison.ratio)))
        said += (f"; the largest: {r.trial.label} {fmt.times(m.comparison.ratio)} "
                 f"(95% CI {fmt.ratio_ci(m.comparison.ci)}), {m.decision.kind}")
    return said


# Why there is no verdict, for the reasons that carry no words of their own.
NO_VERDICT = {"few-runs": "fewer than 2 successful runs a side",
              "no-data": "nothing to compare"}


def verdict_words(m: MetricComparison) -> str:
    """The decision in the one vocabulary; for no verdict, its reason and what it stands
    on (the limited side, an interval too wide to call it the same)."""
    d = m.decision
    if d.kind != "no-verdict":
        return charts.VERDICT_WORDS[d.kind]
    why = (m.bound.why if m.bound else m.imprecise if d.reason == "imprecise"
           else NO_VERDICT.get(d.reason, ""))
    return f"no verdict ({d.reason})" + (f": {why}" if why else "")


def verdict_class(d: Decision | None) -> str:
    """The CSS class of a verdict (v-better, v-worse, v-same, v-no-verdict)."""
    return f"v-{d.kind}" if d else ""


def baseline_context(baseline: Baseline | None) -> dict:
    """What the page needs of the baseline (baseline.html.j2, the headline): the rows
    judged, the first sentence, the ratio chart; empty without --baseline."""
    if baseline is None:
        return {"baseline": None, "judged": {}, "baseline_sentence": None,
                "baseline_chart": None}
    found = judged(baseline)
    return {"baseline": baseline, "judged": found,
            "baseline_sentence": against_baseline(baseline, found),
            "baseline_chart": charts.baseline_chart(ratios(baseline, found), baseline.name)
            if baseline.rows else None}


# The functions every template of the page calls.
HELPERS = {"figure": _figure, "verdict_class": verdict_class, "verdict_words": verdict_words,
           "fmt": fmt}


def render_html(view: ExperimentView, baseline: Baseline | None = None) -> str:
    common = common_knobs(view.summaries)
    reference = baseline and charts.Reference(
        baseline.name, {r.trial.trial_id: r.base for r in baseline.rows})
    sections = [(w, charts.draw(part, reference), outcomes(part))
                for w, part in by_workload(view)]
    changes = effects(view, REGISTRY)
    first_c = min((s.concurrency for s in view.summaries), default=None)
    checked = [vd for s in view.summaries if s.concurrency == first_c for vd in s.verdicts]
    return _env.get_template("report.html.j2").render(
        v=view, version=__version__, plotly_js=plotly_js(), **HELPERS,
        name=lambda s: series_name(s, common), common=common,
        headlines=headlines(view), flagged=[s for s in view.summaries if s.flagged],
        first_concurrency=first_c, checks=Checks(tuple(checked)),
        compression=_compression(view, common),
        sections=sections, error_classes=_error_classes(sections), Status=Status,
        effects=changes, bests=best_combinations(view, REGISTRY, changes),
        cautions=CAUTIONS, capacity=capacity_sections(view), **baseline_context(baseline))


def write_html(view: ExperimentView, path: Path, baseline: Baseline | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(view, baseline))
    return path
