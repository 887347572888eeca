"""Safety suites StatePreservation (VLA-Arena 001, App. 9.4, Table 8) and DynamicObstacles
(App. 9.5, Table 9): 30 CBDDL tasks.

Per task: it builds for seeds 0 and 1 with nothing overlapping, off the table, sliding or with
a false init atom (``robosafe.runner.check.placement_problems``, the check ``check_task``
runs), and the violating plan of the suite's ``checks.yaml`` makes its cost term fire (seed 0).
Per suite: one render check. DynamicObstacles L0: scripted-careful succeeds on >= 80% of
(task, seed) pairs with cost 0. StatePreservation L0: scripted-careful cannot grasp a mug or a
bowl (see the suite README); the test pins the task's goal and costs instead.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import yaml

from robosafe.hosts.robosafe import RobosafeEnv
from robosafe.policies.scripted import ViolatorPolicy
from robosafe.runner.check import check_task, placement_problems
from robosafe.sim.env import TaskEnv

# steps MuJoCo, tens of seconds or more; its cases run on either xdist worker (tests/conftest.py,
# SPREAD)
pytestmark = [pytest.mark.sim, pytest.mark.slow]

SUITES = Path(str(resources.files("robosafe.tasks"))) / "suites"
NAMES = ("state_preservation", "dynamic_obstacles")


def _tasks(suite: str) -> list[Path]:
    return sorted((SUITES / suite).glob("L*/*.bddl"))


def _checks(suite: str) -> dict:
    return yaml.safe_load((SUITES / suite / "checks.yaml").read_text(encoding="utf-8"))


ALL = [(s, p) for s in NAMES for p in _tasks(s)]


def test_layout_15_tasks_per_suite_5_per_level():
    for suite in NAMES:
        tasks = _tasks(suite)
        assert len(tasks) == 15, suite
        for k in range(3):
            level = [p for p in tasks if p.parent.name == f"L{k}"]
            assert len(level) == 5 and all(p.stem.startswith(f"l{k}_") for p in level)
        assert set(_checks(suite)) == {p.stem for p in tasks}
        assert (SUITES / suite / "README.md").is_file()


def _violate(env: RobosafeEnv, mode: str, target: str, term: int,
             max_steps: int = 200) -> float:
    """Run ViolatorPolicy(mode, target) on seed 0 until cost term ``term`` fires."""
    obs, _ = env.reset(seed=0)
    agent = ViolatorPolicy(mode, target)
    agent.reset(env.task_info().to_dict())
    for t in range(max_steps):
        obs, _, terminated, truncated, info = env.step(agent.act(obs))
        if info["cost_terms"][term] > 0 or terminated or truncated:
            break
        if t % 20 == 19 and env.world.cost_breakdown().per_term[term] > 0:  # terminal terms
            break
    return float(env.world.cost_breakdown().per_term[term])


@pytest.mark.parametrize(("suite", "path"), ALL, ids=[p.stem for _, p in ALL])
def test_task_places_cleanly_and_its_violation_fires(suite, path):
    env = RobosafeEnv(path, render=False, task_id=path.stem)
    try:
        for seed in (0, 1):
            env.reset(seed=seed)
            assert placement_problems(env.world) == [], f"seed {seed}"
        plan = _checks(suite)[path.stem]
        assert _violate(env, plan["mode"], plan["target"], plan["term"]) > 0, plan
    finally:
        env.close()


@pytest.mark.parametrize("suite", NAMES)
def test_suite_renders(suite):
    check = check_task(_tasks(suite)[-1], seeds=(0,), render=True)
    assert check.ok, check.problems


def test_dynamic_obstacles_l0_careful_succeeds_safely():
    rows = []
    for path in [p for p in _tasks("dynamic_obstacles") if p.parent.name == "L0"]:
        check = check_task(path, seeds=(0, 1), policy="scripted-careful", render=False)
        assert check.ok, check.problems
        rows.append((path.stem, check.successes, check.episodes, check.cost))
    for stem, ok, n, cost in rows:
        print(f"{stem:40s} {ok}/{n}  cost {cost}")
    successes = sum(r[1] for r in rows)
    assert successes >= 0.8 * sum(r[2] for r in rows)
    assert all(c == 0.0 for r in rows for c in r[3])


def test_state_preservation_fill_levels():
    """L0 empty, L1 half, L2 full: more water balls per level, all inside the container after
    settling; the spill term (any ball on the table) is term 0 whenever there are balls."""
    counts = {}
    for path in _tasks("state_preservation"):
        text = path.read_text(encoding="utf-8")
        n = text.count("- water_ball")
        counts.setdefault(path.stem[3:].split("_place_")[0], []).append(n)
        if n:
            assert "(InContact water_ball_1 main_table)" in text
    for name, per_level in counts.items():
        assert per_level[0] == 0 and 0 < per_level[1] < per_level[2], (name, per_level)
    path = SUITES / "state_preservation" / "L2" / "l2_pick_porcelain_mug_place_white_cabinet.bddl"
    env = TaskEnv(path, render=False)
    try:
        env.reset(seed=1)
        region = env.problem.region_index()["mug_1_bottom"]
        mug = env.view.pos("mug_1")
        for name in env.task_world.assets:
            if name.startswith("water_ball"):
                p = env.view.pos(name)
                # inside the mug's wall (its axis is 1.5 cm from the body centre: the handle)
                assert np.hypot(p[0] - mug[0], p[1] - (mug[1] - 0.015)) < 0.031, name
                assert p[2] < mug[2] + 0.045, name
        assert region.target == "mug_1"
    finally:
        env.close()
