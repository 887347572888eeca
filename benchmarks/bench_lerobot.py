"""LeRobot dataset throughput: ``robosafe collect`` and ``robosafe export lerobot``.

1. Collection: demonstrations per minute (scripted-careful, cameras rendered at 128 px and
   recorded to mp4, then exported), with 1 and 2 local workers; the ratio 2 / 1 uses the
   1-worker collection of the same invocation as its baseline. The same 1-worker run with
   images but without frame recording or export (a plain ``robosafe run --images``) is the
   baseline for what collecting a dataset adds.
2. Export: seconds per 1,000 frames of `export_run` on the 1-worker run (copying the
   cameras' streams into one file each), against the same export without cameras (the parquet and
   metadata part alone) as the baseline.

    python benchmarks/bench_lerobot.py [--episodes 2] [--horizon 120] [--task turn_off_stove]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

from robosafe.runner.export import export_run
from robosafe.runner.request import RunRequest, plan_run
from robosafe.runner.run import execute, prepare
from robosafe.tasks.suites import suite_tasks


def collect(tasks: dict[str, str], episodes: int, horizon: int, workers: int, where: Path,
            images: bool = True, record: bool = True) -> tuple[float, Path, int]:
    """Run (+ export when recording); (episodes per minute, run directory, frames)."""
    cfg = plan_run(RunRequest(policy="scripted-careful", tasks=tasks, episodes=episodes, suite="demo",
                    images=images, record_frames=record, horizon=horizon))
    run_dir = where / f"run{workers}{'i' if images else ''}{'r' if record else ''}"
    t0 = time.perf_counter()
    run, cells = prepare(cfg, run_dir)
    execute(run, cells, workers=workers)
    frames = export_run(run_dir, where / f"ds-{run_dir.name}").frames if record else 0
    dt = time.perf_counter() - t0
    return len(cells) / dt * 60.0, run_dir, frames


def export_seconds_per_1000(run_dir: Path, out: Path, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        shutil.rmtree(out, ignore_errors=True)
        t0 = time.perf_counter()
        res = export_run(run_dir, out)
        best = min(best, (time.perf_counter() - t0) / res.frames * 1000.0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=2, help="episodes per task")
    ap.add_argument("--horizon", type=int, default=120, help="steps per episode")
    ap.add_argument("--task", action="append", default=None,
                    help="demo task(s) (default: turn_off_stove, place_lemon_in_bowl)")
    ap.add_argument("--repeat", type=int, default=2, help="export repetitions (best kept)")
    args = ap.parse_args()
    names = args.task or ["turn_off_stove", "place_lemon_in_bowl"]
    tasks = {k: str(v) for k, v in suite_tasks("demo").items() if k in names}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        one, run1, frames = collect(tasks, args.episodes, args.horizon, 1, tmp)
        two, _, _ = collect(tasks, args.episodes, args.horizon, 2, tmp)
        plain_run, _, _ = collect(tasks, args.episodes, args.horizon, 1, tmp, record=False)
        _, run_plain, _ = collect(tasks, args.episodes, args.horizon, 1, tmp, images=False)
        with_video = export_seconds_per_1000(run1, tmp / "exp_v", args.repeat)
        plain = export_seconds_per_1000(run_plain, tmp / "exp_p", args.repeat)
    n = len(tasks) * args.episodes
    print(f"collection ({n} episodes of {args.horizon} steps, 2 cameras at 128 px, "
          f"{frames} frames):")
    print(f"  1 worker : {one:6.1f} episodes/min")
    print(f"  2 workers: {two:6.1f} episodes/min  (x{two / one:.2f} vs 1 worker)")
    print(f"  baseline `run --images` without recording or export, 1 worker: "
          f"{plain_run:6.1f} episodes/min (collecting costs x{plain_run / one:.2f})")
    print(f"export (best of {args.repeat}):")
    print(f"  with 2 cameras  : {with_video:6.2f} s per 1,000 frames")
    print(f"  without cameras : {plain:6.2f} s per 1,000 frames (baseline; cameras cost "
          f"x{with_video / plain:.1f})")
    print(f"cpu cores: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} "
          "(other processes on the machine skew the worker ratio)")


if __name__ == "__main__":
    main()
