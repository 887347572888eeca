"""``robosafe audit ...``: benchmark-audit diagnostics (Jiang et al., paper 002)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from robosafe.audit.diff import trace_diff
from robosafe.audit.drift import creeping_drift
from robosafe.cli import app, emit_json, user_errors
from robosafe.report.tables import print_tables

audit_app = typer.Typer(no_args_is_help=True, help="Benchmark-audit diagnostics.")
app.add_typer(audit_app, name="audit")


@audit_app.command("drift")
@user_errors
def drift(calibration: Path = typer.Argument(..., help="Outcome CSV of the calibration run."),
          altered: Path = typer.Argument(..., help="Outcome CSV of the altered run."),
          paired: bool = typer.Option(None, "--paired/--unpaired",
                                      help="Force the paired (shared instances) or unpaired "
                                           "interval; default follows the outcome column."),
          confidence: float = typer.Option(0.95, help="Confidence level."),
          as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Creeping overfitting: drop = calibration - altered with a 95% interval (Sec. 5, A.2)."""
    report = creeping_drift(calibration, altered, paired=paired, confidence=confidence)
    if as_json:
        emit_json(report.to_dict(), None, True)
        return
    t = Table(title=f"Drop from {calibration} to {altered} (App. A.2)", title_justify="left",
              header_style="bold")
    for c in ("scope", "method", "calibration", "altered", "drop", "95% CI", "n (cal/alt/pairs)"):
        t.add_column(c, justify="left" if c in ("scope", "method") else "right")
    for r in (*report.suites, report.overall):
        t.add_row(r.scope, r.method, f"{r.calibration:.4f}", f"{r.altered:.4f}",
                  f"{r.drop:+.4f}", f"[{r.ci.low:+.4f}, {r.ci.high:+.4f}]",
                  f"{r.n_calibration}/{r.n_altered}/{r.n_pairs if r.n_pairs is not None else '-'}")
    print_tables([t])


@audit_app.command("diff")
@user_errors
def diff(trace_a: Path = typer.Argument(..., help="First trace (.npz, arrays per channel)."),
         trace_b: Path = typer.Argument(..., help="Second trace of the same episode (.npz)."),
         atol: float = typer.Option(1e-6, help="Tolerance on the per-step distance."),
         as_json: bool = typer.Option(False, "--json", help="Print JSON with distance curves.")
         ) -> None:
    """Determinism trace diff: first differing step per channel (App. B.2).

    Exit status 1 when the traces differ bitwise, 0 when identical.
    """
    result = trace_diff(trace_a, trace_b, atol=atol)
    if as_json:
        emit_json(result.to_dict(), None, True)
    else:
        t = Table(title=f"{trace_a} vs {trace_b}", title_justify="left", header_style="bold")
        for c in ("channel", "metric", "first diff (bitwise)", f"first diff (> {atol:g})",
                  "max distance", "note"):
            t.add_column(c)
        for c in result.channels:
            t.add_row(c.name, c.metric or "-", _step(c.first_diff_step),
                      _step(c.first_diff_step_tol),
                      "-" if c.max_distance != c.max_distance else f"{c.max_distance:.3g}",
                      c.note)
        print_tables([t])
        typer.echo("identical" if result.identical else "traces differ: " + ", ".join(
            f"{n}@{s}" for n, s in result.divergence_order()))
    if not result.identical:
        raise typer.Exit(1)


def _step(s: int | None) -> str:
    return "-" if s is None else str(s)
