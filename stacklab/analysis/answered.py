"""Which trials an experiment's answers compare: each knob's value against its default
(recommend.changes), each stack with front layers against the stack beneath them, and
among the trials left the fastest against the next. `show` answers these pairs, and
repetitions = "auto" adds rounds until each of them is decided."""

from __future__ import annotations

from itertools import groupby

from .analyze import (SERVER_CPU, ExperimentView, MetricComparison, TrialSummary,
                      compare_trials, sure, when_of)
from .recommend import changes
from .stats import Comparison, compare
from ..stacks import STACKS


def beneath(layered: str, plain: str) -> bool:
    """`plain` is the stack `layered` puts its front layers in front of."""
    try:
        top, bottom = STACKS[layered], STACKS[plain]
    except KeyError:
        return False
    return (bool(top.layers) and not bottom.layers and bottom.components == top.base
            and bottom.knobs == top.knobs and bottom.defaults == top.defaults)


def layer_pairs(group: list[TrialSummary]) -> list[tuple[TrialSummary, TrialSummary, dict]]:
    """(the stack beneath, the trial with front layers, the front layers' own knobs) for
    each trial with front layers and the trial of the stack beneath them with the same
    knobs otherwise (Varnish in front or not)."""
    out = []
    for t in group:
        if not any(beneath(t.stack, b.stack) for b in group):
            continue
        layers = STACKS[t.stack].layers
        own = {k: v for k, v in t.knobs.items() if k.split(".", 1)[0] in layers}
        rest = {k: v for k, v in t.knobs.items() if k not in own}
        out += [(base, t, own) for base in group
                if beneath(t.stack, base.stack) and base.knobs == rest]
    return out


# What a metric is called in an answer's words.
WORDS = {"req/s": "req/s", "capacity req/s": "capacity req/s",
         SERVER_CPU: "server CPU per request"}


def answer(a: TrialSummary, b: TrialSummary, name=None) -> MetricComparison:
    """B against A on the metric the experiment can move: req/s under a closed loop (its
    capacity where it searched for one); at a fixed rate req/s is what was asked, so the
    answer is the server's CPU per request."""
    rows = compare_trials(a, b, name)
    if a.fixed_rate and b.fixed_rate:
        return next(m for m in rows if m.metric == SERVER_CPU)
    return rows[0]


def lower_is_better(s: TrialSummary) -> bool:
    """Its answers are on CPU per request (a fixed rate), where less is better."""
    return s.fixed_rate


def rps(a: TrialSummary, b: TrialSummary) -> Comparison:
    """B against A on req/s, as compare_trials compares them (paired within one
    experiment, at the experiment's level)."""
    return compare(a.rps.values, b.rps.values, sure(a, b)[0],
                   when=when_of(a, b, a.rps, b.rps))


def ranked(trials: list[TrialSummary]) -> tuple[TrialSummary, TrialSummary | None,
                                                Comparison | None]:
    """The best and the next, and the comparison of the two: the most req/s, or at a
    fixed rate the least server CPU per request (answer)."""
    cpu = all(lower_is_better(s) for s in trials) and all(
        s.server_cpu.median is not None for s in trials)
    order = sorted(trials, key=lambda s: s.server_cpu.median if cpu else -s.rps.median)
    best = order[0]
    second = order[1] if len(order) > 1 else None
    compared = (lambda a, b: answer(a, b).comparison) if cpu else rps
    comp = compared(second, best) if second else None
    if comp and comp.ratio is not None and (comp.ratio > 1 if cpu else comp.ratio < 1):
        # medians and the compared ratio can rank two close trials differently: the
        # winner is the one the compared ratio (paired as compare_trials pairs) favours
        best, second = second, best
        comp = compared(second, best)
    return best, second, comp


def groups(view: ExperimentView) -> list[list[TrialSummary]]:
    """The trials with a req/s, per workload and concurrency (what one headline answers)."""
    usable = [s for s in view.summaries if s.rps.median is not None]
    key = lambda s: (s.workload, s.concurrency)  # noqa: E731
    return [list(g) for _, g in groupby(sorted(usable, key=key), key=key)]


def answered_pairs(view: ExperimentView) -> list[tuple[TrialSummary, TrialSummary]]:
    """(A, B) of every comparison `show` answers, B against A."""
    found = changes(view)
    out = []
    for group in groups(view):
        ids = {s.trial_id for s in group}
        pairs = [(c.base, c.trial) for c in found if c.trial.trial_id in ids]
        pairs += [(base, t) for base, t, _ in layer_pairs(group)]
        variants = {t.trial_id for _, t in pairs}
        roots = [s for s in group if s.trial_id not in variants] or group
        best, second, _ = ranked(roots)
        out += pairs + ([(second, best)] if second else [])
    return out


def supports(alone: str | None, jointly_better: bool) -> bool:
    """Whether a verdict supports a setting away from its default (what export-config
    writes, methods.combine.Support): its verdict alone against the defaults (None: not
    measured alone) and whether its trial as a whole beat them."""
    return alone == "better" or jointly_better
