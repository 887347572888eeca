"""CBDDL parser and writer (VLA-Arena paper 001, App. 7): round trips, units, comments, errors."""

from dataclasses import replace
from importlib import resources

import pytest
from factories import TASK_EXAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robosafe.errors import TaskError
from robosafe.tasks import (
    And,
    Camera,
    Decl,
    MotionAttr,
    MovingObject,
    Noise,
    Not,
    Or,
    Pred,
    Problem,
    Region,
    Setting,
    parse_file,
    parse_task,
    validate_task,
    write_task,
)
from robosafe.tasks.ast import atoms
from robosafe.tasks.parser import IMAGE_KEYS, MOTION_ATTRS, MOTION_TYPES, NOISE_PARAMS

EXAMPLES = TASK_EXAMPLES


def example(name: str) -> str:
    return resources.files("robosafe.tasks").joinpath("examples", name).read_text()


def task(body: str = "", goal: str = "(On a b)") -> str:
    return f"(define (problem t)\n  (:domain robosuite)\n  (:language go)\n{body}  (:goal {goal})\n)\n"


def error(text: str, **kw) -> TaskError:
    with pytest.raises(TaskError) as info:
        parse_task(text, "t.bddl", **kw)
    return info.value


# -- examples and round trips ----------------------------------------------------------------
def test_three_examples_ship():
    assert {p.name for p in EXAMPLES} >= {"libero_pick_place.bddl", "every_block.bddl",
                                          "dynamic_obstacle_cost.bddl"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_round_trips(path):
    problem = parse_file(path)
    text = write_task(problem)
    assert parse_task(text) == problem
    assert write_task(parse_task(text)) == text


def test_libero_example_ast():
    p = parse_task(example("libero_pick_place.bddl"))
    assert p.name == "LIBERO_Kitchen_Tabletop_Manipulation" and p.domain == "robosuite"
    assert p.language == "Pick up the black bowl and place it on the plate"
    assert p.regions[0] == Region("plate_init_region", "kitchen_table",
                                  ((-0.01, 0.24, 0.01, 0.26),), ((0.0, 0.0),))
    assert p.regions[0].ref == "kitchen_table_plate_init_region"
    assert p.fixtures == (Decl("kitchen_table", "kitchen_table"),
                          Decl("wooden_cabinet_1", "wooden_cabinet"))
    assert [d.category for d in p.objects] == ["akita_black_bowl", "akita_black_bowl", "plate"]
    assert p.obj_of_interest == ("akita_black_bowl_1", "plate_1")
    assert p.init[-1] == Pred("Open", ("wooden_cabinet_1_top_region",))
    assert p.goal == And((Pred("On", ("akita_black_bowl_1", "plate_1")),))
    assert p.cost is None and p.moving_objects == () and p.random_color is None


def test_every_block_example_ast():
    p = parse_task(example("every_block.bddl"))
    assert {m.motion_type for m in p.moving_objects} == set(MOTION_TYPES)
    assert p.image == {"brightness": 0.4, "saturation": -0.4, "contrast": 0.3,
                       "temperature": 5000.0}
    assert p.noise == Noise("gaussian", (0.0, 0.01)) and p.noise.named["var"] == 0.01
    assert p.camera == (Camera("agentview", (0.0, 0.05, 0.02)), Camera("frontview"),
                        Camera("robot0_eye_in_hand"))
    assert p.random_color is True and p.control_freq == 20.0
    assert p.language == "Put the apple on the plate (carefully), then turn off the stove"
    cost_names = [a.name for a in p.cost.args]
    assert len(cost_names) == 11 and "CheckGripperDistancePart" in cost_names
    assert Pred("InContactPart", ("knife_1", "plate_1", (1,), (0,))) in p.cost.args
    assert Pred("CheckForce", ("gripper0", "apple_1", 8.0)) in p.cost.args
    drone = p.moving_objects[2]
    assert drone.get("waypoints")[1] == (0.3, 0.3, 1.1, 0.0, 1.0, 0.0)
    assert drone.get("loop") is True and drone.get("period") == 12.0


def test_app_7_4_cost_example_keeps_and():
    p = parse_task(example("dynamic_obstacle_cost.bddl"))
    assert isinstance(p.cost, And)
    assert p.cost.args == (Pred("InContact", ("tomato_1", "toy_motorbike_1")),
                           Pred("CheckGripperContact", ("toy_motorbike_1",)),
                           Pred("Fall", ("teapot_1",)),
                           Pred("CheckDistance", ("tomato_1", "region_B", 0.05)))
    assert "    (And\n      (InContact tomato_1 toy_motorbike_1)\n" in write_task(p)


def test_positions_are_kept_but_not_compared():
    p = parse_task(example("dynamic_obstacle_cost.bddl"))
    fall = p.cost.args[2]
    line = next(i for i, ln in enumerate(example("dynamic_obstacle_cost.bddl").splitlines(), 1)
                if "(Fall teapot_1)" in ln)
    assert (fall.pos.line, fall.pos.column) == (line, 7)
    assert fall.arg_pos[0].column == 13
    assert fall == Pred("Fall", ("teapot_1",))
    assert hash(fall) == hash(Pred("Fall", ("teapot_1",)))


# -- random ASTs round trip ------------------------------------------------------------------
CONNECTIVE_NAMES = {"and", "or", "not"}
names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
pred_names = st.from_regex(r"[A-Z][A-Za-z]{0,10}", fullmatch=True).filter(
    lambda s: s.lower() not in CONNECTIVE_NAMES)
floats = st.floats(allow_nan=False, allow_infinity=False)
ids = st.lists(st.integers(0, 10**9), min_size=1, max_size=4).map(tuple)
args = st.one_of(names, floats, ids)
preds = st.builds(Pred, pred_names, st.lists(args, max_size=4).map(tuple))
formulas = st.recursive(preds, lambda kids: st.one_of(
    st.lists(kids, min_size=1, max_size=3).map(lambda a: And(tuple(a))),
    st.lists(kids, min_size=1, max_size=3).map(lambda a: Or(tuple(a))),
    kids.map(Not)), max_leaves=8)
vec3 = st.tuples(floats, floats, floats)
MOTION_VALUES = {
    "motion_period": floats, "motion_travel_dist": floats, "motion_initial_speed": floats,
    "motion_direction": vec3, "motion_center": vec3, "motion_gravity": vec3,
    "motion_loop": st.booleans(),
    "motion_waypoints": st.lists(st.tuples(*[floats] * 6), max_size=3).map(tuple),
}
motion_attrs = st.sampled_from(MOTION_ATTRS).flatmap(
    lambda n: MOTION_VALUES[n].map(lambda v: MotionAttr(n, v)))
moving = st.builds(MovingObject, names, st.sampled_from(MOTION_TYPES),
                   st.lists(motion_attrs, max_size=4).map(tuple))
regions = st.builds(Region, names, names, st.lists(st.tuples(*[floats] * 4), max_size=2).map(
    tuple), st.lists(st.tuples(floats, floats), max_size=2).map(tuple),
    st.lists(st.tuples(floats, floats), max_size=2).map(tuple),
    st.none() | st.tuples(*[floats] * 4))
noise = st.sampled_from(sorted(NOISE_PARAMS)).flatmap(lambda k: st.tuples(
    *[floats] * len(NOISE_PARAMS[k])).map(lambda v: Noise(k, v)))
language = st.lists(st.from_regex(r"[A-Za-z0-9,.'!?:\-]{1,8}", fullmatch=True),
                    max_size=6).map(" ".join)
def _kept_region(r: Region, p: Problem) -> bool:
    declared = {d.name for d in (*p.fixtures, *p.objects)}
    args = [str(a) for f in (*p.init, p.goal, p.cost) for atom in atoms(f) for a in atom.args]
    return r.target in declared or any(a == r.name or a.endswith(f"_{r.name}") for a in args)


problems = st.builds(
    Problem, names, names, language, formulas,
    regions=st.lists(regions, max_size=3).map(tuple),
    fixtures=st.lists(st.builds(Decl, names, names), max_size=3).map(tuple),
    objects=st.lists(st.builds(Decl, names, names), max_size=3).map(tuple),
    moving_objects=st.lists(moving, max_size=3).map(tuple),
    obj_of_interest=st.lists(names, max_size=3).map(tuple),
    init=st.lists(preds, max_size=3).map(tuple), cost=st.none() | formulas,
    image_settings=st.lists(st.builds(Setting, st.sampled_from(IMAGE_KEYS), floats),
                            max_size=4).map(tuple),
    noise=st.none() | noise,
    camera=st.lists(st.builds(Camera, names, st.none() | vec3), max_size=3).map(tuple),
    random_color=st.none() | st.booleans(),
    control_freq=st.none() | st.floats(min_value=1e-3, max_value=1e6)).map(
    # What the parser reads back unchanged: regions unique per target (a later duplicate
    # replaces the earlier one) and on a declared target unless a predicate argument names
    # them, :obj_of_interest naming declared things (others dropped).
    lambda p: replace(p, regions=tuple(r for r in {r.ref: r for r in p.regions}.values()
                                       if _kept_region(r, p)),
                      obj_of_interest=tuple(d.name for d in (*p.fixtures, *p.objects))[
                          :len(p.obj_of_interest)]))


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems)
def test_random_ast_round_trips(problem):
    text = write_task(problem)
    assert parse_task(text) == problem
    assert write_task(parse_task(text)) == text


# -- robustness: only TaskError ------------------------------------------------------------
def only_task_error(text: str) -> None:
    try:
        problem = parse_task(text)
    except TaskError as exc:
        assert exc.line is None or exc.line >= 1
        return
    validate_task(problem)  # a parsed task must also validate without crashing


@settings(max_examples=300, deadline=None)
@given(st.binary().map(lambda b: b.decode("utf-8", errors="replace")))
def test_random_bytes_raise_only_task_error(text):
    only_task_error(text)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_random_text_raises_only_task_error(text):
    only_task_error(text)
    only_task_error("(define (problem p) " + text)


TOKENS = ["(", ")", "(:goal", "(:cost", "(:init", "(And", "(Not", "(On a b)", ":motion_period",
          "(:motion_type linear)", "steps", "1e999", "-", "nan", "(0 1)", "((1 2 3 4))",
          "(:regions", "(:moving_objects", "(:camera", "(:noise gaussian", "true", ";", "\n"]


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(EXAMPLES), st.data())
def test_mutated_examples_raise_only_task_error(path, data):
    text = path.read_text()
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(text)))
        j = data.draw(st.integers(i, min(len(text), i + 12)))
        insert = data.draw(st.sampled_from(TOKENS) | st.text(max_size=3))
        text = text[:i] + insert + text[j:]
    only_task_error(text)


# -- units -----------------------------------------------------------------------------------
MOVER = """  (:objects m - car)
  (:moving_objects (m (:motion_type circular) (:motion_center (0 0 1)) (:motion_period {})))
"""


def period(spec: str, body_extra: str = "", **kw) -> float:
    return parse_task(task(body_extra + MOVER.format(spec)), **kw).moving_objects[0].get("period")


def test_steps_convert_at_robosuite_default_20_hz():
    assert period("125 steps") == 6.25


def test_seconds_explicit_or_bare():
    assert period("6.25 s") == 6.25
    # A bare number is control steps, as in VLA-Arena (App. 7.2.3 "Full cycle in 125 steps"):
    # 125 steps at the default 20 Hz = 6.25 s, at 40 Hz = 3.125 s.
    assert period("125") == 6.25
    assert period("125", control_freq=40) == 3.125


def test_steps_use_the_declared_control_freq_even_when_declared_later():
    text = task(MOVER.format("125 steps") + "  (:control_freq 10)\n")
    p = parse_task(text)
    assert p.moving_objects[0].get("period") == 12.5 and p.control_freq == 10.0


def test_steps_use_the_caller_frequency_when_the_task_declares_none():
    assert period("100 steps", control_freq=40) == 2.5
    assert period("100 steps", "  (:control_freq 40)\n", control_freq=40) == 2.5


def test_conflicting_control_freq_is_an_error():
    e = error(task("  (:control_freq 20)\n" + MOVER.format("1 s")), control_freq=10)
    assert (e.line, e.column) == (4, 3) and "control_freq=10" in e.message


def test_written_periods_are_seconds():
    text = write_task(parse_task(task(MOVER.format("125 steps"))))
    assert "(:motion_period 6.25 s)" in text


def test_bad_unit_and_bad_frequency():
    e = error(task(MOVER.format("3 ms")))
    assert (e.line, e.column) == (5, 90) and "expected unit 's' or 'steps', got 'ms'" in e.message
    e = error(task("  (:control_freq 0)\n"))
    assert (e.line, e.column) == (4, 18) and "must be positive" in e.message
    with pytest.raises(TaskError, match="positive number of Hz"):
        parse_task(task(), control_freq=-1.0)


# -- grammar details -------------------------------------------------------------------------
def test_comments_anywhere():
    text = write_task(parse_task(example("every_block.bddl")))
    # after every space, and after every '(' except in :language, whose text keeps its "(carefully)"
    lines = [ln if "(:language" in ln else ln.replace("(", "(;(\n")
             for ln in text.splitlines()]
    commented = "; header\n" + "\n".join(lines).replace(" ", " ; note ) ( ;; \n") + ";end"
    assert commented.count(";") > 300
    assert parse_task(commented) == parse_task(text)


def test_connectives_are_case_insensitive_and_written_canonically():
    p = parse_task(task(goal="(aNd (On a b) (OR (not (Up a)) (Up b)))"))
    assert p.goal == And((Pred("On", ("a", "b")), Or((Not(Pred("Up", ("a",))),
                                                      Pred("Up", ("b",))))))
    assert "(And\n" in write_task(p) and "(Or\n" in write_task(p) and "(Not\n" in write_task(p)


def test_language_is_free_text_up_to_the_matching_paren():
    text = task().replace("(:language go)", "(:language  Put the (red)   bowl ; comment ) (\n"
                                            "   on  the plate: now!)")
    assert parse_task(text).language == "Put the (red) bowl on the plate: now!"


def test_vla_arena_public_spellings_are_read():
    body = """  (:objects w - drone b - ball)
  (:moving_objects
    (w (:motion_type waypoint) (:motion_waypoints ((0 0 1 (1 0 0)) (1 0 1 (0 1 0))))
       (:motion_period 2))
    (b (:motion_type parabolic) (:motion_initial_speed 1) (:motion_direction (0 1 0))
       (:motion_gravity (0 0 -9.81))))
"""
    w, b = parse_task(task(body)).moving_objects
    assert w.motion_type == "waypoint" and b.motion_type == "projectile"
    assert w.get("waypoints") == ((0, 0, 1, 1, 0, 0), (1, 0, 1, 0, 1, 0))
    assert parse_task(task(body.replace("waypoint)", "circle)"))).moving_objects[0].motion_type \
        == "circular"


def test_noise_camera_and_random_color_forms():
    p = parse_task(task("  (:noise salt_pepper 0.05)\n  (:camera agentview frontview (0 0 0.1))\n"
                        "  (:random_color FALSE)\n"))
    assert p.noise == Noise("salt_pepper", (0.05,)) and p.noise.named == {"prob": 0.05}
    assert p.camera == (Camera("agentview"), Camera("frontview", (0.0, 0.0, 0.1)))
    assert p.random_color is False


def test_parse_file_reports_unreadable_and_non_utf8(tmp_path):
    with pytest.raises(TaskError, match="cannot read task file"):
        parse_file(tmp_path / "missing.bddl")
    bad = tmp_path / "bad.bddl"
    bad.write_bytes(b"(define\n  (problem \xff)")
    with pytest.raises(TaskError) as info:
        parse_file(bad)
    assert (info.value.line, info.value.column) == (2, 12)
    assert str(info.value).startswith(f"{bad}:2:12: not valid UTF-8")


# -- one test per kind of syntax error (exact line:column) ----------------------------------
def test_unclosed_block_names_its_opener():
    text = task("  (:fixtures table - table)\n  (:objects a b - thing\n    (c - thing)\n")
    e = error(text)
    # reported where the list opened (the line to fix), naming where it ran into the '('
    assert (e.line, e.column) == (5, 3)
    assert e.message == "'(:objects' is not closed: expected ')' before '(' at 6:5"
    assert str(e).startswith("t.bddl:5:3: ")


def test_unclosed_at_end_of_file():
    e = error("(define (problem t)\n  (:domain robosuite")
    assert (e.line, e.column) == (2, 3)
    assert e.message == "'(:domain' is not closed: expected ')' before end of file"


def test_unclosed_attribute_reported_where_it_opened():
    # '(:motion_period 6.25' never closed: the next attribute's '(' (8:8) is where a unit was
    # expected; the line to fix is 7, where the attribute opened at column 8
    text = task("  (:objects m - car)\n  (:moving_objects\n    (m (:motion_type linear)\n"
                "       (:motion_period 6.25\n       (:motion_travel_dist 1)))\n")
    e = error(text)
    assert (e.line, e.column) == (7, 8)
    assert e.message == ("'(:motion_period' is not closed: expected a unit 's' or 'steps', or "
                         "')' before '(' at 8:8")


def test_unclosed_where_a_number_belongs():
    text = task("  (:objects m - car)\n  (:moving_objects\n    (m (:motion_type linear)\n"
                "       (:motion_travel_dist\n       (:motion_period 2 s)))\n")
    e = error(text)
    assert (e.line, e.column) == (7, 8)
    assert e.message == ("'(:motion_travel_dist' is not closed: expected a number before '(' "
                         "at 8:8")


def test_not_a_number():
    e = error(task("  (:regions (r (:target t) (:ranges ((0 abc 1 1)))))\n"))
    assert (e.line, e.column) == (4, 41) and "expected a number (y_min), got 'abc'" in e.message
    e = error(task(goal="(CheckDistance a b 1e999)"))
    assert (e.line, e.column) == (4, 29) and "out of range" in e.message


def test_wrong_tuple_length():
    e = error(task("  (:regions (r (:target t) (:ranges ((0 0 1)))))\n"))
    assert (e.line, e.column) == (4, 38) and "expected 4 numbers (x_min y_min x_max y_max), " \
        "got 3" in e.message


def test_unknown_block():
    e = error(task("  (:foo bar)\n"))
    assert (e.line, e.column) == (4, 4)
    assert "unknown block ':foo' (expected one of :domain," in e.message


def test_duplicate_and_missing_blocks():
    e = error(task("  (:domain other)\n"))
    assert (e.line, e.column) == (4, 3) and "duplicate block ':domain' (first at 2:3)" in e.message
    e = error("(define (problem t)\n  (:domain robosuite)\n  (:language go)\n)")
    assert (e.line, e.column) == (1, 1) and "missing block '(:goal ...)'" in e.message


def test_objects_need_a_category():
    e = error(task("  (:objects a b)\n"))
    assert (e.line, e.column) == (4, 13) and "expected '- <category>' after 'b'" in e.message


def test_several_goal_formulas_are_an_implicit_and_with_one_warning():
    p = parse_task(task(goal="(On a b) (On b a)"))
    assert p.goal == And((Pred("On", ("a", "b")), Pred("On", ("b", "a"))))
    assert p.goal.implicit
    assert p.warnings == (("<text>:4:3: '(:goal' lists 2 formulas without (And ...): VLA-Arena "
                          "reads only the first; robosafe reads them as (And ...) and counts "
                          "all 2 (mode vla-arena: only the first)"),)
    assert parse_task(task(goal="(And (On a b) (On b a))")).warnings == ()


def test_not_takes_one_formula_and_connectives_need_one():
    e = error(task(goal="(Not (Up a) (Up b))"))
    assert (e.line, e.column) == (4, 22) and "'Not' takes exactly one formula" in e.message
    e = error(task(goal="(And)"))
    assert (e.line, e.column) == (4, 10) and "'And' needs at least one formula" in e.message


def test_init_takes_predicates_only():
    e = error(task("  (:init (On a b) (Or (Up a)))\n"))
    assert (e.line, e.column) == (4, 19) and "'Or' is not allowed here" in e.message


def test_bad_part_ids():
    e = error(task(goal="(InContactPart a b (0 x) (1))"))
    assert (e.line, e.column) == (4, 32)
    assert "expected a non-negative integer part id, got 'x'" in e.message


def test_unknown_motion_type_and_attribute():
    e = error(task(MOVER.format("1").replace("circular", "zigzag")))
    assert (e.line, e.column) == (5, 37)
    assert "unknown motion type 'zigzag' (expected one of linear, circular" in e.message
    e = error(task(MOVER.format("1").replace(":motion_center", ":motion_centre")))
    assert (e.line, e.column) == (5, 48) and "unknown motion attribute ':motion_centre'" in \
        e.message
    e = error(task("  (:moving_objects (m (:motion_period 1)))\n"))
    assert (e.line, e.column) == (4, 20) and "'m' needs (:motion_type" in e.message


def test_unknown_perturbation_values():
    e = error(task("  (:image_settings brightness 0.1 hue 0.2)\n"))
    assert (e.line, e.column) == (4, 35) and "unknown image setting 'hue'" in e.message
    e = error(task("  (:noise poisson 0.1)\n"))
    assert (e.line, e.column) == (4, 11) and "unknown noise type 'poisson'" in e.message
    e = error(task("  (:noise gaussian 0.1)\n"))
    assert (e.line, e.column) == (4, 23) and "expected a number (var), got ')'" in e.message
    e = error(task("  (:random_color yes)\n"))
    assert (e.line, e.column) == (4, 18) and "expected true or false, got 'yes'" in e.message
    e = error(task("  (:camera (0 0 1))\n"))
    assert (e.line, e.column) == (4, 12) and "expected a camera name before" in e.message


def test_region_needs_a_target_and_known_attributes():
    e = error(task("  (:regions (r (:ranges ((0 0 1 1)))))\n"))
    assert (e.line, e.column) == (4, 13) and "region 'r' needs (:target" in e.message
    e = error(task("  (:regions (r (:target t) (:size 1)))\n"))
    assert (e.line, e.column) == (4, 29) and "unknown region attribute ':size'" in e.message


def test_text_after_define_and_empty_input():
    e = error(task() + "(extra)")
    assert (e.line, e.column) == (6, 1) and "after the end of '(define'" in e.message
    e = error("   ; only a comment\n")
    assert (e.line, e.column) == (2, 1) and "expected '(define', got end of file" in e.message


def test_deep_nesting_is_a_task_error_not_a_recursion_error():
    e = error(task(goal="(Not " * 500 + "(Up a)" + ")" * 500))
    assert "nested deeper than" in e.message
