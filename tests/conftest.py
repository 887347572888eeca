"""Shared test helpers for the main suite.

`run_robosafe` (also the `cli` fixture) is the one way a test runs the `robosafe` command line
in a subprocess: tests/test_suite_hygiene.py fails if a test file starts it another way, so a
rule every CLI test needs (no traceback, ever) lives in one place.

Markers (registered in pyproject.toml): `sim` for tests that step MuJoCo, `slow` for the heavy
ones; `pytest -m "not slow"` is the quick development run (docs/development.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_robosafe(*args: object, cwd: str | Path | None = None, env: dict | None = None,
                 timeout: float = 1200) -> subprocess.CompletedProcess:
    """`python -m robosafe ARGS` with this interpreter, output captured as text.

    A traceback on stderr fails the calling test whatever the exit status: the CLI prints one
    line and exits 2 on errors a user can act on. The timeout only stops a hung run; it is
    generous because the machine may be shared by parallel test workers (pytest -n).
    """
    proc = subprocess.run([sys.executable, "-m", "robosafe", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env=env if env is not None else {**os.environ}, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.fixture(scope="session")
def cli():
    """The `run_robosafe` helper, for tests and fixtures."""
    return run_robosafe


# A shell starts background jobs with SIGINT ignored, and an ignored SIGINT is inherited across
# exec: the Ctrl-C tests (SIGINT to a robosafe process, interrupt_main) would then test nothing
# and fail. A user's Ctrl-C reaches a process in a terminal, so the tests run as in one.
import signal as _signal

if _signal.getsignal(_signal.SIGINT) is _signal.SIG_IGN:
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
