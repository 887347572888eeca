"""Creeping-overfitting drift (audit paper Sec. 5, App. A.2 Tables 5-8)."""

import csv
import dataclasses
import json

import numpy as np
import pytest

from robosafe.audit.drift import creeping_drift
from robosafe.errors import RobosafeError
from robosafe.stats.intervals import (
    newcombe_interval,
    paired_wald_interval,
    two_sample_wald_interval,
)
from robosafe.stats.outcomes import outcome_table, read_outcome_csv

COLS = ["suite", "task_id", "task_name", "episode_idx", "instance_id", "policy_name",
        "checkpoint_ref", "seed", "success", "num_env_steps", "error_type"]


def rows(suite, successes, *, task="0", instance=None, start=0, score=None):
    """Outcome rows; instance ids default to the episode index."""
    out = []
    for i, s in enumerate(successes):
        r = {"suite": suite, "task_id": task, "task_name": "stack", "episode_idx": start + i,
             "instance_id": instance(i) if instance else f"i{start + i}", "policy_name": "p",
             "checkpoint_ref": "ck", "seed": 0, "success": s, "num_env_steps": 60,
             "error_type": ""}
        if score is not None:
            r["score"] = score[i]
        out.append(r)
    return out


def write(path, records, columns=None):
    columns = columns or list(records[0].keys())
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(records)
    return path


def counts(k, n):
    return [1] * k + [0] * (n - k)


def test_table_5_row_from_csv(tmp_path):
    # CogACT-Base, reverse language: 60/288 calibration vs 28/288 altered; 24 grid start
    # states repeated 12 times, so instances repeat (allowed for the Newcombe comparison).
    def grid(i):
        return f"grid{i % 24}"

    cal = write(tmp_path / "cal.csv", rows("simpler", counts(60, 288), instance=grid))
    alt = write(tmp_path / "alt.csv", rows("simpler", counts(28, 288), instance=grid))
    rep = creeping_drift(cal, alt)
    r = rep.overall
    assert (r.method, r.metric, r.n_calibration, r.n_altered, r.n_pairs) == (
        "newcombe", "success", 288, 288, None)
    assert round(100 * r.drop, 2) == 11.11
    assert (round(100 * r.ci.low, 2), round(100 * r.ci.high, 2)) == (5.26, 16.95)
    assert rep.suite("simpler") == dataclasses.replace(r, scope="simpler")


def test_per_suite_and_pooled_overall():
    # the altered run is a fresh sample (new instances, Table 7): Newcombe
    cal = rows("a", counts(8, 10)) + rows("b", counts(3, 20), start=10)
    alt = rows("a", counts(5, 10), start=100) + rows("b", counts(4, 20), start=110)
    rep = creeping_drift(cal, alt)
    assert rep.design_note.startswith("unpaired: the runs share 0 of 30 / 30 instances")
    assert [r.scope for r in rep.suites] == ["a", "b"]
    a, b = rep.suite("a"), rep.suite("b")
    assert a.drop == pytest.approx(0.3) and b.drop == pytest.approx(-0.05)
    assert a.ci == newcombe_interval(8, 10, 5, 10)
    assert b.ci == newcombe_interval(3, 20, 4, 20)
    assert rep.overall.ci == newcombe_interval(11, 30, 9, 30)
    assert (rep.overall.calibration, rep.overall.altered) == pytest.approx((11 / 30, 9 / 30))
    json.dumps(rep.to_dict())


def test_scores_pair_on_shared_instances_only(tmp_path):
    # Tasks completed out of 5 on a shared manifest; i3 only in calibration, i9 only altered.
    cal = rows("calvin", [0] * 4, score=[5, 4, 3, 2])
    alt = rows("calvin", [0] * 3, score=[3, 4, 1]) + rows("calvin", [0], start=9, score=[0])
    alt = alt[::-1]  # row order must not matter: the join is on the key
    rep = creeping_drift(write(tmp_path / "c.csv", cal), write(tmp_path / "a.csv", alt))
    r = rep.overall
    assert (r.method, r.metric, r.n_pairs, r.n_calibration, r.n_altered) == (
        "paired_wald", "score", 3, 4, 4)
    # d = [2, 0, 2]: mean 4/3, sample var 4/3.
    assert r.drop == pytest.approx(4 / 3)
    assert (r.calibration, r.altered) == pytest.approx((4.0, 8 / 3))
    assert r.ci == paired_wald_interval(np.array([5, 4, 3]), np.array([3, 4, 1]))
    half = 1.959963984540054 * np.sqrt(4 / 3) / np.sqrt(3)
    assert (r.ci.low, r.ci.high) == pytest.approx((4 / 3 - half, 4 / 3 + half))


def test_join_key_includes_suite_and_task():
    # Same instance_id under different tasks are different instances.
    cal = rows("s", [1, 1], task="t1", score=[5, 5]) + rows("s", [1], task="t2", score=[1])
    alt = rows("s", [1], task="t2", score=[5]) + rows("s", [1, 1], task="t1", score=[3, 1])
    r = creeping_drift(cal, alt).overall
    assert r.n_pairs == 3
    assert r.drop == pytest.approx(((5 - 3) + (5 - 1) + (1 - 5)) / 3)


def test_paired_binary_reproduces_table_6_chain_success():
    # X-VLA 5/5 chain success 709 vs 459 of 1000 shared sequences; the discordant split
    # (335, 85) is the one consistent with the printed CI (see test_intervals).
    cal_v = np.r_[np.ones(374), np.ones(335), np.zeros(85), np.zeros(206)].astype(int)
    alt_v = np.r_[np.ones(374), np.zeros(335), np.ones(85), np.zeros(206)].astype(int)
    r = creeping_drift(rows("calvin", cal_v), rows("calvin", alt_v), paired=True).overall
    assert r.method == "paired_wald" and r.n_pairs == 1000
    assert round(100 * r.drop, 2) == 25.00
    assert (round(100 * r.ci.low, 2), round(100 * r.ci.high, 2)) == (21.29, 28.71)


def test_unpaired_scores_use_two_sample_wald():
    cal = rows("calvin", [0] * 4, score=[5, 3, 4, 4])
    alt = rows("calvin", [0] * 3, start=100, score=[1, 3, 2])  # fresh manifest: no overlap
    r = creeping_drift(cal, alt, paired=False).overall
    assert r.method == "two_sample_wald" and r.n_pairs is None
    assert r.ci == two_sample_wald_interval(np.array([5, 3, 4, 4]), np.array([1, 3, 2]))
    with pytest.raises(RobosafeError, match="no shared instances"):
        creeping_drift(cal, alt)


def test_success_text_forms_and_in_memory_rows():
    cal = rows("s", [True, "true", "1", 1.0])
    alt = rows("s", [False, "False", "0", 0])
    r = creeping_drift(cal, alt).overall
    assert (r.calibration, r.altered) == (1.0, 0.0)
    t = outcome_table(cal, "mine")
    assert t.metric == "success" and len(t.rows) == 4 and t.rows[0].where == "mine[0]"


def test_confidence_is_passed_through():
    cal, alt = rows("s", counts(30, 50)), rows("s", counts(20, 50), start=50)
    r = creeping_drift(cal, alt, confidence=0.9).overall
    assert r.ci == newcombe_interval(30, 50, 20, 50, confidence=0.9)
    assert r.confidence == 0.9


# --- bad input: one-line messages naming file, line and column --------------------------


def one_line(exc):
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_missing_column(tmp_path):
    p = write(tmp_path / "c.csv", rows("s", [1]), [c for c in COLS if c != "instance_id"])
    with pytest.raises(RobosafeError) as exc:
        read_outcome_csv(p)
    assert one_line(exc).startswith(f"{p}:1: missing column 'instance_id'")


def test_missing_outcome_column(tmp_path):
    p = write(tmp_path / "c.csv", rows("s", [1]), [c for c in COLS if c != "success"])
    with pytest.raises(RobosafeError, match=r"c\.csv:1: missing column 'success'"):
        read_outcome_csv(p)


@pytest.mark.parametrize("value,got", [("yes", "'yes'"), ("2", "'2'"), ("", "an empty value"),
                                       ("nan", "'nan'")])
def test_bad_success_value(tmp_path, value, got):
    recs = rows("s", [1, value, 0])
    p = write(tmp_path / "c.csv", recs)
    with pytest.raises(RobosafeError) as exc:
        read_outcome_csv(p)
    assert one_line(exc) == f"{p}:3: column 'success': expected 0 or 1, got {got}"


def test_bad_score_value(tmp_path):
    p = write(tmp_path / "c.csv", rows("s", [1, 1], score=[3, "4 tasks"]))
    with pytest.raises(RobosafeError) as exc:
        read_outcome_csv(p)
    assert one_line(exc) == f"{p}:3: column 'score': expected a finite number, got '4 tasks'"
    p = write(tmp_path / "d.csv", rows("s", [1], score=["inf"]))
    with pytest.raises(RobosafeError, match=r"d\.csv:2: column 'score'"):
        read_outcome_csv(p)


def test_empty_key_value(tmp_path):
    recs = rows("s", [1, 1])
    recs[1]["task_id"] = ""
    with pytest.raises(RobosafeError, match=r"c\.csv:3: column 'task_id': empty value"):
        read_outcome_csv(write(tmp_path / "c.csv", recs))


def test_duplicate_episode(tmp_path):
    recs = rows("s", [1, 0, 1])
    recs[2]["episode_idx"] = recs[0]["episode_idx"]
    recs[2]["instance_id"] = recs[0]["instance_id"]
    p = write(tmp_path / "c.csv", recs)
    with pytest.raises(RobosafeError) as exc:
        read_outcome_csv(p)
    msg = one_line(exc)
    assert msg.startswith(f"{p}:4: column 'episode_idx': duplicate key (suite='s', "
                          f"task_id='0', instance_id='i0', episode_idx='0')")
    assert msg.endswith(f"first at {p}:2")


def test_duplicate_instance_in_paired_comparison(tmp_path):
    cal = rows("s", [1, 1], instance=lambda i: "same", score=[5, 4])
    alt = rows("s", [1, 1], score=[5, 4], instance=lambda i: "same")
    c, a = write(tmp_path / "c.csv", cal), write(tmp_path / "a.csv", alt)
    with pytest.raises(RobosafeError) as exc:
        creeping_drift(c, a)
    msg = one_line(exc)
    assert msg.startswith(f"{c}:3: column 'instance_id': duplicate key (suite='s', "
                          f"task_id='0', instance_id='same'), first at {c}:2")
    # The same rows are fine when compared as independent samples.
    assert creeping_drift(c, a, paired=False).overall.n_pairs is None


def test_no_shared_instances(tmp_path):
    c = write(tmp_path / "c.csv", rows("s", [1], score=[5]))
    a = write(tmp_path / "a.csv", rows("s", [1], start=7, score=[5]))
    with pytest.raises(RobosafeError) as exc:
        creeping_drift(c, a)
    assert one_line(exc) == (f"no shared instances between {c} and {a} on (suite, task_id, "
                             f"instance_id); a paired comparison needs the same manifest")


def test_suite_without_shared_instances_is_named():
    cal = rows("a", [1], score=[5]) + rows("b", [1], score=[5])
    alt = rows("a", [1], score=[4]) + rows("b", [1], start=5, score=[5])
    with pytest.raises(RobosafeError, match="^suite 'b': no shared instances between "
                                            "calibration and altered"):
        creeping_drift(cal, alt)


def test_suite_in_one_run_only():
    with pytest.raises(RobosafeError, match="suite 'b' is in altered but not in calibration"):
        creeping_drift(rows("a", [1, 0]), rows("a", [1]) + rows("b", [1]))


def test_metric_mismatch():
    with pytest.raises(RobosafeError, match="'score' but altered has 'success'"):
        creeping_drift(rows("a", [1], score=[4]), rows("a", [1]))


def test_empty_and_malformed_files(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(RobosafeError, match="empty file"):
        read_outcome_csv(empty)
    header = tmp_path / "header.csv"
    header.write_text(",".join(COLS) + "\n")
    with pytest.raises(RobosafeError, match="header.csv: no outcome rows"):
        read_outcome_csv(header)
    extra = tmp_path / "extra.csv"
    extra.write_text(",".join(COLS) + "\n" + ",".join(["x"] * len(COLS)) + ",oops\n")
    with pytest.raises(RobosafeError, match=r"extra\.csv:2: more fields than the header"):
        read_outcome_csv(extra)
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"suite,task_id\n\xff\xfe\x00\x81")
    with pytest.raises(RobosafeError, match="not a readable UTF-8 CSV"):
        read_outcome_csv(binary)
    with pytest.raises(RobosafeError, match="cannot read outcome table"):
        read_outcome_csv(tmp_path / "nope.csv")


def test_extra_columns_ignored_and_bom_header(tmp_path):
    p = tmp_path / "c.csv"
    p.write_bytes("\ufeffsuite,task_id,instance_id,success,safe\ns,0,i0,1,0\n".encode())
    t = read_outcome_csv(p)
    assert t.metric == "success" and t.rows[0].key == ("s", "0", "i0")
