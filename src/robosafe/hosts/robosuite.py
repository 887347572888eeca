"""The robosuite host: robosuite 1.5's own tasks (``Lift``, ``Door``, ...), recorded with the roles
of ``data/hosts.yaml`` (SafeVLA-Bench paper 000 App. B), under the host contract
(:mod:`robosafe.hosts.contract`).

robosuite's tasks have no language instruction and no symbolic goal: the task info says so
(empty instruction, ``goal`` None, no goal atoms); its objects are the bodies ``hosts.yaml``
gives a role (target and bystander bodies are objects, furniture bodies fixtures). Seeding:
``reset(seed=s)`` re-seeds robosuite's generator (``env.rng``, which its placement samplers
share) with ``s`` before its (hard) reset, so it draws the same initial state for the same
seed. ``reset()`` without a seed continues robosuite's own stream, as ``robosafe sim record``
has always done (the env is made with the first seed and reset once per episode); its traces
are then labelled with the first seed plus the episode index, a label, not a seed that
reproduces the episode alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from robosafe.errors import RobosafeError
from robosafe.hosts.contract import ObjectInfo, ResetResult, StepResult, TaskInfo
from robosafe.hosts.recorder import Recorder, known_hosts
from robosafe.mjstate import host_action
from robosafe.trace.episode import Episode

HOST = "robosuite"


def _robosuite() -> Any:
    """robosuite 1.5, imported quietly (robosafe's simulator package does that)."""
    from robosafe.sim import robosuite

    return robosuite


class RobosuiteEnv:
    """One robosuite task (``task``: an environment name, e.g. ``Lift``) with ``robot``;
    ``horizon`` steps per episode (default 100), ``seed`` robosuite's first seed."""

    host = HOST
    cameras: tuple[str, ...] = ()
    render = False

    def __init__(self, task: str, *, robot: str = "Panda", seed: int | None = None,
                 horizon: int | None = None, suite: str | None = None):
        robosuite = _robosuite()
        if task not in robosuite.ALL_ENVIRONMENTS:
            raise RobosafeError(f"unknown robosuite environment {task!r} (known: "
                                f"{', '.join(sorted(robosuite.ALL_ENVIRONMENTS))})")
        self.task_id = task
        self.suite = suite
        self.horizon = int(horizon or 100)
        self.env = robosuite.make(task, robots=robot, has_renderer=False,
                                  has_offscreen_renderer=False, use_camera_obs=False, seed=seed)
        self.recorder = Recorder(self.env)
        self.seed: int | None = None
        self._next_seed = int(seed or 0)
        self.steps = 0
        self.success = False
        self.instruction = ""

    @property
    def action_dim(self) -> int:
        return int(self.env.action_dim)

    @property
    def control_freq(self) -> float:
        return float(self.env.control_freq)

    def action_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """robosuite's ``action_spec``: (low, high)."""
        low, high = self.env.action_spec
        return np.asarray(low, dtype=float), np.asarray(high, dtype=float)

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> ResetResult:
        if seed is not None:
            # in place: robosuite's placement samplers and objects hold this same generator
            fresh = np.random.default_rng(int(seed))
            self.env.rng.bit_generator.state = fresh.bit_generator.state
        self.seed = self._next_seed if seed is None else int(seed)
        self._next_seed = self.seed + 1
        obs = self.recorder.reset()
        self.steps = 0
        self.success = bool(self.env._check_success())
        return dict(obs), self._info()

    def step(self, action: Any, *, images: bool = True) -> StepResult:
        # robosuite renders its camera observables inside its own step: images stay
        action = host_action(action, self.action_dim)
        obs, _, _, _ = self.recorder.step(action)
        self.steps += 1
        self.success = bool(self.env._check_success())
        truncated = self.steps >= self.horizon and not self.success
        return dict(obs), float(self.success), self.success, truncated, self._info()

    def _info(self) -> dict[str, Any]:
        return {"success": self.success, "instruction": self.instruction, "seed": self.seed,
                "steps": self.steps}

    def task_info(self) -> TaskInfo:
        roles = self.recorder.body_roles if self.recorder.n_steps else {}
        kinds = {"target": "object", "bystander": "object", "furniture": "fixture"}
        objects = {name: ObjectInfo(category=name, kind=kinds[role])
                   for name, role in roles.items() if role in kinds}
        target = self.recorder.target_object
        return TaskInfo(
            host=HOST, task_id=self.task_id, task_name=self.task_id, suite=self.suite,
            instruction=self.instruction, seed=self.seed, action_dim=self.action_dim,
            control_freq=self.control_freq, goal=None, goal_atoms=(),
            target_object=target if target in objects else None, objects=objects)

    def episode(self, *, episode_id: str | None = None, policy: str | None = None,
                instance_id: str | None = None, meta: dict | None = None) -> Episode:
        return self.recorder.episode(
            success=self.success, seed=self.seed, policy=policy, instance_id=instance_id,
            episode_id=episode_id or f"{self.task_id}/seed_{self.seed}", meta=meta)

    def close(self) -> None:
        self.env.close()


def tasks() -> tuple[str, ...]:
    """robosuite tasks whose roles ``hosts.yaml`` lists (any robosuite env records, with
    unlisted bodies as ``other``)."""
    return tuple(h for h in known_hosts() if h != "libero")
