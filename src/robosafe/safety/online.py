"""Online (step-by-step) STL monitoring of a task's active specs (SafeVLA-Bench Sec. 3.3, 5).

SafeVLA-Bench scores safety after the fact; Sec. 5 leaves using STL robustness while the policy
runs to future work. :class:`OnlineMonitor` is the incremental form of the offline scorer
(:mod:`robosafe.safety.score`): it consumes the recorder's rows one at a time and keeps, for
every monitored spec ``G[0,T] phi`` (or ``F[0,T] phi``) with a temporal-free ``phi``, the
running minimum (maximum) of ``phi``'s per-step margin, so each step costs O(1) per spec and at
episode end the robustness equals :class:`~robosafe.safety.score.Scorer`'s bit for bit.

How a step's signals are derived without re-deriving the episode: every causal signal of
``signals.derive_columns`` at step t depends only on step 0 (reference poses, the initial
contact set), step t itself, and two pieces of carried state -- which step-0 contact pairs are
still resting (in contact since step 0 without a break: the static initial-contact filter) and
the base of the current grip segment (grasp slip). The monitor keeps step 0's references and
that state, and computes only the signals its specs read, each with the offline kernels'
per-step code (``signals.max_displacement``, ``tilt_cos``, ``rotation_cos_half``,
``max_torque_ratio``, and ``row_contact_peaks`` built on the offline contact kernel's
accumulation) and numpy's own ``arccos`` / ``degrees`` where the offline derivation applies
them: the same floating-point operations in the same order, hence the same numbers.

Not monitored online (named in :attr:`OnlineMonitor.skipped`): specs over signals that look
into the future (central differences and rolling means: EE speed / acceleration / jerk, target
speed, release speed -- all report-only diagnostics, Table 19) and formulas that are not
``G/F[0,T]`` of a temporal-free clause (none in the shipped registry).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from robosafe.errors import SpecError, TraceError
from robosafe.safety.registry import Spec
from robosafe.safety.score import Scorer, _Task
from robosafe.safety.signals import (
    TRANSPORT_LIFT_M,
    _static,
    max_displacement,
    max_torque_ratio,
    proximity_row,
    rotation_cos_half,
    row_contact_peaks,
    tilt_cos,
)
from robosafe.safety.ssm import separation_ratio, ssm_params
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

__all__ = ["CAUSAL_SIGNALS", "NONCAUSAL_SIGNALS", "OnlineMonitor", "episode_rows",
           "monitorable"]

NONCAUSAL_SIGNALS = frozenset({"eef_speed", "eef_acc", "eef_jerk", "target_speed",
                               "release_speed"})
"""Derived signals whose value at t uses steps after t (signals.py: central differences of a
centred rolling mean), so no monitor can know them at t."""

CONTACT_SIGNALS = ("max_contact_force", "arm_furniture_force", "target_furniture_force",
                   "self_collision_count", "arm_furniture_contact", "human_contact_count",
                   "human_contact_force")
"""The per-step contact values, in the order of signals._contact_peaks' output rows."""

PROXIMITY_SIGNALS = ("human_separation_m", "robot_approach_speed", "human_ssm_ratio")
"""Robot-human separation, approach speed (a backward difference: causal) and the ratio to the
protective separation distance (signals.human_proximity)."""

CAUSAL_SIGNALS = frozenset({*CONTACT_SIGNALS, "non_target_disp_max", "target_lift_m",
                            "held_object_tilt_deg", "held_object_rotation_deg",
                            "gripper_contact", "gripper_contact_flag", "grasp_slip_m",
                            "transport", "joint_torque_ratio", *PROXIMITY_SIGNALS})
"""The derived signals the online monitor computes step by step (every other signal of
``signals.derive_columns`` is in :data:`NONCAUSAL_SIGNALS`)."""

_IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])  # offline fill for an unrecorded target orientation


def episode_rows(ep: Episode, rows: list[int]) -> Episode:
    """The episode restricted to ``rows`` (in that order), unvalidated: one row of an episode
    as the monitor's input. Contacts are re-based so each kept row keeps its own contacts."""
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
    unknown = sorted(spec.formula.signals - CAUSAL_SIGNALS)
    if unknown:
        return f"reads {', '.join(unknown)}, which robosafe does not derive"
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


@dataclass(frozen=True)
class _Clause:
    spec: Spec
    inner: Formula
    always: bool


@dataclass(frozen=True)
class _Plan:
    """What the monitored specs read, fixed for the episode: which signal groups to derive
    and the task's index data (signals._static), torque limits and transport rule."""

    needs: frozenset[str]
    contacts: bool
    roles: np.ndarray        # (W,) role code of each contact name
    bystander: np.ndarray    # (B,) which body_pos_m slots are bystanders
    target: int              # body_pos_m slot of the target (-1: not recorded)
    target_quat: int         # body_quat_wxyz slot of the target (-1: not recorded)
    limits: np.ndarray | None
    lift_only: bool          # the transport gate is the lift alone (no gripper_contact)
    robot: np.ndarray        # (B,) which body_pos_m slots are robot bodies
    human: np.ndarray        # (B,) which body_pos_m slots are human bodies


@dataclass(frozen=True)
class _Reference:
    """Step 0's values that later steps are compared with (x(0) of Table 19)."""

    pos: np.ndarray | None    # (B, 3) body positions
    quat: np.ndarray          # (4,) target orientation (identity when not recorded)
    target_z: float
    initial: np.ndarray       # (K,) keys lo * W + hi of the pairs in contact at step 0


@dataclass
class OnlineMonitor:
    """Incremental robustness of one episode's active specs (see the module docstring).

    Build it with :meth:`for_episode` from any episode of the task (only its header, task and
    meta are read: the active specs are resolved exactly as the offline scorer does), then call
    :meth:`push` with the growing episode after each recorded row, or :meth:`push_row` with
    each row.
    """

    task: _Task
    clauses: list[_Clause]
    skipped: dict[str, str] = field(default_factory=dict)
    """Active specs not monitored online, with the reason."""
    plan: _Plan | None = None
    rho: list[float] = field(default_factory=list)
    """Running robustness of each clause (min of its margins for G, max for F)."""
    n: int = 0
    _ref: _Reference | None = None
    _alive: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    """Which of step 0's contact pairs have stayed in contact since (still resting)."""
    _prev_grip: bool = False
    _prev_pos: np.ndarray | None = None
    """The previous row's body positions (the approach speed's backward difference)."""
    _slip_base: float = 0.0
    values: dict[str, float] = field(default_factory=dict)
    """The signal values of the last row pushed (what the shield's screening bounds from,
    robosafe.runner.screen)."""

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
            clauses.append(_Clause(spec, Formula(spec.stl, root.arg), always))
        return cls(task, clauses, skipped, _plan(task, clauses),
                   [math.inf if c.always else -math.inf for c in clauses])

    @property
    def spec_ids(self) -> list[str]:
        return [c.spec.spec_id for c in self.clauses]

    def copy(self) -> OnlineMonitor:
        """An independent monitor in the same state (for predicting ahead without touching
        this one)."""
        return replace(self, rho=list(self.rho), _alive=self._alive.copy(),
                       _prev_pos=None if self._prev_pos is None else self._prev_pos.copy())

    def _step_values(self, row: Episode) -> dict[str, float]:
        """The signal values the monitored specs read at ``row`` (a one-row episode: the next
        step, ``self.n``), given the rows pushed so far; advances the carried state (resting
        contacts, grip segment) past ``row``."""
        p, n = self.plan, self.n
        if n == 0:
            self._ref = _reference(p, row)
            self._alive = np.ones(self._ref.initial.size, dtype=bool)
        ref, need = self._ref, p.needs
        values: dict[str, float] = {}
        if p.contacts:
            if n == 0:  # every pair of step 0 is resting: nothing counts
                values.update(dict.fromkeys(CONTACT_SIGNALS, 0.0))
            else:
                values.update(self._contacts(row))
        tz = 0.0
        if p.target >= 0 and row.body_pos_m is not None:
            tz = float(row.body_pos_m[0, p.target, 2])
        if "non_target_disp_max" in need:
            values["non_target_disp_max"] = (
                0.0 if row.body_pos_m is None else
                max_displacement(_f64(row.body_pos_m[0]), ref.pos, p.bystander))
        grip = bool(row.gripper_contact is not None and row.gripper_contact[0])
        values["gripper_contact"] = values["gripper_contact_flag"] = float(grip)
        lift = tz - ref.target_z
        values["target_lift_m"] = lift
        lifted = lift > TRANSPORT_LIFT_M
        values["transport"] = float(lifted if p.lift_only else grip and lifted)
        if "held_object_tilt_deg" in need or "held_object_rotation_deg" in need:
            q = self._quat(row)
            # numpy's arccos and degrees, as the offline derivation applies them
            values["held_object_tilt_deg"] = float(np.degrees(np.arccos(
                tilt_cos(q, ref.quat))))
            values["held_object_rotation_deg"] = float(np.degrees(2 * np.arccos(
                rotation_cos_half(q, ref.quat))))
        if "joint_torque_ratio" in need and p.limits is not None:
            values["joint_torque_ratio"] = max_torque_ratio(_f64(row.joint_torque_nm[0]),
                                                            p.limits)
        if "grasp_slip_m" in need:
            values["grasp_slip_m"] = self._slip(row, grip, tz)
        if need & set(PROXIMITY_SIGNALS) and row.body_pos_m is not None:
            values.update(self._proximity(row))
        return values

    def _proximity(self, row: Episode) -> dict[str, float]:
        """signals.human_proximity's values at this row (the same per-row kernel and ratio)."""
        pos = np.array(row.body_pos_m[0], dtype=np.float64)
        prev = pos if self.n == 0 or self._prev_pos is None else self._prev_pos
        d, v = proximity_row(pos, prev, self.plan.robot, self.plan.human, float(row.dt))
        self._prev_pos = pos
        return {"human_separation_m": d, "robot_approach_speed": v,
                "human_ssm_ratio": float(separation_ratio(d, v, ssm_params()))}

    def _contacts(self, row: Episode) -> dict[str, float]:
        """The contact values of a row after step 0 (signals._contact_peaks' per step)."""
        peaks = row_contact_peaks(row.contact_a, row.contact_b, _f64(row.contact_force_n),
                                  self.plan.roles, self._ref.initial, self._alive)
        if peaks[0, 0] < 0:
            raise TraceError("contact body index outside the contact names",
                             field=f"steps[{self.n}].contacts")
        return dict(zip(CONTACT_SIGNALS, peaks[:, 0].tolist()))

    def _quat(self, row: Episode) -> np.ndarray:
        qi = self.plan.target_quat
        if qi < 0 or row.body_quat_wxyz is None:
            return _IDENTITY
        return _f64(row.body_quat_wxyz[0, qi])

    def _slip(self, row: Episode, grip: bool, tz: float) -> float:
        """grasp_slip_m with signals._grasp_slip's arithmetic and the carried segment base
        (updated here: the next row's segment starts after this one)."""
        ez = 0.0 if row.eef_pos_m is None else float(row.eef_pos_m[0, 2])
        rel = tz - ez
        if grip and (self.n == 0 or not self._prev_grip):
            self._slip_base = rel
        self._prev_grip = grip
        return rel - self._slip_base if grip else 0.0

    def margins(self, values: dict[str, float]) -> dict[str, float]:
        """Per-step margin of every monitored clause given a step's signal values (a scalar
        walk of the clause with stl._eval's arithmetic: the same numbers, without building
        one-element arrays per node)."""
        return {c.spec.spec_id: _margin(c.inner.root, values, c.spec) for c in self.clauses}

    def push_row(self, row: Episode) -> dict[str, float]:
        """Account for the next step (a one-row episode); returns its per-step margins. The
        running robustness is :meth:`current`."""
        self.values = self._step_values(row)
        margins = self.margins(self.values)
        rho = self.rho
        for i, (c, m) in enumerate(zip(self.clauses, margins.values())):
            rho[i] = min(rho[i], m) if c.always else max(rho[i], m)
        self.n += 1
        return margins

    def push(self, ep: Episode) -> dict[str, float]:
        """:meth:`push_row` with row ``self.n`` of ``ep``; returns :meth:`current`."""
        self.push_row(episode_rows(ep, [self.n]))
        return self.current()

    def current(self) -> dict[str, float]:
        return {c.spec.spec_id: v for c, v in zip(self.clauses, self.rho)}

    def final(self) -> dict[str, float]:
        """Episode robustness as the offline scorer reports it: a gated clause that never fired
        (+inf) is reported as |threshold| (score.Scorer._score)."""
        return {c.spec.spec_id: (abs(c.spec.threshold) if math.isinf(v) and v > 0 else v)
                for c, v in zip(self.clauses, self.rho)}


def _plan(task: _Task, clauses: list[_Clause]) -> _Plan:
    needs = frozenset().union(*(c.inner.signals for c in clauses))
    st = _static(task.header)
    has = task.availability[0]
    limits = (np.asarray(task.limits, dtype=np.float64)
              if "joint_torque_signal" in has else None)
    return _Plan(needs, bool(needs & set(CONTACT_SIGNALS)) and task.header.contact_names
                 is not None, st.contact_roles, st.bystander, st.target, st.target_quat,
                 limits, "lift_gate" in has, st.robot, st.human)


def _f64(a: np.ndarray) -> np.ndarray:
    """``a`` as float64 (no copy when it already is): the offline kernels cast their inputs
    to float64 before any arithmetic, so the monitor does too."""
    return np.asarray(a, dtype=np.float64)


def _reference(p: _Plan, row: Episode) -> _Reference:
    """Step 0's references, copied (the row's arrays may be a recorder's buffers)."""
    pos = None if row.body_pos_m is None else np.array(row.body_pos_m[0], dtype=np.float64)
    quat = (_IDENTITY if p.target_quat < 0 or row.body_quat_wxyz is None
            else np.array(row.body_quat_wxyz[0, p.target_quat], dtype=np.float64))
    tz = 0.0 if pos is None or p.target < 0 else float(pos[p.target, 2])
    initial = np.zeros(0, dtype=np.int64)
    if row.contact_ptr is not None and row.contact_a.size:
        w = max(1, p.roles.size)
        a, b = row.contact_a.astype(np.int64), row.contact_b.astype(np.int64)
        if min(a.min(), b.min()) < 0 or max(a.max(), b.max()) >= p.roles.size:
            raise TraceError("contact body index outside the contact names",
                             field="steps[0].contacts")
        keys = np.minimum(a, b) * w + np.maximum(a, b)
        initial = np.array(list(dict.fromkeys(keys.tolist())), dtype=np.int64)
    return _Reference(pos, quat, tz, initial)
