"""``robosafe export lerobot`` and ``robosafe collect``: LeRobot v3.0 datasets out of runs."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import typer

from robosafe.cli import EXIT_USER_ERROR, app, emit_json, fail, user_errors
from robosafe.cli import run as R
from robosafe.cli.run import _ints, run_with_progress, select_tasks

export_app = typer.Typer(no_args_is_help=True, help="Write runs in other tools' formats.")
app.add_typer(export_app, name="export")


def _export(run_dir: Path, out: Path, *, quiet: bool, **kw):
    """export_run with a progress bar (episodes written)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from robosafe.runner.export import export_run

    with Progress(TextColumn("export"), BarColumn(), MofNCompleteColumn(),
                  console=Console(stderr=True), disable=quiet, transient=True) as bar:
        job = bar.add_task("export", total=None)
        return export_run(run_dir, out, **kw,
                          on_episode=lambda k, n: bar.update(job, completed=k, total=n))


def _report(res, as_json: bool, extra: dict | None = None) -> None:
    for w in res.warnings:
        typer.echo(f"robosafe: warning: {w}", err=True)
    for cell, why in res.skipped.items():
        typer.echo(f"robosafe: not exported: {cell}: {why}", err=True)
    payload = {"dataset": str(res.path), "episodes": res.episodes, "frames": res.frames,
               "skipped": res.skipped, **(extra or {})}
    if as_json:
        emit_json(payload, None, True)
    else:
        typer.echo(f"LeRobot v3.0 dataset: {res.path} ({res.episodes} episodes, {res.frames} "
                   f"frames, {len(res.skipped)} not exported)")


@export_app.command("lerobot")
@user_errors
def export_lerobot(
    run_dir: Path = typer.Argument(..., help="A run directory of `robosafe run`."),
    out: Path = typer.Argument(..., help="Dataset directory to create."),
    only_safe: bool = typer.Option(False, "--only-safe",
                                   help="Only episodes whose safety verdict is safe."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing dataset."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary."),
):
    """A run directory as a LeRobot v3.0 dataset, with per-frame `safety.*` features and
    per-episode safety verdicts (record cameras with `robosafe run --images --record-frames`)."""
    quiet = as_json or not sys.stderr.isatty()
    _report(_export(run_dir, out, quiet=quiet, only_safe=only_safe, overwrite=overwrite),
            as_json)


@app.command("collect")
@user_errors
def collect(
    out: Path = typer.Option(..., "--out", "-o", help="Dataset directory to create."),
    policy: str = typer.Option("scripted-careful", "--policy", "-p",
                               help="scripted-careful | scripted-careless | random | "
                                    "replay:FILE.npy | ws://HOST:PORT"),
    suite: str = R.SUITE,
    level: int = R.LEVEL,
    task_id: list[str] = R.TASK_ID,
    task: list[Path] = R.TASK,
    episodes: int = R.EPISODES,
    seeds: str = R.SEEDS,
    assets: str = R.ASSETS,
    horizon: int = typer.Option(None, help="Steps per episode (default: the task's 30 s)."),
    images: bool = typer.Option(False, "--images/--no-images",
                                help="Render the task's cameras into mp4 videos."),
    only_safe: bool = typer.Option(False, "--only-safe",
                                   help="Keep only demonstrations judged safe."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing dataset."),
    workers: int = typer.Option(1, "--workers", "-j", min=1, help="Parallel episodes."),
    run_dir: Path = typer.Option(None, "--run-dir",
                                 help="Keep the run directory here (default: a temporary "
                                      "one, removed afterwards)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary."),
):
    """Scripted, seeded demonstrations as a LeRobot v3.0 dataset (same task selection as
    `robosafe run`), with robosafe's safety signals and verdicts per episode."""
    from robosafe.formats.lerobot import check_output
    from robosafe.runner.run import RunConfig

    check_output(out, overwrite)  # before any episode runs
    tasks = select_tasks(suite, level, task_id, task)
    cfg = RunConfig(policy=policy, tasks=tasks, episodes=episodes,
                    seeds=_ints(seeds, "--seeds") if seeds else (), horizon=horizon,
                    suite=suite, images=images, record_frames=True,
                    assets=R.asset_source(assets, "robosafe"))
    out.parent.mkdir(parents=True, exist_ok=True)
    keep = run_dir is not None
    where = run_dir if keep else Path(tempfile.mkdtemp(dir=out.parent, prefix=".collect-"))
    try:
        rows = run_with_progress(cfg, where / "run" if not keep else where, workers=workers,
                                 backend="local", resume=False,
                                 quiet=as_json or not sys.stderr.isatty(), label="collect")
        res = _export(where / "run" if not keep else where, out,
                      quiet=as_json or not sys.stderr.isatty(), only_safe=only_safe,
                      overwrite=overwrite)
    finally:
        if not keep:
            shutil.rmtree(where, ignore_errors=True)
    crashed = sum(1 for r in rows if r.get("error_type"))
    _report(res, as_json, {"episodes_run": len(rows), "crashed": crashed,
                           "successes": sum(int(r.get("success") or 0) for r in rows
                                            if not r.get("error_type"))})


import_app = typer.Typer(no_args_is_help=True, help="Read other tools' data as traces.")
app.add_typer(import_app, name="import")


@import_app.command("lerobot")
@user_errors
def import_lerobot(
    dataset: Path = typer.Argument(..., help="A LeRobot v3.0 dataset directory."),
    out: Path = typer.Option(..., "--out", "-o",
                             help="Trace file to write (.jsonl, .jsonl.gz, .parquet)."),
    replay: bool = typer.Option(False, "--replay",
                                help="Re-simulate the actions from the recorded initial state "
                                     "and record every signal (robosafe's own datasets)."),
    tolerance: float = typer.Option(0.01, "--tolerance", min=0.0,
                                    help="Replay divergence (m) that flags an episode."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary."),
):
    """A LeRobot dataset as robosafe traces (score them with `robosafe score FILE`).

    An episode that cannot be read (or replayed) is one line on stderr and left out; the others
    are written and the exit status is 2 ("N of M traces written")."""
    from robosafe.trace.io import write_episodes

    summary: dict = {"dataset": str(dataset), "traces": str(out)}
    if replay:
        from robosafe.runner.replay import replay_dataset

        res = replay_dataset(dataset, tolerance_m=tolerance)
        episodes, errors, total = res.episodes, res.errors, res.total
        for eid in res.diverged:
            d = res.divergence_m[eid]
            why = "a different length" if d == float("inf") else f"{100 * d:.1f} cm"
            typer.echo(f"robosafe: {dataset}: episode {eid!r}: the replay diverges from the "
                       f"recorded states ({why} > {100 * tolerance:.1f} cm)", err=True)
        summary |= {"replayed": len(episodes), "diverged": res.diverged,
                    "max_divergence_m": max((d for d in res.divergence_m.values()
                                             if d != float("inf")), default=None)}
    else:
        from robosafe.formats.lerobot import Dataset
        from robosafe.formats.traces import read_traces

        imp = read_traces(Dataset(dataset))
        for line in imp.lines(str(dataset)):
            typer.echo(f"robosafe: {line}", err=True)
        episodes, errors, total = imp.episodes, imp.errors, imp.total
        summary |= {"profile": imp.profile, "unscored": sorted(imp.unscored)}
    for err in errors:
        typer.echo(f"robosafe: skipped: {err}", err=True)
    if not episodes:
        fail(f"{dataset}: none of the {total} episodes could be read; no traces written")
    n = write_episodes(out, episodes)
    summary |= {"episodes": n, "total": total, "skipped": len(errors)}
    if as_json:
        emit_json(summary, None, True)
    else:
        typer.echo(f"{n} of {total} traces written to {out}" if errors
                   else f"{n} traces written to {out}")
    if errors:
        raise typer.Exit(EXIT_USER_ERROR)
