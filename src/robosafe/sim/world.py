"""A CBDDL task as a robosuite manipulation environment (VLA-Arena paper 001, Sec. 2 and App. 7).

One compiled MuJoCo model per task: the tabletop arena (the task's table fixture), the Panda
with its gripper and robosuite's operational-space controller, and every fixture and object
from the bundled asset library. Fixtures and moving objects are mocap bodies, so a reset only
writes poses (no recompilation) and a (task, seed) pair always gives the same initial state.
Objects get free joints and are placed by :mod:`robosafe.sim.placement`.

Moving objects are driven through their mocap pose before every physics substep from the
simulation clock (App. 7.2.3); the motion clock starts after the hidden settling steps.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

import mujoco
import numpy as np
from robosuite.environments.manipulation.manipulation_env import ManipulationEnv
from robosuite.models.arenas import TableArena
from robosuite.models.tasks import ManipulationTask

from robosafe.errors import TaskError
from robosafe.sim.assets import category, make_asset
from robosafe.sim.controller import CompiledController, check_controller
from robosafe.sim.libero_assets import SOURCES, arena_root, assets_root, missing_file, real_key
from robosafe.sim.motion import (
    ARENA_WELD_SOLIMP,
    ARENA_WELD_SOLREF,
    ArenaWaypoints,
    pose_at,
    yaw_quat,
)
from robosafe.sim.placement import Footprint, InitState, overlap, place_footprint
from robosafe.tasks.ast import Pred, Problem, Region
from robosafe.yamldata import load_yaml

if TYPE_CHECKING:
    from robosafe.sim.categories import Articulation

GRIPPER = "gripper0"


@cache
def config() -> dict:
    return load_yaml(resources.files("robosafe.sim").joinpath("data/world.yaml")
                     .read_text(encoding="utf-8"))


ROUND_BUILDERS = ("fruit", "lathe", "torus", "container")
"""Builders whose footprint is a disc of the larger half extent (containers only when round:
rectangular baskets and boxes keep their rectangle)."""


def is_table(category: str) -> bool:
    return category in config()["table"]["categories"]


def scene(problem_name: str) -> dict:
    """The table settings for a problem name: the first ``scenes`` prefix that matches, merged
    over the default table (``data/world.yaml``)."""
    cfg = config()
    hit = next((s for s in cfg.get("scenes", ()) if problem_name.startswith(s["prefix"])), {})
    return {**cfg["table"], **{k: v for k, v in hit.items() if k != "prefix"}}


def inscribed_half(half, rot) -> np.ndarray:
    """Half sizes of a world-axis-aligned rectangle (the site's proportions, or them turned a
    quarter, whichever is larger) inside a box site's rectangle turned by ``rot`` about z (a yawed cabinet's drawer): placement samples
    world rectangles, and the turned box's corners must not put an object outside the drawer."""
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


def region_articulation(asset: Any, name: str) -> Articulation | None:
    """The articulation a region of ``asset`` names (``top_region`` -> the ``top`` drawer), or
    None if the region is not an articulated part."""
    art = asset.articulations.get(name)
    if art is None:
        stem = name.removesuffix("_region")
        art = next((a for k, a in asset.articulations.items() if k.startswith(stem)), None)
    return art


def _leave_uncompiled(robot_model, mujoco_model=None) -> None:
    """``RobotModel.set_mujoco_model`` while robosafe loads its robots (ArenaEnv._load_robots):
    keeps a model given, compiles none."""
    if mujoco_model is not None:
        robot_model.mujoco_model = mujoco_model


class ArenaEnv(ManipulationEnv):
    """robosuite env built from a parsed task. Use :class:`robosafe.sim.env.TaskEnv`, which
    adds the gymnasium API, costs, perturbations and the recorder."""

    def __init__(self, problem: Problem, *, source: str = "<task>", control_freq: float,
                 horizon: int, robots: str | None = None, assets: str = "stand-in",
                 controller: str = "robosuite", motion_clock: str = "seconds", **kwargs):
        cfg = config()
        self.problem = problem
        if assets not in ("stand-in", *SOURCES):
            raise TaskError(f"assets must be 'stand-in', 'libero' or 'vla-arena', got {assets!r}")
        if assets == "libero":
            assets_root()  # one line naming the extra when LIBERO's assets are not installed
        if assets == "vla-arena":
            arena_root()  # one line naming the variable when VLA-Arena's assets are not found
        self.asset_source = assets
        self.source = source
        self.scene = scene(problem.name)
        self.table_full_size = tuple(self.scene["full_size"])
        self.table_friction = tuple(self.scene["friction"])
        self.table_offset = np.array([0.0, 0.0, cfg["table"]["top_z"]])
        self.table_names = {d.name for d in problem.fixtures if is_table(d.category)}
        self.moving = {m.name: m for m in problem.moving_objects}
        self.episode_rng = np.random.default_rng(0)
        # (xy metres, yaw radians, generator): objects moved off their seeded spot (see _jitter)
        self.placement_jitter: tuple[float, float, np.random.Generator] | None = None
        # poses taken from another simulator instead of sampled ones (TaskEnv(init_state=...))
        self.init_state: InitState | None = None
        self.exact_start: set[str] = set()  # bodies placed at a given pose exactly
        self.settle_steps = int(cfg["settle_steps"])
        # "seconds": movers follow the simulation clock at every physics substep (App. 7.2.3);
        # "steps": VLA-Arena's code moves each mover once per control step, to where the
        # clock is after that step (k / control_freq after the k-th)
        self.motion_clock = motion_clock
        # waypoint movers welded to a target, as VLA-Arena's env moves them (_welded_movers)
        self.welded: dict[str, ArenaWaypoints] = self._welded_movers(control_freq)
        self.motion_on = False
        self.frozen: set[str] = set()
        self.notes: set[str] = set()  # placement readings that differ from VLA-Arena's
        self._substep = 0
        self.assets: dict = {}
        # robosuite's Python controller loop, or the compiled one (robosafe.sim.controller)
        self.controller = check_controller(controller)
        self._compiled: CompiledController | None = None
        super().__init__(robots=robots or cfg["robot"], control_freq=control_freq,
                         horizon=horizon, hard_reset=False, ignore_done=True,
                         initialization_noise=None, use_camera_obs=False,
                         has_renderer=False, has_offscreen_renderer=False, **kwargs)
        if self.scene.get("robot_init_qpos") is not None:  # LIBERO / VLA-Arena's start pose
            self.robots[0].init_qpos = np.asarray(self.scene["robot_init_qpos"], dtype=float)
        if controller == "compiled":
            self._compiled = CompiledController(self)

    # -- model --------------------------------------------------------------------------------
    def _load_robots(self):
        # robosuite 1.5 compiles each robot's MJCF alone as it loads it (Robot.load_model ->
        # RobotModel.set_mujoco_model) and keeps the model for its whole-body IK controllers;
        # nothing robosafe builds reads it, and the compile is ~40 ms of every scene build
        # (14 % of a VLA-Arena file's). The world compiled from the same XML is the same
        # (tests/test_sim_env.py). Left uncompiled, the attribute stays None: a reader fails
        # loudly, never with a wrong model.
        from robosuite.models.robots.robot_model import RobotModel

        compile_alone = getattr(RobotModel, "set_mujoco_model", None)
        if compile_alone is None:  # a robosuite that does not compile it
            super()._load_robots()
            return
        RobotModel.set_mujoco_model = _leave_uncompiled
        try:
            super()._load_robots()
        finally:
            RobotModel.set_mujoco_model = compile_alone

    def _load_model(self):
        super()._load_model()
        robot = self.robots[0].robot_model
        robot.set_base_xpos(robot.base_xpos_offset["table"](self.table_full_size[0]))
        arena = TableArena(table_full_size=self.table_full_size,
                           table_friction=self.table_friction, table_offset=self.table_offset)
        arena.set_origin([0, 0, 0])
        if "rgba" in self.scene:  # a scene's own table colour replaces robosuite's texture
            for geom in arena.worldbody.iter("geom"):
                if geom.get("name") == "table_visual":
                    geom.attrib.pop("material", None)
                    geom.set("rgba", " ".join(map(str, self.scene["rgba"])))
        decls = [d for d in self.problem.fixtures if d.name not in self.table_names]
        if self.asset_source == "vla-arena":
            # VLA-Arena's body order (its objects, then its fixtures): the order of bodies is
            # the order of contacts, whose solution differs in the last bits otherwise
            decls = list(self.problem.objects) + decls
        else:
            decls += list(self.problem.objects)
        self.missing_files: set[str] = set()  # objects whose real files are missing (warned)
        self.assets = {d.name: self._make_asset(d) for d in decls}
        if self.asset_source != "stand-in":
            stand_ins = sorted({a.category.name for n, a in self.assets.items()
                                if a.source == "stand-in" and n not in self.missing_files})
            if stand_ins:  # said once per task: these look unlike the real ones to a policy
                owner = "LIBERO's" if self.asset_source == "libero" else "VLA-Arena's"
                self.notes.add(f"{owner} assets have no " + ", ".join(stand_ins)
                               + ": procedural stand-ins used")
        self.model = ManipulationTask(mujoco_arena=arena,
                                      mujoco_robots=[r.robot_model for r in self.robots],
                                      mujoco_objects=list(self.assets.values()))
        for name in self.mocap_names():
            body = self.model.worldbody.find(f"./body[@name='{self.assets[name].root_body}']")
            body.set("mocap", "true")
        self._weld_targets()

    def _welded_movers(self, control_freq: float) -> dict[str, ArenaWaypoints]:
        """Waypoint movers that follow a target through a soft weld, as in VLA-Arena's env:
        in its cost mode (the "steps" clock) with its own assets. Elsewhere robosafe's
        kinematic mover stays (App. 7.2.3 gives a pose per time; a weld lags it)."""
        if self.motion_clock != "steps" or self.asset_source != "vla-arena":
            return {}
        return {n: ArenaWaypoints.of(mo, control_freq) for n, mo in self.moving.items()
                if mo.motion_type == "waypoint"}

    def _weld_targets(self) -> None:
        """Per welded mover a mocap target ``<root body>_mocap`` at the origin, appended last
        to the world, and a weld of the mover's root body to it (VLA-Arena's XML processor:
        solref 0.02 1, solimp 0.9 0.95 0.001; the relative pose the identity, which MuJoCo
        computes from the reference pose there, both bodies being at the origin)."""
        for name in self.welded:
            root = self.assets[name].root_body
            self.model.worldbody.append(ET.Element("body", name=f"{root}_mocap", mocap="true",
                                                   pos="0 0 0"))
            self.model.equality.append(ET.Element(
                "weld", body1=root, body2=f"{root}_mocap", relpose="0 0 0 1 0 0 0",
                solref=" ".join(map(str, ARENA_WELD_SOLREF)),
                solimp=" ".join(map(str, ARENA_WELD_SOLIMP))))

    def _make_asset(self, decl):
        """One declared object or fixture, from the real asset files where the chosen source
        has it, else the stand-in; a file the source lists but the folder lacks is one warning
        line naming the object and the file (the stand-in is used)."""
        fixed = True if decl.name in self.moving and decl.name not in self.welded else None
        source = self.asset_source
        key = (real_key(source, decl.category, category(decl.category).name)
               if source != "stand-in" else None)
        if key is not None:
            missing = missing_file(source, key)
            if missing is not None:
                self.notes.add(f"{decl.name} ({decl.category}): asset file {missing} not found "
                               f"in the {source} assets: procedural stand-in used")
                key = None
        if key is None:
            return make_asset(decl.category, decl.name, fixed=fixed)
        return make_asset(decl.category, decl.name, fixed=fixed, source=source, real_key=key)

    def mocap_names(self) -> list[str]:
        """Fixtures (other than the table) and moving objects: kinematic bodies (a welded
        mover is a free body; its target is the mocap body)."""
        fixtures = [n for n, a in self.assets.items() if a.category.kind == "fixture"]
        return fixtures + [n for n in self.moving if n not in fixtures and n not in self.welded]

    def _setup_references(self):
        super()._setup_references()
        m = self.sim.model._model
        # body_id: where robosafe reads an object's pose (its box centre); root_id: the body
        # that moves (free joint or mocap) and holds its geoms, the same body for all but
        # VLA-Arena's own assets (Asset.centre_body)
        self.body_id = {n: m.body(a.centre_body).id for n, a in self.assets.items()}
        self.root_id = {n: m.body(a.root_body).id for n, a in self.assets.items()}
        self.mocap_id = {n: int(m.body_mocapid[self.root_id[n]]) for n in self.mocap_names()}
        self.target_id = {n: int(m.body_mocapid[m.body(f"{self.assets[n].root_body}_mocap").id])
                          for n in self.welded}
        self.free_qpos = {}
        for n, bid in self.root_id.items():
            j = int(m.body_jntadr[bid])
            if n not in self.mocap_id and j >= 0 and m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
                self.free_qpos[n] = int(m.jnt_qposadr[j])
        self.table_body = m.body("table").id
        self._articulations: dict[str, tuple[int, Articulation]] = {}  # of this model

    def reward(self, action: Any = None) -> float:
        return float(self._check_success())

    def _check_success(self):
        return bool(self.goal_fn()) if getattr(self, "goal_fn", None) else False

    # -- reset ----------------------------------------------------------------------------------
    def _reset_internal(self):
        super()._reset_internal()
        self.exact_start = set()
        self.frozen = set()
        self.motion_on = False
        self._substep = 0
        # drawers and doors first: an object the task puts In an opened drawer is placed in
        # the drawer where it is open, not where it was closed
        self._apply_init_states()
        self._kinematics()
        self.start_pose = self._place()
        self._targets_at_start()
        self.sim.forward()
        # the pose another simulator's Fall compares against: its sampled pose, which is the
        # start pose where robosafe took it exactly, else lifted by InitState.reference_lift_m
        lift = self.init_state.reference_lift_m if self.init_state is not None else {}
        self.reference_pose = {n: (p + [0.0, 0.0, 0.0 if n in self.exact_start
                                        else lift.get(n, 0.0)], q)
                               for n, (p, q) in self.start_pose.items()}
        self._motion_steps = self.init_state.mover_steps if self.init_state is not None else 0

    def reset(self) -> dict[str, Any]:
        """robosuite reset, then hidden settling steps so placed objects come to rest before
        the episode (and the moving objects' clock) starts."""
        super().reset()
        if self._compiled is not None:
            self._compiled.bind()  # the episode's nullspace posture and observables
        hold = np.zeros(self.action_dim)
        hold[-1] = -1.0  # gripper open
        for _ in range(self.settle_steps):
            self.step(hold)
        self.timestep = 0
        self.motion_on = True
        return self._get_observations(force_update=True)

    def _surface_frame(self, target: str):
        """(centre xyz, default half-size xy) of the surface a region refers to."""
        if target in self.table_names:
            return self.table_offset.copy(), np.array(self.table_full_size[:2]) / 2
        if target not in self.assets:
            raise TaskError(f"region target {target!r} is neither the table nor a declared "
                            "fixture or object", source=self.source)
        bid = self.body_id[target]
        hz = self.assets[target].category.half_extents
        top = self.sim.data.body_xpos[bid] + [0.0, 0.0, hz[2]]
        return top, np.array(hz[:2])

    def region_geometry(self, region: Region) -> tuple[np.ndarray, np.ndarray, float]:
        """World rectangles (n, 4), yaw ranges (n, 2) and the support height of a region.

        A region with ``:ranges`` is rectangles in its target's surface frame; a region on a
        fixture without ranges is the fixture's site of that name (a drawer's or a container's
        inside), else the fixture's whole top.
        """
        d = self.sim.data
        asset = self.assets.get(region.target)
        site = asset.named_sites.get(region.name) if asset is not None else None
        if not region.ranges and site is not None:
            sid = self.sim.model._model.site(site).id
            c, half = d.site_xpos[sid].copy(), self.sim.model._model.site_size[sid][:2]
            half = inscribed_half(half, d.site_xmat[sid].reshape(3, 3))
            floor = c[2] - self.sim.model._model.site_size[sid][2]
            rects = np.array([[c[0] - half[0], c[1] - half[1], c[0] + half[0], c[1] + half[1]]])
        else:
            centre, half = self._surface_frame(region.target)
            floor = centre[2]
            if region.ranges:
                rects = np.array(region.ranges, dtype=float) + np.tile(centre[:2], 2)
            else:
                rects = np.array([[*(centre[:2] - half), *(centre[:2] + half)]])
        yaws = np.array(region.yaw_rotation or [(0.0, 0.0)], dtype=float)
        return rects, yaws, float(floor)

    def _init_support(self) -> dict[str, Pred]:
        """Object -> its (On|In obj support) init atom."""
        out = {}
        for p in self.problem.init:
            if p.name.lower() in ("on", "in", "ontop") and len(p.args) == 2:
                out.setdefault(str(p.args[0]), p)
        return out

    def _kinematics(self) -> None:
        """Body, geom and site poses from qpos and the mocap poses: all placement reads. A full
        forward here also ran collisions and the constraint solver at every placed object
        (~5 ms each on VLA-Arena's scenes); the forward that ends the reset computes the rest
        from the same state. Nothing else changes: MuJoCo 3.9.0's mj_forward (the sim extra's
        pin) leaves qacc_warmstart, the one input an earlier pass could touch, as it was
        (2.3.7's overwrote it), and runs, traces and frames were compared byte for byte."""
        mujoco.mj_kinematics(self.sim.model._model, self.sim.data._data)

    def _place(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        cfg = config()["placement"]
        rng = self.episode_rng
        regions = self.problem.region_index()
        support = self._init_support()
        placed: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        taken: dict[float, list[tuple[str, Footprint]]] = {}
        free_table = Region(name="table", target=next(iter(self.table_names), "table"),
                            ranges=((-0.35, -0.45, 0.35, 0.45),))
        # what the task places comes first (fixtures before objects, which may stand on them),
        # then what it leaves to chance, so a random spot never takes a declared region
        fixtures = [n for n in self.assets if self.assets[n].category.kind == "fixture"]
        objects = [n for n in self.assets if n not in fixtures]
        order = [n for n in fixtures + objects if n in support]
        order += [n for n in fixtures + objects if n not in support]
        pending = list(order)
        while pending:
            progressed = False
            for name in list(pending):
                atom = support.get(name)
                ref = str(atom.args[1]) if atom is not None else None
                host = regions[ref].target if ref in regions else ref
                if host is not None and host in self.assets and host not in placed:
                    continue  # on (a region of) something not placed yet
                placed[name] = self._place_one(name, ref, atom, regions, free_table, taken,
                                               placed, rng, cfg)
                pending.remove(name)
                progressed = True
                self._kinematics()
            if not progressed:
                raise TaskError("init atoms stack objects in a cycle: " + ", ".join(pending),
                                source=self.source)
        return placed

    def _place_one(self, name, ref, atom, regions, free_table, taken, placed, rng, cfg):
        asset = self.assets[name]
        hx, hy, hz = asset.category.half_extents
        mo = self.moving.get(name)
        if mo is not None and mo.motion_type == "waypoint" and name not in self.welded:
            # robosafe's own waypoint movers put their box centre on the path (a welded one is
            # placed as any object and pulled onto it, docs/decisions.md)
            pos, quat = pose_at(mo, 0.0, np.zeros(3), np.array([1.0, 0, 0, 0]))
            self._set_pose(name, pos, quat)
            return pos, quat
        given = self.init_state.poses.get(name) if self.init_state is not None else None
        if given is not None and asset.source_frame is not None:
            pos, quat = self._from_source(name, given.pos, given.quat)
            self.exact_start.add(name)
            if self.body_id[name] != self.root_id[name]:  # the file's body: the pose as given
                self._set_root_pose(name, given.pos, given.quat)
            else:
                self._set_pose(name, pos, quat)
            return pos, quat
        if ref is not None and ref in self.assets:
            base = self.sim.data.body_xpos[self.body_id[ref]]
            top = base[2] + self.assets[ref].category.half_extents[2]
            pos = np.array([base[0], base[1], top + hz + cfg["drop_m"]])
            quat = np.array([1.0, 0.0, 0.0, 0.0])
            if given is not None:
                pos[:2] = given.pos[:2]
                quat = yaw_quat(given.yaw())
        else:
            region = regions.get(ref) if ref is not None else free_table
            if region is None:
                raise TaskError(f"{name}: unknown region {ref!r}", source=self.source,
                                line=_line(atom))
            rects, yaws, floor = self.region_geometry(region)
            target = self.assets.get(region.target)
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
                self._set_pose(name, pos, quat)
                return pos, quat
            args = (name, region.ref if ref else "table", rects, yaws, (hx, hy))
            kw = {"attempts": cfg["attempts"], "clearance": cfg["clearance_m"],
                  "line": _line(atom), "source": self.source,
                  "round": asset.category.builder in ROUND_BUILDERS
                  and (asset.category.builder != "container" or abs(hx - hy) < 0.01)}
            try:
                fp = place_footprint(*args, here, rng, **kw)
            except TaskError:
                # VLA-Arena samples objects against objects only (fixtures have their own
                # sampler), so its files may put an object on a fixture's footprint; robosafe
                # then rests the object on that fixture's top and says so once.
                fixtures = {n for n, a in self.assets.items() if a.category.kind == "fixture"}
                if asset.category.kind == "fixture":
                    raise
                objects = [t for t in here if t[0] not in fixtures]
                try:
                    fp = place_footprint(*args, objects, rng, **kw)
                except TaskError:
                    fp = self._place_as_libero(name, region.ref, args, objects, rng, kw)
                under = [n for n, other in here if n in fixtures and overlap(fp, other)]
                if under:
                    floor = max(self.sim.data.body_xpos[self.body_id[n]][2]
                                + self.assets[n].category.half_extents[2] for n in under)
                    self.notes.add(f"{name} in region {region.ref} overlaps fixture "
                                   f"{', '.join(under)}: VLA-Arena does not check objects "
                                   "against fixtures when placing; robosafe rests it on top")
            here.append((name, fp))
            fp = self._jitter(fp, asset)
            pos = np.array([fp.x, fp.y, floor + hz + lift + cfg["drop_m"]])
            quat = yaw_quat(fp.yaw)
        self._set_pose(name, pos, quat)
        return pos, quat

    def _place_as_libero(self, name: str, region: str, args: tuple, objects: list,
                         rng: np.random.Generator, kw: dict) -> Footprint:
        """No spot free of the objects already there: LIBERO's own rule, which compares centre
        distances with a small horizontal radius (so its files may put a bowl on a plate's
        rim). The footprint keeps the object's own extent; the overlap is said once."""
        r = config()["placement"]["libero_radius_m"]
        discs = [(n, Footprint(o.x, o.y, 0.0, r, r, True)) for n, o in objects]
        small = (*args[:4], (r, r))
        fp = place_footprint(*small, discs, rng, **{**kw, "clearance": 0.0, "round": True})
        fp = Footprint(fp.x, fp.y, fp.yaw, *args[4], kw["round"])
        hit = [n for n, o in objects if overlap(fp, o)]
        self.notes.add(f"{name} in region {region}: no spot free of {', '.join(hit)}; placed by "
                       f"LIBERO's own rule (centres {2 * r:g} m apart), overlapping them")
        return fp

    def _from_source(self, name: str, pos, quat) -> tuple[np.ndarray, np.ndarray]:
        """robosafe's pose of body ``name`` when the body its asset file moves is at (pos, quat)
        (a pose from VLA-Arena's env): the pose composed with the real asset's ``source_frame``;
        a stand-in's pose as given."""
        frame = self.assets[name].source_frame
        if frame is None:
            return np.asarray(pos, dtype=float), np.asarray(quat, dtype=float)
        off, q_off = frame
        q_given = np.asarray(quat, dtype=float)
        shift = np.empty(3)
        mujoco.mju_rotVecQuat(shift, np.asarray(off, dtype=float), q_given)
        out = np.empty(4)
        mujoco.mju_mulQuat(out, q_given, np.asarray(q_off, dtype=float))
        return np.asarray(pos, dtype=float) + shift, out

    def _out_of_carcass(self, region: Region, rects: np.ndarray) -> np.ndarray:
        """An open drawer's region cut to the part pulled out of the carcass (in front of it,
        -x, for a fixture that is not turned): what is under the carcass top cannot be reached
        from above. Other regions, and turned fixtures, are left as they are."""
        asset = self.assets[region.target]
        art = region_articulation(asset, region.name)
        m, d = self.sim.model._model, self.sim.data
        if art is None or m.jnt_type[m.joint(art.joint).id] != mujoco.mjtJoint.mjJNT_SLIDE:
            return rects
        bid = self.body_id[region.target]
        if not art.is_open(d.qpos[m.joint(art.joint).qposadr[0]]) or d.body_xmat[bid][0] < 0.999:
            return rects
        out = np.array(rects, dtype=float)
        out[:, 2] = np.minimum(out[:, 2], d.body_xpos[bid][0] - asset.category.half_extents[0])
        return out

    def _jitter(self, fp: Footprint, asset) -> Footprint:
        """An object's seeded footprint moved by uniform xy and yaw jitter (paper 002 App. A.3:
        demonstrations "around the official grid", 0.0025 m XY and up to 15 degrees of yaw).
        Applied after the footprint is taken, so every later draw of the episode's placement
        stream, and every other object, is the seed's own."""
        if self.placement_jitter is None or asset.category.kind != "object":
            return fp
        xy, yaw, rng = self.placement_jitter
        dx, dy = rng.uniform(-xy, xy, 2)
        return replace(fp, x=fp.x + float(dx), y=fp.y + float(dy),
                       yaw=fp.yaw + float(rng.uniform(-yaw, yaw)))

    def _set_pose(self, name: str, pos, quat) -> None:
        """Put object ``name``'s centre body at (pos, quat): its root where the two differ."""
        if self.body_id[name] != self.root_id[name]:
            pos, quat = self.to_source(name, pos, quat)
        self._set_root_pose(name, pos, quat)

    def to_source(self, name: str, pos, quat) -> tuple[np.ndarray, np.ndarray]:
        """The inverse of :meth:`_from_source`: the pose (pos, w-x-y-z quat) of the asset
        file's body (the body LIBERO's and VLA-Arena's envs move) when robosafe's pose of
        object ``name`` is (pos, quat); a stand-in's pose unchanged."""
        frame = self.assets[name].source_frame if name in self.assets else None
        if frame is None:
            return np.asarray(pos, dtype=float), np.asarray(quat, dtype=float)
        off, q_off = frame
        q_root = np.empty(4)
        mujoco.mju_negQuat(q_root, np.asarray(q_off, dtype=float))
        mujoco.mju_mulQuat(q_root, np.asarray(quat, dtype=float), q_root)
        shift = np.empty(3)
        mujoco.mju_rotVecQuat(shift, np.asarray(off, dtype=float), q_root)
        return np.asarray(pos, dtype=float) - shift, q_root

    def _targets_at_start(self) -> None:
        """Each welded mover's target where its root body was placed (VLA-Arena's reset puts
        the target at the sampled pose; the first control step moves it onto the path)."""
        d = self.sim.data
        for name, k in self.target_id.items():
            a = self.free_qpos[name]
            d.mocap_pos[k] = d.qpos[a:a + 3]
            d.mocap_quat[k] = d.qpos[a + 3:a + 7]

    def _set_root_pose(self, name: str, pos, quat) -> None:
        d = self.sim.data
        if name in self.mocap_id:
            d.mocap_pos[self.mocap_id[name]] = pos
            d.mocap_quat[self.mocap_id[name]] = quat
        elif name in self.free_qpos:
            a = self.free_qpos[name]
            d.qpos[a:a + 3] = pos
            d.qpos[a + 3:a + 7] = quat

    def articulation(self, entity: str) -> tuple[int, Articulation]:
        """(asset joint qpos address, Articulation) an Open/Close/TurnOn atom refers to (found
        once per model: predicates ask at every step)."""
        found = self._articulations.get(entity)
        if found is None:
            found = self._articulations[entity] = self._find_articulation(entity)
        return found

    def _find_articulation(self, entity: str) -> tuple[int, Articulation]:
        regions = self.problem.region_index()
        region = regions.get(entity)
        owner = region.target if region is not None else entity
        asset = self.assets.get(owner)
        if asset is None or not asset.articulations:
            raise TaskError(f"{entity!r} has no articulation (drawer, door or knob)",
                            source=self.source)
        art = region_articulation(asset, region.name) if region is not None else None
        if art is None:
            art = next(iter(asset.articulations.values()))
        adr = int(self.sim.model._model.joint(art.joint).qposadr[0])
        return adr, art

    def _apply_init_states(self) -> None:
        for p in self.problem.init:
            name = p.name.lower()
            if name in ("open", "close", "turnon", "turnoff", "toggledon"):
                adr, art = self.articulation(str(p.args[0]))
                on = name in ("open", "turnon", "toggledon")
                self.sim.data.qpos[adr] = art.open if on else art.closed
        given = self.init_state.joint_qpos if self.init_state is not None else {}
        m = self.sim.model._model
        for joint, q in given.items():  # the other simulator's sampled drawer / knob positions
            try:
                adr = int(m.joint(joint).qposadr[0])
            except KeyError:  # a stand-in's joints are named after robosafe's keys
                self.notes.add(f"init_state joint {joint} is not a joint of this world "
                               "(a stand-in?): robosafe's own position kept")
                continue
            self.sim.data.qpos[adr] = float(q)

    # -- motion ----------------------------------------------------------------------------------
    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        self.move_targets()
        if self._compiled is not None:
            return self._compiled.step(action)
        return super().step(action)

    def _pre_action(self, action, policy_step=False):
        super()._pre_action(action, policy_step)
        self.move_objects(policy_step)

    def move_targets(self) -> None:
        """Welded movers' targets to their next sample, before the control step's physics
        (VLA-Arena's env writes them before robosuite's step): sample k after k control steps
        of the clock (``InitState.mover_steps`` already run at reset)."""
        if not self.motion_on or not self.welded:
            return
        d = self.sim.data
        for name, path in self.welded.items():
            if name not in self.frozen:
                d.mocap_pos[self.target_id[name]], d.mocap_quat[self.target_id[name]] = (
                    path.at(self._motion_steps))

    def move_objects(self, policy_step: bool = False) -> None:
        """Moving objects to their pose at this substep (before the physics of the substep);
        ``policy_step``: the first substep of a control step."""
        if not self.motion_on or not self.moving:
            return
        t = self._substep * self.model_timestep
        self._substep += 1
        if self.motion_clock == "steps":
            if not policy_step:
                return  # VLA-Arena writes the movers' poses once per control step
            self._motion_steps += 1
            t = self._motion_steps / self.control_freq
        for name, mo in self.moving.items():
            if name in self.frozen or name in self.welded:
                continue
            p0, q0 = self.start_pose[name]
            self._set_pose(name, *pose_at(mo, t, p0, q0, floor_z=None))

    def model_ptr(self) -> mujoco.MjModel:
        return self.sim.model._model

    def data_ptr(self) -> mujoco.MjData:
        return self.sim.data._data
