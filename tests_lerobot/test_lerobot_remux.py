"""lerobot 0.6.1 loads a dataset whose camera streams `export_run` copied from the run (no
re-encode), and hands out the run's own frames.

The simulator does not install beside lerobot (Python 3.12), so the run directory is written
here with robosafe's own run-directory, trace and video writers (what `robosafe run
--record-frames --images` calls), from the hand-made episodes of conftest; tests/
test_lerobot_remux.py does the same checks on a simulated run.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import FPS, episode
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from robosafe.formats.video import VideoWriter, read_frames
from robosafe.runner.export import export_run
from robosafe.runner.rundir import Cell, create_run
from robosafe.trace.io import write_episodes

CAM = "agentview"
H, W = 48, 64


def picture(k: int, t: int) -> np.ndarray:
    """A frame with detail h264 has to code: a gradient and a square moving with t."""
    y, x = np.mgrid[0:H, 0:W]
    img = np.stack([(x * 4 + t * 7) % 256, (y * 5 + 40 * k) % 256, (x + y + t) % 256], -1)
    img[10:20, 2 * t % (W - 10):2 * t % (W - 10) + 10] = [250, 250, 20]
    return img.astype(np.uint8)


@pytest.fixture
def run_dir(tmp_path):
    bddl = tmp_path / "reach.bddl"
    bddl.write_text("(define (problem reach))\n")
    run = create_run(tmp_path / "run", {"policy": "scripted-careful", "suite": "hand",
                                        "host": "robosafe", "horizon": 29},
                     {"put_the_bowl_on_the_plate": bddl})
    for k in range(2):
        ep = episode(k, careless=k == 1)
        cell = Cell("put_the_bowl_on_the_plate", k, k)
        write_episodes(run.trace_path(cell), [ep])
        np.save(run.actions_path(cell), np.zeros((ep.n_steps - 1, 7)), allow_pickle=False)
        frames = run.path / "frames" / cell.name
        frames.mkdir(parents=True)
        np.save(frames / "state.npy", np.zeros((ep.n_steps, 8)), allow_pickle=False)
        video = VideoWriter(frames / f"{CAM}.mp4", FPS, H, W)
        for t in range(ep.n_steps):
            video.add(picture(k, t))
        video.close()
        run.write_outcome(cell, {"task_id": cell.task_id, "episode_idx": k, "seed": k,
                                 "success": 1, "safe": int(k == 0), "sbu": 0, "vsi": 0.0,
                                 "violated_specs": "", "cumulative_cost": 0.0,
                                 "instruction": "put the bowl on the plate",
                                 "language_level": 0, "visual_level": 0, "error_type": ""})
    return run.path


def test_lerobot_loads_the_copied_videos_and_returns_the_runs_frames(run_dir, tmp_path):
    res = export_run(run_dir, tmp_path / "ds")
    assert res.videos == {f"observation.images.{CAM}": "copied from the run's videos "
                                                       "(no re-encode)"}
    ds = LeRobotDataset("robosafe/remux", root=tmp_path / "ds", video_backend="pyav")
    assert (ds.num_episodes, ds.num_frames, ds.fps) == (2, 60, FPS)
    eps = ds.meta.episodes
    assert [(e[f"videos/observation.images.{CAM}/from_timestamp"],
             e[f"videos/observation.images.{CAM}/to_timestamp"]) for e in eps] == [(0.0, 3.0),
                                                                                 (3.0, 6.0)]
    for k in range(2):
        cell = run_dir / "frames" / f"put_the_bowl_on_the_plate__ep{k:03d}__W0V0"
        own = np.stack(list(read_frames(cell / f"{CAM}.mp4")))  # robosafe's decode of the run
        assert own.shape == (30, H, W, 3)
        # the run's h264 is lossy: lerobot hands out those decoded frames, not the pictures
        assert not np.array_equal(own[5], picture(k, 5))
        for t in (0, 1, 2, 15, 28, 29):  # key frames, the frames between, both ends
            item = ds[30 * k + t]
            assert int(item["episode_index"]) == k and int(item["frame_index"]) == t
            img = item[f"observation.images.{CAM}"]  # float32 (C, H, W) in [0, 1]
            got = torch.round(img * 255).to(torch.uint8).permute(1, 2, 0).numpy()
            np.testing.assert_array_equal(got, own[t], err_msg=f"episode {k} frame {t}")
