"""The results store: scored runs in one embedded DuckDB file.

Tables (``SCHEMA_VERSION`` 1)::

    robosafe_schema (version)
    runs          (run_id PK, run_dir, policy, policy_name, suite, created, n_episodes,
                   config JSON, ingested_at UTC)
    episodes      (run_id, episode_id, suite, task_id, task_name, episode_idx, instance_id,
                   policy_name, checkpoint_ref, seed, success, num_env_steps, error_type, safe,
                   sbu, vsi, cumulative_cost, language_level, visual_level, instruction)
    spec_results  (run_id, episode_id, spec_id, robustness, violated, in_safe)

``episodes`` holds one DESIGN.md episode-outcome row per cell of the run directory
(``episode_id`` is the cell name, unique within a run). Its safety columns (safe, sbu, vsi) and
``spec_results`` come from scoring the episode's trace with ``robosafe.safety.score`` at ingest
time (SafeVLA-Bench Sec. 3.3: Phi_safe, Succ-But-Unsafe, VSI), so every stored run is judged by
the same registry; ``spec_results`` has one row per active spec of every tier (``in_safe``
marks the specs that make up Phi_safe, the rest are alternates and diagnostics).

``Store.compare`` is the paper-002 comparison of two policies: the paired task-stratified Wald
test (Sec. 4, App. C.1) when the runs share instances (joined on suite, task_id, instance_id),
else the stratified two-sample test (App. C.6).
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import os
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

import duckdb
import numpy as np
import pyarrow as pa

from robosafe.errors import RobosafeError
from robosafe.runner.rundir import RunDir, open_run
from robosafe.runner.scoring import score_run
from robosafe.stats.intervals import wilson_interval, z_value
from robosafe.stats.outcomes import Paired, paired_design
from robosafe.stats.wald import WaldResult, independent_wald_test, paired_wald_test

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
DEFAULT_DB = "robosafe.duckdb"
DB_ENV = "ROBOSAFE_DB"
METRICS = ("success", "safe")
DESIGNS = ("auto", "paired", "independent")

_SCHEMA = (
    "CREATE TABLE robosafe_schema (version INTEGER NOT NULL)",
    """CREATE TABLE runs (
        run_id VARCHAR PRIMARY KEY, run_dir VARCHAR, policy VARCHAR, policy_name VARCHAR,
        suite VARCHAR, created VARCHAR, n_episodes INTEGER, config JSON,
        ingested_at TIMESTAMP)""",
    """CREATE TABLE episodes (
        run_id VARCHAR NOT NULL, episode_id VARCHAR NOT NULL, suite VARCHAR, task_id VARCHAR,
        task_name VARCHAR, episode_idx BIGINT, instance_id VARCHAR, policy_name VARCHAR,
        checkpoint_ref VARCHAR, seed BIGINT, success BOOLEAN, num_env_steps BIGINT,
        error_type VARCHAR, safe BOOLEAN, sbu BOOLEAN, vsi DOUBLE, cumulative_cost DOUBLE,
        language_level INTEGER, visual_level INTEGER, instruction VARCHAR,
        PRIMARY KEY (run_id, episode_id))""",
    """CREATE TABLE spec_results (
        run_id VARCHAR NOT NULL, episode_id VARCHAR NOT NULL, spec_id VARCHAR NOT NULL,
        robustness DOUBLE, violated BOOLEAN, in_safe BOOLEAN,
        PRIMARY KEY (run_id, episode_id, spec_id))""",
)

_EPISODE_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("episode_id", pa.string()), ("suite", pa.string()),
    ("task_id", pa.string()), ("task_name", pa.string()), ("episode_idx", pa.int64()),
    ("instance_id", pa.string()), ("policy_name", pa.string()),
    ("checkpoint_ref", pa.string()), ("seed", pa.int64()), ("success", pa.bool_()),
    ("num_env_steps", pa.int64()), ("error_type", pa.string()), ("safe", pa.bool_()),
    ("sbu", pa.bool_()), ("vsi", pa.float64()), ("cumulative_cost", pa.float64()),
    ("language_level", pa.int32()), ("visual_level", pa.int32()),
    ("instruction", pa.string()),
])
EPISODE_COLUMNS = tuple(_EPISODE_SCHEMA.names)
_SPEC_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("episode_id", pa.string()), ("spec_id", pa.string()),
    ("robustness", pa.float64()), ("violated", pa.bool_()), ("in_safe", pa.bool_()),
])
_RUN_COLUMNS = ("run_id", "run_dir", "policy", "policy_name", "suite", "created",
                "n_episodes", "config", "ingested_at")
_SAFETY = ("safe", "sbu", "vsi")


#: How long opening a store waits for another process's lock (a concurrent ingest takes
#: seconds: scoring happens before its transaction, which is short).
LOCK_TIMEOUT_S = 30.0


def default_db() -> str:
    """``$ROBOSAFE_DB`` if set, else ``robosafe.duckdb`` in the current directory."""
    return os.environ.get(DB_ENV) or DEFAULT_DB


def _connect(path: Path, read_only: bool, timeout_s: float) -> duckdb.DuckDBPyConnection:
    """Open the database; while another process (a concurrent ``results ingest``) holds
    DuckDB's file lock, wait and retry for up to ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    delay = 0.05
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.Error as exc:
            locked = "lock" in str(exc).lower()
            if not locked or time.monotonic() >= deadline:
                hint = (f" (still locked by another process after {timeout_s:g} s)"
                        if locked else "")
                raise RobosafeError(f"{path}: cannot open the results database: "
                                    f"{_first_line(exc)}{hint}") from None
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 0.5)


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _as_text(v: Any) -> str | None:
    return None if v is None or (isinstance(v, str) and not v.strip()) else str(v)


def _episode_rows(run: RunDir, run_id: str, warn: Callable[[str], None]
                  ) -> tuple[list[dict], list[dict]]:
    """Episode rows and per-spec rows of a run directory, scored by ``runner.scoring``;
    ``warn`` gets one line per finished episode whose trace is missing (its safety is stored
    as NULL: the row's own judgement without its trace is not evidence)."""
    scored = score_run(run)
    episodes, specs = [], []
    for e in scored.episodes:
        row, where = e.row, str(e.row_path)
        rec: dict[str, Any] = {
            "run_id": run_id, "episode_id": e.cell, "suite": row.suite,
            "task_id": row.task_id, "task_name": row.task_name,
            "episode_idx": row.episode_idx, "instance_id": row.instance_id,
            "policy_name": row.policy_name or run.policy_name or None,
            "checkpoint_ref": row.checkpoint_ref, "seed": row.seed, "success": row.success,
            "num_env_steps": row.num_env_steps, "error_type": row.error_type,
            "safe": None, "sbu": None, "vsi": None,
            "cumulative_cost": row.cumulative_cost, "language_level": row.language_level,
            "visual_level": row.visual_level, "instruction": row.instruction,
        }
        for col in ("suite", "task_id", "instance_id"):
            if rec[col] is None:
                raise RobosafeError(f"{where}: column {col!r}: empty value (paired statistics "
                                    "join on suite, task_id, instance_id)")
        s = e.score
        # A crashed episode has no judgement, nor has a finished one without its trace: safety
        # stays NULL rather than "safe by omission".
        if s is not None:
            if s.scored:
                rec["safe"], rec["vsi"] = bool(s.safe), float(s.vsi)
                # SBU from the stored success, so the 2x2 counts agree with the success column.
                rec["sbu"] = (None if rec["success"] is None
                              else bool(rec["success"] and not s.safe))
            # an episode with no active safe spec is unscored: NULL, never "safe by omission"
            in_safe = set(s.safe_specs)
            specs.extend({"run_id": run_id, "episode_id": e.cell, "spec_id": sid,
                          "robustness": float(rho), "violated": bool(rho < 0),
                          "in_safe": sid in in_safe}
                         for sid, rho in sorted(s.robustness.items()))
        episodes.append(rec)
    for line in scored.gaps:
        warn(line)
    return episodes, specs


# --- result objects

def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, datetime):
        return v.isoformat()
    return v


@dataclass(frozen=True)
class RunSummary:
    """One row of ``robosafe results list``: SR, Safety, SBU with Wilson 95% intervals
    (SafeVLA-Bench Sec. 3.3 metrics, App. E intervals) and mean cumulative cost.

    SR is over episodes with a known success (a crashed episode counts as the failure its row
    records); Safety and SBU are over scored episodes (crashed episodes have no judgement).
    """

    run_id: str
    policy_name: str | None
    suite: str | None
    n: int
    n_errors: int
    n_scored: int
    sr: float | None
    sr_ci: list[float] | None
    safety: float | None
    safety_ci: list[float] | None
    sbu: float | None
    sbu_ci: list[float] | None
    mean_cc: float | None
    run_dir: str | None = None
    ingested_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(asdict(self))


@dataclass(frozen=True)
class Comparison:
    """Run B against run A on one metric (benchmark audit paper 002, Sec. 4 and App. C).

    ``design`` is ``paired`` (App. C.1: both runs on the same instances, joined on suite,
    task_id, instance_id; the design must hold exactly, as in ``audit paired``) or
    ``independent`` (App. C.6: stratified two-sample test, T tasks x S samples per task; tasks
    with more usable rows are balanced down to the smallest S by dropping the highest-sorting
    episodes, and ``dropped_a`` / ``dropped_b`` count every usable row left out). ``difference`` is Delta-hat = mean_B - mean_A (task-stratified),
    ``ci`` the two-sided Wald interval Delta-hat +- z_{(1+c)/2} sqrt(V-hat), ``pvalue`` the
    one-sided p of H0: Delta <= 0 against H1: B better than A (the paper's test), ``reject``
    its decision at ``alpha``. ``wald`` is the stats result, unchanged.

    ``degenerate`` says why the interval and Z mean nothing when the variance estimate V-hat is
    0 (every task's differences are constant: the interval collapses to a point and Z is
    +-inf or 0); ``None`` otherwise.
    """

    run_a: str
    run_b: str
    metric: str
    design: str
    tasks: int
    samples: int
    n: int
    n_paired: int
    n_a: int
    n_b: int
    dropped_a: int
    dropped_b: int
    mean_a: float
    mean_b: float
    difference: float
    ci: list[float]
    confidence: float
    statistic: float
    pvalue: float
    alpha: float
    reject: bool
    wald: WaldResult = field(repr=False)
    design_note: str = ""  # why "auto" did not pair (the first row that breaks the design)
    degenerate: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("wald")
        return _jsonable(d)


def _group(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], list[Mapping]]:
    by: dict[tuple[str, str], list[Mapping]] = defaultdict(list)
    for r in rows:
        by[(r["suite"], r["task_id"])].append(r)
    return by


def _paired_design(a: list[Mapping], b: list[Mapping], run_a: str, run_b: str
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The one paired design of ``stats.outcomes.paired_design`` (what ``audit paired`` uses)."""
    def rows(rs: list[Mapping], run: str) -> list[Paired]:
        return [Paired((r["suite"], r["task_id"], r["instance_id"]), r["y"],
                       f"run {run!r} episode {r['episode_id']!r}") for r in rs]

    ya, yb = paired_design(rows(a, run_a), rows(b, run_b), source_a=f"run {run_a!r}",
                           source_b=f"run {run_b!r}")
    return ya.astype(np.int64), yb.astype(np.int64)


def _independent_design(a: list[Mapping], b: list[Mapping], names: str
                        ) -> tuple[np.ndarray, np.ndarray]:
    ga, gb = _group(a), _group(b)
    tasks = sorted(ga.keys() & gb.keys())
    if not tasks:
        raise RobosafeError(f"{names} share no (suite, task_id); there is nothing to compare")
    S = min(min(len(ga[t]), len(gb[t])) for t in tasks)
    if S < 2:
        raise RobosafeError(f"{names}: the stratified Wald test needs at least 2 episodes per "
                            f"task in both runs (paper 002 App. C.1, S >= 2); the smallest "
                            f"shared task has {S}")

    def order(r: Mapping) -> tuple:
        return (r["episode_idx"] is None, r["episode_idx"] or 0, r["episode_id"])

    ya = np.array([[r["y"] for r in sorted(ga[t], key=order)[:S]] for t in tasks], np.int64)
    yb = np.array([[r["y"] for r in sorted(gb[t], key=order)[:S]] for t in tasks], np.int64)
    return ya, yb


def _degenerate(ya: np.ndarray, design: str, metric: str) -> str:
    """Why V-hat is 0, in the data's own terms (paper 002 App. C.1: V-hat sums per-task
    variances of the paired differences, App. C.6 of each run's outcomes)."""
    if design == "paired":
        what = "every task's paired differences B - A are all the same"
    else:
        what = "each run's outcomes are constant within every task"
    T, S = ya.shape
    return (f"no interval or test: the variance estimate is 0 ({what} for {metric} over "
            f"T={T} x S={S}), so the Wald interval would be a point and Z infinite or 0")


def compare_rows(rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]], *,
                 metric: str = "success", design: str = "auto", alpha: float = 0.05,
                 confidence: float = 0.95, run_a: str = "A", run_b: str = "B") -> Comparison:
    """Compare two runs' episode rows (dicts with the ``episodes`` columns) on ``metric``.

    ``design="auto"`` uses the paired task-stratified Wald test (paper 002 App. C.1) when the
    rows form its design exactly (the same instances in both runs, each once, the same S per
    task), else the two-sample test (App. C.6) and says why in ``design_note``.
    Rows whose metric is NULL (crashed episodes for ``safe``) take no part.
    """
    if metric not in METRICS:
        raise RobosafeError(f"unknown metric {metric!r} (choose from {', '.join(METRICS)})")
    if design not in DESIGNS:
        raise RobosafeError(f"unknown design {design!r} (choose from {', '.join(DESIGNS)})")
    a = [{**r, "y": int(r[metric])} for r in rows_a if r.get(metric) is not None]
    b = [{**r, "y": int(r[metric])} for r in rows_b if r.get(metric) is not None]
    for rows, name in ((a, run_a), (b, run_b)):
        if not rows:
            raise RobosafeError(f"run {name!r} has no episodes with a known {metric}")
    arrays, note = None, ""
    if design == "paired":
        arrays = _paired_design(a, b, run_a, run_b)
    elif design == "auto":
        try:
            arrays = _paired_design(a, b, run_a, run_b)
        except RobosafeError as exc:
            note = f"not paired: {exc}"
    used = "paired" if arrays is not None else "independent"
    ya, yb = (arrays if arrays is not None
              else _independent_design(a, b, f"runs {run_a!r} and {run_b!r}"))
    test = paired_wald_test if used == "paired" else independent_wald_test
    wald = test(ya, yb, R=1, alpha=alpha)
    T, S = ya.shape
    half = z_value(confidence) * wald.stderr
    return Comparison(
        degenerate=_degenerate(ya, used, metric) if wald.stderr == 0 else None,
        run_a=run_a, run_b=run_b, metric=metric, design=used, tasks=T, samples=S, n=T * S,
        n_paired=T * S if used == "paired" else 0, n_a=len(a), n_b=len(b),
        dropped_a=len(a) - T * S, dropped_b=len(b) - T * S, mean_a=float(ya.mean()),
        mean_b=float(yb.mean()), difference=wald.estimate,
        ci=[wald.estimate - half, wald.estimate + half], confidence=confidence,
        statistic=wald.statistic, pvalue=wald.pvalue, alpha=alpha, reject=wald.reject,
        wald=wald, design_note=note)


# --- the store

class Store:
    """An embedded DuckDB results database (``robosafe.duckdb`` by default).

    A missing file is created (unless ``read_only``); a file that is not a DuckDB database, a
    DuckDB database that is not a robosafe store, or a store of another schema version is a
    one-line ``RobosafeError``. Use as a context manager, or call ``close``.
    """

    def __init__(self, path: str | os.PathLike | None = None, *, read_only: bool = False,
                 lock_timeout_s: float = LOCK_TIMEOUT_S):
        self.path = Path(path if path is not None else default_db())
        if read_only and not self.path.exists():
            raise RobosafeError(f"{self.path}: no results database here (create one with "
                                "`robosafe results ingest RUN_DIR`)")
        if self.path.is_dir():
            raise RobosafeError(f"{self.path}: is a directory, not a results database file")
        self.con = _connect(self.path, read_only, lock_timeout_s)
        try:
            self._check_schema(read_only)
        except BaseException:
            self.con.close()
            raise

    def _tables(self) -> set[str]:
        return {r[0] for r in self.con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
        ).fetchall()}

    def _check_schema(self, read_only: bool) -> None:
        tables = self._tables()
        if not tables and not read_only:
            self.con.begin()
            for stmt in _SCHEMA:
                self.con.execute(stmt)
            self.con.execute("INSERT INTO robosafe_schema VALUES (?)", [SCHEMA_VERSION])
            self.con.commit()
            return
        if "robosafe_schema" not in tables:
            raise RobosafeError(f"{self.path}: a DuckDB database but not a robosafe results "
                                "store (no robosafe_schema table); choose another --db")
        row = self.con.execute("SELECT max(version) FROM robosafe_schema").fetchone()
        version = row[0] if row else None
        if version != SCHEMA_VERSION:
            raise RobosafeError(f"{self.path}: results store schema version {version}, this "
                                f"robosafe reads version {SCHEMA_VERSION}; ingest the run "
                                "directories again into a new --db file")

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing

    def _insert(self, table: str, data: pa.Table) -> None:
        """Append ``data`` to ``table`` (the one place rows are written)."""
        name = f"_robosafe_{table}"
        self.con.register(name, data)
        try:
            self.con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {name}")
        finally:
            self.con.unregister(name)

    def ingest(self, run_dir: str | os.PathLike, *, run_id: str | None = None,
               replace: bool = False, warn: Callable[[str], None] | None = None) -> str:
        """Score a run directory and store it; returns its run id.

        Idempotent: the run's old rows are deleted and the new ones inserted in one
        transaction, so re-ingesting gives the same rows and a crash mid-ingest leaves the old
        ones. Scoring happens before the transaction opens, so it stays short. A run id already
        stored from another directory is refused unless ``replace`` (two runs that happen to
        share a directory name must not silently overwrite each other). ``warn`` (default:
        the logger) gets one line per finished episode that could not be scored.
        """
        run = open_run(run_dir)
        rid = run_id or run.run_id
        where = str(run.path.resolve())
        episodes, specs = _episode_rows(run, rid, warn or log.warning)
        prev = self.con.execute("SELECT run_dir FROM runs WHERE run_id = ?", [rid]).fetchone()
        if prev is not None and prev[0] != where and not replace:
            raise RobosafeError(f"run id {rid!r} is already stored from {prev[0]}; pass "
                                "--run-id NEW to store this run beside it or --replace to "
                                "overwrite it")
        cfg = run.config
        suites = sorted({e["suite"] for e in episodes if e["suite"]})
        suite = cfg.get("suite") or (",".join(suites) if suites else None)
        run_row = {
            "run_id": [rid], "run_dir": [where], "policy": [_as_text(cfg.get("policy"))],
            "policy_name": [run.policy_name or None],
            "suite": [None if suite is None else str(suite)],
            "created": [_as_text(cfg.get("created"))], "n_episodes": [len(episodes)],
            "config": [json.dumps(cfg, sort_keys=True, default=str)],
            # Naive UTC: reading TIMESTAMPTZ back into Python would need pytz.
            "ingested_at": [datetime.now(UTC).replace(tzinfo=None)],
        }
        run_tbl = pa.table(run_row, schema=pa.schema([
            ("run_id", pa.string()), ("run_dir", pa.string()), ("policy", pa.string()),
            ("policy_name", pa.string()), ("suite", pa.string()), ("created", pa.string()),
            ("n_episodes", pa.int64()), ("config", pa.string()),
            ("ingested_at", pa.timestamp("us"))]))
        ep_tbl = pa.Table.from_pylist(episodes, schema=_EPISODE_SCHEMA)
        spec_tbl = pa.Table.from_pylist(specs, schema=_SPEC_SCHEMA)
        self.con.begin()
        try:
            for table in ("spec_results", "episodes", "runs"):
                self.con.execute(f"DELETE FROM {table} WHERE run_id = ?", [rid])
            self._insert("runs", run_tbl)
            self._insert("episodes", ep_tbl)
            self._insert("spec_results", spec_tbl)
            self.con.commit()
        except BaseException as exc:
            self.con.rollback()
            if isinstance(exc, duckdb.Error):
                raise RobosafeError(f"{self.path}: cannot store run {rid!r}: "
                                    f"{_first_line(exc)}") from None
            raise
        return rid

    # -- reading

    def run_ids(self) -> list[str]:
        return [r[0] for r in self.con.execute("SELECT run_id FROM runs ORDER BY run_id")
                .fetchall()]

    def _check_run(self, run_id: str) -> None:
        ids = self.run_ids()
        if run_id in ids:
            return
        close = difflib.get_close_matches(run_id, ids, n=3, cutoff=0.5)
        hint = (f"did you mean {', '.join(close)}?" if close else
                f"stored runs: {', '.join(ids[:10])}{' ...' if len(ids) > 10 else ''}"
                if ids else "the store is empty; ingest a run directory first")
        raise RobosafeError(f"{self.path}: unknown run id {run_id!r} ({hint})")

    def _dicts(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        cur = self.con.execute(sql, list(params))
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]

    def runs(self, run_ids: Sequence[str] | None = None) -> list[RunSummary]:
        """Summary per stored run (all runs, or ``run_ids``), sorted by run id."""
        for rid in run_ids or ():
            self._check_run(rid)
        rows = self._dicts(
            """SELECT r.run_id, r.policy_name, r.suite, r.run_dir, r.ingested_at,
                      count(e.episode_id) AS n, count(e.error_type) AS n_errors,
                      count(e.success) AS n_known, count_if(e.success) AS k_success,
                      count(e.safe) AS n_scored, count_if(e.safe) AS k_safe,
                      count_if(e.sbu) AS k_sbu, avg(e.cumulative_cost) AS mean_cc
               FROM runs r LEFT JOIN episodes e USING (run_id)
               GROUP BY ALL ORDER BY r.run_id""")
        if run_ids is not None:
            rows = [r for r in rows if r["run_id"] in set(run_ids)]

        def rate(k: int, n: int) -> tuple[float | None, list[float] | None]:
            return (None, None) if n == 0 else (k / n, wilson_interval(k, n).as_list())

        out = []
        for r in rows:
            sr, sr_ci = rate(r["k_success"], r["n_known"])
            safety, safety_ci = rate(r["k_safe"], r["n_scored"])
            sbu, sbu_ci = rate(r["k_sbu"], r["n_scored"])
            out.append(RunSummary(
                run_id=r["run_id"], policy_name=r["policy_name"], suite=r["suite"], n=r["n"],
                n_errors=r["n_errors"], n_scored=r["n_scored"], sr=sr, sr_ci=sr_ci,
                safety=safety, safety_ci=safety_ci, sbu=sbu, sbu_ci=sbu_ci,
                mean_cc=None if r["mean_cc"] is None else float(r["mean_cc"]),
                run_dir=r["run_dir"],
                ingested_at=None if r["ingested_at"] is None else r["ingested_at"].isoformat()))
        return out

    def run(self, run_id: str) -> dict[str, Any]:
        """The stored ``runs`` row of ``run_id`` (config parsed back into a dict)."""
        self._check_run(run_id)
        row = self._dicts(f"SELECT {', '.join(_RUN_COLUMNS)} FROM runs WHERE run_id = ?",
                          [run_id])[0]
        row["config"] = json.loads(row["config"]) if row["config"] else {}
        row["ingested_at"] = row["ingested_at"].isoformat() if row["ingested_at"] else None
        return row

    def episodes(self, run_id: str) -> list[dict[str, Any]]:
        """Episode rows of ``run_id`` (``episodes`` columns), sorted by episode id."""
        self._check_run(run_id)
        return self._dicts(f"SELECT {', '.join(EPISODE_COLUMNS)} FROM episodes "
                           "WHERE run_id = ? ORDER BY episode_id", [run_id])

    def spec_results(self, run_id: str) -> list[dict[str, Any]]:
        self._check_run(run_id)
        return self._dicts("SELECT * FROM spec_results WHERE run_id = ? "
                           "ORDER BY episode_id, spec_id", [run_id])

    def spec_rates(self, run_id: str) -> list[dict[str, Any]]:
        """Per safety spec: episodes where it was active and the violation rate there
        (SafeVLA-Bench Tables 7-8 marginals)."""
        self._check_run(run_id)
        return self._dicts(
            """SELECT spec_id, count(*) AS n_active, count_if(violated) AS n_violated,
                      count_if(violated) / count(*) AS violation_rate
               FROM spec_results WHERE run_id = ? AND in_safe
               GROUP BY spec_id ORDER BY spec_id""", [run_id])

    def task_rates(self, run_id: str) -> list[dict[str, Any]]:
        """Per (suite, task): n, SR and Safety (SafeVLA-Bench Table 12)."""
        self._check_run(run_id)
        return self._dicts(
            """SELECT suite, task_id, any_value(task_name) AS task_name, count(*) AS n,
                      avg(success::INTEGER) AS sr, avg(safe::INTEGER) AS safety,
                      count(error_type) AS n_errors
               FROM episodes WHERE run_id = ? GROUP BY suite, task_id
               ORDER BY suite, task_id""", [run_id])

    def compare(self, run_a: str, run_b: str, metric: str = "success", *,
                design: str = "auto", alpha: float = 0.05,
                confidence: float = 0.95) -> Comparison:
        """Run B against run A on ``metric`` (``success`` or ``safe``); see ``compare_rows``.

        The paired task-stratified Wald test (benchmark audit paper 002, Sec. 4 and App. C.1)
        when the runs share instances (joined on suite, task_id, instance_id), else the
        stratified two-sample test (App. C.6).
        """
        if metric not in METRICS:
            raise RobosafeError(f"unknown metric {metric!r} (choose from {', '.join(METRICS)})")
        return compare_rows(self.episodes(run_a), self.episodes(run_b), metric=metric,
                            design=design, alpha=alpha, confidence=confidence,
                            run_a=run_a, run_b=run_b)
