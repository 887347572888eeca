"""The VLA-Arena task files in robosafe, file by file: does each check (parse + validate), build,
reset and place its objects (with the stand-ins and with LIBERO's own assets), and does the
scripted policy solve it. Writes a CSV of every file and the per-suite-and-level table into
src/robosafe/tasks/suites/README.md (between the vla-arena-table markers).

Run:  python scripts/vla_arena_table.py [DIR] [--workers 2] [--write]
      DIR defaults to ../shared/vla-arena/bddl_files (VLA-Arena's 170 files, Apache-2.0)
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing as mp
import os
import re
import warnings
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "src/robosafe/tasks/suites/README.md"
CSV = ROOT / "docs/vla_arena_files.csv"
COUNTED = ("check", "build", "rest", "build_libero", "rest_libero", "solved")
FIELDS = ("suite", "level", "file", "check", "warnings", "build", "rest", "build_libero",
          "rest_libero", "solved", "problem")


def one(path: str) -> dict:
    os.environ.setdefault("MUJOCO_GL", "egl")
    from robosafe.errors import RobosafeError
    from robosafe.runner.check import check_task
    from robosafe.tasks import parse_file, validate_task

    p = Path(path)
    row = {"suite": p.parent.parent.name, "level": p.parent.name.removeprefix("level_"),
           "file": p.name, "check": 0, "warnings": 0, "build": 0, "rest": 0, "build_libero": 0,
           "rest_libero": 0, "solved": 0, "problem": ""}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            problem = parse_file(p)
        errors = validate_task(problem, str(p))
    except RobosafeError as err:
        row["problem"] = str(err).splitlines()[0]
        return row
    row["warnings"] = len(problem.warnings)
    if errors:
        row["problem"] = str(errors[0])
        return row
    row["check"] = 1
    stand = check_task(p, seeds=(0,), policy="scripted-careful", render=False)
    row["build"], row["rest"] = _built(stand)
    row["solved"] = stand.successes
    row["problem"] = "; ".join(stand.problems)[:200]
    real = check_task(p, seeds=(0,), render=False, assets="libero")
    row["build_libero"], row["rest_libero"] = _built(real)
    if not real.ok and not row["problem"]:
        row["problem"] = "libero assets: " + "; ".join(real.problems)[:180]
    return row


def _built(res) -> tuple[int, int]:
    """(built: the world built and reset; at rest: also every object placed, settled without
    sliding and every init atom holding). Placement findings are the "seed N:" lines."""
    built = not [p for p in res.problems if not p.startswith("seed ")]
    return int(built), int(built and res.ok)


def table(rows: list[dict]) -> str:
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["suite"], r["level"])].append(r)
    head = ("| suite | level | files | check | build (stand-ins) | at rest | build (LIBERO "
            "assets) | at rest | scripted success |")
    lines = [head, "|---|---|---|---|---|---|---|---|---|"]
    tot = defaultdict(int)
    for (suite, level), rs in sorted(groups.items()):
        n = len(rs)
        c = {k: sum(int(r[k]) for r in rs) for k in COUNTED}
        for k, v in c.items():
            tot[k] += v
        tot["files"] += n
        lines.append(f"| {suite} | L{level} | {n} | " + " | ".join(str(c[k]) for k in COUNTED)
                     + " |")
    lines.append(f"| **all** | | **{tot['files']}** | "
                 + " | ".join(f"**{tot[k]}**" for k in COUNTED) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", nargs="?", type=Path,
                    default=ROOT.parent / "shared" / "vla-arena" / "bddl_files")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--write", action="store_true", help="Update the README table and CSV.")
    a = ap.parse_args()
    files = sorted(str(p) for p in a.dir.glob("*/level_*/*.bddl"))
    with mp.get_context("spawn").Pool(a.workers) as pool:
        rows = []
        for k, r in enumerate(pool.imap(one, files), 1):
            rows.append(r)
            print(f"[{k}/{len(files)}] {r['suite']}/L{r['level']}/{r['file']}: check "
                  f"{r['check']} build {r['build']}/{r['rest']} libero {r['build_libero']}/"
                  f"{r['rest_libero']} solved "
                  f"{r['solved']} {r['problem'][:100]}", flush=True)
    md = table(rows)
    print(md)
    if a.write:
        with CSV.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=FIELDS)
            w.writeheader()
            w.writerows(rows)
        text = README.read_text()
        text = re.sub(r"(<!-- vla-arena-table -->\n).*?(<!-- /vla-arena-table -->)",
                      lambda m: m.group(1) + md + "\n" + m.group(2), text, flags=re.DOTALL)
        README.write_text(text)


if __name__ == "__main__":
    main()
