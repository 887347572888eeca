"""Creeping-overfitting drift: calibration run versus altered run (audit paper Sec. 5, App. A.2).

Jiang et al., "What Are We Actually Benchmarking in Robot Manipulation?": the same policy is run
under the same protocol twice, once as the matched local calibration and once with one factor
changed (distribution overfitting) or with a freshly drawn test sample (sample overfitting). The
diagnostic is drop = calibration - altered with a 95% interval (App. A.2 "Interval methods"):

- binary success (Tables 5 and 7): Newcombe-Wilson interval, rows independent;
- bounded score on a shared manifest (Table 6): paired row-level Wald over the instances both
  runs share, joined on (suite, task_id, instance_id) (DESIGN.md, Episode outcome row);
- bounded score on independent samples (Table 8): two-sample Wald.

Inputs are episode outcome rows (DESIGN.md). A ``score`` column, when present, is the bounded
score; otherwise ``success`` (0/1) is the outcome.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robosafe.errors import RobosafeError
from robosafe.stats.intervals import (
    Interval,
    newcombe_interval,
    paired_wald_interval,
    two_sample_wald_interval,
)
from robosafe.stats.outcomes import (
    Outcome,
    OutcomeTable,
    as_outcome_table,
    pair_outcomes,
)

OVERALL = "overall"


@dataclass(frozen=True)
class DriftResult:
    """drop = calibration - altered for one scope (a suite, or "overall").

    ``calibration`` / ``altered`` are the means the interval is built from (over shared
    instances when paired); ``n_calibration`` / ``n_altered`` count the scope's rows in each
    run and ``n_pairs`` the shared instances used (None when unpaired).
    """

    scope: str
    metric: str
    method: str  # "newcombe", "paired_wald" or "two_sample_wald"
    calibration: float
    altered: float
    drop: float
    ci: Interval
    n_calibration: int
    n_altered: int
    n_pairs: int | None
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        return {"scope": self.scope, "metric": self.metric, "method": self.method,
                "calibration": self.calibration, "altered": self.altered, "drop": self.drop,
                "drop_ci": self.ci.as_list(), "n_calibration": self.n_calibration,
                "n_altered": self.n_altered, "n_pairs": self.n_pairs,
                "confidence": self.confidence}


@dataclass(frozen=True)
class DriftReport:
    calibration_source: str
    altered_source: str
    suites: tuple[DriftResult, ...]  # sorted by suite name
    overall: DriftResult
    design_note: str = ""
    """How the interval was chosen (printed as one line by the CLI)."""

    def suite(self, name: str) -> DriftResult:
        for r in self.suites:
            if r.scope == name:
                return r
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {"calibration": self.calibration_source, "altered": self.altered_source,
                "suites": [r.to_dict() for r in self.suites], "overall": self.overall.to_dict(),
                "design_note": self.design_note}


def shared_design(cal: OutcomeTable, alt: OutcomeTable) -> tuple[bool, str]:
    """Whether two runs form a paired design: each holds every (suite, task_id, instance_id)
    once and both hold the same ones (the same manifest). Returns the answer and the line that
    says why."""
    keys = []
    for t in (cal, alt):
        k = [r.key for r in t.rows]
        if len(set(k)) != len(k):
            return False, (f"unpaired: {t.source} repeats instances (suite, task_id, "
                           "instance_id), so rows cannot be matched one to one")
        keys.append(set(k))
    shared = len(keys[0] & keys[1])
    if keys[0] != keys[1]:
        return False, (f"unpaired: the runs share {shared} of {len(keys[0])} / {len(keys[1])} "
                       "instances, not the same manifest")
    return True, (f"paired: both runs hold the same {shared} instances (suite, task_id, "
                  "instance_id), so the paired interval is used (--unpaired to override)")


def _compare(scope: str, metric: str, method: str, cal: list[Outcome], alt: list[Outcome],
             cal_src: str, alt_src: str, confidence: float) -> DriftResult:
    n_pairs: int | None = None
    if method == "paired_wald":
        c, a = pair_outcomes(cal, alt)
        n_pairs = c.size
        if n_pairs == 0:
            where = "" if scope == OVERALL else f"suite {scope!r}: "
            raise RobosafeError(
                f"{where}no shared instances between {cal_src} and {alt_src} on "
                f"(suite, task_id, instance_id); a paired comparison needs the same manifest")
        ci = paired_wald_interval(c, a, confidence)
    else:
        c = np.array([r.value for r in cal], dtype=float)
        a = np.array([r.value for r in alt], dtype=float)
        if method == "newcombe":
            ci = newcombe_interval(int(c.sum()), c.size, int(a.sum()), a.size, confidence)
        else:
            ci = two_sample_wald_interval(c, a, confidence)
    mc, ma = float(c.mean()), float(a.mean())
    return DriftResult(scope, metric, method, mc, ma, mc - ma, ci, len(cal), len(alt), n_pairs,
                       confidence)


def creeping_drift(calibration: OutcomeTable | str | Path | Iterable[Mapping[str, Any]],
                   altered: OutcomeTable | str | Path | Iterable[Mapping[str, Any]], *,
                   paired: bool | None = None, confidence: float = 0.95) -> DriftReport:
    """Drop in success (or bounded score) from calibration to altered run, per suite and overall.

    Audit paper Sec. 5 / App. A.2: drop = calibration - altered (positive: altered scored
    lower). ``paired=None``: bounded scores use the paired Wald over shared instances (Table
    6); binary success follows the data: the paired Wald when both runs hold exactly the same
    instances once each (a shared manifest, :func:`shared_design`), else Newcombe (Tables 5,
    7). ``paired=False`` with scores uses the two-sample Wald (Table 8). ``paired=True`` / ``False`` forces the
    choice. ``design_note`` says which applied and why. "overall" pools the rows
    of all suites. Both runs must hold the same suites and the same metric column.
    Inputs are OutcomeTables, CSV paths, or iterables of row dicts.
    """
    cal = as_outcome_table(calibration, "calibration")
    alt = as_outcome_table(altered, "altered")
    if cal.metric != alt.metric:
        raise RobosafeError(f"{cal.source} has outcome column {cal.metric!r} but {alt.source} "
                            f"has {alt.metric!r}; both runs must use the same one")
    if paired is None and cal.metric == "score":
        paired, note = True, ("paired: bounded scores are compared over the instances both "
                              "runs share (Table 6); --unpaired for the two-sample Wald")
    elif paired is None:
        paired, note = shared_design(cal, alt)
    else:
        note = ("paired: forced by the caller" if paired
                else "unpaired: forced by the caller")
    method = ("paired_wald" if paired
              else "newcombe" if cal.metric == "success" else "two_sample_wald")
    by_suite: dict[str, tuple[list[Outcome], list[Outcome]]] = {}
    for side, table in enumerate((cal, alt)):
        for r in table.rows:
            by_suite.setdefault(r.suite, ([], []))[side].append(r)
    for suite, (c_rows, a_rows) in by_suite.items():
        if not c_rows or not a_rows:
            has, lacks = (alt, cal) if not c_rows else (cal, alt)
            raise RobosafeError(f"suite {suite!r} is in {has.source} but not in {lacks.source}; "
                                f"drift compares the same suites")
    args = (cal.metric, method)
    # Overall first: when nothing is shared at all, say so rather than blame one suite.
    overall = _compare(OVERALL, *args, list(cal.rows), list(alt.rows), cal.source, alt.source,
                       confidence)
    suites = tuple(_compare(s, *args, *by_suite[s], cal.source, alt.source, confidence)
                   for s in sorted(by_suite))
    return DriftReport(cal.source, alt.source, suites, overall, note)
