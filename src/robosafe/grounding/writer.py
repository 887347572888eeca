"""Writing TouchSafeBench episodes in the App. E layout (paper 003): JSON files, frames and the
top-down video (through ``formats.video``)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from robosafe.grounding.layout import (
    DEPTH_SENSORS,
    INFO_FILE,
    MP4_PLACEHOLDER,
    RGB_SENSORS,
    VIEWS,
    frame_path,
)

FrameSource = Callable[[str, int], tuple[np.ndarray, np.ndarray]]


"""(view, frame) -> (rgb uint8 (H, W, 3), depth in metres float (H, W))."""


@dataclass
class EpisodeRecord:
    """Everything :func:`write_episode` writes for one episode (also the synthetic generator's
    ground truth). Per-step arrays have length n; ``cameras`` maps each view to its world
    position (n, 3) and orientation quaternion wxyz (n, 4)."""

    human_type: str
    sim_task: str
    scene_id: str
    episode_id: int
    robot_pos: np.ndarray
    human_pos: np.ndarray
    human_collision: np.ndarray  # bool (n,)
    robot_obj_colls: np.ndarray  # int (n,)
    robot_scene_colls: np.ndarray  # int (n,)
    cameras: dict[str, tuple[np.ndarray, np.ndarray]]
    rigid_objs: list[str] = field(default_factory=list)
    target_objs: list[str] = field(default_factory=list)
    object_labels: dict[str, str] = field(default_factory=dict)
    max_depth_m: float = 10.0
    image_size: tuple[int, int] = (16, 16)  # width, height
    hfov_deg: float = 90.0
    jpeg_quality: int = 85

    @property
    def n_steps(self) -> int:
        return len(self.robot_pos)

    @property
    def episode_dir(self) -> str:
        return (f"{self.human_type}/{self.sim_task}/scene_{self.scene_id}/"
                f"episode_{self.episode_id:04d}")


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Unit quaternions wxyz (n, 4) -> rotation matrices (n, 3, 3)."""
    w, x, y, z = (q / np.linalg.norm(q, axis=1, keepdims=True)).T
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], axis=1)


def write_dataset_info(root: str | os.PathLike[str], *, images: bool = True,
                       **fields: Any) -> Path:
    """Write ``dataset_info.json``; ``images=False`` declares a JSON-only dataset."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    path = root / INFO_FILE
    path.write_text(json.dumps({**fields, "images": images}, indent=2) + "\n", encoding="utf-8")
    return path


def _write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


_STEP = ('    {"agents": [{"id": "agent_0", "position": [%r, %r, %r]}, '
         '{"id": "agent_1", "position": [%r, %r, %r]}], "collisions": '
         '{"did_collide_human": %s, "robot_obj_colls": %d, "robot_scene_colls": %d}}')


def _camera_frame_template() -> str:
    def nums(k: int) -> str:
        return ", ".join(["%.5f"] * k)

    return "    {" + ", ".join(
        f'"{DEPTH_SENSORS[v]}": {{"camera_to_world": [{nums(16)}], "position": [{nums(3)}], '
        f'"rotation_wxyz": [{nums(4)}]}}' for v in VIEWS) + "}"


_CAMERA_FRAME = _camera_frame_template()


def write_episode(root: str | os.PathLike[str], record: EpisodeRecord, *,
                  frames: FrameSource | None = None,
                  topdown: Callable[[int], np.ndarray] | None = None) -> Path:
    """Write one episode in the App. E layout; returns its directory. Without ``frames`` no
    image is written (JSON-only datasets), but every frame count still says n. ``topdown``
    gives the overhead camera's RGB frame of a step, encoded as ``topdown.mp4`` at 30 Hz;
    without it the video is a drawn floor plan."""
    n = record.n_steps
    ep = Path(root) / record.episode_dir
    ep.mkdir(parents=True, exist_ok=True)
    ids = {"episode_id": int(record.episode_id), "scene_id": record.scene_id}
    _write_json(ep / "episode_meta.json", {
        **ids, "task": record.sim_task, "human_type": record.human_type,
        "rigid_objs": list(record.rigid_objs), "target_objs": list(record.target_objs),
        "object_labels": dict(record.object_labels)})
    _write_json(ep / "rgb_meta.json", {**ids, "jpeg_quality": record.jpeg_quality,
                                       "sensors": {RGB_SENSORS[v]: n for v in VIEWS}})
    _write_json(ep / "depth_meta.json", {
        **ids, "depth_format": "uint8", "depth_scale": 255, "depth_unit": "normalized",
        "max_depth_m": record.max_depth_m, "sensors": {DEPTH_SENSORS[v]: n for v in VIEWS}})
    _write_camera_params(ep / "camera_params.json", record, ids)
    _write_trajectory(ep / "trajectory.json", record)
    if topdown is not None:
        write_video(ep / "topdown.mp4", (topdown(t) for t in range(n)))
    elif frames is None or not write_topdown_video(ep / "topdown.mp4", record):
        (ep / "topdown.mp4").write_bytes(MP4_PLACEHOLDER)
    if frames is not None:
        _write_frames(ep, record, frames)
    return ep


def write_topdown_video(path: Path, record: EpisodeRecord, size: int = 64,
                        every: int = 10) -> bool:
    """A real top-down video of the floor plan (robot red, human blue), one frame per ``every``
    steps, when PyAV is installed (the ``video`` extra); False if it is not."""
    from robosafe.formats import video

    if not video.available():
        return False
    pts = np.concatenate([record.robot_pos[:, [0, 2]], record.human_pos[:, [0, 2]]])
    lo, span = pts.min(axis=0), np.ptp(pts, axis=0).max() + 1.0

    def pixel(p: np.ndarray) -> tuple[int, int]:
        x, z = ((p[[0, 2]] - lo) / span * (size - 8) + 4).astype(int)
        return z, x

    def frames() -> Iterator[np.ndarray]:
        for t in range(0, max(record.n_steps, 1), every):
            img = np.full((size, size, 3), 235, np.uint8)
            for pos, colour in ((record.robot_pos, (220, 40, 40)), (record.human_pos,
                                                                    (40, 60, 220))):
                if record.n_steps:
                    r, c = pixel(pos[t])
                    img[max(r - 2, 0):r + 2, max(c - 2, 0):c + 2] = colour
            yield img

    video.write_video(path, frames(), max(1, 30 // every), codec="mpeg4", gop=None)
    return True


def write_video(path: Path, frames: Iterator[np.ndarray], fps: int = 30) -> None:
    """Encode RGB frames (H, W, 3 uint8, even sizes) as MPEG-4 (``formats.video``, the
    ``video`` extra); no frame writes the placeholder."""
    from robosafe.formats import video

    # ~0.5 bit per pixel: agents stay legible in small overhead frames (the codec's 200 kb/s
    # default blurs them away)
    if not video.write_video(path, frames, fps, codec="mpeg4", gop=None, bits_per_pixel=0.5,
                             min_bit_rate=400_000):
        Path(path).write_bytes(MP4_PLACEHOLDER)


def _write_camera_params(path: Path, record: EpisodeRecord, ids: dict[str, Any]) -> None:
    n = record.n_steps
    w, h = record.image_size
    fx = fy = round(float(w / 2 / np.tan(np.radians(record.hfov_deg) / 2)), 6)  # square pixels
    intr = {"resolution": [w, h], "hfov": record.hfov_deg, "fx": fx, "fy": fy, "cx": w / 2,
            "cy": h / 2, "K": [[fx, 0.0, w / 2], [0.0, fy, h / 2], [0.0, 0.0, 1.0]]}
    cols = []
    for v in VIEWS:
        pos, quat = record.cameras[v]
        m = np.zeros((n, 4, 4))
        m[:, :3, :3] = quat_to_matrix(np.asarray(quat, dtype=float))
        m[:, :3, 3] = pos
        m[:, 3, 3] = 1.0
        # column-major: the 4 entries of column 0, then column 1, ...
        cols += [m.transpose(0, 2, 1).reshape(n, 16), pos, quat]
    rows = np.concatenate(cols, axis=1).tolist() if n else []
    head = json.dumps({**ids, "num_frames": n}, indent=2)[:-2]  # global fields first (index)
    intr_text = json.dumps({DEPTH_SENSORS[v]: intr for v in VIEWS})
    body = ",\n".join([_CAMERA_FRAME % tuple(r) for r in rows])
    path.write_text(f'{head},\n  "intrinsics": {intr_text},\n  "frames": [\n{body}\n  ]\n}}\n',
                    encoding="utf-8")


def _write_trajectory(path: Path, record: EpisodeRecord) -> None:
    hum = np.asarray(record.human_collision, dtype=bool)
    obj = np.asarray(record.robot_obj_colls, dtype=np.int64)
    scene = np.asarray(record.robot_scene_colls, dtype=np.int64)
    summary = {
        "did_collide_human": bool(hum.any()),
        "human_collision_steps": np.flatnonzero(hum).tolist(),
        "total_robot_obj_colls": int((obj > 0).sum()),
        "robot_obj_coll_steps": np.flatnonzero(obj > 0).tolist(),
        "total_robot_scene_colls": int((scene > 0).sum()),
        "robot_scene_coll_steps": np.flatnonzero(scene > 0).tolist()}
    flags = np.where(hum, "true", "false").tolist()
    steps = [_STEP % (*r, *h, f, o, s) for r, h, f, o, s in zip(
        np.asarray(record.robot_pos).tolist(), np.asarray(record.human_pos).tolist(), flags,
        obj.tolist(), scene.tolist(), strict=True)]
    # One step per line, so a JSON error's line number points at the step.
    path.write_text('{\n  "collision_summary": ' + json.dumps(summary) + ',\n  "trajectory": [\n'
                    + ",\n".join(steps) + "\n  ]\n}\n", encoding="utf-8")


def _write_frames(ep: Path, record: EpisodeRecord, frames: FrameSource) -> None:
    from PIL import Image

    for v in VIEWS:
        (ep / "rgb_full" / v).mkdir(parents=True, exist_ok=True)
        (ep / "depth" / v).mkdir(parents=True, exist_ok=True)
        for t in range(record.n_steps):
            rgb, depth_m = frames(v, t)
            Image.fromarray(np.asarray(rgb, dtype=np.uint8)).save(
                frame_path(ep, v, "rgb", t), quality=record.jpeg_quality)
            px = np.clip(np.rint(np.asarray(depth_m) / record.max_depth_m * 255), 0, 255)
            Image.fromarray(px.astype(np.uint8)).save(frame_path(ep, v, "depth", t))
