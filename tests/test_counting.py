"""Every episode is counted once: an input given twice, a run directory after a kill (partial
trace writes, a deleted trace) and `results ingest` of such a run. Real processes, real files."""

import json

import pytest
from conftest import run_robosafe as run
from factories import make_run, synthetic_episodes

from robosafe.runner.rundir import Cell
from robosafe.trace.io import write_episodes


def metrics(path):
    return json.loads(path.read_text())


@pytest.mark.slow
def test_the_same_file_twice_counts_each_episode_once(tmp_path):
    a = tmp_path / "a.jsonl"
    write_episodes(a, synthetic_episodes(3))
    once = run("score", str(a), "--bootstrap", "0", "--out", str(tmp_path / "once.json"))
    assert once.returncode == 0, once.stderr
    twice = run("score", str(a), str(a), "--bootstrap", "0", "--out", str(tmp_path / "t.json"))
    assert twice.returncode == 2
    assert f"{a}: 3 episode(s) already read from {a}" in twice.stderr
    assert "counted once" in twice.stderr
    assert len(metrics(tmp_path / "t.json")["episodes"]) == 3
    assert "3 episodes scored, 1 skipped" in twice.stdout


@pytest.mark.slow
def test_a_copy_under_another_name_is_also_caught(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_episodes(a, synthetic_episodes(3))
    b.write_bytes(a.read_bytes())
    proc = run("score", str(a), str(b), "--bootstrap", "0", "--out", str(tmp_path / "m.json"))
    assert proc.returncode == 2 and f"{b}: 3 episode(s) already read from {a}" in proc.stderr
    assert len(metrics(tmp_path / "m.json")["episodes"]) == 3


def test_different_policies_with_the_same_episode_ids_both_count(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_episodes(a, synthetic_episodes(3, policy="p"))
    write_episodes(b, synthetic_episodes(3, policy="q"))
    proc = run("score", str(a), str(b), "--bootstrap", "0", "--out", str(tmp_path / "m.json"))
    assert proc.returncode == 0, proc.stderr
    assert len(metrics(tmp_path / "m.json")["episodes"]) == 6


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


@pytest.mark.slow
def test_score_run_dir_with_a_deleted_trace_reports_the_gap(tmp_path):
    rd = make_run(tmp_path / "r")
    gone = rd.trace_paths()[1]
    gone.unlink()
    proc = run("score", str(rd.path), "--bootstrap", "0", "--out", str(tmp_path / "m.json"))
    assert proc.returncode == 2
    assert f"a finished episode, but its trace {gone} is missing; not scored" in proc.stderr
    assert "3 episodes scored, 1 skipped" in proc.stdout
    assert len(metrics(tmp_path / "m.json")["episodes"]) == 3


@pytest.mark.slow
def test_score_run_dir_notes_a_trace_without_an_outcome_row(tmp_path):
    rd = make_run(tmp_path / "r")
    row = rd.outcome_path(Cell("task_0", 0, 0))
    row.unlink()  # killed between the trace write and the row write
    proc = run("score", str(rd.path), "--bootstrap", "0", "--out", str(tmp_path / "m.json"))
    assert proc.returncode == 0, proc.stderr
    assert "1 trace(s) without an outcome row" in proc.stderr
    assert len(metrics(tmp_path / "m.json")["episodes"]) == 3


@pytest.mark.slow
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


@pytest.mark.slow
def test_ingest_of_a_whole_run_exits_0(tmp_path):
    rd = make_run(tmp_path / "r")
    proc = run("results", "ingest", str(rd.path), "--db", str(tmp_path / "r.duckdb"))
    assert proc.returncode == 0, proc.stderr
    assert "5 episodes (4 scored, 1 crashed)" in proc.stdout
