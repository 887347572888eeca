"""Task-stratified Wald tests for bounded scores (paper 002, Sec. 4 and App. C.1, C.6).

Scores are integers Y in {0..R} (R = 1 for success/failure), given as arrays of shape (T, S):
T tasks (fixed strata) with S samples each. Both tests are one-sided, H0: Delta <= 0 against
H1: Delta > 0, and reject when Z_* > z_{1-alpha}. All sums of squares are formed in integers
(S*Q is an integer), so the zero-variance branch of the C.1 convention is taken exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri  # norm.ppf / norm.sf exactly, without scipy.stats' import

from robosafe.errors import RobosafeError


@dataclass(frozen=True)
class WaldResult:
    """One-sided stratified Wald test of H0: Delta <= 0.

    ``statistic`` is Z_* (may be +-inf under the zero-variance convention), ``pvalue`` its
    one-sided normal tail, ``reject`` the rule Z_* > ``critical_value`` = z_{1-alpha},
    ``estimate`` Delta-hat on the mean-score scale and ``stderr`` sqrt(V-hat). ``gap_count`` is
    the count-scale gap L = B - A and ``q`` the denominator term Q (C.2) or Q_ind (C.6).
    """

    statistic: float
    pvalue: float
    reject: bool
    estimate: float
    stderr: float
    critical_value: float
    gap_count: int
    q: float


def z_crit(alpha: float) -> float:
    """z_{1-alpha}, the one-sided normal critical value; alpha must lie in (0, 1/2) (App. C.1)."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating)) \
            or not 0.0 < float(alpha) < 0.5:
        raise RobosafeError(f"alpha must be a number in (0, 0.5), got {alpha!r}")
    return float(ndtri(1.0 - float(alpha)))


def check_design(T: int, S: int, R: int) -> tuple[int, int, int]:
    """Validate the benchmark shape: T >= 1 tasks, S >= 2 samples per task, scores in {0..R}."""
    for name, v, least in (("T", T, 1), ("S", S, 2), ("R", R, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise RobosafeError(f"{name} must be an integer, got {v!r}")
        if v < least:
            raise RobosafeError(f"{name} must be >= {least}, got {v}")
    return int(T), int(S), int(R)


def _scores(y: object, R: int, name: str) -> np.ndarray:
    a = np.asarray(y)
    if a.ndim != 2:
        raise RobosafeError(f"{name} must be a 2-D array of shape (T, S), got shape {a.shape}")
    if a.dtype.kind not in "biuf":
        raise RobosafeError(f"{name} must hold numbers, got dtype {a.dtype}")
    if a.dtype.kind == "f" and not np.all(np.isfinite(a) & (a == np.round(a))):
        raise RobosafeError(f"{name} must hold integer scores in {{0..{R}}}")
    a = a.astype(np.int64)
    if a.size and (a.min() < 0 or a.max() > R):
        raise RobosafeError(f"{name} has scores outside {{0..{R}}} "
                            f"(min {a.min()}, max {a.max()})")
    return a


def _pair(y_a: object, y_b: object, R: int) -> tuple[np.ndarray, np.ndarray, int, int]:
    if isinstance(R, bool) or not isinstance(R, (int, np.integer)) or R < 1:
        raise RobosafeError(f"R must be an integer >= 1, got {R!r}")
    a, b = _scores(y_a, int(R), "y_a"), _scores(y_b, int(R), "y_b")
    if a.shape != b.shape:
        raise RobosafeError(f"y_a and y_b must have the same shape (T, S), got {a.shape} "
                            f"and {b.shape}")
    T, S = a.shape
    check_design(T, S, int(R))
    return a, b, T, S


def _wald(L: int, sq: int, T: int, S: int, alpha: float) -> WaldResult:
    """Z_* from the count gap L and S*Q (integer), with the C.1 zero-variance convention."""
    z = z_crit(alpha)
    q = sq / S
    # V-hat = Q / (T^2 S (S-1)) (C.1); Z = L / sqrt(S/(S-1) Q) is the same ratio on count scale.
    stderr = math.sqrt(q / (T * T * S * (S - 1)))
    if sq > 0:
        stat = L / math.sqrt(S / (S - 1) * q)
    else:
        stat = math.inf if L > 0 else (0.0 if L == 0 else -math.inf)
    return WaldResult(statistic=stat, pvalue=float(ndtr(-stat)), reject=bool(stat > z),
                      estimate=L / (T * S), stderr=stderr, critical_value=z, gap_count=L, q=q)


def paired_wald_test(y_a: object, y_b: object, R: int = 1, alpha: float = 0.05) -> WaldResult:
    """Paired task-stratified Wald test (Sec. 4; App. C.1, Z_* and the rule Z_* > z_{1-alpha}).

    delta_{t,i} = Y_B - Y_A, d_t = sum_i delta, s_t = sum_i delta^2,
    Z = sum_t d_t / sqrt(S/(S-1) * sum_t (s_t - d_t^2/S)); when V-hat = 0 the statistic is
    +inf, 0 or -inf as Delta-hat is > 0, = 0 or < 0. ``y_a``/``y_b``: shape (T, S), the same
    benchmark instances in the same order for both policies.
    """
    a, b, T, S = _pair(y_a, y_b, R)
    delta = b - a
    d = delta.sum(axis=1)
    s = (delta * delta).sum(axis=1)
    return _wald(int(d.sum()), int((S * s - d * d).sum()), T, S, alpha)


def independent_wald_test(y_a: object, y_b: object, R: int = 1,
                          alpha: float = 0.05) -> WaldResult:
    """Stratified two-sample Wald test for independently sampled evaluations (App. C.6).

    With a_t, b_t the task totals and u_t, v_t the task sums of squares,
    Q_ind = sum_t [u_t - a_t^2/S + v_t - b_t^2/S] and Z_ind = L / sqrt(S/(S-1) Q_ind), with the
    C.1 zero-variance convention. Both arrays have shape (T, S): same tasks, same S per task.
    """
    a, b, T, S = _pair(y_a, y_b, R)
    at, bt = a.sum(axis=1), b.sum(axis=1)
    ut, vt = (a * a).sum(axis=1), (b * b).sum(axis=1)
    sq = int((S * ut - at * at + S * vt - bt * bt).sum())
    return _wald(int(bt.sum() - at.sum()), sq, T, S, alpha)
