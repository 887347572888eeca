"""`robosafe compare A B` (stats.versus, runner.sides): one front door for "is B better than A".

The unit tests build both sides by hand, so every count, mean and statistic below is worked
out on paper; the CLI tests build two small run directories from synthetic traces whose
success and safety are fixed per episode (a forced self-contact is unsafe), then compare them
as directories, as outcome CSVs and as results-store run ids.
"""

import json
import math

import numpy as np
import pytest

from robosafe.errors import RobosafeError
from robosafe.runner.rundir import Cell, create_run
from robosafe.stats.versus import Side, SideRow, compare_sides
from robosafe.trace.io import write_episodes
from robosafe.trace.synthetic import PolicyProfile, synthesize_episode


def row(task, inst, success, safe=None, *, crashed=False, cost=None, suite="s", w=0, v=0):
    sbu = None if safe is None or crashed else bool(success and not safe)
    return SideRow(suite=suite, task_id=task, instance_id=inst, language_level=w,
                   visual_level=v, crashed=crashed, success=None if crashed else bool(success),
                   safe=None if crashed else safe, sbu=sbu, cost=cost,
                   where=f"{task}/{inst}")


def side(name, rows):
    return Side(name, "outcome CSV", tuple(rows))


# A and B on two tasks of three instances each (i0-i2). A also holds t0/i9, which B lacks; B
# crashed on t1/i2. So 5 pairs; t0 keeps 3, t1 2, and balancing to S = 2 drops t0/i2.
A = side("a.csv", [row("t0", "i0", 0, True), row("t0", "i1", 0, True), row("t0", "i2", 1, True),
                   row("t0", "i9", 1, True),
                   row("t1", "i0", 1, False), row("t1", "i1", 0, True), row("t1", "i2", 1, True)])
B = side("b.csv", [row("t0", "i0", 1, True), row("t0", "i1", 1, True), row("t0", "i2", 0, False),
                   row("t1", "i0", 1, True), row("t1", "i1", 1, True),
                   row("t1", "i2", 0, crashed=True)])


def metric(v, name):
    return next(m for m in v.metrics if m.metric == name)


def test_paired_rows_left_out_are_counted_with_their_reason():
    v = compare_sides(A, B)
    assert v.design == "paired" and v.n_pairs == 5 and (v.rows_a, v.rows_b) == (7, 6)
    assert {(o.side, o.reason): o.n for o in v.left_out} == {
        ("A", "instance not in B"): 1, ("A", "crashed in B"): 1, ("B", "crashed"): 1}
    s = metric(v, "success")
    # t0 keeps i0, i1 (i2 balanced out), t1 keeps i0, i1
    assert (s.tasks, s.samples, s.n_a) == (2, 2, 4)
    assert "1 pair(s) left out so every task has the same number" in s.note


def test_paired_success_is_the_exact_paired_wald_test_by_hand():
    s = metric(compare_sides(A, B), "success")
    # A: t0 (0, 0), t1 (1, 0); B: t0 (1, 1), t1 (1, 1). delta: t0 (1, 1), t1 (0, 1).
    # d = (2, 1), s = (2, 1); Q = sum(s_t - d_t^2/S) = (2 - 2) + (1 - 0.5) = 0.5;
    # Z = sum d / sqrt(S/(S-1) Q) = 3 / sqrt(2 * 0.5) = 3.
    assert (s.mean_a, s.mean_b, s.difference) == (0.25, 1.0, 0.75)
    assert s.statistic == pytest.approx(3.0)
    assert s.pvalue == pytest.approx(0.5 * math.erfc(3 / math.sqrt(2)))
    assert s.reject is True
    # V-hat = Q / (T^2 S (S-1)) = 0.5 / 8; the interval is 0.75 +- 1.959964 * 0.25
    assert s.ci == pytest.approx([0.75 - 1.959964 * 0.25, 0.75 + 1.959964 * 0.25], abs=1e-6)
    # Wilson 95% of 1/4 (A) and 4/4 (B)
    assert s.ci_a == pytest.approx([0.045587, 0.699358], abs=1e-5)
    assert s.ci_b == pytest.approx([0.510109, 1.0], abs=1e-5)


def test_a_harm_is_tested_towards_b_lower():
    v = compare_sides(A, B)
    sbu = metric(v, "sbu")
    # SBU pairs: A t0 (0, 0), t1 (1, 0); B t0 (0, 0), t1 (0, 0): B - A = -1/4, B is lower.
    assert sbu.better == "lower" and (sbu.mean_a, sbu.mean_b) == (0.25, 0.0)
    assert sbu.difference == -0.25
    # the test of A - B: delta t0 (0, 0), t1 (1, 0): d = (0, 1), Q = 0 + (1 - 1/2) = 1/2,
    # Z = 1 / sqrt(2 * 1/2) = 1: one-sided p = 0.1587, not significant
    assert sbu.statistic == pytest.approx(1.0) and sbu.reject is False
    assert sbu.ci[0] < -0.25 < sbu.ci[1] and sbu.ci[1] == pytest.approx(-0.25 + 1.959964 * 0.25,
                                                                        abs=1e-6)
    safety = metric(v, "safety")
    assert (safety.mean_a, safety.mean_b, safety.better) == (0.75, 1.0, "higher")


def test_cost_only_when_both_sides_have_it():
    assert [m.metric for m in compare_sides(A, B).metrics] == ["success", "safety", "sbu"]
    assert any("cumulative_cost: A (a.csv) has no cumulative cost" in x
               for x in compare_sides(A, B).not_reported)
    a = side("a", [row("t", f"i{k}", 1, True, cost=c) for k, c in enumerate((1.0, 2.0, 3.0))])
    b = side("b", [row("t", f"i{k}", 1, True, cost=c) for k, c in enumerate((1.0, 1.0, 2.0))])
    c = metric(compare_sides(a, b), "cumulative_cost")
    # d = B - A = (0, -1, -1): mean -2/3, sd = sqrt(1/3), interval -2/3 +- z sqrt(1/3)/sqrt(3)
    assert (c.mean_a, c.mean_b) == (2.0, pytest.approx(4 / 3))
    assert c.difference == pytest.approx(-2 / 3) and c.pvalue is None and c.test is None
    assert c.ci == pytest.approx([-2 / 3 - 1.959964 / 3, -2 / 3 + 1.959964 / 3], abs=1e-6)


def test_levels_are_part_of_the_instance():
    a = side("a", [row("t", "i0", 1, w=1), row("t", "i1", 1, w=1), row("t", "i0", 0)])
    b = side("b", [row("t", "i0", 0, w=1), row("t", "i1", 0, w=1), row("t", "i1", 1)])
    v = compare_sides(a, b)
    # t/i0 at W0 and t/i1 at W0 are on one side only
    assert v.n_pairs == 2 and metric(v, "success").difference == -1.0
    assert {(o.side, o.reason): o.n for o in v.left_out} == {
        ("A", "instance not in B"): 1, ("B", "instance not in A"): 1}


def test_unpaired_only_when_asked_and_says_so():
    v = compare_sides(A, B, design="unpaired")
    s = metric(v, "success")
    assert v.design == "unpaired" and v.n_pairs == 0
    assert s.test.startswith("stratified two-sample Wald test for independent samples")
    # finished rows: A t0 (0, 0, 1, 1), t1 (1, 0, 1); B t0 (1, 1, 0), t1 (1, 1): S = 2
    assert (s.tasks, s.samples) == (2, 2)
    assert {(o.side, o.reason): o.n for o in v.left_out} == {("B", "crashed"): 1}


@pytest.mark.parametrize("b,msg", [
    (side("b", [row("other", "i0", 1)]), ("share no instance (suite, task_id, instance_id, "
                                          "levels)")),
    (side("b", [row("t0", "i0", 1, crashed=True)]), "share no instance that both finished"),
    (side("b", [row("t0", "i0", 1), row("t0", "i0", 0)]), "appears twice"),
])
def test_bad_pairs_are_one_error(b, msg):
    with pytest.raises(RobosafeError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        compare_sides(A, b)


# --- the command line, on run directories, CSVs and the store

SUITE = "libero-goal"
# (success, unsafe) per episode, seeds 0..3; None: crashed
CAREFUL = {"task_0": [(1, 0), (0, 0), (1, 0), (1, 0)], "task_1": [(1, 0), (0, 0), (1, 1), (0, 0)]}
BOLD = {"task_0": [(1, 1), (1, 0), (1, 1), (1, 0)], "task_1": [(1, 1), (1, 1), None, (1, 0)],
        "task_2": [(1, 0), (1, 0)]}


def make_run(path, outcomes, policy, cost):
    run = create_run(path, {"policy": policy, "policy_name": policy, "suite": SUITE}, {})
    for task, eps in outcomes.items():
        for idx, outcome in enumerate(eps):
            cell = Cell(task, idx, idx)
            row = {"suite": SUITE, "task_id": task, "episode_idx": idx, "seed": idx,
                   "instance_id": cell.instance_id, "policy_name": policy,
                   "num_env_steps": 60, "cumulative_cost": cost, "language_level": 0,
                   "visual_level": 0}
            if outcome is None:
                row.update(success=0, error_type="RuntimeError")
            else:
                success, unsafe = outcome
                prof = PolicyProfile(policy, float(success),
                                     {"self_contact": 1.0} if unsafe else {})
                ep = synthesize_episode(np.random.default_rng([idx, len(task)]),
                                        benchmark=SUITE, task_id=task, episode_id=cell.name,
                                        profile=prof, n_steps=60, seed=idx)
                write_episodes(run.trace_path(cell), [ep])
                row.update(success=success, error_type="", safe=int(not unsafe),
                           sbu=int(success and unsafe))
            run.write_outcome(cell, row)
    run.write_outcomes_csv()
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("cmp")
    return (make_run(root / "careful", CAREFUL, "careful", 0.5).path,
            make_run(root / "bold", BOLD, "bold", 2.0).path)


def test_directories_csvs_and_store_ids_give_the_same_answer(cli, runs, tmp_path):
    careful, bold = runs
    db = tmp_path / "r.duckdb"
    assert cli("results", "ingest", careful, bold, "--db", db).returncode == 0
    got = []
    for a, b in ((careful, bold), (careful / "outcomes.csv", bold / "outcomes.csv"),
                 ("careful", "bold")):
        proc = cli("compare", a, b, "--db", db, "--json")
        assert proc.returncode == 0, proc.stderr
        got.append(json.loads(proc.stdout))
    kinds = [(g["kind_a"], g["kind_b"]) for g in got]
    assert kinds == [("run directory",) * 2, ("outcome CSV",) * 2, ("store run",) * 2]
    for g in got:
        # 7 pairs: task_1 seed 2 crashed in bold; bold's task_2 is not in careful
        assert g["n_pairs"] == 7
        assert {(o["side"], o["reason"]): o["n"] for o in g["left_out"]} == {
            ("A", "crashed in B"): 1, ("B", "crashed"): 1, ("B", "instance not in A"): 2}
        m = {x["metric"]: x for x in g["metrics"]}
        # balanced to S = 3 per task: task_0 keeps seeds 0-2, task_1 seeds 0, 1, 3
        assert (m["success"]["tasks"], m["success"]["samples"]) == (2, 3)
        assert m["success"]["mean_a"] == 0.5  # (1, 0, 1) and (1, 0, 0)
        assert m["success"]["mean_b"] == 1.0
        assert m["safety"]["mean_a"] == 1.0 and m["safety"]["mean_b"] == pytest.approx(2 / 6)
        assert m["sbu"]["mean_b"] == pytest.approx(4 / 6)
        assert m["cumulative_cost"]["difference"] == pytest.approx(1.5)
    assert got[0]["metrics"] == got[2]["metrics"]
    assert [m["metric"] for m in got[1]["metrics"]] == [m["metric"] for m in got[0]["metrics"]]


def test_text_output_names_the_pairs_and_the_test(cli, runs):
    proc = cli("compare", *runs)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "paired on 7 instance(s) both finished" in out
    assert "left out of B: 1 crashed, 2 instance not in A" in out
    assert "exact paired task-stratified Wald test (App. C.1)" in out
    proc = cli("compare", *runs, "--design", "unpaired")
    assert proc.returncode == 0 and "UNPAIRED" in proc.stdout


def test_bad_inputs_are_one_line_exit_2(cli, runs, tmp_path):
    careful, _ = runs
    (tmp_path / "notes.txt").write_text("x\n")
    (tmp_path / "empty").mkdir()
    other = tmp_path / "other.csv"
    other.write_text("suite,task_id,instance_id,success\nx,y,z,1\nx,y,w,0\n")
    cases = [(tmp_path / "notes.txt", ("not an outcome CSV (.csv), a run directory or a "
                                      "results-store run id")),
             (tmp_path / "empty", "a directory but not a run directory"),
             (tmp_path / "missing.csv", "no such run directory or outcome CSV"),
             ("some-run", "no results store"),
             (other, "share no instance")]
    for b, msg in cases:
        proc = cli("compare", careful, b, "--db", tmp_path / "none.duckdb")
        assert proc.returncode == 2, (b, proc.stdout)
        assert msg in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_help_puts_the_first_tasks_first_and_old_commands_point_at_compare(cli):
    out = cli("--help").stdout
    first = [out.index(f"│ {c} ") for c in ("run", "score", "compare", "audit", "demo")]
    assert first == sorted(first) and "Start here" in out
    for args in (("audit", "paired"), ("results", "compare"), ("stats", "compare")):
        assert "robosafe compare A B" in cli(*args, "--help").stdout


def test_old_commands_point_at_compare_where_they_cannot_do_it(cli, runs, tmp_path):
    careful, bold = runs
    proc = cli("audit", "paired", careful, bold)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"robosafe: error: {careful}: a directory; audit paired takes "
                                   "two outcome CSVs (`robosafe compare A B` takes run "
                                   "directories too)")
    db = tmp_path / "r.duckdb"
    assert cli("results", "ingest", careful, bold, "--db", db).returncode == 0
    # bold has a crash and a task careful lacks: results compare falls back to independent
    # samples, and says where the paired comparison of the shared instances is
    proc = cli("results", "compare", "careful", "bold", "--db", db)
    assert proc.returncode == 0, proc.stderr
    assert "(`robosafe compare careful bold` pairs on the instances both runs share" \
        in proc.stderr


# --- --sequential (stats.sequential's anytime-valid tests, in episode order)

def ordered(outcomes):
    """One task, instance ids sorting against the run order: episode k is instance i{19-k}."""
    return side("s", [SideRow(suite="s", task_id="t", instance_id=f"i{19 - k:02d}",
                              language_level=0, visual_level=0, crashed=False,
                              success=bool(y), safe=True, sbu=False, cost=None,
                              where=f"row {k}", episode_idx=k)
                      for k, y in enumerate(outcomes)])


def test_sequential_decides_in_episode_order_at_alpha_over_m():
    # B wins the first 10 episodes, then both succeed; Safety never differs
    v = compare_sides(ordered([0] * 10 + [1] * 10), ordered([1] * 20), sequential=True)
    sq = v.sequential
    assert (sq.design, sq.alpha_each) == ("paired", 0.025)
    s, safety = sq.metrics
    # after w wins and no loss, E = 2^(w+1) B(1+w, 1) P(Beta(1+w, 1) > 1/2)
    # = (2^(w+1) - 1) / (w + 1): 255/8 = 31.9 after 7, 511/9 = 56.8 >= 1/0.025 = 40 after 8
    assert (s.metric, s.result.decision, s.result.episodes) == ("success", "better", 8)
    assert (safety.result.decision, safety.result.episodes) == ("undecided", 20)
    # the joint decision waits for every metric
    assert (sq.decision, sq.episodes) == ("undecided", 20)
    assert v.to_dict()["sequential"]["metrics"][0]["decision"] == "better"


def test_sequential_needs_the_run_order():
    a = side("a.csv", [row("t", f"i{k}", 0) for k in range(4)])
    with pytest.raises(RobosafeError, match="t/i0: no episode_idx: --sequential needs the order"):
        compare_sides(a, a, sequential=True)


def test_sequential_on_the_command_line(cli, runs):
    proc = cli("compare", *runs, "--sequential", "--json")
    assert proc.returncode == 0, proc.stderr
    sq = json.loads(proc.stdout)["sequential"]
    assert [m["metric"] for m in sq["metrics"]] == ["success", "safety"]
    assert sq["alpha_each"] == 0.025 and sq["metrics"][0]["available"] == 7
    proc = cli("compare", *runs, "--sequential")
    assert "sequential (paired, anytime-valid, in episode index order" in proc.stdout
    assert "  success: " in proc.stdout
