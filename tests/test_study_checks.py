"""Every check of every study plan, judged on stored runs made up for it: with B twice A
in the claim's direction the finding holds, with the sides swapped it is reversed, with
the same values on both sides it is not shown (a claim of no difference: holds, and
does not hold at twice), in both modes. So a check whose selectors do not name one trial
a side (at every level of a mean over levels), whose sum or mean is not what B/A reads,
whose metric is not its claim's, or whose sides are the other way round from its claim's
(where a stack, workload or knob name tells them apart) is seen before a study runs for
an hour. Which two trials a claim means is not otherwise known to the test: a check whose
sides differ only by numbers or switches is held to its claim by its note alone.

The runs are TrialSummary values for every trial the step plans, each metric filled the
way the store's summary fills it (analyze.summarize), so a check's selectors, its sums
and the verdict code are the real ones; only the numbers are chosen."""

from __future__ import annotations

import math
import re

import pytest

from stacklab.analysis.analyze import Estimate, ExperimentView, TrialSummary
from stacklab.stacks import REGISTRY, STACKS
from stacklab.studies.findings import STUDY_IDS, load_study
from stacklab.studies.plans import load_plan, matches, prepare
from stacklab.studies.verdict import (claim_band, direction_verdict, measure_check, same_band,
                                      size_verdict)
from stacklab.workloads import WORKLOADS

NOISE = (0.995, 1.0, 1.005)          # three runs a side, ±0.5%
BASE = 100.0


def values(level: float, shift: int = 0) -> list[float]:
    """Three runs around `level`; `shift` rotates the noise, so two equal sides are not
    the same list."""
    noise = NOISE[shift:] + NOISE[:shift]
    return [level * n for n in noise]


def summary(trial, level: float, metric: str, shift: int = 0) -> TrialSummary:
    """A stored trial whose `metric` is `level` (in the metric's unit), ±0.5%; the
    others too, but for bytes per response (MB/s × 1e6 / req/s), which takes a constant
    rate so that its MB/s can carry the level."""
    v = values(level, shift)
    est = Estimate.of
    rps = [1000.0] * len(v) if metric == "bytes" else v
    mbps = [x * r * 1e-6 for x, r in zip(v, rps)] if metric == "bytes" else v
    return TrialSummary(
        trial_id=trial.id, label=trial.label(), stack=trial.stack, workload=trial.workload,
        concurrency=trial.concurrency, knobs=dict(trial.knobs), runs_ok=len(v),
        runs_failed=0, rps=est(rps), mbps=est(mbps), latency_us=None,
        latency_runs_us={"p50": est([x * 1000 for x in v]), "p99": est([x * 1000 for x in v])},
        cpu_us_per_request={"server": est(v)}, engine_cpu_us_per_request=est(v),
        rss_mib_peak={"server": est(v)}, pss_mib_per_worker={}, errors=0, flagged=(),
        reasons=(), page_views={"repeat_bytes": est(v), "repeat_requests": est(v)})


def study_checks():
    """(study, step, check) for every check of every plan, in both modes (a mean over
    levels covers one level in most quick plans and all of them in the full ones)."""
    out = []
    for sid in STUDY_IDS:
        for quick in (True, False):
            mode = "quick" if quick else "full"
            for ps in prepare(load_plan(sid), quick, REGISTRY, STACKS, set(WORKLOADS)):
                out += [pytest.param(sid, ps, c, id=f"{sid}-{mode}-{c.finding}")
                        for c in ps.step.checks]
    return out


CHECKS = study_checks()


def tilt(trial, check, levels) -> float:
    """A factor per level of a mean over levels whose geometric mean is 1 (1.5, 1/1.5,
    1.5, …, the last making the product 1): the levels differ, their mean does not."""
    if not levels or check.mean_over is None:
        return 1.0
    i = levels.index(getattr(trial, check.mean_over[0]))
    if i < len(levels) - 1:
        return 1.5 if i % 2 == 0 else 1 / 1.5
    return 1 / math.prod(1.5 if j % 2 == 0 else 1 / 1.5 for j in range(len(levels) - 1))


def view_for(ps, check, factor: float) -> ExperimentView:
    """Every planned trial at BASE, except B's trials, set so that B = factor × A on the
    check's metric (a sum: its terms' net count taken into account; a mean over levels:
    A and B differ from level to level by factors whose geometric mean is 1, B's the
    square of A's, so only a true geometric mean gives `factor`)."""
    net = {side: sum(sign for sign, _ in check.terms(side)) for side in ("a", "b")}
    b_level = factor * BASE * net["a"] / net["b"]
    levels = check.levels(ps.plan.trials)
    b_ids = {t.id for _, sel in check.selectors("b", levels) for t in ps.plan.trials
             if matches(sel, t, REGISTRY)}
    summaries = [summary(t, b_level * tilt(t, check, levels) ** 2, check.metric, 1)
                 if t.id in b_ids else summary(t, BASE * tilt(t, check, levels), check.metric)
                 for t in ps.plan.trials]
    return ExperimentView(id=1, name=ps.step.name, description="", created_at="t",
                          status="complete", host={}, commit=None, versions={},
                          summaries=summaries, runs=[])


def judged(sid: str, ps, check, factor: float) -> str:
    study = load_study(sid)
    finding = study.finding(check.finding)
    m = measure_check(check, view_for(ps, check, factor), REGISTRY)
    assert not isinstance(m, str), m
    assert m.comparison.ratio == pytest.approx(factor, rel=0.02)
    band = claim_band(same_band(study.findings), finding.claim.ratio, m.then)
    return direction_verdict(finding.claim.direction, m, band)


@pytest.mark.parametrize("sid, ps, check", CHECKS)
def test_each_check_gives_each_verdict_on_made_up_runs(sid, ps, check):
    direction = load_study(sid).finding(check.finding).claim.direction
    if direction == "b=a":
        assert judged(sid, ps, check, 1.0) == "holds"
        assert judged(sid, ps, check, 2.0) == "does not hold"
        assert judged(sid, ps, check, 0.5) == "does not hold"
        return
    toward = 2.0 if direction == "b>a" else 0.5
    assert judged(sid, ps, check, toward) == "holds"
    assert judged(sid, ps, check, 1 / toward) == "reversed"
    assert judged(sid, ps, check, 1.0) == "not shown"


# A claim names a quantity; the check's metric is how it is measured: a claim on memory
# by the stack's peak RSS, one on bytes by the response's or a repeat view's.
MEASURED_BY = {"memory": {"rss"}, "bytes": {"bytes", "repeat_bytes"}}


@pytest.mark.parametrize("sid, ps, check", CHECKS)
def test_each_checks_metric_is_its_claims(sid, ps, check):
    claimed = load_study(sid).finding(check.finding).claim.metric
    assert check.metric in MEASURED_BY.get(claimed, {claimed})


@pytest.mark.parametrize("sid, ps, check", CHECKS)
def test_each_checks_sides_differ_and_name_planned_trials(sid, ps, check):
    """A and B share no trial (a check of a trial against itself can never hold)."""
    ids = {side: {t.id for _, sel in check.terms(side) for t in ps.plan.trials
                  if matches(sel, t, REGISTRY)} for side in ("a", "b")}
    assert ids["a"] and ids["b"] and ids["a"].isdisjoint(ids["b"])


def test_size_follows_the_made_up_ratio():
    """On a check with a ratio then, B at the study's own ratio is the same size, and
    at twice its distance from 1 stronger: the size verdict reads the check's numbers."""
    sid, ps, check = next((p.values for p in CHECKS if p.values[0] == "S4"
                           and p.values[2].finding == "static-100k-c50"))
    then = load_study(sid).finding(check.finding).claim.ratio
    for factor, size in ((then, "same size"), (then ** 2, "stronger now"),
                         (then ** 0.5, "weaker now")):
        m = measure_check(check, view_for(ps, check, factor), REGISTRY)
        assert size_verdict(then, m, "b>a") == size


def _markers(own: dict, other: dict) -> list[str]:
    """The words that tell a side from the other: its stack, workload or knob values
    that differ and are names (not numbers or switches), each as a whole word."""
    return [str(v).lower() for k, v in own.items()
            if isinstance(v, str) and len(v) >= 3 and not v.isdigit() and other.get(k) != v]


def _says(text: str, words: list[str]) -> bool:
    return any(re.search(rf"(?<![\w>+-]){re.escape(w)}(?![\w+-])", text.lower()) for w in words)


@pytest.mark.parametrize("sid, ps, check", [p for p in CHECKS
                                            if isinstance(p.values[2].a, dict)
                                            and isinstance(p.values[2].b, dict)])
def test_no_checks_sides_are_swapped_against_its_claim(sid, ps, check):
    """Where the sides differ by a name (a stack, a workload, a knob's value), the claim's
    B must not name A's and A's not B's while its own does not: a check whose selectors
    are swapped against its claim would judge the claim backwards."""
    claim = load_study(sid).finding(check.finding).claim
    a, b = _markers(check.a, check.b), _markers(check.b, check.a)
    crossed = ((_says(claim.a, b) and not _says(claim.b, b))
               or (_says(claim.b, a) and not _says(claim.a, a)))
    assert not crossed, (f"claim A {claim.a!r}, B {claim.b!r}; "
                         f"check A names {a}, B names {b}")


def test_a_no_difference_claim_holds_at_its_own_figure_in_the_report():
    """S2 calls 1 Gbit with keep-alive no difference at 1.08 and 1.05 real elsewhere:
    the report's rows judge today's 1.06 as holding, where S2's ±5% alone would not."""
    from stacklab.studies.verdict import rows
    param = next(p for p in CHECKS if p.id == "S2-quick-link-1g-keepalive")
    sid, ps, check = param.values
    study = load_study(sid)
    view = view_for(ps, check, 1.06)
    [row] = [r for r in rows(study.findings, {check.finding: (ps.step, check)},
                             {ps.step.name: view}.__getitem__, REGISTRY)
             if r.finding.id == check.finding]
    assert row.direction == "holds"
    assert direction_verdict("b=a", row.measured, same_band(study.findings)) != "holds"
