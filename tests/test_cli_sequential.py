"""`robosafe audit sequential`: outcome tables and run directories, read in run order."""

from __future__ import annotations

import csv
import json

import pytest

from robosafe.audit.sequential import pair_in_order, read_ordered, sequential_audit
from robosafe.errors import RobosafeError
from robosafe.runner.rundir import Cell, create_run
from robosafe.stats.sequential import paired_sequential


def write_table(path, success, safe=None, *, order=None, episode_idx=True, prefix="seed"):
    """An outcome CSV of one task, instance i = seed i, rows in ``order`` (default 0..n-1)."""
    n = len(success)
    safe = safe if safe is not None else [1] * n
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["suite", "task_id", "instance_id", "episode_idx", "success", "safe"])
        for i in (order if order is not None else range(n)):
            w.writerow(["demo", "t0", f"{prefix}{i}-W0-V0", i if episode_idx else "",
                        success[i], "" if safe[i] is None else safe[i]])
    return path


A = [0] * 10 + [1] * 20 + [0, 1] * 10
B = [1] * 10 + [1] * 20 + [1, 1] * 10
N = len(A)  # 50 pairs: the first 10 all won by B


def make_rundir(path, success, safe, crashed=()):
    run = create_run(path, {"policy": "p", "policy_name": "p", "suite": "demo",
                            "tasks": ["t0", "t1"], "seeds": list(range(len(success) // 2))},
                     {})
    for j, (s, f) in enumerate(zip(success, safe, strict=True)):
        # two tasks, episodes interleaved: index j -> (task j % 2, episode j // 2)
        cell = Cell(f"t{j % 2}", j // 2, j // 2)
        run.write_outcome(cell, {"suite": "demo", "task_id": cell.task_id,
                                 "episode_idx": cell.episode_idx, "seed": cell.seed,
                                 "instance_id": cell.instance_id, "success": s, "safe": f,
                                 **({"error_type": "RuntimeError", "success": 0}
                                    if j in crashed else {})})
    return path


def test_paired_json_matches_the_library(tmp_path, cli):
    a, b = write_table(tmp_path / "a.csv", A), write_table(tmp_path / "b.csv", B)
    proc = cli("audit", "sequential", a, b, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    want = paired_sequential(A, B)
    assert (out["decision"], out["episodes"]) == ("better", want.episodes) == ("better", 7)
    assert out["available"] == N and out["test"] == "paired" and out["order"] == "rows"
    assert out["evidence"][0]["name"] == "better" and len(out["evidence"][0]["log_e"]) == 7


@pytest.mark.slow
def test_text_and_several_metrics(tmp_path, cli):
    a = write_table(tmp_path / "a.csv", A, safe=[1] * N)
    b = write_table(tmp_path / "b.csv", B, safe=[1] * (N - 1) + [None])
    proc = cli("audit", "sequential", a, b, "--metric", "success", "--metric", "safe",
               "--delta", "0.2")
    assert proc.returncode == 0, proc.stderr
    assert "success: B better than A after 8 of 50 pairs" in proc.stdout  # alpha/2: 8 wins
    assert "safe: B not better than A by 0.2" in proc.stdout
    assert "left out (safe unknown or crashed): 1 rows of B" in proc.stdout
    out = json.loads(cli("audit", "sequential", a, b, "--metric", "success", "--metric",
                         "safe", "--delta", "0.2", "--json").stdout)
    assert out["decision"] == "decided" and out["alpha_each"] == 0.025
    assert out["episodes"] == max(m["episodes"] for m in out["metrics"].values())
    assert out["metrics"]["safe"]["decision"] == "not_better"


def test_order_and_pairing(tmp_path):
    # B lists its rows newest first: with episode_idx they are put back in seed order
    a = write_table(tmp_path / "a.csv", A)
    b = write_table(tmp_path / "b.csv", B, order=range(N - 1, -1, -1))
    with pytest.raises(RobosafeError, match="unknown order"):
        sequential_audit(a, b)
    r = sequential_audit(a, b, order="episode")
    assert r.metrics[0].result.episodes == 7 and r.order == "episode"
    # B stopped early: A's surplus rows have no partner and are counted, not an error
    b_short = write_table(tmp_path / "b_short.csv", B, order=range(12))
    ya, _, ua, ub = pair_in_order(read_ordered(a, "success"), read_ordered(b_short, "success"))
    assert (len(ya), ua, ub) == (12, N - 12, 0)
    m = sequential_audit(a, b_short).metrics[0]
    assert (m.unmatched_a, m.result.available) == (N - 12, 12)


def test_run_directory_in_seed_order(tmp_path, cli):
    run = make_rundir(tmp_path / "runA", A, [1] * N)
    runb = make_rundir(tmp_path / "runB", B, [1] * N)
    out = json.loads(cli("audit", "sequential", run, runb, "--json").stdout)
    # seed order: episode 0 of t0, of t1, episode 1 of t0, ... = the list order here
    assert (out["decision"], out["episodes"], out["order"]) == ("better", 7, "episode")
    # a crashed episode of B takes no part: its pair is left out (A's row has no partner)
    crashed = make_rundir(tmp_path / "runC", B, [1] * N, crashed=(2,))
    out = json.loads(cli("audit", "sequential", run, crashed, "--json").stdout)
    assert (out["decision"], out["episodes"], out["dropped_b"]) == ("better", 7, 1)
    assert out["unmatched_a"] == 1
    proc = cli("audit", "sequential", run, runb, "--order", "rows")
    assert proc.returncode == 2 and "unknown order" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.parametrize("args,msg", [
    (("--alpha", "0.5"), "alpha must be a number in (0, 0.5)"),
    (("--alpha", "0"), "alpha must be a number in (0, 0.5)"),
    (("--budget", "4"), "smallest decidable sample is 5"),
    (("--target", "0.5"), "--target and --width apply to one table"),
    (("--metric", "sbu"), "unknown metric"),
    (("--order", "shuffled"), "unknown order"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, cli, args, msg):
    a, b = write_table(tmp_path / "a.csv", A), write_table(tmp_path / "b.csv", B)
    proc = cli("audit", "sequential", a, b, *args)
    assert proc.returncode == 2, proc.stdout
    assert msg in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_unknown_order_and_no_shared_instances(tmp_path, cli):
    a = write_table(tmp_path / "a.csv", A)
    other = write_table(tmp_path / "c.csv", B, prefix="other")
    proc = cli("audit", "sequential", a, other)
    assert proc.returncode == 2 and "share no instances" in proc.stderr
    assert "--unpaired" in proc.stderr
    out = json.loads(cli("audit", "sequential", a, other, "--unpaired", "--json").stdout)
    assert out["test"] == "unpaired" and out["decision"] == "better"
    bare = write_table(tmp_path / "bare.csv", B, episode_idx=False)
    proc = cli("audit", "sequential", a, bare, "--order", "episode")
    assert proc.returncode == 2 and "unknown order" in proc.stderr


def test_one_table_against_a_target(tmp_path, cli):
    b = write_table(tmp_path / "b.csv", B)
    out = json.loads(cli("audit", "sequential", b, "--target", "0.6", "--json").stdout)
    assert out["decision"] == "above" and out["test"] == "target"
    lo = out["lower"]
    assert lo[-1] > 0.6 >= lo[-2] and out["episodes"] == len(lo)
    proc = cli("audit", "sequential", b)
    assert proc.returncode == 2 and "needs --target or --width" in proc.stderr
