"""The validating lazy index of a TouchSafeBench dataset (paper 003, App. E) and its cache.

:func:`index_dataset` reads only JSON and never opens an image or the video. Per episode it
keeps one compact :class:`EpisodeIndex` (numpy arrays per step); a bad episode is skipped and
reported as a :class:`~robosafe.errors.DatasetError` naming the episode directory and file,
never aborting the build. :meth:`DatasetIndex.save` / :meth:`DatasetIndex.load` keep it as
Parquet or JSON lines. The layout and the decisions where App. E is silent are in
``grounding.layout``.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from robosafe.errors import DatasetError, RobosafeError
from robosafe.grounding.layout import (
    _JSON_FILES,
    DEPTH_SENSORS,
    FRAME_KINDS,
    HUMAN_ID,
    INFO_FILE,
    RGB_SENSORS,
    ROBOT_ID,
    VIEWS,
    VISIBILITY_FILE,
    _Episode,
    _frame_name,
    _get,
    _load_json,
    _obj,
    find_episodes,
    frame_path,
    planar_distance,
    read_dataset_info,
)

_CACHE_FORMAT, _CACHE_VERSION = "robosafe.grounding.index", 2


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
