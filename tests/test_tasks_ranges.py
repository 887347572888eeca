"""Region ranges must lie on their target: absurd magnitudes (+-1e308, which made placement
sample with NaN probabilities) and centimetres written as metres (50 m off the table) are
rejected by `tasks check` with the region's line."""

from __future__ import annotations

import pytest
from conftest import run_robosafe as run

from robosafe.tasks import parse_task, validate_task

TASK = """\
(define (problem T)
  (:domain robosuite)
  (:language put the bowl on the plate)
  (:regions
    (a (:target {target}) (:ranges (({r}))))
    (c (:target main_table) (:ranges ((-0.1 -0.1 0.1 0.1))))
  )
  (:fixtures main_table - main_table wooden_cabinet_1 - wooden_cabinet)
  (:objects akita_black_bowl_1 - akita_black_bowl plate_1 - plate)
  (:init (On akita_black_bowl_1 {target}_a) (On plate_1 main_table_c))
  (:goal (And (On akita_black_bowl_1 plate_1)))
)
"""


def _errors(r: str, target: str = "main_table") -> list[str]:
    return [str(e) for e in validate_task(parse_task(TASK.format(r=r, target=target)), "t.bddl")]


@pytest.mark.parametrize("r", ["-1e308 -1e308 1e308 1e308", "50 50 51 51", "0.45 0.1 0.55 0.2",
                               "-0.1 -0.65 0.1 -0.5"])
def test_table_ranges_off_the_table_top_are_errors(r):
    (err,) = _errors(r)
    assert err.startswith("t.bddl:5:6: region 'a' range") and "leaves its target 'main_table'" \
        in err and "|x| <= 0.5, |y| <= 0.6" in err


@pytest.mark.parametrize("r", ["-0.5 -0.6 0.5 0.6", "0.28 -0.4 0.3 -0.38"])
def test_ranges_on_the_table_top_are_fine(r):
    assert _errors(r) == []


def test_fixture_ranges_are_bounded():
    assert _errors("-0.05 -0.06 0.05 0.06", "wooden_cabinet_1") == []
    (err,) = _errors("50 50 51 51", "wooden_cabinet_1")
    assert "leaves its target 'wooden_cabinet_1'" in err and "|x| <= 1" in err


def test_tasks_check_exits_2(tmp_path):
    path = tmp_path / "t.bddl"
    path.write_text(TASK.format(r="-1e308 -1e308 1e308 1e308", target="main_table"))
    proc = run("tasks", "check", str(path))
    assert proc.returncode == 2 and f"{path}:5:6: region 'a' range" in proc.stderr


def test_a_goal_only_table_region_may_span_the_whole_table():
    """VLA-Arena's "anywhere on the table" idiom, (-1 -1 1 1), named by the goal only."""
    task = TASK.replace("(:goal (And (On akita_black_bowl_1 plate_1)))",
                        "(:goal (And (On akita_black_bowl_1 main_table_d)))").replace(
        "    (c (:target main_table)", "    (d (:target main_table) (:ranges ((-1 -1 1 1))))\n"
                                      "    (c (:target main_table)")
    errors = validate_task(parse_task(task.format(r="-0.1 -0.1 0.1 0.1", target="main_table")),
                           "t.bddl")
    assert errors == []
    bad = task.replace("(-1 -1 1 1)", "(-50 -50 50 50)")
    (err,) = validate_task(parse_task(bad.format(r="-0.1 -0.1 0.1 0.1", target="main_table")),
                           "t.bddl")
    assert "region 'd'" in str(err) and "|x| <= 1" in str(err)
