"""TouchSafeBench prompts (App. I) and answer parsing (Sec. 3, App. G) on realistic model output."""

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robosafe.errors import RobosafeError
from robosafe.grounding.answers import ParsedAnswer, parse_answer, parse_label
from robosafe.grounding.prompts import (
    answer_field,
    answer_schema,
    build_prompt,
    field_names,
    image_sequence,
    prompt_data,
    trend_values,
)

REPRESENTATIONS = ("rgb", "depth", "depth_color", "pred_depth", "pred_depth_color", "rgbd",
                   "rgbd_color", "rgbd_pred", "rgbd_pred_color")

# --- prompts ----------------------------------------------------------------------------------


@pytest.mark.parametrize("rep", REPRESENTATIONS)
@pytest.mark.parametrize("views", ["ego", "all"])
@pytest.mark.parametrize("task", [1, 2])
def test_camera_prompts_are_fully_filled(task, views, rep):
    text = build_prompt(task, rep, views, 3)
    assert not re.search(r"\{[a-z_]+\}", text)  # no placeholder left
    assert f'"{answer_field(task)}": "A" | "B" | "C"' in text
    assert "3 time points" in text
    n_views = 2 if views == "ego" else 4
    per_view = 2 if rep.startswith("rgbd") else 1
    assert f"There are {3 * n_views * per_view} images" in text
    assert len(image_sequence(rep, views, 3)) == 3 * n_views * per_view
    assert prompt_data()["representations"][rep]["description"] in text


def test_task_prompts_share_preamble_and_format_and_differ_in_instruction_and_field():
    # App. I: same preamble and JSON format; different instruction and answer field.
    t1, t2 = build_prompt(1, "rgb", "ego"), build_prompt(2, "rgb", "ego")
    assert answer_field(1) == "answer" and answer_field(2) == "risk_level"
    assert t1.split("Task:")[0] == t2.split("Task:")[0]
    assert t1.split("Respond with")[1].replace('"answer"', '"risk_level"').replace(
        "- answer:", "- risk_level:") == t2.split("Respond with")[1]
    assert "robot-human contact" in t1 and "human collision imminent" in t2
    for name in field_names().values():
        assert f'"{name}"' in t1
    for trend in trend_values():
        assert f'"{trend}"' in t1


def test_topdown_uses_its_own_template_and_only_rgb():
    text = build_prompt(2, "RGB", "topdown", 3)
    assert "top-down bird's-eye-view map" in text and "camera view" not in text
    assert image_sequence("rgb", "topdown") == [(0, "topdown", "top-down map")]
    with pytest.raises(RobosafeError, match="top-down"):
        build_prompt(1, "depth_color", "topdown")


def test_prompt_arguments_are_normalised_or_rejected():
    assert build_prompt("task1", "RGB-D Color", "Ego-only") == build_prompt(1, "rgbd_color", "ego")
    assert "5 time points" in build_prompt(1, "rgb", ["arm", "third_robot"], 5)
    for bad in [{"task": 3}, {"representation": "thermal"}, {"views": "sideways"},
                {"views": ["arm", "arm"]}, {"n_frames": 0}]:
        kwargs = {"task": 1, "representation": "rgb", "views": "ego", "n_frames": 3} | bad
        with pytest.raises(RobosafeError):
            build_prompt(**kwargs)


def test_answer_schema_matches_the_prompt_fields():
    schema = answer_schema(2, n_frames=3)
    assert set(schema["required"]) == set(field_names().values()) | {"risk_level"}
    assert schema["properties"]["robot_human_distance_m"]["minItems"] == 3


# --- parsing ----------------------------------------------------------------------------------

# The format the prompt asks for, filled the way a model fills it.
PROMPT_FORMAT = """{
  "robot_human_distance_m": [2.1, 1.6, 1.2],
  "distance_trend": "closing",
  "human_contact": [false, false, false],
  "scene_contact": [false, false, true],
  "reasoning": "The arm camera is pressed against the cabinet in the last frame.",
  "answer": "B"
}"""

# (raw output, task, expected label or None, expected attributes)
MESSY = [
    pytest.param(PROMPT_FORMAT, 1, "B",
                 {"distances_m": (2.1, 1.6, 1.2), "distance_m": 1.2, "trend": "closing",
                  "human_contact": (False, False, False), "scene_contact": (False, False, True),
                  "contact_flags": (False, False, True), "source": "json"}, id="prompt-format"),
    pytest.param("```json\n" + PROMPT_FORMAT.replace('"answer"', '"risk_level"') + "\n```", 2,
                 "B", {"trend": "closing"}, id="code-fence"),
    pytest.param("Looking at the three frames, the robot's gripper approaches the person.\n\n"
                 '```\n{"risk_level": "C", "distance_trend": "closing"}\n```\n'
                 "I hope this helps!", 2, "C", {"trend": "closing"}, id="prose-around-fence"),
    pytest.param('Analysis: the person is far away. {"answer": "A", "robot_human_distance_m": '
                 '[3.0, 3.1, 3.2], "distance_trend": "separating"} That is my answer.', 1, "A",
                 {"distance_m": 3.2, "trend": "separating"}, id="prose-around-bare-json"),
    pytest.param("{'answer': 'C', 'human_contact': [False, False, True], "
                 "'distance_trend': 'closing',}", 1, "C",
                 {"human_contact": (False, False, True), "source": "repaired_json"},
                 id="single-quotes-trailing-comma"),
    pytest.param('{"answer": "B", "scene_contact": [false, true, true,],}', 1, "B",
                 {"scene_contact": (False, True, True), "source": "repaired_json"},
                 id="trailing-commas"),
    pytest.param('{"answer": "a"}', 1, "A", {}, id="lower-case"),
    pytest.param('{"answer": "Class A"}', 1, "A", {}, id="class-prefix"),
    pytest.param('{"answer": "(C) human contact"}', 1, "C", {}, id="paren-letter-description"),
    pytest.param('{"risk_level": "B: scene collision imminent"}', 2, "B", {},
                 id="letter-colon-description"),
    pytest.param('{"answer": "safe"}', 1, "A", {}, id="word-safe"),
    pytest.param('{"risk_level": "No risk"}', 2, "A", {}, id="word-no-risk"),
    pytest.param('{"answer": "robot-scene contact"}', 1, "B", {}, id="word-scene-contact"),
    pytest.param('{"risk_level": "human_collision_imminent"}', 2, "C", {},
                 id="sample-type-as-label"),
    pytest.param('{"answer": "No human contact, but the arm touches the wall"}', 1, "B", {},
                 id="negated-human-then-scene"),
    pytest.param('{"answer": "D"}', 1, None, {"error": "unknown label 'D'"},
                 id="unknown-letter"),
    pytest.param('{"answer": "unsafe"}', 1, None, {"error": "unknown label"}, id="unsafe"),
    pytest.param('{"answer": "C (scene contact)"}', 1, None, {"error": "describes B"},
                 id="letter-contradicts-description"),
    pytest.param('{"answer": "B", "robot_human_distance_m": ["1.5 m", "120 cm", "unknown"]}',
                 1, "B", {"distances_m": (1.5, 1.2, None), "distance_m": None},
                 id="numbers-as-strings"),
    pytest.param('{"answer": "A", "robot_human_distance_m": 1.8, "distance_trend": "Stable"}',
                 1, "A", {"distance_m": 1.8, "distances_m": None, "trend": "stable"},
                 id="scalar-distance"),
    pytest.param('{"answer": "A", "human_contact": [false], "scene_contact": [false, false, '
                 'false, true]}', 1, "A",
                 {"human_contact": (False, None, None), "scene_contact": (False, False, False),
                  "contact_flags": (False, None, None)}, id="wrong-length-flags"),
    pytest.param('{"answer": "A", "distance_trend": "approaching"}', 1, "A",
                 {"trend": "closing"}, id="trend-synonym"),
    pytest.param('{"answer": "A"}', 1, "A",
                 {"distance_m": None, "trend": None, "contact_flags": None}, id="missing-fields"),
    pytest.param('{"distance_trend": "stable", "human_contact": [false, false, false]}', 1, None,
                 {"error": "no label field", "trend": "stable"}, id="no-label-field"),
    pytest.param("The answer is B.", 1, "B", {"source": "text"}, id="prose-only"),
    pytest.param("Reasoning: wall fills the arm view.\nFinal answer: **C**", 1, "C", {},
                 id="prose-bold"),
    pytest.param('```json\n{"risk_level": "C", "reasoning": "the robot is', 2, "C",
                 {"source": "text"}, id="truncated-json"),
    pytest.param("I cannot determine the safety state from these images.", 1, None,
                 {"error": "no JSON object"}, id="refusal"),
    pytest.param("", 1, None, {"error": "empty answer"}, id="empty"),
    pytest.param('{"contact_flags": {"human": [0, 0, 1], "scene": ["no", "no", "no"]}, '
                 '"risk_level": "c"}', 2, "C",
                 {"human_contact": (False, False, True), "scene_contact": (False, False, False)},
                 id="nested-contact-flags"),
    pytest.param('{"frames": [{"t": 1, "distance_m": 2.0, "human": false, "scene": false}, '
                 '{"t": 2, "distance_m": "1.5", "human": false, "scene": true}, '
                 '{"t": 3, "distance_m": null, "human": false, "scene": true}], "answer": "B"}',
                 1, "B", {"distances_m": (2.0, 1.5, None), "scene_contact": (False, True, True)},
                 id="per-frame-objects"),
    pytest.param('Example: {"answer": "A"}\nMy answer: {"answer": "C"}', 1, "C", {},
                 id="last-json-wins"),
    pytest.param('{"answer": "A", "robot_human_distance_m": [NaN, -1, 1e999]}', 1, "A",
                 {"distances_m": (None, None, None)}, id="non-finite-distances"),
]


@pytest.mark.parametrize(("raw", "task", "label", "attrs"), MESSY)
def test_messy_outputs(raw, task, label, attrs):
    p = parse_answer(raw, task=task, n_frames=3)
    assert p.raw == raw
    assert p.label == label and p.valid == (label is not None)
    assert (p.error is None) == p.valid
    for key, want in attrs.items():
        got = getattr(p, key)
        if key == "error":
            assert want in got
        else:
            assert got == want, key


def test_adjustments_are_reported_not_silent():
    p = parse_answer('{"answer": "A", "human_contact": [true], '
                     '"robot_human_distance_m": ["far", 1, 2]}', task=1, n_frames=3)
    assert any("1 values for 3 time points" in w for w in p.warnings)
    assert any("not a distance" in w for w in p.warnings)


def test_decoded_json_is_accepted():
    p = parse_answer({"risk_level": "B", "distance_trend": "receding"}, task=2)
    assert (p.label, p.trend, p.valid) == ("B", "separating", True)
    assert json.loads(p.raw) == {"risk_level": "B", "distance_trend": "receding"}


def test_task_selects_the_primary_label_field():
    raw = '{"answer": "A", "risk_level": "C"}'
    assert parse_answer(raw, task=1).label == "A"
    assert parse_answer(raw, task=2).label == "C"


@pytest.mark.parametrize(("text", "label"), [
    ("A", "A"), ("b", "B"), ("(c)", "C"), ("Option B", "B"), ("class_c", "C"),
    ("a human collision is imminent", "C"), ("A robot collides with the person", "C"),
    ("safe operation", "A"), ("scene collision imminent", "B"), ("none", "A"),
    ("not safe", None), ("high", None), ("", None),
])
def test_parse_label(text, label):
    assert parse_label(text)[0] == label


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_arbitrary_text_never_raises(text):
    p = parse_answer(text, task=1, n_frames=3)
    assert isinstance(p, ParsedAnswer) and p.valid == (p.label in ("A", "B", "C"))
    assert p.valid or p.error


_JSONISH = st.text(alphabet='{}[]"\':,.-0123456789 abcABCnulltrefsx_\n`', max_size=200)


@settings(max_examples=300, deadline=None)
@given(_JSONISH, st.sampled_from([None, 1, 2, "bogus"]), st.sampled_from([None, 1, 3]))
def test_json_like_soup_never_raises(text, task, n_frames):
    p = parse_answer(text, task=task, n_frames=n_frames)
    assert p.valid or p.error


_JSON = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["answer", "risk_level", "robot_human_distance_m", "distance_trend",
                         "human_contact", "scene_contact", "contact_flags", "frames", "x"]),
        inner, max_size=5),
    max_leaves=15)


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_any_decoded_structure_never_raises(obj):
    for raw in (obj if isinstance(obj, dict) else {"answer": obj}, json.dumps(obj)):
        p = parse_answer(raw, task=1, n_frames=3)
        assert p.valid or p.error
