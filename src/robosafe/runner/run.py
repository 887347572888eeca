"""Evaluate a policy on tasks: episodes x seeds x perturbation levels (issue #6).

Each cell (task, episode index -> seed, language level W, visual level V) is one episode. Seeds
are fixed by the run config, so two policies evaluated with the same config see the same
initial states, perturbations and instructions (paired comparisons need that). A worker runs
the episode, writes its trace, scores it and writes its outcome row, each file atomically, so
a killed run loses at most the episodes in flight and ``resume`` runs exactly the cells that
have no outcome. A crashing episode gets a row with its ``error_type`` and the run goes on.

Backends: ``local`` (a process pool; MuJoCo and the renderer live in each worker process,
started with "spawn" because GL contexts do not survive a fork) and ``ray`` (the same
function as Ray tasks, for clusters; ``pip install robosafe[ray]``).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from robosafe.errors import RobosafeError
from robosafe.outputs import DirLock, make_dir
from robosafe.redact import redact_url
from robosafe.runner.rundir import Cell, RunDir, create_run, open_run

BACKENDS = ("local", "ray")


@dataclass(frozen=True)
class RunConfig:
    """What a run evaluates; stored as run.json (with the task files copied beside it)."""

    policy: str
    tasks: dict[str, str]  # task_id -> task file
    host: str = "robosafe"  # robosafe (CBDDL simulator) or libero (robosafe.hosts.libero)
    episodes: int = 1
    seeds: tuple[int, ...] = ()  # one per episode index; default 0..episodes-1
    language_levels: tuple[int, ...] = (0,)
    visual_levels: tuple[int, ...] = (0,)
    horizon: int | None = None
    suite: str | None = None
    images: bool = False
    image_size: int | None = None
    obs_adapter: str | None = None  # remote policies: adapters.yaml entry (default: the host's)
    record_frames: bool = False  # robot state + camera mp4s per episode (LeRobot export)
    # (xy metres, yaw degrees): objects placed off each seed's spots, a stream per episode index
    # (demonstrations "around" evaluation seeds: robosafe.audit.datasource)
    placement_jitter: tuple[float, ...] = ()
    assets: str = "stand-in"  # robosafe host: "libero" builds what LIBERO's assets cover
    # robosafe host: "vla-arena" books costs, episode length and success as VLA-Arena's code
    # does (robosafe.tasks.cost), so cumulative_cost is the number VLA-Arena would report
    cost_mode: str = "robosafe"
    checkpoint_ref: str = ""
    policy_name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def seed_list(self) -> list[int]:
        seeds = list(self.seeds) or list(range(self.episodes))
        if len(seeds) != self.episodes:
            raise RobosafeError(f"--seeds gives {len(seeds)} seeds for {self.episodes} "
                                "episodes; give one per episode")
        return seeds

    def cells(self) -> list[Cell]:
        seeds = self.seed_list()
        return [Cell(t, k, seeds[k], w, v) for t in sorted(self.tasks)
                for w in self.language_levels for v in self.visual_levels
                for k in range(self.episodes)]

    def identity(self) -> dict[str, Any]:
        """What must match for --resume: everything that decides the cells and episodes."""
        d = self.to_json()
        d["tasks"] = sorted(self.tasks)
        for k in ("extra", "policy_name"):
            d.pop(k)
        return d

    def to_json(self) -> dict[str, Any]:
        """The config as stored in run.json: credentials in a policy URL are masked (the
        connection gets them from the in-memory spec, :attr:`RunDir.policy_spec`)."""
        d = asdict(self)
        d["seeds"] = self.seed_list()
        d["policy"] = redact_url(self.policy)
        d["policy_name"] = redact_url(self.policy_name)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunConfig:
        keys = cls.__dataclass_fields__
        kw = {k: d[k] for k in keys if k in d}
        for k in ("seeds", "language_levels", "visual_levels", "placement_jitter"):
            if k in kw:
                kw[k] = tuple(kw[k])
        return cls(**kw)


def _version() -> str:
    try:
        return version("robosafe")
    except PackageNotFoundError:  # running from a source tree
        return "unknown"


# -- the episode (runs in a worker) -------------------------------------------------------------
_ENVS: dict[tuple, Any] = {}
_POLICIES: dict[tuple, Any] = {}


def _env(run: RunDir, cfg: RunConfig, cell: Cell):
    key = (str(run.path), cell.task_id, cell.language_level, cell.visual_level)
    if key in _ENVS:
        return _ENVS[key]
    if cfg.host == "libero":
        from robosafe.hosts.libero import LiberoEnv

        env = LiberoEnv(cfg.suite, cell.task_id, images=cfg.images,
                        image_size=cfg.image_size, horizon=cfg.horizon)
    else:
        from robosafe.sim.env import BENCHMARK, TaskEnv

        env = TaskEnv(run.task_file(cell.task_id), task_id=cell.task_id,
                      benchmark=cfg.suite or BENCHMARK, render=cfg.images,
                      visual_level=cell.visual_level, language_level=cell.language_level,
                      horizon=cfg.horizon, assets=cfg.assets, cost_mode=cfg.cost_mode,
                      image_size=(cfg.image_size,) * 2 if cfg.image_size else None)
    _ENVS[key] = env
    return env


def _policy(cfg: RunConfig, spec: str | None):
    """The policy of ``spec`` (the driver's spec, with any credentials), else of run.json."""
    from robosafe.policies.base import make_policy

    spec = spec or cfg.policy
    key = (spec, cfg.host, cfg.obs_adapter)
    if key not in _POLICIES:
        _POLICIES[key] = make_policy(spec, host=cfg.host, adapter=cfg.obs_adapter)
    return _POLICIES[key]


def close_policies() -> None:
    """Close this process's policies (remote connections) once its episodes are done."""
    for policy in _POLICIES.values():
        close = getattr(policy, "close", None)
        if close is not None:
            close()
    _POLICIES.clear()


def run_cell(run_path: str, cell: Cell, policy_spec: str | None = None) -> dict[str, Any]:
    """Run, record, score and store one episode; returns its outcome row. ``policy_spec``
    is the spec as given (run.json holds it with credentials masked)."""
    from robosafe.safety.registry import load_registry
    from robosafe.safety.score import score_episodes
    from robosafe.stats.outcomes import outcome_row
    from robosafe.trace.io import write_episodes

    run = open_run(run_path)
    cfg = RunConfig.from_json(run.config)
    suite = cfg.suite or "tasks"
    start = time.perf_counter()
    base = {"suite": suite, "task_id": cell.task_id, "task_name": cell.task_id,
            "episode_idx": cell.episode_idx, "instance_id": cell.instance_id,
            "policy_name": run.policy_name, "checkpoint_ref": cfg.checkpoint_ref,
            "seed": cell.seed, "language_level": cell.language_level,
            "visual_level": cell.visual_level}
    env = None
    try:
        env = _env(run, cfg, cell)
        base["task_name"] = getattr(env, "task_name", cell.task_id)
        policy = _policy(cfg, policy_spec)
        jitter = ({"options": {"placement_jitter": (*cfg.placement_jitter, cell.episode_idx)}}
                  if cfg.placement_jitter else {})
        obs, info = env.reset(seed=cell.seed, **jitter)
        frames = _frames(run, cfg, cell, env)
        info, actions = env.play(policy, obs, on_obs=frames)
        if frames is not None:
            frames.finish()
        run.write_actions(cell, np.asarray(actions, dtype=float).reshape(len(actions), -1))
        ep = env.episode(episode_id=cell.name, policy=run.policy_name,
                         instance_id=cell.instance_id,
                         meta={"episode_idx": cell.episode_idx,
                               "checkpoint_ref": cfg.checkpoint_ref})
        write_episodes(run.trace_path(cell), [ep])
        (score,) = score_episodes([ep])
        cost = ep.meta.get("cumulative_cost")  # hosts without CBDDL costs have none
        if "vla_arena" in ep.meta:  # VLA-Arena's reported cost (its HazardAvoidance scale)
            cost = ep.meta["vla_arena"]["cost"]
        row = {**outcome_row(score, load_registry()), **base,
               "cumulative_cost": None if cost is None else float(cost),
               "instruction": info["instruction"]}
    except Exception as exc:  # noqa: BLE001 - a crashing episode is recorded, the run goes on
        detail = str(exc) if isinstance(exc, RobosafeError) else traceback.format_exc(limit=3)
        # a client library's message can quote the URL it connected to, credentials included
        row = {**base, "success": 0, "num_env_steps": getattr(env, "steps", 0),
               "error_type": type(exc).__name__,
               "error": redact_url(detail.strip().splitlines()[-1])}
    row["wall_s"] = round(time.perf_counter() - start, 3)
    run.write_outcome(cell, row)
    return row


def _frames(run: RunDir, cfg: RunConfig, cell: Cell, env):
    if not cfg.record_frames:
        return None
    from robosafe.runner.frames import FrameRecorder

    cams = env.cameras if env.render else ()
    return FrameRecorder(run.path / "frames" / cell.name, cams, round(env.control_freq))


# -- orchestration ------------------------------------------------------------------------------
def prepare(cfg: RunConfig, out: str | Path, *, resume: bool = False) -> tuple[RunDir, list[Cell]]:
    """Create (or reopen with ``resume``) the run directory; the cells still to run. The
    directory is locked from here until :func:`execute` ends (one writer per run directory)."""
    from robosafe.policies.base import policy_kind

    policy_kind(cfg.policy)
    if cfg.placement_jitter and (cfg.host != "robosafe" or len(cfg.placement_jitter) != 2):
        raise RobosafeError("placement jitter is (xy metres, yaw degrees) and needs robosafe's "
                            "simulator")
    if cfg.obs_adapter is not None:
        from robosafe.policies.remote import check_adapter

        check_adapter(cfg.obs_adapter)
    out = Path(out)
    if resume:
        open_run(out)  # a clear error before anything is locked or created
    else:
        cfg.seed_list()
        missing = [p for p in cfg.tasks.values() if not Path(p).is_file()]
        if missing:
            raise RobosafeError(f"task file not found: {missing[0]}")
    lock = DirLock.acquire(make_dir(out), "run directory")
    try:
        if resume:
            run = open_run(out)
            stored = RunConfig.from_json(run.config)
            if stored.identity() != cfg.identity():
                raise RobosafeError(f"{out}: --resume with a different configuration than the "
                                    "run was started with (policy, tasks, episodes, seeds or "
                                    "levels)")
        else:
            config = {**cfg.to_json(), "policy_name": redact_url(cfg.policy_name or cfg.policy),
                      "robosafe_version": _version(),
                      "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
            config["tasks"] = {t: f"tasks/{t}.bddl" for t in cfg.tasks}
            run = create_run(out, config, {t: Path(p) for t, p in cfg.tasks.items()})
        done = run.done()
    except BaseException:
        lock.release()
        raise
    run.policy_spec, run.lock = cfg.policy, lock
    return run, [c for c in RunConfig.from_json(run.config).cells() if c.name not in done]


def execute(run: RunDir, cells: list[Cell], *, workers: int = 1, backend: str = "local",
            on_result: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run ``cells`` of ``run``; rows in completion order. outcomes.csv is rebuilt at the end."""
    if backend not in BACKENDS:
        raise RobosafeError(f"unknown backend {backend!r}; use {' or '.join(BACKENDS)}")
    rows = []
    runner = _ray_rows if backend == "ray" else _local_rows
    try:
        for row in runner(str(run.path), cells, max(1, workers), run.policy_spec):
            rows.append(row)
            if on_result:
                on_result(row)
    finally:
        close_policies()
        try:
            run.write_outcomes_csv()
        finally:
            if run.lock is not None:
                run.lock.release()
                run.lock = None
    return rows


def _local_rows(path: str, cells: list[Cell], workers: int,
                spec: str | None) -> Iterator[dict[str, Any]]:
    if workers == 1:
        for c in cells:
            yield run_cell(path, c, spec)
        return
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(run_cell, path, c, spec) for c in cells]
        for f in as_completed(futures):
            yield f.result()


def _ray_rows(path: str, cells: list[Cell], workers: int,
              spec: str | None) -> Iterator[dict[str, Any]]:
    try:
        import ray
    except ImportError:
        raise RobosafeError("the ray backend needs Ray: pip install 'robosafe[ray]'") from None
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    try:
        task = ray.remote(num_cpus=1)(run_cell)
        pending = [task.remote(path, c, spec) for c in cells]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            yield ray.get(ready[0])
    finally:
        if started:
            ray.shutdown()
