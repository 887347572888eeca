"""``robosafe report``: one self-contained HTML report for run directories."""

from __future__ import annotations

from pathlib import Path

import typer

from robosafe.cli.common import (
    EXIT_USER_ERROR,
    app,
    resolve_workers,
    user_errors,
    warn,
    workers_option,
)


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
    workers: int = workers_option(),
    diagnostics: list[Path] = typer.Option(None, "--diagnostics",
                                           help="shortcut.json / data_source.json of robosafe "
                                                "audit shortcut | data-source, or the JSON of "
                                                "grounding intervene (repeatable)."),
) -> None:
    """Write an HTML report: SR / Safety / SBU / P[U|S] / VSI / CC with 95% intervals,
    SR-vs-Safety figure, per-spec and per-task breakdowns, perturbation curves, crashes.

    The file is self-contained (no scripts, no external links); its path is printed. A finished
    episode whose trace is missing is named on stderr and left out (its safety is unknown);
    the report is still written and the exit status is 2.
    """
    from robosafe.budget import check_bootstrap
    from robosafe.report.html import write_report

    check_bootstrap(bootstrap)  # before any run directory is read
    gaps: list[str] = []

    def gap(line: str) -> None:
        gaps.append(line)
        warn(line)

    workers = resolve_workers(workers)
    path = write_report(run_dirs, out, title=title, n_boot=bootstrap, seed=seed,
                        workers=workers, diagnostics=diagnostics or (), warn=gap)
    typer.echo(str(path))
    if gaps:
        raise typer.Exit(EXIT_USER_ERROR)
