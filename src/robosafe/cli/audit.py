"""``robosafe audit ...``: benchmark-audit diagnostics (Jiang et al., paper 002)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from robosafe.cli.common import (
    alpha_option,
    app,
    delta_option,
    emit_json,
    max_memory_option,
    memory_limit,
    user_errors,
)
from robosafe.errors import RobosafeError
from robosafe.report.tables import print_tables

# The audit modules (numpy, scipy, matplotlib) are imported by the command that runs.

audit_app = typer.Typer(no_args_is_help=True,
                        help="Audit a claim: is a published gain significant; drift, "
                             "determinism, shortcut probes (benchmark-audit diagnostics).")
app.add_typer(audit_app, name="audit")


@audit_app.command("drift")
@user_errors
def drift(calibration: Path = typer.Argument(..., help="Outcome CSV of the calibration run."),
          altered: Path = typer.Argument(..., help="Outcome CSV of the altered run."),
          paired: bool = typer.Option(None, "--paired/--unpaired",
                                      help="Force the paired (shared instances) or unpaired "
                                           "interval; default: paired when both runs hold "
                                           "the same instances once each."),
          confidence: float = typer.Option(0.95, help="Confidence level."),
          as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Creeping overfitting: drop = calibration - altered with a 95% interval (Sec. 5, A.2)."""
    from robosafe.audit.drift import creeping_drift

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
    typer.echo(report.design_note)


@audit_app.command("disagreement")
@user_errors
def disagreement_cmd(runs: list[Path] = typer.Argument(..., help="Outcome CSVs of K >= 2 "
                                                       "repeated runs of one policy."),
                     confidence: float = typer.Option(0.95, help="Confidence level."),
                     bootstrap: int = typer.Option(10_000, "--bootstrap", min=1,
                                                   help="Bootstrap resamples of instances."),
                     seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
                     as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Outcome disagreement D (robosafe's own statistic for App. B.1's per-episode outcome
    agreement): mean pairwise disagreement between repeated runs over their shared instances,
    with an instance-bootstrap interval."""
    from robosafe.audit.disagreement import disagreement
    from robosafe.budget import check_bootstrap

    check_bootstrap(bootstrap)  # before the runs are read
    r = disagreement(runs, confidence=confidence, n_boot=bootstrap, seed=seed)
    if as_json:
        emit_json(r.to_dict(), None, True)
        return
    typer.echo(f"D = {r.d:.4f}  {100 * confidence:g}% CI [{r.ci.low:.4f}, {r.ci.high:.4f}] "
               f"over {r.n_shared} shared instances of {len(r.sources)} runs")
    for (j, k, v) in r.pairwise:
        typer.echo(f"  {r.sources[j]} vs {r.sources[k]}: {v:.4f}")
    if any(r.n_excluded):
        typer.echo("instances not in every run, left out: " + ", ".join(
            f"{s}: {n}" for s, n in zip(r.sources, r.n_excluded)))


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
    from robosafe.audit.diff import trace_diff

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


@audit_app.command("significance")
@user_errors
def significance(claims: Path = typer.Argument(..., help="CSV of claimed gains: benchmark, "
                                                        "tasks, samples, previous, new [, "
                                                        "max_score, design, unit, alpha]."),
                 figure: str = typer.Option(None, "--figure",
                                            help="Write Figure 3 (one pie per benchmark)."),
                 convention: str = typer.Option(
                     "app-c", "--convention",
                     help="app-c: App. C (C.7 rounding, C.5 classes; default). paper-figure: "
                          "robosafe's reading of the simpler rule behind Figure 3 (raw gain vs "
                          "the cutoffs, LIBERO spatial/object/goal pooled, SimplerEnv T=4 "
                          "S=24); impossible and zero gains are never significant."),
                 max_memory: float = max_memory_option(),
                 as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Is each claimed gain significant from its published scores alone? (Sec. 4, App. C)

    Scores are rounded to realisable counts (C.7). With R = 1, values above 1 are read as
    percentages unless a `unit` column says otherwise. Bad rows are reported one line each
    and skipped (exit 2); the others are still classified.
    """
    from robosafe.audit.significance import CONVENTIONS, LABELS, classify_claims, summary

    errors: list[str] = []

    def on_error(err: Exception) -> None:
        errors.append(str(err))
        typer.echo(f"robosafe: skipped: {err}", err=True)

    if convention not in CONVENTIONS:
        raise RobosafeError(f"--convention: unknown {convention!r}; choose from "
                            f"{', '.join(CONVENTIONS)}")
    with memory_limit(max_memory):
        results = classify_claims(claims, on_error=on_error, convention=convention)
    counts = summary(results)
    if figure and results:
        try:
            from robosafe.report.figures import significance_pies

            significance_pies(counts, figure)
        except (OSError, ValueError) as err:
            raise RobosafeError(f"{figure}: cannot write figure: {err}") from None
    if as_json:
        emit_json({"convention": convention, "claims": [r.to_dict() for r in results],
                   "summary": counts, "errors": errors}, None, True)
    else:
        t = Table(title=f"Claimed gains in {claims} ("
                  + ("App. C.5" if convention == "app-c" else "Figure 3 convention") + ")",
                  title_justify="left",
                  header_style="bold")
        for c in ("row", "benchmark", "T x S (R)", "design", "previous", "new", "A -> B",
                  "delta_exists", "delta_forall", "class"):
            t.add_column(c)
        for r in results:
            t.add_row(r.where.rsplit(":", 1)[-1], r.benchmark,
                      f"{r.tasks} x {r.samples} ({r.max_score})", r.design,
                      f"{r.previous:.4f}", f"{r.new:.4f}", f"{r.previous_count} -> "
                      f"{r.new_count}", _num(r.delta_exists), _num(r.delta_forall),
                      r.label.replace("_", " ") + ("" if r.sharp else " *"))
        s = Table(title="Summary per benchmark (Figure 3)", title_justify="left",
                  header_style="bold")
        s.add_column("benchmark")
        for label in LABELS:
            s.add_column(label.replace("_", " "), justify="right")
        for name, c in counts.items():
            s.add_row(name, *[str(c[label]) for label in LABELS])
        print_tables([t, s])
        if any(not r.sharp for r in results):
            typer.echo("* independent samples: paired envelopes are conservative, not sharp (C.6)")
    if errors:
        raise typer.Exit(2)


@audit_app.command("paired")
@user_errors
def paired(outcomes_a: Path = typer.Argument(..., help="Outcome CSV of the baseline policy A."),
           outcomes_b: Path = typer.Argument(..., help="Outcome CSV of the new policy B."),
           max_score: int = typer.Option(1, "--max-score", help="Per-sample maximum score R."),
           alpha: float = typer.Option(0.05, "--alpha", help="One-sided significance level."),
           max_memory: float = max_memory_option(),
           as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Exact paired task-stratified Wald test of B over A on shared instances (App. C.1).

    Both CSVs must hold the same instances. `robosafe compare A B` is the front door for
    "is B better than A": run directories, CSVs or store run ids, success, Safety and SBU,
    the rows it leaves out counted.
    """
    from robosafe.audit.significance import paired_outcome_test

    for p in (outcomes_a, outcomes_b):
        if p.is_dir():
            raise RobosafeError(f"{p}: a directory; audit paired takes two outcome CSVs "
                                "(`robosafe compare A B` takes run directories too)")
    with memory_limit(max_memory):
        r = paired_outcome_test(outcomes_a, outcomes_b, max_score=max_score, alpha=alpha)
    if as_json:
        emit_json(r.to_dict(), None, True)
        return
    w = r.wald
    typer.echo(f"T={r.tasks} tasks x S={r.samples} shared instances, R={r.max_score}: "
               f"mean A {r.mean_a:.4f}, mean B {r.mean_b:.4f}, gap {w.estimate:+.4f}")
    typer.echo(f"Z = {w.statistic:.3f}, one-sided p = {w.pvalue:.4g}, critical "
               f"{w.critical_value:.3f}: " + ("significant" if w.reject else "not significant")
               + f" at alpha={alpha:g}")
    typer.echo(f"from the top-line counts alone this gain is: {r.label.replace('_', ' ')}")


@audit_app.command("sequential")
@user_errors
def sequential(outcomes_a: Path = typer.Argument(..., help="Outcome CSV or run directory of "
                                                 "the baseline policy A (or the one policy, "
                                                 "with --target / --width)."),
               outcomes_b: Path = typer.Argument(None, help="Outcome CSV or run directory of "
                                                 "the new policy B."),
               metric: list[str] = typer.Option(["success"], "--metric",
                                                help="success or safe; repeat for both "
                                                     "(each tested at alpha / m)."),
               alpha: float = alpha_option(),
               delta: float = delta_option(),
               two_sided: bool = typer.Option(False, "--two-sided",
                                              help="Also decide 'worse' (each side at "
                                                   "alpha / 2)."),
               target: float = typer.Option(None, "--target",
                                            help="One table: decide whether the rate is above "
                                                 "or below this."),
               width: float = typer.Option(None, "--width",
                                           help="One table: stop once the interval is this "
                                                "narrow."),
               budget: int = typer.Option(None, "--budget",
                                          help="Use at most this many pairs (episodes)."),
               order: str = typer.Option("auto", "--order",
                                         help="rows: the file's row order; episode: by "
                                              "episode_idx (seed order); auto: rows for a "
                                              "CSV, episode for a run directory."),
               unpaired: bool = typer.Option(False, "--unpaired",
                                             help="Runs on different seeds: pair the i-th "
                                                  "episode of A with the i-th of B."),
               as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """When could this evaluation have stopped? Anytime-valid sequential test of B against A
    on paired seeds (or one policy against a target), in the order the episodes ran."""
    from robosafe.audit.sequential import describe, sequential_audit

    r = sequential_audit(outcomes_a, outcomes_b, metrics=metric, alpha=alpha, delta=delta,
                         target=target, width=width, two_sided=two_sided, budget=budget,
                         order=order, unpaired=unpaired)
    if as_json:
        emit_json(r.to_dict(), None, True)
        return
    head = (f"{r.source_a}" if r.source_b is None else f"{r.source_b} (B) vs {r.source_a} (A)")
    typer.echo(f"{head}, {r.test}, in {r.order} order:")
    for m in r.metrics:
        typer.echo("  " + describe(m, r.test))
        left = [f"{n} {what}" for n, what in ((m.dropped_a, "rows of A"),
                                              (m.dropped_b, "rows of B")) if n]
        if left:
            typer.echo(f"    left out ({m.metric} unknown or crashed): {', '.join(left)}")
        lone = [f"{n} of {w}" for n, w in ((m.unmatched_a, "A"), (m.unmatched_b, "B")) if n]
        if lone:
            typer.echo(f"    rows without a partner: {', '.join(lone)}")
    if len(r.metrics) > 1:
        j = r.joint
        typer.echo(f"all metrics {'decided' if j.decided else 'not all decided'} after "
                   f"{j.episodes} (alpha {r.alpha:g} shared: {j.alpha_each:g} each)")


def _num(x: float) -> str:
    return "none" if x == float("inf") else f"{x:.4f}"
