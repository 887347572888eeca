"""Datasets `robosafe collect` writes stay scorable after lerobot 0.6.1's own editing tools
(``aggregate_datasets``; ``delete_episodes``, ``split_dataset``, ``merge_datasets`` of
``lerobot.datasets.dataset_tools``): every robosafe-written episode keeps its task tags, body
roles, success and safety verdicts (robosafe's record rides in the frames: robosafe.record)."""

from __future__ import annotations

import json

import pytest
from conftest import robosafe
from lerobot.datasets.aggregate import aggregate_datasets
from lerobot.datasets.dataset_tools import delete_episodes, merge_datasets, split_dataset
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from robosafe.formats.lerobot import Dataset
from robosafe.formats.traces import read_traces
from robosafe.safety.score import score_episodes


def load(root, repo="robosafe/edit"):
    return LeRobotDataset(repo, root=root, video_backend="pyav")


def facts(root) -> dict[tuple[str, str], tuple]:
    """(policy, episode id) -> (task tags, body roles, success, safe, violated specs) as
    robosafe scores the dataset."""
    imp = read_traces(Dataset(root))
    assert not imp.errors, imp.errors
    assert not any("no robosafe record" in n for n in imp.notes), imp.notes
    out = {}
    for ep, sc in zip(imp.episodes, score_episodes(imp.episodes), strict=True):
        tags = ep.task_tags.to_dict() if ep.task_tags is not None else None
        out[ep.policy, ep.episode_id] = (json.dumps(tags, sort_keys=True), tuple(sorted(
            ep.body_roles.items())), ep.success, sc.safe, tuple(sorted(sc.violated)))
    return out


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    """A careful and a careless dataset of two demo-suite episodes each (cameras on)."""
    root = tmp_path_factory.mktemp("collect")
    out = {}
    for style in ("careful", "careless"):
        proc = robosafe("collect", "--suite", "demo", "--task-id", "place_lemon_in_bowl",
                        "--policy", f"scripted-{style}", "-n", 2, "--horizon", 60, "--images",
                        "--out", root / style, "-j", 1)
        assert proc.returncode == 0, proc.stderr[-2000:]
        out[style] = root / style
    before = facts(out["careful"]) | facts(out["careless"])
    assert len(before) == 4
    assert any(f[0] != "null" for f in before.values())  # task tags are there to keep
    return out, before


def test_aggregate_keeps_every_record(collected, tmp_path):
    ds, before = collected
    aggregate_datasets(["a", "b"], "merged", roots=[ds["careful"], ds["careless"]],
                       aggr_root=tmp_path / "merged")
    assert not (tmp_path / "merged/meta/robosafe_episodes.parquet").exists()  # lerobot drops it
    assert facts(tmp_path / "merged") == before
    # and the command line scores all four
    proc = robosafe("score", tmp_path / "merged", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["aggregate"]["n_scored"] == 4


def test_delete_episodes_keeps_the_others(collected, tmp_path):
    ds, before = collected
    delete_episodes(load(ds["careless"]), [0], output_dir=tmp_path / "del", repo_id="x/del")
    key = ("scripted-careless", "place_lemon_in_bowl__ep001__W0V0")
    assert facts(tmp_path / "del") == {key: before[key]}


def test_split_keeps_every_record(collected, tmp_path):
    ds, before = collected
    parts = split_dataset(load(ds["careful"]), {"train": [0], "val": [1]},
                          output_dir=tmp_path / "split")
    assert {n: list(facts(p.root)) for n, p in parts.items()} == {
        "train": [("scripted-careful", "place_lemon_in_bowl__ep000__W0V0")],
        "val": [("scripted-careful", "place_lemon_in_bowl__ep001__W0V0")]}
    got = {k: v for p in parts.values() for k, v in facts(p.root).items()}
    assert got == {k: v for k, v in before.items() if k[0] == "scripted-careful"}


def test_merge_keeps_every_record(collected, tmp_path):
    ds, before = collected
    merge_datasets([load(ds["careful"], "x/a"), load(ds["careless"], "x/b")], "x/merged",
                   output_dir=tmp_path / "merged")
    assert facts(tmp_path / "merged") == before
