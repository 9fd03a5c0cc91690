"""The tuner's known memory constraint (issue 26): a trial whose stack would hold more
than the budget is never started, predicted from what the trials measured so far held.

A stack's memory grows with its worker processes (analysis/memplan.py: PHP-FPM's
children, Apache's prefork processes or threaded children); the rest of it is fixed. What
one more worker process costs is the slope between the measured trials with the fewest
and the most worker processes, at its upper end (the most the larger pool held against
the least the smaller held), as memplan plans. A trial running P processes is then
predicted at

    max over measured trials i of (peak_i + slope × (P − P_i))

— a line of that slope through the highest measured point: never below a peak measured
at the same P, and over-stated, not under-stated, where the slope is.

While every measured trial ran as many processes, the slope is unknown: a pool is
predicted to hold at least what a smaller one held, nothing more (and a smaller pool is
not predicted at all). Not the PSS of one worker: it holds a share of the pages every
worker shares (6.1 MiB per PHP-FPM child in a pool of 2 here, where a pool of 40 held
18 MiB more in all, not 230), and a trial refused on it is never measured, so the
over-statement would never be corrected: the search would not reach the larger pools
that fit. Refused only on evidence, the first larger pool is measured, and the measured
peak, the second, black-box constraint, rules on it.

Only measured trials whose other searched values are all the candidate's are read: a
buffer pool, OPcache's memory or the pool's pm change what a stack holds besides its
workers, and a slope across them is no cost of a worker (a 256 MiB buffer pool with 60
workers against 64 MiB with 8 would put 8.7 MiB on each worker, 17× the 0.5 measured).
In a wide space this predicts seldom: the measured peak, the second, black-box
constraint, rules on the rest.

P is what the trial's worker limit allows (WorkerLimit.processes), capped at the most a
measured trial of the same other values ran with a limit at least as high: under the
same load a dynamic pool does not start more workers because more are allowed. Pure:
figures in, a verdict out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .memplan import WorkerLimit


@dataclass(frozen=True)
class Held:
    """What one measured trial's stack held: its worker limit's value, the most worker
    processes it ran and its peak Σ PSS over the components (MiB); `pool`: its other
    searched values (pool_of)."""

    limit_value: int
    processes: int
    peak_mib: float
    pool: tuple = ()


@dataclass(frozen=True)
class Prediction:
    processes: int
    peak_mib: float
    slope_mib: float
    measured: int            # trials it is predicted from
    floor: bool = False      # the slope unknown: what as many or fewer processes held

    def said(self, budget_mib: float) -> str:
        how = (f"{self.processes} worker processes hold at least what {self.measured} "
               "measured trial(s) with as many or fewer held" if self.floor else
               f"{self.processes} worker processes at {self.slope_mib:.1f} MiB each, "
               f"from {self.measured} measured trial(s)")
        return (f"predicted peak {self.peak_mib:.0f} MiB over the budget "
                f"{budget_mib:.0f} MiB ({how})")


def pool_of(limit: WorkerLimit, values: Mapping[str, Any]) -> tuple:
    """A trial's searched values other than its worker limit: trials are compared only
    with trials of the same (a buffer pool, OPcache's memory, the pool's pm or spare
    servers each change what a stack holds besides its workers)."""
    return tuple(sorted((k, repr(v)) for k, v in values.items() if k != limit.knob))


def slope(seen: Iterable[Held]) -> float | None:
    """MiB one more worker process costs, at its upper end; None while unknown (nothing
    measured, or every measured trial ran as many processes)."""
    seen = list(seen)
    if not seen:
        return None
    few = min(h.processes for h in seen)
    most = max(h.processes for h in seen)
    if most == few:
        return None
    high = max(h.peak_mib for h in seen if h.processes == most)
    low = min(h.peak_mib for h in seen if h.processes == few)
    return max(0.0, (high - low) / (most - few))


def predict(limit: WorkerLimit, value: int, pool: tuple,
            seen: Iterable[Held]) -> Prediction | None:
    """The peak a trial at limit `value` with the other searched values `pool` would
    hold, from the measured trials of the same other values only; None with nothing to
    predict it from (none measured; the slope unknown and no measured pool as small)."""
    seen = [h for h in seen if h.pool == pool]
    processes = limit.processes(value)
    ran = [h.processes for h in seen if h.limit_value >= value]
    if ran:
        processes = min(processes, max(ran))
    cost = slope(seen)
    if cost is None:        # a pool holds at least what a smaller one held
        below = [h for h in seen if h.processes <= processes]
        if not below:
            return None
        return Prediction(processes, max(h.peak_mib for h in below), 0.0, len(below),
                          floor=True)
    peak = max(h.peak_mib + cost * (processes - h.processes) for h in seen)
    return Prediction(processes, peak, cost, len(seen))
