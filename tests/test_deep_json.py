"""JSON nested past the parser's recursion limit (50,000 levels) in every file robosafe reads
is one error line naming the file, and the good files of the same call are still used. Real
processes on real files."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import run_robosafe as run
from factories import make_episode

from robosafe.grounding.synthetic import SyntheticConfig, generate_dataset
from robosafe.trace.io import write_episodes
from robosafe.trace.validate import episode_to_record

DEEP = "[" * 50_000 + "]" * 50_000
NOTE = "invalid JSON: nested too deeply"


def _scored(proc) -> list[str]:
    return [e["episode_id"] for e in json.loads(proc.stdout)["episodes"]]


@pytest.mark.slow
def test_deep_jsonl_line_is_skipped_and_the_rest_scored(tmp_path):
    path = tmp_path / "t.jsonl"
    good = json.dumps(episode_to_record(make_episode(4, episode_id="good")))
    path.write_text(good + "\n" + '{"episode_id": "bad", "meta": ' + DEEP + "}\n")
    proc = run("score", str(path), "--bootstrap", "0", "--json")
    assert proc.returncode == 2
    assert f"{path}:2: {NOTE}" in proc.stderr
    assert _scored(proc) == ["good"]


@pytest.mark.slow
def test_deep_json_file_is_skipped_and_other_files_scored(tmp_path):
    bad, good = tmp_path / "bad.json", tmp_path / "good.jsonl"
    bad.write_text(DEEP)
    write_episodes(good, [make_episode(4, episode_id="good")])
    proc = run("score", str(bad), str(good), "--bootstrap", "0", "--json")
    assert proc.returncode == 2 and f"{bad}: {NOTE}" in proc.stderr
    assert _scored(proc) == ["good"]


@pytest.mark.slow
def test_deep_parquet_meta_is_skipped_and_the_other_rows_scored(tmp_path):
    path = tmp_path / "t.parquet"
    write_episodes(path, [make_episode(4, episode_id="good"), make_episode(4, episode_id="bad")])
    table = pq.read_table(path)
    meta = table.column("meta").to_pylist()
    meta[1] = '{"x": ' + DEEP + "}"
    i = table.schema.get_field_index("meta")
    pq.write_table(table.set_column(i, "meta", pa.array(meta, pa.string())), path)
    proc = run("score", str(path), "--bootstrap", "0", "--json")
    assert proc.returncode == 2
    assert "episode 'bad'" in proc.stderr and NOTE in proc.stderr
    assert _scored(proc) == ["good"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("deep") / "data"
    generate_dataset(root, SyntheticConfig(n_scenes=1, episodes_per_scene=2, length_scale=0.05),
                     seed=0)
    return root


@pytest.mark.slow
def test_deep_rgb_meta_skips_that_episode_only(dataset, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(dataset, root)
    metas = sorted(root.rglob("rgb_meta.json"))
    assert len(metas) >= 2
    metas[0].write_text('{"views": ' + DEEP + "}")
    proc = run("grounding", "index", str(root), "--json")
    assert proc.returncode == 2
    assert "rgb_meta.json" in proc.stderr and NOTE in proc.stderr
    full = json.loads(run("grounding", "index", str(dataset), "--json").stdout)["episodes"]
    assert json.loads(proc.stdout)["episodes"] == full - 1


def test_deep_dataset_info_is_one_line(dataset, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(dataset, root)
    (root / "dataset_info.json").write_text(DEEP)
    proc = run("grounding", "index", str(root))
    assert proc.returncode == 2 and "dataset_info.json" in proc.stderr and NOTE in proc.stderr


def test_deep_clips_file_and_answers_file_are_one_line(dataset, tmp_path):
    clips = tmp_path / "clips.jsonl"
    clips.write_text('{"clip_id": ' + DEEP + "}\n")
    proc = run("grounding", "baseline", str(clips), "--dataset", str(dataset), "--out",
               str(tmp_path / "o.jsonl"))
    assert proc.returncode == 2 and f"{clips}:1: {NOTE}" in proc.stderr
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"clip_id": "c", "answer": ' + DEEP + "}\n")
    proc = run("grounding", "score", str(answers))
    assert proc.returncode == 2 and f"{answers}:1: {NOTE}" in proc.stderr
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes('{"clip_id": "caf\xe9"}\n'.encode("latin-1"))
    for cmd in (("grounding", "score", str(latin)),
                ("grounding", "baseline", str(latin), "--dataset", str(dataset), "--out",
                 str(tmp_path / "o.jsonl"))):
        proc = run(*cmd)
        assert proc.returncode == 2 and f"{latin}: not UTF-8 text" in proc.stderr


def test_deep_run_json_is_one_line(tmp_path):
    rd = tmp_path / "r"
    rd.mkdir()
    (rd / "run.json").write_text(DEEP)
    proc = run("score", str(rd))
    assert proc.returncode == 2 and "run.json: not valid JSON" in proc.stderr
