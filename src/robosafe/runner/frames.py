"""Per-episode robot state and camera frames of a run, for LeRobot export (``record_frames``).

``RUN_DIR/frames/<cell>/state.npy`` holds one row per trace row: the LIBERO LeRobot layout of
``observation.state`` (eef position, eef axis-angle, the two gripper finger positions), so
datasets robosafe writes line up with the LIBERO conversions VLAs train on.
``RUN_DIR/frames/<cell>/<camera>.mp4`` holds the rendered camera images, one per trace row
(present when the run renders images). The directory is written under a temporary name and
renamed when the episode is done, so a killed run leaves whole episodes or nothing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from robosafe.policies.remote import STATE_NAMES, state_row  # noqa: F401 - export reads them


class FrameRecorder:
    """Collects one episode's state rows and encodes its camera images as they come."""

    def __init__(self, final_dir: Path, cameras: tuple[str, ...], fps: int):
        self.final = Path(final_dir)
        self.tmp = self.final.with_name(f".{self.final.name}.partial")
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp.mkdir(parents=True)
        self.cameras, self.fps = cameras, fps
        self.states: list[np.ndarray] = []
        self.videos: dict = {}

    def __call__(self, obs: dict) -> None:
        self.states.append(state_row(obs))
        for cam in self.cameras:
            img = obs.get(f"{cam}_image")
            if img is None:
                continue
            if cam not in self.videos:
                from robosafe.formats.video import VideoWriter

                h, w = img.shape[:2]
                self.videos[cam] = VideoWriter(self.tmp / f"{cam}.mp4", self.fps, h, w)
            self.videos[cam].add(img)

    def finish(self) -> None:
        for v in self.videos.values():
            v.close()
        np.save(self.tmp / "state.npy", np.asarray(self.states), allow_pickle=False)
        shutil.rmtree(self.final, ignore_errors=True)
        os.replace(self.tmp, self.final)
