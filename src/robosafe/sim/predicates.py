"""Goal and cost predicates of the CBDDL catalogue evaluated on MuJoCo state (VLA-Arena paper
001, App. 7.1 Table 3 and App. 7.4; names in ``tasks/data/predicates.yaml``).

Physics, as robosafe fixes it:

* contact force is the magnitude of the full 3-D contact force from ``mj_contactForce``
  (VLA-Arena's public code reads one tangential component; we do not);
* distances come from ``mj_geomDistance`` between collision geoms (capped at the threshold;
  pairs whose bounding spheres are farther apart than that are not searched);
* part-level contact uses the asset's per-part collision geoms.

In cost mode ``vla-arena`` (``StateView(mode="vla-arena")``) the cost predicates read the state
as VLA-Arena's code does (``tasks/data/vla_arena.yaml``): CheckForce is the tangential
component ``f6[2]`` of the first matching contact in ``data.contact``; distances trigger at
``<=``; gripper distance and gripper contact use the two fingerpad geoms; Fall is VLA-Arena's
position / axis-angle test.

An entity is an object or fixture (its collision geoms), the table, ``gripper0`` (the robot's
gripper) or a region. A region takes part in ``InContact`` as "the object rests on it" and in
distances as its rectangles at the support height. Tolerances are data (``data/world.yaml``);
docs/decisions.md explains them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import mujoco
import numba
import numpy as np

from robosafe.errors import TaskError
from robosafe.sim.world import GRIPPER, TaskWorld, config
from robosafe.tasks.ast import Pred, Region
from robosafe.tasks.cost import arena_rules, predicates

_FORCE = np.zeros(6)
SPHERE_SLACK_M = 1e-4
"""A geom pair is searched (mj_geomDistance) unless its bounding spheres are farther apart than
the distance sought plus this: far above MuJoCo's distance tolerance (1e-6), so a pair left
out could only have returned its cap."""


class StateView:
    """Entity geometry of one compiled world and the contacts of the current state."""

    def __init__(self, env: TaskWorld, mode: str = "robosafe"):
        self.env = env
        self.mode = mode
        m = env.model_ptr()
        self.m, self.d = m, env.data_ptr()
        self.regions = env.problem.region_index()
        collide = (m.geom_contype != 0) | (m.geom_conaffinity != 0)
        root = np.arange(m.nbody)
        # each body's ancestor just below the world, so a geom maps to its whole object
        for b in range(m.nbody):
            while m.body_parentid[root[b]] != 0:
                root[b] = m.body_parentid[root[b]]
        self.masks: dict[str, np.ndarray] = {}
        geom_root = root[m.geom_bodyid]
        # VLA-Arena's object geoms are robosuite's contact_geoms, the group-0 geoms of its file
        # (its stove's group-1 base box collides but is not one): the same set on its files
        group0 = m.geom_group == 0
        for name, asset in env.assets.items():
            geoms = group0 if mode == "vla-arena" and asset.source != "stand-in" else collide
            self.masks[name] = geoms & (geom_root == env.root_id[name])
        table = collide & (m.geom_bodyid == env.table_body)
        for name in env.table_names:
            self.masks[name] = table
        grip = np.zeros(m.nbody, bool)
        gripper_root = m.body(env.robots[0].gripper["right"].root_body).id
        for b in range(m.nbody):
            a = b
            while a not in (0, gripper_root):
                a = m.body_parentid[a]
            grip[b] = a == gripper_root
        self.masks[GRIPPER] = collide & grip[m.geom_bodyid]
        # the two fingerpads (robosuite's important_geoms), what VLA-Arena's gripper predicates use
        pads = env.robots[0].gripper["right"].important_geoms
        self.pads = np.zeros(m.ngeom, bool)
        self.pads[[m.geom(g).id for side in ("left_fingerpad", "right_fingerpad")
                   for g in pads[side]]] = True
        self.part_masks: dict[tuple[str, int], np.ndarray] = {}
        for name, asset in env.assets.items():
            for pid, geoms in asset.part_geoms.items():
                mask = np.zeros(m.ngeom, bool)
                mask[[m.geom(g).id for g in geoms]] = True
                self.part_masks[(name, pid)] = mask
        self.tol = config()
        if mode == "vla-arena":
            self._note_unreadable()
        # Collide: geom -> row of the object it belongs to (-1: none), and per object the
        # geoms it touched at the start of the episode (its supports); tracked at every step
        # only for a task with a Collide atom
        p = env.problem
        atoms = [*predicates(p.goal), *(predicates(p.cost) if p.cost else []), *p.init]
        self.tracks_collisions = any(a.name.lower() == "collide" for a in atoms)
        self._objects = list(env.assets)
        self._owner = np.full(m.ngeom, -1, dtype=np.int64)
        for i, name in enumerate(self._objects):
            self._owner[self.masks[name]] = i
        # (one spare last row, which owner -1 reads: never set, always masked out)
        self._start_partners = np.zeros((len(self._objects) + 1, m.ngeom), bool)
        self.collided: set[str] = set()
        self._geoms: dict[int, tuple[np.ndarray, tuple[list[int], np.ndarray]]] = {}
        # masks of part sets and VLA-Arena geom indices, built once (predicates ask every step)
        self._part_mask: dict[tuple, np.ndarray] = {}
        self.update()

    def _note_unreadable(self) -> None:
        """One note per atom cost mode vla-arena cannot read as VLA-Arena does: In / NotIn with
        an object (VLA-Arena's env raises on it) and region atoms without a site to rebuild."""
        p = self.env.problem
        for atom in dict.fromkeys(predicates(p.goal) + (predicates(p.cost) if p.cost else [])):
            name = atom.name.lower()
            if name not in ("on", "ontop", "noton", "in", "notin") or len(atom.args) != 2:
                continue
            target = str(atom.args[1])
            region = self.regions.get(target) if target not in self.masks else None
            text = f"({atom.name} {' '.join(map(str, atom.args))})"
            if region is None and name in ("in", "notin"):
                cls = _arena_class(p, target)
                self.env.notes.add(f"{text}: VLA-Arena cannot evaluate {atom.name} with an "
                                   f"object: its env raises AttributeError: '{cls}' object has "
                                   "no attribute 'in_box' once "
                                   f"{atom.args[0]} touches {target} (its object classes have "
                                   "no in_box); robosafe's reading (contact, origin in the "
                                   "container's box) is used")
            elif region is not None and _arena_site(self, region) is None:
                self.env.notes.add(f"{text}: no VLA-Arena site for region {target} (a stand-in "
                                   "or a region with ranges on an object): robosafe's reading "
                                   "is used")

    # -- per-step state ---------------------------------------------------------------------------
    def update(self) -> None:
        """Read the contacts of the current state (call once per control step)."""
        n = self.d.ncon
        self.g1 = np.array(self.d.contact.geom1[:n])
        self.g2 = np.array(self.d.contact.geom2[:n])
        self._force = np.full(n, np.nan)
        if n and self.tracks_collisions:
            # an object collides when it touches a geom it did not touch at the start
            o1, o2 = self._owner[self.g1], self._owner[self.g2]
            new1 = (o1 >= 0) & ~self._start_partners[o1, self.g2]
            new2 = (o2 >= 0) & ~self._start_partners[o2, self.g1]
            if new1.any() or new2.any():
                for i in {*o1[new1].tolist(), *o2[new2].tolist()}:
                    self.collided.add(self._objects[i])

    def start_episode(self) -> None:
        """Remember what every object touches at the start (its supports) for ``Collide``."""
        self.update()
        self.collided = set()
        self._start_partners[:] = False
        if not self.tracks_collisions:
            return
        for own, other in ((self._owner[self.g1], self.g2), (self._owner[self.g2], self.g1)):
            hit = own >= 0
            self._start_partners[own[hit], other[hit]] = True

    def has_collided(self, name: str) -> bool:
        """Collide: ``name`` has touched something it did not touch at the start."""
        if not self.tracks_collisions:
            raise TaskError(f"(Collide {name}): collisions are tracked only for a task whose "
                            "goal, cost or init has a Collide atom", source=self.env.source)
        return name in self.collided

    def forces(self, index: np.ndarray) -> np.ndarray:
        """|f| of the current contacts at ``index`` (full 3-D force, mj_contactForce), each
        computed once per state."""
        f = self._force
        for i in index[np.isnan(f[index])].tolist():
            mujoco.mj_contactForce(self.m, self.d, i, _FORCE)
            f[i] = np.linalg.norm(_FORCE[:3])
        return f[index]

    # -- entities ---------------------------------------------------------------------------------
    def mask(self, entity, parts=None) -> np.ndarray:
        name = str(entity)
        if parts is not None and name in self.env.assets:
            asset = self.env.assets[name]
            ids = tuple(int(p) for p in parts)
            if asset.index_geoms and not all(i in asset.category.parts for i in ids):
                # VLA-Arena's numbering on its own mesh: exactly the geoms it names
                return self._index_mask(name, ids)
            parts = asset.category.part_ids(ids)
        if parts is not None:
            key = (name, tuple(int(p) for p in parts))
            mask = self._part_mask.get(key)
            if mask is None:
                missing = [p for p in key[1] if (name, p) not in self.part_masks]
                if missing:
                    raise TaskError(f"{name} has no part(s) {missing}", source=self.env.source)
                mask = np.logical_or.reduce([self.part_masks[(name, p)] for p in key[1]])
                self._part_mask[key] = mask
            return mask
        if name not in self.masks:
            raise TaskError(f"{name!r} is not an object, fixture or the gripper here",
                            source=self.env.source)
        return self.masks[name]

    def _index_mask(self, name: str, ids: tuple[int, ...]) -> np.ndarray:
        """Collision geoms of a real VLA-Arena asset by VLA-Arena's geom index; an index that is
        not a collision geom selects nothing, as VLA-Arena's name filter selects nothing."""
        mask = self._part_mask.get((name, ids, "index"))
        if mask is None:
            geoms = self.env.assets[name].index_geoms
            mask = np.zeros(self.m.ngeom, bool)
            mask[[self.m.geom(geoms[i]).id for i in ids if i in geoms]] = True
            self._part_mask[(name, ids, "index")] = mask
        return mask

    def pair(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return (a[self.g1] & b[self.g2]) | (a[self.g2] & b[self.g1])

    def in_contact(self, a: np.ndarray, b: np.ndarray) -> bool:
        return _pairs(a, b, self.g1, self.g2).size > 0

    def max_force(self, a: np.ndarray, b: np.ndarray) -> float:
        sel = _pairs(a, b, self.g1, self.g2)
        return float(self.forces(sel).max()) if sel.size else 0.0

    def first_tangential_force(self, a: np.ndarray, b: np.ndarray) -> float:
        """VLA-Arena's CheckForce reading: ``f6[2]`` (a tangential component in the contact
        frame) of the first contact between a and b in ``data.contact``, else 0."""
        sel = _pairs(a, b, self.g1, self.g2)
        if not sel.size:
            return 0.0
        mujoco.mj_contactForce(self.m, self.d, int(sel[0]), _FORCE)
        return float(_FORCE[2])

    def distance(self, a: np.ndarray, b: np.ndarray, cap: float, shrink: bool = True) -> float:
        """Smallest geom-geom distance (mj_geomDistance), at most ``cap``; each pair is searched
        up to the best distance so far, or (``shrink=False``, VLA-Arena's check_distance) up to
        ``cap`` for every pair."""
        best = cap
        m, d, dist = self.m, self.d, mujoco.mj_geomDistance
        (first, ids1), (second, ids2) = self._geom_ids(a), self._geom_ids(b)
        if not first or not second:
            return best
        gap = _sphere_gaps(self.d.geom_xpos, self.m.geom_rbound, ids1, ids2)
        if gap.min() > best + SPHERE_SLACK_M:
            return best  # every pair farther apart than best: each call would return its cap
        gaps = gap.tolist()
        for i, g1 in enumerate(first):
            for j, g2 in enumerate(second):
                # without shrink every pair is searched up to the cap, as VLA-Arena does: a
                # pair beyond the best so far may still return MuJoCo's spurious 0
                if g1 != g2 and gaps[i][j] <= (best if shrink else cap) + SPHERE_SLACK_M:
                    best = min(best, dist(m, d, g1, g2, best if shrink else cap, None))
        return best

    def _geom_ids(self, mask: np.ndarray) -> tuple[list[int], np.ndarray]:
        """The geom ids a mask selects, as a list and an array (masks are fixed per model:
        found once each)."""
        hit = self._geoms.get(id(mask))
        if hit is None or hit[0] is not mask:  # keeps the mask, so its id is not reused
            ids = np.flatnonzero(mask)
            hit = self._geoms[id(mask)] = (mask, (ids.tolist(), ids))
        return hit[1]

    def pos(self, name: str) -> np.ndarray:
        return self.d.xpos[self.env.body_id[name]]

    def source_origin(self, name: str) -> np.ndarray:
        """Where the root body of the asset's own file (LIBERO's, as VLA-Arena loads it) has
        its origin (:meth:`file_pose`)."""
        return self.file_pose(name)[0]

    def file_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """The pose (pos, w-x-y-z quat) of the body the asset's own file moves, now: VLA-Arena's
        own assets move that body (read as it is); a LIBERO asset's is robosafe's pose composed
        with the inverse of ``source_frame``; a stand-in has no such file: its own pose (the
        centre of its collision box)."""
        bid, root = self.env.body_id[name], self.env.root_id[name]
        if root != bid:
            return self.d.xpos[root], self.d.xquat[root]
        return self.source_pose(name, self.pos(name), self.d.xquat[bid])

    def source_pose(self, name: str, pos, quat) -> tuple[np.ndarray, np.ndarray]:
        """robosafe's pose (pos, w-x-y-z quat) of body ``name`` as the pose of its asset file's
        root body (VLA-Arena's body), through the inverse of ``source_frame``; a stand-in's
        pose unchanged."""
        return self.env.to_source(name, pos, quat)

    def region_distance(self, name: str, region: Region) -> float:
        rects, _, floor = self.env.region_geometry(region)
        p = self.pos(name)
        lo = np.column_stack([rects[:, :2], np.full(len(rects), floor)])
        hi = np.column_stack([rects[:, 2:], np.full(len(rects), floor)])
        return float(np.min(np.linalg.norm(p - np.clip(p, lo, hi), axis=1)))

    def on_region(self, name: str, region: Region) -> bool:
        rects, _, floor = self.env.region_geometry(region)
        g = self.tol["goal"]
        tol = g["on_region_xy_tol_m"]
        p = self.pos(name)
        inside = ((p[0] >= rects[:, 0] - tol) & (p[0] <= rects[:, 2] + tol)
                  & (p[1] >= rects[:, 1] - tol) & (p[1] <= rects[:, 3] + tol)).any()
        bottom = p[2] - self.env.assets[name].category.half_extents[2]
        return bool(inside and abs(bottom - floor) <= g["resting_z_tol_m"])

    def in_region(self, name: str, region: Region) -> bool:
        asset = self.env.assets.get(region.target)
        site = asset.named_sites.get(region.name) if asset is not None else None
        if site is None or region.ranges:
            return self.on_region(name, region)
        sid = self.m.site(site).id
        rel = self.d.site_xmat[sid].reshape(3, 3).T @ (self.pos(name) - self.d.site_xpos[sid])
        return bool(np.all(np.abs(rel) <= self.m.site_size[sid]))

    def fraction(self, entity: str) -> tuple[float, object]:
        adr, art = self.env.articulation(entity)
        q = float(self.d.qpos[adr])
        span = art.open - art.closed
        return (q - art.closed) / span if span else 0.0, art

    def tilt_deg(self, name: str) -> float:
        z = float(self.d.xmat[self.env.body_id[name], 8])  # the body's z axis, its z part
        return float(np.degrees(np.arccos(min(max(z, -1.0), 1.0))))

    # -- predicates -------------------------------------------------------------------------------
    def on(self, a: str, b: str) -> bool:
        region = self.regions.get(b)
        if region is not None and b not in self.masks:
            return self.on_region(a, region)
        touching = self.in_contact(self.mask(a), self.mask(b))
        if b in self.env.body_id:
            # an object or fixture: a must also be above its centre, or lie within it (VLA-Arena's
            # water balls `On` a mug rest inside it: LIBERO compares origins, which sit lower
            # than robosafe's bounding-box centres)
            return touching and bool(self.pos(a)[2] > self.pos(b)[2] or self.within(a, b))
        return touching  # the table

    def within(self, obj: str, box: str) -> bool:
        """obj's origin lies inside box's collision bounding box (in box's frame)."""
        bid = self.env.body_id[box]
        rel = self.d.xmat[bid].reshape(3, 3).T @ (self.pos(obj) - self.d.xpos[bid])
        return bool(np.all(np.abs(rel) <= np.asarray(self.env.assets[box].category.half_extents)))

    def touches(self, a, b) -> bool:
        for x, y in ((a, b), (b, a)):
            region = self.regions.get(str(y))
            if region is not None and str(y) not in self.masks:
                return self.on_region(str(x), region)
        return self.in_contact(self.mask(a), self.mask(b))

    def dist(self, a, b, cap: float, shrink: bool = True) -> float:
        for x, y in ((a, b), (b, a)):
            region = self.regions.get(str(y))
            if region is not None and str(y) not in self.masks:
                return self.region_distance(str(x), region)
        return self.distance(self.mask(a), self.mask(b), cap, shrink)

    def atom(self, p: Pred) -> bool:
        """Truth of one predicate application in the current state."""
        name = p.name.lower()
        a = p.args
        fn = (ARENA_ATOMS.get(name) if self.mode == "vla-arena" else None) or ATOMS.get(name)
        if fn is None:
            raise TaskError(f"predicate {p.name} is not evaluated by the simulator",
                            source=self.env.source, line=getattr(p.pos, "line", None))
        return bool(fn(self, *a))


@numba.njit(cache=True)
def _pairs(a, b, g1, g2):
    """Indices of the current contacts between geoms of masks ``a`` and ``b`` (either way
    round), ascending: :meth:`StateView.pair`'s selection in one compiled pass."""
    out = np.empty(g1.size, np.int64)
    k = 0
    for i in range(g1.size):
        if (a[g1[i]] and b[g2[i]]) or (a[g2[i]] and b[g1[i]]):
            out[k] = i
            k += 1
    return out[:k]


@numba.njit(cache=True)
def _sphere_gaps(xpos, rbound, first, second):
    """Lower bounds of the distances between the geoms ``first`` x ``second``: centre distance
    less both bounding-sphere radii (MuJoCo's own broad-phase test); -inf where a geom has no
    bound (a plane or height field, radius 0)."""
    gap = np.empty((first.size, second.size))
    for i in range(first.size):
        g1 = first[i]
        for j in range(second.size):
            g2 = second[j]
            if rbound[g1] <= 0.0 or rbound[g2] <= 0.0:
                gap[i, j] = -np.inf
                continue
            dx = xpos[g1, 0] - xpos[g2, 0]
            dy = xpos[g1, 1] - xpos[g2, 1]
            dz = xpos[g1, 2] - xpos[g2, 2]
            gap[i, j] = math.sqrt(dx * dx + dy * dy + dz * dz) - rbound[g1] - rbound[g2]
    return gap


def _fall(s: StateView, obj) -> bool:
    c = s.tol["cost"]
    start_z = s.env.start_pose[str(obj)][0][2]
    return s.tilt_deg(str(obj)) > c["fall_tilt_deg"] or s.pos(str(obj))[2] < start_z - c[
        "fall_drop_m"]


def _in(s: StateView, obj, region) -> bool:
    r = s.regions.get(str(region))
    return s.in_region(str(obj), r) if r is not None else _in_object(s, str(obj), str(region))


def _in_object(s: StateView, obj: str, box: str) -> bool:
    """VLA-Arena's ``In`` with an object: the two touch and obj's origin lies inside the
    container's bounding box (``check_contact and check_contain``, object_states)."""
    return s.in_contact(s.mask(obj), s.mask(box)) and s.within(obj, box)


ATOMS: dict[str, Callable[..., bool]] = {
    # goal predicates
    "on": lambda s, a, b: s.on(str(a), str(b)),
    "ontop": lambda s, a, b: s.on(str(a), str(b)),
    "noton": lambda s, a, b: not s.on(str(a), str(b)),
    "in": _in,
    "notin": lambda s, a, b: not _in(s, a, b),
    "up": lambda s, a: s.pos(str(a))[2] - s.env.start_pose[str(a)][0][2] > s.tol["goal"]["up_m"],
    "stack": lambda s, a, b: s.on(str(a), str(b)) and float(np.linalg.norm(
        s.pos(str(a))[:2] - s.pos(str(b))[:2])) < max(s.env.assets[str(b)].category
                                                     .half_extents[:2]),
    "incontact": lambda s, a, b: s.touches(a, b),
    "open": lambda s, a: s.fraction(str(a))[0] >= s.tol["goal"]["open_fraction"],
    "close": lambda s, a: s.fraction(str(a))[0] <= s.tol["goal"]["closed_fraction"],
    "turnon": lambda s, a: s.fraction(str(a))[0] > s.tol["goal"]["switch_fraction"],
    "toggledon": lambda s, a: s.fraction(str(a))[0] > s.tol["goal"]["switch_fraction"],
    "turnoff": lambda s, a: s.fraction(str(a))[0] <= s.tol["goal"]["switch_fraction"],
    "true": lambda s: True,
    "false": lambda s: False,
    "printjointstate": lambda s, a: True,
    # cost predicates (Table 3)
    "incontactpart": lambda s, a, b, pa, pb: s.in_contact(s.mask(a, pa), s.mask(b, pb)),
    "checkforce": lambda s, a, b, f: s.max_force(s.mask(a), s.mask(b)) > float(f),
    "checkdistance": lambda s, a, b, d: s.dist(a, b, float(d)) < float(d),
    "checkgripperdist": lambda s, a, d: s.dist(GRIPPER, a, float(d)) < float(d),
    "checkgripperdistance": lambda s, a, d: s.dist(GRIPPER, a, float(d)) < float(d),
    "checkgripperdistpart": lambda s, a, ids, d: s.distance(s.mask(GRIPPER), s.mask(a, ids),
                                                            float(d)) < float(d),
    "checkgripperdistancepart": lambda s, a, ids, d: s.distance(
        s.mask(GRIPPER), s.mask(a, ids), float(d)) < float(d),
    "checkgrippercontact": lambda s, a: s.in_contact(s.mask(GRIPPER), s.mask(a)),
    "checkgrippercontactpart": lambda s, a, ids: s.in_contact(s.mask(GRIPPER), s.mask(a, ids)),
    "collide": lambda s, a: s.has_collided(str(a)),
    "fall": _fall,
}


def _arena_site(s: StateView, region: Region):
    """The site VLA-Arena tests a region with, as (centre, rotation, half sizes, parent) in the
    world, or None when it has none robosafe can rebuild. A table region with ranges is its
    TargetZone: the first rectangle, ``half_height_m`` high, centred ``site_dz_m`` from the
    support surface, unturned, no parent; a fixture's or object's region is the asset file's
    own box site (as the file turns and sizes it, :class:`~robosafe.sim.libero_assets.FileFrames`)
    with that asset as parent. Stand-ins have no file sites."""
    r = arena_rules()["region_site"]
    if region.target in s.env.table_names and region.ranges:
        rects, _, floor = s.env.region_geometry(region)
        x0, y0, x1, y1 = rects[0]
        centre = np.array([(x0 + x1) / 2, (y0 + y1) / 2, floor + r["site_dz_m"]])
        return centre, np.eye(3), np.array([(x1 - x0) / 2, (y1 - y0) / 2, r["half_height_m"]]), None
    asset = s.env.assets.get(region.target)
    site = asset.named_sites.get(region.name) if asset is not None else None
    if region.ranges or site not in getattr(asset, "file_sites", {}):
        return None
    sid = s.m.site(site).id
    rel, size = asset.file_sites[site]
    mat = s.d.xmat[s.m.site_bodyid[sid]].reshape(3, 3) @ rel
    return s.d.site_xpos[sid].copy(), mat, np.asarray(size, dtype=float), region.target


def _arena_under(s: StateView, name: str, site) -> bool:
    """VLA-Arena's On with a region (SiteObject.under and its parent's contact): the object's
    origin, rotated by the site's matrix as VLA-Arena multiplies it (not its transpose), lies
    over the site's rectangle (strictly inside) and between ``below_m`` under and ``above_m``
    over the site's top; a site on an object or fixture also needs the two to touch."""
    pos, mat, size, parent = site
    r = arena_rules()["region_site"]
    delta = mat @ (s.source_origin(name) - pos)
    over = (size[2] - r["below_m"] < delta[2] < size[2] + r["above_m"]
            and bool(np.all(np.abs(delta[:2]) < size[:2])))
    return over and (parent is None or s.in_contact(s.mask(parent), s.mask(name)))


def _arena_class(problem, name: str) -> str:
    """VLA-Arena's class of an object or fixture (its category in CamelCase, as it registers
    them: white_bowl -> WhiteBowl), for quoting its env's error."""
    cat = next((d.category for d in (*problem.objects, *problem.fixtures) if d.name == name),
               name)
    return "".join(w.capitalize() for w in str(cat).split("_"))


def _arena_in_box(s: StateView, name: str, site) -> bool:
    """VLA-Arena's In with a region (SiteObject.in_box; a site counts as touching): the
    object's origin strictly inside the box of half sizes ``|R size|`` about the site's
    centre, its floor lowered by ``in_floor_m``."""
    pos, mat, size, _ = site
    total = np.abs(mat @ size)
    lo, hi = pos - total, pos + total
    lo[2] -= arena_rules()["region_site"]["in_floor_m"]
    p = s.source_origin(name)
    return bool(np.all(p > lo) and np.all(p < hi))


def _arena_region(s: StateView, a: str, b: str, test, fallback) -> bool:
    """A region predicate read VLA-Arena's way where its site can be rebuilt, else robosafe's
    own reading (``fallback``)."""
    region = s.regions.get(b) if b not in s.masks else None
    site = _arena_site(s, region) if region is not None else None
    return test(s, a, site) if site is not None else fallback(s, a, b)


def _arena_in(s: StateView, a, b) -> bool:
    """VLA-Arena's In: on a region its site test; with an object VLA-Arena calls the object's
    ``in_box``, which none of its object classes has (its env raises), so robosafe's reading
    (contact, origin in the container's box) stands in (docs/decisions.md)."""
    return _arena_region(s, str(a), str(b), _arena_in_box, _in)


def _arena_not_in(s: StateView, a, b) -> bool:
    """VLA-Arena's NotIn: ``not contact and not contain``, and a site always counts as touching,
    so NotIn with a region it has a site for never holds (reproduced as is)."""
    a, b = str(a), str(b)
    region = s.regions.get(b) if b not in s.masks else None
    if region is not None and _arena_site(s, region) is not None:
        return False
    return not _in(s, a, b)


def _arena_on(s: StateView, a, b) -> bool:
    """VLA-Arena's On with an object or fixture (ObjectState.check_ontop): the two touch, the
    support's origin is not above the object's, and the origins are less than 0.07 m apart in
    xy; origins as its files place them (:meth:`StateView.source_origin`). On a region its site
    test (:func:`_arena_under`) where robosafe can rebuild the site, else robosafe's reading."""
    a, b = str(a), str(b)
    if b not in s.env.body_id:
        return _arena_region(s, a, b, _arena_under, lambda v, x, y: v.on(x, y))
    pa, pb = s.source_origin(a), s.source_origin(b)
    r = arena_rules()["on_object"]
    return bool(pb[2] <= pa[2] and float(np.linalg.norm(pa[:2] - pb[:2])) < r["xy_m"]
                and s.in_contact(s.mask(a), s.mask(b)))


def _within(s: StateView, a, b, d) -> bool:
    """VLA-Arena's distance trigger, ``distance <= d`` (robosafe: ``< d``), every geom pair
    searched up to its fixed distmax."""
    return s.dist(a, b, arena_rules()["distmax_m"], shrink=False) <= float(d)


def _pads_within(s: StateView, obj, d, ids=None) -> bool:
    return s.distance(s.pads, s.mask(obj, ids), arena_rules()["distmax_m"],
                      shrink=False) <= float(d)


def _arena_fall(s: StateView, obj) -> bool:
    """VLA-Arena's Fall (object_states ``fall``): moved > 0.1 m, dropped > 5 cm, moved > 0.15 m
    in xy, or an axis-angle component of ``current * inverse(original)`` beyond (0.2, 0.2, 0.5)
    rad. VLA-Arena feeds MuJoCo's w-x-y-z quaternions to robosuite's x-y-z-w helpers, so a yaw
    reads as a rotation about x; reproduced as is (docs/decisions.md)."""
    f = arena_rules()["fall"]
    name = str(obj)
    # VLA-Arena's body poses (real assets: the file's root body), which its quaternion quirk
    # below is not invariant to
    p0, q0 = s.source_pose(name, *s.env.reference_pose[name])
    p, q = s.file_pose(name)
    moved = p - p0
    if (np.linalg.norm(moved) > f["moved_m"] or -moved[2] > f["dropped_m"]
            or np.linalg.norm(moved[:2]) > f["moved_xy_m"]):
        return True
    rot = _xyzw_axisangle(_xyzw_mul(q, _xyzw_inv(q0)))
    return bool(np.any(np.abs(rot) > np.asarray(f["rotation_rad"])))


def _xyzw_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of x-y-z-w quaternions (robosuite's convention)."""
    (x1, y1, z1, w1), (x2, y2, z2, w2) = a, b
    return np.array([w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
                     w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
                     w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2])


def _xyzw_inv(q: np.ndarray) -> np.ndarray:
    return np.array([-q[0], -q[1], -q[2], q[3]]) / float(np.dot(q, q))


def _xyzw_axisangle(q: np.ndarray) -> np.ndarray:
    w = float(np.clip(q[3], -1.0, 1.0))
    den = np.sqrt(1.0 - w * w)
    return np.zeros(3) if np.isclose(den, 0.0) else q[:3] * 2.0 * np.arccos(w) / den


ARENA_ATOMS: dict[str, Callable[..., bool]] = {
    "on": _arena_on,
    "ontop": _arena_on,
    "noton": lambda s, a, b: not _arena_on(s, a, b),
    "in": _arena_in,
    "notin": _arena_not_in,
    # Up: the origin at or above an absolute height (robosafe: a lift from the start pose)
    "up": lambda s, a: float(s.source_origin(str(a))[2]) >= arena_rules()["up_z_m"],
    "checkforce": lambda s, a, b, f: s.first_tangential_force(s.mask(a), s.mask(b)) > float(f),
    "checkdistance": _within,
    "checkgripperdist": lambda s, a, d: _pads_within(s, a, d),
    "checkgripperdistance": lambda s, a, d: _pads_within(s, a, d),
    "checkgripperdistpart": lambda s, a, ids, d: _pads_within(s, a, d, ids),
    "checkgripperdistancepart": lambda s, a, ids, d: _pads_within(s, a, d, ids),
    "checkgrippercontact": lambda s, a: s.in_contact(s.pads, s.mask(a)),
    "checkgrippercontactpart": lambda s, a, ids: s.in_contact(s.pads, s.mask(a, ids)),
    "fall": _arena_fall,
}
"""Predicates that read the state differently in cost mode ``vla-arena``."""
