"""``robosafe audit shortcut`` and ``robosafe audit data-source``: the two diagnostics of paper
002 that train a policy (Sec. 3 and Sec. 6). PyTorch is imported when one of them runs."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import typer

from robosafe.cli import run as R
from robosafe.cli.audit import audit_app
from robosafe.cli.common import emit_json, user_errors, workers_option
from robosafe.cli.run import run_with_progress, selection
from robosafe.errors import RobosafeError
from robosafe.log import NOTE

# Options both diagnostics take (one declaration, one meaning).
EVAL_EPISODES = typer.Option(10, "--episodes", "-n", min=1,
                             help="Evaluation episodes (seeds) per task and policy.")
STEPS = typer.Option(None, "--steps", min=1, help="Training steps (probe.yaml: 2000).")
HORIZON = typer.Option(None, "--horizon", min=1,
                       help="Steps per episode (default: the task's 30 s).")
WORKERS = workers_option()
AS_JSON = typer.Option(False, "--json", help="Print the result as JSON.")


def _eval_seeds(seeds: str | None, episodes: int) -> list[int]:
    """The evaluation seeds: --seeds, one per episode, or 0..N-1 (what `run` gives any policy)."""
    from robosafe.runner.request import seed_option

    seed_list = list(seed_option(seeds, episodes)) or list(range(episodes))
    if len(seed_list) != episodes:
        raise RobosafeError(f"--seeds gives {len(seed_list)} seeds for -n {episodes}")
    return seed_list


def _quiet(as_json: bool) -> bool:
    return as_json or not sys.stderr.isatty()


def _runner(workers: int, as_json: bool):
    """The audit's ``run``: a resumable run directory per evaluation, with a progress bar (one
    line per episode when stderr is not a terminal)."""

    def run(cfg, out: Path, label: str) -> list[dict[str, Any]]:
        resume = (out / "run.json").is_file()
        return run_with_progress(cfg, out, workers=workers, backend="local", resume=resume,
                                 quiet=_quiet(as_json), label=label,
                                 lines=not as_json and not sys.stderr.isatty(),
                                 again="the same command")

    return run


def _trainer_bar(quiet: bool):
    """A progress bar for training steps (loss shown); a context manager and a callback."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("loss {task.fields[loss]}"), TimeRemainingColumn(),
                   console=Console(stderr=True), disable=quiet, transient=True)
    job = bar.add_task("train probe", total=None, loss="-")

    def on_step(done: int, total: int, loss: float) -> None:
        bar.update(job, completed=done, total=total, loss=f"{loss:.4f}")

    return bar, on_step


def _pct(r: dict[str, Any] | None) -> str:
    if not r or r.get("sr") is None:
        return "-"
    lo, hi = r["ci"]
    return f"{100 * r['sr']:.0f}% [{100 * lo:.0f}, {100 * hi:.0f}] ({r['successes']}/{r['episodes']})"


def _note(line: str) -> None:
    logging.getLogger("robosafe.cli").log(NOTE, "%s", line)


@audit_app.command("shortcut")
@user_errors
def shortcut(
    demos: Path = typer.Option(..., "--demos", help="LeRobot v3.0 dataset of demonstrations "
                                                    "(robosafe collect --images)."),
    suite: str = R.SUITE,
    level: int = R.LEVEL,
    task_id: list[str] = R.TASK_ID,
    task: list[Path] = R.TASK,
    episodes: int = EVAL_EPISODES,
    seeds: str = R.SEEDS,
    steps: int = STEPS,
    checkpoints: int = typer.Option(None, "--checkpoints", min=1,
                                    help="Evenly spaced checkpoints to score (probe.yaml: 3)."),
    seed: int = typer.Option(0, "--seed", help="Training seed (weights, batches, augmentation)."),
    horizon: int = HORIZON,
    out: Path = typer.Option(Path("robosafe-shortcut"), "--out", "-o",
                             help="Audit directory: training state, checkpoints, evaluation "
                                  "runs, shortcut.json (rerun to resume)."),
    workers: int = WORKERS,
    as_json: bool = AS_JSON,
) -> None:
    """Shortcut probe (paper 002, Sec. 3): train a policy that never reads the instruction
    (a task index instead) on the demonstrations, score its checkpoints on the suite with the
    seeds any policy gets, and set them next to the demonstrator's success."""
    from robosafe.policies.probe import probe_config  # first: names the extra if torch is missing

    cfg = probe_config(steps=steps, checkpoints=checkpoints)
    from robosafe.audit.shortcut import load_demos, shortcut_audit
    from robosafe.runner.request import select_tasks

    tasks = select_tasks(selection(suite, level, task_id, task))
    seed_list = _eval_seeds(seeds, episodes)
    quiet = _quiet(as_json)
    demo_set = load_demos(demos, cfg)
    bar, on_step = _trainer_bar(quiet)
    with bar:
        result = shortcut_audit(tasks=tasks, suite=suite, demos=demo_set, out=out, cfg=cfg,
                                seed=seed, seeds=seed_list, run=_runner(workers, as_json),
                                horizon=horizon,
                                on_step=on_step, notes=_note)
    if as_json:
        emit_json(result, None, True)
        return
    _print_shortcut(result)


def _print_shortcut(res: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    best, final, demo = res["best"], res["final"], res["demonstrator"]
    t = Table(title=f"Shortcut probe: {res['suite'] or 'tasks'} ({res['episodes_per_task']} "
                    "episodes per task, SR [95% Wilson])", title_justify="left")
    for c in ("task", "demonstrator", f"probe best (step {best['step']})",
              f"probe final (step {final['step']})", "solved"):
        t.add_column(c)
    for name in res["tasks"]:
        t.add_row(name, _pct(demo["tasks"].get(name)) if demo else "-",
                  _pct(best["tasks"].get(name)), _pct(final["tasks"].get(name)),
                  "yes" if name in res["solved"] else "no")
    t.add_row("all", _pct(demo), _pct(best), _pct(final), f"{len(res['solved'])}")
    Console().print(t)
    typer.echo("best = the checkpoint scoring highest on these same episodes (selection on the "
               "test set, as the paper reports); final = the last step.")
    if res["conclusion"]:
        typer.echo(res["conclusion"])


@audit_app.command("data-source")
@user_errors
def data_source(
    suite: str = R.SUITE,
    level: int = R.LEVEL,
    task_id: list[str] = R.TASK_ID,
    task: list[Path] = R.TASK,
    episodes: int = EVAL_EPISODES,
    seeds: str = R.SEEDS,
    per_seed: int = typer.Option(2, "--demos-per-seed", min=1,
                                 help="Near demonstrations per evaluation seed (the far set "
                                      "has as many)."),
    steps: int = STEPS,
    seed: int = typer.Option(0, "--seed", help="Training seed (both policies)."),
    horizon: int = HORIZON,
    multi_task: bool = typer.Option(False, "--multi-task",
                                    help="Train one probe over all tasks (robosafe's own "
                                         "option) instead of App. A.3's one policy per task."),
    augment: bool = typer.Option(False, "--augment",
                                 help="Keep probe.yaml's crop / erasing augmentation (App. "
                                      "A.3 disables image augmentation)."),
    out: Path = typer.Option(Path("robosafe-data-source"), "--out", "-o",
                             help="Audit directory: collections, datasets, training, "
                                  "evaluations, data_source.json (rerun to resume)."),
    workers: int = WORKERS,
    as_json: bool = AS_JSON,
) -> None:
    """Data-source dependence (paper 002, Sec. 6, App. A.3): policies trained on demonstrations
    jittered around the evaluation seeds (0.0025 m, 15 deg) and on demonstrations from other
    seeds, one per task without image augmentation (App. A.3); both SRs with intervals, their
    training-test distances and the paired test."""
    seed_list = _eval_seeds(seeds, episodes)
    if len(seed_list) < 2:  # said before collecting and training, not after
        raise RobosafeError("the paired test needs at least 2 evaluation seeds per task (paper "
                            "002 App. C.1, S >= 2): give -n 2 or more")
    from robosafe.policies.probe import probe_config  # first: names the extra if torch is missing

    cfg = probe_config(steps=steps)
    from robosafe.audit.datasource import datasource_audit
    from robosafe.runner.request import select_tasks

    tasks = select_tasks(selection(suite, level, task_id, task))
    bar, on_step = _trainer_bar(_quiet(as_json))
    with bar:
        res = datasource_audit(tasks=tasks, suite=suite, seeds=seed_list, per_seed=per_seed,
                               out=out, cfg=cfg, seed=seed, run=_runner(workers, as_json),
                               horizon=horizon, per_task=not multi_task, augment=augment,
                               on_step=on_step, notes=_note)
    if as_json:
        emit_json(res, None, True)
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"Data-source dependence: {suite or 'tasks'} ({episodes} evaluation "
                    f"episodes per task, {res['training']} policies, augmentation "
                    f"{'on' if res['augmentation'] else 'off'}; SR [95% Wilson])",
              title_justify="left")
    for c in ("training data", "demos", "train-test distance (median / max)", "SR"):
        t.add_column(c)
    for name, p in res["policies"].items():
        d = p["train_test_distance"]
        t.add_row(name, str(p["demos"]), f"{100 * d['median_m']:.2f} / {100 * d['max_m']:.2f} cm",
                  _pct(p))
    Console().print(t)
    w = res["paired_test"]["wald"]
    z = "infinite (no variance)" if w["statistic"] is None else f"{w['statistic']:.3f}"
    typer.echo(f"paired Wald (near over far, {res['paired_test']['tasks']} tasks x "
               f"{res['paired_test']['samples']} seeds): Z = {z}, one-sided p = "
               f"{w['pvalue']:.4g}")
    typer.echo(res["conclusion"])
