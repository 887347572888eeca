"""Suite registry and `robosafe suites list | show | check`."""

import json

import pytest
from conftest import run_robosafe as cli

from robosafe.errors import RobosafeError
from robosafe.tasks.suites import suite_checks, suite_entries, suite_names, suite_tasks

pytestmark = pytest.mark.sim  # steps MuJoCo


def test_registry_lists_suites_and_tasks_by_level():
    assert "demo" in suite_names()
    demo = suite_entries("demo")
    assert len(demo) == 5 and all(t.level is None for t in demo)
    assert set(suite_tasks("demo")) == {t.task_id for t in demo}
    assert set(suite_checks("demo")) <= set(suite_tasks("demo"))
    with pytest.raises(RobosafeError, match="has no level L1"):
        suite_entries("demo", 1)


def test_list_and_show_print_json():
    res = cli("suites", "list", "--json")
    assert res.returncode == 0, res.stderr
    rows = {r["suite"]: r for r in json.loads(res.stdout)["suites"]}
    assert rows["demo"]["tasks"] == 5
    res = cli("suites", "show", "demo", "--json")
    tasks = {t["task_id"]: t for t in json.loads(res.stdout)["tasks"]}
    assert tasks["place_apple_on_plate_past_vase"]["cost_terms"][0] == "(InContact apple_1 vase_1)"


@pytest.mark.slow
def test_check_builds_solves_and_violates_every_demo_task():
    res = cli("suites", "check", "demo", "--num-seeds", "1", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    out = json.loads(res.stdout)
    assert out["failed"] == 0 and out["l0_success_rate"] == 1.0
    assert sum(r["violation_checked"] for r in out["tasks"]) == len(suite_checks("demo"))


@pytest.mark.slow
def test_run_selects_suite_tasks(tmp_path):
    res = cli("run", "--suite", "demo", "--task-id", "nope", "--policy", "zero",
              "--out", str(tmp_path / "r"))
    assert res.returncode == 2 and "nope not in suite demo" in res.stderr
    res = cli("run", "--suite", "demo", "--task-id", "turn_off_stove", "--policy", "zero",
              "--horizon", "3", "--out", str(tmp_path / "r"), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["episodes"] == 1


def test_every_suite_task_has_registry_tags_and_the_generated_file_is_current():
    from pathlib import Path

    from robosafe.safety.registry import load_registry
    from robosafe.sim.tags import suite_tags_document

    root = Path(__file__).resolve().parents[1]
    text = (root / "src/robosafe/safety/data/suite_tags.yaml").read_text()
    assert text == suite_tags_document(), "run python scripts/make_suite_tags.py"
    reg = load_registry()
    for suite in suite_names():
        for t in suite_entries(suite):
            res = reg.resolve(suite, t.task_id)
            assert not res.from_trace and res.template or res.components
