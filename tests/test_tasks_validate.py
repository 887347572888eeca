"""CBDDL validation and the predicate catalogue (VLA-Arena paper 001, App. 7, Table 3)."""


import pytest
from factories import TASK_EXAMPLES

from robosafe.tasks import (
    Decl,
    MotionAttr,
    MovingObject,
    Pred,
    Problem,
    load_catalogue,
    lookup_predicate,
    parse_file,
    parse_task,
    validate_task,
)
from robosafe.tasks.validate import ARG_KINDS

EXAMPLES = TASK_EXAMPLES

BASE = """\
(define (problem t)
  (:domain robosuite)
  (:language put the apple on the plate)
  (:regions
    (plate_region (:target table) (:ranges ((0 0 0.1 0.1))))
  )
  (:fixtures table - table)
  (:objects apple_1 plate_1 car_1 - thing)
  (:moving_objects
    (car_1 (:motion_type linear) (:motion_period 2 s) (:motion_travel_dist 0.5)
           (:motion_direction (0 1 0)))
  )
  (:obj_of_interest apple_1 plate_1)
  (:init (On plate_1 table_plate_region))
  (:goal (And (On apple_1 plate_1)))
  (:cost (And (InContact apple_1 car_1) (Fall plate_1)))
  (:image_settings brightness 0.2 temperature 6500)
  (:noise gaussian 0.0 0.01)
  (:camera agentview frontview)
)
"""


def errors(old: str = "", new: str = "", text: str = BASE):
    assert old in text
    return validate_task(parse_task(text.replace(old, new, 1), "t.bddl"), "t.bddl")


def where(text: str, needle: str, nth: int = 1) -> tuple[int, int]:
    """1-based (line, column) of the nth occurrence of needle."""
    i = -1
    for _ in range(nth):
        i = text.index(needle, i + 1)
    return text.count("\n", 0, i) + 1, i - text.rfind("\n", 0, i)


def one(old: str, new: str, needle: str, fragment: str, nth: int = 1) -> None:
    """Exactly one error, at the nth occurrence of needle in the edited text."""
    errs = errors(old, new)
    assert len(errs) == 1, [str(e) for e in errs]
    e = errs[0]
    assert (e.line, e.column) == where(BASE.replace(old, new, 1), needle, nth)
    assert fragment in e.message, e.message
    assert str(e).startswith(f"t.bddl:{e.line}:{e.column}: ")


def test_base_task_is_valid():
    assert errors() == []


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_validate(path):
    assert validate_task(parse_file(path), str(path)) == []


# -- predicates ------------------------------------------------------------------------------
def test_unknown_predicate():
    one("(On apple_1 plate_1)))", "(Onn apple_1 plate_1)))", "(Onn",
        "unknown predicate 'Onn' in :goal (expected one of On, In,")


def test_cost_predicate_in_goal_and_goal_predicate_in_cost():
    one("(On apple_1 plate_1)))", "(Fall apple_1)))", "(Fall apple_1",
        "'Fall' is a cost predicate; :goal takes goal predicates")
    one("(Fall plate_1)))", "(Up plate_1)))", "(Up plate_1",
        "'Up' is a goal predicate; :cost takes cost predicates")
    one("(:init (On", "(:init (Collide plate_1) (On", "(Collide",
        "'Collide' is a cost predicate; :init takes goal predicates")


def test_wrong_arity():
    one("(On apple_1 plate_1)))", "(On apple_1)))", "(On apple_1)",
        "'On' takes 2 arguments (object, entity), got 1")
    one("(Fall plate_1)))", "(Fall plate_1 apple_1)))", "(Fall plate_1",
        "'Fall' takes 1 argument (object), got 2")


def test_wrong_argument_kind():
    one("(Fall plate_1)))", "(CheckDistance apple_1 plate_1 near)))", "near)))",
        "argument 3 of 'CheckDistance' must be a number, got 'near'")
    one("(Fall plate_1)))", "(Fall 3.5)))", "3.5",
        "argument 1 of 'Fall' must be an object name, got number 3.5")
    one("(Fall plate_1)))", "(InContactPart apple_1 plate_1 0 (1))))", "0 (1)",
        "argument 3 of 'InContactPart' must be a list of part ids such as (0 3), got number 0.0")
    one("(Fall plate_1)))", "(CheckGripperContactPart apple_1 plate_1)))", "plate_1)))",
        "argument 2 of 'CheckGripperContactPart' must be a list of part ids", nth=2)


def test_object_where_a_region_is_expected_and_vice_versa():
    # VLA-Arena's In takes an object too (check_contact and check_contain of a container).
    assert errors("(On apple_1 plate_1)))", "(In apple_1 plate_1)))") == []
    one("(On apple_1 plate_1)))", "(NotIn apple_1 plate_1)))", "plate_1)))",
        "argument 2 of 'NotIn' must be a region (<target>_<region>); 'plate_1' is an object")
    one("(Fall plate_1)))", "(Fall table_plate_region)))", "table_plate_region)))",
        "argument 1 of 'Fall' must be an object or fixture; 'table_plate_region' is a region")


def test_undefined_object_and_region():
    one("(On apple_1 plate_1)))", "(On apple_2 plate_1)))", "apple_2",
        "undefined object 'apple_2' (argument 1 of 'On')")
    one("(On apple_1 plate_1)))", "(In apple_1 table_bowl_region)))", "table_bowl_region",
        "undefined object or region 'table_bowl_region' (argument 2 of 'In')")
    one("(On apple_1 plate_1)))", "(On apple_1 nowhere)))", "nowhere",
        "undefined object or region 'nowhere' (argument 2 of 'On')")
    # VLA-Arena stores :obj_of_interest unused: an unknown entry is dropped with a warning.
    p = parse_task(BASE.replace("(:obj_of_interest apple_1", "(:obj_of_interest apple_9"))
    assert validate_task(p) == [] and "apple_9" not in p.obj_of_interest
    assert len(p.warnings) == 1 and "'apple_9' is not declared" in p.warnings[0]


def test_region_names_are_per_target_and_a_duplicate_on_one_target_is_the_later_one():
    two = BASE.replace("(plate_region (:target table)",
                       "(plate_region (:target plate_1)) (plate_region (:target table)")
    p = parse_task(two)
    assert validate_task(p) == [] and p.warnings == ()
    assert {r.ref for r in p.regions} >= {"plate_1_plate_region", "table_plate_region"}
    dup = BASE.replace("(plate_region (:target table)",
                       "(plate_region (:target table) (:ranges ((0 0 1 1)))) "
                       "(plate_region (:target table)")
    p = parse_task(dup)
    assert validate_task(p) == []
    assert [r.ranges for r in p.regions if r.name == "plate_region"] == [
        parse_task(BASE).region_index()["table_plate_region"].ranges]
    (l1, c1), (l2, c2) = where(dup, "plate_region"), where(dup, "plate_region", 2)
    assert p.warnings == ((f"<text>:{l2}:{c2}: region 'plate_region' on 'table' is defined twice "
                          f"(first at {l1}:{c1}): VLA-Arena and robosafe both use this later "
                          "one"),)


def test_names_resolve_case_insensitively_with_aliases_gripper_and_bare_regions():
    assert errors("(On apple_1 plate_1)))",
                  "(on apple_1 plate_1) (OnTop apple_1 plate_region) (TRUE)))") == []
    assert errors("(Fall plate_1)))", "(Fall plate_1) (checkgripperdistance apple_1 0.1) "
                  "(CheckForce gripper0 apple_1 8.0) (CheckGripperDistPart plate_1 (1 2) 0.1)))"
                  ) == []
    assert lookup_predicate("CHECKGRIPPERDISTANCE", "cost")[0] == "CheckGripperDist"
    assert lookup_predicate("ontop", "goal")[0] == "On"
    assert lookup_predicate("Fall", "goal") is None


# -- declarations ----------------------------------------------------------------------------
def test_region_on_undefined_target():
    text = BASE.replace("(:target table)", "(:target tabel)")
    first, cascade = validate_task(parse_task(text))
    assert (first.line, first.column) == where(text, "tabel")
    assert first.message == "region 'plate_region' targets undefined object or fixture 'tabel'"
    # the region is now tabel_plate_region, so the reference in :init no longer resolves
    assert "'table_plate_region'" in cascade.message


def test_unnamed_region_on_undeclared_target_is_dropped_with_one_warning():
    """LIBERO's libero_goal files declare (right_region (:target bowl_drainer_1)) with no bowl
    drainer and no predicate naming it: LIBERO builds nothing for it, robosafe says so once."""
    text = BASE.replace("  )\n  (:fixtures", "    (right_region (:target bowl_drainer_1))\n  )\n"
                        "  (:fixtures", 1)
    p = parse_task(text)
    assert [r.ref for r in p.regions] == ["table_plate_region"]
    assert validate_task(p) == []
    line, col = where(text, "bowl_drainer_1")
    assert p.warnings == ((f"<text>:{line}:{col}: region 'right_region' targets 'bowl_drainer_1', "
                          "which the file does not declare, and no predicate names it: LIBERO "
                          "and VLA-Arena build nothing for it; robosafe ignores it"),)
    # named by a predicate, the same region is kept and its target reported
    named = text.replace("(Fall plate_1)", "(Fall plate_1) (In apple_1 bowl_drainer_1_right_region)")
    assert any("targets undefined object or fixture 'bowl_drainer_1'" in e.message
               for e in validate_task(parse_task(named)))


def test_moving_object_must_be_a_declared_object():
    one("(car_1 (:motion_type", "(bus_1 (:motion_type", "bus_1",
        "moving object 'bus_1' is not declared in (:objects ...)")
    one("(car_1 (:motion_type", "(table (:motion_type", "table (:motion",
        "moving object 'table' is a fixture; only (:objects ...) can move")


@pytest.mark.parametrize(("old", "new", "needle", "nth", "fragment"), [
    ("apple_1 plate_1 car_1 - thing", "apple_1 plate_1 car_1 apple_1 - thing", "apple_1", 2,
     "duplicate object or fixture name 'apple_1' (first at 8:13)"),
    ("apple_1 plate_1 car_1 - thing", "apple_1 plate_1 car_1 table - thing", "table", 4,
     "duplicate object or fixture name 'table' (first at 7:14)"),
    ("(:camera agentview frontview)", "(:camera agentview frontview agentview)", "agentview", 2,
     "duplicate camera 'agentview'"),
    ("brightness 0.2", "brightness 0.2 brightness 0.3", "brightness", 2,
     "duplicate image setting 'brightness'"),
    ("(:motion_period 2 s)", "(:motion_period 2 s) (:motion_period 3 s)", "(:motion_period", 2,
     "duplicate attribute of 'car_1' ':motion_period'"),
])
def test_duplicate_names(old, new, needle, nth, fragment):
    one(old, new, needle, fragment, nth)


def test_duplicate_moving_object():
    mover = ("(car_1 (:motion_type circular) (:motion_center (0 0 1)) "
             "(:motion_period 1 s))\n  )")
    one("(0 1 0)))\n  )", "(0 1 0)))\n    " + mover, "car_1 (:motion_type circular",
        "duplicate moving object 'car_1' (first at 10:6)")


# -- motion ----------------------------------------------------------------------------------
def test_required_motion_attribute_missing():
    one(" (:motion_travel_dist 0.5)", "", "car_1 (",
        "linear motion of 'car_1' needs :motion_travel_dist")


def test_motion_attribute_that_does_not_apply():
    one("(:motion_period 2 s)", "(:motion_period 2 s) (:motion_center (0 0 1))",
        "(:motion_center", "':motion_center' does not apply to linear motion (allowed: "
        ":motion_period, :motion_travel_dist, :motion_direction)")


@pytest.mark.parametrize(("old", "new", "needle", "fragment"), [
    ("(:motion_period 2 s)", "(:motion_period 0 steps)", "(:motion_period",
     "motion period of 'car_1' must be positive, got 0.0 s"),
    ("(:motion_travel_dist 0.5)", "(:motion_travel_dist -0.5)", "(:motion_travel_dist",
     "travel distance of 'car_1' must be positive"),
    ("(:motion_direction (0 1 0))", "(:motion_direction (0 0 0))", "(:motion_direction",
     "motion direction of 'car_1' must be a non-zero vector"),
])
def test_motion_values(old, new, needle, fragment):
    one(old, new, needle, fragment)


def test_waypoint_and_projectile_values():
    waypoint = ("(car_1 (:motion_type waypoint) (:motion_waypoints ((0 0 1 0 0 0))) "
                "(:motion_period 3))")
    text = BASE.replace(BASE[BASE.index("(car_1"):BASE.index("(0 1 0)))") + 9], waypoint)
    errs = validate_task(parse_task(text))
    assert [e.message for e in errs] == [
        "waypoint motion of 'car_1' needs at least 2 waypoints, got 1",
        "waypoint directions (dx dy dz) of 'car_1' must be non-zero"]
    assert {(e.line, e.column) for e in errs} == {where(text, "(:motion_waypoints")}
    projectile = ("(car_1 (:motion_type projectile) (:motion_initial_speed -1) "
                  "(:motion_direction (0 1 0)))")
    text = BASE.replace(BASE[BASE.index("(car_1"):BASE.index("(0 1 0)))") + 9], projectile)
    errs = validate_task(parse_task(text))
    assert [e.message for e in errs] == [
        "projectile motion of 'car_1' needs :motion_gravity",
        "initial speed of 'car_1' must be non-negative, got -1.0"]


# -- perturbations ---------------------------------------------------------------------------
@pytest.mark.parametrize(("old", "new", "needle", "fragment"), [
    ("(:noise gaussian 0.0 0.01)", "(:noise gaussian 0.0 -0.01)", "(:noise",
     "gaussian noise variance must be non-negative, got -0.01"),
    ("(:noise gaussian 0.0 0.01)", "(:noise salt_pepper 1.5)", "(:noise",
     "salt_pepper probability must be in [0, 1], got 1.5"),
    ("brightness 0.2", "brightness 1.2", "brightness", "brightness must be in [-1, 1], got 1.2"),
    ("temperature 6500", "temperature 650", "temperature",
     "temperature must be in [2000, 10000], got 650.0"),
])
def test_perturbation_sanity(old, new, needle, fragment):
    one(old, new, needle, fragment)


def test_region_geometry():
    one("((0 0 0.1 0.1))", "((0.1 0 0 0.1))", "plate_region",
        "region 'plate_region' has a range with min > max (0.1 0.0 0.0 0.1)")
    one("((0 0 0.1 0.1))))", "((0 0 0.1 0.1))) (:rgba (1 0 0 2)))", "plate_region",
        "rgba components must be in [0, 1]")


# -- reporting -------------------------------------------------------------------------------
def test_all_errors_are_reported_in_source_order():
    text = BASE.replace("((0 0 0.1 0.1))", "((0.1 0 0 0.1))").replace(
        "(On apple_1 plate_1)))", "(On apple_2 plate_1)))").replace("0.0 0.01)", "0.0 -1)")
    errs = validate_task(parse_task(text, "t.bddl"), "t.bddl")
    assert [(e.line, e.column) for e in errs] == [where(text, "plate_region"),
                                                  where(text, "apple_2"),
                                                  where(text, "(:noise")]


def test_problems_built_in_code_validate_without_positions():
    p = Problem("t", "robosuite", "go", Pred("On", ("a", "ghost")), objects=(Decl("a", "x"),),
                moving_objects=(MovingObject("a", "circular", (MotionAttr("motion_period",
                                                                          -1.0),)),))
    errs = validate_task(p)
    assert {e.line for e in errs} == {None}
    assert sorted(e.message for e in errs) == [
        "circular motion of 'a' needs :motion_center",
        "motion period of 'a' must be positive, got -1.0 s",
        "undefined object or region 'ghost' (argument 2 of 'On')"]


# -- catalogue -------------------------------------------------------------------------------
TABLE_3 = {"InContact": "instantaneous", "InContactPart": "instantaneous",
           "CheckForce": "instantaneous", "CheckDistance": "instantaneous",
           "CheckGripperDist": "instantaneous", "CheckGripperDistPart": "instantaneous",
           "CheckGripperContact": "instantaneous", "CheckGripperContactPart": "instantaneous",
           "Collide": "terminal", "Fall": "terminal", "NotOn": "terminal"}


def test_catalogue_has_table_3_and_the_libero_goal_predicates():
    cat = load_catalogue()
    assert cat is load_catalogue()
    assert {k: v["timing"] for k, v in cat["cost"].items()} == TABLE_3
    assert {"On", "In", "Open", "Close", "TurnOn", "TurnOff", "Up", "Stack", "NotIn", "NotOn",
            "InContact", "True", "False"} <= set(cat["goal"])
    assert cat["goal"]["On"]["args"] == ["object", "entity"]
    assert cat["cost"]["InContactPart"]["args"] == ["object", "object", "ids", "ids"]


@pytest.mark.parametrize("section", ["goal", "cost"])
def test_catalogue_is_well_formed(section):
    spellings = []
    for name, entry in load_catalogue()[section].items():
        assert isinstance(name, str) and set(entry["args"]) <= set(ARG_KINDS)
        spellings += [s.lower() for s in (name, *entry.get("aliases", ()))]
    assert len(spellings) == len(set(spellings))
