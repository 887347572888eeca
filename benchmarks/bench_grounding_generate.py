"""`robosafe grounding generate` throughput: frames per second and a 60-episode projection.

One step writes 4 views x (RGB JPEG + depth PNG) = 8 frames and renders 13 images (RGB, depth
and segmentation per view, plus the overhead camera for topdown.mp4). Measured, in one run:

* physics only: :func:`robosafe.grounding.simgen.simulate` (poses, ``mj_forward``, contact
  labels, camera poses), no rendering or writing;
* baseline: the full generator with MuJoCo's default render flags (shadows and reflections on);
* robosafe: the full generator as shipped (shadows and reflections off, the Spot mesh model),
  at the default 128 px and at 64 px, and with the primitive robot at 128 px.

The projection multiplies the measured seconds per step by 60 episodes x the mean episode
length of the measured episodes (the length depends on when the seeded human collision
happens). The GL backend is whatever :func:`robosafe.sim.render.ensure_gl_backend` picks (EGL
first: a GPU's when there is one, Mesa's software renderer otherwise).

Run:  python benchmarks/bench_grounding_generate.py [--episodes 2] [--max-steps 150]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import replace

import numpy as np

from robosafe.grounding.simgen import GenerateConfig, episode_plan, generate, simulate


def physics_only(config: GenerateConfig) -> tuple[float, int]:
    t0, steps = time.perf_counter(), 0
    for i, (ht, task, sid, eid) in enumerate(episode_plan(config)):
        rec, _ = simulate(np.random.default_rng([config.seed, i]), human_type=ht,
                          sim_task=task, scene_id=sid, episode_id=eid, config=config)
        steps += rec.n_steps
    return time.perf_counter() - t0, steps


def full(config: GenerateConfig) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        summary = generate(tmp, config)
        return time.perf_counter() - t0, summary.steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    base = GenerateConfig(episodes=args.episodes, max_steps=args.max_steps, seed=args.seed)
    print(f"{args.episodes} episodes, <= {args.max_steps} steps each, seed {args.seed}, "
          f"MUJOCO_GL={os.environ.get('MUJOCO_GL', '(auto)')}, {os.cpu_count()} CPUs")
    secs, steps = physics_only(base)
    print(f"{'physics only (no rendering)':44s} {steps / secs:8.1f} steps/s")
    default_len = GenerateConfig().max_steps
    rows = [("baseline: shadows+reflections on, 128 px", replace(base, shadows=True)),
            ("robosafe: shadows+reflections off, 128 px", base),
            ("robosafe: shadows+reflections off, 64 px", replace(base, image_size=64)),
            ("primitive robot: shadows+reflections off, 128 px", replace(base,
                                                                     robot="primitive"))]
    rate = {}
    for name, config in rows:
        secs, steps = full(config)
        rate[name] = steps / secs
        print(f"{name:50s} {steps / secs:8.2f} steps/s {8 * steps / secs:8.1f} frames/s "
              f"({steps} steps in {secs:.1f} s)")
    mean_len = steps / args.episodes
    for name, r in rate.items():
        print(f"projected 60 episodes x {mean_len:.0f} steps ({name}): "
              f"{60 * mean_len / r / 60:.1f} min; at the {default_len}-step cap: "
              f"<= {60 * default_len / r / 3600:.2f} h")
    b, o = rate[rows[0][0]], rate[rows[1][0]]
    print(f"speed-up of the shipped render flags over the baseline at 128 px: {o / b:.2f}x")


if __name__ == "__main__":
    main()
