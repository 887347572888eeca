"""`robosafe run --until`: episodes and wall time to a decision, against running the budget.

On the demo suite with the scripted policies (careful as the baseline, careless as the new
policy; Safety, two-sided, alpha 0.05), in one run of this script on one machine:

* ``fixed``: the baseline's run and the new policy's run of every cell (``-n N``), then
  ``audit sequential`` reads them (the named baseline: what an evaluation without ``--until``
  does);
* ``until``: the new policy with ``--until decided --against`` the baseline run made above;
* ``alternately``: both policies from nothing with ``--against-policy`` (neither has run).

Run:  python benchmarks/bench_until.py [-n 10] [--workers 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path


def robosafe(*args: str) -> tuple[dict, float]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "robosafe", *args, "--json"],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")})
    if proc.returncode != 0:
        sys.exit(f"robosafe {' '.join(args)}: {proc.stderr.strip()}")
    return json.loads(proc.stdout), time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=10, help="episodes per task (the budget)")
    ap.add_argument("--workers", default="1")
    a = ap.parse_args()
    common = ["run", "--suite", "demo", "-n", str(a.n), "--workers", a.workers]
    until = ["--until", "decided", "--until-metric", "safe"]
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        base, t_base = robosafe(*common, "-p", "scripted-careful", "-o", str(root / "careful"))
        full, t_full = robosafe(*common, "-p", "scripted-careless", "-o", str(root / "fixed"))
        audit, _ = robosafe("audit", "sequential", str(root / "careful"), str(root / "fixed"),
                            "--metric", "safe", "--two-sided", "--budget",
                            str(base["episodes"]))
        one, t_one = robosafe(*common, "-p", "scripted-careless", "-o", str(root / "until"),
                              *until, "--against", str(root / "careful"))
        both, t_both = robosafe(*common, "-p", "scripted-careless", "-o", str(root / "alt"),
                                *until, "--against", str(root / "alt-careful"),
                                "--against-policy", "scripted-careful")
        made = len(list((root / "alt-careful" / "outcomes").glob("*.json")))
    budget = base["episodes"]
    rows = [("fixed", audit["decision"], audit["episodes"], budget + full["episodes"],
             t_base + t_full)]
    for name, r, t, others, t_others in (("until", one, t_one, budget, t_base),
                                         ("alternately", both, t_both, made, 0.0)):
        (m,) = r["until"]["metrics"]
        rows.append((name, m["decision"], m["episodes"],
                     others + r["until"]["episodes_run"], t + t_others))
    print(f"bench_until, {date.today()}, demo suite, -n {a.n} (budget {budget} per policy), "
          f"--workers {a.workers}, Safety two-sided alpha 0.05, {os.cpu_count()} CPUs")
    print(f"{'how':<12} {'decision':<10} {'after':>6} {'episodes, both policies':>24} "
          f"{'wall s':>8}")
    for name, decision, after, episodes, wall in rows:
        print(f"{name:<12} {decision:<10} {after:>6} {episodes:>24} {wall:>8.1f}")


if __name__ == "__main__":
    main()
