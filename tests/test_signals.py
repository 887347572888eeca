"""Signal derivation (SafeVLA-Bench Tables 18-19, C.3) against values worked out by hand."""

import math

import numpy as np
import pytest
from factories import make_episode

from robosafe.safety import signals as S


def test_role_projected_force_peaks_and_static_filter():
    # step 0: bowl rests on table (static) and plate on table (static)
    # step 1: link7 hits table 250 N and 30 N; bowl-table still resting at 900 N (filtered)
    # step 2: bowl lifted (bowl-table absent); hand-hand self contact
    # step 3: bowl put back on table 120 N -> counts again (the pair separated at step 2)
    contacts = [[("bowl", "table", 5.0), ("plate", "table", 3.0)],
                [("link7", "table", 250.0), ("table", "link7", 30.0), ("bowl", "table", 900.0),
                 ("plate", "table", 3.0)],
                [("hand", "link7", 4.0), ("plate", "table", 3.0)],
                [("bowl", "table", 120.0), ("plate", "table", 3.0)],
                []]
    sig = S.derive_signals(make_episode(contacts=contacts)).values
    np.testing.assert_allclose(sig["max_contact_force"], [0, 250, 4, 120, 0])
    np.testing.assert_allclose(sig["arm_furniture_force"], [0, 250, 0, 0, 0])
    np.testing.assert_allclose(sig["target_furniture_force"], [0, 0, 0, 120, 0])
    np.testing.assert_allclose(sig["self_collision_count"], [0, 0, 1, 0, 0])
    np.testing.assert_allclose(sig["arm_furniture_contact"], [0, 1, 0, 0, 0])


def test_bystander_displacement():
    plate = [[0, 0, 0], [0.003, 0.004, 0], [0, 0, 0.001], [0, 0, 0]]
    cup = [[1, 1, 1], [1, 1, 1], [1, 1, 1.002], [1.006, 1, 1]]
    bowl = [[0, 0, 0], [0.5, 0, 0], [0, 0, 0], [0, 0, 0]]  # the target: not a bystander
    pos = np.stack([np.array(plate), np.array(bowl), np.array(cup)], axis=1)
    mask = np.array([[True, False, True]])  # per episode
    d = S.bystander_displacement(pos, mask, S.Layout([4]))
    np.testing.assert_allclose(d, [0, 0.005, 0.002, 0.006])


def test_tilt_is_world_body_z_drift_from_initial_orientation():
    ang = np.radians([0, 10, 45, 90])
    about_x = np.stack([np.cos(ang / 2), np.sin(ang / 2), 0 * ang, 0 * ang], axis=1)
    np.testing.assert_allclose(S.tilt_deg(about_x, S.Layout([4])), [0, 10, 45, 90], atol=1e-9)
    # a pure yaw about world z does not tilt the body z axis
    yaw = np.stack([np.cos(ang / 2), 0 * ang, 0 * ang, np.sin(ang / 2)], axis=1)
    np.testing.assert_allclose(S.tilt_deg(yaw, S.Layout([4])), 0, atol=1e-6)
    # drift is relative to the start: an object that starts tilted 30 deg and stays has 0
    start = np.radians(30)
    q = np.tile([math.cos(start / 2), math.sin(start / 2), 0, 0], (3, 1))
    np.testing.assert_allclose(S.tilt_deg(q, S.Layout([3])), 0, atol=1e-6)


def test_grasp_slip_relative_to_hand_per_grip_segment():
    grip = np.array([0, 1, 1, 1, 0, 1, 1], bool)
    eef_z = np.array([1.0, 1.0, 1.2, 1.1, 1.1, 1.1, 1.1])
    tgt_z = np.array([0.9, 0.9, 1.1, 0.97, 0.9, 0.95, 0.92])
    # segment 1 starts at step 1 with rel -0.1: rel = -0.1, -0.1, -0.13 -> 0, 0, -0.03
    # segment 2 starts at step 5 with rel -0.15: rel -0.15, -0.18 -> 0, -0.03
    np.testing.assert_allclose(S.grasp_slip(tgt_z, eef_z, grip, S.Layout([7])),
                               [0, 0, 0, -0.03, 0, 0, -0.03], atol=1e-12)


def test_eef_kinematics_of_constant_velocity_and_acceleration():
    dt = 0.1
    t = np.arange(30) * dt
    line = np.stack([0.5 * t, 0 * t, 0 * t], axis=1)
    k = S.eef_kinematics(line, np.full(30, dt), S.Layout([30]))
    # interior steps (away from the smoothing and padding edges) see the exact speed
    np.testing.assert_allclose(k["eef_speed"][5:-5], 0.5, rtol=1e-9)
    np.testing.assert_allclose(k["eef_acc"][5:-5], 0, atol=1e-9)
    para = np.stack([t**2, 0 * t, 0 * t], axis=1)  # a = 2 m/s^2, smoothed mean adds a const
    k = S.eef_kinematics(para, np.full(30, dt), S.Layout([30]))
    np.testing.assert_allclose(k["eef_acc"][5:-5], 2.0, rtol=1e-9)
    np.testing.assert_allclose(k["eef_jerk"][5:-5], 0, atol=1e-6)


def test_torque_ratio():
    tau = np.array([[10, -90, 0, 0, 6, 0, -13], [0, 0, 0, 0, 0, 0, 0]], float)
    lim = np.array([87, 87, 87, 87, 12, 12, 12], float)
    np.testing.assert_allclose(S.torque_ratio(tau, lim), [13 / 12, 0])


def test_missing_families_produce_no_signal_and_no_tag():
    ep = make_episode(3, body_pos={"bowl": np.zeros((3, 3))})
    sig = S.derive_signals(ep, [87] * 7)
    assert sig.available == frozenset()
    assert "max_contact_force" not in sig.values
    assert sig.unavailable["joint_torque_signal"] == "no joint_torque_nm"
    assert "bystander" in sig.unavailable["bystander_tracking"]


def test_transport_gate_and_tilt_availability():
    n = 4
    bowl = np.array([[0, 0, 0.8], [0, 0, 0.84], [0, 0, 0.9], [0, 0, 0.8]])
    eef = bowl + [0, 0, 0.1]
    quat = np.tile([1.0, 0, 0, 0], (n, 1))
    ep = make_episode(n, body_pos={"bowl": bowl, "plate": np.zeros((n, 3))}, quat=quat,
                      grip=[0, 1, 1, 0], eef=eef, contacts=[[]] * n, torque=np.zeros((n, 7)))
    sig = S.derive_signals(ep, [87] * 7)
    assert sig.values["transport"].tolist() == [False, False, True, False]
    assert {"target_pose_signal", "gripper_contact_signal", "bystander_tracking",
            "joint_torque_signal", "max_contact_force_signal", "self_collision_signal",
            "eef_pose_signal"} <= sig.available
    # a torque vector that does not match the limits is unusable, not a rejected episode
    sig = S.derive_signals(ep, [87] * 6)
    assert "joint_torque_signal" not in sig.available
    assert sig.unavailable["joint_torque_signal"] == (
        "7 joints recorded but the embodiment's torque limits list 6")


def test_chunk_derivation_keeps_episodes_apart():
    """Deriving a chunk equals deriving each episode alone (no leakage across boundaries)."""
    from robosafe.trace.synthetic import PROFILES, synthesize_episode

    eps = [synthesize_episode(np.random.default_rng(i), benchmark="libero-10", task_id="task_4",
                              episode_id=str(i), profile=PROFILES["fast-policy"],
                              n_steps=40 + 17 * i) for i in range(6)]
    eps[2].joint_torque_nm = None
    eps[3].gripper_contact = None
    eps[4].contact_ptr = eps[4].contact_a = eps[4].contact_b = eps[4].contact_force_n = None
    limits = [[87, 87, 87, 87, 12, 12, 12]] * len(eps)
    chunk = S.derive_chunk(eps, limits)
    for i, ep in enumerate(eps):
        alone = S.derive_signals(ep, limits[i])
        together = chunk.episode(i)
        assert together.available == alone.available
        assert set(together.values) == set(alone.values)
        for name, v in alone.values.items():
            np.testing.assert_allclose(together.values[name], v, err_msg=f"{i} {name}")
    assert "joint_torque_ratio" not in chunk.episode(2).values
    assert "grasp_slip_m" not in chunk.episode(3).values
    assert "max_contact_force" not in chunk.episode(4).values


def test_grasp_slip_does_not_carry_across_episodes():
    layout = S.Layout([3, 3])
    grip = np.array([0, 1, 1, 1, 1, 0], bool)  # episode 2 starts gripped
    tz = np.array([0.9, 0.9, 0.9, 0.5, 0.47, 0.5])
    ez = np.array([1.0, 1.0, 1.0, 0.6, 0.6, 0.6])
    np.testing.assert_allclose(S.grasp_slip(tz, ez, grip, layout), [0, 0, 0, 0, -0.03, 0],
                               atol=1e-12)


@pytest.mark.parametrize("lengths", [[1], [2, 3], [5], [4, 1, 6], [7, 5, 2, 9]])
def test_segment_ops_match_naive_loops(lengths):
    layout = S.Layout(lengths)
    x = np.random.default_rng(len(lengths)).normal(size=(sum(lengths), 3))
    smooth = S.rolling_mean(x, layout)
    start = 0
    for n in lengths:
        ep = x[start:start + n]
        for t in range(n):
            lo, hi = max(t - 2, 0), min(t + 2, n - 1)
            np.testing.assert_allclose(smooth[start + t], ep[lo:hi + 1].mean(axis=0))
        start += n
