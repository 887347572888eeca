"""A run directory as a LeRobot v3.0 dataset (``robosafe export lerobot``, ``robosafe collect``).

One dataset episode per finished run episode. Frame ``t`` is trace row ``t`` (step 0 is the
state after reset) with the action the policy took from that state; the trace has one row more
than the episode has actions, and the last frame (the final state) repeats the last action and
has ``next.done`` set, so every trace row, and with it every safety signal, is in the dataset.
``observation.state`` is the LIBERO layout when the run recorded frames (``record_frames``),
else the end-effector position alone (with a warning). Per-episode verdicts come from the run's
outcome rows (``robosafe/success``, ``robosafe/safe``, ``robosafe/sbu``, ``robosafe/vsi``,
``robosafe/violated_specs``, ``robosafe/cumulative_cost`` in ``meta/robosafe_episodes.parquet``).

Camera videos are copied, not re-encoded: the run's per-episode mp4s are h264 at the dataset's
fps, size and pixel format, so their packets go into the dataset's file unchanged (a remux) and
decode to the run's own frames bit for bit. A camera is re-encoded (a second lossy pass) only on
request (``reencode``) or when an episode's stream differs from what the dataset declares;
:attr:`ExportResult.videos` says which, per camera.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from robosafe.errors import RobosafeError
from robosafe.formats.lerobot import RECORD_FEATURE, RECORD_SPEC, DatasetWriter
from robosafe.formats.traces import FORMAT, REPLAY_COLUMN, TRACE_COLUMN, Layout, trace_header
from robosafe.formats.video import CODEC, CODEC_NAME, PIX_FMT, StreamInfo
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
    excluded: set[str] = field(default_factory=set)  # cells left out on request (--only-safe)
    total: int = 0  # episodes in the run
    videos: dict[str, str] = field(default_factory=dict)  # camera key -> copied / re-encoded

    @property
    def failed(self) -> dict[str, str]:
        """Episodes that should be in the dataset and are not (crashed, missing, unreadable):
        the export is not a clean one (the CLI exits 2 after writing the others)."""
        return {k: v for k, v in self.skipped.items() if k not in self.excluded}


@dataclass
class _Item:
    cell: Cell
    row: dict
    episode: object
    actions: np.ndarray
    frames_dir: Path
    state: np.ndarray | None  # frames/<cell>/state.npy, when recorded
    videos: dict[str, StreamInfo]  # camera -> its readable mp4's stream

    def mp4(self, cam: str) -> Path:
        return self.frames_dir / f"{cam}.mp4"


@dataclass(frozen=True)
class VideoPlan:
    """How one camera gets into the dataset: the run's stream copied, or re-encoded (why)."""

    copy: bool
    why: str = ""  # why it is re-encoded

    def line(self) -> str:
        return ("copied from the run's videos (no re-encode)" if self.copy
                else f"re-encoded ({self.why})")


class _Skip(RobosafeError):
    """One episode cannot be exported; the others are."""


def _flag(v) -> bool:
    return str(v).strip().lower() in ("1", "true")


def _array(path: Path, rows: int, what: str) -> np.ndarray:
    """A plain numeric (rows, n) .npy; never unpickled (DESIGN.md: no pickle of user files)."""
    try:
        arr = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise _Skip(f"{path}: not a plain numeric array ({str(exc).splitlines()[0]})") from None
    if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "biuf":
        raise _Skip(f"{path}: {what} must be numbers, not {getattr(arr, 'dtype', type(arr))}")
    if arr.ndim != 2 or len(arr) != rows:
        raise _Skip(f"{path}: {what} of shape {arr.shape} for {rows} rows")
    return arr


def _item(run: RunDir, row: dict) -> _Item:
    """One finished episode with everything it needs checked, or :class:`_Skip`."""
    from robosafe.formats.video import stream_info

    cell = Cell.of_row(row)
    trace, act = run.trace_path(cell), run.actions_path(cell)
    if not trace.is_file() or not act.is_file():
        raise _Skip("trace or actions file missing")
    eps, errors = read_episodes(trace)
    if errors or len(eps) != 1:
        raise _Skip(f"unreadable trace: {errors[0] if errors else trace}")
    n = eps[0].n_steps
    actions = _array(act, n - 1, "actions")
    frames_dir = run.path / "frames" / cell.name
    state_file = frames_dir / "state.npy"
    state = _array(state_file, n, "robot state") if state_file.is_file() else None
    videos = {}
    for mp4 in sorted(frames_dir.glob("*.mp4")):
        # an unreadable file is one line naming it (RobosafeError)
        videos[mp4.stem] = stream_info(mp4)
    return _Item(cell, row, eps[0], actions, frames_dir, state, videos)


def _items(run: RunDir, only_safe: bool, skipped: dict[str, str],
           excluded: set[str]) -> list[_Item]:
    out = []
    for row in run.outcomes():
        cell = Cell.of_row(row)
        if row.get("error_type"):
            skipped[cell.name] = f"episode crashed ({row['error_type']})"
            continue
        if only_safe and not _flag(row.get("safe")):
            skipped[cell.name] = "unsafe (--only-safe)"
            excluded.add(cell.name)
            continue
        try:
            out.append(_item(run, row))
        except RobosafeError as exc:
            skipped[cell.name] = str(exc)
    return out


def _consistent(items: list[_Item], skipped: dict[str, str]) -> tuple[list[_Item], bool,
                                                                     dict[str, tuple[int, int]]]:
    """The episodes that have what the dataset has: robot state if any episode recorded it,
    every camera any episode recorded, at that camera's size. An episode missing one is not
    exported (named, with the camera), rather than the camera being dropped for all."""
    with_state = any(it.state is not None for it in items)
    sizes: dict[str, tuple[int, int]] = {}
    for it in items:
        for cam, v in it.videos.items():
            sizes.setdefault(cam, (v.height, v.width))
    keep = []
    for it in items:
        if with_state and it.state is None:
            skipped[it.cell.name] = (f"{it.frames_dir / 'state.npy'} missing (other episodes "
                                     "recorded the robot state)")
        elif missing := [c for c in sizes if c not in it.videos]:
            skipped[it.cell.name] = (f"camera {missing[0]}: {it.frames_dir / missing[0]}.mp4 "
                                     "missing (other episodes recorded it)")
        elif other := [c for c, hw in sizes.items()
                       if (it.videos[c].height, it.videos[c].width) != hw]:
            v = it.videos[other[0]]
            skipped[it.cell.name] = (f"camera {other[0]}: {(v.height, v.width)} pixels, other "
                                     f"episodes {sizes[other[0]]}")
        else:
            keep.append(it)
    return keep, with_state, sizes


def _plan(items: list[_Item], cam: str, fps: int, reencode: bool) -> VideoPlan:
    """Copy the camera's streams when every episode's is what the dataset declares (h264,
    yuv420p, the dataset's fps, one codec set-up, a frame every 1/fps s); else re-encode."""
    from robosafe.formats.video import copy_problem

    if reencode:
        return VideoPlan(False, "--reencode")
    want = CODEC_NAME[CODEC]
    first = items[0].videos[cam]
    for it in items:
        v, path = it.videos[cam], it.mp4(cam)
        if v.codec != want or v.pix_fmt != PIX_FMT:
            why = f"{path} is {v.codec} {v.pix_fmt}, the dataset's videos {want} {PIX_FMT}"
        elif v.fps != fps:
            why = f"{path} is at {v.fps} fps, the dataset at {fps}"
        elif v.extradata != first.extradata:
            why = f"{path} was encoded with other settings than {items[0].mp4(cam)}"
        else:
            why = copy_problem(path, fps)
        if why:
            return VideoPlan(False, why)
    return VideoPlan(True)


def _nothing(run: RunDir, skipped: dict[str, str]) -> RobosafeError:
    why = "; ".join(f"{k}: {v}" for k, v in list(skipped.items())[:3])
    return RobosafeError(f"{run.path}: no episode to export" + (f" ({why})" if why else ""))


def export_run(run_dir: str | Path, out: str | Path, *, only_safe: bool = False,
               overwrite: bool = False, reencode: bool = False, videos_asked: bool = True,
               on_episode: Callable[[int, int], None] | None = None) -> ExportResult:
    """Write the finished episodes of a run directory as a LeRobot v3.0 dataset at ``out``.
    An episode that cannot be exported (crashed, missing or unreadable files, a camera the
    others have) is left out and named in ``skipped``; the others are written. Camera videos
    are copied from the run unless ``reencode`` or an episode's stream differs (module doc).
    ``videos_asked=False`` (a collection run without cameras, by the user's choice) drops the
    warning that the dataset has no videos: it says nothing the user did not ask for."""
    from robosafe.formats.lerobot import check_output

    check_output(Path(out), overwrite)  # before reading anything
    run = open_run(run_dir)
    skipped: dict[str, str] = {}
    excluded: set[str] = set()
    total = len(run.outcomes())
    items, with_state, sizes = _consistent(_items(run, only_safe, skipped, excluded), skipped)
    if not items:
        raise _nothing(run, skipped)
    warnings: list[str] = []
    dts = {it.episode.dt for it in items}
    fps = round(1.0 / items[0].episode.dt)
    if len(dts) > 1 or abs(fps * items[0].episode.dt - 1.0) > 1e-9:
        raise RobosafeError(f"{run.path}: episodes step at {sorted(dts)} s; a LeRobot dataset "
                            "has one integer fps")
    cams = sorted(sizes)
    if not with_state:
        warnings.append(f"{run.path}: the run recorded no robot state or camera frames "
                        "(run with --record-frames, and --images for cameras): "
                        "observation.state is the end-effector position only")
    elif not cams and videos_asked:
        warnings.append(f"{run.path}: the run rendered no camera images (--images): the "
                        "dataset has no videos")
    plans = {c: _plan(items, c, fps, reencode) for c in cams}
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
        # the verdicts and trace header again, in the frames: lerobot's tools keep those
        RECORD_FEATURE: RECORD_SPEC, **layout.features()}
    writer = DatasetWriter(out, fps=fps, features=features,
                           cameras={f"observation.images.{c}": sizes[c] for c in cams},
                           robot_type=items[0].episode.meta.get("embodiment"),
                           episode_columns=VERDICTS, overwrite=overwrite)
    written = []
    try:
        for k, it in enumerate(items):
            try:
                frames, videos, task, extra = _episode(it, with_state, cams, layout, warnings)
            except RobosafeError as exc:  # checked in full before anything is written
                skipped[it.cell.name] = str(exc)
            else:
                sources = {f"observation.images.{c}": it.mp4(c) for c in cams if plans[c].copy}
                writer.add_episode(frames, task, videos=videos, extra=extra, sources=sources)
                written.append(it)
            if on_episode:
                on_episode(k + 1, len(items))
        if not written:
            raise _nothing(run, skipped)
    except BaseException:
        writer.abort()
        raise
    task_ids = sorted({it.cell.task_id for it in written})
    writer.close({"format": FORMAT, "source_run": str(run.path), "run_id": run.run_id,
                  "policy": run.policy_name, "only_safe": only_safe,
                  "skipped": skipped, "suite": run.config.get("suite"),
                  # which simulator replays it: robosafe's CBDDL worlds or LIBERO's own envs
                  "host": run.config.get("host", "robosafe"),
                  # and with which of the host's own options (assets, controller, cost mode)
                  "options": _host_options(run.config),
                  "horizon": run.config.get("horizon"),
                  # for episodes another tool appends (they have no robosafe record)
                  "body_roles": {k: v for it in items for k, v in it.episode.body_roles.items()},
                  # the task files as run: what `import lerobot --replay` rebuilds worlds from
                  "tasks": {t: run.task_file(t).read_text(encoding="utf-8") for t in task_ids}})
    return ExportResult(Path(out), len(written), writer.frames, skipped, warnings, excluded,
                        total, {f"observation.images.{c}": p.line() for c, p in plans.items()})


def _host_options(config: dict[str, Any]) -> dict[str, Any]:
    """The run's host options as its run.json holds them (robosafe.hosts.options), for the
    dataset's replay to rebuild the same worlds."""
    from robosafe.hosts.registry import host_spec

    return host_spec(config.get("host", "robosafe")).options_class().from_json(config).to_json()


def _episode(it: _Item, with_state: bool, cams: list[str], layout: Layout,
             warnings: list[str]) -> tuple[dict, dict, str, dict]:
    """The dataset rows of one episode (frames, decoded videos, task, verdicts), all decoded
    and checked before the writer sees them: a bad one is skipped whole, never half written."""
    from robosafe.formats.video import read_frames

    ep = it.episode
    n = ep.n_steps
    actions = np.vstack([it.actions, it.actions[-1:] if len(it.actions)
                         else np.zeros((1, it.actions.shape[1]))])
    state = it.state if with_state else ep.eef_pos_m
    done = np.zeros(n, bool)
    done[-1] = True
    safety, notes = layout.frames(ep)
    frames = {"observation.state": state.astype(np.float32),
              "action": actions.astype(np.float32), "replay.action": actions,
              "next.done": done,
              "next.success": done & bool(ep.success), **safety}
    videos = {}
    for c in cams:
        path = it.mp4(c)
        shot = list(read_frames(path))
        if len(shot) != n:
            raise _Skip(f"camera {c}: {path} has {len(shot)} frames for {n} trace rows")
        videos[f"observation.images.{c}"] = shot
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
    warnings.extend(notes)
    return frames, videos, str(row.get("instruction") or ep.task_id), extra
