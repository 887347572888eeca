"""The CBDDL simulator end to end: real robosuite + MuJoCo, headless."""

import json
import os
from pathlib import Path

import mujoco
import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from conftest import run_robosafe as robosafe

from robosafe.errors import RobosafeError, TaskError
from robosafe.hosts.robosafe import RobosafeEnv
from robosafe.policies.scripted import Script, pick_place_phases
from robosafe.sim.env import TaskEnv
from robosafe.tasks import parse_task
from robosafe.trace.io import read_episodes, write_episodes

pytestmark = pytest.mark.sim  # steps MuJoCo

EXAMPLES = Path(__file__).resolve().parents[1] / "src/robosafe/tasks/examples"
CAR_TASK = EXAMPLES / ("pick_place_moving_car.bddl")
EVERY_BLOCK = EXAMPLES / "every_block.bddl"
SMALL = (32, 32)


def scripted_episode(env: RobosafeEnv, seed: int, max_steps: int = 300):
    obs, _ = env.reset(seed=seed)
    v, assets = env.world.view, env.world.task_world.assets
    phases = pick_place_phases(v.pos("apple_1").copy(),
                               assets["apple_1"].category.half_extents[2],
                               v.pos("plate_1").copy(), float(v.pos("plate_1")[2]))
    script = Script(phases)
    for _ in range(max_steps):
        obs, reward, terminated, truncated, info = env.step(script.act(obs["robot0_eef_pos"]))
        if terminated or truncated:
            break
    return obs, reward, terminated, truncated, info


@pytest.fixture(scope="module")
def car_env():
    env = RobosafeEnv(CAR_TASK, image_size=SMALL)
    yield env
    env.close()


@pytest.mark.slow
def test_scripted_sequence_completes_the_task_and_the_trace_scores(car_env, tmp_path):
    obs, reward, terminated, truncated, info = scripted_episode(car_env, seed=0)
    assert terminated and not truncated and info["success"] and reward == 1.0
    assert info["predicates"] == {"(On apple_1 plate_1)": True}
    assert obs["agentview_image"].shape == (*SMALL, 3)
    assert obs["agentview_image"].dtype == np.uint8
    ep = car_env.episode(policy="scripted")
    assert ep.success and ep.benchmark == "robosafe-sim" and ep.target_object == "apple_1"
    assert ep.body_roles["plate_1"] == "bystander" and ep.body_roles["main_table"] == "furniture"
    assert ep.body_roles["toy_car_1"] == "other"
    assert ep.cost.sum() == pytest.approx(info["cumulative_cost"])
    assert ep.cost.sum() == pytest.approx(car_env.world.cost_breakdown().total)
    path = tmp_path / "scripted.parquet"
    write_episodes(path, [ep])
    res = robosafe("score", str(path), "--json")
    assert res.returncode == 0, res.stderr
    agg = json.loads(res.stdout)["aggregate"]
    assert agg["sr"] == 1.0


@pytest.mark.slow
def test_random_policy_runs_every_block_and_costs_add_up(tmp_path):
    env = RobosafeEnv(EVERY_BLOCK, image_size=SMALL)
    env.reset(seed=1)
    assert set(env.cameras) >= {"agentview", "robot0_eye_in_hand", "frontview"}
    world = env.world.task_world
    start = {n: world.data_ptr().mocap_pos[i].copy() for n, i in world.mocap_id.items()
             if n in world.moving}
    rng = np.random.default_rng(0)
    for _ in range(40):
        *_, info = env.step(rng.uniform(-1, 1, env.action_dim))
        assert len(info["cost_terms"]) == 11
    moved = [n for n, p in start.items()
             if not np.allclose(world.data_ptr().mocap_pos[world.mocap_id[n]], p)]
    assert set(moved) | set(info["frozen"]) == set(start)
    ep = env.episode(policy="random")
    br = env.world.cost_breakdown()
    # terminal terms (Collide, Fall, NotOn) are booked on the last step: the column sums to CC
    assert ep.cost.sum() == pytest.approx(br.total)
    assert ep.cost[-1] >= br.terminal
    assert ep.n_steps == 41
    path = tmp_path / "random.jsonl"
    write_episodes(path, [ep])
    assert robosafe("score", str(path), "--json").returncode == 0
    env.close()


@pytest.mark.slow
def test_same_seed_gives_bitwise_identical_traces_and_images():
    def run(seed):
        env = RobosafeEnv(CAR_TASK, image_size=SMALL, visual_level=4)
        obs, _ = env.reset(seed=seed)
        frames = [obs["agentview_image"]]
        rng = np.random.default_rng(7)
        for _ in range(15):
            obs, *_ = env.step(rng.uniform(-1, 1, env.action_dim))
            frames.append(obs["agentview_image"])
        ep = env.episode()
        env.close()
        return ep, np.stack(frames)

    (a, fa), (b, fb), (c, fc) = run(3), run(3), run(4)
    for field in ("eef_pos_m", "body_pos_m", "body_quat_wxyz", "contact_force_n",
                  "joint_torque_nm", "cost"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert np.array_equal(fa, fb)
    assert not np.array_equal(a.body_pos_m[0], c.body_pos_m[0])  # another seed, another scene
    assert not np.array_equal(fa, fc)


def test_initial_state_round_trips_through_a_plain_array(car_env, tmp_path):
    car_env.reset(seed=5)
    path = tmp_path / "state.npy"
    car_env.world.save_state(path)
    saved = car_env.world.get_state()
    car_env.reset(seed=6)
    assert not np.array_equal(car_env.world.get_state(), saved)
    car_env.world.load_state(path)
    np.testing.assert_array_equal(car_env.world.get_state(), saved)
    np.load(path, allow_pickle=False)  # plain array, no pickle
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros(3))
    with pytest.raises(RobosafeError, match="shape"):
        car_env.world.load_state(bad)


def test_contact_forces_are_full_magnitudes_that_carry_the_weight(car_env):
    car_env.reset(seed=0)
    v = car_env.world.view
    v.update()
    m, d = car_env.world.task_world.model_ptr(), car_env.world.task_world.data_ptr()
    sel = v.pair(v.mask("apple_1"), v.mask("main_table"))
    assert sel.any()
    # at rest the table carries the apple: the vertical contact forces add up to m g
    vertical = 0.0
    f = np.zeros(6)
    for i in np.flatnonzero(sel):
        mujoco.mj_contactForce(m, d, int(i), f)
        frame = d.contact.frame[i].reshape(3, 3)
        vertical += abs((frame.T @ f[:3])[2])
    mass = m.body_subtreemass[car_env.world.task_world.body_id["apple_1"]]
    assert vertical == pytest.approx(mass * 9.81, rel=0.05)
    assert v.max_force(v.mask("apple_1"), v.mask("main_table")) >= vertical / sel.sum() - 1e-9


TWO_BALLS = """
(define (problem Two_Balls)
  (:domain robosuite)
  (:language Touch nothing)
  (:regions
    (a_region (:target main_table) (:ranges ((0.1 0.1 0.1 0.1))))
    (b_region (:target main_table) (:ranges ((0.1 0.3 0.1 0.3))))
    (car_region (:target main_table) (:ranges ((0.25 -0.3 0.25 -0.3))))
  )
  (:fixtures main_table - table)
  (:objects ball_a ball_b - tennis_ball toy_car_1 - toy_car)
  (:moving_objects
    (toy_car_1 (:motion_type linear) (:motion_period 4 s) (:motion_travel_dist 0.6)
               (:motion_direction (0 1 0))))
  (:init (On ball_a main_table_a_region) (On ball_b main_table_b_region)
         (On toy_car_1 main_table_car_region))
  (:goal (And (InContact ball_a ball_b)))
  (:cost (And (CheckDistance ball_a ball_b 0.5) (InContact toy_car_1 ball_b)))
)
"""


def test_distance_matches_sphere_geometry_and_moving_objects_freeze_on_violation():
    text = TWO_BALLS.replace("(InContact toy_car_1 ball_b)", "(InContact toy_car_1 ball_c)")
    text = text.replace("ball_a ball_b - tennis_ball", "ball_a ball_b ball_c - tennis_ball")
    text = text.replace("(car_region", "(c_region (:target main_table) (:ranges ((0.25 0.0 "
                        "0.25 0.0))))\n    (car_region")
    text = text.replace("(On toy_car_1", "(On ball_c main_table_c_region) (On toy_car_1")
    problem = parse_task(text, "two_balls.bddl")
    env = TaskEnv(problem, render=False)
    env.reset(seed=0)
    v = env.view
    r = env.task_world.assets["ball_a"].category.half_extents[0]
    expected = np.linalg.norm(v.pos("ball_a") - v.pos("ball_b")) - 2 * r
    assert expected == pytest.approx(0.2 - 2 * r, abs=2e-3)
    assert v.distance(v.mask("ball_a"), v.mask("ball_b"), 1.0) == pytest.approx(expected,
                                                                                abs=1e-4)
    hold = np.zeros(env.action_dim)
    frozen_at, car = None, env.task_world.mocap_id["toy_car_1"]
    for k in range(40):  # the car reaches ball_c (0.3 m ahead) after ~1 s at 0.3 m/s
        _, _, _, _, info = env.step(hold)
        assert info["cost_terms"][0] == 1.0  # the balls are 0.13 m apart, closer than 0.5 m
        if info["frozen"] and frozen_at is None:
            frozen_at = env.task_world.data_ptr().mocap_pos[car].copy()
            assert info["cost_terms"][1] == 1.0 and k > 10
    assert frozen_at is not None
    np.testing.assert_array_equal(env.task_world.data_ptr().mocap_pos[car], frozen_at)
    env.close()


def test_region_that_cannot_hold_its_objects_is_a_clear_error():
    text = TWO_BALLS.replace("(On ball_b main_table_b_region)", "(On ball_b main_table_a_region)")
    with pytest.raises(TaskError, match=r"crowded.bddl:\d+: cannot place ball_b in region "
                                        r"main_table_a_region"):
        TaskEnv(parse_task(text, "crowded.bddl"), source="crowded.bddl", render=False)


def test_articulated_init_states_and_goal_predicates():
    text = """
(define (problem Drawer_And_Stove)
  (:domain robosuite)
  (:language Close the drawer)
  (:regions
    (cab_region (:target main_table) (:ranges ((0.2 0.25 0.2 0.25))))
    (stove_region (:target main_table) (:ranges ((0.2 -0.25 0.2 -0.25))))
    (top_region (:target cabinet_1))
  )
  (:fixtures main_table - table cabinet_1 - wooden_cabinet stove_1 - flat_stove)
  (:init (On cabinet_1 main_table_cab_region) (On stove_1 main_table_stove_region)
         (Open cabinet_1_top_region) (TurnOn stove_1))
  (:goal (And (Close cabinet_1_top_region) (TurnOff stove_1)))
)
"""
    env = TaskEnv(parse_task(text, "drawer.bddl"), render=False)
    _, info = env.reset(seed=0)
    assert info["predicates"] == {"(Close cabinet_1_top_region)": False,
                                  "(TurnOff stove_1)": False}
    adr, art = env.task_world.articulation("cabinet_1_top_region")
    env.task_world.data_ptr().qpos[adr] = art.closed
    adr, art = env.task_world.articulation("stove_1")
    env.task_world.data_ptr().qpos[adr] = art.closed
    mujoco.mj_forward(env.task_world.model_ptr(), env.task_world.data_ptr())
    assert env.view.atom(env.problem.goal.args[0]) and env.view.atom(env.problem.goal.args[1])
    env.close()


def test_bad_actions_and_stepping_past_the_end_are_errors(car_env):
    car_env.reset(seed=0)
    with pytest.raises(RobosafeError, match="7 finite numbers"):
        car_env.step(np.zeros(3))
    with pytest.raises(RobosafeError, match="7 finite numbers"):
        car_env.step(np.full(7, np.nan))


def test_part_ids_are_checked_against_the_asset_when_the_world_is_built(tmp_path):
    text = EVERY_BLOCK.read_text().replace("(InContactPart knife_1 plate_1 (1) (0))",
                                           "(InContactPart knife_1 plate_1 (7) (0))")
    with pytest.raises(TaskError, match=r"knife_1 has no part\(s\) \[7\]; its parts are 0 handle"):
        TaskEnv(parse_task(text, "parts.bddl"), render=False)


@pytest.mark.slow
def test_cli_runs_episodes_and_exports_states(tmp_path):
    out = tmp_path / "run.parquet"
    res = robosafe("sim", "run", str(CAR_TASK), "--episodes", "2", "--horizon", "15",
                   "--out", str(out), "--json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)["episodes"]
    assert [r["steps"] for r in rows] == [15, 15]
    eps, errors = read_episodes(out)
    assert not errors
    assert [e.seed for e in eps] == [0, 1]
    assert robosafe("score", str(out), "--json").returncode == 0
    state = tmp_path / "s.npy"
    res = robosafe("sim", "state", str(CAR_TASK), "--seed", "2", "--out", str(state))
    assert res.returncode == 0, res.stderr
    assert np.load(state, allow_pickle=False).ndim == 1
    res = robosafe("sim", "run", str(tmp_path / "missing.bddl"), "--out", str(out))
    assert res.returncode == 2 and res.stderr.count("\n") == 1


@pytest.mark.slow
@pytest.mark.parametrize("name", ["libero_pick_place.bddl", "every_block.bddl",
                                  "dynamic_obstacle_cost.bddl", "pick_place_moving_car.bddl"])
def test_every_init_atom_holds_after_reset(name):
    env = TaskEnv(EXAMPLES / name, render=False)
    env.reset(seed=2)
    failed = [p for p in env.problem.init if not env.view.atom(p)]
    assert not failed
    env.close()


def test_collide_is_tracked_for_a_task_that_names_it_and_an_error_elsewhere():
    """Collide: an object touching what it did not touch at the start. ball_c rests in the
    car's lane (0.3 m ahead at 0.3 m/s): it has collided after the car reaches it, ball_a
    never; a task without a Collide atom does not track collisions and says so."""
    from robosafe.sim.predicates import ATOMS

    text = TWO_BALLS.replace("(InContact toy_car_1 ball_b)", "(Collide ball_c)")
    text = text.replace("ball_a ball_b - tennis_ball", "ball_a ball_b ball_c - tennis_ball")
    text = text.replace("(car_region", "(c_region (:target main_table) (:ranges ((0.25 0.0 "
                        "0.25 0.0))))\n    (car_region")
    text = text.replace("(On toy_car_1", "(On ball_c main_table_c_region) (On toy_car_1")
    env = TaskEnv(parse_task(text, "collide.bddl"), render=False)
    env.reset(seed=0)
    v = env.view
    assert v.tracks_collisions and not v.has_collided("ball_c")
    hold = np.zeros(env.action_dim)
    for _ in range(5):
        env.step(hold)
    assert not v.collided  # resting on the table, as at the start
    for _ in range(45):
        env.step(hold)
    assert v.has_collided("ball_c") and not v.has_collided("ball_a")
    env.close()

    plain = TaskEnv(parse_task(TWO_BALLS, "two_balls.bddl"), render=False)
    plain.reset(seed=0)
    assert not plain.view.tracks_collisions
    with pytest.raises(TaskError, match="Collide"):
        ATOMS["collide"](plain.view, "ball_a")
    plain.close()


def test_robots_load_without_robosuites_robot_alone_compile(monkeypatch):
    """robosafe's world skips robosuite's compile of the robot alone (nothing reads it): the
    world's compiled model is the same, byte for byte (mj_saveModel), as with robosuite's own
    robot loading, and so are the states after a few steps."""
    from robosuite.environments.manipulation.manipulation_env import ManipulationEnv

    from robosafe.sim.world import TaskWorld

    def build():
        env = TaskEnv(CAR_TASK, render=False)
        env.reset(seed=4)
        for _ in range(3):
            env.step(np.full(env.action_dim, 0.3))
        m = env.task_world.model_ptr()
        buf = np.zeros(mujoco.mj_sizeModel(m), dtype=np.uint8)
        mujoco.mj_saveModel(m, None, buf)
        robot = env.task_world.robots[0].robot_model.mujoco_model
        out = (buf.tobytes(), env.task_world.data_ptr().qpos.tobytes(), robot)
        env.close()
        return out

    skipped = build()
    monkeypatch.setattr(TaskWorld, "_load_robots", ManipulationEnv._load_robots)
    compiled = build()
    assert skipped[2] is None and isinstance(compiled[2], mujoco.MjModel)
    assert skipped[:2] == compiled[:2]
