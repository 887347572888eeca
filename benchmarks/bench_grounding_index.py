"""Lazy TouchSafeBench indexing vs a naive JSON reader, on a paper-size synthetic dataset.

Generates the App. F.1 size (3 appearances x 2 tasks x 49 scenes x 10 episodes = 2,940
episodes, ~1.9 M steps) in the App. E layout, JSON only (no images), in a temp dir, then times:

* ``index_dataset`` (robosafe.grounding) with 1 and ``--workers`` processes: reads
  episode_meta / rgb_meta / depth_meta / trajectory.json, camera_params.json up to
  ``num_frames``, validates every episode and builds numpy arrays per episode;
* reloading the saved Parquet cache, and ``index_dataset(cache=...)`` on an unchanged dataset;
* the named baseline ``naive_index``: for each episode, ``json.load()`` every JSON file
  (camera_params.json included) and build Python lists per step (positions, planar distance,
  flags), one process, the straightforward way to read App. E; and ``naive_index`` restricted to
  the files the lazy index parses (no camera_params.json), so the ratio is not only "skips the
  biggest file".

Both readers must agree on every distance and collision step before a ratio is printed. All files
are read once before timing so every run sees the same warm page cache.

Run:  python benchmarks/bench_grounding_index.py [--workers 2] [--scenes 49] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from robosafe.grounding import DatasetIndex, SyntheticConfig, generate_dataset, index_dataset
from robosafe.grounding.dataset import find_episodes
from robosafe.grounding.sampler import sample_clips

FILES = ("episode_meta.json", "rgb_meta.json", "depth_meta.json", "camera_params.json",
         "trajectory.json")


def naive_index(root: Path, *, camera_params: bool = True) -> dict[str, dict[str, Any]]:
    """Baseline: json.load every file of every episode, Python lists per step."""
    out = {}
    for rel in find_episodes(root):
        ep = root / rel
        docs = {}
        for name in FILES:
            if name == "camera_params.json" and not camera_params:
                continue
            with open(ep / name, encoding="utf-8") as f:
                docs[name] = json.load(f)
        robot, human, dist, hum, obj, scene = [], [], [], [], [], []
        for step in docs["trajectory.json"]["trajectory"]:
            pos = {a["id"]: a["position"] for a in step["agents"]}
            r, h = pos["agent_0"], pos["agent_1"]
            robot.append(r)
            human.append(h)
            dist.append(math.hypot(r[0] - h[0], r[2] - h[2]))
            c = step["collisions"]
            hum.append(c["did_collide_human"])
            obj.append(c["robot_obj_colls"])
            scene.append(c["robot_scene_colls"])
        n = len(robot)
        counts = [*docs["rgb_meta.json"]["sensors"].values(),
                  *docs["depth_meta.json"]["sensors"].values()]
        if camera_params:
            counts += [docs["camera_params.json"]["num_frames"],
                       len(docs["camera_params.json"]["frames"])]
        if any(c != n for c in counts):
            raise ValueError(f"{rel}: frame counts disagree")
        out[rel] = {"meta": docs["episode_meta.json"], "robot": robot, "human": human,
                    "distance": dist, "human_steps": [t for t, x in enumerate(hum) if x],
                    "scene_steps": [t for t, x in enumerate(scene) if x > 0],
                    "object_steps": [t for t, x in enumerate(obj) if x > 0]}
    return out


def agree(index: DatasetIndex, naive: dict[str, dict[str, Any]]) -> None:
    assert [e.episode_dir for e in index] == list(naive)
    for e in index:
        b = naive[e.episode_dir]
        # math.hypot and np.hypot may differ in the last ulp
        assert np.allclose(e.robot_human_distance, b["distance"], rtol=0, atol=1e-12), e.episode_dir
        assert e.human_collision_steps.tolist() == b["human_steps"], e.episode_dir
        assert e.scene_collision_steps.tolist() == b["scene_steps"], e.episode_dir
        assert e.object_collision_steps.tolist() == b["object_steps"], e.episode_dir


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


def warm(root: Path) -> int:
    """Read every file once so all timed runs see the same (warm) page cache."""
    total = 0
    for dirpath, _, names in os.walk(root):
        for name in names:
            with open(os.path.join(dirpath, name), "rb") as f:
                while chunk := f.read(1 << 24):
                    total += len(chunk)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--scenes", type=int, default=49, help="scenes per task (paper: 49)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", type=Path, help="generate into (and keep) this directory")
    args = ap.parse_args()

    config = replace(SyntheticConfig.paper(), n_scenes=args.scenes)
    tmp = Path(tempfile.mkdtemp(prefix="touchsafe-bench-"))
    root = args.keep or tmp / "habitat_video_dataset"
    try:
        t_gen, summary = timed(generate_dataset, root, config, seed=args.seed,
                               workers=args.workers)
        size = warm(root)
        print(f"dataset: {summary.n_episodes} episodes, {summary.total_steps:,} steps "
              f"({summary.total_steps / summary.n_episodes:.0f} mean), "
              f"{summary.human_collision_episodes} with human collision, "
              f"{summary.scene_collision_episodes} with scene collision; "
              f"{size / 1e9:.2f} GB JSON; generated in {t_gen:.1f} s ({args.workers} workers), "
              f"{os.cpu_count()} CPUs")

        t1, idx = timed(index_dataset, root, workers=1)
        tw, idx_w = timed(index_dataset, root, workers=args.workers)
        assert not idx.errors and idx.episodes == idx_w.episodes
        cache = tmp / "index.parquet"
        t_save, _ = timed(idx.save, cache)
        t_load, loaded = timed(DatasetIndex.load, cache)
        assert loaded.episodes == idx.episodes
        index_dataset(root, cache=tmp / "reuse.parquet")
        t_reuse, _ = timed(index_dataset, root, cache=tmp / "reuse.parquet")

        t_naive_traj, naive = timed(naive_index, root, camera_params=False)
        agree(idx, naive)
        del naive
        t_naive, naive = timed(naive_index, root)
        agree(idx, naive)
        del naive

        t_s1, c1 = timed(sample_clips, idx.episodes, 1)
        t_s2, c2 = timed(sample_clips, idx.episodes, 2)

        rows = [
            ("index_dataset, 1 process", t1),
            (f"index_dataset, {args.workers} processes", tw),
            ("  save Parquet cache", t_save),
            ("  load Parquet cache", t_load),
            ("  index_dataset(cache=...) unchanged", t_reuse),
            ("baseline naive_index (all JSON files)", t_naive),
            ("baseline naive_index (no camera_params)", t_naive_traj),
            (f"sample_clips task 1 ({len(c1)} clips)", t_s1),
            (f"sample_clips task 2 ({len(c2)} clips)", t_s2),
        ]
        for name, t in rows:
            print(f"{name:44s} {t:7.2f} s")
        print(f"ratio baseline / index_dataset ({args.workers} processes): {t_naive / tw:.1f}x "
              f"(same files: {t_naive_traj / tw:.1f}x)")
        print(f"ratio baseline / index_dataset (1 process):  {t_naive / t1:.1f}x "
              f"(same files: {t_naive_traj / t1:.1f}x)")
        print(f"throughput: {summary.total_steps / tw / 1e6:.2f} M steps/s "
              f"({args.workers} processes)")
        print(f"index + both tasks' clip sampling: {tw + t_s1 + t_s2:.1f} s (target < 30 s)")
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
