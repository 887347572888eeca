"""Suites PrepositionCombinations, TaskWorkflows and LongHorizon (VLA-Arena paper 001,
App. 9.8, 9.9, 9.11, Tables 12, 13 and 15).

Every task builds for seeds 0 and 1 with nothing in collision, off the table or sliding and
every init atom holding; one task per suite renders; scripted-careful solves >= 80% of the L0
episodes (seeds 0 and 1; the per-task table is printed, the known gaps are listed below with
why); and a multi-atom goal (atoms run in order) is reached. No cost blocks: these are not
safety suites.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mujoco")
pytest.importorskip("robosuite")

from robosafe.runner.check import check_task

# steps MuJoCo, tens of seconds or more; its cases run on either xdist worker, but for the
# ones sharing results (tests/conftest.py, SPREAD)
pytestmark = [pytest.mark.sim, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1] / "src" / "robosafe" / "tasks" / "suites"
SUITES = ("preposition_combinations", "task_workflows", "long_horizon")
SEEDS = (0, 1)

TASKS = sorted(p for s in SUITES for p in (ROOT / s).glob("L*/*.bddl"))
L0 = [p for p in TASKS if p.parent.name == "L0"]
OTHER = [p for p in TASKS if p.parent.name != "L0"]

# L0 tasks scripted-careful cannot do yet, and why (the README of each suite repeats this).
KNOWN_GAPS: dict[str, str] = {}  # none at present (task key -> reason)


def _key(p: Path) -> str:
    return f"{p.parents[1].name}/{p.stem}"


def test_task_counts():
    counts = {s: {lvl: len(list((ROOT / s / lvl).glob("*.bddl"))) for lvl in ("L0", "L1", "L2")}
              for s in SUITES}
    assert counts["preposition_combinations"] == {"L0": 5, "L1": 5, "L2": 5}
    assert counts["task_workflows"] == {"L0": 5, "L1": 5, "L2": 5}
    assert counts["long_horizon"] == {"L0": 10, "L1": 5, "L2": 5}
    for s in SUITES:
        assert (ROOT / s / "README.md").is_file()
        assert not (ROOT / s / "checks.yaml").exists()  # not safety suites


@pytest.fixture(scope="module")
def l0_runs():
    """One check per L0 task: placement for both seeds plus a scripted-careful episode each."""
    return {_key(p): check_task(p, seeds=SEEDS, policy="scripted-careful", render=False)
            for p in L0}


@pytest.mark.parametrize("path", OTHER, ids=_key)
def test_placement(path):
    assert check_task(path, seeds=SEEDS, render=False).problems == []


@pytest.mark.parametrize("path", L0, ids=_key)
def test_l0_placement(path, l0_runs):
    assert l0_runs[_key(path)].problems == []


def test_l0_scripted_careful(l0_runs):
    print(f"\n{'task':60s} success (seeds {SEEDS})  cost")
    for key, r in l0_runs.items():
        note = f"  known gap: {KNOWN_GAPS[key]}" if key in KNOWN_GAPS else ""
        print(f"{key:60s} {r.successes}/{r.episodes}  {sum(r.cost):.0f}{note}")
    done = sum(r.successes for r in l0_runs.values())
    total = sum(r.episodes for r in l0_runs.values())
    assert total == len(SEEDS) * len(L0)
    assert done >= 0.8 * total, f"scripted-careful solved {done}/{total} L0 episodes"
    # everything not listed as a gap is solved at least once
    unsolved = [k for k, r in l0_runs.items() if not r.successes and k not in KNOWN_GAPS]
    assert unsolved == []
    assert all(sum(r.cost) == 0 for r in l0_runs.values())  # no cost blocks: always 0


def test_multi_atom_goal_runs_atoms_in_order():
    """LongHorizon L1: two In atoms, planned one after the other by scripted-careful."""
    path = ROOT / "long_horizon" / "L1" / "l1_all_apples_box.bddl"
    r = check_task(path, seeds=(0,), policy="scripted-careful", render=False)
    assert r.problems == [] and r.successes == 1


@pytest.mark.parametrize("suite", SUITES)
def test_render(suite):
    path = min((ROOT / suite / "L0").glob("*.bddl"))
    assert check_task(path, seeds=(0,), render=True).problems == []
