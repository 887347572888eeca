"""A learned policy, trained by LeRobot's own trainer on robosafe's demonstrations, then
evaluated, shielded and compared by robosafe (docs/guide/lerobot-policies.md, "A learned policy,
measured"). Run it in an environment with both lerobot and robosafe's simulator
(``scripts/lerobot-env.sh``):

    .venv-lerobot/bin/python scripts/learned_policy.py --out work/lp \\
        [--demos 100] [--steps 3000] [--seeds 50] [--styles careful,careless] [--shield]

For each demonstration style (the scripted careful and careless policies):

1. ``robosafe collect`` ``--demos`` demonstrations of one demo-suite pick-and-place task
   (cameras on) on training seeds ``10000..``, apart from the evaluation seeds ``0..``;
2. ``lerobot-train`` an ACT policy on that dataset (CPU, no download: no pretrained backbone
   weights; the model sized by ``--dim``);
3. ``robosafe run --policy lerobot:CHECKPOINT`` on ``--seeds`` evaluation seeds, and again with
   ``--shield filter`` when asked;
4. ``robosafe score`` each run; ``robosafe audit paired`` careful against careless on the same
   seeds; ``robosafe report`` of every run.

Prints one JSON summary (per run: SR, Safety, SBU, mean cumulative cost with 95% intervals,
train and evaluation wall time) and writes it to ``OUT/summary.json``. Every step is a
command a user could type; a finished step is kept (delete its folder to redo it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

TASK = ("demo", "place_lemon_in_bowl")
TRAIN_SEED0 = 10000  # demonstrations never share a seed with the evaluation (0..)


def _robosafe(*args: str, out: Path | None = None) -> str:
    cmd = [sys.executable, "-m", "robosafe", *args]
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode not in (0, 2) or (proc.returncode == 2 and out is None):
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"learned_policy: {' '.join(args[:2])} failed ({proc.returncode})")
    return proc.stdout


def collect(out: Path, style: str, demos: int, workers: int) -> Path:
    ds = out / f"demos-{style}"
    if not (ds / "meta" / "info.json").is_file():
        # an interrupted collect is continued, its finished episodes kept
        resume = ["--resume"] if (out / f".collect-{ds.name}").is_dir() else []
        _robosafe("collect", *resume, "--suite", TASK[0], "--task-id", TASK[1], "--policy",
                  f"scripted-{style}", "-n", str(demos), "--seeds",
                  f"{TRAIN_SEED0}-{TRAIN_SEED0 + demos - 1}", "--images", "--out", str(ds),
                  "-j", str(workers))
    return ds


def train(out: Path, ds: Path, style: str, args: argparse.Namespace) -> tuple[Path, float]:
    """lerobot-train ACT on the dataset; the last checkpoint's pretrained_model folder."""
    where = out / f"train-{style}"
    ckpt = where / "checkpoints" / "last" / "pretrained_model"
    if ckpt.is_dir():
        return ckpt, float(json.loads((where / "robosafe_train_s.json").read_text()))
    trainer = Path(sys.executable).with_name("lerobot-train")
    dim = args.dim
    cmd = [str(trainer), f"--dataset.repo_id=robosafe/{style}", f"--dataset.root={ds}",
           "--dataset.video_backend=pyav", "--policy.type=act",
           "--policy.pretrained_backbone_weights=null", f"--policy.dim_model={dim}",
           f"--policy.dim_feedforward={4 * dim}", "--policy.n_heads=4",
           "--policy.n_encoder_layers=2", "--policy.n_decoder_layers=1",
           f"--policy.chunk_size={args.chunk}", f"--policy.n_action_steps={args.chunk}",
           "--policy.push_to_hub=false", f"--policy.device={args.device}",
           f"--output_dir={where}", f"--steps={args.steps}", f"--batch_size={args.batch}",
           f"--save_freq={args.steps}", f"--log_freq={max(1, args.steps // 10)}",
           "--wandb.enable=false", f"--num_workers={args.loader_workers}", f"--seed={args.seed}"]
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    # the trainer's log goes to a file (progress visible, and the trainer outlives this script
    # if it is stopped: a pipe would end it at its next line)
    log = out / f"train-{style}.log"
    with open(log, "w", encoding="utf-8") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, check=False, env=env)
    took = time.perf_counter() - t0
    if proc.returncode != 0 or not ckpt.is_dir():
        sys.stderr.write(log.read_text(encoding="utf-8")[-3000:])
        raise SystemExit(f"learned_policy: lerobot-train failed ({proc.returncode}), see {log}")
    (where / "robosafe_train_s.json").write_text(json.dumps(took))
    return ckpt, took


def evaluate(out: Path, ckpt: Path, name: str, args: argparse.Namespace,
             shield: bool) -> tuple[Path, float]:
    run = out / f"eval-{name}{'-shield' if shield else ''}"
    t0 = time.perf_counter()
    extra = ["--shield", "filter"] if shield else []
    resume = ["--resume"] if (run / "run.json").is_file() else []
    _robosafe("run", "--suite", TASK[0], "--task-id", TASK[1], "--policy", f"lerobot:{ckpt}",
              "-n", str(args.seeds), "--horizon", str(args.horizon), "--out", str(run),
              "-j", str(args.workers), *extra, *resume)
    return run, time.perf_counter() - t0


def metrics(run: Path) -> dict:
    """SR, Safety, SBU (Wilson 95 %) from ``robosafe score``; the mean cumulative cost with
    robosafe's bootstrap interval, from the run's outcome rows."""
    import csv

    import numpy as np

    from robosafe.stats.intervals import bootstrap_mean_interval

    pooled = json.loads(_robosafe("score", str(run), "--json", out=run))["aggregate"]
    out = {k: pooled.get(k) for k in ("n", "sr", "sr_ci", "safety", "safety_ci", "sbu",
                                      "sbu_ci")}
    with open(run / "outcomes.csv", newline="", encoding="utf-8") as fh:
        cost = np.array([float(r["cumulative_cost"]) for r in csv.DictReader(fh)
                         if r.get("cumulative_cost")])
    if cost.size:
        ci = bootstrap_mean_interval(cost)
        out |= {"mean_cc": float(cost.mean()), "cc_ci": ci.as_list()}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--demos", type=int, default=100)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--dim", type=int, default=128, help="ACT's transformer width")
    p.add_argument("--chunk", type=int, default=20, help="ACT's chunk = n_action_steps")
    p.add_argument("--seeds", type=int, default=50, help="evaluation seeds 0..N-1")
    p.add_argument("--horizon", type=int, default=300)
    p.add_argument("--styles", default="careful,careless")
    p.add_argument("--shield", action="store_true", help="also evaluate with --shield filter")
    p.add_argument("--device", default="cpu")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--loader-workers", type=int, default=0)
    p.add_argument("--seed", type=int, default=1000)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    summary: dict = {"task": "/".join(TASK), "args": {k: str(v) for k, v in vars(args).items()},
                     "runs": {}}
    runs = []
    for style in args.styles.split(","):
        ds = collect(args.out, style, args.demos, args.workers)
        ckpt, train_s = train(args.out, ds, style, args)
        for shield in (False, True) if args.shield else (False,):
            run, eval_s = evaluate(args.out, ckpt, style, args, shield)
            runs.append(run)
            summary["runs"][run.name] = {"train_s": round(train_s, 1),
                                         "eval_s": round(eval_s, 1), **metrics(run)}
    base = [r for r in runs if r.name in ("eval-careful", "eval-careless")]
    if len(base) == 2:
        summary["paired_success"] = json.loads(_robosafe(
            "audit", "paired", str(base[0] / "outcomes.csv"), str(base[1] / "outcomes.csv"),
            "--json", out=base[0]))
    _robosafe("report", *map(str, runs), "--out", str(args.out / "report.html"))
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
