"""Significance of claimed gains (benchmark audit paper Sec. 4, App. C).

Two entry points:

* ``classify_claims``: rows of (benchmark, T, S, R, previous score, new score, design) copied
  from papers; each is rounded to realisable counts (C.7) and classified from the top-line
  numbers alone (C.5; C.6 for independent evaluations), with the cutoffs delta_exists and
  delta_forall of the previous score.
* ``paired_outcome_test``: two per-episode outcome tables (DESIGN.md outcome rows) of policies
  evaluated on the same instances; the exact paired task-stratified Wald test (C.1).
"""

from __future__ import annotations

import csv
import math
from collections import Counter
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from robosafe.errors import RobosafeError
from robosafe.stats.cutoffs import classify_gain, l_exists, l_forall, realizable_count
from robosafe.stats.outcomes import Paired, as_outcome_table, paired_design
from robosafe.stats.wald import WaldResult, paired_wald_test
from robosafe.textio import csv_reader

LABELS = ("provably_significant", "indeterminate", "provably_not_significant",
          "no_improvement")
CLAIM_COLUMNS = ("benchmark", "tasks", "samples", "previous", "new")
"""Required claim columns; optional: max_score (R, default 1), design (paired | independent,
default paired), unit (fraction | percent), alpha (default 0.05), and any label columns."""


@dataclass(frozen=True)
class ClaimResult:
    """One claimed gain classified from its top-line scores (App. C.5 / C.6)."""

    where: str
    benchmark: str
    tasks: int
    samples: int
    max_score: int
    design: str
    alpha: float
    previous: float
    new: float
    previous_count: int
    new_count: int
    gap_count: int
    delta_exists: float
    delta_forall: float
    label: str
    sharp: bool
    extra: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("delta_exists", "delta_forall"):
            d[k] = None if math.isinf(d[k]) else d[k]
        return d


def _field(rec: dict[str, str], col: str, where: str, kind: type, default: Any = None) -> Any:
    text = (rec.get(col) or "").strip()
    if not text:
        if default is not None:
            return default
        raise RobosafeError(f"{where}: column {col!r}: empty value")
    try:
        value = kind(text)
    except ValueError:
        raise RobosafeError(f"{where}: column {col!r}: expected "
                            f"{'an integer' if kind is int else 'a number'}, got {text!r}"
                            ) from None
    if kind is float and not math.isfinite(value):
        raise RobosafeError(f"{where}: column {col!r}: expected a finite number, got {text!r}")
    return value


def _mean_score(value: float, unit: str, R: int, col: str, where: str) -> float:
    """A reported score as a mean per-sample score on [0, R].

    With R = 1 a value above 1 is read as a percentage unless ``unit`` says otherwise, since
    papers report success rates both ways.
    """
    if unit not in ("", "fraction", "percent"):
        raise RobosafeError(f"{where}: column 'unit': expected fraction or percent, got {unit!r}")
    if unit == "percent" or (not unit and R == 1 and value > 1):
        value /= 100.0
    if not 0.0 <= value <= R:
        raise RobosafeError(f"{where}: column {col!r}: score {value:g} is outside [0, {R}]")
    return value


@dataclass(frozen=True)
class _Claim:
    """One parsed claim row."""

    T: int
    S: int
    R: int
    alpha: float
    design: str
    prev: float
    new: float
    extra: dict[str, str]


def _parse_claim(rec: dict[str, str], where: str) -> _Claim:
    T = _field(rec, "tasks", where, int)
    S = _field(rec, "samples", where, int)
    R = _field(rec, "max_score", where, int, 1)
    alpha = _field(rec, "alpha", where, float, 0.05)
    design = (rec.get("design") or "paired").strip().lower()
    if design not in ("paired", "independent"):
        raise RobosafeError(f"{where}: column 'design': expected paired or independent, got "
                            f"{design!r}")
    unit = (rec.get("unit") or "").strip().lower()
    prev = _mean_score(_field(rec, "previous", where, float), unit, R, "previous", where)
    new = _mean_score(_field(rec, "new", where, float), unit, R, "new", where)
    extra = {k: v for k, v in rec.items() if k and k not in (
        *CLAIM_COLUMNS, "max_score", "design", "unit", "alpha")}
    return _Claim(T, S, R, alpha, design, prev, new, extra)


def classify_claim(rec: dict[str, str], where: str) -> ClaimResult:
    """Classify one claim row (already read as strings) by App. C (C.7 rounding, C.5/C.6)."""
    cl = _parse_claim(rec, where)
    T, S, R, alpha, design, prev, new = (cl.T, cl.S, cl.R, cl.alpha, cl.design, cl.prev,
                                         cl.new)
    try:
        N = T * S
        a, b = realizable_count(prev, N, R), realizable_count(new, N, R)
        c = classify_gain(a, b, T, S, R, alpha, paired=design == "paired")
        le, lf = l_exists(a, T, S, R, alpha), l_forall(a, T, S, R, alpha)
    except RobosafeError as err:
        raise RobosafeError(f"{where}: {err}") from None
    label = c.label
    if label == "no_improvement" and new > prev:
        # The paper reports a gain; C.7 rounding made it L <= 0, where C.5's first line
        # (L <= c_alpha sqrt(Q_lo(L)), Q_lo(0) = 0) holds: no compatible table rejects. The
        # audit's reference labels these "not significant" too.
        label = "provably_not_significant"
    return ClaimResult(where, rec["benchmark"].strip(), T, S, R, design, alpha, prev, new, a, b,
                       b - a, le / N, lf / N, label, c.sharp, cl.extra)


@lru_cache(maxsize=1)
def figure_convention() -> dict[str, Any]:
    """The Figure 3 convention (audit/data/figure3.yaml), with normalised benchmark names."""
    import yaml

    doc = yaml.safe_load(resources.files("robosafe.audit").joinpath(
        "data", "figure3.yaml").read_text())
    pool = {_norm(m): name for name, members in doc["pools"].items() for m in members}
    designs = {_norm(k): (int(v["tasks"]), int(v["samples"])) for k, v in doc["designs"].items()}
    return {"pool": pool, "designs": designs}


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def figure_label(gain: float, le: float, lf: float) -> str:
    """robosafe's reading of Figure 3's rule on a raw reported gain and the cutoffs
    delta_exists = le, delta_forall = lf of the previous score.

    It never calls a gain significant that App. C's exact analysis rules out: a zero gain
    (C.5 with L = 0: 0 <= c_alpha sqrt(Q_lo(0)) = 0, no compatible table rejects) and any gain
    when delta_exists does not exist (C.3: L_exists = +inf, no realisable outcome rejects) are
    not significant; a gain at or above delta_exists with no delta_forall (C.4: +inf, no gap
    guarantees rejection) is inconclusive. "Significant" therefore always means L >= L_forall,
    where every compatible paired table rejects.
    """
    if gain < 0:
        return "no_improvement"
    if gain == 0 or not math.isfinite(le) or gain < le:
        return "provably_not_significant"
    if not math.isfinite(lf) or gain < lf:
        return "indeterminate"
    return "provably_significant"


def classify_claim_figure(rec: dict[str, str], where: str) -> ClaimResult:
    """Classify one claim row by robosafe's reading of how Figure 3 was drawn
    (``figure3.yaml``; the paper does not state it): raw gain, no C.7 rounding of the new
    score, baseline count round(previous x N), LIBERO suites pooled, SimplerEnv at T = 4,
    S = 24 (App. A.3's grid), labelled by :func:`figure_label`. The design actually used is
    recorded in ``extra``."""
    conv = figure_convention()
    cl = _parse_claim(rec, where)
    key = _norm(rec["benchmark"])
    bench = conv["pool"].get(key, rec["benchmark"].strip())
    T, S = conv["designs"].get(key, (cl.T, cl.S))
    extra = dict(cl.extra)
    if (T, S) != (cl.T, cl.S):
        extra["figure_design"] = f"T={T} S={S} (the row says T={cl.T} S={cl.S})"
    N = T * S
    try:
        a = realizable_count(cl.prev, N, cl.R)
        le, lf = l_exists(a, T, S, cl.R, cl.alpha), l_forall(a, T, S, cl.R, cl.alpha)
    except RobosafeError as err:
        raise RobosafeError(f"{where}: {err}") from None
    gain = cl.new - cl.prev
    b = a + gain * N
    return ClaimResult(where, bench, T, S, cl.R, cl.design, cl.alpha, cl.prev, cl.new, a,
                       round(b), round(b) - a, le / N, lf / N,
                       figure_label(gain, le / N, lf / N), cl.design == "paired", extra)


def read_claims(path: str | Path) -> list[dict[str, str]]:
    """Claim rows of a CSV as (where, record) pairs; a missing column, bytes that are not
    UTF-8 and a field over the csv module's limit (128 KiB) are one clear error. The file is
    streamed: a huge or garbage file costs one buffer, not its size twice over."""
    p = Path(path)
    with csv_reader(p, "claims") as reader:
        try:
            header = [h.strip() for h in reader.fieldnames or []]
            missing = [c for c in CLAIM_COLUMNS if c not in header]
            if missing:
                raise RobosafeError(f"{p}:1: missing column(s) {', '.join(map(repr, missing))} "
                                    f"(need {', '.join(CLAIM_COLUMNS)})")
            reader.fieldnames = header
            rows = [(f"{p}:{reader.line_num}", rec) for rec in reader]
        except (UnicodeDecodeError, csv.Error) as exc:
            # decoding is buffered, so the line is approximate
            raise RobosafeError(f"{p}: not a readable UTF-8 CSV near line "
                                f"{reader.line_num + 1} ({exc})") from None
    if not rows:
        raise RobosafeError(f"{p}: no claim rows")
    return rows


CONVENTIONS = {"app-c": classify_claim, "paper-figure": classify_claim_figure}
"""``app-c``: the paper's App. C (default); ``paper-figure``: robosafe's reading of how
Figure 3 was drawn, never more lenient than App. C on impossible or zero gains."""


def classify_claims(path: str | Path, on_error=None, convention: str = "app-c"
                    ) -> list[ClaimResult]:
    """Classify every row of a claims CSV. A bad row is passed to ``on_error`` (or raised)."""
    classify = CONVENTIONS[convention]
    out = []
    for where, rec in read_claims(path):
        try:
            out.append(classify(rec, where))
        except RobosafeError as err:
            if on_error is None:
                raise
            on_error(err)
    return out


def summary(results: list[ClaimResult]) -> dict[str, dict[str, int]]:
    """Counts per label for each benchmark (the pies of Figure 3)."""
    by: dict[str, Counter] = {}
    for r in results:
        by.setdefault(r.benchmark, Counter())[r.label] += 1
    return {b: {label: c[label] for label in LABELS} for b, c in by.items()}


@dataclass(frozen=True)
class PairedOutcomeTest:
    """The exact paired test of two outcome tables over their shared instances (App. C.1)."""

    tasks: int
    samples: int
    max_score: int
    mean_a: float
    mean_b: float
    wald: WaldResult
    label: str  # the top-line classification of the same counts, for comparison (C.5)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["wald"] = {k: (None if isinstance(v, float) and math.isinf(v) else v)
                     for k, v in d["wald"].items()}
        return d


def paired_outcome_test(a, b, *, max_score: int = 1, alpha: float = 0.05) -> PairedOutcomeTest:
    """Paired task-stratified Wald test of policy B over policy A from outcome tables.

    Rows are joined on (suite, task_id, instance_id); each (suite, task) is one task of the
    test and must have the same number S of shared instances (the paired design of Sec. 4).
    """
    ta, tb = as_outcome_table(a, "A"), as_outcome_table(b, "B")
    ya, yb = paired_design([Paired(r.key, r.value, r.where) for r in ta.rows],
                           [Paired(r.key, r.value, r.where) for r in tb.rows],
                           source_a=ta.source, source_b=tb.source)
    T, S = ya.shape
    wald = paired_wald_test(ya, yb, R=max_score, alpha=alpha)
    A, B = round(float(ya.sum())), round(float(yb.sum()))
    label = classify_gain(A, B, T, S, max_score, alpha).label
    return PairedOutcomeTest(T, S, max_score, float(ya.mean()), float(yb.mean()), wald, label)
