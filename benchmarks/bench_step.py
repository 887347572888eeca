"""Simulator step cost: robosafe's control step against the raw physics it runs.

Baselines (named, measured in the same run, interleaved step by step so load changes on a
shared machine hit every side alike; ratios of medians are reported, not absolute times):

- ``raw``: the same compiled model's physics alone, ``mj_step`` x 25 (the substeps of one 20 Hz
  control step at 2 ms) from a copy of the compiled-controller env's state after each step;
- ``robosuite``: :class:`robosafe.sim.env.TaskEnv` with robosuite's own Python OSC controller;
- ``compiled``: the same env with :mod:`robosafe.sim.controller` (target: <= 1.5x raw);
- per-step parts of ``compiled``, timed inside the same steps (medians of per-step times): the
  physics step (controller, substeps, robosuite's observables and bookkeeping), the recorder
  row, the observation (privileged state, and robosuite's observables as the physics step
  sampled them) and the rest of the step: predicates, costs, info (target: recorder row +
  predicates and costs below 10% of the step);
- ``rendered``: ``compiled`` plus two cameras (agentview, eye-in-hand) at 128 px with the
  flags robosafe renders with (visual geom groups, MUJOCO_GL=egl), against ``compiled``.

Then episodes per minute over the demo suite (scripted-careful, no images) with 1 and 2 local
workers (target: 2 workers >= 1.8x one): each a fresh ``robosafe run`` process, as a user
starts it (imports, worker start-up and scene builds included), 1 and 2 workers alternated
``--repeats`` times; also the summed episode time (cells' ``wall_s``, scene builds included)
over the wall time, i.e. how busy the workers were, and the CPU time the run got over its wall
time (the cores it had on average: on a shared machine, what limits the second worker).

Run:  MUJOCO_GL=egl python benchmarks/bench_step.py [--task demo/open_top_drawer]
      [--steps 300] [--episodes 4] [--repeats 2] [--skip-render] [--skip-workers]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco

from robosafe.hosts.robosafe import RobosafeEnv
from robosafe.policies.base import make_policy

SUITES = Path(__file__).resolve().parents[1] / "src/robosafe/tasks/suites"
SUBSTEPS = 25


class Side:
    """One env with its own scripted policy; a finished episode restarts at the next seed."""

    def __init__(self, task: Path, **kw):
        self.env = RobosafeEnv(task, **kw)
        self.policy = make_policy("scripted-careful", host="robosafe")
        self.times: list[float] = []
        self.obs, _ = self.env.reset(seed=0)
        self.policy.reset(self.env.task_info().to_dict())

    def step(self) -> None:
        action = self.policy.act(self.obs)
        t0 = time.perf_counter()
        self.obs, _, terminated, truncated, _ = self.env.step(action)
        self.times.append(time.perf_counter() - t0)
        if terminated or truncated:
            self.obs, _ = self.env.reset(seed=self.env.seed + 1)
            self.policy.reset(self.env.task_info().to_dict())


def timed(parts: dict, obj, name: str, key: str) -> None:
    """Wrap ``obj.name`` to add its time to the current step's ``parts[key]``."""
    fn = getattr(obj, name)

    def wrapper(*a, **k):
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            parts[key] += time.perf_counter() - t0

    setattr(obj, name, wrapper)


def bench_step(task: Path, steps: int, render: bool) -> None:
    sides = {"robosuite": Side(task, render=False, controller="robosuite"),
             "compiled": Side(task, render=False, controller="compiled")}
    if render:
        sides["rendered"] = Side(task, render=True, image_size=(128, 128),
                                 controller="compiled")
    host = sides["compiled"].env
    comp = host.world
    parts: dict[str, float] = defaultdict(float)  # the current step's
    timed(parts, host.recorder, "step", "physics + row")
    timed(parts, host.recorder, "_record", "recorder row")
    timed(parts, comp, "_observe", "observation")
    per_step: dict[str, list[float]] = defaultdict(list)
    m = comp.task_world.model_ptr()
    scratch = mujoco.MjData(m)
    raw: list[float] = []
    order = list(sides)
    for i in range(steps):
        for name in (order if i % 2 else order[::-1]):
            parts.clear()
            sides[name].step()
            if name == "compiled":
                step = sides[name].times[-1]
                physics = parts["physics + row"] - parts["recorder row"]
                per_step["physics step"].append(physics)
                per_step["recorder row"].append(parts["recorder row"])
                per_step["observation"].append(parts["observation"])
                rest = step - parts["physics + row"] - parts["observation"]
                per_step["predicates, costs, info"].append(rest)
                per_step["row + predicates + costs"].append(rest + parts["recorder row"])
        mujoco.mj_copyData(scratch, m, comp.task_world.data_ptr())
        t0 = time.perf_counter()
        for _ in range(SUBSTEPS):
            mujoco.mj_step(m, scratch)
        raw.append(time.perf_counter() - t0)
    base = statistics.median(raw)
    print(f"task {task.relative_to(SUITES)}: {steps} interleaved steps, medians")
    print(f"  {'raw mj_step x25':34s} {1e3 * base:7.3f} ms   1.00x raw")
    for name, side in sides.items():
        med = statistics.median(side.times)
        print(f"  {name + ' TaskEnv.step':34s} {1e3 * med:7.3f} ms  {med / base:5.2f}x raw")
    step = statistics.median(sides["compiled"].times)
    for key, ts in per_step.items():
        per = statistics.median(ts)
        print(f"    compiled: {key:26s} {1e3 * per:7.3f} ms  {100 * per / step:5.1f}% of a step"
              f"  {per / base:5.2f}x raw")
    fb = comp.task_world._compiled.fallbacks
    print(f"    compiled: substeps handed to robosuite's controller (near-singular) {fb}")
    if render:
        r = statistics.median(sides["rendered"].times)
        print(f"  rendered (2 cameras, 128 px) / unrendered: {r / step:.2f}x")
    for side in sides.values():
        side.env.close()


def _children_cpu() -> float:
    """CPU seconds of finished child processes (with the workers they waited for)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bench_workers(episodes: int, repeats: int) -> None:
    rates: dict[int, list[float]] = {1: [], 2: []}
    for _ in range(repeats):
        for workers in (1, 2):
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "run"
                cmd = [sys.executable, "-m", "robosafe", "run", "--suite", "demo", "-p",
                       "scripted-careful", "-n", str(episodes), "-j", str(workers),
                       "-o", str(out)]
                t0 = time.perf_counter()
                cpu0 = _children_cpu()
                done = subprocess.run(cmd, check=False, capture_output=True, text=True)
                if done.returncode:
                    raise SystemExit(f"robosafe run failed:\n{done.stderr}")
                wall = time.perf_counter() - t0
                cores = (_children_cpu() - cpu0) / wall
                rows = [json.loads(p.read_text()) for p in (out / "outcomes").glob("*.json")]
            bad = sum(1 for r in rows if r.get("error_type"))
            busy = sum(r["wall_s"] for r in rows) / (wall * workers)
            rates[workers].append(len(rows) / wall * 60)
            print(f"  {workers} worker(s): {len(rows)} episodes in {wall:.1f} s = "
                  f"{rates[workers][-1]:.1f} episodes/min, workers busy {100 * busy:.0f}% of "
                  f"the wall time, CPU used {cores:.2f} cores on average"
                  + (f" ({bad} crashed)" if bad else ""))
    ratios = [b / a for a, b in zip(rates[1], rates[2], strict=True)]
    print(f"  2 workers / 1 worker: {min(ratios):.2f}-{max(ratios):.2f}x "
          f"(each pair run back to back)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", default="demo/open_top_drawer")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--episodes", type=int, default=4, help="episodes per demo task")
    ap.add_argument("--repeats", type=int, default=2, help="1- and 2-worker runs, alternated")
    ap.add_argument("--skip-render", action="store_true")
    ap.add_argument("--skip-workers", action="store_true")
    args = ap.parse_args()
    bench_step(SUITES / f"{args.task}.bddl", args.steps, not args.skip_render)
    if not args.skip_workers:
        print(f"demo suite, scripted-careful, {args.episodes} episode(s) per task, "
              "compiled controller")
        bench_workers(args.episodes, args.repeats)


if __name__ == "__main__":
    main()
