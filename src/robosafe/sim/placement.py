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

from dataclasses import dataclass

import numpy as np

from robosafe.errors import TaskError


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


def sample_in_rects(rects: np.ndarray, yaws: np.ndarray, rng: np.random.Generator):
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
