"""The policy protocol and the simplest policies.

A policy is anything with::

    name: str
    reset(task_info: dict) -> None      # once per episode, before the first act()
    act(observation: dict) -> np.ndarray  # one action (the env's action_dim floats)

``task_info`` is the host's :class:`robosafe.hosts.contract.TaskInfo` as plain data
(``TaskInfo.to_dict()``, the same keys on every host), so it crosses a policy server unchanged:
``host``, ``task_id``, ``task_name``, ``suite``, ``instruction`` (possibly
language-perturbed), ``seed``, ``action_dim``, ``control_freq``, ``goal`` ((C)BDDL text or
None) and ``goal_atoms`` (``[[name, arg, ...], ...]`` of the goal's predicates),
``target_object``, ``objects`` (``{name: {"category", "kind", "half_extents", "properties",
"moving", "box"}}``), ``regions`` (``{ref: {"centre": [x, y, z], "z": support height,
"rects": [[x_min, y_min, x_max, y_max], ...]}}``, world frame), ``articulations``
(``{entity: {"closed", "open"}}``), ``table_z``.

Observations are robosuite's (``robot0_eef_pos``, ``robot0_gripper_qpos``, ...), camera images
``<camera>_image``, and privileged state that scripted policies use (learned policies ignore
it): ``<object>_pos`` / ``<object>_quat`` (wxyz), and for articulated goal / init entities
``<entity>_qpos`` and ``<entity>_handle_pos`` (the handle or knob geoms' mean position).

Optional: ``act_batch(observations) -> actions`` for policies that batch, and
``needs_images() -> bool``: whether the next ``act`` reads its observation's camera images
(False while it plays on from a chunk it predicted; without the method: always). The episode
loop asks after every ``act``, and a host that can leaves the next observation's images out
(robosafe's simulator: rendering is most of a rendered step on a CPU). Policy specs on the
command line: ``random``, ``zero``, ``replay:TRACE_OR_NPY``, ``probe:CHECKPOINT`` (a trained
shortcut probe, :mod:`robosafe.policies.probe`), ``scripted-careful``,
``scripted-careless``, ``ws://HOST:PORT`` (a remote policy server), ``lerobot:DIR`` (a LeRobot
checkpoint, :mod:`robosafe.policies.lerobot`; needs lerobot in this environment).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from robosafe.errors import RobosafeError


@runtime_checkable
class Policy(Protocol):
    name: str

    def reset(self, task_info: dict[str, Any]) -> None: ...

    def act(self, observation: dict[str, Any]) -> np.ndarray: ...


class RandomPolicy:
    """Uniform actions in [-1, 1]^d from a generator seeded by the episode seed."""

    name = "random"

    def __init__(self, seed_offset: int = 0):
        self.seed_offset = seed_offset
        self.rng = np.random.default_rng(0)
        self.dim = 7

    def reset(self, task_info: dict[str, Any]) -> None:
        # the policy's own stream, apart from the env's placement / perturbation streams
        self.rng = np.random.default_rng([int(task_info.get("seed", 0)), 1 + self.seed_offset])
        self.dim = int(task_info.get("action_dim", 7))

    def act(self, observation: dict[str, Any]) -> np.ndarray:
        return self.rng.uniform(-1.0, 1.0, self.dim)


class ZeroPolicy:
    """Holds still (zero delta pose, gripper open)."""

    name = "zero"

    def __init__(self):
        self.dim = 7

    def reset(self, task_info: dict[str, Any]) -> None:
        self.dim = int(task_info.get("action_dim", 7))

    def act(self, observation: dict[str, Any]) -> np.ndarray:
        a = np.zeros(self.dim)
        a[-1] = -1.0
        return a


class ReplayPolicy:
    """Actions from a (T, d) ``.npy`` array, or those a run recorded for one of its traces
    (``RUN_DIR/traces/<cell>.jsonl`` -> ``RUN_DIR/actions/<cell>.npy``), then zeros with the
    gripper as last commanded. Replayed in the same cell (task, seed, levels) an episode
    repeats bit for bit (the simulator is deterministic)."""

    def __init__(self, path: str | Path):
        path = Path(path)
        if path.suffix != ".npy" and path.parent.name == "traces":
            path = path.parent.parent / "actions" / f"{path.name.split('.')[0]}.npy"
        try:
            self.actions = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise RobosafeError(f"{path}: not an action array (.npy): {exc}") from None
        if self.actions.ndim != 2 or not np.all(np.isfinite(self.actions)):
            raise RobosafeError(f"{path}: actions must be a finite (T, action_dim) array, got "
                                f"shape {self.actions.shape}")
        self.name = f"replay:{path.name}"
        self.t = 0

    def reset(self, task_info: dict[str, Any]) -> None:
        dim = int(task_info.get("action_dim", self.actions.shape[1]))
        if dim != self.actions.shape[1]:
            raise RobosafeError(f"{self.name}: actions have {self.actions.shape[1]} columns, "
                                f"the env takes {dim}")
        self.t = 0

    def act(self, observation: dict[str, Any]) -> np.ndarray:
        if self.t < len(self.actions):
            a = self.actions[self.t].astype(float)
        else:
            a = np.zeros(self.actions.shape[1])
            a[-1] = self.actions[-1, -1] if len(self.actions) else -1.0
        self.t += 1
        return a


def play(env, policy: Policy, obs: dict, max_steps: int | None = None,
         on_obs=None) -> tuple[dict, list]:
    """The one episode loop for every host env (robosafe.hosts.contract.HostEnv):
    ``policy.reset`` with the env's task info as plain data, then act and step from ``obs``
    (what ``env.reset`` returned) until the episode terminates or truncates, or ``max_steps``
    (at most the env's horizon). ``on_obs`` (if given) sees every observation, the first
    included, images and all: one per trace row. Without ``on_obs``, an observation the
    policy says it will not look at (``needs_images``) is stepped without images. Returns the
    last info and the actions taken."""
    policy.reset(env.task_info().to_dict())
    info: dict = {"success": env.success}
    actions: list = []
    if on_obs is not None:
        on_obs(obs)
    needs_images = getattr(policy, "needs_images", None)
    for _ in range(min(max_steps or env.horizon, env.horizon)):
        actions.append(policy.act(obs))
        images = on_obs is not None or needs_images is None or needs_images()
        obs, _, terminated, truncated, info = env.step(actions[-1], images=images)
        if on_obs is not None:
            on_obs(obs)
        if terminated or truncated:
            break
    return info, actions


def policy_kind(spec: str) -> str:
    """The kind of a policy spec (random, zero, replay, scripted, remote); unknown -> error."""
    if spec in ("random", "zero"):
        return spec
    if spec.startswith("replay:"):
        return "replay"
    if spec.startswith("probe:"):
        return "probe"
    if spec in ("scripted-careful", "scripted-careless"):
        return "scripted"
    if spec.startswith(("ws://", "wss://")):
        return "remote"
    if spec.startswith("lerobot:"):
        return "lerobot"
    raise RobosafeError(f"unknown policy {spec!r}: use random, zero, replay:FILE.npy, "
                        "probe:CHECKPOINT.safetensors, scripted-careful, scripted-careless, "
                        "lerobot:CHECKPOINT_DIR or ws://HOST:PORT")


def _scripted_class(host: str) -> type:
    """The scripted policy that reads ``host``'s observations (data/scripted.yaml)."""
    import importlib
    from importlib import resources

    from robosafe.yamldata import load_yaml

    table = load_yaml(resources.files("robosafe.policies").joinpath("data", "scripted.yaml")
                      .read_text("utf-8"))
    module, _, cls = table.get(host, table["default"]).partition(":")
    return getattr(importlib.import_module(module), cls)


def make_policy(spec: str, *, host: str = "robosafe", adapter: str | None = None) -> Policy:
    """A policy from its command-line spec (see the module docstring) for episodes of ``host``:
    scripted policies are the host's own (LIBERO's read LIBERO's privileged observations), and
    a remote policy is sent observations through ``adapter`` (default: the host's, as
    ``policies/data/adapters.yaml`` says), and a LeRobot checkpoint's inputs are made through
    it (default: ``lerobot-robosafe``)."""
    kind = policy_kind(spec)
    if kind == "random":
        return RandomPolicy()
    if kind == "zero":
        return ZeroPolicy()
    if kind == "replay":
        return ReplayPolicy(spec.removeprefix("replay:"))
    if kind == "probe":
        from robosafe.policies.probe import ProbePolicy

        return ProbePolicy(spec.removeprefix("probe:"))
    if kind == "lerobot":
        from robosafe.policies.lerobot import LeRobotPolicy

        return LeRobotPolicy(spec.removeprefix("lerobot:"), adapter=adapter)
    if kind == "scripted":
        return _scripted_class(host)(style=spec.removeprefix("scripted-"))
    from robosafe.policies.remote import RemotePolicy, default_adapter

    return RemotePolicy(spec, adapter=adapter or default_adapter(host))
