"""The robosafe command line, run as a real process (exit codes, one-line errors, JSON)."""

import json

import numpy as np
import pytest
from conftest import run_robosafe as run
from factories import make_episode

from robosafe.trace.io import write_episodes
from robosafe.trace.validate import episode_to_record


def episode(eid, force=50.0, success=True):
    n = 4
    bowl = np.array([[0.5, 0, 0.8]] * n)
    return make_episode(
        n, episode_id=eid, success=success, policy="pi",
        contacts=[[], [("link7", "table", force)], [], []],
        body_pos={"bowl": bowl, "plate": np.array([[0.7, 0.2, 0.8]] * n)},
        quat=np.tile([1.0, 0, 0, 0], (n, 1)), grip=[0, 0, 0, 0], eef=bowl + 0.1,
        torque=np.zeros((n, 7)))


@pytest.fixture(scope="module")
def example_json(tmp_path_factory):
    out = tmp_path_factory.mktemp("ex") / "metrics.json"
    proc = run("score", "--example", "--bootstrap", "200", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return proc, json.loads(out.read_text())


@pytest.mark.slow
def test_example_scores_every_shipped_episode(example_json):
    proc, data = example_json
    assert "Success and safety per cell" in proc.stdout
    assert len(data["episodes"]) == 252
    agg = data["aggregate"]
    assert agg["n"] == 252
    eps = data["episodes"]
    assert agg["sr"] == pytest.approx(np.mean([e["success"] for e in eps]))
    assert agg["sbu"] == pytest.approx(np.mean([e["sbu"] for e in eps]))
    assert agg["vsi"] == pytest.approx(np.mean([e["vsi"] for e in eps]))
    assert set(data["breakdowns"]) == {"spec_violation_rates", "sbu_composition", "per_task",
                                       "threshold_sensitivity", "phase_violations"}
    assert {(c["benchmark"], c["policy"]) for c in data["cells"]} >= {
        ("libero-goal", "fast-policy"), ("robocasa-365", "steady-policy")}


def test_app_b_episode_record_schema(example_json):
    _, data = example_json
    rec = data["episodes"][0]
    for key in ("episode_id", "success", "active_specs", "robustness", "safe", "sbu", "vsi"):
        assert key in rec
    assert all(rec["robustness"][s] is not None for s in rec["active_specs"])
    assert rec["sbu"] == (rec["success"] and not rec["safe"])
    assert rec["safe"] == all(rec["robustness"][s] >= 0 for s in rec["active_specs"])


@pytest.mark.slow
def test_json_to_stdout_and_grouping(tmp_path):
    path = tmp_path / "eps.jsonl"
    write_episodes(path, [episode("a"), episode("b", force=300.0), episode("c", success=False)])
    proc = run("score", str(path), "--json", "--bootstrap", "100", "--group-by", "task_id")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["aggregate"]["sbu"] == pytest.approx(1 / 3)
    (cell,) = data["cells"]
    assert cell["task_id"] == "task_0" and cell["table"]["success_unsafe"] == 1


@pytest.mark.slow
def test_one_bad_episode_among_good_ones(tmp_path):
    path = tmp_path / "mixed.jsonl"
    good = [json.dumps(episode_to_record(episode(e))) for e in ("a", "b")]
    bad = episode_to_record(episode("bad"))
    bad["steps"][2]["joint_torque_nm"] = [1.0] * 6
    path.write_text("\n".join([good[0], json.dumps(bad), good[1], "{not json"]) + "\n")
    out = tmp_path / "m.json"
    proc = run("score", str(path), "--out", str(out), "--bootstrap", "50")
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 2
    assert f"{path}:2" in lines[0] and "steps[2].joint_torque_nm" in lines[0]
    assert f"{path}:4" in lines[1] and "invalid JSON" in lines[1]
    data = json.loads(out.read_text())
    assert [e["episode_id"] for e in data["episodes"]] == ["a", "b"]
    assert len(data["errors"]) == 2


@pytest.mark.slow
def test_missing_file_and_unknown_task_are_one_line(tmp_path):
    proc = run("score", str(tmp_path / "nope.jsonl"))
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 2  # the skipped file + "no episode"
    assert "nope.jsonl" in proc.stderr
    path = tmp_path / "x.jsonl"
    ep = episode("a")
    ep.benchmark, ep.task_id = "my-lab", "pour_tea"
    write_episodes(path, [ep, episode("b")])
    proc = run("score", str(path), "--bootstrap", "10")
    assert proc.returncode == 2 and "'pour_tea'" in proc.stderr
    assert "1 episodes scored" in proc.stdout


@pytest.mark.slow
def test_bad_options_exit_2():
    assert run("score", "--example", "--tier", "loose").returncode == 2
    assert run("score", "--example", "--group-by", "color").returncode == 2
    assert run("score").returncode == 2


@pytest.mark.slow
def test_tier_variant_changes_verdicts(tmp_path):
    path = tmp_path / "eps.jsonl"
    write_episodes(path, [episode("a", force=300.0)])
    strict = json.loads(run("score", str(path), "--json", "--bootstrap", "0").stdout)
    relaxed = json.loads(run("score", str(path), "--json", "--bootstrap", "0",
                             "--tier", "force-relaxed").stdout)
    assert strict["aggregate"]["safety"] == 0.0 and relaxed["aggregate"]["safety"] == 1.0


@pytest.mark.slow
def test_specs_list_and_explain():
    rows = json.loads(run("specs", "list", "--json", "--tier", "safe").stdout)
    # the paper's eight safe-tier specs (Table 17) and robosafe's two human-proximity ones
    human = {r["spec_id"] for r in rows if r["spec_id"].startswith("human_")}
    assert human == {"human_ssm_separation", "human_contact_free"}
    assert len(rows) - len(human) == 8 and {"spec_id", "stl", "vsi_severe"} <= set(rows[0])
    data = json.loads(run("specs", "explain", "libero-goal", "task_9", "--json").stdout)
    hot = next(s for s in data["specs"] if s["spec_id"] == "held_object_tilt_world_15deg")
    assert not hot["active"] and "task_requires_extreme_tilt" in hot["invalidated_by"]
    assert len(data["active_specs"]) == 5
    proc = run("specs", "explain", "libero-goal", "task_99")
    assert proc.returncode == 2 and "task_99" in proc.stderr


@pytest.mark.slow
def test_every_table_prints(tmp_path):
    proc = run("score", "--example", "--bootstrap", "50", "--table", "all")
    assert proc.returncode == 0
    for title in ("Per-spec violation rate", "SBU spec composition", "Per-task breakdown",
                  "Threshold sensitivity"):
        assert title in proc.stdout


@pytest.mark.slow
def test_figure_and_outcome_rows(tmp_path, example_json):
    fig, csv_path = tmp_path / "fig.png", tmp_path / "outcomes.csv"
    proc = run("score", "--example", "--bootstrap", "0", "--figure", str(fig), "--outcomes",
               str(csv_path), "--json")
    assert proc.returncode == 0, proc.stderr
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import csv

    rows = list(csv.DictReader(csv_path.open()))
    eps = json.loads(proc.stdout)["episodes"]
    assert len(rows) == len(eps) == 252
    assert [int(r["safe"]) for r in rows] == [int(e["safe"]) for e in eps]
    assert rows[0]["task_name"].startswith("pick_up_the_black_bowl")
    assert run("score", "--example", "--figure", str(tmp_path / "no" / "f.png")).returncode == 2


def test_pareto_frontier():
    from robosafe.report.figures import pareto_frontier

    pts = [(50, 100), (96, 83), (100, 63), (80, 80), (96, 60), (63, 97)]
    assert pareto_frontier(pts) == [0, 5, 1, 2]


@pytest.mark.slow
def test_unscored_episodes_warned_once_and_excluded(tmp_path):
    path = tmp_path / "mixed.jsonl"
    write_episodes(path, [make_episode(4, episode_id=f"bare{i}", policy="pi")
                          for i in range(2)] + [episode("good", force=300.0)])
    proc = run("score", str(path), "--json", "--bootstrap", "0")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("episode(s) unscored") == 1 and str(path) in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    data = json.loads(proc.stdout)
    agg = data["aggregate"]
    assert (agg["n"], agg["n_unscored"], agg["safety"]) == (3, 2, 0.0)
    assert data["cells"][0]["n_unscored"] == 2
    assert [e["safe"] for e in data["episodes"]] == [None, None, False]

    bare = tmp_path / "bare.jsonl"
    write_episodes(bare, [make_episode(4, episode_id="b")])
    proc = run("score", str(bare), "--bootstrap", "0")
    assert proc.returncode == 2
    assert "none of the 1 episodes could be scored" in proc.stderr


@pytest.mark.parametrize("argv,hint", [
    (["run", "--polcy", "x"], "(Possible options: --against-policy, --policy)"),
    (["scroe", "x.jsonl"], "Did you mean 'score'?"),
    (["stats", "wilson", "3"], "Missing argument"),
])
def test_usage_errors_are_one_line(argv, hint):
    """A mistyped option or command is one line naming it with click's suggestion, exit 2."""
    proc = run(*argv)
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert line.startswith("robosafe: error: ") and hint in line
