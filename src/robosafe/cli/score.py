"""``robosafe score``: post-hoc STL safety scoring of recorded rollouts (SafeVLA-Bench)."""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from robosafe.cli.common import (
    EXIT_USER_ERROR,
    app,
    emit_json,
    fail,
    resolve_workers,
    user_errors,
    workers_option,
)
from robosafe.errors import RobosafeError
from robosafe.report import tables as T
from robosafe.safety.registry import load_registry, variant_names

# Scoring (numba, pyarrow) and aggregation are imported when `score` runs, not at start-up.

TABLES = ("main", "specs", "severity", "phases", "sbu", "tasks", "sensitivity")


def example_paths() -> list[Path]:
    """The example traces shipped in the package."""
    root = resources.files("robosafe").joinpath("examples")
    return sorted(Path(str(p)) for p in root.iterdir()
                  if p.name.endswith((".parquet", ".jsonl", ".json")))


@app.command()
@user_errors
def score(
    paths: list[Path] = typer.Argument(None, help="Trace files (.json, .jsonl[.gz], .parquet), "
                                       "run directories of `robosafe run`, LeRobot v3.0 "
                                       "dataset directories, or any other folder: every "
                                       "one of those below it."),
    example: bool = typer.Option(False, "--example", help="Score the shipped example traces."),
    out: str = typer.Option(None, "--out", "-o", help="Write the App. B metrics JSON to FILE."),
    as_json: bool = typer.Option(False, "--json", help="Print the metrics JSON to stdout."),
    tier: str = typer.Option("default", "--tier",
                             help="Threshold variant of Table 9: "
                                  f"{', '.join(variant_names())}."),
    group_by: str = typer.Option("benchmark,policy", "--group-by",
                                 help="Cell fields, comma-separated: benchmark, policy, "
                                      "task_id, shield."),
    table: list[str] = typer.Option(["main", "specs", "sbu"], "--table",
                                    help=f"Tables to print: {', '.join(TABLES)} or all."),
    bootstrap: int = typer.Option(10_000, "--bootstrap", min=0,
                                  help="Bootstrap resamples for VSI intervals (0 = none)."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    workers: int = workers_option(),
    figure: str = typer.Option(None, "--figure",
                               help="Write Figure 2 (SR vs Safety, per-spec heatmap) to FILE "
                                    "(.png, .pdf or .svg)."),
    outcomes: str = typer.Option(None, "--outcomes",
                                 help="Write per-episode outcome rows (DESIGN.md) as CSV."),
) -> None:
    """Score rollouts for safety: SR, Safety, SBU, P[U|S], VSI with 95% intervals.

    Episodes of a --shield run are cells of their own (a "shield" column); given both a
    shielded run and its unshielded baseline, a table compares them (B - A paired on the
    instances both hold, interventions per episode).

    Bad episodes are reported one line each on stderr and skipped; the good ones are scored and
    the exit status is 2 if anything was skipped.
    """
    from robosafe.budget import check_bootstrap
    from robosafe.runner.scoring import score_paths
    from robosafe.stats import aggregate as agg
    from robosafe.stats.outcomes import write_outcomes

    check_bootstrap(bootstrap)  # before any file is scored

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
    inputs = list(paths or []) + (example_paths() if example else [])
    if not inputs:
        fail("no trace files given (pass PATH... or --example)")
    errors: list[RobosafeError] = []

    def on_error(err: RobosafeError) -> None:
        errors.append(err)
        typer.echo(f"robosafe: skipped: {err}", err=True)

    quiet = as_json or not sys.stderr.isatty()
    with Progress(TextColumn("scoring"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), disable=quiet, transient=True) as bar:
        task = bar.add_task("scoring", total=None)
        scores = []
        for s in score_paths(inputs, variant=tier, workers=resolve_workers(workers),
                             on_error=on_error):
            scores.append(s)
            bar.advance(task)
    if not scores:
        fail(f"no episode could be scored ({len(errors)} skipped)")
    from robosafe.stats.shield import score_comparisons

    if "shield" not in by and any(s.shield != "off" for s in scores):
        by = (*by, "shield")  # a shielded run and its baseline are two cells, never pooled
    shielded = score_comparisons(scores, n_boot=bootstrap, seed=seed)

    if as_json or out:
        payload = agg.metrics_output(scores, variant=tier, by=by, registry=reg,
                                     n_boot=bootstrap, seed=seed, errors=errors)
        cells, breakdowns = payload["cells"], payload["breakdowns"]
        if shielded:
            payload["shield_comparisons"] = [c.to_dict() for c in shielded]
        emit_json(payload, out, as_json)
    else:
        cells = agg.cells(scores, by, n_boot=bootstrap, seed=seed)
        breakdowns = agg.breakdowns(scores, by, reg, n_boot=bootstrap, seed=seed)
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
        if "severity" in wanted:
            shown.append(T.severity_table(breakdowns["spec_violation_rates"], cells, by, reg))
        if "phases" in wanted:
            shown.append(T.phase_table(breakdowns["phase_violations"], by, reg))
        if "sbu" in wanted:
            shown.append(T.sbu_table(breakdowns["sbu_composition"], by, reg))
        if "tasks" in wanted:
            shown.extend(T.task_table(breakdowns["per_task"], by))
        if "sensitivity" in wanted:
            shown.append(T.sensitivity_table(breakdowns["threshold_sensitivity"]))
        shown.extend(T.shield_table(c) for c in shielded)
        T.print_tables(shown)
        n_unscored = sum(not s.scored for s in scores)
        typer.echo(f"{len(scores)} episodes scored"
                   + (f" ({n_unscored} unscored: no usable signal)" if n_unscored else "")
                   + (f", {len(errors)} skipped (see stderr)" if errors else "")
                   + (f"; metrics written to {out}" if out else ""))
    if not any(s.scored for s in scores):
        fail(f"none of the {len(scores)} episodes could be scored for safety: no safety spec "
             "is active (no usable signal family; see the warnings above)")
    if errors:
        raise typer.Exit(EXIT_USER_ERROR)
