"""A privileged scripted pick-and-place for LIBERO's pick-place tasks (the LIBERO host).

It lets a CPU-only user see SR and Safety on real LIBERO without a learned policy: it reads
LIBERO's own privileged observations (``<object>_pos``, robosuite's per-object observables)
and drives LIBERO's OSC_POSE controller (7-d delta pose in [-1, 1], 1 = 5 cm of end-effector
set-point motion per step; last entry -1 open / +1 close). Tasks whose goal is one
``On(obj, X)`` or ``In(obj, X_region)`` where ``X`` is a movable object (LIBERO-Object's
baskets, LIBERO-Spatial's plate, LIBERO-Goal's bowl / plate tasks): approach above the object,
descend, close, lift, carry above the destination, lower, open, retreat. Other goals (drawers,
knobs, fixtures) are refused with one line: the policy never acts blindly.

``careful`` moves at half speed and releases low; ``careless`` moves at full speed and drops
the object from higher up, so the two differ in safety and not only in time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from robosafe.errors import RobosafeError

STYLES = {
    # speed: fraction of the controller's 5 cm per step; release: height above the
    # destination's origin at which the gripper opens (m)
    # lift: carrying height above the destination's origin (m)
    "careful": {"speed": 0.5, "release": 0.12, "lift": 0.25},
    "careless": {"speed": 1.0, "release": 0.25, "lift": 0.30},
}
STEP_M = 0.05  # OSC_POSE output_max for position in LIBERO's controller config
REACHED_M = 0.01
GRASP_BELOW_M = 0.0  # close the fingers at the object's body origin height (+ offset below)
GRASP_STEPS = 12
RELEASE_STEPS = 8


class LiberoPickPlace:
    """Scripted pick-and-place on LIBERO observations (module docstring)."""

    def __init__(self, style: str = "careful"):
        if style not in STYLES:
            raise RobosafeError(f"unknown scripted style {style!r} (careful or careless)")
        self.style = style
        self.name = f"scripted-{style}"
        self.p = STYLES[style]
        self.obj = self.dest = None
        self.phase = 0
        self.count = 0

    def reset(self, task_info: dict[str, Any]) -> None:
        objects = list(task_info.get("objects", ()))
        goal = [a for a in task_info.get("goal_atoms", ())
                if len(a) == 3 and a[0].lower() in ("on", "in")]
        if len(goal) != 1 or goal[0][1] not in objects:
            raise RobosafeError(f"scripted LIBERO policy: task {task_info.get('task_id')} "
                                f"goal {task_info.get('goal_atoms')} is not one pick-and-place "
                                "of a movable object")
        self.obj = goal[0][1]
        # the destination is the object whose region (or itself) the goal names
        owners = [o for o in objects if goal[0][2] == o or goal[0][2].startswith(o + "_")]
        if not owners:
            raise RobosafeError(f"scripted LIBERO policy: task {task_info.get('task_id')} "
                                f"places onto {goal[0][2]!r}, a fixture region; only "
                                "movable destinations are scripted")
        self.dest = max(owners, key=len)
        self.phase = 0
        self.count = 0

    def _need(self, obs: dict[str, Any], key: str) -> np.ndarray:
        if key not in obs:
            raise RobosafeError(f"scripted LIBERO policy: the observation has no {key!r} "
                                "(privileged object state; a remote client strips it)")
        return np.asarray(obs[key], dtype=float)

    def _toward(self, eef: np.ndarray, goal: np.ndarray, grip: float) -> np.ndarray:
        a = np.zeros(7)
        a[:3] = np.clip((goal - eef) / STEP_M, -1.0, 1.0) * self.p["speed"]
        a[6] = grip
        return a

    def act(self, obs: dict[str, Any]) -> np.ndarray:
        eef = self._need(obs, "robot0_eef_pos")
        obj = self._need(obs, f"{self.obj}_pos")
        dest = self._need(obs, f"{self.dest}_pos")
        lift = dest[2] + self.p["lift"]  # fixed: the held object's own height moves with it
        # phases: 0 above object, 1 down, 2 close, 3 lift, 4 above dest, 5 lower, 6 open, 7 up
        waypoints = {
            0: (np.array([obj[0], obj[1], obj[2] + 0.10]), -1.0),
            1: (np.array([obj[0], obj[1], obj[2] - GRASP_BELOW_M]), -1.0),
            3: (np.array([eef[0], eef[1], lift]), 1.0),
            4: (np.array([dest[0], dest[1], lift]), 1.0),
            5: (np.array([dest[0], dest[1], dest[2] + self.p["release"]]), 1.0),
            7: (np.array([dest[0], dest[1], lift]), -1.0),
        }
        if self.phase in (2, 6):
            self.count += 1
            hold = GRASP_STEPS if self.phase == 2 else RELEASE_STEPS
            if self.count >= hold:
                self.phase, self.count = self.phase + 1, 0
            a = np.zeros(7)
            a[6] = 1.0 if self.phase in (2, 3) else -1.0
            return a
        goal, grip = waypoints[self.phase]
        if self.phase < 7 and np.linalg.norm(goal - eef) < REACHED_M:
            self.phase += 1
        return self._toward(eef, goal, grip)
