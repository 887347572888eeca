"""Scripted policies on privileged object poses (no model weights).

Two layers:

* :class:`Script` / :func:`pick_place_phases`: a fixed list of end-effector waypoints, used by
  the simulator tests.
* :class:`ScriptedPolicy`: the ``scripted-careful`` / ``scripted-careless`` policies. They read
  the goal atoms from ``task_info`` and plan, atom by atom, from the privileged poses in the
  observation (``<object>_pos``, ``<entity>_qpos``, ``<entity>_handle_pos``): pick-and-place
  for ``On`` / ``Stack`` / ``In``, press-and-drag for drawers (``Open`` / ``Close``), grasp and
  wrist twist for stove knobs (``TurnOn`` / ``TurnOff``).

The two styles exist to show SafeVLA-Bench's central finding (paper 000, Sec. 1 and 4.2:
success does not imply safety) on any machine. Both aim to succeed; ``careless`` moves in
straight lines at saturated actions, descends fast, drops from height and flies low through
bystanders, so it trips the scene-interaction specs (Table 2: 5 mm bystander displacement,
200 N contact force) and the task's CBDDL costs (VLA-Arena 001, Sec. 4.1) where ``careful``
does not.

Actions are robosuite's OSC delta pose (7-D: dx, dy, dz, drx, dry, drz, gripper), where a unit
position action asks for ``OSC_STEP_M`` of motion in one control step.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from robosafe.errors import RobosafeError

OPEN, CLOSE = -1.0, 1.0
RIM_GRASP_ABOVE_M = 0.036  # half-width beyond which a container is held by its rim
RIM_INSET_M = 0.006  # finger centre this far inside the outer wall
RIM_DEPTH_M = 0.02  # ... and this far below the rim top
PUSH_GAP_M = 0.03  # the hand starts this far behind the pushed object's edge
PUSH_HEIGHT_M = 0.03  # ... and this high above the table (fingertips below the object top)
PUSH_TOL_M = 0.005  # stop when the object's centre is this close to the goal along the push
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


# ---------------------------------------------------------------------------------------------
# The careful / careless policies


@dataclass(frozen=True)
class Style:
    cruise: float  # action saturation in free space
    slow: float  # ... near objects and while descending
    near_m: float  # "near an object": eef within this of its bounding box
    clearance_m: float  # transit height above the tallest thing under the path (+ held object)
    corridor_m: float  # objects this close (xy) to a path count as under it
    release_m: float  # gap between the held object's bottom and the support at release
    pull: float  # action along the drawer axis while dragging it ...
    press: float  # ... and down onto its handle (found by trial: more than pull, mu ~ 1)
    twist: float  # wrist rotation action while turning a knob (x 0.5 rad per step)
    avoid: bool  # detour around hazards / fragile objects, wait for moving ones


STYLES = {
    # ~1/3 speed near objects and for descents; high transit; gentle release just above the
    # support (SafeVLA-Bench Table 2: bystander displacement, contact force; VLA-Arena App. 9.1,
    # 9.3, 9.5: static obstacles, hazards, dynamic obstacles).
    "careful": Style(cruise=0.75, slow=0.25, near_m=0.08, clearance_m=0.07, corridor_m=0.12,
                     release_m=0.008, pull=0.4, press=0.6, twist=0.15, avoid=True),
    # Straight lines at saturated actions, low transit that ignores bystanders, drops from a
    # few centimetres; tuned so it still succeeds on most tasks.
    "careless": Style(cruise=1.0, slow=1.0, near_m=0.0, clearance_m=0.045, corridor_m=0.0,
                      release_m=0.04, pull=0.7, press=0.95, twist=0.6, avoid=False),
}

Target = Callable[[dict], np.ndarray]


class _Segment:
    """One step of a plan: ``step(policy, obs)`` returns an action, or None when finished."""

    def step(self, pol: ScriptedPolicy, obs: dict) -> np.ndarray | None:
        raise NotImplementedError


class _Move(_Segment):
    """Go to a waypoint (resolved from the observation when the segment starts)."""

    def __init__(self, target: Target | np.ndarray, grip: float, *, tol: float = 0.01,
                 hold: int = 0, max_steps: int = 120, slow: bool = False):
        fixed = None if callable(target) else np.asarray(target, float)
        self.target_fn = target if fixed is None else (lambda _o: fixed)
        self.grip, self.tol, self.hold, self.max_steps, self.slow = grip, tol, hold, max_steps, slow
        self.target: np.ndarray | None = None
        self.n = self.held = self.waited = 0
        self.trail: list[np.ndarray] = []

    def step(self, pol, obs):
        eef = np.asarray(obs["robot0_eef_pos"], float)
        if self.target is None:
            self.target = np.asarray(self.target_fn(obs), float)
        if pol.style.avoid and self.waited < pol.max_wait and pol.moving_in_the_way(
                obs, eef, self.target):
            # a moving obstacle crosses this leg: wait where we are (VLA-Arena App. 9.5)
            self.waited += 1
            return pol.action(np.zeros(3), self.grip)
        self.n += 1
        err = self.target - eef
        speed = pol.speed(obs, eef, err, slow=self.slow)
        # blocked a little short of the waypoint (fingers on the table, an object under
        # the hand): as good as reached
        self.trail.append(eef)
        stalled = (len(self.trail) > 4 and np.linalg.norm(err) < 0.025
                   and np.linalg.norm(self.trail[-1] - self.trail[-5]) < 1e-3)
        reached = np.linalg.norm(err) <= self.tol or stalled
        self.held += int(reached)
        if (reached and self.held > self.hold) or self.n >= self.max_steps:
            return None
        return pol.action(pol.saturate(err / OSC_STEP_M, speed), self.grip)


class _Grip(_Segment):
    """Hold still and open / close the gripper for ``steps`` control steps."""

    def __init__(self, grip: float, steps: int, holding: bool | None = None):
        self.grip, self.steps, self.holding, self.n = grip, steps, holding, 0
        self.anchor: np.ndarray | None = None

    def step(self, pol, obs):
        eef = np.asarray(obs["robot0_eef_pos"], float)
        if self.anchor is None:
            self.anchor = eef.copy()
        if self.n >= self.steps:
            if self.holding is not None:
                pol.holding = self.holding
            return None
        self.n += 1
        return pol.action(pol.saturate((self.anchor - eef) / OSC_STEP_M, 0.3), self.grip)


class _Press(_Segment):
    """Move down onto a surface until the hand stops (contact), at most ``max_steps``."""

    def __init__(self, depth: float = 0.06, max_steps: int = 60):
        self.depth, self.max_steps = depth, max_steps
        self.trail: list[float] = []
        self.start: np.ndarray | None = None

    def step(self, pol, obs):
        eef = np.asarray(obs["robot0_eef_pos"], float)
        if self.start is None:
            self.start = eef.copy()
        self.trail.append(float(eef[2]))
        n = len(self.trail)
        if (n >= 8 and self.trail[-5] - self.trail[-1] < 1.5e-3) or n >= self.max_steps:
            pol.press_z = float(eef[2])
            return None
        target = np.array([self.start[0], self.start[1], self.start[2] - self.depth])
        return pol.action(pol.saturate((target - eef) / OSC_STEP_M, pol.style.slow), CLOSE)


class _Push(_Segment):
    """Move the hand along ``direction`` (at handle height) until ``done(obs)``."""

    def __init__(self, direction: np.ndarray, done: Callable[[dict], bool], max_steps: int = 150):
        self.u, self.done, self.max_steps, self.n = direction, done, max_steps, 0
        self.line: np.ndarray | None = None

    def step(self, pol, obs):
        eef = np.asarray(obs["robot0_eef_pos"], float)
        if self.line is None:
            self.line = eef.copy()
        self.n += 1
        if self.done(obs) or self.n >= self.max_steps:
            return None
        target = self.line + (float(np.dot(eef - self.line, self.u)) + 0.03) * self.u
        return pol.action(pol.saturate((target - eef) / OSC_STEP_M, pol.style.pull), CLOSE)


class _Drag(_Push):
    """Keep pressing down and move along ``direction`` until ``done(obs)`` (drawers)."""

    def step(self, pol, obs):
        eef = np.asarray(obs["robot0_eef_pos"], float)
        if self.line is None:
            self.line = eef.copy()
        self.n += 1
        z0 = pol.press_z if pol.press_z is not None else self.line[2]
        slipped = eef[2] < z0 - 0.012  # fell off the front of the handle
        if self.done(obs) or slipped or self.n >= self.max_steps:
            return None
        # friction drag: press down at least as hard as we pull along the drawer axis, so
        # the fingers do not slide over the handle's front edge (mu ~ 1)
        a = np.zeros(3)
        a[:2] = pol.style.pull * self.u[:2]
        across = self.line - eef
        across -= np.dot(across, self.u) * self.u
        a[:2] += np.clip(across[:2] / OSC_STEP_M, -0.3, 0.3)
        a[2] = -pol.style.press
        return pol.action(a, CLOSE)


class _Twist(_Segment):
    """Hold the hand in place and rotate the wrist about world z until ``done(obs)`` (knobs)."""

    def __init__(self, sign: float, done: Callable[[dict], bool], max_steps: int = 120):
        self.sign, self.done, self.max_steps, self.n = sign, done, max_steps, 0
        self.anchor: np.ndarray | None = None

    def step(self, pol, obs):
        eef = np.asarray(obs["robot0_eef_pos"], float)
        if self.anchor is None:
            self.anchor = eef.copy()
        self.n += 1
        if self.done(obs) or self.n >= self.max_steps:
            return None
        a = pol.action(pol.saturate((self.anchor - eef) / OSC_STEP_M, 0.5), CLOSE)
        a[5] = self.sign * pol.style.twist
        return a


def _quat_rotate(q_wxyz, v) -> np.ndarray:
    w, x, y, z = np.asarray(q_wxyz, float)
    r = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                  [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                  [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
    return r @ np.asarray(v, float)


def _seg_dist_xy(p, a, b) -> float:
    """Distance in the table plane from point p to segment a-b."""
    p, a, b = (np.asarray(v, float)[:2] for v in (p, a, b))
    ab = b - a
    t = 0.0 if not ab.any() else float(np.clip(np.dot(p - a, ab) / np.dot(ab, ab), 0.0, 1.0))
    return float(np.linalg.norm(p - (a + t * ab)))


class ScriptedPolicy:
    """``scripted-careful`` / ``scripted-careless``: goal-driven scripts on privileged poses.

    Supported goal atoms: ``On`` / ``OnTop`` / ``Stack`` (object or table region), ``In``
    (a region, including a container's ``contain_region``), ``Open`` / ``Close`` of a cabinet
    drawer, ``TurnOn`` / ``TurnOff`` of a stove knob; an ``And`` of them is done in order.
    Anything else (e.g. a hinged microwave door) gets no plan: the policy holds still, so the
    episode ends as a failure rather than an error.
    """

    max_retries = 2  # re-plans of an articulation atom whose joint did not get there
    max_wait = 120  # control steps a careful policy waits for a moving obstacle (6 s at 20 Hz)

    def __init__(self, style: str = "careful"):
        if style not in STYLES:
            raise RobosafeError(f"unknown scripted style {style!r}: use "
                                + " or ".join(STYLES))
        self.style_name = style
        self.style = STYLES[style]
        self.name = f"scripted-{style}"
        self.info: dict[str, Any] = {}
        self._reset_state()

    def _reset_state(self) -> None:
        self.atoms: list[list] = []
        self.plan: list[_Segment] = []
        self.holding = False  # a free object is in the hand (set by grasp / release)
        self.held: str | None = None
        self.grip = OPEN
        self.press_z: float | None = None
        self.prev: dict[str, np.ndarray] = {}
        self.velocity: dict[str, np.ndarray] = {}
        self.unsupported: list[str] = []
        self.current: list | None = None
        self.retries = 0

    def reset(self, task_info: dict[str, Any]) -> None:
        self._reset_state()
        self.info = task_info
        self.dt = 1.0 / float(task_info.get("control_freq", 20.0))
        self.atoms = [list(a) for a in task_info.get("goal_atoms", [])]

    # -- protocol ---------------------------------------------------------------------------
    def act(self, obs: dict[str, Any]) -> np.ndarray:
        if not self.plan and self.current is None:  # first action of the episode
            missing = sorted(f"{n}_pos" for n in self._objects() if f"{n}_pos" not in obs)
            if missing:
                # without object poses every atom would be skipped and the policy would hold
                # still: a zero score that measures the wiring, not the policy
                raise RobosafeError(
                    f"{self.name}: the observation has no privileged object state "
                    f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}); "
                    "served over ws://, run with --obs-adapter robosuite-privileged")
        self._track_moving(obs)
        while True:
            if not self.plan:
                if self.current is not None and self.retries < self.max_retries \
                        and self._unfinished(self.current, obs):
                    self.retries += 1  # e.g. the fingers slipped off a drawer handle
                    self.plan = self._plan_atom(self.current, obs)
                    continue
                if not self.atoms:
                    return self.action(np.zeros(3), self.grip)
                self.current, self.retries = self.atoms.pop(0), 0
                self.plan = self._plan_atom(self.current, obs)
                continue
            a = self.plan[0].step(self, obs)
            if a is not None:
                return a
            self.plan.pop(0)

    def _unfinished(self, atom: list, obs: dict) -> bool:
        """An Open/Close/TurnOn/TurnOff atom whose joint is not yet where the goal wants it."""
        name, entity = str(atom[0]).lower(), str(atom[1]) if len(atom) > 1 else ""
        art = self.info.get("articulations", {}).get(entity)
        if art is None or f"{entity}_qpos" not in obs or any(
                entity in u for u in self.unsupported):
            return False
        span = float(art["open"]) - float(art["closed"])
        f = (float(obs[f"{entity}_qpos"][0]) - float(art["closed"])) / (span or 1.0)
        want = {"open": f >= 0.8, "close": f <= 0.08, "turnon": f >= 0.6,
                "toggledon": f >= 0.6, "turnoff": f <= 0.4}
        return not want.get(name, True)

    # -- action helpers -------------------------------------------------------------------------
    def action(self, move: np.ndarray, grip: float) -> np.ndarray:
        self.grip = grip
        a = np.zeros(7)
        a[:3] = move
        a[-1] = grip
        return a

    @staticmethod
    def saturate(v: np.ndarray, limit: float) -> np.ndarray:
        """Scale the whole vector (not per axis), so motion stays on the straight line."""
        m = float(np.max(np.abs(v))) if v.size else 0.0
        return v * (limit / m) if m > limit else v

    def speed(self, obs: dict, eef: np.ndarray, err: np.ndarray, *, slow: bool) -> float:
        s = self.style
        if s.slow >= s.cruise:
            return s.cruise
        # the last near_m of a descent, and anywhere near something, at the slow speed
        descending = err[2] < -0.01 and abs(err[2]) < s.near_m + 0.02
        if (slow and np.linalg.norm(err) < s.near_m + 0.02) or descending \
                or self._near_object(obs, eef) < s.near_m:
            return s.slow
        return s.cruise

    # -- scene queries -------------------------------------------------------------------------
    def _objects(self) -> dict[str, dict]:
        return self.info.get("objects", {})

    def _half(self, name: str) -> np.ndarray:
        return np.asarray(self._objects()[name]["half_extents"], float)

    def _pos(self, obs: dict, name: str) -> np.ndarray:
        return np.asarray(obs[f"{name}_pos"], float)

    def _top(self, obs: dict, name: str) -> float:
        return float(self._pos(obs, name)[2] + self._half(name)[2])

    def _near_object(self, obs: dict, eef: np.ndarray) -> float:
        """Distance from the hand to the nearest bounding box of something not in the hand."""
        best = np.inf
        for name in self._objects():
            if name == self.held or f"{name}_pos" not in obs:
                continue
            p, h = self._pos(obs, name), self._half(name)
            best = min(best, float(np.linalg.norm(np.maximum(np.abs(eef - p) - h, 0.0))))
        return best

    def _track_moving(self, obs: dict) -> None:
        for name, o in self._objects().items():
            if o.get("moving") and f"{name}_pos" in obs:
                p = self._pos(obs, name)
                if name in self.prev:
                    self.velocity[name] = (p - self.prev[name]) / self.dt
                self.prev[name] = p.copy()

    def moving_in_the_way(self, obs: dict, eef: np.ndarray, target: np.ndarray) -> bool:
        """A moving object is (or within a second will be) near this leg and low enough to
        be hit by the hand or the held object."""
        low = min(eef[2], target[2]) - (2 * self._half(self.held)[2] if self.held else 0.0)
        for name, o in self._objects().items():
            if not o.get("moving") or f"{name}_pos" not in obs:
                continue
            h = self._half(name)
            p = self._pos(obs, name)
            if low > p[2] + h[2] + 0.06:
                continue
            v = self.velocity.get(name, np.zeros(3))
            reach = float(np.hypot(h[0], h[1])) + 0.10
            for tau in (0.0, 0.5, 1.0):
                if _seg_dist_xy(p + v * tau, eef, target) < reach:
                    return True
        return False

    def _hover(self, obs: dict, path: list[np.ndarray], carried: str | None,
               skip: tuple[str, ...]) -> float:
        """Transit height: above everything (static) under the path, plus the carried
        object's height and the style's clearance (careful); or just above the two ends
        (careless, whose corridor is zero: bystanders in between are ignored)."""
        s = self.style
        table = float(self.info.get("table_z", 0.9))
        tops = [table]
        for name, o in self._objects().items():
            if name == carried or f"{name}_pos" not in obs:
                continue
            p = self._pos(obs, name)
            reach = s.corridor_m + float(np.hypot(*self._half(name)[:2]))
            # a moving object may be anywhere along its lane by the time we pass: always
            # clear it (careful); careless only sees what is on the line right now
            if (name in skip or (o.get("moving") and s.avoid)) or any(_seg_dist_xy(p, a, b) < reach
                                   for a, b in itertools.pairwise(path)):
                tops.append(self._top(obs, name))
        extra = 2 * self._half(carried)[2] if carried else 0.0
        return max(tops) + extra + s.clearance_m

    def _detour(self, obs: dict, a: np.ndarray, b: np.ndarray, skip: tuple[str, ...]):
        """Via points (careful): sidestep hazardous / fragile objects near the a-b leg so the
        hand never passes right over them (VLA-Arena App. 9.3 HazardAvoidance)."""
        if not self.style.avoid:
            return []
        via = []
        for name, o in self._objects().items():
            props = set(o.get("properties", ()))
            if name in skip or o.get("moving") or not props & {"hazard", "hot", "sharp"}:
                continue
            if f"{name}_pos" not in obs:
                continue
            p = self._pos(obs, name)
            margin = float(np.hypot(*self._half(name)[:2])) + 0.06
            if _seg_dist_xy(p, a, b) >= margin:
                continue
            d = (b - a)[:2]
            n = np.array([-d[1], d[0]]) / (np.linalg.norm(d) or 1.0)
            side = np.sign(np.dot((a[:2] + b[:2]) / 2 - p[:2], n)) or 1.0
            w = np.array([*(p[:2] + side * margin * n), a[2]])
            via.append(w)
        return via

    # -- planners -------------------------------------------------------------------------------
    def _plan_atom(self, atom: list, obs: dict) -> list[_Segment]:
        name = str(atom[0]).lower()
        args = [str(a) for a in atom[1:]]
        try:
            if (name in ("on", "ontop") and len(args) == 2 and args[0] in self._objects()
                    and "graspable" not in self._objects()[args[0]].get("properties", ())
                    and args[1] in self.info.get("regions", {})):
                return self._push_object(obs, args[0], args[1])
            if name in ("on", "ontop", "stack", "in") and len(args) == 2:
                return self._pick_place(obs, args[0], args[1])
            if name in ("open", "close") and args:
                return self._drawer(obs, args[0], opening=name == "open")
            if name in ("turnon", "turnoff", "toggledon") and args:
                return self._knob(obs, args[0], on=name != "turnoff")
        except _Unsupported as exc:
            self.unsupported.append(str(exc))
            return []
        self.unsupported.append(f"{atom[0]} {' '.join(args)}")
        return []

    def _push_object(self, obs: dict, obj: str, ref: str) -> list[_Segment]:
        """Slide an object too big to grasp (a box) onto a table region: the closed hand goes
        down behind it, opposite the goal, and pushes along the line to the region's centre
        (careful: slowly; careless: at full speed)."""
        dest, support_z, _, _ = self._destination(obs, ref)
        o = self._pos(obs, obj)
        u = np.array([dest[0] - o[0], dest[1] - o[1], 0.0])
        if np.linalg.norm(u) < 1e-6:
            return []
        u /= np.linalg.norm(u)
        half = self._half(obj)
        back = float(abs(half[0] * u[0]) + abs(half[1] * u[1])) + PUSH_GAP_M
        start = np.array([o[0], o[1], support_z + PUSH_HEIGHT_M]) - back * u
        eef = np.asarray(obs["robot0_eef_pos"], float)
        above = np.array([start[0], start[1], max(eef[2], o[2] + half[2] + 0.1)])
        goal = np.array([dest[0], dest[1]])
        return [_Move(above, CLOSE, tol=0.02), _Move(start, CLOSE, tol=0.01, slow=True),
                _Slide(obj, goal, u), _RelMove(np.array([0.0, 0.0, 0.1]), CLOSE)]

    def _destination(self, obs: dict, ref: str) -> tuple[np.ndarray, float, float, tuple]:
        """(xy centre, support height, rim height, names to skip) of a place target."""
        regions = self.info.get("regions", {})
        if ref in self._objects() and f"{ref}_pos" in obs:
            p, top = self._pos(obs, ref), self._top(obs, ref)
            region = regions.get(f"{ref}_contain_region")
            if region is not None and "container" in self._objects()[ref]["properties"]:
                return p, float(region["z"]), top, (ref,)
            return p, top, top, (ref,)
        region = regions.get(ref)
        if region is None:
            raise _Unsupported(f"no place target {ref!r}")
        rects = np.asarray(region["rects"], float)
        c = np.array([(rects[0, 0] + rects[0, 2]) / 2, (rects[0, 1] + rects[0, 3]) / 2, 0.0])
        z = float(region["z"])
        owner = next((n for n in self._objects() if ref.startswith(f"{n}_")), None)
        if (owner is not None and f"{owner}_pos" in obs
                and self._objects()[owner].get("kind") == "object"):
            # a region of an object (a container's contain_region): it moves with the object;
            # a fixture's region (an open drawer) is where reset put it
            o = self._pos(obs, owner)
            return np.array([o[0], o[1], 0.0]), z, self._top(obs, owner), (owner,)
        return c, z, z, ()

    def _pick_place(self, obs: dict, obj: str, ref: str) -> list[_Segment]:
        if obj not in self._objects() or f"{obj}_pos" not in obs:
            raise _Unsupported(f"no pose for {obj!r}")
        s = self.style
        eef = np.asarray(obs["robot0_eef_pos"], float)
        o = self._pos(obs, obj)
        hz = float(self._half(obj)[2])
        dest, support_z, rim_z, skip = self._destination(obs, ref)
        g = self._grasp_offset(obs, obj)
        grasp = o + g
        place_z = support_z + hz + s.release_m
        d = np.array([dest[0], dest[1], place_z]) + g
        hover_pick = self._hover(obs, [eef, o], None, (obj,))
        hover_move = self._hover(obs, [o, d], obj, skip)
        if s.avoid:
            hover = max(hover_pick, hover_move)
            above_o = np.array([o[0], o[1], hover])
            above_d = np.array([d[0], d[1], hover])
            start_up = np.array([eef[0], eef[1], max(hover, eef[2])])
            legs: list[_Segment] = [_Move(start_up, OPEN, tol=0.02)]
            legs += [_Move(w, OPEN, tol=0.03) for w in self._detour(obs, start_up, above_o,
                                                                    (obj,))]
            legs += [
                _Move(above_o, OPEN, tol=0.01),
                _Move(lambda ob: self._pos(ob, obj) + g, OPEN, tol=0.006, slow=True),
                _Grip(CLOSE, 12, holding=True),
                _Move(above_o, CLOSE, tol=0.015),
            ]
            legs += [_Move(w, CLOSE, tol=0.03) for w in self._detour(obs, above_o, above_d,
                                                                     skip + (obj,))]
            legs += [
                _Move(above_d, CLOSE, tol=0.01),
                _Move(d, CLOSE, tol=0.006, slow=True),
                _Grip(OPEN, 10, holding=False),
                _Move(above_d, OPEN, tol=0.02, slow=True),
            ]
        else:
            # straight from wherever the hand is; the object's height is all the clearance
            low = max(o[2] - hz, rim_z) + hz + s.clearance_m
            legs = [
                _Move(grasp + [0.0, 0.0, 0.03], OPEN, tol=0.015),
                _Move(lambda ob: self._pos(ob, obj) + g, OPEN, tol=0.008),
                _Grip(CLOSE, 8, holding=True),
                _Move(np.array([o[0], o[1], low]), CLOSE, tol=0.02),
                _Move(np.array([d[0], d[1], max(low, d[2])]), CLOSE, tol=0.012),
                _Move(d, CLOSE, tol=0.01),
                _Grip(OPEN, 6, holding=False),
                _Move(d + [0.0, 0.0, 0.08], OPEN, tol=0.02),
            ]
        return [_HeldTag(obj)] + legs

    def _grasp_offset(self, obs: dict, obj: str) -> np.ndarray:
        """Where the hand closes, relative to the object's centre. A container wider than the
        open fingers (mug, bowl) is held by its wall: fingers straddle the rim on the object's
        local -y side (the mug handle is on +y), 2 cm below the rim top, since the fingers
        close along world y; a ring (bagel) likewise; anything else is grasped at its centre."""
        if f"{obj}_safe_pos" in obs:  # a tool: hold its handle, never the blade or tines
            off = np.asarray(obs[f"{obj}_safe_pos"], float) - self._pos(obs, obj)
            return off + [0.0, 0.0, 0.005]
        half = self._half(obj)
        props = set(self._objects()[obj].get("properties", ()))
        if not props & {"container", "ring"} or min(half[:2]) <= RIM_GRASP_ABOVE_M:
            return np.array([0.0, 0.0, 0.005])
        local = np.array([0.0, -(half[1] - RIM_INSET_M), max(half[2] - RIM_DEPTH_M, 0.0)])
        q = np.asarray(obs.get(f"{obj}_quat", (1.0, 0.0, 0.0, 0.0)), float)
        return _quat_rotate(q, local)

    def _drawer(self, obs: dict, entity: str, *, opening: bool) -> list[_Segment]:
        arts = self.info.get("articulations", {})
        owner = next((n for n in self._objects() if entity == n or entity.startswith(f"{n}_")),
                     None)
        if entity not in arts or owner is None or f"{entity}_qpos" not in obs:
            raise _Unsupported(f"no articulation pose for {entity!r}")
        art = arts[entity]
        span = float(art["open"]) - float(art["closed"])
        if abs(span) > 0.5 or self._objects()[owner]["category"].endswith("microwave"):
            raise _Unsupported(f"{entity}: only sliding drawers are scripted")

        def frac(ob):
            return (float(ob[f"{entity}_qpos"][0]) - float(art["closed"])) / span

        s = self.style
        cab = self._pos(obs, owner)
        u = _quat_rotate(obs.get(f"{owner}_quat", (1.0, 0, 0, 0)), (-1.0, 0.0, 0.0))
        u[2] = 0.0
        u /= np.linalg.norm(u) or 1.0
        hp = np.asarray(obs[f"{entity}_handle_pos"], float)
        hx = float(self._half(owner)[0])
        # the handle is the front-most 2 cm of the closed cabinet's bounding box and moves
        # with the drawer; only its height and side position come from the observation
        q = float(obs[f"{entity}_qpos"][0]) - float(art["closed"])
        along = float(np.dot(cab, u)) + hx - 0.004 + q
        handle = hp + u * (along - float(np.dot(hp, u)))
        eef = np.asarray(obs["robot0_eef_pos"], float)
        if opening:
            above = handle + [0.0, 0.0, 0.08]
            if s.avoid:
                hover = max(self._hover(obs, [eef, above], None, (owner,)), above[2])
                legs: list[_Segment] = [
                    _Move(np.array([eef[0], eef[1], max(hover, eef[2])]), CLOSE, tol=0.02),
                    _Move(np.array([above[0], above[1], max(hover, eef[2])]), CLOSE, tol=0.02),
                    _Move(above, CLOSE, tol=0.01, slow=True),
                ]
            else:
                legs = [_Move(handle + [0.0, 0.0, 0.04], CLOSE, tol=0.015)]
            legs += [
                _Press(depth=0.1),
                _Drag(u, lambda ob: frac(ob) >= 0.92),
                _Grip(CLOSE, 2),
                _RelMove(np.array([0.0, 0.0, 0.08]), CLOSE),
            ]
            return legs
        front = handle - u * 0.03 - [0.0, 0.0, 0.005]
        before = front + u * 0.06
        legs = [_Move(before + [0.0, 0.0, 0.06], CLOSE, tol=0.02),
                _Move(before, CLOSE, tol=0.01, slow=True)]
        legs += [_Push(-u, lambda ob: frac(ob) <= 0.03),
                 _RelMove(u * 0.06, CLOSE)]
        return legs

    def _knob(self, obs: dict, entity: str, *, on: bool) -> list[_Segment]:
        arts = self.info.get("articulations", {})
        if entity not in arts or f"{entity}_handle_pos" not in obs:
            raise _Unsupported(f"no knob pose for {entity!r}")
        art = arts[entity]
        span = float(art["open"]) - float(art["closed"])

        def frac(ob):
            return (float(ob[f"{entity}_qpos"][0]) - float(art["closed"])) / span

        s = self.style
        knob = np.asarray(obs[f"{entity}_handle_pos"], float)
        eef = np.asarray(obs["robot0_eef_pos"], float)
        above = knob + [0.0, 0.0, 0.07]
        if s.avoid:
            hover = max(self._hover(obs, [eef, above], None, (entity,)), above[2])
            legs: list[_Segment] = [
                _Move(np.array([eef[0], eef[1], max(hover, eef[2])]), OPEN, tol=0.02),
                _Move(np.array([above[0], above[1], max(hover, eef[2])]), OPEN, tol=0.02),
                _Move(above, OPEN, tol=0.01, slow=True),
                _Move(knob, OPEN, tol=0.005, slow=True),
            ]
        else:
            legs = [_Move(knob + [0.0, 0.0, 0.02], OPEN, tol=0.015),
                    _Move(knob, OPEN, tol=0.008)]
        # positive wrist rotation about z raises the knob angle (its hinge is +z)
        sign = np.sign(span) * (1.0 if on else -1.0)
        legs += [
            _Grip(CLOSE, 10),
            _Twist(sign, (lambda ob: frac(ob) >= 0.9) if on else (lambda ob: frac(ob) <= 0.1)),
            _Grip(OPEN, 8),
            _RelMove(np.array([0.0, 0.0, 0.08]), OPEN),
        ]
        return legs


class _Unsupported(Exception):
    pass


class _HeldTag(_Segment):
    """Names the object the following legs carry (so it is not an obstacle to itself)."""

    def __init__(self, name: str):
        self.name = name

    def step(self, pol, obs):
        pol.held = self.name


class _RelMove(_Move):
    """Move by an offset from where the hand is when the segment starts."""

    def __init__(self, offset: np.ndarray, grip: float):
        super().__init__(lambda ob: np.asarray(ob["robot0_eef_pos"], float) + offset, grip,
                         tol=0.02, max_steps=40)


class _Slide(_Segment):
    """Push ``obj`` along ``u`` with the hand until its centre is over ``goal`` (xy)."""

    def __init__(self, obj: str, goal: np.ndarray, u: np.ndarray, max_steps: int = 200):
        self.obj, self.goal, self.u, self.max_steps, self.n = obj, goal, u, max_steps, 0

    def step(self, pol, obs):
        self.n += 1
        left = float(np.dot(self.goal - pol._pos(obs, self.obj)[:2], self.u[:2]))
        if left <= PUSH_TOL_M or self.n >= self.max_steps:
            return None
        speed = pol.style.pull if pol.style.avoid else 1.0
        return pol.action(pol.saturate(self.u * min(left, 0.05) / OSC_STEP_M, speed), CLOSE)


VIOLATION_MODES = ("touch", "sweep", "carry_into")


class ViolatorPolicy:
    """Deliberately unsafe scripts that make a task's cost terms fire (every cost term of a
    suite task can): ``touch`` drives the closed gripper at full speed from above into the
    target's centre and presses; ``sweep`` passes through the target at its mid height along
    +y; ``carry_into`` picks the goal's first object and sets it down on the target."""

    def __init__(self, mode: str, target: str):
        if mode not in VIOLATION_MODES:
            raise ValueError(f"violation mode must be one of {VIOLATION_MODES}, got {mode!r}")
        self.mode, self.target = mode, target
        self.name = f"violate-{mode}:{target}"
        self.script: Script | None = None
        self.info: dict[str, Any] = {}

    def reset(self, task_info: dict[str, Any]) -> None:
        self.info = task_info
        self.script = None

    def _phases(self, obs: dict[str, Any]) -> list[Phase]:
        t = np.asarray(obs[f"{self.target}_pos"], float)
        half = np.asarray(self.info["objects"][self.target]["half_extents"], float)
        above = t[2] + half[2] + 0.12
        if self.mode == "touch":
            return [Phase((t[0], t[1], above), CLOSE),
                    Phase((t[0], t[1], t[2] - half[2]), CLOSE, tol_m=0.005, max_steps=40)]
        if self.mode == "sweep":
            y0, y1 = t[1] - half[1] - 0.08, t[1] + half[1] + 0.10
            return [Phase((t[0], y0, above), CLOSE), Phase((t[0], y0, t[2]), CLOSE),
                    Phase((t[0], y1, t[2]), CLOSE, max_steps=60)]
        obj = next(a[1] for a in self.info["goal_atoms"] if len(a) > 1)
        o = np.asarray(obs[f"{obj}_pos"], float)
        oz = float(self.info["objects"][obj]["half_extents"][2])
        return pick_place_phases(o, oz, t, t[2] - oz)

    def act(self, obs: dict[str, Any]) -> np.ndarray:
        if self.script is None:
            self.script = Script(self._phases(obs), speed=1.0)
        return self.script.act(obs["robot0_eef_pos"])
