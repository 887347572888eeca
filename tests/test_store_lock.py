"""Two processes on one results store: opening it waits for a concurrent holder of DuckDB's
file lock (a `results ingest` in progress) instead of failing at once, and gives up with one
line naming the lock after the timeout. Real DuckDB files, real processes."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from conftest import run_robosafe

from robosafe.errors import RobosafeError
from robosafe.runner.store import Store


def _holder(db, seconds):
    """A process that opens the store (as an ingest does) and keeps it for ``seconds``."""
    code = ("import sys, time\nfrom robosafe.runner.store import Store\n"
            f"s = Store({str(db)!r})\nprint('locked', flush=True)\ntime.sleep({seconds})\n"
            "s.close()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_open_waits_for_a_concurrent_ingest(tmp_path):
    db = tmp_path / "r.duckdb"
    Store(db).close()
    holder = _holder(db, 1.5)
    try:
        t0 = time.monotonic()
        with Store(db, lock_timeout_s=30) as store:
            waited = time.monotonic() - t0
            assert store.run_ids() == []
        assert 0.5 < waited < 30
    finally:
        holder.wait(30)


def test_gives_up_after_the_timeout_with_one_line(tmp_path):
    db = tmp_path / "r.duckdb"
    holder = _holder(db, 20)
    try:
        t0 = time.monotonic()
        with pytest.raises(RobosafeError, match=r"cannot open the results database: .*lock.*"
                                                r"still locked by another process after 1 s"):
            Store(db, lock_timeout_s=1)
        assert time.monotonic() - t0 < 10
    finally:
        holder.kill()
        holder.wait(10)


@pytest.mark.slow
def test_cli_list_waits_for_the_lock(tmp_path):
    db = tmp_path / "r.duckdb"
    Store(db).close()
    holder = _holder(db, 8)  # longer than the command takes to start
    try:
        proc = run_robosafe("results", "list", "--db", db, "--json")
        assert proc.returncode == 0, proc.stderr
    finally:
        holder.wait(30)
