"""Shared test helpers for the main suite.

`run_robosafe` (also the `cli` fixture) is the one way a test runs the `robosafe` command line
in a process of its own: tests/test_suite_hygiene.py fails if a test file starts it another way,
so a rule every CLI test needs (no traceback, ever) lives in one place. The process is forked
from a parent that has imported the libraries every command imports (tests/cli_fork.py), which
takes a fifth off the main suite's time.

Markers (registered in pyproject.toml): `sim` for tests that step MuJoCo, `slow` for the heavy
ones; `pytest -m "not slow"` is the quick development run (docs/development.md).

On pytest-xdist workers with `--dist loadfile` (scripts/ci-tests.sh) a file's tests stay on one
worker, so a module-scoped fixture is built once, except the files in `SPREAD`: their cases are
independent and are handed out one by one, so no single long file holds one worker after the
other has finished.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import cli_fork
import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_robosafe(*args: object, cwd: str | Path | None = None, env: dict | None = None,
                 timeout: float = 1200) -> subprocess.CompletedProcess:
    """`python -m robosafe ARGS` with this interpreter, output captured as text (forked by
    tests/cli_fork.py when the environment allows, else a plain subprocess).

    A traceback on stderr fails the calling test whatever the exit status: the CLI prints one
    line and exits 2 on errors a user can act on. The timeout only stops a hung run; it is
    generous because the machine may be shared by parallel test workers (pytest -n).
    """
    proc = cli_fork.run([str(a) for a in args], cwd, env if env is not None else {**os.environ},
                        timeout)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


# file -> the test functions in it that share results (a module-scoped fixture, a table over
# earlier cases): those stay together on one worker, in file order; every other case is handed
# out on its own.
SPREAD: dict[str, tuple[str, ...]] = {
    "test_vla_arena_worlds.py": (),
    "test_suite_safety_a.py": ("test_l0_careful_succeeds_cleanly", "test_l0_careful_table"),
    "test_suite_safety_b.py": (),
    "test_suite_distractor.py": ("test_l0_placement_and_success",
                                 "test_l0_careful_success_rate_per_suite"),
    "test_suite_extrapolation.py": ("test_l0_placement", "test_l0_scripted_careful"),
    # the two audits are the suite's longest tests: on one worker they would hold it 3 minutes
    "test_probe_cli.py": ("test_shortcut_audit_end_to_end_and_resumed",
                          "test_shortcut_audit_refuses_tasks_without_demonstrations"),
}


def xdist_scope(nodeid: str) -> str:
    """The unit a test is scheduled with: its file, a SPREAD file's shared group, or itself."""
    file, _, test = nodeid.partition("::")
    together = SPREAD.get(Path(file).name)
    if together is None:
        return file
    return f"{file}::shared" if test.split("[")[0] in together else nodeid


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: absent without pytest-xdist
def pytest_xdist_make_scheduler(config, log):
    # pytest-xdist's `loadgroup` would do this with markers, but its group names do not reach
    # the scheduler under pytest 9 (node ids are no longer the attribute it rewrites)
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SpreadFiles(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    return SpreadFiles(config, log)


def pytest_collection_finish(session):
    # Every test module and what it imports (torch, robosuite, scipy, ...) is loaded now: about
    # 390 000 objects that live as long as the process. Frozen, the collector no longer scans
    # them, so a full collection (robosuite's MjSim.free runs one at every env close) looks at
    # what the tests create only: 0.2 s -> microseconds each, 14 % of the suite's CPU before.
    import gc

    gc.freeze()


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
