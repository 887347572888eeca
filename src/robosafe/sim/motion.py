"""Trajectories of CBDDL moving objects (VLA-Arena paper 001, App. 7.2.3).

Each function maps time in seconds (scalar or array) to a world pose; the environment writes
the pose into the object's mocap body before every physics substep. Times come from the
simulation clock, never the wall clock, so the same seed gives the same motion.

Decisions where App. 7.2.3 is silent (docs/decisions.md, "Simulator"):

* linear: a triangle wave, p0 -> p0 + d*v_hat -> p0 over one period.
* circular: rotation about the vertical axis through the pivot; the radius is the horizontal
  offset of the start position from the pivot, the height stays the start height, and the
  object turns with the motion (its yaw advances with the angle).
* waypoint: segments of equal duration period / n_segments; with ``loop`` the last waypoint
  connects back to the first, without it the object holds the last pose. The 6-tuple's last
  three numbers are a heading direction; the orientation is the yaw-then-pitch rotation that
  takes the body x axis onto it, interpolated by SLERP.
* projectile: p0 + v0 t + g t^2 / 2 until the object would pass below ``floor_z`` (its start
  height unless given), where it rests.

Cost mode vla-arena with VLA-Arena's assets moves waypoint movers as VLA-Arena's env does
(:class:`ArenaWaypoints`): a target is written once per control step and the object follows it
through a soft weld (:func:`weld_targets`), not kinematically.

The world (:class:`robosafe.sim.world.TaskWorld`) keeps its movers' state (``motion_on``,
``frozen``, the clocks ``_substep`` and ``_motion_steps``, which robosafe.hosts.state copies)
and calls :func:`move_targets` before a control step and :func:`move_objects` before every
physics substep.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from robosafe.errors import TaskError
from robosafe.tasks.ast import MovingObject

#: a built :class:`robosafe.sim.world.TaskWorld` (not imported: the world imports this module,
#: and no two modules import each other, tests/test_layers.py)
World = Any


def _unit(v, what: str, name: str) -> np.ndarray:
    v = np.asarray(v, dtype=float)
    n = float(np.linalg.norm(v))
    if v.shape != (3,) or not np.isfinite(n) or n == 0.0:
        raise TaskError(f"moving object {name!r}: {what} must be a non-zero 3-vector")
    return v / n


def _need(mo: MovingObject, attr: str):
    value = mo.get(attr)
    if value is None:
        raise TaskError(f"moving object {mo.name!r} ({mo.motion_type}) needs :motion_{attr}",
                        line=getattr(mo.pos, "line", None), column=getattr(mo.pos, "column", None))
    return value


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of wxyz quaternions (broadcasting)."""
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack([aw * bw - ax * bx - ay * by - az * bz,
                     aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw], axis=-1)


def yaw_quat(yaw) -> np.ndarray:
    yaw = np.asarray(yaw, dtype=float)
    return np.stack([np.cos(yaw / 2), 0 * yaw, 0 * yaw, np.sin(yaw / 2)], axis=-1)


def heading_quat(direction: np.ndarray) -> np.ndarray:
    """wxyz rotation taking the x axis onto ``direction``: yaw about z, then pitch about y."""
    d = direction / np.linalg.norm(direction)
    yaw = np.arctan2(d[1], d[0])
    pitch = -np.arcsin(np.clip(d[2], -1.0, 1.0))
    q_pitch = np.array([np.cos(pitch / 2), 0.0, np.sin(pitch / 2), 0.0])
    return quat_mul(yaw_quat(yaw), q_pitch)


def slerp(q0: np.ndarray, q1: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Spherical linear interpolation between wxyz quaternions, shortest arc."""
    u = np.asarray(u, dtype=float)[..., None]
    dot = np.sum(q0 * q1, axis=-1, keepdims=True)
    q1 = np.where(dot < 0, -q1, q1)
    dot = np.abs(dot)
    theta = np.arccos(np.clip(dot, -1.0, 1.0))
    small = theta < 1e-6
    s = np.where(small, 1.0, np.sin(theta))
    w0 = np.where(small, 1.0 - u, np.sin((1.0 - u) * theta) / s)
    w1 = np.where(small, u, np.sin(u * theta) / s)
    out = w0 * q0 + w1 * q1
    return out / np.linalg.norm(out, axis=-1, keepdims=True)


def pose_at(mo: MovingObject, t: Any, p0: Any, q0: Any, *,
            floor_z: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """World position (..., 3) and wxyz orientation (..., 4) of ``mo`` at time ``t`` seconds.

    ``p0``/``q0`` are the pose the object was placed at on reset.
    """
    t = np.asarray(t, dtype=float)
    p0 = np.asarray(p0, dtype=float)
    q0 = np.asarray(q0, dtype=float)
    shape = t.shape
    kind = mo.motion_type
    if kind == "linear":
        period = float(_need(mo, "period"))
        d = float(_need(mo, "travel_dist"))
        v = _unit(_need(mo, "direction"), "motion_direction", mo.name)
        phase = np.mod(t / period, 1.0)
        s = d * np.where(phase < 0.5, 2 * phase, 2 - 2 * phase)
        return p0 + s[..., None] * v, np.broadcast_to(q0, shape + (4,)).copy()
    if kind == "circular":
        period = float(_need(mo, "period"))
        c = np.asarray(_need(mo, "center"), dtype=float)
        angle = 2 * np.pi * t / period
        off = p0[:2] - c[:2]
        cos, sin = np.cos(angle), np.sin(angle)
        x = c[0] + cos * off[0] - sin * off[1]
        y = c[1] + sin * off[0] + cos * off[1]
        pos = np.stack([x, y, np.full(shape, p0[2])], axis=-1)
        return pos, quat_mul(yaw_quat(angle), q0)
    if kind == "waypoint":
        return _waypoints(mo, t)
    if kind == "projectile":
        speed = float(_need(mo, "initial_speed"))
        v0 = speed * _unit(_need(mo, "direction"), "motion_direction", mo.name)
        g = np.asarray(mo.get("gravity", (0.0, 0.0, -9.81)), dtype=float)
        floor = p0[2] if floor_z is None else floor_z
        t_land = _landing_time(p0[2] - floor, v0[2], g[2])
        tc = np.minimum(t, t_land)[..., None]
        return p0 + v0 * tc + 0.5 * g * tc**2, np.broadcast_to(q0, shape + (4,)).copy()
    raise TaskError(f"moving object {mo.name!r}: unknown motion type {kind!r}")


def _landing_time(height: float, vz: float, gz: float) -> float:
    """First t > 0 with height + vz t + gz t^2 / 2 = 0 on the way down; inf if never."""
    if gz >= 0:
        return np.inf if vz >= 0 or height < 0 else height / -vz
    disc = vz * vz - 2 * gz * height
    return float((-vz - np.sqrt(max(disc, 0.0))) / gz)


def _waypoints(mo: MovingObject, t: np.ndarray):
    wps = np.asarray(_need(mo, "waypoints"), dtype=float)
    if wps.ndim != 2 or wps.shape[1] != 6 or len(wps) < 2:
        raise TaskError(f"moving object {mo.name!r}: :motion_waypoints needs at least two "
                        "(x y z dx dy dz) entries")
    period = float(_need(mo, "period"))
    loop = bool(mo.get("loop", False))
    pts = np.vstack([wps, wps[:1]]) if loop else wps
    quats = np.array([heading_quat(_unit(w[3:], "waypoint direction", mo.name)) for w in pts])
    n_seg = len(pts) - 1
    u = t / period * n_seg
    u = np.mod(u, n_seg) if loop else np.clip(u, 0.0, n_seg)
    seg = np.minimum(np.floor(u).astype(int), n_seg - 1)
    frac = u - seg
    pos = pts[seg, :3] + frac[..., None] * (pts[seg + 1, :3] - pts[seg, :3])
    return pos, slerp(quats[seg], quats[seg + 1], frac)


#: VLA-Arena's weld of a mover to its target (its XML processor): solref, solimp
ARENA_WELD_SOLREF = (0.02, 1.0)
ARENA_WELD_SOLIMP = (0.9, 0.95, 0.001)
_ARENA_BASE_QUAT = np.array([1.0, 1.0, 1.0, 1.0])  # its heading (0, 1, 0); magnitude 2
_ARENA_BASE_DIR = np.array([0.0, 1.0, 0.0])


def arena_heading_quat(direction) -> np.ndarray:
    """VLA-Arena's w-x-y-z orientation for a waypoint heading (its generator's mapping, not
    :func:`heading_quat`): heading (0, 1, 0) is (1, 1, 1, 1), any other the shortest-arc
    rotation from (0, 1, 0) to it applied to that, magnitude 2, the opposite heading its
    negation. Each operation is VLA-Arena's, in its order, so the floats are its floats."""
    d = np.array(direction, dtype=np.float64)
    d = d / np.linalg.norm(d)
    axis = np.cross(_ARENA_BASE_DIR, d)
    axis_norm = np.linalg.norm(axis)
    if axis_norm < 1e-6:  # along the base heading: no axis to turn about
        return _ARENA_BASE_QUAT.copy() if np.dot(_ARENA_BASE_DIR, d) > 0 else -_ARENA_BASE_QUAT
    axis = axis / axis_norm
    half = np.arccos(np.clip(np.dot(_ARENA_BASE_DIR, d), -1.0, 1.0)) / 2.0
    s = np.sin(half)
    turn = np.array([np.cos(half), axis[0] * s, axis[1] * s, axis[2] * s])
    base = _ARENA_BASE_QUAT / np.linalg.norm(_ARENA_BASE_QUAT)
    return quat_mul(turn, base) * 2.0


def _arena_slerp(q0: np.ndarray, q1: np.ndarray, alpha: float) -> np.ndarray:
    """VLA-Arena's interpolation of two unit quaternions: normalised lerp when they are within
    ~1.8 degrees (dot > 0.9995), else its SLERP formula (s0 = cos(a t) - dot sin(a t) / sin a,
    which is sin((1 - t) a) / sin a in exact arithmetic but not in floats)."""
    dot = q0[0] * q1[0] + q0[1] * q1[1] + q0[2] * q1[2] + q0[3] * q1[3]
    if dot < 0.0:
        q1, dot = -q1, -dot
    if dot > 0.9995:
        out = q0 + alpha * (q1 - q0)
        norm = np.linalg.norm(out)
        return out / norm if norm != 0 else np.array([1.0, 0.0, 0.0, 0.0])
    theta0 = np.arccos(dot)
    theta = theta0 * alpha
    sin_t, sin_t0 = np.sin(theta), np.sin(theta0)
    s0 = np.cos(theta) - dot * sin_t / sin_t0
    s1 = sin_t / sin_t0
    return s0 * q0 + s1 * q1


@dataclass(frozen=True)
class ArenaWaypoints:
    """A waypoint mover's target as VLA-Arena's generator computes it, sample by sample.

    ``points`` / ``quats``: the looped list ``w0 .. wn .. w1`` (the parser's expansion of
    VLA-Arena's forward-and-back run, robosafe.tasks.parser) and each entry's unit orientation;
    ``steps``: control steps per segment. Sample k (one per control step, the first at k = 0)
    lies ``(k mod steps) / steps`` of the way along segment ``k // steps`` of the loop: the
    ends and the fraction VLA-Arena's ping-pong uses at that sample, so the same floats."""

    points: np.ndarray
    quats: np.ndarray
    steps: int

    @classmethod
    def of(cls, mo: MovingObject, control_freq: float) -> ArenaWaypoints:
        """From a parsed waypoint mover. A VLA-Arena file's list is already the loop (the
        parser expanded its ``:motion_dt``, period = steps x segments); robosafe's own list
        without ``:motion_loop`` is run forward and back, as VLA-Arena runs every list, its
        period being the forward run."""
        wps = np.asarray(_need(mo, "waypoints"), dtype=float)
        if wps.ndim != 2 or wps.shape[1] != 6 or len(wps) < 2:
            raise TaskError(f"moving object {mo.name!r}: :motion_waypoints needs at least two "
                            "(x y z dx dy dz) entries")
        segments = len(wps) if mo.get("loop", False) else len(wps) - 1
        if not mo.get("loop", False):
            wps = np.vstack([wps, wps[-2:0:-1]])
        steps = max(1, round(float(_need(mo, "period")) * control_freq / segments))
        quats = []
        for w in wps:
            _unit(w[3:], "waypoint direction", mo.name)  # a zero heading is the file's error
            q = arena_heading_quat(w[3:])
            quats.append(q / np.linalg.norm(q))
        return cls(wps[:, :3].copy(), np.array(quats), int(steps))

    def at(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(position, w-x-y-z quaternion) of sample ``k``."""
        n = len(self.points)
        seg, step = divmod(int(k) % (n * self.steps), self.steps)
        nxt = (seg + 1) % n
        alpha = step / self.steps
        p0 = self.points[seg]
        pos = p0 + alpha * (self.points[nxt] - p0)
        return pos, _arena_slerp(self.quats[seg], self.quats[nxt], alpha)


def welded_movers(moving: Mapping[str, MovingObject], control_freq: float
                  ) -> dict[str, ArenaWaypoints]:
    """The waypoint movers of ``moving`` as VLA-Arena's env moves them (a target the object
    follows through a soft weld); the world asks for them in VLA-Arena's cost mode (the
    "steps" clock) with its own assets only. Elsewhere robosafe's kinematic mover stays
    (App. 7.2.3 gives a pose per time; a weld lags it)."""
    return {n: ArenaWaypoints.of(mo, control_freq) for n, mo in moving.items()
            if mo.motion_type == "waypoint"}


def weld_targets(worldbody: ET.Element, equality: ET.Element, roots: list[str]) -> None:
    """Per welded mover's root body a mocap target ``<root body>_mocap`` at the origin,
    appended last to the world, and a weld of the root body to it (VLA-Arena's XML processor:
    solref 0.02 1, solimp 0.9 0.95 0.001; the relative pose the identity, which MuJoCo
    computes from the reference pose there, both bodies being at the origin)."""
    for root in roots:
        worldbody.append(ET.Element("body", name=f"{root}_mocap", mocap="true", pos="0 0 0"))
        equality.append(ET.Element(
            "weld", body1=root, body2=f"{root}_mocap", relpose="0 0 0 1 0 0 0",
            solref=" ".join(map(str, ARENA_WELD_SOLREF)),
            solimp=" ".join(map(str, ARENA_WELD_SOLIMP))))


def targets_at_start(world: World) -> None:
    """Each welded mover's target where its root body was placed (VLA-Arena's reset puts
    the target at the sampled pose; the first control step moves it onto the path)."""
    d = world.sim.data
    for name, k in world.target_id.items():
        a = world.free_qpos[name]
        d.mocap_pos[k] = d.qpos[a:a + 3]
        d.mocap_quat[k] = d.qpos[a + 3:a + 7]


def move_targets(world: World) -> None:
    """Welded movers' targets to their next sample, before the control step's physics
    (VLA-Arena's env writes them before robosuite's step): sample k after k control steps
    of the clock (``InitState.mover_steps`` already run at reset)."""
    if not world.motion_on or not world.welded:
        return
    d = world.sim.data
    for name, path in world.welded.items():
        if name not in world.frozen:
            d.mocap_pos[world.target_id[name]], d.mocap_quat[world.target_id[name]] = (
                path.at(world._motion_steps))


def move_objects(world: World, policy_step: bool = False) -> None:
    """Moving objects to their pose at this substep (before the physics of the substep);
    ``policy_step``: the first substep of a control step. "seconds" clock: the simulation
    clock at every substep (App. 7.2.3); "steps": VLA-Arena's code moves each mover once per
    control step, to where the clock is after that step (k / control_freq after the k-th)."""
    if not world.motion_on or not world.moving:
        return
    t = world._substep * world.model_timestep
    world._substep += 1
    if world.motion_clock == "steps":
        if not policy_step:
            return  # VLA-Arena writes the movers' poses once per control step
        world._motion_steps += 1
        t = world._motion_steps / world.control_freq
    for name, mo in world.moving.items():
        if name in world.frozen or name in world.welded:
            continue
        p0, q0 = world.start_pose[name]
        world.set_pose(name, *pose_at(mo, t, p0, q0, floor_z=None))
