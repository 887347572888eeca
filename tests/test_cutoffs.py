"""Top-line cutoffs of paper 002 App. C against straightforward references defined here."""

import itertools
import math
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from robosafe.errors import RobosafeError
from robosafe.stats import cutoffs as C
from robosafe.stats.wald import independent_wald_test, paired_wald_test

NEG = -(1 << 60)


# --- references -------------------------------------------------------------------------------


def ref_sq_max_enum(a, b, S, R):
    """S * q_max by the C.4 integer program: enumerate the multiset {n_uv} of S pairs."""
    pairs = [(u, v) for u in range(R + 1) for v in range(R + 1)]
    best = None
    for combo in itertools.combinations_with_replacement(pairs, S):
        if sum(p[0] for p in combo) == a and sum(p[1] for p in combo) == b:
            m = sum((v - u) ** 2 for u, v in combo)
            best = m if best is None else max(best, m)
    return None if best is None else S * best - (b - a) ** 2


def ref_paper_dp(T, S, R):
    """S * F_T(u, v): the C.4 allocation DP over (u, v) with per-task q_max, as written."""
    n1 = R * S + 1
    q = np.array([[S * C.m_max(a, b, S, R) - (b - a) ** 2 for b in range(n1)]
                  for a in range(n1)], dtype=np.int64)
    F = np.zeros((1, 1), dtype=np.int64)
    for _ in range(T):
        m = F.shape[0]
        G = np.full((m + n1 - 1, m + n1 - 1), NEG, dtype=np.int64)
        for a in range(n1):
            for b in range(n1):
                cand = np.where(F == NEG, NEG, F + q[a, b])
                np.maximum(G[a:a + m, b:b + m], cand, out=G[a:a + m, b:b + m])
        F = G
    return F


def ref_cutoffs(T, S, R, alpha):
    """L_exists, L_forall by their definitions (C.3, C.4) from the reference DP."""
    RN = R * T * S
    F = ref_paper_dp(T, S, R)
    c = norm.ppf(1 - alpha) * math.sqrt(S / (S - 1))
    le, lf = [], []
    for A in range(RN + 1):
        gaps = range(1, RN - A + 1)
        ok_lo = [L for L in gaps if L > c * math.sqrt((S * (L % S) - (L % S) ** 2) / S)]
        le.append(min(ok_lo) if ok_lo else math.inf)
        fail = [L for L in gaps if not L > c * math.sqrt(F[A, A + L] / S)]
        lf.append(math.inf if not gaps else 1 if not fail else
                  math.inf if fail[-1] == RN - A else fail[-1] + 1)
    return np.array(le, float), np.array(lf, float)


def all_tables(T, S, R):
    """Every paired outcome table (Y_A, Y_B) of shape (T, S) (tiny designs only)."""
    cells = list(itertools.product(range(R + 1), repeat=2))
    for flat in itertools.product(cells, repeat=T * S):
        arr = np.array(flat).reshape(T, S, 2)
        yield arr[..., 0], arr[..., 1]


def table_sq(ya, yb):
    S = ya.shape[1]
    delta = yb - ya
    d, s = delta.sum(1), (delta * delta).sum(1)
    return int((S * s - d * d).sum())


SMALL = [(T, S, R) for R in (1, 2, 3) for T in (1, 2, 3, 4, 5) for S in (2, 3, 4, 5, 7)
         if T * S * R <= 40]


# --- closed forms -----------------------------------------------------------------------------


@pytest.mark.parametrize("S,R", [(2, 1), (3, 1), (4, 1), (5, 1), (2, 2), (3, 2), (4, 2),
                                 (2, 3), (3, 3), (2, 4)])
def test_q_max_closed_form_is_the_integer_program(S, R):
    for a in range(R * S + 1):
        for b in range(R * S + 1):
            assert S * C.q_max(a, b, S, R) == pytest.approx(ref_sq_max_enum(a, b, S, R))


@pytest.mark.parametrize("S", [2, 3, 7, 50])
def test_q_max_binary_reduction(S):
    for a in range(S + 1):
        for b in range(S + 1):
            want = min(a + b, 2 * S - a - b) - (b - a) ** 2 / S
            assert C.q_max(a, b, S, 1) == pytest.approx(want, abs=1e-12)


def test_ell_exists_star_is_the_first_feasible_gap():
    for S in range(2, 120):
        for alpha in (0.001, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.49):
            c = C.c_alpha(S, alpha)
            first = next(L for L in range(1, S + 1) if L > c * math.sqrt(C.q_lo(L, S)))
            assert C.ell_exists_star(S, alpha) == first <= S


def test_hand_worked_examples():
    # S = 50, alpha = 0.05: z^2 = 2.7055, 1 + floor(135.27 / 51.71) = 3 (LIBERO, RoboCasa).
    assert C.ell_exists_star(50, 0.05) == 3
    assert C.q_lo(53, 50) == pytest.approx(3 - 9 / 50)
    # T = 1, S = 2: L = 1 has Q in [1/2, 1/2] and 1 <= 1.645; L = 2 has Q = 0 and rejects.
    assert C.l_exists(0, 1, 2, 1, 0.05) == 2 and C.l_forall(0, 1, 2, 1, 0.05) == 2
    assert C.l_exists(1, 1, 2, 1, 0.05) == math.inf == C.l_forall(1, 1, 2, 1, 0.05)
    # T = 2, S = 2, A = 1, L = 1: J = 1, so sum delta^2 <= 3 and Q <= 3 - 1/2 (attained).
    assert C.q_hi(1, 1, 2, 2, 1) == pytest.approx(2.5)
    cls = C.classify_gain(1, 2, 2, 2, 1, 0.05)
    assert (cls.label, cls.q_lo, cls.q_hi) == ("provably_not_significant", 0.5, 2.5)
    # R = 5, T = 1 (CALVIN's shape): Q_hi is one task's q_max.
    assert C.q_hi(3100, 40, 1, 1000, 5) == pytest.approx(C.q_max(3100, 3140, 1000, 5))
    assert C.delta_exists(0.5, 10, 50, 1, 0.05) == pytest.approx(3 / 500)


def test_l_exists_is_a_minimum_not_a_threshold():
    # Decision: L_exists is the C.3 minimum. For small S and tiny alpha a larger gap can be
    # infeasible again (S = 3: L = 4 has Q_lo = 2/3 and 4 <= 5.82 * 0.816); classification
    # uses Q_lo(L) pointwise, so it stays sharp.
    assert C.l_exists(0, 2, 3, 1, 1e-6) == 3
    assert C.classify_gain(0, 3, 2, 3, 1, 1e-6).label != "provably_not_significant"
    assert C.classify_gain(0, 4, 2, 3, 1, 1e-6).label == "provably_not_significant"


def test_normalised_cutoffs_use_the_rounded_count():
    assert C.delta_forall(0.9, 10, 50, 1, 0.05) == C.l_forall(450, 10, 50, 1, 0.05) / 500
    assert C.delta_forall(0.9001, 10, 50, 1, 0.05) == C.delta_forall(0.9, 10, 50, 1, 0.05)
    assert C.delta_exists(1.0, 10, 50, 1, 0.05) == math.inf


# --- Q_hi: fast allocation == C.4 DP == exact maximum ------------------------------------------


@pytest.mark.parametrize("S,R", [(2, 1), (5, 1), (3, 2), (6, 3), (4, 5)])
def test_movement_types_reproduce_the_per_task_closed_form(S, R):
    # Module doc step 2: S*(Pi(d+n) + Pi(n)) - d^2 = S R (d + 2n) - c for every feasible n.
    d, x, cost, defect, n_lo = C._movement_types(S, R)
    assert defect.min() >= 0 and defect.max() <= 3 * R - 2

    def pi(v):
        return (v // R) * R * R + (v % R) ** 2

    def nu(v):
        return -(-v // R)

    seen = set()
    for di, xi, ci, ei, li in zip(d, x, cost, defect, n_lo, strict=True):
        n_hi = (R * S - di - ei) // 2
        assert li % R == xi == n_hi % R
        for n in range(li, n_hi + 1, R):
            assert n >= 0 and di + n >= 0 and nu(di + n) + nu(n) <= S
            assert S * (pi(di + n) + pi(n)) - di * di == S * R * (di + 2 * n) - ci
            seen.add((int(di), int(n)))
        assert li - R < 0 or di + li - R < 0 or nu(di + li - R) + nu(li - R) > S
        assert nu(di + n_hi + R) + nu(n_hi + R) > S
    feasible = {(p - n, n) for p in range(R * S + 1) for n in range(R * S + 1)
                if nu(p) + nu(n) <= S}
    assert seen == feasible


@pytest.mark.parametrize("T", [1, 2, 3, 7])
@pytest.mark.parametrize("S", [2, 3, 8, 11])
def test_binary_greedy_equals_the_state_dp(T, S):
    assert np.array_equal(C._state_dp_binary(T, S), C._state_dp(T, S, 1))


@pytest.mark.parametrize("T,S,R,l_max", [(3, 4, 2, 5), (4, 5, 3, 17), (2, 30, 4, 49),
                                         (7, 3, 1, 0), (5, 6, 5, 40)])
def test_state_dp_for_small_gaps_is_the_head_of_the_full_table(T, S, R, l_max):
    """Partial sums that cannot end in [0, l_max] are dropped: exact, not an approximation."""
    assert np.array_equal(C._state_dp(T, S, R, l_max=l_max), C._state_dp(T, S, R)[:l_max + 1])
    assert np.array_equal(C._state_dp(T, S, R, lo_cap=6, l_max=l_max),
                          C._state_dp(T, S, R, lo_cap=6)[:l_max + 1])


@pytest.mark.parametrize("T,S,R", [(3, 10, 5), (4, 8, 4)])
def test_cutoff_table_with_many_score_levels_matches_definitions(T, S, R):
    """R = 4-5 (CALVIN-like chains) is where the pruned state DP does most of its work."""
    le, lf = ref_cutoffs(T, S, R, 0.05)
    tab = C.cutoff_table(T, S, R, 0.05)
    assert np.array_equal(tab.l_exists, le) and np.array_equal(tab.l_forall, lf)


@pytest.mark.parametrize("T,S,R", SMALL)
def test_q_hi_equals_the_c4_dynamic_program(T, S, R):
    F = ref_paper_dp(T, S, R)
    RN = R * T * S
    A, L = np.meshgrid(np.arange(RN + 1), np.arange(1, RN + 1), indexing="ij")
    m = A + L <= RN
    got = C.q_hi(A[m], L[m], T, S, R)
    assert np.array_equal(np.round(got * S).astype(np.int64), F[A[m], A[m] + L[m]])
    # The exact fallback (Lo tracked explicitly) agrees too.
    sq = C._sq_hi(C._envelope(T, S, R), A[m], L[m], force_exact=True)
    assert np.array_equal(sq, F[A[m], A[m] + L[m]])


@settings(max_examples=40, deadline=None)
@given(T=st.integers(1, 6), S=st.integers(2, 9), R=st.integers(1, 4), data=st.data())
def test_q_hi_random_designs(T, S, R, data):
    if T * S * R > 60:
        T = max(1, 60 // (S * R))
    RN = R * T * S
    F = ref_paper_dp(T, S, R)
    A = data.draw(st.integers(0, RN - 1))
    L = data.draw(st.integers(1, RN - A))
    assert round(C.q_hi(A, L, T, S, R) * S) == F[A, A + L]


@pytest.mark.parametrize("T,S,R", [(2, 2, 1), (2, 3, 1), (3, 2, 1), (1, 3, 2), (2, 2, 2),
                                   (1, 4, 2), (1, 2, 3)])
def test_envelopes_are_exact_extremes_over_all_tables(T, S, R):
    lo, hi = {}, {}
    for ya, yb in all_tables(T, S, R):
        key = (int(ya.sum()), int(yb.sum()))
        sq = table_sq(ya, yb)
        lo[key], hi[key] = min(lo.get(key, sq), sq), max(hi.get(key, sq), sq)
    for (A, B), v in hi.items():
        if B > A:
            assert C.q_hi(A, B - A, T, S, R) * S == pytest.approx(v)
            assert C.q_lo(B - A, S) * S == pytest.approx(lo[(A, B)])


# --- cutoffs and classification -----------------------------------------------------------------


@pytest.mark.parametrize("T,S,R", SMALL[::2])
@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.2])
def test_cutoff_table_matches_definitions(T, S, R, alpha):
    le, lf = ref_cutoffs(T, S, R, alpha)
    tab = C.cutoff_table(T, S, R, alpha)
    assert np.array_equal(tab.l_exists, le) and np.array_equal(tab.l_forall, lf)
    assert np.array_equal(tab.delta_forall, lf / (T * S))
    for A in range(0, R * T * S + 1, 3):
        assert C.l_exists(A, T, S, R, alpha) == le[A] and C.l_forall(A, T, S, R, alpha) == lf[A]


@settings(max_examples=25, deadline=None)
@given(T=st.integers(1, 5), S=st.integers(2, 12), R=st.integers(1, 3),
       alpha=st.floats(0.001, 0.45))
def test_cutoff_table_random_designs(T, S, R, alpha):
    if T * S * R > 48:
        T = max(1, 48 // (S * R))
    le, lf = ref_cutoffs(T, S, R, alpha)
    tab = C.cutoff_table(T, S, R, alpha)
    assert np.array_equal(tab.l_exists, le) and np.array_equal(tab.l_forall, lf)


@pytest.mark.parametrize("T,S,R", [(2, 2, 1), (2, 3, 1), (3, 2, 1), (1, 3, 2), (2, 2, 2)])
@pytest.mark.parametrize("alpha", [0.05, 0.3])
def test_classification_is_sharp(T, S, R, alpha):
    rejects: dict[tuple[int, int], set[bool]] = {}
    for ya, yb in all_tables(T, S, R):
        key = (int(ya.sum()), int(yb.sum()))
        rejects.setdefault(key, set()).add(paired_wald_test(ya, yb, R, alpha).reject)
    want = {frozenset({False}): "provably_not_significant",
            frozenset({True}): "provably_significant",
            frozenset({True, False}): "indeterminate"}
    for (A, B), seen in rejects.items():
        label = C.classify_gain(A, B, T, S, R, alpha).label
        assert label == ("no_improvement" if B <= A else want[frozenset(seen)])


@settings(max_examples=60, deadline=None)
@given(T=st.integers(1, 8), S=st.integers(2, 15), R=st.integers(1, 4),
       seed=st.integers(0, 2**32 - 1))
def test_random_tables_lie_inside_the_envelopes(T, S, R, seed):
    rng = np.random.default_rng(seed)
    ya = rng.integers(0, R + 1, (T, S))
    yb = np.minimum(R, ya + rng.integers(-1, R + 1, (T, S))).clip(0)
    A, B = int(ya.sum()), int(yb.sum())
    if B <= A:
        return
    lo, hi = C.q_lo(B - A, S), C.q_hi(A, B - A, T, S, R)
    for test in (paired_wald_test, independent_wald_test):  # C.3/C.4 and C.6 inequalities
        q = test(ya, yb, R).q
        assert lo - 1e-9 <= q <= hi + 1e-9
    res = paired_wald_test(ya, yb, R)
    label = C.classify_gain(A, B, T, S, R, 0.05).label
    if label == "provably_significant":
        assert res.reject and independent_wald_test(ya, yb, R).reject
    if label == "provably_not_significant":
        assert not res.reject and not independent_wald_test(ya, yb, R).reject


def test_independent_classification_is_not_sharp_flag():
    c = C.classify_gain(100, 130, 10, 50, 1, 0.05, paired=False)
    assert c.sharp is False and C.classify_gain(100, 130, 10, 50, 1, 0.05).sharp is True
    assert C.classify_gain(5, 5, 10, 50, 1, 0.05).label == "no_improvement"


def test_benchmark_shapes_are_monotone_sanity():
    tab = C.cutoff_table(24, 50, 1, 0.05)  # RoboCasa: 24 tasks x 50 rollouts
    finite = np.isfinite(tab.l_forall)
    assert np.all(tab.l_exists[finite] <= tab.l_forall[finite])
    assert tab.l_forall[0] == 3 and np.isinf(tab.l_forall[-1]) and np.isinf(tab.l_exists[-1])


# --- C.7 rounding -----------------------------------------------------------------------------


@pytest.mark.parametrize("score,N,R,want", [
    (0.988, 500, 1, 494),       # LIBERO suite, realisable
    (0.9875, 500, 1, 494),      # 493.75: non-realisable, nearest count
    (0.985, 200, 1, 197),       # float product 196.99999999999997
    (4.52, 1000, 5, 4520),      # CALVIN ATC out of 5
    (0.125, 4, 1, 0),           # exact tie 0.5: half to even (decision, see docstring)
    (0.375, 4, 1, 2),           # exact tie 1.5: half to even
    (1.0, 96, 1, 96), (0.0, 96, 1, 0),
])
def test_realizable_count(score, N, R, want):
    assert C.realizable_count(score, N, R) == want


# --- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize("call", [
    lambda: C.l_forall(501, 10, 50, 1, 0.05),          # count above R*N
    lambda: C.l_exists(-1, 10, 50, 1, 0.05),
    lambda: C.q_hi(10, 491, 10, 50, 1),                 # A + L above R*N
    lambda: C.q_hi(10, 0, 10, 50, 1),                   # L outside L_A
    lambda: C.cutoff_table(10, 1, 1, 0.05),             # S < 2
    lambda: C.cutoff_table(0, 50, 1, 0.05),             # T < 1
    lambda: C.cutoff_table(10, 50, 0, 0.05),            # R < 1
    lambda: C.cutoff_table(10, 50, 1, 0.5),             # alpha outside (0, 0.5)
    lambda: C.cutoff_table(10, 50, 1, 0.0),
    lambda: C.classify_gain(3, 2.5, 10, 50, 1, 0.05),   # non-integer count
    lambda: C.classify_gain(3, 4, 10, 50.0, 1, 0.05),
    lambda: C.realizable_count(1.2, 100, 1),            # score above R
    lambda: C.delta_forall(-0.1, 10, 50, 1, 0.05),
])
def test_bad_input_raises_robosafe_error(call):
    with pytest.raises(RobosafeError):
        call()


@pytest.mark.slow
def test_t10_s20_r5_matches_the_compiled_c4_dp(monkeypatch):
    """The shape that was slow (T = 10, S = 20, R = 5): every cutoff and Q_hi equals the C.4
    DP as written (the benchmark's numba-compiled baseline, an independent implementation)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_cutoffs.py"
    spec = importlib.util.spec_from_file_location("bench_cutoffs", path)
    bench = importlib.util.module_from_spec(spec)
    # numba resolves a compiled function's globals through sys.modules by module name
    monkeypatch.setitem(sys.modules, "bench_cutoffs", bench)
    spec.loader.exec_module(bench)
    T, S, R = 10, 20, 5
    le, lf, F = bench.baseline_table(T, S, R, 0.05)
    tab = C.cutoff_table(T, S, R, 0.05)
    assert np.array_equal(tab.l_exists, le) and np.array_equal(tab.l_forall, lf)
    RN = R * T * S
    A = np.arange(0, RN, 7)
    L = np.minimum(RN - A, 1 + A % 150)
    assert np.array_equal(np.rint(C.q_hi(A, L, T, S, R) * S).astype(np.int64), F[A, A + L])


def test_plain_python_and_numba_kernels_give_identical_tables(monkeypatch):
    # small shapes run the DP kernel as plain Python, large ones compiled: the same tables
    shapes = [(2, 3, 2, None), (3, 4, 2, None), (3, 3, 3, None), (2, 4, 2, 3)]
    plain = {s: C._state_dp(*s[:3], lo_cap=s[3]) for s in shapes}
    monkeypatch.setattr(C, "PURE_WORK", 0)
    for s in shapes:
        np.testing.assert_array_equal(C._state_dp(*s[:3], lo_cap=s[3]), plain[s])


def test_binary_cutoffs_never_import_numba():
    import subprocess
    import sys

    code = ("import sys, robosafe.stats.cutoffs as C\n"
            "print(C.l_exists(1100, 24, 50, 1, 0.05), C.l_forall(1100, 24, 50, 1, 0.05),\n"
            "      C.classify_gain(450, 470, 10, 50, 1, 0.05).label, C.l_forall(15, 3, 4, 2, 0.05),\n"
            "      'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()
    _le, lf = ref_cutoffs(3, 4, 2, 0.05)
    assert int(out[3]) == lf[15]  # the R = 2 shape by its definition (reference DP above)
    assert out[:3] == [str(C.l_exists(1100, 24, 50, 1, 0.05)),
                       str(C.l_forall(1100, 24, 50, 1, 0.05)),
                       C.classify_gain(450, 470, 10, 50, 1, 0.05).label]
    assert out[4] == "False"
