"""Outcome disagreement D (robosafe's own statistic for the audit's App. B.1 per-episode
outcome agreement target) on hand-worked outcome tables."""

import json

import numpy as np
import pytest
from conftest import run_robosafe as run

from robosafe.audit.disagreement import disagreement, instance_disagreement
from robosafe.errors import RobosafeError
from robosafe.stats.intervals import bootstrap_mean_interval


def table(values, ids=None):
    ids = ids or [f"i{n}" for n in range(len(values))]
    return [{"suite": "libero-goal", "task_id": "t", "instance_id": i, "success": v}
            for i, v in zip(ids, values)]


def test_three_runs_hand_worked():
    """Runs x instances: i0 = 1,1,1; i1 = 1,0,1; i2 = 0,0,1; i3 = 0,0,0. Pairs (1,2): differ on
    i1 -> 1/4; (1,3): i2 -> 1/4; (2,3): i1, i2 -> 2/4. D = (1/4 + 1/4 + 1/2) / 3 = 1/3, and per
    instance d = 0, 2/3, 2/3, 0 (mean 1/3)."""
    runs = [table([1, 1, 0, 0]), table([1, 0, 0, 0]), table([1, 1, 1, 0])]
    r = disagreement(runs, n_boot=2000, seed=1)
    assert r.d == pytest.approx(1 / 3)
    assert [v for _, _, v in r.pairwise] == pytest.approx([0.25, 0.25, 0.5])
    d_i = np.array([0, 2 / 3, 2 / 3, 0])
    assert r.ci == bootstrap_mean_interval(d_i, n_boot=2000, seed=1)
    assert r.ci.low <= r.d <= r.ci.high and r.n_shared == 4


def test_binary_closed_form_and_scores():
    y = np.array([[1, 1, 0, 0, 0], [1, 1, 1, 1, 1]])
    # m = 2 of K = 5: 2 * 3 / 10 = 0.6; unanimous: 0
    assert instance_disagreement(y).tolist() == pytest.approx([0.6, 0.0])
    # bounded scores: only equal values agree (pairs: (0,1) (0,2) (1,2) -> 2 of 3 differ)
    assert instance_disagreement(np.array([[2, 2, 3]])).tolist() == pytest.approx([2 / 3])


def test_unshared_instances_are_left_out_and_counted():
    r = disagreement([table([1, 0, 1], ["a", "b", "c"]), table([1, 1], ["a", "b"])], n_boot=10)
    assert r.n_shared == 2 and r.n_excluded == (1, 0) and r.d == pytest.approx(0.5)
    with pytest.raises(RobosafeError, match="share no instance"):
        disagreement([table([1], ["a"]), table([1], ["b"])])
    with pytest.raises(RobosafeError, match="at least two runs"):
        disagreement([table([1])])


@pytest.mark.slow
def test_cli(tmp_path):
    paths = []
    for k, vals in enumerate([[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0]]):
        p = tmp_path / f"run{k}.csv"
        p.write_text("suite,task_id,instance_id,success\n"
                     + "".join(f"s,t,i{n},{v}\n" for n, v in enumerate(vals)))
        paths.append(str(p))
    proc = run("audit", "disagreement", *paths, "--json", "--bootstrap", "500")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["d"] == pytest.approx(1 / 3) and len(data["pairwise"]) == 3
    proc = run("audit", "disagreement", paths[0])
    assert proc.returncode == 2 and "at least two runs" in proc.stderr
