"""LeRobot v3.0 datasets: export of runs, collect, import for scoring (robosafe.formats).

The exported dataset is checked by a minimal reader written here from the LeRobot v3.0 layout
(meta/info.json, meta/tasks.parquet, meta/episodes/, data/, videos/) with pyarrow, json and
PyAV directly, never robosafe's reader; run traces are read as plain JSON lines.
"""

import json
import os
import subprocess
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import run_robosafe as cli
from factories import make_episode, two_episodes, write_libero_style, write_robosafe

os.environ.setdefault("MUJOCO_GL", "egl")

from robosafe.errors import RobosafeError
from robosafe.formats.lerobot import Dataset, DatasetWriter
from robosafe.formats.traces import TRACE_COLUMN, Layout, read_traces
from robosafe.runner.export import export_run
from robosafe.runner.request import RunRequest, plan_run
from robosafe.runner.run import execute, prepare
from robosafe.tasks.suites import suite_tasks

av = pytest.importorskip("av")
TASKS = ("place_apple_on_plate_past_vase", "turn_off_stove")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """Careless scripted demos of two demo tasks with cameras: one succeeds unsafely (the vase
    moves), one succeeds safely (measured when the suite was built; asserted below)."""
    tasks = {k: str(v) for k, v in suite_tasks("demo").items() if k in TASKS}
    cfg = plan_run(RunRequest(policy="scripted-careless", tasks=tasks, episodes=1, suite="demo",
                    images=True, record_frames=True))
    path = tmp_path_factory.mktemp("lerobot") / "run"
    rd, cells = prepare(cfg, path)
    execute(rd, cells)
    return path


@pytest.fixture(scope="module")
def dataset(run_dir):
    out = run_dir.parent / "ds"
    export_run(run_dir, out)
    return out


def outcome_rows(run_dir: Path) -> dict[str, dict]:
    rows = [json.loads(p.read_text()) for p in sorted((run_dir / "outcomes").glob("*.json"))]
    return {r["task_id"]: r for r in rows}


def jsonl_trace(run_dir: Path, task_id: str) -> dict:
    (path,) = (run_dir / "traces").glob(f"{task_id}__*.jsonl")
    return json.loads(path.read_text().splitlines()[0])


# ---------------------------------------------------------------- an independent minimal reader

def read_info(root: Path) -> dict:
    return json.loads((root / "meta/info.json").read_text())


def read_column(table: pa.Table, name: str, ft: dict) -> np.ndarray:
    """LeRobot: shape [1] is a scalar column, [n] a fixed-size list of n."""
    col = table.column(name).combine_chunks()
    if ft["shape"] == [1]:
        assert not pa.types.is_list(col.type) and not pa.types.is_fixed_size_list(col.type)
        return col.to_numpy(zero_copy_only=False)
    assert pa.types.is_fixed_size_list(col.type) and col.type.list_size == ft["shape"][0]
    return col.flatten().to_numpy(zero_copy_only=False).reshape(len(col), ft["shape"][0])


def decode(path: Path) -> list[tuple[float, np.ndarray]]:
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        return [(float(f.pts * s.time_base), f.to_ndarray(format="rgb24"))
                for f in c.decode(s)]


@pytest.mark.slow
@pytest.mark.sim
def test_independent_reader_checks_the_exported_dataset(run_dir, dataset):
    info = read_info(dataset)
    assert info["codebase_version"] == "v3.0"
    assert info["fps"] == 20  # the sim's 20 Hz control rate
    assert info["total_episodes"] == 2 and info["total_tasks"] == 2
    feats = info["features"]
    for name, dtype in (("timestamp", "float32"), ("frame_index", "int64"),
                        ("episode_index", "int64"), ("index", "int64"), ("task_index", "int64")):
        assert feats[name]["dtype"] == dtype and feats[name]["shape"] == [1]
    assert feats["observation.state"]["shape"] == [8] and feats["action"]["shape"] == [7]
    cams = [k for k, v in feats.items() if v["dtype"] == "video"]
    assert cams == ["observation.images.agentview", "observation.images.robot0_eye_in_hand"]
    assert feats[cams[0]]["shape"] == [128, 128, 3]
    assert feats[cams[0]]["info"]["video.codec"] == "h264"

    episodes = pq.read_table(dataset / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    tasks_t = pq.read_table(dataset / "meta/tasks.parquet")
    pandas_meta = json.loads(tasks_t.schema.metadata[b"pandas"])
    assert pandas_meta["index_columns"] == ["task"]  # pandas reads the task strings as index
    tasks = dict(zip(tasks_t.column("task_index").to_pylist(), tasks_t.column("task").to_pylist()))
    rows = outcome_rows(run_dir)
    data_rel = info["data_path"].format(chunk_index=0, file_index=0)
    table = pq.read_table(dataset / data_rel)
    assert table.num_rows == info["total_frames"]
    assert read_column(table, "index", feats["index"]).tolist() == list(range(table.num_rows))
    ep_col = read_column(table, "episode_index", feats["episode_index"])
    stats = json.loads((dataset / "meta/stats.json").read_text())
    actions = read_column(table, "action", feats["action"])
    # lerobot's rules: float32 features averaged in float32 per episode, episodes pooled
    np.testing.assert_allclose(stats["action"]["mean"], actions.astype(float).mean(0),
                               rtol=1e-6, atol=1e-7)
    assert stats["action"]["count"] == [table.num_rows]
    for q in ("q01", "q10", "q50", "q90", "q99"):
        assert len(stats["action"][q]) == 7
    assert not any(k.startswith("robosafe/") for k in episodes[0])  # lerobot's columns only
    records = {r["episode_index"]: r for r in
               pq.read_table(dataset / "meta/robosafe_episodes.parquet").to_pylist()}

    for ep in episodes:
        e = ep["episode_index"]
        sel = np.flatnonzero(ep_col == e)
        assert sel.tolist() == list(range(ep["dataset_from_index"], ep["dataset_to_index"]))
        assert len(sel) == ep["length"]
        part = table.take(pa.array(sel))
        fi = read_column(part, "frame_index", feats["frame_index"])
        assert fi.tolist() == list(range(ep["length"]))
        ts = read_column(part, "timestamp", feats["timestamp"])
        np.testing.assert_allclose(ts, fi / 20.0, atol=1e-6)
        task = tasks[int(read_column(part, "task_index", feats["task_index"])[0])]
        assert ep["tasks"] == [task]
        assert all(np.isfinite(ep[f"stats/action/{q}"]).all() for q in ("q01", "q99"))
        ep = ep | records[e]
        header = json.loads(ep[TRACE_COLUMN])
        row = rows[header["task_id"]]
        assert task == row["instruction"]
        # per-episode verdicts are the run's outcome row
        assert ep["robosafe/success"] == bool(row["success"])
        assert ep["robosafe/safe"] == bool(row["safe"])
        assert ep["robosafe/violated_specs"] == [s for s in row["violated_specs"].split(";") if s]
        # every trace row is a frame; safety.eef_pos_m is the trace's eef, bit for bit
        rec = jsonl_trace(run_dir, header["task_id"])
        # one more trace row than env steps: the reset state
        assert len(rec["steps"]) == ep["length"] == row["num_env_steps"] + 1
        eef = read_column(part, "safety.eef_pos_m", feats["safety.eef_pos_m"])
        assert np.array_equal(eef, np.array([s["eef_pos_m"] for s in rec["steps"]]))
        state = read_column(part, "observation.state", feats["observation.state"])
        # observation.state is what the policy observed (robosuite's observables); after reset
        # it is the recorder's eef, later within a millimetre of it (robosuite samples its
        # observables inside the control step, the recorder after it)
        np.testing.assert_allclose(state[0, :3], eef[0], atol=1e-6)
        assert np.abs(state[:, :3] - eef).max() < 1e-3
        # the policy's actions, the final frame repeating the last one
        run_actions = np.load(next((run_dir / "actions").glob(f"{header['task_id']}__*.npy")))
        act = read_column(part, "action", feats["action"])
        np.testing.assert_array_equal(act[:-1], run_actions.astype(np.float32))
        np.testing.assert_array_equal(act[-1], act[-2])
        done = read_column(part, "next.done", feats["next.done"])
        assert done.tolist() == [False] * (ep["length"] - 1) + [True]
        # the episode's video segment: `length` frames from from_timestamp, the same images
        # (up to lossy coding) as the run's per-episode recording
        for cam in cams:
            rel = info["video_path"].format(video_key=cam,
                                            chunk_index=ep[f"videos/{cam}/chunk_index"],
                                            file_index=ep[f"videos/{cam}/file_index"])
            lo, hi = ep[f"videos/{cam}/from_timestamp"], ep[f"videos/{cam}/to_timestamp"]
            assert hi - lo == pytest.approx(ep["length"] / 20.0)
            seg = [img for t, img in decode(dataset / rel) if lo - 1e-6 <= t < hi - 1e-6]
            assert len(seg) == ep["length"]
            src = decode(run_dir / "frames" / row_cell(row) / f"{cam.split('.')[-1]}.mp4")
            assert len(src) == ep["length"]
            for k in (0, ep["length"] // 2, ep["length"] - 1):
                diff = np.abs(seg[k].astype(int) - src[k][1].astype(int)).mean()
                shifted = np.abs(seg[k].astype(int) - src[max(k - 15, 0)][1].astype(int)).mean()
                assert diff < 3.0, (cam, k, diff)
                assert k < 15 or shifted > diff


def row_cell(row: dict) -> str:
    return f"{row['task_id']}__ep{row['episode_idx']:03d}__W0V0"


@pytest.mark.sim
def test_demos_cover_a_safe_and_an_unsafe_success(run_dir):
    rows = outcome_rows(run_dir)
    assert rows["place_apple_on_plate_past_vase"]["success"] == 1
    assert rows["place_apple_on_plate_past_vase"]["safe"] == 0
    assert rows["turn_off_stove"]["success"] == 1 and rows["turn_off_stove"]["safe"] == 1


@pytest.mark.slow
@pytest.mark.sim
def test_round_trip_run_export_import_score_gives_the_same_metrics(run_dir, dataset):
    a = json.loads(cli("score", str(run_dir), "--json", "--bootstrap", "0").stdout)
    b_proc = cli("score", str(dataset), "--json", "--bootstrap", "0")
    assert b_proc.returncode == 0, b_proc.stderr
    assert "unscored" not in b_proc.stderr  # the dataset carries every family the run had
    b = json.loads(b_proc.stdout)
    for k in ("n", "sr", "safety", "sbu", "vsi", "p_unsafe_given_success"):
        assert a["aggregate"][k] == b["aggregate"][k], k
    assert a["aggregate"]["sbu"] == 0.5 and a["aggregate"]["safety"] == 0.5
    ea = {e["episode_id"]: e for e in a["episodes"]}
    eb = {e["episode_id"]: e for e in b["episodes"]}
    assert ea.keys() == eb.keys()
    for k in ea:  # every spec's robustness, diagnostics included
        assert ea[k]["robustness"] == eb[k]["robustness"]
        assert ea[k]["diagnostics"] == eb[k]["diagnostics"]
        assert ea[k]["active_specs"] == eb[k]["active_specs"]


@pytest.mark.sim
def test_only_safe_keeps_the_safe_demonstrations(run_dir, tmp_path):
    proc = cli("export", "lerobot", str(run_dir), "-o", str(tmp_path / "safe"), "--only-safe",
               "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["episodes"] == 1
    assert list(out["skipped"].values()) == ["unsafe (--only-safe)"]
    eps = pq.read_table(tmp_path / "safe/meta/robosafe_episodes.parquet").to_pylist()
    assert [json.loads(e[TRACE_COLUMN])["task_id"] for e in eps] == ["turn_off_stove"]
    assert [e["robosafe/safe"] for e in eps] == [True]
    assert read_info(tmp_path / "safe")["total_episodes"] == 1


@pytest.mark.sim
def test_export_refuses_an_existing_dataset_in_one_line(run_dir, dataset):
    proc = cli("export", "lerobot", str(run_dir), "-o", str(dataset))
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "already exists" in proc.stderr


# ---------------------------------------------------------------- traces <-> frames, no sim

def test_safety_features_round_trip_exactly_and_mark_absence(tmp_path):
    a, b = two_episodes()
    lay = write_robosafe(tmp_path / "d", [a, b])
    assert lay.bodies == ["bowl", "plate"]
    # one column per pair of the scene's five contact bodies, whatever touched
    names = ["bowl|hand", "bowl|link7", "bowl|plate", "bowl|table", "hand|link7", "hand|plate",
             "hand|table", "link7|plate", "link7|table", "plate|table"]
    assert [f"{a}|{b}" for a, b in lay.pairs] == names
    feats = read_info(tmp_path / "d")["features"]
    assert feats["safety.contact_force_n"]["names"] == names
    assert feats["safety.in_contact"]["names"] == names
    assert feats["safety.in_contact"]["dtype"] == "bool"
    table = pq.read_table(tmp_path / "d/data/chunk-000/file-000.parquet")
    forces = read_column(table, "safety.contact_force_n", feats["safety.contact_force_n"])
    touch = read_column(table, "safety.in_contact", feats["safety.in_contact"])
    # episode a: step 1 link7-table 50 N; step 2 a zero-force touch stays a contact (mask)
    assert forces[1].tolist() == [0.0] * 8 + [50.0, 0.0]
    assert np.flatnonzero(touch[1]).tolist() == [8]
    assert forces[2].tolist() == [0.0] * 3 + [3.0] + [0.0] * 6
    assert np.flatnonzero(touch[2]).tolist() == [3, 8]
    assert not touch[4:].any() and not forces[4:].any()  # episode b touched nothing
    pos = read_column(table, "safety.body_pos_m", feats["safety.body_pos_m"])
    assert (pos[4:, 3:] == 0).all()  # episode b has no plate: 0, its record says so
    for name in feats:
        if feats[name]["dtype"].startswith("float"):
            assert np.isfinite(read_column(table, name, feats[name])).all(), name
    imp = read_traces(Dataset(tmp_path / "d"))
    assert not imp.errors
    got = {e.episode_id: e for e in imp.episodes}
    assert got["a"].contacts_at(2) == [("bowl", "table", 3.0), ("link7", "table", 0.0)]
    assert got["a"].contacts_at(1) == [("link7", "table", 50.0)]
    np.testing.assert_array_equal(got["a"].body_pos_m, a.body_pos_m)
    np.testing.assert_array_equal(got["a"].joint_torque_nm, a.joint_torque_nm)
    assert got["b"].body_names == ("bowl",) and got["b"].joint_torque_nm is None
    assert got["b"].gripper_contact is None and got["b"].body_quat_wxyz is None


def test_repeated_contacts_of_one_pair_are_merged_and_said(tmp_path):
    n = 2
    ep = make_episode(n, contacts=[[("link7", "table", 5.0), ("link7", "table", 9.0)], []],
                      eef=np.zeros((n, 3)))
    frames, notes = Layout.of([ep]).frames(ep)
    assert frames["safety.contact_force_n"][0].tolist() == [0.0] * 8 + [9.0, 0.0]
    assert notes == [("episode ep: 1 repeated contacts of one body pair in one step kept as "
                     "their largest force")]


# ---------------------------------------------------------------- another tool's dataset

def test_libero_style_dataset_scores_eef_only_and_lists_unscored_families(tmp_path):
    write_libero_style(tmp_path / "libero")
    proc = cli("score", str(tmp_path / "libero"), "--json", "--bootstrap", "0")
    # eef positions alone activate no safe-tier spec: unscored, said so, exit 2 (nothing to
    # report as Safety), the metrics JSON still written
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    unscored = [ln for ln in lines if "unscored families" in ln]
    assert len(unscored) == 1  # once per dataset, not per episode
    for fam in ("body_pos_m", "body_quat_wxyz", "contacts", "joint_torque_nm",
                "gripper_contact", "success"):
        assert fam in unscored[0]
    assert "eef_pos_m" not in unscored[0]
    assert sum("dt = 1/fps" in ln for ln in lines) == 1
    assert sum("none of the 2 episodes could be scored for safety" in ln for ln in lines) == 1
    out = json.loads(proc.stdout)
    assert len(out["episodes"]) == 2
    for e in out["episodes"]:
        assert e["benchmark"] == "libero-spatial" and e["task_id"] == "task_0"
        assert e["active_specs"] == []  # nothing safe-tier is backed by an eef position alone
        assert all(v is None for v in e["robustness"].values())
        # a still end effector: speed, acceleration and jerk are 0, robustness = threshold
        assert e["diagnostics"]["eef_speed_under_1mps"] == 1.0
        assert e["diagnostics"]["eef_acc_under_5mps2"] == 5.0
        assert e["diagnostics"]["eef_jerk_under_50mps3"] == 50.0
        assert e["robustness"]["max_contact_force_under_200N"] is None


def test_unknown_foreign_layout_is_one_skipped_line_and_exit_2(tmp_path):
    write_libero_style(tmp_path / "x")
    info = read_info(tmp_path / "x")
    info["features"]["observation.state"]["shape"] = [5]
    (tmp_path / "x/meta/info.json").write_text(json.dumps(info))
    write_libero_style(tmp_path / "ok")
    proc = cli("score", str(tmp_path / "x"), str(tmp_path / "ok"), "--json", "--bootstrap", "0")
    assert proc.returncode == 2  # the good dataset is still scored
    skipped = [ln for ln in proc.stderr.splitlines() if ln.startswith("robosafe: skipped:")]
    assert len(skipped) == 1 and "matches no known layout" in skipped[0]
    assert len(json.loads(proc.stdout)["episodes"]) == 2


def test_older_codebase_version_is_refused_by_name(tmp_path):
    write_libero_style(tmp_path / "old")
    info = read_info(tmp_path / "old")
    info["codebase_version"] = "v2.1"
    (tmp_path / "old/meta/info.json").write_text(json.dumps(info))
    with pytest.raises(RobosafeError, match="codebase_version 'v2.1'"):
        Dataset(tmp_path / "old")


def test_video_timestamps_are_frame_multiples(tmp_path):
    from robosafe.formats.video import VideoWriter

    w = VideoWriter(tmp_path / "v.mp4", 20, 16, 16)
    for k in range(5):
        w.add(np.full((16, 16, 3), 40 * k, np.uint8))
    w.close()
    got = decode(tmp_path / "v.mp4")
    assert [t for t, _ in got] == [float(Fraction(k, 20)) for k in range(5)]
    assert [round(img.mean() / 40) for _, img in got] == [0, 1, 2, 3, 4]


@pytest.mark.slow
@pytest.mark.sim
def test_collect_writes_seeded_demonstrations_with_videos_using_two_workers(tmp_path):
    proc = cli("collect", "--suite", "demo", "--task-id", "turn_off_stove", "-n", "2",
               "--images", "--horizon", "6", "-j", "2", "--out", str(tmp_path / "c"), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["episodes"] == 2 and out["crashed"] == 0 and out["frames"] == 14  # 2 x (6 + 1)
    info = read_info(tmp_path / "c")
    assert [k for k, v in info["features"].items() if v["dtype"] == "video"] == [
        "observation.images.agentview", "observation.images.robot0_eye_in_hand"]
    eps = pq.read_table(tmp_path / "c/meta/robosafe_episodes.parquet").to_pylist()
    heads = [json.loads(e[TRACE_COLUMN]) for e in eps]
    assert [h["seed"] for h in heads] == [0, 1]  # same seeds as `robosafe run -n 2`
    assert [h["policy"] for h in heads] == ["scripted-careful"] * 2
    video = info["video_path"].format(video_key="observation.images.agentview",
                                      chunk_index=0, file_index=0)
    assert len(decode(tmp_path / "c" / video)) == 14
    assert not any(p.name.startswith(".collect-") for p in tmp_path.iterdir())  # run removed


@pytest.mark.sim
def test_collect_task_selection_errors_like_run(tmp_path):
    proc = cli("collect", "--suite", "demo", "--task-id", "nope", "--out", str(tmp_path / "c"))
    assert proc.returncode == 2
    assert proc.stderr.strip() == "robosafe: error: --task-id: nope not in suite demo"


# ---------------------------------------------------------------- import and replay

@pytest.mark.slow
@pytest.mark.sim
def test_import_writes_the_traces_that_score_like_the_run(run_dir, dataset, tmp_path):
    proc = cli("import", "lerobot", str(dataset), "--out", str(tmp_path / "t.jsonl"), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["episodes"] == 2
    a = json.loads(cli("score", str(run_dir), "--json", "--bootstrap", "0").stdout)
    b = json.loads(cli("score", str(tmp_path / "t.jsonl"), "--json", "--bootstrap", "0").stdout)
    assert a["episodes"] == b["episodes"]


@pytest.mark.slow
@pytest.mark.sim
def test_replay_recovers_the_run_and_flags_a_tampered_episode(run_dir, dataset, tmp_path):
    proc = cli("import", "lerobot", str(dataset), "--replay", "--out",
               str(tmp_path / "r.jsonl"), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["diverged"] == [] and out["max_divergence_m"] == 0.0  # deterministic sim
    a = json.loads(cli("score", str(run_dir), "--json", "--bootstrap", "0").stdout)
    b = json.loads(cli("score", str(tmp_path / "r.jsonl"), "--json", "--bootstrap", "0").stdout)
    assert a["episodes"] == b["episodes"]

    # push episode 0's first 10 actions sideways: its replay leaves the recorded states
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(dataset, bad)
    data = bad / "data/chunk-000/file-000.parquet"
    t = pq.read_table(data)
    col = t.column("replay.action").combine_chunks()
    acts = col.flatten().to_numpy().reshape(len(col), -1).copy()
    first = np.flatnonzero(t.column("episode_index").to_numpy() == 0)[:10]
    acts[first, 1] = 1.0
    new = pa.FixedSizeListArray.from_arrays(pa.array(acts.ravel()), acts.shape[1])
    pq.write_table(t.set_column(t.column_names.index("replay.action"), "replay.action", new),
                   data)
    proc = cli("import", "lerobot", str(bad), "--replay", "--out", str(tmp_path / "b.jsonl"),
               "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    eps = pq.read_table(bad / "meta/robosafe_episodes.parquet").to_pylist()
    ep0 = json.loads(eps[0][TRACE_COLUMN])["episode_id"]
    assert out["diverged"] == [ep0]
    assert sum("the replay diverges" in ln for ln in proc.stderr.splitlines()) == 1


def test_replay_of_a_foreign_dataset_needs_its_host(tmp_path):
    write_libero_style(tmp_path / "libero")
    proc = cli("import", "lerobot", str(tmp_path / "libero"), "--replay", "--out",
               str(tmp_path / "x.jsonl"))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "LIBERO host" in proc.stderr


def test_quantile_stats_follow_lerobots_histogram_rule():
    from robosafe.formats.lerobot_stats import BINS, feature_stats

    s = feature_stats(np.array([0.0, 1.0, 2.0, 3.0]))
    assert (s["min"].tolist(), s["max"].tolist(), s["mean"].tolist()) == ([0.0], [3.0], [1.5])
    assert s["std"].tolist() == [np.sqrt(1.25)] and s["count"].tolist() == [4]
    width = (3 + 2e-10) / BINS
    # q01: 0.04 values lie below the first bin's upper edge: the range's lower end
    assert s["q01"].tolist() == [-1e-10]
    # q50: the 2nd value (1.0) fills its bin; 2.0 of 4 counts is that bin's upper edge
    assert 1.0 < s["q50"][0] <= 1.0 + width
    # q99: 3.96 counts, 0.96 of the way through the last value's bin
    assert 3.0 - width < s["q99"][0] < 3.0 + 1e-10
    one = feature_stats(np.array([[2.0, 5.0]]))  # one frame: quantiles are the mean
    assert one["q01"].tolist() == one["q99"].tolist() == [2.0, 5.0]


def test_image_stats_sample_frames_and_are_per_channel_in_unit_range():
    from robosafe.formats.lerobot_stats import image_stats, sample_frames

    frames = np.full((200, 6, 5, 3), 51, np.uint8)  # 51 / 255 = 0.2
    frames[:, :, :, 2] = 255
    got = image_stats(frames)
    assert got["count"].tolist() == [100]  # 200 frames: lerobot looks at 100 of them
    assert got["mean"].shape == (3, 1, 1)
    np.testing.assert_allclose(got["mean"].ravel(), [0.2, 0.2, 1.0], rtol=1e-6)
    np.testing.assert_allclose(got["q50"].ravel(), [0.2, 0.2, 1.0], rtol=1e-6)
    assert sample_frames(5).tolist() == [0, 1, 2, 3, 4]
    assert sample_frames(200)[[0, -1]].tolist() == [0, 199] and len(sample_frames(200)) == 100


def test_a_failed_write_leaves_nothing_and_other_directories_are_not_replaced(tmp_path):
    feats = {"action": {"dtype": "float32", "shape": [2], "names": ["a", "b"]}}
    w = DatasetWriter(tmp_path / "d", fps=10, features=feats)
    w.add_episode({"action": np.zeros((3, 2), np.float32)}, "t")
    with pytest.raises(RobosafeError, match="differ from the dataset"):
        w.add_episode({"other": np.zeros((3, 2))}, "t")
    w.abort()
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes/a.txt").write_text("x")
    with pytest.raises(RobosafeError, match="is not a LeRobot dataset"):
        DatasetWriter(tmp_path / "notes", fps=10, features=feats, overwrite=True)
    assert (tmp_path / "notes/a.txt").read_text() == "x"


LEROBOT_SCRIPT = """
import json, sys
try:
    from ledataset.datasets.lerobot_dataset import LeRobotDataset  # lerobot-dataset
except ImportError:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset  # lerobot
ds = LeRobotDataset("local/robosafe", root=sys.argv[1], video_backend="pyav")
out = {"len": len(ds), "episodes": ds.num_episodes, "fps": ds.fps, "items": []}
for i in (0, len(ds) - 1):
    item = ds[i]
    out["items"].append({
        "task": item["task"], "episode_index": int(item["episode_index"]),
        "frame_index": int(item["frame_index"]),
        "image": list(item["observation.images.agentview"].shape),
        "eef": item["safety.eef_pos_m"].tolist(), "action": item["action"].tolist()})
print(json.dumps(out))
"""


@pytest.mark.sim
@pytest.mark.skipif(not os.environ.get("ROBOSAFE_LEROBOT_PYTHON"),
                    reason="set ROBOSAFE_LEROBOT_PYTHON to a Python with lerobot or "
                           "lerobot-dataset installed (they need Python >= 3.12, numpy >= 2)")
def test_lerobots_own_loader_reads_the_export(dataset):
    proc = subprocess.run([os.environ["ROBOSAFE_LEROBOT_PYTHON"], "-c", LEROBOT_SCRIPT,
                           str(dataset)], capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    ours = Dataset(dataset)
    assert out["len"] == ours.info["total_frames"] and out["episodes"] == 2
    assert out["fps"] == 20
    last = ours.episodes[-1]
    for item, (ep, fi) in zip(out["items"], ((0, 0), (1, last["length"] - 1))):
        frames = ours.frames(ep)
        assert item["episode_index"] == ep and item["frame_index"] == fi
        assert item["task"] == ours.tasks[int(frames["task_index"][fi])]
        assert item["image"] == [3, 128, 128]  # channels first, as lerobot returns images
        # lerobot hands every number out as float32; robosafe's reader keeps the float64
        np.testing.assert_allclose(item["eef"], frames["safety.eef_pos_m"][fi], rtol=1e-7)
        np.testing.assert_allclose(item["action"], frames["action"][fi], rtol=0, atol=0)


@pytest.mark.sim
def test_collect_refuses_a_used_output_directory_before_running(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c/notes.txt").write_text("mine")
    proc = cli("collect", "--suite", "demo", "--out", str(tmp_path / "c"))
    assert proc.returncode == 2
    assert "exists and is not a LeRobot dataset" in proc.stderr
    assert not any(p.name.startswith(".collect-") for p in tmp_path.iterdir())


@pytest.mark.slow
def test_foreign_success_comes_from_next_success(tmp_path):
    write_libero_style(tmp_path / "ev", success=[True, False])
    proc = cli("score", str(tmp_path / "ev"), "--json", "--bootstrap", "0")
    assert proc.returncode == 2, proc.stderr  # SR is measured; Safety is not (unscored)
    (line,) = [ln for ln in proc.stderr.splitlines() if "unscored families" in ln]
    assert "success" not in line.split("satisfied):")[1]
    out = json.loads(proc.stdout)
    assert [e["success"] for e in out["episodes"]] == [True, False]
    # no episode has a safety judgement: SR over scored episodes has none, SR_all is measured
    assert out["aggregate"]["sr_all"] == 0.5 and out["aggregate"]["sr"] is None


# ---------------------------------------------------------------- damaged runs: skip by name

def damaged_copy(run_dir: Path, dest: Path, damage) -> tuple[Path, str]:
    """A copy of the two-episode run with ``damage(frames_dir)`` applied to the stove episode's
    recorded frames; returns the copy and that episode's cell name."""
    import shutil

    shutil.copytree(run_dir, dest)
    (frames,) = (dest / "frames").glob("turn_off_stove__*")
    damage(frames)
    return dest, frames.name


def _truncate(frames: Path) -> None:
    mp4 = frames / "agentview.mp4"
    mp4.write_bytes(mp4.read_bytes()[:300])


def _random_bytes(frames: Path) -> None:
    (frames / "agentview.mp4").write_bytes(np.random.default_rng(0).bytes(3000))


def _object_state(frames: Path) -> None:
    # a pickled object array: np.load must refuse it rather than unpickle a user's file
    np.save(frames / "state.npy", np.array([{"x": 1}] * 5, dtype=object), allow_pickle=True)


def _no_camera(frames: Path) -> None:
    (frames / "agentview.mp4").unlink()


@pytest.mark.parametrize("damage, why", [
    (_truncate, "agentview.mp4: not a readable video"),
    (_random_bytes, "agentview.mp4: not a readable video"),
    (_object_state, "state.npy: not a plain numeric array (Object arrays cannot be loaded"),
    (_no_camera, "camera agentview: "),
])
@pytest.mark.slow
@pytest.mark.sim
def test_a_damaged_episode_is_named_the_others_are_written_and_exit_is_2(run_dir, tmp_path,
                                                                          damage, why):
    run, cell = damaged_copy(run_dir, tmp_path / "run", damage)
    proc = cli("export", "lerobot", str(run), "-o", str(tmp_path / "ds"), "--json")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    # the good episode's two cameras are copied as recorded; then the skip and the error
    assert lines[:2] == [f"robosafe: observation.images.{c}: copied from the run's videos "
                         "(no re-encode)" for c in ("agentview", "robot0_eye_in_hand")]
    lines = lines[2:]
    assert len(lines) == 2, proc.stderr
    assert lines[0].startswith(f"robosafe: not exported: {cell}: ") and why in lines[0]
    assert lines[1] == (f"robosafe: error: 1 of 2 episodes could not be exported (listed "
                        f"above); {tmp_path / 'ds'} holds the other 1")
    out = json.loads(proc.stdout)
    assert (out["episodes"], out["of"], out["failed"]) == (1, 2, [cell])
    info = read_info(tmp_path / "ds")
    assert info["total_episodes"] == 1
    # the good episode keeps both cameras: one episode's missing video drops nothing else
    assert sorted(k for k, v in info["features"].items() if v["dtype"] == "video") == [
        "observation.images.agentview", "observation.images.robot0_eye_in_hand"]
    eps = pq.read_table(tmp_path / "ds/meta/robosafe_episodes.parquet").to_pylist()
    assert [json.loads(e[TRACE_COLUMN])["task_id"] for e in eps] == [
        "place_apple_on_plate_past_vase"]


@pytest.mark.slow
@pytest.mark.sim
def test_export_to_a_path_that_cannot_be_created_is_one_line(run_dir, tmp_path):
    (tmp_path / "file").write_text("x")
    cases = [(tmp_path / "file", "exists and is not a LeRobot dataset"),
             (tmp_path / "file/ds", "cannot create the output: Not a directory")]
    if Path("/proc/self").is_dir():
        cases.append((Path("/proc/robosafe-ds"), "cannot create the output"))
    for out, why in cases:
        proc = cli("export", "lerobot", str(run_dir), "-o", str(out))
        assert proc.returncode == 2
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"robosafe: error: {out}: {why}")
    assert (tmp_path / "file").read_text() == "x"


def test_replay_rebuilds_the_worlds_with_the_runs_host_options(tmp_path, caplog):
    """The dataset says which of its host's own options the run used (meta/robosafe.json
    ``options``), and --replay rebuilds the worlds with them: a run booked by VLA-Arena's
    rules replays with them (its episodes' VLA-Arena record comes back equal); a dataset from
    before the field replays with the host's defaults, as it always did; a malformed one is
    one error naming the field."""
    from robosafe.errors import DatasetError
    from robosafe.runner.replay import replay_dataset
    from robosafe.trace.io import read_episodes

    task = {k: str(v) for k, v in suite_tasks("demo").items() if k == "turn_off_stove"}
    rd, cells = prepare(plan_run(RunRequest(policy="scripted-careful", tasks=task, episodes=1,
                                            suite="demo", horizon=30, record_frames=True,
                                            cost_mode="vla-arena", controller="robosuite")),
                        tmp_path / "run")
    execute(rd, cells)
    ds = tmp_path / "ds"
    export_run(tmp_path / "run", ds)
    side_path = ds / "meta" / "robosafe.json"
    side = json.loads(side_path.read_text())
    assert side["options"] == {"assets": "stand-in", "cost_mode": "vla-arena",
                               "controller": "robosuite", "arena_evaluator": "openvla",
                               "arena_tasks": {"turn_off_stove": [None, None]}}
    (recorded,) = read_episodes(rd.trace_paths())[0]
    (ep,) = replay_dataset(ds).episodes
    # booked again by the replaying world (its own record replaces the recorded copy)
    assert ep.meta["cost_mode"] == "vla-arena"
    assert ep.meta["vla_arena"] == recorded.meta["vla_arena"]
    side_path.write_text(json.dumps({k: v for k, v in side.items() if k != "options"}))
    (old,) = replay_dataset(ds).episodes
    assert old.meta["cost_mode"] == "robosafe"
    side_path.write_text(json.dumps({**side, "options": {**side["options"], "assets": 5}}))
    with pytest.raises(DatasetError, match=r"robosafe.json: options: assets: expected a name"):
        replay_dataset(ds)
    bad = {**side["options"], "arena_tasks": {"turn_off_stove": [["x"], 1]}}
    side_path.write_text(json.dumps({**side, "options": bad}))
    with pytest.raises(DatasetError, match=r"options: arena_tasks: expected task id -> "):
        replay_dataset(ds)
    side_path.write_text(json.dumps({**side, "options": {**side["options"], "gripper": "x"}}))
    with caplog.at_level("WARNING", logger="robosafe"):
        (newer,) = replay_dataset(ds).episodes
    assert newer.meta["cost_mode"] == "vla-arena"
    assert [r.getMessage().split(": ", 1)[1] for r in caplog.records if "not read" in
            r.getMessage()] == [("options: gripper not read (not an option of the robosafe host "
                                 "here); the replay runs without it")]
