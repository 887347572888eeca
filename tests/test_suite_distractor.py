"""StaticDistractors, DynamicDistractors and UnseenObjects (VLA-Arena paper 001, App. 9.6, 9.7,
9.10; Tables 10, 11, 14): every task builds for seeds 0 and 1 with
nothing overlapping, off the table or sliding and every init atom holding; each suite renders;
scripted-careful reaches the goal on >= 80% of the L0 episodes (seeds 0 and 1; it reaches all);
the dynamic distractors never push the target or the destination by themselves.

These suites are not Safety suites: they carry no cost block (README of each suite).
"""

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from robosafe.hosts.robosafe import RobosafeEnv
from robosafe.runner.check import check_task
from robosafe.sim.env import TaskEnv
from robosafe.tasks import parse_task

# steps MuJoCo, tens of seconds or more; its cases run on either xdist worker, but for the
# ones sharing results (tests/conftest.py, SPREAD)
pytestmark = [pytest.mark.sim, pytest.mark.slow]

SUITES_DIR = Path(__file__).resolve().parents[1] / "src/robosafe/tasks/suites"
SUITES = ("static_distractors", "dynamic_distractors", "unseen_objects")
TASKS = {s: sorted((SUITES_DIR / s).glob("L*/*.bddl")) for s in SUITES}
ALL = [p for s in SUITES for p in TASKS[s]]
SEEDS = (0, 1)


def _id(path: Path) -> str:
    return f"{path.parent.parent.name}/{path.stem}"


def test_fifteen_tasks_per_suite_five_per_level():
    for suite, paths in TASKS.items():
        assert len(paths) == 15, suite
        for level in ("L0", "L1", "L2"):
            ids = [p.stem for p in paths if p.parent.name == level]
            assert len(ids) == 5, (suite, level)
            assert all(i.startswith(f"l{level[1]}_") for i in ids), ids


@pytest.mark.parametrize("path", ALL, ids=_id)
def test_task_conventions(path):
    problem = parse_task(path.read_text(), source=str(path))
    level = path.parent.name
    camel = {"static_distractors": "StaticDistractors",
             "dynamic_distractors": "DynamicDistractors",
             "unseen_objects": "UnseenObjects"}[path.parent.parent.name]
    assert problem.name.startswith(f"{camel}_{level}_Pick_"), problem.name
    assert problem.language.startswith("Pick "), problem.language
    assert not problem.cost, "distractor / extrapolation suites carry no cost block"
    n_moving = len(problem.moving_objects)
    if path.parent.parent.name == "dynamic_distractors":
        # App. 9.7: L0 stationary, L1 one linear mover, L2 several curved movers
        assert n_moving == {"L0": 0, "L1": 1, "L2": 3}[level]
        kinds = {m.motion_type for m in problem.moving_objects}
        assert kinds <= {"L0": set(), "L1": {"linear"}, "L2": {"circular", "waypoint"}}[level]
    else:
        assert n_moving == 0


_L0 = {}


@pytest.mark.parametrize("path", [p for p in ALL if p.parent.name != "L0"], ids=_id)
def test_placement(path):
    """check_task with seeds 0 and 1."""
    res = check_task(path, seeds=SEEDS, render=False)
    assert res.problems == [], res.problems


@pytest.mark.parametrize("path", [p for p in ALL if p.parent.name == "L0"], ids=_id)
def test_l0_placement_and_success(path):
    """check_task with seeds 0 and 1, running scripted-careful; its successes go to the table
    below."""
    res = check_task(path, seeds=SEEDS, render=False, policy="scripted-careful")
    assert res.problems == [], res.problems
    _L0[_id(path)] = (res.successes, res.episodes)


def test_l0_careful_success_rate_per_suite():
    """Runs after the parametrised checks (file order); re-runs any L0 task they skipped."""
    for path in ALL:
        if path.parent.name == "L0" and _id(path) not in _L0:
            res = check_task(path, seeds=SEEDS, render=False, policy="scripted-careful")
            _L0[_id(path)] = (res.successes, res.episodes)
    print("\nscripted-careful on L0 (seeds 0, 1)")
    for task, (ok, n) in sorted(_L0.items()):
        print(f"  {task:50s} {ok}/{n}")
    for suite in SUITES:
        rows = [v for k, v in _L0.items() if k.startswith(f"{suite}/")]
        ok, n = sum(r[0] for r in rows), sum(r[1] for r in rows)
        assert n == 2 * 5 and ok >= 0.8 * n, (suite, ok, n)


@pytest.mark.parametrize("suite", SUITES)
def test_one_render_per_suite(suite):
    path = TASKS[suite][-1]  # an L2 task: the most crowded scene
    res = check_task(path, seeds=(0,), render=True)
    assert res.problems == [], res.problems


def test_unseen_objects_l1_shows_unseen_instances():
    """L1 = the L0 categories as unseen instances (App. 9.10; VLA-Arena's files use its `*_n`
    objects): every L1 object is the `_n` row of its L0 object, sized from the other scan and
    coloured differently; the look is fixed, not redrawn per episode (a per-episode colour
    would be the V2 visual perturbation, not an object)."""
    from robosafe.sim.assets import category
    from robosafe.tasks import parse_task

    def looks(path):
        env = TaskEnv(path, render=False)
        try:
            m = env.task_world.model_ptr()
            out = []
            for seed in SEEDS:
                env.reset(seed=seed)
                out.append({n: tuple(np.round(m.geom(a.rgba_geoms[0]).rgba, 4))
                            for n, a in env.task_world.assets.items() if a.rgba_geoms})
            return out
        finally:
            env.close()

    for l1 in (p for p in TASKS["unseen_objects"] if p.parent.name == "L1"):
        l0 = l1.parents[1] / "L0" / l1.name.replace("l1_", "l0_")
        seen = {o.name: o.category for o in parse_task(l0.read_text()).objects}
        task = parse_task(l1.read_text())
        assert task.random_color is None
        new_look, old_look = looks(l1), looks(l0)
        assert new_look[0] == new_look[1]  # fixed across seeds
        for o in task.objects:
            if o.category == "box":
                continue
            assert o.category == seen[o.name] + "_n", (l1.name, o)
            assert category(o.category).half_extents != category(seen[o.name]).half_extents
            assert new_look[0][o.name] != old_look[0][o.name], (l1.name, o.name)


@pytest.mark.parametrize("name", ["L1/l1_pick_banana_place_plate",
                                  "L2/l2_pick_banana_place_plate"])
def test_moving_distractors_leave_the_scene_alone(name):
    """With the robot still for 10 s (at least 10/12 of every L1/L2 period), the movers touch
    neither the target nor the destination: the lanes are the same in every task of a level
    and the plate is the widest destination."""
    env = RobosafeEnv(SUITES_DIR / "dynamic_distractors" / f"{name}.bddl", render=False)
    try:
        env.reset(seed=0)
        still = [n for n, o in env.task_info().to_dict()["objects"].items()
                 if o["kind"] == "object" and not o["moving"]]
        start = {n: env.world.view.pos(n).copy() for n in still}
        movers = {n: env.world.view.pos(n).copy() for n in env.world.task_world.moving}
        travel = dict.fromkeys(movers, 0.0)
        for t in range(200):
            env.step(np.zeros(env.action_dim))
            if t % 20 == 19:
                for n, p in movers.items():
                    travel[n] = max(travel[n], float(np.linalg.norm(env.world.view.pos(n) - p)))
        for n in still:
            assert np.linalg.norm(env.world.view.pos(n) - start[n]) < 0.005, n
        assert min(travel.values()) > 0.05, travel  # they did move
    finally:
        env.close()
