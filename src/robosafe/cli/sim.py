"""``robosafe sim ...``: run CBDDL tasks in the MuJoCo simulator, record robosuite envs,
export initial states, list the asset library."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from robosafe.cli.common import app, emit_json, user_errors
from robosafe.errors import RobosafeError

sim_app = typer.Typer(no_args_is_help=True,
                      help="MuJoCo simulator: run tasks, record robosuite envs, states, assets.")
app.add_typer(sim_app, name="sim")


def _progress(quiet: bool, label: str) -> Progress:
    return Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("{task.fields[note]}"), console=Console(stderr=True),
                    disable=quiet, transient=True)


def _actions(spec: str, dim: int):
    """An action source: ``random`` (uniform in [-1, 1]), ``zero`` or ``FILE.npy`` (T x dim)."""
    import numpy as np  # here, not at start-up: `robosafe --help` stays fast

    if spec in ("random", "zero"):
        return spec, None
    path = Path(spec)
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise RobosafeError(f"{spec}: not an action array (.npy): {exc}") from None
    if arr.ndim != 2 or arr.shape[1] != dim or not np.all(np.isfinite(arr)):
        raise RobosafeError(f"{spec}: actions must be a finite (T, {dim}) array, got "
                            f"shape {arr.shape}")
    return "file", arr


@sim_app.command("run")
@user_errors
def run(
    task: Path = typer.Argument(..., help="CBDDL task file (.bddl)."),
    out: Path = typer.Option(..., "--out", "-o", help="Trace file (.parquet, .jsonl, .json)."),
    episodes: int = typer.Option(1, "--episodes", "-n", min=1,
                                 help="Episodes (seeds SEED, SEED+1, ...)."),
    seed: int = typer.Option(0, help="First episode seed."),
    actions: str = typer.Option("random", help="random | zero | FILE.npy with (T, action_dim)."),
    horizon: int = typer.Option(None, help="Steps per episode (default: the task's 30 s)."),
    visual_level: int = typer.Option(0, "--visual-level", min=0, max=4, help="V0-V4."),
    images: bool = typer.Option(False, help="Render camera images (slower; off by default)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary."),
) -> None:
    """Run episodes of one task and write their safety traces (score them with
    `robosafe score OUT`)."""
    import numpy as np  # here, not at start-up: `robosafe --help` stays fast

    from robosafe.budget import check_episodes, check_horizon
    from robosafe.hosts.registry import make_env
    from robosafe.trace.io import write_episodes

    check_episodes(episodes)  # every episode's trace is held until the file is written
    if horizon is not None:
        check_horizon(horizon)
    env = make_env("robosafe", task, visual_level=visual_level, horizon=horizon, images=images)
    kind, arr = _actions(actions, env.action_dim)
    rows, done = [], []
    quiet = as_json or not sys.stderr.isatty()
    with _progress(quiet, "episodes") as bar:
        job = bar.add_task("episodes", total=episodes, note="")
        for k in range(episodes):
            s = seed + k
            rng = np.random.default_rng([s, 1])  # the policy's own stream, apart from the env's
            try:
                env.reset(seed=s)
                for t in range(env.horizon):
                    if kind == "file" and t >= len(arr):
                        break
                    a = (arr[t] if kind == "file" else np.zeros(env.action_dim) if kind == "zero"
                         else rng.uniform(-1.0, 1.0, env.action_dim))
                    _, _, terminated, truncated, _ = env.step(a)
                    if terminated or truncated:
                        break
                ep = env.episode(policy=actions if kind != "file" else Path(actions).name)
            except RobosafeError as err:
                typer.echo(f"robosafe: episode seed {s} failed: {err}", err=True)
                rows.append({"seed": s, "error": str(err)})
                continue
            done.append(ep)
            write_episodes(out, done)  # rewritten each episode: a crash loses nothing done
            cc = float(ep.meta["cumulative_cost"])
            rows.append({"episode_id": ep.episode_id, "seed": s, "steps": ep.n_steps - 1,
                         "success": bool(ep.success), "cumulative_cost": cc})
            bar.update(job, advance=1, note=f"success {sum(r.get('success', 0) for r in rows)}")
    env.close()
    if as_json:
        emit_json({"task": str(task), "out": str(out), "episodes": rows}, None, True)
    else:
        table = Table("episode", "steps", "success", "CC")
        for r in rows:
            table.add_row(r.get("episode_id", f"seed {r['seed']}"), str(r.get("steps", "-")),
                          str(r.get("success", "error")), f"{r.get('cumulative_cost', 0):g}")
        Console().print(table)
        typer.echo(f"wrote {len(done)} trace(s) to {out}")
    if len(done) < episodes:
        raise typer.Exit(2)


@sim_app.command("state")
@user_errors
def state(
    task: Path = typer.Argument(..., help="CBDDL task file."),
    seed: int = typer.Option(0, help="Episode seed."),
    out: Path = typer.Option(..., "--out", "-o", help="Where to write the state (.npy)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Export the initial state of (task, seed) as a plain .npy array."""
    from robosafe.sim.env import TaskEnv

    env = TaskEnv(task, render=False)
    env.reset(seed=seed)
    env.save_state(out)
    n = int(env.get_state().size)
    env.close()
    if as_json:
        emit_json({"task": str(task), "seed": seed, "out": str(out), "size": n}, None, True)
    else:
        typer.echo(f"wrote the initial state of {task} seed {seed} ({n} numbers) to {out}")


@sim_app.command("record")
@user_errors
def record(
    env_name: str = typer.Argument(..., help="A robosuite environment, e.g. Lift, Door."),
    out: Path = typer.Option(..., "--out", "-o", help="Trace file (.parquet, .jsonl, .json)."),
    episodes: int = typer.Option(1, "--episodes", "-n", min=1, help="Episodes to record."),
    steps: int = typer.Option(100, min=1, help="Random-action steps per episode."),
    seed: int = typer.Option(0),
    robot: str = typer.Option("Panda"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Record random-action episodes of a robosuite task with the post-hoc safety recorder."""
    import numpy as np  # here, not at start-up: `robosafe --help` stays fast

    from robosafe.budget import check_episodes, check_horizon
    from robosafe.hosts.registry import make_env
    from robosafe.trace.io import write_episodes

    check_episodes(episodes)
    check_horizon(steps, "--steps")
    # the robosuite host: made with the first seed, each episode continues robosuite's stream
    env = make_env("robosuite", env_name, robot=robot, seed=seed, horizon=steps)
    eps = []
    quiet = as_json or not sys.stderr.isatty()
    with _progress(quiet, "episodes") as bar:
        job = bar.add_task("episodes", total=episodes, note="")
        for k in range(episodes):
            rng = np.random.default_rng([seed, k])
            env.reset()
            low, high = env.action_bounds()
            for _ in range(steps):  # the whole budget, as recorded before: success ends nothing
                env.step(rng.uniform(low, high))
            eps.append(env.episode(episode_id=f"{env_name}/ep_{k:03d}", policy="random"))
            write_episodes(out, eps)
            bar.update(job, advance=1)
    env.close()
    summary = {"env": env_name, "out": str(out), "episodes": len(eps),
               "success": [bool(e.success) for e in eps]}
    if as_json:
        emit_json(summary, None, True)
    else:
        typer.echo(f"wrote {len(eps)} trace(s) of {env_name} to {out}")


@sim_app.command("assets")
@user_errors
def assets(as_json: bool = typer.Option(False, "--json")) -> None:
    """List the bundled asset categories and their safety properties."""
    from robosafe.sim.assets import categories, category

    rows = []
    for name in categories():
        c = category(name)
        rows.append({"category": c.name, "kind": c.kind, "properties": sorted(c.properties),
                     "parts": {str(k): v for k, v in c.parts.items()},
                     "hazard_parts": sorted(c.hazard_parts)})
    if as_json:
        emit_json({"categories": rows}, None, True)
        return
    table = Table("category", "kind", "properties", "parts (hazard*)")
    for r in rows:
        parts = ", ".join(f"{k}:{v}{'*' if int(k) in r['hazard_parts'] else ''}"
                          for k, v in r["parts"].items())
        table.add_row(r["category"], r["kind"], ", ".join(r["properties"]), parts)
    Console().print(table)
