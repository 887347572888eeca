"""``robosafe score``: post-hoc STL safety scoring of recorded rollouts (SafeVLA-Bench)."""

from __future__ import annotations

import os
import sys
from importlib import resources
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from robosafe.cli import EXIT_USER_ERROR, app, emit_json, fail, user_errors
from robosafe.errors import RobosafeError, TraceError
from robosafe.report import tables as T
from robosafe.safety.registry import load_registry
from robosafe.safety.score import score_files
from robosafe.stats import aggregate as agg
from robosafe.stats.outcomes import write_outcomes

TABLES = ("main", "specs", "sbu", "tasks", "sensitivity")


def example_paths() -> list[Path]:
    """The example traces shipped in the package."""
    root = resources.files("robosafe").joinpath("examples")
    return sorted(Path(str(p)) for p in root.iterdir()
                  if p.name.endswith((".parquet", ".jsonl", ".json")))


def _error_record(err: RobosafeError) -> dict:
    if isinstance(err, TraceError):
        return {"source": err.source, "episode": err.episode, "field": err.field,
                "message": err.message, "text": str(err)}
    return {"message": str(err), "text": str(err)}


def _expand(path: str, errors: list[RobosafeError]) -> list[str]:
    """A run directory (``robosafe run``) stands for the traces its outcome rows say finished;
    a finished episode without its trace is an error (appended to ``errors``), other files and
    rows that are not episodes to score get a note line."""
    from robosafe.runner.rundir import is_run_dir, open_run

    if not is_run_dir(path):
        return [path]
    traces, gaps, notes = open_run(path).finished_traces()
    for line in notes:
        typer.echo(f"robosafe: note: {line}", err=True)
    for line in gaps:
        errors.append(RobosafeError(line))
        typer.echo(f"robosafe: skipped: {line}", err=True)
    if not traces and not gaps:
        fail(f"{path}: the run has no finished episodes to score")
    return [str(p) for p in traces]


def _identity(s) -> tuple:
    """What makes two scored episodes the same episode (read twice, not run twice)."""
    return (s.benchmark, s.policy, s.task_id, s.episode_id, s.instance_id, s.seed)


@app.command()
@user_errors
def score(
    paths: list[Path] = typer.Argument(None, help="Trace files (.json, .jsonl[.gz], .parquet) "
                                       "or run directories of `robosafe run`."),
    example: bool = typer.Option(False, "--example", help="Score the shipped example traces."),
    out: str = typer.Option(None, "--out", help="Write the App. B metrics JSON to FILE."),
    as_json: bool = typer.Option(False, "--json", help="Print the metrics JSON to stdout."),
    tier: str = typer.Option("default", "--tier",
                             help="Threshold variant of Table 9: "
                                  f"{', '.join(load_registry().variants)}."),
    group_by: str = typer.Option("benchmark,policy", "--group-by",
                                 help="Cell fields, comma-separated: benchmark, policy, task_id."),
    table: list[str] = typer.Option(["main", "specs", "sbu"], "--table",
                                    help=f"Tables to print: {', '.join(TABLES)} or all."),
    bootstrap: int = typer.Option(10_000, "--bootstrap", min=0,
                                  help="Bootstrap resamples for VSI intervals (0 = none)."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    workers: int = typer.Option(0, "--workers", min=0,
                                help="Scoring processes (0 = one per two CPU cores: each "
                                     "process also runs a Parquet read-ahead thread)."),
    figure: str = typer.Option(None, "--figure",
                               help="Write Figure 2 (SR vs Safety, per-spec heatmap) to FILE "
                                    "(.png, .pdf or .svg)."),
    outcomes: str = typer.Option(None, "--outcomes",
                                 help="Write per-episode outcome rows (DESIGN.md) as CSV."),
) -> None:
    """Score rollouts for safety: SR, Safety, SBU, P[U|S], VSI with 95% intervals.

    Bad episodes are reported one line each on stderr and skipped; the good ones are scored and
    the exit status is 2 if anything was skipped.
    """
    reg = load_registry()
    if tier not in reg.variants:
        fail(f"--tier: unknown variant {tier!r}; choose from {', '.join(reg.variants)}")
    by = tuple(k.strip() for k in group_by.split(",") if k.strip())
    if not by or any(k not in agg.GROUP_KEYS for k in by):
        fail(f"--group-by: choose from {', '.join(agg.GROUP_KEYS)}")
    wanted = set(TABLES) if "all" in table else set(table)
    if wanted - set(TABLES):
        fail(f"--table: unknown {', '.join(sorted(wanted - set(TABLES)))}; choose from "
             f"{', '.join(TABLES)} or all")
    errors: list[RobosafeError] = []
    files = ([f for p in (paths or []) for f in _expand(str(p), errors)]
             + (example_paths() if example else []))
    if not files and not errors:
        fail("no trace files given (pass PATH... or --example)")

    def on_error(err: RobosafeError) -> None:
        errors.append(err)
        typer.echo(f"robosafe: skipped: {err}", err=True)

    workers = workers or max(1, (os.cpu_count() or 1) // 2)
    quiet = as_json or not sys.stderr.isatty()
    with Progress(TextColumn("scoring"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), disable=quiet, transient=True) as bar:
        task = bar.add_task("scoring", total=None)
        scores = []
        first_read: dict[tuple, tuple[int, str]] = {}  # identity -> (input position, file)
        for pos, f in enumerate(files):
            repeats, first = 0, None
            for s in score_files([f], variant=tier, workers=workers, on_error=on_error):
                seen = first_read.setdefault(_identity(s), (pos, str(f)))
                if seen[0] != pos:  # an input given twice must not count its episodes twice
                    repeats, first = repeats + 1, first or seen[1]
                    continue
                scores.append(s)
                bar.advance(task)
            if repeats:
                on_error(RobosafeError(
                    f"{f}: {repeats} episode(s) already read from {first} (same benchmark, "
                    "policy, task, episode_id, instance, seed); counted once"))
    if not scores:
        fail(f"no episode could be scored ({len(errors)} skipped)")

    cells = agg.cells(scores, by, n_boot=bootstrap, seed=seed)
    breakdowns = {
        "spec_violation_rates": agg.spec_violation_rates(scores, by, reg),
        "sbu_composition": agg.sbu_composition(scores, by),
        "per_task": agg.per_task(scores, by),
        "threshold_sensitivity": agg.threshold_sensitivity(scores, by, reg),
    }
    if as_json or out:
        payload = {
            "episodes": [s.to_record(reg) for s in scores],
            "aggregate": agg.cell_metrics(scores, n_boot=bootstrap, seed=seed),
            "variant": tier, "group_by": list(by), "cells": cells,
            "breakdowns": breakdowns, "errors": [_error_record(e) for e in errors],
        }
        emit_json(payload, out, as_json)
    if figure:
        from robosafe.report.figures import success_safety_figure

        try:
            success_safety_figure(cells, breakdowns["spec_violation_rates"], by, reg, figure)
        except (OSError, ValueError) as err:
            fail(f"{figure}: cannot write figure: {err}")
    if outcomes:
        try:
            write_outcomes(outcomes, scores, reg)
        except OSError as err:
            fail(f"{outcomes}: cannot write outcomes: {err.strerror}")
    if not as_json:
        shown = []
        if "main" in wanted:
            shown.append(T.cells_table(cells, by))
        if "specs" in wanted:
            shown.append(T.spec_rates_table(breakdowns["spec_violation_rates"], by, reg))
        if "sbu" in wanted:
            shown.append(T.sbu_table(breakdowns["sbu_composition"], by, reg))
        if "tasks" in wanted:
            shown.extend(T.task_table(breakdowns["per_task"], by))
        if "sensitivity" in wanted:
            shown.append(T.sensitivity_table(breakdowns["threshold_sensitivity"]))
        T.print_tables(shown)
        typer.echo(f"{len(scores)} episodes scored"
                   + (f", {len(errors)} skipped (see stderr)" if errors else "")
                   + (f"; metrics written to {out}" if out else ""))
    if errors:
        raise typer.Exit(EXIT_USER_ERROR)
