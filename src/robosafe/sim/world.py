"""A CBDDL task as a robosuite manipulation environment (VLA-Arena paper 001, Sec. 2 and App. 7).

One compiled MuJoCo model per task: robosuite's table arena (the task's table fixture), the
Panda with its gripper and robosuite's operational-space controller, and every fixture and
object from the bundled asset library. Fixtures and moving objects are mocap bodies, so a reset
only writes poses (no recompilation) and a (task, seed) pair always gives the same initial
state. This module builds the model and answers where things are; a reset's placement is
:mod:`robosafe.sim.placement` (from the :class:`~robosafe.sim.placement.EpisodeStart` given to
:meth:`TaskWorld.reset`), the moving objects' motion :mod:`robosafe.sim.motion`, and the pose
mapping of real assets :mod:`robosafe.sim.frames`.

Moving objects are driven through their mocap pose before every physics substep from the
simulation clock (App. 7.2.3); the motion clock starts after the hidden settling steps.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

import mujoco
import numpy as np
from robosuite.environments.manipulation.manipulation_env import ManipulationEnv
from robosuite.models.arenas import TableArena
from robosuite.models.tasks import ManipulationTask

from robosafe.errors import TaskError
from robosafe.sim import frames, motion
from robosafe.sim.assets import category, make_asset, region_articulation
from robosafe.sim.controller import CompiledController, check_controller
from robosafe.sim.libero_assets import OWNERS, choose_asset, resolve_source
from robosafe.sim.motion import ArenaWaypoints
from robosafe.sim.placement import EpisodeStart, inscribed_half, place
from robosafe.tasks.ast import Problem, Region
from robosafe.yamldata import load_yaml

if TYPE_CHECKING:
    from robosafe.sim.categories import Articulation

GRIPPER = "gripper0"


@cache
def config() -> dict:
    return load_yaml(resources.files("robosafe.sim").joinpath("data/world.yaml")
                     .read_text(encoding="utf-8"))


def is_table(category: str) -> bool:
    return category in config()["table"]["categories"]


def scene(problem_name: str) -> dict:
    """The table settings for a problem name: the first ``scenes`` prefix that matches, merged
    over the default table (``data/world.yaml``)."""
    cfg = config()
    hit = next((s for s in cfg.get("scenes", ()) if problem_name.startswith(s["prefix"])), {})
    return {**cfg["table"], **{k: v for k, v in hit.items() if k != "prefix"}}


def _leave_uncompiled(robot_model, mujoco_model=None) -> None:
    """``RobotModel.set_mujoco_model`` while robosafe loads its robots (TaskWorld._load_robots):
    keeps a model given, compiles none."""
    if mujoco_model is not None:
        robot_model.mujoco_model = mujoco_model


class TaskWorld(ManipulationEnv):
    """robosuite env built from a parsed task. Use :class:`robosafe.sim.env.TaskEnv`, which
    adds the gymnasium API, costs, perturbations and the recorder."""

    def __init__(self, problem: Problem, *, source: str = "<task>", control_freq: float,
                 horizon: int, robots: str | None = None, assets: str = "stand-in",
                 controller: str = "robosuite", motion_clock: str = "seconds", **kwargs):
        cfg = config()
        self.problem = problem
        # the source's name and folders checked once (one line naming the extra or variable)
        self.asset_source = resolve_source(assets)
        self.source = source
        self.scene = scene(problem.name)
        self.table_full_size = tuple(self.scene["full_size"])
        self.table_friction = tuple(self.scene["friction"])
        self.table_offset = np.array([0.0, 0.0, cfg["table"]["top_z"]])
        self.table_names = {d.name for d in problem.fixtures if is_table(d.category)}
        self.moving = {m.name: m for m in problem.moving_objects}
        # what a reset places from (reset(start)); robosuite's constructor resets once
        self._start = EpisodeStart(np.random.default_rng(0))
        self.exact_start: frozenset[str] = frozenset()  # bodies placed at a given pose exactly
        self.settle_steps = int(cfg["settle_steps"])
        # "seconds": movers follow the simulation clock at every physics substep (App. 7.2.3);
        # "steps": VLA-Arena's code moves each mover once per control step, to where the
        # clock is after that step (k / control_freq after the k-th)
        self.motion_clock = motion_clock
        # waypoint movers welded to a target, as VLA-Arena's env moves them: in its cost mode
        # (the "steps" clock) with its own assets (robosafe.sim.motion.welded_movers)
        self.welded: dict[str, ArenaWaypoints] = (
            motion.welded_movers(self.moving, control_freq)
            if motion_clock == "steps" and assets == "vla-arena" else {})
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
        table = TableArena(table_full_size=self.table_full_size,
                           table_friction=self.table_friction, table_offset=self.table_offset)
        table.set_origin([0, 0, 0])
        if "rgba" in self.scene:  # a scene's own table colour replaces robosuite's texture
            for geom in table.worldbody.iter("geom"):
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
                self.notes.add(f"{OWNERS[self.asset_source]} assets have no " + ", ".join(stand_ins)
                               + ": procedural stand-ins used")
        self.model = ManipulationTask(mujoco_arena=table,
                                      mujoco_robots=[r.robot_model for r in self.robots],
                                      mujoco_objects=list(self.assets.values()))
        for name in self.mocap_names():
            body = self.model.worldbody.find(f"./body[@name='{self.assets[name].root_body}']")
            body.set("mocap", "true")
        motion.weld_targets(self.model.worldbody, self.model.equality,
                            [self.assets[n].root_body for n in self.welded])

    def _make_asset(self, decl):
        """One declared object or fixture, from the real asset files where the chosen source
        has it, else the stand-in; a file the source lists but the folder lacks is one warning
        line naming the object and the file (the stand-in is used)."""
        fixed = True if decl.name in self.moving and decl.name not in self.welded else None
        pick = choose_asset(self.asset_source, decl.category, category(decl.category).name)
        if pick.missing is not None:
            self.notes.add(f"{decl.name} ({decl.category}): asset file {pick.missing} not found "
                           f"in the {pick.wanted} assets: procedural stand-in used")
        return make_asset(decl.category, decl.name, fixed=fixed, source=pick.source,
                          real_key=pick.key)

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
        start = self._start
        self.frozen = set()
        self.motion_on = False
        self._substep = 0
        # drawers and doors first: an object the task puts In an opened drawer is placed in
        # the drawer where it is open, not where it was closed
        self._apply_init_states(start)
        self.kinematics()
        placed = place(self, start, config()["placement"])
        self.start_pose, self.exact_start = placed.poses, placed.exact
        motion.targets_at_start(self)
        self.sim.forward()
        # the pose another simulator's Fall compares against: its sampled pose, which is the
        # start pose where robosafe took it exactly, else lifted by InitState.reference_lift_m
        given = start.init_state
        lift = given.reference_lift_m if given is not None else {}
        self.reference_pose = {n: (p + [0.0, 0.0, 0.0 if n in self.exact_start
                                        else lift.get(n, 0.0)], q)
                               for n, (p, q) in self.start_pose.items()}
        self._motion_steps = given.mover_steps if given is not None else 0

    def reset(self, start: EpisodeStart | None = None) -> dict[str, Any]:
        """robosuite reset placing from ``start`` (the episode's placement stream, jitter and
        given initial state; None: the last one given), then hidden settling steps so placed
        objects come to rest before the episode (and the moving objects' clock) starts. A given
        initial state is another simulator's state after its reset: its own wait steps
        (VLA-Arena's evaluators' 10) are the caller's, so robosafe adds no settling steps."""
        if start is not None:
            self._start = start
        self.settle_steps = 0 if self._start.init_state is not None else int(
            config()["settle_steps"])
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

    def kinematics(self) -> None:
        """Body, geom and site poses from qpos and the mocap poses: all placement reads. A full
        forward here also ran collisions and the constraint solver at every placed object
        (~5 ms each on VLA-Arena's scenes); the forward that ends the reset computes the rest
        from the same state. Nothing else changes: MuJoCo 3.9.0's mj_forward (the sim extra's
        pin) leaves qacc_warmstart, the one input an earlier pass could touch, as it was
        (2.3.7's overwrote it), and runs, traces and frames were compared byte for byte."""
        mujoco.mj_kinematics(self.sim.model._model, self.sim.data._data)

    # -- poses -----------------------------------------------------------------------------------
    def from_source(self, name: str, pos, quat) -> tuple[np.ndarray, np.ndarray]:
        """robosafe's pose of body ``name`` when the body its asset file moves is at (pos, quat)
        (robosafe.sim.frames.from_source with the asset's ``source_frame``)."""
        return frames.from_source(self.assets[name].source_frame, pos, quat)

    def set_pose(self, name: str, pos, quat) -> None:
        """Put object ``name``'s centre body at (pos, quat): its root where the two differ."""
        if self.body_id[name] != self.root_id[name]:
            pos, quat = self.to_source(name, pos, quat)
        self.set_root_pose(name, pos, quat)

    def to_source(self, name: str, pos, quat) -> tuple[np.ndarray, np.ndarray]:
        """The inverse of :meth:`from_source`: the pose (pos, w-x-y-z quat) of the asset
        file's body (the body LIBERO's and VLA-Arena's envs move) when robosafe's pose of
        object ``name`` is (pos, quat); a stand-in's pose unchanged."""
        frame = self.assets[name].source_frame if name in self.assets else None
        return frames.to_source(frame, pos, quat)

    def set_root_pose(self, name: str, pos, quat) -> None:
        """Put the body that moves object ``name`` (mocap or free joint) at (pos, quat)."""
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

    def _apply_init_states(self, start: EpisodeStart) -> None:
        for p in self.problem.init:
            name = p.name.lower()
            if name in ("open", "close", "turnon", "turnoff", "toggledon"):
                adr, art = self.articulation(str(p.args[0]))
                on = name in ("open", "turnon", "toggledon")
                self.sim.data.qpos[adr] = art.open if on else art.closed
        given = start.init_state.joint_qpos if start.init_state is not None else {}
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
        motion.move_targets(self)
        if self._compiled is not None:
            return self._compiled.step(action)
        return super().step(action)

    def _pre_action(self, action, policy_step=False):
        super()._pre_action(action, policy_step)
        self.move_objects(policy_step)

    def move_objects(self, policy_step: bool = False) -> None:
        """Moving objects to their pose at this substep (robosafe.sim.motion.move_objects);
        the compiled controller calls it before each substep as robosuite's loop does."""
        motion.move_objects(self, policy_step)

    def model_ptr(self) -> mujoco.MjModel:
        return self.sim.model._model

    def data_ptr(self) -> mujoco.MjData:
        return self.sim.data._data
