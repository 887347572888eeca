"""LeRobot checkpoints as robosafe policies (``--policy lerobot:DIR``).

``DIR`` is a LeRobot pretrained-policy directory as ``lerobot-train`` saves it
(``checkpoints/<step>/pretrained_model``) or ``PreTrainedPolicy.save_pretrained`` writes it:
``config.json`` (the policy type and its ``input_features`` / ``output_features``),
``model.safetensors`` and the saved processors (``policy_preprocessor.json``,
``policy_postprocessor.json`` and their ``.safetensors`` state: normalisation statistics).
The policy is loaded with lerobot's own factory (``PreTrainedConfig.from_pretrained``,
``get_policy_class(type).from_pretrained``) and its own processors
(``make_pre_post_processors``), and stepped as ``lerobot-eval`` steps it
(``lerobot/scripts/lerobot_eval.py``, ``rollout``): ``policy.reset()`` at every episode, then
per step observation -> pre-processor -> ``policy.select_action`` -> post-processor. Action
chunks are therefore played as lerobot plays them: ``select_action`` keeps its own queue of
``n_action_steps`` actions (ACT, Diffusion Policy, SmolVLA, pi0 ...).

The observation a policy gets is built from its own ``input_features`` through an observation
adapter (``policies/data/adapters.yaml``; ``--obs-adapter``): ``lerobot-robosafe`` (the default)
names features as ``robosafe collect`` writes them, ``lerobot-libero`` as the LIBERO conversions
on the Hugging Face hub do. Images are uint8 ``H x W x 3`` from the host, handed over as float
``1 x 3 x H x W`` in [0, 1] (what ``lerobot.envs.utils.preprocess_observation`` makes of an
env's pixels) at the size the feature declares; the task string is the episode's instruction.

Safety of loading: weights come from ``model.safetensors`` only (never pickle) and must match
the config exactly (``strict``: a missing or extra tensor is an error, not a partly random
policy); nothing is downloaded (``HF_HUB_OFFLINE``; torchvision backbone weights named in the
config are not fetched, since the checkpoint's own tensors replace them).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from robosafe.errors import RobosafeError
from robosafe.policies.remote import as_uint8_image, axis_angle, check_adapter
from robosafe.textio import read_json

log = logging.getLogger(__name__)

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
PROCESSORS = ("policy_preprocessor.json", "policy_postprocessor.json")
#: the adapter a lerobot policy's observation goes through unless the run names one
DEFAULT_ADAPTER = "lerobot-robosafe"
#: the longest error detail kept from lerobot / torch (a strict load lists every tensor name)
_DETAIL = 300


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= _DETAIL else text[:_DETAIL] + " ..."


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """The checkpoint's ``config.json`` after checking the directory holds a LeRobot
    checkpoint (config, safetensors weights, saved processors); needs no lerobot install, so
    the driver can refuse a wrong directory before any episode. One error line otherwise."""
    path = Path(path)
    where = f"lerobot:{path}"
    if not path.is_dir():
        raise RobosafeError(f"{where}: not a folder (a LeRobot pretrained-policy folder: "
                            f"{CONFIG}, {WEIGHTS}, {PROCESSORS[0]})")
    missing = [n for n in (CONFIG, WEIGHTS, *PROCESSORS) if not (path / n).is_file()]
    if missing:
        raise RobosafeError(f"{where}: not a LeRobot checkpoint: no {', '.join(missing)}")
    # bounded like every metadata file robosafe reads: a huge config.json is one error line
    config = read_json(path / CONFIG, f"{where}: {CONFIG}")
    if not isinstance(config, dict) or not isinstance(config.get("type"), str):
        raise RobosafeError(f"{where}: {CONFIG} has no policy 'type'")
    feats = config.get("output_features")
    if not isinstance(feats, dict) or "action" not in feats:
        raise RobosafeError(f"{where}: {CONFIG} declares no 'action' output feature")
    return config


def _feature_sources(adapter: str) -> dict[str, tuple[str, Any]]:
    """feature name -> ("image", observation key) | ("state", [components]) of an adapter."""
    spec = check_adapter(adapter)
    out: dict[str, tuple[str, Any]] = {k: ("image", v)
                                       for k, v in (spec.get("images") or {}).items()}
    out |= {k: ("state", list(v)) for k, v in (spec.get("state") or {}).items()}
    return out


def _component(obs: dict[str, Any], part: str) -> np.ndarray:
    key = part.removeprefix("axis_angle:")
    if key not in obs:
        raise KeyError(key)
    value = np.asarray(obs[key], dtype=float)
    return axis_angle(value) if part.startswith("axis_angle:") else value.ravel()


class LeRobotPolicy:
    """A LeRobot checkpoint stepped as ``lerobot-eval`` steps it (module docstring).

    ``adapter`` names the adapters.yaml entry that says which host observation feeds which of
    the policy's input features (default :data:`DEFAULT_ADAPTER`)."""

    def __init__(self, path: str | Path, *, adapter: str | None = None):
        self.path = Path(path)
        self.where = f"lerobot:{self.path}"
        self.config_json = read_checkpoint(self.path)
        self.adapter = adapter or DEFAULT_ADAPTER
        self.sources = _feature_sources(self.adapter)
        self.name = f"lerobot-{self.config_json['type']}:{self.path.name}"
        self._load()
        self.instruction = ""
        self._resized: set[str] = set()

    # -- loading ---------------------------------------------------------------------------------
    def _load(self) -> None:
        # never download: set before huggingface_hub reads its settings (at import)
        os.environ["HF_HUB_OFFLINE"] = "1"
        try:
            import torch
            from lerobot.configs.policies import PreTrainedConfig
            from lerobot.configs.types import FeatureType
            from lerobot.policies.factory import get_policy_class, make_pre_post_processors
        except ImportError as exc:
            raise RobosafeError(
                f"{self.where}: lerobot is not importable here ({_short(exc)}): install "
                "lerobot==0.6.1 beside robosafe, or serve the checkpoint from lerobot's own "
                f"environment (robosafe serve-policy {self.where}) and run with --policy "
                "ws://HOST:PORT") from None
        self._torch = torch
        quiet = contextlib.redirect_stdout(io.StringIO())  # lerobot prints while loading
        try:
            with quiet:
                cfg = PreTrainedConfig.from_pretrained(str(self.path))
        except (ValueError, TypeError, KeyError, OSError) as exc:
            raise RobosafeError(f"{self.where}: lerobot cannot read {CONFIG}: "
                                f"{_short(exc)}") from None
        # the checkpoint's own tensors replace any backbone weights; fetching them is a download
        if getattr(cfg, "pretrained_backbone_weights", None) is not None:
            cfg.pretrained_backbone_weights = None
        cfg.device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            cls = get_policy_class(cfg.type)
        except (ValueError, ImportError, KeyError) as exc:
            raise RobosafeError(f"{self.where}: policy type {cfg.type!r}: {_short(exc)}") from None
        try:
            with quiet:
                self.policy = cls.from_pretrained(str(self.path), config=cfg, strict=True)
        except Exception as exc:  # noqa: BLE001 - any failure here is the checkpoint's
            raise RobosafeError(f"{self.where}: the weights in {WEIGHTS} do not load into its "
                                f"{cfg.type} config: {_short(exc)}") from None
        try:
            with quiet:
                self.pre, self.post = make_pre_post_processors(
                    cfg, pretrained_path=str(self.path),
                    preprocessor_overrides={"device_processor": {"device": cfg.device}})
        except Exception as exc:  # noqa: BLE001
            raise RobosafeError(f"{self.where}: its saved processors do not load: "
                                f"{_short(exc)}") from None
        self.cfg = cfg
        self.inputs = {k: (ft.type, tuple(ft.shape)) for k, ft in cfg.input_features.items()
                       if ft.type in (FeatureType.VISUAL, FeatureType.STATE, FeatureType.ENV)}
        self.action_dim = int(np.prod(cfg.output_features["action"].shape))

    # -- the observation -------------------------------------------------------------------------
    def _source(self, name: str) -> tuple[str, Any]:
        if name not in self.sources:
            raise RobosafeError(
                f"{self.where}: the policy reads {name}, which observation adapter "
                f"{self.adapter} does not give (it gives {', '.join(sorted(self.sources))}): "
                "choose another with --obs-adapter (policies/data/adapters.yaml)")
        return self.sources[name]

    def _image(self, name: str, key: str, shape: tuple[int, ...], obs: dict[str, Any]):
        if key not in obs:
            cams = sorted(k for k in obs if str(k).endswith("_image"))
            have = f"it has {', '.join(cams)}" if cams else "it renders none: run with --images"
            raise RobosafeError(f"{self.where}: the policy reads {name} from the host's {key}, "
                                f"which the host does not give ({have})")
        img = as_uint8_image(np.asarray(obs[key]))
        h, w = shape[-2:]
        if img.shape[:2] != (h, w):
            from PIL import Image

            if name not in self._resized:
                self._resized.add(name)
                log.warning("%s: %s is %dx%d px, the policy's %s is %dx%d: resized (bilinear); "
                            "render at the policy's size with --image-size", self.where, key,
                            img.shape[1], img.shape[0], name, w, h)
            img = np.asarray(Image.fromarray(img).resize((w, h), resample=Image.BILINEAR))
        t = self._torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1)
        return (t.float() / 255.0).unsqueeze(0)

    def _state(self, name: str, parts: list[str], shape: tuple[int, ...],
               obs: dict[str, Any]):
        try:
            value = np.concatenate([_component(obs, p) for p in parts])
        except KeyError as exc:
            raise RobosafeError(f"{self.where}: the policy's {name} needs the host's "
                                f"{exc.args[0]}, which the host does not give") from None
        want = int(np.prod(shape))
        if value.size != want:
            raise RobosafeError(f"{self.where}: the policy's {name} has {want} values, the "
                                f"host gives {value.size} ({' + '.join(parts)}, adapter "
                                f"{self.adapter})")
        return self._torch.from_numpy(value.astype(np.float32).reshape(shape)).unsqueeze(0)

    def observation(self, obs: dict[str, Any]) -> dict[str, Any]:
        """The policy's input batch (before its pre-processor) from a host observation."""
        batch: dict[str, Any] = {}
        for name, (_, shape) in self.inputs.items():
            kind, src = self._source(name)
            if kind == "image":
                if len(shape) != 3:
                    raise RobosafeError(f"{self.where}: {name} is {shape}, not a 3 x H x W "
                                        f"image; the adapter maps a camera to it")
                batch[name] = self._image(name, src, shape, obs)
            else:
                batch[name] = self._state(name, src, shape, obs)
        batch["task"] = [self.instruction]
        return batch

    def check(self, obs: dict[str, Any], task_info: dict[str, Any]) -> None:
        """Every input the policy reads can be made from the host's observation, the action
        widths agree and the first action is finite: one error naming both sides, before any
        episode runs. The policy is reset again afterwards."""
        self.reset(task_info)
        self.act(obs)
        self.policy.reset()

    # -- the policy protocol ---------------------------------------------------------------------
    def reset(self, task_info: dict[str, Any]) -> None:
        """lerobot's own reset (its action queue emptied) and the episode's instruction."""
        dim = task_info.get("action_dim")
        if dim is not None and int(dim) != self.action_dim:
            raise RobosafeError(f"{self.where}: the policy acts in {self.action_dim} dimensions, "
                                f"the host takes {int(dim)}")
        self.instruction = str(task_info.get("instruction") or "")
        self.policy.reset()

    def act(self, observation: dict[str, Any]) -> np.ndarray:
        batch = self.pre(self.observation(observation))
        with self._torch.inference_mode():
            action = self.policy.select_action(batch)
        action = self.post(action)
        out = np.asarray(action.detach().to("cpu").float().numpy(), dtype=np.float64).reshape(-1)
        if out.size != self.action_dim:
            raise RobosafeError(f"{self.where}: the policy returned {out.size} action values, "
                                f"its config declares {self.action_dim}")
        if not np.all(np.isfinite(out)):
            raise RobosafeError(f"{self.where}: the policy returned a non-finite action "
                                "(NaN or inf)")
        return out
