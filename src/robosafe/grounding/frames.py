"""Frame access of a TouchSafeBench episode (paper 003, App. E): RGB and depth frames by view
and step, and episode directories from untrusted clip files kept inside the dataset."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from robosafe.errors import RobosafeError
from robosafe.grounding.layout import _Episode, _get, _load_json, _obj, frame_path


def clip_episode_dir(root: str | os.PathLike[str], episode_dir: Any) -> Path:
    """``root / episode_dir`` for a clip's ``episode_dir``; a path that is absolute or climbs
    out of the dataset (``..``) is refused, so a clips file cannot make robosafe read (and send
    to an endpoint) files outside the dataset."""
    rel = str(episode_dir)
    norm = os.path.normpath(rel.replace("\\", "/"))
    if not rel or os.path.isabs(rel) or Path(rel).drive or norm == ".." or \
            norm.startswith("../") or norm == ".":
        raise RobosafeError(f"episode_dir {rel!r} is not a directory inside the dataset "
                            f"{root}; refused")
    return Path(root) / norm


@contextmanager
def _open_image(path: Path) -> Iterator[Any]:
    """The opened image; a missing file, a bad header and pixel data that fail to decode (PIL
    decodes lazily, inside the block) are one error naming the file."""
    from PIL import Image

    try:
        im = Image.open(path)
    except FileNotFoundError:
        raise RobosafeError(f"{path}: missing frame file (a JSON-only dataset has no images)")\
            from None
    except OSError as e:  # UnidentifiedImageError is an OSError
        raise RobosafeError(f"{path}: unreadable image ({e})") from None
    try:
        with im:
            yield im
    except (OSError, SyntaxError, ValueError) as e:  # truncated or corrupt pixel data
        raise RobosafeError(f"{path}: unreadable image ({e})") from None


def load_rgb(episode_dir: str | os.PathLike[str], view: str, frame: int) -> np.ndarray:
    """RGB frame as uint8 (H, W, 3)."""
    path = frame_path(episode_dir, view, "rgb", frame)
    with _open_image(path) as im:
        return np.asarray(im.convert("RGB"))


@lru_cache(maxsize=256)
def _max_depth_m(episode_dir: str) -> float:
    ep = _Episode(Path(episode_dir), "")
    doc = _obj(ep, "depth_meta.json", _load_json(ep, "depth_meta.json"))
    return float(_get(ep, "depth_meta.json", doc, "max_depth_m", (int, float)))


def load_depth_m(episode_dir: str | os.PathLike[str], view: str, frame: int, *,
                 max_depth_m: float | None = None) -> np.ndarray:
    """Depth frame in metres, float32 (H, W): pixel / 255 * max_depth_m (App. E depth_meta).
    ``max_depth_m`` defaults to the episode's depth_meta.json value."""
    path = frame_path(episode_dir, view, "depth", frame)
    scale = (max_depth_m if max_depth_m is not None
             else _max_depth_m(os.fspath(Path(episode_dir).resolve()))) / 255.0
    with _open_image(path) as im:
        if im.mode != "L":
            raise RobosafeError(f"{path}: depth must be a single-channel 8-bit PNG, got mode "
                                f"{im.mode}")
        return np.asarray(im, dtype=np.float32) * np.float32(scale)
