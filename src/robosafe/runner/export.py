"""A run directory as a LeRobot v3.0 dataset (``robosafe export lerobot``, ``robosafe collect``).

One dataset episode per finished run episode. Frame ``t`` is trace row ``t`` (step 0 is the
state after reset) with the action the policy took from that state; the trace has one row more
than the episode has actions, and the last frame (the final state) repeats the last action and
has ``next.done`` set, so every trace row, and with it every safety signal, is in the dataset.
``observation.state`` is the LIBERO layout when the run recorded frames (``record_frames``),
else the end-effector position alone (with a warning). Per-episode verdicts come from the run's
outcome rows (``robosafe/success``, ``robosafe/safe``, ``robosafe/sbu``, ``robosafe/vsi``,
``robosafe/violated_specs``, ``robosafe/cumulative_cost`` in ``meta/episodes``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from robosafe.errors import RobosafeError
from robosafe.formats.lerobot import DatasetWriter
from robosafe.formats.traces import FORMAT, REPLAY_COLUMN, TRACE_COLUMN, Layout, trace_header
from robosafe.runner.frames import STATE_NAMES
from robosafe.runner.rundir import Cell, RunDir, open_run
from robosafe.trace.io import read_episodes

ACTION_NAMES = {7: ["x", "y", "z", "roll", "pitch", "yaw", "gripper"]}
VERDICTS = {"robosafe/success": pa.bool_(), "robosafe/safe": pa.bool_(),
            "robosafe/sbu": pa.bool_(), "robosafe/vsi": pa.float64(),
            "robosafe/violated_specs": pa.list_(pa.string()),
            "robosafe/cumulative_cost": pa.float64(), TRACE_COLUMN: pa.string(),
            REPLAY_COLUMN: pa.string()}


@dataclass
class ExportResult:
    path: Path
    episodes: int
    frames: int
    skipped: dict[str, str] = field(default_factory=dict)  # cell -> why
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Item:
    cell: Cell
    row: dict
    episode: object
    actions: np.ndarray
    frames_dir: Path


def _flag(v) -> bool:
    return str(v).strip().lower() in ("1", "true")


def _items(run: RunDir, only_safe: bool, skipped: dict[str, str]) -> list[_Item]:
    out = []
    for row in run.outcomes():
        cell = Cell.of_row(row)
        if row.get("error_type"):
            skipped[cell.name] = f"episode crashed ({row['error_type']})"
            continue
        if only_safe and not _flag(row.get("safe")):
            skipped[cell.name] = "unsafe (--only-safe)"
            continue
        trace, act = run.trace_path(cell), run.actions_path(cell)
        if not trace.is_file() or not act.is_file():
            skipped[cell.name] = "trace or actions file missing"
            continue
        eps, errors = read_episodes(trace)
        if errors or len(eps) != 1:
            skipped[cell.name] = f"unreadable trace: {errors[0] if errors else trace}"
            continue
        actions = np.load(act, allow_pickle=False)
        if actions.ndim != 2 or len(actions) != eps[0].n_steps - 1:
            skipped[cell.name] = (f"{act}: {len(actions)} actions for "
                                  f"{eps[0].n_steps} trace rows")
            continue
        out.append(_Item(cell, row, eps[0], actions, run.path / "frames" / cell.name))
    return out


def export_run(run_dir: str | Path, out: str | Path, *, only_safe: bool = False,
               overwrite: bool = False,
               on_episode: Callable[[int, int], None] | None = None) -> ExportResult:
    """Write the finished episodes of a run directory as a LeRobot v3.0 dataset at ``out``."""
    run = open_run(run_dir)
    skipped: dict[str, str] = {}
    items = _items(run, only_safe, skipped)
    if not items:
        why = "; ".join(f"{k}: {v}" for k, v in list(skipped.items())[:3])
        raise RobosafeError(f"{run.path}: no episode to export" + (f" ({why})" if why else ""))
    warnings: list[str] = []
    dts = {it.episode.dt for it in items}
    fps = round(1.0 / items[0].episode.dt)
    if len(dts) > 1 or abs(fps * items[0].episode.dt - 1.0) > 1e-9:
        raise RobosafeError(f"{run.path}: episodes step at {sorted(dts)} s; a LeRobot dataset "
                            "has one integer fps")
    with_state = all((it.frames_dir / "state.npy").is_file() for it in items)
    cams = sorted({p.stem for it in items for p in it.frames_dir.glob("*.mp4")})
    cams = [c for c in cams if all((it.frames_dir / f"{c}.mp4").is_file() for it in items)]
    if not with_state:
        warnings.append(f"{run.path}: the run recorded no robot state or camera frames "
                        "(run with --record-frames, and --images for cameras): "
                        "observation.state is the end-effector position only")
    elif not cams:
        warnings.append(f"{run.path}: the run rendered no camera images (--images): the "
                        "dataset has no videos")
    layout = Layout.of([it.episode for it in items])
    dim = items[0].actions.shape[1]
    features = {
        "observation.state": {"dtype": "float32", "shape": [8 if with_state else 3],
                              "names": STATE_NAMES if with_state else STATE_NAMES[:3]},
        "action": {"dtype": "float32", "shape": [dim],
                   "names": ACTION_NAMES.get(dim, [f"a{i}" for i in range(dim)])},
        # the exact (float64) actions: float32 rounding alone moves a replay by centimetres
        "replay.action": {"dtype": "float64", "shape": [dim],
                          "names": ACTION_NAMES.get(dim, [f"a{i}" for i in range(dim)])},
        "next.done": {"dtype": "bool", "shape": [1], "names": None},
        "next.success": {"dtype": "bool", "shape": [1], "names": None},
        **layout.features()}
    sizes = {}
    for c in cams:
        from robosafe.formats.video import probe

        info = probe(items[0].frames_dir / f"{c}.mp4")
        sizes[f"observation.images.{c}"] = (info["video.height"], info["video.width"])
    writer = DatasetWriter(out, fps=fps, features=features, cameras=sizes,
                           robot_type=items[0].episode.meta.get("embodiment"),
                           episode_columns=VERDICTS, overwrite=overwrite)
    try:
        for k, it in enumerate(items):
            _add(writer, it, with_state, cams, layout, warnings)
            if on_episode:
                on_episode(k + 1, len(items))
    except BaseException:
        writer.abort()
        raise
    task_ids = sorted({it.cell.task_id for it in items})
    writer.close({"format": FORMAT, "source_run": str(run.path), "run_id": run.run_id,
                  "policy": run.policy_name, "only_safe": only_safe,
                  "skipped": skipped, "suite": run.config.get("suite"),
                  # which simulator replays it: robosafe's CBDDL worlds or LIBERO's own envs
                  "host": run.config.get("host", "robosafe"),
                  "horizon": run.config.get("horizon"),
                  # for episodes another tool appends (they have no robosafe record)
                  "body_roles": {k: v for it in items for k, v in it.episode.body_roles.items()},
                  # the task files as run: what `import lerobot --replay` rebuilds worlds from
                  "tasks": {t: run.task_file(t).read_text(encoding="utf-8") for t in task_ids}})
    return ExportResult(Path(out), len(items), writer.frames, skipped, warnings)


def _add(writer: DatasetWriter, it: _Item, with_state: bool, cams: list[str],
         layout: Layout, warnings: list[str]) -> None:
    from robosafe.formats.video import read_frames

    ep = it.episode
    n = ep.n_steps
    actions = np.vstack([it.actions, it.actions[-1:] if len(it.actions)
                         else np.zeros((1, it.actions.shape[1]))])
    if with_state:
        state = np.load(it.frames_dir / "state.npy", allow_pickle=False)
        if len(state) != n:
            raise RobosafeError(f"{it.frames_dir / 'state.npy'}: {len(state)} rows for {n} "
                                "trace rows")
    else:
        state = ep.eef_pos_m
    done = np.zeros(n, bool)
    done[-1] = True
    safety, notes = layout.frames(ep)
    warnings.extend(notes)
    frames = {"observation.state": state.astype(np.float32),
              "action": actions.astype(np.float32), "replay.action": actions,
              "next.done": done,
              "next.success": done & bool(ep.success), **safety}
    videos = {f"observation.images.{c}": read_frames(it.frames_dir / f"{c}.mp4") for c in cams}
    row = it.row
    violated = [s for s in str(row.get("violated_specs") or "").split(";") if s]
    extra = {"robosafe/success": _flag(row.get("success")), "robosafe/safe": _flag(row.get("safe")),
             "robosafe/sbu": _flag(row.get("sbu")), "robosafe/vsi": float(row.get("vsi") or 0.0),
             "robosafe/violated_specs": violated,
             "robosafe/cumulative_cost": float(row.get("cumulative_cost") or 0.0),
             TRACE_COLUMN: trace_header(ep),
             REPLAY_COLUMN: json.dumps({"task_id": it.cell.task_id, "seed": it.cell.seed,
                                        "language_level": it.cell.language_level,
                                        "visual_level": it.cell.visual_level})}
    task = str(row.get("instruction") or ep.task_id)
    writer.add_episode(frames, task, videos=videos, extra=extra)
