"""Outcome rows in the order their episodes ran, and pairs of two runs' rows in that order:
what the anytime-valid tests of :mod:`robosafe.stats.sequential` read (``robosafe audit
sequential`` from files, ``robosafe run --until`` from the run it is making).

* ``rows``: the list's own order (a CSV written as episodes finished, or by hand in run order).
* ``episode``: by ``episode_idx`` (the seed order), then suite, task and instance
  (:func:`seed_order`): the order a run's seeds were scheduled.

Pairs join on (suite, task_id, instance_id), as every paired statistic does. Rows whose metric
is empty (an unscored episode) or that crashed (``error_type`` set) take no part and are
counted.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from robosafe.errors import RobosafeError

METRICS = ("success", "safe")
ORDERS = ("auto", "rows", "episode")
Key = tuple[str, str, str]


def check_metric_order(metric: str, order: str) -> None:
    if metric not in METRICS:
        raise RobosafeError(f"unknown metric {metric!r} (choose from {', '.join(METRICS)})")
    if order not in ORDERS:
        raise RobosafeError(f"unknown order {order!r} (choose from {', '.join(ORDERS)})")


def seed_order(episode_idx: int, key: Key) -> tuple:
    """The rank of an episode in seed order: its episode index, then (suite, task_id,
    instance_id). The runner schedules ``--until`` runs in this order and the tests read them
    in it."""
    return (episode_idx, *key)


@dataclass(frozen=True)
class OrderedOutcomes:
    """One table's 0/1 outcomes for one metric, in run order. ``dropped`` counts the rows
    left out (metric empty, or a crashed episode); ``order`` is how the order was read."""

    source: str
    metric: str
    order: str
    keys: tuple[Key, ...]
    values: tuple[int, ...]
    where: tuple[str, ...]
    dropped: int


def _bool(text: str, where: str, col: str) -> int | None:
    t = text.strip().lower()
    if not t:
        return None
    if t in ("1", "true", "1.0"):
        return 1
    if t in ("0", "false", "0.0"):
        return 0
    raise RobosafeError(f"{where}: column {col!r}: expected 0 or 1, got {text!r}")


def _text(v: Any) -> str:
    return "" if v is None else str(v).strip()


def order_records(source: str, records: Sequence[tuple[str, Mapping[str, Any]]],
                  has_rows: bool, metric: str, order: str = "auto") -> OrderedOutcomes:
    """Rows already read, (where, row) pairs of ``source``, as one metric's outcomes in run
    order; ``has_rows``: whether the list order is the order they ran (a CSV's, not a run
    directory's). An order that cannot be known is an error."""
    check_metric_order(metric, order)
    p = source
    if not records:
        raise RobosafeError(f"{p}: no outcome rows")
    if order == "auto":
        order = "rows" if has_rows else "episode"
    if order == "rows" and not has_rows:
        raise RobosafeError(f"{p}: unknown order: a run directory does not record the order its "
                            "episodes finished; use --order episode (the seed order)")
    cols = set(records[0][1])
    for col in ("suite", "task_id", "instance_id", metric):
        if col not in cols:
            raise RobosafeError(f"{records[0][0]}: missing column {col!r}")
    rows = []
    for i, (where, rec) in enumerate(records):
        key = tuple(_text(rec.get(c)) for c in ("suite", "task_id", "instance_id"))
        for col, v in zip(("suite", "task_id", "instance_id"), key, strict=True):
            if not v:
                raise RobosafeError(f"{where}: column {col!r}: empty value")
        rank: tuple = (i,)
        if order == "episode":
            ep = _text(rec.get("episode_idx"))
            try:
                rank = seed_order(int(ep), key)
            except ValueError:
                raise RobosafeError(
                    f"{where}: unknown order: episode_idx {ep!r} is not an episode index; "
                    "use --order rows if the file lists episodes in the order they ran"
                    ) from None
        # a crashed episode (error_type) has no judgement of the policy, whatever its row
        # holds (the runner writes success 0): like the report, it is in no denominator
        value = None if _text(rec.get("error_type")) else _bool(_text(rec.get(metric)), where,
                                                                 metric)
        rows.append((rank, key, value, where))
    rows.sort(key=lambda r: r[0])
    seen: dict[Key, str] = {}
    for _, key, _, where in rows:
        if key in seen:
            raise RobosafeError(
                f"{where}: duplicate instance (suite={key[0]!r}, task_id={key[1]!r}, "
                f"instance_id={key[2]!r}), first at {seen[key]}; a sequential test needs one "
                "row per instance")
        seen[key] = where
    kept = [r for r in rows if r[2] is not None]
    return OrderedOutcomes(p, metric, order, tuple(r[1] for r in kept),
                           tuple(r[2] for r in kept), tuple(r[3] for r in kept),
                           len(rows) - len(kept))


def pair_in_order(a: OrderedOutcomes, b: OrderedOutcomes) -> tuple[list[int], list[int], int,
                                                                    int]:
    """The shared instances' outcomes (A's, B's) in their common run order, and how many rows
    of A and of B have no partner. Both tables must list the shared instances in the same
    order: otherwise which pair came first is unknown, and that is an error."""
    ia = {k: i for i, k in enumerate(a.keys)}
    shared = [(ia[k], j) for j, k in enumerate(b.keys) if k in ia]
    if not shared:
        raise RobosafeError(f"{a.source} and {b.source} share no instances (suite, task_id, "
                            f"instance_id) with a known {a.metric}; runs on different seeds "
                            "need --unpaired")
    for (i0, j0), (i1, j1) in itertools.pairwise(shared):
        if i1 < i0:
            raise RobosafeError(
                f"unknown order: {a.where[i1]} comes before {a.where[i0]} but "
                f"{b.where[j0]} before {b.where[j1]}; the two tables ran their shared "
                "instances in different orders (use --order episode for the seed order)")
    return ([a.values[i] for i, _ in shared], [b.values[j] for _, j in shared],
            len(a.keys) - len(shared), len(b.keys) - len(shared))
