"""Evaluate a policy on tasks: episodes x seeds x perturbation levels.

Each cell (task, episode index -> seed, language level W, visual level V) is one episode. Seeds
are fixed by the run config, so two policies evaluated with the same config see the same
initial states, perturbations and instructions (paired comparisons need that). A worker runs
the episode, writes its trace, scores it and writes its outcome row, each file atomically, so
a killed run loses at most the episodes in flight and ``resume`` runs exactly the cells that
have no outcome. A crashing episode gets a row with its ``error_type`` and the run goes on.

Backends: ``local`` (a process pool; MuJoCo and the renderer live in each worker process,
started with "spawn" because GL contexts do not survive a fork; a worker keeps to the cells of
one scene while there are any, so each scene is built by as few workers as possible) and
``ray`` (the same function as Ray tasks, for clusters; ``pip install robosafe[ray]``).
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import time
import traceback
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field, replace
from importlib.metadata import PackageNotFoundError, version
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from robosafe.budget import MAX_EPISODES, check_count, check_horizon, check_image_size
from robosafe.errors import RobosafeError
from robosafe.log import install_stderr_lines
from robosafe.outputs import DirLock, make_dir
from robosafe.redact import redact_logs, redact_url
from robosafe.runner.rundir import (
    Cell,
    RunDir,
    atomic_write_bytes,
    config_text,
    create_run,
    open_run,
    task_texts,
)

BACKENDS = ("local", "ray")


#: the robosafe host's arm controllers (robosafe.sim.controller.CONTROLLERS, named here so the
#: CLI checks --controller without importing the simulator)
CONTROLLERS = ("compiled", "robosuite")


@dataclass(frozen=True)
class RunConfig:
    """What a run evaluates; stored as run.json (with the task files copied beside it)."""

    policy: str
    tasks: dict[str, str]  # task_id -> task file
    host: str = "robosafe"  # a run host of robosafe.hosts.registry (robosafe, libero)
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
    # robosafe host: "stand-in" (procedural), "libero" or "vla-arena" (what their files cover); the
    # libero host always uses LIBERO's own assets, and run.json says so (__post_init__)
    assets: str = "stand-in"
    # robosafe host: "vla-arena" books costs, episode length and success as VLA-Arena's code
    # does (robosafe.tasks.cost), so cumulative_cost is the number VLA-Arena would report
    cost_mode: str = "robosafe"
    # simulator-in-the-loop shield (robosafe.runner.shield): off, monitor or filter
    shield: str = "off"
    shield_horizon: int = 5
    shield_margin: float = 0.0
    shield_candidates: tuple[str, ...] = ("scale", "lift", "hold", "retreat", "open")
    # what the shield predicts with: "sim" (a shadow env) or "kinematic" (robosafe.runner.predict),
    # and the kinematic one's obstacle margin (m; None: its data file's)
    shield_predictor: str = "sim"
    shield_predictor_margin: float | None = None
    # robosafe host: the arm controller, robosuite's own (Python) or robosafe's compiled one
    # (robosafe.sim.controller: the same torques within 1e-9 per substep, several times faster)
    controller: str = "compiled"  # one of CONTROLLERS
    # cost mode vla-arena: whose episode rules (HazardAvoidance scale, safety threshold) give
    # the reported cost, one of the wheel's evaluators (robosafe.tasks.cost.EVALUATORS);
    # None in robosafe's own mode
    arena_evaluator: str | None = None
    # cost mode vla-arena: task_id -> VLA-Arena's (suite, level), read from the folders of the
    # file given (the run keeps a copy under tasks/, whose path names neither)
    arena_tasks: dict[str, tuple[str | None, int | None]] = field(default_factory=dict)
    checkpoint_ref: str = ""
    policy_name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from robosafe.hosts.registry import host_spec

        self._check_sizes()
        # settings a host decides itself (LIBERO: its own assets and robosuite's controller,
        # whatever --assets / --controller say): run.json records what the episodes used
        for key, value in host_spec(self.host).fixed.items():
            object.__setattr__(self, key, value)
        if self.cost_mode == "vla-arena":
            from robosafe.tasks.cost import arena_suite, evaluator_name

            # an older run.json without the field ran openvla's rules: resume still matches
            object.__setattr__(self, "arena_evaluator", evaluator_name(self.arena_evaluator))
            if not self.arena_tasks:
                object.__setattr__(self, "arena_tasks",
                                   {k: arena_suite(v) for k, v in self.tasks.items()})
        elif self.arena_evaluator is not None:
            raise RobosafeError("an arena evaluator applies to cost mode vla-arena only")

    def _check_sizes(self) -> None:
        """Every size of the run priced before anything is built (robosafe.budget): a run of
        a billion episodes or steps is refused here, not found out by running out of memory."""
        if self.episodes < 1:
            raise RobosafeError(f"episodes must be at least 1, got {self.episodes}")
        check_count("episodes of the run (tasks x levels x -n)",
                    len(self.tasks) * len(self.language_levels) * len(self.visual_levels)
                    * self.episodes, MAX_EPISODES,
                    "each is an outcome row and a trace file, and the run lists them all")
        if self.horizon is not None:
            check_horizon(self.horizon)
        if self.image_size is not None:
            check_image_size(self.image_size, "--image-size")

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
        # run.json from before the controller choice: its episodes ran robosuite's controller
        kw.setdefault("controller", "robosuite")
        for k in ("seeds", "language_levels", "visual_levels", "placement_jitter",
                  "shield_candidates"):
            if k in kw:
                kw[k] = tuple(kw[k])
        if "arena_tasks" in kw:  # JSON lists back to (suite, level)
            kw["arena_tasks"] = {k: tuple(v) for k, v in kw["arena_tasks"].items()}
        return cls(**kw)


def _version() -> str:
    try:
        return version("robosafe")
    except PackageNotFoundError:  # running from a source tree
        return "unknown"


# -- the episode (runs in a worker) -------------------------------------------------------------
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
    """One cell and everything a worker needs to run it: the run config (run.json), the text of
    the cell's task file, and the key that tells the worker's cached environments apart."""

    run_key: str
    config: dict[str, Any]
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
    row: dict[str, Any]
    trace: bytes | None = None
    actions: bytes | None = None
    frames: dict[str, list[Any]] = field(default_factory=dict)
    node: str = ""


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
        atexit.register(_remove_scratch)
        _SCRATCH["dir"] = d
    return _SCRATCH["dir"]


_SCRATCH: dict[str, Path] = {}


def _remove_scratch() -> None:
    d = _SCRATCH.get("dir")
    if d is not None:
        shutil.rmtree(d, ignore_errors=True)
        _SCRATCH.pop("dir", None)


def release_scratch() -> None:
    """Remove this process's scratch folder now (the task files in it too: the next cell
    writes them again). For a process that outlives its cells and is stopped without its exit
    handlers, as Ray stops its workers."""
    _remove_scratch()
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


def _env(job: CellJob, cfg: RunConfig, role: str = "episode"):
    """The cell's env; ``role="shadow"`` is a second one the shield predicts in."""
    cell = job.cell
    key = (job.run_key, cell.task_id, cell.language_level, cell.visual_level, role)
    if key in _ENVS:
        return _ENVS[key]
    from robosafe.hosts.registry import host_spec, make_env

    spec = host_spec(cfg.host)
    options = spec.select({
        "task_id": cell.task_id, "suite": cfg.suite, "benchmark": cfg.suite or spec.benchmark,
        "images": cfg.images, "image_size": cfg.image_size, "horizon": cfg.horizon,
        "visual_level": cell.visual_level, "language_level": cell.language_level,
        "assets": cfg.assets, "cost_mode": cfg.cost_mode, "controller": cfg.controller,
        "arena_evaluator": cfg.arena_evaluator, "arena_task": cfg.arena_tasks.get(cell.task_id)})
    task = (_task_file(cell.task_id, job.task_text) if spec.task == "file" else cell.task_id)
    env = make_env(cfg.host, task, **options)
    _ENVS[key] = env
    return env


def _shield_config(cfg: RunConfig):
    """The run's shield settings (checked with the shield off too: run.json records them)."""
    from robosafe.runner.shield import ShieldConfig

    return ShieldConfig(cfg.shield, cfg.shield_horizon, cfg.shield_margin, cfg.shield_candidates,
                        predictor=cfg.shield_predictor,
                        predictor_margin=cfg.shield_predictor_margin)


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


def run_job(job: CellJob, put: Callable[[bytes], Any] | None = None) -> CellResult:
    """Run, record and score one episode; its outcome row and files, written nowhere.
    ``put`` turns each chunk of a frame file into what the backend ships (default: bytes)."""
    from robosafe.policies.base import play
    from robosafe.safety.registry import load_registry
    from robosafe.safety.score import score_episodes
    from robosafe.stats.outcomes import OutcomeRow, score_columns
    from robosafe.trace.io import write_episodes

    cell = job.cell
    cfg = RunConfig.from_json(job.config)
    suite = cfg.suite or "tasks"
    start = time.perf_counter()
    base = {"suite": suite, "task_id": cell.task_id, "task_name": cell.task_id,
            "episode_idx": cell.episode_idx, "instance_id": cell.instance_id,
            "policy_name": job.policy_name, "checkpoint_ref": cfg.checkpoint_ref,
            "seed": cell.seed, "language_level": cell.language_level,
            "visual_level": cell.visual_level}
    result = CellResult(cell, base)
    env = None
    work = _scratch() / "cells" / cell.name
    shutil.rmtree(work, ignore_errors=True)
    try:
        env = _env(job, cfg)
        base["task_name"] = env.task_info().task_name
        policy = _policy(cfg, job.policy_spec)
        if cfg.shield != "off":
            from robosafe.runner.shield import Shield

            shadow = _env(job, cfg, "shadow") if cfg.shield_predictor == "sim" else None
            policy = Shield(policy, env, shadow, _shield_config(cfg))
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
        if cfg.shield != "off":
            meta["shield"] = policy.finish()
            base["interventions"] = len(meta["shield"]["interventions"])
            base["shield_warnings"] = len(meta["shield"]["warnings"])
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
                             num_env_steps=len(actions), note=note or None).to_json()
    except Exception as exc:  # noqa: BLE001 - a crashing episode is recorded, the run goes on
        detail = _run_copy_names(
            job, str(exc) if isinstance(exc, RobosafeError) else traceback.format_exc(limit=3))
        # a client library's message can quote the URL it connected to, credentials included
        steps = env.steps if env is not None else 0
        result = CellResult(cell, OutcomeRow(
            **base, success=False, num_env_steps=steps, error_type=type(exc).__name__,
            error=redact_url(detail.strip().splitlines()[-1])).to_json())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result.row["wall_s"] = round(time.perf_counter() - start, 3)
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
    run.write_outcome(res.cell, res.row)


def _frames(where: Path, cfg: RunConfig, env):
    if not cfg.record_frames:
        return None
    from robosafe.runner.frames import FrameRecorder

    cams = env.cameras if env.render else ()
    return FrameRecorder(where, cams, round(env.control_freq))


# -- orchestration ------------------------------------------------------------------------------
def check_policy_inputs(cfg: RunConfig) -> None:
    """A learned policy that reads named inputs (``lerobot:DIR``) loads, and every input it
    reads can be made from the host's first observation of the run's first cell: one error
    naming both sides before any episode, rather than the same error in every episode. The
    policy stays cached for this process's episodes; the scene is closed."""
    from robosafe.policies.base import policy_kind

    if policy_kind(cfg.policy) != "lerobot" or not cfg.tasks:
        return
    cell = cfg.cells()[0]
    text = Path(cfg.tasks[cell.task_id]).read_text(encoding="utf-8")
    job = CellJob("preflight", cfg.to_json(), cfg.policy, text, cell, cfg.policy)
    policy = _policy(cfg, cfg.policy)
    env = _env(job, cfg)
    try:
        obs, _ = env.reset(seed=cell.seed)
        policy.check(obs, env.task_info().to_dict())
    finally:
        _ENVS.pop(next(k for k, v in _ENVS.items() if v is env))
        env.close()


def prepare(cfg: RunConfig, out: str | Path, *, resume: bool = False) -> tuple[RunDir, list[Cell]]:
    """Create (or reopen with ``resume``) the run directory; the cells still to run. The
    directory is locked from here until :func:`execute` ends (one writer per run directory)."""
    from robosafe.hosts.registry import host_spec
    from robosafe.runner.shield import check_host, check_tasks

    check_policy_spec(cfg.policy)
    spec = host_spec(cfg.host)
    # checked with the shield off too: run.json records these settings either way
    _shield_config(cfg)
    if cfg.shield != "off" and not resume:
        check_host(cfg.host, cfg.shield_predictor)
        check_tasks(cfg.tasks, cfg.suite or spec.benchmark, cfg.host)
    if cfg.placement_jitter and (not spec.supports("placement_jitter")
                                 or len(cfg.placement_jitter) != 2):
        raise RobosafeError("placement jitter is (xy metres, yaw degrees) and needs robosafe's "
                            "simulator")
    if cfg.obs_adapter is not None:
        from robosafe.policies.remote import check_adapter

        check_adapter(cfg.obs_adapter)
    if cfg.images and cfg.record_frames:
        from robosafe.formats.video import require_video

        require_video()
    out = Path(out)
    if resume:
        open_run(out)  # a clear error before anything is locked or created
    else:
        cfg.seed_list()
        check_task_files(cfg)
        config_text(cfg.to_json())
    check_policy_inputs(cfg)
    lock = DirLock.acquire(make_dir(out), "run directory")
    try:
        if resume:
            run = open_run(out)
            stored = RunConfig.from_json(run.config)
            # compared as run.json writes them: equal settings are never "different" for a
            # formatting reason (a tuple against a list, a NaN an older run.json holds)
            if _identity_text(stored) != _identity_text(cfg):
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


def check_policy_spec(spec: str) -> None:
    """The policy spec checked in the driver, before the run directory exists, as far as that
    costs nothing: its kind, a replay file's actions, a server URL's host and port. Found by
    the workers, each would be a crashed episode of a run that had to be removed first."""
    from urllib.parse import urlsplit

    from robosafe.policies.base import ReplayPolicy, policy_kind

    kind = policy_kind(spec)
    if kind == "replay":
        ReplayPolicy(spec.removeprefix("replay:"))
    elif kind == "lerobot":
        from robosafe.policies.lerobot import read_checkpoint

        read_checkpoint(spec.removeprefix("lerobot:"))
    elif kind == "remote":
        try:
            url = urlsplit(spec)
            ok = bool(url.hostname) and url.port is not None
        except ValueError:  # a port that is not a number in 0..65535
            ok = False
        if not ok:
            raise RobosafeError(f"--policy {redact_url(spec)!r}: expected ws://HOST:PORT or "
                                "wss://HOST:PORT with a port in 1..65535")


def check_task_files(cfg: RunConfig) -> None:
    """Every task file of the run read (and, for a host that runs task files, parsed and
    validated) in the driver, before the run directory exists: an error names the user's
    file, where a worker's would name its own temporary copy and leave a half-made run."""
    from robosafe.hosts.registry import host_spec

    if host_spec(cfg.host).task == "file":
        from robosafe.tasks.parser import parse_file
        from robosafe.tasks.validate import validate_task

        for path in cfg.tasks.values():
            if not Path(path).is_file():
                raise RobosafeError(f"task file not found: {path}")
            errors = validate_task(parse_file(path), str(path))
            if errors:
                raise errors[0]
    task_texts(cfg.tasks)


def _identity_text(cfg: RunConfig) -> str:
    import json

    return json.dumps(cfg.identity(), sort_keys=True, default=str)


def execute(run: RunDir, cells: list[Cell], *, workers: int = 1, backend: str = "local",
            on_result: Callable[[dict[str, Any]], None] | None = None,
            ray_address: str | None = None) -> list[dict[str, Any]]:
    """Run ``cells`` of ``run``; rows in completion order. outcomes.csv is rebuilt at the end.

    Workers return each cell's files and only this process writes them (every backend the
    same way). ``ray_address`` (or ``$RAY_ADDRESS``) names an existing Ray cluster; without
    one the ray backend starts a private one of ``workers`` CPUs.
    """
    if backend not in BACKENDS:
        raise RobosafeError(f"unknown backend {backend!r}; use {' or '.join(BACKENDS)}")
    jobs = [CellJob(str(run.path.resolve()), run.config, run.policy_name,
                    run.task_file(c.task_id).read_text(encoding="utf-8"), c, run.policy_spec)
            for c in cells]
    rows = []

    def store(res: CellResult, get: Callable[[Any], bytes] | None = None) -> None:
        store_result(run, res, get)
        rows.append(res.row)
        if on_result:
            on_result(res.row)

    try:
        if backend == "ray":
            from robosafe.runner.cluster import run_on_ray

            run_on_ray(jobs, max(1, workers), store, address=ray_address)
        else:
            _run_local(jobs, max(1, workers), store)
    finally:
        close_policies()
        try:
            run.write_outcomes_csv()
        finally:
            if run.lock is not None:
                run.lock.release()
                run.lock = None
    return rows


def _run_local(jobs: list[CellJob], workers: int, store: Callable[[CellResult], None]) -> None:
    if workers == 1:
        for job in jobs:
            store(run_job(job))
        return
    queue = _SceneQueue(jobs)
    running: dict[Any, CellJob] = {}
    # spawned workers start with no logging set up: they print robosafe's lines as the CLI does
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn"),
                             initializer=_worker_start) as pool:
        # one cell per worker in flight: the worker that just finished is the one that takes
        # the next cell, which is of the scene it has built where one is left
        while queue and len(running) < workers:
            job = queue.take(None, running.values())
            running[pool.submit(run_job, job)] = job
        try:
            while running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for f in done:
                    finished = running.pop(f)
                    if queue:
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
    _remove_scratch()
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
