"""The two sides of ``robosafe compare``: a run directory, an outcome CSV or a results-store
run id, each read into ``stats.versus`` rows.

A run directory is scored the way ``results ingest`` scores it (``runner.scoring``: each
finished episode's trace, crashed episodes without judgement, SBU from the row's success), so
comparing a directory and comparing its stored run give the same numbers.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

from robosafe.errors import RobosafeError
from robosafe.runner.rundir import is_run_dir
from robosafe.stats.outcomes import OutcomeRow
from robosafe.stats.versus import Side, SideRow
from robosafe.textio import bounded_lines

KEY = ("suite", "task_id", "instance_id")


def _row(r: OutcomeRow, where: str, *, safe: bool | None, sbu: bool | None) -> SideRow:
    for col in KEY:
        if getattr(r, col) is None:
            raise RobosafeError(f"{where}: column {col!r}: empty value (compare pairs on "
                                "suite, task_id, instance_id)")
    return SideRow(suite=str(r.suite), task_id=str(r.task_id), instance_id=str(r.instance_id),
                   language_level=r.language_level or 0, visual_level=r.visual_level or 0,
                   crashed=r.crashed, success=None if r.crashed else r.success,
                   safe=None if r.crashed else safe, sbu=None if r.crashed else sbu,
                   cost=None if r.crashed else r.cumulative_cost, where=where,
                   episode_idx=r.episode_idx)


def run_dir_side(path: Path, warn: Callable[[str], None]) -> Side:
    """A run directory, its finished episodes' traces scored (``runner.scoring.score_run``)."""
    from robosafe.runner.scoring import score_run

    scored = score_run(path)
    for line in scored.gaps:
        warn(line)
    rows = []
    for e in scored.episodes:
        s = e.score
        # As the store judges a run: safety from the trace (unknown without one, or with no
        # active spec), SBU from the row's success so the two columns agree.
        safe = bool(s.safe) if s is not None and s.scored else None
        sbu = None if safe is None or e.row.success is None else bool(e.row.success and not safe)
        rows.append(_row(e.row, str(e.row_path), safe=safe, sbu=sbu))
    return Side(str(path), "run directory", tuple(rows))


def csv_side(path: Path) -> Side:
    """An outcome CSV (``robosafe score --outcomes``, a run's ``outcomes.csv``, or by hand):
    suite, task_id, instance_id, success, optionally safe, sbu, cumulative_cost,
    language_level, visual_level and error_type."""
    try:
        fh = path.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise RobosafeError(f"{path}: cannot read outcome table ({exc.strerror})") from None
    rows = []
    with fh:
        reader = csv.DictReader(bounded_lines(fh, str(path)))
        try:
            header = [h.strip() for h in reader.fieldnames or []]
            missing = [c for c in (*KEY, "success") if c not in header]
            if missing:
                raise RobosafeError(f"{path}:1: missing column(s) "
                                    f"{', '.join(map(repr, missing))} (an outcome CSV has "
                                    "suite, task_id, instance_id, success)")
            reader.fieldnames = header
            for rec in reader:
                where = f"{path}:{reader.line_num}"
                fields: dict[str, Any] = {k: v for k, v in rec.items() if k is not None}
                r = OutcomeRow.from_json(fields, where)
                if not r.crashed and r.success is None:
                    raise RobosafeError(f"{where}: column 'success': empty value")
                sbu = r.sbu
                if sbu is None and r.safe is not None and r.success is not None:
                    sbu = bool(r.success and not r.safe)
                rows.append(_row(r, where, safe=r.safe, sbu=sbu))
        except (UnicodeDecodeError, csv.Error) as exc:
            raise RobosafeError(f"{path}: not a readable UTF-8 CSV near line "
                                f"{reader.line_num + 1} ({exc})") from None
    if not rows:
        raise RobosafeError(f"{path}: no outcome rows")
    return Side(str(path), "outcome CSV", tuple(rows))


def store_side(run_id: str, db: str) -> Side:
    """A run stored by ``robosafe results ingest`` (already scored there)."""
    from robosafe.runner.store import Store

    with Store(db, read_only=True) as store:
        episodes = store.episodes(run_id)
    rows = []
    for e in episodes:
        where = f"{db}: run {run_id!r} episode {e['episode_id']!r}"
        r = OutcomeRow.from_json({k: v for k, v in e.items()
                                  if k in OutcomeRow.__dataclass_fields__}, where)
        rows.append(_row(r, where, safe=r.safe, sbu=r.sbu))
    return Side(run_id, "store run", tuple(rows))


def read_side(text: str, db: str, warn: Callable[[str], None]) -> Side:
    """What the user named: a run directory, an outcome CSV, else a run id of the store."""
    path = Path(text)
    if path.is_dir():
        if is_run_dir(path):
            return run_dir_side(path, warn)
        raise RobosafeError(f"{text}: a directory but not a run directory (no run.json); "
                            "compare takes run directories, outcome CSVs or results-store "
                            "run ids")
    if path.is_file():
        if path.suffix.lower() != ".csv":
            raise RobosafeError(f"{text}: not an outcome CSV (.csv), a run directory or a "
                                "results-store run id")
        return csv_side(path)
    if "/" in text or path.suffix:
        # it reads as a path, not a run id: say so rather than search the store for it
        raise RobosafeError(f"{text}: no such run directory or outcome CSV")
    if not Path(db).is_file():
        raise RobosafeError(f"{text}: no such run directory or outcome CSV, and no results "
                            f"store {db} to look it up as a run id (robosafe results ingest "
                            "RUN_DIR stores one)")
    return store_side(text, db)
