"""Statistics: known samples give known p-values, intervals and verdicts; the verdict,
p and interval never disagree."""

import math
import random

import pytest

from stacklab.analysis.stats import bootstrap_ci, compare, mann_whitney_p, merged_percentiles, welch_log


@pytest.mark.parametrize("a, b, p", [
    ([1, 2, 3], [4, 5, 6], 2 / 20),          # the smallest p three against three can give
    ([1, 2, 3, 4], [5, 6, 7, 8], 2 / 70),
    ([1, 3, 5], [2, 4, 6], 14 / 20),
    ([1, 2, 3], [1, 2, 3], 1.0),
    ([5, 5, 5], [5, 5, 5], 1.0),             # all tied
])
def test_mann_whitney_exact(a, b, p):
    assert math.isclose(mann_whitney_p(a, b), p)


def test_mann_whitney_large_samples_use_the_normal_approximation():
    a = list(range(40))
    b = [x + 20 for x in range(40)]
    p = mann_whitney_p(a, b)
    assert 0 < p < 0.001
    assert mann_whitney_p(a, list(a)) > 0.9


def test_bootstrap_ci_contains_the_median_and_is_seeded():
    values = [100, 102, 98, 101, 99, 103, 97]
    lo, hi = bootstrap_ci(values)
    assert lo <= 100 <= hi
    assert bootstrap_ci(values) == (lo, hi)            # same seed, same answer
    assert 97 <= lo and hi <= 103
    assert bootstrap_ci([5]) is None


def test_ratio_ci_brackets_the_true_ratio():
    lo, hi = compare([100, 101, 99, 100], [150, 151, 149, 150]).ci
    assert lo <= 1.5 <= hi and hi - lo < 0.05


def test_welch_on_logs_matches_a_worked_example():
    # log values: a = ln(1, e, e²) → mean 1, var 1; b = ln(e², e³, e⁴) → mean 3, var 1
    # t = 2 / sqrt(2/3) = 2.449 on df = 4; two-sided p = 0.0704; t(0.975, 4) = 2.7764
    e = math.e
    w = welch_log([1, e, e * e], [e ** 2, e ** 3, e ** 4])
    assert w.df == pytest.approx(4)
    assert w.ratio == pytest.approx(e ** 2)
    assert w.p == pytest.approx(0.07043, abs=1e-4)
    half = 2.776445 * math.sqrt(2 / 3)
    assert w.ci == pytest.approx((math.exp(2 - half), math.exp(2 + half)))


def test_a_clear_gain_is_a_winner():
    c = compare([100, 101, 102, 99, 100], [110, 111, 112, 109, 110])
    assert c.significant and c.verdict == "+10.0%"


def test_noise_is_no_significant_difference():
    c = compare([100, 105, 95, 102], [101, 97, 104, 99])
    assert not c.significant
    assert c.verdict == "~ no significant difference"


def test_three_repetitions_can_show_a_tenfold_difference():
    # the case: an exact Mann-Whitney p cannot go below 0.1 at 3 vs 3, so it
    # called a ~10× ratio with a CI of 7.97–20.2 "no significant difference"
    c = compare([1000, 1100, 950], [10400, 9800, 11900])
    assert c.significant and c.p < 0.001
    assert 8 < c.ci[0] < c.ratio < c.ci[1] < 13
    assert c.verdict == "10.5×" and c.p_rank is None    # no rank test at n = 3


def test_a_small_ratio_with_a_wide_interval_is_not_significant():
    c = compare([1000, 1300, 800], [1100, 900, 1400])
    assert 1.05 < c.ratio < 1.15 and c.ci[0] < 1 < c.ci[1]
    assert not c.significant and c.p > 0.05
    assert c.verdict == "~ no significant difference"


def test_the_ratio_is_the_one_the_interval_is_about():
    a, b = [100, 200, 400], [300, 300, 300]
    c = compare(a, b)
    assert c.ratio == pytest.approx(1.5)          # geometric means 200 and 300
    assert c.median_a == 200 and c.median_b == 300
    lo, hi = c.ci
    assert lo * hi == pytest.approx(c.ratio ** 2)  # symmetric around it on a log scale


def random_pair(rng: random.Random) -> tuple[list[float], list[float]]:
    """Log-normal runs: 2..12 a side, noise from 1% to 60%, true ratio 1 to e."""
    n_a, n_b = rng.randint(2, 12), rng.randint(2, 12)
    spread = rng.choice([0.01, 0.05, 0.2, 0.6])
    shift = rng.choice([0.0, 0.02, 0.1, 0.3, 1.0])
    return ([1000 * math.exp(rng.gauss(0, spread)) for _ in range(n_a)],
            [1000 * math.exp(shift + rng.gauss(0, spread)) for _ in range(n_b)])


def test_p_below_five_percent_exactly_when_the_interval_excludes_one():
    rng = random.Random(20261123)
    seen = set()
    for _ in range(500):
        a, b = random_pair(rng)
        c = compare(a, b)
        excludes_one = not c.ci[0] <= 1 <= c.ci[1]
        assert (c.p < 0.05) == excludes_one == c.significant, (a, b, c)
        assert c.ci[0] <= c.ratio <= c.ci[1]
        seen.add(c.significant)
    assert seen == {True, False}        # both outcomes were exercised


def test_identical_values_on_both_sides():
    same = compare([5, 5, 5], [5, 5, 5])
    assert same.ratio == 1 and same.ci == (1, 1) and same.p == 1 and not same.significant
    apart = compare([100, 100, 100], [200, 200, 200])   # no noise: the difference is exact
    assert apart.ratio == pytest.approx(2) and apart.p == 0 and apart.significant
    assert apart.ci == pytest.approx((2, 2))


def test_one_side_without_noise_uses_the_other_sides_degrees_of_freedom():
    w = welch_log([100, 100, 100], [150, 160, 140, 155])
    assert w.df == pytest.approx(3) and w.p < 0.05


@pytest.mark.parametrize("a, b", [([100], [200, 210]), ([], [1, 2]), ([100, 110], [200])])
def test_fewer_than_two_runs_a_side_gives_no_verdict(a, b):
    c = compare(a, b)
    assert c.p is None and c.ci is None and not c.significant
    assert c.verdict in ("n/a", "no verdict: fewer than 2 runs a side")


def test_values_that_are_not_positive_have_no_ratio():
    c = compare([0, 1, 2], [3, 4, 5])
    assert c.ratio is None and c.p is None and c.verdict == "n/a"


def test_mann_whitney_is_reported_from_five_runs_a_side_and_never_decides():
    four = compare([100, 101, 102, 99], [110, 111, 112, 109])
    assert four.p_rank is None
    five = compare([100, 101, 102, 99, 100], [110, 111, 112, 109, 110])
    assert five.p_rank == pytest.approx(2 / 252)
    # ranks say "completely separated" while the means barely differ: Welch decides
    tiny = compare([100.0, 100.1, 100.2, 100.3, 100.4], [100.5, 100.6, 100.7, 100.8, 130])
    assert tiny.p_rank < 0.05 and tiny.p > 0.05 and not tiny.significant


def test_merged_histograms_give_the_pooled_percentiles():
    from fakes import engine_histogram

    def encoded(values):        # as a schema-1 report stored it: uncompressed V2
        return engine_histogram(values, schema=1)

    a, b = [100] * 90 + [1000] * 10, [200] * 100
    merged = merged_percentiles([encoded(a), encoded(b)])
    assert merged["count"] == 200
    assert merged["p50"] == pytest.approx(200, rel=0.01)    # the 100th of 200 values
    assert merged["p99"] == pytest.approx(1000, rel=0.01)
    # averaging the two runs' p99 (1000 and 200) would have said 600


@pytest.mark.parametrize("n, level", [(3, 0.75), (4, 0.875), (5, 0.9375), (6, 0.96875),
                                      (9, 0.9609375)])
def test_small_samples_say_what_their_interval_really_covers(n, level):
    from stacklab.analysis.analyze import Estimate
    e = Estimate.of([100.0 + i for i in range(n)])
    assert e.ci_level == pytest.approx(level)
    if n < 6:
        assert e.ci == (100.0, 100.0 + n - 1)          # the bootstrap gives [min, max]


def test_percentiles_use_the_engines_nearest_rank_rule():
    """Rank max(1, ⌈q·n⌉), as the engine computes its per-run percentiles: of 1..10,
    p11 is the 2nd value (hdrh's own rounding would give the 1st)."""
    from hdrh.histogram import HdrHistogram
    from stacklab.analysis.stats import value_at_percentile
    h = HdrHistogram(1, 3_600_000_000, 3)
    for v in range(1, 11):
        h.record_value(v)
    assert value_at_percentile(h, 11) == 2
    assert value_at_percentile(h, 10) == 1
    assert value_at_percentile(h, 50) == 5
    assert value_at_percentile(h, 100) == 10
    assert value_at_percentile(h, 0) == 1
