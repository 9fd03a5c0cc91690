"""Whole capacity searches against queues whose capacity is known: run by hand (a
benchmark's figures, not a test's assertion; a few minutes).

    .venv/bin/python bench/capacity_search.py [--searches 20] [--seed 1] [--mu 1000] [--step 5]

The known truth: requests arrive at a constant rate (as the engine paces an open loop)
at c workers, first come first served, with exponential service times of mean 1/mu
(D/M/c; the engine's arrivals are not Poisson, so M/M/c's formulas would be the wrong
truth). The latency goal is the step's "pNN < L"; the capacity is the rate at which
pNN of the time in system equals L. For one worker it is exact: the time in system is
exponential of rate mu (1 - sigma), sigma the root of sigma = exp(-mu (1 - sigma) /
lambda). `--mu` sets each worker's service rate: 1,000 req/s is a PHP page's
millisecond, 10,000 a static file's 0.1 ms; a queue's busy periods are as long as its
service times, so a faster server gives more independent draws a second and a search
decides closer to its capacity in the same time. For several it is found by bisection on one long simulated run per rate
(2 million requests), which is exact to well under the search's resolution.

Each search is the one `stacklab capacity` makes (run/capacity.CapacitySearch: probe,
search, confirmation with its replicated pass, profile), each step a fresh queue
simulated for its warm-up and its length, its report built as the engine's is (the
corrected-latency histogram, the per-second series with each second's mean, the
requests still in flight). Per cell: how often the search's bracket (the capacity that
held and the lowest rate above it that did not pass: analysis/capacity.bracket)
contains the truth, how often the capacity is over the truth, the bracket's half-width,
the steps and the simulated seconds a search took.
"""

from __future__ import annotations

import argparse
import heapq
import math
import statistics
import sys
from pathlib import Path

import numpy as np
from hdrh.histogram import HdrHistogram
from scipy.optimize import brentq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fakes import fake_load, fake_resources  # noqa: E402
from stacklab.analysis.capacity import bracket  # noqa: E402
from stacklab.experiment.spec import Capacity  # noqa: E402
from stacklab.measure.drive import LoadPlan, LoadReport  # noqa: E402
from stacklab.run.capacity import CapacitySearch  # noqa: E402
from stacklab.run.quiet import Settled  # noqa: E402

MU = 1000.0                 # each worker's service rate, requests a second
WARMUP_S = 0.5
STEP_S = 5.0                # --step, the default
DURATION_S = 10.0           # the confirmation's length (a spec without duration)
# (workers, percentile, the load at capacity): the limit is the truth's pNN there
CELLS = [(1, 99.0, 0.8), (1, 99.0, 0.9), (1, 90.0, 0.9), (4, 99.0, 0.9)]


def dm1_quantile(rate: float, percentile: float) -> float:
    """The exact pNN (s) of D/M/1's time in system at `rate`."""
    sigma = brentq(lambda s: s - math.exp(-MU * (1 - s) / rate), 1e-12, 1 - 1e-12)
    return -math.log(1 - percentile / 100) / (MU * (1 - sigma))


def latencies(rate: float, workers: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """Times in system (s) of `count` requests sent every 1/rate s from an empty queue."""
    service = rng.exponential(1 / MU, count)
    if workers == 1:          # Lindley in closed form
        walk = np.concatenate([[0.0], np.cumsum(service[:-1] - 1 / rate)])
        return walk - np.minimum.accumulate(np.minimum(walk, 0)) + service
    free = [0.0] * workers
    out = np.empty(count)
    for i in range(count):
        sent = i / rate
        start = max(sent, heapq.heappop(free))
        heapq.heappush(free, start + service[i])
        out[i] = start + service[i] - sent
    return out


def truth_quantile(rate: float, workers: int, percentile: float) -> float:
    if workers == 1:
        return dm1_quantile(rate, percentile)
    got = latencies(rate, workers, 2_000_000, np.random.default_rng(12345))
    return float(np.percentile(got[200_000:], percentile))


def capacity_at(workers: int, percentile: float, limit: float) -> float:
    """The rate whose pNN is `limit` (bisection: pNN rises with the rate)."""
    low, high = 0.05 * workers * MU, 0.999 * workers * MU
    for _ in range(30 if workers == 1 else 16):
        mid = (low + high) / 2
        if truth_quantile(mid, workers, percentile) < limit:
            low = mid
        else:
            high = mid
    return (low + high) / 2


class QueueMeasures:
    """The run's measurement for the simulated queue (run/capacity.Measures)."""

    def __init__(self, workers: int, rng: np.random.Generator):
        self.workers, self.rng, self.seconds, self.steps = workers, rng, 0.0, 0

    def plan(self) -> LoadPlan:
        return LoadPlan(urls=(("http://127.0.0.1:1/", 1),), connections=64,
                        duration_s=DURATION_S, requests=None, warmup_s=WARMUP_S,
                        load={"rate": 0})

    def landed(self):
        return lambda load: None

    def measured(self, plan, settled, landed=None):
        rate, length = plan.load.get("rate"), plan.duration_s
        self.steps += 1
        self.seconds += length + WARMUP_S
        if not rate:        # the closed-loop probe: every worker busy
            rps = self.workers * MU * 0.98
            doc = fake_load(rps, 64 / rps * 1e6, self.steps, duration_s=length,
                            engine_cpu_s=0.01, config={"rate": None, "threads": 1,
                                                       "connections": 64})
            return LoadReport.from_json(doc), fake_resources("nginx", 0.01, 10.0)
        return self._open(rate, length), fake_resources("nginx", 0.01, 10.0)

    def _open(self, rate: float, length: float) -> LoadReport:
        n = int(rate * (WARMUP_S + length))
        got = latencies(rate, self.workers, n, self.rng)
        sent = np.arange(n) / rate - WARMUP_S
        done = sent + got
        window = (sent >= 0) & (done <= length)          # sent and answered in the window
        flight = (sent < length) & (done > length)       # still waiting at its end
        measured = got[window]
        h = HdrHistogram(1, 3_600_000_000, 3)
        for v in np.maximum(1, np.round(measured * 1e6)).astype(int):
            h.record_value(int(v))
        second = done[window].astype(int)
        count = np.bincount(second, minlength=int(math.ceil(length)))
        total = np.bincount(second, weights=measured * 1e6, minlength=len(count))
        doc = fake_load(len(measured) / length, float(np.mean(measured) * 1e6), self.steps,
                        duration_s=length, engine_cpu_s=0.01, completed=len(measured),
                        config={"rate": rate, "threads": 1, "connections": 64})
        doc["histogram"] = h.encode().decode()
        doc["timeseries"] = [{"t_s": t, "width_s": 1, "completed": int(k), "errors": 0,
                              "p50_us": 0, "p99_us": 0, "mean_us": float(s / k) if k else 0.0,
                              "bytes": 0} for t, (k, s) in enumerate(zip(count, total))]
        ages = (length - sent[flight]) * 1e6
        doc["in_flight"] = {"count": int(flight.sum()),
                            "age_us_max": int(ages.max()) if len(ages) else 0,
                            "age_us_median": int(np.median(ages)) if len(ages) else 0,
                            "older_than_run": int((ages > length * 1e6).sum())}
        return LoadReport.from_json(doc)


def one_search(workers: int, slo: str, rng: np.random.Generator
               ) -> tuple[tuple[float, float | None] | None, int, float]:
    fake = QueueMeasures(workers, rng)
    layer = CapacitySearch(fake, Capacity(slo=slo, step=STEP_S), WARMUP_S)
    _, record = layer._search(fake.plan(), Settled(0.0, True, None))
    return bracket(record), fake.steps, fake.seconds


def main() -> int:
    global MU, STEP_S
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--searches", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--mu", type=float, default=MU,
                        help="each worker's service rate, requests a second")
    parser.add_argument("--step", type=float, default=STEP_S, help="--step, seconds")
    args = parser.parse_args()
    MU, STEP_S = args.mu, args.step
    rng = np.random.default_rng(args.seed)
    print(f"D/M/c, {MU:,.0f} req/s a worker, {args.searches} searches a cell (step "
          f"{STEP_S:g} s, confirmation {DURATION_S:g} s): bracket covers the truth / "
          "capacity over the truth / median half-width / median steps / median seconds")
    for workers, percentile, load in CELLS:
        limit = truth_quantile(load * workers * MU, workers, percentile)
        truth = capacity_at(workers, percentile, limit)
        slo = f"p{percentile:g}<{limit * 1e6:.0f}us"
        found = [one_search(workers, slo, rng) for _ in range(args.searches)]
        covered = sum(1 for b, _, _ in found if b and b[0] <= truth
                      and (b[1] is None or truth <= b[1]))
        over = sum(1 for b, _, _ in found if b and b[0] > truth)
        widths = [(b[1] - b[0]) / (b[1] + b[0]) for b, _, _ in found if b and b[1]]
        print(f"c={workers} {slo:>14} truth {truth:>7,.0f} req/s (load {load:.2f}): "
              f"{covered}/{len(found)} covered, {over} over, half-width "
              f"{statistics.median(widths) if widths else float('nan'):.1%}, "
              f"{statistics.median(s for _, s, _ in found):g} steps, "
              f"{statistics.median(t for _, _, t in found):.0f} s"
              + ("" if all(b for b, _, _ in found) else
                 f"; {sum(1 for b, _, _ in found if not b)} found none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
