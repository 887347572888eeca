"""Safety suites StaticObstacles, CautiousGrasp and HazardAvoidance (VLA-Arena paper
001, App. 9.1-9.3, Tables 5-7): every task places cleanly and renders, scripted-careful solves
the L0 tasks it can (cleanly), and each task's violating plan in checks.yaml fires its term.

Runtime: about two and a half minutes on 2 cores (one world per task and check, one seed for
the violations, two for placement and the L0 careful runs).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

import robosafe
from robosafe.policies.scripted import ViolatorPolicy
from robosafe.runner.check import check_task

# steps MuJoCo, tens of seconds or more; its cases run on either xdist worker, but for the
# ones sharing results (tests/conftest.py, SPREAD)
pytestmark = [pytest.mark.sim, pytest.mark.slow]

ROOT = Path(robosafe.__file__).parent / "tasks" / "suites"
SUITES = ("static_obstacles", "cautious_grasp", "hazard_avoidance")
TASKS = {(s, p.stem): p for s in SUITES for p in sorted((ROOT / s).glob("L*/*.bddl"))}
IDS = [f"{s}/{t}" for s, t in TASKS]
# scripted-careful grasps at the object's bounding-box centre, never rotates the hand and
# places "In" a drawer at the cabinet's centre: it cannot grasp a knife or scissors by the
# handle (their centres lie on the blade), nor a tool turned along the finger axis, nor put
# anything into an open drawer. CautiousGrasp is left to a handle-aware policy (README).
CAREFUL_SUITES = ("static_obstacles", "hazard_avoidance")
SEEDS = (0, 1)
# control steps a violating plan may take: touch and sweep are short, carry_into picks first
VIOLATION_STEPS = {"touch": 120, "sweep": 160, "carry_into": 260}


def checks(suite: str) -> dict:
    return yaml.safe_load((ROOT / suite / "checks.yaml").read_text(encoding="utf-8"))


def test_layout_five_tasks_per_level_and_readme():
    for suite in SUITES:
        for level in range(3):
            files = sorted((ROOT / suite / f"L{level}").glob("*.bddl"))
            assert len(files) == 5, (suite, level)
            assert all(f.stem.startswith(f"l{level}_") for f in files)
        assert (ROOT / suite / "README.md").is_file()
        ids = {t for s, t in TASKS if s == suite}
        assert set(checks(suite)) == ids, suite


@pytest.mark.parametrize("key", [k for k in TASKS if not k[1].startswith("l0_")
                                 or k[0] not in CAREFUL_SUITES],
                         ids=lambda k: f"{k[0]}/{k[1]}")
def test_placement(key):
    """No overlap, nothing off the table or sliding, init atoms hold (seeds 0 and 1)."""
    c = check_task(TASKS[key], seeds=SEEDS, render=False)
    assert c.ok, c.problems


CAREFUL: dict[str, tuple[int, int, list[float]]] = {}


@pytest.mark.parametrize("key", [k for k in TASKS if k[1].startswith("l0_")
                                 and k[0] in CAREFUL_SUITES], ids=lambda k: f"{k[0]}/{k[1]}")
def test_l0_careful_succeeds_cleanly(key):
    """Placement too; scripted-careful succeeds on both seeds at zero cost."""
    c = check_task(TASKS[key], seeds=SEEDS, policy="scripted-careful", render=False)
    CAREFUL[f"{key[0]}/{key[1]}"] = (c.successes, c.episodes, c.cost)
    assert c.ok, c.problems
    assert c.successes == len(SEEDS), c
    assert c.cost == [0.0] * len(SEEDS), c.cost


def test_l0_careful_table():
    """Per-task table of the careful runs above (printed with pytest -s); >= 80% overall."""
    if not CAREFUL:
        pytest.skip("run together with test_l0_careful_succeeds_cleanly")
    for task, (s, n, cost) in sorted(CAREFUL.items()):
        print(f"{task:55s} success {s}/{n} cost {cost}")
    rate = sum(s for s, _, _ in CAREFUL.values()) / sum(n for _, n, _ in CAREFUL.values())
    assert rate >= 0.8


@pytest.mark.parametrize("suite", SUITES)
def test_render(suite):
    path = min((ROOT / suite).glob("L2/*.bddl"))
    c = check_task(path, seeds=(0,), render=True)
    assert c.ok, c.problems


@pytest.mark.parametrize("key", list(TASKS), ids=IDS)
def test_violation_fires(key):
    """The checks.yaml plan (same modes as the lead's check command) makes its term fire."""
    from robosafe.hosts.robosafe import RobosafeEnv
    from robosafe.tasks.cost import cost_terms

    suite, task_id = key
    spec = checks(suite)[task_id]
    env = RobosafeEnv(TASKS[key], render=False, horizon=VIOLATION_STEPS[spec["mode"]])
    try:
        assert 0 <= spec["term"] < len(cost_terms(env.world.problem.cost))
        policy = ViolatorPolicy(spec["mode"], spec["target"])
        obs, _ = env.reset(seed=0)
        policy.reset(env.task_info().to_dict())
        for _ in range(env.horizon):
            obs, _, terminated, truncated, info = env.step(policy.act(obs))
            if info["cost_terms"][spec["term"]] > 0 or terminated or truncated:
                break
        per_term = env.world.cost_breakdown().per_term
        assert per_term[spec["term"]] > 0, (spec, per_term)
        assert np.isfinite(per_term).all()
    finally:
        env.close()
