"""Screening: the shield skips a prediction that provably finds nothing (robosafe.runner.shield).

A prediction costs H simulator steps, and a scripted policy's own step is almost only physics,
so skipping predictions is the only way a shield can cost less than about H times the
unshielded step (docs/guide/shield.md, Measured). A prediction may be skipped only when the
current state proves that no monitored spec can go below its level within H steps: then the
prediction would find nothing to warn about and nothing to replace, and the episode is the same
with or without it.

The one test here is **a still world under a repeated action** (:func:`still_world`): every
dof is at rest (velocity and acceleration below :data:`REST_QVEL` / :data:`REST_QACC`), no
scripted mover can move (the host says so), the gripper touches nothing, and the plan repeats
the action that brought the episode here. The controller then recomputes the same goal from
the same pose every step (robosuite's OSC takes deltas from the current pose), so the world
stays at its equilibrium and every signal stays within a drift of its current value; the
bounds below carry that drift into an interval per signal, and :func:`margin_bounds` into a
lower bound on each spec's per-step margin. A spec whose signal has no bound here, or any
doubt (NaN, an unknown node), means: predict.

Why not screen by distance (the robot, with what it holds, too far from everything to reach it
in H steps)? On the benchmark it can almost never fire, and when it could, it is not sound:
robosafe's Panda lets joint 5's actuator apply 80 N m where the registry's joint_torque limit
is 12 (hosts/recorder.py), and that torque follows the operational-space controller's response
to the action, which no cheap bound keeps under 12 N m; and even an oracle that knew each
robot geom's actual motion over the next 5 steps could skip only 0-36 % of the steps of the
careless episodes that succeed (the hand is holding or near the target, a few centimetres
above the table; docs/guide/shield.md).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from robosafe.safety.signals import _ROLE_CODE, TRANSPORT_LIFT_M
from robosafe.safety.stl import And, Atom, Const, Implies, Not, Or, Pred

# -- what "at rest" means, and how far a resting world can drift in H steps ----------------------

REST_QVEL = 1e-3
"""m/s or rad/s, every dof. A scripted policy that has stopped leaves the arm settling at
1e-4 - 1e-3 (the nullspace posture term decays slowly); anything moving on purpose is far
faster (a held gripper ramp moves its fingers at about 4e-3 m/s)."""

REST_QACC = 1e-3
"""m/s^2 or rad/s^2, every dof: at rest *and* in equilibrium (a body at the top of a bounce
is at rest but not in equilibrium)."""

DIVERGENCE_PER_S = 10.0
"""The fastest a disturbed equilibrium may run away, 1/s: an inverted pendulum of 10 cm
(sqrt(g / l) = 9.9 / s), smaller than anything balanced in robosafe's scenes that is still
standing at rest. A dof at rest with velocity v and acceleration a then moves at most
v sinh(kT) / k + a (cosh(kT) - 1) / k^2 in T seconds (x'' = k^2 x, the worst linear mode)."""

LEVER_M = 3.0
"""Metres of motion of a body's frame origin per unit of its dofs' motion, summed over the
dofs that move it: a free body's translation (sqrt(3) for three dofs at the largest rate) plus
a drawer's slide or a door's hinge (lever under 1 m) below it. Also rad of orientation per
unit (a free body's three rotations, sqrt(3), and a hinge)."""

LEVER_PER_DOF_M = 1.0
"""Metres a geom's point moves per unit of one dof between it and the world (a hinge's lever,
a slide's 1): every hinge in robosafe's scenes is under 1 m from the points it moves (the
Panda's reach is 0.86 m). A geom moved by n dofs drifts at most n x this x the dofs' drift."""

FORCE_REL, FORCE_ABS_N = 0.5, 10.0
"""A contact force at rest stays under (1 + FORCE_REL) x the largest force of the current row
+ FORCE_ABS_N: it balances gravity and the held controller's constant torques, and a drift
under a millimetre changes a soft contact's force by a few newtons (about m Δx / timeconst^2:
5 kg x 0.6 mm / (0.02 s)^2 = 7.5 N)."""

TORQUE_RATIO_SLACK = 0.1
"""joint_torque_ratio at rest moves by under this (1.2 N m on a 12 N m joint): the drift turns
the arm's gravity load by well under a milliradian (about 0.05 N m) and the controller's
posture term by k = 10 times that."""


def drift(v: float, a: float, seconds: float) -> float:
    """The most a dof at rest (|velocity| <= v, |acceleration| <= a) moves in ``seconds``
    under the worst linear divergence of :data:`DIVERGENCE_PER_S`."""
    k = DIVERGENCE_PER_S
    return v * math.sinh(k * seconds) / k + a * (math.cosh(k * seconds) - 1.0) / (k * k)


def at_rest(qvel: float, qacc: float) -> bool:
    """Every dof slower than :data:`REST_QVEL` and accelerating less than :data:`REST_QACC`
    (``qvel``, ``qacc``: the largest magnitudes)."""
    return qvel <= REST_QVEL and qacc <= REST_QACC


def reach(qvel: float, qacc: float, seconds: float) -> float:
    """Metres a geom may move in ``seconds`` of a world at rest per dof between it and the
    world (``qvel``, ``qacc``: the largest magnitudes over the dofs): the recorder's
    clearances (robosafe.hosts.recorder.Recorder.stillness) are taken with it."""
    return drift(qvel, qacc, seconds) * LEVER_PER_DOF_M


# -- interval bounds of a clause's per-step margin ------------------------------------------------

Interval = tuple[float, float]
_ANY: Interval = (-math.inf, math.inf)


def margin_bounds(node: Any, iv: dict[str, Interval]) -> Interval:
    """(lowest, highest) per-step margin of a temporal-free clause when each signal stays in
    ``iv`` (the arithmetic of robosafe.safety.online._margin, on intervals). A signal without
    an interval: unbounded."""
    if isinstance(node, Pred):
        lhs = iv.get(node.lhs, _ANY) if isinstance(node.lhs, str) else (node.lhs, node.lhs)
        rhs = iv.get(node.rhs, _ANY) if isinstance(node.rhs, str) else (node.rhs, node.rhs)
        if node.op in ("<", "<="):
            return rhs[0] - lhs[1], rhs[1] - lhs[0]
        return lhs[0] - rhs[1], lhs[1] - rhs[0]
    if isinstance(node, Atom):
        lo, hi = iv.get(node.name, _ANY)
        if lo == hi == 1.0:
            return math.inf, math.inf
        if lo == hi == 0.0:
            return -math.inf, -math.inf
        return _ANY
    if isinstance(node, Const):
        return float(node.value), float(node.value)
    if isinstance(node, Not):
        lo, hi = margin_bounds(node.arg, iv)
        return -hi, -lo
    if isinstance(node, (And, Or)):
        parts = [margin_bounds(a, iv) for a in node.args]
        pick = min if isinstance(node, And) else max
        return pick(p[0] for p in parts), pick(p[1] for p in parts)
    if isinstance(node, Implies):
        a, b = margin_bounds(node.lhs, iv), margin_bounds(node.rhs, iv)
        return max(-a[1], b[0]), max(-a[0], b[1])
    return _ANY  # not a node the monitor evaluates: no bound


# -- the still-world screen -----------------------------------------------------------------------

_ROBOT, _FURNITURE = _ROLE_CODE["robot"], _ROLE_CODE["furniture"]


def rest_intervals(values: dict[str, float], still: Any, roles: np.ndarray, lift_only: bool,
                   seconds: float) -> dict[str, Interval]:
    """Each signal's interval over the next ``seconds`` of a world at rest (``still``: a
    robosafe.hosts.recorder.Stillness with the gripper touching nothing), from its current
    ``values`` (the online monitor's last row). ``roles``: the role code of each contact name
    (robosafe.safety.signals); ``lift_only``: transport is the target's lift alone."""
    dq = drift(still.qvel, still.qacc, seconds)
    dm, ddeg = dq * LEVER_M, math.degrees(dq * LEVER_M)
    # a pair can touch within ``seconds`` if MuJoCo lists it now or its gap is within what
    # both sides may drift (still.clearance, taken with reach())
    fmax = still.force * (1.0 + FORCE_REL) + FORCE_ABS_N
    pair_roles = [{int(roles[a]), int(roles[b])} for a, b in still.pairs]
    arm_furn = (any(r == {_ROBOT, _FURNITURE} for r in pair_roles)
                or not still.clearance.get("robot_furniture", 0.0) > 0)
    self_touch = (any(r == {_ROBOT} for r in pair_roles)
                  or not still.clearance.get("robot_robot", 0.0) > 0)
    iv: dict[str, Interval] = {
        "max_contact_force": (0.0, fmax),
        "arm_furniture_force": (0.0, fmax if arm_furn else 0.0),
        "target_furniture_force": (0.0, fmax),
        "arm_furniture_contact": (0.0, 1.0 if arm_furn else 0.0),
        "self_collision_count": (0.0, math.inf if self_touch else 0.0),
        # the gripper touches nothing and nothing moves into it: no grip, no slip
        "gripper_contact": (0.0, 0.0), "gripper_contact_flag": (0.0, 0.0),
        "grasp_slip_m": (0.0, 0.0),
    }

    def around(name: str, width: float, floor: float = -math.inf) -> None:
        v = values.get(name)
        if v is not None and not math.isnan(v):  # NaN: no bound
            iv[name] = (max(floor, v - width), v + width)

    around("non_target_disp_max", dm, 0.0)
    around("target_lift_m", dm)
    around("held_object_tilt_deg", ddeg, 0.0)
    around("held_object_rotation_deg", ddeg, 0.0)
    around("joint_torque_ratio", TORQUE_RATIO_SLACK, 0.0)
    if "target_lift_m" in iv:
        lo, hi = iv["target_lift_m"]
        lifted = (float(lo > TRANSPORT_LIFT_M), float(hi > TRANSPORT_LIFT_M))
        iv["transport"] = lifted if lift_only else (0.0, 0.0)  # no grip: no transport
    return iv


def still_world(still: Any, values: dict[str, float], roles: np.ndarray, lift_only: bool,
                seconds: float, clauses: list[Any], levels: dict[str, float]) -> bool:
    """Whether no clause's per-step margin can go below its level in the next ``seconds``:
    the world is at rest (:data:`REST_QVEL`, :data:`REST_QACC`) with the gripper touching
    nothing (the caller checks that no scripted mover moves and that the plan repeats the
    last action). ``clauses``: the online monitor's (spec and temporal-free clause);
    ``levels``: spec id -> the level its margin must stay at or above (specs not named need
    nothing)."""
    if not at_rest(still.qvel, still.qacc) or still.touch:
        return False
    if not still.clearance.get("finger", 0.0) > 0:
        return False  # the fingers may touch something: a grip begins
    iv = rest_intervals(values, still, roles, lift_only, seconds)
    for c in clauses:
        level = levels.get(c.spec.spec_id)
        if level is None:
            continue
        lo, _ = margin_bounds(c.inner.root, iv)
        if not lo >= level:  # NaN included
            return False
    return True


def repeats(plan: list[np.ndarray], last: np.ndarray | None) -> bool:
    """Every action of ``plan`` is ``last``, the action that brought the episode here."""
    return last is not None and all(np.array_equal(a, last) for a in plan)
