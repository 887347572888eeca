"""Top-line significance cutoffs for the paired bounded-score Wald test (paper 002, App. C).

Given only the top-line counts A = N mu_A and B = N mu_B (N = T S, L = B - A), a paired table
rejects iff L > c_alpha sqrt(Q) (C.2). Q ranges exactly over [Q_lo(L), Q_hi(A, L)] (C.3, C.4),
which gives the cutoffs L_exists / L_forall and the sharp classification of C.5.

How Q_hi is computed (same values as the C.4 dynamic program over (u, v), much faster):

1. Only the difference table matters. Baseline scores u_i in [max(0, -delta_i),
   R - max(0, delta_i)] can be chosen to total A iff the total negative movement
   j = sum_i max(0, -delta_i) satisfies j <= J := min(A, RN - B). So
   Q_hi(A, L) = Phi(L, J), the max of Q over difference tables with sum L and j <= J.
2. Per task, with positive movement p and negative movement n (d = p - n), the best table packs
   movement into samples of magnitude R (the C.4 closed form): q = Pi_R(p) + Pi_R(n) - d^2/S,
   feasible iff nu_R(p) + nu_R(n) <= S. With Pi_R(x) = R x - eps(x mod R), eps(r) = r (R - r),
   S q = S R (d + 2 n) - c(d, n mod R), c = S [eps(d + n) + eps(n)] + d^2.
   So a task is a *type* (d, x = n mod R) with a fixed cost, and n may be any value
   x + R k with k_lo <= k <= k_hi. Summed over tasks, j can be any value congruent to sum x
   (mod R) between Lo = sum n_lo and H = sum n_hi, and S Q = S R (L + 2 j) - sum c is best at
   the largest such j <= J.
3. H = (R N - L - D) / 2 where D sums the per-task defects RS - d - 2 n_hi, each in
   [0, 3R - 2]. A DP over tasks on the small state (L, D, X = sum x mod R) storing the least
   cost (ties: least Lo) replaces the (u, v) DP: about 2 RN * 3RT * R states instead of
   (RN)^2, and 2 R^2 S types per task instead of (RS + 1)^2 transitions. Only one D in 2R
   is reachable for given (L, X) (d + defect + 2x = RS mod 2R per task), so the compiled DP
   stores that lattice alone, and partial sums that cannot end at a wanted L are never formed
   (step 5 wants only small L). For R = 1 the cost
   d^2 is convex along each parity class, so the DP collapses to a greedy merge of sorted
   increments (``_state_dp_binary``), O(T * N) in all.
4. Evaluating Phi(L, J): states with H <= J give S R (L + 2 H) - c (a suffix max over D);
   states with H > J give S R (L + 2 j*) - c with j* = J - ((J - X) mod R) (a prefix min of the
   cost over D). A state is only realisable if its Lo <= J. The DP keeps, per state, the
   least-cost configuration with the least Lo; when the optimum over realisable states equals
   the optimum ignoring Lo (in every case tested) the value is exact as it stands; otherwise
   those (A, L) are recomputed with an exact DP that tracks Lo explicitly up to J.
5. Every table has Q <= N R^2, so a gap L with L > c_alpha sqrt(N R^2) rejects whatever the
   table; L_forall only needs Q_hi for the few gaps below that.

Rejection is always decided by the literal C.2 rule L > c_alpha * sqrt(Q) in float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np

from robosafe.budget import check_memory
from robosafe.errors import RobosafeError
from robosafe.stats.wald import check_design, z_crit

_INF = np.int64(1) << 62
_NEG = -_INF

Label = Literal["no_improvement", "provably_not_significant", "provably_significant",
                "indeterminate"]


# ---------------------------------------------------------------------------------------------
# validation


def _count(v: object, name: str, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise RobosafeError(f"{name} must be an integer count, got {v!r}")
    if not 0 <= v <= hi:
        raise RobosafeError(f"{name} must be in 0..{hi} (R*N), got {v}")
    return int(v)


def _counts(v: object, name: str, lo: int, hi: int) -> np.ndarray:
    a = np.asarray(v)
    if a.dtype.kind not in "iu":
        raise RobosafeError(f"{name} must hold integer counts, got dtype {a.dtype}")
    if a.size and (a.min() < lo or a.max() > hi):
        raise RobosafeError(f"{name} must be in {lo}..{hi}, got values in "
                            f"{a.min()}..{a.max()}")
    return a.astype(np.int64)


def _rejects(L: np.ndarray | int, sq: np.ndarray | int, S: int, c: float) -> np.ndarray:
    """The C.2 rule L > c_alpha sqrt(Q), Q = sq / S (sq = S Q is an integer)."""
    return np.asarray(L) > c * np.sqrt(np.asarray(sq) / S)


# ---------------------------------------------------------------------------------------------
# closed forms


def c_alpha(S: int, alpha: float) -> float:
    """c_alpha = z_{1-alpha} sqrt(S / (S - 1)) (App. C.2)."""
    check_design(1, S, 1)
    return z_crit(alpha) * math.sqrt(S / (S - 1))


def q_lo(L: int, S: int) -> float:
    """Q_lo(L; T, S) = r - r^2 / S with r = L mod S, the exact minimum of Q (App. C.3).

    It does not depend on T (nor on A or R, given L is feasible).
    """
    check_design(1, S, 1)
    if isinstance(L, bool) or not isinstance(L, (int, np.integer)) or L < 0:
        raise RobosafeError(f"L must be a non-negative integer, got {L!r}")
    r = int(L) % S
    return (S * r - r * r) / S


def ell_exists_star(S: int, alpha: float) -> int:
    """l*_exists(S, alpha) = 1 + floor(z^2 S / (S - 1 + z^2)) (App. C.3).

    The smallest count gap for which some compatible paired table rejects; always <= S.
    """
    check_design(1, S, 1)
    z2 = z_crit(alpha) ** 2
    return 1 + math.floor(z2 * S / (S - 1 + z2))


def l_exists(A: int, T: int, S: int, R: int, alpha: float) -> int | float:
    """Count-scale rejection-feasibility cutoff L_exists(A; T, S, R, alpha) (App. C.3).

    l*_exists(S, alpha) if it is <= RN - A, else +inf. A gap L < L_exists cannot reject.
    """
    T, S, R = check_design(T, S, R)
    A = _count(A, "A", R * T * S)
    ell = ell_exists_star(S, alpha)
    return ell if ell <= R * T * S - A else math.inf


def delta_exists(mu_a: float, T: int, S: int, R: int, alpha: float) -> float:
    """Normalised cutoff delta_exists(mu_A; T, S, R, alpha) = L_exists / N (App. C.3).

    ``mu_a`` is the reported mean score on [0, R]; it is first rounded to the nearest
    realisable score (C.7, :func:`realizable_count`).
    """
    T, S, R = check_design(T, S, R)
    return l_exists(realizable_count(mu_a, T * S, R), T, S, R, alpha) / (T * S)


def _pi(x: int, R: int) -> int:
    q, r = divmod(x, R)
    return q * R * R + r * r


def _nu(x: int, R: int) -> int:
    return -(-x // R)


def m_max(a: int, b: int, S: int, R: int) -> int:
    """M_max^(R)(a, b; S) by the closed form of App. C.4.

    max over j in J(a, b) of Pi_R(D + j) + Pi_R(j), D = |b - a|; the objective is
    nondecreasing in j, so it is attained at the largest feasible j.
    """
    _, S, R = check_design(1, S, R)
    a, b = _count(a, "a", R * S), _count(b, "b", R * S)
    a, b = min(a, b), max(a, b)
    D, j = b - a, min(a, R * S - b)
    while _nu(D + j, R) + _nu(j, R) > S:
        j -= 1
    return _pi(D + j, R) + _pi(j, R)


def q_max(a: int, b: int, S: int, R: int) -> float:
    """q_max^(R)(a, b; S) = M_max^(R)(a, b; S) - (b - a)^2 / S, one task's largest Q (C.4)."""
    m = m_max(a, b, S, R)
    return (S * m - (b - a) ** 2) / S


def realizable_count(score: float, N: int, R: int = 1) -> int:
    """Nearest realisable top-line count for a reported mean score on [0, R] (App. C.7).

    Returns round(score * N), the count of the nearest score a single pass over N samples can
    produce. The paper does not say how to break exact ties; we round half to even (Python's
    ``round``), after absorbing float noise below 1e-9.
    """
    if isinstance(N, bool) or not isinstance(N, (int, np.integer)) or N < 1:
        raise RobosafeError(f"N must be an integer >= 1, got {N!r}")
    if isinstance(R, bool) or not isinstance(R, (int, np.integer)) or R < 1:
        raise RobosafeError(f"R must be an integer >= 1, got {R!r}")
    if isinstance(score, bool) or not isinstance(score, (int, float, np.integer, np.floating)) \
            or not 0.0 <= float(score) <= R:
        raise RobosafeError(f"score must be a mean score in [0, {R}], got {score!r}")
    x = float(score) * int(N)
    # 0.985 * 200 = 196.99999999999997: snap products that are integers or halves up to noise.
    x2 = round(2 * x)
    if abs(2 * x - x2) < 1e-9:
        x = x2 / 2
    return round(x)


# ---------------------------------------------------------------------------------------------
# Q_hi: exact upper envelope (App. C.4), see the module docstring for the method


def _movement_types(S: int, R: int) -> tuple[np.ndarray, ...]:
    """Per-task types (d, x): cost c, defect RS - d - 2 n_hi, and n_lo (module doc, step 2)."""
    d = np.repeat(np.arange(-R * S, R * S + 1, dtype=np.int64), R)
    x = np.tile(np.arange(R, dtype=np.int64), 2 * R * S + 1)
    up = -((-(d + x)) // R)                      # ceil((d + x) / R)
    room = S - (x > 0) - up                      # samples left for 2k full negative/positive
    k_hi = room // 2
    k_lo = np.maximum(0, -((d + x) // R))        # p = d + n >= 0
    ok = (room >= 0) & (k_hi >= k_lo)
    d, x, k_hi, k_lo = d[ok], x[ok], k_hi[ok], k_lo[ok]
    n_hi, n_lo = x + R * k_hi, x + R * k_lo

    def eps(v: np.ndarray) -> np.ndarray:
        r = v % R
        return r * (R - r)

    cost = S * (eps(d + x) + eps(x)) + d * d
    return d, x, cost, R * S - d - 2 * n_hi, n_lo


def _state_dp(T: int, S: int, R: int, lo_cap: int | None = None,
              l_max: int | None = None) -> np.ndarray:
    """Least total cost per state (L >= 0, D, X), module doc step 3.

    lo_cap None: entries are cost * K + Lo (K = RN + 1), i.e. least cost then least Lo.
    lo_cap = B: an extra last axis Lo = 0..B holds the least cost with exactly that Lo.
    l_max: only final sums L <= l_max are wanted (step 5 needs few); partial sums that cannot
    end in [0, l_max] are never formed, which is exact and halves the work.
    """
    d, x, cost, defect, n_lo = _movement_types(S, R)
    RS, RN = R * S, R * S * T
    l_max = RN if l_max is None else min(int(l_max), RN)
    if lo_cap is None:
        val, li, n_extra = cost * (RN + 1) + n_lo, np.zeros_like(n_lo), 1
    else:
        keep = n_lo <= lo_cap
        d, x, defect, val, li = d[keep], x[keep], defect[keep], cost[keep], n_lo[keep]
        n_extra = lo_cap + 1
    # int32 doubles the SIMD width; it is exact while every finite total and INF + val fit
    small = T * int(val.max()) < 1 << 29
    inf = np.int32(1 << 30) if small else _INF
    dmax = int(defect.max())
    kernel = (_state_dp_kernel if _kernel_work(T, len(d), R, RS, dmax, n_extra) <= PURE_WORK
              else _compiled_kernel())
    F = kernel(d, defect, x, val.astype(inf.dtype), li, T, RS, R, dmax, l_max, n_extra, inf)
    F = np.moveaxis(F, 0, 2).astype(np.int64)       # (X, L, D, Lo) -> (L, D, X, Lo)
    F[F >= inf] = _INF
    return F[..., 0] if lo_cap is None else F


PURE_WORK = 2_000_000
"""Shapes whose DP takes at most this many inner steps run ``_state_dp_kernel`` as plain Python
(about 95 ns a step measured, so at most ~0.2 s): less than importing numba and loading its
cached machine code (0.5 s and more), so small R > 1 shapes never import numba."""


def _kernel_work(T: int, n_types: int, R: int, RS: int, dmax: int, n_lo: int) -> int:
    """Upper bound on the inner steps of ``_state_dp_kernel``: tasks x types x X x L x m x Lo."""
    return T * n_types * R * (2 * RS * T + 1) * (dmax * T // (2 * R) + 1) * n_lo


@lru_cache(maxsize=1)
def _compiled_kernel():
    """``_state_dp_kernel`` compiled by numba, imported on first use: only large R > 1 shapes
    (and large budgeted fallbacks) need it, so `stats cutoffs` on success/failure (R = 1, the
    greedy of ``_state_dp_binary``) never pays numba's import (about a second on a loaded
    machine)."""
    from numba import njit

    return njit(cache=True)(_state_dp_kernel)


def _state_dp_kernel(d, e, x, val, li, T, RS, R, dmax, l_max, n_lo, inf):  # pragma: no cover
    """The DP over tasks of ``_state_dp``, fused loops on a sparse-free layout; (X, L, D, Lo) out.

    Every type has d + e + 2x = RS (mod 2R) (defect = RS - d - 2 n_hi, n_hi = x (mod R)), so
    after k tasks only D = r + 2R m with r = (kRS - L - 2X) mod 2R is reachable: the table
    stores m, a 2R-fold smaller axis. (m, Lo) is flattened innermost so one type's update of
    one (X, L) row is a contiguous min-plus of two rows, which LLVM vectorises.
    """
    off, nD, P = RS * T, dmax * T + 1, 2 * R
    nM, nL = dmax * T // P + 2, 2 * off + 1
    W = nM * n_lo
    F = np.full((R, nL, W), inf, dtype=val.dtype)
    for i in range(len(d)):
        j = ((e[i] - (RS - d[i] - 2 * x[i]) % P) // P) * n_lo + li[i]
        F[x[i], off + d[i], j] = min(F[x[i], off + d[i], j], val[i])
    for k in range(1, T):
        # partial sums after k tasks that can still end in [0, l_max], and after k + 1
        slo, shi = max(-k * RS, -(T - k) * RS), min(k * RS, l_max + (T - k) * RS)
        glo, ghi = max(-(k + 1) * RS, -(T - k - 1) * RS), min((k + 1) * RS,
                                                               l_max + (T - k - 1) * RS)
        nm = dmax * k // P + 1
        G = np.full_like(F, inf)
        F1, G1 = F.reshape(-1), G.reshape(-1)
        for i in range(len(d)):
            di, vi, lo_i = d[i], val[i], li[i]
            a, b = max(slo, glo - di), min(shi, ghi - di)
            # r_dst = (r_src + c) mod P, so the m shift is (e - c) / P, plus 1 on wrap-around
            c = (RS - di - 2 * x[i]) % P
            base = (e[i] - c) // P
            for X in range(R):
                Xt = (X + x[i]) % R
                r_src = (k * RS - a - 2 * X) % P
                for L in range(a, b + 1):
                    sh = (base + (r_src + c >= P)) * n_lo + lo_i
                    r_src = r_src - 1 if r_src else P - 1
                    s0 = (X * nL + off + L) * W        # rows of the flat views
                    g0 = (Xt * nL + off + L + di) * W + sh
                    if n_lo == 1:
                        for m in range(nm):
                            G1[g0 + m] = min(G1[g0 + m], F1[s0 + m] + vi)
                    else:   # Lo beyond the cap drops out of the table
                        for m in range(nm):
                            for lo in range(n_lo - lo_i):
                                j = m * n_lo + lo
                                G1[g0 + j] = min(G1[g0 + j], F1[s0 + j] + vi)
        F = G
    out = np.full((R, l_max + 1, nD, n_lo), inf, dtype=val.dtype)
    for X in range(R):
        for L in range(l_max + 1):
            r = (T * RS - L - 2 * X) % P
            for m in range(nM):
                D = r + P * m
                if D < nD:
                    out[X, L, D] = F[X, off + L, m * n_lo:(m + 1) * n_lo]
    return out


def _state_dp_binary(T: int, S: int, l_lo: int = 0, l_hi: int | None = None) -> np.ndarray:
    """R = 1: rows L = l_lo..l_hi (default all) of the table of ``_state_dp(T, S, 1)``, by a
    greedy instead of a DP over tasks. Memory is the rows asked for plus O(S): one gap's row
    (``classify_gain``) costs O(T + S) whatever N is.

    For R = 1 the types are d in [-S, S] with defect (S - d) mod 2 and value
    f(d) = K d^2 + max(0, -d), convex along each parity class. With D tasks in the odd class, the
    least total for sum d = L is the min-plus convolution of convex functions: start every task
    at its smallest d and take the (L - L_min) / 2 cheapest +2 steps from the merged sorted
    increments (each task's own steps are nondecreasing, so prefixes are taken in order).
    """
    RN, K = S * T, S * T + 1
    l_hi = RN if l_hi is None else min(l_hi, RN)
    out = np.full((l_hi - l_lo + 1, T + 1, 1), _INF, dtype=np.int64)

    def f(d: np.ndarray) -> np.ndarray:
        return K * d * d + np.maximum(0, -d)

    d0, d1 = np.arange(-S, S + 1, 2), np.arange(-S + 1, S, 2)   # class lattices
    inc = np.concatenate([np.diff(f(d0)), np.diff(f(d1))])
    order = np.argsort(inc, kind="stable")
    vals = inc[order]
    is0 = order < len(d0) - 1
    for D in range(T + 1):
        w = np.where(is0, T - D, D)
        cw, cs = np.cumsum(w), np.cumsum(vals * w)
        lmin = int(d0[0]) * (T - D) + int(d1[0]) * D
        base = int(f(d0[0])) * (T - D) + int(f(d1[0])) * D
        start = max(lmin, l_lo + (l_lo - lmin) % 2)      # first L >= l_lo of L's parity
        m = (np.arange(start, l_hi + 1, 2) - lmin) // 2
        m = m[m <= cw[-1]]
        i = np.searchsorted(cw, m)            # first merged value whose cumulative count >= m
        prev_w = np.where(i > 0, cw[i - 1], 0)
        prev_s = np.where(i > 0, cs[i - 1], 0)
        top = vals[np.minimum(i, len(vals) - 1)]
        out[lmin + 2 * m - l_lo, D, 0] = base + prev_s + (m - prev_w) * top
    return out


@dataclass(frozen=True, eq=False)
class _Envelope:
    T: int
    S: int
    R: int
    K: int
    suffix: np.ndarray   # [L, D0] max over D >= D0, X of S R 2H - cost (states with H <= J)
    prefix: np.ndarray   # [L, D0, X] least (cost * K + Lo) over D < D0 (states with H > J)
    l_lo: int = 0        # the gap of row 0 of both tables


def _envelope_bytes(T: int, S: int, R: int, rows: int, l_max: int) -> int:
    """Peak memory of ``_envelope`` for ``rows`` gaps up to ``l_max``, worked out from the
    array shapes it allocates (int64): R = 1 holds the rows' table about six times over (the
    table, its reachability, the value and its temporaries, the suffix and prefix tables);
    R > 1 adds the compiled DP's two working tables over every partial sum (X, L, D)."""
    dmax = T * (3 * R - 2) + 1
    table = rows * (T + 1 if R == 1 else dmax) * R
    if R == 1:  # and the greedy's dozen arrays over one task's 2S + 1 differences
        return 8 * 6 * table + 8 * 12 * (2 * S + 1)
    work = R * (2 * R * S * T + 1) * (dmax // (2 * R) + 2)
    return 8 * (2 * work + 2 * R * (l_max + 1) * dmax + 6 * table)


@lru_cache(maxsize=16)
def _envelope(T: int, S: int, R: int, l_max: int | None = None, l_lo: int = 0) -> _Envelope:
    """Suffix / prefix tables of module doc step 4 for gaps l_lo <= L <= l_max (default: all)."""
    RN = R * S * T
    K = RN + 1
    if (S * R * R + R * R * S * S) * T * K >= 1 << 61:
        raise RobosafeError(f"benchmark too large for exact Q_hi (T={T}, S={S}, R={R})")
    l_top = RN if l_max is None else min(l_max, RN)
    check_memory(f"the exact Q_hi envelope for T={T} S={S} R={R}",
                 _envelope_bytes(T, S, R, l_top - l_lo + 1, l_top))
    F = (_state_dp_binary(T, S, l_lo, l_top) if R == 1
         else _state_dp(T, S, R, l_max=l_top)[l_lo:l_top + 1])
    reach = F < _INF
    L = l_lo + np.arange(len(F))[:, None, None]
    D = np.arange(F.shape[1])[None, :, None]
    v = np.where(reach, S * R * (RN - L - D) - F // K, _NEG).max(axis=2)
    suffix = np.full((len(F), F.shape[1] + 1), _NEG, dtype=np.int64)
    suffix[:, :-1] = np.maximum.accumulate(v[:, ::-1], axis=1)[:, ::-1]
    prefix = np.full((len(F), F.shape[1] + 1, R), _INF, dtype=np.int64)
    prefix[:, 1:] = np.minimum.accumulate(F, axis=1)
    for a in (suffix, prefix):
        a.setflags(write=False)
    return _Envelope(T, S, R, K, suffix, prefix, l_lo)


def _sq_hi(env: _Envelope, A: np.ndarray, L: np.ndarray, *,
           force_exact: bool = False) -> np.ndarray:
    """S * Q_hi(A, L) for valid (A, L) arrays (1 <= L <= RN - A), module doc step 4."""
    T, S, R, K = env.T, env.S, env.R, env.K
    RN = R * S * T
    J = np.minimum(A, RN - A - L)
    D0 = np.clip(RN - L - 2 * J, 0, env.suffix.shape[1] - 1)
    row = L - env.l_lo
    best = env.suffix[row, D0]
    sure = best.copy()
    for X in range(R):
        e = env.prefix[row, D0, X]
        js = J - (J - X) % R
        ok = (e < _INF) & (js >= 0)
        v = np.where(ok, 2 * S * R * js - e // K, _NEG)
        best = np.maximum(best, v)
        sure = np.maximum(sure, np.where(ok & (e % K <= J), v, _NEG))
    redo = np.ones_like(best, dtype=bool) if force_exact else best > sure
    if redo.any():
        best = best.copy()
        best[redo] = _sq_hi_budgeted(T, S, R, L[redo], J[redo]) - S * R * L[redo]
    return S * R * L + best


def _sq_hi_budgeted(T: int, S: int, R: int, L: np.ndarray, J: np.ndarray) -> np.ndarray:
    """Exact S * Phi(L, J) tracking Lo explicitly (fallback of module doc step 4)."""
    RN = R * S * T
    lo_cap, l_max = int(J.max()), int(L.max())
    # the compiled DP's two working tables over every partial sum, each Lo up to the cap
    dmax = T * (3 * R - 2) + 1
    check_memory(f"the exact Q_hi fallback for T={T} S={S} R={R}",
                 8 * 3 * R * (2 * R * S * T + 1) * (dmax // (2 * R) + 2) * (lo_cap + 1))
    F = _state_dp(T, S, R, lo_cap=lo_cap, l_max=l_max)
    F = np.minimum.accumulate(F, axis=3)            # least cost with Lo <= budget
    c = F[L, :, :, J]                               # (pairs, D, X)
    D = np.arange(F.shape[1])[None, :, None]
    X = np.arange(R)[None, None, :]
    Lc, Jc = L[:, None, None], J[:, None, None]
    H = (RN - Lc - D) // 2
    js = np.minimum(H, Jc - (Jc - X) % R)
    v = np.where((c < _INF) & (js >= 0), S * R * (Lc + 2 * js) - c, _NEG)
    return v.reshape(len(L), -1).max(axis=1)


def q_hi(A: int | np.ndarray, L: int | np.ndarray, T: int, S: int,
         R: int) -> float | np.ndarray:
    """Q_hi(A, L; T, S, R), the exact maximum of Q over compatible paired tables (App. C.4).

    Equal to F_T(A, A + L) of the C.4 allocation DP over per-task q_max^(R); computed by the
    reduced DP of the module docstring. ``A`` and ``L`` broadcast; 1 <= L <= RN - A.
    """
    T, S, R = check_design(T, S, R)
    RN = R * T * S
    a = _counts(A, "A", 0, RN)
    gap = _counts(L, "L", 1, RN)
    a, gap = np.broadcast_arrays(a, gap)
    if np.any(a + gap > RN):
        raise RobosafeError(f"need A + L <= R*N = {RN}")
    out = _sq_hi(_envelope(T, S, R), a.ravel(), gap.ravel()).reshape(a.shape) / S
    return float(out) if out.ndim == 0 else out


def _last_failure(A: np.ndarray, T: int, S: int, R: int, c: float) -> np.ndarray:
    """Per A, the largest L in L_A that does not reject at Q_hi (0 if none)."""
    RN = R * S * T
    # Q <= N R^2 for every table, so every L above the first L rejecting at N R^2 rejects.
    # That first L, from the closed form and then the literal rule (float rounding): a count
    # up from 1 would take c sqrt(N) R steps, minutes for a huge N
    sq = S * RN * R
    top = max(1, math.floor(c * math.sqrt(sq / S)))
    while top > 1 and _rejects(top - 1, sq, S, c):
        top -= 1
    while not _rejects(top, sq, S, c):
        top += 1
    if top == 1:
        return np.zeros(len(A), dtype=np.int64)
    # the (A, L) grid below: a handful of int64 and bool arrays of len(A) x (top - 1)
    check_memory(f"the L_forall search for T={T} S={S} R={R}", 48 * len(A) * (top - 1))
    Ls = np.arange(1, top)
    AA, LL = np.meshgrid(A, Ls, indexing="ij")
    valid = LL <= RN - AA
    fails = np.zeros(AA.shape, dtype=bool)
    if valid.any():
        sq = _sq_hi(_envelope(T, S, R, top - 1), AA[valid], LL[valid])
        fails[valid] = ~_rejects(LL[valid], sq, S, c)
    return np.where(fails.any(axis=1), top - 1 - np.argmax(fails[:, ::-1], axis=1), 0)


def _l_forall(A: np.ndarray, T: int, S: int, R: int, alpha: float) -> np.ndarray:
    RN = R * S * T
    last = _last_failure(A, T, S, R, c_alpha(S, alpha))
    return np.where(last >= RN - A, np.inf, last + 1.0)


def l_forall(A: int, T: int, S: int, R: int, alpha: float) -> int | float:
    """Count-scale suffix rejection-guarantee cutoff L_forall(A; T, S, R, alpha) (App. C.4).

    The least l in L_A = {1..RN-A} such that every L >= l in L_A has L > c_alpha sqrt(Q_hi);
    +inf if there is none. A gap L >= L_forall is significant for every compatible table.
    """
    T, S, R = check_design(T, S, R)
    A = _count(A, "A", R * T * S)
    v = float(_l_forall(np.array([A]), T, S, R, alpha)[0])
    return v if math.isinf(v) else int(v)


def delta_forall(mu_a: float, T: int, S: int, R: int, alpha: float) -> float:
    """Normalised cutoff delta_forall(mu_A; T, S, R, alpha) = L_forall / N (App. C.4).

    ``mu_a`` is the reported mean score on [0, R], rounded first as in C.7.
    """
    T, S, R = check_design(T, S, R)
    return l_forall(realizable_count(mu_a, T * S, R), T, S, R, alpha) / (T * S)


@dataclass(frozen=True, eq=False)
class CutoffTable:
    """L_exists and L_forall (C.3, C.4) for every baseline count A = 0..RN.

    Count-scale arrays are float with +inf where the cutoff set is empty; ``delta_*`` are the
    normalised cutoffs (divided by N = T S).
    """

    T: int
    S: int
    R: int
    alpha: float
    a: np.ndarray
    l_exists: np.ndarray
    l_forall: np.ndarray

    @property
    def delta_exists(self) -> np.ndarray:
        return self.l_exists / (self.T * self.S)

    @property
    def delta_forall(self) -> np.ndarray:
        return self.l_forall / (self.T * self.S)


def cutoff_table(T: int, S: int, R: int, alpha: float) -> CutoffTable:
    """The full table of L_exists / L_forall over baseline counts A = 0..RN (App. C.3, C.4)."""
    T, S, R = check_design(T, S, R)
    RN = R * T * S
    a = np.arange(RN + 1)
    ell = ell_exists_star(S, alpha)
    le = np.where(ell <= RN - a, float(ell), np.inf)
    lf = _l_forall(a, T, S, R, alpha)
    for arr in (a, le, lf):
        arr.setflags(write=False)
    return CutoffTable(T, S, R, float(alpha), a, le, lf)


@dataclass(frozen=True)
class GainClassification:
    """Classification of a reported pair of top-line counts (App. C.5, C.6).

    ``q_lo``/``q_hi`` are the envelopes of Q, ``c_alpha`` the C.2 constant. ``sharp`` is True
    for paired evaluations; for independently sampled ones (C.6) the two outer labels are still
    implied but ``indeterminate`` only means the paired envelopes do not resolve the test.
    """

    label: Label
    a: int
    b: int
    gap_count: int
    q_lo: float
    q_hi: float
    c_alpha: float
    sharp: bool


def classify_gain(A: int, B: int, T: int, S: int, R: int, alpha: float,
                  paired: bool = True) -> GainClassification:
    """Sharp pointwise classification of the counts (A, B) (App. C.5; C.6 when not paired).

    L = B - A <= 0: no_improvement; L <= c_alpha sqrt(Q_lo(L)): provably_not_significant (no
    compatible table rejects); L > c_alpha sqrt(Q_hi(A, L)): provably_significant (every
    compatible table rejects); otherwise indeterminate.
    """
    T, S, R = check_design(T, S, R)
    RN = R * T * S
    A, B = _count(A, "A", RN), _count(B, "B", RN)
    c = c_alpha(S, alpha)
    L = B - A
    if L <= 0:
        return GainClassification("no_improvement", A, B, L, math.nan, math.nan, c, paired)
    r = L % S
    sq_lo = S * r - r * r
    # the envelope of this one gap: memory linear in T and S, where all gaps' would be O(N T)
    sq_hi = int(_sq_hi(_envelope(T, S, R, L, L), np.array([A]), np.array([L]))[0])
    if not _rejects(L, sq_lo, S, c):
        label: Label = "provably_not_significant"
    elif _rejects(L, sq_hi, S, c):
        label = "provably_significant"
    else:
        label = "indeterminate"
    return GainClassification(label, A, B, L, sq_lo / S, sq_hi / S, c, paired)
