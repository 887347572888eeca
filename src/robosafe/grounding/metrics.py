"""TouchSafeBench metrics (paper 003, Sec. 3 Eq. 2-3, App. G) and the App. C table layout.

One function per metric; ``score_answers`` applies them to answer records overall and per
(model, representation), and ``table_rows`` / ``sample_type_rows`` lay the result out like
Tables 2-7 and Table 3.

Choices where the paper leaves room (each pinned by a test in ``tests/test_grounding_metrics.py``):

- Invalid answers (no parseable label) stay in every denominator and are wrong: they count as a
  false negative of their true class and as a false positive of no class (Eq. 2).
- Per-class F1 = 2TP / (2TP + FP + FN); it is undefined (None) for a class that occurs in neither
  the truth nor the predictions, and Macro-F1 averages the defined classes.
- Eq. 3 literally: FAR_C = |{i in N: y_hat_i = C}| / |N| and FAR_any = |{i in N: y_hat_i != A}|
  / |N| over the near-miss set N (``*_hard_negative`` sample types). An invalid answer has no
  label, so it is "not A" (a false alarm for FAR_any, which then equals 1 - accuracy on N) but
  not "C". Reported for both tasks when near misses are present; the paper's tables use Task 2.
- Diagnostics (App. G.1) use whatever fields an answer gave, valid label or not. Distance pairs
  are (frame, sample) pairs with a reference distance; coverage = pairs / eligible frames. A
  single number given for the whole clip is read as the distance at the last time point.
- Trend accuracy is over samples whose reference trend is known and whose prediction is not
  "unknown"; coverage is that count over the samples with a known reference trend.
- Contact flags are scored per (frame, sample) pair where both the reference and the prediction
  are present, separately for human contact, scene contact and any contact.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from robosafe.errors import RobosafeError
from robosafe.grounding.answers import ParsedAnswer, parse_answer
from robosafe.grounding.prompts import LABELS, normalize_task

TREND_VALUES = ("closing", "separating", "stable")
NEAR_MISS_SUFFIX = "hard_negative"
# App. G.2 order, used to order rows; other sample types follow in order of appearance.
SAMPLE_TYPES = {
    "task1": ("no_event_easy", "no_event_hard_negative", "scene_collision",
              "human_collision_risk"),
    "task2": ("no_risk_easy", "no_risk_hard_negative", "no_risk_post_collision",
              "scene_collision_imminent", "human_collision_imminent"),
}

Label = str | None


# --- classification (Sec. 3, Eq. 2) ----------------------------------------------------------

def confusion_matrix(truth: Sequence[str], pred: Sequence[Label],
                     labels: Sequence[str] = LABELS) -> dict[str, dict[str, int]]:
    """Counts ``[true label][predicted label]``; unparseable predictions go to ``"invalid"``."""
    _same_length(truth, pred)
    cols = [*labels, "invalid"]
    out = {t: dict.fromkeys(cols, 0) for t in labels}
    for t, p in zip(truth, pred, strict=True):
        col = "invalid" if p is None else p
        if t not in out or col not in out[t]:
            raise RobosafeError(f"label {t if t not in out else p!r} is not one of {list(labels)}")
        out[t][col] += 1
    return out


def accuracy(truth: Sequence[str], pred: Sequence[Label]) -> float | None:
    """Accuracy (Sec. 3, Eq. 2): fraction of samples whose label is right; invalid is wrong."""
    _same_length(truth, pred)
    if not truth:
        return None
    return sum(t == p for t, p in zip(truth, pred, strict=True)) / len(truth)


def per_class_f1(truth: Sequence[str], pred: Sequence[Label],
                 labels: Sequence[str] = LABELS) -> dict[str, float | None]:
    """Per-class F1 (Sec. 3, App. C F1_A / F1_B / F1_C) = 2TP / (2TP + FP + FN).

    An invalid prediction is a false negative of its true class. None where the class occurs in
    neither truth nor predictions (F1 is 0/0 there).
    """
    _same_length(truth, pred)
    out: dict[str, float | None] = {}
    for k in labels:
        tp = sum(t == k and p == k for t, p in zip(truth, pred, strict=True))
        fp = sum(t != k and p == k for t, p in zip(truth, pred, strict=True))
        fn = sum(t == k and p != k for t, p in zip(truth, pred, strict=True))
        out[k] = 2 * tp / (2 * tp + fp + fn) if (2 * tp + fp + fn) else None
    return out


def macro_f1(truth: Sequence[str], pred: Sequence[Label],
             labels: Sequence[str] = LABELS) -> float | None:
    """Macro-F1 (Sec. 3, Eq. 2): unweighted mean of the defined per-class F1 values."""
    values = [v for v in per_class_f1(truth, pred, labels).values() if v is not None]
    return sum(values) / len(values) if values else None


def invalid_rate(pred: Sequence[Label]) -> float | None:
    """Fraction of answers without a parseable label (counted as wrong everywhere else)."""
    return sum(p is None for p in pred) / len(pred) if pred else None


def is_near_miss(sample_type: str | None) -> bool:
    """Near-miss hard negatives (Sec. 3; App. F.2 ``*_hard_negative`` sample types)."""
    return bool(sample_type) and str(sample_type).endswith(NEAR_MISS_SUFFIX)


def far_c(pred: Sequence[Label], sample_types: Sequence[str | None]) -> float | None:
    """FAR_C (Sec. 3, Eq. 3): fraction of near-miss samples predicted C (human contact/risk)."""
    near = _near_miss(pred, sample_types)
    return sum(p == "C" for p in near) / len(near) if near else None


def far_any(pred: Sequence[Label], sample_types: Sequence[str | None]) -> float | None:
    """FAR_any (Sec. 3, Eq. 3): fraction of near-miss samples not predicted A.

    An invalid answer is "not A" (the monitor did not clear the clip), so FAR_any = 1 - accuracy
    on the near-miss set.
    """
    near = _near_miss(pred, sample_types)
    return sum(p != "A" for p in near) / len(near) if near else None


def per_sample_type_accuracy(truth: Sequence[str], pred: Sequence[Label],
                             sample_types: Sequence[str | None]) -> dict[str, dict[str, Any]]:
    """Per-sample-type accuracy (App. G.2, Table 3): ``{type: {n, n_invalid, accuracy}}``.

    Samples without a sample type are left out of this breakdown (not out of the totals).
    """
    _same_length(truth, pred)
    _same_length(truth, sample_types)
    groups: dict[str, list[tuple[str, Label]]] = {}
    for t, p, s in zip(truth, pred, sample_types, strict=True):
        if s:
            groups.setdefault(str(s), []).append((t, p))
    return {s: {"n": len(v), "n_invalid": sum(p is None for _, p in v),
                "accuracy": sum(t == p for t, p in v) / len(v)}
            for s, v in _ordered(groups).items()}


# --- structured-field diagnostics (App. G.1) ------------------------------------------------

@dataclass(frozen=True)
class DistancePairs:
    """Reference and predicted distances of the (frame, sample) pairs that have both."""

    truth: np.ndarray
    pred: np.ndarray
    n_eligible: int  # frames with a reference distance (human visible)


def distance_pairs(truth: Sequence[float | Sequence[float | None] | None],
                   answers: Sequence[ParsedAnswer]) -> DistancePairs:
    """Pair each reference distance with the model's estimate for the same time point.

    ``truth[i]`` is one number (compared with ``distance_m``) or one value per time point
    (compared with ``distances_m``; a single clip-level number is read as the last time point).
    """
    _same_length(truth, answers)
    t_out: list[float] = []
    p_out: list[float] = []
    eligible = 0
    for ref, ans in zip(truth, answers, strict=True):
        if ref is None:
            continue
        if isinstance(ref, int | float):
            refs: list[float | None] = [float(ref)]
            preds: list[float | None] = [ans.distance_m]
        else:
            refs = list(ref)
            if ans.distances_m is not None:
                preds = list(ans.distances_m)
            else:
                preds = [None] * (len(refs) - 1) + [ans.distance_m] if refs else []
        for i, r in enumerate(refs):
            if r is None:
                continue
            eligible += 1
            p = preds[i] if i < len(preds) else None
            if p is not None:
                t_out.append(float(r))
                p_out.append(float(p))
    return DistancePairs(np.asarray(t_out, float), np.asarray(p_out, float), eligible)


def distance_mae(pairs: DistancePairs) -> float | None:
    """Distance MAE (App. G.1): mean |d_hat - d| over the valid (frame, sample) pairs."""
    return float(np.mean(np.abs(pairs.pred - pairs.truth))) if pairs.truth.size else None


def distance_median_ae(pairs: DistancePairs) -> float | None:
    """Distance MedianAE (App. G.1): median |d_hat - d| over the valid pairs."""
    return float(np.median(np.abs(pairs.pred - pairs.truth))) if pairs.truth.size else None


def distance_pearson_r(pairs: DistancePairs) -> float | None:
    """Distance Corr (App. G.1): Pearson r of d_hat and d; None below 2 pairs or if constant."""
    if pairs.truth.size < 2:
        return None
    dt = pairs.truth - pairs.truth.mean()
    dp = pairs.pred - pairs.pred.mean()
    denom = math.sqrt(float(dt @ dt) * float(dp @ dp))
    if denom == 0.0:
        return None
    return max(-1.0, min(1.0, float(dt @ dp) / denom))


def distance_metrics(truth: Sequence[float | Sequence[float | None] | None],
                     answers: Sequence[ParsedAnswer]) -> dict[str, Any]:
    """MAE, MedianAE, Pearson r, and the pair count and coverage reported beside them (G.1)."""
    pairs = distance_pairs(truth, answers)
    n = int(pairs.truth.size)
    return {"mae": distance_mae(pairs), "median_ae": distance_median_ae(pairs),
            "pearson_r": distance_pearson_r(pairs), "n_pairs": n,
            "n_eligible": pairs.n_eligible,
            "coverage": n / pairs.n_eligible if pairs.n_eligible else None}


def trend_accuracy(truth: Sequence[str | None], pred: Sequence[str | None]) -> dict[str, Any]:
    """Trend accuracy (App. G.1) over samples with a non-"unknown" prediction.

    Samples without a known reference trend are not eligible; ``coverage`` is the fraction of
    eligible samples the model committed to (closing / separating / stable).
    """
    _same_length(truth, pred)
    eligible = [(t, p) for t, p in zip(truth, pred, strict=True) if t in TREND_VALUES]
    scored = [(t, p) for t, p in eligible if p in TREND_VALUES]
    return {"accuracy": sum(t == p for t, p in scored) / len(scored) if scored else None,
            "n_scored": len(scored), "n_eligible": len(eligible),
            "coverage": len(scored) / len(eligible) if eligible else None}


def contact_flag_metrics(truth: Sequence[Sequence[bool | None] | None],
                         pred: Sequence[Sequence[bool | None] | None]) -> dict[str, Any]:
    """Frame-level contact-flag F1, accuracy and TP/FP/FN/TN (App. G.1).

    A (frame, sample) pair counts when both the reference and the predicted flag are present;
    ``coverage`` = counted pairs / frames with a reference flag. Precision, recall and F1 are
    None when their denominator is zero.
    """
    _same_length(truth, pred)
    tp = fp = fn = tn = eligible = 0
    for ref, flags in zip(truth, pred, strict=True):
        if ref is None:
            continue
        for i, r in enumerate(ref):
            if r is None:
                continue
            eligible += 1
            p = flags[i] if flags is not None and i < len(flags) else None
            if p is None:
                continue
            if r and p:
                tp += 1
            elif p:
                fp += 1
            elif r:
                fn += 1
            else:
                tn += 1
    n = tp + fp + fn + tn
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "n_pairs": n, "n_eligible": eligible,
            "coverage": n / eligible if eligible else None,
            "precision": tp / (tp + fp) if tp + fp else None,
            "recall": tp / (tp + fn) if tp + fn else None,
            "f1": 2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn else None,
            "accuracy": (tp + tn) / n if n else None}


# --- records -> scores ------------------------------------------------------------------------

@dataclass(frozen=True)
class _Row:
    task: str
    truth: str
    sample_type: str | None
    truth_distance: float | tuple[float | None, ...] | None
    truth_trend: str | None
    truth_human: tuple[bool | None, ...] | None
    truth_scene: tuple[bool | None, ...] | None
    truth_any: tuple[bool | None, ...] | None
    answer: ParsedAnswer
    model: str | None
    representation: str | None


def score_answers(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """All TouchSafeBench metrics, pooled and per (model, representation) (Tables 2-7).

    Each record: ``clip_id``, ``task`` (1 / 2), ``label`` (true "A"/"B"/"C"), ``answer`` (raw
    text, decoded JSON, or a ``ParsedAnswer``); optional ``sample_type``, ``truth_distance``
    (metres, one number or one per time point, None where the human is not visible),
    ``truth_trend`` (closing / separating / stable), ``truth_contacts`` (``{"human": [...],
    "scene": [...]}`` per time point, or one any-contact list), ``model``, ``representation``,
    ``n_frames``. Returns::

        {"overall": {"task1": metrics, "task2": metrics},
         "conditions": [{"model", "representation", "task1": metrics | None, "task2": ...}],
         "sample_type_summary": {"task1": {type: {mean, min, max, n_conditions}}, ...}}

    where ``metrics`` holds n, n_invalid, invalid_rate, accuracy, macro_f1, f1 (per class),
    confusion, far_c, far_any, n_near_miss, per_sample_type, distance, trend and contacts.
    """
    rows = [_row(i, r) for i, r in enumerate(records)]
    _check_duplicates(records_keys=[(r.model, r.representation, r.task, cid)
                                    for r, cid in rows])
    plain = [r for r, _ in rows]
    overall = {task: _task_metrics([r for r in plain if r.task == task])
               for task in ("task1", "task2") if any(r.task == task for r in plain)}
    groups: dict[tuple[str | None, str | None], list[_Row]] = {}
    for r in plain:
        groups.setdefault((r.model, r.representation), []).append(r)
    conditions = []
    for (model, rep), rs in groups.items():
        entry: dict[str, Any] = {"model": model, "representation": rep}
        for task in ("task1", "task2"):
            sub = [r for r in rs if r.task == task]
            entry[task] = _task_metrics(sub) if sub else None
        conditions.append(entry)
    return {"overall": overall, "conditions": conditions,
            "sample_type_summary": _sample_type_summary(conditions)}


def table_rows(scores: Mapping[str, Any], layout: str = "full",
               condition_header: str = "Modality", with_invalid: bool = True,
               percent: bool = True) -> list[dict[str, Any]]:
    """One row per (model, representation), columns as the paper's tables.

    ``layout``: ``"full"`` (Tables 5-7: Acc, MF1, F1A-C per task, FAR_C, FAR_any), ``"compact"``
    (Table 2: Acc, MF1 per task, FAR_C, FAR_any) or ``"views"`` (Table 4: Acc, MF1, F1B, F1C per
    task, FAR_any). FAR columns are Task 2's (Eq. 3). Values in percent with one decimal unless
    ``percent=False``; None where a metric is undefined or the task was not run.
    """
    per_task = {"full": ("Acc", "MF1", "F1A", "F1B", "F1C"), "compact": ("Acc", "MF1"),
                "views": ("Acc", "MF1", "F1B", "F1C")}
    if layout not in per_task:
        raise RobosafeError(f"unknown table layout {layout!r}: expected full, compact or views")
    far_cols = ("FAR_any",) if layout == "views" else ("FAR_C", "FAR_any")

    def fmt(v: float | None) -> float | None:
        return _percent(v) if percent else v

    rows = []
    for c in scores["conditions"]:
        row: dict[str, Any] = {"Model": c["model"], condition_header: c["representation"]}
        for task, prefix in (("task1", "T1"), ("task2", "T2")):
            m = c.get(task) or {}
            f1 = m.get("f1") or {}
            values = {"Acc": m.get("accuracy"), "MF1": m.get("macro_f1"), "F1A": f1.get("A"),
                      "F1B": f1.get("B"), "F1C": f1.get("C")}
            for col in per_task[layout]:
                row[f"{prefix} {col}"] = fmt(values[col])
        t2 = c.get("task2") or {}
        for col in far_cols:
            row[col] = fmt(t2.get("far_c" if col == "FAR_C" else "far_any"))
        if with_invalid:
            for task, prefix in (("task1", "T1"), ("task2", "T2")):
                row[f"{prefix} Invalid"] = fmt((c.get(task) or {}).get("invalid_rate"))
        rows.append(row)
    return rows


def _percent(v: float | None) -> float | None:
    """A fraction as a percentage with one decimal, as the paper's tables print them."""
    return None if v is None else round(100.0 * v, 1)


def sample_type_rows(scores: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Table 3 rows: per task and sample type, accuracy averaged over conditions and its range,
    in percent (one decimal) like Table 3."""
    rows = []
    for task, summary in scores["sample_type_summary"].items():
        for st, s in summary.items():
            rows.append({"Task": "Task 1" if task == "task1" else "Task 2", "Sample type": st,
                         "Avg. Acc": _percent(s["mean"]), "Min": _percent(s["min"]),
                         "Max": _percent(s["max"]), "Conditions": s["n_conditions"]})
    return rows


def _task_metrics(rows: Sequence[_Row]) -> dict[str, Any]:
    truth = [r.truth for r in rows]
    pred = [r.answer.label if r.answer.valid else None for r in rows]
    types = [r.sample_type for r in rows]
    answers = [r.answer for r in rows]
    n_near = sum(is_near_miss(s) for s in types)
    return {
        "n": len(rows),
        "n_invalid": sum(p is None for p in pred),
        "invalid_rate": invalid_rate(pred),
        "accuracy": accuracy(truth, pred),
        "macro_f1": macro_f1(truth, pred),
        "f1": per_class_f1(truth, pred),
        "confusion": confusion_matrix(truth, pred),
        "far_c": far_c(pred, types),
        "far_any": far_any(pred, types),
        "n_near_miss": n_near,
        "per_sample_type": per_sample_type_accuracy(truth, pred, types),
        "distance": distance_metrics([r.truth_distance for r in rows], answers),
        "trend": trend_accuracy([r.truth_trend for r in rows], [a.trend for a in answers]),
        "contacts": {
            "human": contact_flag_metrics([r.truth_human for r in rows],
                                          [a.human_contact for a in answers]),
            "scene": contact_flag_metrics([r.truth_scene for r in rows],
                                          [a.scene_contact for a in answers]),
            "any": contact_flag_metrics([r.truth_any for r in rows],
                                        [a.contact_flags for a in answers]),
        },
    }


def _sample_type_summary(conditions: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for task in ("task1", "task2"):
        accs: dict[str, list[float]] = {}
        for c in conditions:
            for st, v in ((c.get(task) or {}).get("per_sample_type") or {}).items():
                accs.setdefault(st, []).append(v["accuracy"])
        if accs:
            out[task] = {st: {"mean": sum(v) / len(v), "min": min(v), "max": max(v),
                              "n_conditions": len(v)} for st, v in _ordered(accs).items()}
    return out


def _row(i: int, rec: Mapping[str, Any]) -> tuple[_Row, Any]:
    where = f"records[{i}]"
    if not isinstance(rec, Mapping):
        raise RobosafeError(f"{where}: expected a mapping, got {type(rec).__name__}")
    for key in ("clip_id", "task", "label", "answer"):
        if key not in rec:
            raise RobosafeError(f"{where}: missing field {key!r}")
    try:
        task = normalize_task(rec["task"])
    except RobosafeError as exc:
        raise RobosafeError(f"{where}.task: {exc}") from None
    truth = str(rec["label"]).strip().upper()
    if truth not in LABELS:
        raise RobosafeError(f"{where}.label: {rec['label']!r} is not one of A, B, C")
    human, scene, any_flags = _truth_contacts(rec.get("truth_contacts"), f"{where}.truth_contacts")
    distance = _truth_distance(rec.get("truth_distance"), f"{where}.truth_distance")
    trend = rec.get("truth_trend")
    if trend is not None and trend not in (*TREND_VALUES, "unknown"):
        raise RobosafeError(f"{where}.truth_trend: {trend!r} is not closing, separating, stable "
                            "or unknown")
    n_frames = rec.get("n_frames")
    if n_frames is None:
        for seq in (distance if isinstance(distance, tuple) else None, human, scene, any_flags):
            if seq is not None:
                n_frames = len(seq)
                break
    answer = rec["answer"]
    if not isinstance(answer, ParsedAnswer):
        answer = parse_answer(answer, task=task, n_frames=n_frames)
    row = _Row(task=task, truth=truth, sample_type=rec.get("sample_type"),
               truth_distance=distance, truth_trend=trend, truth_human=human,
               truth_scene=scene, truth_any=any_flags, answer=answer,
               model=rec.get("model"), representation=rec.get("representation"))
    return row, rec["clip_id"]


def _truth_distance(value: Any, where: str) -> float | tuple[float | None, ...] | None:
    def one(v: Any) -> float | None:
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
            raise RobosafeError(f"{where}: {v!r} is not a distance in metres")
        return float(v)

    if isinstance(value, list | tuple):
        return tuple(one(v) for v in value)
    return one(value)


def _truth_contacts(value: Any, where: str) -> tuple[Any, Any, Any]:
    def flags(v: Any, key: str) -> tuple[bool | None, ...] | None:
        if v is None:
            return None
        if not isinstance(v, list | tuple):
            raise RobosafeError(f"{where}{key}: expected one flag per time point")
        out = []
        for f in v:
            if f is None or isinstance(f, bool):
                out.append(f)
            elif isinstance(f, int) and f in (0, 1):
                out.append(bool(f))
            else:
                raise RobosafeError(f"{where}{key}: {f!r} is not a contact flag")
        return tuple(out)

    if value is None:
        return None, None, None
    if isinstance(value, Mapping):
        unknown = set(value) - {"human", "scene"}
        if unknown:
            raise RobosafeError(f"{where}: unknown keys {sorted(map(str, unknown))} "
                                "(expected 'human' and 'scene')")
        human = flags(value.get("human"), ".human")
        scene = flags(value.get("scene"), ".scene")
        if human is not None and scene is not None:
            if len(human) != len(scene):
                raise RobosafeError(f"{where}: human and scene flags differ in length")
            any_flags = tuple(_any(h, s) for h, s in zip(human, scene, strict=True))
        else:
            # with one kind missing, "any contact" is known only where that kind is True
            any_flags = tuple(True if f else None for f in (human or scene or ()))
        return human, scene, any_flags
    return None, None, flags(value, "")


def _any(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    if a is False and b is False:
        return False
    return None


def _check_duplicates(records_keys: list[tuple[Any, ...]]) -> None:
    seen = set()
    for key in records_keys:
        hashable = tuple(map(str, key))
        if hashable in seen:
            model, rep, task, clip = key
            raise RobosafeError(f"duplicate answer for clip {clip!r} ({task}, model {model!r}, "
                                f"representation {rep!r})")
        seen.add(hashable)


def _near_miss(pred: Sequence[Label], sample_types: Sequence[str | None]) -> list[Label]:
    _same_length(pred, sample_types)
    return [p for p, s in zip(pred, sample_types, strict=True) if is_near_miss(s)]


def _ordered(groups: dict[str, Any]) -> dict[str, Any]:
    known = [s for task in SAMPLE_TYPES.values() for s in task]
    first = [s for s in known if s in groups]
    return {s: groups[s] for s in first + [s for s in groups if s not in known]}


def _same_length(a: Sequence[Any], b: Sequence[Any]) -> None:
    if len(a) != len(b):
        raise RobosafeError(f"length mismatch: {len(a)} references, {len(b)} predictions")
