"""Kinematic look-ahead: the arm's swept boxes over the next H control steps, against the boxes
of the objects around it, frozen where they are now.

The shield's simulator predictor (robosafe.runner.shield) steps an exact copy of the world: an
upper bound no real robot has. This is what a robot does have: its joint state, its forward
kinematics, the controller's commanded motion and the current boxes of the objects near it (a
perception stack's output). It is robosafe's own construction, in the spirit of a
swept-volume collision check; no paper's.

Per control step the action's arm part is mapped as the operational-space controller maps it
(the policy's range onto the output range: ``robosafe.sim.controller``) into a hand motion in
the robot-base frame: a position delta and an axis-angle delta, the goal the controller moves
the hand towards, of which the hand covers the share ``reach`` per control step (the
controller lags its goal; the data file's value is the largest share measured). The arm's joint positions follow it by damped least squares on
the hand site's Jacobian (``mj_kinematics`` and the hinges' world axes on a private
``MjData``: forward kinematics only, no dynamics, nothing stepped), ``substeps`` poses per
control step. At every pose each collision geom of the moving arm (and of an object the
fingers hold, carried rigidly with the hand) is taken as its own oriented box (MuJoCo's
``geom_aabb`` in the geom's frame), and its signed separation from every obstacle geom's box,
grown by ``margin`` on every side, is found by the separating-axis test (negative: the boxes
overlap). The predicted clearance of an obstacle at step k is the smallest over the poses of
step k; the shield treats a clearance below its own level as a predicted collision.

The hand's current motion (the hand site's Jacobian times the joint velocities) is carried on
beside the commanded one, shrinking by ``coast`` a step: the arm coasts when the command drops.

Assumed, not modelled: the hand makes ``reach`` of each step's commanded motion, in the
commanded direction, plus its coasting (the controller's transient otherwise), the fingers
keep their opening, and objects do not move (a pushed or moving object is seen where it is
now). A box around each geom is conservative for a round or non-convex shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import mujoco
import numba
import numpy as np

from robosafe.errors import RobosafeError
from robosafe.sim.controller import _apply_scaling, _cho_solve, _cholesky, _scaling
from robosafe.yamldata import load_yaml


@dataclass(frozen=True)
class KinematicConfig:
    """``data/kinematic.yaml``: obstacle margin (m), the share of the commanded motion made
    per step, the share of the hand's current motion carried into each next step, poses per
    control step, IK damping."""

    margin: float
    reach: float
    coast: float
    substeps: int
    damping: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.margin) and self.margin >= 0):
            raise RobosafeError(f"--predictor-margin must be a finite number >= 0 (metres), "
                                f"got {self.margin}")
        if (self.substeps < 1 or not self.damping > 0 or not 0 < self.reach <= 1
                or not 0 <= self.coast < 1):
            raise RobosafeError("sim/data/kinematic.yaml: substeps must be >= 1, damping > 0, "
                                "reach in (0, 1] and coast in [0, 1)")


@cache
def _defaults() -> dict[str, Any]:
    return load_yaml(resources.files("robosafe.sim").joinpath("data/kinematic.yaml")
                     .read_text(encoding="utf-8"))


def kinematic_config(margin: float | None = None) -> KinematicConfig:
    """The data file's settings, with ``margin`` (``--predictor-margin``) when given."""
    d = _defaults()
    return KinematicConfig(float(d["margin_m"] if margin is None else margin),
                           float(d["reach"]), float(d["coast"]), int(d["substeps"]),
                           float(d["damping"]))


@dataclass(frozen=True)
class Arm:
    """The arm as the kinematic look-ahead moves it (fixed within an episode)."""

    joints: np.ndarray    # arm joint ids (hinges)
    qpos: np.ndarray      # their qpos addresses
    eef: int              # the hand site the controller moves
    base: int             # the controller's base-frame site
    scaling: tuple        # the controller's input -> output map (sim.controller._scaling)
    action: tuple[int, int]  # the arm's slice of the action vector
    geoms: np.ndarray     # collision geoms of the bodies the arm joints move
    dt: float             # the control period (s)


def osc_arm(env: Any, m: Any) -> Arm:
    """The :class:`Arm` of a robosuite 1.5 single-arm robot driven by OSC_POSE with delta input
    in its base frame (robosafe's simulator); anything else is refused, not approximated."""
    robot = env.robots[0]
    parts = getattr(robot, "part_controllers", None) or {}
    arm = parts.get("right")
    if (arm is None or getattr(arm, "name", None) != "OSC_POSE"
            or getattr(arm, "input_type", None) != "delta"
            or getattr(arm, "input_ref_frame", None) != "base"):
        raise RobosafeError("--predictor kinematic needs robosafe's simulator (a robosuite 1.5 "
                            "arm under OSC_POSE, delta input in the base frame)")
    qpos = np.asarray(arm.qpos_index, dtype=np.int64)
    dofs = np.asarray(arm.qvel_index, dtype=np.int64)
    joints = np.asarray(m.dof_jntid[dofs], dtype=np.int64)
    if np.any(m.jnt_type[joints] != mujoco.mjtJoint.mjJNT_HINGE):
        raise RobosafeError("--predictor kinematic needs an arm of hinge joints")
    moved = {int(b) for b in range(m.nbody) if _moved_by(m, b, set(dofs.tolist()))}
    collide = (m.geom_contype != 0) | (m.geom_conaffinity != 0)
    geoms = np.flatnonzero(collide & np.isin(m.geom_bodyid, sorted(moved)))
    split = robot.composite_controller._action_split_indexes["right"]
    return Arm(joints, qpos, int(m.site(arm.ref_name).id),
               int(m.site(f"{arm.naming_prefix}{arm.part_name}_center").id), _scaling(arm),
               (int(split[0]), int(split[1])), geoms, float(env.control_timestep))


def _moved_by(m: Any, body: int, dofs: set[int]) -> bool:
    """Whether one of ``dofs`` lies on ``body``'s chain to the world."""
    b = body
    while b > 0:
        adr, num = int(m.body_dofadr[b]), int(m.body_dofnum[b])
        if num > 0 and dofs & set(range(adr, adr + num)):
            return True
        b = int(m.body_parentid[b])
    return False


# -- kernels (numba: the per-pose work is a few small loops; numpy's per-call cost would be
# most of it) ------------------------------------------------------------------------------------

@numba.njit(cache=True)
def _dls(axis, anchor, site, R, goal_p, goal_R, lam, dq):
    """dq = J^T (J J^T + lam I)^-1 e for the hand site's Jacobian J of hinges with world
    ``axis`` / ``anchor`` rows (rotation column = axis, position column = axis x (site -
    anchor): what mj_jacSite gives, without the centre-of-mass pass it needs) and the error
    e of the hand at ``site`` / ``R`` from ``goal_p`` / ``goal_R``, as the OSC takes it: the
    position difference and 1/2 sum_k r_k x r_k^goal over the rotations' columns."""
    n = axis.shape[0]
    J = np.empty((6, n))
    for j in range(n):
        rx, ry, rz = site[0] - anchor[j, 0], site[1] - anchor[j, 1], site[2] - anchor[j, 2]
        ax, ay, az = axis[j, 0], axis[j, 1], axis[j, 2]
        J[0, j], J[1, j], J[2, j] = ay * rz - az * ry, az * rx - ax * rz, ax * ry - ay * rx
        J[3, j], J[4, j], J[5, j] = ax, ay, az
    A = np.empty((6, 6))
    for i in range(6):
        for k in range(6):
            t = lam if i == k else 0.0
            for j in range(n):
                t += J[i, j] * J[k, j]
            A[i, k] = t
    y = np.zeros((6, 1))
    for i in range(3):
        y[i, 0] = goal_p[i] - site[i]
    for c in range(3):  # 1/2 r_c x g_c
        r0, r1, r2 = R[0, c], R[1, c], R[2, c]
        g0, g1, g2 = goal_R[0, c], goal_R[1, c], goal_R[2, c]
        y[3, 0] += 0.5 * (r1 * g2 - r2 * g1)
        y[4, 0] += 0.5 * (r2 * g0 - r0 * g2)
        y[5, 0] += 0.5 * (r0 * g1 - r1 * g0)
    L = np.zeros((6, 6))
    _cholesky(A, L)  # positive definite: lam > 0
    _cho_solve(L, y)
    for j in range(n):
        t = 0.0
        for i in range(6):
            t += J[i, j] * y[i, 0]
        dq[j] = t


@numba.njit(cache=True)
def _box(aabb, xpos, xmat, g, c, A):
    """Centre ``c`` and axes (columns of ``A``) of geom g's own box (``geom_aabb``: centre and
    half sizes in the geom's frame) at pose ``xpos[g]`` / ``xmat[g]``."""
    for i in range(3):
        c[i] = xpos[g, i]
        for j in range(3):
            A[i, j] = xmat[g, 3 * i + j]
            c[i] += A[i, j] * aabb[g, j]


@numba.njit(cache=True)
def _separation(ca, A, ha, cb, B, hb):
    """Signed separation of two oriented boxes (centres, axes as columns, half sizes) by the
    separating-axis test over their 15 axes: the largest gap between their projections on any
    one of them, so positive when they are apart (a lower bound on their distance) and minus
    the smallest overlap otherwise."""
    R = np.empty((3, 3))
    t = np.empty(3)
    for i in range(3):
        t[i] = 0.0
        for j in range(3):
            R[i, j] = A[0, i] * B[0, j] + A[1, i] * B[1, j] + A[2, i] * B[2, j]
        for k in range(3):
            t[i] += (cb[k] - ca[k]) * A[k, i]  # the centres' offset in a's frame
    best = -np.inf
    for i in range(3):  # a's axes
        rb = hb[0] * abs(R[i, 0]) + hb[1] * abs(R[i, 1]) + hb[2] * abs(R[i, 2])
        best = max(best, abs(t[i]) - ha[i] - rb)
    for j in range(3):  # b's axes
        ra = ha[0] * abs(R[0, j]) + ha[1] * abs(R[1, j]) + ha[2] * abs(R[2, j])
        tb = t[0] * R[0, j] + t[1] * R[1, j] + t[2] * R[2, j]
        best = max(best, abs(tb) - ra - hb[j])
    for i in range(3):  # their cross products
        i1, i2 = (i + 1) % 3, (i + 2) % 3
        for j in range(3):
            n = math.sqrt(max(0.0, 1.0 - R[i, j] * R[i, j]))
            if n < 1e-9:  # parallel axes: already tested
                continue
            j1, j2 = (j + 1) % 3, (j + 2) % 3
            ra = ha[i1] * abs(R[i2, j]) + ha[i2] * abs(R[i1, j])
            rb = hb[j1] * abs(R[i, j2]) + hb[j2] * abs(R[i, j1])
            best = max(best, (abs(t[i2] * R[i1, j] - t[i1] * R[i2, j]) - ra - rb) / n)
    return best


@numba.njit(cache=True)
def _clear(aabb, xpos, xmat, o_aabb, o_xpos, o_xmat, grow, owner, worst):
    """``worst[o]`` lowered to the signed separation of each geom's box (``aabb`` at
    ``xpos`` / ``xmat``) from each of obstacle o's geom boxes, grown by ``grow`` on every
    side."""
    ca, A, cb, B = np.empty(3), np.empty((3, 3)), np.empty(3), np.empty((3, 3))
    hb = np.empty(3)
    for g in range(aabb.shape[0]):
        _box(aabb, xpos, xmat, g, ca, A)
        for b in range(o_aabb.shape[0]):
            _box(o_aabb, o_xpos, o_xmat, b, cb, B)
            for k in range(3):
                hb[k] = o_aabb[b, 3 + k] + grow
            gap = _separation(ca, A, aabb[g, 3:], cb, B, hb)
            worst[owner[b]] = min(worst[owner[b]], gap)


class SweptBoxes:
    """The look-ahead over one model: ``obstacles`` maps a name to its collision geoms."""

    def __init__(self, m: Any, arm: Arm, obstacles: dict[str, np.ndarray], cfg: KinematicConfig):
        self.m, self.arm, self.cfg = m, arm, cfg
        self.d = mujoco.MjData(m)  # private: the world's own data is only read
        self.names = tuple(obstacles)
        self.obstacle_geoms = np.concatenate([np.asarray(g, dtype=np.int64)
                                              for g in obstacles.values()] or [np.zeros(0, int)])
        self.owner = np.repeat(np.arange(len(self.names)),
                               [len(np.asarray(g)) for g in obstacles.values()])
        self._lam = cfg.damping ** 2
        self._dq = np.zeros(len(arm.qpos))

    def clearances(self, d: Any, actions: list[np.ndarray],
                   carried: np.ndarray | None = None) -> dict[str, list[float]]:
        """Obstacle -> predicted clearance (m, after the margin) at each of the next
        len(actions) control steps, from the world's data ``d`` now; ``carried``: geoms of an
        object the hand holds, moved rigidly with it."""
        out: dict[str, list[float]] = {n: [] for n in self.names}
        if not self.names:
            return out
        m, k, arm, cfg = self.m, self.d, self.arm, self.cfg
        k.qpos[:] = d.qpos
        k.mocap_pos[:], k.mocap_quat[:] = d.mocap_pos, d.mocap_quat
        mujoco.mj_kinematics(m, k)
        og = self.obstacle_geoms
        obstacles = (m.geom_aabb[og], d.geom_xpos[og].copy(), d.geom_xmat[og].copy(),
                     cfg.margin, self.owner)
        held = np.zeros(0, dtype=np.int64) if carried is None else np.asarray(carried)
        if held.size:  # the held object's geoms in the hand site's frame, fixed from now on
            R0 = k.site_xmat[arm.eef].reshape(3, 3)
            rel_pos = (d.geom_xpos[held] - k.site_xpos[arm.eef]) @ R0
            rel_mat = np.einsum("ji,njk->nik", R0, d.geom_xmat[held].reshape(-1, 3, 3))
        n = len(self.names)
        a0, a1 = arm.action
        aabb = m.geom_aabb[arm.geoms]
        held_aabb = m.geom_aabb[held]
        O = k.site_xmat[arm.base].reshape(3, 3)  # the base frame does not move
        goal_p = k.site_xpos[arm.eef].copy()
        goal_R = k.site_xmat[arm.eef].reshape(3, 3).copy()
        # the hand's motion now (its Jacobian times the joint velocities: the robot's own
        # state), carried on, shrinking by ``coast`` a step, beside the commanded motion
        jacp = np.zeros((3, m.nv))
        mujoco.mj_jacSite(m, d, jacp, None, arm.eef)
        drift = jacp @ d.qvel * arm.dt / cfg.substeps
        for action in actions:
            delta = (_apply_scaling(arm.scaling, np.asarray(action[a0:a1], float))
                     * (cfg.reach / cfg.substeps))
            turn = _rotation(O @ delta[3:6])
            worst = np.full(n, np.inf)
            drift = drift * cfg.coast
            for _ in range(cfg.substeps):
                goal_p += O @ delta[:3] + drift
                goal_R = turn @ goal_R
                self._move(goal_p, goal_R)
                _clear(aabb, k.geom_xpos[arm.geoms], k.geom_xmat[arm.geoms], *obstacles,
                       worst)
                if held.size:
                    R = k.site_xmat[arm.eef].reshape(3, 3)
                    hpos = k.site_xpos[arm.eef] + rel_pos @ R.T
                    hmat = np.einsum("ij,njk->nik", R, rel_mat).reshape(-1, 9)
                    _clear(held_aabb, hpos, hmat, *obstacles, worst)
            for i, name in enumerate(self.names):
                out[name].append(float(worst[i]))
        return out

    def _move(self, goal_p: np.ndarray, goal_R: np.ndarray) -> None:
        """One damped-least-squares step of the arm towards the hand at ``goal_p`` /
        ``goal_R`` (:func:`_dls`), then the forward kinematics of the new pose. The goal
        accumulates the commanded motion, so what one linear step leaves undone is made up
        at the next."""
        m, k, arm = self.m, self.d, self.arm
        _dls(k.xaxis[arm.joints], k.xanchor[arm.joints], k.site_xpos[arm.eef],
             k.site_xmat[arm.eef].reshape(3, 3), goal_p, goal_R, self._lam, self._dq)
        k.qpos[arm.qpos] += self._dq
        mujoco.mj_kinematics(m, k)


def _rotation(v: np.ndarray) -> np.ndarray:
    """The rotation matrix of the axis-angle vector ``v`` (Rodrigues)."""
    angle = float(np.linalg.norm(v))
    if angle == 0.0:
        return np.eye(3)
    x, y, z = v / angle
    K = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return np.eye(3) + math.sin(angle) * K + (1.0 - math.cos(angle)) * (K @ K)
