"""TouchSafeBench dataset layout (paper 003, App. E): writer, validating lazy index, frame access.

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

import gc
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from robosafe.errors import DEEP_JSON, RobosafeError, located

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
_CACHE_FORMAT, _CACHE_VERSION = "robosafe.grounding.index", 2
# A minimal ISO-BMFF 'ftyp' box: the placeholder top-down video is recognisable as MP4 but is
# never decoded by robosafe.
MP4_PLACEHOLDER = b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2"


class DatasetError(RobosafeError):
    """An episode (or the dataset root) is malformed. ``path`` is the offending file; ``line`` and
    ``column`` locate a JSON syntax error. Pickles across worker processes."""

    def __init__(self, message: str, *, path: str | None = None, episode_dir: str | None = None,
                 file: str | None = None, line: int | None = None, column: int | None = None):
        self.message = message
        self.path = path
        self.episode_dir = episode_dir
        self.file = file
        self.line = line
        self.column = column
        super().__init__(str(self))

    def __str__(self) -> str:
        where = located(self.path or "", self.line, self.column)
        return f"{where}: {self.message}" if where else self.message

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("message", "path", "episode_dir", "file", "line",
                                              "column")}


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


# ----------------------------------------------------------------------------- records


@dataclass(frozen=True, eq=False)
class EpisodeIndex:
    """Compact per-episode record of the lazy index (arrays are per simulation step).

    ``robot_human_distance`` is the planar x-z distance of agent_0 and agent_1 (module doc)."""

    episode_dir: str  # relative to the dataset root, '/'-separated
    episode_id: int
    scene_id: str
    sim_task: str
    human_type: str
    n_frames: int
    human_collision_steps: np.ndarray  # int64 step indices
    scene_collision_steps: np.ndarray  # from robot_scene_coll_steps
    object_collision_steps: np.ndarray  # from robot_obj_coll_steps
    robot_human_distance: np.ndarray  # float64 (n,)
    robot_pos: np.ndarray  # float64 (n, 3) world x, y, z
    human_pos: np.ndarray  # float64 (n, 3)
    max_depth_m: float = 10.0
    # bool (n,): the human is seen by at least one camera (visibility.json, App. G.1's "human
    # visible in the simulator"); None when the dataset does not say
    human_visible: np.ndarray | None = None

    @property
    def did_collide_human(self) -> bool:
        return bool(self.human_collision_steps.size)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EpisodeIndex):
            return NotImplemented
        return all(np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
                   for a, b in zip(_fields(self), _fields(other), strict=True))

    __hash__ = None  # type: ignore[assignment]  # arrays are unhashable


def _fields(e: EpisodeIndex) -> tuple[Any, ...]:
    return tuple(getattr(e, k) for k in EpisodeIndex.__dataclass_fields__)


_LIST_COLUMNS = ("human_collision_steps", "scene_collision_steps", "object_collision_steps",
                 "robot_human_distance", "robot_pos", "human_pos", "human_visible")
_SCALAR_COLUMNS = ("episode_dir", "episode_id", "scene_id", "sim_task", "human_type", "n_frames",
                   "max_depth_m", "has_visibility")
VISIBILITY_FILE = "visibility.json"


def _column(e: EpisodeIndex, k: str) -> Any:
    """A cache column of one episode (``human_visible`` may be absent: empty + has_visibility)."""
    if k == "has_visibility":
        return e.human_visible is not None
    v = getattr(e, k)
    if k == "human_visible":
        return np.zeros(0, dtype=np.int64) if v is None else v.astype(np.int64)
    return v


@dataclass
class DatasetIndex:
    """All good episodes of a dataset (sorted by directory), the skipped ones' errors, and the
    ``dataset_info.json`` content. Save it with :meth:`save` and reload with :meth:`load`."""

    root: Path
    episodes: list[EpisodeIndex]
    errors: list[DatasetError] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    fingerprint: str = ""
    warnings: list[str] = field(default_factory=list)  # usable episodes missing a part

    def __len__(self) -> int:
        return len(self.episodes)

    def __iter__(self) -> Iterator[EpisodeIndex]:
        return iter(self.episodes)

    @property
    def total_steps(self) -> int:
        return sum(e.n_frames for e in self.episodes)

    def get(self, episode_dir: str) -> EpisodeIndex:
        for e in self.episodes:
            if e.episode_dir == episode_dir:
                return e
        raise KeyError(episode_dir)

    def episode_path(self, episode: EpisodeIndex) -> Path:
        return self.root / episode.episode_dir

    def frame_path(self, episode: EpisodeIndex, view: str, kind: str, frame: int) -> Path:
        return frame_path(self.episode_path(episode), view, kind, frame)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the index as Parquet (``.parquet``) or JSON lines (``.jsonl``), atomically."""
        path = Path(path)
        header = {"format": _CACHE_FORMAT, "version": _CACHE_VERSION, "root": str(self.root),
                  "info": self.info, "fingerprint": self.fingerprint,
                  "errors": [e.to_dict() for e in self.errors], "warnings": self.warnings}
        tmp = path.with_name(path.name + ".tmp")
        if path.suffix == ".parquet":
            _save_parquet(tmp, header, self.episodes)
        elif path.suffix == ".jsonl":
            _save_jsonl(tmp, header, self.episodes)
        else:
            raise RobosafeError(f"{path}: an index cache must end in .parquet or .jsonl")
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str], *,
             root: str | os.PathLike[str] | None = None) -> DatasetIndex:
        """Read a cache written by :meth:`save`; ``root`` overrides the stored dataset root."""
        path = Path(path)
        try:
            if path.suffix == ".parquet":
                header, episodes = _load_parquet(path)
            elif path.suffix == ".jsonl":
                header, episodes = _load_jsonl(path)
            else:
                raise RobosafeError(f"{path}: an index cache must end in .parquet or .jsonl")
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise RobosafeError(f"{path}: unreadable index cache ({e})") from None
        if header.get("format") != _CACHE_FORMAT or header.get("version") != _CACHE_VERSION:
            raise RobosafeError(f"{path}: not a robosafe grounding index cache (version "
                                f"{_CACHE_VERSION})")
        return cls(root=Path(root) if root is not None else Path(header["root"]),
                   episodes=episodes, errors=[DatasetError(**e) for e in header["errors"]],
                   info=header["info"], fingerprint=header["fingerprint"],
                   warnings=list(header.get("warnings", [])))


def _episode_from_columns(row: dict[str, Any]) -> EpisodeIndex:
    def ints(v: Any) -> np.ndarray:
        return np.asarray(v, dtype=np.int64)

    return EpisodeIndex(
        episode_dir=str(row["episode_dir"]), episode_id=int(row["episode_id"]),
        scene_id=str(row["scene_id"]), sim_task=str(row["sim_task"]),
        human_type=str(row["human_type"]), n_frames=int(row["n_frames"]),
        human_collision_steps=ints(row["human_collision_steps"]),
        scene_collision_steps=ints(row["scene_collision_steps"]),
        object_collision_steps=ints(row["object_collision_steps"]),
        robot_human_distance=np.asarray(row["robot_human_distance"], dtype=np.float64),
        robot_pos=np.asarray(row["robot_pos"], dtype=np.float64).reshape(-1, 3),
        human_pos=np.asarray(row["human_pos"], dtype=np.float64).reshape(-1, 3),
        max_depth_m=float(row["max_depth_m"]),
        human_visible=np.asarray(row["human_visible"], dtype=bool) if row["has_visibility"]
        else None)


def _save_parquet(path: Path, header: dict[str, Any], episodes: Sequence[EpisodeIndex]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols: dict[str, Any] = {k: [_column(e, k) for e in episodes] for k in _SCALAR_COLUMNS}
    for k in _LIST_COLUMNS:
        # One offsets + one values buffer per column: no per-step Python objects.
        arrs = [_column(e, k).ravel() for e in episodes]
        offsets = np.zeros(len(arrs) + 1, dtype=np.int64)
        np.cumsum([a.size for a in arrs], out=offsets[1:])
        dtype = np.int64 if k.endswith("_steps") or k == "human_visible" else np.float64
        values = np.concatenate(arrs).astype(dtype) if arrs else np.zeros(0, dtype)
        cols[k] = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values))
    table = pa.table(cols).replace_schema_metadata({"robosafe.grounding": json.dumps(header)})
    pq.write_table(table, path)


def _load_parquet(path: Path) -> tuple[dict[str, Any], list[EpisodeIndex]]:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    header = json.loads((table.schema.metadata or {})[b"robosafe.grounding"])
    scalars = {k: table.column(k).to_pylist() for k in _SCALAR_COLUMNS}
    lists = {}
    for k in _LIST_COLUMNS:
        col = table.column(k).combine_chunks()
        off = col.offsets.to_numpy()
        values = col.values.to_numpy(zero_copy_only=False)
        lists[k] = [values[off[i]:off[i + 1]] for i in range(len(col))]
    rows = ({**{k: v[i] for k, v in scalars.items()}, **{k: v[i] for k, v in lists.items()}}
            for i in range(table.num_rows))
    return header, [_episode_from_columns(r) for r in rows]


def _save_jsonl(path: Path, header: dict[str, Any], episodes: Sequence[EpisodeIndex]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(header) + "\n")
        for e in episodes:
            row = {k: _column(e, k) for k in _SCALAR_COLUMNS}
            row.update({k: _column(e, k).ravel().tolist() for k in _LIST_COLUMNS})
            f.write(json.dumps(row) + "\n")


def _load_jsonl(path: Path) -> tuple[dict[str, Any], list[EpisodeIndex]]:
    with open(path, encoding="utf-8") as f:
        header = json.loads(f.readline())
        return header, [_episode_from_columns(json.loads(line)) for line in f if line.strip()]


# ----------------------------------------------------------------------------- reading


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


_WS = re.compile(r"[ \t\n\r]*")


def _json_head(path: Path, wanted: set[str], chunk: int = 1 << 16) -> dict[str, Any] | None:
    """Top-level fields of a JSON object read from the file's first ``chunk`` bytes, stopping as
    soon as all ``wanted`` keys are seen. None if that is not possible (a field before them is
    larger than the chunk, or the text is not JSON): the caller then parses the whole file, which
    also reports any syntax error with its line."""
    with open(path, "rb") as f:
        text = f.read(chunk).decode("utf-8", errors="ignore")
    dec = json.JSONDecoder()
    out: dict[str, Any] = {}
    try:
        i = _WS.match(text, 0).end()  # type: ignore[union-attr]
        if text[i] != "{":
            return None
        i += 1
        while True:
            i = _WS.match(text, i).end()  # type: ignore[union-attr]
            if text[i] == "}":
                return out
            key, i = dec.raw_decode(text, i)
            i = _WS.match(text, i).end()  # type: ignore[union-attr]
            if not isinstance(key, str) or text[i] != ":":
                return None
            value, i = dec.raw_decode(text, _WS.match(text, i + 1).end())  # type: ignore
            out[key] = value
            if wanted <= out.keys():
                return out
            i = _WS.match(text, i).end()  # type: ignore[union-attr]
            if text[i] == ",":
                i += 1
            elif text[i] != "}":
                return None
    except (ValueError, IndexError):
        return None


_g_agents, _g_coll = itemgetter("agents"), itemgetter("collisions")
_g0, _g1, _g_id, _g_pos = itemgetter(0), itemgetter(1), itemgetter("id"), itemgetter("position")
_g_human = itemgetter("did_collide_human")
_g_obj, _g_scene = itemgetter("robot_obj_colls"), itemgetter("robot_scene_colls")
_Steps = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _xyz(points: list[Any]) -> np.ndarray | None:
    if set(map(len, points)) != {3}:
        return None
    # No dtype: numpy then reports strings / None as non-numeric instead of converting them.
    xyz = np.array(list(chain.from_iterable(points)))
    return xyz.astype(np.float64).reshape(-1, 3) if xyz.dtype.kind in "fi" else None


_INT = {int}


def _steps_fast(steps: list[Any]) -> _Steps | None:
    """Columns of the per-step records via C-level itemgetter maps (no per-step Python frames);
    None if anything is unusual, in which case :func:`_steps_checked` finds and names it."""
    try:
        agents = list(map(_g_agents, steps))
        a0, a1 = list(map(_g0, agents)), list(map(_g1, agents))
        if (set(map(len, agents)) != {2} or set(map(_g_id, a0)) != {ROBOT_ID}
                or set(map(_g_id, a1)) != {HUMAN_ID}):
            return None
        robot, human = _xyz(list(map(_g_pos, a0))), _xyz(list(map(_g_pos, a1)))
        if robot is None or human is None:
            return None
        coll = list(map(_g_coll, steps))
        hum_l, obj_l = list(map(_g_human, coll)), list(map(_g_obj, coll))
        scene_l = list(map(_g_scene, coll))
        if (set(map(type, hum_l)) != {bool} or set(map(type, obj_l)) != _INT
                or set(map(type, scene_l)) != _INT):
            return None
        hum, obj, scene = np.array(hum_l), np.array(obj_l), np.array(scene_l)
    except (KeyError, TypeError, IndexError, ValueError, OverflowError):
        return None
    if obj.dtype.kind != "i" or scene.dtype.kind != "i" or obj.min() < 0 or scene.min() < 0:
        return None
    return robot, human, hum, obj.astype(np.int64), scene.astype(np.int64)


def _steps_checked(ep: _Episode, steps: list[Any]) -> _Steps:
    """Slow, exact per-step reader: accepts agents in any order, names the first bad field."""
    f = "trajectory.json"
    n = len(steps)
    robot, human = np.empty((n, 3)), np.empty((n, 3))
    hum = np.empty(n, dtype=bool)
    obj, scene = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    for t, s in enumerate(steps):
        w = f"trajectory[{t}]"
        s = _obj(ep, f, s, w)
        pos = {}
        for j, a in enumerate(_get(ep, f, s, "agents", list, w)):
            a = _obj(ep, f, a, f"{w}.agents[{j}]")
            p = _get(ep, f, a, "position", list, f"{w}.agents[{j}]")
            if len(p) != 3 or not all(isinstance(x, int | float) and not isinstance(x, bool)
                                      for x in p):
                raise ep.error(f, f"{w}.agents[{j}].position must be 3 numbers, got {p!r:.60}")
            pos[_agent_id(ep, f, a, f"{w}.agents[{j}]")] = p
        for aid, role in ((ROBOT_ID, "robot"), (HUMAN_ID, "humanoid")):
            if aid not in pos:
                raise ep.error(f, f"{w}.agents: no {aid!r} ({role}) record")
        robot[t], human[t] = pos[ROBOT_ID], pos[HUMAN_ID]
        c = _obj(ep, f, _get(ep, f, s, "collisions", dict, w), f"{w}.collisions")
        hum[t] = _get(ep, f, c, "did_collide_human", bool, f"{w}.collisions")
        for arr, key in ((obj, "robot_obj_colls"), (scene, "robot_scene_colls")):
            v = _get(ep, f, c, key, int, f"{w}.collisions")
            if v < 0:
                raise ep.error(f, f"{w}.collisions.{key} must be >= 0, got {v}")
            arr[t] = v
    return robot, human, hum, obj, scene


@lru_cache(maxsize=1)
def _agent_spellings() -> tuple[tuple[str, ...], dict[str, str]]:
    import yaml

    doc = yaml.safe_load((Path(__file__).with_name("data") / "agent_ids.yaml").read_text())
    return tuple(doc["id_keys"]), {str(v).lower(): k for k, vs in doc["ids"].items()
                                   for v in vs}


def _agent_id(ep: _Episode, f: str, a: dict[str, Any], where: str) -> str:
    """The App. E id of an agent record, reading other spellings of its key or value (data
    file ``agent_ids.yaml``) with one warning line per episode and spelling."""
    keys, ids = _agent_spellings()
    key = next((k for k in keys if k in a), None)
    if key is None:
        raise ep.error(f, f"{where}: no agent id (one of {', '.join(keys)})")
    raw = a[key]
    if not isinstance(raw, str | int) or isinstance(raw, bool):
        raise ep.error(f, f"{where}.{key}: expected a string, got {raw!r:.40}")
    canon = ids.get(str(raw).lower(), str(raw))
    if (key, raw) != ("id", canon):
        note = (f"agent {key} {raw!r} read as id {canon!r} "
                f"({'robot' if canon == ROBOT_ID else 'humanoid'})")
        if canon in (ROBOT_ID, HUMAN_ID) and note not in ep.notes:
            ep.notes.add(note)
            ep.warn(f, note)
    return canon


def _steps(k: int) -> str:
    return f"{k} step" if k == 1 else f"{k} steps"


def _summary_steps(ep: _Episode, summary: dict[str, Any], key: str, flags: np.ndarray,
                   what: str) -> np.ndarray:
    f = "trajectory.json"
    listed = _get(ep, f, summary, key, list, "collision_summary")
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in listed):
        raise ep.error(f, f"collision_summary.{key} must list integer step indices")
    got, want = np.asarray(listed, dtype=np.int64), np.flatnonzero(flags)
    if not np.array_equal(got, want):
        k = min(got.size, want.size)
        neq = np.flatnonzero(got[:k] != want[:k])
        pos = int(neq[0]) if neq.size else k
        first = min(int(a[pos]) for a in (got, want) if pos < a.size)
        raise ep.error(f, f"collision_summary.{key} lists {_steps(got.size)} but the per-step "
                          f"{what} mark {want.size} (first difference at step {first})")
    return want


def _read_trajectory(ep: _Episode) -> tuple[_Steps, dict[str, np.ndarray]]:
    f = "trajectory.json"
    doc = _obj(ep, f, _load_json(ep, f))
    steps = _get(ep, f, doc, "trajectory", list)
    summary = _obj(ep, f, _get(ep, f, doc, "collision_summary", dict), "collision_summary")
    cols = _steps_fast(steps) if steps else None
    robot, human, hum, obj, scene = cols if cols is not None else _steps_checked(ep, steps)
    bad = ~(np.isfinite(robot).all(axis=1) & np.isfinite(human).all(axis=1))
    if bad.any():
        raise ep.error(f, f"trajectory[{int(np.argmax(bad))}]: non-finite agent position")
    hs = _summary_steps(ep, summary, "human_collision_steps", hum, "did_collide_human flags")
    ss = _summary_steps(ep, summary, "robot_scene_coll_steps", scene > 0,
                        "robot_scene_colls counts")
    os_ = _summary_steps(ep, summary, "robot_obj_coll_steps", obj > 0, "robot_obj_colls counts")
    did = _get(ep, f, summary, "did_collide_human", bool, "collision_summary")
    if did != bool(hs.size):
        raise ep.error(f, f"collision_summary.did_collide_human is {str(did).lower()} but "
                          f"{_steps(hs.size)} set did_collide_human")
    total = _get(ep, f, summary, "total_robot_scene_colls", int, "collision_summary")
    if total != ss.size:
        raise ep.error(f, f"collision_summary.total_robot_scene_colls is {total} but "
                          f"{_steps(ss.size)} have robot_scene_colls > 0")
    total = _get(ep, f, summary, "total_robot_obj_colls", int, "collision_summary")
    if total not in (os_.size, int(obj.sum())):
        raise ep.error(f, f"collision_summary.total_robot_obj_colls is {total} but the steps "
                          f"record {os_.size} collision steps ({int(obj.sum())} collisions)")
    return (robot, human, hum, obj, scene), {"human": hs, "scene": ss, "object": os_}


def read_positions(episode_dir: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray]:
    """Robot and human world positions per step (n, 3) from an episode's trajectory.json,
    validated as the index does."""
    path = Path(episode_dir)
    (robot, human, _, _, _), _ = _read_trajectory(_Episode(path.parent, path.name))
    return robot, human


def _sensor_counts(ep: _Episode, file: str, meta: dict[str, Any], names: Sequence[str],
                   n: int) -> None:
    sensors = _get(ep, file, meta, "sensors", dict)
    for name in names:
        if name not in sensors:
            raise ep.error(file, f"sensors has no {name!r}")
    for name, count in sensors.items():
        if isinstance(count, bool) or not isinstance(count, int):
            raise ep.error(file, f"sensors.{name} must be an integer frame count")
        if not _extra_frame(ep, file, f"sensors.{name}", count, n):
            raise ep.error(file, f"frame counts disagree: sensors.{name} has {count} frames "
                                 f"but trajectory.json has {n} steps")


def _check_ids(ep: _Episode, file: str, doc: dict[str, Any], episode_id: int,
               scene_id: str) -> None:
    for key, want in (("episode_id", episode_id), ("scene_id", scene_id)):
        got = _get(ep, file, doc, key, int) if key == "episode_id" else _scene_id(ep, file, doc)
        if got != want:
            raise ep.error(file, f"{key} {got!r} disagrees with episode_meta.json ({want!r})")


def _camera_frames(ep: _Episode, n: int, deep: bool, episode_id: int, scene_id: str) -> None:
    f = "camera_params.json"
    path = ep.dir / f
    if not path.is_file():
        raise ep.error(f, "missing file")
    wanted = {"episode_id", "scene_id", "num_frames"}
    head = None if deep else _json_head(path, wanted)
    if head is None or not wanted <= head.keys():
        head = _obj(ep, f, _load_json(ep, f))
    _check_ids(ep, f, head, episode_id, scene_id)
    num = _get(ep, f, head, "num_frames", int)
    if not _extra_frame(ep, f, "num_frames", num, n):
        raise ep.error(f, f"frame counts disagree: num_frames is {num} but trajectory.json has "
                          f"{n} steps")
    if deep:
        frames = _get(ep, f, head, "frames", list)
        if len(frames) != num:
            raise ep.error(f, f"frames lists {len(frames)} entries but num_frames is {num}")
        intr = _get(ep, f, head, "intrinsics", dict)
        for name in DEPTH_SENSORS.values():
            if name not in intr:
                raise ep.error(f, f"intrinsics has no {name!r}")


def _frame_name(frame: int, ext: str) -> str:
    return f"{frame:06d}.{ext}"


def _check_frame_files(ep: _Episode, n: int, deep: bool) -> None:
    for view in VIEWS:
        for top, ext in FRAME_KINDS.values():
            d = ep.dir / top / view
            rel = f"{top}/{view}"
            if deep:
                try:
                    names = {x for x in os.listdir(d) if x.endswith("." + ext)}
                except FileNotFoundError:
                    raise ep.error(rel, "missing frame directory") from None
                want = {_frame_name(i, ext) for i in range(n)}
                # one frame past the last step was warned about with the frame counts
                names.discard(_frame_name(n, ext))
                if names != want:
                    missing, extra = sorted(want - names), sorted(names - want)
                    detail = f"missing {missing[0]}" if missing else f"unexpected {extra[0]}"
                    raise ep.error(rel, f"{len(names)} frame files for {n} steps ({detail})")
            elif n:
                for i in (0, n - 1):
                    if not (d / _frame_name(i, ext)).is_file():
                        raise ep.error(f"{rel}/{_frame_name(i, ext)}",
                                       f"missing frame file ({n} steps)")


def planar_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Robot-human distance d on the x-z ground plane (Habitat is y-up)."""
    return np.hypot(a[:, 0] - b[:, 0], a[:, 2] - b[:, 2])


def index_episode(root: str | os.PathLike[str], episode_dir: str, *, images: bool = True,
                  deep: bool = False, warnings: list[str] | None = None) -> EpisodeIndex:
    """Validate and index one episode from its JSON files (raises :class:`DatasetError`).

    Tolerated with one line each appended to ``warnings``: a numeric ``scene_id`` (read as its
    decimal string) and sensor / camera frame counts one more than the trajectory's steps (a
    renderer that also wrote the state after the last step; that frame is ignored)."""
    ep = _Episode(Path(root), episode_dir)
    try:
        return _index_episode(ep, episode_dir, images, deep)
    finally:
        if warnings is not None:
            warnings.extend(ep.warnings)


def _scene_id(ep: _Episode, file: str, doc: dict[str, Any]) -> str:
    value = _get(ep, file, doc, "scene_id", (str, int))
    if isinstance(value, int):
        ep.warn(file, f"scene_id is the number {value}; read as the string '{value}'")
        return str(value)
    return value


def _extra_frame(ep: _Episode, file: str, what: str, count: int, n: int) -> bool:
    """True (with a warning) when ``count`` is the trajectory's ``n`` steps plus one."""
    if count == n + 1:
        ep.warn(file, f"{what} has {count} frames, one more than trajectory.json's {n} steps; "
                      f"the last frame is ignored")
        return True
    return count == n


def _index_episode(ep: _Episode, episode_dir: str, images: bool, deep: bool) -> EpisodeIndex:
    parts = episode_dir.split("/")
    if len(parts) != 4:
        raise ep.error("", "expected <human_type>/<sim_task>/scene_<id>/episode_<NNNN>")
    f = "episode_meta.json"
    meta = _obj(ep, f, _load_json(ep, f))
    episode_id = _get(ep, f, meta, "episode_id", int)
    scene_id = _scene_id(ep, f, meta)
    task = _get(ep, f, meta, "task", str)
    human_type = _get(ep, f, meta, "human_type", str)
    for got, want, what in ((human_type, parts[0], "human_type"), (task, parts[1], "task"),
                            (f"scene_{scene_id}", parts[2], "scene_id"),
                            (episode_id, _dir_number(parts[3]), "episode_id")):
        if got != want:
            raise ep.error(f, f"{what} {got!r} disagrees with the directory {episode_dir!r}")
    rgb = _obj(ep, "rgb_meta.json", _load_json(ep, "rgb_meta.json"))
    depth = _obj(ep, "depth_meta.json", _load_json(ep, "depth_meta.json"))
    for name, doc in (("rgb_meta.json", rgb), ("depth_meta.json", depth)):
        _check_ids(ep, name, doc, episode_id, scene_id)
    max_depth = _get(ep, "depth_meta.json", depth, "max_depth_m", (int, float))
    if not max_depth > 0:
        raise ep.error("depth_meta.json", f"max_depth_m must be > 0, got {max_depth}")
    (robot, human, _, _, _), coll = _read_trajectory(ep)
    n = len(robot)
    _sensor_counts(ep, "rgb_meta.json", rgb, list(RGB_SENSORS.values()), n)
    _sensor_counts(ep, "depth_meta.json", depth, list(DEPTH_SENSORS.values()), n)
    _camera_frames(ep, n, deep, episode_id, scene_id)
    if images:
        _check_frame_files(ep, n, deep)
    return EpisodeIndex(
        episode_dir=episode_dir, episode_id=episode_id, scene_id=scene_id, sim_task=task,
        human_type=human_type, n_frames=n, human_collision_steps=coll["human"],
        scene_collision_steps=coll["scene"], object_collision_steps=coll["object"],
        robot_human_distance=planar_distance(robot, human), robot_pos=robot, human_pos=human,
        max_depth_m=float(max_depth), human_visible=_read_visibility(ep, n))


def _read_visibility(ep: _Episode, n: int) -> np.ndarray | None:
    """Per step, whether any camera sees the human (the generator's ``visibility.json``:
    ``{"human_visible": {view: [0/1 per step]}}``). Absent: None. Unusable: None and one line."""
    f = VISIBILITY_FILE
    if not (ep.dir / f).is_file():
        return None
    try:
        doc = _obj(ep, f, _load_json(ep, f))
        views = doc.get("human_visible")
        if not isinstance(views, dict) or not views:
            raise ep.error(f, "no 'human_visible' object of per-view lists")
        rows = []
        for view, flags in views.items():
            if not isinstance(flags, list) or not all(v in (0, 1) for v in flags) or \
                    not _extra_frame(ep, f, f"human_visible.{view}", len(flags), n):
                raise ep.error(f, f"human_visible.{view}: expected {n} flags 0/1")
            rows.append(np.asarray(flags[:n], dtype=bool))
    except DatasetError as e:
        ep.warn(f, f"{e.message}; distance diagnostics use every frame of this episode")
        return None
    return np.logical_or.reduce(rows)


def _dir_number(name: str) -> int | str:
    tail = name.removeprefix("episode_")
    return int(tail) if tail.isdigit() else name


def _index_chunk(args: tuple[str, list[str], bool, bool]
                 ) -> list[EpisodeIndex | DatasetError | str]:
    """Indexed episodes, errors, and the warnings (str) of the episodes read anyway."""
    root, rels, images, deep = args
    out: list[EpisodeIndex | DatasetError | str] = []
    # json.loads of a trajectory allocates ~10 container objects per step, all freed by
    # reference counting; pausing the cyclic GC saves its repeated scans (~10 % of the time).
    enabled = gc.isenabled()
    gc.disable()
    try:
        for rel in rels:
            warnings: list[str] = []
            try:
                out.append(index_episode(root, rel, images=images, deep=deep,
                                         warnings=warnings))
                out.extend(warnings)
            except DatasetError as e:
                out.append(e.with_traceback(None))
    finally:
        if enabled:
            gc.enable()
    return out


def _fingerprint(root: Path, rels: Sequence[str], deep: bool) -> str:
    """Changes when an episode is added/removed or any JSON file the index reads changes."""
    h = hashlib.blake2b(f"{_CACHE_VERSION}|{deep}".encode(), digest_size=16)
    for rel in [INFO_FILE, *rels]:
        names = (rel,) if rel == INFO_FILE else tuple(f"{rel}/{n}" for n in
                                                      (*_JSON_FILES, VISIBILITY_FILE))
        for name in names:
            try:
                st = os.stat(root / name)
                h.update(f"{name}|{st.st_size}|{st.st_mtime_ns}\n".encode())
            except OSError:
                h.update(f"{name}|-\n".encode())
    return h.hexdigest()


def _missing_parts(root: Path, episodes: Sequence[EpisodeIndex]) -> list[str]:
    """One line per indexed episode without ``topdown.mp4``: its cameras, trajectory and labels
    are intact, so it stays in the index; only the video frame beside a clip's top-down map
    (and the episode-level top-down picture) is unavailable."""
    return [f"{root / e.episode_dir / 'topdown.mp4'}: missing file; the top-down input of "
            f"its clips is the trajectory map alone (no overhead video frame)" for e in episodes
            if not (root / e.episode_dir / "topdown.mp4").is_file()]


def visibility_note(root: Path, episodes: Sequence[EpisodeIndex]) -> str | None:
    """One line when episodes have no usable ``visibility.json`` (App. G.1 scores distances
    only where the human is visible; without it every frame of those episodes is scored)."""
    blind = sum(e.human_visible is None for e in episodes)
    if not blind:
        return None
    return (f"{root}: {blind} of {len(episodes)} episodes have no usable {VISIBILITY_FILE}; "
            "their clips' reference distances cover every frame, whether or not the human is "
            "in view (App. G.1 uses visible frames only)")


def index_dataset(root: str | os.PathLike[str], *,
                  on_error: Callable[[DatasetError], None] | None = None, workers: int = 1,
                  deep: bool = False,
                  cache: str | os.PathLike[str] | None = None,
                  on_warning: Callable[[str], None] | None = None) -> DatasetIndex:
    """Lazily index a TouchSafeBench dataset from its JSON files (no image is opened).

    Bad episodes are skipped, collected in ``DatasetIndex.errors`` and passed to ``on_error``.
    ``workers > 1`` parses episodes in that many processes. ``deep`` also parses
    camera_params.json fully and lists every frame directory. ``cache`` (``.parquet`` or
    ``.jsonl``) is reused when its fingerprint (episode list, sizes and mtimes of the JSON files,
    ``deep``) still matches, and rewritten otherwise; image files are not fingerprinted.
    Episodes indexed without their top-down video are listed in ``DatasetIndex.warnings`` and
    passed to ``on_warning``."""
    root = Path(root)
    info = read_dataset_info(root)
    rels = find_episodes(root)
    fp = _fingerprint(root, rels, deep)
    if cache is not None and Path(cache).is_file():
        try:
            cached = DatasetIndex.load(cache, root=root)
        except RobosafeError:
            cached = None
        if cached is not None and cached.fingerprint == fp:
            for err in cached.errors:
                if on_error is not None:
                    on_error(err)
            return _with_warnings(cached, on_warning)
    images = bool(info.get("images", True))
    n_chunks = 1 if workers <= 1 else min(len(rels), workers * 8)
    chunks = [(str(root), rels[i::n_chunks], images, deep) for i in range(n_chunks)] if rels \
        else []
    if workers <= 1 or len(chunks) <= 1:
        results = [r for c in chunks for r in _index_chunk(c)]
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            results = [r for part in pool.map(_index_chunk, chunks) for r in part]
    parse_warnings = [r for r in results if isinstance(r, str)]
    results = [r for r in results if not isinstance(r, str)]
    episodes, errors = [], []
    for r in sorted(results, key=lambda r: r.episode_dir or ""):
        if isinstance(r, DatasetError):
            errors.append(r)
            if on_error is not None:
                on_error(r)
        else:
            episodes.append(r)
    index = DatasetIndex(root=root, episodes=episodes, errors=errors, info=info, fingerprint=fp,
                         warnings=sorted(parse_warnings))
    if cache is not None:
        index.save(cache)
    return _with_warnings(index, on_warning)


def _with_warnings(index: DatasetIndex, on_warning: Callable[[str], None] | None) -> DatasetIndex:
    index.warnings = index.warnings + _missing_parts(index.root, index.episodes)
    for w in index.warnings if on_warning is not None else ():
        on_warning(w)
    return index


# ----------------------------------------------------------------------------- frames


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


# ----------------------------------------------------------------------------- writing


FrameSource = Callable[[str, int], tuple[np.ndarray, np.ndarray]]
"""(view, frame) -> (rgb uint8 (H, W, 3), depth in metres float (H, W))."""


@dataclass
class EpisodeRecord:
    """Everything :func:`write_episode` writes for one episode (also the synthetic generator's
    ground truth). Per-step arrays have length n; ``cameras`` maps each view to its world
    position (n, 3) and orientation quaternion wxyz (n, 4)."""

    human_type: str
    sim_task: str
    scene_id: str
    episode_id: int
    robot_pos: np.ndarray
    human_pos: np.ndarray
    human_collision: np.ndarray  # bool (n,)
    robot_obj_colls: np.ndarray  # int (n,)
    robot_scene_colls: np.ndarray  # int (n,)
    cameras: dict[str, tuple[np.ndarray, np.ndarray]]
    rigid_objs: list[str] = field(default_factory=list)
    target_objs: list[str] = field(default_factory=list)
    object_labels: dict[str, str] = field(default_factory=dict)
    max_depth_m: float = 10.0
    image_size: tuple[int, int] = (16, 16)  # width, height
    hfov_deg: float = 90.0
    jpeg_quality: int = 85

    @property
    def n_steps(self) -> int:
        return len(self.robot_pos)

    @property
    def episode_dir(self) -> str:
        return (f"{self.human_type}/{self.sim_task}/scene_{self.scene_id}/"
                f"episode_{self.episode_id:04d}")


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Unit quaternions wxyz (n, 4) -> rotation matrices (n, 3, 3)."""
    w, x, y, z = (q / np.linalg.norm(q, axis=1, keepdims=True)).T
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], axis=1)


def write_dataset_info(root: str | os.PathLike[str], *, images: bool = True,
                       **fields: Any) -> Path:
    """Write ``dataset_info.json``; ``images=False`` declares a JSON-only dataset."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    path = root / INFO_FILE
    path.write_text(json.dumps({**fields, "images": images}, indent=2) + "\n", encoding="utf-8")
    return path


def _write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


_STEP = ('    {"agents": [{"id": "agent_0", "position": [%r, %r, %r]}, '
         '{"id": "agent_1", "position": [%r, %r, %r]}], "collisions": '
         '{"did_collide_human": %s, "robot_obj_colls": %d, "robot_scene_colls": %d}}')


def _camera_frame_template() -> str:
    def nums(k: int) -> str:
        return ", ".join(["%.5f"] * k)

    return "    {" + ", ".join(
        f'"{DEPTH_SENSORS[v]}": {{"camera_to_world": [{nums(16)}], "position": [{nums(3)}], '
        f'"rotation_wxyz": [{nums(4)}]}}' for v in VIEWS) + "}"


_CAMERA_FRAME = _camera_frame_template()


def write_episode(root: str | os.PathLike[str], record: EpisodeRecord, *,
                  frames: FrameSource | None = None,
                  topdown: Callable[[int], np.ndarray] | None = None) -> Path:
    """Write one episode in the App. E layout; returns its directory. Without ``frames`` no
    image is written (JSON-only datasets), but every frame count still says n. ``topdown``
    gives the overhead camera's RGB frame of a step, encoded as ``topdown.mp4`` at 30 Hz;
    without it the video is a drawn floor plan."""
    n = record.n_steps
    ep = Path(root) / record.episode_dir
    ep.mkdir(parents=True, exist_ok=True)
    ids = {"episode_id": int(record.episode_id), "scene_id": record.scene_id}
    _write_json(ep / "episode_meta.json", {
        **ids, "task": record.sim_task, "human_type": record.human_type,
        "rigid_objs": list(record.rigid_objs), "target_objs": list(record.target_objs),
        "object_labels": dict(record.object_labels)})
    _write_json(ep / "rgb_meta.json", {**ids, "jpeg_quality": record.jpeg_quality,
                                       "sensors": {RGB_SENSORS[v]: n for v in VIEWS}})
    _write_json(ep / "depth_meta.json", {
        **ids, "depth_format": "uint8", "depth_scale": 255, "depth_unit": "normalized",
        "max_depth_m": record.max_depth_m, "sensors": {DEPTH_SENSORS[v]: n for v in VIEWS}})
    _write_camera_params(ep / "camera_params.json", record, ids)
    _write_trajectory(ep / "trajectory.json", record)
    if topdown is not None:
        write_video(ep / "topdown.mp4", (topdown(t) for t in range(n)))
    elif frames is None or not write_topdown_video(ep / "topdown.mp4", record):
        (ep / "topdown.mp4").write_bytes(MP4_PLACEHOLDER)
    if frames is not None:
        _write_frames(ep, record, frames)
    return ep


def write_topdown_video(path: Path, record: EpisodeRecord, size: int = 64,
                        every: int = 10) -> bool:
    """A real top-down video of the floor plan (robot red, human blue), one frame per ``every``
    steps, when PyAV is installed (the ``video`` extra); False if it is not."""
    try:
        import av
    except ImportError:
        return False
    pts = np.concatenate([record.robot_pos[:, [0, 2]], record.human_pos[:, [0, 2]]])
    lo, span = pts.min(axis=0), np.ptp(pts, axis=0).max() + 1.0

    def pixel(p: np.ndarray) -> tuple[int, int]:
        x, z = ((p[[0, 2]] - lo) / span * (size - 8) + 4).astype(int)
        return z, x

    with av.open(str(path), "w") as out:
        stream = out.add_stream("mpeg4", rate=max(1, 30 // every))
        stream.width = stream.height = size
        stream.pix_fmt = "yuv420p"
        for t in range(0, max(record.n_steps, 1), every):
            img = np.full((size, size, 3), 235, np.uint8)
            for pos, colour in ((record.robot_pos, (220, 40, 40)), (record.human_pos,
                                                                    (40, 60, 220))):
                if record.n_steps:
                    r, c = pixel(pos[t])
                    img[max(r - 2, 0):r + 2, max(c - 2, 0):c + 2] = colour
            for packet in stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return True


def write_video(path: Path, frames: Iterator[np.ndarray], fps: int = 30) -> None:
    """Encode RGB frames (H, W, 3 uint8, even sizes) as MPEG-4 with PyAV (``video`` extra)."""
    try:
        import av
    except ImportError:
        raise RobosafeError(f"{path}: writing a video needs PyAV: pip install "
                            f"'robosafe[video]'") from None
    with av.open(str(path), "w") as out:
        stream = None
        for img in frames:
            if stream is None:
                stream = out.add_stream("mpeg4", rate=fps)
                stream.height, stream.width = img.shape[:2]
                stream.pix_fmt = "yuv420p"
                # ~0.5 bit per pixel: agents stay legible in small overhead frames (the codec's
                # 200 kb/s default blurs them away)
                stream.bit_rate = max(400_000, img.shape[0] * img.shape[1] * fps // 2)
            for packet in stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode() if stream is not None else ():
            out.mux(packet)


def _write_camera_params(path: Path, record: EpisodeRecord, ids: dict[str, Any]) -> None:
    n = record.n_steps
    w, h = record.image_size
    fx = fy = round(float(w / 2 / np.tan(np.radians(record.hfov_deg) / 2)), 6)  # square pixels
    intr = {"resolution": [w, h], "hfov": record.hfov_deg, "fx": fx, "fy": fy, "cx": w / 2,
            "cy": h / 2, "K": [[fx, 0.0, w / 2], [0.0, fy, h / 2], [0.0, 0.0, 1.0]]}
    cols = []
    for v in VIEWS:
        pos, quat = record.cameras[v]
        m = np.zeros((n, 4, 4))
        m[:, :3, :3] = quat_to_matrix(np.asarray(quat, dtype=float))
        m[:, :3, 3] = pos
        m[:, 3, 3] = 1.0
        # column-major: the 4 entries of column 0, then column 1, ...
        cols += [m.transpose(0, 2, 1).reshape(n, 16), pos, quat]
    rows = np.concatenate(cols, axis=1).tolist() if n else []
    head = json.dumps({**ids, "num_frames": n}, indent=2)[:-2]  # global fields first (index)
    intr_text = json.dumps({DEPTH_SENSORS[v]: intr for v in VIEWS})
    body = ",\n".join([_CAMERA_FRAME % tuple(r) for r in rows])
    path.write_text(f'{head},\n  "intrinsics": {intr_text},\n  "frames": [\n{body}\n  ]\n}}\n',
                    encoding="utf-8")


def _write_trajectory(path: Path, record: EpisodeRecord) -> None:
    hum = np.asarray(record.human_collision, dtype=bool)
    obj = np.asarray(record.robot_obj_colls, dtype=np.int64)
    scene = np.asarray(record.robot_scene_colls, dtype=np.int64)
    summary = {
        "did_collide_human": bool(hum.any()),
        "human_collision_steps": np.flatnonzero(hum).tolist(),
        "total_robot_obj_colls": int((obj > 0).sum()),
        "robot_obj_coll_steps": np.flatnonzero(obj > 0).tolist(),
        "total_robot_scene_colls": int((scene > 0).sum()),
        "robot_scene_coll_steps": np.flatnonzero(scene > 0).tolist()}
    flags = np.where(hum, "true", "false").tolist()
    steps = [_STEP % (*r, *h, f, o, s) for r, h, f, o, s in zip(
        np.asarray(record.robot_pos).tolist(), np.asarray(record.human_pos).tolist(), flags,
        obj.tolist(), scene.tolist(), strict=True)]
    # One step per line, so a JSON error's line number points at the step.
    path.write_text('{\n  "collision_summary": ' + json.dumps(summary) + ',\n  "trajectory": [\n'
                    + ",\n".join(steps) + "\n  ]\n}\n", encoding="utf-8")


def _write_frames(ep: Path, record: EpisodeRecord, frames: FrameSource) -> None:
    from PIL import Image

    for v in VIEWS:
        (ep / "rgb_full" / v).mkdir(parents=True, exist_ok=True)
        (ep / "depth" / v).mkdir(parents=True, exist_ok=True)
        for t in range(record.n_steps):
            rgb, depth_m = frames(v, t)
            Image.fromarray(np.asarray(rgb, dtype=np.uint8)).save(
                frame_path(ep, v, "rgb", t), quality=record.jpeg_quality)
            px = np.clip(np.rint(np.asarray(depth_m) / record.max_depth_m * 255), 0, 255)
            Image.fromarray(px.astype(np.uint8)).save(frame_path(ep, v, "depth", t))
