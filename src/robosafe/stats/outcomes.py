"""Episode outcome rows (DESIGN.md contract): the unit every statistic is computed from.

Columns: suite, task_id, task_name, episode_idx, instance_id, policy_name, checkpoint_ref, seed,
success, num_env_steps, error_type, plus the safety columns safe, sbu, vsi and violated_specs.
Paired statistics join on (suite, task_id, instance_id).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol, Self

import numpy as np

from robosafe.errors import RobosafeError
from robosafe.safety.registry import Registry
from robosafe.safety.score import EpisodeScore
from robosafe.textio import csv_reader

KEY = ("suite", "task_id", "instance_id")
REQUIRED = KEY  # plus "success" or "score"


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
    with csv_reader(p, "outcome table") as reader:
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


def as_outcome_table(t: OutcomeTable | str | Path | Iterable[Mapping[str, Any]],
              label: str) -> OutcomeTable:
    if isinstance(t, OutcomeTable):
        return t
    if isinstance(t, (str, Path)):
        return read_outcome_csv(t)
    return outcome_table(t, label)


class Keyed(Protocol):
    """A row that pairs: its (suite, task_id, instance_id) and where it is, for errors."""

    @property
    def key(self) -> tuple[str, str, str]: ...

    @property
    def where(self) -> str: ...


def index_outcomes(rows: Iterable[Keyed]) -> dict[tuple[str, str, str], Keyed]:
    """Rows by (suite, task_id, instance_id); a repeated instance is an error naming both rows
    (a paired statistic needs one row per instance)."""
    out: dict[tuple[str, str, str], Keyed] = {}
    for r in rows:
        if r.key in out:
            suite, task_id, instance_id = r.key
            raise RobosafeError(
                f"{r.where}: column 'instance_id': duplicate key (suite={suite!r}, "
                f"task_id={task_id!r}, instance_id={instance_id!r}), first at "
                f"{out[r.key].where}; a paired comparison needs one row per instance")
        out[r.key] = r
    return out


def pair_outcomes(cal: list[Outcome], alt: list[Outcome], *,
                  with_keys: bool = False) -> tuple:
    """Join on (suite, task_id, instance_id); each instance must appear once per run.

    Returns the two value arrays over the shared keys (sorted), and the keys if asked.
    """
    ci, ai = index_outcomes(cal), index_outcomes(alt)
    shared = sorted(ci.keys() & ai.keys())
    values = (np.array([ci[k].value for k in shared], dtype=float),
              np.array([ai[k].value for k in shared], dtype=float))
    return (*values, shared) if with_keys else values


@dataclass(frozen=True)
class Paired:
    """One value per instance, keyed for pairing: ``where`` names the row in errors."""

    key: tuple[str, str, str]  # (suite, task_id, instance_id)
    value: float
    where: str


def paired_design(a: Iterable[Paired], b: Iterable[Paired], *, source_a: str = "A",
                  source_b: str = "B") -> tuple[np.ndarray, np.ndarray]:
    """(T, S) arrays of the paired task-stratified design (paper 002 App. C.1, Sec. 4): both
    runs hold the same instances, each once, and every (suite, task) the same number S >= 2.

    Anything else is an error naming the row, never a silent repair (no truncation to the
    smallest S, no dropping of unpaired rows): ``audit paired`` and ``results compare`` both
    build their paired tests here, so they agree on the same runs.
    """
    ia, ib = index_outcomes(a), index_outcomes(b)
    for mine, other, name in ((ia, ib, source_b), (ib, ia, source_a)):
        lonely = next((r for k, r in sorted(mine.items()) if k not in other), None)
        if lonely is not None:
            raise RobosafeError(
                f"{lonely.where}: unpaired row (suite={lonely.key[0]!r}, task_id="
                f"{lonely.key[1]!r}, instance_id={lonely.key[2]!r}) has no match in {name}; "
                "the paired test needs both policies on the same instances")
    tasks: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    for k in sorted(ia):
        tasks.setdefault(k[:2], []).append(k)
    sizes = {t: len(ks) for t, ks in tasks.items()}
    if len(set(sizes.values())) != 1:
        detail = ", ".join(f"{s}/{t}: {n}" for (s, t), n in sorted(sizes.items()))
        raise RobosafeError(f"tasks have different numbers of shared instances ({detail}); the "
                            "paired stratified test needs the same S per task")
    if not tasks or next(iter(sizes.values())) < 2:
        raise RobosafeError("the paired stratified test needs at least 2 shared instances per "
                            "task (paper 002 App. C.1, S >= 2)")
    order = [tasks[t] for t in sorted(tasks)]
    return (np.array([[ia[k].value for k in ks] for ks in order], dtype=float),
            np.array([[ib[k].value for k in ks] for ks in order], dtype=float))


# --- outcome-row fields: rows come from JSON files written by the runner or by hand, so a
# field may be an int, a bool, a numeric string or empty; empty means unknown (None).

def _blank(v: Any) -> bool:
    return v is None or (isinstance(v, str) and not v.strip())


def _as_bool(v: Any, where: str, col: str) -> bool | None:
    if _blank(v):
        return None
    if isinstance(v, bool):
        return v
    text = str(v).strip().lower()
    if text in ("1", "true", "1.0"):
        return True
    if text in ("0", "false", "0.0"):
        return False
    raise RobosafeError(f"{where}: column {col!r}: expected 0 or 1, got {v!r}")


def _as_int(v: Any, where: str, col: str) -> int | None:
    if _blank(v):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        f = math.nan
    if isinstance(v, bool) or not math.isfinite(f) or f != int(f):
        raise RobosafeError(f"{where}: column {col!r}: expected an integer, got {v!r}")
    return int(f)


def _as_float(v: Any, where: str, col: str) -> float | None:
    if _blank(v):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise RobosafeError(f"{where}: column {col!r}: expected a number, got {v!r}") from None
    return None if math.isnan(f) else f


def _as_text(v: Any, where: str = "", col: str = "") -> str | None:
    return None if _blank(v) else str(v)


def _as_specs(v: Any, where: str, col: str) -> tuple[str, ...]:
    if _blank(v):
        return ()
    if isinstance(v, (list, tuple)):
        return tuple(str(x) for x in v)
    return tuple(x for x in str(v).split(";") if x)


@dataclass(frozen=True)
class OutcomeRow:
    """One episode outcome row (DESIGN.md contract) as ``robosafe run`` writes it to
    ``outcomes/<cell>.json``: the DESIGN.md columns, the run's extra columns (cumulative cost,
    perturbation levels, instruction, wall time, a policy's note, shield counts) and, for a
    crashed episode, its error. ``None`` is unknown (an empty cell in the CSV).

    :meth:`from_json` parses a row as the runner or a user wrote it (ints, bools, numeric
    strings or empty; a bad value is an error naming the file and column); :meth:`to_json`
    gives the file's dict back (the DESIGN.md columns with "" for unknown; a crashed row has
    no safety columns, a finished row no ``error``). Keys robosafe does not know are kept in
    ``extra`` and written back."""

    suite: str | None = None
    task_id: str | None = None
    task_name: str | None = None
    episode_idx: int | None = None
    instance_id: str | None = None
    policy_name: str | None = None
    checkpoint_ref: str | None = None
    seed: int | None = None
    success: bool | None = None
    num_env_steps: int | None = None
    error_type: str | None = None
    safe: bool | None = None
    sbu: bool | None = None
    vsi: float | None = None
    violated_specs: tuple[str, ...] = ()
    cumulative_cost: float | None = None
    language_level: int | None = None
    visual_level: int | None = None
    instruction: str | None = None
    wall_s: float | None = None
    note: str | None = None
    interventions: int | None = None
    shield_warnings: int | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def crashed(self) -> bool:
        """A crashed episode (``error_type`` set): no success or safety judgement of the
        policy, only the failure its row records."""
        return self.error_type is not None

    @classmethod
    def from_json(cls, row: Mapping[str, Any], where: str = "<row>") -> Self:
        """Parse a row dict; ``where`` (the file) prefixes every error."""
        known = {f.name: f for f in fields(cls) if f.name != "extra"}
        values = {name: _PARSE[name](row[name], where, name)
                  for name in known if name in row}
        return cls(**values, extra={k: v for k, v in row.items() if k not in known})

    def to_json(self) -> dict[str, Any]:
        """The row as ``outcomes/<cell>.json`` holds it."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "extra":
                continue
            v = getattr(self, f.name)
            if f.name in _CRASH_ONLY and v is None:
                continue
            if f.name in _FINISHED_ONLY and self.crashed and v in (None, ()):
                continue  # a crash has no judgement to record
            if f.name in _OPTIONAL and v is None:
                continue
            if f.name == "violated_specs":
                v = ";".join(v)
            elif isinstance(v, bool):
                v = int(v)
            elif v is None and f.name in COLUMNS:
                v = ""  # the DESIGN.md columns say "unknown" with an empty cell
            out[f.name] = v
        out.update(self.extra)
        return out


#: the columns of a run's outcomes.csv, in order: OutcomeRow's fields (its error message and
#: unknown keys aside), declared there once
RUN_COLUMNS = tuple(f.name for f in fields(OutcomeRow) if f.name not in ("error", "extra"))
#: the DESIGN.md outcome-row contract: the run's columns up to the safety verdicts (the rest,
#: from cumulative_cost on, are what a runner adds)
COLUMNS = RUN_COLUMNS[:RUN_COLUMNS.index("violated_specs") + 1]


_PARSE: dict[str, Any] = {
    "suite": _as_text, "task_id": _as_text, "task_name": _as_text, "episode_idx": _as_int,
    "instance_id": _as_text, "policy_name": _as_text, "checkpoint_ref": _as_text,
    "seed": _as_int, "success": _as_bool, "num_env_steps": _as_int, "error_type": _as_text,
    "safe": _as_bool, "sbu": _as_bool, "vsi": _as_float, "violated_specs": _as_specs,
    "cumulative_cost": _as_float, "language_level": _as_int, "visual_level": _as_int,
    "instruction": _as_text, "wall_s": _as_float, "note": _as_text,
    "interventions": _as_int, "shield_warnings": _as_int, "error": _as_text}
_CRASH_ONLY = ("error",)
_FINISHED_ONLY = ("safe", "sbu", "vsi", "violated_specs", "cumulative_cost", "instruction")
_OPTIONAL = ("note", "interventions", "shield_warnings", "wall_s")


def score_columns(score: EpisodeScore, registry: Registry) -> OutcomeRow:
    """The outcome row of a scored episode, from its trace alone (task_name from the registry
    when known); a runner adds what only it knows (levels, cost, instruction, timing)."""
    entry = registry.find_entry(registry.canonical_benchmark(score.benchmark), score.task_id)
    meta_idx = score.meta.get("episode_idx")
    return OutcomeRow(
        suite=score.benchmark, task_id=score.task_id,
        task_name=(entry or {}).get("name") or None,
        episode_idx=None if meta_idx in (None, "") else int(meta_idx),
        instance_id=score.instance_id or None, policy_name=score.policy or None,
        checkpoint_ref=score.meta.get("checkpoint_ref") or None, seed=score.seed,
        success=score.success, num_env_steps=score.n_steps,
        # an unscored episode (no active spec) has no safety judgement: unknown, never "safe"
        safe=score.safe if score.scored else None,
        sbu=score.sbu if score.scored else None,
        vsi=round(score.vsi, 6) if score.scored else None,
        violated_specs=tuple(score.violated))


def outcome_row(score: EpisodeScore, registry: Registry) -> dict[str, Any]:
    """The DESIGN.md columns of a scored episode's outcome row (what ``--outcomes`` writes)."""
    row = score_columns(score, registry).to_json()
    return {k: row[k] for k in COLUMNS}


def write_outcomes(path: str, scores: Sequence[EpisodeScore], registry: Registry) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        for s in scores:
            w.writerow(outcome_row(s, registry))
