"""Seeded initial placement of a task's objects (LIBERO BDDL ``:regions`` / ``:init`` semantics,
VLA-Arena paper 001 App. 7.1).

A region is a list of rectangles ``(x_min y_min x_max y_max)`` in the frame of its target (the
table-top centre, or a fixture's site). An object is placed by picking one rectangle (with
probability proportional to its area; degenerate rectangles are points), a point uniformly in
it, a yaw from the matching ``:yaw_rotation`` range and a lift from ``:height_ranges``; the
candidate is rejected while its footprint (an oriented rectangle of the asset's half extents,
grown by a clearance; a disc for round objects, as LIBERO's sampler compares horizontal radii)
overlaps anything already placed on the same surface. After
``attempts`` rejections the region is declared full: a TaskError names the object, the region
and the objects already there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from robosafe.errors import RobosafeError, TaskError


@dataclass(frozen=True)
class Footprint:
    """An oriented rectangle on a support surface (a disc of radius max(hx, hy) if round)."""

    x: float
    y: float
    yaw: float
    hx: float
    hy: float
    round: bool = False

    def corners(self) -> np.ndarray:
        c, s = np.cos(self.yaw), np.sin(self.yaw)
        local = np.array([[1, 1], [1, -1], [-1, -1], [-1, 1]]) * [self.hx, self.hy]
        return local @ np.array([[c, s], [-s, c]]) + [self.x, self.y]

    def axes(self) -> np.ndarray:
        c, s = np.cos(self.yaw), np.sin(self.yaw)
        return np.array([[c, s], [-s, c]])


@dataclass(frozen=True)
class BodyPose:
    """A body's world pose: its origin and its w-x-y-z quaternion (MuJoCo's order)."""

    pos: tuple[float, float, float]
    quat: tuple[float, float, float, float]

    def __post_init__(self) -> None:
        pos, quat = np.asarray(self.pos, dtype=float), np.asarray(self.quat, dtype=float)
        if pos.shape != (3,) or quat.shape != (4,) or not (np.all(np.isfinite(pos))
                                                           and np.all(np.isfinite(quat))):
            raise RobosafeError(f"a body pose is 3 + 4 finite numbers, got pos {self.pos!r} "
                                f"quat {self.quat!r}")
        if not np.isclose(np.linalg.norm(quat), 1.0, atol=1e-3):
            raise RobosafeError(f"quaternion {self.quat!r} is not of unit length")

    def yaw(self) -> float:
        """Heading of the body's x axis in the horizontal plane (radians)."""
        w, x, y, z = (float(v) for v in self.quat)
        return float(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))


@dataclass(frozen=True)
class InitState:
    """An initial state taken from another simulator (VLA-Arena's env after its reset), so a
    comparison of the two starts from the same placement (docs/decisions.md, "VLA-Arena
    parity").

    ``poses``: body name (a task's object or fixture) -> the pose that simulator sampled. The
    two asset libraries put a body's origin at different heights (robosafe: the centre of its
    collision box), so robosafe takes the horizontal position and the heading from it and
    rests the body on its support itself. ``reference_lift_m``: per body, how far above where
    it comes to rest the other simulator's reference pose lies (VLA-Arena samples objects
    above the table and lets them drop, and its Fall compares against the sampled pose).
    ``mover_steps``: control steps the moving objects' clock has already run.
    ``joint_qpos``: full joint name (robosuite's, ``flat_stove_1_button``) -> position of a
    drawer, door or knob: VLA-Arena samples them (its stove's knob anywhere in 0.5-2.1 rad for
    ``TurnOn``) where robosafe sets its one open / on value.
    """

    poses: Mapping[str, BodyPose]
    reference_lift_m: Mapping[str, float] = field(default_factory=dict)
    mover_steps: int = 0
    joint_qpos: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.mover_steps < 0:
            raise RobosafeError(f"mover_steps must not be negative, got {self.mover_steps}")
        bad = sorted(set(self.reference_lift_m) - set(self.poses))
        if bad:
            raise RobosafeError("reference_lift_m names bodies without a pose: " + ", ".join(bad))


def overlap(a: Footprint, b: Footprint) -> bool:
    """Separating-axis test for two oriented rectangles; two discs compare centre distances
    (LIBERO's ``ensure_valid_placement`` uses horizontal radii)."""
    if a.round and b.round:
        return bool(np.hypot(a.x - b.x, a.y - b.y) < max(a.hx, a.hy) + max(b.hx, b.hy))
    ca, cb = a.corners(), b.corners()
    for axis in np.vstack([a.axes(), b.axes()]):
        pa, pb = ca @ axis, cb @ axis
        if pa.max() <= pb.min() or pb.max() <= pa.min():
            return False
    return True


def sample_in_rects(rects: np.ndarray, yaws: np.ndarray,
                    rng: np.random.Generator) -> tuple[float, float, float]:
    """One (x, y, yaw) from rectangles (n, 4) and yaw ranges (n, 2) (or (1, 2) for all)."""
    w = np.clip(rects[:, 2] - rects[:, 0], 0, None)
    h = np.clip(rects[:, 3] - rects[:, 1], 0, None)
    area = w * h
    p = area / area.sum() if area.sum() > 0 else np.full(len(rects), 1.0 / len(rects))
    k = int(rng.choice(len(rects), p=p))
    x = rects[k, 0] + rng.random() * w[k]
    y = rects[k, 1] + rng.random() * h[k]
    lo, hi = yaws[min(k, len(yaws) - 1)]
    yaw = lo + rng.random() * (hi - lo)
    return float(x), float(y), float(yaw)


def place_footprint(name: str, region: str, rects: np.ndarray, yaws: np.ndarray,
                    half_xy: tuple[float, float], taken: list[tuple[str, Footprint]],
                    rng: np.random.Generator, *, attempts: int, clearance: float,
                    line: int | None = None, source: str | None = None,
                    round: bool = False) -> Footprint:
    """Rejection-sample a free footprint for ``name`` in ``region`` (world-frame rectangles)."""
    hx, hy = half_xy[0] + clearance / 2, half_xy[1] + clearance / 2
    for _ in range(attempts):
        x, y, yaw = sample_in_rects(rects, yaws, rng)
        cand = Footprint(x, y, yaw, hx, hy, round)
        if not any(overlap(cand, other) for _, other in taken):
            return cand
    near = sorted({n for n, _ in taken}) or ["nothing"]
    raise TaskError(f"cannot place {name} in region {region}: no collision-free spot after "
                    f"{attempts} tries (already there: {', '.join(near)}); enlarge the region "
                    f"or move objects", source=source, line=line)
