"""The shield's screening: a prediction skipped when it provably finds nothing
(robosafe.runner.screen, robosafe.runner.shield)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from robosafe.hosts.recorder import Stillness
from robosafe.runner.screen import (
    drift,
    margin_bounds,
    reach,
    repeats,
    still_world,
)
from robosafe.safety.registry import load_registry
from robosafe.safety.signals import _ROLE_CODE
from robosafe.safety.stl import parse

SINH, COSH = math.sinh(2.5), math.cosh(2.5)  # k T = 10 / s x 0.25 s (H = 5 at 20 Hz)


def _clause(stl: str):
    """The temporal-free clause of ``G[0,T](...)`` as the online monitor keeps it."""
    return parse(stl).root.arg


def test_margin_bounds_by_hand():
    iv = {"x": (1.0, 3.0), "f": (0.0, 0.0), "t": (0.0, 1.0), "y": (10.0, 12.0)}
    assert margin_bounds(_clause("G[0,T](x < 5)"), iv) == (2.0, 4.0)  # 5 - 3, 5 - 1
    assert margin_bounds(_clause("G[0,T](x > 2)"), iv) == (-1.0, 1.0)
    assert margin_bounds(_clause("G[0,T](!(x > 2))"), iv) == (-1.0, 1.0)
    # an implication whose premise is surely false holds whatever follows
    assert margin_bounds(_clause("G[0,T](f -> x > 9)"), iv) == (math.inf, math.inf)
    # a premise that may be true: only the conclusion bounds it from below
    assert margin_bounds(_clause("G[0,T](t -> y < 15)"), iv)[0] == 3.0
    assert margin_bounds(_clause("G[0,T](x < 5 && y < 11)"), iv) == (-1.0, 1.0)
    assert margin_bounds(_clause("G[0,T](x < 5 || y < 11)"), iv) == (2.0, 4.0)
    # a signal without an interval bounds nothing
    assert margin_bounds(_clause("G[0,T](z < 5)"), iv)[0] == -math.inf


def test_drift_by_hand():
    assert drift(1e-3, 0.0, 0.25) == pytest.approx(1e-3 * SINH / 10, rel=1e-12)
    assert drift(0.0, 1e-3, 0.25) == pytest.approx(1e-3 * (COSH - 1) / 100, rel=1e-12)
    assert reach(1e-3, 1e-3, 0.25) == pytest.approx(1e-3 * (SINH / 10 + (COSH - 1) / 100))


def test_repeats():
    a = np.array([0.0, 0.0, 0.1, 0, 0, 0, -1.0])
    assert repeats([a, a.copy()], a)
    assert not repeats([a, a + 1e-12], a)
    assert not repeats([a], None)


def _clauses(*spec_ids: str):
    reg = load_registry()
    return [SimpleNamespace(spec=reg.specs[s], inner=SimpleNamespace(
        root=reg.specs[s].formula.root.arg)) for s in spec_ids]


ROLES = np.array([_ROLE_CODE[r] for r in ("robot", "robot", "furniture", "bystander")])
CLEAR = {"robot_furniture": 0.1, "robot_robot": 0.05, "finger": 0.1}


def _still(**kw) -> Stillness:
    base = {"qvel": 1e-3, "qacc": 1e-3, "force": 0.0, "pairs": (), "touch": False,
            "clearance": CLEAR}
    return Stillness(**{**base, **kw})


def _screen(still, values, spec_ids, levels=None):
    clauses = _clauses(*spec_ids)
    levels = levels if levels is not None else {s: 0.0 for s in spec_ids}
    return still_world(still, values, ROLES, False, 0.25, clauses, levels)


def test_displacement_bound_by_hand():
    """At qvel = qacc = 1e-3 for 0.25 s a body's origin drifts 3 m x (1e-3 sinh 2.5 / 10 +
    1e-3 (cosh 2.5 - 1) / 100) = 1.969 mm: 2 mm displaced now stays under 5 mm, 4 mm may
    not."""
    dm = 3 * 1e-3 * (SINH / 10 + (COSH - 1) / 100)
    assert dm == pytest.approx(1.969e-3, abs=1e-6)
    spec = ("non_target_max_disp_5mm",)
    assert _screen(_still(), {"non_target_disp_max": 0.002}, spec)
    assert not _screen(_still(), {"non_target_disp_max": 0.004}, spec)
    # a spec already below its level now need not stay anywhere (levels leave it out)
    assert _screen(_still(), {"non_target_disp_max": 0.009}, spec, levels={})


def test_force_bound_by_hand():
    """The largest force at rest stays under 1.5 x the row's largest + 10 N: 100 N -> 160 N
    (under 200), 130 N -> 205 N (not)."""
    spec = ("max_contact_force_under_200N",)
    values = {"max_contact_force": 0.0}
    assert _screen(_still(force=100.0), values, spec)
    assert not _screen(_still(force=130.0), values, spec)


def test_what_is_never_screened():
    spec = ("non_target_max_disp_5mm",)
    values = {"non_target_disp_max": 0.0}
    assert not _screen(_still(qvel=2e-3), values, spec)  # moving
    assert not _screen(_still(qacc=2e-3), values, spec)  # at rest but not in equilibrium
    assert not _screen(_still(touch=True), values, spec)  # the gripper touches something
    assert not _screen(_still(clearance={**CLEAR, "finger": -1e-4}), values, spec)
    # a signal the screen has no bound for: predict
    assert not _screen(_still(), {}, ("eef_speed_under_1mps",))


def test_binary_contact_signals_follow_the_pairs():
    """arm_furniture_contact and self_collision_count count only pairs MuJoCo lists now or
    that may close their gap while drifting."""
    touch = ("arm_no_furniture_collision",)
    values = {"arm_furniture_contact": 0.0}
    assert _screen(_still(), values, touch)
    assert not _screen(_still(pairs=((0, 2),)), values, touch)  # robot x furniture listed
    assert _screen(_still(pairs=((2, 3),)), values, touch)  # furniture x bystander: no
    assert not _screen(_still(clearance={**CLEAR, "robot_furniture": 0.0}), values, touch)
    selfc = ("self_collision_free",)
    assert _screen(_still(), {"self_collision_count": 0.0}, selfc)
    assert not _screen(_still(pairs=((0, 1),)), {"self_collision_count": 0.0}, selfc)


# -- in the simulator ----------------------------------------------------------------------------

STALLS = "l0_pick_green_mug_place_wooden_cabinet"
"""The careless policy fails this task and stands still from about step 150 on (seed 0)."""

FIELDS = ("eef_pos_m", "body_pos_m", "body_quat_wxyz", "contact_ptr", "contact_a",
          "contact_b", "contact_force_n", "joint_torque_nm", "gripper_contact")


@pytest.fixture(scope="module")
def stall_envs():
    pytest.importorskip("mujoco")
    from robosafe.hosts.robosafe import RobosafeEnv
    from robosafe.tasks.suites import suite_tasks

    path = suite_tasks("state_preservation", 0)[STALLS]
    return tuple(RobosafeEnv(path, horizon=220, render=False) for _ in range(2))


def _episode(env, policy):
    from robosafe.policies.base import play

    obs, _ = env.reset(seed=0)
    play(env, policy, obs)
    return env.episode(episode_id="e")


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.parametrize("mode", ["monitor", "filter"])
def test_screening_changes_nothing_but_the_skipped_count(stall_envs, mode):
    """On an episode that stands still, screening skips predictions; the shield's record and
    the episode are those of predicting every step, and (nothing being predicted unsafe) the
    episode is bitwise the unshielded one."""
    from robosafe.policies.base import make_policy
    from robosafe.runner.shield import Shield, ShieldConfig

    env, shadow = stall_envs
    plain = _episode(env, make_policy("scripted-careless"))
    out = {}
    for screen in (False, True):
        shield = Shield(make_policy("scripted-careless"), env, shadow,
                        ShieldConfig(mode, screen=screen))
        ep = _episode(env, shield)
        out[screen] = (ep, shield.finish(), shield.skipped)
    (ep0, rec0, n0), (ep1, rec1, n1) = out[False], out[True]
    assert n0 == 0 and rec0["skipped"] == 0
    assert n1 > 20 and rec1["skipped"] == n1
    assert {**rec1, "skipped": 0} == rec0
    assert not rec1["interventions"]
    for k in FIELDS:
        assert np.array_equal(getattr(ep0, k), getattr(ep1, k)), k
        assert np.array_equal(getattr(plain, k), getattr(ep1, k)), k


@pytest.mark.sim
def test_a_scripted_mover_is_reported():
    pytest.importorskip("mujoco")
    from robosafe.hosts.robosafe import RobosafeEnv
    from robosafe.tasks.suites import suite_tasks

    demo = suite_tasks("demo")
    moving = RobosafeEnv(demo["place_block_past_moving_car"], horizon=5, render=False)
    moving.reset(seed=0)
    assert moving.scripted_motion()
    moving.world.task_world.frozen = set(moving.world.task_world.moving)  # every mover stopped
    assert not moving.scripted_motion()
    still = RobosafeEnv(demo["place_apple_on_plate_past_vase"], horizon=5, render=False)
    still.reset(seed=0)
    assert not still.scripted_motion()
