"""How often a capacity step's interval covers the truth when latencies come from a
queue: run by hand (a benchmark's figures, not a test's assertion; about a minute).

    .venv/bin/python bench/capacity_coverage.py [--searches 200] [--seed 1]

The known truth is a queue whose answer is analytic: requests arrive at a constant rate
(as the engine paces an open loop) at one worker with exponential service times (D/M/1).
Its time in system is exponential, rate mu (1 - sigma) with sigma the root of
sigma = exp(-mu (1 - sigma) / lambda), so its p99 is known exactly. Consecutive
latencies in a queue are correlated: a busy period holds many slow ones together.

Each simulated step starts from a queue already in its steady state (5 s run in first)
and lasts as long as a capacity step does (5 s by default, 40 s at most). Per cell, the
share of steps whose 95% interval covers the truth, and the share whose interval lies
wholly below it (a step that passes when it should not: capacity biased upward), and
of two steps in a row, both (the replicated pass the confirmation asks for), for:

- independent draws: the p99's order-statistic interval (analysis/capacity.percentile_interval),
  which takes the requests as independent (the rule before issue 40);
- today's rule: the same interval with the requests counted as n / per_draw draws, per_draw
  sized from the spread of the step's one-second mean latencies (analysis/capacity.per_draw);
- batch means: the share of requests over the true p99 with a t interval over the
  step's one-second windows (the engine's time series), the design the issue proposes;
- quasi-Poisson: the count over the true p99 with a Poisson interval widened by the
  dispersion the one-second windows show.
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np
from scipy.optimize import brentq
from scipy.special import stdtrit
from scipy.stats import chi2

from stacklab.analysis.capacity import Bin, StepOutcome, Window, per_draw, percentile_interval

LEVEL = 0.95
RATE = 1000.0                        # requests a second
CELLS = [(0.5, 5.0), (0.8, 5.0), (0.9, 5.0), (0.95, 5.0), (0.8, 40.0), (0.9, 40.0)]
RUN_IN_S = 5.0


def truth_p99(rate: float, load: float) -> float:
    """The exact p99 of the time in system of D/M/1, in seconds."""
    mu = rate / load
    sigma = brentq(lambda s: s - math.exp(-mu * (1 - s) / rate), 1e-12, 1 - 1e-12)
    return math.log(100) / (mu * (1 - sigma))


def steps(rate: float, load: float, seconds: float, count: int, rng: np.random.Generator
          ) -> tuple[np.ndarray, np.ndarray]:
    """`count` steps' latencies (s) and the second each ended in, in send order:
    Lindley's recursion in closed form, W_n = X_n - min(0, min over k <= n of X_k)."""
    n = int(rate * (seconds + RUN_IN_S))
    service = rng.exponential(load / rate, (count, n))
    walk = np.concatenate([np.zeros((count, 1)),
                           np.cumsum(service[:, :-1] - 1 / rate, axis=1)], axis=1)
    latency = walk - np.minimum.accumulate(np.minimum(walk, 0), axis=1) + service
    sent = np.arange(n) / rate
    kept = sent >= RUN_IN_S
    second = np.minimum((sent[kept] + latency[:, kept] - RUN_IN_S).astype(int),
                        int(seconds) - 1)
    return latency[:, kept], second


def order_statistic(latency: np.ndarray, _second: np.ndarray, _limit: float
                    ) -> tuple[float, float]:
    """The p99's interval with the requests as independent draws, in seconds."""
    values, counts = np.unique(np.round(latency * 1e6), return_counts=True)
    low, high = percentile_interval([Bin(v, v, int(c)) for v, c in zip(values, counts)], 99)
    return low / 1e6, high / 1e6


def correlated(latency: np.ndarray, second: np.ndarray, limit: float
               ) -> tuple[float, float]:
    """The p99's interval as a step is judged today: n / per_draw draws, in seconds."""
    values, counts = np.unique(np.round(latency * 1e6), return_counts=True)
    bins = tuple(Bin(v, v, int(c)) for v, c in zip(values, counts))
    n = np.bincount(second)
    total = np.bincount(second, weights=latency * 1e6)
    outcome = StepOutcome(RATE, RATE, len(latency), 0, bins, windows=tuple(
        Window(int(k), float(t / k)) for k, t in zip(n, total) if k))
    low, high = percentile_interval(bins, 99, per_draw=per_draw(outcome, limit * 1e6))
    return low / 1e6, high / 1e6


def windows(latency: np.ndarray, second: np.ndarray, limit: float
            ) -> tuple[np.ndarray, np.ndarray]:
    """Requests and those over `limit`, per second that holds any."""
    n = np.bincount(second)
    over = np.bincount(second, weights=latency > limit, minlength=len(n))
    return n[n > 0], over[n > 0]


def batch_means(latency: np.ndarray, second: np.ndarray, limit: float
                ) -> tuple[float, float]:
    """The share over `limit` with a t interval over the one-second windows."""
    n, over = windows(latency, second, limit)
    k, share = len(n), over.sum() / n.sum()
    se = math.sqrt(((over - share * n) ** 2).sum() / (k * (k - 1))) / n.mean()
    q = float(stdtrit(k - 1, 1 - (1 - LEVEL) / 2))
    return share - q * se, share + q * se


def quasi_poisson(latency: np.ndarray, second: np.ndarray, limit: float
                  ) -> tuple[float, float]:
    """The share over `limit`: a Poisson interval on the count, widened by the
    dispersion between the one-second windows (at least 1)."""
    n, over = windows(latency, second, limit)
    total, expected = over.sum(), over.sum() / n.sum() * n
    dispersion = max(1.0, ((over - expected) ** 2).sum() / ((len(n) - 1) * expected.mean())
                     ) if total else 1.0
    effective, tail = total / dispersion, (1 - LEVEL) / 2
    low = chi2.ppf(tail, 2 * effective) / 2 if effective else 0.0
    high = chi2.ppf(1 - tail, 2 * (effective + 1)) / 2
    return low * dispersion / n.sum(), high * dispersion / n.sum()


RULES = {"independent draws": (order_statistic, "p99"),
         "correlated draws (today)": (correlated, "p99"),
         "batch means, 1 s windows": (batch_means, "share"),
         "quasi-Poisson, 1 s windows": (quasi_poisson, "share")}


def cell(load: float, seconds: float, searches: int, rng: np.random.Generator
         ) -> dict[str, tuple[float, float, float]]:
    """Per rule: (coverage, share of intervals wholly below the truth, share of two
    steps in a row both wholly below it: a replicated pass at a rate the server cannot
    hold)."""
    limit = truth_p99(RATE, load)
    latency, second = steps(RATE, load, seconds, searches, rng)
    out = {}
    for name, (rule, about) in RULES.items():
        truth = limit if about == "p99" else 0.01
        got = [rule(latency[i], second[i], limit) for i in range(searches)]
        below = np.array([hi < truth for _, hi in got])
        out[name] = (float(np.mean([lo <= truth <= hi for lo, hi in got])),
                     float(below.mean()), float((below[0::2] & below[1::2]).mean()))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--searches", type=int, default=200, help="simulated steps a cell")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"D/M/1 at {RATE:,.0f} req/s, {args.searches} steps a cell: 95% interval's "
          "coverage / wholly below the truth / two steps in a row both below")
    print(f"{'load':>5} {'step':>5}  " + "  ".join(f"{name:>28}" for name in RULES))
    for load, seconds in CELLS:
        got = cell(load, seconds, args.searches, rng)
        print(f"{load:>5.2f} {seconds:>4.0f}s  " + "  ".join(
            f"{cover:>12.0%} / {below:>4.0%} / {both:>4.0%}"
            for cover, below, both in got.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
