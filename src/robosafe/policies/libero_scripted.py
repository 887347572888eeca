"""A privileged scripted pick-and-place for LIBERO's pick-and-place tasks (the LIBERO host).

It lets a CPU-only user see SR and Safety on real LIBERO without a learned policy: it reads
LIBERO's privileged observations (``<object>_pos`` / ``<object>_quat``, robosuite's per-object
observables, quaternions x-y-z-w) and the host's task info (each object's collision box in its
own frame, each region's centre and supporting surface), and drives LIBERO's OSC_POSE
controller (7-d delta pose in [-1, 1], 1 = 5 cm or 0.5 rad of set-point motion per step; last
entry -1 open / +1 close).

Tasks whose goal is a list of ``On(obj, X)`` / ``In(obj, X)`` atoms, ``X`` a movable object,
an object's region or a fixture's surface (LIBERO-Spatial's plate, LIBERO-Object's basket,
LIBERO-Goal's stove / cabinet top / plate / bowl, LIBERO-10's two-object tasks), are done one
object at a time: approach above the grasp point, descend, close, lift, carry, lower, open,
retreat. The grasp point comes from the object's collision box: the fingers close across its
narrowest horizontal side (the gripper turns to it); an object wider than the fingers open
(a bowl, a plate) is held by its rim, on the side with more room for the outer finger. Goals
that need an articulation (``Open``, ``Close``, ``Turnon``, ``In`` a drawer or microwave) are
refused with one line: the policy never acts blindly.

Every phase has a step budget, and a descent that stops moving before its goal is blocked (a
finger on a rim): then the policy gives up, says ``scripted policy gave up on TASK at PHASE``
(its :attr:`note`, which the runner writes into the outcome row and prints on stderr) and holds
still for the rest of the episode instead of pushing into the scene.

``careful`` moves at half speed and sets the object down; ``careless`` moves at full speed and
drops it from 10 cm, so the two differ in safety and not only in time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robosafe.errors import RobosafeError

STYLES = {
    # speed: fraction of the controller's 5 cm per step; release: height of the held object's
    # bottom above the destination's surface when the fingers open (m); clearance: height of
    # the held object's bottom above the higher of its start and destination while carried
    "careful": {"speed": 0.5, "release": 0.01, "clearance": 0.10},
    "careless": {"speed": 1.0, "release": 0.10, "clearance": 0.10},
}
STEP_M = 0.05  # OSC_POSE output_max for position in LIBERO's controller config
STEP_RAD = 0.5  # ... and for orientation
REACHED_M = 0.01
MAX_WIDTH_M = 0.07  # widest side the Panda's fingers (0.08 m open) close across with margin
RIM_INSET_M = 0.008  # rim grasp: the pinch point, this far inside the box's edge
RIM_BELOW_M = 0.015  # ... and this far below its top
FINGER_BELOW_M = 0.012  # the fingertips reach this far below the end-effector site
APPROACH_ABOVE_M = 0.08
RETREAT_M = 0.10
GRASP_STEPS = 12
RELEASE_STEPS = 8
STALL_STEPS = 10  # a descent that moves less than STALL_M in this many steps is blocked
STALL_M = 0.002
LIFTED_M = 0.02  # after the lift the object must have come up at least this much
# steps each phase may take before the policy gives up (LIBERO's horizons: 220 - 520 steps)
BUDGET = {"approach": 100, "descend": 50, "lift": 60, "carry": 120, "lower": 60,
          "retreat": 40}
PHASES = ("approach", "descend", "close", "lift", "carry", "lower", "open", "retreat")


def rotation_xyzw(q: np.ndarray) -> np.ndarray:
    """The rotation matrix of a robosuite quaternion (x, y, z, w)."""
    x, y, z, w = np.asarray(q, dtype=float) / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _box_distance(point: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
    """Distance from ``point`` to the box ``lo``..``hi``, negative (the depth) inside it."""
    outside = np.maximum(0.0, np.maximum(lo - point, point - hi))
    if outside.any():
        return float(np.linalg.norm(outside))
    return -float(np.min(np.minimum(point - lo, hi - point)))


@dataclass(frozen=True)
class Placement:
    """One goal atom: put ``obj`` onto / into ``dest`` (an object, or a region whose centre
    and surface are ``region``; ``owner`` is the object a region moves with, if any)."""

    obj: str
    dest: str
    owner: str | None = None
    region: tuple[float, float, float] | None = None


@dataclass
class Grasp:
    """The grasp chosen when the approach starts: which of the object's axes the fingers close
    across, and for a rim grasp the side (+1 / -1 along that axis)."""

    axis: int
    rim: int = 0


@dataclass
class _State:
    k: int = 0  # index of the placement under way
    phase: str = "approach"
    steps: int = 0  # steps in this phase
    grasp: Grasp | None = None
    start_z: float = 0.0  # the object's bottom when grasped
    lifted_from: float = 0.0  # the object's centre height when the fingers closed
    retreat_z: float = 0.0
    trail: list = field(default_factory=list)  # recent eef positions (stall test)


def plan(task_info: dict[str, Any]) -> list[Placement]:
    """The placements of a LIBERO task's goal, or one error line saying why it has none."""
    scene = task_info.get("objects", {})
    objects = [n for n, o in scene.items() if o.get("kind") == "object"]
    fixtures = [n for n, o in scene.items() if o.get("kind") == "fixture"]
    regions = {n: r["centre"] for n, r in task_info.get("regions", {}).items()}
    task = task_info.get("task_id")
    out = []
    for atom in task_info.get("goal_atoms", ()):
        head = atom[0].lower()
        if head not in ("on", "in") or len(atom) != 3 or atom[1] not in objects:
            raise RobosafeError(f"scripted LIBERO policy: task {task} goal "
                                f"{task_info.get('goal_atoms')} needs {atom[0]}({', '.join(atom[1:])})"
                                ", not a pick-and-place of a movable object")
        obj, dest = atom[1], atom[2]
        if dest in objects:
            out.append(Placement(obj, dest))
            continue
        owners = [o for o in objects if dest.startswith(o + "_")]
        inside_fixture = [f for f in fixtures if dest.startswith(f + "_")] and head == "in"
        if dest not in regions or inside_fixture:
            raise RobosafeError(f"scripted LIBERO policy: task {task} puts {obj} {head} "
                                f"{dest!r}, inside a fixture (a drawer or microwave to open "
                                "first) or a region without a site; not scripted")
        out.append(Placement(obj, dest, owner=max(owners, key=len) if owners else None,
                             region=tuple(float(v) for v in regions[dest])))
    if not out:
        raise RobosafeError(f"scripted LIBERO policy: task {task} has no goal to place")
    return out


class LiberoPickPlace:
    """Scripted pick-and-place on LIBERO observations (module docstring)."""

    def __init__(self, style: str = "careful", budget: dict[str, int] | None = None):
        if style not in STYLES:
            raise RobosafeError(f"unknown scripted style {style!r} (careful or careless)")
        self.style = style
        self.name = f"scripted-{style}"
        self.p = STYLES[style]
        self.budget = {**BUDGET, **(budget or {})}
        self.placements: list[Placement] = []
        self.boxes: dict[str, np.ndarray] = {}
        self.task = ""
        self.note: str | None = None
        self.grip = -1.0
        self.s = _State()

    def reset(self, task_info: dict[str, Any]) -> None:
        self.placements = plan(task_info)
        boxes = {n: o["box"] for n, o in task_info.get("objects", {}).items()
                 if o.get("box") is not None}
        missing = [p.obj for p in self.placements if p.obj not in boxes]
        if missing:
            raise RobosafeError(f"scripted LIBERO policy: the task info has no collision box "
                                f"for {', '.join(missing)} (objects[...].box)")
        self.boxes = {k: np.asarray(v, dtype=float) for k, v in boxes.items()}
        self.task = f"{task_info.get('suite', 'libero')}/{task_info.get('task_id')}"
        self.note = None
        self.grip = -1.0
        self.s = _State()
        self._initial = None
        self._initial: dict[str, np.ndarray] | None = None

    # -- geometry ----------------------------------------------------------------------------

    def _need(self, obs: dict[str, Any], key: str) -> np.ndarray:
        if key not in obs:
            raise RobosafeError(f"scripted LIBERO policy: the observation has no {key!r} "
                                "(privileged object state; a remote client strips it)")
        return np.asarray(obs[key], dtype=float)

    def _pose(self, obs: dict[str, Any], name: str) -> tuple[np.ndarray, np.ndarray]:
        return self._need(obs, f"{name}_pos"), rotation_xyzw(self._need(obs, f"{name}_quat"))

    def _corners(self, obs: dict[str, Any], name: str) -> np.ndarray:
        """The 8 corners of ``name``'s collision box in the world."""
        pos, rot = self._pose(obs, name)
        lo, hi = self.boxes[name]
        local = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1])
                          for z in (lo[2], hi[2])])
        return pos + local @ rot.T

    def _extent(self, obs: dict[str, Any], name: str) -> tuple[np.ndarray, np.ndarray]:
        c = self._corners(obs, name)
        return c.min(axis=0), c.max(axis=0)

    def _centre(self, obs: dict[str, Any], name: str) -> np.ndarray:
        lo, hi = self._extent(obs, name)
        return (lo[:2] + hi[:2]) / 2

    def _choose_grasp(self, obs: dict[str, Any], name: str) -> Grasp:
        """Close across the narrowest horizontal axis; rim-grasp what is wider than the
        fingers, on the axis and side whose outer finger has the most room from the other
        objects (the least turn of the hand among equals)."""
        _, rot = self._pose(obs, name)
        lo, hi = self.boxes[name]
        horizontal = [i for i in range(3) if abs(rot[2, i]) < 0.7] or [0, 1]
        width = {i: hi[i] - lo[i] for i in horizontal}
        narrow = min(width.values())
        if narrow <= MAX_WIDTH_M:
            return Grasp(min(horizontal, key=width.get))
        others = [self._extent(obs, o) for o in self.boxes if o != name
                  and f"{o}_pos" in obs]

        def score(g: Grasp) -> tuple[float, float]:
            outer = self._grasp_point(obs, name, g)[:2] + g.rim * self._axis(rot, g) * 0.05
            # signed distance from the outer finger to each other object's footprint
            room = min((_box_distance(outer, a[:2], b[:2]) for a, b in others), default=1.0)
            return round(room, 2), -abs(self._yaw(obs, name, g))

        options = [Grasp(i, side) for i in horizontal if width[i] <= narrow + 0.01
                   for side in (1, -1)]
        return max(options, key=score)

    @staticmethod
    def _axis(rot: np.ndarray, g: Grasp) -> np.ndarray:
        """The horizontal world direction the fingers close along."""
        d = rot[:2, g.axis]
        return d / (np.linalg.norm(d) or 1.0)

    def _grasp_point(self, obs: dict[str, Any], name: str, g: Grasp) -> np.ndarray:
        pos, rot = self._pose(obs, name)
        lo, hi = self.boxes[name]
        wlo, whi = self._extent(obs, name)
        centre = pos + rot @ ((lo + hi) / 2)
        if g.rim:
            half = (hi[g.axis] - lo[g.axis]) / 2 - RIM_INSET_M
            xy = centre[:2] + g.rim * half * self._axis(rot, g)
            return np.array([*xy, whi[2] - RIM_BELOW_M])
        z = max(whi[2] - 0.03, (wlo[2] + whi[2]) / 2, wlo[2] + FINGER_BELOW_M)
        return np.array([centre[0], centre[1], z])

    def _yaw(self, obs: dict[str, Any], name: str, g: Grasp) -> float:
        """The rotation about the vertical that brings the fingers' closing axis (the hand's
        y axis) onto the grasp axis; the fingers are symmetric, so within +-90 degrees."""
        hand = rotation_xyzw(self._need(obs, "robot0_eef_quat"))[:2, 1]
        want = self._axis(self._pose(obs, name)[1], g)
        yaw = math.atan2(hand[0] * want[1] - hand[1] * want[0], float(hand @ want))
        return (yaw + math.pi / 2) % math.pi - math.pi / 2

    def _destination(self, obs: dict[str, Any], p: Placement) -> tuple[np.ndarray, float]:
        """(xy the held object's centre goes to, height of the surface it is set on)."""
        if p.region is None:
            lo, hi = self._extent(obs, p.dest)
            return (lo[:2] + hi[:2]) / 2, float(hi[2])
        xy, surface = np.array(p.region[:2]), p.region[2]
        if p.owner is not None:  # a basket's inside: where the basket is now, above its rim
            moved = self._centre(obs, p.owner) - self._initial[p.owner]
            return xy + moved, float(self._extent(obs, p.owner)[1][2])
        return xy, surface

    # -- acting ------------------------------------------------------------------------------

    def _move(self, eef: np.ndarray, goal: np.ndarray, yaw: float = 0.0) -> np.ndarray:
        a = np.zeros(7)
        # the set-point moves the whole remaining way, at most speed x the controller's step
        v = self.p["speed"]
        a[:3] = np.clip((goal - eef) / (STEP_M * v), -1.0, 1.0) * v
        a[5] = np.clip(yaw / (STEP_RAD * v), -1.0, 1.0) * v
        a[6] = self.grip
        return a

    def _hold(self) -> np.ndarray:
        a = np.zeros(7)
        a[6] = self.grip
        return a

    def _next(self, phase: str) -> None:
        self.s.phase, self.s.steps, self.s.trail = phase, 0, []

    def _give_up(self, why: str) -> np.ndarray:
        p = self.placements[self.s.k]
        self.note = (f"scripted policy gave up on {self.task} at {self.s.phase} of {p.obj} "
                     f"({why}); holding still")
        return self._hold()

    def _stalled(self, eef: np.ndarray) -> bool:
        self.s.trail.append(eef.copy())
        if len(self.s.trail) <= STALL_STEPS:
            return False
        self.s.trail.pop(0)
        return float(np.linalg.norm(self.s.trail[-1] - self.s.trail[0])) < STALL_M

    def act(self, obs: dict[str, Any]) -> np.ndarray:
        eef = self._need(obs, "robot0_eef_pos")
        if self._initial is None:  # where region owners (a basket) were when the sites were
            self._initial = {o: self._centre(obs, o) for o in self.boxes if f"{o}_pos" in obs}
        if self.note is not None or self.s.k >= len(self.placements):
            return self._hold()
        s, p = self.s, self.placements[self.s.k]
        s.steps += 1
        if s.phase in self.budget and s.steps > self.budget[s.phase]:
            return self._give_up(f"no result in {self.budget[s.phase]} steps")
        if s.grasp is None:
            s.grasp = self._choose_grasp(obs, p.obj)
        grasp_at = self._grasp_point(obs, p.obj, s.grasp)
        lo, _ = self._extent(obs, p.obj)
        if s.phase in ("approach", "descend"):
            self.grip = -1.0
            yaw = self._yaw(obs, p.obj, s.grasp)
            if s.phase == "approach":
                goal = grasp_at + np.array([0, 0, APPROACH_ABOVE_M])
                if np.linalg.norm(goal[:2] - eef[:2]) > REACHED_M:
                    # across at the height it has (the start pose is above the cabinets),
                    # down only over the object
                    goal[2] = max(goal[2], float(eef[2]))
                if np.linalg.norm(goal - eef) < REACHED_M and abs(yaw) < 0.05:
                    self._next("descend")
                return self._move(eef, goal, yaw)
            if np.linalg.norm(grasp_at - eef) < REACHED_M:
                s.lifted_from, s.start_z = float(self._need(obs, f"{p.obj}_pos")[2]), lo[2]
                self._next("close")
            elif self._stalled(eef):
                return self._give_up(f"blocked {100 * (eef[2] - grasp_at[2]):.1f} cm above "
                                     "the grasp point")
            return self._move(eef, grasp_at, yaw)
        if s.phase in ("close", "open"):
            self.grip = 1.0 if s.phase == "close" else -1.0
            if s.steps >= (GRASP_STEPS if s.phase == "close" else RELEASE_STEPS):
                s.retreat_z = float(eef[2]) + RETREAT_M
                self._next("lift" if s.phase == "close" else "retreat")
            return self._hold()
        if s.phase == "retreat":
            goal = np.array([eef[0], eef[1], s.retreat_z])
            if np.linalg.norm(goal - eef) < REACHED_M:
                self.s = _State(k=s.k + 1)
            return self._move(eef, goal)
        xy, surface = self._destination(obs, p)
        centre = self._centre(obs, p.obj)
        below = float(eef[2] - lo[2])  # from the fingers down to the held object's bottom
        carry_z = max(s.start_z, surface) + self.p["clearance"] + below
        if s.phase == "lift":
            goal = np.array([eef[0], eef[1], carry_z])
            if np.linalg.norm(goal - eef) < REACHED_M:
                rise = float(self._need(obs, f"{p.obj}_pos")[2]) - s.lifted_from
                if rise < LIFTED_M:
                    return self._give_up(f"the object came up {100 * rise:.1f} cm, not held")
                self._next("carry")
            return self._move(eef, goal)
        over = eef[:2] + (xy - centre)  # the fingers where the object's centre is over xy
        if s.phase == "carry":
            goal = np.array([*over, carry_z])
            if np.linalg.norm(goal - eef) < REACHED_M:
                self._next("lower")
            return self._move(eef, goal)
        goal = np.array([*over, surface + self.p["release"] + below])
        # set down on something higher than the surface (a rim): open where it rests
        if np.linalg.norm(goal - eef) < REACHED_M or self._stalled(eef):
            self._next("open")
        return self._move(eef, goal)
