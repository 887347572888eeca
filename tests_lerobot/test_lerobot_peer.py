"""lerobot 0.6.1 and lerobot-doctor 0.2.0 on datasets robosafe writes."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from conftest import CAMERA, write
from lerobot.datasets.aggregate import aggregate_datasets
from lerobot.datasets.compute_stats import compute_episode_stats
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from robosafe.formats.lerobot import Dataset
from robosafe.formats.traces import read_traces

QS = ("q01", "q10", "q50", "q90", "q99")


def load(root):
    return LeRobotDataset("robosafe/test", root=root, video_backend="pyav")


def test_lerobot_loads_it_and_batches_with_delta_timestamps(careful):
    ds = load(careful)
    assert (ds.num_episodes, ds.num_frames, ds.fps) == (3, 90, 10)
    item = ds[31]  # episode 1, frame 1
    assert int(item["episode_index"]) == 1 and int(item["frame_index"]) == 1
    assert item[CAMERA].shape == (3, 32, 48)
    assert item["safety.in_contact"].dtype == torch.bool
    ds = LeRobotDataset("robosafe/test", root=careful, video_backend="pyav",
                        delta_timestamps={"action": [0.0, 0.1, 0.2]})
    batch = next(iter(torch.utils.data.DataLoader(ds, batch_size=4)))
    assert batch["action"].shape == (4, 3, 3)
    assert not torch.isnan(batch["safety.contact_force_n"]).any()


def test_quantile_stats_are_lerobots_own(careful):
    """QUANTILES normalization (pi0.5) needs q01 / q99; robosafe's per-episode numbers equal
    what lerobot's compute_episode_stats gives for the same frames."""
    ds = load(careful)
    for key in ("action", "observation.state", "safety.contact_force_n", CAMERA):
        assert all(q in ds.meta.stats[key] for q in QS), key
    info = json.loads((careful / "meta/info.json").read_text())
    table = pq.read_table(careful / "data/chunk-000/file-000.parquet")
    first = table.filter(pq.ParquetFile(careful / "data/chunk-000/file-000.parquet")
                         .read().column("episode_index").to_numpy() == 0)
    episodes = pq.read_table(careful / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    for key in ("action", "safety.contact_force_n", "safety.in_contact", "next.done"):
        ft = info["features"][key]
        col = first.column(key).combine_chunks()
        if ft["shape"] == [1]:
            values = col.to_numpy(zero_copy_only=False)
        else:
            values = col.flatten().to_numpy(zero_copy_only=False).reshape(len(col), -1)
        values = values.astype(ft["dtype"])
        ref = compute_episode_stats({key: values}, {key: ft})[key]
        for stat, v in ref.items():
            assert np.asarray(episodes[0][f"stats/{key}/{stat}"]).tolist() == v.tolist(), \
                (key, stat)


def test_aggregate_of_a_careful_and_a_careless_dataset(careful, careless, tmp_path):
    out = tmp_path / "merged"
    aggregate_datasets(["a", "b"], "merged", roots=[careful, careless], aggr_root=out)
    ds = load(out)
    assert ds.num_episodes == 6
    batch = next(iter(torch.utils.data.DataLoader(ds, batch_size=8, shuffle=True)))
    assert not torch.isnan(batch["safety.contact_force_n"]).any()
    # robosafe reads the merge: lerobot copies frames, not robosafe's side file, and robosafe's
    # record rides in the frames (robosafe.record)
    imp = read_traces(Dataset(out))
    assert not imp.errors and len(imp.episodes) == 6
    assert not any("no robosafe record" in n for n in imp.notes)
    careless_ep = imp.episodes[3]
    assert careless_ep.episode_id == "careless/0"
    assert ("hand", "vase", 40.0) in careless_ep.contacts_at(10)
    assert careless_ep.body_roles == {"link7": "robot", "hand": "robot", "bowl": "target",
                                      "vase": "bystander", "table": "furniture"}


def test_resume_and_append_then_both_readers(careful):
    ds = LeRobotDataset.resume("robosafe/test", root=careful, video_backend="pyav")
    feats = ds.meta.features
    for t in range(5):
        frame = {"task": "put the bowl on the plate", CAMERA: np.zeros((32, 48, 3), np.uint8)}
        for name, ft in feats.items():
            if name in frame or name in ("timestamp", "frame_index", "episode_index", "index",
                                         "task_index") or ft["dtype"] == "video":
                continue
            # the record of an episode robosafe did not write is empty
            frame[name] = "" if ft["dtype"] == "string" else np.zeros(ft["shape"], ft["dtype"])
        frame["safety.eef_pos_m"] = np.array([0.1, 0.2, 0.3 + t])
        frame["safety.body_quat_wxyz"] = np.array([1.0, 0.0, 0.0, 0.0])  # a valid pose
        ds.add_frame(frame)
    ds.save_episode()
    ds.finalize()
    again = load(careful)
    assert again.num_episodes == 4 and again.num_frames == 95
    assert float(again[94]["safety.eef_pos_m"][2]) == pytest.approx(4.3)
    imp = read_traces(Dataset(careful))
    assert not imp.errors and len(imp.episodes) == 4
    assert [e.episode_id for e in imp.episodes[:3]] == ["careful/0", "careful/1", "careful/2"]
    assert imp.episodes[3].episode_id == "careful/episode_000003"
    assert imp.notes == [("episodes 3 have no robosafe record (added by another tool, or merged "
                         "without robosafe's side file): read from their safety.* frames as "
                         "foreign episodes (success from next.success; body roles from "
                          "meta/robosafe.json, else 'other'; no target or task tags)")]
    assert imp.episodes[3].body_roles["vase"] == "bystander"
    np.testing.assert_allclose(imp.episodes[3].eef_pos_m[:, 2], [0.3, 1.3, 2.3, 3.3, 4.3])
    # the command line: one warning line naming episode 3, and its trace written, not skipped
    out = careful.parent / "all.jsonl"
    proc = subprocess.run([sys.executable, "-m", "robosafe", "import", "lerobot", str(careful),
                           "-o", str(out)], capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [f"robosafe: {careful}: {imp.notes[0]}"]
    assert proc.stdout.strip() == f"4 traces written to {out}"
    assert [json.loads(line)["episode_id"] for line in out.read_text().splitlines()] == [
        "careful/0", "careful/1", "careful/2", "careful/episode_000003"]


@pytest.mark.parametrize("careless_run", [False, True])
def test_lerobot_doctor_finds_no_failure(tmp_path, careless_run):
    root = write(tmp_path / "ds", careless=careless_run)
    proc = subprocess.run([sys.executable, "-c", "from lerobot_doctor.cli import main; main()",
                           "check", str(root), "--ci"], check=False, capture_output=True,
                          text=True,
                          timeout=600)
    report = json.loads(proc.stdout)  # --ci prints the report as JSON
    severity = {c["name"]: c["severity"] for c in report["checks"]}
    assert report["total_frames"] == 90 and len(severity) == 11
    assert "FAIL" not in severity.values(), severity
    assert report["overall_severity"] in ("PASS", "WARN")
    assert severity["Metadata & Format Compliance"] == "PASS"
    assert severity["Feature Consistency"] == "PASS"
    assert proc.returncode == 0, proc.stdout[-3000:]
