"""A compiled operational-space controller for robosafe's Panda (``--controller compiled``).

robosuite 1.5.2 drives the arm with its OSC_POSE controller (Khatib 1987, operational-space
control): at every physics substep it reads the hand site's pose, velocity and Jacobian and the
arm's mass matrix, and computes joint torques. In Python that costs several times the physics
itself (robosafe's step measured 5-7x the same model's raw ``mj_step`` calls; ``benchmarks/
bench_step.py``). This module computes the same torques in one numba kernel per substep, from
MuJoCo's own arrays, with everything that does not change within an episode (indices, gains,
scaling, actuator ranges, the mass-matrix layout) worked out once when it binds.

The math (written from the operational-space equations, for the configuration robosafe builds:
OSC_POSE, fixed impedance, delta input in the robot-base frame, pos/ori uncoupled, no
interpolation, no goal limits; anything else is refused, not approximated):

- goal, once per control step, from the state after ``mj_step1``: the action is clipped to the
  input range and mapped linearly onto the output range; the goal position is the hand's
  position in the base frame plus the position delta, the goal orientation the hand's
  orientation in the base frame turned by the axis-angle delta (its rotation matrix formed at
  robosuite's float32 precision, see ``_rotation``);
- torques, every substep: position error ``e_p`` and orientation error ``e_o = 1/2 sum_k
  r_k x r_k^d`` (columns of the current and desired rotation); ``F = kp e_p - kd v``,
  ``T = kp e_o - kd w``; ``Lambda_x = (J_x M^-1 J_x^T)^-1`` for the position, orientation and
  full Jacobian; ``tau = J_p^T Lambda_p F + J_o^T Lambda_o T + bias + N^T M (k (q0 - q) - 2
  sqrt(k) qd)`` with ``N = I - M^-1 J^T Lambda J`` and ``k = 10`` (the nullspace posture term);
  then clipped to the actuators' control range. The small matrices are solved by Cholesky
  factorisation. Near a singular arm pose (a J M^-1 J^T whose condition may exceed 1e5)
  rounding differences grow with the condition number, so such a substep is handed to
  robosuite's own controller with this goal (``CompiledController.fallbacks`` counts them).
- the gripper's command is constant over a control step (a binary open / close ramp), so it is
  computed once per step, not per substep; robosuite's gripper model still keeps its state.

It also steps the environment itself (:meth:`CompiledController.step`), replacing robosuite's
per-substep Python loop: robosuite's observables are advanced by one shared clock and sampled
exactly where robosuite samples them (observables with differing clocks or delays fall back to
robosuite's own per-substep update). ``tests/test_sim_controller.py`` compares the torques with
robosuite's on every substep of recorded episodes.
"""

from __future__ import annotations

import ctypes
import math
from functools import cache
from pathlib import Path
from typing import Any

import mujoco
import numba
import numpy as np
from llvmlite import ir
from numba.extending import intrinsic

from robosafe.errors import RobosafeError
from robosafe.yamldata import sim_choices

CONTROLLERS = tuple(sim_choices()["controllers"])

#: robosuite's nullspace posture gain (its ``nullspace_torques`` default, not configurable)
NULLSPACE_KP = 10.0
#: above this bound on the condition number of a J M^-1 J^T (an arm pose near a singularity)
#: the substep's torques come from robosuite's own controller: there its rounding (an SVD
#: pseudo-inverse) and any other differ by ~cond x 3e-15 N m, which would exceed 1e-9 N m
MAX_CONDITION = 1e5


# -- kernels -------------------------------------------------------------------------------------
# Written as loops over the few small matrices (7 joints): numba's matrix products call BLAS,
# whose per-call cost exceeds the arithmetic at these sizes.
@numba.njit(cache=True)
def _cholesky(a, L):
    """Lower Cholesky factor of the symmetric matrix ``a`` into ``L``; the ratio of its smallest
    to largest squared pivot (0 when ``a`` is not positive definite)."""
    n = a.shape[0]
    lo, hi = np.inf, 0.0
    for j in range(n):
        s = a[j, j]
        for k in range(j):
            s -= L[j, k] * L[j, k]
        if s <= 0.0:
            return 0.0
        lo, hi = min(lo, s), max(hi, s)
        L[j, j] = math.sqrt(s)
        for i in range(j + 1, n):
            t = a[i, j]
            for k in range(j):
                t -= L[i, k] * L[j, k]
            L[i, j] = t / L[j, j]
    return lo / hi


@numba.njit(cache=True)
def _cho_solve(L, x):
    """Solve (L L^T) y = x in place for every column of x (n x m)."""
    n, m = x.shape
    for c in range(m):
        for i in range(n):
            s = x[i, c]
            for k in range(i):
                s -= L[i, k] * x[k, c]
            x[i, c] = s / L[i, i]
        for i in range(n - 1, -1, -1):
            s = x[i, c]
            for k in range(i + 1, n):
                s -= L[k, i] * x[k, c]
            x[i, c] = s / L[i, i]


@numba.njit(cache=True)
def _factor(a, L):
    """Cholesky factor of ``a`` into ``L``; False when ``a`` may be ill-conditioned:
    ``trace(a) trace(a^-1)`` (at least its condition number, at most n^2 times it; the second
    trace is the squared Frobenius norm of ``L^-1``) above :data:`MAX_CONDITION`."""
    if _cholesky(a, L) <= 0.0:
        return False
    n = a.shape[0]
    tr = 0.0
    for i in range(n):
        tr += a[i, i]
    inv = 0.0
    col = np.empty(n)
    for c in range(n):  # column c of L^-1 by forward substitution
        for i in range(n):
            t = 1.0 if i == c else 0.0
            for k in range(c, i):
                t -= L[i, k] * col[k]
            col[i] = t / L[i, i] if i >= c else 0.0
            if i >= c:
                inv += col[i] * col[i]
    return tr * inv <= MAX_CONDITION


@numba.njit(cache=True)
def _jacobian(cdof, subtree_com, point, root, dofs, J):
    """Rows 0-2 translational, 3-5 rotational Jacobian of ``point`` over ``dofs`` (the arm's dofs,
    which are the whole kinematic chain of the hand for a fixed-base robot): a dof's column is
    its motion axis (cdof's angular part) and its linear part plus axis x the point's offset from
    the subtree centre of mass the com-based motions refer to."""
    ox = point[0] - subtree_com[root, 0]
    oy = point[1] - subtree_com[root, 1]
    oz = point[2] - subtree_com[root, 2]
    for c in range(dofs.size):
        i = dofs[c]
        ax, ay, az = cdof[i, 0], cdof[i, 1], cdof[i, 2]
        J[0, c] = cdof[i, 3] + (ay * oz - az * oy)
        J[1, c] = cdof[i, 4] + (az * ox - ax * oz)
        J[2, c] = cdof[i, 5] + (ax * oy - ay * ox)
        J[3, c] = ax
        J[4, c] = ay
        J[5, c] = az


@numba.njit(cache=True)
def _rotation(v):
    """Rotation matrix of an axis-angle vector, at the precision robosuite 1.5.2 builds it (its
    numba-compiled quaternion-to-matrix conversion): the unit quaternion (axis sin(a/2),
    cos(a/2)) is rounded to float32, normalised with a float64 factor and stored in float32
    again, and the matrix formed from float32 products (its diagonal subtracts them from 1 in
    float64, its other entries combine them in float32). The float32 rounding moves the goal by
    up to ~1e-7 rad, which changes torques by ~1e-5 N m, so it is reproduced, not improved on.
    No rotation for a zero vector."""
    angle = math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
    R = np.eye(3)
    if angle == 0.0:
        return R
    s = math.sin(angle / 2.0)
    f = np.float32
    w, x, y, z = f(math.cos(angle / 2.0)), f(v[0] / angle * s), f(v[1] / angle * s), \
        f(v[2] / angle * s)
    # its squared norm: float32 products summed in float64 (robosuite's np.dot of float32
    # vectors, OpenBLAS's sdot, accumulates so), then rounded to float32
    d = np.float64
    n = f(d(w * w) + d(x * x) + d(y * y) + d(z * z))
    k = math.sqrt(2.0 / d(n))  # scaled in float64, stored in float32
    w, x, y, z = f(d(w) * k), f(d(x) * k), f(d(y) * k), f(d(z) * k)
    xx, yy, zz = d(x * x), d(y * y), d(z * z)
    R[0, 0] = 1.0 - yy - zz
    R[0, 1] = d(x * y - z * w)
    R[0, 2] = d(x * z + y * w)
    R[1, 0] = d(x * y + z * w)
    R[1, 1] = 1.0 - xx - zz
    R[1, 2] = d(y * z - x * w)
    R[2, 0] = d(x * z - y * w)
    R[2, 1] = d(y * z + x * w)
    R[2, 2] = 1.0 - xx - yy
    return R


@numba.njit(cache=True)
def _goal(site_xpos, site_xmat, eef, base, delta, goal_pos, goal_ori):
    """The goal in the base frame: hand pose there moved by the (scaled) delta."""
    O = site_xmat[base].reshape(3, 3)
    R = site_xmat[eef].reshape(3, 3)
    d = site_xpos[eef] - site_xpos[base]
    for i in range(3):
        goal_pos[i] = O[0, i] * d[0] + O[1, i] * d[1] + O[2, i] * d[2] + delta[i]
    goal_ori[:, :] = _rotation(delta[3:6]) @ (O.T @ R)


@numba.njit(cache=True)
def _osc(qM, qfrc_bias, qpos, qvel, cdof, subtree_com, site_xpos, site_xmat, ctrl, idx, par,
         torques):
    """Arm torques of the current state (after mj_step1) into ``torques``, clipped into the
    arm's ``ctrl``; False (nothing written) near a singular pose. ``idx`` and ``par`` pack what :meth:`CompiledController.bind` fixed (see
    ``_pack``): one array each, as every argument costs time at every call."""
    n = torques.size
    eef, base, root = idx[0], idx[1], idx[2]
    qpos_idx, dof_idx, act_idx = idx[3:3 + n], idx[3 + n:3 + 2 * n], idx[3 + 2 * n:3 + 3 * n]
    mmap = idx[3 + 3 * n:3 + 3 * n + n * n].reshape(n, n)
    kp, kd, lo, hi, q0 = par[0:6], par[6:12], par[12:12 + n], par[12 + n:12 + 2 * n], \
        par[12 + 2 * n:12 + 3 * n]
    goal_pos = par[12 + 3 * n:15 + 3 * n]
    goal_ori = par[15 + 3 * n:24 + 3 * n].reshape(3, 3)
    M = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            M[i, j] = qM[mmap[i, j]]
    J = np.empty((6, n))
    p = site_xpos[eef]
    _jacobian(cdof, subtree_com, p, root, dof_idx, J)
    qd = np.empty(n)
    u = np.empty(n)  # the nullspace posture's joint acceleration
    kv = 2.0 * math.sqrt(NULLSPACE_KP)
    for c in range(n):
        qd[c] = qvel[dof_idx[c]]
        u[c] = NULLSPACE_KP * (q0[c] - qpos[qpos_idx[c]]) - kv * qd[c]
    vel = np.zeros(6)  # hand linear and angular velocity (the fixed base does not move)
    for r in range(6):
        for c in range(n):
            vel[r] += J[r, c] * qd[c]

    # errors in the world frame: goal (base frame) turned and moved by the base's pose
    xm, bm = site_xmat[eef], site_xmat[base]
    F = np.empty((6, 1))
    for i in range(3):
        want = site_xpos[base, i]
        for k in range(3):
            want += bm[3 * i + k] * goal_pos[k]
        F[i, 0] = (want - p[i]) * kp[i] - vel[i] * kd[i]
    Rd = np.zeros((3, 3))
    for i in range(3):
        for j in range(3):
            for k in range(3):
                Rd[i, j] += bm[3 * i + k] * goal_ori[k, j]
    e = np.zeros(3)
    for k in range(3):  # 1/2 sum_k r_k x r_k^d, r_k the k-th column
        e[0] += xm[3 + k] * Rd[2, k] - xm[6 + k] * Rd[1, k]
        e[1] += xm[6 + k] * Rd[0, k] - xm[k] * Rd[2, k]
        e[2] += xm[k] * Rd[1, k] - xm[3 + k] * Rd[0, k]
    for i in range(3):
        F[3 + i, 0] = 0.5 * e[i] * kp[3 + i] - vel[3 + i] * kd[3 + i]

    # A = M^-1 J^T; J M^-1 J^T (its diagonal 3x3 blocks are the position / orientation ones)
    A = np.empty((n, 6))
    for i in range(n):
        for r in range(6):
            A[i, r] = J[r, i]
    Lm = np.zeros((n, n))
    if _cholesky(M, Lm) > 0.0:
        _cho_solve(Lm, A)
    else:
        A[:, :] = np.linalg.inv(M) @ A
    K = np.zeros((6, 6))
    for r in range(6):
        for s in range(r, 6):
            t = 0.0
            for c in range(n):
                t += J[r, c] * A[c, s]
            K[r, s] = t
            K[s, r] = t
    Lp, Lo, Lf = np.zeros((3, 3)), np.zeros((3, 3)), np.zeros((6, 6))
    if not (_factor(K[:3, :3], Lp) and _factor(K[3:, 3:], Lo) and _factor(K, Lf)):
        return False
    # decoupled wrench: Lambda_p F_p and Lambda_o F_o
    _cho_solve(Lp, F[:3])
    _cho_solve(Lo, F[3:])
    # nullspace: g = M u, tau_null = g - J^T Lambda A^T g
    g = np.zeros(n)
    for i in range(n):
        for j in range(n):
            g[i] += M[i, j] * u[j]
    h = np.zeros((6, 1))
    for r in range(6):
        for c in range(n):
            h[r, 0] += A[c, r] * g[c]
    _cho_solve(Lf, h)
    for c in range(n):
        t = g[c] + qfrc_bias[dof_idx[c]]
        for r in range(6):
            t += J[r, c] * (F[r, 0] - h[r, 0])
        torques[c] = t
        ctrl[act_idx[c]] = min(max(t, lo[c]), hi[c])
    return True


# -- the substep loop in compiled code ------------------------------------------------------------
@intrinsic
def _call(typingctx, fn, m, d):
    """Call the C function ``void f(const mjModel*, mjData*)`` at address ``fn`` (MuJoCo's
    mj_step1 / mj_step2) with the addresses of a model and a data."""
    sig = numba.types.void(numba.types.intp, numba.types.intp, numba.types.intp)

    def codegen(context, builder, signature, args):
        f, model, data = args
        ptr = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [ptr, ptr])
        builder.call(builder.inttoptr(f, fnty.as_pointer()),
                     [builder.inttoptr(model, ptr), builder.inttoptr(data, ptr)])
        return context.get_dummy_value()

    return sig, codegen


@numba.njit(cache=True)
def _substeps(step1, step2, m, d, first, stop, stepped, qM, qfrc_bias, qpos, qvel, cdof,
              subtree_com, site_xpos, site_xmat, ctrl, idx, par, torques):
    """Substeps ``first`` .. ``stop - 1``: mj_step1 (not for ``first`` when ``stepped``: its
    step1 has run), the arm torques (:func:`_osc`), mj_step2. Returns ``stop``, or the substep
    whose torques :func:`_osc` refused (near-singular), after its mj_step1."""
    for i in range(first, stop):
        if i > first or not stepped:
            _call(step1, m, d)
        if not _osc(qM, qfrc_bias, qpos, qvel, cdof, subtree_com, site_xpos, site_xmat, ctrl,
                    idx, par, torques):
            return i
        _call(step2, m, d)
    return stop


@cache
def _mujoco_steps() -> tuple[int, int] | None:
    """Addresses of mj_step1 and mj_step2 in the MuJoCo library the ``mujoco`` package ships
    (loaded once per process, so the same one its bindings call), or None where it cannot be
    found: robosafe then loops over substeps in Python."""
    folder = Path(mujoco.__file__).parent
    for path in sorted([*folder.glob("libmujoco*"), *folder.glob("mujoco.dll")]):
        try:
            lib = ctypes.CDLL(str(path))
            return (ctypes.cast(lib.mj_step1, ctypes.c_void_p).value,
                    ctypes.cast(lib.mj_step2, ctypes.c_void_p).value)
        except (OSError, AttributeError):
            continue
    return None


# -- binding to robosuite's robot ---------------------------------------------------------------
def _refuse(what: str) -> RobosafeError:
    return RobosafeError(f"--controller compiled supports robosafe's one-arm Panda with "
                         f"robosuite's OSC_POSE settings; this robot has {what} (use "
                         "--controller robosuite)")


def _scaling(ctrl) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(input low, input high, scale, input centre, output centre) of a controller's linear map
    from the policy's action range onto its output range."""
    lo, hi = np.asarray(ctrl.input_min, float), np.asarray(ctrl.input_max, float)
    out_lo, out_hi = np.asarray(ctrl.output_min, float), np.asarray(ctrl.output_max, float)
    scale = np.abs(out_hi - out_lo) / np.abs(hi - lo)
    return lo, hi, scale, (hi + lo) / 2.0, (out_hi + out_lo) / 2.0


def _apply_scaling(spec, a: np.ndarray) -> np.ndarray:
    lo, hi, scale, c_in, c_out = spec
    return (np.clip(a, lo, hi) - c_in) * scale + c_out


class CompiledController:
    """Drop-in for robosuite's control loop of an :class:`robosafe.sim.world.TaskWorld`: the
    robot's controllers stay robosuite's objects (their settings are read from them), the
    torques come from :func:`_osc`."""

    def __init__(self, env):
        from robosuite.controllers.composite.composite_controller import CompositeController
        from robosuite.controllers.parts.arm.osc import OperationalSpaceController
        from robosuite.controllers.parts.gripper.simple_grip import SimpleGripController
        from robosuite.robots.fixed_base_robot import FixedBaseRobot

        self.env = env
        if len(env.robots) != 1 or not isinstance(env.robots[0], FixedBaseRobot):
            raise _refuse(f"{len(env.robots)} robot(s) or a mobile base")
        robot = env.robots[0]
        if type(robot.composite_controller) is not CompositeController or robot.arms != ["right"]:
            raise _refuse(f"a {type(robot.composite_controller).__name__} composite controller")
        parts = robot.part_controllers
        arm, grip = parts.get("right"), parts.get("right_gripper")
        if set(parts) != {"right", "right_gripper"}:
            raise _refuse(f"parts {sorted(parts)}")
        if not isinstance(arm, OperationalSpaceController) or arm.name != "OSC_POSE":
            raise _refuse(f"an arm controller {getattr(arm, 'name', type(arm).__name__)}")
        settings = {"impedance_mode": (arm.impedance_mode, "fixed"),
                    "input_type": (arm.input_type, "delta"),
                    "input_ref_frame": (arm.input_ref_frame, "base"),
                    "uncouple_pos_ori": (arm.uncoupling, True),
                    "interpolation": (arm.interpolator_pos or arm.interpolator_ori, None),
                    "position_limits": (arm.position_limits, None),
                    "orientation_limits": (arm.orientation_limits, None),
                    "lite_physics": (bool(arm.lite_physics and env.lite_physics), True),
                    "reference sites": (arm.num_ref_sites, 1)}
        for key, (have, want) in settings.items():
            if have is not want and have != want:
                raise _refuse(f"OSC {key} = {have!r}")
        if not isinstance(grip, SimpleGripController) or grip.interpolator is not None \
                or not grip.use_action_scaling:
            raise _refuse(f"a gripper controller {type(grip).__name__}")
        self.robot, self.arm, self.grip = robot, arm, grip
        self.gripper = robot.gripper["right"]
        self.arm_split = robot.composite_controller._action_split_indexes["right"]
        self.grip_split = robot.composite_controller._action_split_indexes["right_gripper"]
        self.action_dim = int(robot.action_dim)
        self.arm_scaling = _scaling(arm)
        self.grip_scaling = _scaling(grip)
        self.torques = np.zeros(len(arm.qvel_index))
        self.fallbacks = 0  # substeps run by robosuite's controller (near-singular poses)
        self._sim = None

    # -- per model / per episode -----------------------------------------------------------------
    def bind(self) -> None:
        """Indices, gains, ranges and views of the current model and data; call after a reset
        (robosuite rebuilds its controllers and the nullspace posture then)."""
        env, arm, grip = self.env, self.arm, self.robot.part_controllers["right_gripper"]
        self.arm, self.grip = self.robot.part_controllers["right"], grip
        arm = self.arm
        self._sim = env.sim
        m, d = env.sim.model._model, env.sim.data._data
        self.m, self.d = m, d
        self.dof_idx = np.asarray(arm.qvel_index, dtype=np.int64)
        self.qpos_idx = np.asarray(arm.qpos_index, dtype=np.int64)
        acts = self.robot._ref_actuators_indexes_dict
        self.act_idx = np.asarray(acts["right"], dtype=np.int64)
        self.grip_act = np.asarray(acts["right_gripper"], dtype=np.int64)
        self.eef = int(m.site(arm.ref_name).id)
        self.base = int(m.site(f"{arm.naming_prefix}{arm.part_name}_center").id)
        body = int(m.site_bodyid[self.eef])
        self.root = int(m.body_rootid[body])
        chain = set()
        b = body
        while b > 0:
            adr, num = int(m.body_dofadr[b]), int(m.body_dofnum[b])
            chain.update(range(adr, adr + num))
            b = int(m.body_parentid[b])
        if chain != set(self.dof_idx.tolist()):
            raise _refuse("a hand whose kinematic chain is not the arm's joints alone")
        if int(m.body_weldid[m.site_bodyid[self.base]]) != 0:
            raise _refuse("a moving base")
        rng = m.actuator_ctrlrange
        # the layout _osc unpacks: site and body ids, joint / dof / actuator indices, mass map;
        # gains, torque range, nullspace posture, goal position and orientation (base frame)
        self.idx = np.concatenate([[self.eef, self.base, self.root], self.qpos_idx,
                                   self.dof_idx, self.act_idx,
                                   self._mass_layout(m).ravel()]).astype(np.int64)
        self.par = np.concatenate([np.asarray(arm.kp, float), np.asarray(arm.kd, float),
                                   rng[self.act_idx, 0], rng[self.act_idx, 1],
                                   np.asarray(arm.initial_joint, float), np.zeros(3),
                                   np.eye(3).ravel()])
        n = self.dof_idx.size
        self.goal_pos = self.par[12 + 3 * n:15 + 3 * n]
        self.goal_ori = self.par[15 + 3 * n:24 + 3 * n].reshape(3, 3)
        # the gripper's actuator mapping: centre + half-range * command, then the ctrl range
        g_lo, g_hi = np.asarray(grip.actuator_min, float), np.asarray(grip.actuator_max, float)
        self.grip_mid, self.grip_half = 0.5 * (g_hi + g_lo), 0.5 * (g_hi - g_lo)
        self.grip_lo, self.grip_hi = rng[self.grip_act, 0].copy(), rng[self.grip_act, 1].copy()
        self.nsub = int(env.control_timestep / env.model_timestep)
        self.views = (d.qM, d.qfrc_bias, d.qpos, d.qvel, d.cdof, d.subtree_com, d.site_xpos,
                      d.site_xmat, d.ctrl)
        self.clock = _ObservableClock.of(env)
        steps = _mujoco_steps()
        self._compiled_loop = None if steps is None else (*steps, m._address, d._address)

    def _mass_layout(self, m: mujoco.MjModel) -> np.ndarray:
        """(n, n) positions in ``qM`` of the arm's mass-matrix entries: mj_fullM of a vector that
        holds each slot's own number (a pure copy, so the map is exact)."""
        code = np.arange(1, m.nM + 1, dtype=float)
        full = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, full, code)
        sub = full[np.ix_(self.dof_idx, self.dof_idx)]
        if np.any(sub == 0):
            raise _refuse("arm joints whose inertia is not coupled in the mass matrix")
        return (sub - 1).astype(np.int64)

    # -- control -----------------------------------------------------------------------------------
    def set_goal(self, action: np.ndarray) -> None:
        """A policy step (state after mj_step1): the arm's goal, the gripper's command."""
        self.arm_goal(action)
        g0, g1 = self.grip_split
        # robosuite's gripper model ramps its own command (and keeps it across steps)
        cmd = _apply_scaling(self.grip_scaling, self.gripper.format_action(action[g0:g1]))
        self.grip.goal_qvel = cmd
        self.d.ctrl[self.grip_act] = np.clip(self.grip_mid + self.grip_half * cmd,
                                             self.grip_lo, self.grip_hi)

    def arm_goal(self, action: np.ndarray) -> None:
        """The arm's goal of a policy step's action (state after mj_step1)."""
        a0, a1 = self.arm_split
        delta = _apply_scaling(self.arm_scaling, np.asarray(action[a0:a1], float))
        _goal(self.d.site_xpos, self.d.site_xmat, self.eef, self.base, delta, self.goal_pos,
              self.goal_ori)

    def run(self, ctrl: np.ndarray | None = None) -> np.ndarray:
        """This substep's arm torques (also written, clipped, into ``ctrl``: the data's, or the
        given array, which leaves the simulation untouched)."""
        views = self.views if ctrl is None else (*self.views[:-1], ctrl)
        if not _osc(*views, self.idx, self.par, self.torques):
            self._near_singular(views[-1])
        return self.torques

    def _near_singular(self, ctrl: np.ndarray) -> None:
        """robosuite's own OSC for this substep (an arm pose near a singularity), from this
        controller's goal: the same numerics as robosuite there, not a rounding apart."""
        self.fallbacks += 1
        arm = self.arm
        arm.goal_pos, arm.goal_ori = self.goal_pos.copy(), self.goal_ori.copy()
        self.robot.composite_controller.update_state()  # the base frame
        arm.new_update = True  # read this substep's state (it does not step the physics)
        self.torques[:] = arm.run_controller()
        ctrl[self.act_idx] = np.clip(self.torques, self.par[12:12 + self.torques.size],
                                     self.par[12 + self.torques.size:12 + 2 * self.torques.size])

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        """robosuite's ``MujocoEnv.step`` with this controller: the same substeps (mj_step1, the
        policy step's goal, torques, moving objects, mj_step2, observables), time, reward and
        observations."""
        env = self.env
        if env.done:
            raise ValueError("executing action in terminated episode")
        action = np.asarray(action, dtype=float)
        if len(action) != self.action_dim:
            raise ValueError(f"environment got invalid action dimension -- expected "
                             f"{self.action_dim}, got {len(action)}")
        if env.sim is not self._sim:
            self.bind()
        env.timestep += 1
        self.clock.load()
        if self._loop_in_compiled_code():
            self._compiled_substeps(action)
        else:
            self._python_substeps(action)
        self.clock.flush()
        env.cur_time += env.control_timestep
        reward, done, info = env._post_action(action)
        return env._get_observations(), reward, done, info

    def _loop_in_compiled_code(self) -> bool:
        """Whether this step's substeps can run in one compiled loop: MuJoCo's library found,
        no moving objects to drive (Python, every substep), robosuite's observables on one
        clock, and MuJoCo's memory at most half used so far (an overflow is a MuJoCo error,
        which only the Python bindings turn into an exception)."""
        d = self.d
        return (self._compiled_loop is not None and self.clock.shared
                and not (self.env.motion_on and self.env.moving)
                and 2 * d.maxuse_arena <= d.narena)

    def _python_substeps(self, action: np.ndarray) -> None:
        m, d, clock, move = self.m, self.d, self.clock, self.env.move_objects
        step1, step2 = mujoco.mj_step1, mujoco.mj_step2
        for i in range(self.nsub):
            step1(m, d)
            if i == 0:
                self.set_goal(action)
            self.run()
            move(i == 0)  # robosuite's policy_step: the first substep of the control step
            step2(m, d)
            clock.tick()

    def _compiled_substeps(self, action: np.ndarray) -> None:
        """The substeps of :meth:`_python_substeps` (no moving objects) in compiled runs
        between the substeps after which robosuite's observables sample (their clock's
        counting is the same, done before the physics it does not read)."""
        clock, n = self.clock, self.nsub
        step1, step2, m, d = self._compiled_loop
        mujoco.mj_step1(self.m, self.d)
        self.set_goal(action)
        i, stepped = 0, True
        while i < n:
            j = i + clock.count(n - 1 - i)
            # substeps i .. j, then substep j's tick (robosuite's update, or the last one)
            k = i
            while k <= j:
                k = _substeps(step1, step2, m, d, k, j + 1, stepped, *self.views, self.idx,
                              self.par, self.torques)
                if k <= j:  # near-singular: robosuite's controller for substep k
                    self._near_singular(self.d.ctrl)
                    mujoco.mj_step2(self.m, self.d)
                    k += 1
                stepped = False
            clock.tick()
            i = j + 1


class _ObservableClock:
    """robosuite's per-substep ``Observable.update`` for observables that share one clock.

    Every enabled observable without a delay counts the same substep time and samples on the
    same substep; between samples an update only adds the timestep. So the shared counter is
    advanced alone; on a substep where robosuite would sample, the observables get the counter
    and robosuite's own update runs (same sensors, same order); one that only ends a period
    already sampled is robosuite's ``t %= period`` and ``sampled = False``, done here once
    instead of in a loop over the observables.
    The counter is read from the observables at the start of every control step (a reset or a
    forced update in between moves them), and a step whose observables do not share one clock
    runs robosuite's update on every substep."""

    def __init__(self, env, items):
        self.env, self.items = env, items
        self.dt = env.model_timestep
        self.shared = False
        self.t, self.sampled, self.period = 0.0, True, math.inf

    @classmethod
    def of(cls, env: Any) -> _ObservableClock | _EveryUpdate:
        from robosuite.utils.observables import NO_DELAY

        items = [o for o in env._observables.values() if o._enabled]
        if any(o._delayer is not NO_DELAY for o in items):
            return _EveryUpdate(env)
        return cls(env, items)

    def load(self) -> None:
        """The observables' shared clock now, or none (``shared`` False) if they differ."""
        items = self.items
        if not items:
            self.shared, self.period = True, math.inf
            return
        first = items[0]
        t, sampled, period = (first._time_since_last_sample, first._sampled,
                              first._sampling_timestep)
        self.shared = first._current_delay == 0.0 and all(
            o._time_since_last_sample == t and o._sampled == sampled
            and o._sampling_timestep == period and o._current_delay == 0.0 for o in items)
        self.t, self.sampled, self.period = t, sampled, period

    def count(self, limit: int) -> int:
        """The ticks of up to ``limit`` substeps that only count time, stopping before the
        first whose tick runs robosuite's update; returns how many were counted."""
        if not self.shared:
            return 0
        t, sampled, period, dt = self.t, self.sampled, self.period, self.dt
        done = 0
        while done < limit:
            nt = t + dt
            if sampled and nt >= period:
                # the end of a sampling period after its sample: robosuite's update would
                # only restart the period (t %= period, not sampled), the same float operations
                t, sampled = nt % period, False
            elif (not sampled and period >= nt) or nt >= period:
                break  # robosuite samples (or samples late) here
            else:
                t = nt
            done += 1
        self.t, self.sampled = t, sampled
        return done

    def tick(self) -> None:
        if self.count(1):
            return
        if self.shared:
            self._sync()
        self.env._update_observables()
        if self.shared:
            first = self.items[0]
            self.t, self.sampled = first._time_since_last_sample, first._sampled

    def _sync(self) -> None:
        for o in self.items:
            o._time_since_last_sample = self.t
            o._sampled = self.sampled

    def flush(self) -> None:
        """Hand the counter back to the observables (end of a control step)."""
        if self.shared:
            self._sync()


class _EveryUpdate:
    """Fallback: robosuite's update on every substep."""

    shared = False

    def __init__(self, env):
        self.env = env

    def count(self, limit: int) -> int:
        return 0

    def load(self) -> None:
        pass

    def tick(self) -> None:
        self.env._update_observables()

    def flush(self) -> None:
        pass


def check_controller(name: str) -> str:
    if name not in CONTROLLERS:
        raise RobosafeError(f"controller must be one of {', '.join(CONTROLLERS)}, got {name!r}")
    return name
