"""The base install lane: robosafe installed with no extras (``pip install .``), in its own
virtualenv, as a user who only scores rollouts has it.

The main test suite installs the dev extra, which brings pandas, PyAV, ray and more; a code path
that needs one of them without declaring it passes there and fails here.
"""

import json
import math
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest

import robosafe
from robosafe.cli.score import example_paths
from robosafe.trace.io import iter_episodes, write_episodes


def cli(*args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "robosafe", *args], capture_output=True,
                          text=True, timeout=300, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.mark.parametrize("module", ["pandas", "mujoco", "robosuite", "torch", "av", "ray"])
def test_lane_has_no_extras(module):
    """Guards the lane itself: were any of these installed, the tests below would prove nothing
    about the base install."""
    assert find_spec(module) is None, f"{module} is installed in the base lane"
    assert "site-packages" in robosafe.__file__  # the installed wheel, not the checkout


def _aggregate(path: Path) -> dict:
    proc = cli("score", str(path), "--json", "--bootstrap", "200")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["aggregate"]


def test_score_parquet_and_jsonl_agree(tmp_path):
    """The shipped Parquet example scores without pandas, and gives the same cell numbers as the
    same episodes written as JSON lines (a second reader of the same records)."""
    (parquet,) = [p for p in example_paths() if p.suffix == ".parquet"]
    episodes = list(iter_episodes(parquet))
    jsonl = tmp_path / "same.jsonl"
    write_episodes(jsonl, episodes)
    a, b = _aggregate(parquet), _aggregate(jsonl)
    assert a == b
    assert a["n"] == len(episodes) == a["n_scored"]
    assert round(a["sr"] * a["n"]) == sum(e.success for e in episodes)


def test_stats_wilson_by_hand():
    """Wilson 95% interval of 167/200, worked out from the formula here."""
    proc = cli("stats", "wilson", "167", "200", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    z, n, p = 1.959963984540054, 200, 167 / 200
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    lo, hi = out["ci"]
    assert lo == pytest.approx(centre - half, abs=1e-9)
    assert hi == pytest.approx(centre + half, abs=1e-9)


def test_specs_list_json():
    proc = cli("specs", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)


def test_score_foreign_lerobot_dataset(tmp_path):
    """A LIBERO-layout LeRobot dataset (no cameras) written here: two episodes, one successful."""
    from robosafe.formats.lerobot import DatasetWriter

    feats = {"observation.state": {"dtype": "float32", "shape": [8], "names": None},
             "action": {"dtype": "float32", "shape": [7], "names": None},
             "next.success": {"dtype": "bool", "shape": [1], "names": None}}
    w = DatasetWriter(tmp_path / "ds", fps=10, features=feats)
    rng = np.random.default_rng(0)
    for ok in (True, False):
        n = 30
        state = np.zeros((n, 8), np.float32)
        state[:, :3] = np.cumsum(rng.normal(0, 0.001, (n, 3)), 0) + [0.1, 0.0, 1.0]
        w.add_episode({"observation.state": state,
                       "action": np.zeros((n, 7), np.float32),
                       "next.success": np.r_[np.zeros(n - 1, bool), [ok]]},
                      task="put the bowl on the plate")
    w.close()
    proc = cli("score", str(tmp_path / "ds"), "--json", "--bootstrap", "200")
    assert proc.returncode in (0, 2), proc.stderr
    agg = json.loads(proc.stdout)["aggregate"]
    # eef positions only: no safety spec is active, so SR over scored episodes has none
    assert agg["n"] == 2 and agg["sr_all"] == 0.5 and agg["n_scored"] == 0
