"""The shortcut probe (paper 002 Sec. 3, App. A.1), CPU-sized: train a language-free probe on
demonstrations, evaluate its checkpoints with the runner, set its success next to the
demonstrator's on the same seeds.

A task whose score the probe reaches does not test language grounding: the probe is told which
task it faces only by a learned index, so reaching the score shows the scene alone gives the task
away (Sec. 3: "a high score on LIBERO is not, on its own, evidence of general manipulation
capability"). The probe model and its checkpoints are :mod:`robosafe.policies.probe`.

Training is seeded and resumable: the batch at step ``s`` and its augmentation are drawn from
generators seeded by (seed, s), so a run resumed from a saved state continues exactly as the
uninterrupted run would (on one machine; float results of other CPUs may differ). Checkpoints
are safetensors. Ctrl-C finishes the current step, saves the state and stops.
"""

from __future__ import annotations

import hashlib
import json
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from robosafe.errors import RobosafeError
from robosafe.policies.probe import (
    ProbeNet,
    normalise,
    read_checkpoint,
    save_checkpoint,
    to_model_images,
)
from robosafe.stats.intervals import wilson_interval

STATE_FILE = "train_state.safetensors"
SOLVED_RATIO = 0.8  # a task is "solved" when the probe's SR reaches this share of the demonstrator's


@dataclass
class Demos:
    """Training frames of a dataset, ready for the probe (paper 002 App. A.1 inputs)."""

    images: torch.Tensor  # (N, V, 3, S, S) uint8
    state: np.ndarray  # (N, D) float32
    chunks: np.ndarray  # (N, H, A) float32: the next H actions, the last one repeated at the end
    task: np.ndarray  # (N,) int64 index into ``tasks``
    tasks: list[str]
    episodes: int
    seeds: dict[str, list[int]] = field(default_factory=dict)  # task -> demo seeds (robosafe's)
    policy: str | None = None  # the demonstrator, when the dataset says
    dropped: int = 0  # episodes left out (not successful)
    fingerprint: str = ""
    per_task: dict[str, int] = field(default_factory=dict)  # task -> episodes


def task_demos(demos: Demos, task: str) -> Demos:
    """The frames of one task of ``demos``, as a dataset of its own (a per-task policy, paper
    002 App. A.3: "one task-specific ... policy per task")."""
    if task not in demos.tasks:
        raise RobosafeError(f"no successful demonstration of task {task} to train its policy on")
    keep = demos.task == demos.tasks.index(task)
    seeds = {task: demos.seeds[task]} if task in demos.seeds else {}
    return Demos(demos.images[torch.as_tensor(keep)], demos.state[keep], demos.chunks[keep],
                 np.zeros(int(keep.sum()), np.int64), [task], demos.per_task[task], seeds,
                 demos.policy, 0, f"{demos.fingerprint}:{task}", {task: demos.per_task[task]})


def _fingerprint(root: Path) -> str:
    h = hashlib.sha256()
    for rel in ("meta/info.json", *sorted(str(p.relative_to(root)) for p in
                                          (root / "meta" / "episodes").glob("*/*.parquet"))):
        h.update((root / rel).read_bytes())
    return h.hexdigest()[:16]


def _task_key(row: dict[str, Any]) -> tuple[str, int | None]:
    """(task key, seed) of a dataset episode: robosafe's cell when recorded, else the task
    string (LIBERO's conversions: one embedding per instruction, as the reference does)."""
    from robosafe.formats.traces import REPLAY_COLUMN

    cell = row.get(REPLAY_COLUMN)
    if cell:
        c = json.loads(cell)
        return str(c["task_id"]), int(c["seed"])
    tasks = row.get("tasks") or [""]
    return str(tasks[0]), None


def action_chunks(actions: np.ndarray, chunk: int) -> np.ndarray:
    """(L, A) -> (L, chunk, A): row t holds actions t..t+chunk-1, the last action repeated past
    the end (the reference's terminal padding, so the probe learns to finish)."""
    idx = np.minimum(np.arange(len(actions))[:, None] + np.arange(chunk)[None], len(actions) - 1)
    return actions[idx]


def load_demos(path: str | Path, cfg: dict[str, Any], *,
               on_episode: Callable[[int, int], None] | None = None) -> Demos:
    """Every successful episode of a LeRobot v3.0 dataset as probe training frames."""
    from robosafe.formats.lerobot import Dataset, DatasetError

    ds = Dataset(path)
    keys = [f"observation.images.{v}" for v in cfg["views"]]
    missing = [k for k in keys if k not in ds.video_keys]
    if missing:
        raise DatasetError(f"{ds.root}: no feature {', '.join(missing)} (it has "
                           f"{', '.join(ds.video_keys) or 'no cameras'}); collect with --images")
    for need in ("observation.state", "action"):
        if need not in ds.features:
            raise DatasetError(f"{ds.root}: no feature {need!r}")
    records = [ds.record(r["episode_index"]) for r in ds.episodes]
    rows = [r for r in records if r.get("robosafe/success", True) is not False]
    if not rows:
        raise DatasetError(f"{ds.root}: no successful episode to learn from")
    names: list[str] = []
    seeds: dict[str, list[int]] = {}
    per_task: dict[str, int] = {}
    images, state, chunks, task = [], [], [], []
    for k, row in enumerate(rows):
        key, seed = _task_key(row)
        if key not in names:
            names.append(key)
        per_task[key] = per_task.get(key, 0) + 1
        if seed is not None:
            seeds.setdefault(key, []).append(seed)
        i = row["episode_index"]
        f = ds.frames(i)
        views = [ds.video(key_, i) for key_ in keys]
        if any(len(v) != len(f["action"]) for v in views):
            raise DatasetError(f"{ds.root}: episode {i}: {[len(v) for v in views]} video "
                               f"frames for {len(f['action'])} rows")
        images.append(to_model_images(np.stack(views, axis=1), cfg["image_size"]))
        state.append(np.asarray(f["observation.state"], np.float32))
        chunks.append(action_chunks(np.asarray(f["action"], np.float32), cfg["chunk"]))
        task.append(np.full(len(f["action"]), names.index(key), np.int64))
        if on_episode:
            on_episode(k + 1, len(rows))
    side = ds.robosafe or {}
    return Demos(torch.cat(images), np.concatenate(state), np.concatenate(chunks),
                 np.concatenate(task), names, len(rows), seeds, side.get("policy"),
                 len(ds.episodes) - len(rows), _fingerprint(ds.root), per_task)


def _stats(x: np.ndarray, floor: float) -> tuple[list[float], list[float]]:
    flat = x.reshape(-1, x.shape[-1]).astype(np.float64)
    return flat.mean(0).tolist(), np.maximum(flat.std(0), floor).tolist()


def augment(images: torch.Tensor, gen: torch.Generator, cfg: dict[str, Any]) -> torch.Tensor:
    """(B, V, 3, S, S) uint8 -> float in [0, 1] with a random shift (edge padding, crop back) and
    random erasing of one rectangle per image (paper 002 App. A.1's crop / erasing, in torch:
    torchvision has no CPU build here)."""
    b, v, c, s, _ = images.shape
    x = images.reshape(b * v, c, s, s).float() / 255.0
    a = cfg["augment"]
    pad = int(a["shift_px"])
    if pad:
        x = F.pad(x, (pad,) * 4, mode="replicate")
        off = torch.randint(0, 2 * pad + 1, (b * v, 2), generator=gen)
        rows = (off[:, 0, None] + torch.arange(s))[:, None, :, None].expand(-1, c, -1, s + 2 * pad)
        x = x.gather(2, rows)
        cols = (off[:, 1, None] + torch.arange(s))[:, None, None, :].expand(-1, c, s, -1)
        x = x.gather(3, cols)
    if a["erase_p"] > 0:
        hit = torch.rand(b * v, generator=gen) < a["erase_p"]
        side = (torch.rand(b * v, 2, generator=gen) * a["erase_max"] * s).long() + 1
        start = (torch.rand(b * v, 2, generator=gen) * (s - side + 1)).long()
        ar = torch.arange(s)
        in_y = (ar[None] >= start[:, :1]) & (ar[None] < start[:, :1] + side[:, :1])
        in_x = (ar[None] >= start[:, 1:]) & (ar[None] < start[:, 1:] + side[:, 1:])
        mask = (in_y[:, :, None] & in_x[:, None, :]) & hit[:, None, None]
        x = x.masked_fill(mask[:, None], 0.5)
    return x.reshape(b, v, c, s, s)


def checkpoint_steps(steps: int, n: int) -> list[int]:
    """``n`` evenly spaced checkpoint steps ending at ``steps`` (the final checkpoint)."""
    return sorted({max(1, round(k * steps / n)) for k in range(1, n + 1)})


@dataclass
class Training:
    checkpoints: list[tuple[int, Path]]
    resumed_from: int
    losses: list[float]  # mean loss per ``save_every`` block of steps


class _DeferInterrupt:
    """Ctrl-C during a training step is held until the step is done, so the saved state is
    always a whole step (signals can only be caught in the main thread)."""

    def __enter__(self):
        self.hit = False
        self.old = None
        if threading.current_thread() is threading.main_thread():
            self.old = signal.signal(signal.SIGINT, self._on)
        return self

    def _on(self, *_):
        self.hit = True

    def __exit__(self, *exc):
        if self.old is not None:
            signal.signal(signal.SIGINT, self.old)


def train_probe(demos: Demos, out: str | Path, *, cfg: dict[str, Any], steps: int, seed: int,
                on_step: Callable[[int, int, float], None] | None = None) -> Training:
    """Train (or resume training) the probe into ``out``: ``train_state.safetensors`` every
    ``save_every`` steps and at Ctrl-C, ``checkpoints/step-NNNNNN.safetensors`` at the
    checkpoint steps. A saved state of another dataset, seed or configuration is refused."""
    out = Path(out)
    torch.manual_seed(seed)
    floor = cfg["std_floor"]
    s_mean, s_std = _stats(demos.state, floor)
    a_mean, a_std = _stats(demos.chunks, floor)
    meta = {"config": cfg, "tasks": demos.tasks, "state_dim": int(demos.state.shape[1]),
            "action_dim": int(demos.chunks.shape[2]), "state_mean": s_mean,
            "state_std": s_std, "action_mean": a_mean, "action_std": a_std,
            "seed": seed, "steps": steps, "dataset": demos.fingerprint}
    net = ProbeNet(cfg, len(demos.tasks), meta["state_dim"], meta["action_dim"])
    opt = torch.optim.AdamW(net.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    start, losses = _resume(out / STATE_FILE, net, opt, meta)
    state_n = normalise(demos.state, s_mean, s_std)
    chunks_n = normalise(demos.chunks, a_mean, a_std)
    task = torch.as_tensor(demos.task)
    marks = checkpoint_steps(steps, cfg["checkpoints"])
    ckpts = [(s, out / "checkpoints" / f"step-{s:06d}.safetensors") for s in marks]
    block: list[float] = []
    net.train()
    with _DeferInterrupt() as stop:
        for step in range(start, steps):
            rng = np.random.default_rng([seed, step])
            idx = torch.as_tensor(rng.integers(0, len(task), cfg["batch"]))
            gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
            pred = net(augment(demos.images[idx], gen, cfg), state_n[idx], task[idx])
            loss = F.mse_loss(pred, chunks_n[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            done = step + 1
            block.append(loss.item())
            if on_step:
                on_step(done, steps, block[-1])
            if done in marks:
                save_checkpoint(dict(ckpts)[done], net, {**meta, "step": done})
            if done % cfg["save_every"] == 0 or done == steps or stop.hit:
                losses.append(float(np.mean(block)))
                block = []
                _save_state(out / STATE_FILE, net, opt, {**meta, "step": done, "losses": losses})
            if stop.hit:
                raise KeyboardInterrupt
    missing = [str(p) for _, p in ckpts if not p.is_file()]
    if missing:
        raise RobosafeError(f"{out}: checkpoint(s) missing after training: {', '.join(missing)}")
    return Training(ckpts, start, losses)


_IDENTITY = ("config", "tasks", "seed", "steps", "dataset", "state_dim", "action_dim")


def _save_state(path: Path, net, opt, meta: dict[str, Any]) -> None:
    sd = opt.state_dict()
    extra = {f"opt.{i}.{k}": torch.as_tensor(v) for i, st in sd["state"].items()
             for k, v in st.items()}
    save_checkpoint(path, net, {**meta, "param_groups": sd["param_groups"]}, extra)


def _resume(path: Path, net, opt, meta: dict[str, Any]) -> tuple[int, list[float]]:
    if not path.is_file():
        return 0, []
    saved, tensors = read_checkpoint(path)
    differs = [k for k in _IDENTITY if json.dumps(saved.get(k)) != json.dumps(meta[k])]
    if differs:
        raise RobosafeError(f"{path}: a training state of another {', '.join(differs)}; "
                            "give a new --out or remove it")
    net.load_state_dict({k.removeprefix("model."): v for k, v in tensors.items()
                         if k.startswith("model.")})
    state: dict[int, dict[str, Any]] = {}
    for k, v in tensors.items():
        if k.startswith("opt."):
            _, i, name = k.split(".", 2)
            state.setdefault(int(i), {})[name] = v
    opt.load_state_dict({"state": state, "param_groups": saved["param_groups"]})
    return int(saved["step"]), list(saved.get("losses", []))


# -- evaluation summaries ----------------------------------------------------------------------
def rates(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-task and overall SR with 95 % Wilson intervals (crashed episodes count as failures
    and are reported)."""
    out: dict[str, Any] = {"tasks": {}}
    by: dict[str, list[int]] = {}
    for r in rows:
        by.setdefault(str(r["task_id"]), []).append(int(r.get("success") or 0)
                                                     if not r.get("error_type") else 0)
    for t, ys in sorted(by.items()):
        out["tasks"][t] = _rate(sum(ys), len(ys))
    k = sum(sum(ys) for ys in by.values())
    n = sum(len(ys) for ys in by.values())
    out |= _rate(k, n)
    out["crashed"] = sum(1 for r in rows if r.get("error_type"))
    return out


def _rate(k: int, n: int) -> dict[str, Any]:
    ci = wilson_interval(k, n)
    return {"successes": k, "episodes": n, "sr": k / n if n else None, "ci": [ci.low, ci.high]}


def solved_tasks(probe: dict[str, Any], demonstrator: dict[str, Any],
                 ratio: float = SOLVED_RATIO) -> list[str]:
    """Tasks where the probe's SR is > 0 and at least ``ratio`` of the demonstrator's."""
    out = []
    for t, p in probe["tasks"].items():
        d = demonstrator["tasks"].get(t)
        if d and p["sr"] and p["sr"] >= ratio * (d["sr"] or 0.0):
            out.append(t)
    return out


def conclusion(solved: list[str], tasks: list[str]) -> str:
    """The paper's reading of the probe, plainly."""
    if not solved:
        return ("The probe solves none of these tasks: on this evidence their scores are not "
                "reachable without the instruction's content.")
    return (f"The probe, which never reads the instruction, solves {len(solved)} of "
            f"{len(tasks)} task(s) ({', '.join(solved)}): on those, a success does not test "
            "language grounding; the scene alone gives the task away (paper 002, Sec. 3).")


# -- the audit --------------------------------------------------------------------------------
RunFn = Callable[[Any, Path, str], list[dict[str, Any]]]  # (RunPlan, run dir, label) -> rows


def _demonstrator(policy: str | None) -> str | None:
    """The dataset's demonstrator as a policy spec the runner can run again, if it is one."""
    from robosafe.policies.base import policy_kind

    try:
        return policy if policy and policy_kind(policy) == "scripted" else None
    except RobosafeError:
        return None


def seed_overlap(demos: Demos, tasks: list[str], seeds: list[int]) -> dict[str, list[int]]:
    """Evaluation seeds a task's demonstrations were collected on (training on the test)."""
    out = {}
    for t in tasks:
        both = sorted(set(demos.seeds.get(t, ())) & set(seeds))
        if both:
            out[t] = both
    return out


def shortcut_audit(*, tasks: dict[str, str], suite: str | None, demos: Demos, out: Path,
                   cfg: dict[str, Any], seed: int, seeds: list[int], run: RunFn,
                   horizon: int | None = None,
                   on_step: Callable[[int, int, float], None] | None = None,
                   notes: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """Train the probe on ``demos``, evaluate every checkpoint on ``tasks`` with ``seeds``
    (through ``run``, the runner), and the demonstrator on the same cells; the result document
    (also written to ``out/shortcut.json``)."""
    from robosafe.runner.request import RunRequest, plan_run
    from robosafe.runner.rundir import atomic_write

    unknown = sorted(set(tasks) - set(demos.tasks))
    if unknown:
        raise RobosafeError(f"no demonstrations of task(s) {', '.join(unknown)} in the dataset "
                            f"(it has {', '.join(demos.tasks)}); the probe knows only those")
    for t, both in seed_overlap(demos, sorted(tasks), seeds).items():
        notes(f"{t}: demonstrations were collected on evaluation seed(s) "
              f"{', '.join(map(str, both))}: the probe is scored on its own training scenes "
              "(collect demonstrations with other --seeds)")
    steps = int(cfg["steps"])
    training = train_probe(demos, out / "train", cfg=cfg, steps=steps, seed=seed,
                           on_step=on_step)
    n = len(seeds)
    checkpoints = []
    for step, path in training.checkpoints:
        rc = plan_run(RunRequest(policy=f"probe:{path}", tasks=tasks, episodes=n,
                                 seeds=tuple(seeds), suite=suite, images=True, horizon=horizon,
                                 policy_name=f"probe@{step}"))
        checkpoints.append({"step": step, "path": str(path),
                            **rates(run(rc, out / "eval" / f"step-{step:06d}", f"probe@{step}"))})
    best = max(checkpoints, key=lambda c: (c["successes"], c["step"]))
    final = checkpoints[-1]
    demonstrator = None
    spec = _demonstrator(demos.policy)
    if spec is None:
        notes(f"the dataset's demonstrator ({demos.policy or 'not recorded'}) cannot be run "
              "again here: no demonstrator SR to compare with")
    else:
        rc = plan_run(RunRequest(policy=spec, tasks=tasks, episodes=n, seeds=tuple(seeds),
                                 suite=suite, horizon=horizon))
        demonstrator = {"policy": spec, **rates(run(rc, out / "eval" / "demonstrator", spec))}
    solved = solved_tasks(best, demonstrator) if demonstrator else []
    result = {
        "diagnostic": "shortcut", "suite": suite, "tasks": sorted(tasks), "seeds": seeds,
        "episodes_per_task": n, "horizon": horizon,
        "demos": {"episodes": demos.episodes, "frames": len(demos.task),
                  "dropped_unsuccessful": demos.dropped, "policy": demos.policy,
                  "seed_overlap": seed_overlap(demos, sorted(tasks), seeds)},
        "training": {"steps": steps, "seed": seed, "resumed_from": training.resumed_from,
                     "loss": training.losses, "config": cfg},
        "checkpoints": checkpoints, "best_step": best["step"], "final_step": final["step"],
        "best": best, "final": final, "demonstrator": demonstrator,
        "solved_ratio": SOLVED_RATIO, "solved": solved,
        "conclusion": conclusion(solved, sorted(tasks)) if demonstrator else None,
        "note": ("best = the checkpoint with the most successes on these same evaluation "
                 "episodes: selection on the test set, optimistic, as the paper reports it "
                 "(App. A.1); final = the last training step, no selection"),
    }
    atomic_write(out / "shortcut.json", json.dumps(result, indent=2, allow_nan=False) + "\n")
    return result
