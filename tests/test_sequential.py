"""Anytime-valid sequential tests (robosafe.stats.sequential): hand-worked evidence values,
type-I error at any stopping time by exact enumeration and dynamic programming, seeded
simulation on a small grid, and power sanity."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from robosafe.errors import RobosafeError
from robosafe.stats.sequential import (
    FUTILITY_BETS,
    beta_binomial_cs,
    beta_binomial_log_e,
    calibrated_log_threshold,
    compare_sequential,
    discordant_log_e,
    futility_log_e,
    multi_sequential,
    pair_probabilities,
    paired_crossing_probability,
    paired_sequential,
    proportion_miscoverage_probability,
    proportion_sequential,
    smallest_decidable,
    smallest_width_sample,
    unpaired_sequential,
)

ALPHA = 0.05


# --- hand-worked values ----------------------------------------------------------------------

def test_discordant_evidence_by_hand():
    # uniform prior on q in (1/2, 1), density 2: E(w=1, l=0) = int 2q * 2 dq = 4 * 3/8 = 1.5
    assert math.exp(discordant_log_e(1, 0)) == pytest.approx(1.5)
    # E(0, 1) = int 2(1-q) * 2 dq over (1/2, 1) = 4 * 1/8 = 0.5
    assert math.exp(discordant_log_e(0, 1)) == pytest.approx(0.5)
    # E(k, 0) = 2^(k+1) / (k+1) * (1 - 2^-(k+1)) = (2^(k+1) - 1) / (k+1): 255/8 at k = 7
    assert math.exp(discordant_log_e(7, 0)) == pytest.approx(255 / 8)
    assert math.exp(discordant_log_e(6, 0)) == pytest.approx(127 / 7)
    # 127/7 = 18.1 < 20 <= 31.9: seven straight wins decide at alpha = 0.05, six do not;
    # two-sided (threshold 40) needs eight (511/9 = 56.8)
    assert smallest_decidable(ALPHA) == 7
    assert smallest_decidable(ALPHA, two_sided=True) == 8
    # E(1, 1) = 8 * int_{1/2}^1 q(1-q) dq = 8 * (3/8 - 7/24) = 2/3
    assert math.exp(discordant_log_e(1, 1)) == pytest.approx(2 / 3)


def test_futility_evidence_by_hand():
    lam = np.array(FUTILITY_BETS) / 0.9
    # one concordant pair at delta = 0.1: mean of (1 + 0.1 lambda) = 1 + 0.1 * mean(lambda)
    assert math.exp(futility_log_e(0, 0, 1, 0.1)) == pytest.approx(1 + 0.1 * lam.mean())
    # one pair won by A: mean of (1 + 1.1 lambda); one won by B: mean of (1 - 0.9 lambda)
    assert math.exp(futility_log_e(0, 1, 1, 0.1)) == pytest.approx(1 + 1.1 * lam.mean())
    assert math.exp(futility_log_e(1, 0, 1, 0.1)) == pytest.approx(np.mean(1 - 0.9 * lam))


def test_beta_binomial_by_hand():
    # M_n(p0) = B(1+s, 1+n-s) / (p0^s (1-p0)^(n-s)): s=1, n=1, p0=1/2 -> (1/2)/(1/2) = 1
    assert beta_binomial_log_e(1, 1, 0.5) == pytest.approx(0.0)
    # s=2, n=2: B(3, 1) = 1/3 over 1/4 -> 4/3
    assert math.exp(beta_binomial_log_e(2, 2, 0.5)) == pytest.approx(4 / 3)
    # s=0, n=n: the lower end is 0 and the upper end solves (1-p)^-n / (n+1) = 1/alpha
    lo, hi = beta_binomial_cs(np.array([0]), np.array([10]), ALPHA)
    assert lo[0] == 0.0
    # -log 11 - 10 log(1-p) = log(1/alpha)  <=>  p = 1 - (alpha / 11)^(1/10)
    assert hi[0] == pytest.approx(1 - (ALPHA / 11) ** 0.1, abs=1e-9)


# --- exact type-I error at any stopping time -------------------------------------------------

def _path_prob(path, p_win, p_loss):
    p_tie = 1 - p_win - p_loss
    return math.prod(p_win if d == 1 else p_loss if d == -1 else p_tie for d in path)


@pytest.mark.parametrize("delta", [None, 0.2])
def test_dynamic_program_matches_enumeration_of_every_path(delta):
    """The DP's crossing probability equals the sum over all 3^n paths of the decision
    compare_sequential takes (which stops at the first crossing)."""
    n, p_win, p_loss = 8, 0.3, 0.2
    totals = {"better": 0.0, "not_better": 0.0}
    for path in itertools.product((1, 0, -1), repeat=n):
        r = compare_sequential(np.array(path), alpha=0.3, delta=delta)
        if r.decision in totals:
            totals[r.decision] += _path_prob(path, p_win, p_loss)
    assert totals["better"] == pytest.approx(
        paired_crossing_probability("better", p_win, p_loss, n, alpha=0.3), abs=1e-12)
    assert totals["better"] > 0  # the enumeration reaches decisions at this alpha
    if delta is not None:
        # a path that crosses "better" first never reaches "not_better": the DP counts every
        # crossing, the enumeration only first decisions, so DP >= enumeration
        dp = paired_crossing_probability("not_better", p_win, p_loss, n, alpha=0.3, delta=delta)
        assert 0 < totals["not_better"] <= dp + 1e-12


@pytest.mark.parametrize("budget", [30, 60])
@pytest.mark.parametrize("discordance", [1.0, 0.5, 0.2])
def test_better_type_one_error_exact(budget, discordance):
    # under Delta <= 0 (q <= 1/2) at every concordance rate
    for q in (0.5, 0.4, 0.2):
        p = paired_crossing_probability("better", discordance * q, discordance * (1 - q),
                                        budget)
        assert p <= ALPHA
    # two-sided: each side at alpha/2, so both together at most alpha
    assert paired_crossing_probability("better", discordance / 2, discordance / 2, budget,
                                       two_sided=True) <= ALPHA / 2
    assert paired_crossing_probability("worse", discordance / 2, discordance / 2, budget,
                                       two_sided=True) <= ALPHA / 2


@pytest.mark.parametrize("delta", [0.05, 0.1, 0.3])
@pytest.mark.parametrize("discordance", [1.0, 0.6, 0.3])
def test_not_better_type_one_error_exact(delta, discordance):
    """H0: Delta >= delta, at the boundary Delta = delta (the worst case) and beyond, for
    discordance rates from all pairs to few, 60 pairs."""
    for gap in (delta, delta + 0.05):
        if gap > discordance:
            continue
        p_win, p_loss = (discordance + gap) / 2, (discordance - gap) / 2
        assert paired_crossing_probability("not_better", p_win, p_loss, 60,
                                           delta=delta) <= ALPHA


@pytest.mark.parametrize("budget", [30, 60])
def test_budget_calibrated_threshold_exact(budget):
    """With the budget fixed in advance the threshold is lowered until the null crossing
    probability within the budget is alpha: still <= alpha for every q <= 1/2 and concordance
    rate, and close to alpha at the worst case (all pairs discordant, q = 1/2)."""
    level = calibrated_log_threshold(budget, ALPHA)
    assert level < math.log(1 / ALPHA)
    for discordance in (1.0, 0.5, 0.2):
        for q in (0.5, 0.45, 0.3):
            p = paired_crossing_probability("better", discordance * q, discordance * (1 - q),
                                            budget, calibrated=True)
            assert p <= ALPHA
    worst = paired_crossing_probability("better", 0.5, 0.5, budget, calibrated=True)
    assert 0.04 < worst <= ALPHA
    for side in ("better", "worse"):
        assert paired_crossing_probability(side, 0.5, 0.5, budget, two_sided=True,
                                           calibrated=True) <= ALPHA / 2


def test_calibrated_decisions_match_enumeration():
    """Every one of the 2^12 discordant paths of a fair coin, through compare_sequential with
    budget 12: the probability of deciding "better" is the DP's, and at most alpha."""
    n = 12
    total = sum(0.5 ** n for path in itertools.product((1, -1), repeat=n)
                if compare_sequential(np.array(path), budget=n).decision == "better")
    assert total == pytest.approx(
        paired_crossing_probability("better", 0.5, 0.5, n, calibrated=True), abs=1e-12)
    assert 0 < total <= ALPHA


def test_proportion_coverage_exact():
    for p in (0.05, 0.2, 0.5, 0.7, 0.9, 0.97):
        assert proportion_miscoverage_probability(p, 120) <= ALPHA


def test_exact_checks_are_not_vacuous():
    # the DP does count crossings under the null: at alpha = 0.2 the e-process crosses with
    # probability above 0.05 (and at most 0.2), so "<= 0.05" above is a real check
    assert 0.05 < paired_crossing_probability("better", 0.5, 0.5, 60, alpha=0.2) <= 0.2
    # and the tests have power: B wins 85% of 60 discordant pairs
    assert paired_crossing_probability("better", 0.85, 0.15, 60) > 0.95


# --- seeded simulation -----------------------------------------------------------------------

def _simulate_pairs(rng, p_a, p_b, rho, n, reps):
    cells = np.array(pair_probabilities(p_a, p_b, rho))  # p11, p10, p01, p00
    u = rng.random((reps, n))
    cum = np.cumsum(cells)
    k = (u[..., None] > cum).sum(axis=-1)  # 0: both, 1: B only, 2: A only, 3: neither
    return np.where(k == 1, 1, np.where(k == 2, -1, 0))


@pytest.mark.slow
def test_type_one_error_by_simulation_on_a_grid():
    rng = np.random.default_rng(20261128)
    reps, budget = 1500, 200
    se = math.sqrt(ALPHA * (1 - ALPHA) / reps)
    for p in (0.5, 0.8, 0.95):
        for rho in (0.0, 0.5, 0.8):
            d = _simulate_pairs(rng, p, p, rho, budget, reps)
            for fixed in (None, budget):  # valid forever / calibrated to the budget
                wrong = np.mean([compare_sequential(row, budget=fixed).decision == "better"
                                 for row in d])
                assert wrong <= ALPHA + 3 * se, (p, rho, fixed, wrong)
            # unpaired: independent streams with equal rates
            ya, yb = rng.random((2, reps, budget)) < p
            wrong = np.mean([unpaired_sequential(a, b, budget=budget).decision == "better"
                             for a, b in zip(ya, yb, strict=True)])
            assert wrong <= ALPHA + 3 * se, (p, "unpaired", wrong)
    # not better by delta, at Delta = delta
    d = _simulate_pairs(rng, 0.6, 0.7, 0.5, budget, reps)
    wrong = np.mean([compare_sequential(row, delta=0.1).decision == "not_better" for row in d])
    assert wrong <= ALPHA + 3 * se


def test_large_effect_decides_better_well_before_budget():
    rng = np.random.default_rng(7)
    d = _simulate_pairs(rng, 0.5, 0.9, 0.3, 300, 200)
    res = [compare_sequential(row, delta=0.1) for row in d]
    assert np.mean([r.decision == "better" for r in res]) > 0.97
    assert np.median([r.episodes for r in res]) < 40


def test_no_effect_with_delta_decides_not_better():
    rng = np.random.default_rng(8)
    d = _simulate_pairs(rng, 0.7, 0.7, 0.6, 500, 100)
    res = [compare_sequential(row, delta=0.1) for row in d]
    assert np.mean([r.decision == "not_better" for r in res]) > 0.9


# --- decisions and results -------------------------------------------------------------------

def test_paired_decision_record():
    a = [0] * 10 + [1] * 5
    b = [1] * 10 + [1] * 5
    r = paired_sequential(a, b)
    assert (r.decision, r.episodes, r.available) == ("better", 7, 15)
    assert (r.wins_b, r.wins_a, r.saved) == (7, 0, 8)
    better = r.evidence[0]
    assert better.name == "better" and len(better.log_e) == 7
    assert better.log_e[-1] >= better.log_threshold > better.log_e[-2]
    d = r.to_dict()
    assert d["decision"] == "better" and d["episodes"] == 7 and d["decided"]
    w = paired_sequential(b, a, two_sided=True)
    assert (w.decision, w.episodes) == ("worse", 8)
    u = paired_sequential(a, a)
    assert (u.decision, u.episodes) == ("undecided", 15)


def test_decision_is_final():
    # B wins the first 7 pairs then loses 20: "better" stands, made at pair 7
    r = paired_sequential([0] * 7 + [1] * 20, [1] * 7 + [0] * 20)
    assert (r.decision, r.episodes) == ("better", 7)


def test_budget_truncates_and_smallest_decidable():
    a, b = [0] * 20, [1] * 20
    assert paired_sequential(a, b, budget=10).available == 10
    # a budget fixed in advance lowers the threshold (calibrated): five straight wins
    # (probability 1/32 under the null) then decide, four never can
    r = paired_sequential(a, b, budget=5)
    assert (r.decision, r.episodes) == ("better", 5)
    with pytest.raises(RobosafeError, match="smallest decidable sample is 5"):
        paired_sequential(a, b, budget=4)
    with pytest.raises(RobosafeError, match="smallest decidable sample is 7"):
        paired_sequential(a, b, budget=4, calibrate=False)


@pytest.mark.parametrize("alpha,width", [(0.05, 0.5), (0.05, 0.2), (0.025, 0.3), (0.1, 0.25)])
def test_smallest_width_sample_by_enumeration(alpha, width):
    """The first n at which some success count s in 0..n gives an interval that narrow,
    every count tried; and proportion_sequential on all-success outcomes stops there."""
    def narrowest(n):
        s = np.arange(n + 1, dtype=float)
        lo, hi = beta_binomial_cs(s, np.full(n + 1, float(n)), alpha)
        return float((hi - lo).min())

    want = next(n for n in range(1, 400) if narrowest(n) <= width)
    assert smallest_width_sample(alpha, width) == want
    assert smallest_width_sample(alpha, width, budget=want - 1) == want  # budget + 1
    r = proportion_sequential([1] * (want + 5), alpha=alpha, width=width)
    assert (r.decision, r.episodes) == ("width_reached", want)


@pytest.mark.parametrize("alpha", [0, 0.5, 0.7, -0.1, True, "0.05"])
def test_alpha_outside_range(alpha):
    with pytest.raises(RobosafeError, match="alpha"):
        paired_sequential([0, 1], [1, 1], alpha=alpha)


def test_bad_inputs():
    with pytest.raises(RobosafeError, match="0/1"):
        paired_sequential([0, 2], [1, 1])
    with pytest.raises(RobosafeError, match="equal lengths"):
        paired_sequential([0, 1], [1])
    with pytest.raises(RobosafeError, match="delta"):
        paired_sequential([0, 1], [1, 1], delta=1.5)
    with pytest.raises(RobosafeError, match="target"):
        proportion_sequential([1, 1])
    with pytest.raises(RobosafeError, match="correlation"):
        pair_probabilities(0.1, 0.9, 0.9)


def test_proportion_decisions():
    r = proportion_sequential([1] * 40, target=0.7)
    assert r.decision == "above" and r.lower[-1] > 0.7 >= r.lower[-2]
    r = proportion_sequential([0] * 40, target=0.3)
    assert r.decision == "below" and r.upper[-1] < 0.3
    r = proportion_sequential([1, 0] * 400, width=0.2)
    assert r.decision == "width_reached"
    assert r.upper[-1] - r.lower[-1] <= 0.2 < r.upper[-2] - r.lower[-2]
    assert r.lower[-1] < 0.5 < r.upper[-1]
    # running intersection: the interval never widens
    assert all(np.diff(r.lower) >= 0) and all(np.diff(r.upper) <= 0)
    u = proportion_sequential([1, 0] * 10, target=0.5)
    assert (u.decision, u.episodes) == ("undecided", 20)


def test_several_metrics_share_alpha():
    a, b = [0] * 30, [1] * 30
    m = multi_sequential({"success": (a, b), "safe": (b, b)}, alpha=ALPHA)
    assert m.alpha_each == ALPHA / 2
    assert m.metrics["success"].decision == "better"
    # at alpha/2 = 0.025 seven straight wins (31.9 < 40) are not enough, eight are
    assert m.metrics["success"].episodes == 8
    assert not m.decided and m.episodes == 30
    assert m.to_dict()["decision"] == "undecided"
