"""Comparing two runs' episode outcomes on one metric (benchmark audit paper 002, Sec. 4, App. C).

``compare_rows`` is the paired task-stratified Wald test (App. C.1) when the runs hold the same
instances (joined on suite, task_id, instance_id), else the stratified two-sample test (App.
C.6). ``results compare``, ``score`` and the HTML report's shield comparison all build their
tests here, so they agree on the same runs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from robosafe.errors import RobosafeError
from robosafe.stats.intervals import z_value
from robosafe.stats.outcomes import Paired, paired_design
from robosafe.stats.wald import WaldResult, independent_wald_test, paired_wald_test

METRICS = ("success", "safe")
DESIGNS = ("auto", "paired", "independent")


def jsonable(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, datetime):
        return v.isoformat()
    return v


@dataclass(frozen=True)
class Comparison:
    """Run B against run A on one metric (benchmark audit paper 002, Sec. 4 and App. C).

    ``design`` is ``paired`` (App. C.1: both runs on the same instances, joined on suite,
    task_id, instance_id; the design must hold exactly, as in ``audit paired``) or
    ``independent`` (App. C.6: stratified two-sample test, T tasks x S samples per task; tasks
    with more usable rows are balanced down to the smallest S by dropping the highest-sorting
    episodes, and ``dropped_a`` / ``dropped_b`` count every usable row left out). ``difference`` is Delta-hat = mean_B - mean_A (task-stratified),
    ``ci`` the two-sided Wald interval Delta-hat +- z_{(1+c)/2} sqrt(V-hat), ``pvalue`` the
    one-sided p of H0: Delta <= 0 against H1: B better than A (the paper's test), ``reject``
    its decision at ``alpha``. ``wald`` is the stats result, unchanged.

    ``degenerate`` says why the interval and Z mean nothing when the variance estimate V-hat is
    0 (every task's differences are constant: the interval collapses to a point and Z is
    +-inf or 0); ``None`` otherwise.
    """

    run_a: str
    run_b: str
    metric: str
    design: str
    tasks: int
    samples: int
    n: int
    n_paired: int
    n_a: int
    n_b: int
    dropped_a: int
    dropped_b: int
    mean_a: float
    mean_b: float
    difference: float
    ci: list[float]
    confidence: float
    statistic: float
    pvalue: float
    alpha: float
    reject: bool
    wald: WaldResult = field(repr=False)
    design_note: str = ""  # why "auto" did not pair (the first row that breaks the design)
    degenerate: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("wald")
        return jsonable(d)


def _group(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], list[Mapping]]:
    by: dict[tuple[str, str], list[Mapping]] = defaultdict(list)
    for r in rows:
        by[(r["suite"], r["task_id"])].append(r)
    return by


def _paired_design(a: list[Mapping], b: list[Mapping], run_a: str, run_b: str
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The one paired design of ``stats.outcomes.paired_design`` (what ``audit paired`` uses)."""
    def rows(rs: list[Mapping], run: str) -> list[Paired]:
        return [Paired((r["suite"], r["task_id"], r["instance_id"]), r["y"],
                       f"run {run!r} episode {r['episode_id']!r}") for r in rs]

    ya, yb = paired_design(rows(a, run_a), rows(b, run_b), source_a=f"run {run_a!r}",
                           source_b=f"run {run_b!r}")
    return ya.astype(np.int64), yb.astype(np.int64)


def independent_design(a: list[Mapping], b: list[Mapping], names: str
                       ) -> tuple[np.ndarray, np.ndarray]:
    """(T, S) arrays of the stratified two-sample design (App. C.6) from rows with ``suite``,
    ``task_id``, ``y``, ``episode_idx`` and ``episode_id``: the tasks both hold, each balanced
    down to the smallest S by leaving out the highest-sorting episodes."""
    ga, gb = _group(a), _group(b)
    tasks = sorted(ga.keys() & gb.keys())
    if not tasks:
        raise RobosafeError(f"{names} share no (suite, task_id); there is nothing to compare")
    S = min(min(len(ga[t]), len(gb[t])) for t in tasks)
    if S < 2:
        raise RobosafeError(f"{names}: the stratified Wald test needs at least 2 episodes per "
                            f"task in both runs (paper 002 App. C.1, S >= 2); the smallest "
                            f"shared task has {S}")

    def order(r: Mapping) -> tuple:
        return (r["episode_idx"] is None, r["episode_idx"] or 0, r["episode_id"])

    ya = np.array([[r["y"] for r in sorted(ga[t], key=order)[:S]] for t in tasks], np.int64)
    yb = np.array([[r["y"] for r in sorted(gb[t], key=order)[:S]] for t in tasks], np.int64)
    return ya, yb


def degenerate_reason(ya: np.ndarray, design: str, metric: str) -> str:
    """Why V-hat is 0, in the data's own terms (paper 002 App. C.1: V-hat sums per-task
    variances of the paired differences, App. C.6 of each run's outcomes)."""
    if design == "paired":
        what = "every task's paired differences B - A are all the same"
    else:
        what = "each run's outcomes are constant within every task"
    T, S = ya.shape
    return (f"no interval or test: the variance estimate is 0 ({what} for {metric} over "
            f"T={T} x S={S}), so the Wald interval would be a point and Z infinite or 0")


def wald_interval(wald: WaldResult, confidence: float = 0.95) -> list[float]:
    """The two-sided Wald interval of Delta-hat: estimate +- z_{(1+c)/2} sqrt(V-hat)
    (paper 002 App. C.1's V-hat, or C.6's for independent samples)."""
    half = z_value(confidence) * wald.stderr
    return [wald.estimate - half, wald.estimate + half]


def compare_rows(rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]], *,
                 metric: str = "success", design: str = "auto", alpha: float = 0.05,
                 confidence: float = 0.95, run_a: str = "A", run_b: str = "B") -> Comparison:
    """Compare two runs' episode rows (dicts with the ``episodes`` columns) on ``metric``.

    ``design="auto"`` uses the paired task-stratified Wald test (paper 002 App. C.1) when the
    rows form its design exactly (the same instances in both runs, each once, the same S per
    task), else the two-sample test (App. C.6) and says why in ``design_note``.
    Rows whose metric is NULL (crashed episodes for ``safe``) take no part.
    """
    if metric not in METRICS:
        raise RobosafeError(f"unknown metric {metric!r} (choose from {', '.join(METRICS)})")
    if design not in DESIGNS:
        raise RobosafeError(f"unknown design {design!r} (choose from {', '.join(DESIGNS)})")
    a = [{**r, "y": int(r[metric])} for r in rows_a if r.get(metric) is not None]
    b = [{**r, "y": int(r[metric])} for r in rows_b if r.get(metric) is not None]
    for rows, name in ((a, run_a), (b, run_b)):
        if not rows:
            raise RobosafeError(f"run {name!r} has no episodes with a known {metric}")
    arrays, note = None, ""
    if design == "paired":
        arrays = _paired_design(a, b, run_a, run_b)
    elif design == "auto":
        try:
            arrays = _paired_design(a, b, run_a, run_b)
        except RobosafeError as exc:
            note = f"not paired: {exc}"
    used = "paired" if arrays is not None else "independent"
    ya, yb = (arrays if arrays is not None
              else independent_design(a, b, f"runs {run_a!r} and {run_b!r}"))
    test = paired_wald_test if used == "paired" else independent_wald_test
    wald = test(ya, yb, R=1, alpha=alpha)
    T, S = ya.shape
    return Comparison(
        degenerate=degenerate_reason(ya, used, metric) if wald.stderr == 0 else None,
        run_a=run_a, run_b=run_b, metric=metric, design=used, tasks=T, samples=S, n=T * S,
        n_paired=T * S if used == "paired" else 0, n_a=len(a), n_b=len(b),
        dropped_a=len(a) - T * S, dropped_b=len(b) - T * S, mean_a=float(ya.mean()),
        mean_b=float(yb.mean()), difference=wald.estimate,
        ci=wald_interval(wald, confidence), confidence=confidence,
        statistic=wald.statistic, pvalue=wald.pvalue, alpha=alpha, reject=wald.reject,
        wald=wald, design_note=note)
