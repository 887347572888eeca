"""robosafe's world with VLA-Arena's own assets moves as VLA-Arena's env does, to the bit
(docs/decisions.md, "VLA-Arena parity against its own environment"): both simulators run side
by side in this process on the same robosuite and MuJoCo, stepped with the same actions.

Three causes of a difference were found and removed, each its own test here and each with a
parity row that differed before and is identical step by step now:

* the body that moves: VLA-Arena's env gives the free joint to the file's body; robosafe gave
  it to a body at the collision box centre (the same rigid body integrated about another frame
  drifted by 3e-7 m in the first step of the mug falling onto the table);
* the order of bodies: VLA-Arena builds its objects, then its fixtures (robosafe built the
  fixtures first; the contacts come in that order and their solution differs in the last bits,
  the kiwi on the stove drifted by 1e-6 m within 13 steps);
* the table: VLA-Arena's "table" arena sets its sliding friction to 0.6, not robosuite's 1.0.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parent.parent
BDDL = ROOT.parent / "shared" / "vla-arena" / "bddl_files"


parity = load_script("vla_arena_parity")

OBSTACLE = "safety_static_obstacles/level_1/pick_the_tomato_and_place_it_on_the_bowl_1.bddl"
KIWI = ("safety_hazard_avoidance/level_0/pick_up_the_kiwi_and_place_it_on_the_white_bowl_with_"
        "the_stove_turned_on.bddl")


class SideBySide:
    """VLA-Arena's env and robosafe's TaskEnv from VLA-Arena's initial state, stepped together."""

    def __init__(self, rel: str):
        from robosafe.sim.env import TaskEnv
        from robosafe.sim.placement import InitState

        self.arena = parity.ArenaSide(BDDL / rel)
        self.obs = self.arena.reset(0)
        init = InitState(self.arena.poses(), {}, joint_qpos=self.arena.joint_qpos())
        self.ours = TaskEnv(BDDL / rel, cost_mode="vla-arena", render=False, assets="vla-arena",
                            controller="robosuite", horizon=200, init_state=init)
        self.ours.reset(seed=0)
        self.names = [n for n in self.arena.bodies() if n in self.arena.inner.objects_dict]

    def step(self, action) -> None:
        self.obs = self.arena.step(action)[0]
        self.ours.step(np.asarray(action))

    def pose_gap(self) -> float:
        """Largest difference of any object's pose (the file's body: VLA-Arena's body) between
        the two, position (m) and quaternion components alike."""
        d, view = self.arena.inner.sim.data, self.ours.view
        gap = 0.0
        for n in self.names:
            b = self.arena.inner.obj_body_id[n]
            pos, quat = view.file_pose(n)
            gap = max(gap, float(np.abs(d.body_xpos[b] - pos).max()),
                      float(np.abs(d.body_xquat[b] - quat).max()))
        return gap

    def close(self) -> None:
        self.ours.close()
        self.arena.close()


@pytest.fixture
def obstacle():
    pair = SideBySide(OBSTACLE)
    yield pair
    pair.close()


def test_the_file_body_holds_the_free_joint_and_falls_as_in_vla_arena(obstacle):
    """The mug and the tomato VLA-Arena samples above the table fall onto it over the wait
    steps: the same poses to the last bit at every step (the box-centre frame was 3e-7 m off
    after the first); robosafe's own reading (the centre body) stays the box centre."""
    m = obstacle.ours.task_world.sim.model._model
    for n in obstacle.names:
        root, centre = obstacle.ours.task_world.root_id[n], obstacle.ours.task_world.body_id[n]
        assert m.body_jntnum[root] == 1 and m.body_parentid[centre] == root
        assert m.body_mass[centre] == 0.0 and m.body_geomnum[centre] == 0
    for _ in range(parity.WAIT_STEPS):
        obstacle.step(parity.WAIT_ACTION)
        assert obstacle.pose_gap() == 0.0


def test_the_table_is_vla_arenas(obstacle):
    """Tabletop_Manipulation's table slides with friction 0.6 in both (robosafe's default 1.0
    let the tomato drift 2e-8 m in the first step)."""
    ma = obstacle.arena.inner.sim.model._model
    mr = obstacle.ours.task_world.sim.model._model
    ours = mr.geom_friction[mr.geom("table_collision").id]
    assert list(ours) == list(ma.geom_friction[ma.geom("table_collision").id])
    assert list(ours) == [0.6, 0.005, 0.0001]


def test_bodies_in_vla_arenas_order():
    """The kiwi file's objects before its stove, as VLA-Arena builds them; with the stove first
    the kiwi resting on it drifted 1e-6 m within 13 wait-and-rest steps. Here 30 steps to the
    bit."""
    pair = SideBySide(KIWI)
    try:
        names = [pair.ours.task_world.sim.model._model.body(pair.ours.task_world.root_id[n]).name
                 for n in ("white_bowl_1", "kiwi_1", "flat_stove_1")]
        ids = [pair.ours.task_world.root_id[n] for n in ("white_bowl_1", "kiwi_1", "flat_stove_1")]
        assert ids == sorted(ids), names
        for _ in range(30):
            pair.step(parity.WAIT_ACTION)
            assert pair.pose_gap() == 0.0
    finally:
        pair.close()


# Rows of docs/vla_arena_parity.md that differed before the three causes were removed and are
# identical step by step now (first differing step and costs VLA-Arena / robosafe before):
# the touch of the mug beside the tomato (68; 27 / 28: the mug in the hand 3 mm off), the kiwi
# carried past the stove (77; 95 / 97: MuJoCo's distance query read 0 on one side's state),
# the knife picked near its blade (30; 12 / 8: the same, on a pad 14 cm from the blade).
FORMERLY_DIFFERENT = [
    (OBSTACLE, "touch"),
    (KIWI, "pick-place"),
    (("safety_risk_aware_grasping/level_0/pick_up_the_knife_and_place_it_on_the_top_of_the_"
      "cabinet.bddl"), "pick-place"),
]


@pytest.mark.parametrize(("rel", "plan"), FORMERLY_DIFFERENT)
def test_formerly_different_rows_are_identical_step_by_step(rel, plan):
    row, arena, ours = parity.run_one(BDDL / rel, rel, plan, parity.PLAN_STEPS[plan])
    assert row.identical, parity.markdown([row])
    assert ours.cost == arena.cost and ours.terms == arena.terms
    assert ours.success == arena.success


WATER = ("safety_object_state_preservation/level_1/pick_up_the_porcelain_mug_on_the_table_and_"
         "place_it_on_the_white_cabinet.bddl")


def test_water_balls_are_vla_arenas_file_and_the_row_is_identical():
    """With VLA-Arena's assets the water balls are its articulated_objects/water_ball.xml: one
    sphere of radius 0.015 m with sliding friction 0.001 (robosafe's stand-in, r 0.01 m and
    friction 0.2, let the mug stand on the cabinet at step 138 where VLA-Arena's does not).
    robosuite counts the sphere (group 1) as visual, so it is in no contact set, while MuJoCo
    collides it; the pick-and-place row is identical step by step."""
    row, arena, ours = parity.run_one(BDDL / WATER, WATER, "pick-place",
                                      parity.PLAN_STEPS["pick-place"])
    assert row.identical, parity.markdown([row])
    assert row.stand_ins == ""
    assert ours.cost == arena.cost and ours.terms == arena.terms
    assert ours.success == arena.success
    assert arena.success[-1] is False and len(arena.cost) == 170
    from robosafe.sim.env import TaskEnv

    ours_env = TaskEnv(BDDL / WATER, cost_mode="vla-arena", render=False, assets="vla-arena")
    try:
        ours_env.reset(seed=0)
        m = ours_env.task_world.sim.model._model
        root = ours_env.task_world.root_id["water_ball_1"]
        geoms = [g for g in range(m.ngeom) if m.body_rootid[m.geom_bodyid[g]] == root]
        assert [m.geom_type[g] for g in geoms] == [2]  # one sphere
        g = geoms[0]
        assert m.geom_size[g][0] == 0.015 and m.geom_group[g] == 1
        assert list(m.geom_friction[g]) == [0.001, 0.0001, 0.0001]
        assert m.geom_contype[g] == 1 and m.geom_conaffinity[g] == 1  # collides in MuJoCo
        assert not ours_env.view.masks["water_ball_1"].any()  # robosuite's contact_geoms: none
    finally:
        ours_env.close()
