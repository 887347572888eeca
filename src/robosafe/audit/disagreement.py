"""Outcome disagreement between repeated runs of one policy (robosafe's own statistic D).

The benchmark audit's App. B.1 lists "per-episode outcome agreement" among its reproduction
targets (per-episode success or failure labels match, even if hidden states or pixels differ)
but gives no statistic, formula or reported value for it. D is robosafe's own measure of that
target: the mean pairwise disagreement over the instances every run shares,

    D = (1 / C(K, 2)) sum_{j < k} (1 / n) sum_i 1[y_ij != y_ik]
      = (1 / n) sum_i d_i,   d_i = (C(K, 2) - sum_v C(c_iv, 2)) / C(K, 2),

where c_iv counts the runs whose outcome on instance i is v (for binary outcomes with m_i
successes, d_i = m_i (K - m_i) / C(K, 2)). Instances are the independent units (runs of the same
instance are exchangeable), so D's interval is the instance-level percentile bootstrap of the
mean of d_i (the App. E convention of robosafe's other continuous means).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from robosafe.errors import RobosafeError
from robosafe.stats.intervals import Interval, bootstrap_mean_interval
from robosafe.stats.outcomes import OutcomeTable, as_outcome_table, index_outcomes


@dataclass(frozen=True)
class Disagreement:
    """D over the shared instances of K runs, its interval, and every pair's own rate."""

    sources: tuple[str, ...]
    n_shared: int
    n_excluded: tuple[int, ...]  # rows of each run whose instance some other run lacks
    d: float
    ci: Interval
    confidence: float
    pairwise: tuple[tuple[int, int, float], ...]  # (run j, run k, disagreement rate)

    def to_dict(self) -> dict[str, Any]:
        return {"runs": list(self.sources), "n_shared": self.n_shared,
                "n_excluded": list(self.n_excluded), "d": self.d, "d_ci": self.ci.as_list(),
                "confidence": self.confidence,
                "pairwise": [{"a": self.sources[j], "b": self.sources[k], "d": v}
                             for j, k, v in self.pairwise]}


def instance_disagreement(y: np.ndarray) -> np.ndarray:
    """d_i for an (n instances, K runs) outcome matrix: the share of the C(K, 2) run pairs
    whose outcomes on instance i differ."""
    n, k = y.shape
    pairs = k * (k - 1) / 2
    same = np.zeros(n)
    for v in np.unique(y):
        c = (y == v).sum(axis=1)
        same += c * (c - 1) / 2
    return (pairs - same) / pairs


def disagreement(runs: Sequence[OutcomeTable | str | Path | Iterable[Mapping[str, Any]]], *,
                 confidence: float = 0.95, n_boot: int = 10_000, seed: int = 0
                 ) -> Disagreement:
    """robosafe's own D (for App. B.1's per-episode outcome agreement) from K >= 2 outcome
    tables of repeated runs, joined on (suite, task_id, instance_id). Each run must hold an
    instance once; instances missing from any run are left out and counted in ``n_excluded``."""
    if len(runs) < 2:
        raise RobosafeError("disagreement needs at least two runs of the same policy")
    tables = [as_outcome_table(r, f"run {i + 1}") for i, r in enumerate(runs)]
    metrics = {t.metric for t in tables}
    if len(metrics) > 1:
        raise RobosafeError("the runs use different outcome columns ("
                            + ", ".join(f"{t.source}: {t.metric}" for t in tables) + ")")
    index = [index_outcomes(t.rows) for t in tables]
    shared = sorted(set.intersection(*(set(ix) for ix in index)))
    if not shared:
        raise RobosafeError("the runs share no instance (suite, task_id, instance_id); "
                            "disagreement compares runs of the same manifest")
    y = np.array([[ix[key].value for ix in index] for key in shared], dtype=float)
    d_i = instance_disagreement(y)
    pairwise = tuple((j, k, float(np.mean(y[:, j] != y[:, k])))
                     for j, k in combinations(range(len(tables)), 2))
    return Disagreement(tuple(t.source for t in tables), len(shared),
                        tuple(len(ix) - len(shared) for ix in index), float(d_i.mean()),
                        bootstrap_mean_interval(d_i, n_boot=n_boot, seed=seed,
                                                confidence=confidence), confidence, pairwise)
