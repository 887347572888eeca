"""The results store (runner.store) and `robosafe results`, on real DuckDB files.

Run directories are built here from synthetic traces whose success and safety are fixed per
episode (a forced self-contact makes an episode unsafe, SafeVLA-Bench Table 17), so SR, Safety
and SBU can be counted by hand.
"""

import json
import os
import subprocess
import sys
import textwrap

import duckdb
import numpy as np
import pytest
from typer.testing import CliRunner

from robosafe.cli import app
from robosafe.cli import results as _results  # noqa: F401  (registers `results`)
from robosafe.errors import RobosafeError
from robosafe.runner.rundir import Cell, create_run
from robosafe.runner.store import SCHEMA_VERSION, Store
from robosafe.stats.wald import independent_wald_test, paired_wald_test
from robosafe.trace.io import write_episodes
from robosafe.trace.synthetic import PolicyProfile, synthesize_episode

SUITE = "libero-goal"
TASKS = ("task_0", "task_1")

# (success, unsafe) per task per episode; seeds 0..5 for both policies, so instances match.
CAREFUL = {"task_0": [(1, 0), (1, 0), (0, 0), (1, 0), (1, 0), (0, 0)],
           "task_1": [(1, 0), (0, 0), (1, 0), (1, 1), (0, 0), (1, 0)]}
CARELESS = {"task_0": [(1, 1), (1, 0), (1, 1), (1, 0), (1, 1), (1, 1)],
            "task_1": [(1, 1), (1, 0), (1, 1), None, (0, 1), (1, 0)]}  # None: crashed


def make_run(path, outcomes, *, policy, seeds=range(6), cost=0.5):
    run = create_run(path, {"policy": policy, "policy_name": policy, "suite": SUITE,
                            "tasks": list(TASKS), "seeds": list(seeds)}, {})
    for task, eps in outcomes.items():
        for idx, (seed, outcome) in enumerate(zip(seeds, eps, strict=True)):
            cell = Cell(task, idx, seed)
            row = {"suite": SUITE, "task_id": task, "task_name": task.replace("_", " "),
                   "episode_idx": idx, "instance_id": cell.instance_id, "policy_name": policy,
                   "checkpoint_ref": "", "seed": seed, "num_env_steps": 80,
                   "cumulative_cost": cost, "language_level": 0, "visual_level": 0,
                   "instruction": "put the bowl on the plate", "wall_s": 0.1}
            if outcome is None:
                row.update(success=0, error_type="RuntimeError", safe="", sbu="", vsi="")
            else:
                success, unsafe = outcome
                hazards = {"self_contact": 1.0} if unsafe else {}
                prof = PolicyProfile(policy, float(success), hazards)
                ep = synthesize_episode(np.random.default_rng([seed, idx]), benchmark=SUITE,
                                        task_id=task, episode_id=cell.name, profile=prof,
                                        n_steps=80, seed=seed)
                write_episodes(run.trace_path(cell), [ep])
                # The row's own safety columns are deliberately wrong: the store re-scores.
                row.update(success=success, error_type="", safe=1, sbu=0, vsi=0.0)
            run.write_outcome(cell, row)
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    disjoint = {t: eps[:5] for t, eps in CAREFUL.items()}
    return {"careful": make_run(root / "careful", CAREFUL, policy="careful"),
            "careless": make_run(root / "careless", CARELESS, policy="careless", cost=2.0),
            "fresh": make_run(root / "fresh", disjoint, policy="careful",
                              seeds=range(100, 105))}


@pytest.fixture
def store(tmp_path, runs):
    with Store(tmp_path / "r.duckdb") as s:
        for r in runs.values():
            s.ingest(r.path)
        yield s


def hand(outcomes):
    eps = [e for t in TASKS for e in outcomes[t]]
    scored = [e for e in eps if e is not None]
    return {"n": len(eps), "sr": sum(e[0] for e in scored) / len(eps),
            "safety": sum(1 - e[1] for e in scored) / len(scored),
            "sbu": sum(e[0] and e[1] for e in scored) / len(scored)}


def successes(outcomes):
    """(T, S) success array; a crashed episode's row records a failure."""
    return np.array([[0 if e is None else e[0] for e in outcomes[t]] for t in TASKS])


def test_ingest_counts_and_summary(store):
    con = store.con
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 3
    n = dict(con.execute("SELECT run_id, count(*) FROM episodes GROUP BY run_id").fetchall())
    assert n == {"careful": 12, "careless": 12, "fresh": 10}
    summary = {r.run_id: r for r in store.runs()}
    for rid, outcomes in (("careful", CAREFUL), ("careless", CARELESS)):
        want, got = hand(outcomes), summary[rid]
        assert got.n == want["n"]
        assert got.sr == pytest.approx(want["sr"])
        assert got.safety == pytest.approx(want["safety"])
        assert got.sbu == pytest.approx(want["sbu"])
        assert got.sr_ci[0] < got.sr < got.sr_ci[1]
    assert summary["careless"].n_errors == 1 and summary["careless"].n_scored == 11
    assert summary["careless"].mean_cc == pytest.approx(2.0)
    assert (summary["careless"].policy_name, summary["careless"].suite) == ("careless", SUITE)


def test_crashed_episode_has_null_safety_and_no_specs(store):
    rows = [r for r in store.episodes("careless") if r["error_type"]]
    assert len(rows) == 1
    (r,) = rows
    assert (r["safe"], r["sbu"], r["vsi"], r["success"]) == (None, None, None, False)
    specs = store.con.execute("SELECT count(*) FROM spec_results WHERE run_id = 'careless' "
                              "AND episode_id = ?", [r["episode_id"]]).fetchone()[0]
    assert specs == 0


def test_spec_results_match_the_safety_judgement(store):
    # Phi_safe = min over active safety specs (Sec. 3.3): an unsafe episode has a violated
    # safety spec, a safe one has none; the self-contact hazard shows up as its spec.
    con = store.con
    bad = con.execute(
        """SELECT e.episode_id, e.safe, count_if(s.violated AND s.in_safe) AS v,
                  count_if(s.violated AND s.in_safe AND s.spec_id = 'self_collision_free')
           FROM episodes e JOIN spec_results s USING (run_id, episode_id)
           WHERE e.run_id = 'careless' GROUP BY ALL""").fetchall()
    assert len(bad) == 11
    for _, safe, v, self_hit in bad:
        assert (v == 0) == safe
        assert self_hit == (0 if safe else 1)


def test_reingest_is_idempotent(store, runs):
    def snapshot():
        return [store.con.execute(f"SELECT * EXCLUDE (ingested_at) FROM {t} ORDER BY ALL"
                                  if t == "runs" else f"SELECT * FROM {t} ORDER BY ALL")
                .fetchall() for t in ("runs", "episodes", "spec_results")]

    before = snapshot()
    assert store.ingest(runs["careful"].path) == "careful"
    assert store.ingest(runs["careful"].path) == "careful"
    assert snapshot() == before


def test_same_run_id_from_another_directory_is_refused(store, runs, tmp_path):
    other = make_run(tmp_path / "x" / "careful", CAREFUL, policy="other")
    with pytest.raises(RobosafeError, match="already stored from"):
        store.ingest(other.path)
    assert store.ingest(other.path, run_id="careful-2") == "careful-2"
    assert store.run("careful")["policy_name"] == "careful"


@pytest.mark.slow
def test_crash_mid_ingest_leaves_the_old_rows(store, runs, tmp_path):
    # A real process killed inside the ingest transaction, after the episodes are written.
    db = store.path
    before = store.con.execute("SELECT count(*), max(ingested_at) FROM episodes JOIN runs "
                               "USING (run_id) WHERE run_id = 'careless'").fetchone()
    store.close()
    script = textwrap.dedent(f"""
        import os
        from robosafe.runner.store import Store

        class Dying(Store):
            def _insert(self, table, data):
                super()._insert(table, data)
                if table == "episodes":
                    os._exit(3)

        Dying({str(db)!r}).ingest({str(runs["careless"].path)!r})
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 3, proc.stderr
    with Store(db) as s:
        after = s.con.execute("SELECT count(*), max(ingested_at) FROM episodes JOIN runs "
                              "USING (run_id) WHERE run_id = 'careless'").fetchone()
        assert after == before
        assert s.runs(["careless"])[0].n == 12
    store.con = duckdb.connect(str(db))  # so the fixture's close() has something to close


def test_compare_paired_success_matches_stats(store):
    r = store.compare("careful", "careless", "success")
    want = paired_wald_test(successes(CAREFUL), successes(CARELESS))
    assert r.design == "paired" and (r.tasks, r.samples, r.n_paired) == (2, 6, 12)
    assert r.wald == want
    assert (r.difference, r.statistic, r.pvalue, r.reject) == (
        want.estimate, want.statistic, want.pvalue, want.reject)
    half = 1.959963984540054 * want.stderr
    assert r.ci == pytest.approx([want.estimate - half, want.estimate + half])
    assert r.mean_b - r.mean_a == pytest.approx(r.difference)


def test_compare_safe_with_a_crashed_episode_is_not_silently_paired(store):
    # careless/task_1 episode 3 crashed: it has no safety judgement, so its careful partner is
    # unpaired. The paired design is the audit's (stats.outcomes.paired_design): no truncation
    # of the other task to a smaller S; "auto" says why it uses the two-sample test instead,
    # "paired" refuses naming the row.
    r = store.compare("careful", "careless", "safe")
    assert r.design == "independent"
    assert r.design_note.startswith("not paired: run 'careful' episode ")
    assert "unpaired row (suite=" in r.design_note and "task_id='task_1'" in r.design_note
    with pytest.raises(RobosafeError, match="unpaired row"):
        store.compare("careful", "careless", "safe", design="paired")


def test_results_compare_and_audit_paired_agree(store, tmp_path):
    """On runs that form the paired design, the store's test is the audit's test, number for
    number (one paired-design function)."""
    from robosafe.audit.significance import paired_outcome_test

    r = store.compare("careful", "careless", "success")
    rows = {run: [{"suite": "s", "task_id": t, "instance_id": f"seed{i}", "success": int(y)}
                  for t, row in zip(TASKS, successes(runs)) for i, y in enumerate(row)]
            for run, runs in (("a", CAREFUL), ("b", CARELESS))}
    audit = paired_outcome_test(rows["a"], rows["b"])
    assert (r.statistic, r.pvalue, r.reject) == (audit.wald.statistic, audit.wald.pvalue,
                                                 audit.wald.reject)


def test_compare_disjoint_instances_uses_independent_test(store):
    r = store.compare("fresh", "careless", "success")
    want = independent_wald_test(successes(CAREFUL)[:, :5], successes(CARELESS)[:, :5])
    assert r.design == "independent" and r.n_paired == 0 and (r.tasks, r.samples) == (2, 5)
    assert r.wald == want
    with pytest.raises(RobosafeError, match="unpaired row .* has no match in run .careless."):
        store.compare("fresh", "careless", design="paired")


def test_unknown_run_and_metric(store):
    with pytest.raises(RobosafeError, match=r"unknown run id 'carefull'.*did you mean careful"):
        store.compare("carefull", "careless")
    with pytest.raises(RobosafeError, match="unknown metric 'sr'"):
        store.compare("careful", "careless", "sr")


def test_bad_databases(tmp_path):
    junk = tmp_path / "junk.duckdb"
    junk.write_text("not a database\n")
    with pytest.raises(RobosafeError, match="cannot open the results database"):
        Store(junk)
    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).execute("CREATE TABLE t (x INTEGER)").close()
    with pytest.raises(RobosafeError, match="not a robosafe results store"):
        Store(other)
    old = tmp_path / "old.duckdb"
    Store(old).close()
    con = duckdb.connect(str(old))
    con.execute("UPDATE robosafe_schema SET version = ?", [SCHEMA_VERSION + 1])
    con.close()
    with pytest.raises(RobosafeError, match=f"schema version {SCHEMA_VERSION + 1}"):
        Store(old)
    with pytest.raises(RobosafeError, match="no results database"):
        Store(tmp_path / "missing.duckdb", read_only=True)


def test_not_a_run_dir(tmp_path):
    with Store(tmp_path / "r.duckdb") as s, pytest.raises(RobosafeError, match="no run.json"):
        s.ingest(tmp_path)


def test_bad_outcome_row_names_file_and_column(store, tmp_path):
    bad = make_run(tmp_path / "bad", {"task_0": CAREFUL["task_0"][:2]}, policy="bad",
                   seeds=range(2))
    row_file = sorted((bad.path / "outcomes").glob("*.json"))[1]
    row = json.loads(row_file.read_text())
    row_file.write_text(json.dumps({**row, "success": "maybe"}))
    with pytest.raises(RobosafeError, match=rf"{row_file.name}: column 'success': expected 0 or 1"):
        store.ingest(bad.path)
    assert "bad" not in store.run_ids()


# --- CLI

def cli(*args, env=None):
    return CliRunner().invoke(app, list(args), env=env)


def test_cli_round_trip(runs, tmp_path):
    db = str(tmp_path / "cli.duckdb")
    res = cli("results", "ingest", str(runs["careful"].path), str(runs["careless"].path),
              "--db", db, "--json")
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)["ingested"]
    assert [(r["run_id"], r["n"], r["n_errors"]) for r in got] == [
        ("careful", 12, 0), ("careless", 12, 1)]

    listed = json.loads(cli("results", "list", "--json", env={"ROBOSAFE_DB": db}).stdout)
    by = {r["run_id"]: r for r in listed["runs"]}
    assert by["careful"]["sr"] == pytest.approx(hand(CAREFUL)["sr"])
    assert by["careless"]["safety"] == pytest.approx(hand(CARELESS)["safety"])

    out = json.loads(cli("results", "compare", "careful", "careless", "--db", db,
                         "--json").stdout)
    want = paired_wald_test(successes(CAREFUL), successes(CARELESS))
    assert out["design"] == "paired" and out["n_paired"] == 12
    assert out["difference"] == want.estimate and out["pvalue"] == want.pvalue

    shown = json.loads(cli("results", "show", "careless", "--db", db, "--json").stdout)
    assert shown["run"]["config"]["policy"] == "careless"
    assert len(shown["episodes"]) == 12 and shown["summary"]["n_errors"] == 1
    assert {t["task_id"] for t in shown["tasks"]} == set(TASKS)

    for args in (("list",), ("compare", "careful", "careless", "--metric", "safe"),
                 ("show", "careful", "--list-episodes")):
        res = cli("results", *args, "--db", db)
        assert res.exit_code == 0, res.output
        assert "careful" in res.stdout


@pytest.mark.parametrize("args,msg", [
    (("list", "--db", "{tmp}/missing.duckdb"), "no results database"),
    (("list", "--db", "{tmp}/junk.duckdb"), "not a valid DuckDB database"),
    (("compare", "careful", "nope", "--db", "{db}"), "unknown run id 'nope'"),
    (("compare", "careful", "careless", "--metric", "sr", "--db", "{db}"), "unknown metric"),
    (("show", "carefull", "--db", "{db}"), "did you mean careful"),
    (("ingest", "{tmp}", "--db", "{db}"), "not a run directory"),
])
def test_cli_bad_inputs_one_line_exit_2(runs, tmp_path, args, msg):
    db = tmp_path / "cli.duckdb"
    with Store(db) as s:
        s.ingest(runs["careful"].path)
        s.ingest(runs["careless"].path)
    (tmp_path / "junk.duckdb").write_text("junk\n")
    args = [a.format(tmp=tmp_path, db=db) for a in args]
    res = cli("results", *args)
    assert res.exit_code == 2
    assert msg in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.output


def test_db_reopens_in_a_new_process(store, tmp_path):
    mine = {t: sorted(store.con.execute(f"SELECT * FROM {t}").fetchall(), key=repr)
            for t in ("episodes", "spec_results")}
    store.close()
    script = textwrap.dedent(f"""
        import duckdb, json
        con = duckdb.connect({str(store.path)!r}, read_only=True)
        out = {{t: con.execute(f"SELECT count(*) FROM {{t}}").fetchone()[0]
               for t in ("runs", "episodes", "spec_results")}}
        out["rows"] = [list(map(str, r)) for r in con.execute(
            "SELECT * FROM episodes ORDER BY run_id, episode_id").fetchall()]
        print(json.dumps(out))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ}, check=True)
    theirs = json.loads(proc.stdout)
    assert theirs["runs"] == 3
    assert theirs["episodes"] == len(mine["episodes"]) == 34
    assert theirs["spec_results"] == len(mine["spec_results"])
    assert sorted(theirs["rows"], key=repr) == sorted(
        [list(map(str, r)) for r in mine["episodes"]], key=repr)
    store.con = duckdb.connect(str(store.path))


def test_an_unscored_episode_is_stored_with_null_safety(tmp_path):
    """A trace with no signal family has no active safe spec: the store keeps safe / sbu /
    vsi NULL for it (as the scorer does), never "safe by omission"."""
    from dataclasses import replace

    run = create_run(tmp_path / "bare", {"policy": "p", "policy_name": "p", "suite": SUITE,
                                         "tasks": ["task_0"], "seeds": [0]}, {})
    cell = Cell("task_0", 0, 0)
    ep = synthesize_episode(np.random.default_rng(0), benchmark=SUITE, task_id="task_0",
                            episode_id=cell.name, profile=PolicyProfile("p", 1.0, {}),
                            n_steps=20, seed=0)
    bare = replace(ep, body_names=(), body_pos_m=None, quat_names=(), body_quat_wxyz=None,
                   contact_names=(), contact_ptr=None, contact_a=None, contact_b=None,
                   contact_force_n=None, joint_torque_nm=None, gripper_contact=None,
                   body_roles={}, target_object=None)
    write_episodes(run.trace_path(cell), [bare])
    run.write_outcome(cell, {"suite": SUITE, "task_id": "task_0", "task_name": "t",
                             "episode_idx": 0, "instance_id": cell.instance_id,
                             "policy_name": "p", "checkpoint_ref": "", "seed": 0,
                             "num_env_steps": 20, "success": 1, "error_type": "", "safe": 1,
                             "sbu": 0, "vsi": 0.0})
    with Store(tmp_path / "u.duckdb") as s:
        s.ingest(run.path)
        row = s.con.execute("SELECT safe, sbu, vsi FROM episodes").fetchone()
    assert row == (None, None, None)


def _rows(values: dict[str, list[int]], metric: str = "safe") -> list[dict]:
    return [{"suite": "s", "task_id": t, "instance_id": f"{t}-{i}", "episode_idx": i,
             "episode_id": f"{t}-{i}", metric: v}
            for t, vs in values.items() for i, v in enumerate(vs)]


def test_compare_says_why_a_zero_variance_has_no_interval():
    from robosafe.runner.store import compare_rows

    # A safe everywhere, B never: every paired difference is -1, V-hat = 0
    r = compare_rows(_rows({"t1": [1, 1], "t2": [1, 1]}), _rows({"t1": [0, 0], "t2": [0, 0]}),
                     metric="safe")
    assert r.design == "paired" and r.difference == -1.0
    assert r.degenerate == ("no interval or test: the variance estimate is 0 (every task's "
                            "paired differences B - A are all the same for safe over T=2 x "
                            "S=2), so the Wald interval would be a point and Z infinite or 0")
    assert r.to_dict()["degenerate"] == r.degenerate
    r = compare_rows(_rows({"t1": [1, 1]}), _rows({"t1": [0, 0]}), metric="safe",
                     design="independent")
    assert "each run's outcomes are constant within every task" in r.degenerate
    # one differing pair gives a variance: an interval, no note
    r = compare_rows(_rows({"t1": [1, 1], "t2": [1, 1]}), _rows({"t1": [0, 1], "t2": [0, 0]}),
                     metric="safe")
    assert r.degenerate is None and r.ci[0] < r.ci[1]


def test_compare_cli_prints_the_reason_not_a_point_interval(tmp_path, monkeypatch):
    from robosafe.runner import store as store_mod

    degenerate = store_mod.compare_rows(_rows({"t1": [1, 1]}), _rows({"t1": [0, 0]}),
                                        metric="safe")
    monkeypatch.setattr(store_mod.Store, "__init__", lambda self, *a, **k: None)
    monkeypatch.setattr(store_mod.Store, "close", lambda self: None)
    monkeypatch.setattr(store_mod.Store, "compare", lambda self, *a, **k: degenerate)
    monkeypatch.setattr(store_mod.Store, "shield_side",
                        lambda self, run_id: store_mod.shield_side(run_id, "off", []))
    res = CliRunner().invoke(app, ["results", "compare", "A", "B", "--metric", "safe",
                                   "--db", str(tmp_path / "x.duckdb")])
    assert res.exit_code == 0, res.output
    last = res.stdout.strip().splitlines()[-1]
    assert last == f"difference B - A = -1.0000; {degenerate.degenerate}"
    assert "% CI [" not in res.stdout and "Z = " not in res.stdout


def test_a_version_2_store_gains_the_until_tables(tmp_path, runs):
    """A store written before `run --until`: read-only it shows empty until tables, a
    writable open creates them and keeps every run stored."""
    db = tmp_path / "v2.duckdb"
    with Store(db) as s:
        s.ingest(runs["careful"].path)
    con = duckdb.connect(str(db))
    con.execute("DROP TABLE until_results")
    con.execute("DROP TABLE until_evidence")
    con.execute("UPDATE robosafe_schema SET version = 2")
    con.close()
    with Store(db, read_only=True) as s:
        assert s.until_results("careful") == [] and len(s.episodes("careful")) == 12
    with Store(db) as s:
        assert s.con.execute("SELECT version FROM robosafe_schema").fetchone() == (3,)
        assert s.until_evidence("careful") == [] and s.run_ids() == ["careful"]


def test_a_version_1_store_is_read_and_upgraded(tmp_path, runs):
    """A store written before the shield columns: read-only it reads them as NULL, a writable
    open adds them (the episodes stored then keep NULL) and stores new counts."""
    db = tmp_path / "v1.duckdb"
    with Store(db) as s:
        s.ingest(runs["careful"].path)
    con = duckdb.connect(str(db))  # back to version 1: no shield columns
    con.execute("ALTER TABLE episodes DROP COLUMN interventions")
    con.execute("ALTER TABLE episodes DROP COLUMN shield_warnings")
    con.execute("DROP TABLE until_results")  # nor the --until tables of version 3
    con.execute("DROP TABLE until_evidence")
    con.execute("UPDATE robosafe_schema SET version = 1")
    con.close()
    with Store(db, read_only=True) as s:
        eps = s.episodes("careful")
        assert len(eps) == 12 and {e["interventions"] for e in eps} == {None}
        assert s.runs()[0].interventions_per_episode is None
        assert s.until_results("careful") == [] and s.until_evidence("careful") == []
    with Store(db) as s:
        assert s.con.execute("SELECT version FROM robosafe_schema").fetchone() == (3,)
        assert s.until_results("careful") == []
        assert {e["interventions"] for e in s.episodes("careful")} == {None}
