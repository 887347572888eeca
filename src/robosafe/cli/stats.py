"""``robosafe stats ...``: interval calculators on counts copied from papers or runs."""

from __future__ import annotations

import typer

from robosafe.cli import app, emit_json, fail, user_errors
from robosafe.stats.intervals import newcombe_interval, wilson_interval

stats_app = typer.Typer(no_args_is_help=True,
                        help="Intervals and significance cutoffs (benchmark audit, App. A.2 / C).")
app.add_typer(stats_app, name="stats")


def check_count(k: int, n: int, what: str) -> None:
    if n < 1:
        fail(f"{what}: N must be at least 1, got {n}")
    if not 0 <= k <= n:
        fail(f"{what}: count {k} is outside 0..{n}")


def check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        fail(f"--confidence must be in (0, 1), got {confidence}")


@stats_app.command("wilson")
@user_errors
def wilson(k: int = typer.Argument(..., help="Successes."),
           n: int = typer.Argument(..., help="Trials."),
           confidence: float = typer.Option(0.95, help="Confidence level."),
           as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Wilson score interval for K successes in N trials (SafeVLA-Bench App. E)."""
    check_count(k, n, "wilson")
    check_confidence(confidence)
    ci = wilson_interval(k, n, confidence)
    if as_json:
        emit_json({"k": k, "n": n, "p": k / n, "ci": ci.as_list(), "confidence": confidence},
                  None, True)
    else:
        typer.echo(f"p = {k}/{n} = {100 * k / n:.2f}%  {100 * confidence:g}% Wilson CI "
                   f"[{100 * ci.low:.2f}, {100 * ci.high:.2f}]%")


@stats_app.command("newcombe")
@user_errors
def newcombe(k1: int = typer.Argument(..., help="Successes in the first (calibration) run."),
             n1: int = typer.Argument(..., help="Trials in the first run."),
             k2: int = typer.Argument(..., help="Successes in the second (altered) run."),
             n2: int = typer.Argument(..., help="Trials in the second run."),
             confidence: float = typer.Option(0.95, help="Confidence level."),
             as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Newcombe hybrid-score interval for p1 - p2 (benchmark audit App. A.2)."""
    check_count(k1, n1, "first run")
    check_count(k2, n2, "second run")
    check_confidence(confidence)
    ci = newcombe_interval(k1, n1, k2, n2, confidence)
    diff = k1 / n1 - k2 / n2
    if as_json:
        emit_json({"p1": k1 / n1, "p2": k2 / n2, "difference": diff, "ci": ci.as_list(),
                   "confidence": confidence}, None, True)
    else:
        typer.echo(f"p1 - p2 = {100 * k1 / n1:.2f}% - {100 * k2 / n2:.2f}% = {100 * diff:.2f} pp"
                   f"  {100 * confidence:g}% Newcombe CI [{100 * ci.low:.2f}, "
                   f"{100 * ci.high:.2f}] pp")
