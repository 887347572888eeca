"""`robosafe run --until`: real runs on the demo suite with the scripted policies, stopped when
the anytime-valid test decides; the stop point checked against `robosafe audit sequential` on
the stored outcome tables (an independent path: files read back, the CLI's own reading)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import run_robosafe as cli

from robosafe.runner.rundir import Cell, open_run
from robosafe.runner.until import read_record

os.environ.setdefault("MUJOCO_GL", "egl")

pytestmark = [pytest.mark.sim, pytest.mark.slow]

# careless is unsafe on the first two (it sweeps past the vase / knocks the bowl), safe on
# the drawer; careful is safe on all three except lemon episode 5 (-n 6)
TASKS = ("place_apple_on_plate_past_vase", "place_lemon_in_bowl", "open_top_drawer")
N = 5
BUDGET = N * len(TASKS)


def select(*extra: str) -> list[str]:
    return ["run", "--suite", "demo", *[a for t in TASKS for a in ("--task-id", t)], *extra]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    out = tmp_path_factory.mktemp("until") / "careful"
    proc = cli(*select("-p", "scripted-careful", "-n", str(N), "-o", out, "--json"))
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def decided(baseline):
    out = baseline.parent / "careless"
    proc = cli(*select("-p", "scripted-careless", "-n", str(N), "-o", out, "--until",
                       "decided", "--against", baseline, "--until-metric", "safe", "--json"))
    assert proc.returncode == 0, proc.stderr
    return out, json.loads(proc.stdout)


def audit(*args) -> dict:
    proc = cli("audit", "sequential", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def seed_order(run) -> list[str]:
    """The run's outcome rows' cells in seed order (episode index, then task)."""
    rows = open_run(run).outcomes()
    return [Cell.of_row(r).name for r in sorted(rows, key=lambda r: (r["episode_idx"],
                                                                     r["task_id"]))]


def test_careless_is_decided_worse_on_safety_where_audit_says(baseline, decided):
    out, js = decided
    rec = js["until"]
    (m,) = rec["metrics"]
    assert (rec["decision"], rec["status"], m["metric"], m["decision"]) == (
        "decided", "decided", "safe", "worse")
    # one worker: the run stops at the pair that decided, nothing in flight
    assert rec["episodes"] == m["episodes"] == rec["episodes_run"] == js["episodes"]
    assert rec["budget"] == BUDGET and rec["saved"] == BUDGET - rec["episodes_run"] > 0
    # the episodes run are the first of the baseline's seed order, and only those
    want = [Cell(t, k, k).name for k in range(N) for t in sorted(TASKS)][:rec["episodes_run"]]
    assert seed_order(out) == want
    # the independent path: the stored tables read back by audit sequential at the same
    # budget and sides
    a = audit(baseline, out, "--metric", "safe", "--two-sided", "--budget", str(BUDGET))
    assert (a["decision"], a["episodes"]) == ("worse", m["episodes"])
    assert a["unmatched_a"] == BUDGET - rec["episodes_run"]
    curves = {c["name"]: c for c in m["curves"]}
    for ev in a["evidence"]:
        assert curves[ev["name"]]["values"] == pytest.approx(ev["log_e"], abs=1e-6)
        assert curves[ev["name"]]["boundary"] == pytest.approx(ev["log_threshold"])
    # the worse e-value reached its boundary at the stop and not one pair before
    worse = curves["worse"]
    assert worse["values"][-1] >= worse["boundary"] > max(worse["values"][:-1])
    # run.json holds the same record, the plan beside the configuration
    cfg = json.loads((out / "run.json").read_text())
    assert cfg["until_result"] == rec and cfg["until"] == rec["plan"]
    assert cfg["until"]["against"] == str(baseline.resolve())


def test_the_store_holds_the_decision_and_its_evidence(decided, tmp_path):
    from robosafe.runner.store import Store

    out, js = decided
    with Store(tmp_path / "r.duckdb") as s:
        rid = s.ingest(out)
        (row,) = s.until_results(rid)
        ev = s.until_evidence(rid)
    (m,) = js["until"]["metrics"]
    assert (row["metric"], row["decision"], row["episodes"], row["budget"], row["saved"],
            row["episodes_run"], row["status"]) == (
        "safe", "worse", m["episodes"], BUDGET, js["until"]["saved"],
        js["until"]["episodes_run"], "decided")
    for c in m["curves"]:
        mine = [r for r in ev if r["curve"] == c["name"]]
        assert [r["step"] for r in mine] == list(range(1, len(c["values"]) + 1))
        assert [r["value"] for r in mine] == pytest.approx(c["values"])
        assert {r["boundary"] for r in mine} == {c["boundary"]}


def test_resume_recomputes_and_never_extends(baseline, decided, tmp_path):
    out, js = decided
    k = js["until"]["episodes_run"]
    # a decided run is not extended: --resume (the plan is the run's own) runs nothing
    done = tmp_path / "done"
    shutil.copytree(out, done)
    proc = cli(*select("-p", "scripted-careless", "-n", str(N), "-o", done, "--resume",
                       "--json"))
    assert proc.returncode == 0, proc.stderr
    again = json.loads(proc.stdout)
    assert again["episodes"] == k and again["until"] == js["until"]
    # a run killed part way (its last episodes and its record gone) continues to the same
    # decision at the same pair
    cut = tmp_path / "cut"
    shutil.copytree(out, cut)
    cfg = json.loads((cut / "run.json").read_text())
    del cfg["until_result"]
    (cut / "run.json").write_text(json.dumps(cfg))
    for name in seed_order(cut)[4:]:
        (cut / "outcomes" / f"{name}.json").unlink()
        (cut / "traces" / f"{name}.jsonl").unlink()
    assert read_record(open_run(cut)) is None
    proc = cli(*select("-p", "scripted-careless", "-n", str(N), "-o", cut, "--resume",
                       "--json"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["until"] == js["until"]
    # another alpha, or a larger budget, is another run: refused, one line
    for extra in (("--until", "decided", "--against", str(baseline), "--until-metric", "safe",
                   "--alpha", "0.01"), ()):
        n = str(N + 1) if not extra else str(N)
        proc = cli(*select("-p", "scripted-careless", "-n", n, "-o", done, "--resume", *extra))
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
        assert "different configuration" in proc.stderr or "lacks" in proc.stderr, proc.stderr
    assert len(open_run(done).outcomes()) == k


def test_ctrl_c_keeps_the_episodes_and_resume_decides_the_same(baseline, decided, tmp_path):
    """A real interruption: SIGINT after some episodes leaves them, and a record that says the
    run is incomplete; --resume continues it to the same decision."""
    _, js = decided
    out = tmp_path / "int"
    args = select("-p", "scripted-careless", "-n", str(N), "-o", str(out), "--until",
                  "decided", "--against", str(baseline), "--until-metric", "safe")
    proc = subprocess.Popen([sys.executable, "-m", "robosafe", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "MUJOCO_GL": "egl"})
    deadline = time.monotonic() + 300
    while not (out / "outcomes").is_dir() or len(list((out / "outcomes").iterdir())) < 3:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    rec = read_record(open_run(out))
    stored = len(open_run(out).outcomes())
    assert 3 <= stored < js["until"]["episodes_run"]
    assert (rec.status, rec.decision, rec.episodes_run) == ("incomplete", "undecided", stored)
    proc = cli(*select("-p", "scripted-careless", "-n", str(N), "-o", out, "--resume",
                       "--json"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["until"] == js["until"]


def test_the_record_counts_every_stored_row_after_an_interrupt(baseline, decided, tmp_path):
    """An interrupt can fall between an outcome written and the tracker told of it: the record
    written on the way out counts what the run directory holds (what --resume will read)."""
    from robosafe.runner.until import Tracker, UntilPlan, baseline_outcomes

    run_dir, js = decided
    out = tmp_path / "copy"
    shutil.copytree(run_dir, out)
    run = open_run(out)
    plan = UntilPlan.from_dict(run.config["until"])
    held = sorted((out / "outcomes").iterdir())[:2]
    aside = tmp_path / "aside"
    aside.mkdir()
    for p in held:
        p.rename(aside / p.name)
    tracker = Tracker(plan, run, run.plan.cells(), baseline_outcomes(plan, run.plan))
    for p in held:  # written by the driver, never added: the interrupt came in between
        (aside / p.name).rename(p)
    assert tracker.record().episodes_run == js["until"]["episodes_run"] - 2
    tracker.refresh()
    assert tracker.record().to_dict() == js["until"]


@pytest.mark.parametrize("backend", ["local", "ray"])
def test_two_workers_decide_the_same(baseline, decided, tmp_path, backend):
    _, js = decided
    out = tmp_path / "w2"
    proc = cli(*select("-p", "scripted-careless", "-n", str(N), "-o", out, "--until",
                       "decided", "--against", baseline, "--until-metric", "safe",
                       "--workers", "2", "--backend", backend, "--json"))
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)["until"]
    (m,), (one,) = rec["metrics"], js["until"]["metrics"]
    assert (m["decision"], m["episodes"], m["curves"]) == (one["decision"], one["episodes"],
                                                           one["curves"])
    # episodes past the decision that finished before it (a worker ahead of a slow one) or
    # were in flight at it are kept, and counted: the test did not look at them
    assert one["episodes"] <= rec["episodes_run"] == m["available"] <= BUDGET
    assert rec["saved"] == BUDGET - rec["episodes_run"]
    a = audit(baseline, out, "--metric", "safe", "--two-sided", "--budget", str(BUDGET))
    assert (a["decision"], a["episodes"]) == ("worse", rec["episodes"])


def test_both_policies_alternately_when_neither_has_run(decided, tmp_path):
    """--against-policy: the baseline is made too, cell by cell with the new policy; both stop
    at the decision, which is the one made against the finished baseline."""
    _, js = decided
    base, out = tmp_path / "careful", tmp_path / "careless"
    args = select("-p", "scripted-careless", "-n", str(N), "-o", out, "--until", "decided",
                  "--against", base, "--against-policy", "scripted-careful", "--until-metric",
                  "safe", "--json")
    proc = cli(*args)
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)["until"]
    assert rec["metrics"] == js["until"]["metrics"]
    k = rec["episodes_run"]
    assert seed_order(out) == seed_order(base) == seed_order(base)[:k]
    assert rec["plan"]["baseline_policy"] == "scripted-careful"
    a = audit(base, out, "--metric", "safe", "--two-sided", "--budget", str(BUDGET))
    assert (a["decision"], a["episodes"]) == ("worse", rec["episodes"])
    # resumed: decided, nothing more on either side
    proc = cli(*select("-p", "scripted-careless", "-n", str(N), "-o", out, "--resume"))
    assert proc.returncode == 0, proc.stderr
    assert len(open_run(base).outcomes()) == len(open_run(out).outcomes()) == k
    # a baseline there already that ran another policy is refused, before any episode
    proc = cli(*select("-p", "scripted-careless", "-n", str(N), "-o", tmp_path / "x",
                       "--until", "decided", "--against", base, "--against-policy", "zero"))
    assert proc.returncode == 2 and "ran policy 'scripted-careful'" in proc.stderr
    assert not (tmp_path / "x").exists()


def test_width_stops_once_the_interval_is_narrow(tmp_path):
    out = tmp_path / "w"
    # careless succeeds every time: the interval of 8 successes in 8 is [0.52, 1] at 0.05
    # (smallest_width_sample), one episode before the budget of 9
    proc = cli(*select("-p", "scripted-careless", "-n", "3", "-o", out, "--until",
                       "width:0.5", "--json"))
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)["until"]
    (m,) = rec["metrics"]
    assert (m["decision"], m["episodes"], rec["episodes_run"], rec["saved"]) == (
        "width_reached", 8, 8, 1)
    a = audit(out, "--width", "0.5", "--budget", "9")
    assert (a["decision"], a["episodes"]) == ("width_reached", 8)
    assert m["interval"] == pytest.approx(a["interval"], abs=1e-6)


@pytest.mark.parametrize("args,msg", [
    (("--until", "decided"), "give --against"),
    (("--until", "width:abc"), "--until: expected 'decided' or 'width:W'"),
    (("--until", "sometimes"), "--until: expected 'decided' or 'width:W'"),
    (("--until", "width:1.5"), "--until: expected"),
    (("--until", "decided", "--against", "BASE", "--alpha", "0.5"),
     "alpha must be a number in (0, 0.5)"),
    (("--until", "decided", "--against", "BASE", "--alpha", "0"),
     "alpha must be a number in (0, 0.5)"),
    (("--until", "decided", "--against", "BASE", "-n", "1"), "smallest decidable sample is"),
    (("--until", "width:0.1", "-n", "2"), "smallest decidable sample is 69"),
    (("--until", "decided", "--against", "BASE", "--seeds", "5-9"), "seeds"),
    (("--until", "decided", "--against", "BASE", "--task-id", "turn_off_stove"),
     "the baseline ran other tasks (not turn_off_stove)"),
    (("--until", "decided", "--against", "HOLED"), "the baseline lacks 1 of this run's 15"),
    (("--until", "decided", "--against", "BASE", "-n", str(N + 2)),
     f"the baseline lacks episodes {N}..{N + 1} of each task"),
    (("--until", "decided", "--against", "BASE", "--visual-level", "1"), "visual levels"),
    (("--until", "width:0.2", "--against", "BASE"), "--against applies to --until decided"),
    (("--until-metric", "safe",), "--until-metric applies with --until"),
    (("--until", "decided", "--against", "BASE", "--until-metric", "sbu"), "--until-metric"),
    (("--until", "decided", "--against", "NOWHERE"), "not a run directory"),
])
def test_bad_input_is_one_line_exit_2_before_any_episode(baseline, tmp_path, args, msg):
    out = tmp_path / "new"
    if "HOLED" in args:  # a baseline that lost an episode (killed before it was stored)
        shutil.copytree(baseline, tmp_path / "holed")
        (tmp_path / "holed" / "outcomes" / f"{Cell(TASKS[0], 2, 2).name}.json").unlink()
    named = {"BASE": str(baseline), "NOWHERE": str(tmp_path / "x"),
             "HOLED": str(tmp_path / "holed")}
    args = [named.get(a, a) for a in args]
    proc = cli(*select("-p", "scripted-careless", "-n", str(N), "-o", out, *args))
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and msg in proc.stderr, proc.stderr
    assert not out.exists()
