"""``robosafe results ...``: the results store of scored runs.

The database is ``--db PATH``, else ``$ROBOSAFE_DB``, else ``robosafe.duckdb`` in the current
directory. ``compare`` is the paired task-stratified Wald test of benchmark audit paper 002
(Sec. 4, App. C.1) when the runs share instances, else the two-sample test (App. C.6).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table

from robosafe.cli.common import EXIT_USER_ERROR, app, emit_json, fail, user_errors, warn
from robosafe.errors import RobosafeError
from robosafe.report.tables import num_ci

if TYPE_CHECKING:
    from robosafe.runner.store import Store as _StoreType

# The store (duckdb, pyarrow, numpy) is imported when a results command runs. Its database
# defaults are repeated here for the option help; tests/test_cli_startup.py keeps them equal to
# robosafe.runner.store.DEFAULT_DB / DB_ENV.
DEFAULT_DB = "robosafe.duckdb"
DB_ENV = "ROBOSAFE_DB"


def Store(*args: Any, **kwargs: Any) -> _StoreType:  # stands for the class it opens
    from robosafe.runner.store import Store as _Store

    return _Store(*args, **kwargs)

results_app = typer.Typer(no_args_is_help=True,
                          help="Results store (DuckDB): ingest scored runs, list, compare.")
app.add_typer(results_app, name="results")


def _db_option() -> typer.models.OptionInfo:
    return typer.Option(DEFAULT_DB, "--db", envvar=DB_ENV,
                        help=f"Results database (default: ${DB_ENV} or ./{DEFAULT_DB}).")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _ci(ci: list[float] | None) -> str:
    return "-" if ci is None else f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _num(x: float | None, fmt: str = ".3g") -> str:
    return "-" if x is None else format(x, fmt)


@results_app.command("ingest")
@user_errors
def ingest(
    run_dirs: list[Path] = typer.Argument(..., help="Run directories (robosafe run --out)."),
    db: str = _db_option(),
    run_id: str = typer.Option(None, "--run-id",
                               help="Store under this id instead of run.json's (one RUN_DIR)."),
    replace: bool = typer.Option(False, "--replace",
                                 help="Overwrite a run id stored from another directory."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Score run directories and store them (re-ingesting a run replaces its rows)."""
    if run_id is not None and len(run_dirs) != 1:
        fail("--run-id needs exactly one RUN_DIR")
    done, failed = [], 0
    with Store(db) as store:
        for d in run_dirs:
            # One bad directory must not stop the batch: report it and go on (exit 2 after).
            gaps: list[str] = []

            def gap(line: str, gaps: list[str] = gaps) -> None:
                gaps.append(line)
                warn(line)

            try:
                rid = store.ingest(d, run_id=run_id, replace=replace, warn=gap)
            except RobosafeError as err:
                typer.echo(f"robosafe: error: {err}", err=True)
                failed += 1
                continue
            summary = store.runs([rid])[0]
            done.append({"run_id": rid, "run_dir": str(d), "n": summary.n,
                         "n_scored": summary.n_scored, "n_errors": summary.n_errors,
                         "n_missing_traces": len(gaps)})
            # a finished episode whose trace is gone is stored unscored, and the exit says so
            failed += bool(gaps)
            if not as_json:
                missing = f", {len(gaps)} without its trace" if gaps else ""
                typer.echo(f"ingested {rid}: {summary.n} episodes ({summary.n_scored} scored, "
                           f"{summary.n_errors} crashed{missing}) from {d} into {db}")
    if as_json:
        emit_json({"db": db, "ingested": done}, None, True)
    if failed:
        raise typer.Exit(EXIT_USER_ERROR)


@results_app.command("list")
@user_errors
def list_runs(db: str = _db_option(),
              as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Stored runs: n, SR, Safety, SBU (with Wilson 95% CI) and mean cumulative cost."""
    with Store(db, read_only=True) as store:
        rows = store.runs()
    if as_json:
        emit_json({"db": db, "runs": [r.to_dict() for r in rows]}, None, True)
        return
    if not rows:
        typer.echo(f"{db}: no runs stored")
        return
    # Intervals are in `show` and --json: with them the table no longer fits 80 columns.
    table = Table(title=f"runs in {db}", caption="95% Wilson intervals: robosafe results show RUN")
    # Run ids are what the user types into compare/show: never cut them short.
    table.add_column("run", no_wrap=True)
    for col in ("policy", "suite", "shield", "n", "SR %", "Safety %", "SBU %", "CC"):
        table.add_column(col)
    for r in rows:
        table.add_row(r.run_id, r.policy_name or "-", r.suite or "-", r.shield, str(r.n),
                      _pct(r.sr), _pct(r.safety), _pct(r.sbu), _num(r.mean_cc))
    Console().print(table)


@results_app.command("compare")
@user_errors
def compare(
    run_a: str = typer.Argument(..., help="Baseline run id (A)."),
    run_b: str = typer.Argument(..., help="Run id tested for an improvement over A (B)."),
    metric: str = typer.Option("success", help="success | safe."),
    design: str = typer.Option("auto", help="auto (paired when instances match) | paired | "
                                            "independent."),
    alpha: float = typer.Option(0.05, help="One-sided significance level."),
    db: str = _db_option(),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Is run B better than run A? (paper 002: paired Wald test App. C.1, else C.6)

    Paired task-stratified Wald test when both runs hold the same instances (suite, task_id,
    instance_id), else the stratified two-sample test. `robosafe compare A B` is the front
    door: it pairs on the instances both share and counts the rows it leaves out, for stored
    run ids, run directories or outcome CSVs, on success, Safety and SBU at once.
    """
    with Store(db, read_only=True) as store:
        r = store.compare(run_a, run_b, metric, design=design, alpha=alpha)
        sides = [store.shield_side(run_id) for run_id in (run_a, run_b)]
    if as_json:
        emit_json({**r.to_dict(), "shield": {"a": sides[0].mode, "b": sides[1].mode},
                   "interventions_per_episode": {
                       k: {"mean": s.interventions, "ci": s.interventions_ci,
                           "total": s.interventions_total}
                       for k, s in zip("ab", sides, strict=True)}}, None, True)
        return
    how = (f"paired on {r.n_paired} shared instances" if r.design == "paired"
           else "independent samples")
    table = Table("", run_a, run_b, title=f"{r.metric}: {run_b} vs {run_a} ({how})")
    table.add_row(f"mean {r.metric} (T={r.tasks} x S={r.samples})", f"{r.mean_a:.4f}",
                  f"{r.mean_b:.4f}")
    table.add_row("rows with a known value", str(r.n_a), str(r.n_b))
    table.add_row("rows left out (balancing)", str(r.dropped_a), str(r.dropped_b))
    table.add_row("shield (run.json)", *(s.mode for s in sides))
    table.add_row("interventions / episode (95% CI)",
                  *(num_ci(s.interventions, s.interventions_ci, 2) for s in sides))
    Console().print(table)
    if r.design_note:
        typer.echo(f"robosafe: {r.design_note} (`robosafe compare {run_a} {run_b}` pairs on "
                   "the instances both runs share and counts the rest)", err=True)
    if r.degenerate:
        typer.echo(f"difference B - A = {r.difference:+.4f}; {r.degenerate}")
        return
    lo, hi = r.ci
    typer.echo(f"difference B - A = {r.difference:+.4f}, {100 * r.confidence:g}% CI "
               f"[{lo:+.4f}, {hi:+.4f}]")
    typer.echo(f"Z = {r.statistic:.3f}, one-sided p = {r.pvalue:.4g}: "
               + ("significant" if r.reject else "not significant")
               + f" at alpha={r.alpha:g} (H1: {run_b} better than {run_a})")


@results_app.command("show")
@user_errors
def show(run_id: str = typer.Argument(..., help="A stored run id."),
         db: str = _db_option(),
         episodes: bool = typer.Option(False, "--list-episodes", help="Also list every episode."),
         as_json: bool = typer.Option(False, "--json", help="Print JSON (with episodes)."),
         old_episodes: bool = typer.Option(False, "--episodes", hidden=True)) -> None:
    """One run: its config, summary, per-task SR / Safety and per-spec violation rates."""
    if old_episodes:  # --episodes is a count on every other command
        warn("--episodes is deprecated and will be removed in the next release; use "
             "--list-episodes")
        episodes = True
    with Store(db, read_only=True) as store:
        run = store.run(run_id)
        summary = store.runs([run_id])[0]
        tasks = store.task_rates(run_id)
        specs = store.spec_rates(run_id)
        rows = store.episodes(run_id) if (episodes or as_json) else []
        side = store.shield_side(run_id)
    if as_json:
        emit_json({"run": run, "summary": summary.to_dict(), "tasks": tasks, "specs": specs,
                   "episodes": rows}, None, True)
        return
    con = Console()
    con.print(f"[bold]{run_id}[/bold]  policy {run['policy'] or '-'}  suite {run['suite'] or '-'}"
              f"  dir {run['run_dir']}")
    if side.mode != "off":
        con.print(f"shield {side.mode}  interventions / episode "
                  f"{num_ci(side.interventions, side.interventions_ci, 2)} (95% CI)")
    con.print(f"n {summary.n} ({summary.n_scored} scored, {summary.n_errors} crashed)  "
              f"SR {_pct(summary.sr)} {_ci(summary.sr_ci)}  Safety {_pct(summary.safety)} "
              f"{_ci(summary.safety_ci)}  SBU {_pct(summary.sbu)}  CC {_num(summary.mean_cc)}")
    t = Table("suite", "task", "n", "SR %", "Safety %", "crashed", title="per task")
    for r in tasks:
        t.add_row(r["suite"], r["task_id"], str(r["n"]), _pct(r["sr"]), _pct(r["safety"]),
                  str(r["n_errors"]))
    con.print(t)
    if specs:
        t = Table("spec", "active", "violated", "rate %", title="safety specs")
        for r in specs:
            t.add_row(r["spec_id"], str(r["n_active"]), str(r["n_violated"]),
                      _pct(r["violation_rate"]))
        con.print(t)
    if rows:
        t = Table("episode", "instance", "success", "safe", "VSI", "CC", "error",
                  title="episodes")
        for r in rows:
            t.add_row(r["episode_id"], r["instance_id"] or "-", _num(r["success"], ""),
                      _num(r["safe"], ""), _num(r["vsi"]), _num(r["cumulative_cost"]),
                      r["error_type"] or "")
        con.print(t)
