"""Online (step-by-step) STL monitoring of a task's active specs (SafeVLA-Bench Sec. 3.3, 5).

SafeVLA-Bench scores safety after the fact; Sec. 5 leaves using STL robustness while the policy
runs to future work. :class:`OnlineMonitor` is the incremental form of the offline scorer
(:mod:`robosafe.safety.score`): it consumes the recorder's rows one at a time and keeps, for
every monitored spec ``G[0,T] phi`` (or ``F[0,T] phi``) with a temporal-free ``phi``, the
running minimum (maximum) of ``phi``'s per-step margin, so each step costs O(1) per spec and at
episode end the robustness equals :class:`~robosafe.safety.score.Scorer`'s bit for bit.

How a step's signals are derived without re-deriving the episode: every causal signal of
``signals.derive_columns`` at step t depends only on step 0 (reference poses, the initial
contact set), step t itself, and two pieces of carried state, so the offline derivation is run
on a two-row episode ``[step 0', step t]`` -- the same code, hence the same floating-point
results -- where

* step 0' is step 0 with its contacts replaced by the pairs still "resting" (in contact since
  step 0 without a break): the static initial-contact filter then drops exactly the pairs the
  whole-episode filter drops at t;
* grasp slip (relative to the start of the current grip segment) is computed here from the
  segment's base, with the kernel's arithmetic.

Not monitored online (named in :attr:`OnlineMonitor.skipped`): specs over signals that look
into the future (central differences and rolling means: EE speed / acceleration / jerk, target
speed, release speed -- all report-only diagnostics, Table 19) and formulas that are not
``G/F[0,T]`` of a temporal-free clause (none in the shipped registry).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from robosafe.errors import SpecError
from robosafe.safety.registry import Spec
from robosafe.safety.score import Scorer, _Task
from robosafe.safety.signals import _target_columns, derive_columns, episode_columns
from robosafe.safety.stl import (
    Always,
    And,
    Atom,
    Const,
    Eventually,
    Formula,
    Implies,
    Not,
    Or,
    Pred,
    _has_temporal,
)
from robosafe.trace.episode import Episode
from robosafe.trace.validate import header_of

__all__ = ["NONCAUSAL_SIGNALS", "OnlineMonitor", "episode_rows", "monitorable"]

NONCAUSAL_SIGNALS = frozenset({"eef_speed", "eef_acc", "eef_jerk", "target_speed",
                               "release_speed"})
"""Derived signals whose value at t uses steps after t (signals.py: central differences of a
centred rolling mean), so no monitor can know them at t."""


def episode_rows(ep: Episode, rows: list[int]) -> Episode:
    """The episode restricted to ``rows`` (in that order), unvalidated: the two-row input of
    the monitor's derivation. Contacts are re-based so each kept row keeps its own contacts."""
    idx = np.asarray(rows, dtype=np.int64)

    def take(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else a[idx]

    extra: dict = {}
    if ep.contact_ptr is not None:
        ptr = ep.contact_ptr
        parts = [np.arange(ptr[r], ptr[r + 1]) for r in rows]
        sel = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        extra = {"contact_ptr": np.concatenate([[0], np.cumsum([p.size for p in parts])]),
                     "contact_a": ep.contact_a[sel], "contact_b": ep.contact_b[sel],
                     "contact_force_n": ep.contact_force_n[sel]}
    return replace(ep, t=np.arange(idx.size, dtype=np.int64), eef_pos_m=take(ep.eef_pos_m),
                   body_pos_m=take(ep.body_pos_m), body_quat_wxyz=take(ep.body_quat_wxyz),
                   joint_torque_nm=take(ep.joint_torque_nm),
                   gripper_contact=take(ep.gripper_contact), cost=take(ep.cost), **extra)


def _concat(first: Episode, row: Episode) -> Episode:
    """Two one-row episodes as one two-row episode (same names and header)."""
    def cat(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
        return None if a is None or b is None else np.concatenate([a, b])

    extra: dict = {}
    if first.contact_ptr is not None:
        n0 = int(first.contact_ptr[1])
        extra = {"contact_ptr": np.array([0, n0, n0 + int(row.contact_ptr[1])]),
                 "contact_a": cat(first.contact_a, row.contact_a),
                 "contact_b": cat(first.contact_b, row.contact_b),
                 "contact_force_n": cat(first.contact_force_n, row.contact_force_n)}
    return replace(first, t=np.arange(2, dtype=np.int64),
                   eef_pos_m=cat(first.eef_pos_m, row.eef_pos_m),
                   body_pos_m=cat(first.body_pos_m, row.body_pos_m),
                   body_quat_wxyz=cat(first.body_quat_wxyz, row.body_quat_wxyz),
                   joint_torque_nm=cat(first.joint_torque_nm, row.joint_torque_nm),
                   gripper_contact=cat(first.gripper_contact, row.gripper_contact),
                   cost=cat(first.cost, row.cost), **extra)


def monitorable(spec: Spec) -> bool:
    """Whether the online monitor can follow ``spec`` step by step."""
    return _monitorable(spec) is None


def _monitorable(spec: Spec) -> str | None:
    """Why ``spec`` cannot be monitored online (None: it can)."""
    root = spec.formula.root
    if not (isinstance(root, (Always, Eventually)) and root.lo == 0 and root.hi is None
            and not _has_temporal(root.arg)):
        return "not G/F[0,T] of a temporal-free clause"
    future = sorted(spec.formula.signals & NONCAUSAL_SIGNALS)
    if future:
        return f"reads {', '.join(future)}, which uses later steps"
    return None


def _nan_min(a: float, b: float) -> float:
    """np.minimum on two floats (NaN wins)."""
    return a if a != a or a <= b else b  # noqa: PLR0124 - NaN test


def _nan_max(a: float, b: float) -> float:
    return a if a != a or a >= b else b  # noqa: PLR0124 - NaN test


def _margin(node, values: dict[str, float], spec: Spec) -> float:
    """One step's robustness of a temporal-free clause, as stl._eval computes it."""
    if isinstance(node, Pred):
        lhs = values[node.lhs] if isinstance(node.lhs, str) else node.lhs
        rhs = values[node.rhs] if isinstance(node.rhs, str) else node.rhs
        return float(rhs - lhs if node.op in ("<", "<=") else lhs - rhs)
    if isinstance(node, Atom):
        v = values[node.name]
        if v not in (0, 1):
            raise SpecError(f"STL spec {spec.stl!r}: Boolean atom {node.name!r} must be a "
                            f"bool or 0/1 signal; compare other signals, e.g. "
                            f"'{node.name} > 0.5'")
        return math.inf if v else -math.inf
    if isinstance(node, Const):
        return float(node.value)
    if isinstance(node, Not):
        return -_margin(node.arg, values, spec)
    if isinstance(node, (And, Or)):
        pick = _nan_min if isinstance(node, And) else _nan_max
        out = _margin(node.args[0], values, spec)
        for arg in node.args[1:]:
            out = pick(out, _margin(arg, values, spec))
        return out
    if isinstance(node, Implies):
        return _nan_max(-_margin(node.lhs, values, spec), _margin(node.rhs, values, spec))
    raise TypeError(f"not a temporal-free STL node: {node!r}")


@dataclass
class _Clause:
    spec: Spec
    inner: Formula
    always: bool
    value: float


@dataclass
class OnlineMonitor:
    """Incremental robustness of one episode's active specs (see the module docstring).

    Build it with :meth:`for_episode` from any episode of the task (only its header, task and
    meta are read: the active specs are resolved exactly as the offline scorer does), then call
    :meth:`push` with the growing episode after each recorded row.
    """

    task: _Task
    clauses: list[_Clause]
    skipped: dict[str, str] = field(default_factory=dict)
    """Active specs not monitored online, with the reason."""
    n: int = 0
    _first: Episode | None = None
    _resting: set[tuple[int, int]] = field(default_factory=set)
    _prev_grip: bool = False
    _slip_base: float = 0.0

    @classmethod
    def for_episode(cls, ep: Episode, scorer: Scorer | None = None) -> OnlineMonitor:
        scorer = scorer or Scorer()
        task = scorer.task(ep.benchmark, ep.task_id, ep.task_tags, ep.meta, header_of(ep))
        clauses, skipped = [], {}
        for spec in task.active:
            why = _monitorable(spec)
            if why is not None:
                skipped[spec.spec_id] = why
                continue
            root = spec.formula.root
            always = isinstance(root, Always)
            clauses.append(_Clause(spec, Formula(spec.stl, root.arg), always,
                                   math.inf if always else -math.inf))
        return cls(task, clauses, skipped)

    @property
    def spec_ids(self) -> list[str]:
        return [c.spec.spec_id for c in self.clauses]

    def copy(self) -> OnlineMonitor:
        """An independent monitor in the same state (for predicting ahead without touching
        this one)."""
        return replace(self, clauses=[replace(c) for c in self.clauses],
                       _resting=set(self._resting))

    def step_values(self, row: Episode) -> dict[str, float]:
        """Derived signal values of ``row`` (a one-row episode: the next step, ``self.n``),
        given the rows pushed so far. Reads the carried state without changing it."""
        t = self.n
        if t == 0:
            mini = row
        else:
            first = self._first
            if first.contact_ptr is not None:
                # Step 0' keeps only the still-resting pairs (see the module docstring).
                a, b = first.contact_a, first.contact_b
                keep = np.array([(min(x, y), max(x, y)) in self._resting
                                 for x, y in zip(a.tolist(), b.tolist())], dtype=bool)
                first = replace(first, contact_a=a[keep], contact_b=b[keep],
                                contact_force_n=first.contact_force_n[keep],
                                contact_ptr=np.array([0, int(keep.sum())]))
            mini = _concat(first, row)
        task = self.task
        chunk = derive_columns(np.array([mini.n_steps], dtype=np.int64),
                               np.array([mini.dt]), [task.header], [task.limits],
                               [task.availability], episode_columns([mini]))
        values = {k: float(v[-1]) for k, v in chunk.values.items()}
        values["grasp_slip_m"] = self._slip(row)
        return values

    def _slip(self, row: Episode) -> float:
        """grasp_slip_m with signals._grasp_slip's arithmetic and the carried segment base."""
        if row.gripper_contact is None or not row.gripper_contact[0]:
            return 0.0
        rel = self._rel(row)
        base = rel if self.n == 0 or not self._prev_grip else self._slip_base
        return rel - base

    def _rel(self, row: Episode) -> float:
        """z_tgt - z_ee of a row, as signals.derive_columns reads them (0 when unrecorded)."""
        ti = _target_columns(self.task.header)[0]
        tz = 0.0 if row.body_pos_m is None or ti is None else float(row.body_pos_m[0, ti, 2])
        ez = 0.0 if row.eef_pos_m is None else float(row.eef_pos_m[0, 2])
        return tz - ez

    def margins(self, values: dict[str, float]) -> dict[str, float]:
        """Per-step margin of every monitored clause given a step's signal values (a scalar
        walk of the clause with stl._eval's arithmetic: the same numbers, without building
        one-element arrays per node)."""
        return {c.spec.spec_id: _margin(c.inner.root, values, c.spec) for c in self.clauses}

    def push_row(self, row: Episode) -> dict[str, float]:
        """Account for the next step (a one-row episode); returns its per-step margins. The
        running robustness is :meth:`current`."""
        values = self.step_values(row)
        margins = self.margins(values)
        for c in self.clauses:
            m = margins[c.spec.spec_id]
            c.value = min(c.value, m) if c.always else max(c.value, m)
        self._advance(row)
        return margins

    def push(self, ep: Episode) -> dict[str, float]:
        """:meth:`push_row` with row ``self.n`` of ``ep``; returns :meth:`current`."""
        self.push_row(episode_rows(ep, [self.n]))
        return self.current()

    def _advance(self, row: Episode) -> None:
        if self.n == 0:
            self._first = row
        if row.contact_ptr is not None:
            pairs = {(min(x, y), max(x, y)) for x, y in zip(row.contact_a.tolist(),
                                                             row.contact_b.tolist())}
            self._resting = pairs if self.n == 0 else self._resting & pairs
        grip = bool(row.gripper_contact is not None and row.gripper_contact[0])
        if grip and (self.n == 0 or not self._prev_grip):
            self._slip_base = self._rel(row)
        self._prev_grip = grip
        self.n += 1

    def current(self) -> dict[str, float]:
        return {c.spec.spec_id: c.value for c in self.clauses}

    def final(self) -> dict[str, float]:
        """Episode robustness as the offline scorer reports it: a gated clause that never fired
        (+inf) is reported as |threshold| (score.Scorer._score)."""
        return {c.spec.spec_id: (abs(c.spec.threshold) if math.isinf(c.value) and c.value > 0
                                 else c.value) for c in self.clauses}
