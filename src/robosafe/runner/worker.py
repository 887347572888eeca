"""One episode, as a worker runs it: :func:`run_job` takes a :class:`CellJob` (the run config, the
task text, the cell) and hands back a :class:`CellResult` (the outcome row, the trace, actions and
frames as bytes, the log lines). A worker never touches the run directory: the driver writes
everything it gets back (docs/design.md, Runner backends: no shared filesystem is assumed, so a
cell on another machine must not write to that machine's disk). A crashing episode gets a row
with its ``error_type``. Every backend (:mod:`robosafe.runner.local`,
:mod:`robosafe.runner.cluster`) imports this module and nothing else of the runner's."""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from robosafe.errors import RobosafeError
from robosafe.redact import redact_url
from robosafe.runner.plan import Cell, RunPlan
from robosafe.stats.outcomes import OutcomeRow, score_columns

# A worker never touches the run directory: it gets everything it needs in a CellJob and hands
# every artifact back in a CellResult, which the driver writes (DESIGN.md, Runner backends: no
# shared filesystem is assumed, so a cell on another machine must not write to that machine's
# disk).
_ENVS: dict[tuple, Any] = {}


_POLICIES: dict[tuple, Any] = {}


_TASK_FILES: dict[tuple[str, str], Path] = {}


#: frame files travel in pieces of this size (the Ray backend puts each in the object store, so
#: neither side holds a whole camera video in memory)
CHUNK_BYTES = 4 << 20


@dataclass(frozen=True)
class CellJob:
    """One cell and everything a worker needs to run it: the run's plan, the text of the
    cell's task file, and the key that tells the worker's cached environments apart."""

    run_key: str
    plan: RunPlan
    policy_name: str
    task_text: str
    cell: Cell
    # the policy spec as the user gave it (run.json holds it with credentials masked); it
    # travels in memory only, never into a file
    policy_spec: str | None = field(default=None, repr=False)


@dataclass
class CellResult:
    """What a worker hands back: the outcome row and the files of the cell, as bytes.
    ``frames`` maps a file name under ``frames/<cell>/`` to its chunks (bytes, or whatever the
    backend's ``put`` made of them)."""

    cell: Cell
    row: OutcomeRow
    trace: bytes | None = None
    actions: bytes | None = None
    frames: dict[str, list[Any]] = field(default_factory=dict)
    node: str = ""
    # robosafe's log lines of the episode (level, message), naming the run's task files: the
    # driver prints each once per run
    lines: list[tuple[int, str]] = field(default_factory=list)


SCRATCH_PREFIX = "robosafe-worker-"


def _scratch() -> Path:
    """This worker process's own temporary folder (task files, traces and frames in the making),
    named with the process id: the folders of processes that died without cleaning up (kill -9,
    a Ray worker stopped with its cluster) are removed by the next one (``sweep_scratch``)."""
    import atexit
    import tempfile

    if "dir" not in _SCRATCH:
        sweep_scratch()
        d = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
        atexit.register(remove_scratch)
        _SCRATCH["dir"] = d
    return _SCRATCH["dir"]


_SCRATCH: dict[str, Path] = {}


def remove_scratch() -> None:
    d = _SCRATCH.get("dir")
    if d is not None:
        shutil.rmtree(d, ignore_errors=True)
        _SCRATCH.pop("dir", None)


def release_scratch() -> None:
    """Remove this process's scratch folder now (the task files in it too: the next cell
    writes them again). For a process that outlives its cells and is stopped without its exit
    handlers, as Ray stops its workers."""
    remove_scratch()
    _TASK_FILES.clear()


def sweep_scratch() -> int:
    """Remove the scratch folders of robosafe processes that no longer exist (on this machine's
    temporary folder); the number removed. A live process's folder, or one whose id now names
    another live process, is left alone."""
    import tempfile

    removed = 0
    for d in Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*-*"):
        pid = d.name[len(SCRATCH_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(d, ignore_errors=True)
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def _task_file(task_id: str, text: str) -> Path:
    """The task text as a file named like the run's copy (worker-local)."""
    key = (task_id, hashlib.sha256(text.encode()).hexdigest())
    if key not in _TASK_FILES:
        d = _scratch() / "tasks" / key[1][:16]
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"{task_id}.bddl"
        path.write_text(text, encoding="utf-8")
        _TASK_FILES[key] = path
    return _TASK_FILES[key]


def cell_env(job: CellJob, role: str = "episode") -> Any:
    """The cell's env; ``role="shadow"`` is a second one the shield predicts in."""
    cell, plan = job.cell, job.plan
    key = (job.run_key, cell.task_id, cell.language_level, cell.visual_level, role)
    if key in _ENVS:
        return _ENVS[key]
    from robosafe.hosts.registry import host_spec, make_env

    spec = host_spec(plan.host)
    options = spec.select({
        "task_id": cell.task_id, "suite": plan.suite, "benchmark": plan.suite or spec.benchmark,
        "images": plan.recording.images, "image_size": plan.recording.image_size,
        "horizon": plan.horizon, "visual_level": cell.visual_level,
        "language_level": cell.language_level})
    task = (_task_file(cell.task_id, job.task_text) if spec.task == "file" else cell.task_id)
    env = make_env(plan.host, task, **options, **plan.options.env_keywords(cell.task_id))
    _ENVS[key] = env
    return env


def cell_policy(cfg: RunPlan, spec: str | None) -> Any:
    """The policy of ``spec`` (the driver's spec, with any credentials), else of run.json."""
    from robosafe.policies.base import make_policy

    spec = spec or cfg.policy
    key = (spec, cfg.host, cfg.obs_adapter)
    if key not in _POLICIES:
        _POLICIES[key] = make_policy(spec, host=cfg.host, adapter=cfg.obs_adapter)
    return _POLICIES[key]


def drop_env(env: Any) -> None:
    """Close ``env`` and forget it (the driver's preflight scene is not an episode's)."""
    for key, cached in list(_ENVS.items()):
        if cached is env:
            del _ENVS[key]
    env.close()


def close_policies() -> None:
    """Close this process's policies (remote connections) once its episodes are done."""
    for policy in _POLICIES.values():
        close = getattr(policy, "close", None)
        if close is not None:
            close()
    _POLICIES.clear()


class _Held(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[tuple[int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.levelno, redact_url(record.getMessage())))


@contextlib.contextmanager
def _held_lines():
    """robosafe's log records of one episode, held instead of printed by the worker: a warning
    then names the run's copy of a task file (not the worker's temporary one) and is said once
    per run by the driver, however many workers meet it."""
    logger = logging.getLogger("robosafe")
    held = _Held()
    saved = logger.handlers[:], logger.propagate, logger.level
    logger.handlers, logger.propagate = [held], False
    logger.setLevel(logging.INFO)
    try:
        yield held.lines
    finally:
        logger.handlers, logger.propagate = saved[0], saved[1]
        logger.setLevel(saved[2])


def run_job(job: CellJob, put: Callable[[bytes], Any] | None = None) -> CellResult:
    """Run, record and score one episode; its outcome row and files, written nowhere.
    ``put`` turns each chunk of a frame file into what the backend ships (default: bytes)."""
    with _held_lines() as lines:
        result = _run_episode(job, put)
    result.lines = [(level, _run_copy_names(job, text)) for level, text in lines]
    return result


def _run_episode(job: CellJob, put: Callable[[bytes], Any] | None) -> CellResult:
    from robosafe.policies.base import play
    from robosafe.safety.registry import load_registry
    from robosafe.safety.score import score_episodes
    from robosafe.trace.io import write_episodes

    cell = job.cell
    cfg = job.plan
    suite = cfg.suite or "tasks"
    start = time.perf_counter()
    base = {"suite": suite, "task_id": cell.task_id, "task_name": cell.task_id,
            "episode_idx": cell.episode_idx, "instance_id": cell.instance_id,
            "policy_name": job.policy_name, "checkpoint_ref": cfg.checkpoint_ref,
            "seed": cell.seed, "language_level": cell.language_level,
            "visual_level": cell.visual_level}
    result = CellResult(cell, OutcomeRow(**base))
    env = None
    work = _scratch() / "cells" / cell.name
    shutil.rmtree(work, ignore_errors=True)
    try:
        env = cell_env(job)
        base["task_name"] = env.task_info().task_name
        policy = cell_policy(cfg, job.policy_spec)
        if cfg.shield.mode != "off":
            from robosafe.runner.shield import Shield

            shadow = cell_env(job, "shadow") if cfg.shield.predictor == "sim" else None
            policy = Shield(policy, env, shadow, cfg.shield)
        jitter = ({"options": {"placement_jitter": (*cfg.placement_jitter, cell.episode_idx)}}
                  if cfg.placement_jitter else {})
        obs, info = env.reset(seed=cell.seed, **jitter)
        frames = _frames(work / "frames", cfg, env)
        info, actions = play(env, policy, obs, on_obs=frames)
        # a policy that stopped on its own says why (the LIBERO scripted policy's "gave up")
        note = getattr(policy, "note", None)
        if frames is not None:
            frames.finish()
            result.frames = {p.name: _chunks(p, put) for p in sorted(frames.final.iterdir())}
        buf = io.BytesIO()
        np.save(buf, np.asarray(actions, dtype=float).reshape(len(actions), -1),
                allow_pickle=False)
        result.actions = buf.getvalue()
        meta = {"episode_idx": cell.episode_idx, "checkpoint_ref": cfg.checkpoint_ref,
                **({"policy_note": note} if note else {})}
        if cfg.shield.mode != "off":
            meta["shield"] = policy.finish()
            base["interventions"] = len(policy.record.interventions)
            base["shield_warnings"] = len(policy.record.warnings)
        ep = env.episode(episode_id=cell.name, policy=job.policy_name,
                         instance_id=cell.instance_id, meta=meta)
        work.mkdir(parents=True, exist_ok=True)
        write_episodes(work / "trace.jsonl", [ep])
        result.trace = (work / "trace.jsonl").read_bytes()
        (score,) = score_episodes([ep])
        cost = ep.meta.get("cumulative_cost")  # hosts without CBDDL costs have none
        if "vla_arena" in ep.meta:  # VLA-Arena's reported cost (its HazardAvoidance scale)
            cost = ep.meta["vla_arena"]["cost"]
        result.row = replace(score_columns(score, load_registry()), **base,
                             cumulative_cost=None if cost is None else float(cost),
                             instruction=info["instruction"],
                             # env steps = actions taken; the trace has one more row (the
                             # reset state)
                             num_env_steps=len(actions), note=note or None)
    except Exception as exc:  # noqa: BLE001 - a crashing episode is recorded, the run goes on
        detail = _run_copy_names(
            job, str(exc) if isinstance(exc, RobosafeError) else traceback.format_exc(limit=3))
        # a client library's message can quote the URL it connected to, credentials included
        steps = env.steps if env is not None else 0
        result = CellResult(cell, OutcomeRow(
            **base, success=False, num_env_steps=steps, error_type=type(exc).__name__,
            error=redact_url(detail.strip().splitlines()[-1])))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result.row = replace(result.row, wall_s=round(time.perf_counter() - start, 3))
    return result


def _run_copy_names(job: CellJob, text: str) -> str:
    """``text`` with this worker's temporary task files named as the run's own copies
    (RUN_DIR/tasks/ID.bddl, the same text), which the user can open; the temporary folder is
    gone once the worker is."""
    for (task_id, _), path in _TASK_FILES.items():
        text = text.replace(str(path), str(Path(job.run_key) / "tasks" / f"{task_id}.bddl"))
    return text


def _chunks(path: Path, put: Callable[[bytes], Any] | None) -> list[Any]:
    out = []
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK_BYTES):
            out.append(put(chunk) if put else chunk)
    return out


def _frames(where: Path, cfg: RunPlan, env):
    if not cfg.recording.frames:
        return None
    from robosafe.runner.frames import FrameRecorder

    cams = env.cameras if env.render else ()
    return FrameRecorder(where, cams, round(env.control_freq))
