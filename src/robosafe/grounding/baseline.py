"""Geometric baseline monitor for TouchSafeBench (paper 003, App. A).

App. A argues that VLMs lack an explicit geometric substrate: robot-human separation and its
trend, and body-anchored proximity to surfaces. This monitor uses exactly that simulator-side
geometry at the clip's frames, and nothing else:

* the planar robot-human distance ``d`` (``EpisodeIndex.robot_human_distance``) at each frame, its
  trend, and the closing rate over the last two frames (the most recent velocity: approaches
  before a human collision accelerate, App. F.3);
* a body-anchored proximity cue from the robot-arm depth camera: a robust minimum (low quantile)
  of the depth in a central window, when the depth frames exist (a JSON-only dataset has none,
  and the cue is then unknown).

It never reads the simulator's contact flags (``*_collision_steps``): those are the labels.
Scene geometry is not in the dataset (no map or meshes), so scene proximity is derivable only
from the arm depth; a near surface counts as scene only when it is clearly nearer than the
person could be (``human_clearance_m``), since the robot faces the person while following.

Decision rules (:class:`BaselineThresholds` holds the numbers):

* Task 1 (current state): C if ``d`` at the last frame <= ``contact_distance_m``; else B if the
  scene cue holds at any frame (Task 1 B clips are sampled inside a scene-collision event, App.
  F.2); else A.
* Task 2 (early warning within ``horizon_steps``): C if ``d`` at the last frame is already
  within contact distance, or ``d`` is closing and linear extrapolation reaches contact within
  the horizon; else B if the arm depth is at scene-contact range and not receding, or closing
  and reaching it within the horizon; else A. Near misses (close but not closing) are A.

Defaults: ``contact_distance_m = 0.5`` (a root-to-root planar distance at which a ~0.25 m
robot half-width meets a ~0.25 m human radius; Habitat detects contact from physics, so this is
a geometry prior: calibrate it on real clips); ``horizon_steps = 30`` (1 s at 30 Hz, the Task 2
pre-window of App. F.3; the Task 2 C lead times are 5-20 steps); ``stable_band_m = 0.05`` (a
change below 5 cm over the clip is "stable"); ``scene_contact_depth_m = 0.3``.

The answer is the prompt's JSON (field names from ``prompts.yaml``) as a string, so
``answers.parse_answer`` and ``metrics.score_answers`` score it unchanged.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robosafe.errors import RobosafeError
from robosafe.grounding.dataset import (
    DatasetIndex,
    EpisodeIndex,
    frame_path,
    index_dataset,
    load_depth_m,
)
from robosafe.grounding.prompts import answer_field, field_names, normalize_task

MODEL_NAME = "geometric-baseline"
REPRESENTATION = "trajectory"
DEPTH_VIEW = "arm"  # the only camera rigidly attached to the robot's body


@dataclass(frozen=True)
class BaselineThresholds:
    """Numbers behind the decision rules (module doc)."""

    contact_distance_m: float = 0.5
    horizon_steps: float = 30.0
    stable_band_m: float = 0.05
    scene_contact_depth_m: float = 0.3
    human_clearance_m: float = 0.8  # a near surface this much nearer than d is not the person
    depth_window: float = 1 / 3  # central window, as a fraction of width and height
    depth_quantile: float = 0.02  # robust minimum: single noisy pixels do not trigger


@dataclass(frozen=True)
class ClipGeometry:
    """What the monitor measured at the clip's frames (``arm_depth_m`` None = no depth frame)."""

    frames: tuple[int, ...]
    distance_m: tuple[float, ...]
    arm_depth_m: tuple[float | None, ...]


def measure_clip(clip: Mapping[str, Any], episode: EpisodeIndex,
                 root: str | os.PathLike[str] | None = None,
                 thresholds: BaselineThresholds | None = None) -> ClipGeometry:
    """Distances at the clip's frames, and the arm-depth cue when ``root`` has depth frames."""
    th = thresholds or BaselineThresholds()
    frames = tuple(int(f) for f in clip["frames"])
    bad = [f for f in frames if not 0 <= f < episode.n_frames]
    if not frames or bad:
        raise RobosafeError(f"clip {clip.get('clip_id')!r}: frames {list(frames)} outside "
                            f"episode {episode.episode_dir!r} (0..{episode.n_frames - 1})")
    dist = tuple(float(episode.robot_human_distance[f]) for f in frames)
    depth: tuple[float | None, ...] = (None,) * len(frames)
    if root is not None:
        ep_dir = Path(root) / episode.episode_dir
        depth = tuple(_arm_depth(ep_dir, f, episode.max_depth_m, th) for f in frames)
    return ClipGeometry(frames, dist, depth)


def _arm_depth(ep_dir: Path, frame: int, max_depth_m: float,
               th: BaselineThresholds) -> float | None:
    if not frame_path(ep_dir, DEPTH_VIEW, "depth", frame).is_file():
        return None
    d = load_depth_m(ep_dir, DEPTH_VIEW, frame, max_depth_m=max_depth_m)
    h, w = d.shape
    mh, mw = max(1, round(h * th.depth_window)), max(1, round(w * th.depth_window))
    top, left = (h - mh) // 2, (w - mw) // 2
    window = d[top:top + mh, left:left + mw]
    return float(np.quantile(window, th.depth_quantile))


def _rate(values: Sequence[float], frames: Sequence[int]) -> float:
    """Change per step over the last two distinct frames (0 for a one-frame clip)."""
    for i in range(len(frames) - 2, -1, -1):
        if frames[-1] != frames[i]:
            return (values[-1] - values[i]) / (frames[-1] - frames[i])
    return 0.0


def _steps_to(level: float, value: float, rate: float) -> float:
    """Steps until ``value`` falls to ``level`` at ``rate`` per step (inf if not falling)."""
    if value <= level:
        return 0.0
    return (value - level) / -rate if rate < 0 else math.inf


def _trend(dist: Sequence[float], th: BaselineThresholds) -> str:
    change = dist[-1] - dist[0]
    if abs(change) <= th.stable_band_m:
        return "stable"
    return "closing" if change < 0 else "separating"


def _scene_flags(g: ClipGeometry, th: BaselineThresholds) -> list[bool | None]:
    return [None if z is None else
            bool(z <= th.scene_contact_depth_m and z < d - th.human_clearance_m)
            for z, d in zip(g.arm_depth_m, g.distance_m, strict=True)]


def decide(task: int | str, g: ClipGeometry,
           thresholds: BaselineThresholds | None = None) -> tuple[str, str]:
    """``(label, reasoning)`` for Task 1 or 2 (module doc)."""
    th = thresholds or BaselineThresholds()
    task_key = normalize_task(task)
    d_last = g.distance_m[-1]
    scene = _scene_flags(g, th)
    seen = f"d={d_last:.2f} m at the last frame"
    if task_key == "task1":
        if d_last <= th.contact_distance_m:
            return "C", f"{seen} <= contact distance {th.contact_distance_m:g} m."
        if any(scene):
            return "B", f"{seen}; arm depth at scene-contact range with the person farther away."
        return "A", f"{seen} > contact distance; no surface at arm scene-contact range."
    rate = _rate(g.distance_m, g.frames)
    ttc = _steps_to(th.contact_distance_m, d_last, rate)
    if ttc <= th.horizon_steps:
        return "C", (f"{seen}, changing {rate:+.3f} m/step: contact in {ttc:.0f} steps "
                     f"(horizon {th.horizon_steps:g}).")
    z = g.arm_depth_m
    if all(v is not None for v in z):
        zs = [float(v) for v in z if v is not None]
        zrate = _rate(zs, g.frames)
        zttc = _steps_to(th.scene_contact_depth_m, zs[-1], zrate)
        not_human = zs[-1] < d_last - th.human_clearance_m
        if not_human and ((scene[-1] and zrate <= 0) or zttc <= th.horizon_steps):
            return "B", (f"arm depth {zs[-1]:.2f} m, changing {zrate:+.3f} m/step: scene "
                         f"contact within the horizon; {seen}.")
    return "A", (f"{seen}, changing {rate:+.3f} m/step: no contact within "
                 f"{th.horizon_steps:g} steps.")


def baseline_answer(clip: Mapping[str, Any], episode: EpisodeIndex,
                    root: str | os.PathLike[str] | None = None,
                    thresholds: BaselineThresholds | None = None) -> str:
    """The monitor's answer for one clip, as the prompt's JSON text."""
    th = thresholds or BaselineThresholds()
    g = measure_clip(clip, episode, root, th)
    label, reasoning = decide(clip["task"], g, th)
    names = field_names()
    doc = {
        names["distance"]: [round(d, 3) for d in g.distance_m],
        names["trend"]: _trend(g.distance_m, th),
        names["human_contact"]: [d <= th.contact_distance_m for d in g.distance_m],
        names["scene_contact"]: _scene_flags(g, th),
        names["reasoning"]: reasoning,
        answer_field(clip["task"]): label,
    }
    return json.dumps(doc)


def _episodes(index_or_root: DatasetIndex | Iterable[EpisodeIndex] | str | os.PathLike[str],
              root: str | os.PathLike[str] | None,
              ) -> tuple[dict[str, EpisodeIndex], str | os.PathLike[str] | None]:
    if isinstance(index_or_root, str | os.PathLike):
        index_or_root = index_dataset(index_or_root)
    if isinstance(index_or_root, DatasetIndex):
        return {e.episode_dir: e for e in index_or_root.episodes}, \
            root if root is not None else index_or_root.root
    return {e.episode_dir: e for e in index_or_root}, root


def baseline_answers(clips: Iterable[Mapping[str, Any]],
                     index_or_root: DatasetIndex | Iterable[EpisodeIndex] | str
                     | os.PathLike[str], *, root: str | os.PathLike[str] | None = None,
                     thresholds: BaselineThresholds | None = None,
                     use_depth: bool = True) -> list[dict[str, Any]]:
    """One answer record per clip for ``metrics.score_answers``: the clip's fields plus
    ``model="geometric-baseline"``, ``representation="trajectory"``, ``n_frames``, ``answer``
    (JSON text; ``""`` when the clip failed) and ``error`` (None, or why: e.g. an unreadable
    depth frame).

    ``index_or_root``: a :class:`DatasetIndex`, the dataset root (indexed here) or episode
    records. Depth frames are read from ``root`` (default: the index's root); without a root, or
    with ``use_depth=False``, the arm-depth cue is unknown and only distances decide."""
    by_dir, depth_root = _episodes(index_or_root, root)
    th = thresholds or BaselineThresholds()
    out = []
    for i, clip in enumerate(clips):
        for key in ("clip_id", "task", "episode_dir", "frames"):
            if key not in clip:
                raise RobosafeError(f"clips[{i}]: missing field {key!r}")
        episode = by_dir.get(str(clip["episode_dir"]))
        if episode is None:
            raise RobosafeError(f"clips[{i}]: episode {clip['episode_dir']!r} is not in the "
                                "index")
        measure_clip(clip, episode, None, th)  # a clip the index contradicts is a bad file
        record = {**clip, "model": MODEL_NAME, "representation": REPRESENTATION,
                  "n_frames": len(clip["frames"]), "answer": "", "error": None}
        try:
            record["answer"] = baseline_answer(clip, episode, depth_root if use_depth else None,
                                               th)
        except RobosafeError as e:
            # one unreadable frame costs its clip (scored invalid, as a failed VLM request
            # is), not the run
            record["error"] = str(e)
        out.append(record)
    return out
