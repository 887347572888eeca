"""robosafe beside lerobot 0.6.1 in lerobot's own environment (numpy 2): its simulator
installed by the supported route (scripts/sim-beside-lerobot.txt) gives the dev environment's
(numpy 1.26) traces byte for byte; robosafe's base install changes nothing lerobot installed;
and the whole learned-policy loop runs at CI size (collect, lerobot-train, evaluate, score,
compare, report: scripts/learned_policy.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
from conftest import DEV_PYTHON, REPO, robosafe


def test_simulator_here_gives_the_dev_environments_traces(tmp_path):
    """Two demo-suite tasks (one with a moving object), the careless policy: the same trace
    files under numpy 2 here as under numpy 1.26 in the dev environment."""
    assert np.__version__.startswith("2."), np.__version__
    args = ["run", "--suite", "demo", "--task-id", "place_lemon_in_bowl", "--task-id",
            "place_block_past_moving_car", "--policy", "scripted-careless", "-n", "1",
            "--horizon", "120", "-j", "1"]
    here = robosafe(*args, "--out", tmp_path / "here")
    assert here.returncode == 0, here.stderr[-2000:]
    assert DEV_PYTHON.is_file(), "the dev environment (.venv) is the reference of this test"
    dev = robosafe(*args, "--out", tmp_path / "dev", python=DEV_PYTHON)
    assert dev.returncode == 0, dev.stderr[-2000:]
    mine = sorted((tmp_path / "here/traces").iterdir())
    theirs = sorted((tmp_path / "dev/traces").iterdir())
    assert [p.name for p in mine] == [p.name for p in theirs] and len(mine) == 2
    for a, b in zip(mine, theirs, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name


def test_base_install_changes_nothing_lerobot_installed(tmp_path):
    """pip's own resolver, asked to install robosafe (the base install, from this checkout)
    here: it would install robosafe and nothing else, so every version lerobot installed
    stays (before this, robosafe's pyarrow < 22 would have replaced lerobot's pyarrow 26)."""
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet",
                           "--report", str(report), str(REPO)], capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    would = [i["metadata"]["name"] for i in json.loads(report.read_text())["install"]]
    assert would == ["robosafe"], would


def test_learned_policy_loop_at_ci_size(tmp_path):
    """collect -> lerobot-train (a few steps) -> robosafe run --policy lerobot:CKPT -> score
    -> audit paired -> report, for a careful and a careless dataset; SR may be anything."""
    out = tmp_path / "lp"
    proc = subprocess.run([sys.executable, str(REPO / "scripts/learned_policy.py"), "--out",
                           str(out), "--demos", "2", "--steps", "4", "--batch", "4", "--dim",
                           "32", "--chunk", "5", "--seeds", "2", "--horizon", "20",
                           "--styles", "careful,careless"], capture_output=True, text=True,
                          timeout=1200, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["runs"]) == {"eval-careful", "eval-careless"}
    for name, run in summary["runs"].items():
        assert run["n"] == 2, name
        assert 0.0 <= run["sr"] <= 1.0 and len(run["safety_ci"]) == 2
        cfg = json.loads((out / name / "run.json").read_text())
        assert cfg["policy"].startswith("lerobot:") and cfg["policy"].endswith(
            "checkpoints/last/pretrained_model")
    assert summary["paired_success"]["samples"] == 2  # careful vs careless on seeds 0, 1
    assert (out / "report.html").stat().st_size > 10_000
    for style in ("careful", "careless"):
        ckpt = out / f"train-{style}/checkpoints/last/pretrained_model"
        assert (ckpt / "model.safetensors").is_file() and (ckpt / "train_config.json").is_file()
