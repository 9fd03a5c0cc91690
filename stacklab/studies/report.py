"""The study report, as text (Rich) and as one self-contained HTML page: per finding
the study's figures and claim with their source, today's ratio with its interval and
verdicts, or why the finding is not expressible; the software then and now."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import jinja2
from rich.console import Console
from rich.table import Table

from .. import __version__
from ..report.fmt import DASH, p_value, ratio_ci, times
from .memory import FIELDS, MemoryRow
from .verdict import Row, metric_label

_env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent),
                          autoescape=True, undefined=jinja2.StrictUndefined)


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

    def held(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.rows:
            if r.status == "measured":
                out[r.direction] = out.get(r.direction, 0) + 1
        return out


def claim_text(f) -> str:
    c = f.claim
    then = f" ({times(c.ratio)})" if c.ratio is not None else ""
    sign = {"b>a": ">", "b<a": "<", "b=a": "≈"}[c.direction]
    return f"{c.b} {sign} {c.a} on {c.metric}{then}"


def figures_text(f) -> str:
    return "; ".join(f"{fig.value:g} {fig.unit} ({fig.what})" for fig in f.figures)


def now_text(r: Row) -> str:
    if r.measured is None:
        return DASH
    c = r.measured.comparison
    bound = f" {r.measured.bound.relation}" if r.measured.bound else ""
    return (f"{bound}{times(c.ratio)} [{ratio_ci(c.ci)}] p {p_value(c.p)}"
            f" ({metric_label(r.measured.metric)})")


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


def print_study(report: StudyReport, out: Console) -> None:
    s = report.study
    held = ", ".join(f"{n} {v}" for v, n in sorted(report.held().items()))
    out.print(f"{s.id}: {s.title} ({s.kind}; {s.source})" + (" — quick" if report.quick else ""),
              markup=False, highlight=False)
    out.print(f"{len(report.rows)} findings: {report.count('measured')} measured "
              f"({held or 'none'}), {report.count('not expressible')} not expressible, "
              f"{report.count('not measured')} not measured", markup=False, highlight=False)
    table = Table(title=f"{s.id}: then and now")
    for col in ("finding", "then (study)", "now: B/A [95% CI]", "direction", "size", "source"):
        table.add_column(col, overflow="fold")
    for r in report.rows:
        f = r.finding
        now = now_text(r) if r.status == "measured" else f"{r.status}: {r.why}"
        table.add_row(f"{f.id}\n{f.title}", claim_text(f), now, r.direction, r.size,
                      f.section)
    out.print(table)
    for r in report.rows:
        if r.measured is not None:
            now = ", ".join(f"{c} {v}" for c, v in r.measured.versions.items())
            out.print(f"  {r.finding.id}: A = {r.measured.a.label}; B = {r.measured.b.label}"
                      f" ({r.measured.experiment}; now {now})"
                      + (f" — {r.note}" if r.note else ""),
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


def write_study_html(report: StudyReport, path: Path) -> Path:
    html = _env.get_template("study.html.j2").render(
        r=report, s=report.study, claim_text=claim_text, figures_text=figures_text,
        now_text=now_text, software=software_rows(report), version=__version__,
        metric_label=metric_label, memory_columns=[c for c, _ in FIELDS], mib=_mib)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html)
    return path
