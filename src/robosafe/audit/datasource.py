"""Data-source dependence (paper 002 Sec. 6, App. A.3), on robosafe's suites.

Two sets of policies of one architecture (the shortcut probe's, :mod:`robosafe.policies.probe`)
are trained on scripted demonstrations that differ only in where they start:

- **near**: ``per_seed`` demonstrations at every evaluation seed's initial state, each object
  moved by uniform jitter of up to 0.0025 m per axis and 15 degrees of yaw (App. A.3: "small
  object perturbations around the official grid");
- **far**: as many demonstrations at other seeds (fresh placements from the task's regions).

As App. A.3 trains them, by default: "one task-specific ... policy per task", each "a separate
BC run on that task's scripted demonstrations", with "image augmentation ... disabled"
(``per_task=False`` trains one multi-task probe over all tasks, robosafe's former setup;
``augment=True`` keeps probe.yaml's crop / erasing). Every policy is evaluated on its task's
evaluation seeds without jitter, with the final checkpoint (App. A.3: "there is no checkpoint
selection"), and near is compared with far by the paired task-stratified Wald test on the
shared instances (Sec. 4). The distance between training and test is stated: for a training
episode, the largest horizontal displacement of any non-robot body between its first recorded
state and the nearest evaluation episode of the same task (nearest = the evaluation seed that
minimises that largest displacement); each dataset reports the median and the maximum.
A higher score for "near" says the suite's score depends on where the training data came from.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from robosafe.audit.shortcut import RunFn, load_demos, rates, train_probe
from robosafe.errors import RobosafeError

JITTER = (0.0025, 15.0)  # App. A.3: metres per axis, degrees of yaw
FAR_SEED_OFFSET = 100_000  # "far" demonstrations start at seeds from here on
ALL_TASKS = "all"  # the one policy's label when a multi-task probe is trained


def training_config(cfg: dict[str, Any], *, augment: bool) -> dict[str, Any]:
    """The probe configuration of the data-source policies: one (final) checkpoint, App. A.3's
    "no checkpoint selection"; without ``augment`` no shift and no erasing, App. A.3's "image
    augmentation is disabled"."""
    out = {**cfg, "checkpoints": 1}
    if not augment:
        out["augment"] = {**cfg["augment"], "shift_px": 0, "erase_p": 0.0}
    return out


def policy_groups(tasks: list[str], *, per_task: bool) -> dict[str, list[str]]:
    """Policy label -> the tasks it is trained on and evaluated on: one policy per task (App.
    A.3), or one multi-task policy labelled ``all``."""
    return {t: [t] for t in tasks} if per_task else {ALL_TASKS: list(tasks)}


def initial_xy(run_dir: Path) -> dict[tuple[str, int], dict[str, np.ndarray]]:
    """(task, episode index) -> {body: (x, y) at the first recorded step} of a run's traces,
    robot links left out."""
    from robosafe.runner.rundir import Cell, open_run
    from robosafe.trace.io import read_episodes

    run = open_run(run_dir)
    out = {}
    for row in run.outcomes():
        if row.get("error_type"):
            continue
        cell = Cell.of_row(row)
        eps, errors = read_episodes(run.trace_path(cell))
        if errors:
            raise errors[0]
        ep = eps[0]
        if ep.body_pos_m is None:
            continue
        keep = [i for i, b in enumerate(ep.body_names) if ep.body_roles.get(b) != "robot"]
        out[(cell.task_id, cell.episode_idx)] = {ep.body_names[i]: ep.body_pos_m[0, i, :2]
                                                 for i in keep}
    return out


def displacement(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    """The largest horizontal displacement (m) of a body present in both initial states."""
    shared = sorted(set(a) & set(b))
    if not shared:
        raise RobosafeError("two initial states share no body: cannot compare them")
    return float(max(np.hypot(*(a[n] - b[n])) for n in shared))


def train_test_distance(train: dict, test: dict) -> dict[str, Any]:
    """Per training episode, the displacement to the nearest test episode of its task; the
    median and maximum over the dataset (metres)."""
    d = []
    for (task, _), pos in train.items():
        cands = [displacement(pos, q) for (t, _), q in test.items() if t == task]
        if cands:
            d.append(min(cands))
    if not d:
        raise RobosafeError("no training episode has a test episode of its task to compare with")
    return {"median_m": float(np.median(d)), "max_m": float(np.max(d)), "episodes": len(d)}


def datasource_audit(*, tasks: dict[str, str], suite: str | None, seeds: list[int],
                     per_seed: int, out: Path, cfg: dict[str, Any], seed: int, run: RunFn,
                     horizon: int | None = None,
                     demonstrator: str = "scripted-careful",
                     per_task: bool = True, augment: bool = False,
                     on_step: Callable[[int, int, float], None] | None = None,
                     notes: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """Collect near and far demonstrations, train the policies on each (one per task unless
    ``per_task`` is False), evaluate them on ``seeds``; the result document (also
    ``out/data_source.json``)."""
    from robosafe.audit.shortcut import task_demos
    from robosafe.audit.significance import paired_outcome_test
    from robosafe.runner.export import export_run
    from robosafe.runner.request import RunRequest, plan_run
    from robosafe.runner.rundir import atomic_write

    n_demo = len(seeds) * per_seed
    sources = {
        "near": {"seeds": tuple(s for s in seeds for _ in range(per_seed)),
                 "placement_jitter": JITTER},
        "far": {"seeds": tuple(FAR_SEED_OFFSET + k for k in range(n_demo)),
                "placement_jitter": ()},
    }
    cfg = training_config(cfg, augment=augment)
    groups = policy_groups(sorted(tasks), per_task=per_task)
    result: dict[str, Any] = {"diagnostic": "data-source", "suite": suite,
                              "tasks": sorted(tasks), "seeds": seeds, "per_seed": per_seed,
                              "horizon": horizon,
                              "training": "per-task" if per_task else "multi-task",
                              "augmentation": augment,
                              "jitter": {"xy_m": JITTER[0], "yaw_deg": JITTER[1]},
                              "far_seed_offset": FAR_SEED_OFFSET, "policies": {}}
    rows: dict[str, list[dict[str, Any]]] = {}
    starts: dict[str, dict] = {}
    evals: list[Path] = []
    for name, src in sources.items():
        rc = plan_run(RunRequest(policy=demonstrator, tasks=tasks, episodes=n_demo,
                                 seeds=src["seeds"], suite=suite, images=True,
                                 record_frames=True, horizon=horizon,
                                 placement_jitter=src["placement_jitter"]))
        collected = out / f"collect-{name}"
        run(rc, collected, f"collect {name}")
        dataset = out / f"demos-{name}"
        if not (dataset / "meta" / "info.json").is_file():
            export_run(collected, dataset, overwrite=True)
        demos = load_demos(dataset, cfg)
        if demos.dropped:
            notes(f"{name}: {demos.dropped} unsuccessful demonstration(s) left out")
        rows[name] = []
        ckpts: dict[str, str] = {}
        losses: dict[str, list[float]] = {}
        for label, group in groups.items():
            sub = task_demos(demos, label) if per_task else demos
            where = f"{name}/{label}" if per_task else name
            training = train_probe(sub, out / f"train-{where}", cfg=cfg,
                                   steps=int(cfg["steps"]), seed=seed, on_step=on_step)
            ((_, ckpt),) = training.checkpoints
            ev = plan_run(RunRequest(policy=f"probe:{ckpt}", tasks={t: tasks[t] for t in group},
                                     episodes=len(seeds), seeds=tuple(seeds), suite=suite,
                                     images=True, horizon=horizon, policy_name=f"bc-{name}"))
            evals.append(out / f"eval-{where}")
            rows[name] += run(ev, evals[-1], f"bc-{where}")
            ckpts[label], losses[label] = str(ckpt), training.losses
        starts[name] = initial_xy(collected)
        result["policies"][name] = {"demos": demos.episodes, "checkpoints": ckpts,
                                    "loss": losses, **rates(rows[name])}
    test: dict = {}
    for d in evals[:len(groups)]:  # near's evaluation runs: the seeds, without jitter
        test |= initial_xy(d)
    for name in sources:
        result["policies"][name]["train_test_distance"] = train_test_distance(starts[name], test)
    test_result = paired_outcome_test(rows["far"], rows["near"])
    result["paired_test"] = {"a": "far", "b": "near", **test_result.to_dict()}
    result["conclusion"] = conclusion(result)
    atomic_write(out / "data_source.json", json.dumps(result, indent=2, allow_nan=False) + "\n")
    return result


def conclusion(res: dict[str, Any]) -> str:
    near, far = res["policies"]["near"], res["policies"]["far"]
    wald = res["paired_test"]["wald"]
    gap = f"{100 * (near['sr'] - far['sr']):+.0f} points"
    if wald["reject"]:
        return (f"Trained next to the test, the same architecture scores {gap} higher, "
                "significantly "
                "(paired Wald): this suite's score depends on where the training data came "
                "from, so a high score alone is not evidence of generalisation (paper 002, "
                "Sec. 6).")
    return (f"Near minus far: {gap}, not significant (paired Wald): on this evidence the "
            "suite's score does not reward training next to the test.")
