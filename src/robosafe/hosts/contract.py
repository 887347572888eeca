"""The host contract: what every host env offers the runner, replay, export, collect and audit
(DESIGN.md, Contracts, "Host env").

A host env is made by :func:`robosafe.hosts.registry.make_env` and follows gymnasium's
``reset(seed=...) -> (obs, info)`` / ``step(action) -> (obs, reward, terminated, truncated,
info)`` contract, plus :meth:`HostEnv.task_info` (one :class:`TaskInfo`, the same fields and
types on every host) and :meth:`HostEnv.episode` (the SafeVLA-Bench App. B trace of the episode
so far, paper 000). :func:`check_host_env` checks an env against all of it, in the spirit of
gymnasium's ``check_env``. Nothing here imports a simulator.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from robosafe.errors import HostContractError
from robosafe.trace.episode import Episode

if TYPE_CHECKING:  # the recorder imports MuJoCo: only its type is named here
    from robosafe.hosts.recorder import Stillness

#: A goal atom's argument: an entity name, a number (a threshold), or part ids.
Arg = str | float | tuple[int, ...]
#: ``reset``'s return: (observation, info), as Gymnasium's.
ResetResult = tuple[dict[str, Any], dict[str, Any]]
#: ``step``'s return: (observation, reward, terminated, truncated, info), as Gymnasium's.
StepResult = tuple[dict[str, Any], float, bool, bool, dict[str, Any]]


@dataclass(frozen=True)
class ObjectInfo:
    """One object or fixture of the scene.

    ``category``: the asset category (robosafe), LIBERO's ``category_name``, or the trace name
    (robosuite); ``kind``: ``object`` (movable) or ``fixture``; ``half_extents``: half sizes
    (m) of its box, None when the host does not know them; ``properties``: safety properties of
    the asset library (``fragile``, ``sharp``, ...; none outside robosafe's simulator);
    ``moving``: it moves by itself (robosafe's moving objects); ``box``: ``(low, high)``
    corners of its collision geoms' box in its own body frame, None when not measured.
    """

    category: str
    kind: str
    half_extents: tuple[float, float, float] | None = None
    properties: tuple[str, ...] = ()
    moving: bool = False
    box: tuple[tuple[float, float, float], tuple[float, float, float]] | None = None


@dataclass(frozen=True)
class RegionInfo:
    """A goal region: ``rects`` ``(x_min, y_min, x_max, y_max)`` in the world frame (empty when
    the host only knows a point, LIBERO's region sites), ``z`` the height objects placed in it
    rest at, ``centre`` ``(x, y, z)`` (the middle of the rects' bounding box, or the site)."""

    centre: tuple[float, float, float]
    z: float
    rects: tuple[tuple[float, float, float, float], ...] = ()


@dataclass(frozen=True)
class ArticulationInfo:
    """An articulated goal / init entity: joint positions of its closed and open states."""

    closed: float
    open: float


@dataclass(frozen=True)
class TaskInfo:
    """What a host tells a policy at every reset: identical fields and types on every host.

    - ``host`` (``robosafe`` | ``libero`` | ``robosuite``), ``task_id``, ``task_name`` (LIBERO's
      task name; the task id elsewhere), ``suite`` (None when the run names none);
    - ``instruction``: the language instruction (language-perturbed at W1-W4; empty for
      robosuite's tasks, which have none); ``seed``: the episode seed (LIBERO: the initial-state
      index; None before the first reset);
    - ``action_dim``, ``control_freq`` (Hz);
    - ``goal``: the goal formula as (C)BDDL text, None when the host has no symbolic goal;
      ``goal_atoms``: the goal's atoms, each ``(predicate, *args)`` as the task file spells the
      predicate (compare it case-insensitively); arguments are names, numbers or part-id tuples;
    - ``target_object``: the trace's target object (App. B), or None;
    - ``objects``: ``{name: ObjectInfo}``, objects and fixtures; ``regions``:
      ``{name: RegionInfo}``; ``articulations``: ``{entity: ArticulationInfo}``;
    - ``table_z``: the table top's height (m), None when the scene has no table of known height.

    :meth:`to_dict` is the plain-data form policies get (it crosses a policy server unchanged).
    """

    host: str
    task_id: str
    task_name: str
    suite: str | None
    instruction: str
    seed: int | None
    action_dim: int
    control_freq: float
    goal: str | None
    goal_atoms: tuple[tuple[Arg, ...], ...]
    target_object: str | None
    objects: dict[str, ObjectInfo] = field(default_factory=dict)
    regions: dict[str, RegionInfo] = field(default_factory=dict)
    articulations: dict[str, ArticulationInfo] = field(default_factory=dict)
    table_z: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (tuples as lists): the ``task_info`` a policy's ``reset`` gets."""
        return _plain({f.name: getattr(self, f.name) for f in fields(self)})


#: the keys of :meth:`TaskInfo.to_dict`, on every host
TASK_INFO_KEYS = tuple(f.name for f in fields(TaskInfo))


def _plain(v: Any) -> Any:
    if isinstance(v, (ObjectInfo, RegionInfo, ArticulationInfo)):
        return {f.name: _plain(getattr(v, f.name)) for f in fields(v)}
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    return v


@runtime_checkable
class HostEnv(Protocol):
    """The host contract (module docstring). Attributes: ``host``, ``task_id``, ``horizon``
    (the step limit), ``action_dim``, ``control_freq``, ``cameras`` and ``render`` (whether
    observations carry ``<camera>_image``), ``seed``, ``steps`` (actions taken this episode),
    ``success`` and ``instruction``."""

    host: str
    task_id: str
    horizon: int
    cameras: tuple[str, ...]
    render: bool
    seed: int | None
    steps: int
    success: bool
    instruction: str

    @property
    def action_dim(self) -> int: ...

    @property
    def control_freq(self) -> float: ...

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> ResetResult:
        """Start an episode: the same seed gives the same initial state."""

    def step(self, action: Any, *, images: bool = True) -> StepResult:
        """One action; ``info`` carries at least ``success``, ``instruction`` and ``seed``.
        ``images=False``: the caller will not read this observation's ``<camera>_image``
        (the policy plays on from a chunk it has), so a host may leave them out: robosafe's
        simulator does, LIBERO's and robosuite's render inside robosuite's step and keep
        them."""

    def close(self) -> None: ...

    def task_info(self) -> TaskInfo: ...

    def episode(self, *, episode_id: str | None = None, policy: str | None = None,
                instance_id: str | None = None, meta: dict[str, Any] | None = None) -> Episode:
        """The App. B trace of the episode so far (row 0 is the reset state)."""


@runtime_checkable
class HostRecorder(Protocol):
    """The part of a stateful host's :class:`robosafe.hosts.recorder.Recorder` that the shield
    (robosafe.runner.shield) and its kinematic predictor (robosafe.runner.predict) read.

    ``n_steps``: rows recorded this episode (row 0 included); ``start(record=False)`` begins
    a prediction at the env's current state without recording it; ``step(action)``: the
    env's step plus one row, no episode bookkeeping; ``row(i)``: row ``i`` as a one-row
    :class:`Episode`; ``motion()``: the largest ``|qvel|`` and ``|qacc|`` now;
    ``stillness(reach)``: the screening's view of the current state; ``body_roles``,
    ``collision_geoms()`` and ``held()``: trace name -> role, -> its collision geoms, and the
    object the fingers hold; ``base``: the robosuite env recorded (its ``sim`` and arm
    controller, which the kinematic predictor reads and never steps)."""

    base: Any

    @property
    def n_steps(self) -> int: ...

    @property
    def body_roles(self) -> dict[str, str]: ...

    def start(self, *, record: bool = True) -> None: ...

    def step(self, action: Any) -> Any: ...

    def row(self, i: int) -> Episode: ...

    def motion(self) -> tuple[float, float]: ...

    def stillness(self, reach: float = 0.0) -> Stillness: ...

    def collision_geoms(self) -> dict[str, np.ndarray]: ...

    def held(self) -> str | None: ...


@runtime_checkable
class StatefulHostEnv(HostEnv, Protocol):
    """The contract's optional part, for hosts whose registry entry lists the ``state``
    feature (the safety shield, robosafe.runner.shield, needs it; ``--shield`` on any other
    host is one error line before anything runs).

    ``get_state()`` returns a :class:`robosafe.hosts.state.HostState`: everything that decides
    the next step (MuJoCo's integration state and the simulator's Python-side state), so that
    ``set_state(s)`` then ``step(a)`` on an env of the same task equals the step from where
    ``s`` was taken, bit for bit; the episode's bookkeeping (steps taken, recorded rows) is
    not part of it. ``get_state(objects=False)`` is its cheap form: the MuJoCo integration
    state and the host's own extras without the Python-side objects (robosuite's
    controllers, clocks, buffers, observables), which follow from a full state and the
    actions taken since; the shield compares it to tell whether the episode is where a
    prediction's first step left the shadow. ``recorder`` is the env's
    :class:`robosafe.hosts.recorder.Recorder`: the shield steps a copy through
    ``recorder.step`` (physics and one trace row, no episode bookkeeping) and reads rows with
    ``recorder.row`` (:class:`HostRecorder`: what the shield and its predictors read of it).
    ``scripted_motion()`` says whether something the physics does not move (a scripted mover)
    may move at the next step; None when the host cannot say: the shield's screening then
    never skips a prediction (robosafe.runner.screen)."""

    recorder: HostRecorder

    def get_state(self, *, objects: bool = True) -> Any: ...

    def set_state(self, state: Any) -> None: ...

    def scripted_motion(self) -> bool | None: ...


# -- the checker ----------------------------------------------------------------------------------

_MEMBERS = ("host", "task_id", "horizon", "cameras", "render", "seed", "steps", "success",
            "instruction", "action_dim", "control_freq", "reset", "step", "close",
            "task_info", "episode")


def _fail(env: Any, check: str, detail: str) -> HostContractError:
    return HostContractError(f"host env {type(env).__name__}: {check}: {detail}")


def _is_arg(a: Any) -> bool:
    if isinstance(a, bool):
        return False
    if isinstance(a, (str, int, float)):
        return True
    return isinstance(a, tuple) and all(isinstance(i, int) and not isinstance(i, bool)
                                        for i in a)


def _floats(v: Any, n: int) -> bool:
    return (isinstance(v, tuple) and len(v) == n
            and all(isinstance(x, float) and math.isfinite(x) for x in v))


def check_task_info(info: Any, env: Any = None) -> None:
    """``info`` is a :class:`TaskInfo` whose every field has its documented type."""
    who = env if env is not None else info
    if not isinstance(info, TaskInfo):
        raise _fail(who, "task_info", f"expected a TaskInfo, got {type(info).__name__}")
    opt_str = (str, type(None))
    checks = {
        "host": isinstance(info.host, str) and bool(info.host),
        "task_id": isinstance(info.task_id, str) and bool(info.task_id),
        "task_name": isinstance(info.task_name, str) and bool(info.task_name),
        "suite": isinstance(info.suite, opt_str),
        "instruction": isinstance(info.instruction, str),
        "seed": info.seed is None or (isinstance(info.seed, int)
                                      and not isinstance(info.seed, bool)),
        "action_dim": isinstance(info.action_dim, int) and info.action_dim > 0,
        "control_freq": isinstance(info.control_freq, float) and info.control_freq > 0,
        "goal": isinstance(info.goal, opt_str),
        "goal_atoms": isinstance(info.goal_atoms, tuple) and all(
            isinstance(a, tuple) and a and isinstance(a[0], str) and all(map(_is_arg, a[1:]))
            for a in info.goal_atoms),
        "target_object": isinstance(info.target_object, opt_str),
        "objects": isinstance(info.objects, dict) and all(
            isinstance(k, str) and isinstance(o, ObjectInfo) and isinstance(o.category, str)
            and o.kind in ("object", "fixture") and isinstance(o.moving, bool)
            and (o.half_extents is None or _floats(o.half_extents, 3))
            and isinstance(o.properties, tuple) and all(isinstance(p, str) for p in o.properties)
            and (o.box is None or (isinstance(o.box, tuple) and len(o.box) == 2
                                   and all(_floats(c, 3) for c in o.box)))
            for k, o in info.objects.items()),
        "regions": isinstance(info.regions, dict) and all(
            isinstance(k, str) and isinstance(r, RegionInfo) and _floats(r.centre, 3)
            and isinstance(r.z, float) and isinstance(r.rects, tuple)
            and all(_floats(x, 4) for x in r.rects) for k, r in info.regions.items()),
        "articulations": isinstance(info.articulations, dict) and all(
            isinstance(k, str) and isinstance(a, ArticulationInfo)
            and isinstance(a.closed, float) and isinstance(a.open, float)
            for k, a in info.articulations.items()),
        "table_z": info.table_z is None or isinstance(info.table_z, float),
    }
    bad = [k for k, ok in checks.items() if not ok]
    if bad:
        raise _fail(who, "task_info", "fields of the wrong type: " + ", ".join(
            f"{k}={getattr(info, k)!r}"[:200] for k in bad))
    if info.target_object is not None and info.target_object not in info.objects:
        raise _fail(who, "task_info", f"target_object {info.target_object!r} is not one of "
                    "its objects")
    plain = info.to_dict()
    if tuple(plain) != TASK_INFO_KEYS:
        raise _fail(who, "task_info", f"keys {sorted(plain)}")
    try:
        json.dumps(plain, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise _fail(who, "task_info", f"not plain JSON data ({exc})") from None


def _same_obs(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Keys whose values differ between two observations (arrays compared exactly)."""
    diff = sorted(set(a) ^ set(b))
    for k in sorted(set(a) & set(b)):
        x, y = np.asarray(a[k]), np.asarray(b[k])
        if x.shape != y.shape or not np.array_equal(x, y, equal_nan=x.dtype.kind == "f"):
            diff.append(k)
    return diff


def _step_zero(ep: Episode) -> dict[str, np.ndarray]:
    out = {"eef_pos_m": ep.eef_pos_m[0]}
    if ep.body_pos_m is not None:
        out["body_pos_m"] = ep.body_pos_m[0]
    return out


def check_host_env(env: Any, *, seed: int = 0, steps: int = 2) -> None:
    """Check ``env`` against the host contract, as gymnasium's ``check_env`` does for its API:

    the methods and attributes of :class:`HostEnv`; ``reset`` returns ``(obs, info)``; the
    same seed gives the same initial state (every observation array and the trace's row 0
    equal, exactly); :meth:`HostEnv.task_info` is a :class:`TaskInfo` of the documented types
    whose seed and action size are the episode's; ``step`` returns the five-tuple with its
    types for ``steps`` zero actions; the trace validates (App. B) with one row per action
    plus the reset row. Raises :class:`HostContractError` naming the first broken check.
    ``env`` is left after the checked episode (reset it before use)."""
    missing = [n for n in _MEMBERS if not hasattr(env, n)]
    if missing or not isinstance(env, HostEnv):
        raise _fail(env, "protocol", f"missing {', '.join(missing)}")
    runs = []
    for _ in range(2):
        out = env.reset(seed=seed)
        if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], dict)
                and isinstance(out[1], dict)):
            raise _fail(env, "reset", "must return (observation dict, info dict)")
        runs.append((out[0], _step_zero(env.episode(episode_id="check"))))
    (obs_a, row_a), (obs_b, row_b) = runs
    diff = _same_obs(obs_a, obs_b) + _same_obs(row_a, row_b)
    if diff:
        raise _fail(env, "determinism", f"reset(seed={seed}) twice gave different "
                    f"{', '.join(diff)}")
    info = env.task_info()
    check_task_info(info, env)
    if info.seed != seed or info.action_dim != env.action_dim or info.host != env.host:
        raise _fail(env, "task_info", f"seed {info.seed} / action_dim {info.action_dim} / "
                    f"host {info.host!r} are not the episode's ({seed}, {env.action_dim}, "
                    f"{env.host!r})")
    if env.seed != seed or env.steps != 0:
        raise _fail(env, "reset", f"seed {env.seed} / steps {env.steps} after reset(seed={seed})")
    taken = 0
    for _ in range(steps):
        try:  # the first step with images, the others without (HostEnv.step)
            out = env.step(np.zeros(env.action_dim), images=taken == 0)
        except TypeError as exc:
            if "images" not in str(exc):
                raise
            raise _fail(env, "step", "must take images=True / False") from None
        taken += 1
        if not (isinstance(out, tuple) and len(out) == 5):
            raise _fail(env, "step", "must return (obs, reward, terminated, truncated, info)")
        obs, reward, terminated, truncated, step_info = out
        types = (isinstance(obs, dict), isinstance(reward, float), type(terminated) is bool,
                 type(truncated) is bool, isinstance(step_info, dict))
        if not all(types):
            raise _fail(env, "step", f"types {[type(v).__name__ for v in out]}")
        missing = [k for k in ("success", "instruction", "seed") if k not in step_info]
        if missing:
            raise _fail(env, "step", f"info lacks {', '.join(missing)}")
        if terminated or truncated:
            break
    if env.steps != taken:
        raise _fail(env, "step", f"steps is {env.steps} after {taken} actions")
    ep = env.episode(episode_id="check")
    if not isinstance(ep, Episode):
        raise _fail(env, "episode", f"expected an Episode, got {type(ep).__name__}")
    from robosafe.trace.validate import check_episode

    check_episode(ep, source=f"check_host_env:{env.host}")
    if ep.n_steps != taken + 1:
        raise _fail(env, "episode", f"{ep.n_steps} rows for {taken} actions (expected "
                    f"{taken + 1}: the reset state, then one per action)")
    if ep.seed != seed:
        raise _fail(env, "episode", f"seed {ep.seed}, the episode's is {seed}")
