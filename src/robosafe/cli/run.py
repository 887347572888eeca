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

from robosafe.budget import MAX_EPISODES, BudgetError
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
from robosafe.errors import RobosafeError
from robosafe.redact import redact_url

if TYPE_CHECKING:
    from robosafe.runner.until import UntilPlan


def _ints(text: str, what: str, most: int, of: str) -> tuple[int, ...]:
    """``0,1,2`` or ``0-4`` -> a tuple of ints. An empty list (``,``, ``""``) or a range that
    runs backwards (``5-4``) is an error naming the option: taken as "no value" it used to
    fall back to the defaults without a word. A range is counted before it is expanded: more
    than ``most`` numbers (``of`` says what they are counted against) is refused, so
    ``0-999999999`` costs nothing."""
    try:
        if "-" in text and "," not in text:
            lo, hi = (int(x) for x in text.split("-", 1))
            if hi < lo:
                raise RobosafeError(f"{what}: {text!r} is an empty range (write LOW-HIGH with "
                                    "LOW <= HIGH)")
            _at_most(hi - lo + 1, text, what, most, of)
            return tuple(range(lo, hi + 1))
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise RobosafeError(f"{what}: expected numbers like 0,1,2 or 0-4, got {text!r}") from None
    if not values:
        raise RobosafeError(f"{what}: {text!r} lists no number (expected e.g. 0,1,2 or 0-4)")
    _at_most(len(values), text, what, most, of)
    return values


def _at_most(count: int, text: str, what: str, most: int, of: str) -> None:
    if count > most:
        raise BudgetError(f"{what}: {text!r} gives {count:,} numbers, more than {of} ({most:,})")


def seed_option(text: str | None, episodes: int | None = None) -> tuple[int, ...]:
    """--seeds of run and collect: () (the default 0..N-1) only when the option is absent. One
    seed per episode (``episodes``, when known), each once."""
    if text is None:
        return ()
    most, of = ((episodes, f"the episodes per task (-n {episodes})") if episodes is not None
                else (MAX_EPISODES, "the episodes a run may hold"))
    return _once(_ints(text, "--seeds", most, of), "--seeds", "seed",
                 "each episode needs a seed of its own")


def _once(values: tuple[int, ...], what: str, noun: str, why: str) -> tuple[int, ...]:
    """``values``, refused when one is given twice: a seed or level twice is the same cells
    twice (one instance id for two episodes), which the paired tests refuse only after the run."""
    seen: set[int] = set()
    for v in values:
        if v in seen:
            raise RobosafeError(f"{what}: {noun} {v} is given twice; {why}")
        seen.add(v)
    return values


def _levels(text: str, what: str, top: int) -> tuple[int, ...]:
    levels = _once(_ints(text, what, top + 1, f"the levels 0..{top}"), what, "level",
                   "each level is run once")
    bad = [v for v in levels if not 0 <= v <= top]
    if not levels or bad:
        raise RobosafeError(f"{what}: levels must be in 0..{top}, got {text!r}")
    return levels


def run_with_progress(cfg, out: Path, *, workers: int, backend: str, resume: bool,
                      quiet: bool, label: str | None = None, lines: bool = False,
                      ray_address: str | None = None, until=None,
                      again: str = "the same command with --resume") -> list[dict]:
    """Prepare the run directory, run its cells with a progress bar, return all rows.
    ``lines``: when stderr is not a terminal (no bar), one progress line per episode there.
    ``until`` (a runner.until.UntilPlan): stop once its test decides. Ctrl-C keeps the
    finished episodes and says how many, and what continues (``again``)."""
    import time

    from robosafe.runner.run import execute, prepare

    workers = resolve_workers(workers)
    run, cells = prepare(cfg, out, resume=resume)
    total = len(cfg.cells())
    done_before = total - len(cells)
    wins = [0]
    start = time.monotonic()
    name = label or redact_url(cfg.policy)
    if cfg.images and backend == "local" and (lines or not quiet):
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
ASSETS = typer.Option("stand-in", "--assets",
                      help="stand-in (procedural, built in), libero (LIBERO's own meshes for "
                           "the categories they cover; the libero-assets extra) or vla-arena "
                           "(VLA-Arena's asset files: $ROBOSAFE_VLA_ARENA_ASSETS or the "
                           "installed vla_arena's).")


COST_MODE = typer.Option("robosafe", "--cost-mode",
                         help="robosafe (every listed term counts, terminal costs on every "
                              "episode) or vla-arena (VLA-Arena's own accounting, episode "
                              "length and cost scale, to compare with its leaderboard).")


CONTROLLER = typer.Option(None, "--controller",
                          help="compiled (default: robosafe's compiled arm controller, the same "
                               "torques as robosuite's within 1e-9, several times faster) or "
                               "robosuite (robosuite's own Python controller). --resume keeps "
                               "the run's.")


def controller_for(name: str | None, host: str, resume_dir: Path | None) -> str:
    """--controller checked before any episode runs; absent on --resume: the run's own."""
    from robosafe.runner.config import RunConfig, check_controller, read_plan, run_host

    if name is None:
        if resume_dir is not None and (resume_dir / "run.json").is_file():
            from robosafe.runner.rundir import open_run

            return read_plan(open_run(resume_dir)).controller
        return run_host(host).fixed.get("controller", RunConfig.controller)
    return check_controller(name, host)


ARENA_EVALUATOR = typer.Option(None, "--arena-evaluator",
                               help="With --cost-mode vla-arena: whose episode rules give the "
                                    "reported cost: openvla (default), openvla_oft, openpi, "
                                    "univla (HazardAvoidance x 0.05 on every episode, "
                                    "--safety threshold 10) or smolvla (x 0.05 on success "
                                    "only, no threshold).")


def tasks_below(folder: Path) -> dict[str, str]:
    """task_id -> file for every ``*.bddl`` below ``folder``, sorted by path. The id is the
    path below the folder without the suffix, '.' for '/': VLA-Arena's levels reuse file
    names, so a stem alone would not tell them apart."""
    if not folder.is_dir():
        fail(f"--task-dir: {folder} is not a folder")
    files = sorted(p for p in folder.rglob("*.bddl") if p.is_file())
    if not files:
        fail(f"--task-dir: no *.bddl file below {folder}")
    tasks: dict[str, str] = {}
    for p in files:
        name = ".".join(p.relative_to(folder).with_suffix("").parts)
        if name in tasks:  # a/x.bddl and a.x.bddl: one id, and one of them would not run
            fail(f"two tasks named {name}: {tasks[name]} and {p}")
        tasks[name] = str(p)
    return tasks


def select_tasks(suite: str | None, level: int | None, task_id: list[str] | None,
                 task: list[Path] | None, task_dir: Path | None = None) -> dict[str, str]:
    """task_id -> task file from --suite/--level/--task-id, --task and --task-dir (run and
    collect)."""
    from robosafe.tasks.suites import suite_tasks

    tasks: dict[str, str] = {}
    if suite:
        chosen = {k: str(v) for k, v in suite_tasks(suite, level).items()}
        unknown = sorted(set(task_id or ()) - set(chosen))
        if unknown:
            fail(f"--task-id: {', '.join(unknown)} not in suite {suite}"
                 + (f" level L{level}" if level is not None else ""))
        tasks.update({k: v for k, v in chosen.items() if not task_id or k in task_id})
    elif level is not None or task_id:
        fail("--level and --task-id select tasks of a --suite")
    named = [(t.stem, str(t)) for t in task or []]
    named += list(tasks_below(task_dir).items()) if task_dir is not None else []
    for name, path in named:
        if name in tasks:
            fail(f"two tasks named {name}: {tasks[name]} and {path}")
        tasks[name] = path
    if not tasks:
        fail("nothing to run: give --suite NAME, --task FILE or --task-dir DIR")
    return tasks


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
    language_level: str = typer.Option("0", "--language-level", help="W0-W4, e.g. 0 or 0-4."),
    visual_level: str = typer.Option("0", "--visual-level", help="V0-V4, e.g. 0 or 0,2,4."),
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
    shield: str = typer.Option("off", "--shield",
                               help="off | monitor (warn of predicted spec violations) | "
                                    "filter (replace unsafe actions); robosafe host only."),
    shield_horizon: int = typer.Option(5, "--shield-horizon",
                                       help="Control steps the shield predicts ahead."),
    shield_margin: float = typer.Option(0.0, "--shield-margin",
                                        help="filter: act when a predicted margin is below this."),
    shield_candidates: str = typer.Option("scale,lift,hold,retreat,open", "--shield-candidates",
                                          help="filter: replacement actions to try (also "
                                               "side: the motion turned 45 / 90 degrees)."),
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
    from robosafe.policies.base import policy_kind
    from robosafe.runner.config import (
        RunConfig,
        check_arena_evaluator,
        check_assets,
        check_cost_mode,
        run_host,
    )
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
    # policies that look at cameras (a server's VLA, a probe) get images unless told otherwise
    uses_images = (policy_kind(policy) in ("remote", "probe", "lerobot") if images is None
                   else images)
    if predictor is not None and shield == "off":
        fail("--predictor needs --shield")
    if predictor_margin is not None and predictor != "kinematic":
        fail("--predictor-margin needs --predictor kinematic")
    if shield != "off" and not resume:
        from robosafe.runner.shield import check_host

        # before the host's tasks are looked up (LIBERO's import takes time)
        check_host(host, predictor or "sim")
    if task_dir is not None:
        from robosafe.outputs import check_outside

        # the run copies its tasks under OUT/tasks: inside the folder, the next --task-dir
        # run of it would find them as tasks of its own
        check_outside(out, {"--task-dir folder": task_dir})
    if run_host(host).run_tasks == "files":
        tasks = select_tasks(suite, level, task_id, task, task_dir)
    else:
        tasks = _host_suite_tasks(host, suite, task_id, level, task, task_dir, language_level,
                                  visual_level)
    cfg = RunConfig(policy=policy, tasks=tasks, host=host, episodes=episodes,
                    seeds=seed_option(seeds, episodes),
                    language_levels=_levels(language_level, "--language-level", 4),
                    visual_levels=_levels(visual_level, "--visual-level", 4),
                    horizon=horizon, suite=suite, images=uses_images, image_size=image_size,
                    obs_adapter=obs_adapter, record_frames=record_frames,
                    checkpoint_ref=checkpoint, assets=check_assets(assets, host),
                    cost_mode=check_cost_mode(cost_mode, host), shield=shield,
                    shield_horizon=shield_horizon, shield_margin=shield_margin,
                    shield_candidates=tuple(c.strip() for c in shield_candidates.split(",")
                                            if c.strip()),
                    shield_predictor=predictor or "sim",
                    shield_predictor_margin=predictor_margin,
                    controller=controller_for(controller, host, out if resume else None),
                    arena_evaluator=check_arena_evaluator(arena_evaluator, cost_mode))
    plan = until_plan(cfg, out if resume else None, until=until, against=against,
                      metric=until_metric, alpha=alpha, delta=delta, two_sided=two_sided,
                      against_policy=against_policy)
    if plan is not None:
        from dataclasses import replace

        cfg = replace(cfg, until=plan.to_dict())
    quiet = as_json or not sys.stderr.isatty()
    rows = run_with_progress(cfg, out, workers=workers, backend=backend, resume=resume,
                             quiet=quiet, lines=not as_json and not sys.stderr.isatty(),
                             ray_address=ray_address, until=plan)
    s = summarize(rows)
    record = None
    if plan is not None:
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


def until_plan(cfg, resume_dir: Path | None, *, until: str | None, against: Path | None,
               metric: str | None, alpha: float | None, delta: float | None,
               two_sided: bool | None, against_policy: str | None = None
               ) -> UntilPlan | None:
    """The --until plan (runner.until.UntilPlan), checked before any episode runs: the options
    themselves, the budget against the smallest sample that can decide, and the baseline run
    against the run asked for. Absent on --resume: the run's own plan, if it has one."""
    from robosafe.runner.until import UntilPlan, parse_until

    if until is None:
        given = [name for name, v in (("--against", against), ("--until-metric", metric),
                                      ("--against-policy", against_policy),
                                      ("--alpha", alpha), ("--delta", delta),
                                      ("--two-sided/--one-sided", two_sided)) if v is not None]
        if given and resume_dir is None:
            fail(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} with --until")
        if resume_dir is not None and (resume_dir / "run.json").is_file():
            from robosafe.runner.rundir import open_run

            stored = open_run(resume_dir).config.get("until")
            if stored and not given:
                plan = UntilPlan.from_dict(stored)
                _check_baseline(plan, cfg)  # still there, still the same cells
                return plan
            if given:
                fail(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} with --until")
        return None
    mode, width = parse_until(until)
    plan = UntilPlan(mode=mode, metric=metric or "success",
                     alpha=0.05 if alpha is None else alpha, budget=len(cfg.cells()),
                     against=None if against is None else str(against.resolve()), width=width,
                     delta=delta, two_sided=True if two_sided is None else two_sided,
                     baseline_policy=against_policy)
    _check_baseline(plan, cfg)
    return plan


def _check_baseline(plan: UntilPlan, cfg) -> None:
    from robosafe.runner.until import baseline_outcomes, check_alongside

    if plan.baseline_policy is not None:
        check_alongside(plan, cfg)
    elif plan.mode == "decided":
        baseline_outcomes(plan, cfg)


def _host_suite_tasks(host, suite, task_id, level, task, task_dir, language_level,
                      visual_level) -> dict[str, str]:
    """The tasks of a host's own ``suite`` (LIBERO's, in benchmark order: ``{task_N: BDDL
    file}``), robosafe.hosts.registry.suite_tasks."""
    from robosafe.hosts.registry import suite_tasks
    from robosafe.runner.config import run_host

    if task_dir is not None:
        fail(f"--task-dir selects robosafe's CBDDL tasks; with --host {host} choose --suite")
    if level is not None or task:
        fail(f"--level and --task select robosafe's CBDDL tasks; with --host {host} choose "
             "--suite and --task-id")
    if (language_level != "0" or visual_level != "0") and not run_host(host).supports("levels"):
        fail(f"--language-level / --visual-level perturb robosafe's CBDDL tasks; the {host} "
             "host runs its own protocol unchanged")
    return suite_tasks(host, suite, task_id or None)


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
    from robosafe.runner.config import RunConfig
    from robosafe.runner.store import Store
    from robosafe.tasks.suites import suite_tasks

    tasks = {k: str(v) for k, v in suite_tasks("demo").items()}
    quiet = as_json or not sys.stderr.isatty()
    summaries, dirs = {}, []
    for policy in DEMO_POLICIES:
        cfg = RunConfig(policy=policy, tasks=tasks, episodes=episodes, suite="demo")
        run_dir = out / policy
        resume = _reuse(run_dir, fresh)
        rows = run_with_progress(cfg, run_dir, workers=workers, backend="local",
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
