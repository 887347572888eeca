"""Moving-object trajectories (VLA-Arena App. 7.2.3) against hand-worked positions."""

import numpy as np
import pytest

from robosafe.errors import TaskError
from robosafe.sim.motion import ArenaWaypoints, arena_heading_quat, heading_quat, pose_at, slerp
from robosafe.sim.placement import Footprint, overlap, sample_in_rects
from robosafe.tasks.ast import MotionAttr, MovingObject

Q0 = np.array([1.0, 0.0, 0.0, 0.0])


def mo(kind, **attrs):
    return MovingObject(name="m", motion_type=kind,
                        attrs=tuple(MotionAttr(name=f"motion_{k}", value=v) for k, v in attrs.items()))


def test_linear_is_a_triangle_wave_between_p0_and_p0_plus_d():
    m = mo("linear", period=4.0, travel_dist=0.7, direction=(0.0, 2.0, 0.0))
    p0 = np.array([0.1, -0.35, 0.9])
    pos, quat = pose_at(m, np.array([0.0, 1.0, 2.0, 3.0, 4.0]), p0, Q0)
    np.testing.assert_allclose(pos[:, 1], [-0.35, 0.0, 0.35, 0.0, -0.35], atol=1e-12)
    np.testing.assert_allclose(pos[:, [0, 2]], np.tile([0.1, 0.9], (5, 1)))
    np.testing.assert_array_equal(quat, np.tile(Q0, (5, 1)))


def test_circular_keeps_radius_and_height_and_turns_with_the_angle():
    m = mo("circular", center=(0.0, 0.0, 0.5), period=8.0)
    p0 = np.array([0.2, 0.0, 0.95])
    pos, quat = pose_at(m, 2.0, p0, Q0)  # a quarter turn: +x -> +y
    np.testing.assert_allclose(pos, [0.0, 0.2, 0.95], atol=1e-12)
    np.testing.assert_allclose(quat, [np.cos(np.pi / 4), 0, 0, np.sin(np.pi / 4)], atol=1e-12)


def test_waypoints_interpolate_and_loop_back():
    wps = ((0.0, 0.0, 1.0, 1, 0, 0), (1.0, 0.0, 1.0, 0, 1, 0))
    m = mo("waypoint", waypoints=wps, period=2.0, loop=True)  # two segments of 1 s
    pos, quat = pose_at(m, np.array([0.0, 0.5, 1.0, 1.5, 2.0]), Q0 * 0, Q0)
    np.testing.assert_allclose(pos[:, 0], [0.0, 0.5, 1.0, 0.5, 0.0], atol=1e-12)
    # halfway between heading +x and +y is a 45 degree yaw
    np.testing.assert_allclose(quat[1], [np.cos(np.pi / 8), 0, 0, np.sin(np.pi / 8)], atol=1e-9)
    held = mo("waypoint", waypoints=wps, period=2.0)
    np.testing.assert_allclose(pose_at(held, 5.0, Q0 * 0, Q0)[0], [1.0, 0.0, 1.0])


def test_arena_headings_map_y_to_the_all_ones_quaternion():
    """VLA-Arena's mapping: heading +y is (1, 1, 1, 1); -x is that turned 90 degrees about z,
    (cos 45, 0, 0, sin 45) x (0.5, 0.5, 0.5, 0.5) x 2 = (0, 0, sqrt 2, sqrt 2); -y negates."""
    np.testing.assert_array_equal(arena_heading_quat((0, 3, 0)), [1.0, 1.0, 1.0, 1.0])
    np.testing.assert_array_equal(arena_heading_quat((0, -1, 0)), [-1.0, -1.0, -1.0, -1.0])
    np.testing.assert_allclose(arena_heading_quat((-1, 0, 0)), [0, 0, 2 ** 0.5, 2 ** 0.5],
                               atol=1e-15)


def test_arena_waypoints_ping_pong_sample_by_sample():
    """w0 (0 0 1), w1 (1 0 1), w2 (1 1 1), two steps per segment: the parser's loop
    w0 w1 w2 w1 (period 8 steps = 0.4 s at 20 Hz); sample k is k / 2 segments along it, the
    way back through the same points, then again from w0."""
    wps = ((0.0, 0.0, 1.0, 0, 1, 0), (1.0, 0.0, 1.0, 0, 1, 0), (1.0, 1.0, 1.0, -1, 0, 0),
           (1.0, 0.0, 1.0, 0, 1, 0))
    path = ArenaWaypoints.of(mo("waypoint", waypoints=wps, period=0.4, loop=True), 20.0)
    assert path.steps == 2
    xy = [path.at(k)[0][:2].tolist() for k in range(10)]
    assert xy == [[0, 0], [0.5, 0], [1, 0], [1, 0.5], [1, 1], [1, 0.5], [1, 0], [0.5, 0],
                  [0, 0], [0.5, 0]]
    np.testing.assert_array_equal(path.at(0)[1], [0.5, 0.5, 0.5, 0.5])
    np.testing.assert_allclose(path.at(4)[1], [0, 0, 0.5 ** 0.5, 0.5 ** 0.5], atol=1e-15)
    # robosafe's own list without a loop runs forward and back too (VLA-Arena's run), its
    # period the forward run: the same samples
    own = ArenaWaypoints.of(mo("waypoint", waypoints=wps[:3], period=0.2), 20.0)
    assert own.steps == 2 and [own.at(k)[0][:2].tolist() for k in range(10)] == xy


def test_projectile_follows_kinematics_then_rests_at_the_floor():
    m = mo("projectile", initial_speed=2.0, direction=(0, 0, 1), gravity=(0, 0, -10.0))
    p0 = np.array([0.0, 0.0, 1.0])
    np.testing.assert_allclose(pose_at(m, 0.1, p0, Q0)[0], [0, 0, 1.0 + 0.2 - 0.05])
    # back at the start height after 2 v / g = 0.4 s; it stays there
    np.testing.assert_allclose(pose_at(m, np.array([0.4, 3.0]), p0, Q0)[0][:, 2], [1.0, 1.0])
    lower = pose_at(m, 3.0, p0, Q0, floor_z=0.9)[0]
    np.testing.assert_allclose(lower[2], 0.9, atol=1e-12)


def test_heading_and_slerp_are_unit_rotations():
    q = heading_quat(np.array([0.0, 0.0, 1.0]))  # x axis pitched up onto z
    np.testing.assert_allclose(np.linalg.norm(q), 1.0)
    np.testing.assert_allclose(slerp(Q0, q, 0.0), Q0, atol=1e-12)
    np.testing.assert_allclose(slerp(Q0, q, 1.0), q, atol=1e-12)


def test_missing_motion_attribute_is_a_task_error():
    with pytest.raises(TaskError, match="motion_travel_dist"):
        pose_at(mo("linear", period=1.0, direction=(1, 0, 0)), 0.0, np.zeros(3), Q0)


def test_oriented_rectangles_overlap_by_separating_axes():
    a = Footprint(0.0, 0.0, 0.0, 0.1, 0.1)
    assert overlap(a, Footprint(0.15, 0.0, 0.0, 0.1, 0.1))
    assert not overlap(a, Footprint(0.25, 0.0, 0.0, 0.1, 0.1))
    # a square turned 45 degrees reaches 0.1*sqrt(2) along x
    assert overlap(a, Footprint(0.23, 0.0, np.pi / 4, 0.1, 0.1))
    assert not overlap(a, Footprint(0.25, 0.0, np.pi / 4, 0.1, 0.1))


def test_rectangles_are_chosen_by_area():
    rects = np.array([[0.0, 0.0, 1.0, 1.0], [10.0, 10.0, 10.5, 10.5]])
    rng = np.random.default_rng(0)
    xs = np.array([sample_in_rects(rects, np.zeros((1, 2)), rng)[0] for _ in range(4000)])
    share = np.mean(xs > 5)
    assert abs(share - 0.25 / 1.25) < 0.03
