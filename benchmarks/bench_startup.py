"""CLI start-up time: robosafe commands against a bare interpreter, in one run.

Baselines (named, run in the same invocation, interleaved with the commands so machine load
hits all alike): ``python -c pass`` (the interpreter alone), ``python -c "import typer"`` and a
minimal two-command typer app printing its ``--help`` (the CLI framework robosafe is built on,
which robosafe cannot start faster than). Each command runs
``--repeat`` times as a fresh process; the median wall time is reported, with the difference
to ``python -c pass`` (what robosafe adds) and the ratio.

The CLI imports a command's heavy dependencies (numpy, scipy, numba, pyarrow, duckdb,
matplotlib) only when that command runs (DESIGN.md); ``--help`` and ``stats wilson`` /
``stats newcombe`` import none of them, which ``--check`` verifies.

Run:  python benchmarks/bench_startup.py [--repeat 7] [--check]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

MINIMAL_TYPER = ("import typer\napp = typer.Typer()\n@app.command()\ndef a(k: int): pass\n"
                 "@app.command()\ndef b(): pass\napp(['--help'])")
COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "python -c 'import typer'": ["-c", "import typer"],
    "minimal typer app (2 commands), --help": ["-c", MINIMAL_TYPER],
    "robosafe --help": ["-m", "robosafe", "--help"],
    "robosafe stats wilson 167 200": ["-m", "robosafe", "stats", "wilson", "167", "200"],
    "robosafe stats newcombe 167 200 150 200": ["-m", "robosafe", "stats", "newcombe", "167",
                                                "200", "150", "200"],
    "robosafe stats cutoffs (T=24 S=50)": ["-m", "robosafe", "stats", "cutoffs", "--tasks",
                                           "24", "--samples", "50", "--baseline", "1100"],
    "robosafe stats compare (T=10 S=50)": ["-m", "robosafe", "stats", "compare", "--tasks",
                                           "10", "--samples", "50", "--baseline", "450",
                                           "--new", "470"],
}
HEAVY = ("numpy", "scipy", "numba", "pyarrow", "duckdb", "matplotlib")
LIGHT = ("robosafe --help", "robosafe stats wilson 167 200",
         "robosafe stats newcombe 167 200 150 200")


def once(args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def heavy_imports(args: list[str]) -> list[str]:
    """The heavy modules a command imports (its -X importtime log)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *args], check=True,
                          capture_output=True, text=True)
    names = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
    return [m for m in HEAVY if m in names]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--check", action="store_true",
                    help="fail if a light command imports a heavy module")
    args = ap.parse_args()
    times: dict[str, list[float]] = {k: [] for k in COMMANDS}
    for _ in range(args.repeat):
        for name, argv in COMMANDS.items():  # interleaved: load affects every command alike
            times[name].append(once(argv))
    base = statistics.median(times["python -c pass"])
    print(f"median of {args.repeat} fresh processes ({sys.executable})")
    print(f"{'command':42s} {'median s':>9s} {'- pass s':>9s} {'x pass':>8s}")
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"{name:42s} {m:9.3f} {m - base:9.3f} {m / base:8.1f}")
    if args.check:
        bad = {n: heavy_imports(COMMANDS[n]) for n in LIGHT}
        bad = {n: mods for n, mods in bad.items() if mods}
        for n, mods in bad.items():
            print(f"FAIL: {n} imports {', '.join(mods)}")
        if bad:
            raise SystemExit(1)
        print("light commands import none of: " + ", ".join(HEAVY))


if __name__ == "__main__":
    main()
