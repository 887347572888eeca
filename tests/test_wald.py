"""Paired and independent stratified Wald tests (paper 002, Sec. 4, App. C.1, C.6)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm
from statsmodels.stats.weightstats import CompareMeans, DescrStatsW

from robosafe.errors import RobosafeError
from robosafe.stats.wald import independent_wald_test, paired_wald_test


def test_paired_hand_worked():
    # delta = [[1,0,1],[0,-1,1]]: d = (2, 0), s = (2, 2), Q = (2 - 4/3) + 2 = 8/3,
    # Z = 2 / sqrt(3/2 * 8/3) = 1; Delta-hat = 2/6, V-hat = Q / (T^2 S (S-1)) = 1/9.
    ya = np.array([[0, 1, 0], [1, 1, 0]])
    yb = np.array([[1, 1, 1], [1, 0, 1]])
    r = paired_wald_test(ya, yb)
    assert r.statistic == pytest.approx(1.0) and r.q == pytest.approx(8 / 3)
    assert r.estimate == pytest.approx(1 / 3) and r.stderr == pytest.approx(1 / 3)
    assert r.pvalue == pytest.approx(norm.sf(1.0)) and r.gap_count == 2
    assert not r.reject and r.critical_value == pytest.approx(1.6448536269514722)
    assert paired_wald_test(ya, yb, alpha=0.2).reject  # z_0.8 = 0.8416 < 1


def test_independent_hand_worked():
    # a = (1, 2), b = (3, 2); u = a, v = b (binary): Q_ind = (1-1/3) + (3-3) + (2-4/3) * 2
    ya = np.array([[0, 1, 0], [1, 1, 0]])
    yb = np.array([[1, 1, 1], [1, 0, 1]])
    r = independent_wald_test(ya, yb)
    q = (1 - 1 / 3) + (3 - 3) + 2 * (2 - 4 / 3)
    assert r.q == pytest.approx(q)
    assert r.statistic == pytest.approx(2 / math.sqrt(1.5 * q))


@pytest.mark.parametrize("test", [paired_wald_test, independent_wald_test])
def test_zero_variance_convention(test):
    base = np.zeros((3, 4), dtype=int)
    up = test(base, np.ones_like(base))          # V-hat = 0, Delta-hat > 0
    assert up.statistic == math.inf and up.pvalue == 0.0 and up.reject
    same = test(base, base)                       # V-hat = 0, Delta-hat = 0
    assert same.statistic == 0.0 and same.pvalue == 0.5 and not same.reject
    down = test(np.ones_like(base), base)         # V-hat = 0, Delta-hat < 0
    assert down.statistic == -math.inf and down.pvalue == 1.0 and not down.reject
    assert up.stderr == 0.0 and up.estimate == 1.0


def test_paired_zero_variance_is_exact_for_r_above_one():
    ya = np.array([[0, 1, 2], [3, 1, 0]])
    r = paired_wald_test(ya, ya + 2, R=5)         # every delta = 2: Q = 0 exactly
    assert r.q == 0.0 and r.statistic == math.inf and r.reject


@settings(max_examples=60, deadline=None)
@given(S=st.integers(2, 40), R=st.integers(1, 5), seed=st.integers(0, 2**32 - 1))
def test_single_task_matches_statsmodels(S, R, seed):
    rng = np.random.default_rng(seed)
    ya, yb = rng.integers(0, R + 1, (1, S)), rng.integers(0, R + 1, (1, S))
    delta = (yb - ya)[0].astype(float)
    p = paired_wald_test(ya, yb, R)
    if delta.std() > 0:
        z, pv = DescrStatsW(delta).ztest_mean(0, alternative="larger")
        assert p.statistic == pytest.approx(z) and p.pvalue == pytest.approx(pv)
    i = independent_wald_test(ya, yb, R)
    if ya.std() + yb.std() > 0:
        cm = CompareMeans(DescrStatsW(yb[0].astype(float)), DescrStatsW(ya[0].astype(float)))
        z, pv = cm.ztest_ind(alternative="larger", usevar="unequal")
        assert i.statistic == pytest.approx(z) and i.pvalue == pytest.approx(pv)


@settings(max_examples=60, deadline=None)
@given(T=st.integers(1, 12), S=st.integers(2, 30), R=st.integers(1, 5),
       seed=st.integers(0, 2**32 - 1))
def test_stratified_matches_statsmodels_per_task_pieces(T, S, R, seed):
    rng = np.random.default_rng(seed)
    ya, yb = rng.integers(0, R + 1, (T, S)), rng.integers(0, R + 1, (T, S))
    delta = (yb - ya).astype(float)
    # Delta-hat = mean of task means; V-hat = sum_t se_t^2 / T^2 with se_t^2 = var_ddof1 / S.
    se2 = sum(DescrStatsW(delta[t]).std_mean ** 2 for t in range(T))
    p = paired_wald_test(ya, yb, R)
    assert p.estimate == pytest.approx(delta.mean())
    assert p.stderr == pytest.approx(math.sqrt(se2) / T)
    if se2 > 0:
        assert p.statistic == pytest.approx(delta.mean() / (math.sqrt(se2) / T))
    se2i = sum(DescrStatsW(yb[t].astype(float)).std_mean ** 2 +
               DescrStatsW(ya[t].astype(float)).std_mean ** 2 for t in range(T))
    i = independent_wald_test(ya, yb, R)
    assert i.stderr == pytest.approx(math.sqrt(se2i) / T)
    if se2i > 0:
        assert i.statistic == pytest.approx(delta.mean() / (math.sqrt(se2i) / T))
        assert i.pvalue == pytest.approx(norm.sf(i.statistic))


@settings(max_examples=60, deadline=None)
@given(T=st.integers(1, 6), S=st.integers(2, 20), R=st.integers(1, 3),
       alpha=st.floats(0.001, 0.49), seed=st.integers(0, 2**32 - 1))
def test_reject_is_the_count_scale_rule_of_c2(T, S, R, alpha, seed):
    rng = np.random.default_rng(seed)
    ya, yb = rng.integers(0, R + 1, (T, S)), rng.integers(0, R + 1, (T, S))
    r = paired_wald_test(ya, yb, R, alpha)
    L = int((yb - ya).sum())
    c = norm.ppf(1 - alpha) * math.sqrt(S / (S - 1))
    if L > 0:
        assert r.reject == (L > c * math.sqrt(r.q))
    else:
        assert not r.reject


def test_float_and_bool_inputs_accepted():
    ya = np.array([[False, True], [True, True]])
    yb = np.array([[1.0, 1.0], [1.0, 0.0]])
    assert paired_wald_test(ya, yb).gap_count == 0


@pytest.mark.parametrize("ya,yb,kw", [
    (np.zeros((2, 3)), np.zeros((2, 4)), {}),                 # shape mismatch
    (np.zeros(6), np.zeros(6), {}),                           # 1-D
    (np.zeros((2, 1)), np.zeros((2, 1)), {}),                 # S < 2
    (np.zeros((0, 3)), np.zeros((0, 3)), {}),                 # T < 1
    (np.full((2, 3), 2), np.zeros((2, 3)), {}),               # value above R
    (np.full((2, 3), -1), np.zeros((2, 3)), {"R": 3}),        # negative value
    (np.full((2, 3), 0.5), np.zeros((2, 3)), {}),             # non-integral
    (np.zeros((2, 3)), np.zeros((2, 3)), {"R": 0}),           # R < 1
    (np.zeros((2, 3)), np.zeros((2, 3)), {"alpha": 0.5}),     # alpha outside (0, 0.5)
    (np.zeros((2, 3)), np.zeros((2, 3)), {"alpha": 0.0}),
    (np.array([["a", "b"]]), np.array([["a", "b"]]), {}),     # not numbers
])
@pytest.mark.parametrize("test", [paired_wald_test, independent_wald_test])
def test_bad_input_raises_robosafe_error(test, ya, yb, kw):
    with pytest.raises(RobosafeError):
        test(ya, yb, **kw)
