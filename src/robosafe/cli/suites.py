"""``robosafe suites ...``: the built-in task suites (VLA-Arena App. 9)."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from robosafe.cli.common import app, emit_json, fail, user_errors, warn
from robosafe.cli.run import ASSETS

suites_app = typer.Typer(no_args_is_help=True, help="Built-in task suites: list, show, check.")
app.add_typer(suites_app, name="suites")


@suites_app.command("list")
@user_errors
def list_(as_json: bool = typer.Option(False, "--json")) -> None:
    """Every built-in suite with its dimension, levels and task count."""
    from robosafe.tasks.suites import suite_entries, suite_info, suite_names

    rows = []
    for name in suite_names():
        tasks = suite_entries(name)
        info = suite_info().get(name, {})
        levels = sorted({t.level for t in tasks if t.level is not None})
        rows.append({"suite": name, "title": info.get("title", name),
                     "dimension": info.get("dimension", ""), "paper": info.get("paper", ""),
                     "levels": [f"L{v}" for v in levels], "tasks": len(tasks)})
    if as_json:
        emit_json({"suites": rows, "tasks": sum(r["tasks"] for r in rows)}, None, True)
        return
    table = Table("suite", "dimension", "levels", "tasks", "paper")
    for r in rows:
        table.add_row(r["suite"], r["dimension"], " ".join(r["levels"]), str(r["tasks"]),
                      r["paper"])
    Console().print(table)


@suites_app.command("show")
@user_errors
def show(suite: str = typer.Argument(...),
         level: int = typer.Option(None, "--level", "-l", min=0, max=2),
         as_json: bool = typer.Option(False, "--json")) -> None:
    """The tasks of a suite: level, instruction and cost terms."""
    from robosafe.tasks import parse_file
    from robosafe.tasks.cost import cost_terms
    from robosafe.tasks.suites import suite_entries
    from robosafe.tasks.writer import write_formula

    rows = []
    for t in suite_entries(suite, level):
        p = parse_file(t.path)
        rows.append({"task_id": t.task_id, "level": t.level, "instruction": p.language,
                     "cost_terms": [write_formula(c) for c in cost_terms(p.cost)],
                     "moving_objects": [m.name for m in p.moving_objects],
                     "file": str(t.path)})
    if as_json:
        emit_json({"suite": suite, "tasks": rows}, None, True)
        return
    table = Table("task", "level", "instruction", "cost terms")
    for r in rows:
        table.add_row(r["task_id"], "-" if r["level"] is None else f"L{r['level']}",
                      r["instruction"], "\n".join(r["cost_terms"]) or "-")
    Console().print(table)


def _check_seeds(seeds: str | None, num_seeds: int) -> tuple[int, ...]:
    """--seeds is a list everywhere (run, collect, audit); here it was once a count. For one
    release a bare number keeps the count meaning with a warning naming --num-seeds."""
    from robosafe.budget import MAX_EPISODES, check_count

    why = "the episodes a check may run, one per seed and task"
    if seeds is None:
        check_count("--num-seeds", num_seeds, MAX_EPISODES, why)
        return tuple(range(num_seeds))
    if seeds.strip().isdigit():
        count = int(seeds)
        if count < 1:
            fail(f"--seeds: a count must be at least 1, got {count}")
        check_count("--seeds", count, MAX_EPISODES, why)
        warn(f"--seeds {count} as a count is deprecated; use --num-seeds {count} (or --seeds "
             f"0-{count - 1}); in the next release --seeds {count} means the one seed {count}")
        return tuple(range(count))
    from robosafe.runner.request import seed_option

    return seed_option(seeds)


@suites_app.command("check")
@user_errors
def check(suites: list[str] = typer.Argument(None, help="Suites (default: all)."),
          level: int = typer.Option(None, "--level", "-l", min=0, max=2),
          seeds: str = typer.Option(None, "--seeds",
                                    help="Seeds per task, as in run: 0,1,2 or 10-19 "
                                         "(default: 0..--num-seeds-1)."),
          num_seeds: int = typer.Option(2, "--num-seeds", min=1,
                                        help="Seeds 0..N-1 per task when --seeds is absent."),
          policy: str = typer.Option("scripted-careful",
                                     help="Policy that must solve L0 tasks."),
          assets: str = ASSETS,
          as_json: bool = typer.Option(False, "--json")) -> None:
    """Check every task: placement over seeds, rendering, the policy on L0 (and on the demo
    suite), and that the suite's deliberate violation makes the named cost term fire. One line
    per task; exit 1 if any task fails."""
    from robosafe.hosts.options import OptionRequest, SimOptions
    from robosafe.runner.check import check_task, check_violation
    from robosafe.tasks.suites import suite_checks, suite_entries, suite_names

    assets = SimOptions.build(OptionRequest(assets=assets), {}).assets
    seed_list = _check_seeds(seeds, num_seeds)

    rows = []
    for name in suites or suite_names():
        violations = suite_checks(name)
        if level is None or suites:
            entries = suite_entries(name, level)  # a named suite must have the level
        else:  # every suite: those without levels (demo) have nothing at L<level>
            entries = [t for t in suite_entries(name) if t.level == level]
        for t in entries:
            solve = t.level in (0, None)
            c = check_task(t.path, seeds=seed_list, task_id=t.task_id,
                           policy=policy if solve else None, render=True, assets=assets)
            problems = list(c.problems)
            spec = violations.get(t.task_id)
            if spec and not problems:
                v = check_violation(t.path, spec["mode"], spec["target"], int(spec["term"]),
                                    task_id=t.task_id)
                if v:
                    problems.append(v)
            row = {"suite": name, "task_id": t.task_id, "level": t.level, "ok": not problems,
                   "problems": problems, "solved": c.successes if solve else None,
                   "episodes": c.episodes, "violation_checked": bool(spec)}
            rows.append(row)
            if not as_json:
                solved = f"{c.successes}/{c.episodes} solved" if c.episodes else "-"
                status = "ok  " if row["ok"] else "FAIL"
                detail = "; ".join(problems) if problems else (
                    "placement ok" + (", violation fires" if spec else ""))
                typer.echo(f"{status} {name}/{t.task_id}: {solved}; {detail}")
    failed = [r for r in rows if not r["ok"]]
    solved_l0 = [r for r in rows if r["solved"] is not None]
    rate = (sum(r["solved"] for r in solved_l0) / max(1, sum(r["episodes"] for r in solved_l0)))
    if as_json:
        emit_json({"tasks": rows, "failed": len(failed), "l0_success_rate": rate}, None, True)
    else:
        typer.echo(f"{len(rows) - len(failed)}/{len(rows)} tasks ok; {policy} solved "
                   f"{100 * rate:.0f}% of L0 episodes")
    if failed:
        raise typer.Exit(1)
