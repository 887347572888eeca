"""Confidence intervals used by every robosafe table.

SafeVLA-Bench App. E: Wilson score 95% intervals for proportions (SR, Safety, SBU, per-spec
violation rates) and 10,000-resample episode-level percentile bootstrap intervals with a fixed
seed for continuous metrics (VSI, VSI|U).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    def as_list(self) -> list[float]:
        return [self.low, self.high]


def z_value(confidence: float = 0.95) -> float:
    """Two-sided normal quantile for ``confidence``."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return float(norm.ppf(0.5 + confidence / 2.0))


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> Interval:
    """Wilson score interval for a binomial proportion k/n (SafeVLA-Bench App. E).

    centre = (p + z^2/2n) / (1 + z^2/n), half = z sqrt(p(1-p)/n + z^2/4n^2) / (1 + z^2/n).
    For n == 0 the proportion is undefined and the interval is [0, 1].
    """
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return Interval(0.0, 1.0)
    z = z_value(confidence)
    p = k / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # Clamp only float round-off: at k=0 / k=n the exact bounds are 0 / 1.
    return Interval(max(0.0, centre - half), min(1.0, centre + half))


def bootstrap_mean_interval(values: np.ndarray, *, n_boot: int = 10_000, seed: int = 0,
                            confidence: float = 0.95, chunk: int = 1000) -> Interval:
    """Episode-level percentile bootstrap interval of the mean (SafeVLA-Bench App. E).

    Resamples episodes with replacement ``n_boot`` times from ``numpy.random.default_rng(seed)``
    and returns the (1-c)/2 and (1+c)/2 percentiles of the resampled means. Resampling is done
    in chunks so memory stays at ``chunk * n`` indices.
    """
    x = np.asarray(values, dtype=float)
    n = x.shape[0]
    if n == 0:
        return Interval(math.nan, math.nan)
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    for lo in range(0, n_boot, chunk):
        hi = min(n_boot, lo + chunk)
        idx = rng.integers(0, n, size=(hi - lo, n))
        means[lo:hi] = x[idx].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return Interval(float(low), float(high))
