"""VLA-Arena's own 170 task files (../shared/vla-arena/bddl_files, Apache-2.0) read unchanged.

The expected warnings are derived here by an independent s-expression reading of each file
(not robosafe's parser): every construct VLA-Arena reads differently from robosafe must give
exactly one warning line, and nothing else may warn or fail.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from conftest import run_robosafe

from robosafe.tasks import And, parse_file, parse_task, validate_task
from robosafe.tasks.cost import cost_terms

ROOT = Path(__file__).resolve().parents[1]
ARENA = next((p for p in (ROOT.parent / "shared/vla-arena/bddl_files",
                          Path("/work/shared/vla-arena/bddl_files")) if p.is_dir()), None)
FILES = sorted(ARENA.rglob("*.bddl")) if ARENA else []
needs_files = pytest.mark.skipif(not FILES, reason="VLA-Arena task files not present")


def sexpr(text: str):
    """Nested lists of atoms; ';' comments dropped (what LIBERO's scan_tokens does)."""
    text = re.sub(r";[^\n]*", "", text)
    stack: list[list] = [[]]
    for tok in re.findall(r"[()]|[^\s()]+", text):
        if tok == "(":
            stack.append([])
        elif tok == ")":
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(tok)
    return stack[0][0]


def expected_warnings(path: Path) -> Counter:
    """Kinds of warnings the file must produce, worked out from the raw s-expression."""
    blocks = {b[0]: b[1:] for b in sexpr(path.read_text())[2:]}
    out: Counter = Counter()
    for key in (":goal", ":cost"):
        if len(blocks.get(key, ())) > 1:
            out[f"{key} {len(blocks[key])}"] += 1
    refs = Counter()
    for region in blocks.get(":regions", ()):
        target = next(a[1] for a in region[1:] if a[0] == ":target")
        refs[(target, region[0])] += 1
    out["duplicate region"] += sum(n - 1 for n in refs.values())
    declared = set()
    for key in (":objects", ":fixtures"):
        items = blocks.get(key, ())
        declared |= {x for i, x in enumerate(items) if x != "-" and (i == 0 or items[i - 1] != "-")}
    out["obj_of_interest"] += sum(n not in declared for n in blocks.get(":obj_of_interest", ()))
    for mover in blocks.get(":moving_objects", ()):
        attrs = {a[0]: a[1:] for a in mover[1:]}
        kind = attrs[":motion_type"][0]
        out[":motion_start_quat"] += ":motion_start_quat" in attrs
        out[":motion_dt ignored"] += ":motion_dt" in attrs and kind not in ("waypoint",
                                                                              "parabolic")
    return +out


def warning_kind(line: str) -> str:
    if m := re.search(r"'\((:goal|:cost)' lists (\d+) formulas without", line):
        return f"{m[1]} {m[2]}"
    for needle, kind in (("is defined twice", "duplicate region"),
                         ("':obj_of_interest' entry", "obj_of_interest"),
                         ("':motion_start_quat'", ":motion_start_quat"),
                         ("':motion_dt' is ignored", ":motion_dt ignored")):
        if needle in line:
            return kind
    raise AssertionError(f"unexpected warning: {line}")


@needs_files
def test_there_are_170_files():
    assert len(FILES) == 170


@needs_files
@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.parent.name}/"
                         f"{p.parent.name}/{p.stem[:40]}")
def test_every_file_checks_with_each_difference_warned_once(path):
    problem = parse_file(path)
    assert validate_task(problem, str(path)) == []
    got = Counter(warning_kind(w) for w in problem.warnings)
    assert got == expected_warnings(path)
    assert all(w.startswith(f"{path}:") for w in problem.warnings)


@needs_files
def test_warning_totals_match_the_measured_survey():
    """10 files list several formulas, 5 repeat a region, 2 name a non-object of interest."""
    files = Counter()
    for path in FILES:
        for kind in {warning_kind(w).split()[0] for w in parse_file(path).warnings}:
            files[kind] += 1
    assert files[":cost"] + files[":goal"] == 10
    assert files["duplicate"] == 5 and files["obj_of_interest"] == 1 + 1


@needs_files
def test_implicit_and_keeps_every_formula():
    path = next(p for p in FILES if "porcelain_bowl_on_the_table_center" in p.name)
    cost = parse_file(path).cost
    assert isinstance(cost, And) and cost.implicit and len(cost_terms(cost)) == 8


TASK = """(define (problem t)
  (:domain robosuite)
  (:language go)
  (:objects a - apple m - drone)
  {moving}
  (:goal (On a m))
  {extra})
"""


def test_bare_period_is_control_steps_and_the_shipped_tasks_state_their_units():
    mover = "(:moving_objects (m (:motion_type linear) (:motion_period 125) " \
            "(:motion_travel_dist 0.2) (:motion_direction (1 0 0))))"
    assert parse_task(TASK.format(moving=mover, extra="")).moving_objects[0].get(
        "period") == 125 / 20
    shipped = ROOT / "src/robosafe/tasks"
    bare = [p for p in shipped.rglob("*.bddl")
            if re.search(r"\(:motion_period\s+[-+0-9.eE]+\s*\)", re.sub(r";[^\n]*", "",
                                                                       p.read_text()))]
    assert bare == []  # every shipped period carries its unit, so none changed meaning


def test_waypoints_with_motion_dt_run_forward_and_back_like_vla_arena():
    # 3 waypoints written ((x y z) (dx dy dz)); dt 2 -> int(10 / 2) = 5 steps per segment.
    # VLA-Arena ping-pongs w0 w1 w2 w1 w0 ...: the loop w0 w1 w2 w1 has 4 segments = 20 steps
    # = 1.0 s at 20 Hz.
    mover = ("(:moving_objects (m (:motion_type waypoint) (:motion_waypoints (((0 0 1) (1 0 0)) "
             "((0.1 0 1) (1 0 0)) ((0.2 0 1) (0 1 0)))) (:motion_dt 2)))")
    p = parse_task(TASK.format(moving=mover, extra=""))
    m = p.moving_objects[0]
    assert m.get("waypoints") == ((0, 0, 1, 1, 0, 0), (0.1, 0, 1, 1, 0, 0), (0.2, 0, 1, 0, 1, 0),
                                  (0.1, 0, 1, 1, 0, 0))
    assert m.get("period") == 1.0 and m.get("loop") is True
    assert p.warnings == () and validate_task(p) == []
    # dt 0.3 -> int(33.33) = 33 steps per segment, 2 waypoints -> loop of 2 segments = 3.3 s
    slow = mover.replace("(:motion_dt 2)", "(:motion_dt 0.3)").replace(
        " ((0.2 0 1) (0 1 0))", "")
    assert parse_task(TASK.format(moving=slow, extra="")).moving_objects[0].get(
        "period") == pytest.approx(66 / 20)


def test_motion_dt_on_a_circle_and_start_quat_are_ignored_with_one_line_each():
    mover = ("(:moving_objects (m (:motion_type circle) (:motion_center (0 0 1)) "
             "(:motion_start_quat (0 0 0 1)) (:motion_period 60) (:motion_dt 1)))")
    p = parse_task(TASK.format(moving=mover, extra=""))
    assert [a.name for a in p.moving_objects[0].attrs] == ["motion_center", "motion_period"]
    assert p.moving_objects[0].get("period") == 3.0  # 60 steps at 20 Hz
    assert len(p.warnings) == 2
    assert "':motion_start_quat' is read by VLA-Arena only for parabolic motion" in p.warnings[0]
    assert "':motion_dt' is ignored by VLA-Arena for circular motion" in p.warnings[1]


def test_projectile_motion_dt_rescales_the_clock():
    # VLA-Arena: p = p0 + v0 (k dt) + g (k dt)^2 / 2 after k steps. dt 0.01 at 20 Hz: robosafe's
    # t = k / 20, so v0' = v0 * 0.01 * 20 = 0.2 v0 and g' = g * 0.2^2 = 0.04 g.
    mover = ("(:moving_objects (m (:motion_type parabolic) (:motion_initial_speed 2) "
             "(:motion_direction (1 0 0)) (:motion_gravity (0 0 -10)) (:motion_dt 0.01)))")
    m = parse_task(TASK.format(moving=mover, extra="")).moving_objects[0]
    assert m.get("initial_speed") == pytest.approx(0.4)
    assert m.get("gravity") == pytest.approx((0, 0, -0.4))


def test_camera_offsets_written_bare_as_vla_arena_parses_them():
    p = parse_task(TASK.format(moving="", extra="(:camera agentview 0.05 0 0 frontview)"))
    assert [(c.name, c.offset) for c in p.camera] == [("agentview", (0.05, 0.0, 0.0)),
                                                      ("frontview", None)]


@needs_files
def test_cli_check_prints_one_warning_line_per_difference_and_exits_0():

    path = next(p for p in FILES if "porcelain_bowl_on_the_table_center" in p.name)
    proc = run_robosafe("tasks", "check", path)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("robosafe: warning:")]
    assert len(lines) == 1 and "lists 8 formulas without (And ...)" in lines[0]
    assert ": ok" in proc.stdout
