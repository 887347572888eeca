"""The local backend: a process pool on this machine. MuJoCo and the renderer live in each worker
process, started with "spawn" because GL contexts do not survive a fork; a worker keeps to the
cells of one scene while there are any, so each scene is built by as few workers as possible."""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from multiprocessing import get_context
from typing import Any

from robosafe.log import install_stderr_lines
from robosafe.redact import redact_logs
from robosafe.runner.worker import CellJob, CellResult, remove_scratch, run_job


def run_local(jobs: list[CellJob], workers: int, store: Callable[[CellResult], None], *,
              address: str | None = None, in_order: bool = False,
              stop: Callable[[], bool] = lambda: False) -> None:
    """Run ``jobs`` on ``workers`` processes of this machine (``address``: the Ray backend's,
    unused here), ``store`` each result here. ``in_order``: cells start in list order, not
    grouped by scene; ``stop``: asked before each cell starts, True starts no more."""
    if workers == 1:
        for job in jobs:
            if stop():
                break
            store(run_job(job))
        return
    queue = _InOrder(jobs) if in_order else _SceneQueue(jobs)
    running: dict[Any, CellJob] = {}
    # spawned workers start with no logging set up: they print robosafe's lines as the CLI does
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn"),
                             initializer=_worker_start) as pool:
        # one cell per worker in flight: the worker that just finished is the one that takes
        # the next cell, which is of the scene it has built where one is left
        while queue and len(running) < workers and not stop():
            job = queue.take(None, running.values())
            running[pool.submit(run_job, job)] = job
        try:
            while running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for f in done:
                    finished = running.pop(f)
                    if queue and not stop():
                        job = queue.take(finished, running.values())
                        running[pool.submit(run_job, job)] = job
                    store(f.result())
        except BaseException:
            _stop_workers(pool)
            raise


def _worker_start() -> None:
    """A pool worker's set-up: robosafe's stderr lines, URL credentials masked, as the CLI's;
    and it ends (its scratch folder removed) when told to or when the driver is gone: a pool
    worker blocks on a pipe the other workers also hold open, so a killed driver's workers
    would otherwise wait under init for ever, each with its scene in memory."""
    import signal
    import threading

    install_stderr_lines()
    redact_logs()
    signal.signal(signal.SIGTERM, lambda *_: _end_worker(128 + signal.SIGTERM))
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True,
                     name="robosafe-parent-watch").start()


#: how often a pool worker looks whether its driver is still there
PARENT_POLL_S = 0.5


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:  # re-parented (to init or a subreaper) once it dies
        time.sleep(PARENT_POLL_S)
    _end_worker(1)


def _end_worker(status: int) -> None:
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        # a second SIGTERM (the pool's own, as it shuts down) must not cut the removal short
        # (the parent watcher's thread may not set handlers, and nothing signals it anyway)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    remove_scratch()
    os._exit(status)


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """End a pool's workers now (SIGTERM: each removes its scratch folder): the driver is
    stopping, and shutting the pool down would wait for the episodes in flight."""
    # the processes first: shutting down forgets them
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()


def _scene(job: CellJob) -> tuple:
    """The cached environment a cell runs in (the key of ``_env``, shadow aside)."""
    c = job.cell
    return (c.task_id, c.language_level, c.visual_level)


class _InOrder:
    """The cells still to run, in list order (``execute(in_order=True)``)."""

    def __init__(self, jobs: list[CellJob]):
        self.jobs = deque(jobs)

    def __bool__(self) -> bool:
        return bool(self.jobs)

    def take(self, after: CellJob | None, running) -> CellJob:
        return self.jobs.popleft()


class _SceneQueue:
    """The cells still to run, by scene: a worker builds each scene it runs once (``_env``),
    so a worker keeps to one scene while it has cells, then takes the scene with the most
    cells left that no other worker is on, and shares one only when none is free."""

    def __init__(self, jobs: list[CellJob]):
        self.scenes: dict[tuple, deque[CellJob]] = {}
        for job in jobs:
            self.scenes.setdefault(_scene(job), deque()).append(job)

    def __bool__(self) -> bool:
        return bool(self.scenes)

    def take(self, after: CellJob | None, running) -> CellJob:
        """The next cell for the worker that just ran ``after`` (None: a new worker), while
        the workers run ``running``."""
        key = _scene(after) if after is not None else None
        if key not in self.scenes:
            busy = {_scene(j) for j in running}
            free = [k for k in self.scenes if k not in busy] or list(self.scenes)
            key = max(free, key=lambda k: len(self.scenes[k]))  # first such in cell order
        cells = self.scenes[key]
        job = cells.popleft()
        if not cells:
            del self.scenes[key]
        return job
