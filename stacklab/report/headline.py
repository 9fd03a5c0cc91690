"""The first thing a reader wants: per workload and concurrency, which variant won,
by how much, and how sure we are."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby

from ..analyze import ExperimentView, TrialSummary
from ..stats import Comparison, compare


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
            return f"{w}: {self.winner.rps.median:,.0f} req/s (nothing to compare with)"
        c, r = self.comparison, name(self.runner_up)
        if not c.significant:
            n = min(len(self.winner.rps.values), len(self.runner_up.rps.values))
            hint = (f"; {n} repetitions each cannot show a difference at the 5% level, use "
                    "5 or more or repetitions = \"auto\"" if n <= 3 else "")
            return (f"{w} and {r} are not distinguishable "
                    f"({self.winner.rps.median:,.0f} vs {self.runner_up.rps.median:,.0f} req/s, "
                    f"p = {c.p:.2f}): ~ no significant difference{hint}")
        n = min(len(self.winner.rps.values), len(self.runner_up.rps.values))
        level = "95% CI" if n >= 6 else f"CI (rough: {n} repetitions)"
        ci = f", {level} {c.ci[0]:.2f}–{c.ci[1]:.2f}×" if c.ci else ""
        return (f"{w} wins: {c.ratio:.2f}× the req/s of {r}{ci}, p = {c.p:.3f}")


def headlines(view: ExperimentView) -> list[Headline]:
    usable = [s for s in view.summaries if s.rps.median is not None]
    key = lambda s: (s.workload, s.concurrency)  # noqa: E731
    out = []
    for (workload, conc), group in groupby(sorted(usable, key=key), key=key):
        ranked = sorted(group, key=lambda s: s.rps.median, reverse=True)
        best = ranked[0]
        second = ranked[1] if len(ranked) > 1 else None
        comp = compare(second.rps.values, best.rps.values) if second else None
        out.append(Headline(workload, conc, best, second, comp))
    return out
