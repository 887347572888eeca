"""Waypoint movers in cost mode vla-arena with VLA-Arena's assets move as in VLA-Arena's env
(docs/decisions.md, "VLA-Arena parity against its own environment"): the file's body welded
to a mocap target (solref 0.02 1, solimp 0.9 0.95 0.001) that VLA-Arena's generator
arithmetic moves once per control step, from the first wait step.

Before, robosafe's mickey was a kinematic body on the path, 11 cm from VLA-Arena's at step 0;
it knocked the bowl off the table at step 36 and the pick-and-place row differed at step 155
(success True / False). Tolerance of the poses below: none (equal to the bit).
"""

from __future__ import annotations

import numpy as np
import pytest
from test_vla_arena_physics import BDDL, SideBySide, parity

MICKEY = "robustness_dynamic_distractors/level_2/pick_up_the_apple_and_place_it_on_the_bowl.bddl"
TWIN = "safety_dynamic_obstacles/level_2/pick_up_the_apple_and_place_it_on_the_bowl.bddl"


def _target_gap(pair: SideBySide, name: str) -> float:
    """Largest difference of the mover's mocap target (position and quaternion) between
    VLA-Arena's env (``<name>_main_mocap``) and robosafe's."""
    ma, da = pair.arena.inner.sim.model._model, pair.arena.inner.sim.data._data
    k = int(ma.body(f"{name}_main_mocap").mocapid[0])
    ours = pair.ours.task_world
    j, d = ours.target_id[name], ours.sim.data
    return max(float(np.abs(da.mocap_pos[k] - d.mocap_pos[j]).max()),
               float(np.abs(da.mocap_quat[k] - d.mocap_quat[j]).max()))


def test_the_mover_and_its_target_are_vla_arenas_at_every_step_of_the_pick_and_place():
    """Wait steps, then the pick-and-place plan (closed loop on VLA-Arena's state) up to its
    success at step 155: the mickey, its target and every other object equal to the bit at
    each step (the target on the way back along the path from step 80)."""
    pair = SideBySide(MICKEY)
    try:
        ours = pair.ours.task_world
        m = ours.sim.model._model
        root = ours.root_id["mickey_1"]
        assert m.body_mocapid[root] == -1 and m.body_jntnum[root] == 1  # a free body
        assert m.neq == 1 and m.eq_obj1id[0] == root
        assert list(m.eq_solref[0]) == [0.02, 1.0]
        assert list(m.eq_solimp[0][:3]) == [0.9, 0.95, 0.001]
        for t in range(156):
            if t < parity.WAIT_STEPS:
                action = parity.WAIT_ACTION
            else:
                action = parity.plan_pick_place(pair.arena, pair.obs, t - parity.WAIT_STEPS)
            pair.step(action)
            assert _target_gap(pair, "mickey_1") == 0.0, t
            assert pair.pose_gap() == 0.0, t
        assert pair.ours.success
        # the target moved along the path and back, not held: sample 155 is w1 on the way back
        # (segments of 5 samples: w16 at 80, w15 at 85, ..., w1 at 155)
        assert np.allclose(ours.sim.data.mocap_pos[ours.target_id["mickey_1"]],
                           [0.127, 0.307, 0.95])
    finally:
        pair.close()


@pytest.mark.parametrize("rel", [MICKEY, TWIN])
def test_the_waypoint_rows_are_identical_step_by_step(rel):
    """The two rows that differed (first at step 155: VLA-Arena's apple on the bowl, robosafe's
    bowl knocked off the table at step 36) are identical: every step's cost and success."""
    row, arena, ours = parity.run_one(BDDL / rel, rel, "pick-place",
                                      parity.PLAN_STEPS["pick-place"])
    assert row.identical, parity.markdown([row])
    assert ours.cost == arena.cost and ours.terms == arena.terms
    assert ours.success == arena.success and ours.success[-1]


def test_robosafes_own_cost_mode_keeps_the_kinematic_mover():
    """Cost mode robosafe (same assets): no weld; the mickey is a mocap body on the path
    (robosafe's mover, App. 7.2.3)."""
    from robosafe.sim.env import TaskEnv

    env = TaskEnv(BDDL / MICKEY, render=False, assets="vla-arena", horizon=5)
    try:
        env.reset(seed=0)
        ours = env.task_world
        m = ours.sim.model._model
        assert ours.welded == {} and m.neq == 0
        assert m.body_mocapid[ours.root_id["mickey_1"]] >= 0
    finally:
        env.close()
