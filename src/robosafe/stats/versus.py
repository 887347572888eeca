"""Is B better than A? Two evaluations compared on success, Safety, SBU and cumulative cost.

``robosafe compare`` is built here. Each side is a list of :class:`SideRow` (one episode each,
from a run directory, an outcome CSV or a results-store run; ``runner.sides`` reads them). The
paired design (default) joins the rows on the instance (suite, task_id, instance_id and the
perturbation levels) and keeps the instances both sides finished; every row it leaves out is
counted with its reason. The tests are the ones ``audit paired`` and ``results compare`` use:
the exact paired task-stratified Wald test (benchmark audit paper 002, App. C.1) or, only when
asked, the stratified two-sample test (App. C.6). Cumulative cost is continuous, which those
integer-score tests do not take: it gets intervals only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from robosafe.errors import RobosafeError
from robosafe.stats.compare import degenerate_reason, independent_design, jsonable, wald_interval
from robosafe.stats.intervals import (
    mean_with_ci,
    paired_wald_interval,
    two_sample_wald_interval,
    wilson_interval,
)
from robosafe.stats.outcomes import Paired, paired_design
from robosafe.stats.sequential import (
    ComparisonDecision,
    check_alpha,
    combine,
    paired_sequential,
    unpaired_sequential,
)
from robosafe.stats.wald import WaldResult, independent_wald_test, paired_wald_test

DESIGNS = ("paired", "unpaired")
# (metric, the SideRow field, which way is better). SBU (success but unsafe) and cost are
# harms, so "B better" is B lower there and the one-sided test runs the other way round.
BINARY = (("success", "success", "higher"), ("safety", "safe", "higher"),
          ("sbu", "sbu", "lower"))
COST = ("cumulative_cost", "cost", "lower")
BOOT = 10_000  # bootstrap resamples of the cost intervals (SafeVLA-Bench App. E)


@dataclass(frozen=True)
class SideRow:
    """One episode of one side. ``None`` is unknown: a crashed episode has no judgement, a
    finished one without a scored trace no safety, a source without a cost column no cost."""

    suite: str
    task_id: str
    instance_id: str
    language_level: int
    visual_level: int
    crashed: bool
    success: bool | None
    safe: bool | None
    sbu: bool | None
    cost: float | None
    where: str  # the file (and line) or store row, for error messages
    episode_idx: int | None = None  # the order the run scheduled it (its seed's index)

    @property
    def key(self) -> tuple[str, str, str, int, int]:
        """The instance: two sides' episodes pair when all five agree (the runner's
        instance ids carry the levels already; a hand-written CSV's may not)."""
        return (self.suite, self.task_id, self.instance_id, self.language_level,
                self.visual_level)

    @property
    def label(self) -> str:
        """The instance as one string (the levels only when not 0)."""
        lv = (f" W{self.language_level} V{self.visual_level}"
              if (self.language_level, self.visual_level) != (0, 0) else "")
        return f"{self.instance_id}{lv}"


@dataclass(frozen=True)
class Side:
    """One evaluation as the user named it."""

    name: str  # what the user typed
    kind: str  # "run directory" | "outcome CSV" | "store run"
    rows: tuple[SideRow, ...]


@dataclass(frozen=True)
class LeftOut:
    """Rows of one side that take no part, and why."""

    side: str  # "A" | "B"
    reason: str
    n: int


@dataclass(frozen=True)
class MetricResult:
    """One metric of B against A. ``difference`` is B - A (its interval too) whichever way is
    better; ``pvalue`` / ``reject`` are the one-sided test of "B better" (higher success and
    Safety, lower SBU), None where there is no test (cost, or a design the rows cannot form);
    ``note`` says what was left out for this metric alone and why a figure is missing."""

    metric: str
    better: str  # "higher" | "lower"
    n_a: int
    n_b: int
    tasks: int
    samples: int
    mean_a: float
    mean_b: float
    ci_a: list[float] | None
    ci_b: list[float] | None
    difference: float
    ci: list[float] | None
    interval: str  # how the interval of B - A was formed
    test: str | None
    statistic: float | None
    pvalue: float | None
    reject: bool | None
    note: str = ""


@dataclass(frozen=True)
class Versus:
    """B against A (``robosafe compare``)."""

    a: str
    b: str
    kind_a: str
    kind_b: str
    design: str  # "paired" | "unpaired"
    alpha: float
    confidence: float
    rows_a: int
    rows_b: int
    n_pairs: int  # instances both finished (paired design; 0 unpaired)
    left_out: tuple[LeftOut, ...]
    metrics: tuple[MetricResult, ...]
    not_reported: tuple[str, ...]  # metrics with no figures at all, and why
    sequential: SequentialVersus | None = None  # with --sequential

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["sequential"] = None if self.sequential is None else self.sequential.to_dict()
        return jsonable(d)


def _index(side: Side, name: str) -> dict[tuple, SideRow]:
    out: dict[tuple, SideRow] = {}
    for r in side.rows:
        if r.key in out:
            raise RobosafeError(
                f"{r.where}: instance (suite={r.suite!r}, task_id={r.task_id!r}, "
                f"instance_id={r.label!r}) of {name} appears twice, first at "
                f"{out[r.key].where}; a paired comparison needs one row per instance "
                "(--design unpaired compares repeated instances as independent samples)")
        out[r.key] = r
    return out


def _count(reasons: list[tuple[str, str]]) -> tuple[LeftOut, ...]:
    n: dict[tuple[str, str], int] = defaultdict(int)
    for side, why in reasons:
        n[(side, why)] += 1
    return tuple(LeftOut(s, why, k) for (s, why), k in n.items())


def _balanced(pairs: list[tuple[SideRow, SideRow]]
              ) -> tuple[list[tuple[SideRow, SideRow]], int]:
    """The stratified tests need the same S per task (App. C.1): every task keeps its S
    lowest-sorting instances, S the smallest task's; returns them and how many were dropped."""
    by: dict[tuple[str, str], list[tuple[SideRow, SideRow]]] = defaultdict(list)
    for p in pairs:
        by[p[0].key[:2]].append(p)
    S = min(len(v) for v in by.values())
    kept = [p for t in sorted(by) for p in sorted(by[t], key=lambda p: p[0].key)[:S]]
    return kept, len(pairs) - len(kept)


def _named_interval(ci: list[float]) -> list[float] | None:
    return None if any(np.isnan(ci)) else ci


def _oriented(wald: WaldResult, better: str, confidence: float) -> tuple[float, list[float]]:
    """B - A and its interval from a test run so that its H1 is "B better": for a harm the
    test was of A - B, so both come back negated."""
    lo, hi = wald_interval(wald, confidence)
    if better == "higher":
        return wald.estimate, [lo, hi]
    return -wald.estimate, [-hi, -lo]


def _binary(metric: str, field: str, better: str, ya: np.ndarray, yb: np.ndarray, *,
            design: str, alpha: float, confidence: float, note: str) -> MetricResult:
    """Wilson intervals of each side and the stratified Wald test of B over A on (T, S)
    arrays, one-sided towards "B better"."""
    paired = design == "paired"
    test: Callable[..., WaldResult] = paired_wald_test if paired else independent_wald_test
    wald = test(ya, yb, alpha=alpha) if better == "higher" else test(yb, ya, alpha=alpha)
    diff, ci = _oriented(wald, better, confidence)
    T, S = ya.shape
    if wald.stderr == 0:
        note = "; ".join(x for x in (note, degenerate_reason(ya, design, metric)) if x)
    n = T * S
    return MetricResult(
        metric=metric, better=better, n_a=n, n_b=n, tasks=T, samples=S,
        mean_a=float(ya.mean()), mean_b=float(yb.mean()),
        ci_a=wilson_interval(int(ya.sum()), n, confidence).as_list(),
        ci_b=wilson_interval(int(yb.sum()), n, confidence).as_list(),
        difference=diff, ci=None if wald.stderr == 0 else ci,
        interval=("paired stratified Wald (App. C.1)" if paired
                  else "stratified two-sample Wald (App. C.6)"),
        test=("exact paired task-stratified Wald test (App. C.1)" if paired
              else "stratified two-sample Wald test for independent samples (App. C.6)"),
        statistic=wald.statistic, pvalue=wald.pvalue, reject=wald.reject, note=note)


def _cost(xa: np.ndarray, xb: np.ndarray, *, paired: bool, confidence: float,
          note: str) -> MetricResult:
    """Mean cumulative cost with each side's bootstrap interval (App. E) and the Wald
    interval of B - A (row-level: paired differences, or two independent samples)."""
    metric, _, better = COST
    mean_a, ci_a = mean_with_ci(xa, n_boot=BOOT, seed=0)
    mean_b, ci_b = mean_with_ci(xb, n_boot=BOOT, seed=0)
    # The audit intervals are of calibration - altered: B first gives B - A.
    iv = (paired_wald_interval(xb, xa, confidence) if paired
          else two_sample_wald_interval(xb, xa, confidence))
    return MetricResult(
        metric=metric, better=better, n_a=len(xa), n_b=len(xb), tasks=0, samples=0,
        mean_a=float(mean_a), mean_b=float(mean_b), ci_a=ci_a, ci_b=ci_b,
        difference=float(xb.mean() - xa.mean()), ci=_named_interval(iv.as_list()),
        interval=("paired row-level Wald (App. A.2)" if paired
                  else "two-sample Wald (App. A.2)"),
        test=None, statistic=None, pvalue=None, reject=None,
        note="; ".join(x for x in (note, ("interval only: cost is continuous and the Wald "
                                   "tests take integer scores")) if x))


def _missing(side: Side, name: str, field: str) -> str | None:
    """Why a whole metric is unreported for ``side`` (no finished row knows it), else None."""
    if any(getattr(r, field) is not None for r in side.rows if not r.crashed):
        return None
    what = {"safe": "safety judgement", "sbu": "safety judgement",
            "cost": "cumulative cost", "success": "success"}[field]
    return f"{name} ({side.name}) has no {what}"


def _pair_all(a: Side, b: Side) -> tuple[list[tuple[SideRow, SideRow]], list[tuple[str, str]]]:
    """The instances both sides finished, and one (side, reason) per row left out."""
    ia, ib = _index(a, "A"), _index(b, "B")
    if not ia.keys() & ib.keys():
        raise RobosafeError(
            f"{a.name} and {b.name} share no instance (suite, task_id, instance_id, levels): "
            "there is nothing to pair (--design unpaired compares them as independent samples)")
    out: list[tuple[str, str]] = []
    pairs = []
    for mine, other, name in ((ia, ib, "A"), (ib, ia, "B")):
        for k, r in mine.items():
            if r.crashed:
                out.append((name, "crashed"))
            elif k not in other:
                out.append((name, "instance not in " + ("B" if name == "A" else "A")))
            elif other[k].crashed:
                out.append((name, "crashed in " + ("B" if name == "A" else "A")))
    for k in sorted(ia.keys() & ib.keys()):
        if not ia[k].crashed and not ib[k].crashed:
            pairs.append((ia[k], ib[k]))
    if not pairs:
        raise RobosafeError(f"{a.name} and {b.name} share no instance that both finished "
                            "(every shared instance crashed on one side)")
    return pairs, out


def _paired_arrays(pairs: list[tuple[SideRow, SideRow]], field: str, a: str, b: str
                   ) -> tuple[np.ndarray, np.ndarray]:
    def rows(i: int) -> list[Paired]:
        return [Paired(p[i].key[:2] + (p[i].label,), float(getattr(p[i], field)), p[i].where)
                for p in pairs]

    return paired_design(rows(0), rows(1), source_a=a, source_b=b)


def _shared_metrics(a: Side, b: Side, skipped: list[str]):
    """(metric, field, better) of each metric both sides report; one a side lacks is named in
    ``skipped`` instead."""
    for metric, field, better in (*BINARY, COST):
        why = _missing(a, "A", field) or _missing(b, "B", field)
        if why:
            skipped.append(f"{metric}: {why}")
            continue
        yield metric, field, better


def _paired_metrics(a: Side, b: Side, pairs: list[tuple[SideRow, SideRow]], *, alpha: float,
                    confidence: float) -> tuple[list[MetricResult], list[str]]:
    results, skipped = [], []
    for metric, field, better in _shared_metrics(a, b, skipped):
        known = [p for p in pairs
                 if getattr(p[0], field) is not None and getattr(p[1], field) is not None]
        unknown = len(pairs) - len(known)
        notes = [f"{unknown} pair(s) without a known {metric} on one side left out"] \
            if unknown else []
        if not known:
            skipped.append(f"{metric}: no shared instance has it on both sides")
            continue
        if field == "cost":
            results.append(_cost(np.array([p[0].cost for p in known]),
                                 np.array([p[1].cost for p in known]), paired=True,
                                 confidence=confidence, note="; ".join(notes)))
            continue
        kept, dropped = _balanced(known)
        if dropped:
            notes.append(f"{dropped} pair(s) left out so every task has the same number of "
                         "instances (the stratified test needs one S)")
        try:
            ya, yb = _paired_arrays(kept, field, a.name, b.name)
        except RobosafeError as err:
            skipped.append(f"{metric}: {err}")
            continue
        results.append(_binary(metric, field, better, ya.astype(np.int64),
                               yb.astype(np.int64), design="paired", alpha=alpha,
                               confidence=confidence, note="; ".join(notes)))
    return results, skipped


def _unpaired_metrics(a: Side, b: Side, *, alpha: float, confidence: float
                      ) -> tuple[list[MetricResult], list[str], list[tuple[str, str]]]:
    finished = {"A": [r for r in a.rows if not r.crashed], "B": [r for r in b.rows
                                                                 if not r.crashed]}
    out = [(name, "crashed") for name, s in (("A", a), ("B", b)) for r in s.rows if r.crashed]
    results, skipped = [], []
    for metric, field, better in _shared_metrics(a, b, skipped):
        ra = [r for r in finished["A"] if getattr(r, field) is not None]
        rb = [r for r in finished["B"] if getattr(r, field) is not None]
        if field == "cost":
            results.append(_cost(np.array([r.cost for r in ra]), np.array([r.cost for r in rb]),
                                 paired=False, confidence=confidence, note=""))
            continue

        def dicts(rows: list[SideRow], fld: str = field) -> list[dict[str, Any]]:
            return [{"suite": r.suite, "task_id": r.task_id, "y": int(getattr(r, fld)),
                     "episode_idx": None, "episode_id": f"{r.instance_id}|{r.label}"}
                    for r in rows]

        try:
            ya, yb = independent_design(dicts(ra), dicts(rb), f"{a.name} and {b.name}")
        except RobosafeError as err:
            skipped.append(f"{metric}: {err}")
            continue
        left = len(ra) - ya.size, len(rb) - yb.size
        note = ("; ".join(f"{n} row(s) of {s} left out (tasks the other side lacks, or "
                          "balancing every task to one S)" for s, n in zip("AB", left) if n))
        results.append(_binary(metric, field, better, ya, yb, design="independent",
                               alpha=alpha, confidence=confidence, note=note))
    return results, skipped, out


def compare_sides(a: Side, b: Side, *, design: str = "paired", alpha: float = 0.05,
                  confidence: float = 0.95, sequential: bool = False) -> Versus:
    """B against A on success, Safety, SBU (and cumulative cost when both sides have it).

    ``paired``: the instances both sides finished; a row of either side that has no finished
    partner is left out and counted (crashed, crashed on the other side, not in the other
    side). ``unpaired``: every finished row, as independent samples per task (App. C.6).
    A pair of sides with no shared instance is an error under the paired design.
    ``sequential`` adds the anytime-valid decision of :func:`sequential_sides`.
    """
    if design not in DESIGNS:
        raise RobosafeError(f"unknown design {design!r} (choose from {', '.join(DESIGNS)})")
    for side, name in ((a, "A"), (b, "B")):
        if not side.rows:
            raise RobosafeError(f"{name} ({side.name}) has no episodes")
    if design == "paired":
        pairs, out = _pair_all(a, b)
        metrics, skipped = _paired_metrics(a, b, pairs, alpha=alpha, confidence=confidence)
        n_pairs = len(pairs)
    else:
        metrics, skipped, out = _unpaired_metrics(a, b, alpha=alpha, confidence=confidence)
        n_pairs = 0
    return Versus(a=a.name, b=b.name, kind_a=a.kind, kind_b=b.kind, design=design,
                  alpha=alpha, confidence=confidence, rows_a=len(a.rows), rows_b=len(b.rows),
                  n_pairs=n_pairs, left_out=_count(out), metrics=tuple(metrics),
                  not_reported=tuple(skipped),
                  sequential=(sequential_sides(a, b, design=design, alpha=alpha)
                              if sequential else None))


def pairs_summary(v: Versus) -> Sequence[str]:
    """The lines that say which rows took part (the text output's header)."""
    lines = [f"A: {v.a} ({v.kind_a}, {v.rows_a} rows)", f"B: {v.b} ({v.kind_b}, {v.rows_b} rows)"]
    if v.design == "paired":
        lines.append(f"paired on {v.n_pairs} instance(s) both finished (suite, task, instance "
                     "id, levels)")
    else:
        lines.append("UNPAIRED: independent samples per task (--design unpaired); the paired "
                     "test is the default")
    for side in ("A", "B"):
        parts = [f"{o.n} {o.reason}" for o in v.left_out if o.side == side]
        if parts:
            lines.append(f"left out of {side}: " + ", ".join(parts))
    return lines


# --- --sequential: when could the evaluation have stopped (stats.sequential)

SEQUENTIAL = (("success", "success"), ("safety", "safe"))


@dataclass(frozen=True)
class SequentialMetric:
    """One metric's anytime-valid decision (``stats.sequential``) over the pairs in run
    order; ``unknown`` counts the pairs (or unpaired rows) without the metric on a side."""

    metric: str
    result: ComparisonDecision
    unknown: int

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, **self.result.to_dict(), "unknown": self.unknown}


@dataclass(frozen=True)
class SequentialVersus:
    """``compare --sequential``: success and Safety tested at alpha / m each (Bonferroni), in
    episode order. ``decision`` is ``decided`` when every metric is; ``episodes`` the pairs
    until the last one was (all of them when one is not)."""

    design: str
    order: str
    alpha: float
    alpha_each: float
    decision: str
    episodes: int
    metrics: tuple[SequentialMetric, ...]

    def to_dict(self) -> dict[str, Any]:
        return jsonable({"design": self.design, "order": self.order, "alpha": self.alpha,
                         "alpha_each": self.alpha_each, "decision": self.decision,
                         "episodes": self.episodes,
                         "metrics": [m.to_dict() for m in self.metrics]})


def _run_order(rows: Sequence[SideRow], name: str) -> None:
    missing = next((r for r in rows if r.episode_idx is None), None)
    if missing is not None:
        raise RobosafeError(
            f"{missing.where}: no episode_idx: --sequential needs the order the episodes ran "
            f"(the tests are valid only in an order fixed before the outcomes were seen); "
            f"`robosafe audit sequential --order rows` reads a CSV of {name} in its row order")


def sequential_sides(a: Side, b: Side, *, design: str = "paired",
                     alpha: float = 0.05) -> SequentialVersus:
    """The anytime-valid comparison of B against A on success and Safety (those both sides
    have), each at alpha / m, in episode order.

    Paired: the pairs both sides finished, ordered by the later of the two episode indices
    (a pair is complete when its second episode has run; both runs schedule their seeds in
    index order), then by instance. Unpaired: each side's finished rows in episode order,
    the i-th of A against the i-th of B (``stats.sequential.unpaired_sequential``).
    """
    alpha = check_alpha(alpha)
    fields = [(m, f) for m, f in SEQUENTIAL
              if not (_missing(a, "A", f) or _missing(b, "B", f))]
    each = alpha / len(fields)
    results: list[SequentialMetric] = []
    if design == "paired":
        pairs, _ = _pair_all(a, b)
        _run_order([p[0] for p in pairs], "A")
        _run_order([p[1] for p in pairs], "B")
        pairs.sort(key=lambda p: (max(p[0].episode_idx, p[1].episode_idx), p[0].key))
        for metric, field in fields:
            known = [p for p in pairs
                     if getattr(p[0], field) is not None and getattr(p[1], field) is not None]
            if not known:
                raise RobosafeError(f"{metric}: no shared instance has it on both sides")
            res = paired_sequential([int(getattr(p[0], field)) for p in known],
                                    [int(getattr(p[1], field)) for p in known], alpha=each)
            results.append(SequentialMetric(metric, res, len(pairs) - len(known)))
    elif design == "unpaired":
        done = {}
        for side, name in ((a, "A"), (b, "B")):
            rows = [r for r in side.rows if not r.crashed]
            _run_order(rows, name)
            done[name] = sorted(rows, key=lambda r: (r.episode_idx, r.key))
        for metric, field in fields:
            ya = [int(getattr(r, field)) for r in done["A"] if getattr(r, field) is not None]
            yb = [int(getattr(r, field)) for r in done["B"] if getattr(r, field) is not None]
            res = unpaired_sequential(ya, yb, alpha=each)
            results.append(SequentialMetric(
                metric, res, len(done["A"]) + len(done["B"]) - len(ya) - len(yb)))
    else:
        raise RobosafeError(f"unknown design {design!r} (choose from {', '.join(DESIGNS)})")
    joint = combine(alpha, {m.metric: m.result for m in results})
    return SequentialVersus(design, "episode index", alpha, joint.alpha_each,
                            "decided" if joint.decided else "undecided", joint.episodes,
                            tuple(results))
