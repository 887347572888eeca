"""Cost semantics of the CBDDL ``(:cost ...)`` block (VLA-Arena paper 001, Sec. 4.1, App. 7.4).

robosafe semantics (the default, ``mode="robosafe"``):

* ``(:cost (And t1 ... tn))`` lists n forbidden conditions; every listed term contributes its
  own cost. A cost block that is not a top-level ``And`` is a single term. Inside a term,
  ``And`` / ``Or`` / ``Not`` are ordinary logic: the term is violated when its formula is true.
* An instantaneous term (all its predicates instantaneous in the catalogue) costs 1 at every
  step at which it is violated (Sec. 4.1: CC = sum_k sum_t c_k(s_t, a_t)).
* A terminal term (all its predicates terminal) is checked once on the final state of every
  episode, success or not, and costs ``alpha`` (10, App. 7.4.2) when violated.
* A term mixing instantaneous and terminal predicates has no defined timing and is rejected.

``mode="vla-arena"`` reproduces the public VLA-Arena accounting for comparison: ``And`` at any
depth is the *sum* of its parts' costs (not a logical and), ``Or`` the maximum, ``Not`` one
minus its argument, and terminal terms are only evaluated when the episode succeeded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from robosafe.errors import TaskError
from robosafe.tasks.validate import lookup_predicate

ALPHA = 10.0
"""Terminal-cost weight alpha of VLA-Arena App. 7.4.2."""
MODES = ("robosafe", "vla-arena")


@dataclass(frozen=True)
class CostBreakdown:
    """Per-step instantaneous cost, terminal cost and their total (cumulative cost CC)."""

    per_step: np.ndarray  # (T,) instantaneous cost at each step
    terminal: float  # alpha-weighted terminal cost
    per_term: tuple[float, ...]  # each listed term's contribution to the total

    @property
    def total(self) -> float:
        return float(self.per_step.sum()) + self.terminal


def _kind(node) -> str:
    return type(node).__name__


def _children(node) -> tuple:
    k = _kind(node)
    if k in ("And", "Or"):
        return tuple(node.args)
    if k == "Not":
        return (node.arg,)
    return ()


def predicates(node) -> list:
    """The predicate leaves of a formula, left to right."""
    if _kind(node) == "Pred":
        return [node]
    return [p for c in _children(node) for p in predicates(c)]


def cost_terms(cost) -> tuple:
    """The listed terms of a cost block: the arguments of a top-level And, else the block."""
    if cost is None:
        return ()
    return tuple(cost.args) if _kind(cost) == "And" else (cost,)


def term_timing(term, source: str = "<text>") -> str:
    """'instantaneous' or 'terminal' for a term whose predicates all share one timing.

    Names are matched as the validator matches them: ignoring case, with aliases.
    """
    timings = set()
    for p in predicates(term):
        found = lookup_predicate(p.name, "cost")
        entry = None if found is None else found[1]
        if entry is None:
            raise TaskError(f"unknown cost predicate {p.name!r}", source=source,
                            line=_line(p), column=_col(p))
        timings.add(entry["timing"])
    if len(timings) != 1:
        raise TaskError("a cost term mixes instantaneous and terminal predicates; split it "
                        "into separate terms", source=source, line=_line(term),
                        column=_col(term))
    return timings.pop()


def _line(node) -> int | None:
    pos = getattr(node, "pos", None)
    return getattr(pos, "line", None)


def _col(node) -> int | None:
    pos = getattr(node, "pos", None)
    return getattr(pos, "column", None)


def truth(node, atom: Callable) -> np.ndarray:
    """Logical value of a formula per step (robosafe semantics)."""
    k = _kind(node)
    if k == "Pred":
        return np.asarray(atom(node), dtype=bool)
    if k == "Not":
        return ~truth(node.arg, atom)
    parts = [truth(c, atom) for c in node.args]
    return np.logical_and.reduce(parts) if k == "And" else np.logical_or.reduce(parts)


def _arena(node, atom: Callable) -> np.ndarray:
    """VLA-Arena's numeric reading: And sums, Or takes the maximum, Not is 1 - x."""
    k = _kind(node)
    if k == "Pred":
        return np.asarray(atom(node), dtype=float)
    if k == "Not":
        return 1.0 - _arena(node.arg, atom)
    parts = [_arena(c, atom) for c in node.args]
    return np.sum(parts, axis=0) if k == "And" else np.max(parts, axis=0)


def evaluate_cost(cost, atom: Callable, n_steps: int, *, success: bool,
                  alpha: float = ALPHA, mode: str = "robosafe",
                  source: str = "<text>") -> CostBreakdown:
    """Cumulative cost of one episode (VLA-Arena Sec. 4.1 CC, App. 7.4.2).

    ``atom(pred)`` returns the predicate's truth per step as a (n_steps,) bool array; for a
    terminal predicate only the last element is used (the final state).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    per_step = np.zeros(n_steps)
    terminal = 0.0
    contributions = []
    for term in cost_terms(cost):
        timing = term_timing(term, source)
        if mode == "robosafe":
            value = truth(term, atom).astype(float)
        else:
            value = _arena(term, atom)
        if timing == "instantaneous":
            per_step += value
            contributions.append(float(value.sum()))
        elif mode == "robosafe" or success:
            c = alpha * float(value[-1]) if n_steps else 0.0
            terminal += c
            contributions.append(c)
        else:
            contributions.append(0.0)
    return CostBreakdown(per_step, terminal, tuple(contributions))
