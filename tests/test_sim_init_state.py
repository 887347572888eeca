"""TaskEnv(init_state=...): an episode starting from poses another simulator sampled
(VLA-Arena's env after its reset), robosafe.sim.placement.InitState (docs/decisions.md,
"VLA-Arena parity against its own environment")."""

import os
import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from robosafe.errors import RobosafeError, TaskError
from robosafe.sim.env import TaskEnv
from robosafe.sim.placement import BodyPose, InitState
from robosafe.tasks import parse_task

pytestmark = pytest.mark.sim  # steps MuJoCo

TASK = """
(define (problem InitStateTest)
  (:domain robosuite)
  (:language Pick the apple)
  (:regions
    (a_region (:target main_table) (:ranges ((-0.2 -0.2 0.0 0.0))))
    (car_region (:target main_table) (:ranges ((0.25 -0.3 0.25 -0.3))))
  )
  (:fixtures main_table - table)
  (:objects apple_1 - apple toy_car_1 - toy_car)
  (:moving_objects
    (toy_car_1 (:motion_type linear) (:motion_period 4 s) (:motion_travel_dist 0.4)
               (:motion_direction (0 1 0))))
  (:init (On apple_1 main_table_a_region) (On toy_car_1 main_table_car_region))
  (:goal (And (Up apple_1)))
  (:cost (And (Fall apple_1)))
)
"""
# a quarter turn plus 0.5 rad about z, w-x-y-z
YAW = 0.5
QUAT = (float(np.cos(YAW / 2)), 0.0, 0.0, float(np.sin(YAW / 2)))


def _env(state, mode="vla-arena", task=TASK, source="init_state.bddl"):
    # warnings are said once per process and file: a test that reads one names its own file
    return TaskEnv(parse_task(task, source), source=source, render=False, cost_mode=mode,
                   horizon=20, init_state=state)


def test_body_pose_checks_its_numbers_and_reads_the_heading():
    assert BodyPose((0, 0, 0), QUAT).yaw() == pytest.approx(YAW)
    # a quarter turn about x (a HOPE can stood up) keeps the x axis: heading 0
    s = float(np.sqrt(0.5))
    assert BodyPose((0, 0, 0), (s, s, 0.0, 0.0)).yaw() == pytest.approx(0.0)
    with pytest.raises(RobosafeError, match="unit length"):
        BodyPose((0, 0, 0), (1.0, 1.0, 0.0, 0.0))
    with pytest.raises(RobosafeError, match="3 \\+ 4 finite"):
        BodyPose((0, 0), QUAT)
    with pytest.raises(RobosafeError, match="finite"):
        BodyPose((0, 0, float("nan")), QUAT)
    with pytest.raises(RobosafeError, match="negative"):
        InitState({}, mover_steps=-1)
    with pytest.raises(RobosafeError, match="without a pose: x"):
        InitState({}, reference_lift_m={"x": 0.1})


def test_stand_in_takes_the_given_spot_and_heading_and_its_own_height():
    """A stand-in's origin is its box centre, not the other simulator's origin: x, y and the
    heading are taken, the height is the table top (0.9 m) + the apple's half height + the
    2 mm drop; no settling steps run, so the pose after reset is that placed pose."""
    given = {"apple_1": BodyPose((0.05, -0.12, 0.97), QUAT)}
    env = _env(InitState(given, reference_lift_m={"apple_1": 0.04}))
    env.reset(seed=3)
    world = env.task_world
    hz = world.assets["apple_1"].category.half_extents[2]
    pos, quat = world.start_pose["apple_1"]
    np.testing.assert_allclose(pos, [0.05, -0.12, 0.9 + hz + 0.002], atol=1e-12)
    np.testing.assert_allclose(quat, QUAT, atol=1e-12)
    np.testing.assert_allclose(env.view.pos("apple_1"), pos, atol=1e-9)
    # Fall's reference (cost mode vla-arena) is the pose lifted as the record says
    np.testing.assert_allclose(world.reference_pose["apple_1"][0], pos + [0, 0, 0.04])
    assert world.settle_steps == 0 and "apple_1" not in world.exact_start
    # the same spot whatever the seed
    env.reset(seed=4)
    np.testing.assert_allclose(world.start_pose["apple_1"][0], pos, atol=1e-12)
    env.close()


def test_names_the_task_lacks_are_errors_and_bodies_left_out_are_sampled_with_a_warning(
        caplog):
    with pytest.raises(TaskError, match="init_state names banana_1, which the task does not "
                                        "declare"):
        _env(InitState({"banana_1": BodyPose((0, 0, 1), QUAT)}))
    env = _env(InitState({"apple_1": BodyPose((0.05, -0.12, 0.97), QUAT)}),
               source="left_out.bddl")
    # a log record at WARNING (the CLI prints it as "robosafe: warning: ...")
    assert any("init_state has no pose for toy_car_1; robosafe samples it" in r.getMessage()
               and r.levelname == "WARNING" for r in caplog.records)
    env.reset(seed=0)
    # the car's region is a point: sampled there
    np.testing.assert_allclose(env.task_world.start_pose["toy_car_1"][0][:2], [0.25, -0.3])
    env.close()
    with pytest.raises(RobosafeError, match="must be an InitState"):
        _env({"apple_1": ((0, 0, 1), QUAT)})


@pytest.mark.parametrize("mode", ["vla-arena", "robosafe"])
def test_movers_start_from_the_given_clock(mode):
    """Linear motion, 4 s period, 0.4 m travel, +y: 0.2 m/s outward for 2 s. In cost mode
    vla-arena the car moves once per control step to where the clock is after it: with
    mover_steps 10, after one step (11 steps = 0.55 s at 20 Hz) it is 0.11 m along. robosafe's
    own clock runs per physics substep from 0 and ignores the count: it is 0.01 m along after
    the first step (0.05 s)."""
    state = InitState({"toy_car_1": BodyPose((0.25, -0.3, 0.95), (1.0, 0.0, 0.0, 0.0))},
                      mover_steps=10)
    env = _env(state, mode)
    env.reset(seed=0)
    y0 = env.task_world.start_pose["toy_car_1"][0][1]
    assert y0 == pytest.approx(-0.3)
    env.step(np.zeros(env.action_dim))
    mocap = env.task_world.data_ptr().mocap_pos[env.task_world.mocap_id["toy_car_1"]]
    # robosafe's last substep is at t = 0.05 - 0.002 (substeps of 2 ms start at 0)
    expect = 0.11 if mode == "vla-arena" else 0.2 * (0.05 - env.task_world.model_timestep)
    assert mocap[1] - y0 == pytest.approx(expect, abs=1e-9)
    env.close()


KETCHUP = TASK.replace("apple_1 - apple", "ketchup_1 - ketchup").replace("apple_1", "ketchup_1")


def test_libero_asset_takes_the_pose_exactly_every_collision_geom_where_libero_has_it():
    """LIBERO's ketchup file compiled as it is, its root body put at a pose, and robosafe's
    rewritten asset (re-centred, stood upright by a quarter turn about x) given that pose:
    every collision geom lands on the same world point."""
    from robosafe.sim.libero_assets import _data, assets_root

    try:
        root = assets_root()
    except RobosafeError:
        pytest.skip("LIBERO's assets are not installed (libero-assets extra)")
    s = float(np.sqrt(0.5))
    # the can stood up (about x) then turned 0.5 rad about z, as LIBERO's sampler composes it
    q_up = np.array([s, s, 0.0, 0.0])
    q = np.empty(4)
    mujoco.mju_mulQuat(q, np.array(QUAT), q_up)
    pose = BodyPose((0.05, -0.12, 0.97), tuple(q))
    path = root / _data()["categories"]["ketchup"]["xml"]
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    m.body_pos[1], m.body_quat[1] = pose.pos, pose.quat
    mujoco.mj_forward(m, d)
    theirs = d.geom_xpos[m.geom_group == 0]
    n_collision = sum(1 for g in ET.parse(path).getroot().iter("geom") if g.get("group") == "0")
    assert len(theirs) == n_collision > 5

    env = TaskEnv(parse_task(KETCHUP, "k.bddl"), render=False, cost_mode="vla-arena",
                  horizon=5, assets="libero", init_state=InitState({"ketchup_1": pose}))
    env.reset(seed=0)
    rm, rd = env.task_world.model_ptr(), env.task_world.data_ptr()
    ours = np.array([rd.geom_xpos[g] for g in range(rm.ngeom)
                     if rm.geom(g).name.startswith("ketchup_1_c")])
    assert "ketchup_1" in env.task_world.exact_start
    np.testing.assert_allclose(np.sort(ours, axis=0), np.sort(theirs, axis=0), atol=1e-9)
    # VLA-Arena's origin read back (its On and Up compare these): the given position
    np.testing.assert_allclose(env.view.source_origin("ketchup_1"), pose.pos, atol=1e-9)
    # the start pose is the given pose, so it is also Fall's reference
    np.testing.assert_allclose(env.task_world.reference_pose["ketchup_1"][0],
                               env.task_world.start_pose["ketchup_1"][0])
    env.close()
