"""Camera rendering: robosafe's render (geoms outside the view left out of the scene) against
MuJoCo's full scene, the same frames.

Baseline (named, measured in the same run, interleaved frame by frame so load changes on a
shared machine hit both sides alike; CPU time per frame, medians): ``full``, the same
``render_camera`` call with ``cull_view=False`` (every visual geom sent to OpenGL, as
``mujoco.Renderer.update_scene`` does). ``culled`` is robosafe's default. Every pair of frames
is also compared: the images must be equal byte for byte (the benchmark fails otherwise).

For each task (default: two of the demo suite and two VLA-Arena scenes, if
``../shared/vla-arena`` is there) the env is reset and stepped with random actions; each
camera the task renders (agentview and eye-in-hand) is rendered at 128 px both ways at every
``--every``-th step. Prints per task and camera the geoms and mesh triangles left in the
scene and the CPU time ratio culled / full (target: <= 0.8 over all frames).

Run:  MUJOCO_GL=egl python benchmarks/bench_render.py [--steps 60] [--every 3] [TASK.bddl ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np

from robosafe.sim.env import VISUAL_GROUPS, TaskEnv
from robosafe.sim.render import outside_view, render_camera

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = [ROOT / "src/robosafe/tasks/suites/demo/turn_off_stove.bddl",
           ROOT / "src/robosafe/tasks/suites/demo/place_lemon_in_bowl.bddl",
           ROOT.parent / "shared/vla-arena/bddl_files/safety_static_obstacles/level_1",
           ROOT.parent / "shared/vla-arena/bddl_files/robustness_static_distractors/level_1"]
SIZE = 128


def _tasks(paths: list[Path]) -> list[Path]:
    out = []
    for p in paths:
        if p.is_dir():
            out += sorted(p.glob("*.bddl"))[:1]
        elif p.is_file():
            out.append(p)
        else:
            print(f"skipped (not found): {p}", file=sys.stderr)
    return out


def _cpu(fn) -> tuple[float, np.ndarray]:
    t0 = time.process_time()
    img = fn()
    return time.process_time() - t0, img


def bench(path: Path, steps: int, every: int) -> tuple[list[float], list[float]]:
    env = TaskEnv(path, image_size=(SIZE, SIZE))
    env.reset(seed=0)
    m, d = env.task_world.model_ptr(), env.task_world.data_ptr()
    rng = np.random.default_rng(0)
    visual = np.isin(m.geom_group, VISUAL_GROUPS)
    tris = np.where(m.geom_type == 7, m.mesh_facenum[np.maximum(m.geom_dataid, 0)], 0)
    full_t: list[float] = []
    cull_t: list[float] = []
    per_cam: dict[str, list[tuple[int, int]]] = {c: [] for c in env.cameras}
    for step in range(steps):
        env.step(rng.uniform(-1, 1, env.action_dim))
        if step % every:
            continue
        for cam in env.cameras:
            kw = {"height": SIZE, "width": SIZE, "groups": VISUAL_GROUPS}
            render_camera(m, d, cam, **kw)  # the renderer exists before either side is timed
            tf, a = _cpu(lambda: render_camera(m, d, cam, cull_view=False, **kw))  # noqa: B023
            tc, b = _cpu(lambda: render_camera(m, d, cam, **kw))  # noqa: B023
            if not np.array_equal(a, b):
                raise SystemExit(f"{path.name} {cam} step {step}: the culled image differs")
            full_t.append(tf)
            cull_t.append(tc)
            kept = visual & ~outside_view(m, d, m.camera(cam).id, 1.0)
            per_cam[cam].append((int(kept.sum()), int(tris[kept].sum())))
    env.close()
    print(f"{path.parent.parent.name}/{path.parent.name}/{path.stem}")
    print(f"  visual geoms {int(visual.sum())}, mesh triangles {int(tris[visual].sum())}")
    for cam, rows in per_cam.items():
        print(f"  {cam:20s} kept: geoms {statistics.median(r[0] for r in rows):.0f}, "
              f"triangles {statistics.median(r[1] for r in rows):.0f} (medians)")
    print(f"  CPU ms/frame: full {1e3 * statistics.median(full_t):.2f}, culled "
          f"{1e3 * statistics.median(cull_t):.2f}, ratio "
          f"{statistics.median(cull_t) / statistics.median(full_t):.2f}")
    return full_t, cull_t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="*", type=Path)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--every", type=int, default=3)
    a = ap.parse_args()
    full: list[float] = []
    cull: list[float] = []
    for path in _tasks(a.tasks or DEFAULT):
        f, c = bench(path, a.steps, a.every)
        full += f
        cull += c
    ratio = sum(cull) / sum(full)
    print(f"all {len(full)} frame pairs equal byte for byte; CPU culled / full: {ratio:.2f} "
          f"({1e3 * sum(cull) / len(cull):.2f} vs {1e3 * sum(full) / len(full):.2f} ms/frame, "
          f"target <= 0.8)")


if __name__ == "__main__":
    main()
