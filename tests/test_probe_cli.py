"""``robosafe audit shortcut`` and ``robosafe audit data-source`` end to end, tiny: real
simulator episodes, real training, evaluation through the runner, resumed runs doing no work
twice. The numbers asserted are recounted from the run directories' outcome files."""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import run_robosafe

# steps MuJoCo, tens of seconds or more; its cases run on either xdist worker, but for the
# shortcut audits sharing the demonstrations (tests/conftest.py, SPREAD)
pytestmark = [pytest.mark.sim, pytest.mark.slow]

pytest.importorskip("torch")
pytest.importorskip("robosuite")

ENV = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
TASK = "turn_off_stove"


def cli(*args: str) -> subprocess.CompletedProcess:
    return run_robosafe(*args, env=ENV)


def _outcomes(run_dir: Path) -> list[dict]:
    with open(run_dir / "outcomes.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def _count(rows, task=None):
    rows = [r for r in rows if task is None or r["task_id"] == task]
    return sum(int(r["success"]) for r in rows), len(rows)


@pytest.fixture(scope="module")
def demos(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("demos") / "ds"
    proc = cli("collect", "--suite", "demo", "--task-id", TASK, "-n", "2", "--seeds", "100-101",
               "--images", "--out", str(out), "--horizon", "170")
    assert proc.returncode == 0, proc.stderr
    return out


def test_shortcut_audit_end_to_end_and_resumed(demos, tmp_path):
    out = tmp_path / "sc"
    args = ("audit", "shortcut", "--demos", str(demos), "--suite", "demo", "--task-id", TASK,
            "-n", "1", "--steps", "40", "--checkpoints", "2", "--horizon", "170",
            "--out", str(out), "--json")
    proc = cli(*args)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert res["tasks"] == [TASK] and res["seeds"] == [0]
    assert res["demos"]["episodes"] == 2 and res["demos"]["seed_overlap"] == {}
    assert [c["step"] for c in res["checkpoints"]] == [20, 40]
    assert res["final_step"] == 40
    for c in res["checkpoints"]:
        run = out / "eval" / f"step-{c['step']:06d}"
        rows = _outcomes(run)
        assert (c["successes"], c["episodes"]) == _count(rows)
        assert json.loads((run / "run.json").read_text())["policy"].startswith("probe:")
        assert all(r["seed"] == "0" for r in rows)
    best = max(res["checkpoints"], key=lambda c: (c["successes"], c["step"]))
    assert res["best_step"] == best["step"]
    # the demonstrator ran on the same cells, without images
    demo_rows = _outcomes(out / "eval" / "demonstrator")
    assert res["demonstrator"]["policy"] == "scripted-careful"
    assert (res["demonstrator"]["successes"], res["demonstrator"]["episodes"]) \
        == _count(demo_rows) == (1, 1)
    assert (res["best"]["sr"] >= 0.8) == (TASK in res["solved"])
    assert res["conclusion"]
    ckpt = Path(res["checkpoints"][-1]["path"])
    assert ckpt.suffix == ".safetensors" and ckpt.is_file()
    # rerun: training and every evaluation resume with nothing left to do
    again = cli(*args)
    assert again.returncode == 0, again.stderr
    res2 = json.loads(again.stdout)
    assert res2["training"]["resumed_from"] == 40
    assert res2["checkpoints"] == res["checkpoints"] and res2["demonstrator"] == res["demonstrator"]
    # the evaluation seeds overlapping the demonstrations' are named
    overlap = cli("audit", "shortcut", "--demos", str(demos), "--suite", "demo", "--task-id",
                  TASK, "-n", "1", "--seeds", "100", "--steps", "40", "--checkpoints", "2",
                  "--horizon", "5", "--out", str(tmp_path / "ov"), "--json")
    assert overlap.returncode == 0, overlap.stderr
    assert "collected on evaluation seed(s) 100" in overlap.stderr
    assert json.loads(overlap.stdout)["demos"]["seed_overlap"] == {TASK: [100]}


def test_shortcut_audit_refuses_tasks_without_demonstrations(demos, tmp_path):
    proc = cli("audit", "shortcut", "--demos", str(demos), "--suite", "demo", "--task-id",
               "place_lemon_in_bowl", "-n", "1", "--steps", "2", "--out", str(tmp_path / "x"))
    assert proc.returncode == 2
    assert "no demonstrations of task(s) place_lemon_in_bowl" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_data_source_audit_refuses_one_seed_before_any_work(tmp_path):
    """The paired test needs S >= 2 seeds per task: said at once, not after collecting and
    training."""
    proc = cli("audit", "data-source", "--suite", "demo", "--task-id", TASK, "-n", "1",
               "--out", str(tmp_path / "ds"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        ("robosafe: error: the paired test needs at least 2 evaluation seeds per task (paper 002 "
         "App. C.1, S >= 2): give -n 2 or more")]
    assert not (tmp_path / "ds").exists()


def test_data_source_audit_end_to_end(tmp_path):
    """Two tasks, App. A.3's defaults: one policy per task, trained without augmentation on
    its own task's demonstrations and evaluated on its own task only."""
    out = tmp_path / "ds"
    other = "place_lemon_in_bowl"
    proc = cli("audit", "data-source", "--suite", "demo", "--task-id", TASK, "--task-id", other,
               "-n", "2", "--demos-per-seed", "1", "--steps", "10", "--horizon", "170",
               "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert (res["training"], res["augmentation"]) == ("per-task", False)
    near, far = res["policies"]["near"], res["policies"]["far"]
    # near demonstrations start at the evaluation seeds, far ones at other seeds
    assert [r["seed"] for r in _outcomes(out / "collect-near")] == ["0", "1"] * 2
    assert [r["seed"] for r in _outcomes(out / "collect-far")] == ["100000", "100001"] * 2
    cfg = json.loads((out / "collect-near" / "run.json").read_text())
    assert cfg["placement_jitter"] == [0.0025, 15.0]
    # jitter is at most 0.0025 m per axis (objects settle a little afterwards)
    assert near["train_test_distance"]["max_m"] < 0.0025 * np.sqrt(2) + 0.002
    from robosafe.policies.probe import read_checkpoint

    for name, p in (("near", near), ("far", far)):
        assert sorted(p["checkpoints"]) == sorted([TASK, other])
        rows = []
        for t in (TASK, other):
            meta, _ = read_checkpoint(Path(p["checkpoints"][t]))
            assert meta["tasks"] == [t] and meta["steps"] == 10
            assert (meta["config"]["augment"]["shift_px"],
                    meta["config"]["augment"]["erase_p"]) == (0, 0.0)
            task_rows = _outcomes(out / f"eval-{name}" / t)
            assert {r["task_id"] for r in task_rows} == {t} and len(task_rows) == 2
            rows += task_rows
        assert (p["successes"], p["episodes"]) == _count(rows)
    t = res["paired_test"]
    assert (t["tasks"], t["samples"]) == (2, 2)
    assert t["mean_b"] - t["mean_a"] == pytest.approx(near["sr"] - far["sr"])
    assert res["conclusion"]
