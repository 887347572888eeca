"""Small hand-built episodes whose signals can be worked out by hand, and small LeRobot
datasets (robosafe's own and another tool's) built from them."""

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robosafe.formats.lerobot import DatasetWriter
from robosafe.formats.traces import FORMAT, TRACE_COLUMN, Layout, trace_header
from robosafe.runner.rundir import Cell, create_run
from robosafe.safety.registry import load_registry
from robosafe.safety.score import score_episodes
from robosafe.stats.outcomes import outcome_row
from robosafe.trace.episode import Episode
from robosafe.trace.io import write_episodes
from robosafe.trace.synthetic import PolicyProfile, synthesize_episode


def make_episode(n=5, *, contacts=None, body_pos=None, quat=None, grip=None, eef=None,
                 torque=None, success=True, benchmark="libero-spatial", task_id="task_0",
                 roles=None, target="bowl", dt=0.1, episode_id="ep", **extra):
    """contacts: list (per step) of (a, b, force) tuples; body_pos: {name: (T,3)}."""
    roles = roles or {"link7": "robot", "hand": "robot", "bowl": "target",
                      "plate": "bystander", "table": "furniture"}
    names = tuple(body_pos) if body_pos else ()
    kw = {}
    if contacts is not None:
        cnames = sorted({x for step in contacts for c in step for x in c[:2]} | set(roles))
        flat = [c for step in contacts for c in step]
        kw.update(contact_names=tuple(cnames),
                  contact_ptr=np.concatenate([[0], np.cumsum([len(s) for s in contacts])]),
                  contact_a=np.array([cnames.index(c[0]) for c in flat], dtype=np.int32),
                  contact_b=np.array([cnames.index(c[1]) for c in flat], dtype=np.int32),
                  contact_force_n=np.array([c[2] for c in flat], dtype=float))
    return Episode(
        episode_id=episode_id, benchmark=benchmark, task_id=task_id, success=success, dt=dt,
        target_object=target, body_roles=roles, t=np.arange(n),
        eef_pos_m=None if eef is None else np.asarray(eef, float),
        body_names=names,
        body_pos_m=None if not body_pos else np.stack([np.asarray(body_pos[k], float)
                                                       for k in names], axis=1),
        quat_names=(target,) if quat is not None else (),
        body_quat_wxyz=None if quat is None else np.asarray(quat, float)[:, None],
        joint_torque_nm=None if torque is None else np.asarray(torque, float),
        gripper_contact=None if grip is None else np.asarray(grip, bool), **kw, **extra)


TASK_EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "src" / "robosafe" / "tasks"
                        / "examples").glob("*.bddl"))
"""The CBDDL example tasks shipped in the package."""


def two_episodes():
    n = 4
    a = make_episode(
        n, episode_id="a", contacts=[[], [("link7", "table", 50.0)],
                                     [("link7", "table", 0.0), ("bowl", "table", 3.0)], []],
        body_pos={"bowl": np.full((n, 3), 0.5), "plate": np.full((n, 3), 0.7)},
        quat=np.tile([1.0, 0, 0, 0], (n, 1)), grip=[0, 1, 1, 0], eef=np.full((n, 3), 0.2),
        torque=np.ones((n, 7)))
    b = make_episode(n, episode_id="b", body_pos={"bowl": np.full((n, 3), 0.4)},
                     eef=np.full((n, 3), 0.3), contacts=[[], [], [], []])
    return a, b


def write_robosafe(root, episodes, *, next_success=None, extra=None, sidecar=None):
    """robosafe's own dataset of ``episodes`` (fps 10, one task "task"). ``next_success`` (one
    bool per episode) adds LeRobot's ``next.success`` column, set on the final frame; ``extra``
    (one dict per episode) adds ``meta/episodes`` columns; ``sidecar`` is merged into
    ``meta/robosafe.json``."""
    lay = Layout.of(list(episodes))
    feats = lay.features()
    if next_success is not None:
        feats["next.success"] = {"dtype": "bool", "shape": [1], "names": None}
    w = DatasetWriter(root, fps=10, features=feats)
    for k, ep in enumerate(episodes):
        frames, _ = lay.frames(ep)
        if next_success is not None:
            frames["next.success"] = np.arange(ep.n_steps) == ep.n_steps - 1 if next_success[k] \
                else np.zeros(ep.n_steps, bool)
        w.add_episode(frames, "task", extra={TRACE_COLUMN: trace_header(ep),
                                             **(extra[k] if extra else {})})
    w.close({"format": FORMAT, **(sidecar or {})})
    return lay


LIBERO_TASK = "pick up the black bowl between the plate and the ramekin and place it on the plate"


def write_libero_style(root: Path, n_eps: int = 2, length: int = 12,
                       success: list[bool] | None = None) -> None:
    """A LIBERO LeRobot conversion as the common ones look: 8-d state, 7-d action, fps 10,
    written here with pyarrow (no robosafe code)."""
    f32 = pa.float32()
    feats = {
        "observation.state": {"dtype": "float32", "shape": [8], "names": ["state"]},
        "action": {"dtype": "float32", "shape": [7], "names": ["actions"]},
        "timestamp": {"dtype": "float32", "shape": [1], "names": None},
        "frame_index": {"dtype": "int64", "shape": [1], "names": None},
        "episode_index": {"dtype": "int64", "shape": [1], "names": None},
        "index": {"dtype": "int64", "shape": [1], "names": None},
        "task_index": {"dtype": "int64", "shape": [1], "names": None}}
    (root / "meta/episodes/chunk-000").mkdir(parents=True)
    (root / "data/chunk-000").mkdir(parents=True)
    info = {"codebase_version": "v3.0", "robot_type": "panda", "total_episodes": n_eps,
            "total_frames": n_eps * length, "total_tasks": 1, "chunks_size": 1000, "fps": 10,
            "splits": {"train": f"0:{n_eps}"},
            "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
            "video_path": None, "features": feats}
    (root / "meta/info.json").write_text(json.dumps(info))
    pq.write_table(pa.table({"task_index": [0], "task": [LIBERO_TASK]}),
                   root / "meta/tasks.parquet")
    state = np.zeros((n_eps * length, 8), np.float32)
    state[:, :3] = [0.1, 0.2, 1.0]  # the eef holds still
    state[:, 6:] = [0.04, -0.04]
    cols = {
        "observation.state": pa.FixedSizeListArray.from_arrays(pa.array(state.ravel(), f32), 8),
        "action": pa.FixedSizeListArray.from_arrays(
            pa.array(np.zeros(n_eps * length * 7, np.float32), f32), 7),
        "timestamp": pa.array(np.tile(np.arange(length) / 10, n_eps), f32),
        "frame_index": pa.array(np.tile(np.arange(length), n_eps)),
        "episode_index": pa.array(np.repeat(np.arange(n_eps), length)),
        "index": pa.array(np.arange(n_eps * length)),
        "task_index": pa.array(np.zeros(n_eps * length, np.int64))}
    if success is not None:  # lerobot eval rollouts mark success on the frames
        feats["next.success"] = {"dtype": "bool", "shape": [1], "names": None}
        flags = np.zeros((n_eps, length), bool)
        flags[:, -1] = success
        cols["next.success"] = pa.array(flags.ravel())
        (root / "meta/info.json").write_text(json.dumps(info))
    pq.write_table(pa.table(cols), root / "data/chunk-000/file-000.parquet")
    pq.write_table(pa.table({
        "episode_index": list(range(n_eps)), "tasks": [[LIBERO_TASK]] * n_eps,
        "length": [length] * n_eps, "data/chunk_index": [0] * n_eps,
        "data/file_index": [0] * n_eps,
        "dataset_from_index": [i * length for i in range(n_eps)],
        "dataset_to_index": [(i + 1) * length for i in range(n_eps)]}),
        root / "meta/episodes/chunk-000/file-000.parquet")


def synthetic_episodes(n, policy="p", seed0=0):
    """n synthesized libero-goal task_0 episodes of 40 steps that all succeed, seeds seed0..."""
    prof = PolicyProfile(policy, 1.0, {})
    return [synthesize_episode(np.random.default_rng(seed0 + i), benchmark="libero-goal",
                               task_id="task_0", episode_id=f"ep{i}", profile=prof,
                               n_steps=40, seed=seed0 + i) for i in range(n)]


def make_run(path, n=5, crashed=(3,), policy="p"):
    """A run directory as `robosafe run` writes it: n cells, the ``crashed`` ones without a
    trace, the others with their trace (instance ids set) and the 7-d actions taken."""
    reg = load_registry()
    run_dir = create_run(path, {"policy": policy, "policy_name": policy, "suite": "libero-goal",
                                "tasks": ["task_0"], "seeds": list(range(n))}, {})
    for i, ep in enumerate(synthetic_episodes(n, policy=policy)):
        cell = Cell("task_0", i, i)
        base = {"suite": "libero-goal", "task_id": "task_0", "episode_idx": i, "seed": i,
                "instance_id": cell.instance_id, "policy_name": policy}
        if i in crashed:
            row = {**base, "success": 0, "error_type": "RuntimeError", "num_env_steps": 3}
        else:
            ep.episode_id, ep.instance_id = cell.name, cell.instance_id
            write_episodes(run_dir.trace_path(cell), [ep])
            np.save(run_dir.actions_path(cell), np.zeros((ep.n_steps - 1, 7)))
            (s,) = score_episodes([ep])
            row = {**outcome_row(s, reg), **base}
        run_dir.write_outcome(cell, row)
    return run_dir
