"""The results store: scored runs in one embedded DuckDB file.

Tables (``SCHEMA_VERSION`` 3)::

    robosafe_schema (version)
    runs          (run_id PK, run_dir, policy, policy_name, suite, created, n_episodes,
                   config JSON, ingested_at UTC)
    episodes      (run_id, episode_id, suite, task_id, task_name, episode_idx, instance_id,
                   policy_name, checkpoint_ref, seed, success, num_env_steps, error_type, safe,
                   sbu, vsi, cumulative_cost, language_level, visual_level, instruction,
                   interventions, shield_warnings)
    spec_results  (run_id, episode_id, spec_id, robustness, violated, in_safe)
    until_results (run_id, metric, mode, decision, status, episodes, available, alpha,
                   budget, episodes_run, saved)
    until_evidence (run_id, metric, curve, scale, step, value, boundary)

``episodes`` holds one DESIGN.md episode-outcome row per cell of the run directory
(``episode_id`` is the cell name, unique within a run). Its safety columns (safe, sbu, vsi) and
``spec_results`` come from scoring the episode's trace with ``robosafe.safety.score`` at ingest
time (SafeVLA-Bench Sec. 3.3: Phi_safe, Succ-But-Unsafe, VSI), so every stored run is judged by
the same registry; ``interventions`` and ``shield_warnings`` are the safety shield's counts of a
``--shield`` run (NULL without a shield). ``spec_results`` has one row per active spec of every tier (``in_safe``
marks the specs that make up Phi_safe, the rest are alternates and diagnostics).

``until_results`` and ``until_evidence`` hold what a ``robosafe run --until`` run decided
(runner.until.UntilRecord, run.json ``until_result``): per metric the decision, when, and the
budget; per metric and test the path of its evidence (``step`` 1, 2, ...: log e-value, or the
interval's width) and the boundary whose crossing decides. Runs without ``--until`` have no
rows there.

``Store.compare`` is the paper-002 comparison of two policies: the paired task-stratified Wald
test (Sec. 4, App. C.1) when the runs share instances (joined on suite, task_id, instance_id),
else the stratified two-sample test (App. C.6).
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

import duckdb
import pyarrow as pa

from robosafe.errors import RobosafeError
from robosafe.runner.rundir import RunDir, open_run
from robosafe.runner.scoring import score_run
from robosafe.stats.compare import METRICS, Comparison, compare_rows, jsonable
from robosafe.stats.intervals import wilson_interval
from robosafe.stats.shield import ShieldEpisode, ShieldSide, shield_side

log = logging.getLogger(__name__)

SCHEMA_VERSION = 3
_UNTIL_TABLES = (
    """CREATE TABLE until_results (
        run_id VARCHAR NOT NULL, metric VARCHAR NOT NULL, mode VARCHAR, decision VARCHAR,
        status VARCHAR, episodes BIGINT, available BIGINT, alpha DOUBLE, budget BIGINT,
        episodes_run BIGINT, saved BIGINT, PRIMARY KEY (run_id, metric))""",
    """CREATE TABLE until_evidence (
        run_id VARCHAR NOT NULL, metric VARCHAR NOT NULL, curve VARCHAR NOT NULL,
        scale VARCHAR, step BIGINT NOT NULL, value DOUBLE, boundary DOUBLE,
        PRIMARY KEY (run_id, metric, curve, step))""",
)
# version -> the statements that bring it to the next one. Version 1 lacked the shield
# columns, version 2 the --until tables; a writable open adds them (NULL / no rows for the
# runs stored then), a read-only open sees them through temporary views.
_MIGRATIONS = {1: ("ALTER TABLE episodes ADD COLUMN interventions BIGINT",
                   "ALTER TABLE episodes ADD COLUMN shield_warnings BIGINT"),
               2: _UNTIL_TABLES}
# read-only: what an older store lacks, as empty (or NULL) temporary views
_READ_ONLY_VIEWS = {
    1: (("CREATE TEMP VIEW episodes AS SELECT *, NULL::BIGINT AS interventions, NULL::BIGINT "
        "AS shield_warnings FROM {db}.main.episodes"),),
    2: (("CREATE TEMP VIEW until_results AS SELECT NULL::VARCHAR AS run_id, NULL::VARCHAR AS "
        "metric, NULL::VARCHAR AS mode, NULL::VARCHAR AS decision, NULL::VARCHAR AS status, "
        "NULL::BIGINT AS episodes, NULL::BIGINT AS available, NULL::DOUBLE AS alpha, "
        "NULL::BIGINT AS budget, NULL::BIGINT AS episodes_run, NULL::BIGINT AS saved "
        "WHERE false"),
        ("CREATE TEMP VIEW until_evidence AS SELECT NULL::VARCHAR AS run_id, NULL::VARCHAR AS "
        "metric, NULL::VARCHAR AS curve, NULL::VARCHAR AS scale, NULL::BIGINT AS step, "
        "NULL::DOUBLE AS value, NULL::DOUBLE AS boundary WHERE false")),
}
DEFAULT_DB = "robosafe.duckdb"
DB_ENV = "ROBOSAFE_DB"

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
        interventions BIGINT, shield_warnings BIGINT,
        PRIMARY KEY (run_id, episode_id))""",
    """CREATE TABLE spec_results (
        run_id VARCHAR NOT NULL, episode_id VARCHAR NOT NULL, spec_id VARCHAR NOT NULL,
        robustness DOUBLE, violated BOOLEAN, in_safe BOOLEAN,
        PRIMARY KEY (run_id, episode_id, spec_id))""",
    *_UNTIL_TABLES,
)

_EPISODE_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("episode_id", pa.string()), ("suite", pa.string()),
    ("task_id", pa.string()), ("task_name", pa.string()), ("episode_idx", pa.int64()),
    ("instance_id", pa.string()), ("policy_name", pa.string()),
    ("checkpoint_ref", pa.string()), ("seed", pa.int64()), ("success", pa.bool_()),
    ("num_env_steps", pa.int64()), ("error_type", pa.string()), ("safe", pa.bool_()),
    ("sbu", pa.bool_()), ("vsi", pa.float64()), ("cumulative_cost", pa.float64()),
    ("language_level", pa.int32()), ("visual_level", pa.int32()),
    ("instruction", pa.string()), ("interventions", pa.int64()),
    ("shield_warnings", pa.int64()),
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
            "interventions": row.interventions, "shield_warnings": row.shield_warnings,
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


_UNTIL_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("metric", pa.string()), ("mode", pa.string()),
    ("decision", pa.string()), ("status", pa.string()), ("episodes", pa.int64()),
    ("available", pa.int64()), ("alpha", pa.float64()), ("budget", pa.int64()),
    ("episodes_run", pa.int64()), ("saved", pa.int64()),
])
_EVIDENCE_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("metric", pa.string()), ("curve", pa.string()),
    ("scale", pa.string()), ("step", pa.int64()), ("value", pa.float64()),
    ("boundary", pa.float64()),
])


def _until_rows(run: RunDir, run_id: str) -> tuple[list[dict], list[dict]]:
    """``until_results`` and ``until_evidence`` rows of a run's stopping record (none for a
    run made without ``--until``)."""
    from robosafe.runner.until import read_record

    record = read_record(run)
    if record is None:
        return [], []
    results, evidence = [], []
    for m in record.metrics:
        results.append({"run_id": run_id, "metric": m.metric, "mode": record.plan.mode,
                        "decision": m.decision, "status": record.status,
                        "episodes": m.episodes, "available": m.available, "alpha": m.alpha,
                        "budget": record.budget, "episodes_run": record.episodes_run,
                        "saved": record.saved})
        evidence.extend({"run_id": run_id, "metric": m.metric, "curve": c.name,
                         "scale": c.scale, "step": i + 1, "value": v, "boundary": c.boundary}
                        for c in m.curves for i, v in enumerate(c.values))
    return results, evidence


# --- result objects

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
    shield: str = "off"
    """The run's ``--shield`` mode (run.json; "off" for a run made without a shield)."""
    interventions_per_episode: float | None = None
    """Mean shield interventions per finished episode (None without a shield)."""

    def to_dict(self) -> dict[str, Any]:
        return jsonable(asdict(self))


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
        if version in _MIGRATIONS and not read_only:
            self.con.begin()
            while version in _MIGRATIONS:
                for stmt in _MIGRATIONS[version]:
                    self.con.execute(stmt)
                version += 1
            self.con.execute("UPDATE robosafe_schema SET version = ?", [SCHEMA_VERSION])
            self.con.commit()
        elif version in _MIGRATIONS:
            # read-only: the old tables seen through temporary views with the new columns
            db = self.con.execute("SELECT current_database()").fetchone()[0]
            quoted = f'"{db.replace(chr(34), 2 * chr(34))}"'
            while version in _MIGRATIONS:
                for stmt in _READ_ONLY_VIEWS[version]:
                    self.con.execute(stmt.format(db=quoted))
                version += 1
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
        results, evidence = _until_rows(run, rid)
        self.con.begin()
        try:
            for table in ("until_evidence", "until_results", "spec_results", "episodes",
                          "runs"):
                self.con.execute(f"DELETE FROM {table} WHERE run_id = ?", [rid])
            self._insert("runs", run_tbl)
            self._insert("episodes", ep_tbl)
            self._insert("spec_results", spec_tbl)
            if results:
                self._insert("until_results", pa.Table.from_pylist(results,
                                                                    schema=_UNTIL_SCHEMA))
            if evidence:
                self._insert("until_evidence", pa.Table.from_pylist(evidence,
                                                                     schema=_EVIDENCE_SCHEMA))
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
                      json_extract_string(r.config, '$.shield') AS shield,
                      avg(e.interventions) AS interventions,
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
                run_dir=r["run_dir"], shield=r["shield"] or "off",
                interventions_per_episode=(None if r["interventions"] is None
                                           else float(r["interventions"])),
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

    def shield_mode(self, run_id: str) -> str:
        """The run's ``--shield`` mode as its run.json recorded it ("off" when it has none)."""
        return self.run(run_id)["config"].get("shield") or "off"

    def shield_episodes(self, run_id: str) -> list[ShieldEpisode]:
        """The run's episodes as the shield comparison reads them (``stats.shield``)."""
        return [ShieldEpisode(suite=r["suite"], task_id=r["task_id"],
                              instance_id=r["instance_id"], episode_id=r["episode_id"],
                              episode_idx=r["episode_idx"], success=r["success"],
                              safe=r["safe"], vsi=r["vsi"], interventions=r["interventions"])
                for r in self.episodes(run_id)]

    def shield_side(self, run_id: str, *, n_boot: int = 10_000, seed: int = 0) -> ShieldSide:
        """SR, Safety, SBU, VSI and interventions per episode of one run, with intervals."""
        return shield_side(run_id, self.shield_mode(run_id), self.shield_episodes(run_id),
                           n_boot=n_boot, seed=seed)

    def until_results(self, run_id: str) -> list[dict[str, Any]]:
        """What a ``--until`` run decided, one row per metric (none for other runs)."""
        self._check_run(run_id)
        return self._dicts("SELECT * FROM until_results WHERE run_id = ? ORDER BY metric",
                           [run_id])

    def until_evidence(self, run_id: str) -> list[dict[str, Any]]:
        """The evidence paths of a ``--until`` run: per metric and test, one row per step."""
        self._check_run(run_id)
        return self._dicts("SELECT * FROM until_evidence WHERE run_id = ? "
                           "ORDER BY metric, curve, step", [run_id])

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
