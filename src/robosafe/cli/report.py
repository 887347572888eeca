"""``robosafe report``: one self-contained HTML report for run directories (issue #6)."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from robosafe.cli import app, user_errors


@app.command()
@user_errors
def report(
    run_dirs: list[Path] = typer.Argument(..., help="Run directories written by robosafe run."),
    out: Path = typer.Option(Path("report.html"), "--out", "-o", help="HTML file to write."),
    title: str = typer.Option(None, "--title", help="Page title (default: robosafe report)."),
    bootstrap: int = typer.Option(10_000, "--bootstrap", min=0,
                                  help="Bootstrap resamples for VSI and CC intervals "
                                       "(0 = none)."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    workers: int = typer.Option(0, "--workers", min=0,
                                help="Scoring processes (0 = one per two CPU cores)."),
    diagnostics: list[Path] = typer.Option(None, "--diagnostics",
                                           help="shortcut.json / data_source.json of robosafe "
                                                "audit shortcut | data-source (repeatable)."),
) -> None:
    """Write an HTML report: SR / Safety / SBU / P[U|S] / VSI / CC with 95% intervals,
    SR-vs-Safety figure, per-spec and per-task breakdowns, perturbation curves, crashes.

    The file is self-contained (no scripts, no external links); its path is printed.
    """
    from robosafe.report.html import write_report

    workers = workers or max(1, (os.cpu_count() or 1) // 2)
    path = write_report(run_dirs, out, title=title, n_boot=bootstrap, seed=seed,
                        workers=workers, diagnostics=diagnostics or ())
    typer.echo(str(path))
