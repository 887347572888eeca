"""Images for one TouchSafeBench clip in each Stage I representation (paper 003, Sec. 4, App. E).

``clip_images`` returns the encoded images of a clip in exactly the order
``prompts.image_sequence`` announces (frame-major; within a view the representation's channels,
RGB before depth for RGB-D). Each image is PNG or JPEG bytes; ``ClipImage.data_url`` gives the
base64 data URL a chat-completions API takes.

Decisions where the paper is silent:

* **RGB** frames are sent as the dataset's own JPEG bytes, never re-encoded (no second
  compression loss, and the bytes hash is stable for the answer cache).
* **Depth** (grey) is re-encoded as an 8-bit PNG on a fixed 0-10 m scale (black = 0 m, white =
  10 m or farther), which is what ``prompts.yaml`` tells the model, whatever ``max_depth_m`` an
  episode was recorded with.
* **Colourised depth**: the paper does not name its colormap. We use matplotlib ``turbo_r`` over
  the same 0-10 m scale: turbo is the perceptually ordered successor of jet, and reversed so near
  surfaces are red and far ones blue, the convention of common depth visualisations (near = warm).
  ``colormap=`` selects another matplotlib colormap.
* **RGB-D** is two separate images per view (RGB, then the depth map), not a side-by-side
  composite: ``prompts.yaml`` declares two channels per view and the prompt counts them.
* **Predicted depth** comes from a pluggable :class:`DepthPredictor` (RGB uint8 (H, W, 3) ->
  metric depth (H, W) in metres); no model is bundled. Register one with
  :func:`register_depth_predictor` or pass ``depth_predictor=``; the ``pred_*`` / ``rgbd_pred*``
  representations raise a :class:`RobosafeError` without one. A relative-depth model must be
  wrapped to return metres.
* **Top-down** (paper: "the trajectories of the robot and the person over a short clip"): each
  clip gets its own map, the agents' paths over the clip's window drawn from trajectory.json,
  with the synchronised ``topdown.mp4`` frame of the window's last step beside it when the video
  has one frame per step (decoded with PyAV, the ``video`` extra); see :func:`topdown_image`.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from robosafe.errors import RobosafeError
from robosafe.grounding.dataset import clip_episode_dir, frame_path, load_depth_m, load_rgb
from robosafe.grounding.prompts import (
    normalize_representation,
    prompt_data,
    resolve_views,
)

DISPLAY_MAX_DEPTH_M = 10.0  # the scale prompts.yaml describes to the model
DEPTH_COLORMAP = "turbo_r"
TOPDOWN_FILES = ("topdown.png", "topdown.jpg", "topdown.jpeg")

# What each channel of a representation is made of, in prompts.yaml's channel order.
CHANNEL_KINDS: dict[str, tuple[str, ...]] = {
    "rgb": ("rgb",),
    "depth": ("depth",),
    "depth_color": ("depth_color",),
    "pred_depth": ("pred_depth",),
    "pred_depth_color": ("pred_depth_color",),
    "rgbd": ("rgb", "depth"),
    "rgbd_color": ("rgb", "depth_color"),
    "rgbd_pred": ("rgb", "pred_depth"),
    "rgbd_pred_color": ("rgb", "pred_depth_color"),
}


@runtime_checkable
class DepthPredictor(Protocol):
    """Monocular depth estimator: RGB uint8 (H, W, 3) -> depth in metres, float (H, W)."""

    def __call__(self, rgb: np.ndarray, /) -> np.ndarray: ...


_predictor: DepthPredictor | None = None
# Model objects are rarely safe to call from several threads at once (the client builds images
# in worker threads), so predictor calls are serialised.
_predictor_lock = threading.Lock()


def load_depth_predictor(spec: str) -> DepthPredictor:
    """``module:attribute`` -> the callable it names (``grounding ask --depth-predictor``); a
    class or factory taking no argument is called once to build the predictor. Example: a file
    ``mydepth.py`` on ``PYTHONPATH`` with ``def predict(rgb): return model(rgb)`` (metres, HxW)
    is ``--depth-predictor mydepth:predict``."""
    import importlib
    import inspect

    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise RobosafeError(f"--depth-predictor {spec!r}: expected MODULE:CALLABLE")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except ImportError as e:
        raise RobosafeError(f"--depth-predictor {spec!r}: cannot import {module!r} ({e})") \
            from None
    except AttributeError:
        raise RobosafeError(f"--depth-predictor {spec!r}: {module!r} has no {attr!r}") from None
    if inspect.isclass(obj) or (callable(obj) and _takes_no_argument(obj)):
        obj = obj()
    if not callable(obj):
        raise RobosafeError(f"--depth-predictor {spec!r}: not callable")
    return obj


def _takes_no_argument(fn: Any) -> bool:
    import inspect

    try:
        return not any(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY,
                                                           p.POSITIONAL_OR_KEYWORD)
                       for p in inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False


def register_depth_predictor(predictor: DepthPredictor | None) -> None:
    """Set (or with None, clear) the process-wide depth predictor for the ``pred_*`` inputs."""
    global _predictor
    if predictor is not None and not callable(predictor):
        raise RobosafeError(f"a depth predictor must be callable, got {type(predictor).__name__}")
    _predictor = predictor


def get_depth_predictor() -> DepthPredictor | None:
    return _predictor


def needs_depth_predictor(representation: str) -> bool:
    return any(k.startswith("pred_") for k in CHANNEL_KINDS[normalize_representation(
        representation)])


def resolve_depth_predictor(representation: str,
                            depth_predictor: DepthPredictor | None = None) -> DepthPredictor | None:
    """The predictor a representation will use; raises if it needs one and none is set."""
    predictor = depth_predictor if depth_predictor is not None else _predictor
    if predictor is None and needs_depth_predictor(representation):
        raise RobosafeError(
            f"representation {normalize_representation(representation)!r} needs predicted depth, "
            "but no depth predictor is registered: call robosafe.grounding.representations."
            "register_depth_predictor(fn) with fn(rgb uint8 HxWx3) -> depth metres HxW "
            "(no model is bundled)")
    return predictor


@dataclass(frozen=True)
class ClipImage:
    """One encoded image: time point (1..n, 0 for the top-down map), camera, the prompt's channel
    name, what it shows (``kind``), MIME type and bytes."""

    time: int
    camera: str
    channel: str
    kind: str
    mime: str
    data: bytes

    def data_url(self) -> str:
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"


def images_digest(images: Sequence[ClipImage]) -> str:
    """SHA-256 over the images' MIME types and bytes, in order (the answer-cache key part)."""
    h = hashlib.sha256()
    for im in images:
        h.update(f"{im.mime}:{len(im.data)}:".encode())
        h.update(im.data)
    return h.hexdigest()


def clip_images(clip: Mapping[str, Any], dataset_root: str | os.PathLike[str],
                representation: str = "rgb", views: str | Sequence[str] = "ego", *,
                depth_predictor: DepthPredictor | None = None,
                colormap: str = DEPTH_COLORMAP) -> list[ClipImage]:
    """The clip's images in ``prompts.image_sequence(representation, views, len(frames))`` order.

    ``clip`` needs ``episode_dir`` (relative to ``dataset_root``) and ``frames`` (one simulation
    step per time point)."""
    rep = normalize_representation(representation)
    cams = resolve_views(views)
    episode_dir = clip_episode_dir(dataset_root, clip["episode_dir"])
    frames = [int(f) for f in clip["frames"]]
    if not cams:
        if rep != "rgb":
            raise RobosafeError(f"the top-down map is an RGB rendering; representation {rep!r} "
                                "is not available with views='topdown' (use 'rgb')")
        return [topdown_image(episode_dir, frames)]
    predictor = resolve_depth_predictor(rep, depth_predictor)
    channels = prompt_data()["representations"][rep]["channels"]
    kinds = CHANNEL_KINDS[rep]
    if len(channels) != len(kinds):  # prompts.yaml and this table must describe the same inputs
        raise RobosafeError(f"prompts.yaml: representation {rep!r} lists {len(channels)} "
                            f"channels, the renderer knows {len(kinds)}")
    out = []
    for t, frame in enumerate(frames, 1):
        for cam in cams:
            for channel, kind in zip(channels, kinds, strict=True):
                mime, data = _render(episode_dir, cam, frame, kind, predictor, colormap)
                out.append(ClipImage(t, cam, channel, kind, mime, data))
    return out


def topdown_image(episode_dir: str | os.PathLike[str],
                  frames: Sequence[int] | None = None) -> ClipImage:
    """The top-down map of a clip (the prompt: "the trajectories of the robot and the person
    over a short clip").

    With the clip's ``frames``: the robot's (red) and the human's (blue) paths over the clip's
    window ``[min(frames), max(frames)]`` drawn from trajectory.json, each sampled time point
    numbered; when ``topdown.mp4`` has one frame per step (a synchronised overhead camera, as
    ``grounding generate`` writes) its frame at the window's last step is put beside the map.
    Without ``frames``, the episode-level picture: a pre-extracted ``topdown.png``/``.jpg``, else
    the video's first frame.
    """
    ep = Path(episode_dir)
    if frames is not None:
        return _clip_topdown(ep, [int(f) for f in frames])
    for name in TOPDOWN_FILES:
        if (ep / name).is_file():
            mime, data = _file_image(ep / name)
            return ClipImage(0, "topdown", "top-down map", "topdown", mime, data)
    frame = _video_frames(ep / "topdown.mp4", [0])[0]
    if frame is None:
        raise RobosafeError(f"{ep / 'topdown.mp4'}: cannot decode a frame (no video frame)")
    return ClipImage(0, "topdown", "top-down map", "topdown", "image/png", _png(frame))


def _video_frames(video: Path, wanted: Sequence[int]) -> list[np.ndarray | None]:
    """Frames ``wanted`` of a video (None past its end), plus its length check by the caller."""
    from robosafe.formats.video import available, read_frames

    if not video.is_file():
        raise RobosafeError(f"{video}: missing file; the top-down representation is unavailable "
                            f"for this episode")
    if not available():
        raise RobosafeError(
            f"{video}: decoding the top-down video needs PyAV (pip install 'robosafe[video]'), "
            f"or extract one frame to {video.parent / 'topdown.png'} first")
    with _decoding(video):
        out = dict(enumerate(read_frames(video, 0, max(wanted) + 1)))
    return [out.get(i) for i in wanted]


@contextmanager
def _decoding(video: Path) -> Iterator[None]:
    """formats.video's errors said as this representation says them: the video named, then
    why no frame came out of it."""
    try:
        yield
    except RobosafeError as err:
        why = str(err).removeprefix(f"{video}: ")
        raise RobosafeError(f"{video}: cannot decode a frame ({why})") from None


TOPDOWN_PX, _ROBOT_RGB, _HUMAN_RGB = 256, (220, 40, 40), (40, 70, 220)


def _clip_topdown(ep: Path, frames: list[int]) -> ClipImage:
    from PIL import Image, ImageDraw

    from robosafe.grounding.dataset import read_positions

    robot, human = read_positions(ep)
    lo, hi = min(frames), max(frames)
    if hi >= len(robot):
        raise RobosafeError(f"{ep / 'trajectory.json'}: the clip's frame {hi} is past the "
                            f"episode's {len(robot)} steps")
    paths = [robot[lo:hi + 1][:, [0, 2]], human[lo:hi + 1][:, [0, 2]]]  # x right, z down
    pts = np.concatenate(paths)
    centre = (pts.min(axis=0) + pts.max(axis=0)) / 2
    span = max(4.0, float(np.ptp(pts, axis=0).max()) + 2.0)  # metres shown, >= 4 m
    scale = TOPDOWN_PX / span

    def px(p: np.ndarray) -> tuple[float, float]:
        x, z = (p - centre) * scale + TOPDOWN_PX / 2
        return float(x), float(z)

    img = Image.new("RGB", (TOPDOWN_PX, TOPDOWN_PX), (245, 245, 240))
    draw = ImageDraw.Draw(img)
    for k in range(-int(span), int(span) + 1):  # 1 m grid
        for axis in (0, 1):
            c = (np.floor(centre[axis]) + k - centre[axis]) * scale + TOPDOWN_PX / 2
            line = [(c, 0), (c, TOPDOWN_PX)] if axis == 0 else [(0, c), (TOPDOWN_PX, c)]
            draw.line(line, fill=(220, 220, 215))
    for path, colour in zip(paths, (_ROBOT_RGB, _HUMAN_RGB), strict=True):
        draw.line([px(p) for p in path], fill=colour, width=2)
        for t, f in enumerate(frames, 1):
            x, z = px(path[f - lo])
            draw.ellipse([x - 4, z - 4, x + 4, z + 4], fill=colour)
            draw.text((x + 5, z - 5), str(t), fill=(0, 0, 0))
    draw.line([(8, TOPDOWN_PX - 10), (8 + scale, TOPDOWN_PX - 10)], fill=(0, 0, 0), width=2)
    draw.text((10, TOPDOWN_PX - 24), "1 m", fill=(0, 0, 0))
    picture = np.asarray(img)
    video = ep / "topdown.mp4"
    if video.is_file() and _synchronised(video, len(robot)):
        (frame,) = _video_frames(video, [hi])
        if frame is not None:
            side = np.asarray(Image.fromarray(frame).resize((TOPDOWN_PX, TOPDOWN_PX)))
            picture = np.concatenate([side, picture], axis=1)
    return ClipImage(0, "topdown", "top-down map", "topdown", "image/png", _png(picture))


def _synchronised(video: Path, n_steps: int) -> bool:
    """Whether the video has one frame per step. Without PyAV the map alone is the picture."""
    from robosafe.formats.video import available, frame_count

    if not available():
        return False
    with _decoding(video):
        return frame_count(video) == n_steps


def depth_to_gray(depth_m: np.ndarray) -> np.ndarray:
    """Metres -> uint8 grey, 0 m black, ``DISPLAY_MAX_DEPTH_M`` or farther white."""
    d = np.nan_to_num(np.asarray(depth_m, dtype=np.float64), nan=DISPLAY_MAX_DEPTH_M,
                      posinf=DISPLAY_MAX_DEPTH_M, neginf=0.0)
    return np.clip(np.rint(d / DISPLAY_MAX_DEPTH_M * 255.0), 0, 255).astype(np.uint8)


def depth_to_color(depth_m: np.ndarray, colormap: str = DEPTH_COLORMAP) -> np.ndarray:
    """Metres -> uint8 RGB through a matplotlib colormap over 0..``DISPLAY_MAX_DEPTH_M``."""
    return _colormap_lut(colormap)[depth_to_gray(depth_m)]


@lru_cache(maxsize=8)
def _colormap_lut(name: str) -> np.ndarray:
    import matplotlib

    try:
        cmap = matplotlib.colormaps[name]
    except KeyError:
        raise RobosafeError(f"unknown matplotlib colormap {name!r}") from None
    return np.rint(cmap(np.linspace(0.0, 1.0, 256))[:, :3] * 255).astype(np.uint8)


def _render(episode_dir: Path, cam: str, frame: int, kind: str,
            predictor: DepthPredictor | None, colormap: str) -> tuple[str, bytes]:
    if kind == "rgb":
        return _file_image(frame_path(episode_dir, cam, "rgb", frame))
    if kind.startswith("pred_"):
        depth = _predict(predictor, load_rgb(episode_dir, cam, frame))
    else:
        depth = load_depth_m(episode_dir, cam, frame)
    pixels = depth_to_color(depth, colormap) if kind.endswith("_color") else depth_to_gray(depth)
    return "image/png", _png(pixels)


def _predict(predictor: DepthPredictor | None, rgb: np.ndarray) -> np.ndarray:
    assert predictor is not None  # resolve_depth_predictor checked it
    with _predictor_lock:
        depth = np.asarray(predictor(rgb), dtype=np.float64)
    if depth.ndim == 3 and depth.shape[-1] == 1:
        depth = depth[..., 0]
    if depth.ndim != 2:
        raise RobosafeError(f"the depth predictor returned shape {depth.shape}; expected (H, W) "
                            "depth in metres")
    if depth.shape != rgb.shape[:2]:  # models often predict at their own resolution
        from PIL import Image

        depth = np.asarray(Image.fromarray(depth.astype(np.float32)).resize(
            (rgb.shape[1], rgb.shape[0]), Image.Resampling.BILINEAR), dtype=np.float64)
    return depth


def _png(pixels: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()


def _file_image(path: Path) -> tuple[str, bytes]:
    """JPEG / PNG files verbatim; any other image format PIL reads is re-encoded as PNG."""
    from PIL import Image, UnidentifiedImageError

    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise RobosafeError(f"{path}: missing frame file (a JSON-only dataset has no images)")\
            from None
    except OSError as e:
        raise RobosafeError(f"{path}: unreadable image ({e})") from None
    try:
        with Image.open(io.BytesIO(data)) as im:
            fmt = im.format
            if fmt in ("JPEG", "PNG"):
                return f"image/{fmt.lower()}", data
            return "image/png", _png(np.asarray(im.convert("RGB")))
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        raise RobosafeError(f"{path}: unreadable image ({e})") from None
