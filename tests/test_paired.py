"""Verdicts on a shared machine: two trials of one experiment are compared round by round
(stats.paired_log), and the interval's "95%" is measured here against a known truth.

The simulated runs are shaped like a busy host's: each round's slow-down is shared by
both of its runs and drifts from round to round (an AR(1) process: a CPU hog's effect is
correlated in time, as latencies in a queue are), a hog may run 3 s on and 3 s off (a
round is hit or not), and a run may be hit alone (the other work landed on one side of
the round: 1.2–2×, either side). The coverage of the nominal 95% interval is counted
over 1,500 experiments a cell; the README quotes the figures this test asserts."""

from __future__ import annotations

import math
import random

import pytest

from stacklab.analysis.analyze import MARGIN, decide, imprecise, rounds_to_decide
from stacklab.analysis.stats import compare, pairs, paired_log

EXPERIMENTS = 1500


def aligned(rounds: int) -> tuple[list, list]:
    """`when` keys of A and B run by run, A then B in each round."""
    return ([(f"2026-12-07T14:{k:02d}:00", 1) for k in range(rounds)],
            [(f"2026-12-07T14:{k:02d}:30", 1) for k in range(rounds)])


def simulated(rounds: int, ratio: float, rng: random.Random, shared_sd: float,
              noise_sd: float, alone: float = 0.0, on_off: bool = False,
              rho: float = 0.7) -> tuple[list[float], list[float]]:
    """A's and B's req/s, one run each per round; B's true ratio to A is `ratio`."""
    drift, a, b = 0.0, [], []
    for _ in range(rounds):
        drift = rho * drift + math.sqrt(1 - rho * rho) * rng.gauss(0, shared_sd)
        slow = drift + (math.log(1.9) if on_off and rng.random() < 0.5 else 0.0)
        ea, eb = rng.gauss(0, noise_sd), rng.gauss(0, noise_sd)
        if rng.random() < alone:
            hit = math.log(rng.uniform(1.2, 2.0))
            ea, eb = (ea + hit, eb) if rng.random() < 0.5 else (ea, eb + hit)
        a.append(1000 * math.exp(-(slow + ea)))
        b.append(1000 * ratio * math.exp(-(slow + eb)))
    return a, b


CONDITIONS = {   # (shared sd, per-run sd, share of runs hit alone, a hog 3 s on, 3 s off)
    "quiet": (0.02, 0.03, 0.0, False),
    "one hog": (0.30, 0.06, 0.10, False),
    "hog on and off": (0.05, 0.06, 0.20, True),
}


def outcomes(rounds: int, ratio: float, condition: str, seed: int = 7
             ) -> tuple[float, dict[str, float]]:
    """Coverage of the 95% interval and the share of each verdict."""
    rng, covered, verdicts = random.Random(seed), 0, {}
    for _ in range(EXPERIMENTS):
        a, b = simulated(rounds, ratio, rng, *CONDITIONS[condition])
        c = compare(a, b, when=aligned(rounds))
        assert c.paired == rounds
        covered += c.ci[0] <= ratio <= c.ci[1]
        kind = decide(c, None, True).kind
        verdicts[kind] = verdicts.get(kind, 0) + 1 / EXPERIMENTS
    return covered / EXPERIMENTS, verdicts


@pytest.mark.parametrize("condition", sorted(CONDITIONS))
@pytest.mark.parametrize("rounds", [3, 5, 10])
def test_the_paired_interval_covers_the_truth_beside_other_work(condition, rounds):
    """Measured here: 0.95 quiet, 0.96–0.97 beside one hog, 0.97–0.98 beside a hog on
    and off (1,500 experiments a cell, seed 7); the issue's floor is 0.93."""
    coverage, verdicts = outcomes(rounds, 1.0, condition)
    assert coverage >= 0.93, (coverage, verdicts)
    # A/A: better or worse at most as often as the interval misses
    assert verdicts.get("better", 0) + verdicts.get("worse", 0) <= 0.065, verdicts


@pytest.mark.parametrize("condition", sorted(CONDITIONS))
def test_a_tenfold_effect_is_decided_whatever_the_host_did(condition):
    """The worst-case widening answered "no verdict" to a 20x effect beside a hog."""
    _, verdicts = outcomes(3, 10.0, condition)
    assert verdicts.get("better", 0) >= 0.99, verdicts


def test_pairing_cancels_what_a_round_shares_where_two_samples_cannot():
    """A 2x effect beside a hog whose slow-down drifts by ±30% from round to round: the
    pairs decide it in every experiment, two unpaired samples in few."""
    rng, paired, unpaired = random.Random(3), 0, 0
    for _ in range(300):
        a, b = simulated(3, 2.0, rng, 0.6, 0.03, rho=0.0)
        paired += compare(a, b, when=aligned(3)).significant
        unpaired += compare(a, b).significant
    assert paired >= 297 and unpaired <= 200, (paired, unpaired)


def test_same_only_within_the_margin():
    """'same' from an interval that merely held 1 read a 20% drop (0.60–1.07x) as the
    same; now it is no verdict, imprecise, with how many rounds would decide it."""
    a, b = [1000, 1010], [600, 1070]
    c = compare(a, b, when=aligned(2))
    assert c.ci[0] < 1 < c.ci[1]
    d = decide(c, None, True)
    assert (d.kind, d.reason) == ("no-verdict", "imprecise")
    assert "reaches past ±5%" in imprecise(c)
    tight = compare([1000, 1004, 998, 1001], [1001, 1003, 999, 1000],
                    when=aligned(4))
    assert decide(tight, None, True).kind == "same"
    rng = random.Random(11)
    for _ in range(2000):          # whatever the data, 'same' means within the margin
        a, b = simulated(rng.choice([2, 3, 6]), rng.uniform(0.9, 1.1), rng, 0.05, 0.04)
        c = compare(a, b, when=aligned(len(a)))
        if decide(c, None, True).kind == "same":
            assert 1 - MARGIN <= c.ci[0] and c.ci[1] <= 1 + MARGIN


def test_rounds_to_decide_shrinks_the_interval_enough():
    """The planning figure: about as many rounds as make the interval decide, if the
    spread stays as measured."""
    rng = random.Random(5)
    a, b = simulated(3, 1.0, rng, 0.02, 0.05)
    c = compare(a, b, when=aligned(3))
    need = rounds_to_decide(c)
    assert need is None or need > 3
    more_a, more_b = simulated(200, 1.0, random.Random(6), 0.02, 0.05)
    if need:
        wide = compare(more_a[:need], more_b[:need], when=aligned(need))
        assert wide.ci[1] / wide.ci[0] < c.ci[1] / c.ci[0]


def at(*keys: int) -> list[tuple[str, int]]:
    """Runs' `when` keys (start, repetition) at these seconds past a minute."""
    return [(f"2026-12-07T14:00:{k:02d}", 1) for k in keys]


@pytest.mark.parametrize("when_a, when_b, want", [
    (at(0, 10, 20), at(5, 15, 25), [(10, 20), (11, 21), (12, 22)]),        # A B A B A B
    (at(5, 10, 30), at(0, 15, 25), [(10, 20), (11, 21), (12, 22)]),        # B A | A B | B A
    # A's second run disturbed and measured again at once (the first set aside): A's
    # repeat is B's second run's neighbour, whatever its repetition number
    (at(0, 12, 30), at(5, 15, 25), [(10, 20), (11, 21), (12, 22)]),
    (at(0, 1, 2), at(10, 11, 12), [(12, 20)]),                             # A A A B B B
    (at(0, 10), at(5, 15, 25), []),                                        # not one key a value
])
def test_runs_are_paired_with_the_run_next_to_them(when_a, when_b, want):
    assert pairs([10, 11, 12], [20, 21, 22], when_a, when_b) == want


def test_ties_in_the_start_are_ordered_by_repetition():
    same = "2026-12-07T14:00:00"
    assert pairs([10, 11], [20, 21], [(same, 1), (same, 2)], [(same, 1), (same, 2)]) == [
        (10, 20), (11, 21)]


def test_fewer_than_two_pairs_compare_as_two_samples():
    c = compare([10, 11, 12], [20, 21, 22], when=(at(0, 1, 2), at(10, 11, 12)))
    assert c.paired == 0 and c.ci is not None          # Welch's, on the two samples
    assert paired_log([(10, 20)]) is None


def test_a_verdict_writes_its_ratio_in_the_one_form():
    """A verdict made in analysis/ wrote '1.48e+03×'; the report's form everywhere."""
    assert compare([1.0, 1.01, 0.99], [1482.0, 1483.0, 1481.0]).verdict == "1,482×"
