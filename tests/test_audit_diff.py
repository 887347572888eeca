"""Determinism trace diff (audit paper App. B.2, Figure 6)."""

import json
import pathlib

import numpy as np
import pytest

from robosafe.audit.diff import (
    diff_channel,
    linf_distance,
    load_trace_npz,
    mean_abs_pixel_distance,
    trace_diff,
)
from robosafe.errors import RobosafeError

T = 20


def base_trace():
    rng = np.random.default_rng(0)
    return {
        "state": rng.normal(size=(T, 5)),
        "image_agentview": rng.integers(0, 256, size=(T, 4, 4, 3), dtype=np.uint8),
        "action": rng.normal(size=(T, 7)).astype(np.float32),
        "reward": np.zeros(T),
        "done": np.zeros(T, dtype=bool),
        "success": np.zeros(T, dtype=bool),
    }


def diverging_pair():
    """Figure 6 in miniature: state first (tiny, growing), then pixels, action, reward/done."""
    a = base_trace()
    b = {k: v.copy() for k, v in a.items()}
    growth = 3e-12 * 10.0 ** np.arange(T - 5)  # 3e-12 at step 5; 3e-7 at 10, 3e-6 at 11
    b["state"][5:, 2] += growth
    b["image_agentview"][8:, 0, 0, 0] ^= 1  # flips one channel value by exactly 1
    b["action"][9:, 3] += np.float32(0.25)
    b["reward"][12:] = 1.0
    b["done"][12:] = True
    return a, b


def test_first_diff_steps_and_propagation_order():
    a, b = diverging_pair()
    d = trace_diff(a, b, atol=1e-6)
    first = {c.name: c.first_diff_step for c in d.channels}
    assert first == {"state": 5, "image_agentview": 8, "action": 9, "reward": 12, "done": 12,
                     "success": None}
    assert d.channel("state").first_diff_step_tol == 11
    assert d.channel("image_agentview").first_diff_step_tol == 8
    assert [n for n, _ in d.divergence_order()] == ["state", "image_agentview", "action",
                                                    "done", "reward"]
    assert [c.name for c in d.channels] == ["state", "image_agentview", "action", "reward",
                                            "done", "success"]
    assert not d.identical and d.channel("success").identical


def test_distance_curves_hand_values():
    a, b = diverging_pair()
    d = trace_diff(a, b)
    state = d.channel("state")
    assert state.metric == "linf"
    np.testing.assert_allclose(state.distance[5:], 3e-12 * 10.0 ** np.arange(T - 5), rtol=1e-3)
    assert np.all(state.distance[:5] == 0)
    img = d.channel("image_agentview")
    assert img.metric == "mean_abs_pixel"
    # One value out of 4*4*3 = 48 changes by 1 each step from step 8.
    np.testing.assert_allclose(img.distance, np.r_[np.zeros(8), np.full(T - 8, 1 / 48)])
    assert d.channel("action").max_distance == pytest.approx(0.25, rel=1e-6)
    assert d.channel("done").distance.tolist() == [0.0] * 12 + [1.0] * (T - 12)
    assert d.channel("state").max_distance == pytest.approx(3e-12 * 10.0 ** (T - 6), rel=1e-3)


def test_identical_traces():
    a = base_trace()
    d = trace_diff(a, {k: v.copy() for k, v in a.items()})
    assert d.identical and d.divergence_order() == []
    for c in d.channels:
        assert c.first_diff_step is None and c.first_diff_step_tol is None
        assert c.max_distance == 0.0 and c.distance.shape == (T,)


def test_uint8_pixels_do_not_wrap():
    a = np.zeros((2, 2, 2, 1), np.uint8)
    b = a.copy()
    b[1] = 255
    np.testing.assert_array_equal(mean_abs_pixel_distance(a, b), [0.0, 255.0])
    b[1, 0, 0, 0] = 3  # 3 pixels at 255 and one at 3: mean 192
    np.testing.assert_array_equal(mean_abs_pixel_distance(a, b), [0.0, 192.0])
    assert diff_channel("image", b, a).max_distance == 192.0


def test_bitwise_versus_tolerance():
    a = np.array([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [0.0, 1.0]])
    b = a.copy()
    b[1, 0] = -0.0  # equal value, different bits
    b[2, 1] += 1e-9
    b[3, 1] += 1e-3
    c = diff_channel("state", a, b, atol=1e-6)
    assert c.first_diff_step == 1 and c.first_diff_step_tol == 3
    np.testing.assert_allclose(c.distance, [0, 0, 1e-9, 1e-3], rtol=1e-6, atol=0)
    assert not c.identical


def test_nan_handling():
    a = np.array([[np.nan, 1.0], [1.0, np.inf], [2.0, 0.0]])
    c = diff_channel("state", a, a.copy())
    assert c.identical and c.max_distance == 0.0
    b = a.copy()
    b[2, 0] = np.nan
    c = diff_channel("state", a, b, atol=1e9)
    assert c.first_diff_step == 2 and c.first_diff_step_tol == 2  # NaN never within tolerance
    assert c.distance.tolist() == [0.0, 0.0, np.inf]


def test_lengths_differ_compared_over_prefix():
    a = np.arange(10.0).reshape(5, 2)
    c = diff_channel("action", a, a[:3], labels=("x.npz", "y.npz"))
    assert (c.length_a, c.length_b) == (5, 3)
    assert c.distance.shape == (3,) and c.max_distance == 0.0
    assert c.first_diff_step == 3 and c.first_diff_step_tol == 3  # first step only x has
    assert "lengths differ (5 in x.npz vs 3 in y.npz); compared over the first 3 steps" in c.note
    b = a[:3].copy()
    b[1, 1] = 9.0
    assert diff_channel("action", a, b).first_diff_step == 1


def test_channel_in_one_trace_and_shape_mismatch():
    a, b = base_trace(), base_trace()
    del b["reward"]
    b["state"] = b["state"][:, :4]
    a["image_wrist"] = np.zeros((T, 2, 2, 3), np.uint8)
    d = trace_diff(a, b)
    r = d.channel("reward")
    assert not r.comparable and not r.identical and r.note == "only in a, missing from b"
    assert (r.length_a, r.length_b) == (T, None) and np.isnan(r.max_distance)
    assert d.channel("image_wrist").note == "only in a, missing from b"
    s = d.channel("state")
    assert not s.comparable and s.distance.size == 0
    assert s.note == "shapes differ beyond the time axis: (20, 5) in a vs (20, 4) in b"
    assert not d.identical
    assert [c.name for c in d.channels][:3] == ["state", "image_agentview", "image_wrist"]


def test_dtype_mismatch_compares_by_value():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    c = diff_channel("state", a, a.astype(np.float32))
    assert c.identical and "dtypes differ (float64 vs float32)" in c.note
    c = diff_channel("done", np.array([0, 1, 1]), np.array([False, True, False]))
    assert c.first_diff_step == 2 and c.distance.tolist() == [0.0, 0.0, 1.0]


def test_generic_and_string_channels():
    a = {"contacts": np.zeros((3, 2, 2)), "phase": np.array(["reach", "grasp", "lift"]),
         "seed": np.array(7)}
    b = {"contacts": np.zeros((3, 2, 2)), "phase": np.array(["reach", "grasp", "drop"]),
         "seed": np.array(8)}
    b["contacts"][1, 1, 0] = -2.5
    d = trace_diff(a, b)
    assert d.channel("contacts").distance.tolist() == [0.0, 2.5, 0.0]
    ph = d.channel("phase")
    assert ph.metric == "mismatch" and ph.first_diff_step == 2
    seed = d.channel("seed")
    assert seed.first_diff_step == 0 and "no time axis" in seed.note
    assert [c.name for c in d.channels] == ["contacts", "phase", "seed"]


def test_channel_atol_override():
    a, b = diverging_pair()
    d = trace_diff(a, b, atol=1e-6, channel_atol={"image_agentview": 0.5, "action": 1.0})
    assert d.channel("image_agentview").first_diff_step_tol is None
    assert d.channel("image_agentview").first_diff_step == 8
    assert d.channel("action").first_diff_step_tol is None and d.channel("action").atol == 1.0
    assert d.channel("state").first_diff_step_tol == 11


def test_linf_hand_value():
    a = np.array([[1.0, -2.0, 3.0], [0.0, 0.0, 0.0]])
    b = np.array([[1.5, 2.0, 3.0], [0.0, -0.1, 0.2]])
    np.testing.assert_allclose(linf_distance(a, b), [4.0, 0.2])
    assert linf_distance(np.empty((0, 3)), np.empty((0, 3))).shape == (0,)


# --- npz files ---------------------------------------------------------------------------


def test_npz_round_trip(tmp_path):
    a, b = diverging_pair()
    pa, pb = tmp_path / "a.npz", tmp_path / "b.npz"
    np.savez(pa, **a)
    np.savez_compressed(pb, **b)
    d = trace_diff(pa, pb)
    assert (d.source_a, d.source_b) == (str(pa), str(pb))
    assert d.channel("state").first_diff_step == 5
    assert f"only in {pa}" in trace_diff(pa, {k: v for k, v in b.items()
                                              if k != "reward"}).channel("reward").note
    json.dumps(d.to_dict())


def test_object_arrays_are_never_unpickled(tmp_path):
    marker = tmp_path / "unpickled"

    class Payload:
        def __reduce__(self):
            return (pathlib.Path.touch, (marker,))

    p = tmp_path / "evil.npz"
    np.savez(p, state=np.zeros((3, 2)), meta=np.array([Payload()], dtype=object))
    with pytest.raises(RobosafeError) as exc:
        load_trace_npz(p)
    assert str(exc.value) == (f"{p}: array 'meta' holds Python objects; refusing to unpickle "
                              f"it (store numeric or string arrays)")
    with pytest.raises(RobosafeError):
        trace_diff(p, p)
    assert not marker.exists()
    with pytest.raises(RobosafeError, match="array 'x' holds Python objects"):
        trace_diff({"x": np.array([None, 1], dtype=object)}, {"x": np.zeros(2)})


def test_bad_files(tmp_path):
    with pytest.raises(RobosafeError, match="no such file"):
        load_trace_npz(tmp_path / "missing.npz")
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip at all")
    with pytest.raises(RobosafeError, match=r"junk\.npz: not a readable \.npz archive"):
        load_trace_npz(junk)
    single = tmp_path / "single.npy"
    np.save(single, np.zeros(3))
    with pytest.raises(RobosafeError, match="holds a single array"):
        load_trace_npz(single)
    empty = tmp_path / "empty.npz"
    np.savez(empty)
    with pytest.raises(RobosafeError, match="holds no arrays"):
        load_trace_npz(empty)
