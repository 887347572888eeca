"""``robosafe run`` (evaluate a policy on tasks) and ``robosafe demo``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from robosafe.cli.common import (
    EXIT_USER_ERROR,
    alpha_option,
    app,
    delta_option,
    emit_json,
    fail,
    resolve_workers,
    user_errors,
    workers_option,
)
from robosafe.redact import redact_url

if TYPE_CHECKING:
    from robosafe.runner.plan import RunPlan
    from robosafe.runner.request import TaskSelection


def run_with_progress(plan: RunPlan, out: Path, *, workers: int, backend: str, resume: bool,
                      quiet: bool, label: str | None = None, lines: bool = False,
                      ray_address: str | None = None,
                      again: str = "the same command with --resume") -> list[dict]:
    """Prepare the run directory, run its cells with a progress bar, return all rows.
    ``lines``: when stderr is not a terminal (no bar), one progress line per episode there.
    A plan with ``until`` stops once its test decides. Ctrl-C keeps the
    finished episodes and says how many, and what continues (``again``)."""
    import time

    from robosafe.runner.run import execute, prepare

    workers = resolve_workers(workers)
    run, cells = prepare(plan, out, resume=resume)
    total = len(plan.cells())
    done_before = total - len(cells)
    wins = [0]
    start = time.monotonic()
    name = label or redact_url(plan.policy)
    if plan.recording.images and backend == "local" and (lines or not quiet):
        _say_renderer()
    if lines:
        # the first episode in each worker builds the scene and can take minutes
        typer.echo(f"robosafe: {name}: {len(cells)} episode(s) to run"
                   + (f", {done_before} done earlier" if done_before else "")
                   + f", {workers} worker(s); the first episode per worker is the slowest",
                   err=True)
    with Progress(TextColumn(name, markup=False), BarColumn(), MofNCompleteColumn(),
                  TextColumn("success {task.fields[sr]}"), TimeElapsedColumn(),
                  TimeRemainingColumn(), console=Console(stderr=True), disable=quiet,
                  transient=True) as bar:
        job = bar.add_task("run", total=total, completed=done_before, sr="-")

        def tick(row: dict) -> None:
            wins[0] += int(row.get("success") or 0)
            finished = bar.tasks[job].completed + 1 - done_before
            bar.update(job, advance=1, sr=f"{wins[0]}/{finished}")
            if lines:
                typer.echo(f"robosafe: {name}: {finished}/{len(cells)} episodes, success "
                           f"{wins[0]}/{finished}, {time.monotonic() - start:.0f} s", err=True)
            if row.get("note"):
                bar.console.print(f"robosafe: episode {row['task_id']} #{row['episode_idx']}: "
                                  f"{row['note']}", soft_wrap=True, markup=False,
                                  highlight=False)
            if row.get("error_type"):
                bar.console.print(f"robosafe: episode {row['task_id']} #{row['episode_idx']} "
                                  f"failed: {row['error_type']}: {row.get('error', '')}",
                                  soft_wrap=True, markup=False, highlight=False)

        try:
            until = plan.until
            if until is None:
                execute(run, cells, workers=workers, backend=backend, on_result=tick,
                        ray_address=ray_address)
            else:
                from robosafe.runner.until import run_alternately, run_until

                if until.baseline_policy is None:
                    run_until(run, cells, until, execute=execute, workers=workers,
                              backend=backend, on_result=tick, ray_address=ray_address)
                else:
                    run_alternately(run, cells, until, prepare=prepare, execute=execute,
                                    workers=workers, backend=backend, on_result=tick,
                                    ray_address=ray_address)
        except KeyboardInterrupt:
            bar.stop()
            kept = len(run.outcomes())
            typer.echo(f"robosafe: interrupted: {kept} of {total} episode(s) are kept in "
                       f"{out}; {again} continues", err=True)
            raise SystemExit(130) from None  # the shell's code for Ctrl-C
    return run.outcomes()


def _say_renderer() -> None:
    """One header line naming what draws the cameras; on software rendering, what it costs:
    docs/performance.md measured 9-13 ms of CPU per 128 px frame (llvmpipe, demo scenes), two
    cameras some 13x the unrendered step, against 1.0-1.3 ms per frame on a GPU's EGL."""
    from robosafe.sim.render import gl_renderer

    try:
        r = gl_renderer()
    except Exception as exc:  # noqa: BLE001 - the episodes themselves report a GL failure
        typer.echo(f"robosafe: warning: cannot tell which OpenGL renderer draws the cameras: "
                   f"{type(exc).__name__}: {exc}", err=True)
        return
    line = f"robosafe: cameras drawn by {r.describe()}"
    if r.software:
        line += ("; on a CPU each 128 px frame costs some 10 ms, about 13x an unrendered step "
                 "for two cameras (a GPU's EGL draws one in about 1 ms: docs/performance.md)")
    typer.echo(line, err=True)


def summarize(rows: list[dict]) -> dict:
    ok = [r for r in rows if not r.get("error_type")]
    n = len(ok)
    # hosts without CBDDL costs (LIBERO) leave cumulative_cost empty: no mean, not a zero
    costs = [float(r["cumulative_cost"]) for r in ok if r.get("cumulative_cost") not in (None, "")]
    return {"episodes": len(rows), "finished": n, "crashed": len(rows) - n,
            "success_rate": sum(int(r["success"]) for r in ok) / n if n else None,
            "safety_rate": sum(int(r["safe"]) for r in ok) / n if n else None,
            "mean_cumulative_cost": sum(costs) / len(costs) if costs else None}


def _print_summary(summaries: dict[str, dict]) -> None:
    def pct(x):
        return "-" if x is None else f"{100 * x:.1f}%"

    table = Table("run", "episodes", "crashed", "SR", "Safety", "mean CC")
    for name, s in summaries.items():
        cc = "-" if s["mean_cumulative_cost"] is None else f"{s['mean_cumulative_cost']:.2f}"
        table.add_row(name, str(s["episodes"]), str(s["crashed"]), pct(s["success_rate"]),
                      pct(s["safety_rate"]), cc)
    Console().print(table)


# The task selection `run` and `collect` share (one declaration, one meaning).
SUITE = typer.Option(None, "--suite", help="A built-in suite (robosafe suites list), or with "
                                           "--host libero a LIBERO suite.")
LEVEL = typer.Option(None, "--level", "-l", min=0, max=2,
                     help="Only this level (L0-L2) of the suite.")
TASK_ID = typer.Option(None, "--task-id", help="Only these suite tasks.")
TASK = typer.Option(None, "--task", help="A CBDDL task file (repeatable).")
TASK_DIR = typer.Option(None, "--task-dir",
                        help="Every *.bddl file below this folder (sorted); task ids are "
                             "their paths below it with '.' for '/' (a VLA-Arena checkout's "
                             "bddl_files: suite.level_N.name).")
EPISODES = typer.Option(1, "--episodes", "-n", min=1, help="Episodes per task.")
SEEDS = typer.Option(None, "--seeds", help="One seed per episode: 0,1,2 or 10-19 "
                                           "(default 0..N-1).")
ASSETS = typer.Option(None, "--assets",
                      help="stand-in (default: procedural, built in), libero (LIBERO's own meshes for "
                           "the categories they cover; the libero-assets extra) or vla-arena "
                           "(VLA-Arena's asset files: $ROBOSAFE_VLA_ARENA_ASSETS or the "
                           "installed vla_arena's).")


COST_MODE = typer.Option(None, "--cost-mode",
                         help="robosafe (default: every listed term counts, terminal costs on every "
                              "episode) or vla-arena (VLA-Arena's own accounting, episode "
                              "length and cost scale, to compare with its leaderboard).")


CONTROLLER = typer.Option(None, "--controller",
                          help="compiled (default: robosafe's compiled arm controller, the same "
                               "torques as robosuite's within 1e-9, several times faster) or "
                               "robosuite (robosuite's own Python controller). --resume keeps "
                               "the run's.")


ARENA_EVALUATOR = typer.Option(None, "--arena-evaluator",
                               help="With --cost-mode vla-arena: whose episode rules give the "
                                    "reported cost: openvla (default), openvla_oft, openpi, "
                                    "univla (HazardAvoidance x 0.05 on every episode, "
                                    "--safety threshold 10) or smolvla (x 0.05 on success "
                                    "only, no threshold).")


def selection(suite: str | None, level: int | None, task_id: list[str] | None,
              task: list[Path] | None, task_dir: Path | None = None) -> TaskSelection:
    """The task options of run and collect as a request's selection."""
    from robosafe.runner.request import TaskSelection

    return TaskSelection(suite, level, tuple(task_id or ()), tuple(str(t) for t in task or ()),
                         None if task_dir is None else str(task_dir))


@app.command("run")
@user_errors
def run(
    out: Path = typer.Option(..., "--out", "-o", help="Run directory to create."),
    policy: str = typer.Option(..., "--policy", "-p",
                               help="random | zero | replay:FILE.npy | probe:CKPT | scripted-careful | "
                                    "scripted-careless | lerobot:CHECKPOINT_DIR | ws://HOST:PORT"),
    host: str = typer.Option("robosafe", "--host",
                             help="robosafe (CBDDL tasks in robosafe's simulator) or libero "
                                  "(LIBERO's own envs and protocol; run in LIBERO's env)."),
    suite: str = SUITE,
    level: int = LEVEL,
    task_id: list[str] = TASK_ID,
    task: list[Path] = TASK,
    task_dir: Path = TASK_DIR,
    episodes: int = EPISODES,
    seeds: str = SEEDS,
    assets: str = ASSETS,
    cost_mode: str = COST_MODE,
    controller: str = CONTROLLER,
    arena_evaluator: str = ARENA_EVALUATOR,
    language_level: str = typer.Option(None, "--language-level",
                                       help="W0-W4, e.g. 0 (default) or 0-4."),
    visual_level: str = typer.Option(None, "--visual-level",
                                     help="V0-V4, e.g. 0 (default) or 0,2,4."),
    horizon: int = typer.Option(None, help="Steps per episode (default: the task's 30 s)."),
    images: bool = typer.Option(None, "--images/--no-images",
                                help="Render camera images (default: for ws://, probe: and lerobot: "
                                     "policies)."),
    image_size: int = typer.Option(None, "--image-size", min=8,
                                   help="Rendered image side in pixels (LIBERO default 256)."),
    obs_adapter: str = typer.Option(None, "--obs-adapter",
                                    help="What a ws:// policy is sent: robosuite | "
                                         "robosuite-privileged | openpi-libero (default: the "
                                         "host's; API key from $ROBOSAFE_POLICY_API_KEY); "
                                         "which observation feeds a lerobot: policy's "
                                         "inputs: lerobot-robosafe (default) | "
                                         "lerobot-libero."),
    record_frames: bool = typer.Option(False, "--record-frames",
                                       help="Keep robot state and camera videos per episode "
                                            "(for `robosafe export lerobot`)."),
    workers: int = workers_option("Parallel episodes (0 = auto: one per two CPU cores, at "
                                  "least 1; with --backend ray: at most this many in flight "
                                  "on the cluster)."),
    backend: str = typer.Option("local", help="local (process pool) or ray."),
    ray_address: str = typer.Option(None, "--ray-address",
                                    help="An existing Ray cluster (HOST:PORT; default "
                                         "$RAY_ADDRESS; none: a private one on this machine)."),
    resume: bool = typer.Option(False, "--resume", help="Continue a killed run in --out."),
    checkpoint: str = typer.Option("", "--checkpoint-ref", help="Recorded in outcome rows."),
    shield: str = typer.Option(None, "--shield",
                               help="off (default) | monitor (warn of predicted spec violations) | "
                                    "filter (replace unsafe actions); robosafe host only."),
    shield_horizon: int = typer.Option(None, "--shield-horizon",
                                       help="Control steps the shield predicts ahead "
                                            "(default 5)."),
    shield_margin: float = typer.Option(None, "--shield-margin",
                                        help="filter: act when a predicted margin is below this "
                                             "(default 0)."),
    shield_candidates: str = typer.Option(None, "--shield-candidates",
                                          help="filter: replacement actions to try (default "
                                               "scale,lift,hold,retreat,open; also side: the "
                                               "motion turned 45 / 90 degrees)."),
    until: str = typer.Option(None, "--until",
                              help="Stop early: 'decided' (with --against: once the "
                                   "anytime-valid paired test decides better, worse or not "
                                   "better by --delta) or 'width:W' (one policy: once the "
                                   "metric's confidence sequence is narrower than W). -n is "
                                   "the budget."),
    against: Path = typer.Option(None, "--against",
                                 help="--until decided: the baseline run directory; its "
                                      "tasks, seeds and levels are run in its seed order and "
                                      "paired with its outcome rows."),
    against_policy: str = typer.Option(None, "--against-policy",
                                       help="--until decided: make the baseline too, with "
                                            "this policy, in --against (created or "
                                            "continued): baseline and new policy run "
                                            "alternately, cell by cell in seed order."),
    until_metric: str = typer.Option(None, "--until-metric",
                                     help="--until: success (default), safe or both (each "
                                          "at alpha / 2)."),
    alpha: float = alpha_option(None, "--until"),
    delta: float = delta_option("--until decided"),
    two_sided: bool = typer.Option(None, "--two-sided/--one-sided",
                                   help="--until decided: also decide 'worse' (default; each "
                                        "side at alpha / 2) or only 'better'."),
    predictor: str = typer.Option(None, "--predictor",
                                  help="filter: what the shield predicts with: sim (a shadow "
                                       "copy of the simulator, default) | kinematic (the arm's "
                                       "swept boxes against the obstacles' boxes: what a real "
                                       "robot has)."),
    predictor_margin: float = typer.Option(None, "--predictor-margin",
                                           help="kinematic: grow the obstacles' boxes by this "
                                                "(m; default 0.005, sim/data/kinematic.yaml)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary."),
) -> None:
    """Evaluate a policy on tasks, N episodes each; writes a resumable run directory (score it
    with `robosafe score RUN_DIR`, report it with `robosafe report RUN_DIR`). With --until it
    stops as soon as the answer is known."""
    from robosafe.runner.request import RunRequest, UntilRequest, plan_run
    from robosafe.runner.run import BACKENDS

    # every option is checked before the run directory is made: a refused run leaves nothing
    # that a corrected retry would call "a run already exists"
    if backend not in BACKENDS:
        fail(f"--backend: {backend!r} is not {' or '.join(BACKENDS)}")
    if ray_address and backend != "ray":
        fail("--ray-address needs --backend ray")
    if backend == "ray":
        from robosafe.runner.cluster import preflight

        preflight(ray_address)
    plan = plan_run(RunRequest(
        policy=policy, tasks=selection(suite, level, task_id, task, task_dir), host=host,
        episodes=episodes, seeds=seeds, language_levels=language_level,
        visual_levels=visual_level, horizon=horizon, images=images, image_size=image_size,
        obs_adapter=obs_adapter, record_frames=record_frames, checkpoint_ref=checkpoint,
        assets=assets, cost_mode=cost_mode, controller=controller,
        arena_evaluator=arena_evaluator, shield=shield, shield_horizon=shield_horizon,
        shield_margin=shield_margin, shield_candidates=shield_candidates, predictor=predictor,
        predictor_margin=predictor_margin,
        until=UntilRequest(until, None if against is None else str(against), until_metric,
                           alpha, delta, two_sided, against_policy),
        out=out, resume=resume))
    quiet = as_json or not sys.stderr.isatty()
    rows = run_with_progress(plan, out, workers=workers, backend=backend, resume=resume,
                             quiet=quiet, lines=not as_json and not sys.stderr.isatty(),
                             ray_address=ray_address)
    s = summarize(rows)
    record = None
    if plan.until is not None:
        from robosafe.runner.rundir import open_run
        from robosafe.runner.until import read_record

        record = read_record(open_run(out))
    if as_json:
        emit_json({"run_dir": str(out), **s,
                   **({"until": record.to_dict()} if record is not None else {})}, None, True)
    else:
        _print_summary({str(out): s})
        if record is not None:
            from robosafe.runner.until import describe

            for line in describe(record):
                typer.echo(line)
        typer.echo(f"run directory: {out} (robosafe score {out} | robosafe report {out} "
                   f"--out report.html)")
    if s["crashed"]:
        # a crashed episode is not a result: the run must not look like a clean one
        typer.echo(f"robosafe: error: {s['crashed']} of {s['episodes']} episodes crashed "
                   f"(error_type / error in {out / 'outcomes.csv'}); finished episodes are "
                   "kept and --resume runs the crashed ones again", err=True)
        raise typer.Exit(EXIT_USER_ERROR)


DEMO_POLICIES = ("scripted-careful", "scripted-careless")


def _reuse(run_dir: Path, fresh: bool) -> bool:
    """Whether the demo continues the run already in ``run_dir`` (said on stderr), or, with
    ``fresh``, removes it first (only a run directory: one with run.json)."""
    import shutil

    from robosafe.runner.rundir import open_run

    if not (run_dir / "run.json").exists():
        return False
    if fresh:
        from robosafe.outputs import DirLock

        open_run(run_dir)  # refuses a directory that is not a robosafe run
        DirLock.acquire(run_dir, "run directory").release()  # never under a running writer
        shutil.rmtree(run_dir)
        return False
    done = len(open_run(run_dir).done())
    typer.echo(f"robosafe: reusing the earlier run in {run_dir} ({done} episode(s) done); "
               "--fresh runs it again", err=True)
    return True


@app.command("demo")
@user_errors
def demo(
    out: Path = typer.Option(Path("robosafe-demo"), "--out", "-o", help="Output directory."),
    episodes: int = typer.Option(3, "--episodes", "-n", min=1, help="Episodes per task."),
    workers: int = workers_option(),
    fresh: bool = typer.Option(False, "--fresh", help="Run again from scratch instead of "
                                                      "reusing the episodes in --out."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary."),
) -> None:
    """Run the built-in demo suite with a careful and a careless scripted policy, score and
    store both, and write an HTML report: success does not imply safety."""
    from robosafe.report.html import write_report
    from robosafe.runner.request import RunRequest, plan_run
    from robosafe.runner.store import Store
    from robosafe.tasks.suites import suite_tasks

    tasks = {k: str(v) for k, v in suite_tasks("demo").items()}
    quiet = as_json or not sys.stderr.isatty()
    summaries, dirs = {}, []
    for policy in DEMO_POLICIES:
        run_dir = out / policy
        resume = _reuse(run_dir, fresh)
        plan = plan_run(RunRequest(policy=policy, tasks=tasks, episodes=episodes, suite="demo",
                                   out=run_dir, resume=resume))
        rows = run_with_progress(plan, run_dir, workers=workers, backend="local",
                                 resume=resume, quiet=quiet, label=policy,
                                 lines=not as_json and not sys.stderr.isatty(),
                                 again="the same command")
        summaries[policy] = summarize(rows)
        dirs.append(run_dir)
    db = out / "robosafe.duckdb"
    with Store(db) as store:
        for d in dirs:
            store.ingest(d)
    report = write_report(dirs, out / "report.html", title="robosafe demo: careful vs careless")
    if as_json:
        emit_json({"out": str(out), "report": str(report), "db": str(db),
                   "runs": {p: {"run_dir": str(out / p), **s} for p, s in summaries.items()}},
                  None, True)
        return
    _print_summary(summaries)
    typer.echo(f"report: {report}\nresults store: {db}")
