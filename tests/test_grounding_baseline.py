"""Geometric baseline monitor: hand-built geometry per label, answer format, synthetic data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from robosafe.errors import RobosafeError
from robosafe.grounding import (
    EpisodeIndex,
    SyntheticConfig,
    frame_path,
    generate_dataset,
    index_dataset,
    planar_distance,
)
from robosafe.grounding.answers import parse_answer
from robosafe.grounding.baseline import (
    BaselineThresholds,
    baseline_answers,
    decide,
    measure_clip,
)
from robosafe.grounding.metrics import score_answers
from robosafe.grounding.prompts import field_names

NONE = np.zeros(0, dtype=np.int64)


def _episode(name: str, dist: list[float] | np.ndarray) -> EpisodeIndex:
    """Robot at the origin, human at x = d (planar distance d); no contact flags at all, so a
    right answer cannot come from the labels."""
    d = np.asarray(dist, dtype=float)
    robot = np.column_stack([np.zeros_like(d), np.full_like(d, 0.48), np.zeros_like(d)])
    human = np.column_stack([d, np.full_like(d, 0.9), np.zeros_like(d)])
    return EpisodeIndex(episode_dir=f"male_2/social_navigation/scene_1/{name}", episode_id=0,
                        scene_id="1", sim_task="social_navigation", human_type="male_2",
                        n_frames=len(d), human_collision_steps=NONE, scene_collision_steps=NONE,
                        object_collision_steps=NONE,
                        robot_human_distance=planar_distance(robot, human), robot_pos=robot,
                        human_pos=human)


def _ramp(points: dict[int, float], n: int = 11) -> np.ndarray:
    return np.interp(np.arange(n), list(points), list(points.values()))


def _arm_depth(root: Path, episode: EpisodeIndex, frame: int, centre_m: float,
               far_m: float = 6.0) -> None:
    """A 9x9 arm depth frame: far everywhere, ``centre_m`` in the central 3x3 window."""
    px = np.full((9, 9), far_m)
    px[3:6, 3:6] = centre_m
    path = frame_path(root / episode.episode_dir, "arm", "depth", frame)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.rint(px / 10.0 * 255).astype(np.uint8)).save(path)


def _clip(cid: str, task: int, label: str, episode: EpisodeIndex,
          frames: list[int]) -> dict[str, Any]:
    return {"clip_id": cid, "task": task, "label": label, "sample_type": None,
            "episode_dir": episode.episode_dir, "frames": frames,
            "human_type": episode.human_type, "sim_task": episode.sim_task,
            "truth_distance": [float(episode.robot_human_distance[f]) for f in frames],
            "truth_trend": None, "truth_contacts": None}


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[EpisodeIndex],
                                                              list[dict[str, Any]]]:
    root = tmp_path_factory.mktemp("baseline")
    far = _episode("far", [3.0] * 11)
    near_miss = _episode("near_miss", _ramp({0: 1.0, 5: 0.8, 10: 0.9}))
    contact = _episode("contact", _ramp({0: 1.4, 8: 0.9, 10: 0.4}))
    approach = _episode("approach", _ramp({0: 2.0, 10: 1.0}))
    slow = _episode("slow", _ramp({0: 3.0, 10: 2.9}))
    leaving = _episode("leaving", _ramp({0: 0.7, 10: 0.9}))
    wall = _episode("wall", [4.0] * 11)
    toward_wall = _episode("toward_wall", [4.0] * 11)
    off_wall = _episode("off_wall", [4.0] * 11)
    human_in_view = _episode("human_in_view", [0.9] * 11)
    for f in (0, 5, 10):
        _arm_depth(root, far, f, 4.0)
        _arm_depth(root, wall, f, 0.1)
        _arm_depth(root, human_in_view, f, 0.2)
    for f, z in ((0, 1.2), (5, 0.9), (10, 0.6)):
        _arm_depth(root, toward_wall, f, z)
    for f, z in ((0, 0.2), (5, 0.5), (10, 0.8)):
        _arm_depth(root, off_wall, f, z)
    episodes = [far, near_miss, contact, approach, slow, leaving, wall, toward_wall, off_wall,
                human_in_view]
    fr = [0, 5, 10]
    clips = [
        _clip("t1-easy", 1, "A", far, fr),
        _clip("t1-near-miss", 1, "A", near_miss, fr),
        _clip("t1-human", 1, "C", contact, [8, 9, 10]),
        _clip("t1-scene", 1, "B", wall, fr),
        _clip("t1-human-in-arm-view", 1, "A", human_in_view, fr),
        _clip("t2-easy", 2, "A", slow, fr),
        _clip("t2-near-miss", 2, "A", near_miss, fr),
        _clip("t2-separating", 2, "A", leaving, fr),
        _clip("t2-human", 2, "C", approach, fr),
        _clip("t2-scene", 2, "B", toward_wall, fr),
        _clip("t2-post-scene", 2, "A", off_wall, fr),
    ]
    return root, episodes, clips


def test_each_label_from_geometry(cases) -> None:
    root, episodes, clips = cases
    records = baseline_answers(clips, episodes, root=root)
    got = {r["clip_id"]: parse_answer(r["answer"], r["task"]).label for r in records}
    assert got == {c["clip_id"]: c["label"] for c in clips}
    for r in records:
        assert (r["model"], r["representation"]) == ("geometric-baseline", "trajectory")
        assert {k: r[k] for k in clips[0]} == next(c for c in clips if c["clip_id"] ==
                                                    r["clip_id"])


def test_answers_use_the_prompt_fields_and_parse(cases) -> None:
    root, episodes, clips = cases
    records = baseline_answers(clips, episodes, root=root)
    names = field_names()
    for r in records:
        doc = json.loads(r["answer"])
        assert set(doc) == {*names.values(), "answer" if r["task"] == 1 else "risk_level"}
        p = parse_answer(r["answer"], r["task"], n_frames=3)
        assert p.valid and p.source == "json" and not p.warnings
        np.testing.assert_allclose(p.distances_m, r["truth_distance"], atol=1e-3)
    human = {r["clip_id"]: parse_answer(r["answer"], r["task"]) for r in records}
    assert human["t1-human"].human_contact == (False, False, True)
    assert human["t1-scene"].scene_contact == (True, True, True)
    assert human["t2-human"].trend == "closing" and human["t2-separating"].trend == "separating"
    assert human["t1-easy"].trend == "stable"
    scores = score_answers(records)
    for task in ("task1", "task2"):
        m = scores["overall"][task]
        assert m["accuracy"] == 1.0 and m["n_invalid"] == 0
        assert m["distance"]["mae"] == pytest.approx(0.0, abs=1e-3)


def test_without_depth_only_distance_decides(cases) -> None:
    _, episodes, clips = cases
    records = baseline_answers(clips, episodes)  # no root: no depth frames
    got = {r["clip_id"]: parse_answer(r["answer"], r["task"]) for r in records}
    assert got["t1-scene"].label == "A" and got["t2-scene"].label == "A"
    assert got["t1-human"].label == "C" and got["t2-human"].label == "C"
    assert got["t1-easy"].scene_contact == (None, None, None)


def test_thresholds_are_the_decision(cases) -> None:
    _root, episodes, clips = cases
    clip = next(c for c in clips if c["clip_id"] == "t2-human")
    g = measure_clip(clip, next(e for e in episodes if e.episode_dir == clip["episode_dir"]))
    # closing 0.1 m/step from 1.0 m: contact (0.5 m) in 5 steps
    assert decide(2, g)[0] == "C"
    assert decide(2, g, BaselineThresholds(horizon_steps=4))[0] == "A"
    assert decide(1, g, BaselineThresholds(contact_distance_m=1.0))[0] == "C"


def test_bad_clips_are_named(cases) -> None:
    _root, episodes, clips = cases
    with pytest.raises(RobosafeError, match="not in the index"):
        baseline_answers([{**clips[0], "episode_dir": "nope"}], episodes)
    with pytest.raises(RobosafeError, match="outside episode"):
        baseline_answers([{**clips[0], "frames": [0, 5, 11]}], episodes)
    with pytest.raises(RobosafeError, match="missing field 'frames'"):
        baseline_answers([{k: v for k, v in clips[0].items() if k != "frames"}], episodes)


# ----------------------------------------------------------------------------- synthetic data


def _synthetic_clips(index) -> list[dict[str, Any]]:
    """Clips in the spirit of App. F.2, labelled from the simulator's flags (which the baseline
    never reads): human contact (T1 C, T2 C at 15/10/5 steps before), scene contact (T1 B, T2 B
    in the 30-step pre-window) and far-apart safe stretches (A)."""
    clips = []
    for e in index:
        d = e.robot_human_distance
        scene = set(e.scene_collision_steps.tolist())
        end = int(e.human_collision_steps[-1]) if e.did_collide_human else e.n_frames
        if e.did_collide_human and end >= 15:
            clips.append(_clip(f"{e.episode_dir}/t1c", 1, "C", e, [end - 2, end - 1, end]))
            clips.append(_clip(f"{e.episode_dir}/t2c", 2, "C", e, [end - 15, end - 10, end - 5]))
        if scene:
            s = min(scene)
            if s >= 30 and s < end - 60:
                clips.append(_clip(f"{e.episode_dir}/t2b", 2, "B", e, [s - 30, s - 20, s - 10]))
            hits = sorted(t for t in scene if t < end - 60)[:3]
            if len(hits) == 3:
                clips.append(_clip(f"{e.episode_dir}/t1b", 1, "B", e, hits))
        for t in range(0, end - 150, 90):
            window = range(t, t + 60)
            if min(d[t:t + 61]) > 1.5 and not scene.intersection(window):
                for task in (1, 2):
                    clips.append(_clip(f"{e.episode_dir}/t{task}a{t}", task, "A", e,
                                       [t, t + 30, t + 60]))
                break
    return clips


def test_beats_chance_on_synthetic_data(tmp_path: Path) -> None:
    config = SyntheticConfig(human_types=("female_2",), n_scenes=3, episodes_per_scene=4,
                             length_scale=0.3, images=False)
    generate_dataset(tmp_path, config, seed=11)
    index = index_dataset(tmp_path)
    clips = _synthetic_clips(index)
    records = baseline_answers(clips, tmp_path)  # indexes the root itself
    scores = score_answers(records)
    for task in ("task1", "task2"):
        m = scores["overall"][task]
        labels = [c["label"] for c in clips if f"task{c['task']}" == task]
        majority = max(labels.count(x) for x in "ABC") / len(labels)
        assert {"A", "C"} <= set(labels) and m["n_invalid"] == 0
        assert m["accuracy"] > max(majority, 1 / 3) and m["macro_f1"] > 1 / 3
        assert m["f1"]["C"] > 0.8  # the distance geometry separates human contact cleanly


def test_beats_chance_on_sampled_clips(tmp_path: Path) -> None:
    """The same on the balanced App. F.2 clip sets of the clip sampler."""
    sampler = pytest.importorskip("robosafe.grounding.sampler")
    config = SyntheticConfig(human_types=("female_2",), n_scenes=3, episodes_per_scene=4,
                             length_scale=0.3, images=False)
    generate_dataset(tmp_path, config, seed=11)
    index = index_dataset(tmp_path)
    for task in (1, 2):
        clips = [c.to_record() for c in sampler.sample_clips(index, task, seed=0)]
        m = score_answers(baseline_answers(clips, index))["overall"][f"task{task}"]
        assert m["accuracy"] > 0.5 and m["macro_f1"] > 1 / 3  # chance is 1/3 (balanced)
        assert m["trend"]["accuracy"] == 1.0  # same 5 cm stable band as the sampler
        assert m["far_any"] in (None, 0.0)  # near misses are close, not closing
