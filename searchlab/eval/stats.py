"""Uncertainty for evaluation: bootstrap confidence intervals of a mean score and a paired bootstrap test.

Every evaluation metric here is a mean over questions of a per-question value: EM,
F1 and cover EM (0/1 or in [0, 1]), but also counts and costs such as searches per
question or latency. :func:`bootstrap_ci` puts a percentile-bootstrap confidence
interval around such a mean; :func:`paired_bootstrap` compares two systems scored
on the same questions, resampling questions rather than scores so that the
per-question correlation between the systems is kept.

Both resample with ``numpy.random.default_rng(seed)`` in one vectorised draw of a
``(resamples, n)`` index array, so a given seed always gives the same numbers. That
array costs ``8 * resamples * n`` bytes (2000 resamples of 10,000 questions: 160 MB).

>>> bootstrap_ci([0.25])
Interval(mean=0.25, low=0.25, high=0.25)
>>> paired_bootstrap([1, 0, 1], [1, 0, 1])
PairedTest(difference=0.0, low=0.0, high=0.0, p_value=1.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Interval", "PairedTest", "bootstrap_ci", "paired_bootstrap"]


@dataclass(frozen=True)
class Interval:
    """A sample mean and the bounds of its confidence interval."""

    mean: float
    low: float
    high: float


@dataclass(frozen=True)
class PairedTest:
    """System a against system b on the same questions.

    ``difference`` is ``mean(a) - mean(b)``, ``low`` and ``high`` bound its
    confidence interval, and ``p_value`` is the two-sided p-value of "no difference".
    """

    difference: float
    low: float
    high: float
    p_value: float


def _as_scores(values: Sequence[float], name: str) -> np.ndarray:
    """The per-question values as a 1-D float array; empty, non-1-D or non-finite input raises ``ValueError``."""
    array = np.asarray(values, dtype=float)
    if array.ndim != 1:
        raise ValueError(f"{name} must be a flat sequence of per-question values, got an array of shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{name} is empty: a mean and its interval need at least one value")
    not_finite = np.flatnonzero(~np.isfinite(array))
    if not_finite.size:
        # A NaN would silently turn every resampled mean into NaN; name where it is so it can be traced.
        first = int(not_finite[0])
        raise ValueError(f"{name} has {not_finite.size} NaN or infinite value(s), the first at index {first}")
    return array


def _check_settings(resamples: int, confidence: float) -> None:
    """Reject a resample count or confidence level for which the bootstrap means nothing."""
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")


def _resampled_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """The means of ``resamples`` bootstrap samples of ``values`` (drawn with replacement, same size)."""
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, values.size, size=(resamples, values.size))
    return values[indices].mean(axis=1)


def _percentile_bounds(means: np.ndarray, confidence: float) -> tuple[float, float]:
    """The central ``confidence`` range of the bootstrap means: the percentile interval."""
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def bootstrap_ci(
    values: Sequence[float], resamples: int = 2000, confidence: float = 0.95, seed: int = 0
) -> Interval:
    """The mean of per-question values with its percentile-bootstrap confidence interval.

    Resamples the values with replacement ``resamples`` times and takes the central
    ``confidence`` share of the resampled means as the interval. The percentile
    bootstrap needs no normality assumption, so it stays inside [0, 1] for 0/1 scores
    and follows the skew of counts such as searches per question. A single value
    gives an interval of zero width: one question says nothing about the spread.

    Raises ``ValueError`` for empty input, NaN or infinite values, ``resamples < 1``
    or a ``confidence`` outside (0, 1).

    >>> bootstrap_ci([1.0, 1.0, 1.0])
    Interval(mean=1.0, low=1.0, high=1.0)
    """
    _check_settings(resamples, confidence)
    scores = _as_scores(values, "values")
    mean = float(scores.mean())
    if scores.size == 1:
        return Interval(mean=mean, low=mean, high=mean)
    low, high = _percentile_bounds(_resampled_means(scores, resamples, seed), confidence)
    return Interval(mean=mean, low=low, high=high)


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], resamples: int = 2000, confidence: float = 0.95, seed: int = 0
) -> PairedTest:
    """Compare systems a and b, scored on the same questions in the same order, with a paired bootstrap.

    This is the standard paired bootstrap for comparing NLP systems (Koehn 2004;
    Berg-Kirkpatrick et al. 2012): resample question indices with replacement and
    use the same indices for both systems. Resampling the per-question differences
    ``d = a - b`` does exactly that. Pairing matters because both systems find the
    same questions easy or hard: that shared variation cancels in ``d``, so a small
    but consistent gain can be significant even when the two separate intervals of
    :func:`bootstrap_ci` overlap.

    The interval is the percentile interval of the resampled mean differences ``d*``.
    The two-sided p-value tests "no difference" with the bootstrap distribution
    shifted to be centred on the null: under the null ``d* - d`` shows how far a mean
    difference strays by chance, so

        p = (1 + #{|d* - d| >= |d|}) / (1 + resamples)

    The +1 in numerator and denominator (Davison & Hinkley 1997; North et al. 2002)
    counts the observed sample as one of the resamples, so p is never exactly 0: with
    R resamples no p-value below 1 / (R + 1) can be claimed.

    When every difference is zero the result is difference 0, interval [0, 0] and
    p = 1. With a single question the interval has zero width and p is 1: one
    question gives no spread to judge a difference against. (For the same reason any
    bootstrap test over very few questions is unreliable.)

    Raises ``ValueError`` for empty inputs, inputs of different lengths, NaN or
    infinite values, ``resamples < 1`` or a ``confidence`` outside (0, 1).

    >>> paired_bootstrap([1, 1, 0, 1], [1, 0, 0, 1]).difference
    0.25
    """
    _check_settings(resamples, confidence)
    scores_a, scores_b = _as_scores(a, "a"), _as_scores(b, "b")
    if scores_a.size != scores_b.size:
        raise ValueError(
            f"a and b must score the same questions, but a has {scores_a.size} values and b has {scores_b.size}"
        )
    differences = scores_a - scores_b
    observed = float(differences.mean())
    if differences.size == 1:
        return PairedTest(difference=observed, low=observed, high=observed, p_value=1.0)
    resampled = _resampled_means(differences, resamples, seed)
    low, high = _percentile_bounds(resampled, confidence)
    at_least_as_extreme = int(np.count_nonzero(np.abs(resampled - observed) >= abs(observed)))
    p_value = (1 + at_least_as_extreme) / (1 + resamples)
    return PairedTest(difference=observed, low=low, high=high, p_value=p_value)
