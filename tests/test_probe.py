"""The shortcut probe's parts (paper 002 Sec. 3, App. A.1): inputs, augmentation, checkpoints,
seeded and resumable training, the policy's chunked deployment; the data-source distance."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from robosafe.audit.datasource import displacement, train_test_distance
from robosafe.audit.shortcut import (
    Demos,
    action_chunks,
    augment,
    checkpoint_steps,
    rates,
    solved_tasks,
    train_probe,
)
from robosafe.errors import RobosafeError
from robosafe.policies.base import make_policy, policy_kind
from robosafe.policies.probe import (
    ProbeNet,
    ProbePolicy,
    load_net,
    probe_config,
    read_checkpoint,
    save_checkpoint,
    to_model_images,
)


def test_action_chunks_pad_with_the_last_action():
    a = np.array([[1.0], [2.0], [3.0]])
    assert action_chunks(a, 2)[:, :, 0].tolist() == [[1, 2], [2, 3], [3, 3]]
    assert action_chunks(a, 4)[2, :, 0].tolist() == [3, 3, 3, 3]


def test_checkpoint_steps_end_at_the_last_step():
    assert checkpoint_steps(10, 3) == [3, 7, 10]
    assert checkpoint_steps(2000, 3) == [667, 1333, 2000]
    assert checkpoint_steps(2, 3) == [1, 2]
    assert checkpoint_steps(5, 1) == [5]


def test_area_resize_averages_blocks():
    img = np.zeros((4, 4, 3), np.uint8)
    img[:2, :2] = 10
    img[:2, 2:] = [20, 30, 40]
    img[2:, :2] = 100
    img[2:, 2:] = 255
    out = to_model_images(img, 2)
    assert out.shape == (3, 2, 2) and out.dtype == torch.uint8
    assert out[:, 0, 0].tolist() == [10, 10, 10]
    assert out[:, 0, 1].tolist() == [20, 30, 40]
    assert out[:, 1, 1].tolist() == [255, 255, 255]
    # a batch of views keeps its leading axes; the model's own size is left alone
    assert to_model_images(np.stack([img, img]), 4).shape == (2, 3, 4, 4)


def test_shift_augmentation_is_a_crop_of_the_edge_padded_image():
    cfg = probe_config(augment={"shift_px": 2, "erase_p": 0.0, "erase_max": 0.2})
    rng = np.random.default_rng(0)
    imgs = torch.as_tensor(rng.integers(0, 256, (3, 2, 3, 8, 8), dtype=np.uint8))
    out = augment(imgs, torch.Generator().manual_seed(1), cfg)
    padded = torch.nn.functional.pad(imgs.reshape(6, 3, 8, 8).float() / 255, (2,) * 4,
                                     mode="replicate")
    for k, img in enumerate(out.reshape(6, 3, 8, 8)):
        hits = [(dy, dx) for dy in range(5) for dx in range(5)
                if torch.equal(padded[k, :, dy:dy + 8, dx:dx + 8], img)]
        assert hits, f"image {k} is not a shifted crop"


def test_erasing_paints_one_grey_rectangle():
    cfg = probe_config(augment={"shift_px": 0, "erase_p": 1.0, "erase_max": 0.5})
    imgs = torch.zeros((4, 1, 3, 10, 10), dtype=torch.uint8)
    out = augment(imgs, torch.Generator().manual_seed(3), cfg)
    for img in out.reshape(4, 3, 10, 10):
        grey = (img[0] == 0.5)
        ys, xs = torch.nonzero(grey, as_tuple=True)
        assert len(ys) > 0
        box = grey[ys.min():ys.max() + 1, xs.min():xs.max() + 1]
        assert bool(box.all())  # a filled rectangle
        assert box.shape[0] <= 6 and box.shape[1] <= 6  # side <= 0.5 * 10 + 1
        assert torch.equal(img[0], img[1]) and torch.equal(img[1], img[2])


def _meta(cfg, tasks=("a", "b")):
    return {"config": cfg, "tasks": list(tasks), "state_dim": 8, "action_dim": 7,
            "state_mean": [0.0] * 8, "state_std": [1.0] * 8,
            "action_mean": [0.5, -2.0, 0, 0, 0, 0, 0], "action_std": [1.0] * 7}


def test_checkpoint_round_trip_and_refusals(tmp_path):
    cfg = probe_config()
    torch.manual_seed(0)
    net = ProbeNet(cfg, 2, 8, 7)
    path = save_checkpoint(tmp_path / "p.safetensors", net, _meta(cfg))
    loaded, meta = load_net(path)
    assert meta["tasks"] == ["a", "b"] and meta["format"] == "robosafe-probe/1"
    for k, v in net.state_dict().items():
        assert torch.equal(loaded.state_dict()[k], v)
    # a pickle is never loaded, whatever its name
    import pickle

    bad = tmp_path / "evil.safetensors"
    bad.write_bytes(pickle.dumps({"x": 1}))
    with pytest.raises(RobosafeError, match="not a safetensors probe checkpoint"):
        read_checkpoint(bad)
    from safetensors.torch import save_file

    other = tmp_path / "other.safetensors"
    save_file({"w": torch.zeros(2)}, str(other))
    with pytest.raises(RobosafeError, match="without robosafe probe metadata"):
        read_checkpoint(other)


def test_policy_plays_chunks_and_looks_tasks_up_by_id(tmp_path):
    cfg = probe_config(chunk=4, execute=3)
    net = ProbeNet(cfg, 2, 8, 7)
    with torch.no_grad():  # the head outputs 0 (normalised): actions are the action mean
        net.head[-1].weight.zero_()
        net.head[-1].bias.zero_()
    path = save_checkpoint(tmp_path / "p.safetensors", net, _meta(cfg))
    assert policy_kind(f"probe:{path}") == "probe"
    pol = make_policy(f"probe:{path}")
    assert isinstance(pol, ProbePolicy)
    with pytest.raises(RobosafeError, match="task 'c' was not in its training data"):
        pol.reset({"task_id": "c", "action_dim": 7})
    pol.reset({"task_id": "b", "action_dim": 7, "instruction": "ignored"})
    assert pol.task == 1
    calls = []
    forward = pol.net.forward
    pol.net.forward = lambda *a: calls.append(1) or forward(*a)
    obs = {"robot0_eef_pos": np.zeros(3), "robot0_eef_quat": np.array([0, 0, 0, 1.0]),
           "robot0_gripper_qpos": np.zeros(2),
           "agentview_image": np.zeros((32, 32, 3), np.uint8),
           "robot0_eye_in_hand_image": np.zeros((32, 32, 3), np.uint8)}
    acts, chunks = [], []
    for _ in range(7):
        acts.append(pol.act(obs))
        chunks.append(pol.action_chunk())
    assert len(calls) == 3  # steps 0, 3, 6
    # what the shield predicts with: the action just played and the rest of its chunk
    assert [len(c) for c in chunks] == [3, 2, 1, 3, 2, 1, 3]
    assert all(c[0] is a for c, a in zip(chunks, acts, strict=True))
    # mean (0.5, -2.0, 0...) clipped to the action box
    assert acts[0].tolist() == [0.5, -1.0, 0, 0, 0, 0, 0]
    with pytest.raises(RobosafeError, match="no image of agentview"):
        pol.reset({"task_id": "a", "action_dim": 7})
        pol.act({k: v for k, v in obs.items() if k != "agentview_image"})


def _demos(n=48, tasks=("a", "b"), seed=0):
    rng = np.random.default_rng(seed)
    return Demos(images=torch.as_tensor(rng.integers(0, 256, (n, 2, 3, 64, 64), np.uint8)),
                 state=rng.normal(size=(n, 8)).astype(np.float32),
                 chunks=rng.normal(size=(n, 10, 7)).astype(np.float32),
                 task=rng.integers(0, len(tasks), n), tasks=list(tasks), episodes=4,
                 fingerprint="test")


def _weights(path):
    return {k: v for k, v in read_checkpoint(path)[1].items() if k.startswith("model.")}


@pytest.mark.slow
def test_training_is_seeded_and_resumes_exactly_after_ctrl_c(tmp_path):
    cfg = probe_config(batch=8, save_every=2, checkpoints=2)
    demos = _demos()
    straight = train_probe(demos, tmp_path / "a", cfg=cfg, steps=6, seed=0)
    assert [s for s, _ in straight.checkpoints] == [3, 6]
    again = train_probe(demos, tmp_path / "a2", cfg=cfg, steps=6, seed=0)
    final_a = _weights(straight.checkpoints[-1][1])
    for k, v in _weights(again.checkpoints[-1][1]).items():
        assert torch.equal(v, final_a[k])

    def interrupt(done, total, loss):
        if done == 3:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C mid-run: the step finishes, state saved

    with pytest.raises(KeyboardInterrupt):
        train_probe(demos, tmp_path / "b", cfg=cfg, steps=6, seed=0, on_step=interrupt)
    assert read_checkpoint(tmp_path / "b" / "train_state.safetensors")[0]["step"] == 3
    resumed = train_probe(demos, tmp_path / "b", cfg=cfg, steps=6, seed=0)
    assert resumed.resumed_from == 3
    for k, v in _weights(resumed.checkpoints[-1][1]).items():
        assert torch.equal(v, final_a[k]), k
    # another seed trains other weights; its state is not resumed from this one
    other = train_probe(demos, tmp_path / "c", cfg=cfg, steps=6, seed=1)
    assert any(not torch.equal(v, final_a[k])
               for k, v in _weights(other.checkpoints[-1][1]).items())
    with pytest.raises(RobosafeError, match="training state of another seed"):
        train_probe(demos, tmp_path / "b", cfg=cfg, steps=6, seed=1)


@pytest.mark.slow
def test_training_lowers_the_loss_on_a_learnable_mapping(tmp_path):
    """Actions that are a function of the task index alone: the probe must fit them."""
    # three blocks of 20 steps; measured: the last block's mean loss is 0.7 % of the first's
    cfg = probe_config(batch=16, save_every=20, checkpoints=1, lr=1e-3)
    d = _demos(n=32)
    d.chunks = np.where(d.task[:, None, None] == 0, 1.0, -1.0).astype(np.float32) \
        * np.ones((1, 10, 7), np.float32)
    tr = train_probe(d, tmp_path / "t", cfg=cfg, steps=60, seed=0)
    assert len(tr.losses) == 3
    assert tr.losses[-1] < 0.05 * tr.losses[0]


def test_rates_and_solved_rule_by_hand():
    rows = [{"task_id": "a", "success": 1}, {"task_id": "a", "success": 0},
            {"task_id": "b", "success": 1}, {"task_id": "b", "success": 1, "error_type": "X"}]
    r = rates(rows)
    assert (r["successes"], r["episodes"], r["crashed"]) == (2, 4, 1)
    assert r["tasks"]["a"]["sr"] == 0.5 and r["tasks"]["b"]["sr"] == 0.5
    lo, hi = r["tasks"]["a"]["ci"]  # Wilson 1/2 at 95 %: 0.0945, 0.9055
    assert abs(lo - 0.09453) < 1e-4 and abs(hi - 0.90547) < 1e-4
    demo = {"tasks": {"a": {"sr": 0.6}, "b": {"sr": 0.7}}}
    assert solved_tasks(r, demo) == ["a"]  # 0.5 >= 0.8 * 0.6, 0.5 < 0.8 * 0.7


def test_train_test_distance_by_hand():
    a = {"cup": np.array([0.0, 0.0]), "plate": np.array([0.1, 0.0])}
    b = {"cup": np.array([0.03, 0.04]), "plate": np.array([0.1, 0.01]), "extra": np.zeros(2)}
    assert displacement(a, b) == pytest.approx(0.05)
    train = {("t", 0): a}
    test = {("t", 0): b, ("t", 1): {"cup": np.array([0.0, 0.02]), "plate": np.array([0.1, 0.0])},
            ("u", 0): a}
    d = train_test_distance(train, test)
    assert d == {"median_m": pytest.approx(0.02), "max_m": pytest.approx(0.02), "episodes": 1}
    with pytest.raises(RobosafeError):
        displacement({"x": np.zeros(2)}, {"y": np.zeros(2)})


def test_data_source_training_follows_app_a3_by_default():
    """App. A.3: "image augmentation is disabled", "no checkpoint selection", one policy per
    task; --augment keeps probe.yaml's shift 4 px / erasing 0.25, --multi-task one probe."""
    from robosafe.audit.datasource import policy_groups, training_config

    base = probe_config()
    off = training_config(base, augment=False)
    assert off["checkpoints"] == 1
    assert (off["augment"]["shift_px"], off["augment"]["erase_p"]) == (0, 0.0)
    imgs = torch.as_tensor(np.random.default_rng(0).integers(0, 256, (3, 2, 3, 8, 8),
                                                             dtype=np.uint8))
    # disabled means the training images are the frames themselves, scaled to [0, 1]
    assert torch.equal(augment(imgs, torch.Generator().manual_seed(1), off),
                       imgs.float() / 255.0)
    on = training_config(base, augment=True)
    assert (on["augment"]["shift_px"], on["augment"]["erase_p"]) == (4, 0.25)
    assert base["checkpoints"] == 3  # the shortcut probe's own setting is left alone
    assert policy_groups(["b", "a"], per_task=True) == {"b": ["b"], "a": ["a"]}
    assert policy_groups(["a", "b"], per_task=False) == {"all": ["a", "b"]}


def test_task_demos_keeps_one_tasks_frames():
    """5 frames, tasks [a, b, a, b, b] from 1 + 2 episodes: task b keeps frames 1, 3, 4, its
    own index 0, its episode count 2 and its seeds."""
    from robosafe.audit.shortcut import task_demos

    d = _demos(n=5)
    d.task = np.array([0, 1, 0, 1, 1])
    d.per_task, d.seeds = {"a": 1, "b": 2}, {"a": [7], "b": [8, 9]}
    b = task_demos(d, "b")
    assert b.tasks == ["b"] and b.task.tolist() == [0, 0, 0]
    assert torch.equal(b.images, d.images[[1, 3, 4]])
    assert np.array_equal(b.state, d.state[[1, 3, 4]])
    assert np.array_equal(b.chunks, d.chunks[[1, 3, 4]])
    assert (b.episodes, b.seeds, b.per_task) == (2, {"b": [8, 9]}, {"b": 2})
    assert b.fingerprint == "test:b"
    with pytest.raises(RobosafeError, match="no successful demonstration of task c"):
        task_demos(d, "c")
