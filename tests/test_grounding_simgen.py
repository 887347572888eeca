"""`robosafe grounding generate`: MuJoCo episodes whose labels agree with the simulator state,
read by the unchanged index, sampler and geometric baseline (paper 003, App. E / F)."""

import json

import numpy as np
import pytest
from conftest import run_robosafe as run
from typer.testing import CliRunner

pytest.importorskip("mujoco")
pytest.importorskip("av")

from robosafe.errors import RobosafeError
from robosafe.grounding.dataset import VIEWS, index_dataset, planar_distance
from robosafe.grounding.sampler import sample_clips
from robosafe.grounding.simgen import DT, GenerateConfig, episode_plan, simulate

pytestmark = [pytest.mark.sim, pytest.mark.slow]  # steps MuJoCo, tens of seconds or more

CONFIG = GenerateConfig(episodes=8, seed=1, max_steps=300, image_size=16)


def run_here(*args: str):
    """The CLI in this process, for refusals of options or directories: what those tests check
    is the one error line, the exit status and what is (not) written, none of which needs a
    fresh interpreter. `generate` still runs as a real subprocess in the `generated` fixture
    and in test_generate_checks_size_before_creating_anything."""
    from robosafe.cli import app

    return CliRunner().invoke(app, list(args))


def _min_distance(ep, geoms_a, geoms_b) -> float:
    """Smallest signed geom-geom distance from MuJoCo's narrow phase (mj_geomDistance), an
    independent route from the contact list the labels are built from."""
    import mujoco

    fromto = np.zeros(6)
    return min(mujoco.mj_geomDistance(ep.model, ep.data, int(a), int(b), 1.0, fromto)
               for a in geoms_a for b in geoms_b)


@pytest.fixture(scope="module", params=["spot", "primitive"])
def simulated(request):
    """The same seeded plans with the real Spot model and with the primitive robot."""
    from dataclasses import replace

    from robosafe.sim.render import ensure_gl_backend

    ensure_gl_backend()
    config = replace(CONFIG, robot=request.param)
    return [simulate(np.random.default_rng([config.seed, i]), human_type=ht, sim_task=task,
                     scene_id=sid, episode_id=eid, config=config)
            for i, (ht, task, sid, eid) in enumerate(episode_plan(config))]


def test_labels_agree_with_the_simulator_state(simulated):
    kinds = {"human": 0, "scene": 0, "far": 0}
    for record, ep in simulated:
        static = [g for g, r in ep.root_role.items() if r == "static"]
        hum = np.flatnonzero(record.human_collision)
        # human collisions are terminal: at most one, on the last frame
        assert hum.size == 0 or hum.tolist() == [record.n_steps - 1]
        for t in hum:
            ep.restore(int(t))
            assert _min_distance(ep, ep.robot_geoms, ep.human_geoms) <= 1e-9
            kinds["human"] += 1
        for t in np.flatnonzero(record.robot_scene_colls)[:5]:
            ep.restore(int(t))
            assert _min_distance(ep, ep.robot_geoms, static) <= 1e-9
            kinds["scene"] += 1
        d = planar_distance(record.robot_pos, record.human_pos)
        for t in np.flatnonzero(d > 1.5)[::25]:  # far apart: bodies separated, no label
            assert not record.human_collision[t]
            ep.restore(int(t))
            assert _min_distance(ep, ep.robot_geoms, ep.human_geoms) > 0.3
            kinds["far"] += 1
        # App. F.1: "Scene collisions occur exclusively in social_navigation episodes"
        if record.sim_task == "social_rearrangement":
            assert not record.robot_scene_colls.any()
        # the robot never moves faster than its configured limit (1.6 m/s; it used to reach
        # 10.3 m/s on an approach); written positions are rounded to 0.1 mm
        speed = np.linalg.norm(np.diff(record.robot_pos[:, [0, 2]], axis=0), axis=1) / DT
        assert speed.max() <= CONFIG.robot_max_speed_m_s + 2e-4 / DT
        # the written root positions are the simulator's (Habitat y-up: x, z, -y)
        ep.restore(record.n_steps - 1)
        x, y, _ = ep.data.body("human").xpos
        assert record.human_pos[-1][[0, 2]] == pytest.approx([x, -y], abs=1e-4)
    assert kinds["human"] >= 3 and kinds["scene"] >= 1 and kinds["far"] >= 5


def test_rearrangement_with_a_held_object_simulates():
    """Seed 7's second episode holds a box object against the gripper; with a box-shaped
    hand MuJoCo's narrow phase aborted (9 contacts for one pair)."""
    config = GenerateConfig(episodes=2, seed=7, max_steps=450, image_size=16)
    ht, task, sid, eid = episode_plan(config)[1]
    record, ep = simulate(np.random.default_rng([7, 1]), human_type=ht, sim_task=task,
                          scene_id=sid, episode_id=eid, config=config)
    assert task == "social_rearrangement" and record.n_steps > 100
    assert any(c is not None for c in ep.plan.carried[:record.n_steps])


# The smallest `generate` found whose clips have all three labels in both tasks (a scene
# collision needs a social_navigation episode with room for a bump before its human collision:
# none at 200 steps over seeds 0-15): 352 steps, a third of the 4 x 300 once used. Rendering is
# nearly all of its time.
GENERATED = ("--episodes", "2", "--seed", "9", "--size", "16", "--max-steps", "250")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("gen") / "data"
    proc = run("grounding", "generate", "-o", str(root), *GENERATED, "--json")
    assert proc.returncode == 0, proc.stderr
    return root, json.loads(proc.stdout)


def test_generated_dataset_is_indexed_sampled_and_scored(generated):
    root, summary = generated
    idx = index_dataset(root, deep=True, on_error=lambda e: pytest.fail(str(e)))
    assert len(idx) == 2 and idx.total_steps == summary["steps"]
    assert sum(e.did_collide_human for e in idx.episodes) == summary["human_collision_episodes"]
    ep_dir = root / idx.episodes[0].episode_dir
    vis = json.loads((ep_dir / "visibility.json").read_text())
    assert set(vis["human_visible"]) == set(VIEWS)
    assert len(vis["human_visible"]["arm"]) == idx.episodes[0].n_frames
    # the human is always in the frame of the camera that follows it
    assert all(vis["human_visible"]["third_human"])
    import av

    with av.open(str(ep_dir / "topdown.mp4")) as video:
        assert sum(1 for _ in video.decode(video=0)) == idx.episodes[0].n_frames
    for task in (1, 2):
        clips = root.parent / f"t{task}.jsonl"
        assert run("grounding", "clips", str(root), "--task", str(task), "--out",
                   str(clips)).returncode == 0
        labels = {json.loads(line)["label"] for line in clips.read_text().splitlines()}
        assert labels == {"A", "B", "C"}, (task, labels)
        sample = sample_clips(idx.episodes, task, seed=0)
        assert len(sample) == len(clips.read_text().splitlines())
        answers = root.parent / f"a{task}.jsonl"
        assert run("grounding", "baseline", str(clips), "--dataset", str(root), "--out",
                   str(answers)).returncode == 0
        scored = json.loads(run("grounding", "score", str(answers), "--json").stdout)
        acc = scored["overall"][f"task{task}"]["accuracy"]
        assert 0.0 <= acc <= 1.0


def test_generate_rejects_bad_options_in_one_line(tmp_path):
    for args, match in ((("--task", "cooking"), "--task 'cooking'"), (("--size", "33"), "even")):
        res = run_here("grounding", "generate", "-o", str(tmp_path / "x"), *args)
        assert res.exit_code == 2 and match in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "x").exists()


def test_ask_end_to_end_against_a_real_openai_compatible_server(generated, tmp_path):
    """`grounding ask` on generated clips against LiteLLM's proxy (mock replies) on loopback;
    the scores are checked against values worked out from the clip records."""
    from litellm_proxy import mock_proxy

    root, _ = generated
    reply = {"answer": "C", "risk_level": "C", "robot_human_distance_m": 1.2,
             "distance_trend": "closing", "human_contact": [False, False, True],
             "scene_contact": [False, False, False], "reasoning": "mock"}
    with mock_proxy(tmp_path, "mock-vlm", reply) as url:
        for task in (1, 2):
            clips = tmp_path / f"t{task}.jsonl"
            assert run("grounding", "clips", str(root), "--task", str(task), "--out", str(clips),
                       "--param", "clips_per_class=3").returncode == 0
            recs = [json.loads(line) for line in clips.read_text().splitlines()]
            answers = tmp_path / f"a{task}.jsonl"
            proc = run("grounding", "ask", str(clips), "--dataset", str(root), "--model",
                       "mock-vlm", "--endpoint", url, "--out", str(answers), "--views", "all",
                       "--concurrency", "2")
            assert proc.returncode == 0, proc.stderr
            got = json.loads(run("grounding", "score", str(answers), "--json").stdout)
            m = got["overall"][f"task{task}"]
            assert m["n"] == len(recs) and m["n_invalid"] == 0
            assert m["accuracy"] == pytest.approx(
                sum(r["label"] == "C" for r in recs) / len(recs))
            last = [r["truth_distance"][-1] for r in recs]
            seen = [d for d in last if d is not None]   # App. G.1: visible frames only
            assert m["distance"]["n_pairs"] == len(seen)
            assert m["distance"]["mae"] == pytest.approx(
                sum(abs(1.2 - d) for d in seen) / len(seen))


def test_scene_bumps_only_in_social_navigation_unless_asked():
    """App. F.1: "Scene collisions occur exclusively in social_navigation episodes". With
    6 scene bumps per episode on average, rearrangement plans get none by default and some
    when ``scene_bump_tasks`` names the task."""
    from dataclasses import replace

    from robosafe.grounding.simgen import build_room, plan_episode

    def kinds(config):
        out = {}
        for i, (_, task, _, _) in enumerate(episode_plan(config)):
            rng = np.random.default_rng([config.seed, i])
            room = build_room(rng)
            plan = plan_episode(rng, room, task, config.max_steps, config)
            out.setdefault(task, []).extend(k for k, _ in plan.events)
        return out

    config = replace(CONFIG, scene_bumps=6.0, max_steps=900)
    default = kinds(config)
    assert "scene" in default["social_navigation"]
    assert "scene" not in default["social_rearrangement"]
    asked = kinds(replace(config, scene_bump_tasks=("social_navigation",
                                                    "social_rearrangement")))
    assert "scene" in asked["social_rearrangement"]


def test_limit_speed_by_hand():
    """0.25 m per step at most: a 1 m jump is reached in four steps, a 0.1 m step is kept."""
    from robosafe.grounding.simgen import limit_speed

    path = np.array([[0.0, 0.0]] + [[1.0, 0.0]] * 5 + [[1.0, 0.1]])
    out = limit_speed(path, 0.25)
    assert out[:, 0].tolist() == pytest.approx([0, 0.25, 0.5, 0.75, 1.0, 1.0, 1.0])
    assert out[-1].tolist() == pytest.approx([1.0, 0.1])


def test_generate_checks_size_before_creating_anything(tmp_path):
    proc = run("grounding", "generate", "-o", str(tmp_path / "x"), "--size", "4000")
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        ("robosafe: error: --size 4000: must be even and in 8..2048 (the top-down MPEG-4 "
        "video; the offscreen render buffer)")]
    assert not (tmp_path / "x").exists()


def _primitive_episode(max_steps: int, image_size: int):
    """The first planned episode with the primitive robot, simulated (record, episode)."""
    config = GenerateConfig(episodes=1, max_steps=max_steps, image_size=image_size,
                            robot="primitive")
    ht, task, sid, eid = episode_plan(config)[0]
    return simulate(np.random.default_rng([0, 0]), human_type=ht, sim_task=task,
                    scene_id=sid, episode_id=eid, config=config)


def test_an_image_larger_than_mujocos_default_buffer_renders():
    """642 px exceeds the 640 px offscreen buffer the MJCF declares; the buffer follows the
    image size."""
    from robosafe.grounding.simgen import Renders
    from robosafe.sim.render import ensure_gl_backend

    ensure_gl_backend()
    _, ep = _primitive_episode(max_steps=10, image_size=642)
    frames = Renders(ep, 642)
    try:
        rgb, depth = frames("third_human", 0)
    finally:
        frames.close()
    assert rgb.shape == (642, 642, 3) and depth.shape == (642, 642)


def test_visibility_from_the_depth_pass_is_the_segmentation_passes():
    """Renders reads the geoms a frame shows from the colour buffer of its depth pass (one
    render less per view and step); mujoco's own segmentation pass of the same frame shows the
    same geoms, and the written visibility is what that pass says. Over these frames the human
    and the robot are each seen in some and unseen in others."""
    import mujoco

    from robosafe.grounding.simgen import Renders
    from robosafe.sim.render import ensure_gl_backend

    ensure_gl_backend()
    record, ep = _primitive_episode(max_steps=40, image_size=32)
    frames = Renders(ep, 32)
    r = frames.renderer
    seen = []
    try:
        for view in VIEWS:
            for t in range(0, record.n_steps, 4):
                frames(view, t)
                got = sorted(frames._drawn_geoms().tolist())
                r.enable_segmentation_rendering()
                seg = r.render()
                r.disable_segmentation_rendering()
                want = np.unique(seg[..., 0][seg[..., 1] == int(mujoco.mjtObj.mjOBJ_GEOM)])
                assert got == want.tolist(), (view, t)
                human, robot = np.isin(want, ep.human_geoms).any(), \
                    np.isin(want, ep.robot_geoms).any()
                assert (frames.human_visible[view][t], frames.robot_visible[view][t]) == \
                    (human, robot), (view, t)
                seen.append((human, robot))
    finally:
        frames.close()
    assert {h for h, _ in seen} == {True, False}
    assert {b for _, b in seen} == {True, False}


def test_generate_never_writes_into_a_used_directory(generated, tmp_path):
    root, summary = generated
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    res = run_here("grounding", "generate", "-o", str(root), "--episodes", "1", "--size", "16",
                   "--max-steps", "10", "--robot", "primitive")
    assert res.exit_code == 2 and res.stderr.strip().splitlines() == [
        (f"robosafe: error: {root}: holds a dataset; choose a new directory (generate writes "
        "only into an empty one, or continues its own interrupted run with the same "
        "settings)")]
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before
    assert len(index_dataset(root)) == summary["episodes"] == 2
    other = tmp_path / "notes"
    other.mkdir()
    (other / "a.txt").write_text("mine")
    res = run_here("grounding", "generate", "-o", str(other), "--episodes", "1", "--size", "16")
    assert res.exit_code == 2 and f"{other}: is not empty; choose a new directory" in res.stderr
    assert [p.name for p in other.iterdir()] == ["a.txt"]


def test_an_interrupted_generate_continues_with_the_episodes_it_finished(tmp_path,
                                                                        monkeypatch):
    from robosafe.grounding import simgen

    config = GenerateConfig(episodes=2, seed=3, max_steps=10, image_size=16,
                            robot="primitive")
    root = tmp_path / "d"

    def stop_after_first(i, n):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        simgen.generate(root, config, progress=stop_after_first)
    assert not (root / "dataset_info.json").exists()  # written last: not a dataset yet
    simulated = []
    real = simgen.simulate
    monkeypatch.setattr(simgen, "simulate",
                        lambda rng, **kw: simulated.append(kw["episode_id"]) or real(rng, **kw))
    with pytest.raises(RobosafeError, match="interrupted generate with other settings"):
        simgen.generate(root, GenerateConfig(episodes=3, seed=3, max_steps=10, image_size=16,
                                             robot="primitive"))
    summary = simgen.generate(root, config)
    assert simulated == [1] and summary.resumed == 1 and summary.episodes == 2
    info = json.loads((root / "dataset_info.json").read_text())
    assert info["num_episodes"] == len(index_dataset(root)) == 2
    assert not (root / simgen.PROGRESS_FILE).exists()
