"""`robosafe stats` and `robosafe audit` commands as real processes."""

import json

import numpy as np
import pytest
from conftest import run_robosafe as run
from statsmodels.stats.proportion import confint_proportions_2indep


@pytest.mark.slow
def test_stats_wilson_and_newcombe():
    out = json.loads(run("stats", "wilson", "167", "200", "--json").stdout)
    assert [round(100 * x, 1) for x in out["ci"]] == [77.7, 88.0]  # SafeVLA-Bench Table 12
    out = json.loads(run("stats", "newcombe", "167", "200", "150", "200", "--json").stdout)
    lo, hi = confint_proportions_2indep(167, 200, 150, 200, method="newcomb", compare="diff")
    assert out["ci"] == pytest.approx([lo, hi])
    assert out["difference"] == pytest.approx(0.085)


@pytest.mark.parametrize("args,msg", [(("wilson", "5", "3"), "outside 0..3"),
                                      (("wilson", "1", "0"), "at least 1"),
                                      (("newcombe", "1", "2", "3", "2"), "second run"),
                                      (("wilson", "1", "2", "--confidence", "1.5"), "confidence")])
def test_stats_bad_counts_exit_2(args, msg):
    proc = run("stats", *args)
    assert proc.returncode == 2 and msg in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def write_outcomes(path, successes, suite="libero-goal", prefix="inst"):
    rows = ["suite,task_id,instance_id,success"]
    rows += [f"{suite},task_{i % 2},{prefix}_{i},{s}" for i, s in enumerate(successes)]
    path.write_text("\n".join(rows) + "\n")


@pytest.mark.slow
def test_audit_drift(tmp_path):
    cal, alt = tmp_path / "cal.csv", tmp_path / "alt.csv"
    write_outcomes(cal, [1] * 18 + [0] * 2)
    write_outcomes(alt, [1] * 12 + [0] * 8, prefix="fresh")  # a fresh sample: Newcombe
    data = json.loads(run("audit", "drift", str(cal), str(alt), "--json").stdout)
    overall = data["overall"]
    assert overall["drop"] == pytest.approx(0.9 - 0.6)
    lo, hi = confint_proportions_2indep(18, 20, 12, 20, method="newcomb", compare="diff")
    assert overall["drop_ci"] == pytest.approx([lo, hi])
    (tmp_path / "bad.csv").write_text("suite,task_id\nx,y\n")
    proc = run("audit", "drift", str(cal), str(tmp_path / "bad.csv"))
    assert proc.returncode == 2 and "bad.csv" in proc.stderr


def test_audit_diff(tmp_path):
    state = np.cumsum(np.ones((10, 3)), axis=0)
    other = state.copy()
    other[6:, 1] += 1e-3
    np.savez(tmp_path / "a.npz", state=state, action=np.zeros((10, 2)))
    np.savez(tmp_path / "b.npz", state=other, action=np.zeros((10, 2)))
    proc = run("audit", "diff", str(tmp_path / "a.npz"), str(tmp_path / "b.npz"), "--json")
    assert proc.returncode == 1
    chans = {c["name"]: c for c in json.loads(proc.stdout)["channels"]}
    assert chans["state"]["first_diff_step"] == 6
    assert chans["state"]["max_distance"] == pytest.approx(1e-3)
    assert chans["action"]["first_diff_step"] is None
    same = run("audit", "diff", str(tmp_path / "a.npz"), str(tmp_path / "a.npz"))
    assert same.returncode == 0 and "identical" in same.stdout


def test_stats_cutoffs_and_compare():
    from robosafe.stats.cutoffs import classify_gain, l_exists, l_forall

    out = json.loads(run("stats", "cutoffs", "--tasks", "10", "--samples", "50", "--baseline",
                         "450", "--json").stdout)
    assert out["l_exists"] == l_exists(450, 10, 50, 1, 0.05)
    assert out["l_forall"] == l_forall(450, 10, 50, 1, 0.05)
    assert out["delta_forall"] == pytest.approx(out["l_forall"] / 500)
    out = json.loads(run("stats", "compare", "--tasks", "10", "--samples", "50", "--baseline",
                         "450", "--new", "455", "--json").stdout)
    assert out["label"] == classify_gain(450, 455, 10, 50, 1, 0.05).label


@pytest.mark.parametrize("args,msg", [
    (("--samples", "1"), "--samples must be at least 2"),
    (("--alpha", "0.7"), "--alpha must be in (0, 0.5)"),
    (("--baseline", "501"), "outside 0..500")])
def test_stats_cutoffs_bad_input(args, msg):
    base = {"--tasks": "10", "--samples": "50", "--baseline": "450", "--alpha": "0.05"}
    base.update(dict(zip(args[::2], args[1::2])))
    proc = run("stats", "cutoffs", *[x for kv in base.items() for x in kv])
    assert proc.returncode == 2 and msg in proc.stderr


@pytest.mark.slow
def test_audit_drift_shared_instances_select_the_paired_interval(tmp_path):
    """Binary outcomes on the same 20 instances: the paired Wald interval over the 20
    differences, with a line saying why. Hand-worked: differences d = cal - alt are 1 on 6
    instances and 0 on 14: mean 0.3, sd^2 = (6 * 0.7^2 + 14 * 0.3^2) / 19 = 4.2 / 19,
    half-width 1.959964 * sqrt(4.2 / 19 / 20)."""
    cal, alt = tmp_path / "cal.csv", tmp_path / "alt.csv"
    write_outcomes(cal, [1] * 18 + [0] * 2)
    write_outcomes(alt, [1] * 12 + [0] * 8)
    data = json.loads(run("audit", "drift", str(cal), str(alt), "--json").stdout)
    half = 1.959963984540054 * np.sqrt(4.2 / 19 / 20)
    assert data["overall"]["method"] == "paired_wald" and data["overall"]["n_pairs"] == 20
    assert data["overall"]["drop_ci"] == pytest.approx([0.3 - half, 0.3 + half])
    assert data["design_note"].startswith("paired: both runs hold the same 20 instances")
    proc = run("audit", "drift", str(cal), str(alt))
    assert "paired: both runs hold the same 20 instances" in proc.stdout
    data = json.loads(run("audit", "drift", str(cal), str(alt), "--unpaired", "--json").stdout)
    assert data["overall"]["method"] == "newcombe"
