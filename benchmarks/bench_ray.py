"""The ray backend's cost: the same run on the local backend (the baseline) and on a two-node
Ray cluster on loopback (``ray start``, one CPU per node), on the same cores, interleaved.

1. Episodes per minute, local ``-j 2`` vs cluster ``-j 2`` (ratio cluster / local).
2. Result transfer with two cameras at 128 px and frames recorded: bytes a cell sends back to
   the driver (trace, actions, frame videos) and the driver's time to fetch and write them
   (``store_result``), per episode, for each backend.

    python benchmarks/bench_ray.py [--episodes 6] [--rounds 2] [--horizon 120]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

# the loopback cluster is a test helper (tests/ray_loopback.py), not part of the package
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from ray_loopback import LoopbackCluster

from robosafe.runner import run as run_mod
from robosafe.runner.request import RunRequest, plan_run
from robosafe.runner.run import execute, prepare
from robosafe.tasks.suites import suite_tasks


def _size(res: run_mod.CellResult, get) -> int:
    chunks = [c for cs in res.frames.values() for c in cs]
    return (len(res.trace or b"") + len(res.actions or b"")
            + sum(len(get(c) if get else c) for c in chunks))


def one_run(tasks: dict[str, str], episodes: int, horizon: int, backend: str,
            address: str | None) -> dict[str, float]:
    cfg = plan_run(RunRequest(policy="scripted-careful", tasks=tasks, episodes=episodes, suite="demo",
                    horizon=horizon, images=True, image_size=128, record_frames=True))
    store_s, sizes = [], []
    real = run_mod.store_result

    def timed(run, res, get=None):
        t0 = time.perf_counter()
        real(run, res, get)
        store_s.append(time.perf_counter() - t0)
        sizes.append(_size(res, get))

    run_mod.store_result = timed
    try:
        with tempfile.TemporaryDirectory() as tmp:
            run, cells = prepare(cfg, Path(tmp) / "run")
            t0 = time.perf_counter()
            execute(run, cells, workers=2, backend=backend, ray_address=address)
            wall = time.perf_counter() - t0
    finally:
        run_mod.store_result = real
    return {"eps_per_min": len(cells) / wall * 60, "store_ms": 1000 * statistics.mean(store_s),
            "kb": statistics.mean(sizes) / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--horizon", type=int, default=120)
    args = ap.parse_args()
    tasks = {k: str(v) for k, v in suite_tasks("demo").items() if k == "turn_off_stove"}
    out: dict[str, list[dict[str, float]]] = {"local": [], "cluster": []}
    with LoopbackCluster(nodes=2) as cluster:
        for _ in range(args.rounds):
            out["local"].append(one_run(tasks, args.episodes, args.horizon, "local", None))
            out["cluster"].append(one_run(tasks, args.episodes, args.horizon, "ray",
                                          cluster.address))
    med = {k: {m: statistics.median(r[m] for r in v) for m in v[0]} for k, v in out.items()}
    print(f"{args.episodes} episodes x {args.rounds} rounds, horizon {args.horizon}, "
          "two 128 px cameras, frames recorded (medians)")
    print(f"{'backend':<28}{'episodes/min':>14}{'KB/episode':>12}{'store ms/episode':>18}")
    for name, label in (("local", "local -j 2 (baseline)"),
                        ("cluster", "2-node loopback Ray -j 2")):
        m = med[name]
        print(f"{label:<28}{m['eps_per_min']:>14.1f}{m['kb']:>12.0f}{m['store_ms']:>18.1f}")
    print(f"cluster / local throughput: {med['cluster']['eps_per_min'] / med['local']['eps_per_min']:.2f}")


if __name__ == "__main__":
    main()
