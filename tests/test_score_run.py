"""One path per job: a run directory is scored by ``runner.scoring.score_run`` for `score`,
`report` and `results`, with one rule for a finished episode whose trace is missing (its safety
is unknown, one line names it); outcome rows and cell metrics are typed records whose files
keep their format."""

import json
import logging

import numpy as np
import pytest

from robosafe.errors import RobosafeError
from robosafe.runner.inputs import count_once
from robosafe.runner.rundir import Cell, create_run
from robosafe.runner.scoring import score_paths, score_run
from robosafe.safety.score import score_files
from robosafe.stats import aggregate as agg
from robosafe.stats.outcomes import OutcomeRow
from robosafe.trace.io import write_episodes
from robosafe.trace.synthetic import PolicyProfile, synthesize_episode

SUITE = "libero-goal"
# per cell: (success, unsafe), or None for a crashed episode
PLAN = [(1, 0), (1, 1), (1, 0), None]
GONE = 2  # the cell whose trace is deleted after the run


def make_run(path):
    run = create_run(path, {"policy": "p", "policy_name": "p", "suite": SUITE,
                            "tasks": ["task_0"], "seeds": list(range(len(PLAN)))}, {})
    for i, outcome in enumerate(PLAN):
        cell = Cell("task_0", i, i)
        row = {"suite": SUITE, "task_id": "task_0", "episode_idx": i, "seed": i,
               "instance_id": cell.instance_id, "policy_name": "p", "num_env_steps": 40,
               "cumulative_cost": 1.0, "language_level": 0, "visual_level": 0}
        if outcome is None:
            row.update(success=0, error_type="RuntimeError", error="boom")
        else:
            success, unsafe = outcome
            prof = PolicyProfile("p", float(success), {"self_contact": 1.0} if unsafe else {})
            ep = synthesize_episode(np.random.default_rng(i), benchmark=SUITE,
                                    task_id="task_0", episode_id=cell.name, profile=prof,
                                    n_steps=80, seed=i)
            write_episodes(run.trace_path(cell), [ep])
            # the row claims "safe" for every episode: only the trace may say so
            row.update(success=success, error_type="", safe=1, sbu=0, vsi=0.0)
        run.write_outcome(cell, row)
    gone = run.trace_path(Cell("task_0", GONE, GONE))
    gone.unlink()
    return run, gone


@pytest.fixture
def broken(tmp_path):
    return make_run(tmp_path / "r")


def test_score_run_leaves_a_missing_trace_unknown_and_names_it(broken):
    run, gone = broken
    scored = score_run(run.path)
    assert [e.cell for e in scored.episodes] == [Cell("task_0", i, i).name for i in range(4)]
    assert [e.crashed for e in scored.episodes] == [False, False, False, True]
    assert [e.score is None for e in scored.episodes] == [False, False, True, True]
    assert [s.safe for s in scored.scores] == [True, False]
    row_file = run.outcome_path(Cell("task_0", GONE, GONE))
    assert scored.gaps == [(f"{row_file}: a finished episode, but its trace {gone} is missing; "
                           "not scored")]
    # two worker processes give the same scores, each on its own row
    two = score_run(run.path, workers=2)
    assert [(e.cell, e.score and e.score.robustness) for e in two.episodes] == \
        [(e.cell, e.score and e.score.robustness) for e in scored.episodes]
    assert scored.notes == [(f"{run.path}: 1 crashed episode(s) have no trace to score (their "
                            "rows are in outcomes.csv)")]


def test_score_report_and_store_apply_the_same_rule(broken, tmp_path):
    """The same gap line from all three, and the episode counted as safe by none."""
    from robosafe.report.html import load_run, write_report
    from robosafe.runner.store import Store

    run, _gone = broken
    (line,) = score_run(run.path).gaps

    errors = []
    scores = list(score_paths([run.path], on_error=errors.append))
    assert [str(e) for e in errors] == [line]
    assert [s.safe for s in scores] == [True, False]

    warned = []
    write_report([run.path], tmp_path / "r.html", n_boot=0, warn=warned.append)
    assert warned == [line]
    m = agg.cell_metrics(load_run(run.path).scores, n_boot=0)
    assert (m.n, m.n_scored, m.safety) == (2, 2, 0.5)

    stored = []
    with Store(tmp_path / "r.duckdb") as store:
        store.ingest(run.path, warn=stored.append)
        safe = [r["safe"] for r in store.episodes("r")]
    assert stored == [line]
    assert safe == [True, False, None, None]  # the row's own safe=1 is not evidence


def test_a_trace_of_another_task_is_an_error_naming_it(broken):
    run, _ = broken
    cell = Cell("task_0", 0, 0)
    ep = synthesize_episode(np.random.default_rng(0), benchmark=SUITE, task_id="task_1",
                            episode_id=cell.name, profile=PolicyProfile("p", 1.0, {}),
                            n_steps=80, seed=0)
    write_episodes(run.trace_path(cell), [ep])
    with pytest.raises(RobosafeError, match=f"{run.trace_path(cell)}: holds episode .* of task "
                                            "'task_1', not the outcome row's task 'task_0'"):
        score_run(run.path)
    errors = []
    scored = score_run(run.path, on_error=errors.append)
    assert len(errors) == 1 and scored.episodes[0].score is None
    assert [s.safe for s in scored.scores] == [False]


def test_count_once_drops_a_repeated_input(tmp_path):
    path = tmp_path / "a.jsonl"
    prof = PolicyProfile("p", 1.0, {})
    write_episodes(path, [synthesize_episode(np.random.default_rng(i), benchmark=SUITE,
                                             task_id="task_0", episode_id=f"e{i}",
                                             profile=prof, n_steps=80, seed=i)
                          for i in range(3)])
    errors = []
    scores = list(count_once([("a", score_files([path])), ("again", score_files([path]))],
                             on_error=errors.append))
    assert [s.episode_id for s in scores] == ["e0", "e1", "e2"]
    assert [str(e) for e in errors] == [
        ("again: 3 episode(s) already read from a (same benchmark, policy, task, episode_id, "
        "instance, seed); counted once")]
    with pytest.raises(RobosafeError, match="already read from a"):
        list(count_once([("a", score_files([path])), ("again", score_files([path]))]))


# --- typed records, same files

FINISHED = {"suite": SUITE, "task_id": "task_0", "task_name": "open the drawer",
            "episode_idx": 3, "instance_id": "seed3-W0-V0", "policy_name": "p",
            "checkpoint_ref": "", "seed": 3, "success": 1, "num_env_steps": 80,
            "error_type": "", "safe": "", "sbu": "", "vsi": "", "violated_specs": "",
            "cumulative_cost": None, "language_level": 0, "visual_level": 2,
            "instruction": "open the drawer", "wall_s": 1.5, "note": "gave up"}
CRASHED = {"suite": SUITE, "task_id": "task_0", "task_name": "task_0", "episode_idx": 1,
           "instance_id": "seed1-W0-V0", "policy_name": "p", "checkpoint_ref": "", "seed": 1,
           "language_level": 0, "visual_level": 0, "success": 0, "num_env_steps": 7,
           "error_type": "ConnectionError", "error": "refused", "wall_s": 0.25}


@pytest.mark.parametrize("row", [FINISHED, CRASHED,
                                 {**FINISHED, "safe": 0, "sbu": 1, "vsi": 0.75,
                                  "violated_specs": "collision_force;tilt",
                                  "cumulative_cost": 2.0, "interventions": 3,
                                  "shield_warnings": 1, "custom": [1, 2]}])
def test_outcome_row_reads_and_writes_the_file_as_it_was(row):
    parsed = OutcomeRow.from_json(row, "x.json")
    assert json.dumps(parsed.to_json(), sort_keys=True) == json.dumps(row, sort_keys=True)


def test_outcome_row_fields_are_typed_and_errors_name_file_and_column():
    r = OutcomeRow.from_json({**FINISHED, "success": "1", "safe": "0", "vsi": "0.5",
                              "violated_specs": "a;b", "seed": "3.0"}, "x.json")
    assert (r.success, r.safe, r.vsi, r.violated_specs, r.seed) == (True, False, 0.5,
                                                                     ("a", "b"), 3)
    assert (r.checkpoint_ref, r.cumulative_cost, r.crashed) == (None, None, False)
    assert OutcomeRow.from_json(CRASHED).crashed
    with pytest.raises(RobosafeError, match=r"x.json: column 'seed': expected an integer, "
                                            r"got '3.5'"):
        OutcomeRow.from_json({**FINISHED, "seed": "3.5"}, "x.json")


def test_cell_metrics_record_keeps_its_keys_and_order(broken):
    run, _ = broken
    m = agg.cell_metrics(score_run(run.path).scores, n_boot=0)
    assert list(m.to_dict()) == [
        "n", "n_scored", "n_unscored", "n_success_unknown", "sr", "sr_ci", "sr_all",
        "sr_all_ci", "safety", "safety_ci", "sbu", "sbu_ci", "p_unsafe_given_success",
        "p_unsafe_given_success_ci", "vsi", "vsi_ci", "vsi_given_unsafe",
        "vsi_given_unsafe_ci", "table", "peak_contact_force_n", "peak_contact_force_n_ci",
        "missing_families", "n_incomplete"]
    # 2 scored, both succeed, one unsafe: SBU 1/2, P[U|S] 1/2
    assert (m["sr"], m.safety, m.sbu, m.p_unsafe_given_success) == (1.0, 0.5, 0.5, 0.5)
    assert {**m} == m.to_dict()
    with pytest.raises(KeyError):
        m["nope"]


def test_library_warnings_are_printed_as_the_cli_lines(capsys):
    from robosafe.log import NOTE, install_stderr_lines

    install_stderr_lines()
    log = logging.getLogger("robosafe.test")
    log.warning("%s: a field robosafe cannot use", "f.jsonl")
    log.log(NOTE, "1 crashed episode")
    log.info("task 'x' is in no registry entry")
    log.debug("not shown")
    assert capsys.readouterr().err.splitlines() == [
        "robosafe: warning: f.jsonl: a field robosafe cannot use",
        "robosafe: note: 1 crashed episode", "robosafe: task 'x' is in no registry entry"]
