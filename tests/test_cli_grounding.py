"""`robosafe grounding` commands as real processes on a small synthetic dataset."""

import json
import shutil

import pytest
from conftest import run_robosafe as run

from robosafe.grounding.synthetic import SyntheticConfig, generate_dataset


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("gds") / "data"
    summary = generate_dataset(root, SyntheticConfig(), seed=0)
    return root, summary


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.fixture(scope="module")
def longer(tmp_path_factory):
    root = tmp_path_factory.mktemp("gdl") / "data"
    generate_dataset(root, SyntheticConfig(length_scale=0.6, n_scenes=2, episodes_per_scene=3,
                                           images=False), seed=1)
    return root


@pytest.mark.slow
def test_clips_are_balanced_and_deterministic(longer, tmp_path):
    from robosafe.grounding.sampler import read_clip_index

    a, b = tmp_path / "a.jsonl", tmp_path / "b.parquet"
    out = json.loads(run("grounding", "clips", str(longer), "--task", "1", "--out", str(a),
                         "--seed", "3", "--json").stdout)
    run("grounding", "clips", str(longer), "--task", "1", "--out", str(b), "--seed", "3")
    ca, cb = read_clip_index(a), read_clip_index(b)
    assert [c.clip_id for c in ca] == [c.clip_id for c in cb] and len(ca) == out["clips"]
    per_label = {lab: sum(r["clips"] for r in out["by_type"] if r["label"] == lab)
                 for lab in "ABC"}
    assert len(set(per_label.values())) == 1
    capped = json.loads(run("grounding", "clips", str(longer), "--task", "2", "--out",
                            str(tmp_path / "c.jsonl"), "--param", "clips_per_class=4",
                            "--json").stdout)
    assert capped["clips"] == 12
    bad = run("grounding", "clips", str(longer), "--task", "1", "--out", str(a), "--param",
              "gap=3")
    assert bad.returncode == 2 and "NAME=VALUE" in bad.stderr


def test_sweep_tables(longer):
    tables = json.loads(run("grounding", "sweep", str(longer), "--json").stdout)
    rows = tables["table11_gap_threshold"]
    assert [r["value"] for r in rows] == sorted(r["value"] for r in rows)
    assert all(r["events"] >= r["episodes_with_events"] for r in rows if r["events"])


@pytest.mark.slow
def test_ask_and_baseline_end_to_end(tmp_path):
    """clips -> ask (real HTTP server on loopback) and baseline -> score, through the CLI."""
    import threading

    from test_grounding_client import CONFIG, FakeChat

    from robosafe.grounding.dataset import index_dataset
    from robosafe.grounding.sampler import candidate_clips, write_clip_index

    root = tmp_path / "ds"
    generate_dataset(root, CONFIG, seed=3)
    clips = [c for task in (1, 2) for c in candidate_clips(index_dataset(root).episodes, task)]
    assert clips
    index = tmp_path / "clips.jsonl"
    write_clip_index(clips[:6], index)

    fake = FakeChat()
    threading.Thread(target=fake.server.serve_forever, daemon=True).start()
    try:
        answers = tmp_path / "vlm.jsonl"
        proc = run("grounding", "ask", str(index), "--dataset", str(root), "--model", "m",
                   "--endpoint", fake.url, "--out", str(answers), "--concurrency", "2")
        assert proc.returncode == 0, proc.stderr
        assert len(fake) == min(6, len(clips))
        again = run("grounding", "ask", str(index), "--dataset", str(root), "--model", "m",
                    "--endpoint", fake.url, "--out", str(answers))
        assert again.returncode == 0 and len(fake) == min(6, len(clips))  # all cached
    finally:
        fake.release.set()
        fake.server.shutdown()
        fake.server.server_close()
    base = tmp_path / "base.jsonl"
    assert run("grounding", "baseline", str(index), "--dataset", str(root), "--out",
               str(base)).returncode == 0
    data = json.loads(run("grounding", "score", str(answers), str(base), "--json").stdout)
    models = {c["model"] for c in data["conditions"]}
    assert models == {"m", "geometric-baseline"}
    unreachable = run("grounding", "ask", str(index), "--dataset", str(root), "--model", "m",
                      "--endpoint", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "x.jsonl"),
                      "--cache", str(tmp_path / "none.jsonl"))
    assert unreachable.returncode == 2 and "127.0.0.1:9" in unreachable.stderr


@pytest.mark.slow
@pytest.mark.serial  # Ctrl-C timing: beside a busy worker the exit took over 5 s
def test_ask_sampling_options_4xx_stop_and_ctrl_c(tmp_path):
    """--temperature omit / --max-tokens reach the request; a 400 stops with one line (exit 2);
    SIGINT stops at once (exit 130) and writes the answers received to --out."""
    import signal
    import subprocess
    import sys
    import threading
    import time

    from test_grounding_client import CONFIG, FakeChat

    from robosafe.grounding.dataset import index_dataset
    from robosafe.grounding.sampler import candidate_clips, write_clip_index

    root = tmp_path / "ds"
    generate_dataset(root, CONFIG, seed=3)
    clips = [c for task in (1, 2) for c in candidate_clips(index_dataset(root).episodes, task)]
    from dataclasses import replace

    assert clips
    index = tmp_path / "clips.jsonl"  # 20 distinct clips (the answer cache keys on clip_id)
    write_clip_index([replace(clips[i % len(clips)], clip_id=f"k{i}") for i in range(20)],
                     index)
    fake = FakeChat()
    threading.Thread(target=fake.server.serve_forever, daemon=True).start()
    common = ["grounding", "ask", str(index), "--dataset", str(root), "--model", "m",
              "--endpoint", fake.url, "--concurrency", "1"]
    try:
        fake.script = [("status", 400)]
        bad = run(*common, "--out", str(tmp_path / "a.jsonl"), "--cache",
                  str(tmp_path / "a.cache"))
        assert bad.returncode == 2 and len(fake) == 1
        assert "HTTP 400 boom" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
        assert fake.requests[0]["body"]["temperature"] == 0.0
        fake.script = [("answer",), ("answer",), ("hang",)]
        out = tmp_path / "b.jsonl"
        proc = subprocess.Popen([sys.executable, "-m", "robosafe", *common, "--temperature",
                                 "omit", "--max-tokens", "32", "--out", str(out)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while len(fake) < 4 and time.monotonic() < deadline:  # 400 + 2 answers + the hang
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        # the hanging request never ends (until `release`): 30 s only bounds a loaded machine
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        assert "interrupted: 2 of 20" in err and "Traceback" not in err
        assert len(out.read_text().splitlines()) == 2
        sent = fake.requests[1]["body"]
        assert "temperature" not in sent and sent["max_tokens"] == 32
        assert len(fake) == 4
    finally:
        fake.release.set()
        fake.server.shutdown()
        fake.server.server_close()
    assert run(*common, "--temperature", "warm", "--out", str(out)).returncode == 2
