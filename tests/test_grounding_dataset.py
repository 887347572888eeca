"""TouchSafeBench dataset layout: writer -> lazy index round trip, validation, cache, frames."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from robosafe.errors import RobosafeError
from robosafe.grounding import (
    DEPTH_SENSORS,
    VIEWS,
    DatasetError,
    DatasetIndex,
    SyntheticConfig,
    frame_path,
    generate_dataset,
    index_dataset,
    iter_synthetic_episodes,
    load_depth_m,
    load_rgb,
    planar_distance,
)
from robosafe.grounding import dataset as ds
from robosafe.grounding.synthetic import _episode_length, episode_plan

SMALL = SyntheticConfig(human_types=("female_2",), n_scenes=1, episodes_per_scene=3,
                        length_scale=0.02, images=False)
WITH_IMAGES = SyntheticConfig(human_types=("male_2",), sim_tasks=("social_navigation",),
                              n_scenes=1, episodes_per_scene=2, length_scale=0.01)


@pytest.fixture(scope="module")
def json_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("json_only")
    generate_dataset(root, SMALL, seed=6)
    return root


@pytest.fixture(scope="module")
def with_images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("with_images")
    generate_dataset(root, WITH_IMAGES, seed=5)
    return root


@pytest.fixture
def copy_of(tmp_path: Path) -> Callable[[Path], Path]:
    def copy(src: Path) -> Path:
        return Path(shutil.copytree(src, tmp_path / "ds"))
    return copy


def _edit_json(path: Path, fn: Callable[[dict], None]) -> None:
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


# ----------------------------------------------------------------------------- round trip


def test_round_trip_equals_generator_ground_truth(json_only: Path) -> None:
    index = index_dataset(json_only)
    truth = list(iter_synthetic_episodes(SMALL, seed=6))
    assert not index.errors and len(index) == len(truth) == SMALL.n_episodes
    assert [e.episode_dir for e in index] == sorted(r.episode_dir for r in truth)
    by_dir = {r.episode_dir: r for r in truth}
    for e in index:
        r = by_dir[e.episode_dir]
        assert (e.episode_id, e.scene_id, e.sim_task, e.human_type) == \
            (r.episode_id, r.scene_id, r.sim_task, r.human_type)
        assert e.n_frames == r.n_steps == len(e.robot_human_distance)
        np.testing.assert_array_equal(e.robot_pos, r.robot_pos)
        np.testing.assert_array_equal(e.human_pos, r.human_pos)
        np.testing.assert_array_equal(e.human_collision_steps, np.flatnonzero(r.human_collision))
        np.testing.assert_array_equal(e.scene_collision_steps,
                                      np.flatnonzero(r.robot_scene_colls))
        np.testing.assert_array_equal(e.object_collision_steps, np.flatnonzero(r.robot_obj_colls))
        dx = r.robot_pos[:, 0] - r.human_pos[:, 0]
        dz = r.robot_pos[:, 2] - r.human_pos[:, 2]
        np.testing.assert_allclose(e.robot_human_distance, np.hypot(dx, dz), rtol=0, atol=1e-12)


def test_distance_is_planar_in_the_ground_plane() -> None:
    robot = np.array([[0.0, 0.48, 0.0], [1.0, 0.48, 0.0]])
    human = np.array([[0.0, 0.90, 0.0], [1.0, 0.90, 2.0]])
    np.testing.assert_allclose(planar_distance(robot, human), [0.0, 2.0])


def test_synthetic_events_follow_the_paper(json_only: Path) -> None:
    index = index_dataset(json_only)
    for e in index:
        d = e.robot_human_distance
        if e.did_collide_human:  # terminal: one contact, on the last step, within contact range
            assert e.human_collision_steps.tolist() == [e.n_frames - 1]
            assert d[-1] < SMALL.contact_distance_m <= d[:-1].min(initial=np.inf)
        else:
            assert d.min() >= SMALL.contact_distance_m
        if e.sim_task == "social_rearrangement":  # App. F.1: scene contacts only in navigation
            assert e.scene_collision_steps.size == 0
        else:
            assert e.scene_collision_steps.size > 0


def test_paper_size_and_step_statistics() -> None:
    paper = SyntheticConfig.paper()
    assert paper.n_episodes == 2940 and len(episode_plan(paper)) == 2940
    assert not paper.images
    rng = np.random.default_rng(0)
    collide = rng.random(20000) < paper.p_human_collision
    lengths = np.array([_episode_length(rng, bool(c), paper) for c in collide])
    assert lengths.min() >= 1 and lengths.max() == 1500
    assert abs(lengths.mean() - 648) / 648 < 0.05  # App. F.1: mean 648, median 552
    assert abs(np.median(lengths) - 552) / 552 < 0.05
    assert 1.85e6 < lengths.mean() * 2940 < 1.97e6  # ~1.9 M steps


def test_generation_is_seeded_and_worker_independent(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    generate_dataset(a, SMALL, seed=11, workers=1)
    generate_dataset(b, SMALL, seed=11, workers=2)
    files = sorted(p.relative_to(a) for p in a.rglob("*.json"))
    assert files and files == sorted(p.relative_to(b) for p in b.rglob("*.json"))
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)


def test_camera_params_are_column_major_and_agree_with_pose(json_only: Path) -> None:
    ep = index_dataset(json_only).episodes[0]
    cam = json.loads((json_only / ep.episode_dir / "camera_params.json").read_text())
    assert cam["num_frames"] == len(cam["frames"]) == ep.n_frames
    for sensor in DEPTH_SENSORS.values():
        f = cam["frames"][0][sensor]
        m = np.array(f["camera_to_world"]).reshape(4, 4).T  # column-major
        np.testing.assert_allclose(m[:3, 3], f["position"], atol=1e-5)
        np.testing.assert_allclose(m[3], [0, 0, 0, 1])
        np.testing.assert_allclose(m[:3, :3] @ m[:3, :3].T, np.eye(3), atol=1e-4)
        np.testing.assert_allclose(ds.quat_to_matrix(np.array([f["rotation_wxyz"]]))[0],
                                   m[:3, :3], atol=1e-4)


# ----------------------------------------------------------------------------- laziness, frames


def test_index_never_opens_images(with_images: Path, copy_of: Callable[[Path], Path],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import PIL.Image

    expected = index_dataset(with_images)
    root = copy_of(with_images)
    for p in [*root.rglob("*.jpg"), *root.rglob("*.png"), *root.rglob("*.mp4")]:
        p.write_bytes(b"not an image")

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the lazy index opened an image")

    monkeypatch.setattr(PIL.Image, "open", refuse)
    index = index_dataset(root)
    assert not index.errors and index.episodes == expected.episodes


def test_frames_round_trip(with_images: Path) -> None:
    index = index_dataset(with_images)
    ep = index.episodes[0]
    epdir = index.episode_path(ep)
    rgb = load_rgb(epdir, "arm", 0)
    assert rgb.shape == (16, 16, 3) and rgb.dtype == np.uint8
    depth = load_depth_m(epdir, "head", ep.n_frames - 1)
    # synthetic depth: near edge (first row) is the robot-human distance; 8-bit quantisation
    assert depth.shape == (16, 16) and depth.dtype == np.float32
    assert abs(depth[0, 0] - ep.robot_human_distance[-1]) <= ep.max_depth_m / 255
    np.testing.assert_array_equal(load_depth_m(epdir, "head", 0, max_depth_m=5.0) * 2,
                                  load_depth_m(epdir, "head", 0))
    assert index.frame_path(ep, "third_robot", "depth", 7) == \
        epdir / "depth" / "third_robot" / "000007.png"


def test_json_only_dataset_points_where_frames_would_be(json_only: Path) -> None:
    index = index_dataset(json_only)
    ep = index.episodes[0]
    p = frame_path(index.episode_path(ep), "head", "rgb", 3)
    assert p == json_only / ep.episode_dir / "rgb_full" / "head" / "000003.jpg"
    assert not p.exists()
    with pytest.raises(RobosafeError, match=r"000003\.jpg: missing frame file"):
        load_rgb(index.episode_path(ep), "head", 3)
    for bad in (("top", "rgb", 0), ("arm", "ir", 0), ("arm", "rgb", -1)):
        with pytest.raises(RobosafeError):
            frame_path(index.episode_path(ep), *bad)


def test_missing_frames_are_reported_when_images_are_declared(
        with_images: Path, copy_of: Callable[[Path], Path]) -> None:
    root = copy_of(with_images)
    ep = index_dataset(root).episodes[0]
    last = frame_path(root / ep.episode_dir, "third_human", "depth", ep.n_frames - 1)
    mid = frame_path(root / ep.episode_dir, "head", "rgb", ep.n_frames // 2)
    mid.unlink()
    assert not index_dataset(root).errors  # the cheap check stats first and last frames only
    [err] = index_dataset(root, deep=True).errors
    assert err.episode_dir == ep.episode_dir and err.file == "rgb_full/head"
    assert f"missing {mid.name}" in str(err) and ep.episode_dir in str(err)
    last.unlink()
    [err] = index_dataset(root).errors
    assert err.file == f"depth/third_human/{last.name}" and ep.episode_dir in str(err)


# ----------------------------------------------------------------------------- validation


def _traj(doc: dict) -> list:
    return doc["trajectory"]


def _drop_step0(doc: dict) -> None:
    """A consistent trajectory one step shorter than the other files say."""
    _traj(doc).pop(0)
    summary = doc["collision_summary"]
    for key in ("human_collision_steps", "robot_obj_coll_steps", "robot_scene_coll_steps"):
        summary[key] = [t - 1 for t in summary[key] if t > 0]
    summary["total_robot_obj_colls"] = len(summary["robot_obj_coll_steps"])
    summary["total_robot_scene_colls"] = len(summary["robot_scene_coll_steps"])


def _swap_agents(doc: dict) -> None:
    for s in _traj(doc):
        s["agents"].reverse()


CORRUPTIONS: list[tuple[str, str, Callable[[Path], None], str]] = [
    ("missing trajectory", "trajectory.json", lambda d: (d / "trajectory.json").unlink(),
     "missing file"),
    ("missing camera", "camera_params.json", lambda d: (d / "camera_params.json").unlink(),
     "missing file"),
    ("malformed trajectory", "trajectory.json:6:",
     lambda d: (d / "trajectory.json").write_text(
         "\n".join(line.replace('"agents": [', '"agents" [') if i == 5 else line
                   for i, line in enumerate((d / "trajectory.json").read_text().split("\n")))),
     "malformed JSON: Expecting ':' delimiter"),
    ("malformed meta", "episode_meta.json:1:", lambda d: (d / "episode_meta.json").write_text(
        '{"episode_id": 0,'), "malformed JSON"),
    ("rgb count", "rgb_meta.json", lambda d: _edit_json(
        d / "rgb_meta.json", lambda m: m["sensors"].update(agent_1_head_rgb=2 + m["sensors"][
            "agent_1_head_rgb"])), "frame counts disagree: sensors.agent_1_head_rgb"),
    ("depth sensor missing", "depth_meta.json", lambda d: _edit_json(
        d / "depth_meta.json", lambda m: m["sensors"].pop("agent_0_third_depth")),
     "sensors has no 'agent_0_third_depth'"),
    ("camera count", "camera_params.json", lambda d: (d / "camera_params.json").write_text(
        (d / "camera_params.json").read_text().replace('"num_frames": ', '"num_frames": 1')),
     "frame counts disagree: num_frames"),
    ("steps dropped", "rgb_meta.json", lambda d: _edit_json(  # one is tolerated (warning)
        d / "trajectory.json", lambda t: _drop_step0(t) or _drop_step0(t)),
     "frame counts disagree"),
    ("human steps", "trajectory.json", lambda d: _edit_json(
        d / "trajectory.json", lambda t: t["collision_summary"].update(human_collision_steps=[0])),
     "collision_summary.human_collision_steps lists 1 step but"),
    ("scene total", "trajectory.json", lambda d: _edit_json(
        d / "trajectory.json", lambda t: t["collision_summary"].update(total_robot_scene_colls=-1)),
     "total_robot_scene_colls is -1"),
    ("scene flag", "trajectory.json", lambda d: _edit_json(
        d / "trajectory.json", lambda t: _traj(t)[-1]["collisions"].update(robot_scene_colls=0)
        or _traj(t)[0]["collisions"].update(robot_scene_colls=2)),
     "robot_scene_coll_steps lists"),
    ("summary flag", "trajectory.json", lambda d: _edit_json(
        d / "trajectory.json", lambda t: t["collision_summary"].update(did_collide_human=False)),
     "did_collide_human is false"),
    ("no position", "trajectory.json", lambda d: _edit_json(
        d / "trajectory.json", lambda t: _traj(t)[3]["agents"][1].pop("position")),
     "missing field 'trajectory[3].agents[1].position'"),
    ("short position", "trajectory.json", lambda d: _edit_json(
        d / "trajectory.json", lambda t: _traj(t)[2]["agents"][0].update(position=[1.0, 2.0])),
     "trajectory[2].agents[0].position must be 3 numbers"),
    ("no humanoid", "trajectory.json", lambda d: _edit_json(
        d / "trajectory.json", lambda t: _traj(t)[4]["agents"][1].update(id="agent_7")),
     "trajectory[4].agents: no 'agent_1'"),
    ("nan position", "trajectory.json", lambda d: _edit_json(
        d / "trajectory.json", lambda t: _traj(t)[1]["agents"][0].update(
            position=[float("nan"), 0.0, 0.0])), "trajectory[1]: non-finite agent position"),
    ("int flag", "trajectory.json", lambda d: _edit_json(
        d / "trajectory.json", lambda t: _traj(t)[0]["collisions"].update(did_collide_human=0)),
     "'trajectory[0].collisions.did_collide_human' must be true/false"),
    ("wrong human type", "episode_meta.json", lambda d: _edit_json(
        d / "episode_meta.json", lambda m: m.update(human_type="male_2")),
     "human_type 'male_2' disagrees with the directory"),
    ("wrong id", "rgb_meta.json", lambda d: _edit_json(
        d / "rgb_meta.json", lambda m: m.update(episode_id=999)),
     "episode_id 999 disagrees with episode_meta.json"),
    ("bad depth scale", "depth_meta.json", lambda d: _edit_json(
        d / "depth_meta.json", lambda m: m.update(max_depth_m=0)), "max_depth_m must be > 0"),
]


@pytest.mark.parametrize("file, corrupt, message",
                         [c[1:] for c in CORRUPTIONS], ids=[c[0] for c in CORRUPTIONS])
def test_every_validation_error_names_episode_and_file(
        json_only: Path, copy_of: Callable[[Path], Path], file: str,
        corrupt: Callable[[Path], None], message: str) -> None:
    root = copy_of(json_only)
    # the navigation episode that ends in a human collision and has >= 6 steps
    good = index_dataset(root)
    target = next(e for e in good if e.sim_task == "social_navigation" and e.did_collide_human
                  and e.n_frames >= 6)
    corrupt(root / target.episode_dir)
    seen: list[DatasetError] = []
    index = index_dataset(root, on_error=seen.append)
    assert seen == index.errors and len(seen) == 1
    err = seen[0]
    text = str(err)
    assert err.episode_dir == target.episode_dir
    assert f"{root / target.episode_dir}/{file}" in text, text
    assert message in text, text
    assert isinstance(err, RobosafeError)
    assert len(index) == len(good) - 1 and target.episode_dir not in [e.episode_dir for e in index]


def test_missing_topdown_video_keeps_the_episode_with_one_warning(
        json_only: Path, copy_of: Callable[[Path], Path], tmp_path: Path) -> None:
    from robosafe.grounding.representations import clip_images

    root = copy_of(json_only)
    good = index_dataset(root)
    target = good.episodes[1]
    (root / target.episode_dir / "topdown.mp4").unlink()
    warned: list[str] = []
    index = index_dataset(root, on_warning=warned.append, cache=tmp_path / "c.jsonl")
    assert not index.errors and index.episodes == good.episodes
    assert warned == index.warnings and len(warned) == 1
    assert f"{root / target.episode_dir}/topdown.mp4: missing file" in warned[0]
    assert "trajectory map alone" in warned[0]
    again: list[str] = []  # the cached index warns the same
    index_dataset(root, on_warning=again.append, cache=tmp_path / "c.jsonl")
    assert again == warned
    from robosafe.grounding.representations import TOPDOWN_PX, topdown_image

    clip = {"episode_dir": target.episode_dir, "frames": [0]}
    (image,) = clip_images(clip, root, "rgb", "topdown")  # the map, drawn from the trajectory
    assert image.data[16:24] == TOPDOWN_PX.to_bytes(4, "big") * 2  # PNG IHDR: 256 x 256
    with pytest.raises(RobosafeError, match="top-down representation is unavailable"):
        topdown_image(root / target.episode_dir)


def test_numeric_scene_id_and_one_extra_frame_are_read_with_warnings(
        with_images: Path, copy_of: Callable[[Path], Path], tmp_path: Path) -> None:
    import shutil

    root = copy_of(with_images)
    good = index_dataset(root)
    target = next(e for e in good if e.scene_id.isdigit())
    d = root / target.episode_dir
    for name in ("episode_meta.json", "rgb_meta.json", "depth_meta.json"):
        _edit_json(d / name, lambda m: m.update(scene_id=int(m["scene_id"])))
    n = target.n_frames
    for name in ("rgb_meta.json", "depth_meta.json"):
        _edit_json(d / name, lambda m: m["sensors"].update({k: n + 1 for k in m["sensors"]}))
    _edit_json(d / "camera_params.json",
               lambda c: c.update(num_frames=n + 1, frames=[*c["frames"], c["frames"][-1]]))
    for view in VIEWS:  # the renderer's extra frame
        for top, ext in (("rgb_full", "jpg"), ("depth", "png")):
            shutil.copy(d / top / view / f"{n - 1:06d}.{ext}", d / top / view / f"{n:06d}.{ext}")
    for deep in (False, True):
        warned: list[str] = []
        index = index_dataset(root, deep=deep, on_warning=warned.append,
                              cache=tmp_path / f"c{deep}.jsonl")
        assert not index.errors and index.episodes == good.episodes, index.errors
        assert warned == index.warnings
        assert sum("scene_id is the number" in w for w in warned) == 3  # meta, rgb, depth
        assert any("camera_params.json: num_frames has" in w for w in warned)
        assert sum("one more than trajectory.json's" in w for w in warned) == 9
        assert all(str(d) in w for w in warned)
        cached: list[str] = []  # a reused cache repeats them
        index_dataset(root, deep=deep, on_warning=cached.append,
                      cache=tmp_path / f"c{deep}.jsonl")
        assert cached == warned


def test_agents_in_any_order_parse_like_the_fast_path(
        json_only: Path, copy_of: Callable[[Path], Path]) -> None:
    root = copy_of(json_only)
    before = index_dataset(root)
    for e in before:
        _edit_json(root / e.episode_dir / "trajectory.json", _swap_agents)
    after = index_dataset(root)
    assert not after.errors and after.episodes == before.episodes


def test_other_agent_id_spellings_are_read_with_one_warning_each(
        json_only: Path, copy_of: Callable[[Path], Path]) -> None:
    root = copy_of(json_only)
    before = index_dataset(root)
    a, b = before.episodes[0], before.episodes[1]

    def respell(doc: dict) -> None:   # agent_0 -> {"agent_id": "robot"}, agent_1 -> 1
        for step in doc["trajectory"]:
            r, h = step["agents"]
            r["agent_id"] = "robot"
            del r["id"]
            h["id"] = 1
    _edit_json(root / a.episode_dir / "trajectory.json", respell)
    _edit_json(root / b.episode_dir / "trajectory.json",
               lambda d: [s["agents"][0].update(id="wheelbarrow") for s in d["trajectory"]])
    warned: list[str] = []
    after = index_dataset(root, on_warning=warned.append)
    assert after.get(a.episode_dir) == a            # same positions, same labels
    t = f"{root / a.episode_dir}/trajectory.json"
    assert warned == [f"{t}: agent agent_id 'robot' read as id 'agent_0' (robot)",
                      f"{t}: agent id 1 read as id 'agent_1' (humanoid)"]
    [err] = after.errors                             # an unknown id is still an error
    assert err.episode_dir == b.episode_dir and "no 'agent_0' (robot) record" in str(err)


def test_camera_params_field_order_does_not_matter(
        json_only: Path, copy_of: Callable[[Path], Path]) -> None:
    root = copy_of(json_only)
    before = index_dataset(root)
    for e in before:  # frames before num_frames defeats the head-only read; full parse fallback
        path = root / e.episode_dir / "camera_params.json"
        doc = json.loads(path.read_text())
        path.write_text(json.dumps({"frames": doc["frames"], **doc}))
    assert index_dataset(root).episodes == before.episodes
    ep = before.episodes[0]
    _edit_json(root / ep.episode_dir / "camera_params.json", lambda c: c["frames"].pop())
    assert not index_dataset(root).errors  # lazy mode reads num_frames only
    [err] = index_dataset(root, deep=True).errors
    assert err.file == "camera_params.json" and "entries but num_frames" in str(err)


def test_bad_episode_among_good_ones_with_workers(
        json_only: Path, copy_of: Callable[[Path], Path]) -> None:
    root = copy_of(json_only)
    good = index_dataset(root)
    bad = good.episodes[2]
    (root / bad.episode_dir / "trajectory.json").write_text("{")
    for workers in (1, 2):
        seen: list[DatasetError] = []
        index = index_dataset(root, workers=workers, on_error=seen.append)
        assert [e.episode_dir for e in seen] == [bad.episode_dir]
        assert "trajectory.json:1:2: malformed JSON" in str(seen[0])
        assert index.episodes == [e for e in good.episodes if e.episode_dir != bad.episode_dir]


def test_dataset_root_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="dataset_info.json: missing file"):
        index_dataset(tmp_path)
    (tmp_path / "dataset_info.json").write_text("[1,")
    with pytest.raises(DatasetError, match=r"dataset_info.json:1:4: malformed JSON"):
        index_dataset(tmp_path)
    with pytest.raises(DatasetError, match="not a directory"):
        index_dataset(tmp_path / "nope")


# ----------------------------------------------------------------------------- cache


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_cache_round_trip(json_only: Path, copy_of: Callable[[Path], Path], tmp_path: Path,
                          suffix: str) -> None:
    root = copy_of(json_only)
    (root / index_dataset(root).episodes[1].episode_dir / "rgb_meta.json").unlink()
    index = index_dataset(root)
    path = index.save(tmp_path / f"index{suffix}")
    loaded = DatasetIndex.load(path)
    assert loaded.episodes == index.episodes and loaded.root == root
    assert [str(e) for e in loaded.errors] == [str(e) for e in index.errors] and index.errors
    assert loaded.errors[0].file == "rgb_meta.json"
    assert loaded.info == index.info and loaded.fingerprint == index.fingerprint
    assert DatasetIndex.load(path, root=tmp_path).root == tmp_path
    with pytest.raises(RobosafeError, match="must end in"):
        index.save(tmp_path / "index.csv")


def test_index_cache_is_reused_until_the_json_changes(
        json_only: Path, copy_of: Callable[[Path], Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    root = copy_of(json_only)
    cache = tmp_path / "cache.parquet"
    first = index_dataset(root, cache=cache)
    assert cache.is_file()

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("re-indexed although the cache is fresh")

    with monkeypatch.context() as m:
        m.setattr(ds, "index_episode", refuse)
        assert index_dataset(root, cache=cache).episodes == first.episodes
    ep = first.episodes[0]
    _edit_json(root / ep.episode_dir / "trajectory.json",
               lambda t: t["collision_summary"].update(total_robot_obj_colls=-5))
    seen: list[DatasetError] = []
    again = index_dataset(root, cache=cache, on_error=seen.append)
    assert [e.episode_dir for e in seen] == [ep.episode_dir] and len(again) == len(first) - 1
    assert DatasetIndex.load(cache).fingerprint == again.fingerprint


def test_views_and_sensors_are_the_app_e_names() -> None:
    assert VIEWS == ("arm", "head", "third_human", "third_robot")
    assert set(ds.RGB_SENSORS.values()) == {"agent_0_articulated_agent_arm_rgb",
                                            "agent_1_head_rgb", "agent_0_third_rgb",
                                            "agent_1_third_rgb"}
    assert set(DEPTH_SENSORS.values()) == {"agent_0_articulated_agent_arm_depth_render",
                                           "agent_1_head_depth_render", "agent_0_third_depth",
                                           "agent_1_third_depth"}


def test_visibility_sidecar_is_read_cached_and_bad_ones_warn(
        json_only: Path, copy_of: Callable[[Path], Path], tmp_path: Path) -> None:
    """visibility.json (the generator's per-view human visibility) feeds App. G.1's "frames
    where the human is visible": visible = seen by any camera."""
    from robosafe.grounding.dataset import visibility_note

    root = copy_of(json_only)
    good = index_dataset(root)
    assert all(e.human_visible is None for e in good)
    assert visibility_note(root, good.episodes).startswith(f"{root}: {len(good)} of {len(good)}")
    a, b = good.episodes[0], good.episodes[1]
    n = a.n_frames
    arm, head = [0] * n, [0] * n
    arm[0], head[2] = 1, 1
    (root / a.episode_dir / "visibility.json").write_text(json.dumps(
        {"human_visible": {"arm": arm, "head": head, "third_human": [0] * n},
         "robot_visible": {"arm": [1] * n}}))
    (root / b.episode_dir / "visibility.json").write_text(json.dumps(
        {"human_visible": {"arm": [0, 2]}}))
    for cache in (tmp_path / "v.jsonl", tmp_path / "v.parquet", None):
        warned: list[str] = []
        index = index_dataset(root, on_warning=warned.append, cache=cache)
        got = index.get(a.episode_dir).human_visible
        assert got.tolist() == [i in (0, 2) for i in range(n)]
        assert index.get(b.episode_dir).human_visible is None
        assert warned == [(f"{root / b.episode_dir}/visibility.json: human_visible.arm: "
                           f"expected {b.n_frames} flags 0/1; distance diagnostics use every "
                           "frame of this episode")]
        note = visibility_note(root, index.episodes)
        assert note.startswith(f"{root}: {len(good) - 1} of {len(good)} episodes have no")
