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

:func:`place` is the solver a world's reset runs (:class:`robosafe.sim.world.TaskWorld`): the
task's bodies in dependency order (a body on a region of another after that one), each on its
support, from the episode's :class:`EpisodeStart` (placement stream, jitter, a given initial
state).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import mujoco
import numpy as np

from robosafe.errors import RobosafeError, TaskError
from robosafe.sim.assets import region_articulation
from robosafe.sim.motion import World, pose_at, yaw_quat
from robosafe.tasks.ast import Pred, Region

ROUND_BUILDERS = ("fruit", "lathe", "torus", "container")
"""Builders whose footprint is a disc of the larger half extent (containers only when round:
rectangular baskets and boxes keep their rectangle)."""


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


@dataclass(frozen=True)
class Jitter:
    """Objects moved off their seeded spot by uniform xy and yaw jitter (paper 002 App. A.3:
    demonstrations "around the official grid", 0.0025 m XY and up to 15 degrees of yaw),
    drawn from their own stream ``rng``."""

    xy_m: float
    yaw_rad: float
    rng: np.random.Generator


@dataclass(frozen=True)
class EpisodeStart:
    """What one reset of a world places from (given to ``TaskWorld.reset``, as dm_control hands
    ``random_state`` to every hook): ``rng`` the episode's placement stream, ``jitter`` objects
    moved off their seeded spots, ``init_state`` poses taken from another simulator instead of
    sampled ones (its settling is the caller's: the world adds none)."""

    rng: np.random.Generator
    jitter: Jitter | None = None
    init_state: InitState | None = None


@dataclass(frozen=True)
class Placed:
    """A reset's placement: each body's start pose (centre body, w-x-y-z) and the bodies put at
    a given pose exactly (no settling drop: another simulator's reference pose is that one)."""

    poses: dict[str, tuple[np.ndarray, np.ndarray]]
    exact: frozenset[str]


def inscribed_half(half, rot) -> np.ndarray:
    """Half sizes of a world-axis-aligned rectangle (the site's proportions, or them turned a
    quarter, whichever is larger) inside a box site's rectangle turned by ``rot`` about z (a
    yawed cabinet's drawer): placement samples world rectangles, and the turned box's corners
    must not put an object outside the drawer."""
    a, b = float(half[0]), float(half[1])
    c, s = abs(float(rot[0, 0])), abs(float(rot[1, 0]))
    if s < 1e-9:
        return np.array([a, b])
    best = np.zeros(2)
    for p, q in ((a, b), (b, a)):  # its own proportions or turned a quarter (a cabinet at 90 deg)
        k = min(a / (p * c + q * s), b / (p * s + q * c))
        if k * k * p * q > best[0] * best[1]:
            best = np.array([k * p, k * q])
    return best


def shrink_rects(rects: np.ndarray, hx: float, hy: float) -> np.ndarray:
    """Rectangles (n, 4) pulled in by an object's half extents so its footprint stays inside;
    a side narrower than the object shrinks to its centre line."""
    out = np.array(rects, dtype=float)
    for lo, hi, h in ((0, 2, hx), (1, 3, hy)):
        mid = (out[:, lo] + out[:, hi]) / 2
        half = np.maximum((out[:, hi] - out[:, lo]) / 2 - h, 0.0)
        out[:, lo], out[:, hi] = mid - half, mid + half
    return out


def _line(node) -> int | None:
    return getattr(getattr(node, "pos", None), "line", None)


def init_support(init: tuple[Pred, ...] | list[Pred]) -> dict[str, Pred]:
    """Object -> its (On|In obj support) init atom."""
    out = {}
    for p in init:
        if p.name.lower() in ("on", "in", "ontop") and len(p.args) == 2:
            out.setdefault(str(p.args[0]), p)
    return out


def place(world: World, start: EpisodeStart, cfg: dict) -> Placed:
    """Every body of ``world`` on its support (``cfg``: data/world.yaml's ``placement``)."""
    return _Placer(world, start, cfg).run()


class _Placer:
    """One reset's placement solver over a built world (its model, assets and poses)."""

    def __init__(self, world: World, start: EpisodeStart, cfg: dict):
        self.w, self.start, self.cfg = world, start, cfg
        self.given = start.init_state.poses if start.init_state is not None else {}
        self.exact: set[str] = set()

    def run(self) -> Placed:
        w, rng = self.w, self.start.rng
        regions = w.problem.region_index()
        support = init_support(w.problem.init)
        placed: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        taken: dict[float, list[tuple[str, Footprint]]] = {}
        free_table = Region(name="table", target=next(iter(w.table_names), "table"),
                            ranges=((-0.35, -0.45, 0.35, 0.45),))
        # what the task places comes first (fixtures before objects, which may stand on them),
        # then what it leaves to chance, so a random spot never takes a declared region
        fixtures = [n for n in w.assets if w.assets[n].category.kind == "fixture"]
        objects = [n for n in w.assets if n not in fixtures]
        order = [n for n in fixtures + objects if n in support]
        order += [n for n in fixtures + objects if n not in support]
        pending = list(order)
        while pending:
            progressed = False
            for name in list(pending):
                atom = support.get(name)
                ref = str(atom.args[1]) if atom is not None else None
                host = regions[ref].target if ref in regions else ref
                if host is not None and host in w.assets and host not in placed:
                    continue  # on (a region of) something not placed yet
                placed[name] = self._place_one(name, ref, atom, regions, free_table, taken,
                                               rng)
                pending.remove(name)
                progressed = True
                w.kinematics()
            if not progressed:
                raise TaskError("init atoms stack objects in a cycle: " + ", ".join(pending),
                                source=w.source)
        return Placed(placed, frozenset(self.exact))

    def _place_one(self, name, ref, atom, regions, free_table, taken, rng):
        w, cfg = self.w, self.cfg
        asset = w.assets[name]
        hx, hy, hz = asset.category.half_extents
        mo = w.moving.get(name)
        if mo is not None and mo.motion_type == "waypoint" and name not in w.welded:
            # robosafe's own waypoint movers put their box centre on the path (a welded one is
            # placed as any object and pulled onto it, docs/decisions.md)
            pos, quat = pose_at(mo, 0.0, np.zeros(3), np.array([1.0, 0, 0, 0]))
            w.set_pose(name, pos, quat)
            return pos, quat
        given = self.given.get(name)
        if given is not None and asset.source_frame is not None:
            pos, quat = w.from_source(name, given.pos, given.quat)
            self.exact.add(name)
            if w.body_id[name] != w.root_id[name]:  # the file's body: the pose as given
                w.set_root_pose(name, given.pos, given.quat)
            else:
                w.set_pose(name, pos, quat)
            return pos, quat
        if ref is not None and ref in w.assets:
            base = w.sim.data.body_xpos[w.body_id[ref]]
            top = base[2] + w.assets[ref].category.half_extents[2]
            pos = np.array([base[0], base[1], top + hz + cfg["drop_m"]])
            quat = np.array([1.0, 0.0, 0.0, 0.0])
            if given is not None:
                pos[:2] = given.pos[:2]
                quat = yaw_quat(given.yaw())
        else:
            region = regions.get(ref) if ref is not None else free_table
            if region is None:
                raise TaskError(f"{name}: unknown region {ref!r}", source=w.source,
                                line=_line(atom))
            rects, yaws, floor = w.region_geometry(region)
            target = w.assets.get(region.target)
            if not region.ranges and target is not None and region.name in target.named_sites:
                # a drawer's or container's inside: the whole object goes in, not only its
                # centre (a round tomato on the rim of a drawer rolls out while settling)
                rects = shrink_rects(self._out_of_carcass(region, rects), hx, hy)
            lift = 0.0
            if region.height_ranges:
                lo, hi = region.height_ranges[0]
                lift = lo + rng.random() * (hi - lo)
            here = taken.setdefault(round(floor, 3), [])
            if given is not None:
                # the given spot, not a sampled one: no overlap test (the other simulator
                # placed it), no jitter; the height is robosafe's support surface
                pos = np.array([given.pos[0], given.pos[1], floor + hz + lift + cfg["drop_m"]])
                quat = yaw_quat(given.yaw())
                w.set_pose(name, pos, quat)
                return pos, quat
            args = (name, region.ref if ref else "table", rects, yaws, (hx, hy))
            kw = {"attempts": cfg["attempts"], "clearance": cfg["clearance_m"],
                  "line": _line(atom), "source": w.source,
                  "round": asset.category.builder in ROUND_BUILDERS
                  and (asset.category.builder != "container" or abs(hx - hy) < 0.01)}
            try:
                fp = place_footprint(*args, here, rng, **kw)
            except TaskError:
                # VLA-Arena samples objects against objects only (fixtures have their own
                # sampler), so its files may put an object on a fixture's footprint; robosafe
                # then rests the object on that fixture's top and says so once.
                fixtures = {n for n, a in w.assets.items() if a.category.kind == "fixture"}
                if asset.category.kind == "fixture":
                    raise
                objects = [t for t in here if t[0] not in fixtures]
                try:
                    fp = place_footprint(*args, objects, rng, **kw)
                except TaskError:
                    fp = self._place_as_libero(name, region.ref, args, objects, rng, kw)
                under = [n for n, other in here if n in fixtures and overlap(fp, other)]
                if under:
                    floor = max(w.sim.data.body_xpos[w.body_id[n]][2]
                                + w.assets[n].category.half_extents[2] for n in under)
                    w.notes.add(f"{name} in region {region.ref} overlaps fixture "
                                f"{', '.join(under)}: VLA-Arena does not check objects "
                                "against fixtures when placing; robosafe rests it on top")
            here.append((name, fp))
            fp = self._jitter(fp, asset)
            pos = np.array([fp.x, fp.y, floor + hz + lift + cfg["drop_m"]])
            quat = yaw_quat(fp.yaw)
        w.set_pose(name, pos, quat)
        return pos, quat

    def _place_as_libero(self, name: str, region: str, args: tuple, objects: list,
                         rng: np.random.Generator, kw: dict) -> Footprint:
        """No spot free of the objects already there: LIBERO's own rule, which compares centre
        distances with a small horizontal radius (so its files may put a bowl on a plate's
        rim). The footprint keeps the object's own extent; the overlap is said once."""
        r = self.cfg["libero_radius_m"]
        discs = [(n, Footprint(o.x, o.y, 0.0, r, r, True)) for n, o in objects]
        small = (*args[:4], (r, r))
        fp = place_footprint(*small, discs, rng, **{**kw, "clearance": 0.0, "round": True})
        fp = Footprint(fp.x, fp.y, fp.yaw, *args[4], kw["round"])
        hit = [n for n, o in objects if overlap(fp, o)]
        self.w.notes.add(f"{name} in region {region}: no spot free of {', '.join(hit)}; placed "
                         f"by LIBERO's own rule (centres {2 * r:g} m apart), overlapping them")
        return fp

    def _out_of_carcass(self, region: Region, rects: np.ndarray) -> np.ndarray:
        """An open drawer's region cut to the part pulled out of the carcass (in front of it,
        -x, for a fixture that is not turned): what is under the carcass top cannot be reached
        from above. Other regions, and turned fixtures, are left as they are."""
        w = self.w
        asset = w.assets[region.target]
        art = region_articulation(asset, region.name)
        m, d = w.model_ptr(), w.sim.data
        if art is None or m.jnt_type[m.joint(art.joint).id] != mujoco.mjtJoint.mjJNT_SLIDE:
            return rects
        bid = w.body_id[region.target]
        if not art.is_open(d.qpos[m.joint(art.joint).qposadr[0]]) or d.body_xmat[bid][0] < 0.999:
            return rects
        out = np.array(rects, dtype=float)
        out[:, 2] = np.minimum(out[:, 2], d.body_xpos[bid][0] - asset.category.half_extents[0])
        return out

    def _jitter(self, fp: Footprint, asset: Any) -> Footprint:
        """An object's seeded footprint moved by the episode's :class:`Jitter`. Applied after
        the footprint is taken, so every later draw of the episode's placement stream, and
        every other object, is the seed's own."""
        j = self.start.jitter
        if j is None or asset.category.kind != "object":
            return fp
        dx, dy = j.rng.uniform(-j.xy_m, j.xy_m, 2)
        return replace(fp, x=fp.x + float(dx), y=fp.y + float(dy),
                       yaw=fp.yaw + float(j.rng.uniform(-j.yaw_rad, j.yaw_rad)))
