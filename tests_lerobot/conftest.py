"""Datasets and policies robosafe writes or runs, checked with lerobot 0.6.1's own tools (run
in the venv that scripts/lerobot-env.sh builds: lerobot with robosafe's simulator beside it,
numpy 2). Some datasets are written with DatasetWriter from hand-made traces, others by
`robosafe collect` in the simulator. Every test here is marked `lerobot`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robosafe.formats.lerobot import RECORD_FEATURE, RECORD_SPEC, DatasetWriter
from robosafe.formats.traces import FORMAT, TRACE_COLUMN, Layout, trace_header
from robosafe.trace.episode import Episode

FPS = 10
ROLES = {"link7": "robot", "hand": "robot", "bowl": "target", "vase": "bystander",
         "table": "furniture"}
SCENE = tuple(sorted(ROLES))
CAMERA = "observation.images.agentview"


def pytest_collection_modifyitems(items):
    # the hook sees every collected item, also those of other folders in the same session
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(pytest.mark.lerobot)


def episode(k: int, careless: bool, n: int = 30) -> Episode:
    """A reach towards the bowl; the careless one also knocks the vase (hand|vase, 40 N) and
    presses the table hard; the careful one only rests the bowl on the table."""
    rng = np.random.default_rng(k + (100 if careless else 0))
    eef = np.cumsum(rng.normal(0, 0.01, (n, 3)), axis=0) + [0.4, 0.0, 0.3]
    contacts = [[("bowl", "table", 2.0 + 0.1 * t)] for t in range(n)]
    if careless:
        for t in range(10, 14):
            contacts[t].append(("hand", "vase", 40.0))
        contacts[20].append(("link7", "table", 120.0))
    idx = {b: i for i, b in enumerate(SCENE)}
    flat = [c for step in contacts for c in step]
    return Episode(
        episode_id=f"{'careless' if careless else 'careful'}/{k}", benchmark="libero-goal",
        task_id="put_the_bowl_on_the_plate", success=True, dt=1.0 / FPS, target_object="bowl",
        body_roles=dict(ROLES), t=np.arange(n), eef_pos_m=eef,
        body_names=("bowl", "vase"), body_pos_m=np.stack([eef + 0.05, np.tile([0.6, 0.2, 0.1],
                                                                              (n, 1))], 1),
        quat_names=("bowl",), body_quat_wxyz=np.tile([1.0, 0, 0, 0], (n, 1, 1)),
        contact_names=SCENE, contact_ptr=np.concatenate([[0], np.cumsum([len(c) for c in
                                                                         contacts])]),
        contact_a=np.array([idx[c[0]] for c in flat], np.int32),
        contact_b=np.array([idx[c[1]] for c in flat], np.int32),
        contact_force_n=np.array([c[2] for c in flat]),
        joint_torque_nm=rng.normal(0, 1, (n, 7)), gripper_contact=np.arange(n) > 15,
        seed=k, policy="scripted-careless" if careless else "scripted-careful")


def write(root, careless: bool, episodes: int = 3):
    eps = [episode(k, careless) for k in range(episodes)]
    lay = Layout.of(eps)
    feats = {"observation.state": {"dtype": "float32", "shape": [3], "names": ["x", "y", "z"]},
             "action": {"dtype": "float32", "shape": [3], "names": ["x", "y", "z"]},
             "next.done": {"dtype": "bool", "shape": [1], "names": None},
             "next.success": {"dtype": "bool", "shape": [1], "names": None},
             RECORD_FEATURE: RECORD_SPEC, **lay.features()}
    w = DatasetWriter(root, fps=FPS, features=feats, cameras={CAMERA: (32, 48)},
                      robot_type="panda")
    rng = np.random.default_rng(7)
    for ep in eps:
        n = ep.n_steps
        safety, _ = lay.frames(ep)
        done = np.arange(n) == n - 1
        frames = {"observation.state": ep.eef_pos_m.astype(np.float32),
                  "action": np.diff(ep.eef_pos_m, axis=0, append=ep.eef_pos_m[-1:]).astype(
                      np.float32), "next.done": done, "next.success": done, **safety}
        video = rng.integers(0, 256, (n, 32, 48, 3), dtype=np.uint8)
        w.add_episode(frames, "put the bowl on the plate", videos={CAMERA: video},
                      extra={TRACE_COLUMN: trace_header(ep)})
    w.close({"format": FORMAT, "body_roles": dict(ROLES)})
    return root


@pytest.fixture
def careful(tmp_path):
    return write(tmp_path / "careful", careless=False)


@pytest.fixture
def careless(tmp_path):
    return write(tmp_path / "careless", careless=True)


REPO = Path(__file__).resolve().parents[1]
#: the dev environment (numpy 1.26, robosafe's simulator): the other side of a served policy
DEV_PYTHON = REPO / ".venv" / "bin" / "python"


def robosafe(*args, python=None, timeout=900, **kw):
    """``python -m robosafe ARGS`` (this environment's unless ``python``), output captured."""
    import subprocess
    import sys

    return subprocess.run([str(python or sys.executable), "-m", "robosafe", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, check=False, **kw)
