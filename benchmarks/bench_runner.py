"""Runner throughput on the demo suite.

1. Episodes per minute with 1 and 2 local workers (scripted-careful on every demo task), and
   the scaling ratio 2 workers / 1 worker (baseline: the 1-worker run in the same invocation).
2. Where an episode's time goes, measured in one process with camera rendering on (what a
   learned policy needs): physics (robosuite's step without the recorder), recording (the
   recorder's per-row read), rendering + image perturbation, policy, and the rest (predicates,
   costs, observation assembly).

    python benchmarks/bench_runner.py [--episodes 2] [--image-size 128]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

from robosafe.hosts import recorder as rec_mod
from robosafe.hosts.robosafe import RobosafeEnv
from robosafe.policies.base import make_policy
from robosafe.runner.request import RunRequest, plan_run
from robosafe.runner.run import execute, prepare
from robosafe.sim import env as env_mod
from robosafe.tasks.suites import suite_tasks


def throughput(tasks: dict[str, str], episodes: int, workers: int) -> float:
    cfg = plan_run(RunRequest(policy="scripted-careful", tasks=tasks, episodes=episodes, suite="demo"))
    with tempfile.TemporaryDirectory() as tmp:
        run, cells = prepare(cfg, Path(tmp) / "run")
        t0 = time.perf_counter()
        execute(run, cells, workers=workers)
        dt = time.perf_counter() - t0
    return len(cells) / dt * 60.0


def shares(tasks: dict[str, str], episodes: int, size: int) -> dict[str, float]:
    clock: dict[str, float] = defaultdict(float)

    def timed(owner, attr, key):
        fn = getattr(owner, attr)

        def wrapper(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                clock[key] += time.perf_counter() - t0

        setattr(owner, attr, wrapper)

    timed(rec_mod.Recorder, "_record", "recording")
    timed(env_mod, "render_camera", "rendering")
    timed(env_mod, "apply_image", "rendering")
    total = 0.0
    policy = make_policy("scripted-careful")
    for path in tasks.values():
        env = RobosafeEnv(path, image_size=(size, size))
        timed(env.world.task_world, "step", "physics+recording")
        for seed in range(episodes):
            t0 = time.perf_counter()  # reset included: it settles physics and renders too
            obs, _ = env.reset(seed=seed)
            policy.reset(env.task_info().to_dict())
            for _ in range(env.horizon):
                t1 = time.perf_counter()
                action = policy.act(obs)
                clock["policy"] += time.perf_counter() - t1
                obs, _, terminated, truncated, _ = env.step(action)
                if terminated or truncated:
                    break
            total += time.perf_counter() - t0
        env.close()
    clock["physics"] = clock.pop("physics+recording") - clock["recording"]
    clock["other"] = total - sum(clock.values())
    return {k: v / total for k, v in clock.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=2, help="episodes per task")
    ap.add_argument("--image-size", type=int, default=128)
    args = ap.parse_args()
    tasks = {k: str(v) for k, v in suite_tasks("demo").items()}
    n = len(tasks) * args.episodes
    one = throughput(tasks, args.episodes, 1)
    two = throughput(tasks, args.episodes, 2)
    print(f"demo suite: {len(tasks)} tasks x {args.episodes} episodes = {n} episodes, "
          "scripted-careful, no cameras")
    print(f"1 worker : {one:6.1f} episodes/min")
    print(f"2 workers: {two:6.1f} episodes/min  (scaling {two / one:.2f}x vs 1 worker)")
    s = shares(tasks, 1, args.image_size)
    print(f"time shares, 1 process, cameras agentview + eye-in-hand at {args.image_size} px:")
    for k in ("physics", "rendering", "policy", "recording", "other"):
        print(f"  {k:10s} {100 * s.get(k, 0.0):5.1f}%")


if __name__ == "__main__":
    main()
