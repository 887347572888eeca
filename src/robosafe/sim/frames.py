"""Poses of a real asset's file body and of robosafe's centre body (robosafe's own frame math).

A real asset (LIBERO's or VLA-Arena's files, :mod:`robosafe.sim.libero_assets`) is moved by its
file's own body, whose origin is where the file puts it; robosafe reads and places an object by
the centre of its collision box, upright. ``frame`` is the asset's ``source_frame``: (offset,
w-x-y-z quaternion) of robosafe's body in the file body's frame (None for a stand-in, whose two
bodies are one). These two functions map a pose of one body to the pose of the other.
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np

Frame = tuple[Any, Any] | None


def from_source(frame: Frame, pos, quat) -> tuple[np.ndarray, np.ndarray]:
    """robosafe's pose of a body when the body its asset file moves is at (pos, quat) (a pose
    from VLA-Arena's env): the pose composed with ``frame``; a stand-in's pose as given."""
    if frame is None:
        return np.asarray(pos, dtype=float), np.asarray(quat, dtype=float)
    off, q_off = frame
    q_given = np.asarray(quat, dtype=float)
    shift = np.empty(3)
    mujoco.mju_rotVecQuat(shift, np.asarray(off, dtype=float), q_given)
    out = np.empty(4)
    mujoco.mju_mulQuat(out, q_given, np.asarray(q_off, dtype=float))
    return np.asarray(pos, dtype=float) + shift, out


def to_source(frame: Frame, pos, quat) -> tuple[np.ndarray, np.ndarray]:
    """The inverse of :func:`from_source`: the pose (pos, w-x-y-z quat) of the asset file's
    body (the body LIBERO's and VLA-Arena's envs move) when robosafe's pose is (pos, quat); a
    stand-in's pose unchanged."""
    if frame is None:
        return np.asarray(pos, dtype=float), np.asarray(quat, dtype=float)
    off, q_off = frame
    q_root = np.empty(4)
    mujoco.mju_negQuat(q_root, np.asarray(q_off, dtype=float))
    mujoco.mju_mulQuat(q_root, np.asarray(quat, dtype=float), q_root)
    shift = np.empty(3)
    mujoco.mju_rotVecQuat(shift, np.asarray(off, dtype=float), q_root)
    return np.asarray(pos, dtype=float) - shift, q_root
