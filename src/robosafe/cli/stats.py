"""``robosafe stats ...``: interval calculators on counts copied from papers or runs."""

from __future__ import annotations

import math

import typer

from robosafe.cli.common import app, emit_json, fail, max_memory_option, memory_limit, user_errors

# robosafe.stats.cutoffs (numpy, scipy) is imported by the commands that need it, so
# `stats wilson` / `stats newcombe` start in a fraction of a second.

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
    from robosafe.stats.intervals import wilson_interval

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
    from robosafe.stats.intervals import newcombe_interval

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


def _design(tasks: int, samples: int, max_score: int, alpha: float) -> None:
    if tasks < 1:
        fail(f"--tasks must be at least 1, got {tasks}")
    if samples < 2:
        fail(f"--samples must be at least 2 (the Wald variance needs S >= 2), got {samples}")
    if max_score < 1:
        fail(f"--max-score must be at least 1, got {max_score}")
    if not 0.0 < alpha < 0.5:
        fail(f"--alpha must be in (0, 0.5), got {alpha}")


def _inf(x: float) -> float | None:
    """JSON has no inf or NaN: a cutoff that does not exist, or an envelope that is not
    defined (no positive gap), is null."""
    return None if not math.isfinite(x) else x


@stats_app.command("cutoffs")
@user_errors
def cutoffs(tasks: int = typer.Option(..., "--tasks", help="Number of tasks T."),
            samples: int = typer.Option(..., "--samples", help="Paired samples per task S."),
            baseline: int = typer.Option(..., "--baseline",
                                         help="Baseline top-line count A (sum of scores)."),
            max_score: int = typer.Option(1, "--max-score", help="Per-sample maximum score R."),
            alpha: float = typer.Option(0.05, "--alpha", help="One-sided significance level."),
            max_memory: float = max_memory_option(),
            as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Top-line cutoffs for a baseline count: L_exists, L_forall and delta (App. C.3, C.4).

    A new count B = A + L cannot be significant if L < L_exists, and is significant for every
    compatible paired outcome table if L >= L_forall.
    """
    from robosafe.stats.cutoffs import l_exists, l_forall

    _design(tasks, samples, max_score, alpha)
    N = tasks * samples
    check_count(baseline, max_score * N, "--baseline")
    le = l_exists(baseline, tasks, samples, max_score, alpha)
    with memory_limit(max_memory):
        lf = l_forall(baseline, tasks, samples, max_score, alpha)
    out = {"tasks": tasks, "samples": samples, "max_score": max_score, "alpha": alpha,
           "baseline": baseline, "baseline_mean": baseline / N, "l_exists": _inf(le),
           "l_forall": _inf(lf), "delta_exists": _inf(le / N), "delta_forall": _inf(lf / N)}
    if as_json:
        emit_json(out, None, True)
        return
    typer.echo(f"T={tasks} S={samples} R={max_score} alpha={alpha:g}; baseline A={baseline} "
               f"(mean {baseline / N:.4f})")
    for name, v in (("L_exists", le), ("L_forall", lf)):
        typer.echo(f"  {name:9s} = " + ("none (no gap qualifies)" if math.isinf(v)
                                         else f"{v:g} counts = {v / N:.4f} in mean score"))


@stats_app.command("compare")
@user_errors
def compare(tasks: int = typer.Option(..., "--tasks", help="Number of tasks T."),
            samples: int = typer.Option(..., "--samples", help="Paired samples per task S."),
            baseline: int = typer.Option(..., "--baseline", help="Baseline top-line count A."),
            new: int = typer.Option(..., "--new", help="New top-line count B."),
            max_score: int = typer.Option(1, "--max-score", help="Per-sample maximum score R."),
            alpha: float = typer.Option(0.05, "--alpha", help="One-sided significance level."),
            independent: bool = typer.Option(False, "--independent",
                                             help="The two runs used independent samples "
                                                  "(C.6: the classes are then conservative)."),
            max_memory: float = max_memory_option(),
            as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Classify a claimed gain from top-line counts alone (App. C.5, C.6).

    With the episodes of both runs at hand, `robosafe compare A B` tests them directly.
    """
    from robosafe.stats.cutoffs import classify_gain

    _design(tasks, samples, max_score, alpha)
    for what, k in (("--baseline", baseline), ("--new", new)):
        check_count(k, max_score * tasks * samples, what)
    with memory_limit(max_memory):
        c = classify_gain(baseline, new, tasks, samples, max_score, alpha,
                          paired=not independent)
    out = {"label": c.label, "a": c.a, "b": c.b, "gap_count": c.gap_count,
           "q_lo": _inf(c.q_lo), "q_hi": _inf(c.q_hi), "c_alpha": c.c_alpha,
           "sharp": c.sharp}
    if as_json:
        emit_json(out, None, True)
    else:
        typer.echo(f"A={c.a} B={c.b} L={c.gap_count}: {c.label.replace('_', ' ')}"
                   + ("" if c.sharp else " (independent samples: paired envelopes, not sharp)"))
