"""TouchSafeBench dataset layout (paper 003, App. E): where an episode's files are, and reading
one of them with errors that name it.

The index is ``grounding.index``, frame access ``grounding.frames``, the writer
``grounding.writer``; ``grounding.dataset`` keeps every name importable from one place.

Layout::

    <root>/dataset_info.json
    <root>/<human_type>/<sim_task>/scene_<scene_id>/episode_<NNNN>/
        episode_meta.json  rgb_meta.json  depth_meta.json  camera_params.json  trajectory.json
        topdown.mp4  rgb_full/<view>/NNNNNN.jpg  depth/<view>/NNNNNN.png

The index (:func:`index_dataset`) reads only JSON and never opens an image or the video. Per
episode it keeps one compact :class:`EpisodeIndex` (numpy arrays per step); a bad episode is
skipped and reported as a :class:`DatasetError` naming the episode directory and file, never
aborting the build.

Decisions where App. E is silent (see the report of issue "grounding dataset"):

* Robot-human distance ``d`` is **planar**: the Euclidean distance of agent_0 and agent_1 in the
  x-z ground plane (Habitat is y-up). App. E stores each agent's 3-D world position, but the y of
  a robot base and of a humanoid root are body reference heights, not a separation; every use of
  ``d`` in the paper (1.5 m near-miss threshold, distance trend, the separation a VLM is asked to
  estimate) is a footprint distance, and Habitat's own social-navigation code measures
  robot-human distance on ``[x, z]``. When both agents are at the same height it equals 3-D.
* Frame counts must agree exactly: ``len(trajectory)``, every sensor count in rgb_meta /
  depth_meta and camera_params ``num_frames``. camera_params.json is the largest file (16+7
  floats x 4 sensors per frame), so the lazy index reads its top-level fields up to
  ``num_frames`` only; ``deep=True`` parses it fully (``len(frames) == num_frames``) and lists
  every frame directory. Without ``deep`` the first and last frame file of each view are
  stat()ed, which catches truncated renders at 16 stats per episode.
* ``dataset_info.json`` key ``"images": false`` declares a JSON-only dataset (the synthetic
  benchmark datasets); frame files are then not required. Absent means true.
* ``total_robot_scene_colls`` is the number of scene-collision steps (App. E says so);
  ``total_robot_obj_colls`` is truncated in the paper, so either the number of object-collision
  steps or the sum of per-step counts is accepted.
* Directory names must agree with episode_meta.json: ``human_type``, ``task``,
  ``scene_<scene_id>`` and ``episode_<int episode_id>`` (so stratification by path and by meta
  can never disagree).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from robosafe.errors import DEEP_JSON, DatasetError, RobosafeError

HUMAN_TYPES = ("female_2", "male_2", "neutral_0")


SIM_TASKS = ("social_navigation", "social_rearrangement")


VIEWS = ("arm", "head", "third_human", "third_robot")


RGB_SENSORS = {"arm": "agent_0_articulated_agent_arm_rgb", "head": "agent_1_head_rgb",
               "third_robot": "agent_0_third_rgb", "third_human": "agent_1_third_rgb"}


DEPTH_SENSORS = {"arm": "agent_0_articulated_agent_arm_depth_render",
                 "head": "agent_1_head_depth_render", "third_robot": "agent_0_third_depth",
                 "third_human": "agent_1_third_depth"}


ROBOT_ID, HUMAN_ID = "agent_0", "agent_1"


FRAME_KINDS = {"rgb": ("rgb_full", "jpg"), "depth": ("depth", "png")}


INFO_FILE = "dataset_info.json"


_JSON_FILES = ("episode_meta.json", "rgb_meta.json", "depth_meta.json", "camera_params.json",
               "trajectory.json")


# A minimal ISO-BMFF 'ftyp' box: the placeholder top-down video is recognisable as MP4 but is
# never decoded by robosafe.
MP4_PLACEHOLDER = b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2"


class _Episode:
    """Where we are while reading one episode: builds errors that name its directory and file."""

    def __init__(self, root: Path, rel: str):
        self.root, self.rel, self.dir = root, rel, root / rel
        self.warnings: list[str] = []
        self.notes: set[str] = set()   # warnings already given (one line per kind)

    def warn(self, file: str, message: str) -> None:
        """A deviation read anyway (the episode stays in the index); one line naming the file."""
        self.warnings.append(f"{self.dir / file}: {message}")

    def error(self, file: str, message: str, line: int | None = None,
              column: int | None = None) -> DatasetError:
        return DatasetError(message, path=str(self.dir / file), episode_dir=self.rel, file=file,
                            line=line, column=column)


VISIBILITY_FILE = "visibility.json"


def read_dataset_info(root: str | os.PathLike[str]) -> dict[str, Any]:
    """``<root>/dataset_info.json`` as a dict (raises :class:`DatasetError` naming the file)."""
    path = Path(root) / INFO_FILE
    if not Path(root).is_dir():
        raise DatasetError("dataset root is not a directory", path=str(root))
    try:
        info = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise DatasetError("missing file: not a TouchSafeBench dataset root",
                           path=str(path)) from None
    except json.JSONDecodeError as e:
        raise DatasetError(f"malformed JSON: {e.msg}", path=str(path), line=e.lineno,
                           column=e.colno) from None
    except ValueError as e:
        raise DatasetError(f"not UTF-8 JSON ({e})", path=str(path)) from None
    except RecursionError:
        raise DatasetError(DEEP_JSON, path=str(path)) from None
    if not isinstance(info, dict):
        raise DatasetError("expected a JSON object", path=str(path))
    return info


def find_episodes(root: str | os.PathLike[str]) -> list[str]:
    """Relative episode directories ``<human_type>/<task>/scene_*/episode_*``, sorted."""
    def subdirs(d: str, prefix: str = "") -> list[str]:
        with os.scandir(d) as it:
            return [e.name for e in it if e.is_dir() and e.name.startswith(prefix)
                    and not e.name.startswith(".")]

    root = os.fspath(root)
    out = []
    for ht in subdirs(root):
        for task in subdirs(os.path.join(root, ht)):
            for scene in subdirs(os.path.join(root, ht, task), "scene_"):
                for ep in subdirs(os.path.join(root, ht, task, scene), "episode_"):
                    out.append(f"{ht}/{task}/{scene}/{ep}")
    return sorted(out)


def _load_json(ep: _Episode, name: str) -> Any:
    try:
        data = (ep.dir / name).read_bytes()
    except FileNotFoundError:
        raise ep.error(name, "missing file") from None
    except OSError as e:
        raise ep.error(name, f"cannot read ({e.strerror})") from None
    try:
        return json.loads(data)
    except json.JSONDecodeError as e:
        raise ep.error(name, f"malformed JSON: {e.msg}", e.lineno, e.colno) from None
    except ValueError as e:  # bad UTF-8
        raise ep.error(name, f"not UTF-8 JSON ({e})") from None
    except RecursionError:
        raise ep.error(name, DEEP_JSON) from None


def _obj(ep: _Episode, file: str, value: Any, where: str = "top level") -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ep.error(file, f"{where}: expected a JSON object")
    return value


def _get(ep: _Episode, file: str, obj: dict[str, Any], key: str, kind: type | tuple[type, ...],
         where: str = "") -> Any:
    name = f"{where}.{key}" if where else key
    if key not in obj:
        raise ep.error(file, f"missing field {name!r}")
    v = obj[key]
    if isinstance(v, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise ep.error(file, f"field {name!r} must be {_kind_name(kind)}, got {v!r}")
    if not isinstance(v, kind):
        raise ep.error(file, f"field {name!r} must be {_kind_name(kind)}, got {v!r:.60}")
    return v


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {int: "an integer", float: "a number", str: "a string", bool: "true/false",
             list: "a list", dict: "an object"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _frame_name(frame: int, ext: str) -> str:
    return f"{frame:06d}.{ext}"


def planar_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Robot-human distance d on the x-z ground plane (Habitat is y-up)."""
    return np.hypot(a[:, 0] - b[:, 0], a[:, 2] - b[:, 2])


def frame_path(episode_dir: str | os.PathLike[str], view: str, kind: str, frame: int) -> Path:
    """Where frame ``frame`` of ``view`` (arm, head, third_human, third_robot) and ``kind``
    (rgb, depth) is, whether or not it was written (JSON-only datasets have no images)."""
    if view not in VIEWS:
        raise RobosafeError(f"unknown view {view!r}; expected one of {', '.join(VIEWS)}")
    if kind not in FRAME_KINDS:
        raise RobosafeError(f"unknown frame kind {kind!r}; expected rgb or depth")
    if frame < 0:
        raise RobosafeError(f"frame index must be >= 0, got {frame}")
    top, ext = FRAME_KINDS[kind]
    return Path(episode_dir) / top / view / _frame_name(frame, ext)
