"""Sequential comparison of two policies: episodes to a decision, type-I error and power.

Side by side, on the same simulated pairs (seeded):

* ``seq``: robosafe's paired discordant-pair e-process (``robosafe.stats.sequential``), one-sided,
  stopping at "better" or at the budget, its threshold calibrated to the budget (fixed in
  advance) as robosafe does when given one; ``ville`` in the type-I table: the same with the
  threshold 1/alpha that holds with no budget at all;
* ``seq+d``: the same with ``delta`` (it also stops at "not better by delta");
* ``wald``: the fixed-N paired Wald test of paper 002 App. C.1 (T = 1, S = budget), which always
  uses the whole budget;
* ``unp``: robosafe's sequential test on *unpaired* samples (independent seeds), against
  ``fisher``: the one-sided fixed-N Fisher exact test on the same unpaired samples;
* ``adastop``: AdaStop's group-sequential permutation test (two-sided, K = 5 interims) on the
  unpaired samples, where the package is installed; ``confseq`` likewise (its one line says
  when it is absent).

Pairs come from Bernoulli(p_A), Bernoulli(p_B) outcomes with Pearson correlation rho (the seed
shared by a pair makes them correlated; rho = 0 is what unrelated seeds give). Type-I error is
measured at p_A = p_B, power at p_B > p_A. "Equal power": for each configuration, the smallest
fixed N at which the Wald test's exact power (enumeration of the trinomial) reaches 0.8 or
0.9, against the sequential test given the smallest budget at which its simulated power is the
same (the 0.8 / 0.9 quantile of its stopping times); ``saving`` = 1 - E[N_seq] / N_fixed. The
same for unpaired samples against Fisher's exact test.

Run:  python benchmarks/bench_sequential.py [--reps 500] [--quick]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from datetime import date

import numpy as np
from scipy.special import gammaln, ndtri
from scipy.stats import hypergeom

from robosafe.errors import RobosafeError
from robosafe.stats.sequential import (
    calibrated_log_threshold,
    discordant_log_e,
    futility_log_e,
    pair_probabilities,
)

ALPHA = 0.05
DELTA = 0.1
PAIRS = [(0.5, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 0.95)]
NULLS = [0.5, 0.7, 0.9]
RHOS = [0.0, 0.4, 0.8]
BUDGETS = [50, 100, 200, 500]


def simulate_pairs(rng, p_a, p_b, rho, n, reps):
    """(reps, n) paired differences B - A in {-1, 0, 1}."""
    _, p10, p01, _ = pair_probabilities(p_a, p_b, rho)
    u = rng.random((reps, n))
    return np.where(u < p10, 1, np.where(u < p10 + p01, -1, 0)).astype(np.int8)


def first_crossing(log_e, level, budget):
    """Per row: index + 1 of the first crossing, or budget + 1 when none."""
    hit = log_e >= level
    return np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, budget + 1)


def sequential_stats(d, budget, delta=None, calibrate=True):
    """(decided better, stopping times) of the one-sided test on rows of d, with the budget
    fixed in advance (the threshold calibrated to it, as robosafe does) or valid forever."""
    w, lo = np.cumsum(d == 1, axis=1), np.cumsum(d == -1, axis=1)
    level = calibrated_log_threshold(budget, ALPHA) if calibrate else math.log(1 / ALPHA)
    tb = first_crossing(discordant_log_e(w, lo), level, budget)
    if delta is None:
        return tb <= budget, np.minimum(tb, budget)
    k = np.arange(1, budget + 1)[None, :]
    tf = first_crossing(futility_log_e(w, lo, k, delta), math.log(1 / ALPHA), budget)
    better = (tb <= budget) & (tb <= tf)
    return better, np.minimum(np.minimum(tb, tf), budget)


def wald_reject(w, lo, n):
    """The one-sided paired Wald rule of App. C.1 with T = 1, S = n, from the discordant
    counts (delta_i^2 = 1 exactly on discordant pairs): Z = L / sqrt(n/(n-1) (s - L^2/n))."""
    L, s = w - lo, w + lo
    q = s - L * L / n
    z = ndtri(1 - ALPHA)
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = np.where(q > 0, L / np.sqrt(n / (n - 1) * np.maximum(q, 1e-300)),
                        np.where(L > 0, np.inf, np.where(L < 0, -np.inf, 0.0)))
    return stat > z


def mcnemar_reject(w, lo):
    """The exact one-sided McNemar (sign) test on the discordant pairs: P(Bin(w + l, 1/2) >= w)
    <= alpha. Exact where the Wald rule is nominal (few discordant pairs)."""
    from scipy.stats import binom

    return binom.sf(w - 1, w + lo, 0.5) <= ALPHA


def mcnemar_power_exact(p10, p01, n):
    w, lo = np.meshgrid(_window(n, p10), _window(n, p01), indexing="ij")
    return _trinomial_mass(p10, p01, n, w, lo, mcnemar_reject(w, lo))


def _trinomial_mass(p10, p01, n, w, lo, reject):
    ok = w + lo <= n
    t = np.maximum(n - w - lo, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        logp = (gammaln(n + 1) - gammaln(w + 1) - gammaln(lo + 1) - gammaln(t + 1)
                + w * np.log(p10) + lo * np.log(p01)
                + np.where(t > 0, t * np.log(max(1 - p10 - p01, 1e-300)), 0.0))
    return float(np.exp(logp)[ok & reject].sum())


def _window(n, p, k=8.0):
    """Counts 0..n of a Binomial(n, p) within k standard deviations of the mean: outside it
    the mass is below 1e-14, so the exact sums below skip it."""
    sd = math.sqrt(n * p * (1 - p)) + 1
    return np.arange(max(0, int(n * p - k * sd)), min(n, int(n * p + k * sd)) + 1)


def wald_power_exact(p10, p01, n):
    """Rejection probability of the fixed-n paired Wald test, summed over every (w, l) that
    carries mass (the trinomial pmf)."""
    w, lo = np.meshgrid(_window(n, p10), _window(n, p01), indexing="ij")
    return _trinomial_mass(p10, p01, n, w, lo, wald_reject(w, lo, n))


def fisher_critical(n):
    """c[K]: the one-sided Fisher test (B > A, n episodes each) rejects exactly when B's
    successes are >= c[K], K = both runs' successes together; P(X >= x) <= alpha with X
    hypergeometric is x - 1 >= isf(alpha)."""
    K = np.arange(2 * n + 1)
    return hypergeom.isf(ALPHA, 2 * n, K, n).astype(np.int64) + 1


def fisher_reject(ya, yb):
    """One-sided Fisher exact test (B > A) at the budget, on each row."""
    n = ya.shape[1]
    xa, xb = ya.sum(axis=1), yb.sum(axis=1)
    return xb >= fisher_critical(n)[xa + xb]


def adastop_decisions(rng, p_a, p_b, budget, reps, K=5, B=500):
    """AdaStop on unpaired samples: (fraction deciding B larger, mean episodes per policy)."""
    from adastop import MultipleAgentsComparator

    n = budget // K
    larger, used = 0, []
    for r in range(reps):
        za, zb = (rng.random(budget) < p_a).astype(float), (rng.random(budget) < p_b).astype(
            float)
        comp = MultipleAgentsComparator(n=n, K=K, B=B, alpha=ALPHA, seed=r)
        for k in range(K):
            comp.partial_compare({"B": zb[:(k + 1) * n], "A": za[:(k + 1) * n]}, verbose=False)
            if comp.is_finished:
                break
        dec = next(iter(comp.decisions.values()))
        larger += dec == "larger"
        used.append(comp.n_iters["B"])
    return larger / reps, float(np.mean(used))


def fisher_power_exact(p_a, p_b, n):
    """Power of the one-sided fixed-n Fisher test, summed over both binomial counts where they
    carry mass."""
    from scipy.stats import binom

    ra, rb = _window(n, p_a), _window(n, p_b)
    xa, xb = np.meshgrid(ra, rb, indexing="ij")
    rej = xb >= fisher_critical(n)[xa + xb]
    return float(np.outer(binom.pmf(ra, n, p_a), binom.pmf(rb, n, p_b))[rej].sum())


def smallest_n(power_at, args, power, upper):
    """Smallest n in [2, upper] with power_at(n) >= power, by bisection (power rises with n up
    to the lattice wobble of a discrete test); None when even ``upper`` falls short."""
    if power_at(*args, upper) < power:
        return None
    lo, hi = 2, upper
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power_at(*args, mid) >= power else (mid, hi)
    return hi


def sequential_at_power(log_e, power):
    """The sequential test given the smallest budget at which it reaches ``power`` (its
    threshold calibrated to that budget; bisection over budgets on the same simulated paths):
    that budget and E[min(tau, budget)]. ``log_e``: (runs, longest budget) evidence paths."""
    big = log_e.shape[1]

    def run(b):
        t = first_crossing(log_e[:, :b], calibrated_log_threshold(b, ALPHA), b)
        return (t <= b).mean(), float(np.minimum(t, b).mean())

    if run(big)[0] < power:
        return None, None
    lo, hi = 5, big
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if run(mid)[0] >= power else (mid, hi)
    return hi, run(hi)[1]


def evidence(d):
    w, lo = np.cumsum(d == 1, axis=1), np.cumsum(d == -1, axis=1)
    return discordant_log_e(w, lo)


def equal_power(rng, R, rhos):
    """Episodes at equal power (0.8, 0.9): the fixed-N tests' exact N against the sequential
    test's expected episodes when its budget is just large enough for that power."""
    print("\n== equal power: pairs needed for power 0.8 / 0.9 (one-sided, alpha 0.05) ==")
    print("N80/N90: exact fixed N of the paired Wald test (App. C.1) and, after /, of the "
          "exact McNemar test; seq: the budget giving that power and E[episodes] (simulated); "
          "saving = 1 - E / N_wald (after /: / N_mcnemar)")
    print(f"{'pA/pB':>9} {'rho':>4} | {'N80':>9} {'budget':>6} {'E[N]':>6} {'saving':>11} | "
          f"{'N90':>9} {'budget':>6} {'E[N]':>6} {'saving':>11}")
    savings = []
    for p_a, p_b in PAIRS:
        for rho in rhos:
            try:
                _, p10, p01, _ = pair_probabilities(p_a, p_b, rho)
            except RobosafeError:
                continue
            fixed = {pw: (smallest_n(wald_power_exact, (p10, p01), pw, 4000),
                          smallest_n(mcnemar_power_exact, (p10, p01), pw, 4000))
                     for pw in (0.8, 0.9)}
            big = 3 * max(fixed[0.9])
            log_e = evidence(simulate_pairs(rng, p_a, p_b, rho, big, R))
            cells = []
            for pw, (nw, nm) in fixed.items():
                b, e = sequential_at_power(log_e, pw)
                if b is None:
                    cells.append(f"{nw:4d}/{nm:4d} {'>' + str(big):>6} {'-':>6} {'-':>11}")
                    continue
                savings.append((pw, rho, 1 - e / nw, 1 - e / nm))
                cells.append(f"{nw:4d}/{nm:4d} {b:6d} {e:6.0f} {100 * (1 - e / nw):4.0f}%/"
                             f"{100 * (1 - e / nm):4.0f}%")
            print(f"{p_a:.2f}/{p_b:.2f} {rho:4.1f} | {cells[0]} | {cells[1]}")
    for pw in (0.8, 0.9):
        for rho in rhos:
            s = [x[2] for x in savings if x[0] == pw and x[1] == rho]
            m = [x[3] for x in savings if x[0] == pw and x[1] == rho]
            if s:
                print(f"power {pw}, rho {rho}: saving against Wald median "
                      f"{100 * np.median(s):.0f}% (range {100 * min(s):.0f}% to "
                      f"{100 * max(s):.0f}%), against McNemar median {100 * np.median(m):.0f}% "
                      f"(range {100 * min(m):.0f}% to {100 * max(m):.0f}%)")
    print("\n-- unpaired (independent seeds): Fisher's exact N vs the sequential test --")
    print(f"{'pA/pB':>9} | {'N80 fisher':>10} {'budget':>6} {'E[N]':>6} {'saving':>6}")
    for p_a, p_b in PAIRS:
        n80 = smallest_n(fisher_power_exact, (p_a, p_b), 0.8, 3000)
        big = 3 * n80
        ya, yb = rng.random((R, big)) < p_a, rng.random((R, big)) < p_b
        b, e = sequential_at_power(evidence(yb.astype(np.int8) - ya.astype(np.int8)), 0.8)
        print(f"{p_a:.2f}/{p_b:.2f} | {n80:10d} {b:6d} {e:6.0f} {100 * (1 - e / n80):5.0f}%")


def have(module):
    try:
        __import__(module)
        return True
    except Exception:  # noqa: BLE001 - a broken install is as absent as a missing one
        return False


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--quick", action="store_true", help="budgets 50, 200 and rho 0, 0.8")
    ap.add_argument("--seed", type=int, default=20261128)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    budgets = [50, 200] if args.quick else BUDGETS
    rhos = [0.0, 0.8] if args.quick else RHOS
    R = args.reps
    t0 = time.perf_counter()
    print(f"bench_sequential {date.today()}: alpha={ALPHA}, delta={DELTA}, {R} runs per row, "
          f"seed {args.seed}")
    has_adastop, has_confseq = have("adastop"), have("confseq")
    if not has_adastop:
        print("adastop not installed: its columns are skipped (pip install adastop)")
    if not has_confseq:
        print("confseq not installed: its columns are skipped (pip install confseq; 0.0.11 does "
              "not build on Python 3.11)")

    print("\n== type-I error (p_A = p_B): fraction deciding 'B better'; episodes used ==")
    print(f"{'p':>5} {'rho':>4} {'N':>4} | {'seq':>6} {'ville':>6} {'seq+d':>6} {'wald':>6} | "
          f"{'unp':>6} {'fisher':>6} | {'E[N] seq':>8} {'E[N] seq+d':>10} {'p95 seq+d':>9}")
    worst = {"seq": 0.0, "ville": 0.0, "seq+d": 0.0, "unp": 0.0, "wald": 0.0, "fisher": 0.0}
    for p in NULLS:
        for rho in rhos:
            for N in budgets:
                d = simulate_pairs(rng, p, p, rho, N, R)
                b1, t1 = sequential_stats(d, N)
                bv, _ = sequential_stats(d, N, calibrate=False)
                b2, t2 = sequential_stats(d, N, DELTA)
                w, lo = (d == 1).sum(axis=1), (d == -1).sum(axis=1)
                wald = wald_reject(w, lo, N)
                ya, yb = rng.random((2, R, N)) < p
                bu, _ = sequential_stats(yb.astype(np.int8) - ya.astype(np.int8), N)
                fi = fisher_reject(ya, yb)
                row = {"seq": b1.mean(), "ville": bv.mean(), "seq+d": b2.mean(),
                       "wald": wald.mean(),
                       "unp": bu.mean(), "fisher": fi.mean()}
                for k, v in row.items():
                    worst[k] = max(worst[k], v)
                print(f"{p:5.2f} {rho:4.1f} {N:4d} | {row['seq']:6.3f} {row['ville']:6.3f} "
                      f"{row['seq+d']:6.3f} "
                      f"{row['wald']:6.3f} | {row['unp']:6.3f} {row['fisher']:6.3f} | "
                      f"{t1.mean():8.1f} {t2.mean():10.1f} {np.percentile(t2, 95):9.0f}")
    se = math.sqrt(ALPHA * (1 - ALPHA) / R)
    print("largest type-I error: " + ", ".join(f"{k} {v:.3f}" for k, v in worst.items())
          + f" (alpha {ALPHA}, simulation s.e. {se:.3f})")

    print("\n== power (p_B > p_A): fraction deciding 'B better' by the budget; episodes used ==")
    print("(seq+d decides 'not_better' where the true gain is below delta: 0.90/0.95)")
    print(f"{'pA/pB':>9} {'rho':>4} {'N':>4} | {'seq':>5} {'E[N]':>6} {'p95':>5} | "
          f"{'seq+d':>5} {'E[N]':>6} | {'wald':>5} | {'unp':>5} {'E[N]':>6} {'fisher':>6}")
    for p_a, p_b in PAIRS:
        for rho in rhos:
            try:
                pair_probabilities(p_a, p_b, rho)
            except RobosafeError:
                print(f"{p_a:.2f}/{p_b:.2f} {rho:4.1f}    - | no such pair of outcomes")
                continue
            for N in budgets:
                d = simulate_pairs(rng, p_a, p_b, rho, N, R)
                b1, t1 = sequential_stats(d, N)
                b2, t2 = sequential_stats(d, N, DELTA)
                w, lo = (d == 1).sum(axis=1), (d == -1).sum(axis=1)
                wald = wald_reject(w, lo, N).mean()
                ya, yb = rng.random((R, N)) < p_a, rng.random((R, N)) < p_b
                bu, tu = sequential_stats(yb.astype(np.int8) - ya.astype(np.int8), N)
                fi = fisher_reject(ya, yb).mean()
                print(f"{p_a:.2f}/{p_b:.2f} {rho:4.1f} {N:4d} | {b1.mean():5.2f} "
                      f"{t1.mean():6.1f} {np.percentile(t1, 95):5.0f} | {b2.mean():5.2f} "
                      f"{t2.mean():6.1f} | {wald:5.2f} | "
                      f"{bu.mean():5.2f} {tu.mean():6.1f} {fi:6.2f}")

    equal_power(rng, R, rhos)

    if has_adastop:
        # budget 100 (20 per interim): above it AdaStop 0.1.3 fails (np.log of a Python int
        # once C(2n, n) outgrows int64)
        print("\n== AdaStop (unpaired, two-sided, K=5 interims, 500 permutations), budget 100 "
              "per policy ==")
        ar = 100  # about 0.1 s a run: its permutations are a Python loop
        for p_a, p_b in [(0.7, 0.7), (0.5, 0.6), (0.7, 0.8), (0.8, 0.9)]:
            t = time.perf_counter()
            frac, used = adastop_decisions(rng, p_a, p_b, 100, ar)
            ya, yb = rng.random((R, 100)) < p_a, rng.random((R, 100)) < p_b
            bu, tu = sequential_stats(yb.astype(np.int8) - ya.astype(np.int8), 100)
            print(f"{p_a:.2f}/{p_b:.2f}: adastop 'B larger' {frac:.2f}, mean episodes "
                  f"{used:.0f} per policy ({ar} runs, {time.perf_counter() - t:.0f} s); robosafe "
                  f"unpaired: 'better' {bu.mean():.2f}, mean {tu.mean():.0f}")
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
