"""What a run costs on this host beyond its warm-up and load, read from the stored runs:
each run's time from start to end (its stack's start, readiness, verification, the
load, the stop) less the engine's warm-up and measured phase. The dry run's estimate
(plan.Plan.estimate) counts it per stack; a stack no stored run measured gets the larger
of the constant and the mean over the others."""

from __future__ import annotations

import statistics
from datetime import datetime
from typing import Iterable

from ..experiment.plan import RUN_OVERHEAD_S, RunOverhead
from ..store import Outcome, Store

# The newest stored runs read (the host and the lab change; a few dozen runs say what a
# run costs now), and the fewest of one stack that give its own figure.
NEWEST_RUNS = 60
FEWEST_OF_A_STACK = 3


def run_overhead(samples: Iterable[tuple[str, float]]) -> RunOverhead:
    """(stack, seconds beyond warm-up and load) of stored runs → the mean per stack with
    enough runs (the mean, not the median: a total is the sum of the runs, the slow ones
    with the rest); for the others the larger of RUN_OVERHEAD_S and the mean of all."""
    by_stack: dict[str, list[float]] = {}
    for stack, seconds in samples:
        by_stack.setdefault(stack, []).append(max(seconds, 0.0))
    every = [s for values in by_stack.values() for s in values]
    if not every:
        return RunOverhead()
    return RunOverhead(max(RUN_OVERHEAD_S, statistics.fmean(every)),
                       {stack: statistics.fmean(v) for stack, v in by_stack.items()
                        if len(v) >= FEWEST_OF_A_STACK}, len(every))


def stored_overhead(store: Store) -> RunOverhead:
    """`run_overhead` of the newest NEWEST_RUNS successful runs of experiments that
    measured each run once (a capacity search's run holds its steps besides its load)."""
    samples: list[tuple[str, float]] = []
    for exp in reversed(store.experiments()):
        if exp.spec.get("capacity") or not exp.n_runs:
            continue
        stacks = {t.trial_id: t.definition.get("stack", "") for t in store.trials(exp.id)}
        for run in store.runs(exp.id):
            if run.outcome is Outcome.OK and run.load is not None:
                wall = (datetime.fromisoformat(run.ended_at)
                        - datetime.fromisoformat(run.started_at)).total_seconds()
                samples.append((stacks.get(run.trial_id, ""), wall - run.load.wall_s))
        if len(samples) >= NEWEST_RUNS:
            break
    return run_overhead(samples[:NEWEST_RUNS])
