"""Traces out of a LeRobot dataset, by reading (``import lerobot``) or re-simulating (``--replay``).

Replay re-runs each episode's actions from its recorded initial state through the recorder:
robosafe's own simulator rebuilds the world from the task file the dataset carries
(``meta/robosafe.json``) and the episode's seed and levels (``robosafe/replay`` column), steps
the dataset's exact actions (``replay.action``, float64; all frames but the final one, whose
action is a repeat) and records a fresh trace with every signal family. The replay is checked against the recorded states: the
largest distance between replayed and recorded end-effector and body positions over the episode
(or a different episode length) beyond ``tolerance_m`` (1 cm) flags the episode as diverged.
A dataset exported from a LIBERO-host run (``host: libero`` in ``meta/robosafe.json``) is
replayed by the LIBERO host (in LIBERO's environment): the suite's task, the episode's official
initial state (its seed) and the settle steps, then the same actions. Other tools' LIBERO
conversions carry no initial state, so they cannot be replayed.

The dataset may come from anywhere: task texts are parsed from memory (no file is ever written
from its content, so a task id such as ``../../x`` names nothing on disk), every per-episode
field is type-checked, and an episode that cannot be replayed is an error of its own while the
others are replayed.

The float32 ``action`` column alone does not replay: its rounding moved a careless stove episode
by 1.4 cm and a vase-pushing one by 5.4 cm (measured on the demo suite), hence ``replay.action``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from robosafe.errors import DatasetError, RobosafeError
from robosafe.formats.lerobot import SIDECAR_PATH, Dataset
from robosafe.formats.traces import REPLAY_COLUMN, TRACE_COLUMN, header, read_traces
from robosafe.textio import MAX_TASK_FILE
from robosafe.trace.episode import Episode

if TYPE_CHECKING:
    from robosafe.hosts.options import HostOptions

TOLERANCE_M = 0.01


@dataclass
class Replayed:
    episodes: list[Episode]
    divergence_m: dict[str, float]  # episode id -> largest position difference (inf: length)
    diverged: list[str] = field(default_factory=list)
    errors: list[RobosafeError] = field(default_factory=list)  # episodes not replayed
    total: int = 0  # episodes the dataset lists


def divergence(replayed: Episode, recorded: Episode) -> float:
    """Largest distance (m) between replayed and recorded eef and body positions at the same
    step; infinite when the episodes differ in length."""
    if replayed.n_steps != recorded.n_steps:
        return float("inf")
    worst = 0.0
    if replayed.eef_pos_m is not None and recorded.eef_pos_m is not None:
        worst = float(np.linalg.norm(replayed.eef_pos_m - recorded.eef_pos_m, axis=-1).max())
    if replayed.body_pos_m is not None and recorded.body_pos_m is not None:
        common = [b for b in recorded.body_names if b in replayed.body_names]
        a = replayed.body_pos_m[:, [replayed.body_names.index(b) for b in common]]
        b = recorded.body_pos_m[:, [recorded.body_names.index(b) for b in common]]
        if common:
            worst = max(worst, float(np.linalg.norm(a - b, axis=-1).max()))
    return worst


@dataclass(frozen=True)
class _Cell:
    """An episode's ``robosafe/replay`` cell and ``robosafe/trace`` identity, checked."""

    task_id: str
    seed: int | None
    language_level: int
    visual_level: int
    episode_id: str
    benchmark: str
    policy: str | None
    instance_id: str | None
    meta: dict[str, Any]


def _typed(d: dict, key: str, kind: type | tuple, where: str, *, optional: bool = False):
    v = d.get(key)
    if (v is None and optional) or (isinstance(v, kind) and not isinstance(v, bool)):
        return v
    raise DatasetError(f"{where}: {key}: expected {getattr(kind, '__name__', kind)}, "
                       f"got {v!r}")


def _cell(row: dict[str, Any], where: str) -> _Cell:
    cell = header(row, REPLAY_COLUMN, where)
    head = header(row, TRACE_COLUMN, where)
    c, h = f"{where}: {REPLAY_COLUMN}", f"{where}: {TRACE_COLUMN}"
    return _Cell(
        task_id=_typed(cell, "task_id", str, c), seed=_typed(cell, "seed", int, c, optional=True),
        language_level=_typed(cell, "language_level", int, c),
        visual_level=_typed(cell, "visual_level", int, c),
        episode_id=_typed(head, "episode_id", str, h), benchmark=_typed(head, "benchmark", str, h),
        policy=_typed(head, "policy", str, h, optional=True),
        instance_id=_typed(head, "instance_id", str, h, optional=True),
        meta=_typed(head, "meta", dict, h, optional=True) or {})


def _sidecar(ds: Dataset) -> tuple[str, dict[str, str], dict[str, Any]]:
    """Host, task texts and host options of the dataset's meta/robosafe.json, checked."""
    side, where = ds.robosafe, f"{ds.root / SIDECAR_PATH}"
    if side is None or "tasks" not in side:
        raise RobosafeError(f"{ds.root}: --replay needs the host that recorded the dataset; "
                            "only datasets robosafe exported (from its simulator or the LIBERO "
                            "host) say which task, initial state and actions to re-run")
    from robosafe.hosts.registry import hosts, run_hosts

    host = side.get("host", "robosafe")
    if host not in run_hosts():
        raise DatasetError(f"{where}: unknown host {host!r}")
    tasks = side["tasks"]
    if not isinstance(tasks, dict) or not all(isinstance(v, str) for v in tasks.values()):
        raise DatasetError(f"{where}: tasks: expected an object of task id -> task text")
    horizon = side.get("horizon")
    if horizon is not None and (isinstance(horizon, bool) or not isinstance(horizon, int)
                                or horizon <= 0):
        raise DatasetError(f"{where}: horizon: expected a positive integer, got {horizon!r}")
    suite = side.get("suite")
    if hosts()[host].needs_suite and not isinstance(suite, str):
        raise DatasetError(f"{where}: suite: expected a {host} suite name, got {suite!r}")
    return host, tasks, {"horizon": horizon, "suite": suite,
                         "options": _options(side.get("options"), host, where)}


def _options(given: Any, host: str, where: str) -> HostOptions:
    """The host options the dataset was recorded with (a dataset from before they were written
    replays with the host's defaults, as it always did)."""
    from robosafe.hosts.options import OptionRequest
    from robosafe.hosts.registry import host_spec

    cls = host_spec(host).options_class()
    if given is None:
        return cls.build(OptionRequest(), {}, installed=False)
    if not isinstance(given, dict):
        raise DatasetError(f"{where}: options: expected an object of the host's run options")
    unread = sorted(set(given) - set(cls.build(OptionRequest(), {}, installed=False).to_json()))
    if unread:  # a newer robosafe's option: the replay cannot apply it
        logging.getLogger("robosafe.replay").warning(
            "%s: options: %s not read (not an option of the %s host here); the replay runs "
            "without it", where, ", ".join(map(str, unread)), host)
    try:
        return cls.from_json(given)
    except RobosafeError as exc:
        raise DatasetError(f"{where}: options: {exc}") from None


def _env(ds: Dataset, host: str, text: str, cell: _Cell, opts: dict[str, Any]):
    """The host env of the episode's task and levels, without images, through the registry;
    a task file's text is parsed from memory (no file is written from the dataset's content)."""
    from robosafe.hosts.registry import host_spec, make_env

    spec = host_spec(host)
    task: Any = cell.task_id
    options = spec.select({"task_id": cell.task_id, "suite": opts["suite"],
                           "benchmark": cell.benchmark, "images": False,
                           "horizon": opts["horizon"], "visual_level": cell.visual_level,
                           "language_level": cell.language_level})
    if spec.task == "file":
        from robosafe.tasks.parser import parse_task

        source = f"{ds.root / SIDECAR_PATH}: tasks[{cell.task_id!r}]"
        if len(text) > MAX_TASK_FILE:
            raise DatasetError(f"{source}: larger than {MAX_TASK_FILE >> 20} MiB; not a task")
        task = parse_task(text, source)
        options["source"] = source
    return make_env(host, task, **options, **opts["options"].env_keywords(cell.task_id))


def _actions(frames: dict[str, np.ndarray], where: str) -> np.ndarray:
    """The episode's exact actions (all frames but the final one, a repeat)."""
    a = frames.get("replay.action", frames.get("action"))
    if a is None or a.ndim != 2 or a.dtype.kind not in "fiu" or not np.isfinite(a).all():
        raise DatasetError(f"{where}: replay.action / action: expected finite numbers, one "
                           "row per frame")
    return a.astype(float)[:-1]


def replay_dataset(path: str | Path, *, tolerance_m: float = TOLERANCE_M,
                   on_episode: Callable[[int, int], None] | None = None) -> Replayed:
    """Re-simulate every episode of a robosafe-written dataset (see the module docstring)."""
    ds = Dataset(path)
    host, tasks, opts = _sidecar(ds)
    recorded = {e.episode_id: e for e in read_traces(ds).episodes}
    res = Replayed([], {}, total=len(ds.episodes))
    envs: dict[tuple, Any] = {}
    try:
        for k, row in enumerate(ds.episodes):
            where = f"{ds.root}: episode {row['episode_index']}"
            try:
                ep = _replay(ds, ds.record(row["episode_index"]), where, host, tasks, opts,
                             envs)
            except RobosafeError as exc:
                res.errors.append(exc)
                continue
            d = divergence(ep, recorded[ep.episode_id]) \
                if ep.episode_id in recorded else float("inf")
            ep.meta["replay_divergence_m"] = d if np.isfinite(d) else None
            res.divergence_m[ep.episode_id] = d
            if not d <= tolerance_m:
                res.diverged.append(ep.episode_id)
            res.episodes.append(ep)
            if on_episode:
                on_episode(k + 1, len(ds.episodes))
    finally:
        for env in envs.values():
            env.close()
    return res


def _replay(ds: Dataset, row: dict[str, Any], where: str, host: str, tasks: dict[str, str],
            opts: dict[str, Any], envs: dict[tuple, Any]) -> Episode:
    """One episode re-simulated (an env is built once per task and levels)."""
    cell = _cell(row, where)
    text = tasks.get(cell.task_id)
    if text is None:
        raise DatasetError(f"{ds.root / SIDECAR_PATH}: no task file for {cell.task_id!r}")
    key = (cell.task_id, cell.language_level, cell.visual_level)
    if key not in envs:
        envs[key] = _env(ds, host, text, cell, opts)
    env = envs[key]
    actions = _actions(ds.frames(row["episode_index"]), where)
    env.reset(seed=cell.seed)
    for a in actions:
        _, _, terminated, truncated, _ = env.step(a)
        if terminated or truncated:
            break
    meta = {k: v for k, v in cell.meta.items()
            if k not in ("visual_level", "cost_mode", "cumulative_cost")}
    return env.episode(episode_id=cell.episode_id, policy=cell.policy,
                       instance_id=cell.instance_id, meta=meta)
