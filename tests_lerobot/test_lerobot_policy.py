"""LeRobot checkpoints as robosafe policies (``--policy lerobot:DIR``), against lerobot 0.6.1's
own code: the checkpoint is written by lerobot's own ``save_pretrained`` (an ACT policy, no
pretrained backbone), robosafe's actions equal those of the loop ``lerobot-eval`` runs
(processors, ``select_action`` and its chunk queue) on the same observations, and the same
checkpoint served from this environment (numpy 2) to a run in the dev environment (numpy
1.26) gives the same actions as in-process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import DEV_PYTHON, robosafe
from lerobot.configs.types import FeatureType, PolicyFeature
from lerobot.policies.act.configuration_act import ACTConfig
from lerobot.policies.act.modeling_act import ACTPolicy
from lerobot.policies.factory import make_pre_post_processors
from safetensors.torch import load_file, save_file

from robosafe.errors import RobosafeError
from robosafe.policies.base import make_policy

SIZE = 32
STEPS = 5  # n_action_steps: a chunk of 10 predicted, 5 played
TASK = ("--suite", "demo", "--task-id", "place_lemon_in_bowl")


def write_checkpoint(root: Path, *, images=("agentview",), state: int = 8) -> Path:
    torch.manual_seed(0)
    inputs = {"observation.state": PolicyFeature(FeatureType.STATE, (state,))}
    inputs |= {f"observation.images.{c}": PolicyFeature(FeatureType.VISUAL, (3, SIZE, SIZE))
               for c in images}
    cfg = ACTConfig(input_features=inputs,
                    output_features={"action": PolicyFeature(FeatureType.ACTION, (7,))},
                    dim_model=32, n_heads=2, dim_feedforward=64, n_encoder_layers=1,
                    n_decoder_layers=1, chunk_size=10, n_action_steps=STEPS, use_vae=False,
                    pretrained_backbone_weights=None, device="cpu")
    stats = {"observation.state": {"mean": np.full(state, 0.1), "std": np.full(state, 0.5)},
             "action": {"mean": np.zeros(7), "std": np.full(7, 0.3)}}
    stats |= {f"observation.images.{c}": {"mean": np.full((3, 1, 1), 0.5),
                                          "std": np.full((3, 1, 1), 0.25)} for c in images}
    policy = ACTPolicy(cfg)
    pre, post = make_pre_post_processors(cfg, dataset_stats=stats)
    for part in (policy, pre, post):
        part.save_pretrained(root)
    return root


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_checkpoint(tmp_path_factory.mktemp("act") / "pretrained_model")


def observations(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"agentview_image": rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8),
             "robot0_eef_pos": rng.normal(0, 0.2, 3), "robot0_eef_quat": [0.0, 0.0, 0.0, 1.0],
             "robot0_gripper_qpos": rng.normal(0, 0.01, 2)} for _ in range(n)]


def test_actions_are_lerobots_own(checkpoint):
    """robosafe's policy against the lerobot-eval loop written here with lerobot's own
    pieces: preprocess_observation's image layout, the saved processors, select_action."""
    from lerobot.envs.utils import preprocess_observation

    obs = observations(12)
    mine = make_policy(f"lerobot:{checkpoint}")
    mine.reset({"action_dim": 7, "instruction": "Put the lemon in the bowl"})
    calls = []
    inner = mine.policy.predict_action_chunk
    mine.policy.predict_action_chunk = lambda b, **k: calls.append(1) or inner(b, **k)
    got = np.stack([mine.act(o) for o in obs])
    assert len(calls) == 12 // STEPS + 1  # a chunk every n_action_steps steps, as lerobot

    ref = ACTPolicy.from_pretrained(str(checkpoint))
    pre, post = make_pre_post_processors(ref.config, pretrained_path=str(checkpoint))
    ref.reset()
    want = []
    for o in obs:
        from robosafe.policies.remote import state_row

        env_obs = {"pixels": {"agentview": o["agentview_image"][None]},
                   "agent_pos": state_row(o)[None].astype(np.float32)}
        batch = preprocess_observation(env_obs)
        batch["task"] = ["Put the lemon in the bowl"]
        with torch.inference_mode():
            want.append(post(ref.select_action(pre(batch))).numpy().reshape(-1))
    np.testing.assert_allclose(got, np.stack(want), rtol=0, atol=1e-6)


def test_in_process_and_served_are_the_same_episode(checkpoint, tmp_path):
    """The same checkpoint, in-process in this environment and served from it to a run in the
    dev environment over ws://: the same actions, step for step."""
    here = robosafe("run", *TASK, "--policy", f"lerobot:{checkpoint}", "-n", 1, "--horizon", 25,
                    "--image-size", SIZE, "--out", tmp_path / "here", "-j", 1)
    assert here.returncode == 0, here.stderr[-2000:]
    assert DEV_PYTHON.is_file(), "the dev environment (.venv) is the other side of this test"
    server = subprocess.Popen([sys.executable, "-m", "robosafe", "serve-policy",
                               f"lerobot:{checkpoint}", "--port", "0", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        hello = json.loads(server.stdout.readline())
        assert hello["policy"] == "lerobot-act:pretrained_model"
        there = robosafe("run", *TASK, "--policy", hello["url"], "-n", 1, "--horizon", 25,
                         "--image-size", SIZE, "--out", tmp_path / "there", "-j", 1,
                         python=DEV_PYTHON)
        assert there.returncode == 0, there.stderr[-2000:]
    finally:
        server.terminate()
        server.wait(30)
    a = np.load(next((tmp_path / "here/actions").glob("*.npy")))
    b = np.load(next((tmp_path / "there/actions").glob("*.npy")))
    assert a.shape == (25, 7)
    np.testing.assert_array_equal(a, b)


def _one_line(proc, *needles):
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("robosafe: error")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


@pytest.mark.parametrize("case", ["not-a-checkpoint", "wrong-weights", "unknown-type",
                                  "state-width", "no-images", "adapter"])
def test_bad_checkpoints_are_one_line_before_any_episode(checkpoint, tmp_path, case):
    ck, extra = _copy(checkpoint, tmp_path / "ck"), []
    needles = [f"lerobot:{ck}"]
    if case == "not-a-checkpoint":
        (ck / "model.safetensors").unlink()
        needles.append("no model.safetensors")
    elif case == "wrong-weights":
        cfg = json.loads((ck / "config.json").read_text())
        cfg["dim_model"] = 48
        (ck / "config.json").write_text(json.dumps(cfg))
        needles.append("do not load into its act config")
    elif case == "unknown-type":
        cfg = json.loads((ck / "config.json").read_text())
        cfg["type"] = "no_such_policy"
        (ck / "config.json").write_text(json.dumps(cfg))
        needles.append("no_such_policy")
    elif case == "state-width":
        write_checkpoint(tmp_path / "wide", state=9)
        ck = tmp_path / "wide"
        needles = [f"lerobot:{ck}", "observation.state has 9 values", "host gives 8"]
    elif case == "no-images":
        extra = ["--no-images"]
        needles.append("run with --images")
    else:
        extra = ["--obs-adapter", "lerobot-libero"]
        needles += ["observation.images.agentview", "lerobot-libero"]
    out = tmp_path / "run"
    proc = robosafe("run", *TASK, "--policy", f"lerobot:{ck}", "-n", 1, "--horizon", 5,
                    "--image-size", SIZE, "--out", out, *extra)
    _one_line(proc, *needles)
    assert not out.exists()  # refused before the run directory


def test_a_nan_policy_is_refused_before_any_episode(checkpoint, tmp_path):
    ck = _copy(checkpoint, tmp_path / "nan")
    tensors = load_file(ck / "model.safetensors")
    tensors = {k: torch.full_like(v, float("nan")) if v.is_floating_point() else v
               for k, v in tensors.items()}
    save_file(tensors, ck / "model.safetensors")
    proc = robosafe("run", *TASK, "--policy", f"lerobot:{ck}", "-n", 1, "--horizon", 5,
                    "--image-size", SIZE, "--out", tmp_path / "run")
    _one_line(proc, f"lerobot:{ck}", "non-finite action")


def test_serve_policy_refuses_a_bad_checkpoint(tmp_path):
    proc = robosafe("serve-policy", f"lerobot:{tmp_path}", "--port", "0")
    _one_line(proc, f"lerobot:{tmp_path}", "not a LeRobot checkpoint")


def test_make_policy_names_a_missing_folder(tmp_path):
    with pytest.raises(RobosafeError, match="not a folder"):
        make_policy(f"lerobot:{tmp_path / 'nope'}")
