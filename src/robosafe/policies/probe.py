"""The shortcut probe of paper 002 (Sec. 3, App. A.1) as a policy: camera images, the 8-d
proprio state and a learned per-task embedding in, a chunk of actions out; no language.

The reference fine-tunes a pretrained DINOv2 encoder. Nothing can be downloaded here, so the
encoder is a small CNN trained from scratch (``policies/data/probe.yaml`` says what was kept).
Checkpoints are safetensors files: the weights, and in the header's metadata the configuration,
the task vocabulary and the normalisation statistics; nothing is unpickled. ``probe:CKPT`` is a
policy spec like any other, so a probe is evaluated by the runner with the same seeds and
protocol as every policy. Training lives in :mod:`robosafe.audit.shortcut`.

Needs the ``probe`` extra (``pip install 'robosafe[probe]'``: PyTorch CPU and safetensors).
"""

from __future__ import annotations

import json
import os
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from robosafe.errors import RobosafeError
from robosafe.policies.remote import state_row

try:
    import torch
    from torch import nn
    from torch.nn import functional as F
except ImportError:  # pragma: no cover - the base install has no torch
    raise RobosafeError("the shortcut probe needs PyTorch: pip install 'robosafe[probe]'") \
        from None

FORMAT = "robosafe-probe/1"
META_KEY = "robosafe/probe"


@cache
def _defaults() -> dict[str, Any]:
    text = resources.files("robosafe.policies").joinpath("data/probe.yaml").read_text("utf-8")
    return yaml.safe_load(text)


def probe_config(**overrides: Any) -> dict[str, Any]:
    """The probe's configuration: ``probe.yaml`` with ``overrides`` (unknown keys refused)."""
    cfg = dict(_defaults())
    unknown = sorted(set(overrides) - set(cfg))
    if unknown:
        raise RobosafeError(f"unknown probe setting(s): {', '.join(unknown)}; known: "
                            f"{', '.join(sorted(cfg))}")
    cfg.update({k: v for k, v in overrides.items() if v is not None})
    return cfg


def to_model_images(frames: np.ndarray | torch.Tensor, size: int) -> torch.Tensor:
    """(..., H, W, 3) uint8 camera images -> (..., 3, size, size) uint8, area-resized; the
    same function for training frames and the images a policy sees, so both match."""
    x = torch.as_tensor(np.asarray(frames)) if not isinstance(frames, torch.Tensor) else frames
    lead = x.shape[:-3]
    x = x.reshape(-1, *x.shape[-3:]).permute(0, 3, 1, 2)
    if x.shape[-1] != size or x.shape[-2] != size:
        x = F.interpolate(x.float(), size=(size, size), mode="area").round().clamp(0, 255)
        x = x.to(torch.uint8)
    return x.reshape(*lead, 3, size, size)


class SpatialSoftmax(nn.Module):
    """Feature maps -> expected (x, y) image coordinates of K learned keypoints."""

    def __init__(self, channels: int, keypoints: int):
        super().__init__()
        self.proj = nn.Conv2d(channels, keypoints, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, h, w = x.shape
        att = torch.softmax(self.proj(x).flatten(2), dim=-1)  # (B, K, H*W)
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w),
                                indexing="ij")
        grid = torch.stack([xs.reshape(-1), ys.reshape(-1)], dim=-1)  # (H*W, 2)
        return (att @ grid).reshape(b, -1)


class ProbeNet(nn.Module):
    """Shared CNN encoder over the views, proprio MLP, task embedding, MLP head -> a chunk of
    normalised actions (paper 002 App. A.1's structure, a from-scratch encoder)."""

    def __init__(self, cfg: dict[str, Any], n_tasks: int, state_dim: int, action_dim: int):
        super().__init__()
        layers: list[nn.Module] = []
        c_in = 3
        for c in cfg["channels"]:
            layers += [nn.Conv2d(c_in, c, 3, stride=2, padding=1), nn.GroupNorm(8, c), nn.ReLU()]
            c_in = c
        self.encoder = nn.Sequential(*layers, SpatialSoftmax(c_in, cfg["keypoints"]))
        self.proprio = nn.Sequential(nn.Linear(state_dim, cfg["proprio_dim"]), nn.ReLU())
        self.task = nn.Embedding(n_tasks, cfg["task_dim"])
        width = len(cfg["views"]) * 2 * cfg["keypoints"] + cfg["proprio_dim"] + cfg["task_dim"]
        h = cfg["hidden"]
        self.head = nn.Sequential(nn.Linear(width, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(),
                                  nn.Linear(h, cfg["chunk"] * action_dim))
        self.chunk, self.action_dim = cfg["chunk"], action_dim

    def forward(self, images: torch.Tensor, state: torch.Tensor,
                task: torch.Tensor) -> torch.Tensor:
        """images (B, V, 3, S, S) float in [0, 1]; state (B, D) normalised; task (B,) long."""
        b = images.shape[0]
        feats = self.encoder(images.flatten(0, 1) * 2.0 - 1.0).reshape(b, -1)
        x = torch.cat([feats, self.proprio(state), self.task(task)], dim=-1)
        return self.head(x).reshape(b, self.chunk, self.action_dim)


def build_net(meta: dict[str, Any]) -> ProbeNet:
    return ProbeNet(meta["config"], len(meta["tasks"]), meta["state_dim"], meta["action_dim"])


def save_checkpoint(path: str | Path, net: nn.Module, meta: dict[str, Any],
                    extra: dict[str, torch.Tensor] | None = None) -> Path:
    """Weights (and ``extra`` tensors, e.g. optimiser state) as safetensors, ``meta`` as JSON
    in the header; written to a temporary name and renamed (a kill leaves the old file)."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {f"model.{k}": v.detach().contiguous() for k, v in net.state_dict().items()}
    tensors.update({k: v.detach().contiguous() for k, v in (extra or {}).items()})
    tmp = path.with_name(f".{path.name}.tmp")
    save_file(tensors, str(tmp), metadata={META_KEY: json.dumps({"format": FORMAT, **meta})})
    os.replace(tmp, path)
    return path


def read_checkpoint(path: str | Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(meta, tensors) of a probe checkpoint; one error line for anything else."""
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    try:
        with safe_open(str(path), framework="pt") as fh:
            header = fh.metadata() or {}
            tensors = {k: fh.get_tensor(k) for k in fh.keys()}  # noqa: SIM118 - not a dict
    except (OSError, SafetensorError) as exc:
        raise RobosafeError(f"{path}: not a safetensors probe checkpoint ({exc})") from None
    try:
        meta = json.loads(header[META_KEY])
    except (KeyError, json.JSONDecodeError):
        raise RobosafeError(f"{path}: a safetensors file without robosafe probe metadata "
                            f"({META_KEY!r})") from None
    if meta.get("format") != FORMAT:
        raise RobosafeError(f"{path}: probe checkpoint format {meta.get('format')!r}, "
                            f"expected {FORMAT!r}")
    return meta, tensors


def load_net(path: str | Path) -> tuple[ProbeNet, dict[str, Any]]:
    meta, tensors = read_checkpoint(path)
    net = build_net(meta)
    weights = {k.removeprefix("model."): v for k, v in tensors.items() if k.startswith("model.")}
    try:
        net.load_state_dict(weights, strict=True)
    except RuntimeError as exc:
        raise RobosafeError(f"{path}: weights do not fit the probe its metadata describes: "
                            f"{str(exc).splitlines()[0]}") from None
    net.eval()
    return net, meta


def normalise(x: np.ndarray | torch.Tensor, mean: Any, std: Any) -> torch.Tensor:
    return (torch.as_tensor(x, dtype=torch.float32) - torch.as_tensor(mean, dtype=torch.float32)) \
        / torch.as_tensor(std, dtype=torch.float32)


class ProbePolicy:
    """Runs a probe checkpoint: looks the task up by its id (never its instruction), predicts
    a chunk every ``execute`` steps and plays it (paper 002 App. A.1's deployment)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.net, self.meta = load_net(self.path)
        self.cfg = self.meta["config"]
        self.name = f"probe:{self.path.name}"
        self.queue: list[np.ndarray] = []
        self.last = np.zeros(0)
        self.task = 0

    def reset(self, task_info: dict[str, Any]) -> None:
        key = str(task_info.get("task_id"))
        if key not in self.meta["tasks"]:
            raise RobosafeError(f"{self.name}: task {key!r} was not in its training data "
                                f"(it knows {', '.join(self.meta['tasks'])})")
        dim = int(task_info.get("action_dim", self.meta["action_dim"]))
        if dim != self.meta["action_dim"]:
            raise RobosafeError(f"{self.name}: trained on {self.meta['action_dim']}-d actions, "
                                f"the env takes {dim}")
        self.task = self.meta["tasks"].index(key)
        self.queue = []

    def _images(self, obs: dict[str, Any]) -> torch.Tensor:
        missing = [v for v in self.cfg["views"] if f"{v}_image" not in obs]
        if missing:
            raise RobosafeError(f"{self.name}: the observation has no image of "
                                f"{', '.join(missing)} (run with --images)")
        frames = np.stack([obs[f"{v}_image"] for v in self.cfg["views"]])
        return to_model_images(frames, self.cfg["image_size"]).float()[None] / 255.0

    @torch.no_grad()
    def act(self, obs: dict[str, Any]) -> np.ndarray:
        if not self.queue:
            m = self.meta
            state = normalise(state_row(obs)[None], m["state_mean"], m["state_std"])
            # one thread: a single small forward pass, next to simulator workers on the cores
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                out = self.net(self._images(obs), state, torch.tensor([self.task]))[0].numpy()
            finally:
                torch.set_num_threads(threads)
            actions = out * np.asarray(m["action_std"]) + np.asarray(m["action_mean"])
            self.queue = list(np.clip(actions[: self.cfg["execute"]], -1.0, 1.0))
        self.last = self.queue.pop(0).astype(float)
        return self.last

    def needs_images(self) -> bool:
        """The next ``act`` predicts (and looks) only when the chunk is played out."""
        return not self.queue

    def action_chunk(self) -> list[np.ndarray]:
        """The action just returned and the rest of its chunk still to be played: what the
        safety shield predicts with (robosafe.runner.shield)."""
        return [self.last, *(a.astype(float) for a in self.queue)]
