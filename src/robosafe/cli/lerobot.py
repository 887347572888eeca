"""``robosafe export lerobot`` and ``robosafe collect``: LeRobot v3.0 datasets out of runs."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import typer

from robosafe.cli import run as R
from robosafe.cli.common import (
    EXIT_USER_ERROR,
    app,
    emit_json,
    fail,
    out_option,
    user_errors,
    warn,
    workers_option,
)
from robosafe.cli.run import run_with_progress
from robosafe.errors import RobosafeError

REENCODE = typer.Option(False, "--reencode",
                        help="Re-encode the camera videos (a second lossy pass) instead of "
                             "copying the run's streams.")

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
    """The summary; exit 2 after it when an episode that should be in the dataset is not
    (the dataset holds the others): a partial export must not look like a clean one."""
    for w in res.warnings:
        warn(w)
    for cam, how in res.videos.items():  # copied is lossless; re-encoded is a second lossy pass
        typer.echo(f"robosafe: {cam}: {how}", err=True)
    for cell, why in res.skipped.items():
        typer.echo(f"robosafe: not exported: {cell}: {why}", err=True)
    failed = res.failed
    payload = {"dataset": str(res.path), "episodes": res.episodes, "of": res.total,
               "frames": res.frames, "skipped": res.skipped, "failed": sorted(failed),
               "videos": res.videos,
               **(extra or {})}
    if as_json:
        emit_json(payload, None, True)
    else:
        typer.echo(f"LeRobot v3.0 dataset: {res.path} ({res.episodes} of {res.total} episodes "
                   f"written, {res.frames} frames, {len(res.skipped)} not exported)")
    if failed:
        typer.echo(f"robosafe: error: {len(failed)} of {res.total} episodes could not be "
                   f"exported (listed above); {res.path} holds the other {res.episodes}",
                   err=True)
        raise typer.Exit(EXIT_USER_ERROR)


@export_app.command("lerobot")
@user_errors
def export_lerobot(
    run_dir: Path = typer.Argument(..., help="A run directory of `robosafe run`."),
    out_arg: Path = typer.Argument(None, hidden=True),
    out: Path = typer.Option(None, "--out", "-o", help="Dataset directory to create; required."),
    only_safe: bool = typer.Option(False, "--only-safe",
                                   help="Only episodes whose safety verdict is safe."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing dataset."),
    reencode: bool = REENCODE,
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary."),
) -> None:
    """A run directory as a LeRobot v3.0 dataset, with per-frame `safety.*` features and
    per-episode safety verdicts (record cameras with `robosafe run --images --record-frames`).
    Camera videos are the run's own h264 streams, copied; one line per camera says so, or
    why a camera was re-encoded."""
    from robosafe.outputs import check_outside

    out = out_option(out_arg, out)
    check_outside(out, {"run directory": run_dir})
    quiet = as_json or not sys.stderr.isatty()
    _report(_export(run_dir, out, quiet=quiet, only_safe=only_safe, overwrite=overwrite,
                    reencode=reencode), as_json)


@app.command("collect")
@user_errors
def collect(
    out: Path = typer.Option(..., "--out", "-o", help="Dataset directory to create."),
    policy: str = typer.Option("scripted-careful", "--policy", "-p",
                               help="scripted-careful | scripted-careless | random | "
                                    "replay:FILE.npy | lerobot:CHECKPOINT_DIR | ws://HOST:PORT"),
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
    overwrite: bool = typer.Option(False, "--overwrite",
                                   help="Replace an existing dataset (and discard the episodes "
                                        "of an interrupted collect)."),
    workers: int = workers_option(),
    run_dir: Path = typer.Option(None, "--run-dir",
                                 help="Keep the run directory here (default: a hidden one "
                                      "next to --out, removed once the dataset is written)."),
    resume: bool = typer.Option(False, "--resume",
                                help="Continue an interrupted collect (same options): keep "
                                     "its finished episodes, run the rest."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary."),
) -> None:
    """Scripted, seeded demonstrations as a LeRobot v3.0 dataset (same task selection as
    `robosafe run`), with robosafe's safety signals and verdicts per episode."""
    from robosafe.formats.lerobot import check_output
    from robosafe.runner.request import RunRequest, plan_run
    from robosafe.runner.rundir import open_run

    check_output(out, overwrite)  # before any episode runs
    # every setting checked before anything is created (the episodes the plan gives are
    # compared with an interrupted collect's on --resume)
    plan = plan_run(RunRequest(policy=policy, tasks=R.selection(suite, level, task_id, task),
                               episodes=episodes, seeds=seeds, horizon=horizon, images=images,
                               record_frames=True, assets=assets))
    keep = run_dir is not None
    # A fixed name (not a random temporary one): it is the state `--resume` continues.
    where = run_dir if keep else out.absolute().parent / f".collect-{out.name}"
    resume = _continue(where, out, resume=resume, overwrite=overwrite, keep=keep)
    kept = len(open_run(where).done()) if resume else 0
    if resume:
        typer.echo(f"robosafe: collect --resume: keeping {kept} finished episode(s) in {where}",
                   err=True)
    quiet = as_json or not sys.stderr.isatty()
    rows = run_with_progress(plan, where, workers=workers, backend="local", resume=resume,
                             quiet=quiet, label="collect")
    res = _export(where, out, quiet=quiet, only_safe=only_safe, overwrite=overwrite,
                  videos_asked=images)
    if not keep:  # only once the dataset is written: until then it is what --resume keeps
        shutil.rmtree(where, ignore_errors=True)
    crashed = sum(1 for r in rows if r.get("error_type"))
    _report(res, as_json, {"episodes_run": len(rows), "resumed": kept, "crashed": crashed,
                           "successes": sum(int(r.get("success") or 0) for r in rows
                                            if not r.get("error_type"))})


def _continue(where: Path, out: Path, *, resume: bool, overwrite: bool, keep: bool) -> bool:
    """Whether collect continues the run in ``where`` (said on stderr). A hidden run left by
    an interrupted collect is continued with --resume, discarded with --overwrite (one line
    each), and otherwise refused: rerunning must not silently redo or drop finished work."""
    from robosafe.outputs import DirLock
    from robosafe.runner.rundir import is_run_dir, open_run

    if not is_run_dir(where):
        if where.is_dir() and not keep:  # killed before its run.json: nothing finished
            typer.echo(f"robosafe: removing {where}, an interrupted collect's directory with "
                       "no finished episode", err=True)
            shutil.rmtree(where)
        if resume:
            typer.echo(f"robosafe: collect --resume: no interrupted collect in {where}; "
                       "starting from the first episode", err=True)
        return False
    if resume:
        return True
    if keep:
        return False  # the run directory's own one-line refusal names --resume
    DirLock.acquire(where, "collect run directory").release()  # not a live collect's
    done = len(open_run(where).done())
    if not overwrite:
        raise RobosafeError(f"{out}: an interrupted collect left {done} finished episode(s) "
                            f"in {where}; --resume continues it, --overwrite starts again")
    typer.echo(f"robosafe: discarding the {done} finished episode(s) of an interrupted "
               f"collect in {where} (--overwrite)", err=True)
    shutil.rmtree(where)
    return False


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
) -> None:
    """A LeRobot dataset as robosafe traces (score them with `robosafe score FILE`).

    An episode that cannot be read (or replayed) is one line on stderr and left out; the others
    are written and the exit status is 2 ("N of M traces written")."""
    from robosafe.outputs import check_outside
    from robosafe.trace.io import write_episodes

    check_outside(out, {"dataset": dataset})  # before reading: the dataset stays whole
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
