"""Claimed-gain classification from CSV and the exact paired test from outcome tables."""

import json
import math

import numpy as np
import pytest
from conftest import run_robosafe as run

from robosafe.audit.significance import classify_claims, paired_outcome_test, summary
from robosafe.errors import RobosafeError
from robosafe.stats.cutoffs import classify_gain


def write(path, text):
    path.write_text(text.strip() + "\n")
    return path


def test_claims_are_rounded_and_classified(tmp_path):
    p = write(tmp_path / "c.csv", """
benchmark,tasks,samples,previous,new,max_score,design,unit
LIBERO,10,50,96.4,97.2,,paired,
LIBERO,10,50,0.90,0.97,,,
CALVIN,1,1000,4.05,4.10,5,paired,
RoboCasa,24,50,20,35,,independent,percent
""")
    rows = classify_claims(p)
    assert [(r.previous_count, r.new_count) for r in rows] == [(482, 486), (450, 485),
                                                             (4050, 4100), (240, 420)]
    for r in rows:
        c = classify_gain(r.previous_count, r.new_count, r.tasks, r.samples, r.max_score,
                          r.alpha, paired=r.design == "paired")
        assert r.label == c.label
    assert rows[1].label == "provably_significant"
    assert not rows[3].sharp and rows[0].sharp
    assert summary(rows)["LIBERO"]["provably_significant"] == 1


def test_claim_errors_name_file_line_and_column(tmp_path):
    p = write(tmp_path / "c.csv", "benchmark,tasks,previous,new\nx,1,0.5,0.6")
    with pytest.raises(RobosafeError, match=r"c.csv:1: missing column\(s\) 'samples'"):
        classify_claims(p)
    p = write(tmp_path / "d.csv", """
benchmark,tasks,samples,previous,new
ok,10,50,0.5,0.6
bad,10,1,0.5,0.6
bad,10,50,0.5,abc
bad,10,50,0.5,150
""")
    errors = []
    rows = classify_claims(p, on_error=errors.append)
    assert [r.benchmark for r in rows] == ["ok"]
    msgs = [str(e) for e in errors]
    assert "d.csv:3" in msgs[0] and "S" in msgs[0]
    assert "d.csv:4: column 'new': expected a number" in msgs[1]
    assert "d.csv:5: column 'new': score 1.5 is outside [0, 1]" in msgs[2]  # 150 read as %
    assert len(errors) == 3


@pytest.mark.slow
def test_audit_significance_cli(tmp_path):
    p = write(tmp_path / "c.csv", """
benchmark,tasks,samples,previous,new
LIBERO,10,50,90.0,97.0
LIBERO,10,50,96.4,97.2
SimplerEnv,4,24,0.6,0.5
""")
    fig = tmp_path / "fig3.png"
    proc = run("audit", "significance", str(p), "--figure", str(fig), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["summary"]["LIBERO"]["provably_significant"] == 1
    assert data["summary"]["SimplerEnv"]["no_improvement"] == 1
    assert fig.read_bytes()[:4] == b"\x89PNG"
    bad = write(tmp_path / "bad.csv", "benchmark,tasks,samples,previous,new\nx,10,50,0.5,zz\n"
                "y,10,50,0.5,0.6")
    proc = run("audit", "significance", str(bad))
    assert proc.returncode == 2 and "bad.csv:2" in proc.stderr and "y" in proc.stdout


def outcomes(path, table):
    rows = ["suite,task_id,instance_id,success"]
    for t, scores in enumerate(table):
        rows += [f"s,task_{t},i{i},{v}" for i, v in enumerate(scores)]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_paired_outcome_test_matches_the_formula(tmp_path):
    ya = np.array([[1, 0, 1, 1, 0], [0, 0, 1, 0, 1]])
    yb = np.array([[1, 1, 1, 1, 0], [1, 0, 1, 1, 1]])
    a, b = outcomes(tmp_path / "a.csv", ya), outcomes(tmp_path / "b.csv", yb)
    r = paired_outcome_test(a, b)
    S = ya.shape[1]
    d = (yb - ya).sum(axis=1)
    s = ((yb - ya) ** 2).sum(axis=1)
    z = (yb.sum() - ya.sum()) / math.sqrt(S / (S - 1) * (s - d**2 / S).sum())
    assert r.tasks == 2 and r.samples == 5
    assert r.wald.statistic == pytest.approx(z)
    assert r.wald.reject == (z > 1.6448536269514722)
    proc = run("audit", "paired", str(a), str(b), "--json")
    assert json.loads(proc.stdout)["wald"]["statistic"] == pytest.approx(z)


def test_paired_needs_equal_samples_per_task(tmp_path):
    a = outcomes(tmp_path / "a.csv", [[1, 0, 1], [0, 1]])
    b = outcomes(tmp_path / "b.csv", [[1, 1, 1], [1, 1]])
    proc = run("audit", "paired", str(a), str(b))
    assert proc.returncode == 2 and "same S per task" in proc.stderr


def test_unpaired_rows_are_an_error(tmp_path):
    a = outcomes(tmp_path / "a.csv", [[1, 0, 1], [0, 1, 1]])
    b = outcomes(tmp_path / "b.csv", [[1, 1, 1], [1, 1]])
    proc = run("audit", "paired", str(a), str(b))
    assert proc.returncode == 2
    assert "a.csv:7: unpaired row" in proc.stderr and "instance_id='i2'" in proc.stderr


def test_reported_gain_rounded_to_zero_is_not_significant():
    """C.7 + C.5: 0.7005 vs 0.700 over N = 500 both round to 350 (L = 0); the paper reports a
    gain, and L <= c_alpha sqrt(Q_lo(0)) = 0, so no compatible table rejects: "not
    significant" (as the audit's reference labels it). A reported drop stays "no improvement"."""
    from robosafe.audit.significance import classify_claim

    row = {"benchmark": "b", "tasks": "10", "samples": "50", "previous": "0.700"}
    r = classify_claim({**row, "new": "0.7005"}, "x:2")
    assert (r.previous_count, r.new_count, r.gap_count) == (350, 350, 0)
    assert r.label == "provably_not_significant"
    assert classify_claim({**row, "new": "0.700"}, "x:3").label == "no_improvement"
    assert classify_claim({**row, "new": "0.69"}, "x:4").label == "no_improvement"


def test_stats_compare_equal_counts_json():
    """B = A has no gap: the JSON says so with null envelopes (was a NaN traceback)."""
    proc = run("stats", "compare", "--tasks", "10", "--samples", "50", "--baseline", "450",
               "--new", "450", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["label"] == "no_improvement" and data["gap_count"] == 0
    assert data["q_lo"] is None and data["q_hi"] is None


def _claims_csv(tmp_path, rows):
    p = tmp_path / "claims.csv"
    p.write_text("benchmark,tasks,samples,previous,new\n" + "\n".join(rows) + "\n")
    return p


def test_paper_figure_convention_rule():
    """The figure rule on the raw gain (gain, delta_exists, delta_forall): negative -> no
    improvement; zero, no delta_exists (C.3: +inf) or below delta_exists -> not significant;
    below delta_forall or no delta_forall (C.4: +inf) -> inconclusive; else significant."""
    from robosafe.audit.significance import figure_label

    assert figure_label(-0.001, 0.02, 0.05) == "no_improvement"
    assert figure_label(0.0, 0.02, 0.05) == "provably_not_significant"
    assert figure_label(0.0, 0.0, 0.0) == "provably_not_significant"
    assert figure_label(0.019, 0.02, 0.05) == "provably_not_significant"
    assert figure_label(0.02, 0.02, 0.05) == "indeterminate"
    assert figure_label(0.05, 0.02, 0.05) == "provably_significant"
    assert figure_label(0.03, 0.02, math.inf) == "indeterminate"
    assert figure_label(0.01, math.inf, math.inf) == "provably_not_significant"


def test_paper_figure_never_calls_impossible_or_zero_gains_significant(tmp_path):
    """LIBERO, T=10, S=50, N=500. 99.8 -> 100: A = 499 leaves RN - A = 1 count of headroom,
    below l*_exists(50) = 1 + floor(1.6449^2 * 50 / (49 + 1.6449^2)) = 1 + floor(2.617) = 3,
    so L_exists = +inf (C.3): no realisable outcome rejects. App. C: L = 1 <= c_alpha
    sqrt(Q_lo(1)) = 1.6616 * sqrt(0.98) = 1.645 -> not significant. 100 -> 100 is a zero gain
    (no improvement under App. C). Both were "provably significant" under the figure rule."""
    p = _claims_csv(tmp_path, ["LIBERO-Goal,10,50,99.8,100", "LIBERO-Goal,10,50,100,100"])
    app_c = classify_claims(p)
    fig = classify_claims(p, convention="paper-figure")
    assert [r.label for r in app_c] == ["provably_not_significant", "no_improvement"]
    assert [r.label for r in fig] == ["provably_not_significant", "provably_not_significant"]
    assert fig[0].delta_exists == math.inf and (fig[0].previous_count, fig[0].new_count) == (
        499, 500)


def test_paper_figure_without_delta_forall_is_inconclusive():
    """T=2, S=5, R=2 (N=10, RN=20), previous 1.6 -> A = 16, new 2.0 -> L = 4. l*_exists(5) =
    1 + floor(2.706 * 5 / (4 + 2.706)) = 3 <= 4 = RN - A, so delta_exists = 0.3; but no gap
    guarantees rejection (L_forall = +inf): at L = 4 the table with one 0 per task for A
    (delta = 2 once per task) has Q = 2 (4 - 4/5) = 6.4 and Z = 4 / sqrt(5/4 * 6.4) = 1.41 <
    1.645, while four +1 moves in one task give Q = 4 - 16/5 = 0.8, Z = 4 > 1.645. C.5:
    inconclusive; the figure rule used to say significant."""
    from robosafe.audit.significance import classify_claim_figure

    row = {"benchmark": "b", "tasks": "2", "samples": "5", "max_score": "2", "previous": "1.6",
           "new": "2.0"}
    r = classify_claim_figure(row, "x:2")
    assert (r.delta_exists, r.delta_forall) == (pytest.approx(0.3), math.inf)
    assert r.label == "indeterminate"
    c = classify_gain(16, 20, 2, 5, 2, 0.05)
    assert (c.label, c.q_lo, c.q_hi) == ("indeterminate", pytest.approx(0.8), pytest.approx(6.4))


def test_paper_figure_significant_implies_app_c_significant():
    """Every realisable (A, B) of T=2, S=5, R=2 and of T=3, S=4, R=1: whenever the figure rule
    says significant, App. C's exact C.5 on the same counts says every table rejects."""
    from robosafe.audit.significance import classify_claim_figure

    for T, S, R in ((2, 5, 2), (3, 4, 1)):
        N = T * S
        seen = set()
        for a in range(R * N + 1):
            for b in range(a, R * N + 1):
                row = {"benchmark": "b", "tasks": str(T), "samples": str(S),
                       "max_score": str(R), "unit": "fraction",
                       "previous": repr(a / N), "new": repr(b / N)}
                fig = classify_claim_figure(row, "x").label
                exact = classify_gain(a, b, T, S, R, 0.05).label
                seen.add(fig)
                if fig == "provably_significant":
                    assert exact == "provably_significant", (T, S, R, a, b)
                if exact in ("no_improvement", "provably_not_significant"):
                    assert fig == "provably_not_significant", (T, S, R, a, b)
        assert "provably_significant" in seen


@pytest.mark.slow
def test_paper_figure_convention_differs_from_app_c_where_described(tmp_path):
    """Worked case on LIBERO (T=10, S=50, N=500), previous 0.9 -> A = 450. A new score
    0.4 counts short of A + L_forall is rounded by C.7 up to A + L_forall (App. C:
    significant) but its raw gain is below delta_forall (Figure 3: inconclusive). An equal
    score is no improvement under App. C and not significant under the figure's rule."""
    from robosafe.stats.cutoffs import l_forall

    lf = l_forall(450, 10, 50, 1, 0.05)
    new = (450 + lf - 0.4) / 500
    p = _claims_csv(tmp_path, [f"libero_spatial,10,50,0.9,{new!r}", "LIBERO-Goal,10,50,0.9,0.9",
                               "LIBERO-10,10,50,0.9,0.9", "SimplerEnv,1,96,0.5,0.4"])
    app_c = classify_claims(p)
    fig = classify_claims(p, convention="paper-figure")
    assert app_c[0].label == "provably_significant" and fig[0].label == "indeterminate"
    assert app_c[1].label == "no_improvement" and fig[1].label == "provably_not_significant"
    assert [r.benchmark for r in fig] == ["LIBERO", "LIBERO", "LIBERO-10", "SimplerEnv"]
    assert (fig[3].tasks, fig[3].samples) == (4, 24) and "figure_design" in fig[3].extra
    assert summary(fig)["LIBERO"] == {"provably_significant": 0, "indeterminate": 1,
                                      "provably_not_significant": 1, "no_improvement": 0}
    proc = run("audit", "significance", str(p), "--convention", "paper-figure", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["summary"]["LIBERO"]["indeterminate"] == 1
    bad = run("audit", "significance", str(p), "--convention", "nope")
    assert bad.returncode == 2 and "--convention" in bad.stderr
