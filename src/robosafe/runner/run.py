"""Evaluate a policy on tasks: episodes x seeds x perturbation levels.

Each cell (task, episode index -> seed, language level W, visual level V) is one episode. Seeds
are fixed by the run plan, so two policies evaluated with the same plan see the same
initial states, perturbations and instructions (paired comparisons need that). A worker runs
the episode, writes its trace, scores it and writes its outcome row, each file atomically, so
a killed run loses at most the episodes in flight and ``resume`` runs exactly the cells that
have no outcome. A crashing episode gets a row with its ``error_type`` and the run goes on.

The driver (this module) takes a checked plan (:mod:`robosafe.runner.request` makes it from a
request, :mod:`robosafe.runner.plan` is its type), prepares the run directory and hands the cells to
a backend from :data:`RUNNERS`: ``local`` (:mod:`robosafe.runner.local`, a process pool) or
``ray`` (:mod:`robosafe.runner.cluster`, the same worker function as Ray tasks, for clusters;
``pip install robosafe[ray]``). The episode is :mod:`robosafe.runner.worker`.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from robosafe.errors import RobosafeError
from robosafe.outputs import DirLock, make_dir
from robosafe.redact import redact_url
from robosafe.runner.cluster import run_on_ray
from robosafe.runner.local import run_local
from robosafe.runner.plan import RunPlan, robosafe_version
from robosafe.runner.rundir import (
    Cell,
    RunDir,
    atomic_write_bytes,
    create_run,
    open_run,
)
from robosafe.runner.worker import (
    CellJob,
    CellResult,
    cell_env,
    cell_policy,
    close_policies,
    drop_env,
)

log = logging.getLogger("robosafe.runner")

#: the backends, by the name ``--backend`` takes: each runs CellJobs with the worker's
#: ``run_job`` and hands every CellResult to ``store`` in this process
RUNNERS = {"local": run_local, "ray": run_on_ray}
BACKENDS = tuple(RUNNERS)


def _never() -> bool:
    return False


def store_result(run: RunDir, res: CellResult, get: Callable[[Any], bytes] | None = None) -> None:
    """Write a cell's files into the run directory (driver only), the outcome row last: a cell
    counts as done (``--resume``) only once everything it produced is on disk."""
    if res.frames:
        final = run.path / "frames" / res.cell.name
        tmp = final.with_name(f".{final.name}.partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for name, chunks in res.frames.items():
            with open(tmp / name, "wb") as fh:
                fh.writelines(get(c) if get else c for c in chunks)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
    if res.actions is not None:
        atomic_write_bytes(run.actions_path(res.cell), res.actions)
    if res.trace is not None:
        atomic_write_bytes(run.trace_path(res.cell), res.trace)
    run.write_outcome(res.cell, res.row.to_json())


def check_policy_inputs(plan: RunPlan) -> None:
    """A learned policy that reads named inputs (``lerobot:DIR``) loads, and every input it
    reads can be made from the host's first observation of the run's first cell: one error
    naming both sides before any episode, rather than the same error in every episode. The
    policy stays cached for this process's episodes; the scene is closed."""
    from robosafe.policies.base import policy_kind

    if policy_kind(plan.policy) != "lerobot" or not plan.tasks:
        return
    cell = plan.cells()[0]
    text = Path(plan.tasks[cell.task_id]).read_text(encoding="utf-8")
    job = CellJob("preflight", plan, plan.policy, text, cell, plan.policy)
    policy = cell_policy(plan, plan.policy)
    env = cell_env(job)
    try:
        obs, _ = env.reset(seed=cell.seed)
        policy.check(obs, env.task_info().to_dict())
    finally:
        drop_env(env)


def prepare(plan: RunPlan, out: str | Path, *, resume: bool = False
            ) -> tuple[RunDir, list[Cell]]:
    """Create (or reopen with ``resume``) the run directory of ``plan`` (checked: made by
    robosafe.runner.request.plan_run); the cells still to run. The directory is locked from
    here until :func:`execute` ends (one writer per run directory)."""
    out = Path(out)
    if resume:
        open_run(out)  # a clear error before anything is locked or created
    check_policy_inputs(plan)
    lock = DirLock.acquire(make_dir(out), "run directory")
    try:
        if resume:
            run = open_run(out)
            if run.plan.identity_text() != plan.identity_text():
                raise RobosafeError(f"{out}: --resume with a different configuration than the "
                                    "run was started with (policy, tasks, episodes, seeds, "
                                    "levels or --until)")
        else:
            config = {**plan.to_json(), "policy_name": redact_url(plan.policy_name or plan.policy),
                      "robosafe_version": robosafe_version(),
                      "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
            config["tasks"] = {t: f"tasks/{t}.bddl" for t in plan.tasks}
            run = create_run(out, config, {t: Path(p) for t, p in plan.tasks.items()})
        done = run.done()
    except BaseException:
        lock.release()
        raise
    run.policy_spec, run.lock = plan.policy, lock
    return run, [c for c in run.plan.cells() if c.name not in done]


def execute(run: RunDir, cells: list[Cell], *, workers: int = 1, backend: str = "local",
            on_result: Callable[[dict[str, Any]], None] | None = None,
            ray_address: str | None = None, in_order: bool = False,
            stop: Callable[[], bool] | None = None) -> list[dict[str, Any]]:
    """Run ``cells`` of ``run``; rows in completion order. outcomes.csv is rebuilt at the end.

    Workers return each cell's files and only this process writes them (every backend the
    same way). ``ray_address`` (or ``$RAY_ADDRESS``) names an existing Ray cluster; without
    one the ray backend starts a private one of ``workers`` CPUs. ``in_order``: cells start
    in list order (not grouped by scene); ``stop``: asked before each cell starts, True
    starts no more (the cells in flight finish and are stored).
    """
    if backend not in RUNNERS:
        raise RobosafeError(f"unknown backend {backend!r}; use {' or '.join(RUNNERS)}")
    plan = run.plan
    jobs = [CellJob(str(run.path.resolve()), plan, run.policy_name,
                    run.task_file(c.task_id).read_text(encoding="utf-8"), c, run.policy_spec)
            for c in cells]
    rows = []
    said: set[tuple[int, str]] = set()

    def store(res: CellResult, get: Callable[[Any], bytes] | None = None) -> None:
        for line in res.lines:
            if line not in said:
                said.add(line)
                log.log(*line)
        store_result(run, res, get)
        row = res.row.to_json()
        rows.append(row)
        if on_result:
            on_result(row)

    try:
        RUNNERS[backend](jobs, max(1, workers), store, address=ray_address,
                         in_order=in_order, stop=stop or _never)
    finally:
        close_policies()
        try:
            run.write_outcomes_csv()
        finally:
            if run.lock is not None:
                run.lock.release()
                run.lock = None
    return rows
