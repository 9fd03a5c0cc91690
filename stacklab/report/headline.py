"""The first thing a reader wants: per workload and concurrency, which variant won,
by how much, and how sure we are."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby

from ..analyze import Bound, ExperimentView, TrialSummary, bound
from ..stats import Comparison, compare
from .fmt import number, p_value, ratio_ci


@dataclass(frozen=True)
class Headline:
    workload: str
    concurrency: int
    winner: TrialSummary
    runner_up: TrialSummary | None
    comparison: Comparison | None     # winner against the runner-up (req/s)

    def sentence(self, name) -> str:
        w = name(self.winner)
        if not self.runner_up or not self.comparison:
            return f"{w}: {number(self.winner.rps.median)} req/s (nothing to compare with)"
        c, r = self.comparison, name(self.runner_up)
        n = min(c.n)
        if c.p is None:
            return (f"{w} and {r}: {number(self.winner.rps.median)} vs "
                    f"{number(self.runner_up.rps.median)} req/s, no verdict: fewer than 2 "
                    "successful runs a side")
        p = f"p {p_value(c.p)}" if c.p < 0.001 else f"p = {p_value(c.p)}"
        interval = f"95% CI {ratio_ci(c.ci)}, {p}"
        limit = bound(self.runner_up, self.winner, True, name)
        if limit:
            return _bounded(w, r, c, limit, interval)
        if not c.significant:
            hint = ("; more repetitions narrow the interval (repetitions = \"auto\")"
                    if n < 6 else "")
            return (f"{w} and {r} are not distinguishable "
                    f"({number(self.winner.rps.median)} vs "
                    f"{number(self.runner_up.rps.median)} req/s, ratio {c.ratio:.2f}×, "
                    f"{interval}): ~ no significant difference{hint}")
        return f"{w} wins: {c.ratio:.2f}× the req/s of {r}, {interval}"


def _bounded(w: str, r: str, c: Comparison, limit: Bound, interval: str) -> str:
    """A side limited by the load engine or a busy host: the ratio is a bound."""
    if limit.relation == "≤":
        return (f"no verdict: {w} measured {c.ratio:.2f}× the req/s of {r} ({interval}), "
                f"but {limit.why}, so the true ratio could be smaller (≤ {c.ratio:.2f}×)")
    if limit.relation == "?":
        return (f"no verdict: {w} measured {c.ratio:.2f}× the req/s of {r} ({interval}), "
                f"but {limit.why}: the ratio is not a measurement")
    lead = f"{w} wins" if c.significant else f"no verdict: {w} measured"
    return (f"{lead}: ≥ {c.ratio:.2f}× the req/s of {r} ({interval}); a bound: "
            f"{limit.why}, so the true ratio could be larger")


def headlines(view: ExperimentView) -> list[Headline]:
    usable = [s for s in view.summaries if s.rps.median is not None]
    key = lambda s: (s.workload, s.concurrency)  # noqa: E731
    out = []
    for (workload, conc), group in groupby(sorted(usable, key=key), key=key):
        ranked = sorted(group, key=lambda s: s.rps.median, reverse=True)
        best = ranked[0]
        second = ranked[1] if len(ranked) > 1 else None
        comp = compare(second.rps.values, best.rps.values) if second else None
        if comp and comp.ratio is not None and comp.ratio < 1:
            # medians and geometric means can rank two close trials differently: the
            # winner is the one the compared ratio (geometric means) favours
            best, second = second, best
            comp = compare(second.rps.values, best.rps.values)
        out.append(Headline(workload, conc, best, second, comp))
    return out
