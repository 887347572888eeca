"""The shortcut probe end to end on a 5-task suite, time per phase, against the 20-minute budget.

Phases: collect scripted demonstrations with cameras (``robosafe collect``: run + export),
load them, train the probe, evaluate its checkpoints with the runner, run the demonstrator on
the same cells (``robosafe audit shortcut``). The named baseline, timed in the same
invocation, is one evaluation of a camera policy on the same cells: the demonstrator run with
images, which is what scoring any VLA on this suite costs; the ratio says how many such
evaluations the whole audit costs.

    python benchmarks/bench_probe.py [--suite demo] [--demos 8] [--steps 1500] [-n 4] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

from robosafe.audit.shortcut import load_demos, shortcut_audit
from robosafe.policies.probe import probe_config
from robosafe.runner.export import export_run
from robosafe.runner.request import RunRequest, plan_run
from robosafe.runner.run import execute, prepare
from robosafe.tasks.suites import suite_tasks

BUDGET_S = 20 * 60


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="demo")
    ap.add_argument("--demos", type=int, default=8, help="demonstrations per task")
    ap.add_argument("--steps", type=int, default=1500, help="training steps")
    ap.add_argument("--checkpoints", type=int, default=2)
    ap.add_argument("-n", "--episodes", type=int, default=4, help="evaluation episodes per task")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--keep", type=Path, default=None, help="keep the work directory here")
    args = ap.parse_args()
    tasks = {k: str(v) for k, v in suite_tasks(args.suite, None).items()}
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-probe-"))
    phases: dict[str, float] = {}
    runs: dict[str, float] = {}

    def run(cfg, out: Path, label: str) -> list[dict]:
        t0 = time.perf_counter()
        run_dir, cells = prepare(cfg, out, resume=(out / "run.json").is_file())
        execute(run_dir, cells, workers=args.workers)
        runs[label] = time.perf_counter() - t0
        return run_dir.outcomes()

    try:
        t0 = time.perf_counter()
        seeds = tuple(range(1000, 1000 + args.demos))
        collect = plan_run(RunRequest(policy="scripted-careful", tasks=tasks, episodes=args.demos,
                            seeds=seeds, suite=args.suite, images=True, record_frames=True))
        run(collect, work / "collect", "collect")
        export_run(work / "collect", work / "demos", overwrite=True)
        phases["collect (run + export)"] = time.perf_counter() - t0
        cfg = probe_config(steps=args.steps, checkpoints=args.checkpoints)
        t0 = time.perf_counter()
        demos = load_demos(work / "demos", cfg)
        phases["load demonstrations"] = time.perf_counter() - t0
        runs.clear()
        t0 = time.perf_counter()
        res = shortcut_audit(tasks=tasks, suite=args.suite, demos=demos, out=work / "audit",
                             cfg=cfg, seed=0, seeds=list(range(args.episodes)), run=run)
        total = time.perf_counter() - t0
        evals = sum(v for k, v in runs.items() if k.startswith("probe@"))
        phases["train probe"] = total - sum(runs.values())
        phases[f"evaluate {len(res['checkpoints'])} checkpoint(s)"] = evals
        phases["demonstrator on the same cells"] = runs["scripted-careful"]
        t0 = time.perf_counter()
        base = plan_run(RunRequest(policy="scripted-careful", tasks=tasks, episodes=args.episodes,
                         suite=args.suite, images=True))
        run(base, work / "baseline", "baseline")
        baseline = time.perf_counter() - t0
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    end_to_end = sum(phases.values())
    print(f"suite {args.suite}: {len(tasks)} tasks, {args.demos} demos/task, {args.steps} steps, "
          f"{args.episodes} evaluation episodes/task, {args.workers} workers")
    for k, v in phases.items():
        print(f"  {k:<36} {v:8.1f} s")
    print(f"  {'end to end':<36} {end_to_end:8.1f} s  ({end_to_end / 60:.1f} min; budget "
          f"{BUDGET_S / 60:.0f} min: {'within' if end_to_end <= BUDGET_S else 'OVER'})")
    print(f"baseline: one camera-policy evaluation of the same cells: {baseline:.1f} s; the "
          f"audit costs {end_to_end / baseline:.1f}x that")
    print(f"probe SR best {res['best']['successes']}/{res['best']['episodes']} (step "
          f"{res['best_step']}), final {res['final']['successes']}/{res['final']['episodes']}; "
          f"demonstrator {res['demonstrator']['successes']}/{res['demonstrator']['episodes']}; "
          f"solved: {', '.join(res['solved']) or 'none'}")
    for t in res["tasks"]:
        b, d = res["best"]["tasks"][t], res["demonstrator"]["tasks"][t]
        print(f"  {t:<34} probe {b['successes']}/{b['episodes']}  demonstrator "
              f"{d['successes']}/{d['episodes']}")


if __name__ == "__main__":
    main()
