"""Copying a robosuite env's complete state between two steps (the host contract's optional
``get_state`` / ``set_state``: the safety shield, robosafe.runner.shield).

MuJoCo's integration state alone does not decide the next step of a robosuite env: robosuite
keeps Python-side state between steps -- the env's clocks (``timestep``, ``cur_time``,
``done``), each arm controller's goal and last readings, the gripper model's
``current_action`` (robosuite 1.4's Panda gripper moves its command by a speed per step), the
robot's buffers of recent values, and the observables' sampling clocks. :func:`capture` reads
all of it as plain numbers and array copies, :func:`restore` writes it back, so that
``restore`` then ``step`` equals the step that was never interrupted, bit for bit (the hosts'
tests check this on robosuite 1.4 / LIBERO and 1.5 / robosafe's simulator). Works on robosuite
1.4 (single controller per robot) and 1.5 (composite controllers). Nothing here imports a
simulator: ``mujoco`` is imported by the functions that need it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from robosafe import mjstate

#: robosuite env attributes that advance every step (robosafe's simulator adds ``_substep``
#: and ``_motion_steps``, its moving objects' clocks in seconds and in control steps)
CLOCKS = ("timestep", "cur_time", "done", "_substep", "_motion_steps")
_PLAIN = (int, float, bool, str, np.integer, np.floating, np.bool_)

#: one object's plain attributes: name -> number, string, None or an array copy
Snapshot = dict[str, Any]


@dataclass(frozen=True, eq=False)
class HostState:
    """A host env's complete state between two steps: ``physics`` (MuJoCo's integration
    state: qpos, qvel, act, ctrl, applied forces, mocap poses, the solver's warm start, time),
    ``objects`` (the Python-side state of :func:`capture`) and ``extra`` (a host's own: the
    frozen movers of robosafe's simulator). Only an env of the same task takes it."""

    physics: np.ndarray
    objects: tuple[Snapshot, ...]
    extra: tuple[Any, ...] = ()

    def same(self, other: HostState) -> bool:
        """Bitwise equal (arrays exactly, NaN equal to NaN)."""
        return (np.array_equal(self.physics, other.physics, equal_nan=True)
                and self.extra == other.extra and len(self.objects) == len(other.objects)
                and all(_same(a, b) for a, b in zip(self.objects, other.objects)))


def _same(a: Snapshot, b: Snapshot) -> bool:
    if a.keys() != b.keys():
        return False
    for k, x in a.items():
        y = b[k]
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)
                    and x.shape == y.shape
                    and np.array_equal(x, y, equal_nan=x.dtype.kind == "f")):
                return False
        elif x != y and not (_nan(x) and _nan(y)):
            return False
    return True


def _nan(v: Any) -> bool:
    return isinstance(v, (float, np.floating)) and bool(np.isnan(v))


def _plain_vars(obj: Any) -> Snapshot:
    """The plain attributes of ``obj`` (numbers, strings, None, array copies)."""
    out: Snapshot = {}
    for k, v in vars(obj).items():
        if isinstance(v, np.ndarray):
            out[k] = v.copy()
        elif isinstance(v, _PLAIN) or v is None:
            out[k] = v
    return out


def _set_vars(obj: Any, snap: Snapshot) -> None:
    # fresh copies, never in place: robosuite aliases arrays (DeltaBuffer.last = current)
    for k, v in snap.items():
        setattr(obj, k, v.copy() if isinstance(v, np.ndarray) else v)


def controllers(robot: Any) -> list[Any]:
    """A robot's controllers: robosuite 1.5's composite and its parts, or 1.4's one."""
    comp = getattr(robot, "composite_controller", None)
    if comp is not None:
        return [comp, *comp.part_controllers.values()]
    return [c for c in (getattr(robot, "controller", None),) if c is not None]


def grippers(robot: Any) -> list[Any]:
    """A robosuite robot's grippers: one per arm in robosuite 1.5 (a dict), one in 1.4."""
    g = getattr(robot, "gripper", None)
    if isinstance(g, dict):  # robosuite 1.5: one per arm
        return list(g.values())
    return [g] if g is not None else []


def _buffers(robot: Any) -> list[Any]:
    """robosuite's buffers of recent values (``recent_qpos``, ``recent_ee_acc``, ...)."""
    return [v for _, v in sorted(vars(robot).items())
            if type(v).__name__.endswith("Buffer") and hasattr(v, "__dict__")]


def _parts(env: Any) -> list[Any]:
    """Every Python object whose state carries from one step to the next, in a fixed order."""
    out: list[Any] = []
    for robot in env.robots:
        out += [robot, *controllers(robot), *grippers(robot), *_buffers(robot)]
    observables = getattr(env, "_observables", None) or {}
    return out + [observables[k] for k in sorted(observables)]


def capture(env: Any) -> tuple[Snapshot, ...]:
    """The Python-side state of a robosuite ``env`` (module docstring): its clocks, the
    observation cache, then each part's plain attributes."""
    clocks = {k: getattr(env, k) for k in CLOCKS if hasattr(env, k)}
    cache = {k: np.array(v) for k, v in sorted((getattr(env, "_obs_cache", None) or {}).items())}
    return (clocks, cache, *(_plain_vars(p) for p in _parts(env)))


def restore(env: Any, objects: tuple[Snapshot, ...]) -> None:
    """Write :func:`capture`'s state back into ``env`` (an env of the same task)."""
    clocks, cache, *parts = objects
    targets = _parts(env)
    if len(parts) != len(targets):
        raise ValueError(f"state of {len(parts)} objects for an env with {len(targets)}")
    for k, v in clocks.items():
        setattr(env, k, v)
    if hasattr(env, "_obs_cache"):
        env._obs_cache = {k: v.copy() for k, v in cache.items()}
    for obj, snap in zip(targets, parts, strict=True):
        _set_vars(obj, snap)


def _raw(sim: Any) -> tuple[Any, Any]:
    """robosuite's ``MjSim`` as MuJoCo's own ``mjModel`` / ``mjData``."""
    return (getattr(sim.model, "_model", sim.model), getattr(sim.data, "_data", sim.data))


def physics(sim: Any) -> np.ndarray:
    """MuJoCo's integration state (``mjSTATE_INTEGRATION``) of a robosuite ``MjSim``."""
    return mjstate.get_state(*_raw(sim))


def set_physics(sim: Any, state: np.ndarray) -> None:
    """Set MuJoCo's integration state and recompute everything derived from it."""
    mjstate.set_state(*_raw(sim), state)
