"""The world's jobs apart: a reset places from the EpisodeStart it is given (robosafe.sim.placement),
real assets' pose mapping (robosafe.sim.frames), the asset source checked once
(robosafe.sim.libero_assets.resolve_source), and what the host reads through TaskEnv."""

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from robosafe.errors import RobosafeError
from robosafe.sim import frames
from robosafe.sim.env import TaskEnv
from robosafe.sim.libero_assets import resolve_source
from robosafe.sim.placement import BodyPose, EpisodeStart, InitState, Jitter

pytestmark = pytest.mark.sim

CAR_TASK = Path(__file__).resolve().parents[1] / "src/robosafe/tasks/examples/pick_place_moving_car.bddl"
TOP_Z, DROP = 0.9, 0.002  # data/world.yaml: table top_z, placement drop_m


@pytest.fixture(scope="module")
def env():
    e = TaskEnv(CAR_TASK, render=False)
    yield e
    e.close()


def _poses(world, start):
    world.reset(start)
    return {n: (p.copy(), q.copy()) for n, (p, q) in world.start_pose.items()}


def _yaw(q):
    return float(np.arctan2(2 * (q[0] * q[3] + q[1] * q[2]), 1 - 2 * (q[2] ** 2 + q[3] ** 2)))


def test_a_reset_places_from_the_start_it_is_given(env):
    world = env.task_world
    a = _poses(world, EpisodeStart(np.random.default_rng(7)))
    b = _poses(world, EpisodeStart(np.random.default_rng(7)))
    c = _poses(world, EpisodeStart(np.random.default_rng(8)))
    for n in a:
        np.testing.assert_array_equal(a[n][0], b[n][0])
    assert not np.array_equal(a["apple_1"][0], c["apple_1"][0])
    # the task's regions by hand: apple in x 0..0.02, y -0.13..-0.11 of the table top's centre,
    # resting drop_m above the table; the knife turned 1.5708 rad
    (x, y, z), _ = a["apple_1"]
    hz = world.assets["apple_1"].category.half_extents[2]
    assert 0.0 <= x <= 0.02 and -0.13 <= y <= -0.11
    assert z == pytest.approx(TOP_Z + hz + DROP, abs=1e-12)
    assert _yaw(a["knife_1"][1]) == pytest.approx(1.5708, abs=1e-9)
    assert world.settle_steps == 10


def test_jitter_moves_every_object_within_its_bounds_and_nothing_else(env):
    world = env.task_world
    plain = _poses(world, EpisodeStart(np.random.default_rng(3)))
    jit = Jitter(0.01, float(np.radians(10.0)), np.random.default_rng(99))
    moved = _poses(world, EpisodeStart(np.random.default_rng(3), jit))
    shifted = 0
    for n, (p, q) in plain.items():
        if n in env.movers:
            continue  # a mover's start is its path's (linear: its region's spot, jittered too)
        d = moved[n][0] - p
        assert np.all(np.abs(d[:2]) <= 0.01) and d[2] == 0.0, n
        turn = (_yaw(moved[n][1]) - _yaw(q) + np.pi) % (2 * np.pi) - np.pi
        assert abs(turn) <= np.radians(10.0) + 1e-9, n
        shifted += bool(np.any(d[:2]))
    assert shifted >= 2


def test_a_given_initial_state_is_placed_exactly_and_not_settled(env):
    world = env.task_world
    plain = _poses(world, EpisodeStart(np.random.default_rng(0)))
    spot = plain["plate_1"][0] + [0.01, -0.02, 0.0]
    given = InitState({"plate_1": BodyPose(tuple(spot), (1.0, 0.0, 0.0, 0.0))})
    placed = _poses(world, EpisodeStart(np.random.default_rng(0), init_state=given))
    # a stand-in: its horizontal spot and heading as given, resting on the table as robosafe's
    np.testing.assert_allclose(placed["plate_1"][0][:2], spot[:2], atol=1e-12)
    assert world.settle_steps == 0
    _poses(world, EpisodeStart(np.random.default_rng(0)))
    assert world.settle_steps == 10


def test_the_host_reads_the_world_through_task_env(env):
    env.reset(seed=0)
    assert env.table_z == TOP_Z and env.table_name == "main_table"
    assert env.movers == {"toy_car_1"} and env.frozen == frozenset()
    assert set(env.assets) == {"apple_1", "plate_1", "knife_1", "toy_car_1"}
    assert env.scripted_motion()
    env.restore_frozen(frozenset({"toy_car_1"}))
    assert env.frozen == {"toy_car_1"} and not env.scripted_motion()
    env.restore_frozen(frozenset())
    assert env.scripted_motion()


def test_source_frames_by_hand_and_round_trip():
    yaw90 = (np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4))
    frame = ((0.1, 0.0, 0.01), (1.0, 0.0, 0.0, 0.0))
    pos, quat = frames.from_source(frame, (1.0, 2.0, 3.0), yaw90)
    # the offset (0.1, 0, 0.01) turned 90 degrees about z is (0, 0.1, 0.01)
    np.testing.assert_allclose(pos, [1.0, 2.1, 3.01], atol=1e-12)
    np.testing.assert_allclose(quat, yaw90, atol=1e-12)
    back = frames.to_source(frame, pos, quat)
    np.testing.assert_allclose(back[0], [1.0, 2.0, 3.0], atol=1e-12)
    np.testing.assert_allclose(back[1], yaw90, atol=1e-12)
    same = frames.from_source(None, (1.0, 2.0, 3.0), yaw90)  # a stand-in: as given
    np.testing.assert_array_equal(same[0], [1.0, 2.0, 3.0])


def test_the_asset_source_is_checked_once_with_one_line():
    assert resolve_source("stand-in") == "stand-in"
    with pytest.raises(RobosafeError, match="^assets must be 'stand-in', 'libero' or "
                       "'vla-arena', got 'libro'$"):
        resolve_source("libro")
    with pytest.raises(RobosafeError, match="got 'libro'"):
        TaskEnv(CAR_TASK, render=False, assets="libro")
