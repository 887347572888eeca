"""Step and reset time of robosafe's simulator against VLA-Arena's own environment (the named
baseline) on the same task files, interleaved in one process.

Run with the peer environment's Python (``bash scripts/vla-arena-env.sh .venv-arena``), where
both simulators import on the same robosuite (1.5.1) and MuJoCo (3.9.0):

    MUJOCO_GL=egl .venv-arena/bin/python benchmarks/bench_vla_arena.py \
        [--files 6] [--repeat 3] [--steps 50] [--assets libero]

Per file, both envs are built once (build time is reported, not compared: VLA-Arena parses
and compiles its own XMLs); then, ``--repeat`` times and alternating which side goes first,
each is reset and stepped ``--steps`` times with the arm still and the gripper open, no
cameras (rendering is the same MuJoCo renderer on both sides). robosafe runs in cost mode
vla-arena, so both evaluate the file's cost predicates every step. VLA-Arena's reset is timed
alone; robosafe's includes its hidden settling steps (10 control steps), as its users see it.
VLA-Arena prints every contact it checks; the harness captures its stdout in memory (part of
its time, as a terminal would be, only cheaper).
Prints per-file medians and the ratio robosafe / VLA-Arena (< 1: robosafe is faster), then
the median ratio over files. Files: the first buildable files with a cost block, one per
suite first (docs/vla_arena_peer.csv).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import vla_arena_parity as parity  # the harness: file selection and VLA-Arena env wrapper

HOLD = np.array([0, 0, 0, 0, 0, 0, -1.0])


def _files(n: int) -> list[str]:
    files = parity.with_cost(parity.buildable(ROOT / "docs" / "vla_arena_peer.csv"),
                             parity.BDDL_DIR)
    first = parity.per_suite(files, 1)
    return (first + [f for f in files if f not in first])[:n]


def _time_arena(side: parity.ArenaSide, steps: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    side.reset(0)
    t1 = time.perf_counter()
    for _ in range(steps):
        side.step(HOLD)
    return t1 - t0, (time.perf_counter() - t1) / steps


def _time_robosafe(env, steps: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    env.reset(seed=0)
    t1 = time.perf_counter()
    for _ in range(steps):
        env.step(HOLD)
    return t1 - t0, (time.perf_counter() - t1) / steps


def bench_file(rel: str, repeat: int, steps: int, assets: str) -> dict:
    from robosafe.sim.env import TaskEnv

    path = parity.BDDL_DIR / rel
    t0 = time.perf_counter()
    side = parity.ArenaSide(path)
    t1 = time.perf_counter()
    with contextlib.redirect_stderr(io.StringIO()):  # warnings once per file, not timed
        env = TaskEnv(path, cost_mode="vla-arena", render=False, assets=assets,
                      horizon=steps + 1)
    t2 = time.perf_counter()
    times: dict[str, list[tuple[float, float]]] = {"arena": [], "robosafe": []}
    try:
        for k in range(repeat):
            order = ("arena", "robosafe") if k % 2 == 0 else ("robosafe", "arena")
            for who in order:
                if who == "arena":
                    times[who].append(_time_arena(side, steps))
                else:
                    with contextlib.redirect_stderr(io.StringIO()):
                        times[who].append(_time_robosafe(env, steps))
    finally:
        side.close()
        env.close()
    med = {who: (statistics.median(r for r, _ in t), statistics.median(s for _, s in t))
           for who, t in times.items()}
    return {"file": rel, "build_arena_s": t1 - t0, "build_robosafe_s": t2 - t1,
            "reset_arena_s": med["arena"][0], "reset_robosafe_s": med["robosafe"][0],
            "step_arena_ms": 1e3 * med["arena"][1], "step_robosafe_ms": 1e3 * med["robosafe"][1],
            "reset_ratio": med["robosafe"][0] / med["arena"][0],
            "step_ratio": med["robosafe"][1] / med["arena"][1]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--assets", default="libero", choices=("libero", "stand-in"))
    ap.add_argument("--json", action="store_true", help="one JSON object per file")
    args = ap.parse_args(argv)
    rows = []
    print(f"{'file':70s} {'reset rs/VA s':>16s} {'ratio':>6s} {'step rs/VA ms':>16s} "
          f"{'ratio':>6s}")
    for rel in _files(args.files):
        r = bench_file(rel, args.repeat, args.steps, args.assets)
        rows.append(r)
        if args.json:
            print(json.dumps(r))
        else:
            print(f"{rel[-70:]:70s} {r['reset_robosafe_s']:7.3f}/{r['reset_arena_s']:<7.3f} "
                  f"{r['reset_ratio']:6.2f} {r['step_robosafe_ms']:7.2f}/{r['step_arena_ms']:<7.2f}"
                  f" {r['step_ratio']:6.2f}", flush=True)
    print(f"median ratio robosafe / VLA-Arena over {len(rows)} files: reset "
          f"{statistics.median(r['reset_ratio'] for r in rows):.2f}, step "
          f"{statistics.median(r['step_ratio'] for r in rows):.2f} (assets {args.assets}, "
          f"{args.steps} steps x {args.repeat}, no cameras)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
