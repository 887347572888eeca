"""``robosafe compare A B``: is B better than A? The one front door for two evaluations.

A and B are run directories, outcome CSVs or results-store run ids (``runner.sides``); the
statistics are ``stats.versus`` (the paired test of ``audit paired`` / ``results compare``).
"""

from __future__ import annotations

import typer
from rich.table import Table

from robosafe.cli.common import app, emit_json, user_errors, warn
from robosafe.cli.results import DB_ENV, DEFAULT_DB

# The statistics (numpy, scipy) and the store (duckdb) are imported when the command runs.

NAMES = {"success": "success", "safety": "Safety", "sbu": "SBU",
         "cumulative_cost": "mean cumulative cost"}
SHORT = {"success": "success %", "safety": "Safety %", "sbu": "SBU % (lower=better)",
         "cumulative_cost": "cost (lower=better)"}


def _pct(x: float, ci: list[float] | None, *, signed: bool = False) -> str:
    sign = "+" if signed else ""
    text = f"{100 * x:{sign}.1f}"
    return text if ci is None else f"{text} [{100 * ci[0]:{sign}.1f}, {100 * ci[1]:{sign}.1f}]"


def _num(x: float, ci: list[float] | None, *, signed: bool = False) -> str:
    sign = "+" if signed else ""
    text = f"{x:{sign}.3g}"
    return text if ci is None else f"{text} [{ci[0]:{sign}.3g}, {ci[1]:{sign}.3g}]"


@app.command("compare")
@user_errors
def compare(
    a: str = typer.Argument(..., help="Baseline A: a run directory, an outcome CSV or a "
                                      "results-store run id."),
    b: str = typer.Argument(..., help="B, tested for an improvement over A (same kinds)."),
    design: str = typer.Option("paired", "--design",
                               help="paired (the instances both finished; default) | "
                                    "unpaired (independent samples per task, App. C.6)."),
    alpha: float = typer.Option(0.05, "--alpha", help="One-sided significance level."),
    sequential: bool = typer.Option(False, "--sequential",
                                    help="Also the anytime-valid decision on success and "
                                         "Safety (alpha / 2 each), in episode order: when the "
                                         "evaluation could have stopped (as `audit "
                                         "sequential`)."),
    db: str = typer.Option(DEFAULT_DB, "--db", envvar=DB_ENV,
                           help=f"Results database for run ids (default: ${DB_ENV} or "
                                f"./{DEFAULT_DB})."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Is B better than A? Success, Safety, SBU of both and B - A, 95% intervals, paired test.

    A and B each hold episodes of one policy; the cumulative cost is compared too when both
    have it. Rows pair on (suite, task, instance id, levels); every row left out is counted with its
    reason (crashed, not in the other side). Tests are one-sided towards "B better": higher
    success and Safety, lower SBU (paper 002 App. C.1; C.6 with --design unpaired).
    """
    from robosafe.runner.sides import read_side
    from robosafe.stats.versus import compare_sides, pairs_summary

    side_a, side_b = read_side(a, db, warn), read_side(b, db, warn)
    v = compare_sides(side_a, side_b, design=design, alpha=alpha, sequential=sequential)
    if as_json:
        emit_json(v.to_dict(), None, True)
        return
    for line in pairs_summary(v):
        typer.echo(line)
    test = "p (paired)" if v.design == "paired" else "p (UNPAIRED)"
    t = Table("metric", "n", "A [95% CI]", "B [95% CI]", "B - A [95% CI]", test,
              title=f"B ({v.b}) vs A ({v.a})", title_justify="left")
    for m in v.metrics:
        fmt = _num if m.metric == "cumulative_cost" else _pct
        n = str(m.n_a) if m.n_a == m.n_b else f"{m.n_a}/{m.n_b}"
        if m.pvalue is None:
            verdict = "-"
        else:
            verdict = f"{m.pvalue:.3g} " + ("B better" if m.reject else "n.s.")
        t.add_row(SHORT[m.metric], n,
                  fmt(m.mean_a, m.ci_a), fmt(m.mean_b, m.ci_b),
                  fmt(m.difference, m.ci, signed=True), verdict)
    from robosafe.report.tables import print_tables

    print_tables([t])
    for m in v.metrics:
        if m.note:
            typer.echo(f"{NAMES[m.metric]}: {m.note}")
    for line in v.not_reported:
        typer.echo(f"not reported: {line}")
    tests = sorted({m.test for m in v.metrics if m.test})
    if tests:
        typer.echo(f"p: one-sided test of \"B better\" (n.s.: not significant at alpha="
                   f"{v.alpha:g}), the {'; '.join(tests)}")
    if v.sequential is not None:
        from robosafe.audit.sequential import MetricAudit, describe

        sq = v.sequential
        typer.echo(f"sequential ({sq.design}, anytime-valid, in {sq.order} order, "
                   f"alpha/{len(sq.metrics)} = {sq.alpha_each:g} per metric): {sq.decision} "
                   f"after {sq.episodes} pairs")
        for m in sq.metrics:
            # describe() words one metric's decision as `audit sequential` prints it
            typer.echo("  " + describe(MetricAudit(m.metric, m.result, 0, 0, 0, 0), sq.design))
