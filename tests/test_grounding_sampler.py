"""TouchSafeBench clip sampler (paper 003, App. F.2 Table 9, F.3) on hand-built episodes.

Every expected frame below is worked out by hand from the module's conventions: inclusive
intervals, clustering splits where ``np.diff(steps) > gap``, and "uniform" frames
``lo + (hi - lo) * i // 2`` over the interval [lo, hi].
"""

from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robosafe.errors import RobosafeError
from robosafe.grounding.dataset import HUMAN_TYPES, SIM_TASKS, EpisodeIndex
from robosafe.grounding.sampler import (
    SAMPLE_TYPES,
    Clip,
    SamplerParams,
    balance,
    candidate_clips,
    read_clip_index,
    sample_clips,
    sweep,
    sweep_all,
    write_clip_index,
)

NAV, REARR = SIM_TASKS


def episode(n, *, human=(), scene=(), obj=(), near=(), dist=3.0, human_type="female_2",
            sim_task=NAV, eid=0):
    """An episode of n steps at ``dist`` metres, with near-miss frames (1.0 m) and contacts."""
    d = np.full(n, float(dist))
    d[list(near)] = 1.0
    d[list(human)] = 0.3
    robot = np.zeros((n, 3))
    hum = np.zeros((n, 3))
    hum[:, 0] = d
    return EpisodeIndex(
        episode_dir=f"{human_type}/{sim_task}/scene_1/episode_{eid:04d}", episode_id=eid,
        scene_id="1", sim_task=sim_task, human_type=human_type, n_frames=n,
        human_collision_steps=np.array(sorted(human), dtype=np.int64),
        scene_collision_steps=np.array(sorted(scene), dtype=np.int64),
        object_collision_steps=np.array(sorted(obj), dtype=np.int64),
        robot_human_distance=d, robot_pos=robot, human_pos=hum)


def frames_of(clips, sample_type):
    return [c.frames for c in clips if c.sample_type == sample_type]


def span(a, b):
    return list(range(a, b + 1))


# ----------------------------------------------------------------------------- Table 9 rules


def test_no_event_easy_windows_skip_exclusion_region_and_contacts():
    # exclusion: scene event [100, 104] and human 399 +- 30 -> [369, 399]; an object contact at
    # 200 splits the safe stretch. Safe: [0, 99], [105, 199], [201, 368]; 90-frame windows.
    e = episode(400, human=[399], scene=span(100, 104), obj=[200])
    clips = candidate_clips([e], 1)
    assert frames_of(clips, "no_event_easy") == [(0, 44, 89), (105, 149, 194), (201, 245, 290)]
    assert {c.label for c in clips if c.sample_type == "no_event_easy"} == {"A"}
    # object contacts may be declared harmless
    loose = candidate_clips([e], 1, SamplerParams(object_contacts_unsafe=False))
    assert frames_of(loose, "no_event_easy") == [(0, 44, 89), (105, 149, 194), (195, 239, 284)]


def test_no_event_hard_negative_cluster_centres():
    near = (span(150, 170)  # one cluster, centre 160
            + span(200, 204) + span(219, 223)  # diff 15 <= gap 15: merged [200, 223] -> 211
            + span(260, 262) + span(278, 280)  # diff 16 > 15: two clusters, centres 261, 279
            + span(350, 355)  # centre 352: [322, 382] meets the human margin [369, 399]
            + span(10, 12))  # centre 11: [-19, 41] leaves the episode
    e = episode(400, human=[399], near=near)
    got = frames_of(candidate_clips([e], 1), "no_event_hard_negative")
    assert got == [(130, 160, 190), (181, 211, 241), (231, 261, 291), (249, 279, 309)]


def test_near_miss_frames_during_contact_are_not_candidates():
    e = episode(200, near=span(90, 110), obj=span(90, 110))
    assert frames_of(candidate_clips([e], 1), "no_event_hard_negative") == []
    e = episode(200, near=span(90, 110), obj=span(100, 110))  # cluster [90, 99] -> centre 94
    assert frames_of(candidate_clips([e], 1, SamplerParams(near_miss_half_span=20)),
                     "no_event_hard_negative") == [(74, 94, 114)]


def test_scene_collision_events():
    scene = ([50, 51, 52, 60, 70, 71, 72]  # diffs <= 30: one event [50, 72] of 7 frames
             + [150, 151]  # 2 frames < min_scene_collision_frames: skipped
             + [200, 201, 202, 233, 234, 235]  # diff 31 > 30: two events
             + [300, 301, 331])  # diff 30 (29 free frames): one event [300, 331]
    clips = candidate_clips([episode(400, scene=scene)], 1)
    assert frames_of(clips, "scene_collision") == [
        (50, 61, 72), (200, 201, 202), (233, 234, 235), (300, 315, 331)]
    c = next(c for c in clips if c.sample_type == "scene_collision")
    assert (c.label, c.window, c.truth_scene) == ("B", (50, 72), (True, False, True))
    # an event that contains the (terminal) human contact would show both: skipped
    assert frames_of(candidate_clips([episode(100, scene=span(95, 99), human=[99])], 1),
                     "scene_collision") == []


def test_human_collision_risk_final_contact_and_preceding_frames():
    clips = candidate_clips([episode(120, human=[50, 119], eid=1), episode(2, human=[1], eid=2),
                             episode(120, eid=3)], 1)
    assert frames_of(clips, "human_collision_risk") == [(117, 118, 119)]
    c = next(c for c in clips if c.sample_type == "human_collision_risk")
    assert (c.label, c.truth_human, c.truth_distance[-1]) == ("C", (False, False, True), 0.3)
    assert c.truth_contacts == {"human": [False, False, True], "scene": [False, False, False]}


def test_task2_reuses_easy_and_near_miss_but_not_before_an_imminent_contact():
    # scene event [200, 204]: its imminent zone is [170, 199]
    e = episode(300, scene=span(200, 204), near=span(140, 150))
    t1, t2 = candidate_clips([e], 1), candidate_clips([e], 2)
    assert frames_of(t1, "no_event_easy") == [(0, 44, 89), (90, 134, 179), (205, 249, 294)]
    assert frames_of(t2, "no_risk_easy") == [(0, 44, 89), (205, 249, 294)]
    assert frames_of(t1, "no_event_hard_negative") == [(115, 145, 175)]
    assert frames_of(t2, "no_risk_hard_negative") == []
    literal = candidate_clips([e], 2, SamplerParams(strict_task2_negatives=False))
    assert frames_of(literal, "no_risk_easy") == frames_of(t1, "no_event_easy")
    assert frames_of(literal, "no_risk_hard_negative") == [(115, 145, 175)]
    assert {c.label for c in t2 if c.sample_type.startswith("no_risk")} == {"A"}


def test_no_risk_post_collision_windows():
    # events [50, 54], [100, 104], [200, 204], [380, 384] (gaps > 30)
    scene = span(50, 54) + span(100, 104) + span(200, 204) + span(380, 384)
    clips = candidate_clips([episode(400, scene=scene, eid=1),
                             episode(260, scene=span(200, 204), human=[250], eid=2)], 2)
    # after [50, 54]: [55, 84] overlaps the next event's imminent zone [70, 99];
    # after [380, 384]: [385, 414] leaves the episode;
    # episode 2: [205, 234] meets the human margin [220, 259]
    assert frames_of(clips, "no_risk_post_collision") == [(105, 119, 134), (205, 219, 234)]
    # Table 9 literally: only another collision or the human zone removes a post window, so
    # [55, 84] is kept although [70, 84] is the B window of the event at 100
    literal = candidate_clips([episode(400, scene=scene, eid=1),
                               episode(260, scene=span(200, 204), human=[250], eid=2)], 2,
                              SamplerParams(strict_task2_negatives=False))
    assert frames_of(literal, "no_risk_post_collision") == [
        (55, 69, 84), (105, 119, 134), (205, 219, 234)]
    # a post window reaching into the next event itself goes under either rule
    close = episode(200, scene=span(50, 54) + span(80, 84), eid=3)
    for strict in (True, False):
        got = candidate_clips([close], 2, SamplerParams(gap_threshold=10,
                                                        strict_task2_negatives=strict))
        assert frames_of(got, "no_risk_post_collision") == [(85, 99, 114)]


def test_scene_collision_imminent_pre_windows():
    scene = span(10, 14) + span(50, 54) + span(100, 104) + span(200, 204)
    clips = candidate_clips([episode(400, scene=scene, eid=1),
                             episode(216, scene=span(150, 154) + span(200, 204), human=[215],
                                     eid=2)], 2)
    # [10, 14]: pre [-20, 9] leaves the episode; episode 2: [170, 199] meets [185, 215]
    assert frames_of(clips, "scene_collision_imminent") == [
        (20, 34, 49), (70, 84, 99), (170, 184, 199), (120, 134, 149)]
    c = next(c for c in clips if c.sample_type == "scene_collision_imminent")
    assert (c.label, c.window, c.truth_scene) == ("B", (20, 49), (False, False, False))
    # a pre-window must not reach back into the previous event
    tight = SamplerParams(gap_threshold=10)
    got = candidate_clips([episode(400, scene=span(300, 304) + span(320, 324))], 2, tight)
    assert frames_of(got, "scene_collision_imminent") == [(270, 284, 299)]


def test_human_collision_imminent_lead_offsets():
    eps = [episode(120, human=[119], eid=1),
           episode(18, human=[17], eid=2),  # 17 - 20 < 0: the next three offsets
           episode(13, human=[12], eid=3),  # only 12 - 10 and 12 - 5 exist: skipped
           episode(120, human=[109, 119], eid=4)]  # 119 - 10 is a contact frame: skipped over
    clips = candidate_clips(eps, 2)
    assert frames_of(clips, "human_collision_imminent") == [
        (99, 104, 109), (2, 7, 12), (99, 104, 114)]
    assert {c.label for c in clips if c.sample_type == "human_collision_imminent"} == {"C"}
    # frame 109 of episode 4 is a contact inside the window of its own clip
    assert clips[-1].truth_human == (False, False, False)


def test_exclusion_region_margin_and_full_scene_intervals():
    e = episode(300, human=[299])
    assert len(frames_of(candidate_clips([e], 1), "no_event_easy")) == 2  # safe [0, 268]
    assert frames_of(candidate_clips([e], 1, SamplerParams(human_margin=0)), "no_event_easy") \
        == [(0, 44, 89), (90, 134, 179), (180, 224, 269)]
    # the whole event interval [100, 120] is excluded, not only its contact frames
    p = SamplerParams(safe_event_window=10)
    windows = [c.window for c in candidate_clips([episode(250, scene=[100, 120])], 1, p)
               if c.sample_type == "no_event_easy"]
    assert len(windows) == 10 + 12
    assert all(hi < 100 or lo > 120 for lo, hi in windows)


def test_truth_trend_uses_tolerance():
    e = episode(200)
    d = e.robot_human_distance
    d[0], d[44], d[89] = 3.0, 2.5, 2.9  # -0.1 m: closing
    d[90], d[134], d[179] = 2.0, 2.0, 2.04  # +0.04 m: within 5 cm, stable
    clips = candidate_clips([e], 1)
    assert [(c.truth_distance, c.truth_trend) for c in clips] == [
        ((3.0, 2.5, 2.9), "closing"), ((2.0, 2.0, 2.04), "stable")]
    wide = candidate_clips([e], 1, SamplerParams(trend_tolerance_m=0.01))
    assert wide[1].truth_trend == "separating"


# ----------------------------------------------------------------------------- balancing


def corpus(per_stratum=4, **kw):
    """Episodes in all six (human_type, sim_task) strata; scene contacts only in navigation (as
    in App. F.1), a near miss and a terminal human contact in each."""
    eps, eid = [], 0
    for ht in HUMAN_TYPES:
        for task in SIM_TASKS:
            for _ in range(per_stratum):
                scene = span(300, 304) + span(400, 404) if task == NAV else []
                eps.append(episode(600, human=[599], scene=scene, near=span(150, 160),
                                   human_type=ht, sim_task=task, eid=eid, **kw))
                eid += 1
    return eps


@pytest.mark.parametrize("task", [1, 2])
def test_balancing_equal_classes_and_balanced_a_subtypes(task):
    eps = corpus()
    cands = Counter(c.sample_type for c in candidate_clips(eps, task))
    types = SAMPLE_TYPES[task]
    n = min(sum(cands[s] for s in sts) for sts in types.values())
    clips = sample_clips(eps, task)
    assert Counter(c.label for c in clips) == {"A": n, "B": n, "C": n}
    a = [Counter(c.sample_type for c in clips)[s] for s in types["A"]]
    assert sum(a) == n and max(a) - min(a) <= 1
    assert len({c.clip_id for c in clips}) == len(clips)


def test_stratification_by_human_type_and_sim_task():
    clips = sample_clips(corpus(), 1, SamplerParams(clips_per_class=12))
    strata = Counter((c.label, c.human_type, c.sim_task) for c in clips)
    for ht in HUMAN_TYPES:  # C and A exist in all 6 strata: 2 each; B only in navigation: 4
        assert strata["B", ht, NAV] == 4 and strata["B", ht, REARR] == 0
        for task in SIM_TASKS:
            assert strata["C", ht, task] == 2
            assert strata["A", ht, task] == 2
    # within A each subtype (6 clips) is stratified as well
    a = Counter((c.sample_type, c.human_type, c.sim_task) for c in clips if c.label == "A")
    assert set(a.values()) == {1} and len(a) == 12


def test_scarce_stratum_gives_its_share_to_the_others():
    eps = corpus(per_stratum=3)
    rare = [e for e in eps if (e.human_type, e.sim_task) == ("male_2", REARR)]
    eps = [e for e in eps if e not in rare[1:]]  # that stratum keeps one human contact
    clips = sample_clips(eps, 1, SamplerParams(clips_per_class=9))
    c = Counter((x.human_type, x.sim_task) for x in clips if x.label == "C")
    assert c.pop(("male_2", REARR)) == 1 and sum(c.values()) == 8
    assert max(c.values()) - min(c.values()) <= 1


def test_same_seed_same_clips_any_episode_order():
    eps = corpus(per_stratum=5)
    a = sample_clips(eps, 2, seed=7)
    assert a == sample_clips(list(reversed(eps)), 2, seed=7)
    assert [c.clip_id for c in a] != [c.clip_id for c in sample_clips(eps, 2, seed=8)]


def test_unbalanceable_task_is_an_error():
    with pytest.raises(RobosafeError, match="B=0"):
        sample_clips([episode(300, human=[299])], 1)
    with pytest.raises(RobosafeError, match="not a task 2 type"):
        balance(candidate_clips(corpus(1), 1), 2)


# ----------------------------------------------------------------------------- parameters


def test_parameter_override():
    e = episode(400, scene=span(100, 104) + span(120, 124))
    assert len(frames_of(candidate_clips([e], 1), "scene_collision")) == 1  # [100, 124]
    split = candidate_clips([e], 1, SamplerParams(gap_threshold=10))
    assert frames_of(split, "scene_collision") == [(100, 102, 104), (120, 122, 124)]
    p = SamplerParams(min_scene_collision_frames=6, pre_window=20, lead_offsets=(8, 4, 2))
    t2 = candidate_clips([episode(200, scene=span(100, 104), human=[199])], 2, p)
    assert frames_of(t2, "scene_collision_imminent") == [(80, 89, 99)]
    assert frames_of(t2, "human_collision_imminent") == [(191, 195, 197)]
    assert frames_of(candidate_clips([e], 1, p), "scene_collision") == [(100, 112, 124)]


@pytest.mark.parametrize("kw", [{"gap_threshold": -1}, {"safe_event_window": 2},
                                {"near_miss_dist": -0.5}, {"lead_offsets": (5, 5, 10)},
                                {"lead_offsets": (10, 5)}, {"frames_per_clip": 1},
                                {"clips_per_class": 0}, {"pre_window": 2.5}])
def test_bad_parameters_are_user_errors(kw):
    with pytest.raises(RobosafeError, match="SamplerParams"):
        SamplerParams(**kw)


def test_bad_inputs_are_user_errors():
    with pytest.raises(RobosafeError, match="task must be 1 or 2"):
        candidate_clips([], 3)
    e = episode(10)
    with pytest.raises(RobosafeError, match="given twice"):
        candidate_clips([e, e], 1)
    with pytest.raises(RobosafeError, match="outside 0..9"):
        candidate_clips([replace(e, human_collision_steps=np.array([12]))], 1)
    with pytest.raises(RobosafeError, match="has 5 values for 10 frames"):
        candidate_clips([replace(e, robot_human_distance=np.ones(5))], 1)
    with pytest.raises(RobosafeError, match="unknown sampler parameter"):
        sweep([e], "gap", [1])


# ----------------------------------------------------------------------------- clip index files


@pytest.mark.parametrize("name", ["clips.jsonl", "clips.parquet"])
def test_clip_index_round_trip(tmp_path: Path, name):
    clips = sample_clips(corpus(2), 2, seed=3)
    path = write_clip_index(clips, tmp_path / name)
    back = read_clip_index(path)
    assert back == clips
    rec = back[0].to_record()
    assert set(rec) >= {"clip_id", "task", "label", "sample_type", "episode_dir", "frames",
                        "human_type", "sim_task", "truth_distance", "truth_trend",
                        "truth_contacts"}
    assert write_clip_index([], tmp_path / ("empty_" + name)) and \
        read_clip_index(tmp_path / ("empty_" + name)) == []


def test_malformed_clip_index_names_the_line(tmp_path: Path):
    good = sample_clips(corpus(1), 1)[0].to_record()
    path = tmp_path / "bad.jsonl"
    path.write_text('{"clip_id": 1}\n')
    with pytest.raises(RobosafeError, match=r"bad.jsonl:1: missing field"):
        read_clip_index(path)
    path.write_text("\n{oops\n")
    with pytest.raises(RobosafeError, match=r"bad.jsonl:2: malformed JSON"):
        read_clip_index(path)
    import json
    path.write_text(json.dumps({**good, "label": "C"}) + "\n")
    with pytest.raises(RobosafeError, match="do not match sample type"):
        read_clip_index(path)
    with pytest.raises(RobosafeError, match="cannot read"):
        read_clip_index(tmp_path / "missing.jsonl")


# ----------------------------------------------------------------------------- F.3 sweeps


def test_sweep_gap_threshold_row_by_hand():
    eps = [episode(100, scene=[10, 11, 12, 20, 21, 60], eid=1), episode(100, eid=2)]
    rows = sweep(eps, "gap_threshold", [5, 30], task=1)
    # gap 5: [10-12] [20-21] [60] -> sizes 3, 2, 1; gap 30: [10-21] [60] -> sizes 5, 1
    assert [(r["value"], r["events"], r["episodes_with_events"], r["median_size"])
            for r in rows] == [(5, 3, 1, 2), (30, 2, 1, 3)]
    assert rows[0]["candidates"]["scene_collision"] == 1  # only [10, 12] has 3 frames
    assert rows[1]["candidates"]["scene_collision"] == 1  # [10, 21]


def test_sweep_other_tables_by_hand():
    eps = [episode(400, human=[399], scene=span(100, 104) + span(150, 154),
                   near=span(250, 260), eid=1),
           episode(12, human=[11], eid=2)]
    (w90,) = sweep(eps, "safe_event_window", [90])
    # safe: [0, 99] -> 1 window; [105, 149] -> 0; [155, 368] -> 2; episode 2 none
    assert (w90["events"], w90["episodes_with_events"], w90["avg_per_episode"]) == (3, 1, 1.5)
    (nm,) = sweep(eps, "near_miss_dist", [1.5])
    assert (nm["events"], nm["median_size"], nm["max_size"], nm["valid"]) == (1, 11, 11, 1)
    pre, post = sweep(eps, "pre_window", [30, 60], task=2)
    # pre [70, 99] and [120, 149]; 60: [40, 99] ok, [90, 149] reaches into [100, 104]
    assert (pre["valid_pre"], post["valid_pre"]) == (2, 1)
    # post [105, 134] meets [120, 149] (imminent); [155, 184] is free
    assert pre["valid_post"] == 1 and pre["events"] == 2
    lead = sweep(eps, "lead_offsets", [5, 20])
    assert [(r["valid"], r["skip_too_early"], r["skip_overlap"]) for r in lead] == \
        [(2, 0, 0), (1, 1, 0)]
    with pytest.raises(RobosafeError, match="single positive offsets"):
        sweep(eps, "lead_offsets", [(20, 15, 10)])


def test_sweep_all_has_the_f3_tables():
    tables = sweep_all(corpus(1))
    assert [len(v) for v in tables.values()] == [6, 7, 12, 6, 7]
    t13 = tables["table13_near_miss"]
    assert [(r["near_miss_dist"], r["near_miss_gap"]) for r in t13[:4]] == \
        [(0.8, 5), (0.8, 15), (0.8, 30), (1.0, 5)]
    t14 = tables["table14_pre_post_window"]
    assert all(r["pre_window"] == r["post_window"] == r["value"] for r in t14)
    for rows in tables.values():
        assert all({"param", "value", "events", "episodes_with_events", "median_size"} <= set(r)
                   for r in rows)


# ----------------------------------------------------------------------------- invariants


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 400), data=st.data())
def test_clip_invariants_on_random_episodes(n, data):
    steps = st.lists(st.integers(0, n - 1), max_size=12, unique=True)
    human = data.draw(st.lists(st.integers(0, n - 1), max_size=2, unique=True))
    scene, obj, near = data.draw(steps), data.draw(steps), data.draw(steps)
    e = episode(n, human=human, scene=scene, obj=obj, near=near)
    hum = set(human)
    for task in (1, 2):
        for c in candidate_clips([e], task):
            lo, hi = c.window
            assert 0 <= lo <= c.frames[0] < c.frames[1] < c.frames[2] <= hi < n
            assert c.truth_human == tuple(f in hum for f in c.frames)
            assert c.truth_scene == tuple(f in set(scene) for f in c.frames)
            if c.label == "A":  # an A clip never shows a contact
                assert not any(c.truth_human) and not any(c.truth_scene)
            if c.sample_type.endswith("easy"):  # collision-free: no object contact either
                assert not any(lo <= f <= hi for f in obj)
            if c.sample_type == "scene_collision_imminent":
                assert hi + 1 in set(scene)


# ----------------------------------------------------------------------------- end to end


def test_end_to_end_through_the_synthetic_dataset(tmp_path: Path):
    synthetic = pytest.importorskip("robosafe.grounding.synthetic")
    from robosafe.grounding.dataset import index_dataset
    from robosafe.grounding.metrics import score_answers

    config = synthetic.SyntheticConfig(n_scenes=1, episodes_per_scene=2, length_scale=0.5,
                                       images=False)
    synthetic.generate_dataset(tmp_path / "ds", config, seed=3)
    index = index_dataset(tmp_path / "ds")
    by_dir = {e.episode_dir: e for e in index}
    records = []
    for task in (1, 2):
        clips = sample_clips(index, task, seed=1)
        counts = Counter(c.label for c in clips)
        assert len(set(counts.values())) == 1 and set(counts) == {"A", "B", "C"}
        assert clips == sample_clips(index_dataset(tmp_path / "ds"), task, seed=1)
        for c in clips:
            e = by_dir[c.episode_dir]
            assert max(c.frames) < e.n_frames
            assert c.truth_distance == tuple(e.robot_human_distance[list(c.frames)])
        path = write_clip_index(clips, tmp_path / f"task{task}.parquet")
        records += [{**c.to_record(), "answer": {"answer" if task == 1 else "risk_level":
                                                  c.label, "distance_trend": c.truth_trend}}
                    for c in read_clip_index(path)]
    scores = score_answers(records)["overall"]
    assert scores["task1"]["accuracy"] == scores["task2"]["accuracy"] == 1.0
    assert scores["task1"]["trend"]["accuracy"] == 1.0


def test_clip_is_frozen():
    c = sample_clips(corpus(1), 1)[0]
    with pytest.raises(AttributeError):
        c.label = "B"  # type: ignore[misc]
    assert isinstance(c, Clip) and replace(c, label="B").label == "B"


def test_reference_distances_only_where_the_human_is_visible():
    """App. G.1: distances are scored on frames where the human is visible in the simulator."""
    e = episode(300, scene=span(200, 204))
    vis = np.ones(300, dtype=bool)
    vis[44] = False                      # the middle frame of the first easy window
    seen = replace(e, human_visible=vis)
    blind = frames_of(candidate_clips([e], 1), "no_event_easy")
    clips = candidate_clips([seen], 1)
    assert frames_of(clips, "no_event_easy") == blind      # same windows, same frames
    first = next(c for c in clips if c.frames == (0, 44, 89))
    assert first.truth_distance == (3.0, None, 3.0)
    assert first.truth_trend == "stable"                    # trend still from the simulator
    back = Clip.from_record(first.to_record())
    assert back.truth_distance == (3.0, None, 3.0)


def test_clip_index_keeps_unseen_distances_as_null(tmp_path):
    vis = np.zeros(300, dtype=bool)
    clips = candidate_clips([replace(episode(300), human_visible=vis)], 1)
    for name in ("c.parquet", "c.jsonl"):
        write_clip_index(clips, tmp_path / name)
        assert read_clip_index(tmp_path / name) == clips
        assert all(d is None for c in read_clip_index(tmp_path / name) for d in c.truth_distance)
