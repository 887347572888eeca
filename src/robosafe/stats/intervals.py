"""Confidence intervals used by every robosafe table.

SafeVLA-Bench App. E: Wilson score 95% intervals for proportions (SR, Safety, SBU, per-spec
violation rates) and 10,000-resample episode-level percentile bootstrap intervals with a fixed
seed for continuous metrics (VSI, VSI|U).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported by the functions that need it: `stats wilson` stays fast
    import numpy as np


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
    # stdlib quantile (AS241, within 1e-15 relative of scipy's ndtri): no scipy at start-up
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


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


def mean_with_ci(values: Sequence[float], *, n_boot: int, seed: int
                 ) -> tuple[float | None, list[float] | None]:
    """Mean and its episode-level percentile bootstrap 95% interval (SafeVLA-Bench App. E), the
    interval of every continuous metric (VSI, forces, cumulative cost, interventions); (None,
    None) for no values, no interval when ``n_boot`` is 0."""
    import numpy as np

    if len(values) == 0:
        return None, None
    x = np.asarray(values, dtype=float)
    if n_boot == 0:
        return float(x.mean()), None
    return float(x.mean()), bootstrap_mean_interval(x, n_boot=n_boot, seed=seed).as_list()


def bootstrap_mean_interval(values: np.ndarray, *, n_boot: int = 10_000, seed: int = 0,
                            confidence: float = 0.95, chunk: int = 1000) -> Interval:
    """Episode-level percentile bootstrap interval of the mean (SafeVLA-Bench App. E).

    Resamples episodes with replacement ``n_boot`` times from ``numpy.random.default_rng(seed)``
    and returns the (1-c)/2 and (1+c)/2 percentiles of the resampled means. Resampling is done
    in chunks so memory stays at ``chunk * n`` indices.
    """
    import numpy as np

    from robosafe.budget import check_bootstrap

    check_bootstrap(n_boot)  # the means array alone is 8 bytes a resample
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


# --- Benchmark-audit intervals (Jiang et al., "What Are We Actually Benchmarking in Robot
# Manipulation?", App. A.2 "Interval methods"). Every drop is calibration minus altered, so a
# positive value means the altered (or fresh) run scored lower.


def newcombe_interval(x_c: int, n_c: int, x_a: int, n_a: int,
                      confidence: float = 0.95) -> Interval:
    """Newcombe-Wilson (hybrid score) interval for drop = p_c - p_a (audit paper App. A.2).

    With Wilson intervals [L_c, U_c] for p_c = x_c/n_c and [L_a, U_a] for p_a = x_a/n_a:
    lower = drop - sqrt((p_c - L_c)^2 + (U_a - p_a)^2),
    upper = drop + sqrt((U_c - p_c)^2 + (p_a - L_a)^2).
    Rows are treated as independent Bernoulli outcomes (Tables 5 and 7).
    """
    if n_c <= 0 or n_a <= 0:
        raise ValueError(f"need n_c > 0 and n_a > 0, got n_c={n_c}, n_a={n_a}")
    p_c, p_a = x_c / n_c, x_a / n_a
    w_c = wilson_interval(x_c, n_c, confidence)
    w_a = wilson_interval(x_a, n_a, confidence)
    drop = p_c - p_a
    return Interval(drop - math.hypot(p_c - w_c.low, w_a.high - p_a),
                    drop + math.hypot(w_c.high - p_c, p_a - w_a.low))


def paired_wald_interval(calibration: np.ndarray, altered: np.ndarray,
                         confidence: float = 0.95) -> Interval:
    """Paired row-level Wald interval for drop = mean_i d_i (audit paper App. A.2, Table 6).

    d_i = calibration_i - altered_i over instances both runs share (row i of each array is the
    same instance); CI = drop +- z sd(d_i) / sqrt(n), sd with ddof=1. Used for bounded scores
    (CALVIN tasks completed in {0..5}) and for binary indicators such as 5/5 chain success.
    This is the unstratified row-level interval, not the task-stratified Sec. 4 statistic.
    With fewer than two pairs the spread is undefined and the interval is [nan, nan].
    """
    import numpy as np
    c = np.asarray(calibration, dtype=float)
    a = np.asarray(altered, dtype=float)
    if c.ndim != 1 or c.shape != a.shape:
        raise ValueError(f"need two 1-D arrays of equal length, got {c.shape} and {a.shape}")
    n = c.shape[0]
    if n < 2:
        return Interval(math.nan, math.nan)
    d = c - a
    half = z_value(confidence) * float(np.std(d, ddof=1)) / math.sqrt(n)
    drop = float(np.mean(d))
    return Interval(drop - half, drop + half)


def two_sample_wald_interval(calibration: np.ndarray, altered: np.ndarray,
                             confidence: float = 0.95) -> Interval:
    """Independent two-sample Wald interval for drop = mean(c) - mean(a) (App. A.2, Table 8).

    SE = sqrt(var(c)/n_c + var(a)/n_a) with sample variances (ddof=1); CI = drop +- z SE. For
    runs that share no instances (CALVIN sample overfitting: fresh sequence manifests).
    With fewer than two rows on either side the interval is [nan, nan].
    """
    import numpy as np
    c = np.asarray(calibration, dtype=float).ravel()
    a = np.asarray(altered, dtype=float).ravel()
    if c.size < 2 or a.size < 2:
        return Interval(math.nan, math.nan)
    se = math.sqrt(float(np.var(c, ddof=1)) / c.size + float(np.var(a, ddof=1)) / a.size)
    drop = float(np.mean(c) - np.mean(a))
    half = z_value(confidence) * se
    return Interval(drop - half, drop + half)


def stratified_bootstrap_mean_interval(values: np.ndarray, strata: np.ndarray, *,
                                       n_boot: int = 10_000, seed: int = 0,
                                       confidence: float = 0.95,
                                       chunk: int = 1000) -> Interval:
    """Task-stratified percentile bootstrap interval of the mean (audit paper Sec. 4 setting).

    Each replicate resamples, with replacement, n_t episodes from within every task t (the
    strata) and takes the mean over all N episodes, so task composition is fixed and only
    within-task variation enters (the same variance the Sec. 4 task-stratified estimator
    uses). Draw order, for reproducibility from ``numpy.random.default_rng(seed)``: per chunk
    of replicates, strata in sorted label order, one (chunk, n_t) index block each. With a
    single stratum this is exactly ``bootstrap_mean_interval`` with the same seed and chunk.
    """
    import numpy as np
    x = np.asarray(values, dtype=float)
    s = np.asarray(strata)
    if x.ndim != 1 or s.shape != x.shape:
        raise ValueError(f"need 1-D values and strata of equal length, got {x.shape} and "
                         f"{s.shape}")
    n = x.shape[0]
    if n == 0:
        return Interval(math.nan, math.nan)
    labels, inverse = np.unique(s, return_inverse=True)
    groups = [x[inverse == g] for g in range(labels.shape[0])]
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    for lo in range(0, n_boot, chunk):
        hi = min(n_boot, lo + chunk)
        total = np.zeros(hi - lo)
        for g in groups:
            total += g[rng.integers(0, g.shape[0], size=(hi - lo, g.shape[0]))].sum(axis=1)
        means[lo:hi] = total / n
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return Interval(float(low), float(high))
