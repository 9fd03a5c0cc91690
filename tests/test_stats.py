"""Statistics: known samples give known p-values, intervals and verdicts."""

import math

import pytest

from stacklab.stats import (bootstrap_ci, compare, mann_whitney_p, merged_percentiles,
                            ratio_ci)


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
    lo, hi = ratio_ci([100, 101, 99, 100], [150, 151, 149, 150])
    assert lo <= 1.5 <= hi and hi - lo < 0.05


def test_a_clear_gain_is_a_winner():
    c = compare([100, 101, 102, 99, 100], [110, 111, 112, 109, 110])
    assert c.significant and c.verdict == "+10.0%"


def test_noise_is_no_significant_difference():
    c = compare([100, 105, 95, 102], [101, 97, 104, 99])
    assert not c.significant
    assert c.verdict == "~ no significant difference"


def test_three_repetitions_cannot_be_significant_at_five_percent():
    c = compare([100, 100, 100], [200, 200, 200])
    assert c.p == pytest.approx(0.1) and not c.significant


def test_merged_histograms_give_the_pooled_percentiles():
    import base64
    from hdrh.histogram import HdrHistogram

    def encoded(values):
        h = HdrHistogram(1, 3_600_000_000, 3)
        for v in values:
            h.record_value(v)
        # the engine's format: uncompressed V2, base64 (strip the compression wrapper)
        import struct, zlib
        wrapped = base64.b64decode(h.encode())
        _, length = struct.unpack(">ii", wrapped[:8])
        return base64.b64encode(zlib.decompress(wrapped[8:8 + length])).decode()

    a, b = [100] * 90 + [1000] * 10, [200] * 100
    merged = merged_percentiles([encoded(a), encoded(b)])
    assert merged["count"] == 200
    assert merged["p50"] == pytest.approx(200, rel=0.01)    # the 100th of 200 values
    assert merged["p99"] == pytest.approx(1000, rel=0.01)
    # averaging the two runs' p99 (1000 and 200) would have said 600


@pytest.mark.parametrize("n, level", [(3, 0.75), (4, 0.875), (5, 0.9375), (6, 0.95), (9, 0.95)])
def test_small_samples_say_what_their_interval_really_covers(n, level):
    from stacklab.analyze import Estimate
    e = Estimate.of([100.0 + i for i in range(n)])
    assert e.ci_level == pytest.approx(level)
    if n < 6:
        assert e.ci == (100.0, 100.0 + n - 1)          # the bootstrap gives [min, max]
