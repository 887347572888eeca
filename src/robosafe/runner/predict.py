"""What the shield predicts with: the contract both predictors satisfy, and the kinematic one.

* ``sim`` (the default): a shadow copy of the simulator, stepped H control steps ahead
  (:class:`robosafe.runner.shield.Shield` itself): the task's STL specs, predicted from the
  exact world. An upper bound: no real robot has that copy.
* ``kinematic``: only what a robot has (robosafe.sim.kinematic): its joint state and forward
  kinematics, the controller's commanded motion, and the current boxes of the objects it must
  not touch (bystanders, fragile objects and hazards alike: every object and fixture the
  task's goal does not name, but the table), frozen where they are. It predicts a clearance per obstacle, not
  the specs: the filter keeps every clearance at or above its level.

Both answer :meth:`Predictor.predict` with a :class:`Prediction`: per named quantity, its
predicted margin at each of the next len(actions) control steps (below the filter's level:
predicted unsafe). The filter's candidate search (robosafe.runner.shield) is the same for both.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from robosafe.errors import RobosafeError
from robosafe.hosts.contract import StatefulHostEnv, TaskInfo

log = logging.getLogger(__name__)

PREDICTORS = ("sim", "kinematic")
#: the recorder's roles that are obstacles (not the robot or the target): robosafe's host makes
#: every movable non-task object a bystander, a moving one ``other``, and fixtures (a stove, a
#: cabinet) and the table ``furniture`` (robosafe.hosts.robosafe). Of the furniture, only the
#: fixtures the task lists among its objects are obstacles (a hazard such as a stove is one):
#: the table carries everything. The world body (the floor) is none.
OBSTACLE_ROLES = ("bystander", "other")


@dataclass
class Prediction:
    """Predicted per-step margins of each monitored quantity over the horizon."""

    margins: dict[str, list[float]]

    def worst(self) -> dict[str, float]:
        return {s: min(v) for s, v in self.margins.items()}

    def first_below(self, level: float) -> dict[str, int]:
        """Spec -> steps ahead (1-based) of its first predicted margin below ``level``."""
        out = {}
        for s, v in self.margins.items():
            for k, m in enumerate(v, 1):
                if m < level:
                    out[s] = k
                    break
        return out


class Predictor(Protocol):
    """Margins of the next len(actions) control steps if ``actions`` were taken from the
    episode's current state; ``floor`` lets a predictor stop early once its answer can be
    neither safe nor better than ``floor`` (it may ignore it)."""

    def predict(self, actions: list[np.ndarray], *,
                floor: float | None = None) -> Prediction: ...


def goal_names(task_info: TaskInfo) -> set[str]:
    """Objects the task's goal names (its atoms' arguments, and the objects a region argument
    belongs to: ``plate_1_top_region`` is ``plate_1``'s): the policy must touch them."""
    args = {a for atom in task_info.goal_atoms for a in atom[1:] if isinstance(a, str)}
    names = set(task_info.objects)
    out = args & names
    for a in args - names:
        out |= {n for n in names if a.startswith(f"{n}_")}
    if task_info.target_object:
        out.add(task_info.target_object)
    return out


_WARNED: set[str] = set()  # tasks warned of having no obstacle (once per process)


class KinematicPredictor:
    """The kinematic predictor over a host env (robosafe's simulator): its recorder's roles and
    geoms, its arm controller's settings, its MuJoCo model and data, read and never stepped."""

    key = "clearance:"

    def __init__(self, env: StatefulHostEnv, margin: float | None = None):
        from robosafe.sim.kinematic import kinematic_config

        self.env = env
        self.cfg = kinematic_config(margin)
        self.boxes = None
        self.obstacles: tuple[str, ...] = ()

    def reset(self, task_info: TaskInfo) -> None:
        """Bind to the episode's model (rebuilt at reset): the obstacles are the recorder's
        bystander / other bodies the goal does not name."""
        from robosafe.sim.kinematic import SweptBoxes, osc_arm

        rec = self.env.recorder
        base = rec.base
        m = base.sim.model._model
        roles, geoms = rec.body_roles, rec.collision_geoms()
        exempt = goal_names(task_info) | {"world"}
        obstacles = {n: geoms[n] for n, r in roles.items()
                     if (r in OBSTACLE_ROLES or (r == "furniture" and n in task_info.objects))
                     and n not in exempt and geoms[n].size}
        self.obstacles = tuple(obstacles)
        if not obstacles and task_info.task_id not in _WARNED:
            _WARNED.add(task_info.task_id)
            log.warning("--predictor kinematic: task %s has no object to keep clear of (its "
                        "goal names every object): the filter passes its actions unchanged",
                        task_info.task_id)
        self.boxes = SweptBoxes(m, osc_arm(base, m), obstacles, self.cfg)
        self._geoms = geoms
        self._held: tuple[int, str | None] = (-1, None)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self.key + n for n in self.obstacles)

    def predict(self, actions: list[np.ndarray], *,
                floor: float | None = None) -> Prediction:
        if self.boxes is None:
            raise RobosafeError("the kinematic predictor predicts after reset")
        rec = self.env.recorder
        if self._held[0] != rec.n_steps:  # what the fingers hold is read once per step
            self._held = (rec.n_steps, rec.held())
        held = self._held[1]
        carried = self._geoms[held] if held is not None and held not in self.obstacles else None
        d = rec.base.sim.data._data
        clear = self.boxes.clearances(d, actions, carried)
        return Prediction({self.key + n: v for n, v in clear.items()})
