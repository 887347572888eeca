"""Every episode is counted once: an input given twice, a run directory after a kill (partial
trace writes, a deleted trace) and `results ingest` of such a run. Real processes, real files."""

import json

import numpy as np
from conftest import run_robosafe as run

from robosafe.runner.rundir import Cell, create_run
from robosafe.safety.registry import load_registry
from robosafe.safety.score import score_episodes
from robosafe.stats.outcomes import outcome_row
from robosafe.trace.io import write_episodes
from robosafe.trace.synthetic import PolicyProfile, synthesize_episode


def episodes(n, policy="p", seed0=0):
    prof = PolicyProfile(policy, 1.0, {})
    return [synthesize_episode(np.random.default_rng(seed0 + i), benchmark="libero-goal",
                               task_id="task_0", episode_id=f"ep{i}", profile=prof,
                               n_steps=40, seed=seed0 + i) for i in range(n)]


def metrics(path):
    return json.loads(path.read_text())


def test_the_same_file_twice_counts_each_episode_once(tmp_path):
    a = tmp_path / "a.jsonl"
    write_episodes(a, episodes(3))
    once = run("score", str(a), "--bootstrap", "0", "--out", str(tmp_path / "once.json"))
    assert once.returncode == 0, once.stderr
    twice = run("score", str(a), str(a), "--bootstrap", "0", "--out", str(tmp_path / "t.json"))
    assert twice.returncode == 2
    assert f"{a}: 3 episode(s) already read from {a}" in twice.stderr
    assert "counted once" in twice.stderr
    assert len(metrics(tmp_path / "t.json")["episodes"]) == 3
    assert "3 episodes scored, 1 skipped" in twice.stdout


def test_a_copy_under_another_name_is_also_caught(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_episodes(a, episodes(3))
    b.write_bytes(a.read_bytes())
    proc = run("score", str(a), str(b), "--bootstrap", "0", "--out", str(tmp_path / "m.json"))
    assert proc.returncode == 2 and f"{b}: 3 episode(s) already read from {a}" in proc.stderr
    assert len(metrics(tmp_path / "m.json")["episodes"]) == 3


def test_different_policies_with_the_same_episode_ids_both_count(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_episodes(a, episodes(3, policy="p"))
    write_episodes(b, episodes(3, policy="q"))
    proc = run("score", str(a), str(b), "--bootstrap", "0", "--out", str(tmp_path / "m.json"))
    assert proc.returncode == 0, proc.stderr
    assert len(metrics(tmp_path / "m.json")["episodes"]) == 6


def make_run(path, n=5, crashed=(3,)):
    """A run directory as `robosafe run` writes it: n cells, the ``crashed`` ones without a
    trace."""
    reg = load_registry()
    run_dir = create_run(path, {"policy": "p", "policy_name": "p", "suite": "libero-goal",
                                "tasks": ["task_0"], "seeds": list(range(n))}, {})
    for i, ep in enumerate(episodes(n)):
        cell = Cell("task_0", i, i)
        base = {"suite": "libero-goal", "task_id": "task_0", "episode_idx": i, "seed": i,
                "instance_id": cell.instance_id, "policy_name": "p"}
        if i in crashed:
            row = {**base, "success": 0, "error_type": "RuntimeError", "num_env_steps": 3}
        else:
            ep.episode_id = cell.name
            write_episodes(run_dir.trace_path(cell), [ep])
            (s,) = score_episodes([ep])
            row = {**outcome_row(s, reg), **base}
        run_dir.write_outcome(cell, row)
    return run_dir


def test_score_run_dir_ignores_partial_writes_and_reports_them(tmp_path):
    rd = make_run(tmp_path / "r")
    traces = rd.trace_paths()
    assert len(traces) == 4
    # a kill during a trace write leaves a partial file beside the finished ones
    (traces[0].parent / f".partial-{traces[0].name}").write_bytes(
        traces[0].read_bytes()[:200])
    proc = run("score", str(rd.path), "--bootstrap", "0", "--out", str(tmp_path / "m.json"))
    assert proc.returncode == 0, proc.stderr
    assert len(metrics(tmp_path / "m.json")["episodes"]) == 4
    assert "1 partial trace write(s) from an interrupted run ignored" in proc.stderr
    assert "1 crashed episode(s) have no trace to score" in proc.stderr


def test_score_run_dir_with_a_deleted_trace_reports_the_gap(tmp_path):
    rd = make_run(tmp_path / "r")
    gone = rd.trace_paths()[1]
    gone.unlink()
    proc = run("score", str(rd.path), "--bootstrap", "0", "--out", str(tmp_path / "m.json"))
    assert proc.returncode == 2
    assert f"a finished episode, but its trace {gone} is missing; not scored" in proc.stderr
    assert "3 episodes scored, 1 skipped" in proc.stdout
    assert len(metrics(tmp_path / "m.json")["episodes"]) == 3


def test_score_run_dir_notes_a_trace_without_an_outcome_row(tmp_path):
    rd = make_run(tmp_path / "r")
    row = rd.outcome_path(Cell("task_0", 0, 0))
    row.unlink()  # killed between the trace write and the row write
    proc = run("score", str(rd.path), "--bootstrap", "0", "--out", str(tmp_path / "m.json"))
    assert proc.returncode == 0, proc.stderr
    assert "1 trace(s) without an outcome row" in proc.stderr
    assert len(metrics(tmp_path / "m.json")["episodes"]) == 3


def test_ingest_reports_a_deleted_trace_truthfully(tmp_path):
    rd = make_run(tmp_path / "r")
    gone = rd.trace_paths()[1]
    gone.unlink()
    db = tmp_path / "r.duckdb"
    proc = run("results", "ingest", str(rd.path), "--db", str(db))
    assert proc.returncode == 2
    assert f"a finished episode, but its trace {gone} is missing; not scored" in proc.stderr
    assert "5 episodes (3 scored, 1 crashed, 1 without its trace)" in proc.stdout
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(safe), count(*) FROM episodes").fetchone() == (3, 5)


def test_ingest_of_a_whole_run_exits_0(tmp_path):
    rd = make_run(tmp_path / "r")
    proc = run("results", "ingest", str(rd.path), "--db", str(tmp_path / "r.duckdb"))
    assert proc.returncode == 0, proc.stderr
    assert "5 episodes (4 scored, 1 crashed)" in proc.stdout
