"""World build and reset time per task with LIBERO's real meshes (``--assets libero``) against
the procedural stand-ins (the named baseline), in one run.

Each measurement is a fresh process (a user's first episode pays for compiling the assets'
meshes; later episodes of a worker reuse the world): build the TaskEnv, reset it, then step 20
times with two 128 px cameras (rendering is where textured meshes could cost). Stand-in and
LIBERO runs are interleaved, ``--repeat`` times each; medians per task, then the ratio of the
per-task medians' median. Tasks: the demo suite and VLA-Arena files that use a category
LIBERO's assets cover (``--vla-arena DIR``, default ../shared/vla-arena/bddl_files).

Run:  python benchmarks/bench_assets.py [--repeat 3] [--vla-arena DIR] [--files 8]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import json, sys, time, numpy as np
t0 = time.perf_counter()
from robosafe.sim.env import TaskEnv
t1 = time.perf_counter()
env = TaskEnv(sys.argv[1], assets=sys.argv[2], image_size=(128, 128))
t2 = time.perf_counter()
env.reset(seed=0)
t3 = time.perf_counter()
for _ in range(20):
    env.step(np.zeros(env.task_world.action_dim))
t4 = time.perf_counter()
print(json.dumps({"build": t2 - t1, "reset": t3 - t2, "step": (t4 - t3) / 20,
                  "real": sum(a.source == "libero" for a in env.task_world.assets.values())}))
"""


def once(task: str, source: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, task, source], capture_output=True,
                          text=True, check=True, cwd=ROOT, env={"MUJOCO_GL": "egl",
                                                                **os.environ})
    return json.loads(proc.stdout.strip().splitlines()[-1])


def tasks(vla_arena: Path, n: int) -> list[str]:
    from robosafe.sim.libero_assets import covered

    real = set(covered())
    out = sorted(str(p) for p in (ROOT / "src/robosafe/tasks/suites/demo").glob("*.bddl"))
    hits = []
    for f in sorted(vla_arena.glob("**/*.bddl")):
        if _categories(f) & real:
            hits.append(str(f))
    step = max(1, len(hits) // max(n, 1))
    return out + hits[::step][:n]


def _categories(path: Path) -> set[str]:
    """The categories a task file uses; none (and one line) for a file robosafe cannot read."""
    from robosafe.errors import RobosafeError
    from robosafe.sim.assets import category
    from robosafe.tasks import parse_file

    try:
        p = parse_file(path)
        return {category(d.category).name for d in (*p.fixtures, *p.objects)
                if d.category != "table"}
    except RobosafeError as err:
        print(f"skipped {path}: {str(err).splitlines()[0]}", file=sys.stderr)
        return set()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--vla-arena", type=Path,
                    default=ROOT.parent / "shared" / "vla-arena" / "bddl_files")
    a = ap.parse_args()
    chosen = tasks(a.vla_arena, a.files)
    rows = []
    print(f"{'task':48s} {'real':>4s}  {'build s':>15s}  {'reset s':>13s}  {'step ms (2 cams)':>17s}")
    for task in chosen:
        runs = {"stand-in": [], "libero": []}
        for _ in range(a.repeat):
            for source, acc in runs.items():  # interleaved: load hits both alike
                acc.append(once(task, source))
        med = {s: {k: statistics.median(r[k] for r in rs) for k in ("build", "reset", "step")}
               for s, rs in runs.items()}
        rows.append(med)
        s, lib = med["stand-in"], med["libero"]
        print(f"{Path(task).stem[:48]:48s} {runs['libero'][0]['real']:4d}  "
              f"{s['build']:6.2f} -> {lib['build']:5.2f}  {s['reset']:5.2f} -> {lib['reset']:5.2f}  "
              f"{1000 * s['step']:6.1f} -> {1000 * lib['step']:6.1f}")
    for k in ("build", "reset", "step"):
        ratio = statistics.median(r["libero"][k] / r["stand-in"][k] for r in rows)
        print(f"{k}: LIBERO meshes / stand-ins, median over {len(rows)} tasks: {ratio:.2f}x")


if __name__ == "__main__":
    main()
