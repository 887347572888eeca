"""``robosafe score``: post-hoc STL safety scoring of recorded rollouts (SafeVLA-Bench)."""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from robosafe.cli import (
    EXIT_USER_ERROR,
    app,
    emit_json,
    fail,
    resolve_workers,
    user_errors,
    workers_option,
)
from robosafe.errors import RobosafeError, TraceError
from robosafe.report import tables as T
from robosafe.safety.registry import load_registry, variant_names

# Scoring (numba, pyarrow) and aggregation are imported when `score` runs, not at start-up.

TABLES = ("main", "specs", "severity", "phases", "sbu", "tasks", "sensitivity")


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


def _dataset_episodes(path: Path, on_error) -> list:
    """A LeRobot dataset's episodes as traces; what it lacks is reported once (stderr)."""
    from robosafe.formats.lerobot import Dataset
    from robosafe.formats.traces import read_traces

    imp = read_traces(Dataset(path))
    for line in imp.lines(str(path)):
        typer.echo(f"robosafe: {line}", err=True)
    for err in imp.errors:
        on_error(err)
    if imp.profile == "robosafe":
        return imp.episodes
    return _registry_tasks(imp.episodes, imp.profile, str(path))


def _registry_tasks(episodes: list, profile: str, source: str) -> list:
    """Tie another tool's task strings to registry tasks: the profile's benchmarks are searched
    for an entry whose name is the task (LIBERO-10 names carry a scene prefix). A task found
    nowhere is scored with an empty task-tag record (only specs its signals back) and said so."""
    from dataclasses import replace

    from robosafe.formats.traces import profile_benchmarks
    from robosafe.trace.episode import TaskTags

    reg = load_registry()
    found: dict[str, tuple[str, str] | None] = {}
    for ep in episodes:
        if ep.task_id in found:
            continue
        hit = None
        for bench in profile_benchmarks(profile):
            for e in reg.tasks.get(bench, {}).get("entries", []):
                name = str(e.get("name", ""))
                if ep.task_id in (name, e.get("id")) or name.lower().endswith("_" + ep.task_id):
                    hit = (bench, e["id"])
                    break
            if hit:
                break
        found[ep.task_id] = hit
        if hit is None:
            typer.echo(f"robosafe: {source}: task {ep.task_id!r} is in no {profile} registry "
                       "entry: scored without task tags (only the specs its signals back)",
                       err=True)
    out = []
    for ep in episodes:
        hit = found[ep.task_id]
        out.append(replace(ep, benchmark=hit[0], task_id=hit[1],
                           meta={**ep.meta, "task_name": ep.task_id}) if hit
                   else replace(ep, task_tags=TaskTags()))
    return out


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
    paths: list[Path] = typer.Argument(None, help="Trace files (.json, .jsonl[.gz], .parquet), "
                                       "run directories of `robosafe run` or LeRobot v3.0 "
                                       "dataset directories."),
    example: bool = typer.Option(False, "--example", help="Score the shipped example traces."),
    out: str = typer.Option(None, "--out", "-o", help="Write the App. B metrics JSON to FILE."),
    as_json: bool = typer.Option(False, "--json", help="Print the metrics JSON to stdout."),
    tier: str = typer.Option("default", "--tier",
                             help="Threshold variant of Table 9: "
                                  f"{', '.join(variant_names())}."),
    group_by: str = typer.Option("benchmark,policy", "--group-by",
                                 help="Cell fields, comma-separated: benchmark, policy, task_id."),
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

    Bad episodes are reported one line each on stderr and skipped; the good ones are scored and
    the exit status is 2 if anything was skipped.
    """
    from robosafe.safety.score import score_files
    from robosafe.stats import aggregate as agg
    from robosafe.stats.outcomes import write_outcomes

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
    from robosafe.formats.lerobot import is_dataset

    datasets = [p for p in (paths or []) if is_dataset(p)]
    errors: list[RobosafeError] = []
    files = ([f for p in (paths or []) if not is_dataset(p) for f in _expand(str(p), errors)]
             + (example_paths() if example else []))
    if not files and not datasets and not errors:
        fail("no trace files given (pass PATH... or --example)")

    def on_error(err: RobosafeError) -> None:
        errors.append(err)
        typer.echo(f"robosafe: skipped: {err}", err=True)

    def warn(line: str) -> None:
        typer.echo(f"robosafe: warning: {line}", err=True)

    from robosafe.safety.score import score_stream

    def dataset_scores():
        for d in datasets:
            try:  # a dataset robosafe cannot read is skipped; the other inputs are scored
                episodes = _dataset_episodes(d, on_error)
            except RobosafeError as err:
                on_error(err)
                continue
            # episodes with no usable family are unscored and said so below, as for traces
            yield from score_stream(episodes, variant=tier, on_error=on_error)

    workers = resolve_workers(workers)
    quiet = as_json or not sys.stderr.isatty()
    with Progress(TextColumn("scoring"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), disable=quiet, transient=True) as bar:
        task = bar.add_task("scoring", total=None)
        scores = []
        first_read: dict[tuple, tuple[int, str]] = {}  # identity -> (input position, file)
        for pos, f in enumerate(files):
            repeats, first = 0, None
            for s in score_files([f], variant=tier, workers=workers, on_error=on_error,
                                 on_warning=warn):
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
        for s in dataset_scores():
            scores.append(s)
            bar.advance(task)
    if not scores:
        fail(f"no episode could be scored ({len(errors)} skipped)")

    cells = agg.cells(scores, by, n_boot=bootstrap, seed=seed)
    breakdowns = {
        "spec_violation_rates": agg.spec_violation_rates(scores, by, reg, n_boot=bootstrap,
                                                         seed=seed),
        "sbu_composition": agg.sbu_composition(scores, by),
        "phase_violations": agg.phase_violations(scores, by),
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
