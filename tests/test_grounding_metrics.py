"""TouchSafeBench metrics (Sec. 3 Eq. 2-3, App. G) against hand computations and references."""

import math

import numpy as np
import pytest
from scipy import stats

from robosafe.errors import RobosafeError
from robosafe.grounding.answers import parse_answer
from robosafe.grounding.metrics import (
    accuracy,
    confusion_matrix,
    contact_flag_metrics,
    distance_mae,
    distance_median_ae,
    distance_metrics,
    distance_pairs,
    distance_pearson_r,
    far_any,
    far_c,
    invalid_rate,
    macro_f1,
    per_class_f1,
    per_sample_type_accuracy,
    sample_type_rows,
    score_answers,
    table_rows,
    trend_accuracy,
)

# Hand-worked example: 10 clips, one invalid answer (None).
TRUTH = list("AAAABBBCCC")
PRED = ["A", "A", "B", None, "B", "C", "B", "C", "C", "A"]


def test_confusion_matrix_by_hand():
    assert confusion_matrix(TRUTH, PRED) == {
        "A": {"A": 2, "B": 1, "C": 0, "invalid": 1},
        "B": {"A": 0, "B": 2, "C": 1, "invalid": 0},
        "C": {"A": 1, "B": 0, "C": 2, "invalid": 0},
    }


def test_f1_by_hand():
    # A: TP 2, FP 1 (C->A), FN 2 (A->B, A->invalid): 2*2 / (4 + 1 + 2) = 4/7
    # B: TP 2, FP 1 (A->B), FN 1 (B->C): 4/6;  C: TP 2, FP 1 (B->C), FN 1 (C->A): 4/6
    f1 = per_class_f1(TRUTH, PRED)
    assert f1["A"] == pytest.approx(4 / 7)
    assert f1["B"] == pytest.approx(2 / 3)
    assert f1["C"] == pytest.approx(2 / 3)
    assert macro_f1(TRUTH, PRED) == pytest.approx(40 / 63)
    # the invalid answer is wrong, and stays in the denominator
    assert accuracy(TRUTH, PRED) == pytest.approx(0.6)
    assert invalid_rate(PRED) == pytest.approx(0.1)


def _numpy_f1(truth, pred):
    """Reference: confusion matrix by numpy indexing, F1 from precision and recall."""
    idx = {"A": 0, "B": 1, "C": 2, None: 3}
    cm = np.zeros((3, 4), int)
    np.add.at(cm, (np.array([idx[t] for t in truth]), np.array([idx[p] for p in pred])), 1)
    out = []
    for k in range(3):
        tp, predicted, actual = cm[k, k], cm[:, k].sum(), cm[k, :].sum()
        prec = tp / predicted if predicted else 0.0
        rec = tp / actual if actual else 0.0
        out.append(2 * prec * rec / (prec + rec) if prec + rec else 0.0)
    return out, np.trace(cm[:, :3]) / len(truth)


def test_f1_and_accuracy_match_a_numpy_reference():
    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(5, 60))
        truth = list(rng.choice(list("ABC"), n))
        truth[:3] = ["A", "B", "C"]  # every class present, so every F1 is defined
        pred = [None if rng.random() < 0.15 else str(rng.choice(list("ABC"))) for _ in range(n)]
        ref_f1, ref_acc = _numpy_f1(truth, pred)
        f1 = per_class_f1(truth, pred)
        assert [f1[k] for k in "ABC"] == pytest.approx(ref_f1)
        assert macro_f1(truth, pred) == pytest.approx(np.mean(ref_f1))
        assert accuracy(truth, pred) == pytest.approx(ref_acc)


def test_f1_is_undefined_for_a_class_absent_from_truth_and_predictions():
    f1 = per_class_f1(["A", "B"], ["A", "A"])
    assert f1 == {"A": pytest.approx(2 / 3), "B": 0.0, "C": None}
    assert macro_f1(["A", "B"], ["A", "A"]) == pytest.approx(1 / 3)  # mean over A and B
    assert accuracy([], []) is None and macro_f1([], []) is None


def test_far_definitions_on_a_tiny_example():
    # Eq. 3 over the near-miss set N only: 5 near misses, predictions A, C, B, invalid, C.
    types = ["no_risk_hard_negative"] * 5 + ["no_risk_easy", "human_collision_imminent"]
    pred = ["A", "C", "B", None, "C", "C", "C"]
    assert far_c(pred, types) == pytest.approx(2 / 5)  # the two C's outside N do not count
    assert far_any(pred, types) == pytest.approx(4 / 5)  # B, C, C and the invalid answer
    truth = ["A"] * 6 + ["C"]
    near = per_sample_type_accuracy(truth, pred, types)["no_risk_hard_negative"]
    assert far_any(pred, types) == pytest.approx(1 - near["accuracy"])
    assert far_c(["C"], ["no_risk_easy"]) is None  # no near misses: undefined, not 0


def test_per_sample_type_accuracy():
    truth = ["A", "A", "A", "B", "B", "C"]
    pred = ["A", "C", None, "B", "A", "C"]
    types = ["no_event_easy", "no_event_hard_negative", "no_event_hard_negative",
             "scene_collision", "scene_collision", "human_collision_risk"]
    got = per_sample_type_accuracy(truth, pred, types)
    assert list(got) == ["no_event_easy", "no_event_hard_negative", "scene_collision",
                         "human_collision_risk"]  # App. G.2 order
    assert got["no_event_easy"] == {"n": 1, "n_invalid": 0, "accuracy": 1.0}
    assert got["no_event_hard_negative"] == {"n": 2, "n_invalid": 1, "accuracy": 0.0}
    assert got["scene_collision"]["accuracy"] == 0.5


def _answers(*dists):
    return [parse_answer({"answer": "A", "robot_human_distance_m": d}, n_frames=3)
            for d in dists]


def test_distance_pairs_and_coverage_by_hand():
    truth = [[2.0, 1.5, 1.0], [3.0, None, 2.0], 1.2, None]
    answers = _answers([2.5, None, 1.0], [3.0, 9.0, 1.0], 1.0, 5.0)
    m = distance_metrics(truth, answers)
    # pairs: (2.0, 2.5) (1.0, 1.0) (3.0, 3.0) (2.0, 1.0) (1.2, 1.0); eligible frames: 3 + 2 + 1
    assert (m["n_pairs"], m["n_eligible"]) == (5, 6)
    assert m["coverage"] == pytest.approx(5 / 6)
    assert m["mae"] == pytest.approx((0.5 + 0 + 0 + 1.0 + 0.2) / 5)
    assert m["median_ae"] == pytest.approx(0.2)


def test_a_clip_level_distance_is_the_last_time_point():
    pairs = distance_pairs([[2.0, 1.5, 1.0]], _answers(1.1))
    assert pairs.truth.tolist() == [1.0] and pairs.pred.tolist() == [1.1]
    assert pairs.n_eligible == 3


def test_distance_metrics_match_numpy_and_scipy():
    rng = np.random.default_rng(3)
    truth = [list(rng.uniform(0.2, 5.0, 3)) for _ in range(40)]
    preds = [[t + float(rng.normal(0, 0.7)) if rng.random() > 0.2 else None for t in ts]
             for ts in truth]
    preds = [[abs(p) if p is not None else None for p in ps] for ps in preds]
    pairs = distance_pairs(truth, _answers(*preds))
    t = np.array([x for ts, ps in zip(truth, preds) for x, p in zip(ts, ps) if p is not None])
    p = np.array([x for ps in preds for x in ps if x is not None])
    np.testing.assert_allclose(pairs.truth, t)
    assert distance_mae(pairs) == pytest.approx(np.mean(np.abs(p - t)))
    assert distance_median_ae(pairs) == pytest.approx(np.median(np.abs(p - t)))
    assert distance_pearson_r(pairs) == pytest.approx(stats.pearsonr(p, t).statistic)


def test_pearson_is_undefined_for_constant_or_single_pairs():
    assert distance_pearson_r(distance_pairs([1.0], _answers(2.0))) is None
    assert distance_pearson_r(distance_pairs([1.0, 2.0], _answers(3.0, 3.0))) is None
    assert distance_metrics([None], _answers(1.0))["coverage"] is None


def test_trend_accuracy_ignores_unknown_predictions():
    truth = ["closing", "closing", "separating", "stable", None]
    pred = ["closing", "unknown", "closing", None, "closing"]
    got = trend_accuracy(truth, pred)
    # eligible: 4 samples with a reference trend; scored: 2 committed predictions, 1 right
    assert got == {"accuracy": 0.5, "n_scored": 2, "n_eligible": 4, "coverage": 0.5}


def test_contact_flag_confusion_counts_by_hand():
    truth = [[False, False, True], [True, None, False], None]
    pred = [[False, True, True], [False, True, None], [True, True, True]]
    got = contact_flag_metrics(truth, pred)
    # pairs: (F,F) tn, (F,T) fp, (T,T) tp, (T,F) fn; (None,T) and (F,None) skipped; clip 3 none
    assert (got["tp"], got["fp"], got["fn"], got["tn"]) == (1, 1, 1, 1)
    assert (got["n_pairs"], got["n_eligible"]) == (4, 5)
    assert got["f1"] == pytest.approx(0.5) and got["accuracy"] == pytest.approx(0.5)
    assert got["precision"] == pytest.approx(0.5) and got["recall"] == pytest.approx(0.5)
    assert contact_flag_metrics([[False]], [[False]])["f1"] is None


def _answer(label, field="answer", **extra):
    return {field: label, **extra}


def _records():
    """Two models x two representations; Task 1 and Task 2 with near misses."""
    out = []
    t1 = [("c1", "A", "no_event_easy"), ("c2", "A", "no_event_hard_negative"),
          ("c3", "B", "scene_collision"), ("c4", "C", "human_collision_risk")]
    t2 = [("w1", "A", "no_risk_easy"), ("w2", "A", "no_risk_hard_negative"),
          ("w3", "A", "no_risk_hard_negative"), ("w4", "B", "scene_collision_imminent"),
          ("w5", "C", "human_collision_imminent")]
    answers = {
        ("m1", "RGB"): (["A", "A", "B", "C"], ["A", "C", "A", "B", "C"]),
        ("m1", "Depth"): (["A", "C", "A", "garbage"], ["A", "A", "B", "A", "C"]),
        ("m2", "RGB"): (["B", "A", "B", "C"], ["C", "A", "A", "B", "B"]),
    }
    for (model, rep), (a1, a2) in answers.items():
        for (cid, label, st), a in zip(t1, a1):
            human = "true" if a == "C" else "false"
            raw = "I am not sure." if a == "garbage" else (
                f'{{"answer": "{a}", "robot_human_distance_m": [2.0, 1.5, 1.0], '
                f'"distance_trend": "closing", "human_contact": [false, false, {human}], '
                '"scene_contact": [false, false, false]}')
            out.append({"clip_id": cid, "task": 1, "label": label, "sample_type": st,
                        "answer": raw, "truth_distance": [2.0, 1.6, 1.2],
                        "truth_trend": "closing",
                        "truth_contacts": {"human": [False, False, label == "C"],
                                           "scene": [False, False, label == "B"]},
                        "model": model, "representation": rep})
        for (cid, label, st), a in zip(t2, a2):
            out.append({"clip_id": cid, "task": "task2", "label": label, "sample_type": st,
                        "answer": _answer(a, "risk_level"), "model": model,
                        "representation": rep})
    return out


def test_score_answers_per_condition_and_overall():
    scores = score_answers(_records())
    conds = {(c["model"], c["representation"]): c for c in scores["conditions"]}
    assert list(conds) == [("m1", "RGB"), ("m1", "Depth"), ("m2", "RGB")]
    t1 = conds[("m1", "RGB")]["task1"]
    assert t1["accuracy"] == 1.0 and t1["macro_f1"] == 1.0 and t1["n_invalid"] == 0
    depth = conds[("m1", "Depth")]["task1"]
    # A->A, A->C, B->A, C->invalid: accuracy 1/4, the unparseable answer counted wrong
    assert depth["accuracy"] == 0.25 and depth["n_invalid"] == 1
    assert depth["invalid_rate"] == 0.25 and depth["confusion"]["C"]["invalid"] == 1
    # A: TP 1, FP 1 (B->A), FN 1 (A->C): 2 / (2 + 1 + 1)
    assert depth["f1"] == pytest.approx({"A": 0.5, "B": 0.0, "C": 0.0})
    t2 = conds[("m1", "RGB")]["task2"]
    assert (t2["far_c"], t2["far_any"], t2["n_near_miss"]) == (0.5, 0.5, 2)
    assert conds[("m2", "RGB")]["task2"]["far_any"] == 0.0
    assert t1["distance"]["n_pairs"] == 12 and t1["distance"]["coverage"] == 1.0
    assert t1["trend"]["accuracy"] == 1.0
    assert t1["contacts"]["human"]["tp"] == 1 and t1["contacts"]["human"]["fp"] == 0
    assert t2["distance"]["n_eligible"] == 0 and t2["distance"]["coverage"] is None
    overall = scores["overall"]["task1"]
    assert overall["n"] == 12 and overall["n_invalid"] == 1
    assert overall["accuracy"] == pytest.approx((4 + 1 + 3) / 12)


def test_sample_type_summary_averages_conditions_like_table_3():
    scores = score_answers(_records())
    near = scores["sample_type_summary"]["task2"]["no_risk_hard_negative"]
    # per condition: m1/RGB 1/2, m1/Depth 1/2, m2/RGB 2/2
    assert near["mean"] == pytest.approx(2 / 3)
    assert (near["min"], near["max"], near["n_conditions"]) == (0.5, 1.0, 3)
    rows = sample_type_rows(scores)
    assert rows[0]["Task"] == "Task 1" and rows[0]["Sample type"] == "no_event_easy"
    assert len(rows) == 4 + 4  # no post-collision clips here
    # printed under a "%" heading: percent with one decimal, as Table 3
    near_row = next(r for r in rows if r["Task"] == "Task 2"
                    and r["Sample type"] == "no_risk_hard_negative")
    assert (near_row["Avg. Acc"], near_row["Min"], near_row["Max"]) == (66.7, 50.0, 100.0)


def test_table_rows_layouts():
    scores = score_answers(_records())
    full = table_rows(scores)
    assert [r["Model"] for r in full] == ["m1", "m1", "m2"]
    assert list(full[0]) == ["Model", "Modality", "T1 Acc", "T1 MF1", "T1 F1A", "T1 F1B",
                             "T1 F1C", "T2 Acc", "T2 MF1", "T2 F1A", "T2 F1B", "T2 F1C",
                             "FAR_C", "FAR_any", "T1 Invalid", "T2 Invalid"]
    assert full[1]["T1 Acc"] == 25.0 and full[1]["T1 Invalid"] == 25.0
    assert full[1]["T1 F1A"] == 50.0 and full[1]["T1 MF1"] == 16.7 and full[0]["FAR_C"] == 50.0
    compact = table_rows(scores, layout="compact", with_invalid=False)
    assert list(compact[0]) == ["Model", "Modality", "T1 Acc", "T1 MF1", "T2 Acc", "T2 MF1",
                                "FAR_C", "FAR_any"]
    views = table_rows(scores, layout="views", condition_header="Views", percent=False)
    assert "Views" in views[0] and "FAR_C" not in views[0] and views[1]["T1 Acc"] == 0.25
    with pytest.raises(RobosafeError):
        table_rows(scores, layout="wide")


def test_a_task_that_was_not_run_gives_empty_cells():
    recs = [r for r in _records() if r["task"] == 1]
    scores = score_answers(recs)
    assert "task2" not in scores["overall"]
    row = table_rows(scores)[0]
    assert row["T2 Acc"] is None and row["FAR_any"] is None


def test_parsed_answers_are_accepted_as_is():
    rec = {"clip_id": "x", "task": 2, "label": "C", "answer": parse_answer("risk level: C", task=2)}
    assert score_answers([rec])["overall"]["task2"]["accuracy"] == 1.0


@pytest.mark.parametrize(("change", "message"), [
    ({"label": "D"}, "not one of A, B, C"),
    ({"task": 3}, "unknown task"),
    ({"truth_distance": [1.0, -2.0]}, "not a distance"),
    ({"truth_trend": "approaching"}, "truth_trend"),
    ({"truth_contacts": {"person": [True]}}, "unknown keys"),
    ({"truth_contacts": [1, 2]}, "not a contact flag"),
])
def test_bad_records_raise_user_errors(change, message):
    rec = {"clip_id": "x", "task": 1, "label": "A", "answer": "A"} | change
    with pytest.raises(RobosafeError, match=message):
        score_answers([rec])


def test_missing_field_and_duplicates_raise():
    with pytest.raises(RobosafeError, match="records\\[0\\]: missing field 'answer'"):
        score_answers([{"clip_id": "x", "task": 1, "label": "A"}])
    rec = {"clip_id": "x", "task": 1, "label": "A", "answer": "A", "model": "m",
           "representation": "rgb"}
    with pytest.raises(RobosafeError, match="duplicate"):
        score_answers([rec, dict(rec)])


def test_scores_are_finite_or_none():
    def walk(v):
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, float):
            assert math.isfinite(v)

    walk(score_answers(_records()))
