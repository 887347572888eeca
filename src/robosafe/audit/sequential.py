"""When could an evaluation have stopped? The anytime-valid tests of
:mod:`robosafe.stats.sequential` applied to existing outcome tables, in the order their
episodes were run.

Inputs are robosafe outcome CSVs (DESIGN.md columns; ``success`` and/or ``safe``) or run
directories. The order is part of the data: the tests are valid for outcomes revealed in an
order fixed before they were seen.

* ``rows``: the file's row order (a CSV written as episodes finished, or by hand in run order).
* ``episode``: by ``episode_idx`` (the seed order), then suite, task and instance: the order a
  run's seeds were scheduled. A run directory has no row order of its own (its outcomes.csv is
  sorted by cell, and parallel workers finish in an order that depends on the outcomes:
  failures run to the horizon), so it is read in this order.

Pairs join on (suite, task_id, instance_id), as every paired statistic does; rows of one table
with no partner in the other are left out and counted (a new policy stopped early has fewer
rows than its baseline). Rows whose metric is empty (an unscored episode) or that crashed
(``error_type`` set) take no part, as in the report, and are counted.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robosafe.errors import RobosafeError
from robosafe.stats.ordered import (
    METRICS,
    OrderedOutcomes,
    check_metric_order,
    order_records,
    pair_in_order,
)
from robosafe.stats.sequential import (
    DEFAULT_CONCENTRATION,
    ComparisonDecision,
    MultiDecision,
    ProportionDecision,
    check_alpha,
    combine,
    paired_sequential,
    proportion_sequential,
    unpaired_sequential,
)
from robosafe.textio import csv_reader

__all__ = ["OrderedOutcomes", "pair_in_order", "read_ordered", "sequential_audit"]


def _records(path: Path) -> tuple[list[tuple[str, Mapping[str, Any]]], bool]:
    """(where, row) of a CSV or a run directory, and whether the rows have an order."""
    if path.is_dir():
        from robosafe.runner.rundir import open_run

        run = open_run(path)
        return [(str(p), row) for p, row in zip(
            sorted((run.path / "outcomes").glob("*.json")), run.outcomes(), strict=True)], False
    with csv_reader(path, "outcome table") as reader:
        try:
            if reader.fieldnames is None:
                raise RobosafeError(f"{path}: empty file, expected a CSV header")
            reader.fieldnames = [f.strip() for f in reader.fieldnames]
            rows = [(f"{path}:{reader.line_num}", rec) for rec in reader]
        except (UnicodeDecodeError, csv.Error) as exc:
            raise RobosafeError(f"{path}: not a readable UTF-8 CSV near line "
                                f"{reader.line_num + 1} ({exc})") from None
    return rows, True


def read_ordered(path: str | Path, metric: str, order: str = "auto") -> OrderedOutcomes:
    """A table's outcomes for ``metric`` in run order (see the module docstring); a table
    whose order cannot be known is an error."""
    check_metric_order(metric, order)
    p = Path(path)
    records, has_rows = _records(p)
    return order_records(str(p), records, has_rows, metric, order)


@dataclass(frozen=True)
class MetricAudit:
    """One metric's sequential test on the tables, with what was left out."""

    metric: str
    result: ComparisonDecision | ProportionDecision
    dropped_a: int
    dropped_b: int
    unmatched_a: int
    unmatched_b: int

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, **self.result.to_dict(), "dropped_a": self.dropped_a,
                "dropped_b": self.dropped_b, "unmatched_a": self.unmatched_a,
                "unmatched_b": self.unmatched_b}


@dataclass(frozen=True)
class SequentialAudit:
    """``audit sequential``: per metric, when the evaluation could have stopped and what it
    would have decided. With one metric the JSON's top level is that metric's result (at
    least ``decision`` and ``episodes``); with several, ``decision`` is ``decided`` when every
    metric is, ``episodes`` when the last one was, and each metric is in ``metrics``
    (tested at alpha / m)."""

    source_a: str
    source_b: str | None
    test: str  # "paired", "unpaired" or "target"
    order: str
    alpha: float
    metrics: tuple[MetricAudit, ...]

    @property
    def joint(self) -> MultiDecision:
        return combine(self.alpha, {m.metric: m.result for m in self.metrics})

    def to_dict(self) -> dict[str, Any]:
        head = {"source_a": self.source_a, "source_b": self.source_b, "test": self.test,
                "order": self.order}
        if len(self.metrics) == 1:
            return {**head, **self.metrics[0].to_dict()}
        j = self.joint
        return {**head, "decision": "decided" if j.decided else "undecided",
                "episodes": j.episodes, "alpha": self.alpha, "alpha_each": j.alpha_each,
                "metrics": {m.metric: m.to_dict() for m in self.metrics}}


def _unique(metrics: Iterable[str]) -> tuple[str, ...]:
    out = tuple(dict.fromkeys(metrics))
    if not out:
        raise RobosafeError("give at least one --metric")
    for m in out:
        if m not in METRICS:
            raise RobosafeError(f"unknown metric {m!r} (choose from {', '.join(METRICS)})")
    return out


def sequential_audit(a: str | Path, b: str | Path | None = None, *,
                     metrics: Sequence[str] = ("success",), alpha: float = 0.05,
                     delta: float | None = None, target: float | None = None,
                     width: float | None = None, two_sided: bool = False,
                     budget: int | None = None, order: str = "auto", unpaired: bool = False,
                     concentration: float = DEFAULT_CONCENTRATION) -> SequentialAudit:
    """Apply the sequential tests to one table (``target`` / ``width``) or two (B against A),
    for each metric at alpha / m."""
    alpha = check_alpha(alpha)
    ms = _unique(metrics)
    each = alpha / len(ms)
    one = b is None
    if one and target is None and width is None:
        raise RobosafeError("one table needs --target or --width; two tables compare B with A")
    if not one and (target is not None or width is not None):
        raise RobosafeError("--target and --width apply to one table; give only A")
    if budget is not None and (isinstance(budget, bool) or budget < 1):
        raise RobosafeError(f"--budget must be a positive number of pairs, got {budget!r}")
    out = []
    used_order = order
    for m in ms:
        ta = read_ordered(a, m, order)
        used_order = ta.order
        if one:
            res = proportion_sequential(ta.values, alpha=each, target=target, width=width,
                                        budget=budget) if ta.values else _no_rows(ta)
            out.append(MetricAudit(m, res, ta.dropped, 0, 0, 0))
            continue
        tb = read_ordered(b, m, order)
        if unpaired:
            if not ta.values or not tb.values:
                _no_rows(ta if not ta.values else tb)
            ya, yb = list(ta.values), list(tb.values)
            res = unpaired_sequential(ya, yb, alpha=each, delta=delta, two_sided=two_sided,
                                      budget=budget, concentration=concentration)
            both = min(len(ya), len(yb))  # the longer run's surplus has no partner
            ua, ub = len(ya) - both, len(yb) - both
            out.append(MetricAudit(m, res, ta.dropped, tb.dropped, ua, ub))
            continue
        ya, yb, ua, ub = pair_in_order(ta, tb)
        res = paired_sequential(ya, yb, alpha=each, delta=delta, two_sided=two_sided,
                                budget=budget, concentration=concentration)
        out.append(MetricAudit(m, res, ta.dropped, tb.dropped, ua, ub))
    test = "target" if one else ("unpaired" if unpaired else "paired")
    return SequentialAudit(str(a), None if one else str(b), test, used_order, alpha, tuple(out))


def _no_rows(t: OrderedOutcomes):
    raise RobosafeError(f"{t.source}: no rows with a known {t.metric}")


def describe(m: MetricAudit, test: str) -> str:
    """One line: the decision, when, and what it rests on."""
    r = m.result
    if isinstance(r, ProportionDecision):
        lo, hi = (r.lower[-1], r.upper[-1]) if r.lower else (0.0, 1.0)
        what = (f"{r.decision} the target {r.target:g}" if r.decision in ("above", "below")
                else f"known to within {r.width:g}" if r.decision == "width_reached"
                else "undecided")
        when = (f"after {r.episodes} of {r.available} episodes" if r.decided
                else f"after all {r.available} episodes")
        return (f"{m.metric}: {what} {when}: {r.successes}/{r.episodes}, interval "
                f"[{lo:.3f}, {hi:.3f}] (alpha={r.alpha:g}, valid at any stop)")
    what = {"better": "B better than A", "worse": "B worse than A",
            "not_better": f"B not better than A by {r.delta}",
            "undecided": "undecided"}[r.decision]
    unit = "pairs" if test == "paired" else "episode pairs (unpaired)"
    when = (f"after {r.episodes} of {r.available} {unit}; {r.saved} not needed" if r.decided
            else f"after all {r.available} {unit}")
    last = ", ".join(f"{e.name} {math.exp(e.log_e[-1]):.3g} ({math.exp(e.log_threshold):.3g})"
                     for e in r.evidence if e.log_e)
    return (f"{m.metric}: {what} {when} (discordant: B won {r.wins_b}, A won {r.wins_a}; "
            f"e-value (threshold): {last}; alpha={r.alpha:g}"
            f"{' two-sided' if r.two_sided else ''})")
