"""An experiment against a baseline experiment (`report --baseline`), and what differs in
their provenance (`report --baseline`, `compare`).

Plain data for the terminal table and the HTML partial (baseline.html.j2): one row per
pair of trials with the same definition (the pairs `compare` judges, made by
analyze.same_definition_pairs), each with req/s and p99 as NEW/BASELINE from
analyze.compare_trials (Welch's t-test on logarithms, stats.py): nothing is computed
here that `compare` does not compute the same way.

Provenance, as pyperf checks metadata before comparing: the host facts an experiment
stores (hostinfo.host_facts), the component versions its runs store, and the effective
settings of trials with the same definition (a default that changed between stacklab
versions: the spec is the same, the config is not). A difference is named with both
values, so that a ratio measured across two machines, two nginx releases or two
defaults is read as what it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Sequence

from rich.console import Group
from rich.text import Text

from ..analysis.analyze import (ExperimentView, MetricComparison, TrialSummary, compare_trials,
                                same_definition_pairs)
from ..knobs import ABSENT, setting_differences
from .fmt import DASH, Col, Fitted, Footnotes, multiple, number, p_cell, ratio_ci, times

# The host facts (hostinfo.host_facts) that change what a server can do; the host's name
# and the Python libraries that compute the statistics do not.
HOST_FACTS = ("cpu_model", "cores", "kernel", "memory_mib", "os")


@dataclass(frozen=True)
class Difference:
    """One fact, one component's version, or one effective setting that is not the same
    on both sides: the values as stored (a knob one side lacks: knobs.ABSENT)."""

    fact: str          # "kernel", "nginx", "nginx.sendfile", …
    base: Any
    new: Any

    @property
    def base_text(self) -> str:
        return str(self.base)          # ABSENT reads "no such knob"

    @property
    def new_text(self) -> str:
        return str(self.new)

    def __str__(self) -> str:
        return f"{self.fact} {self.base_text} vs {self.new_text}"

    def doc(self) -> dict:
        """For `compare --json` (A the base): the values as stored, null for a knob one
        side lacks."""
        return {"fact": self.fact, "a": None if self.base is ABSENT else self.base,
                "b": None if self.new is ABSENT else self.new}


def versions(view: ExperimentView) -> dict[str, str]:
    """Each component's version over all the experiment's runs ("1.22.1", or
    "1.22.1/1.24.0" when its runs did not all have the same one)."""
    seen: dict[str, list[str]] = {}
    for run in view.runs:
        for component, version in run.versions.items():
            found = seen.setdefault(component, [])
            if str(version) not in found:
                found.append(str(version))
    return {c: "/".join(v) for c, v in seen.items()}


def differences(base: ExperimentView, new: ExperimentView) -> list[Difference]:
    """The host facts both sides stored, the versions of the components both ran, and
    the effective settings of trials with the same definition, where they differ: host
    facts first (in HOST_FACTS order), then components by name, then settings. A
    component only one side ran is no difference (another stack, not another version)."""
    found = [Difference(k, str(base.host[k]), str(new.host[k])) for k in HOST_FACTS
             if k in base.host and k in new.host and base.host[k] != new.host[k]]
    vb, vn = versions(base), versions(new)
    return (found + [Difference(c, vb[c], vn[c]) for c in sorted(set(vb) & set(vn))
                     if vb[c] != vn[c]] + settings(base, new))


def settings(base: ExperimentView, new: ExperimentView) -> list[Difference]:
    """Each knob whose effective value (defaults included, as each run stored it) differs
    between trials of the two with the same definition, once, with the first pair's
    values, by knob."""
    knobs_b, knobs_n = _first_knobs(base), _first_knobs(new)
    found: dict[str, Difference] = {}
    for b, n in same_definition_pairs(base, new):
        if b.trial_id in knobs_b and n.trial_id in knobs_n:
            for d in setting_differences(knobs_b[b.trial_id], knobs_n[n.trial_id]):
                found.setdefault(d.knob, Difference(d.knob, d.a, d.b))
    return [found[k] for k in sorted(found)]


def _first_knobs(view: ExperimentView) -> dict[str, dict]:
    """Each trial's effective knobs, as its first stored run has them."""
    first: dict[str, dict] = {}
    for run in view.runs:
        first.setdefault(run.trial_id, run.knobs)
    return first


def warning(base: ExperimentView, new: ExperimentView) -> str | None:
    """One line naming every difference with both values (BASE's first), or None."""
    found = differences(base, new)
    if not found:
        return None
    return (f"warning: {new.name} (experiment {new.id}) and {base.name} (experiment "
            f"{base.id}) ran on different hosts, versions or settings ({base.name} vs "
            f"{new.name}): "
            + "; ".join(map(str, found)))


class Change(str, Enum):
    """What NEW is against BASELINE on one metric, by the 95% interval of the ratio."""

    BETTER = "better"
    WORSE = "worse"
    SAME = "same within ±5%"
    NONE = "no verdict"


@dataclass(frozen=True)
class MetricChange:
    """One metric of a pair: the baseline's and the new median, NEW/BASELINE with its
    interval and p, and what that says."""

    metric: str                       # "req/s", "p99 ms"
    base: float | None
    new: float | None
    ratio: float | None
    ci: tuple[float, float] | None
    p: float | None
    change: Change
    note: str = ""                    # why there is no verdict, or what bounds it

    @property
    def verdict(self) -> str:
        return self.change.value + (f" ({self.note})" if self.note else "")


def metric_change(m: MetricComparison) -> MetricChange:
    """`m` (analyze.compare_trials, A = baseline, B = new) as its decision says (better /
    worse / same / no verdict: analyze.decide, which weighs a side's bound), with a note
    saying why there is no verdict, what bounds it, or that a side ran on a busy host."""
    c, b, r, d = m.comparison, m.bound, m.reach, m.decision
    if c.p is None:                   # no interval: no verdict, whatever bounds it
        return MetricChange(m.metric, c.median_a, c.median_b, c.ratio, c.ci, c.p,
                            Change.NONE, "fewer than 2 successful runs a side")
    notes = ([] if b is None else [f"not a measurement: {b.why}" if b.relation == "?" else
                                   f"a bound, {b.relation} {multiple(c.ratio)}: {b.why}"])
    notes += [] if d.reason != "imprecise" else [m.imprecise]
    notes += [] if r is None else [r.why]
    change = {"better": Change.BETTER, "worse": Change.WORSE, "same": Change.SAME}.get(
        d.kind, Change.NONE)
    return MetricChange(m.metric, c.median_a, c.median_b, c.ratio, c.ci, c.p, change,
                        "; ".join(notes))


@dataclass(frozen=True)
class BaselineRow:
    trial: TrialSummary               # the new experiment's
    base: TrialSummary                # the baseline's, same definition
    rps: MetricChange
    p99: MetricChange


# which way is better, per metric of compare_trials shown here
METRICS = {"req/s": True, "p99 ms": False}


def row(base: TrialSummary, new: TrialSummary) -> BaselineRow:
    def name(s: TrialSummary) -> str:
        return f"{'the baseline' if s is base else 'the new'} trial ({s.label})"

    found = {m.metric: metric_change(m)
             for m in compare_trials(base, new, name) if m.metric in METRICS}
    return BaselineRow(new, base, found["req/s"], found["p99 ms"])


@dataclass(frozen=True)
class Baseline:
    """The whole comparison: what the baseline is, one row per pair, the trials of
    either side without a partner, and the provenance differences."""

    name: str
    id: int
    database: str                     # where the baseline was read from
    rows: list[BaselineRow]
    new_only: list[TrialSummary]      # trials of the new experiment without a partner
    base_only: list[TrialSummary]     # trials of the baseline without a partner
    differences: list[Difference]
    warning: str | None


def compare_to_baseline(new: ExperimentView, base: ExperimentView,
                        pairs: Sequence[tuple[TrialSummary, TrialSummary]],
                        database: str) -> Baseline:
    """`pairs`: (new trial, baseline trial) with the same definition, as
    same_definition_pairs(new, base) makes them."""
    paired_new = {n.trial_id for n, _ in pairs}
    paired_base = {b.trial_id for _, b in pairs}
    return Baseline(base.name, base.id, database, [row(b, n) for n, b in pairs],
                    [s for s in new.summaries if s.trial_id not in paired_new],
                    [s for s in base.summaries if s.trial_id not in paired_base],
                    differences(base, new), warning(base, new))


NOTE = ("baseline, new: medians of the runs (p99: each run's p99); new/baseline: ratio of "
        "geometric means with its 95% CI and p from Welch's t-test on log values, as "
        "`compare` computes them; p99: lower is better")


def _word(m: MetricChange) -> str:
    """The change in the one verdict vocabulary (better, worse, same, no verdict), and
    why there is none when it is not a flag the trial's note says."""
    word = "same" if m.change is Change.SAME else m.change.value
    return word + (f" ({m.note})" if m.p is None else "")


def table(b: Baseline, new: ExperimentView) -> Group:
    """The rows in the terminal, as `compare` prints two experiments: the trial named once
    per pair, each metric's change in a word, and what bounds a ratio said once per trial
    in a note below (⚑N), not in every row."""
    notes = Footnotes()
    t = Fitted(f"{new.name} (experiment {new.id})  against the baseline {b.name} "
               f"(experiment {b.id}, {b.database})",
               [Col("trial / id", words=True, key=True), Col("metric", words=True, key=True),
                Col("baseline"), Col("new"), Col("new/\nbaseline"), Col("95% CI"), Col("p"),
                Col("verdict", words=True)], caption=NOTE)
    ends = []
    for r in b.rows:
        marks = f"{notes.mark(r.base, 'baseline:')}{notes.mark(r.trial, 'new:')}".strip()
        name = [r.trial.label, f"{r.trial.trial_id} {marks}".strip()]
        for n, m in enumerate((r.rps, r.p99)):
            decimals = 2 if m.metric == "p99 ms" else 0
            ratio = times(m.ratio, 3, "")
            t.rows.append([name[n], m.metric, number(m.base, decimals),
                           number(m.new, decimals), ratio, ratio_ci(m.ci, 3, ""),
                           p_cell(m.p), _word(m)])
        ends.append(len(t.rows) - 1)
    for s, why in [*((s, "no baseline trial") for s in b.new_only),
                   *((s, "only in the baseline") for s in b.base_only)]:
        t.rows.append([f"{s.label}\n{s.trial_id}", "", "", "", "", "", "", why])
    t.ends = frozenset(ends)
    return Group(t, *(Text(n, style="yellow") for n in notes.notes))
