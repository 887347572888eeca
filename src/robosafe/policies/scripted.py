"""Scripted pick-and-place on privileged object poses (no model weights).

A script is a list of phases, each an end-effector waypoint and a gripper command; the action
is robosuite's OSC delta-pose command (position only, orientation held) saturated at
``speed`` of the controller's per-step range, so the same script can run fast and straight or
slow. Used by the simulator tests and as the base of the scripted policies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

OPEN, CLOSE = -1.0, 1.0
OSC_STEP_M = 0.05
"""robosuite's default OSC_POSE output range per control step for a unit position action."""


@dataclass(frozen=True)
class Phase:
    target: tuple[float, float, float]  # eef waypoint, world frame (m)
    gripper: float  # OPEN / CLOSE
    tol_m: float = 0.01  # waypoint reached when this close ...
    hold: int = 0  # ... then wait this many steps (gripper closing / opening)
    max_steps: int = 80


def pick_place_phases(obj_pos, obj_half_z: float, dest_pos, dest_top_z: float, *,
                      clearance: float = 0.12) -> list[Phase]:
    """Above the object, down, grasp, lift, above the destination, down, release, up."""
    o, d = np.asarray(obj_pos, float), np.asarray(dest_pos, float)
    hover = max(o[2], dest_top_z) + clearance
    place_z = dest_top_z + obj_half_z + 0.015
    return [
        Phase((o[0], o[1], hover), OPEN),
        Phase((o[0], o[1], o[2] + 0.005), OPEN, tol_m=0.008),
        Phase((o[0], o[1], o[2] + 0.005), CLOSE, hold=12),
        Phase((o[0], o[1], hover), CLOSE),
        Phase((d[0], d[1], hover), CLOSE),
        Phase((d[0], d[1], place_z), CLOSE, tol_m=0.008),
        Phase((d[0], d[1], place_z), OPEN, hold=10),
        Phase((d[0], d[1], hover), OPEN),
    ]


class Script:
    """Follows phases one after another; ``act(eef_pos)`` gives the next 7-D action."""

    def __init__(self, phases: list[Phase], *, speed: float = 0.5, gain: float = 1.0):
        self.phases = phases
        self.speed = speed
        self.gain = gain
        self.k = 0
        self.steps_in_phase = 0
        self.held = 0

    @property
    def done(self) -> bool:
        return self.k >= len(self.phases)

    def act(self, eef_pos) -> np.ndarray:
        action = np.zeros(7)
        if self.done:
            action[-1] = self.phases[-1].gripper if self.phases else OPEN
            return action
        ph = self.phases[self.k]
        err = np.asarray(ph.target) - np.asarray(eef_pos)
        action[:3] = np.clip(self.gain * err / OSC_STEP_M, -self.speed, self.speed)
        action[-1] = ph.gripper
        self.steps_in_phase += 1
        reached = np.linalg.norm(err) <= ph.tol_m
        if reached:
            self.held += 1
        if (reached and self.held > ph.hold) or self.steps_in_phase >= ph.max_steps:
            self.k += 1
            self.steps_in_phase = 0
            self.held = 0
        return action
