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

The float32 ``action`` column alone does not replay: its rounding moved a careless stove episode
by 1.4 cm and a vase-pushing one by 5.4 cm (measured on the demo suite), hence ``replay.action``.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from robosafe.errors import RobosafeError
from robosafe.formats.lerobot import Dataset
from robosafe.formats.traces import REPLAY_COLUMN, read_traces
from robosafe.trace.episode import Episode

TOLERANCE_M = 0.01


@dataclass
class Replayed:
    episodes: list[Episode]
    divergence_m: dict[str, float]  # episode id -> largest position difference (inf: length)
    diverged: list[str] = field(default_factory=list)


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


def replay_dataset(path: str | Path, *, tolerance_m: float = TOLERANCE_M,
                   on_episode: Callable[[int, int], None] | None = None) -> Replayed:
    """Re-simulate every episode of a robosafe-written dataset (see the module docstring)."""
    ds = Dataset(path)
    if ds.robosafe is None or "tasks" not in ds.robosafe:
        raise RobosafeError(f"{ds.root}: --replay needs the host that recorded the dataset; "
                            "only datasets robosafe exported (from its simulator or the LIBERO "
                            "host) say which task, initial state and actions to re-run")
    host = ds.robosafe.get("host", "robosafe")
    if host not in ("robosafe", "libero"):
        raise RobosafeError(f"{ds.root}/meta/robosafe.json: unknown host {host!r}")

    recorded = {e.episode_id: e for e in read_traces(ds).episodes}
    out, div, bad = [], {}, []
    envs: dict[tuple, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for k, row in enumerate(ds.episodes):
            cell = json.loads(row[REPLAY_COLUMN])
            head = json.loads(row["robosafe/trace"])
            text = ds.robosafe["tasks"].get(cell["task_id"])
            if text is None:
                raise RobosafeError(f"{ds.root}/meta/robosafe.json: no task file for "
                                    f"{cell['task_id']!r}")
            key = (cell["task_id"], cell["language_level"], cell["visual_level"])
            if key not in envs and host == "libero":
                from robosafe.hosts.libero import LiberoEnv

                envs[key] = LiberoEnv(ds.robosafe["suite"], cell["task_id"],
                                      horizon=ds.robosafe.get("horizon"))
            elif key not in envs:
                from robosafe.sim.env import TaskEnv

                task = Path(tmp) / f"{cell['task_id']}.bddl"
                task.write_text(text, encoding="utf-8")
                envs[key] = TaskEnv(task, task_id=cell["task_id"], benchmark=head["benchmark"],
                                    render=False, visual_level=cell["visual_level"],
                                    language_level=cell["language_level"],
                                    horizon=ds.robosafe.get("horizon"))
            env = envs[key]
            frames = ds.frames(row["episode_index"])
            actions = frames.get("replay.action", frames["action"]).astype(float)[:-1]
            env.reset(seed=cell["seed"])
            for a in actions:
                _, _, terminated, truncated, _ = env.step(a)
                if terminated or truncated:
                    break
            meta = {k2: v for k2, v in head["meta"].items()
                    if k2 not in ("visual_level", "cost_mode", "cumulative_cost")}
            ep = env.episode(episode_id=head["episode_id"], policy=head["policy"],
                             instance_id=head["instance_id"], meta=meta)
            d = divergence(ep, recorded[head["episode_id"]]) \
                if head["episode_id"] in recorded else float("inf")
            ep.meta["replay_divergence_m"] = d if np.isfinite(d) else None
            div[ep.episode_id] = d
            if not d <= tolerance_m:
                bad.append(ep.episode_id)
            out.append(ep)
            if on_episode:
                on_episode(k + 1, len(ds.episodes))
    for env in envs.values():
        env.close()
    return Replayed(out, div, bad)

