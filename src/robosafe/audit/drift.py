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

import csv
import math
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

KEY = ("suite", "task_id", "instance_id")
REQUIRED = KEY  # plus "success" or "score"
OVERALL = "overall"


@dataclass(frozen=True)
class Outcome:
    """One parsed outcome row: join key, episode index (may be empty) and the outcome value."""

    suite: str
    task_id: str
    instance_id: str
    episode_idx: str
    value: float
    where: str  # "file:line" or "source[i]", for error messages

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.suite, self.task_id, self.instance_id)


@dataclass(frozen=True)
class OutcomeTable:
    source: str
    metric: str  # "success" (0/1) or "score" (bounded)
    rows: tuple[Outcome, ...]


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

    def suite(self, name: str) -> DriftResult:
        for r in self.suites:
            if r.scope == name:
                return r
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {"calibration": self.calibration_source, "altered": self.altered_source,
                "suites": [r.to_dict() for r in self.suites], "overall": self.overall.to_dict()}


def _text(v: Any) -> str:
    return "" if v is None else str(v).strip()


def _parse_value(raw: Any, metric: str, where: str) -> float:
    if isinstance(raw, bool):
        raw = int(raw)
    text = _text(raw)
    # Accept Python's str(bool) too: tables written by hand or by pandas often hold it.
    if metric == "success" and text.lower() in ("true", "false"):
        return float(text.lower() == "true")
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if (metric == "score" and math.isfinite(v)) or (metric == "success" and v in (0.0, 1.0)):
        return v
    want = "0 or 1" if metric == "success" else "a finite number"
    got = repr(text) if text else "an empty value"
    raise RobosafeError(f"{where}: column {metric!r}: expected {want}, got {got}")


def _build(records: Iterable[tuple[str, Mapping[str, Any]]], columns: Iterable[str],
           source: str, header_where: str) -> OutcomeTable:
    columns = set(columns)
    metric = "score" if "score" in columns else "success"
    for col in (*REQUIRED, metric):
        if col not in columns:
            raise RobosafeError(f"{header_where}: missing column {col!r} "
                                f"(need {', '.join(REQUIRED)} and success or score)")
    rows: list[Outcome] = []
    seen: dict[tuple[str, ...], str] = {}
    for where, rec in records:
        row = Outcome(*(_text(rec.get(c)) for c in KEY), _text(rec.get("episode_idx")),
                      _parse_value(rec.get(metric), metric, where), where)
        for col, val in zip(KEY, row.key, strict=True):
            if not val:
                raise RobosafeError(f"{where}: column {col!r}: empty value")
        # An instance may legitimately repeat (SimplerEnv reruns each grid start state 12
        # times), so only the same episode of the same instance twice is a duplicate here;
        # paired comparisons additionally demand unique instances (see _pair).
        if row.episode_idx:
            full = (*row.key, row.episode_idx)
            if full in seen:
                raise RobosafeError(
                    f"{where}: column 'episode_idx': duplicate key (suite={row.suite!r}, "
                    f"task_id={row.task_id!r}, instance_id={row.instance_id!r}, "
                    f"episode_idx={row.episode_idx!r}), first at {seen[full]}")
            seen[full] = where
        rows.append(row)
    if not rows:
        raise RobosafeError(f"{source}: no outcome rows")
    return OutcomeTable(source, metric, tuple(rows))


def read_outcome_csv(path: str | Path) -> OutcomeTable:
    """Read an episode outcome CSV (DESIGN.md columns; extra columns are ignored).

    Errors name the file, line and column: missing column, non-numeric or non-0/1 outcome,
    empty key, duplicate (suite, task_id, instance_id, episode_idx).
    """
    p = Path(path)
    try:
        fh = p.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise RobosafeError(f"{p}: cannot read outcome table ({exc.strerror})") from None
    with fh:
        reader = csv.DictReader(fh)
        try:
            if reader.fieldnames is None:
                raise RobosafeError(f"{p}: empty file, expected a CSV header")
            header = [f.strip() for f in reader.fieldnames]
            reader.fieldnames = header

            def records() -> Iterable[tuple[str, Mapping[str, Any]]]:
                for rec in reader:
                    if None in rec:
                        raise RobosafeError(f"{p}:{reader.line_num}: more fields than the "
                                            f"header")
                    yield f"{p}:{reader.line_num}", rec

            return _build(records(), header, str(p), f"{p}:1")
        except (UnicodeDecodeError, csv.Error) as exc:
            # Decoding is buffered, so the line is only approximate.
            raise RobosafeError(f"{p}: not a readable UTF-8 CSV near line "
                                f"{reader.line_num + 1} ({exc})") from None


def outcome_table(rows: Iterable[Mapping[str, Any]], source: str = "<rows>") -> OutcomeTable:
    """Parse in-memory outcome rows (dicts with the DESIGN.md columns).

    The metric is ``score`` if the first row has a score column, else ``success``; every row
    must then carry it.
    """
    rows = list(rows)
    if not rows:
        raise RobosafeError(f"{source}: no outcome rows")
    return _build(((f"{source}[{i}]", r) for i, r in enumerate(rows)), rows[0].keys(), source,
                  f"{source}[0]")


def _as_table(t: OutcomeTable | str | Path | Iterable[Mapping[str, Any]],
              label: str) -> OutcomeTable:
    if isinstance(t, OutcomeTable):
        return t
    if isinstance(t, (str, Path)):
        return read_outcome_csv(t)
    return outcome_table(t, label)


def _pair(cal: list[Outcome], alt: list[Outcome]) -> tuple[np.ndarray, np.ndarray]:
    """Join on (suite, task_id, instance_id); each instance must appear once per run."""
    def index(rows: list[Outcome]) -> dict[tuple[str, str, str], Outcome]:
        out: dict[tuple[str, str, str], Outcome] = {}
        for r in rows:
            if r.key in out:
                raise RobosafeError(
                    f"{r.where}: column 'instance_id': duplicate key (suite={r.suite!r}, "
                    f"task_id={r.task_id!r}, instance_id={r.instance_id!r}), first at "
                    f"{out[r.key].where}; a paired comparison needs one row per instance")
            out[r.key] = r
        return out

    ci, ai = index(cal), index(alt)
    shared = sorted(ci.keys() & ai.keys())
    return (np.array([ci[k].value for k in shared], dtype=float),
            np.array([ai[k].value for k in shared], dtype=float))


def _compare(scope: str, metric: str, method: str, cal: list[Outcome], alt: list[Outcome],
             cal_src: str, alt_src: str, confidence: float) -> DriftResult:
    n_pairs: int | None = None
    if method == "paired_wald":
        c, a = _pair(cal, alt)
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
    lower). ``paired=None`` picks the paper's method for the metric: Newcombe for ``success``
    (Tables 5, 7), paired Wald on shared instances for ``score`` (Table 6). ``paired=True``
    forces the paired Wald (e.g. 5/5 chain success on a shared manifest, Table 6);
    ``paired=False`` with scores uses the two-sample Wald (Table 8). "overall" pools the rows
    of all suites. Both runs must hold the same suites and the same metric column.
    Inputs are OutcomeTables, CSV paths, or iterables of row dicts.
    """
    cal = _as_table(calibration, "calibration")
    alt = _as_table(altered, "altered")
    if cal.metric != alt.metric:
        raise RobosafeError(f"{cal.source} has outcome column {cal.metric!r} but {alt.source} "
                            f"has {alt.metric!r}; both runs must use the same one")
    if paired is None:
        paired = cal.metric == "score"
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
    return DriftReport(cal.source, alt.source, suites, overall)
