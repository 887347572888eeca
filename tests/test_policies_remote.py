"""Remote policies over openpi's websocket + msgpack-numpy protocol: real servers on
loopback (robosafe's PolicyServer, or a bare websockets server for misbehaving ones)."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import socket
import subprocess
import sys
import threading
import time

import msgpack
import numpy as np
import pytest
from conftest import run_robosafe

from robosafe.errors import RobosafeError
from robosafe.policies.base import RandomPolicy, make_policy
from robosafe.policies.remote import RemotePolicy, packb, unpackb, wire_observation
from robosafe.policies.server import PolicyServer

TASK = {"instruction": "put the mug on the plate", "task_id": "t", "seed": 5, "action_dim": 7,
        "objects": {"mug": {"category": "mug", "half_extents": [0.04, 0.04, 0.05]}}}


class ObsPolicy:
    """Actions that depend on every kind of observation value (so a lossy wire shows)."""

    name = "obs-dependent"

    def reset(self, task_info):
        self.k = 0

    def act(self, obs):
        self.k += 1
        img = obs["agentview_image"]
        return np.array([obs["robot0_eef_pos"].sum(), obs["robot0_gripper_qpos"].astype(float)
                         .prod(), img.astype(float).mean(), float(img[3, 5, 1]),
                         obs["depth"].astype(float).std(), float(obs["count"]), self.k])


class Recorder:
    name = "recorder"

    def __init__(self, action=None):
        self.seen, self.tasks = [], []
        self.action = np.zeros(7) if action is None else action

    def reset(self, task_info):
        self.tasks.append(task_info)

    def act(self, obs):
        self.seen.append(obs)
        return self.action


class Chunker:
    name = "chunker"

    def __init__(self):
        self.calls = 0

    def reset(self, task_info):
        pass

    def act(self, obs):
        self.calls += 1
        return np.arange(28, dtype=np.float32).reshape(4, 7) + 100 * self.calls


class Failing:
    name = "failing"

    def reset(self, task_info):
        pass

    def act(self, obs):
        raise ValueError("boom in the policy")


def _obs(rng, t=0):
    return {"robot0_eef_pos": rng.normal(size=3),
            "robot0_gripper_qpos": rng.normal(size=2).astype(np.float32),
            "robot0_joint_pos": rng.normal(size=7).astype(np.float32),
            "agentview_image": rng.integers(0, 256, (16, 12, 3), dtype=np.uint8),
            "depth": rng.random((4, 5)).astype(np.float32),
            "count": np.int64(t), "flag": True, "label": "x",
            "nested": {"a": 1}, "nothing": None, "objs": ["mug"]}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def raw_server(handler):
    """A bare websockets server running ``handler(connection)`` per client."""
    from websockets.sync.server import serve

    srv = serve(handler, "127.0.0.1", 0, compression=None, max_size=None)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"ws://127.0.0.1:{srv.socket.getsockname()[1]}"
    finally:
        srv.shutdown()
        thread.join(5)


def _metadata_then(reply):
    """A handler that sends metadata, then answers each message with ``reply(raw)`` (None:
    never answer)."""

    def handler(ws):
        ws.send(packb({"policy": "raw"}))
        for raw in ws:
            out = reply(raw)
            if out is not None:
                ws.send(out)

    return handler


# -- round trips ---------------------------------------------------------------------------------
def test_round_trip_matches_local_policy():
    rng = np.random.default_rng(0)
    observations = [_obs(rng, t) for t in range(5)]
    local = ObsPolicy()
    local.reset(TASK)
    expected = [local.act(o) for o in observations]
    with PolicyServer(ObsPolicy()) as srv, RemotePolicy(srv.url, timeout_s=10) as remote:
        remote.reset(TASK)
        got = [remote.act(o) for o in observations]
        assert srv.requests == 5 and srv.resets == 1
    for a, b in zip(got, expected, strict=True):
        assert np.array_equal(a, b), (a, b)


def test_random_policy_served_gives_the_local_stream():
    with PolicyServer(RandomPolicy()) as srv, RemotePolicy(srv.url) as remote:
        assert remote.connect()["policy"] == "random"
        for seed in (1, 2):
            task = {**TASK, "seed": seed}
            local = RandomPolicy()
            local.reset(task)
            remote.reset(task)  # forwarded: the served policy reseeds
            for _ in range(3):
                assert np.array_equal(remote.act({}), local.act({}))


def test_factory_gives_each_connection_its_own_policy():
    """Two runner workers on one server keep separate episodes (interleaved requests)."""
    with (PolicyServer(RandomPolicy) as srv, RemotePolicy(srv.url) as a,
          RemotePolicy(srv.url) as b):
        assert a.connect()["policy"] == "random"
        ta, tb = {**TASK, "seed": 1}, {**TASK, "seed": 2}
        la, lb = RandomPolicy(), RandomPolicy()
        for remote, local, task in ((a, la, ta), (b, lb, tb)):
            remote.reset(task)
            local.reset(task)
        for _ in range(3):
            assert np.array_equal(a.act({}), la.act({}))
            assert np.array_equal(b.act({}), lb.act({}))


def test_server_sees_observations_exactly_with_prompt():
    rng = np.random.default_rng(1)
    obs = _obs(rng)
    rec = Recorder()
    with PolicyServer(rec) as srv, RemotePolicy(srv.url) as remote:
        remote.reset(TASK)
        remote.act(obs)
    assert rec.tasks == [TASK]
    seen = rec.seen[0]
    assert seen["prompt"] == TASK["instruction"]
    assert set(seen) == {"robot0_eef_pos", "robot0_gripper_qpos", "robot0_joint_pos",
                         "agentview_image", "depth", "count", "flag", "label", "prompt"}
    for key in ("robot0_eef_pos", "robot0_gripper_qpos", "robot0_joint_pos",
                "agentview_image", "depth"):
        assert seen[key].dtype == obs[key].dtype and np.array_equal(seen[key], obs[key])
        seen[key][...] = 0  # decoded arrays are writable copies
    assert seen["count"] == 0 and seen["count"].dtype == np.int64


def test_float_images_become_uint8():
    obs = {"agentview_image": np.full((2, 2, 3), 0.5, np.float32)}
    img = wire_observation(obs)["agentview_image"]
    assert img.dtype == np.uint8 and np.all(img == 128)


def test_chunks_are_handed_out_one_per_act():
    pol = Chunker()
    with PolicyServer(pol) as srv, RemotePolicy(srv.url) as remote:
        remote.reset(TASK)
        acts = [remote.act({}) for _ in range(12)]
        assert srv.requests == 3 == pol.calls == remote.requests
        first = np.arange(28).reshape(4, 7) + 100
        assert all(np.array_equal(acts[i], first[i]) for i in range(4))
        assert np.array_equal(acts[4], first[0] + 100)
        remote.reset(TASK)  # drops the rest of a chunk
        remote.act({})
        remote.reset(TASK)
        remote.act({})
        assert pol.calls == 5
    with PolicyServer(Chunker()) as srv, RemotePolicy(srv.url, replan_steps=2) as remote:
        remote.reset(TASK)
        assert remote.needs_images()
        acts, looks = [], []
        for _ in range(6):  # the next act sends an observation only when the chunk is out
            acts.append(remote.act({}))
            looks.append(remote.needs_images())
        assert looks == [False, True] * 3
        assert srv.requests == 3
        assert np.array_equal(acts[2], np.arange(7) + 200)


def test_privileged_keys_stripped_by_default():
    obs = {"robot0_eef_pos": np.zeros(3), "robot0_eef_quat": np.ones(4),
           "robot0_gripper_qpos": np.zeros(2), "mug_pos": np.ones(3), "mug_quat": np.ones(4),
           "drawer_qpos": np.ones(1), "drawer_handle_pos": np.ones(3),
           "articulation_qpos": np.ones(2), "agentview_image": np.zeros((2, 2, 3), np.uint8),
           "object-state": np.ones(14), "robot0_proprio-state": np.zeros(50)}
    robot = {"robot0_eef_pos", "robot0_eef_quat", "robot0_gripper_qpos", "agentview_image",
             "robot0_proprio-state"}
    for privileged, keys in ((False, robot), (True, set(obs))):
        rec = Recorder()
        with PolicyServer(rec) as srv, RemotePolicy(srv.url, privileged=privileged) as remote:
            remote.reset(TASK)
            remote.act(obs)
        assert set(rec.seen[0]) == keys | {"prompt"}


@pytest.mark.sim
def test_episode_in_the_simulator():
    """Served policies drive the robosafe host: task_info crosses unchanged, object state only with
    privileged=True, and a served scripted policy acts exactly as the local one."""
    from pathlib import Path

    from robosafe.hosts.robosafe import RobosafeEnv

    root = Path(__file__).resolve().parents[1]
    env = RobosafeEnv(root / "src/robosafe/tasks/suites/demo/turn_off_stove.bddl", render=False)

    def episode(policy, steps=30):
        obs, _ = env.reset(seed=3)
        policy.reset(env.task_info().to_dict())
        actions = []
        for _ in range(steps):
            actions.append(policy.act(obs))
            obs, *_ = env.step(actions[-1])
        return np.array(actions), obs

    rec = Recorder()
    with PolicyServer(rec) as srv, RemotePolicy(srv.url) as remote:
        _, obs = episode(remote, 3)
    assert rec.tasks == [env.task_info().to_dict()]
    sent = set(rec.seen[-1])
    assert "robot0_eef_pos" in sent and "prompt" in sent
    assert all(k.startswith("robot0_") for k in sent - {"prompt"}), sent
    assert any(k.startswith("stove") for k in obs)  # the env had them

    local, _ = episode(make_policy("scripted-careful"))
    with (PolicyServer(make_policy("scripted-careful")) as srv,
          RemotePolicy(srv.url, privileged=True) as remote):
        served, _ = episode(remote)
    env.close()
    assert np.array_equal(local, served)


# -- the wire format -----------------------------------------------------------------------------
def test_wire_format_is_openpis():
    """What the client sends and the server replies decodes with a plain msgpack decoder into
    openpi's {b"__ndarray__", b"data", b"dtype", b"shape"} maps."""
    captured = []

    def reply(raw):
        captured.append(raw)
        return packb({"actions": np.zeros(7)})

    obs = {"robot0_eef_pos": np.array([1.0, 2.0, 3.0]),
           "agentview_image": np.arange(12, dtype=np.uint8).reshape(2, 2, 3),
           "count": np.float32(1.5)}
    with raw_server(_metadata_then(reply)) as url, RemotePolicy(url) as remote:
        remote.reset(TASK)
        remote.act(obs)
    raw = captured[0]
    assert isinstance(raw, bytes) and b"__ndarray__" in raw and b"<f8" in raw and b"|u1" in raw
    plain = msgpack.unpackb(raw)
    eef = plain["robot0_eef_pos"]
    assert eef[b"__ndarray__"] is True and eef[b"dtype"] == "<f8" and eef[b"shape"] == [3]
    assert np.array_equal(np.frombuffer(eef[b"data"], "<f8"), obs["robot0_eef_pos"])
    img = plain["agentview_image"]
    assert img[b"dtype"] == "|u1" and img[b"shape"] == [2, 2, 3]
    assert plain["count"] == {b"__npgeneric__": True, b"data": 1.5, b"dtype": "<f4"}
    assert plain["prompt"] == TASK["instruction"]

    # our server speaks the same: plain msgpack metadata, then openpi-shaped replies
    from websockets.sync.client import connect

    with PolicyServer(RandomPolicy()) as srv, connect(srv.url) as ws:
        meta = msgpack.unpackb(ws.recv())
        assert meta == {"policy": "random", "protocol": "openpi-msgpack-numpy",
                        "action_dim": 7, "supports_reset": True}
        ws.send(msgpack.packb({"prompt": "hi"}))
        out = msgpack.unpackb(ws.recv())
        assert out["actions"][b"__ndarray__"] is True and out["actions"][b"shape"] == [7]
        assert out["actions"][b"dtype"] == "<f8" and "infer_ms" in out["server_timing"]
    arr = unpackb(packb({"a": np.array(["ab", "c"])}))["a"]
    assert arr.tolist() == ["ab", "c"]


# -- errors --------------------------------------------------------------------------------------
def test_unreachable_server_names_the_url():
    url = f"ws://127.0.0.1:{_free_port()}"
    t0 = time.monotonic()
    with pytest.raises(RobosafeError, match="unreachable") as err:
        RemotePolicy(url, connect_timeout_s=0.5, retries=2).reset(TASK)
    assert time.monotonic() - t0 < 5
    msg = str(err.value)
    assert url in msg and "refused" in msg.lower() and "\n" not in msg


def test_bad_url_fails_early():
    with pytest.raises(RobosafeError, match="ws://"):
        RemotePolicy("http://localhost:1")
    assert isinstance(make_policy("ws://127.0.0.1:1"), RemotePolicy)


@pytest.mark.parametrize(("action", "pattern"), [
    (np.zeros(3), r"shape \(3,\), expected \(7,\)"),
    (np.zeros((2, 5)), r"shape \(2, 5\)"),
    (np.zeros((2, 2, 7)), r"shape \(2, 2, 7\)"),
    (np.array([0.0, np.nan, 0, 0, 0, 0, 0]), "non-finite"),
    (np.full((2, 7), np.inf), "non-finite"),
])
def test_bad_actions(action, pattern):
    with PolicyServer(Recorder(action)) as srv, RemotePolicy(srv.url) as remote:
        remote.reset(TASK)
        with pytest.raises(RobosafeError, match=pattern) as err:
            remote.act({})
    assert srv.url in str(err.value) and "\n" not in str(err.value)


def test_reply_without_actions():
    reply = _metadata_then(lambda raw: packb({"action": [0] * 7}))
    with (raw_server(reply) as url, RemotePolicy(url) as remote,
          pytest.raises(RobosafeError, match="no 'actions'") as err):
        remote.act({})
    assert "keys action" in str(err.value)


def test_server_error_is_one_line():
    with PolicyServer(Failing()) as srv, RemotePolicy(srv.url) as remote:
        remote.reset(TASK)
        with pytest.raises(RobosafeError, match="server error: ValueError: boom") as err:
            remote.act({})
        assert "\n" not in str(err.value)
        srv.policy = Recorder()  # the server outlived the failure; the client reconnects
        assert np.array_equal(remote.act({}), np.zeros(7))


def test_server_that_never_answers_times_out():
    with raw_server(_metadata_then(lambda raw: None)) as url:
        remote = RemotePolicy(url, timeout_s=0.5)
        remote.reset(TASK)
        t0 = time.monotonic()
        with pytest.raises(RobosafeError, match=r"no action within 0.5 s"):
            remote.act({})
        assert time.monotonic() - t0 < 3
        remote.close()


def test_server_closing_every_connection():
    def handler(ws):
        ws.send(packb({"policy": "raw"}))
        ws.recv()
        ws.close()

    with raw_server(handler) as url, RemotePolicy(url, retries=0) as remote:
        remote.reset(TASK)
        with pytest.raises(RobosafeError, match="closed the connection"):
            remote.act({})


def test_reconnects_after_a_server_restart():
    first = PolicyServer(Chunker()).start()
    port = first.port
    remote = RemotePolicy(first.url, connect_timeout_s=1.0)
    remote.reset(TASK)
    remote.act({})
    first.stop()  # killed mid-episode (3 actions of the chunk left, then a request)
    second_policy = Recorder(np.ones(7))
    with PolicyServer(second_policy, port=port) as second:
        for _ in range(3):
            remote.act({})
        assert np.array_equal(remote.act({}), np.ones(7))  # reconnected transparently
        assert second.requests == 1
        assert second_policy.tasks == [TASK]  # the episode's reset was replayed
    remote.close()


def test_pickles_without_the_connection():
    import pickle

    with PolicyServer(RandomPolicy()) as srv, RemotePolicy(srv.url) as remote:
        remote.reset(TASK)
        clone = pickle.loads(pickle.dumps(remote))
        local = RandomPolicy()
        local.reset(TASK)
        # the clone connects on first use and replays the episode's reset
        assert np.array_equal(clone.act({}), local.act({}))
        clone.close()


# -- the command line ----------------------------------------------------------------------------
def test_serve_policy_cli():
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "robosafe", "serve-policy", "random", "--port", "0", "--json"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env) as proc:
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(proc.stdout, selectors.EVENT_READ)
                assert sel.select(timeout=30), "no URL printed in 30 s"
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            info = json.loads(line)
            assert info["url"].startswith("ws://127.0.0.1:") and info["policy"] == "random"
            with RemotePolicy(info["url"]) as remote:
                remote.reset(TASK)
                local = RandomPolicy()
                local.reset(TASK)
                assert np.array_equal(remote.act({}), local.act({}))
        finally:
            proc.terminate()
            proc.wait(10)


def test_axis_angle_matches_hand_worked_rotations():
    """openpi's LIBERO state uses axis-angle of robosuite's (x, y, z, w) quaternion."""
    from robosafe.policies.remote import axis_angle

    half = np.pi / 4  # a rotation of pi/2 about z: q = (0, 0, sin(pi/4), cos(pi/4))
    np.testing.assert_allclose(axis_angle(np.array([0, 0, np.sin(half), np.cos(half)])),
                               [0, 0, np.pi / 2], atol=1e-12)
    np.testing.assert_allclose(axis_angle(np.array([1.0, 0, 0, 0])), [np.pi, 0, 0], atol=1e-12)
    np.testing.assert_allclose(axis_angle(np.array([0, 0, 0, 1.0])), [0, 0, 0])


def test_openpi_libero_adapter_maps_keys_resizes_and_names_what_is_missing():
    from robosafe.errors import RobosafeError
    from robosafe.policies.remote import adapt_observation

    img = np.zeros((256, 256, 3), dtype=np.uint8)
    img[:128] = 255  # top half white: resizing keeps the top half white
    obs = {"agentview_image": img, "robot0_eye_in_hand_image": img,
           "robot0_eef_pos": np.array([0.1, 0.2, 0.3]),
           "robot0_eef_quat": np.array([0.0, 0.0, 0.0, 1.0]),
           "robot0_gripper_qpos": np.array([0.04, -0.04]), "milk_1_pos": np.zeros(3)}
    out = adapt_observation(obs, "put it down", "openpi-libero")
    assert sorted(out) == ["observation/image", "observation/state", "observation/wrist_image",
                           "prompt"]
    assert out["observation/image"].shape == (224, 224, 3)
    assert out["observation/image"][:100].min() == 255 and out["observation/image"][124:].max() == 0
    np.testing.assert_allclose(out["observation/state"], [0.1, 0.2, 0.3, 0, 0, 0, 0.04, -0.04])
    assert out["prompt"] == "put it down"
    del obs["robot0_eye_in_hand_image"]
    with pytest.raises(RobosafeError, match="no 'robot0_eye_in_hand_image'"):
        adapt_observation(obs, "x", "openpi-libero")
    with pytest.raises(RobosafeError, match="unknown observation adapter"):
        adapt_observation(obs, "x", "nope")


@contextlib.contextmanager
def _raw_server(handler):
    """A bare websockets server on loopback running ``handler``; yields its port."""
    import asyncio

    from websockets.asyncio.server import serve

    ready, box = threading.Event(), {}

    async def main():
        async with serve(handler, "127.0.0.1", 0, max_size=None) as server:
            box["port"] = server.sockets[0].getsockname()[1]
            box["loop"] = asyncio.get_running_loop()
            box["stop"] = box["loop"].create_future()
            ready.set()
            await box["stop"]

    t = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    t.start()
    assert ready.wait(10)
    try:
        yield box["port"]
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set_result, None)
        t.join(10)


def test_api_key_is_sent_as_openpi_does(monkeypatch):
    """openpi-client authenticates with `Authorization: Api-Key KEY`; robosafe reads the key
    from ROBOSAFE_POLICY_API_KEY and sends the same header (checked by a loopback server)."""
    seen = {}

    async def handler(ws):
        seen["auth"] = ws.request.headers.get("Authorization")
        await ws.send(packb({"action_dim": 7}))
        await ws.wait_closed()

    monkeypatch.setenv("ROBOSAFE_POLICY_API_KEY", "s3cret")
    with _raw_server(handler) as port:
        p = RemotePolicy(f"ws://127.0.0.1:{port}")
        p.connect()
        p.close()
    assert seen["auth"] == "Api-Key s3cret"


def test_client_refuses_an_oversized_reply():
    """A reply frame over the client's bound is refused with a line, not buffered."""

    async def handler(ws):
        await ws.send(packb({"action_dim": 7}))
        async for _ in ws:
            await ws.send(b"\x00" * (2 * 2**20))

    with _raw_server(handler) as port:
        p = RemotePolicy(f"ws://127.0.0.1:{port}", max_reply_bytes=2**20, retries=0)
        p.reset({"action_dim": 7})
        with pytest.raises(RobosafeError, match="closed the connection.*too big"):
            p.act({"robot0_eef_pos": np.zeros(3)})
        p.close()


@pytest.mark.slow
@pytest.mark.sim
def test_run_against_a_server_exits_with_two_workers(tmp_path):
    """`robosafe run --policy ws://` finishes, writes outcomes.csv and exits by itself (the
    client drops its connection without a closing handshake at interpreter exit)."""
    from robosafe.policies.base import ZeroPolicy

    out = tmp_path / "run"
    with PolicyServer(ZeroPolicy).start() as server:
        r = run_robosafe("run", "--suite", "demo", "--task-id", "turn_off_stove", "--policy",
                         server.url, "-n", "2", "--workers", "2", "--horizon", "10",
                         "--no-images", "--out", out, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["finished"] == 2
    assert len((out / "outcomes.csv").read_text().splitlines()) == 3


@pytest.mark.slow
@pytest.mark.sim
def test_run_where_every_episode_crashes_exits_2_and_resume_retries(tmp_path):
    """A server that is down: the episode crashes, the run exits 2 with the count; once the
    server is up, --resume runs the crashed episode again."""
    from robosafe.policies.base import ZeroPolicy

    with socket.socket() as s:  # a free port, nothing listening on it yet
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "run"
    cmd = ["run", "--suite", "demo", "--task-id", "turn_off_stove", "--policy",
           f"ws://127.0.0.1:{port}", "-n", "1", "--horizon", "5", "--no-images", "--out",
           str(out), "--json"]
    r = run_robosafe(*cmd)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()  # one line per crashed episode, one summary line
    assert len(lines) == 2 and "unreachable" in lines[0]
    assert "1 of 1 episodes crashed" in lines[1]
    with PolicyServer(ZeroPolicy, port=port).start():
        r = run_robosafe(*cmd, "--resume")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["finished"] == 1


@pytest.mark.sim
def test_scripted_policy_served_without_privileged_state_fails_the_episode(tmp_path):
    """A scripted policy behind ws:// that receives no object poses fails the episode with a
    line saying so (it used to hold still and record SR 0 as a result); with the privileged
    adapter it acts."""
    from robosafe.policies.scripted import ScriptedPolicy

    out = tmp_path / "plain"
    cmd = ["run", "--suite", "demo", "--task-id", "turn_off_stove", "-n", "1", "--horizon",
           "60", "--no-images", "--json"]
    with PolicyServer(ScriptedPolicy).start() as server:
        r = run_robosafe(*cmd, "--policy", server.url, "--out", out)
        assert r.returncode == 2
        assert "no privileged object state" in r.stderr
        r = run_robosafe(*cmd, "--policy", server.url, "--out", tmp_path / "priv",
                         "--obs-adapter", "robosuite-privileged")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["crashed"] == 0


def test_openpi_libero_adapter_replans_every_five_actions():
    """openpi's LIBERO client executes 5 actions of each 10-action chunk before asking again."""

    class Chunk:
        name = "chunk"

        def reset(self, task_info):
            self.k = 0

        def act(self, observation):
            self.k += 1
            return np.tile(np.arange(7.0) + 100 * self.k, (10, 1))

    img = np.zeros((8, 8, 3), dtype=np.uint8)
    obs = {"agentview_image": img, "robot0_eye_in_hand_image": img,
           "robot0_eef_pos": np.zeros(3), "robot0_eef_quat": np.array([0, 0, 0, 1.0]),
           "robot0_gripper_qpos": np.zeros(2)}
    with PolicyServer(Chunk).start() as server:
        p = RemotePolicy(server.url, adapter="openpi-libero")
        assert p.replan_steps == 5
        p.reset({"action_dim": 7, "instruction": "x"})
        firsts = [p.act(obs)[0] for _ in range(12)]
        p.close()
    assert firsts == [100.0] * 5 + [200.0] * 5 + [300.0] * 2
    assert p.requests == 3
