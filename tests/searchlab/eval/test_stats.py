"""Bootstrap intervals and the paired bootstrap test, checked on real numbers against what statistics predicts.

Expected values are worked out in the comments (normal approximations, binomial
counts), never taken from the module.
"""

import doctest
import math

import numpy as np
import pytest

from searchlab.eval import stats
from searchlab.eval.stats import Interval, PairedTest, bootstrap_ci, paired_bootstrap


def bernoulli(n: int, p: float, seed: int) -> list[float]:
    """n seeded 0/1 scores, each 1 with probability p: the shape of per-question EM."""
    rng = np.random.default_rng(seed)
    return (rng.random(n) < p).astype(float).tolist()


# --- bootstrap_ci -------------------------------------------------------------------------------


def test_ci_of_bernoulli_draws_matches_the_normal_approximation():
    values = bernoulli(400, 0.5, seed=1234)
    p = sum(values) / len(values)
    interval = bootstrap_ci(values)
    assert interval.mean == pytest.approx(p)
    assert 0.0 <= interval.low <= interval.mean <= interval.high <= 1.0
    # For n = 400 the mean is close to normal: the 95% interval is about mean +- 1.96 standard errors.
    expected_width = 2 * 1.96 * math.sqrt(p * (1 - p) / len(values))
    assert interval.high - interval.low == pytest.approx(expected_width, rel=0.3)


def test_more_data_gives_a_narrower_interval():
    small = bootstrap_ci(bernoulli(100, 0.5, seed=7))
    large = bootstrap_ci(bernoulli(1600, 0.5, seed=7))
    # Width falls like 1/sqrt(n): 16 times the data should give about a quarter of the width.
    assert large.high - large.low < 0.5 * (small.high - small.low)


def test_counts_such_as_searches_per_question_get_an_interval_around_their_mean():
    searches = [0, 1, 1, 2, 2, 2, 3, 3, 4, 9] * 10
    interval = bootstrap_ci(searches)
    assert interval.mean == pytest.approx(2.7)
    assert interval.low < 2.7 < interval.high
    assert 0 < interval.low and interval.high < 9


def test_same_seed_gives_identical_results_and_another_seed_different_bounds():
    # Continuous values, so two seeds cannot land on the same order statistics by coincidence.
    values = np.random.default_rng(3).uniform(size=300).tolist()
    assert bootstrap_ci(values, seed=11) == bootstrap_ci(values, seed=11)
    first, second = bootstrap_ci(values, seed=11), bootstrap_ci(values, seed=12)
    assert first.mean == second.mean
    assert (first.low, first.high) != (second.low, second.high)


def test_single_value_gives_an_interval_of_zero_width():
    assert bootstrap_ci([0.75]) == Interval(mean=0.75, low=0.75, high=0.75)


def test_constant_values_give_an_interval_of_zero_width():
    assert bootstrap_ci([1.0] * 50) == Interval(mean=1.0, low=1.0, high=1.0)


def test_higher_confidence_gives_a_wider_interval():
    values = bernoulli(200, 0.3, seed=5)
    narrow = bootstrap_ci(values, confidence=0.5)
    wide = bootstrap_ci(values, confidence=0.99)
    assert wide.low < narrow.low and narrow.high < wide.high


def test_results_are_plain_floats():
    interval = bootstrap_ci([0, 1, 1, 0, 1])
    assert all(type(x) is float for x in (interval.mean, interval.low, interval.high))


# --- paired_bootstrap ---------------------------------------------------------------------------


def test_identical_systems_differ_by_zero_with_p_one():
    scores = bernoulli(100, 0.6, seed=2)
    assert paired_bootstrap(scores, scores) == PairedTest(difference=0.0, low=0.0, high=0.0, p_value=1.0)


def test_a_large_gain_is_significant():
    # b is right on questions 0-9, a on questions 0-39: a wins 30 questions and loses none.
    a = [1.0] * 40 + [0.0] * 10
    b = [1.0] * 10 + [0.0] * 40
    result = paired_bootstrap(a, b)
    assert result.difference == pytest.approx(0.6)  # 40/50 - 10/50
    # The difference has standard error about sqrt(0.6 * 0.4 / 50) = 0.07, so 0 is over 8 of them away.
    assert result.p_value < 0.01
    assert result.low > 0
    assert result.low < 0.6 < result.high


def test_one_question_out_of_200_is_not_significant():
    b = [1.0] * 100 + [0.0] * 100
    a = b.copy()
    a[150] = 1.0
    result = paired_bootstrap(a, b)
    assert result.difference == pytest.approx(1 / 200)
    # The resampled count of that one question is about Poisson(1); only a count of exactly 1 is closer to the
    # observed difference than 0 is, so p is about 1 - P(count = 1) = 1 - 1/e = 0.63.
    assert result.p_value > 0.05
    assert result.low <= 0 <= result.high


def test_a_loss_gives_a_negative_difference_and_is_still_two_sided():
    a = [1.0] * 10 + [0.0] * 40
    b = [1.0] * 40 + [0.0] * 10
    result = paired_bootstrap(a, b)
    assert result.difference == pytest.approx(-0.6)
    assert result.high < 0
    assert result.p_value < 0.01


def test_p_value_is_never_zero():
    resamples = 500
    result = paired_bootstrap([1.0] * 50, [0.0] * 50, resamples=resamples)
    # Every resample differs by exactly 1, none as far from 1 as 0 is: only the +1 smoothing remains.
    assert result.p_value == pytest.approx(1 / (resamples + 1))


def test_pairing_detects_a_small_consistent_gain_that_separate_intervals_miss():
    # The systems find the same questions easy: b is right on questions 0-99, a on those and on 100-109 too.
    # Each mean alone has a standard error of about 0.035, so the separate intervals (about +-0.07) overlap,
    # yet a never loses, and the difference (10 wins in 200, resampled about Poisson(10)) stays clear of 0.
    b = [1.0] * 100 + [0.0] * 100
    a = [1.0] * 110 + [0.0] * 90
    interval_a, interval_b = bootstrap_ci(a), bootstrap_ci(b)
    assert interval_a.low < interval_b.high  # the unpaired intervals overlap
    paired = paired_bootstrap(a, b)
    assert paired.difference == pytest.approx(0.05)
    assert paired.low > 0
    assert paired.p_value < 0.05


def test_paired_same_seed_gives_identical_results():
    rng = np.random.default_rng(8)
    a, b = rng.uniform(size=120).tolist(), rng.uniform(size=120).tolist()
    assert paired_bootstrap(a, b, seed=4) == paired_bootstrap(a, b, seed=4)
    assert paired_bootstrap(a, b, seed=4) != paired_bootstrap(a, b, seed=5)


def test_paired_single_question_has_zero_width_and_p_one():
    assert paired_bootstrap([1.0], [0.0]) == PairedTest(difference=1.0, low=1.0, high=1.0, p_value=1.0)


# --- errors -------------------------------------------------------------------------------------


def test_empty_input_is_rejected():
    with pytest.raises(ValueError, match="empty"):
        bootstrap_ci([])
    with pytest.raises(ValueError, match="empty"):
        paired_bootstrap([], [])


def test_different_lengths_are_rejected_naming_both():
    with pytest.raises(ValueError, match=r"a has 3 values and b has 2"):
        paired_bootstrap([1.0, 0.0, 1.0], [1.0, 0.0])


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_nan_and_infinite_values_are_rejected(bad):
    with pytest.raises(ValueError, match="NaN or infinite.*index 1"):
        bootstrap_ci([1.0, bad, 0.0])
    with pytest.raises(ValueError, match="NaN or infinite"):
        paired_bootstrap([1.0, 0.0, 0.0], [1.0, 0.0, bad])


@pytest.mark.parametrize("confidence", [0.0, 1.0, -0.5, 1.5, 95])
def test_confidence_outside_zero_one_is_rejected(confidence):
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci([1.0, 0.0], confidence=confidence)
    with pytest.raises(ValueError, match="confidence"):
        paired_bootstrap([1.0, 0.0], [0.0, 0.0], confidence=confidence)


@pytest.mark.parametrize("resamples", [0, -10])
def test_fewer_than_one_resample_is_rejected(resamples):
    with pytest.raises(ValueError, match="resamples"):
        bootstrap_ci([1.0, 0.0], resamples=resamples)
    with pytest.raises(ValueError, match="resamples"):
        paired_bootstrap([1.0, 0.0], [0.0, 0.0], resamples=resamples)


def test_nested_input_is_rejected():
    with pytest.raises(ValueError, match="flat sequence"):
        bootstrap_ci([[1.0, 0.0], [0.0, 1.0]])


def test_module_doctests_pass():
    failures, tried = doctest.testmod(stats)
    assert tried > 0 and failures == 0
