"""Peak memory of `robosafe audit paired` against the rows of its two outcome tables.

The test's memory must grow linearly in the rows: the top-line class it prints (``classify_gain``)
once built the Q_hi envelope of every gap, O(N T) integers (23 GB at 10^6 rows, T = 1000); it
now builds the one gap it needs, O(T + S). What is left is reading the two CSVs.

Each size writes two outcome CSVs (T = 1000 tasks, S = rows / T shared instances, success drawn
with a fixed seed) and runs the command in a fresh process under ``/usr/bin/time -v`` (the
kernel's peak RSS of that process). With ``--check`` the largest size must stay under 2 GB and
the per-row cost must not grow with the size (the largest size's MiB per 10^5 rows at most 1.5x
the smallest's).

Run:  python benchmarks/bench_paired_memory.py [--rows 100000 300000 1000000] [--check]
"""

from __future__ import annotations

import argparse
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

TASKS = 1000
LIMIT_MIB = 2000


def write_outcomes(path: Path, rows: int, p: float, seed: int) -> None:
    rng = random.Random(seed)
    with path.open("w") as fh:
        fh.write("suite,task_id,instance_id,success\n")
        for t in range(TASKS):
            fh.writelines(f"bench,t{t},i{s},{int(rng.random() < p)}\n"
                          for s in range(rows // TASKS))


def peak_mib(a: Path, b: Path) -> tuple[float, str]:
    """Peak RSS (MiB) of `robosafe audit paired A B` and its last output line."""
    proc = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "robosafe", "audit",
                           "paired", str(a), str(b)], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        sys.exit(f"audit paired failed:\n{proc.stderr}")
    kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)[1])
    return kib / 1024, proc.stdout.strip().splitlines()[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[100_000, 300_000, 1_000_000])
    ap.add_argument("--check", action="store_true",
                    help=f"fail unless the largest size stays under {LIMIT_MIB} MB and linear")
    args = ap.parse_args()
    per_row = []
    with tempfile.TemporaryDirectory() as tmp:
        for rows in args.rows:
            a, b = Path(tmp) / "a.csv", Path(tmp) / "b.csv"
            write_outcomes(a, rows, 0.5, 1)
            write_outcomes(b, rows, 0.505, 2)
            mib, last = peak_mib(a, b)
            per_row.append(mib / rows * 1e5)
            print(f"{rows:>9,} rows per table: peak {mib:7.0f} MiB "
                  f"({per_row[-1]:.0f} MiB per 10^5 rows)  {last}")
    if args.check:
        if mib > LIMIT_MIB:
            sys.exit(f"FAIL: {mib:.0f} MiB at {args.rows[-1]:,} rows, over {LIMIT_MIB}")
        if per_row[-1] > 1.5 * per_row[0]:
            sys.exit("FAIL: memory per row grows with the rows")
        print("ok")


if __name__ == "__main__":
    main()
