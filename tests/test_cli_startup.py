"""Start-up: the CLI imports a command's heavy dependencies only when that command runs
(DESIGN.md). Timing lives in benchmarks/bench_startup.py; this checks what is imported."""

import json
import subprocess
import sys

import pytest

HEAVY = ("numpy", "scipy", "numba", "pyarrow", "duckdb", "matplotlib")
PROBE = """
import sys, json
from robosafe.cli import app
try:
    app(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in {heavy} if m in sys.modules)))
"""


@pytest.mark.parametrize("argv", [["--help"], ["stats", "wilson", "167", "200"],
                                  ["stats", "newcombe", "167", "200", "150", "200"],
                                  ["audit", "--help"], ["score", "--help"]])
def test_light_commands_import_no_heavy_module(argv):
    proc = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv],
                          capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_results_db_defaults_match_the_store():
    from robosafe.cli import results
    from robosafe.runner import store

    assert (results.DEFAULT_DB, results.DB_ENV) == (store.DEFAULT_DB, store.DB_ENV)
