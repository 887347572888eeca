"""The evaluation runner: run directories, fixed seeds, resume, crash rows, backends."""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from conftest import run_robosafe as cli

from robosafe.errors import RobosafeError
from robosafe.runner.plan import RunPlan
from robosafe.runner.request import RunRequest, plan_run
from robosafe.runner.run import execute, prepare
from robosafe.runner.rundir import COLUMNS, open_run
from robosafe.stats.outcomes import outcome_table, pair_outcomes
from robosafe.tasks.suites import suite_tasks

pytestmark = pytest.mark.sim  # steps MuJoCo

EXAMPLES = Path(__file__).resolve().parents[1] / "src/robosafe/tasks/examples"
TASKS = {"car": str(EXAMPLES / "pick_place_moving_car.bddl"),
         "obstacle": str(EXAMPLES / "dynamic_obstacle_cost.bddl")}


def config(policy="random", **kw) -> RunPlan:
    base = {"policy": policy, "tasks": TASKS, "episodes": 2, "horizon": 8, "suite": "examples"}
    return plan_run(RunRequest(**{**base, **kw}))


def run(cfg, path, **kw):
    rd, cells = prepare(cfg, path)
    execute(rd, cells, **kw)
    return rd


@pytest.mark.slow
def test_run_directory_holds_config_traces_and_outcome_rows(tmp_path):
    rd = run(config(), tmp_path / "r")
    rows = rd.outcomes()
    assert len(rows) == 4 and not any(r.get("error_type") for r in rows)
    assert {(r["task_id"], r["seed"]) for r in rows} == {(t, s) for t in TASKS for s in (0, 1)}
    # horizon 8: 8 actions = 8 env steps; the trace has 9 rows (the reset state first)
    assert all(r["num_env_steps"] == 8 for r in rows)
    from robosafe.trace.io import read_episodes

    (ep,), _ = read_episodes(rd.trace_paths()[0])
    assert ep.n_steps == 9
    assert len(rd.trace_paths()) == 4
    cfg = json.loads((tmp_path / "r/run.json").read_text())
    assert cfg["format"] == "robosafe-run/1" and cfg["seeds"] == [0, 1]
    assert sorted(p.name for p in (tmp_path / "r/tasks").iterdir()) == ["car.bddl",
                                                                       "obstacle.bddl"]
    with open(tmp_path / "r/outcomes.csv") as fh:
        table = list(csv.DictReader(fh))
    assert tuple(table[0]) == COLUMNS and len(table) == 4
    res = cli("score", str(tmp_path / "r"), "--json")
    assert res.returncode == 0, res.stderr
    assert len(json.loads(res.stdout)["episodes"]) == 4


def test_two_policies_see_the_same_instances_and_pair(tmp_path):
    a = run(config("random"), tmp_path / "a")
    b = run(config("zero"), tmp_path / "b")
    ta = outcome_table(a.outcomes(), "a")
    tb = outcome_table(b.outcomes(), "b")
    pairs = pair_outcomes(list(ta.rows), list(tb.rows))
    assert len(pairs[0]) == 4
    # same seed, same initial state: the traces' first rows agree body by body
    from robosafe.trace.io import read_episodes

    ea, _ = read_episodes(a.trace_paths())
    eb, _ = read_episodes(b.trace_paths())
    for x, y in zip(ea, eb, strict=True):
        np.testing.assert_array_equal(x.body_pos_m[0], y.body_pos_m[0])


@pytest.mark.slow
def test_a_crashing_episode_is_recorded_and_the_run_goes_on(tmp_path):
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((5, 3)))  # 3 columns for a 7-D action space
    rd = run(config(f"replay:{bad}"), tmp_path / "r")
    rows = rd.outcomes()
    assert len(rows) == 4
    assert all(r["error_type"] == "RobosafeError" and "3 columns" in r["error"] for r in rows)
    res = cli("score", str(tmp_path / "r"))
    assert res.returncode == 2 and "no finished episodes" in res.stderr


@pytest.mark.slow
def test_workers_and_ray_give_the_same_episodes_as_one_process(tmp_path):
    def key(rows):
        return sorted((r["task_id"], r["seed"], r["success"], r["num_env_steps"],
                       r["cumulative_cost"], r["safe"], r["vsi"]) for r in rows)

    one = run(config(), tmp_path / "one").outcomes()
    two = run(config(), tmp_path / "two", workers=2).outcomes()
    ray_rows = run(config(), tmp_path / "ray", workers=2, backend="ray").outcomes()
    assert key(one) == key(two) == key(ray_rows)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_run_leaves_no_scratch_folder_behind(tmp_path, workers):
    """Each worker process writes task files and episodes in the making into a folder of its
    own under the temporary directory, removed when it exits (also in a spawned pool worker)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = cli("run", "--task", TASKS["car"], "--policy", "random", "-n", "2", "--horizon", "8",
               "--out", str(tmp_path / "r"), "-j", workers,
               env={**os.environ, "TMPDIR": str(tmp), "MUJOCO_GL": "egl"})
    assert proc.returncode == 0, proc.stderr
    assert len(list((tmp_path / "r" / "outcomes").glob("*.json"))) == 2
    assert list(tmp.iterdir()) == []


@pytest.mark.slow
def test_resume_finishes_a_killed_run_without_losing_or_duplicating(tmp_path):
    out = tmp_path / "r"
    args = ["run", "--task", TASKS["car"], "--policy", "random", "-n", "4", "--horizon", "60",
            "--out", str(out)]
    proc = subprocess.Popen([sys.executable, "-m", "robosafe", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and len(list((out / "outcomes").glob("*.json"))) < 1:
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first = {p.name: p.read_bytes() for p in (out / "outcomes").glob("*.json")}
    assert 1 <= len(first) < 4
    assert not list(out.rglob("*.tmp"))  # atomic writes leave no partial files
    res = cli(*args, "--resume", "--json")
    assert res.returncode == 0, res.stderr
    after = {p.name: p.read_bytes() for p in (out / "outcomes").glob("*.json")}
    assert len(after) == 4 and all(after[k] == v for k, v in first.items())
    rows = open_run(out).outcomes()
    assert sorted(r["seed"] for r in rows) == [0, 1, 2, 3]
    assert len(open_run(out).trace_paths()) == 4


@pytest.mark.slow
def test_bad_run_requests_are_one_line_errors(tmp_path):
    prepare(config(), tmp_path / "r")
    with pytest.raises(RobosafeError, match="already exists"):
        prepare(config(), tmp_path / "r")
    with pytest.raises(RobosafeError, match="different configuration"):
        prepare(config(episodes=3), tmp_path / "r", resume=True)
    with pytest.raises(RobosafeError, match="2 seeds for 3 episodes"):
        config(episodes=3, seeds=(1, 2)).cells()
    with pytest.raises(RobosafeError, match="unknown suite 'dem'; did you mean demo"):
        suite_tasks("dem")
    res = cli("run", "--suite", "nope", "--policy", "random", "--out", str(tmp_path / "x"))
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    res = cli("run", "--task", TASKS["car"], "--policy", "nope", "--out", str(tmp_path / "y"))
    assert res.returncode == 2 and "unknown policy 'nope'" in res.stderr
    assert not (tmp_path / "y").exists()


@pytest.mark.slow
def test_demo_runs_both_policies_stores_and_reports(tmp_path):
    res = cli("demo", "--out", str(tmp_path / "d"), "-n", "1", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    runs = out["runs"]
    assert set(runs) == {"scripted-careful", "scripted-careless"}
    for name, s in runs.items():
        assert Path(s["run_dir"]).name == name and s["crashed"] == 0
    # the central finding: success does not imply safety
    assert runs["scripted-careless"]["safety_rate"] < runs["scripted-careful"]["safety_rate"]
    html = Path(out["report"]).read_text()
    assert "scripted-careless" in html and "data:image/png;base64," in html
    res = cli("results", "list", "--db", out["db"], "--json")
    assert res.returncode == 0, res.stderr
    assert len(json.loads(res.stdout)["runs"]) == 2


def test_a_policy_behind_a_loopback_server_acts_exactly_like_the_local_one(tmp_path):
    from robosafe.policies.base import make_policy
    from robosafe.policies.server import PolicyServer
    from robosafe.trace.io import read_episodes

    local = run(config("random", episodes=1), tmp_path / "local")
    with PolicyServer(make_policy("random")) as server:
        remote = run(config(server.url, episodes=1), tmp_path / "remote")
    a, _ = read_episodes(local.trace_paths())
    b, _ = read_episodes(remote.trace_paths())
    assert len(a) == len(b) == 2
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.eef_pos_m, y.eef_pos_m)
        np.testing.assert_array_equal(x.cost, y.cost)
    assert all(r["policy_name"].startswith("ws://") for r in remote.outcomes())


def test_replaying_a_recorded_episode_reproduces_its_trace(tmp_path):
    from robosafe.trace.io import read_episodes

    src = run(config("random", episodes=1, tasks={"car": TASKS["car"]}), tmp_path / "src")
    (trace,) = src.trace_paths()
    again = run(config(f"replay:{trace}", episodes=1, tasks={"car": TASKS["car"]}),
                tmp_path / "again")
    (a,), _ = read_episodes([trace])
    (b,), _ = read_episodes(again.trace_paths())
    np.testing.assert_array_equal(a.eef_pos_m, b.eef_pos_m)
    np.testing.assert_array_equal(a.contact_force_n, b.contact_force_n)
    assert np.load(src.path / "actions" / f"{trace.stem}.npy").shape == (8, 7)


def test_libero_runs_record_libero_assets():
    """LIBERO's host always builds LIBERO's own scenes: run.json says "libero", also when
    the default "stand-in" was passed or an older run.json says so (resume still matches)."""
    cfg = config(host="libero", suite="libero_goal")
    assert cfg.to_json()["assets"] == "libero" and cfg.to_json()["controller"] == "robosuite"
    assert config(host="libero", suite="libero_goal", assets="stand-in").identity() \
        == cfg.identity()
    old = {**cfg.to_json(), "assets": "stand-in"}
    assert RunPlan.from_json(old).to_json()["assets"] == "libero"
    assert RunPlan.from_json(old).identity() == cfg.identity()
    assert config().options.assets == "stand-in"  # robosafe's simulator keeps its own choice
    with pytest.raises(RobosafeError, match="the libero host always has its own"):
        config(host="libero", suite="libero_goal", assets="libero")
    with pytest.raises(RobosafeError, match="--controller compiled drives robosafe's"):
        config(host="libero", suite="libero_goal", controller="compiled")


def test_a_plan_round_trips_through_run_json():
    """Every field of a plan survives run.json (RunPlan.to_json -> from_json), the host's
    options and the shield's settings included."""
    cfg = config(cost_mode="vla-arena", shield="filter", shield_horizon=3,
                 shield_candidates="hold,lift", language_levels="0,2", seeds=(5, 7))
    back = RunPlan.from_json(cfg.to_json())
    assert back == replace(cfg, tasks=cfg.tasks)
    assert back.options.arena_evaluator == "openvla" and back.shield.candidates == ("hold", "lift")
    assert [c.instance_id for c in back.cells()][:2] == ["seed5-W0-V0", "seed7-W0-V0"]


def test_recording_videos_without_pyav_fails_before_any_episode(tmp_path, monkeypatch):
    # an ImportError for `import av`, as without the video extra
    monkeypatch.setitem(sys.modules, "av", None)
    with pytest.raises(RobosafeError, match=r"camera videos need PyAV: pip install "
                                            r"'robosafe\[video\]'"):
        prepare(config(images=True, record_frames=True), tmp_path / "run")
    assert not (tmp_path / "run").exists()  # nothing created, nothing simulated
    # without recording, rendered images only feed the policy: no video, no PyAV needed
    _rd, cells = prepare(config(images=True), tmp_path / "ok")
    assert len(cells) == 2 * len(TASKS)


def test_workers_keep_to_the_scene_they_built():
    """Local workers: a finished worker gets the next cell of its own scene; a new or done one
    the free scene with the most cells left; a scene is shared only when none is free."""
    from robosafe.runner.local import _SceneQueue
    from robosafe.runner.rundir import Cell
    from robosafe.runner.worker import CellJob

    def job(task, ep, visual=0):
        return CellJob("run", None, "p", "", Cell(task, ep, ep, 0, visual))

    jobs = [job("a", 0), job("a", 1), job("a", 2), job("b", 0), job("b", 1), job("a", 0, 1)]
    q = _SceneQueue(jobs)
    first = q.take(None, [])
    second = q.take(None, [first])
    assert (first.cell.task_id, second.cell.task_id) == ("a", "b")  # a has 3 cells, b 2
    nxt = q.take(first, [second])
    assert (nxt.cell.task_id, nxt.cell.episode_idx) == ("a", 1)
    nxt = q.take(nxt, [second])
    assert (nxt.cell.task_id, nxt.cell.episode_idx) == ("a", 2)
    # scene a (V0) done: the V1 scene of a is free, b is busy
    other = q.take(nxt, [second])
    assert (other.cell.task_id, other.cell.visual_level) == ("a", 1)
    # nothing free left: the worker shares b's scene
    last = q.take(other, [second])
    assert (last.cell.task_id, last.cell.episode_idx) == ("b", 1)
    assert not q
