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
"""

from __future__ import annotations

from typing import Any

import numpy as np

from robosafe.errors import TaskError
from robosafe.tasks.ast import MovingObject


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
