"""Gymnasium-style world for one CBDDL task (VLA-Arena paper 001 Sec. 2-4).

``reset(seed=...) -> obs, info`` and ``step(action) -> obs, reward, terminated, truncated,
info``. ``info`` carries ``success``, the step's ``cost`` and per-term ``cost_terms``, the
running ``cumulative_cost`` and every goal predicate's truth. This is the pure world: roles,
task info, recording and the App. B trace are the host adapter's,
:class:`robosafe.hosts.robosafe.RobosafeEnv` (DESIGN.md: ``sim`` imports neither ``hosts`` nor
``policies``), which drives the physics through its recorder (:meth:`TaskEnv.drive`).

Seeding: the episode seed feeds one ``SeedSequence`` spawned into three streams, placement,
visual perturbation and pixel noise, so the same seed gives the same initial state, the same
perturbation and the same noisy images, whatever else changes (e.g. the visual level does
not move the objects).

Cost accounting is :func:`robosafe.tasks.cost.evaluate_cost` (Sec. 4.1, App. 7.4.2) on the
per-step predicate history: instantaneous terms cost at every violating step, terminal terms
are checked on the final state and their cost is booked on the final step, so the trace's
``cost`` column sums to CC.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from robosafe import mjstate
from robosafe.errors import RobosafeError, TaskError
from robosafe.sim.categories import Articulation
from robosafe.sim.perturb import (
    VisualPerturbation,
    apply_image,
    apply_model,
    combine,
    draw_level,
    from_task,
)
from robosafe.sim.placement import EpisodeStart, InitState, Jitter
from robosafe.sim.predicates import StateView
from robosafe.sim.render import ensure_gl_backend, render_camera
from robosafe.sim.tags import target_object
from robosafe.sim.world import TaskWorld, config
from robosafe.tasks.ast import Pred, Problem, Region
from robosafe.tasks.cost import (
    MODES,
    CostBreakdown,
    arena_episode,
    arena_max_steps,
    arena_rules,
    arena_suite,
    cost_terms,
    evaluate_cost,
    evaluator_name,
    holds,
    predicates,
    term_timing,
)
from robosafe.tasks.language import perturb_instruction
from robosafe.tasks.parser import parse_file
from robosafe.tasks.validate import validate_task
from robosafe.tasks.writer import atom_text
from robosafe.yamldata import sim_choices

VISUAL_GROUPS = (1, 2)


def load_task(task: Problem | str | Path, control_freq: float | None = None,
              source: str | None = None) -> tuple[Problem, str]:
    """Parse and validate a task file (or take a parsed one); the first error is raised."""
    if isinstance(task, Problem):
        problem, source = task, source or f"<{task.name}>"
    else:
        problem, source = parse_file(task, control_freq=control_freq), str(task)
    errors = validate_task(problem, source)
    if errors:
        raise errors[0]
    _warn_once(problem.warnings)
    return problem, source


def _warn_once(lines: list[str]) -> None:
    """Log each warning line once per process: episodes rebuild and reset the same task."""
    for w in lines:
        if w not in _WARNED:
            _WARNED.add(w)
            log.warning(w)


_WARNED: set[str] = set()
log = logging.getLogger(__name__)


def _jitter(spec, seed: int) -> Jitter | None:
    """``options["placement_jitter"] = (xy_m, yaw_deg, stream)``: objects placed off the seed's
    spots by up to xy_m per axis and yaw_deg, drawn from their own stream (seed, stream)."""
    if spec is None:
        return None
    try:
        xy, yaw, stream = (float(spec[0]), float(spec[1]), int(spec[2]))
    except (TypeError, ValueError, IndexError):
        raise RobosafeError(f"placement_jitter must be (xy metres, yaw degrees, stream), got "
                            f"{spec!r}") from None
    if xy < 0 or yaw < 0:
        raise RobosafeError(f"placement_jitter must not be negative, got {spec!r}")
    return Jitter(xy, float(np.radians(yaw)), np.random.default_rng([seed, stream, 0x6A17]))


@dataclass(frozen=True)
class _PrivilegedLayout:
    """Where :meth:`TaskEnv._privileged` reads its observations in one compiled model (ids and
    observation keys fixed by the model and the task, so found once, not at every step)."""

    bodies: tuple[tuple[str, str, int], ...]
    """(position key, quaternion key, body id) of every asset's root body."""
    safe: tuple[tuple[str, list[int]], ...]
    """(key, geom ids): a hazardous asset's non-hazardous part geoms, averaged."""
    joints: tuple[tuple[str, int, str, list[int], int], ...]
    """(qpos key, qpos address, handle key, handle geom ids, joint body) per articulated entity;
    no geom ids: the joint body's origin is the handle."""


class TaskEnv:
    """A CBDDL task as a MuJoCo world with the gymnasium reset/step contract."""

    def __init__(self, task: Problem | str | Path, *, source: str | None = None,
                 task_id: str | None = None, cameras: tuple[str, ...] | None = None,
                 image_size: tuple[int, int] | None = None, depth: bool = False,
                 visual_level: int = 0, language_level: int = 0, horizon: int | None = None,
                 control_freq: float | None = None, freeze_on_violation: bool = True,
                 cost_mode: str = "robosafe", render: bool = True, assets: str = "stand-in",
                 controller: str = sim_choices()["default_controller"],
                 init_state: InitState | None = None, arena_evaluator: str | None = None,
                 arena_task: tuple[str | None, int | None] | None = None):
        cfg = config()
        self.problem, self.source = load_task(task, control_freq, source)
        self.task_id = task_id or self.problem.name  # suites use the file stem
        self.control_freq = float(self.problem.control_freq or control_freq
                                  or cfg["control_freq"])
        if cost_mode not in MODES:
            raise RobosafeError(f"cost mode must be one of {', '.join(MODES)}, got {cost_mode!r}")
        # VLA-Arena's suite and level from the file's folders: its step budget and cost rules
        # (``arena_task``: given when the file read is a copy, as in a run's worker)
        self.arena_suite, self.arena_level = (tuple(arena_task) if arena_task is not None
                                              else arena_suite(self.source))
        default = (arena_max_steps(self.arena_suite, self.arena_level)
                   if cost_mode == "vla-arena" else round(cfg["horizon_s"] * self.control_freq))
        self.horizon = int(horizon or default)
        self.cameras = tuple(cameras if cameras is not None else self._task_cameras())
        self.image_size = tuple(image_size or cfg["image_size"])
        self.depth = depth
        self.render = render and bool(self.cameras)
        if not 0 <= visual_level <= 4:
            raise RobosafeError(f"visual level must be 0..4 (V0-V4), got {visual_level}")
        self.visual_level = visual_level
        self.language_level = language_level
        self.freeze_on_violation = freeze_on_violation
        self.cost_mode = cost_mode
        # whose episode rules arena_result applies (cost mode vla-arena; default openvla)
        self.arena_evaluator = evaluator_name(arena_evaluator)
        if self.render:
            ensure_gl_backend()
        self.task_world = TaskWorld(
            self.problem, source=self.source, control_freq=self.control_freq,
            horizon=self.horizon, assets=assets, controller=controller,
            motion_clock="steps" if cost_mode == "vla-arena" else "seconds")
        self.init_state = self._check_init_state(init_state)
        m = self.task_world.model_ptr()
        missing = [c for c in self.cameras if mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_CAMERA,
                                                                 c) < 0]
        if missing:
            known = [m.camera(i).name for i in range(m.ncam)]
            raise TaskError(f"unknown camera(s) {missing}; this world has {known}",
                            source=self.source)
        self.target = target_object(self.problem)
        # what steps and resets the physics: the robosuite env itself, or a wrapper around it
        # that must see every physics step (a host's trace recorder, :meth:`drive`)
        self._physics = self.task_world
        self._base_rgba = m.geom_rgba.copy()
        self._base_cam_pos = m.cam_pos.copy()
        self._terms = cost_terms(self.problem.cost, cost_mode)
        self._timing = [term_timing(t, self.source) for t in self._terms]
        self._cost_preds = list(dict.fromkeys(p for t in self._terms for p in predicates(t)))
        self._goal_preds = list(dict.fromkeys(predicates(self.problem.goal)))
        # every atom a step reads, each evaluated once per step
        self._atoms = list(dict.fromkeys([*self._cost_preds, *self._goal_preds]))
        self._goal_texts = [(atom_text(p), p) for p in self._goal_preds]
        self._layout: tuple[Any, _PrivilegedLayout] | None = None
        self._check_parts()
        self.view: StateView | None = None
        self.seed: int | None = None
        self._next_seed = 0
        self.instruction = self.problem.language  # until reset perturbs it (W1-W4)
        self.steps = 0
        self.success = False

    def _check_init_state(self, state: InitState | None) -> InitState | None:
        """Every reset starts from ``state``'s poses (robosafe.sim.placement.InitState): a name
        the task does not declare is an error; a body it leaves out is placed by robosafe's
        own sampler, and a warning names it."""
        if state is None:
            return None
        if not isinstance(state, InitState):
            raise RobosafeError(f"init_state must be an InitState, got {type(state).__name__}")
        unknown = sorted(set(state.poses) - set(self.task_world.assets))
        if unknown:
            raise TaskError(f"init_state names {', '.join(unknown)}, which the task does not "
                            f"declare (it has {', '.join(sorted(self.task_world.assets))})",
                            source=self.source)
        left = sorted(set(self.task_world.assets) - set(state.poses))
        if left:
            _warn_once([(f"{self.source}: init_state has no pose for {', '.join(left)}; "
                         "robosafe samples it")])
        return state

    def _check_parts(self) -> None:
        """Part ids in cost predicates must name parts of the object's asset (data/assets.yaml)."""
        for p in self._cost_preds:
            ids = [a for a in p.args if isinstance(a, tuple)]
            names = [str(a) for a in p.args if isinstance(a, str)]
            owners = names[-len(ids):] if ids and p.name.lower() == "incontactpart" else names[:1]
            for owner, part_ids in zip(owners, ids, strict=False):
                asset = self.task_world.assets.get(owner)
                known = asset.category.parts if asset is not None else {}
                if asset is not None:
                    part_ids = asset.category.part_ids(part_ids)
                bad = [i for i in part_ids if i not in known]
                if bad:
                    raise TaskError(f"{p.name}: {owner} has no part(s) {bad}; its parts are "
                                    + ", ".join(f"{k} {v}" for k, v in known.items()),
                                    source=self.source, line=getattr(p.pos, "line", None),
                                    column=getattr(p.pos, "column", None))

    def _task_cameras(self) -> tuple[str, ...]:
        named = [c.name for c in self.problem.camera]
        return tuple(dict.fromkeys([*config()["cameras"], *named]))

    def drive(self, physics) -> None:
        """Step and reset the robosuite env through ``physics`` from now on: an object with
        ``reset(**kw)`` and ``step(action)`` that wraps :attr:`task_world` (a trace recorder), so it
        sees the state right after every physics step and reset, before this world reads
        its predicates or renders; both return what the robosuite env's returned."""
        self._physics = physics

    # -- gymnasium API -----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None,
              options: dict | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        if seed is None:
            seed = self._next_seed
        self.seed = int(seed)
        self._next_seed = self.seed + 1
        place, visual, noise = (np.random.default_rng(s)
                                for s in np.random.SeedSequence(self.seed).spawn(3))
        start = EpisodeStart(place, _jitter((options or {}).get("placement_jitter"), self.seed),
                             self.init_state)
        self._noise_rng = noise
        self.perturbation = self._draw_perturbation(visual)
        self.instruction = (perturb_instruction(self.problem.language, self.language_level,
                                                self.seed).text
                            if self.language_level else self.problem.language)
        obs = self._physics.reset(start=start)
        self.view = StateView(self.task_world, self.cost_mode) if self.view is None else self.view
        _warn_once(f"{self.source}: {n}" for n in sorted(self.task_world.notes))
        self.view.start_episode()
        # the episode starts from the state as placed; a file's :init that it does not satisfy
        # (a region no object can rest in, a mover away from its region) is said, not hidden
        # (not for a given initial state: another simulator's reset state, objects in the air)
        if self.init_state is None:
            _warn_once(f"{self.source}: init atom ({p.name} {' '.join(map(str, p.args))}) "
                       "does not hold after placement; episodes start from the state as placed"
                       for p in self.unheld_init())
        self._history: dict[Pred, list[bool]] = {p: [] for p in self._cost_preds}
        self._costs: list[float] = []
        self.steps = 0
        self.success = False
        self._ended = False
        now = {p: self.view.atom(p) for p in self._goal_preds}
        return self._observe(obs), self._info(0.0, [0.0] * len(self._terms), now)

    def unheld_init(self) -> list[Pred]:
        """The ``:init`` atoms the state just placed does not satisfy."""
        return [p for p in self.problem.init if not self.view.atom(p)]

    def _draw_perturbation(self, rng: np.random.Generator) -> VisualPerturbation:
        m = self.task_world.model_ptr()
        objs = [n for n, a in self.task_world.assets.items() if a.category.kind == "object"]
        # only scene cameras move at V3; the wrist camera rides on the hand
        scene = [c for c in self.cameras if m.cam_bodyid[m.camera(c).id] == 0]
        task = from_task(self.problem, rng, cameras=scene, n_objects=len(objs))
        level = draw_level(self.visual_level, rng, cameras=scene, n_objects=len(objs))
        pert = combine(task, level)
        geoms = [[m.geom(g).id for g in self.task_world.assets[n].rgba_geoms] for n in objs]
        apply_model(m, pert, object_geoms=geoms, camera_ids={c: m.camera(c).id for c in scene},
                    base_cam_pos=self._base_cam_pos, base_geom_rgba=self._base_rgba)
        return pert

    def step(self, action: Any, *, images: bool = True
             ) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """One control step. ``images=False``: the caller will not read this observation's
        camera images (a policy playing on from a chunk), so none are rendered; the noise
        stream advances as if they were, so later frames are the same either way."""
        if self._ended:
            raise RobosafeError("step() after the episode ended; call reset()")
        obs = self._physics.step(mjstate.host_action(action, self.task_world.action_dim))[0]
        self.steps += 1
        self.view.update()
        atom = self.view.atom
        now = {p: atom(p) for p in self._atoms}
        for p in self._cost_preds:
            self._history[p].append(now[p])
        value = now.__getitem__
        self.success = holds(self.problem.goal, value)
        terms = [float(holds(t, value)) if timing == "instantaneous" else 0.0
                 for t, timing in zip(self._terms, self._timing, strict=True)]
        if self.freeze_on_violation:
            self._freeze(terms)
        terminated = self.success
        truncated = self.steps >= self.horizon and not terminated
        if terminated or truncated:
            # the terminal terms' cost is booked on the final step, each in its own slot
            booked = self.cost_breakdown().per_term
            terms = [booked[i] if timing == "terminal" else v
                     for i, (v, timing) in enumerate(zip(terms, self._timing, strict=True))]
            self._ended = True
        cost = sum(terms)
        self._costs.append(cost)
        info = self._info(cost, terms, now)
        if self._ended and self.cost_mode == "vla-arena":
            info["vla_arena"] = self.arena_result()
        return (self._observe(obs, images), float(self.success), terminated, truncated, info)

    def arena_result(self) -> dict:
        """The episode as VLA-Arena's evaluator ``arena_evaluator`` reports it: its cost (x 0.05
        in HazardAvoidance, at the end or on success as that evaluator does), success, and the
        safety-mode success (robosafe.tasks.cost.arena_episode)."""
        out = arena_episode(float(sum(self._costs)), self.success, self.arena_suite,
                            self.arena_evaluator)
        return {"suite": self.arena_suite, "level": self.arena_level,
                "evaluator": out.evaluator, "cost": out.cost, "success": out.success,
                "safe_success": out.safe_success}

    def _freeze(self, terms: list[float]) -> None:
        """VLA-Arena App. 7.4: a moving object stops at its first violation of a term.

        robosafe freezes every mover a violated term names; VLA-Arena's code freezes only the
        second argument of a violated InContact and the argument of CheckGripperContact."""
        only = arena_rules()["freeze_on"] if self.cost_mode == "vla-arena" else None
        for term, value in zip(self._terms, terms, strict=True):
            if not value:
                continue
            for p in predicates(term):
                if only is None:
                    names = [str(a) for a in p.args]
                elif p.name.lower() in only and len(p.args) > only[p.name.lower()]:
                    names = [str(p.args[only[p.name.lower()]])]
                else:
                    names = []
                self.task_world.frozen.update(n for n in names if n in self.task_world.moving)

    def cost_breakdown(self) -> CostBreakdown:
        """Cumulative cost CC so far (VLA-Arena Sec. 4.1) in the chosen mode."""
        return evaluate_cost(self.problem.cost, lambda p: np.asarray(self._history[p]),
                             self.steps, success=self.success, mode=self.cost_mode,
                             source=self.source)

    def _info(self, cost: float, terms: list[float], now: dict[Pred, bool]) -> dict:
        """The step's info; ``now`` holds this state's truth of every goal atom."""
        return {
            "success": self.success,
            "cost": cost,
            "cost_terms": terms,
            "cumulative_cost": float(sum(self._costs)),
            "predicates": {text: bool(now[p]) for text, p in self._goal_texts},
            "instruction": self.instruction,
            "seed": self.seed,
            "frozen": sorted(self.task_world.frozen),
        }

    # -- what the world holds (its host's roles, task info and state) ---------------------------
    @property
    def assets(self) -> dict[str, Any]:
        """The task's objects and fixtures (tables aside): name ->
        :class:`robosafe.sim.assets.Asset`."""
        return self.task_world.assets

    @property
    def movers(self) -> frozenset[str]:
        """The moving objects' names (VLA-Arena App. 7.2.3)."""
        return frozenset(self.task_world.moving)

    @property
    def table_name(self) -> str:
        """The task's table fixture (``table`` when it declares none)."""
        return next(iter(self.task_world.table_names), "table")

    @property
    def table_z(self) -> float:
        """Height of the table top (m)."""
        return float(self.task_world.table_offset[2])

    def region_geometry(self, region: Region) -> tuple[np.ndarray, np.ndarray, float]:
        """World rectangles (n, 4), yaw ranges (n, 2) and support height of ``region`` in the
        current state (robosafe.sim.world.TaskWorld.region_geometry)."""
        return self.task_world.region_geometry(region)

    def articulation(self, entity: str) -> Articulation:
        """The drawer, door or knob an Open/Close/TurnOn atom's ``entity`` refers to."""
        return self.task_world.articulation(entity)[1]

    def scripted_motion(self) -> bool:
        """Whether a moving object may move at the next step: the motion is on and some mover
        is not frozen."""
        w = self.task_world
        return bool(w.motion_on and set(w.moving) - w.frozen)

    @property
    def frozen(self) -> frozenset[str]:
        """The moving objects stopped at a violation so far (VLA-Arena App. 7.4)."""
        return frozenset(self.task_world.frozen)

    def restore_frozen(self, names: frozenset[str]) -> None:
        """Stop exactly the movers ``names`` (a saved state's :attr:`frozen`)."""
        self.task_world.frozen = set(names)

    def articulated(self) -> list[str]:
        """Entities of Open/Close/TurnOn/TurnOff atoms in the goal and init."""
        names = ("open", "close", "turnon", "turnoff", "toggledon")
        atoms = [*predicates(self.problem.goal), *self.problem.init]
        return list(dict.fromkeys(str(p.args[0]) for p in atoms if p.name.lower() in names))

    def _grip_geoms(self, entity: str) -> set[int]:
        """Geom ids of the part a hand grasps on an articulated entity (handle or knob)."""
        region = self.problem.region_index().get(entity)
        asset = self.task_world.assets[region.target if region is not None else entity]
        m = self.task_world.model_ptr()
        return {m.geom(g).id for pid, name in asset.category.parts.items()
                if name in ("handle", "handles", "knob") for g in asset.part_geoms[pid]}

    def _privileged_layout(self) -> _PrivilegedLayout:
        """:class:`_PrivilegedLayout` of the current model (found again if robosuite rebuilt
        its simulation)."""
        sim = self.task_world.sim
        if self._layout is not None and self._layout[0] is sim:
            return self._layout[1]
        m = self.task_world.model_ptr()
        bodies = tuple((f"{n}_pos", f"{n}_quat", bid) for n, bid in self.task_world.body_id.items())
        safe = []
        for name, asset in self.task_world.assets.items():
            # where a careful hand holds a tool: the mean of its non-hazardous part geoms
            geoms = [m.geom(g).id for pid, part in asset.part_geoms.items()
                     if pid not in asset.category.hazard_parts for g in part]
            if asset.category.hazard_parts and geoms:
                safe.append((f"{name}_safe_pos", geoms))
        joints = []
        for entity in self.articulated():
            adr, art = self.task_world.articulation(entity)
            jbody = int(m.jnt_bodyid[m.joint(art.joint).id])
            on_body = [g for g in range(m.ngeom) if m.geom_bodyid[g] == jbody
                       and m.geom_contype[g]]
            grip = self._grip_geoms(entity)
            handle = [g for g in on_body if g in grip] or on_body
            joints.append((f"{entity}_qpos", adr, f"{entity}_handle_pos", handle, jbody))
        layout = _PrivilegedLayout(bodies, tuple(safe), tuple(joints))
        self._layout = (sim, layout)
        return layout

    def _privileged(self, obs: dict) -> None:
        """Object poses, articulation positions and handle positions for scripted policies."""
        d = self.task_world.data_ptr()
        L = self._privileged_layout()
        for pos, quat, bid in L.bodies:
            obs[pos] = d.xpos[bid].copy()
            obs[quat] = d.xquat[bid].copy()
        for key, geoms in L.safe:
            obs[key] = d.geom_xpos[geoms].mean(axis=0)
        for key, adr, handle_key, handle, jbody in L.joints:
            obs[key] = np.array([d.qpos[adr]])
            obs[handle_key] = (d.geom_xpos[handle].mean(axis=0) if handle
                               else d.xpos[jbody].copy())

    def _observe(self, robosuite_obs: dict, images: bool = True) -> dict:
        """The policy's observation: robosuite's (as the physics step or reset returned it:
        nothing has changed its observables since), the privileged state, the images (unless
        ``images`` is False)."""
        obs = dict(robosuite_obs)
        self._privileged(obs)
        if not self.render:
            return obs
        h, w = self.image_size
        if not images:
            if self.perturbation.noise_specs:
                # the draws depend only on the frame's shape: the next rendered frame gets the
                # noise it would have had with every frame rendered
                blank = np.zeros((h, w, 3), dtype=np.uint8)
                for _ in self.cameras:
                    apply_image(blank, self.perturbation, self._noise_rng)
            return obs
        m, d = self.task_world.model_ptr(), self.task_world.data_ptr()
        for cam in self.cameras:
            # visual geoms only (robosuite keeps collision meshes in group 0)
            img = render_camera(m, d, cam, height=h, width=w, groups=VISUAL_GROUPS)
            obs[f"{cam}_image"] = apply_image(img, self.perturbation, self._noise_rng)
            if self.depth:
                obs[f"{cam}_depth"] = render_camera(m, d, cam, height=h, width=w, depth=True,
                                                    groups=VISUAL_GROUPS)
        return obs

    # -- costs and states -----------------------------------------------------------------------
    @property
    def step_costs(self) -> list[float]:
        """The cost booked on each step so far (terminal terms on the final one): sums to CC."""
        return list(self._costs)

    def finish(self) -> bool:
        """End the episode where it is: book the terminal terms' cost on the last step (once;
        an episode that terminated or truncated has them already). True if it booked."""
        if self._ended or not self.steps:
            return False
        self._costs[-1] += self.cost_breakdown().terminal
        self._ended = True
        return True

    def episode_meta(self) -> dict:
        """What a trace's ``meta`` says about this world's episode: visual level, cost mode,
        CC, and with cost mode vla-arena VLA-Arena's own report (:meth:`arena_result`)."""
        info = {"visual_level": self.visual_level, "cost_mode": self.cost_mode,
                "cumulative_cost": float(sum(self._costs))}
        if self.cost_mode == "vla-arena":
            info["vla_arena"] = self.arena_result()
        return info

    def get_state(self) -> np.ndarray:
        """The full MuJoCo integration state (qpos, qvel, act, mocap poses, ...) as float64."""
        return mjstate.get_state(self.task_world.model_ptr(), self.task_world.data_ptr())

    def set_state(self, state: np.ndarray) -> None:
        mjstate.set_state(self.task_world.model_ptr(), self.task_world.data_ptr(), state)

    def save_state(self, path: str | Path) -> None:
        """Initial state as a plain ``.npy`` array (never a pickle)."""
        np.save(Path(path), self.get_state(), allow_pickle=False)

    def load_state(self, path: str | Path) -> None:
        try:
            arr = np.load(Path(path), allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise RobosafeError(f"{path}: not a numpy state array ({exc})") from None
        self.set_state(arr)

    @property
    def action_dim(self) -> int:
        return int(self.task_world.action_dim)

    def close(self) -> None:
        self.task_world.close()
