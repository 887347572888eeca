"""`robosafe grounding` commands as real processes on a small synthetic dataset."""

import json
import shutil

import pytest
from test_cli import run

from robosafe.grounding.synthetic import SyntheticConfig, generate_dataset


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("gds") / "data"
    summary = generate_dataset(root, SyntheticConfig(), seed=0)
    return root, summary


def test_index_counts_match_the_generator(dataset):
    root, summary = dataset
    data = json.loads(run("grounding", "index", str(root), "--json").stdout)
    assert data["episodes"] == summary.n_episodes
    assert data["total_steps"] == summary.total_steps
    assert sum(r["with human collision"] for r in data["subsets"]) == \
        summary.human_collision_episodes


def test_index_reports_a_bad_episode_and_keeps_the_rest(dataset, tmp_path):
    root, summary = dataset
    copy = tmp_path / "data"
    shutil.copytree(root, copy)
    victim = next(copy.rglob("trajectory.json"))
    victim.write_text("{not json")
    proc = run("grounding", "index", str(copy), "--json")
    assert proc.returncode == 2
    assert "trajectory.json" in proc.stderr and victim.parent.name in proc.stderr
    assert json.loads(proc.stdout)["episodes"] == summary.n_episodes - 1


def test_score_answers(tmp_path):
    recs = [{"clip_id": f"c{i}", "task": 1, "label": lab, "sample_type": st,
             "model": "m", "representation": "rgb",
             "answer": json.dumps({"answer": ans})}
            for i, (lab, st, ans) in enumerate([("A", "no_event_easy", "A"),
                                                ("A", "no_event_hard_negative", "C"),
                                                ("B", "scene_collision", "B"),
                                                ("C", "human_collision_risk", "C")])]
    path = tmp_path / "answers.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    data = json.loads(run("grounding", "score", str(path), "--json").stdout)
    assert data["overall"]["task1"]["accuracy"] == pytest.approx(0.75)
    assert run("grounding", "score", str(path)).returncode == 0
    (tmp_path / "bad.jsonl").write_text('{"a": 1}\n{oops\n')
    proc = run("grounding", "score", str(tmp_path / "bad.jsonl"))
    assert proc.returncode == 2 and "bad.jsonl:2" in proc.stderr
