"""SR and Safety of the LIBERO scripted policy per suite (README, "Safety on LIBERO").

Runs ``robosafe run --host libero --policy scripted-careful`` (no cameras: the scripted policy
reads privileged state) on every task of each suite, ``-n`` episodes per task from LIBERO's
initial states 0..n-1, in the current Python environment (LIBERO's), and prints one markdown
row per suite: SR and Safety over the pick-and-place tasks, the episodes in which the policy
gave up, and the tasks it refuses (not pick-and-place: a drawer, knob or microwave first).

Run:  .venv-libero/bin/python scripts/libero_scripted_sr.py [-n 3] [--out runs/scripted-sr]
      [--suite libero_spatial ...] [--policy scripted-careful]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10")


def run_suite(suite: str, n: int, policy: str, out: Path) -> dict:
    """One run directory per suite (continued with --resume if it exists); its summary."""
    where = out / f"{suite}-{policy}"
    cmd = [sys.executable, "-m", "robosafe", "run", "--host", "libero", "--suite", suite,
           "--policy", policy, "-n", str(n), "--out", str(where), "--json"]
    if where.exists():
        cmd.append("--resume")
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    # refused tasks are crashed episodes: the run exits 2 and the rows say why
    subprocess.run(cmd, check=False, env=env, stdout=subprocess.DEVNULL)
    with open(where / "outcomes.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    refused = sorted({r["task_id"] for r in rows if r["error_type"]},
                     key=lambda t: int(t.removeprefix("task_")))
    scored = [r for r in rows if not r["error_type"]]
    score = subprocess.run([sys.executable, "-m", "robosafe", "score", str(where), "--json"],
                           capture_output=True, text=True, check=False, env=env)
    agg = json.loads(score.stdout)["aggregate"] if score.returncode == 0 else {}
    tasks = sorted({r["task_id"] for r in scored}, key=lambda t: int(t.removeprefix("task_")))
    per_task = {t: sum(int(r["success"]) for r in scored if r["task_id"] == t) for t in tasks}
    return {"suite": suite, "tasks": len(tasks), "episodes": len(scored),
            "successes": sum(per_task.values()), "sr": agg.get("sr"),
            "safety": agg.get("safety"), "gave_up": sum(1 for r in scored if r["note"]),
            "per_task": per_task, "refused": refused}


def table(results: list[dict], n: int) -> str:
    lines = ["| suite | pick-and-place tasks | SR | Safety | gave up | not pick-and-place |",
             "|---|---|---|---|---|---|"]
    for r in results:
        fmt = (lambda v: "-" if v is None else f"{v:.2f}")
        lines.append(f"| {r['suite']} | {r['tasks']} x {n} | {r['successes']}/{r['episodes']} "
                     f"= {fmt(r['sr'])} | {fmt(r['safety'])} | {r['gave_up']} | "
                     f"{', '.join(r['refused']) or '-'} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=3, help="episodes per task (initial states 0..n-1)")
    ap.add_argument("--suite", action="append", choices=SUITES, help="default: all four")
    ap.add_argument("--policy", default="scripted-careful")
    ap.add_argument("--out", type=Path, default=Path("runs/scripted-sr"))
    args = ap.parse_args()
    results = []
    for suite in args.suite or SUITES:
        r = run_suite(suite, args.n, args.policy, args.out)
        per = " ".join(f"{t.removeprefix('task_')}:{k}" for t, k in r["per_task"].items())
        print(f"{suite}: successes per task {per}", file=sys.stderr)
        results.append(r)
    print(table(results, args.n))


if __name__ == "__main__":
    main()
