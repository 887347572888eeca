"""`robosafe grounding generate` throughput: frames per second and a 60-episode projection.

One step writes 4 views x (RGB JPEG + depth PNG) = 8 frames and renders 9 images (RGB and a
depth pass per view, whose colour buffer is read as the segmentation for visibility.json, plus
the overhead camera for topdown.mp4). Measured, in one run:

* physics only: :func:`robosafe.grounding.simgen.simulate` (poses, ``mj_forward``, contact
  labels, camera poses), no rendering or writing;
* baseline: the full generator with MuJoCo's default render flags (shadows and reflections on);
* robosafe: the full generator as shipped (shadows and reflections off, the Spot mesh model),
  at the default 128 px and at 64 px, and with the primitive robot at 128 px.

``--passes`` measures only that saving: the shipped generator against one that renders the
segmentation in a pass of its own (13 images per step, as before), alternated ``--repeats``
times; both write the same files.

The projection multiplies the measured seconds per step by 60 episodes x the mean episode
length of the measured episodes (the length depends on when the seeded human collision
happens). The GL backend is whatever :func:`robosafe.sim.render.ensure_gl_backend` picks (EGL
first: a GPU's when there is one, Mesa's software renderer otherwise).

Run:  python benchmarks/bench_grounding_generate.py [--episodes 2] [--max-steps 150]
      [--size 128] [--passes [--repeats 2]]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import replace

import numpy as np

from robosafe.grounding import simgen
from robosafe.grounding.simgen import GenerateConfig, episode_plan, generate, simulate


class SegmentationPass(simgen.Renders):
    """The generator's renders before the depth pass doubled as the segmentation: a third
    render per view and step, the segmentation, read through mujoco.Renderer."""

    def _drawn_geoms(self) -> np.ndarray:
        r = self.renderer
        r.enable_segmentation_rendering()
        seg = r.render()
        r.disable_segmentation_rendering()
        return seg[..., 0][seg[..., 1] == int(self.ep.mujoco.mjtObj.mjOBJ_GEOM)]


def physics_only(config: GenerateConfig) -> tuple[float, int]:
    t0, steps = time.perf_counter(), 0
    for i, (ht, task, sid, eid) in enumerate(episode_plan(config)):
        rec, _ = simulate(np.random.default_rng([config.seed, i]), human_type=ht,
                          sim_task=task, scene_id=sid, episode_id=eid, config=config)
        steps += rec.n_steps
    return time.perf_counter() - t0, steps


def full(config: GenerateConfig, renders: type[simgen.Renders] = simgen.Renders
         ) -> tuple[float, int]:
    shipped = simgen.Renders
    simgen.Renders = renders
    try:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            summary = generate(tmp, config)
            return time.perf_counter() - t0, summary.steps
    finally:
        simgen.Renders = shipped


def passes(config: GenerateConfig, repeats: int) -> None:
    """Shipped renders against a separate segmentation pass, alternated."""
    secs: dict[str, list[float]] = {"separate segmentation pass": [], "shipped": []}
    for _ in range(repeats):
        for name, renders in (("separate segmentation pass", SegmentationPass),
                              ("shipped", simgen.Renders)):
            s, steps = full(config, renders)
            secs[name].append(s)
            print(f"{name:30s} {steps / s:8.2f} steps/s ({steps} steps in {s:.1f} s)",
                  flush=True)
    before, now = (sum(v) for v in secs.values())
    print(f"shipped / separate segmentation pass, total time: {now / before:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--passes", action="store_true",
                    help="Only the shipped renders against a separate segmentation pass.")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    base = GenerateConfig(episodes=args.episodes, max_steps=args.max_steps, seed=args.seed,
                          image_size=args.size)
    print(f"{args.episodes} episodes, <= {args.max_steps} steps each, seed {args.seed}, "
          f"{args.size} px, MUJOCO_GL={os.environ.get('MUJOCO_GL', '(auto)')}, "
          f"{os.cpu_count()} CPUs")
    if args.passes:
        passes(base, args.repeats)
        return
    secs, steps = physics_only(base)
    print(f"{'physics only (no rendering)':44s} {steps / secs:8.1f} steps/s")
    default_len = GenerateConfig().max_steps
    px = f"{args.size} px"
    rows = [(f"baseline: shadows+reflections on, {px}", replace(base, shadows=True)),
            (f"robosafe: shadows+reflections off, {px}", base),
            ("robosafe: shadows+reflections off, 64 px", replace(base, image_size=64)),
            (f"primitive robot: shadows+reflections off, {px}", replace(base,
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
    print(f"speed-up of the shipped render flags over the baseline at {px}: {o / b:.2f}x")


if __name__ == "__main__":
    main()
