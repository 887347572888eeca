"""``robosafe run --task-dir DIR``: every *.bddl below DIR, sorted, ids from their paths."""

import csv
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_robosafe

os.environ.setdefault("MUJOCO_GL", "egl")

from robosafe.errors import RobosafeError
from robosafe.runner.request import TaskSelection, select_tasks, tasks_below

EXAMPLES = Path(__file__).resolve().parents[1] / "src/robosafe/tasks/examples"
TASK = EXAMPLES / "libero_pick_place.bddl"


def _tree(root: Path) -> Path:
    """b/x.bddl, a/x.bddl (the same name at two levels, as VLA-Arena's levels reuse names),
    c.bddl, a note that is not a task, and an empty folder."""
    for rel in ("b/x.bddl", "a/x.bddl", "c.bddl"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(TASK, root / rel)
    (root / "a" / "notes.txt").write_text("not a task")
    (root / "empty").mkdir()
    return root


def test_every_bddl_below_sorted_with_path_ids(tmp_path):
    root = _tree(tmp_path)
    got = tasks_below(root)
    assert list(got) == ["a.x", "b.x", "c"]
    assert got["a.x"] == str(root / "a" / "x.bddl")
    # --task beside it: its stem is its id; a clash is one line naming both files
    both = select_tasks(TaskSelection(files=(str(TASK),), folder=str(root)))
    assert list(both) == ["libero_pick_place", "a.x", "b.x", "c"]
    shutil.copy(TASK, root / "libero_pick_place.bddl")
    with pytest.raises(RobosafeError, match="two tasks named libero_pick_place"):
        select_tasks(TaskSelection(files=(str(TASK),), folder=str(root)))


def _run(*args: str) -> subprocess.CompletedProcess:
    return run_robosafe("run", "--policy", "zero", *args)


@pytest.mark.parametrize(("folder", "message"), [
    ("empty", "--task-dir: no *.bddl file below"),
    ("missing", "is not a folder"),
])
def test_no_task_below_is_one_line_and_exit_2(tmp_path, folder, message):
    root = _tree(tmp_path / "t")
    proc = _run("--task-dir", str(root / folder), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.sim
def test_run_over_a_task_dir_runs_each_file_once(tmp_path):
    root = tmp_path / "t"
    for rel in ("level_0/x.bddl", "level_1/x.bddl"):
        (root / rel).parent.mkdir(parents=True)
        shutil.copy(TASK, root / rel)
    out = tmp_path / "out"
    proc = _run("--task-dir", str(root), "--horizon", "2", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader((out / "outcomes.csv").open()))
    assert sorted(r["task_id"] for r in rows) == ["level_0.x", "level_1.x"]
    assert all(r["num_env_steps"] == "2" for r in rows)
