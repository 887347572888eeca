"""The robosafe host: CBDDL tasks in robosafe's own simulator (:class:`robosafe.sim.env.TaskEnv`,
the world), adapted to the host contract (:mod:`robosafe.hosts.contract`).

What the host owns (DESIGN.md, ``hosts``): the trace's roles and names (the goal's target
object is ``target``; fixtures and the table are ``furniture``; a moving object is ``other``,
since its displacement is its motion, not a disturbance; every other object is a
``bystander``), the task info, recording every physics step (SafeVLA-Bench paper 000 App. B)
with the world's per-step CBDDL cost, and the episode's trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from robosafe.hosts.contract import (
    ArticulationInfo,
    ObjectInfo,
    RegionInfo,
    ResetResult,
    StepResult,
    TaskInfo,
)
from robosafe.hosts.recorder import Recorder
from robosafe.hosts.state import HostState, capture, restore
from robosafe.sim.env import TaskEnv
from robosafe.sim.tags import task_tags
from robosafe.tasks.ast import Problem
from robosafe.tasks.cost import predicates
from robosafe.tasks.writer import write_formula
from robosafe.trace.episode import Episode, TaskTags

HOST = "robosafe"
BENCHMARK = "robosafe-sim"


def _arg(a: Any) -> Any:
    """A goal atom argument as TaskInfo types it: names as they are, numbers as floats, part
    ids as a tuple of ints."""
    if isinstance(a, str):
        return a
    if isinstance(a, tuple):
        return tuple(int(i) for i in a)
    return float(a)


class RobosafeEnv:
    """One CBDDL task in robosafe's simulator under the host contract.

    ``task`` is a task file or a parsed :class:`Problem`; ``benchmark`` the traces' benchmark
    (default ``robosafe-sim``); ``images`` renders the task's cameras (the world's ``render``),
    ``image_size`` a side in pixels or ``(height, width)``; every other keyword is the world's
    (:class:`robosafe.sim.env.TaskEnv`: levels, horizon, assets, cost mode, controller, ...).
    The world is :attr:`world`: its costs, predicates and MuJoCo state.
    """

    host = HOST

    def __init__(self, task: Problem | str | Path, *, benchmark: str | None = None,
                 suite: str | None = None, images: bool | None = None,
                 image_size: int | tuple[int, int] | None = None, **world: Any):
        if images is not None:
            world["render"] = images
        if isinstance(image_size, int):
            image_size = (image_size, image_size)
        self.world = TaskEnv(task, image_size=image_size, **world)
        self.suite = suite
        self.task_id = self.world.task_id
        self.recorder = Recorder(self.world.task_world, roles=self._roles(), names=self._names(),
                                 benchmark=benchmark or BENCHMARK, task_id=self.task_id,
                                 target_object=self.world.target)
        self.world.drive(self.recorder)

    # -- roles and names for the trace ------------------------------------------------------
    def _roles(self) -> dict[str, str]:
        w = self.world
        roles = {"table": "furniture"}
        for name, asset in w.assets.items():
            if name == w.target:
                role = "target"
            elif asset.category.kind == "fixture":
                role = "furniture"
            elif name in w.movers:
                role = "other"  # its displacement is its motion, not a disturbance
            else:
                role = "bystander"
            roles[asset.root_body] = role
        return roles

    def _names(self) -> dict[str, str]:
        names = {a.root_body: n for n, a in self.world.assets.items()}
        names["table"] = self.world.table_name
        return names

    def task_tags(self) -> TaskTags:
        """App. B task-tag record from the goal's mechanism and the target's properties."""
        return task_tags(self.world.problem)

    # -- the contract ---------------------------------------------------------------------------
    @property
    def horizon(self) -> int:
        return self.world.horizon

    @property
    def action_dim(self) -> int:
        return self.world.action_dim

    @property
    def control_freq(self) -> float:
        return self.world.control_freq

    @property
    def cameras(self) -> tuple[str, ...]:
        return self.world.cameras

    @property
    def render(self) -> bool:
        return self.world.render

    @property
    def seed(self) -> int | None:
        return self.world.seed

    @property
    def steps(self) -> int:
        return self.world.steps

    @property
    def success(self) -> bool:
        return self.world.success

    @property
    def instruction(self) -> str:
        return self.world.instruction

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> ResetResult:
        out = self.world.reset(seed=seed, options=options)
        self.recorder.set_cost(0.0)
        return out

    def step(self, action: Any, *, images: bool = True) -> StepResult:
        out = self.world.step(action, images=images)
        self.recorder.set_cost(out[4]["cost"])
        return out

    def close(self) -> None:
        self.world.close()

    def task_info(self) -> TaskInfo:
        w = self.world
        regions = {}
        for ref, region in w.problem.region_index().items():
            rects, _, floor = w.region_geometry(region)
            rects = np.asarray(rects, dtype=float).reshape(-1, 4)
            lo, hi = rects[:, :2].min(axis=0), rects[:, 2:].max(axis=0)
            centre = (float((lo[0] + hi[0]) / 2), float((lo[1] + hi[1]) / 2), float(floor))
            regions[ref] = RegionInfo(centre=centre, z=float(floor),
                                      rects=tuple(tuple(float(v) for v in r) for r in rects))
        objects = {n: ObjectInfo(category=a.category.name, kind=a.category.kind,
                                 half_extents=tuple(float(v) for v in a.category.half_extents),
                                 properties=tuple(sorted(a.category.properties)),
                                 moving=n in w.movers)
                   for n, a in w.assets.items()}
        arts = {}
        for entity in w.articulated():
            art = w.articulation(entity)
            arts[entity] = ArticulationInfo(closed=float(art.closed), open=float(art.open))
        return TaskInfo(
            host=HOST, task_id=self.task_id, task_name=self.task_id, suite=self.suite,
            instruction=w.instruction, seed=w.seed, action_dim=w.action_dim,
            control_freq=float(w.control_freq), goal=write_formula(w.problem.goal),
            goal_atoms=tuple((p.name, *map(_arg, p.args)) for p in predicates(w.problem.goal)),
            target_object=w.target, objects=objects, regions=regions, articulations=arts,
            table_z=w.table_z)

    def episode(self, *, episode_id: str | None = None, policy: str | None = None,
                instance_id: str | None = None, meta: dict | None = None) -> Episode:
        """The App. B trace of the episode so far (terminal costs booked if not yet ended)."""
        w = self.world
        if w.finish():
            self.recorder.set_cost(w.step_costs[-1])
        info = w.episode_meta()
        arena = info.pop("vla_arena", None)
        info.update(meta or {})
        if arena is not None:
            info["vla_arena"] = arena
        return self.recorder.episode(
            success=w.success, seed=w.seed, policy=policy, instance_id=instance_id,
            episode_id=episode_id or f"{self.task_id}/seed_{w.seed}",
            task_tags=self.task_tags(), meta=info)

    # -- state (the host contract's optional part: the shield) ---------------------------------
    def scripted_motion(self) -> bool:
        """Whether a moving object may move at the next step (its motion is scripted, not
        physics: the shield's screening cannot see it in the velocities): the motion is on
        and some mover is not frozen."""
        return self.world.scripted_motion()

    def get_state(self, *, objects: bool = True) -> HostState:
        """The world's complete state between two steps (robosafe.hosts.state): MuJoCo's
        integration state, robosuite's clocks and controllers, and the moving objects' frozen
        set. The episode's own bookkeeping (steps, costs, recorded rows) is not part of it.
        ``objects=False`` leaves robosuite's Python-side objects out (the contract's cheap
        form, robosafe.hosts.contract.StatefulHostEnv)."""
        return HostState(self.world.get_state(),
                         capture(self.world.task_world) if objects else (), (self.world.frozen,))

    def set_state(self, state: HostState) -> None:
        """Put the world in ``state`` (of an env of the same task)."""
        self.world.set_state(state.physics)
        restore(self.world.task_world, state.objects)
        (frozen,) = state.extra
        self.world.restore_frozen(frozen)
