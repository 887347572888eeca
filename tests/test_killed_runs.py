"""A run that is killed or stopped leaves no worker process and no temporary folder: pool workers
end once their driver is gone (kill -9) or when it stops them (SIGTERM), each removing its
scratch folder, and the scratch folder of a process that died without cleaning up is removed
by the next robosafe process. Real processes, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from robosafe.runner.worker import SCRATCH_PREFIX, sweep_scratch

EXAMPLES = Path(__file__).resolve().parents[1] / "src/robosafe/tasks/examples"
TASKS = [EXAMPLES / "pick_place_moving_car.bddl", EXAMPLES / "dynamic_obstacle_cost.bddl"]

#: a bound on waiting for what the test is about (not a timing assertion): the machine may be
#: shared by parallel test workers
PATIENCE_S = 120


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _until(cond, what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def _start(tmp_path: Path) -> tuple[subprocess.Popen, Path, list[int]]:
    """A two-worker run, once both workers are inside an episode (their scratch folders made);
    the driver and its pool workers' ids."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    args = ["run", "-p", "random", "-j", "2", "-n", "3", "--horizon", "400", "--out",
            str(tmp_path / "run")] + [a for t in TASKS for a in ("--task", str(t))]
    proc = subprocess.Popen([sys.executable, "-m", "robosafe", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(tmp), "MUJOCO_GL": "egl"})
    _until(lambda: len(list(tmp.glob(f"{SCRATCH_PREFIX}*"))) == 2 or proc.poll() is not None,
           "no worker started an episode")
    assert proc.poll() is None, proc.stderr.read()
    workers = [int(d.name[len(SCRATCH_PREFIX):].split("-")[0])
               for d in tmp.glob(f"{SCRATCH_PREFIX}*")]
    assert sorted(workers) == sorted(w for w in _children(proc.pid) if w in workers)
    return proc, tmp, workers


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_run_leaves_no_worker_and_no_temp_folder(tmp_path, sig):
    proc, tmp, workers = _start(tmp_path)
    proc.send_signal(sig)
    proc.wait(PATIENCE_S)
    # SIGTERM stops the run as an exception (exit 128 + 15); kill -9 leaves the workers to
    # notice that their driver is gone
    assert proc.returncode == (128 + signal.SIGTERM if sig == signal.SIGTERM else -sig)
    _until(lambda: not any(_alive(w) for w in workers), "a worker outlived its driver")
    assert list(tmp.iterdir()) == []
    if sig == signal.SIGTERM:  # stopped, not killed: the run's table was written on the way out
        assert (tmp_path / "run" / "outcomes.csv").is_file()


def test_the_scratch_folder_of_a_dead_process_is_swept(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    pid = int(dead.stdout)  # exited: its id names no process (unless reused, then kept)
    stale = tmp_path / f"{SCRATCH_PREFIX}{pid}-abc"
    mine = tmp_path / f"{SCRATCH_PREFIX}{os.getpid()}-def"
    other = tmp_path / "robosafe-workerless"
    for d in (stale, mine, other):
        d.mkdir()
    expected = 0 if _alive(pid) else 1
    assert sweep_scratch() == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [mine.name, other.name] + ([stale.name] if expected == 0 else []))


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.serial  # starts a Ray cluster of its own
def test_a_private_ray_run_leaves_no_temp_folder(tmp_path):
    """The cluster's session files live in a folder of the run's own, removed with it, and its
    workers' scratch folders are swept once they are gone."""
    pytest.importorskip("ray")
    from conftest import run_robosafe

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = run_robosafe("run", "-p", "random", "--task", TASKS[0], "-n", "2", "--horizon", "5",
                        "--backend", "ray", "-j", "1", "--out", tmp_path / "run",
                        env={**os.environ, "TMPDIR": str(tmp), "MUJOCO_GL": "egl",
                             "RAY_ADDRESS": ""})
    assert proc.returncode == 0, proc.stderr
    assert len(list((tmp_path / "run" / "outcomes").glob("*.json"))) == 2
    assert list(tmp.iterdir()) == []
