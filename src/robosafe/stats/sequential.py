"""Anytime-valid sequential tests: stop evaluating as soon as the answer is known.

A fixed-N test (the paired Wald test of paper 002, App. C.1) is valid only if N was fixed
before the data were seen; looking after every episode and stopping when it "looks
significant" inflates its type-I error without bound. Every test here is built on an
*e-process*: a nonnegative sequence E_n with E[E_tau] <= 1 under the null at every stopping
time tau, so by Ville's inequality P(sup_n E_n >= 1/alpha) <= alpha. Deciding when E_n first
crosses 1/alpha is therefore valid whenever the evaluator stops: after the decision, at the
budget, or for any other reason, including one that looked at the data.

Tests (one function per formula, each used by one decision function):

* one proportion (a policy's SR or Safety) against a target: Robbins' beta-binomial mixture
  confidence sequence (:func:`beta_binomial_log_e`, :func:`beta_binomial_cs`,
  :func:`proportion_sequential`);
* two policies on paired seeds: only the discordant pairs carry evidence about the sign of
  the gap. Paper 002 App. C.1 notes the same for its Wald statistic: "For binary
  success/failure outcomes, R=1 and delta_{t,i}^2=1 exactly when policies A and B recorded
  different outcomes. Thus s_t is the task-level discordance count". Among discordant pairs,
  B wins each with probability q = p10 / (p10 + p01), and Delta = p10 - p01 <= 0 exactly when
  q <= 1/2, whatever the concordance rate; :func:`discordant_log_e` is a mixture of likelihood
  ratios over q > 1/2. "Not better by delta" (Delta < delta) is tested by betting on the
  paired differences (:func:`futility_log_e`): there a concordant pair *is* evidence, since it
  shows the gap is small (:func:`paired_sequential`);
* two policies on unpaired samples (no shared seeds): the i-th episode of A and the i-th of B
  form a pair; for independent A and B, P(B wins the pair) <= P(A wins it) exactly when
  p_B <= p_A, so the same e-processes apply (:func:`unpaired_sequential`);
* several outcomes at once (SR and Safety): each metric's test runs at alpha / m, so the
  probability of any wrong decision is at most alpha (Bonferroni) (:func:`multi_sequential`).

A budget fixed in advance buys power: the threshold of the discordant-pair test is then
lowered until its null crossing probability within the budget is exactly alpha
(:func:`calibrated_log_threshold`), and the guarantee holds at every stopping time up to the
budget, not past it.

Validity is checked exactly, by dynamic programming over every path up to a budget
(:func:`paired_crossing_probability`, :func:`proportion_miscoverage_probability`), and by
simulation (tests/test_sequential.py, benchmarks/bench_sequential.py).

Order matters: the e-process is valid for outcomes revealed in an order fixed in advance
(episode index, seed order), never in an order that depends on the outcomes (the order in
which parallel workers *finished*: failures that run to the horizon finish last).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.special import betainc, betaln

from robosafe.errors import RobosafeError

COMPARISON_DECISIONS = ("better", "worse", "not_better", "undecided")
PROPORTION_DECISIONS = ("above", "below", "width_reached", "undecided")

# The mixing distribution of the discordant-pair test: Beta(c, c) truncated to q > 1/2. c = 1
# (uniform) spreads the prior over every win rate. Measured once (600 simulated runs per
# case, budget 500, seven rate pairs and correlations): c = 2 used 3-4 % fewer pairs on the
# small effects and up to 11 % more on the large ones; c = 8 needed 10-64 % more on all but
# the smallest.
DEFAULT_CONCENTRATION = 1.0
# Bets of the futility e-process: fractions of the largest bet that keeps every factor > 0.
FUTILITY_BETS = tuple(j / 10 for j in range(1, 10))


def check_alpha(alpha: float) -> float:
    """alpha must lie in (0, 1/2), as for the fixed-N tests (App. C.1)."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating)) \
            or not 0.0 < float(alpha) < 0.5:
        raise RobosafeError(f"alpha must be a number in (0, 0.5), got {alpha!r}")
    return float(alpha)


def _check_delta(delta: float | None) -> float | None:
    if delta is None:
        return None
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.floating)) \
            or not 0.0 < float(delta) < 1.0:
        raise RobosafeError(f"delta (the smallest gap worth having) must be in (0, 1), got "
                            f"{delta!r}")
    return float(delta)


def _binary(x: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=float).ravel()
    if a.size and not np.all((a == 0) | (a == 1)):
        raise RobosafeError(f"{name} must hold 0/1 outcomes")
    return a.astype(np.int64)


# --- formulas -----------------------------------------------------------------------------------

def discordant_log_e(wins: np.ndarray | int, losses: np.ndarray | int,
                     concentration: float = DEFAULT_CONCENTRATION) -> np.ndarray:
    """log E of the one-sided discordant-pair test of H0: q <= 1/2 after ``wins`` discordant
    pairs won by B and ``losses`` won by A.

    E = integral over q in (1/2, 1) of (2q)^w (2(1-q))^l pi(q) dq, with pi the Beta(c, c)
    density truncated to (1/2, 1) (it holds half the mass), in closed form:
    E = 2^(w+l+1) B(c+w, c+l) / B(c, c) * P(Beta(c+w, c+l) > 1/2).
    Each factor's mean under any q <= 1/2 is 2(1-theta) + 2q(2theta-1) <= 1 for theta >= 1/2,
    so every component, and the mixture, is a nonnegative supermartingale under the null
    (Robbins' method of mixtures, one-sided). Swap the arguments for A over B.
    """
    w = np.asarray(wins, dtype=float)
    lo = np.asarray(losses, dtype=float)
    c = float(concentration)
    # P(Beta(a, b) > 1/2) = I_{1/2}(b, a) by the symmetry of the regularised beta function
    with np.errstate(divide="ignore"):
        tail = np.log(betainc(c + lo, c + w, 0.5))
    return ((w + lo + 1) * math.log(2.0) + betaln(c + w, c + lo) - betaln(c, c) + tail)


def futility_log_e(wins: np.ndarray | int, losses: np.ndarray | int, pairs: np.ndarray | int,
                   delta: float, bets: Sequence[float] = FUTILITY_BETS) -> np.ndarray:
    """log E of the betting test of H0: Delta >= delta on paired differences d in {-1, 0, 1}
    (B - A), after ``pairs`` pairs of which ``wins`` have d = 1 and ``losses`` d = -1.

    E = mean over bets lambda_j of prod_i (1 + lambda_j (delta - d_i)), with
    lambda_j = f_j / (1 - delta), f_j in (0, 1), so every factor is positive. Under
    E[d] = Delta >= delta each factor has mean 1 + lambda (delta - Delta) <= 1: a mixture of
    nonnegative supermartingales (testing by betting). A concordant pair (d = 0) multiplies
    the evidence by 1 + lambda delta > 1: it is evidence that the gap is small.
    """
    w = np.asarray(wins, dtype=float)
    lo = np.asarray(losses, dtype=float)
    n = np.asarray(pairs, dtype=float)
    lam = np.asarray(bets, dtype=float) / (1.0 - delta)
    shape = np.broadcast(w, lo, n).shape
    terms = (w[..., None] * np.log1p(lam * (delta - 1.0))
             + lo[..., None] * np.log1p(lam * (delta + 1.0))
             + (n - w - lo)[..., None] * np.log1p(lam * delta))
    m = terms.max(axis=-1)
    out = m + np.log(np.exp(terms - m[..., None]).mean(axis=-1))
    return out.reshape(shape)


def beta_binomial_log_e(successes: np.ndarray | int, n: np.ndarray | int, p0: np.ndarray | float,
                        a: float = 1.0, b: float = 1.0) -> np.ndarray:
    """log M_n(p0) of Robbins' beta-binomial mixture martingale for a Bernoulli mean p0:
    M_n(p0) = B(a+s, b+n-s) / (B(a, b) p0^s (1-p0)^(n-s)), the likelihood ratio of
    p ~ Beta(a, b) against p0 after s successes in n trials. Under p = p0 it is a nonnegative
    martingale with mean 1, so {p0 : M_n(p0) < 1/alpha} is a confidence sequence: it holds p
    at every n at once with probability >= 1 - alpha."""
    s = np.asarray(successes, dtype=float)
    nn = np.asarray(n, dtype=float)
    p = np.asarray(p0, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ll = np.where(s > 0, s * np.log(p), 0.0) + np.where(nn - s > 0, (nn - s) * np.log1p(-p),
                                                            0.0)
    return betaln(a + s, b + nn - s) - betaln(a, b) - ll


def beta_binomial_cs(successes: np.ndarray, n: np.ndarray, alpha: float, a: float = 1.0,
                     b: float = 1.0, iterations: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper ends of the beta-binomial confidence sequence at each (s, n), by
    bisection. log M_n(p0) is convex in p0 and <= 0 at p0 = s/n (the mixture of likelihood
    ratios never exceeds the maximum one), so each end is the one root on its side of s/n, or
    0 / 1 where there is none. The point returned is the outer one of the last bracket: the
    sequence is never narrower than its definition."""
    s = np.asarray(successes, dtype=float)
    nn = np.asarray(n, dtype=float)
    level = math.log(1.0 / alpha)
    mid = np.where(nn > 0, s / np.maximum(nn, 1), 0.5)

    def solve(inside: np.ndarray, outside: np.ndarray) -> np.ndarray:
        for _ in range(iterations):
            m = (inside + outside) / 2
            out = beta_binomial_log_e(s, nn, m, a, b) >= level
            inside, outside = np.where(out, inside, m), np.where(out, m, outside)
        return outside

    eps = 1e-12
    edge = np.full_like(mid, eps)
    lower = np.where(beta_binomial_log_e(s, nn, edge, a, b) >= level, solve(mid, edge), 0.0)
    edge = np.full_like(mid, 1 - eps)
    upper = np.where(beta_binomial_log_e(s, nn, edge, a, b) >= level, solve(mid, edge), 1.0)
    return lower, upper


# --- results ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Evidence:
    """One e-process along the data: ``log_e[i]`` is log E after i + 1 pairs (or episodes);
    the test decides ``name`` when it reaches ``log_threshold`` = log(1/alpha') (alpha' is
    alpha, alpha/2 two-sided, alpha/m for m metrics)."""

    name: str
    log_e: tuple[float, ...]
    log_threshold: float

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "log_threshold": self.log_threshold,
                "log_e": [None if math.isinf(v) else round(v, 6) for v in self.log_e]}


@dataclass(frozen=True)
class ComparisonDecision:
    """Where a sequential comparison of B against A stands.

    ``decision`` is final once made (better, worse, not_better) or ``undecided`` at the end
    of the data or budget; ``episodes`` is the number of pairs used up to the decision
    (all of them when undecided) and ``available`` the number there were. ``wins_b`` /
    ``wins_a`` count the discordant pairs B / A won up to the decision. Any decision is wrong
    with probability at most ``alpha`` whenever the evaluation stopped.
    """

    design: str  # "paired" or "unpaired"
    decision: str
    episodes: int
    available: int
    alpha: float
    two_sided: bool
    delta: float | None
    wins_b: int
    wins_a: int
    evidence: tuple[Evidence, ...]

    @property
    def decided(self) -> bool:
        return self.decision != "undecided"

    @property
    def saved(self) -> int:
        """Pairs the evaluation did not need once decided."""
        return self.available - self.episodes

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["evidence"] = [e.to_dict() for e in self.evidence]
        d["decided"], d["saved"] = self.decided, self.saved
        return d


@dataclass(frozen=True)
class ProportionDecision:
    """A policy's rate (SR or Safety) against a target, sequentially.

    ``lower`` / ``upper`` are the running intersection of the confidence sequence after each
    episode, up to the decision; ``above`` / ``below``: the whole sequence is on that side of
    ``target``; ``width_reached``: upper - lower <= ``width``. The rate lies in
    [lower, upper] at every episode at once with probability >= 1 - alpha.
    """

    decision: str
    episodes: int
    available: int
    alpha: float
    target: float | None
    width: float | None
    successes: int
    lower: tuple[float, ...]
    upper: tuple[float, ...]

    @property
    def decided(self) -> bool:
        return self.decision != "undecided"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["lower"] = [round(v, 6) for v in self.lower]
        d["upper"] = [round(v, 6) for v in self.upper]
        d["decided"] = self.decided
        d["interval"] = [d["lower"][-1], d["upper"][-1]] if self.lower else [0.0, 1.0]
        return d


@dataclass(frozen=True)
class MultiDecision:
    """Several metrics of the same episodes, each tested at ``alpha_each`` = alpha / m, so the
    chance of any wrong decision is at most ``alpha`` (Bonferroni). ``episodes`` is the
    number of pairs until every metric was decided (all of them when one is not)."""

    alpha: float
    alpha_each: float
    episodes: int
    metrics: dict[str, ComparisonDecision | ProportionDecision]

    @property
    def decided(self) -> bool:
        return all(r.decided for r in self.metrics.values())

    def to_dict(self) -> dict[str, Any]:
        return {"decision": "decided" if self.decided else "undecided",
                "episodes": self.episodes, "alpha": self.alpha, "alpha_each": self.alpha_each,
                "metrics": {k: r.to_dict() for k, r in self.metrics.items()}}


# --- decisions ----------------------------------------------------------------------------------

def _earliest(tests, n: int) -> tuple[int, str]:
    """(episodes, decision) of the first test to decide; on a tie the one listed first. The
    decision is final: later data never change it."""
    best, decision = None, "undecided"
    for name, mask in tests:
        hit = np.flatnonzero(mask)
        if hit.size and (best is None or hit[0] < best):
            best, decision = int(hit[0]), name
    return (n if best is None else best + 1), decision


def _budget(n: int, budget: int | None) -> int:
    if budget is None:
        return n
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 1:
        raise RobosafeError(f"budget must be a positive integer, got {budget!r}")
    return min(n, int(budget))


def smallest_decidable(alpha: float, two_sided: bool = False,
                       concentration: float = DEFAULT_CONCENTRATION,
                       budget: int | None = None) -> int:
    """The fewest pairs that can decide "better": all of them discordant and won by B (at
    the threshold calibrated to ``budget`` when one is given). A budget below this can never
    decide; it is an error, not an undecided run."""
    a_side = check_alpha(alpha) / (2.0 if two_sided else 1.0)
    level = (math.log(1.0 / a_side) if budget is None
             else calibrated_log_threshold(max(int(budget), 1), a_side, concentration))
    k = 1
    while discordant_log_e(k, 0, concentration) < level:
        k += 1
    return k


def smallest_width_sample(alpha: float, width: float, budget: int | None = None) -> int:
    """The fewest episodes after which the beta-binomial confidence sequence
    (:func:`beta_binomial_cs`) can be ``width`` wide: its narrowest interval after n episodes
    is the one of outcomes all alike, [0, u_n] (or [1 - u_n, 1]), and u_n falls with n, so
    this is the smallest n with u_n <= width, found by bisection up to ``budget`` (or
    doubling without one). A narrower running intersection needs intervals that disagree,
    which the sequence's guarantee makes rare (at most alpha). Above ``budget``: budget + 1."""
    alpha = check_alpha(alpha)
    if not 0.0 < float(width) < 1.0:
        raise RobosafeError(f"width must be in (0, 1), got {width!r}")

    def narrow(n: int) -> bool:
        _, hi = beta_binomial_cs(np.array([0.0]), np.array([float(n)]), alpha)
        return bool(hi[0] <= width)

    hi = 1
    cap = int(budget) if budget is not None else None
    while not narrow(hi):
        if cap is not None and hi >= cap:
            return cap + 1
        hi = hi * 2 if cap is None else min(hi * 2, cap)
    lo = hi // 2  # narrow(lo) is False (or lo == 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if narrow(mid) else (mid, hi)
    return hi


@lru_cache(maxsize=256)
def calibrated_log_threshold(budget: int, alpha: float,
                             concentration: float = DEFAULT_CONCENTRATION) -> float:
    """The smallest threshold on log E (discordant-pair test, one side) whose crossing
    probability within ``budget`` pairs is at most ``alpha`` under the null, computed exactly.

    Ville's threshold log(1/alpha) holds forever and is conservative over a finite horizon.
    When the budget is fixed in advance, at most ``budget`` pairs can be discordant, and under
    H0 the discordant pairs are Bernoulli(q <= 1/2) whatever the concordance rate; crossing is
    most likely at q = 1/2 (more wins only raise E). So the crossing probability of a fair
    coin over ``budget`` steps bounds the type-I error at every stopping time up to the
    budget, and the threshold can be lowered until that probability reaches alpha. The
    guarantee then ends at the budget: a run extended past it has none.
    """
    N = int(budget)
    alpha = check_alpha(alpha)
    k = np.arange(N + 1)
    # log E of every (wins, losses) with wins + losses <= N, once
    logs = discordant_log_e(k[:, None], k[None, :], concentration)

    def crossing(level: float) -> float:
        prob = np.zeros(N + 1)
        prob[0] = 1.0
        out = 0.0
        for n in range(1, N + 1):
            nxt = 0.5 * prob
            nxt[1:] += 0.5 * prob[:-1]
            w = np.arange(n + 1)
            hit = logs[w, n - w] >= level
            out += float(nxt[: n + 1][hit].sum())
            nxt[: n + 1][hit] = 0.0
            prob = nxt
        return out

    lo, hi = 0.0, math.log(1.0 / alpha)  # Ville: crossing(hi) <= alpha
    if crossing(lo) <= alpha:
        return lo
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if crossing(mid) <= alpha else (mid, hi)
    return hi


def compare_sequential(diff: np.ndarray, *, alpha: float = 0.05, delta: float | None = None,
                       two_sided: bool = False, budget: int | None = None,
                       concentration: float = DEFAULT_CONCENTRATION,
                       design: str = "paired", calibrate: bool = True) -> ComparisonDecision:
    """The sequential comparison on paired differences d_i = Y_B - Y_A in {-1, 0, 1}, in the
    order the pairs were run (see :func:`paired_sequential`). With a ``budget`` (and
    ``calibrate``) the better / worse thresholds are :func:`calibrated_log_threshold`'s."""
    alpha = check_alpha(alpha)
    delta = _check_delta(delta)
    d = np.asarray(diff, dtype=np.int64).ravel()
    n = _budget(d.size, budget)
    if budget is not None:
        least = smallest_decidable(alpha, two_sided, concentration,
                                   budget=budget if calibrate else None)
        if budget < least:
            raise RobosafeError(
                f"a budget of {budget} pairs can never show B better at alpha={alpha:g}: the "
                f"smallest decidable sample is {least} pairs")
    d = d[:n]
    w, lo = np.cumsum(d == 1), np.cumsum(d == -1)
    k = np.arange(1, n + 1)
    a_side = alpha / 2 if two_sided else alpha
    ville = math.log(1.0 / a_side)
    # the futility e-process keeps Ville's threshold: its null (Delta >= delta) is a family
    # over the concordance rate too, with no single worst case to calibrate against
    sign = (calibrated_log_threshold(int(budget), a_side, concentration)
            if budget is not None and calibrate else ville)
    tests = [("better", discordant_log_e(w, lo, concentration), sign)]
    if two_sided:
        tests.append(("worse", discordant_log_e(lo, w, concentration), sign))
    if delta is not None:
        tests.append(("not_better", futility_log_e(w, lo, k, delta), ville))
    stop, decision = _earliest(((name, path >= lv) for name, path, lv in tests), n)
    ev = tuple(Evidence(name, tuple(float(v) for v in path[:stop]), lv)
               for name, path, lv in tests)
    return ComparisonDecision(design, decision, stop, n, alpha, two_sided, delta,
                              int(w[stop - 1]) if stop else 0, int(lo[stop - 1]) if stop else 0,
                              ev)


def paired_sequential(y_a: Sequence[float], y_b: Sequence[float], *, alpha: float = 0.05,
                      delta: float | None = None, two_sided: bool = False,
                      budget: int | None = None, calibrate: bool = True,
                      concentration: float = DEFAULT_CONCENTRATION) -> ComparisonDecision:
    """Is B better than A? Anytime-valid, on outcomes of the same seeds (pairs), in run order.

    Decisions: ``better`` (H0: Delta <= 0 rejected by the discordant-pair e-process),
    ``worse`` (two-sided only: H0: Delta >= 0 rejected), ``not_better`` (with ``delta``:
    H0: Delta >= delta rejected, i.e. B is not better by delta), ``undecided``. One-sided,
    each test runs at alpha; the nulls of "better" (Delta <= 0) and "not_better"
    (Delta >= delta) are disjoint, so the reported decision is wrong with probability at most
    alpha. Two-sided, each of the three runs at alpha/2: for any Delta at most two of them
    can be wrong, so again at most alpha.
    """
    a, b = _binary(y_a, "y_a"), _binary(y_b, "y_b")
    if a.size != b.size:
        raise RobosafeError(f"paired outcomes need equal lengths, got {a.size} and {b.size}")
    if not a.size:
        raise RobosafeError("no pairs to test")
    return compare_sequential(b - a, alpha=alpha, delta=delta, two_sided=two_sided,
                              budget=budget, concentration=concentration, calibrate=calibrate)


def unpaired_sequential(y_a: Sequence[float], y_b: Sequence[float], *, alpha: float = 0.05,
                        delta: float | None = None, two_sided: bool = False,
                        budget: int | None = None, calibrate: bool = True,
                        concentration: float = DEFAULT_CONCENTRATION) -> ComparisonDecision:
    """:func:`paired_sequential` for runs that share no seeds: A's i-th episode is paired with
    B's i-th (both in run order; the longer run's surplus waits for its partner).

    For independent Bernoulli outcomes, d = Y_B - Y_A has mean p_B - p_A, and a discordant pair
    is won by B with probability p_B (1-p_A) / (p_B (1-p_A) + p_A (1-p_B)), which is <= 1/2
    exactly when p_B <= p_A: every e-process of the paired test keeps its guarantee. Without
    the positive correlation shared seeds give, fewer pairs are concordant, so it needs more
    episodes than the paired test on the same policies.
    """
    a, b = _binary(y_a, "y_a"), _binary(y_b, "y_b")
    m = min(a.size, b.size)
    if not m:
        raise RobosafeError("both runs need at least one episode")
    return compare_sequential(b[:m] - a[:m], alpha=alpha, delta=delta, two_sided=two_sided,
                              budget=budget, concentration=concentration, design="unpaired",
                              calibrate=calibrate)


def proportion_sequential(y: Sequence[float], *, alpha: float = 0.05,
                          target: float | None = None, width: float | None = None,
                          budget: int | None = None) -> ProportionDecision:
    """One policy's rate against ``target`` and/or until the interval is ``width`` wide, from
    its 0/1 outcomes in run order (the beta-binomial confidence sequence, uniform prior).

    ``above`` / ``below``: the rate is above / below the target, each wrong with probability
    at most alpha (the sequence misses the true rate at some episode with probability at most
    alpha); ``width_reached``: the interval is narrow enough, wherever it lies.
    """
    alpha = check_alpha(alpha)
    if target is None and width is None:
        raise RobosafeError("give a target rate, a width, or both")
    if target is not None and not 0.0 < float(target) < 1.0:
        raise RobosafeError(f"target must be in (0, 1), got {target!r}")
    if width is not None and not 0.0 < float(width) < 1.0:
        raise RobosafeError(f"width must be in (0, 1), got {width!r}")
    x = _binary(y, "y")
    if not x.size:
        raise RobosafeError("no episodes to test")
    n = _budget(x.size, budget)
    x = x[:n]
    s = np.cumsum(x)
    k = np.arange(1, n + 1)
    lo, hi = beta_binomial_cs(s, k, alpha)
    # the running intersection: still a confidence sequence, and never wider
    lo, hi = np.maximum.accumulate(lo), np.minimum.accumulate(hi)
    candidates = []
    if target is not None:
        candidates += [("above", lo > target), ("below", hi < target)]
    if width is not None:
        candidates.append(("width_reached", hi - lo <= width))
    stop, decision = _earliest(candidates, n)
    return ProportionDecision(decision, stop, n, alpha, target, width, int(s[stop - 1]),
                              tuple(float(v) for v in lo[:stop]),
                              tuple(float(v) for v in hi[:stop]))


def multi_sequential(pairs: Mapping[str, tuple[Sequence[float], Sequence[float]]], *,
                     alpha: float = 0.05, delta: float | None = None, two_sided: bool = False,
                     budget: int | None = None, paired: bool = True, calibrate: bool = True,
                     concentration: float = DEFAULT_CONCENTRATION) -> MultiDecision:
    """Several metrics (e.g. success and safe) of the same policies at once, each tested at
    alpha / m (Bonferroni): every metric's decision holds, all together, with probability
    >= 1 - alpha."""
    alpha = check_alpha(alpha)
    if not pairs:
        raise RobosafeError("no metrics to test")
    each = alpha / len(pairs)
    test = paired_sequential if paired else unpaired_sequential
    return combine(alpha, {m: test(a, b, alpha=each, delta=delta, two_sided=two_sided,
                                   budget=budget, calibrate=calibrate,
                                   concentration=concentration)
                           for m, (a, b) in pairs.items()})


def combine(alpha: float, results: Mapping[str, ComparisonDecision | ProportionDecision]
            ) -> MultiDecision:
    """Metrics tested at alpha / m each, as one decision: decided when every one is, after the
    last of them (a metric decided earlier keeps its decision)."""
    res = dict(results)
    episodes = (max(r.episodes for r in res.values()) if all(r.decided for r in res.values())
                else max(r.available for r in res.values()))
    return MultiDecision(alpha, alpha / len(res), episodes, res)


def pair_probabilities(p_a: float, p_b: float, rho: float) -> tuple[float, float, float, float]:
    """(p11, p10, p01, p00) of a pair of Bernoulli outcomes (A, B) with rates ``p_a``, ``p_b``
    and Pearson correlation ``rho`` (p10: B succeeds, A fails). An error if no such pair
    exists (rho too large for unequal rates)."""
    p11 = p_a * p_b + rho * math.sqrt(p_a * (1 - p_a) * p_b * (1 - p_b))
    cells = (p11, p_b - p11, p_a - p11, 1.0 - p_a - p_b + p11)
    if min(cells) < -1e-12:
        raise RobosafeError(f"no pair of Bernoulli({p_a:g}), Bernoulli({p_b:g}) outcomes has "
                            f"correlation {rho:g}")
    return tuple(max(c, 0.0) for c in cells)  # type: ignore[return-value]


# --- exact checks -------------------------------------------------------------------------------

def paired_crossing_probability(test: str, p_win: float, p_loss: float, budget: int, *,
                                alpha: float = 0.05, delta: float | None = None,
                                two_sided: bool = False, calibrated: bool = False,
                                concentration: float = DEFAULT_CONCENTRATION) -> float:
    """The exact probability that the paired test's ``test`` e-process (better, worse or
    not_better) crosses its threshold at some pair up to ``budget``, when each pair is won by
    B with probability ``p_win``, by A with ``p_loss``, and concordant otherwise.

    Dynamic programming over (wins, losses) after each pair, removing the mass that has
    crossed: every path is counted, so this is P(sup_{n <= budget} E_n >= threshold), which
    bounds the probability of that wrong decision at any stopping time up to the budget.
    """
    alpha = check_alpha(alpha)
    level = math.log((2.0 if two_sided else 1.0) / alpha)
    if calibrated and test != "not_better":
        # the threshold compare_sequential uses when this budget was fixed in advance
        level = calibrated_log_threshold(int(budget), alpha / (2.0 if two_sided else 1.0),
                                         concentration)
    p_tie = 1.0 - p_win - p_loss
    if min(p_win, p_loss, p_tie) < -1e-12:
        raise RobosafeError("pair probabilities must be nonnegative and sum to at most 1")
    N = int(budget)
    prob = np.zeros((N + 1, N + 1))
    prob[0, 0] = 1.0
    w, lo = np.meshgrid(np.arange(N + 1), np.arange(N + 1), indexing="ij")
    crossed = 0.0
    for n in range(1, N + 1):
        nxt = p_tie * prob
        nxt[1:, :] += p_win * prob[:-1, :]
        nxt[:, 1:] += p_loss * prob[:, :-1]
        if test == "better":
            hit = discordant_log_e(w, lo, concentration) >= level
        elif test == "worse":
            hit = discordant_log_e(lo, w, concentration) >= level
        elif test == "not_better":
            if delta is None:
                raise RobosafeError("not_better needs delta")
            hit = futility_log_e(w, lo, n, _check_delta(delta)) >= level
        else:
            raise RobosafeError(f"unknown test {test!r}")
        hit &= (w + lo) <= n
        crossed += float(nxt[hit].sum())
        nxt[hit] = 0.0
        prob = nxt
    return crossed


def proportion_miscoverage_probability(p: float, budget: int, alpha: float = 0.05) -> float:
    """The exact probability that the beta-binomial confidence sequence misses ``p`` at some
    episode up to ``budget`` (dynamic programming over the success count, absorbing the paths
    that have missed). It bounds the chance of a wrong ``above`` / ``below`` at any stop."""
    alpha = check_alpha(alpha)
    level = math.log(1.0 / alpha)
    N = int(budget)
    prob = np.zeros(N + 1)
    prob[0] = 1.0
    s = np.arange(N + 1)
    missed = 0.0
    for n in range(1, N + 1):
        nxt = (1.0 - p) * prob
        nxt[1:] += p * prob[:-1]
        # p is outside CS_n exactly when M_n(p) >= 1/alpha
        hit = (s <= n) & (beta_binomial_log_e(s, n, p) >= level)
        missed += float(nxt[hit].sum())
        nxt[hit] = 0.0
        prob = nxt
    return missed
