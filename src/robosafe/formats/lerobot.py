"""LeRobot v3.0 datasets, written and read with pyarrow and PyAV (no lerobot install needed).

Layout (LeRobot ``codebase_version`` "v3.0", learned from lerobot's public source)::

    ROOT/meta/info.json                          codebase_version, fps, features, paths, totals
    ROOT/meta/tasks.parquet                      one row per task: task (pandas index), task_index
    ROOT/meta/episodes/chunk-000/file-000.parquet   one row per episode: length, tasks, where its
                                                 frames and video segments are, per-episode stats
    ROOT/meta/stats.json                         min / max / mean / std / count / q01..q99
    ROOT/meta/robosafe_episodes.parquet          robosafe's own per-episode record (one row
                                                 per episode it wrote, keyed by episode_index)
                                                 and the same record as JSON in the first frame
                                                 of the episode (string feature robosafe.record)
    ROOT/data/chunk-000/file-000.parquet         one row per frame
    ROOT/videos/<key>/chunk-000/file-000.mp4     the frames of every episode of one camera

lerobot's own editing tools (``aggregate_datasets``; ``delete_episodes``, ``split_dataset``,
``merge_datasets`` of ``lerobot.datasets.dataset_tools``) write new datasets from the frames and
lerobot's own tables and drop any other file of ``meta/``; robosafe's records then survive in
the frames: ``robosafe.record`` holds the episode's record as JSON on frame 0 and ``""`` on the
others (a string feature, which lerobot leaves out of its statistics; an episode another tool
appends holds ``""`` throughout and is read as foreign). :meth:`Dataset.record` reads the side
file first, else the frame.

A feature of shape ``(1,)`` is a scalar column, ``(n,)`` a fixed-size list column (what the HF
``datasets`` ``Sequence(length=n)`` feature LeRobot declares becomes in Arrow). Video features
have no column: frame ``i`` of episode ``e`` is the frame at time
``videos/<key>/from_timestamp + i / fps`` of the episode's video file. Episodes are appended to
one data file and one video file per camera (a chunk holds up to ``chunks_size`` files; one
file is enough for the datasets robosafe writes, and readers follow the per-episode indices).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robosafe.errors import DatasetError
from robosafe.formats.lerobot_stats import Stats, as_lists, feature_stats, fold, image_stats
from robosafe.textio import MAX_FIELD_WIDTH, fill_template, inside, parse_json, read_json

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000
DATA_FILE_MB, VIDEO_FILE_MB = 100, 200  # lerobot 0.6's defaults
INFO_PATH, STATS_PATH, TASKS_PATH = "meta/info.json", "meta/stats.json", "meta/tasks.parquet"
RECORDS_PATH = "meta/robosafe_episodes.parquet"
#: the per-frame string feature holding robosafe's per-episode record (module docstring)
RECORD_FEATURE = "robosafe.record"
RECORD_SPEC = {"dtype": "string", "shape": [1], "names": None}
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
DEFAULT_FEATURES = {
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}
_ARROW = {"float32": pa.float32(), "float64": pa.float64(), "int64": pa.int64(),
          "int32": pa.int32(), "bool": pa.bool_(), "uint8": pa.uint8(),
          "string": pa.string()}


def arrow_type(name: str, ft: dict) -> pa.DataType:
    """Arrow type of a numeric feature's column."""
    try:
        base = _ARROW[ft["dtype"]]
    except KeyError:
        raise DatasetError(f"{INFO_PATH}: features.{name}.dtype: unsupported "
                           f"{ft.get('dtype')!r}") from None
    shape = list(ft["shape"])
    if shape == [1]:
        return base
    if len(shape) != 1:
        raise DatasetError(f"{INFO_PATH}: features.{name}.shape: only 1-d features are "
                           f"supported here, got {shape}")
    return pa.list_(base, shape[0])


def _column(values: np.ndarray, typ: pa.DataType) -> pa.Array:
    if pa.types.is_fixed_size_list(typ):
        flat = pa.array(np.ascontiguousarray(values).reshape(-1), typ.value_type)
        return pa.FixedSizeListArray.from_arrays(flat, typ.list_size)
    return pa.array(np.asarray(values).reshape(-1), typ)


# --------------------------------------------------------------------------- writer

def _tasks_table(tasks: list[str]) -> pa.Table:
    """tasks.parquet as pandas writes a DataFrame indexed by ``task`` (what LeRobot reads with
    ``pd.read_parquet``: the task strings become the index)."""
    pandas_meta = {
        "index_columns": ["task"], "column_indexes": [],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64",
             "numpy_type": "int64", "metadata": None},
            {"name": "task", "field_name": "task", "pandas_type": "unicode",
             "numpy_type": "object", "metadata": None}],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.0"}
    schema = pa.schema([("task_index", pa.int64()), ("task", pa.string())],
                       metadata={b"pandas": json.dumps(pandas_meta).encode()})
    return pa.table([pa.array(range(len(tasks)), pa.int64()), pa.array(tasks, pa.string())],
                    schema=schema)


@dataclass
class _Video:
    writer: Any
    stats: list[Stats] = field(default_factory=list)


def check_output(path: Path, overwrite: bool = False) -> None:
    """A dataset may be written at ``path``: new, empty, or a dataset to overwrite; and its
    folder takes new entries (the dataset is written next to it first). One error line naming
    ``path`` otherwise, before any work is done."""
    from robosafe.outputs import check_parent

    path = Path(path)
    if path.exists():
        if not is_dataset(path) and (not path.is_dir() or any(path.iterdir())):
            raise DatasetError(f"{path}: exists and is not a LeRobot dataset; choose another "
                               "output directory")
        if is_dataset(path) and not overwrite:
            raise DatasetError(f"{path}: a dataset already exists here; choose another output "
                               "directory (or --overwrite)")
    check_parent(path)


class DatasetWriter:
    """Write a LeRobot v3.0 dataset episode by episode.

    ``features`` are the numeric per-frame features besides LeRobot's defaults (``{name:
    {"dtype", "shape", "names"}}``); ``cameras`` maps a video feature name to its (height,
    width). ``episode_columns`` are extra per-episode columns of ``meta/episodes`` (Arrow types).
    With :data:`RECORD_FEATURE` among ``features`` (as :data:`RECORD_SPEC`), the writer fills it
    itself from each episode's ``extra`` (module docstring); the frames never carry it.
    """

    def __init__(self, root: str | Path, *, fps: int, features: dict[str, dict],
                 cameras: dict[str, tuple[int, int]] | None = None, robot_type: str | None = None,
                 episode_columns: dict[str, pa.DataType] | None = None, overwrite: bool = False):
        # Files go to a hidden sibling that replaces ``root`` at close(): a failed or killed
        # write leaves no half dataset, and --overwrite only ever replaces a dataset.
        self.final = Path(root)
        check_output(self.final, overwrite)
        self.root = self.final.with_name(f".partial-{self.final.name}")
        shutil.rmtree(self.root, ignore_errors=True)
        try:
            self.root.mkdir(parents=True)
        except OSError as exc:
            from robosafe.outputs import cannot

            raise cannot(self.final, exc) from None
        if int(fps) != fps or fps <= 0:
            raise DatasetError(f"fps must be a positive integer, got {fps}")
        self.fps = int(fps)
        bad = [k for k in features if "/" in k or k in DEFAULT_FEATURES]
        if bad:
            raise DatasetError(f"feature names may not contain '/' or repeat a default "
                               f"feature: {bad}")
        self.features = {k: {**v, "shape": list(v["shape"])} for k, v in features.items()}
        self.cameras = dict(cameras or {})
        self.robot_type = robot_type
        self.episode_columns = dict(episode_columns or {})
        self.schema = pa.schema(
            [(k, arrow_type(k, v)) for k, v in self.features.items()]
            + [(k, arrow_type(k, v)) for k, v in DEFAULT_FEATURES.items()])
        self.tasks: dict[str, int] = {}
        self.rows: list[dict[str, Any]] = []
        self.frames = 0
        # lerobot keeps no statistics of string features
        self.stats: dict[str, list[Stats]] = {k: [] for k in [*self.features, *DEFAULT_FEATURES]
                                              if k != RECORD_FEATURE}
        self.records: list[dict[str, Any]] = []  # robosafe's per-episode side rows
        self._data: pq.ParquetWriter | None = None
        self._videos: dict[str, _Video] = {}

    def _data_writer(self) -> pq.ParquetWriter:
        if self._data is None:
            path = self.root / DATA_PATH.format(chunk_index=0, file_index=0)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._data = pq.ParquetWriter(path, self.schema, compression="snappy")
        return self._data

    def _video(self, key: str, copy: bool) -> _Video:
        """The camera's file: encoded from frames, or the packets of source mp4s copied
        (remuxed) into it. One file is one stream, so a camera does one or the other."""
        from robosafe.formats.video import StreamCopier, VideoWriter

        if key not in self._videos:
            h, w = self.cameras[key]
            path = self.root / VIDEO_PATH.format(video_key=key, chunk_index=0, file_index=0)
            self._videos[key] = _Video(StreamCopier(path, self.fps) if copy
                                       else VideoWriter(path, self.fps, h, w))
        v = self._videos[key]
        if isinstance(v.writer, StreamCopier) != copy:
            raise DatasetError(f"camera {key}: an episode's video cannot be copied into a file "
                               "whose other episodes were encoded, or the other way round")
        return v

    def add_episode(self, frames: dict[str, np.ndarray], task: str,
                    videos: dict[str, Iterable[np.ndarray]] | None = None,
                    extra: dict[str, Any] | None = None,
                    sources: dict[str, Path] | None = None) -> int:
        """Append one episode: ``frames[name]`` is (L,) or (L, n) per feature, ``videos[key]``
        yields L RGB frames. ``sources[key]``, when given, is an mp4 whose stream is copied
        into the camera's file instead of encoding ``videos[key]``, which are then its decoded
        frames (for the statistics). Returns the episode index."""
        lengths = {k: len(v) for k, v in frames.items()}
        if set(frames) != set(self.features) - {RECORD_FEATURE}:
            raise DatasetError(f"episode features {sorted(frames)} differ from the dataset's "
                               f"{sorted(self.features)}")
        n = next(iter(lengths.values()), 0)
        if n == 0 or any(v != n for v in lengths.values()):
            raise DatasetError(f"episode frames have different or zero lengths: {lengths}")
        ep = len(self.rows)
        if RECORD_FEATURE in self.features:
            record = np.full(n, "", dtype=object)
            record[0] = json.dumps(extra or {}, allow_nan=False)
            frames = {**frames, RECORD_FEATURE: record}
        for name, values in frames.items():
            if self.features[name]["dtype"].startswith("float") and \
                    not np.isfinite(values).all():
                # lerobot's tools read NaN as missing data (lerobot-doctor fails the dataset,
                # a merge turns it into nulls no loader reads): a feature says "absent" with
                # a value and a mask, never NaN
                raise DatasetError(f"episode {ep}: feature {name} has NaN or infinite values")
        task_index = self.tasks.setdefault(task, len(self.tasks))
        cols = dict(frames)
        cols |= {"timestamp": (np.arange(n) / self.fps).astype(np.float32),
                 "frame_index": np.arange(n, dtype=np.int64),
                 "episode_index": np.full(n, ep, dtype=np.int64),
                 "index": np.arange(self.frames, self.frames + n, dtype=np.int64),
                 "task_index": np.full(n, task_index, dtype=np.int64)}
        batch = pa.record_batch([_column(cols[f.name], f.type) for f in self.schema],
                                schema=self.schema)
        self._data_writer().write_batch(batch)
        # the columns and their order of lerobot 0.6's writer: a dataset lerobot appends to
        # (resume) gets episode files that must load beside these as one table
        row: dict[str, Any] = {
            "episode_index": ep, "tasks": [task], "length": n,
            "data/chunk_index": 0, "data/file_index": 0,
            "dataset_from_index": self.frames, "dataset_to_index": self.frames + n}
        ep_stats: dict[str, Stats] = {}
        for name in self.stats:
            ep_stats[name] = feature_stats(self._stats_values(name, cols[name], n))
        for key in self.cameras:
            if videos is None or key not in videos:
                raise DatasetError(f"episode {ep}: no frames for camera {key}")
            source = (sources or {}).get(key)
            v = self._video(key, copy=source is not None)
            start = v.writer.frames
            shot = np.stack(list(videos[key]))
            if shot.shape[0] != n:
                raise DatasetError(f"episode {ep}: camera {key} has {shot.shape[0]} frames "
                                   f"for {n} data frames")
            if source is not None:
                if (copied := v.writer.add(source)) != n:
                    raise DatasetError(f"episode {ep}: camera {key}: {source} has {copied} "
                                       f"frames for {n} data frames")
            else:
                for img in shot:
                    v.writer.add(img)
            ep_stats[key] = image_stats(shot)
            row |= {f"videos/{key}/chunk_index": 0, f"videos/{key}/file_index": 0,
                    f"videos/{key}/from_timestamp": start / self.fps,
                    f"videos/{key}/to_timestamp": (start + n) / self.fps}
        for name, st in ep_stats.items():
            (self._videos[name].stats if name in self._videos else self.stats[name]).append(st)
            row |= {f"stats/{name}/{k}": v for k, v in as_lists(st).items()}
        row |= {"meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0}
        self.rows.append(row)
        if extra:
            self.records.append({"episode_index": ep, "length": n,
                                 "dataset_from_index": self.frames, **extra})
        self.frames += n
        return ep

    def _stats_values(self, name: str, values: np.ndarray, n: int) -> np.ndarray:
        """A feature's values as lerobot's writer holds them when it computes statistics."""
        if name == "timestamp":  # Python floats frame_index / fps there
            return np.arange(n) / self.fps
        if name in DEFAULT_FEATURES:
            return np.asarray(values, dtype=np.int64)
        return np.asarray(values, dtype=self.features[name]["dtype"]).reshape(n, -1) \
            if self.features[name]["shape"] != [1] else \
            np.asarray(values, dtype=self.features[name]["dtype"]).reshape(n)

    def close(self, sidecar: dict[str, Any] | None = None) -> Path:
        """Finish the files and write meta/ (``sidecar`` goes to meta/robosafe.json)."""
        if not self.rows:
            self.abort()
            raise DatasetError("no episodes to write")
        self._data_writer().close()
        features = dict(self.features)
        for key, (h, w) in self.cameras.items():
            v = self._videos[key]
            v.writer.close()
            from robosafe.formats.video import probe

            features[key] = {"dtype": "video", "shape": [h, w, 3],
                             "names": ["height", "width", "channels"],
                             "info": probe(v.writer.path) | {"is_depth_map": False}}
        features |= DEFAULT_FEATURES
        self._write_episodes()
        tasks = sorted(self.tasks, key=self.tasks.get)
        pq.write_table(_tasks_table(tasks), self.root / TASKS_PATH)
        stats = {k: as_lists(fold(v)) for k, v in self.stats.items()}
        stats |= {k: as_lists(fold(v.stats)) for k, v in self._videos.items()}
        _write_json(self.root / STATS_PATH, stats)
        self._write_records()
        info = {
            "codebase_version": CODEBASE_VERSION, "robot_type": self.robot_type,
            "total_episodes": len(self.rows), "total_frames": self.frames,
            "total_tasks": len(tasks), "chunks_size": CHUNKS_SIZE,
            "data_files_size_in_mb": DATA_FILE_MB, "video_files_size_in_mb": VIDEO_FILE_MB,
            "fps": self.fps, "splits": {"train": f"0:{len(self.rows)}"},
            "data_path": DATA_PATH, "video_path": VIDEO_PATH if self.cameras else None,
            "features": features}
        if sidecar is not None:
            _write_json(self.root / "meta" / "robosafe.json", sidecar)
        _write_json(self.root / INFO_PATH, info)
        if self.final.exists():
            shutil.rmtree(self.final)
        os.replace(self.root, self.final)
        return self.final

    def _write_records(self) -> None:
        """robosafe's per-episode record beside lerobot's tables, where lerobot's writer leaves
        it alone: extra columns in meta/episodes made lerobot's own episode files (resume)
        unloadable beside robosafe's."""
        if not self.records:
            return
        names = list(dict.fromkeys(k for r in self.records for k in r))
        types = {"episode_index": pa.int64(), "length": pa.int64(),
                 "dataset_from_index": pa.int64(), **self.episode_columns}
        arrays = [pa.array([r.get(k) for r in self.records], types.get(k)) for k in names]
        pq.write_table(pa.Table.from_arrays(arrays, names=names), self.root / RECORDS_PATH)

    def _write_episodes(self) -> None:
        names = list(dict.fromkeys(k for r in self.rows for k in r))
        arrays, fields = [], []
        for name in names:
            values = [r.get(name) for r in self.rows]
            if name in self.episode_columns:
                typ = self.episode_columns[name]
            elif name == "tasks":
                typ = pa.list_(pa.string())
            elif name.startswith("stats/"):
                inner = pa.int64() if name.endswith("/count") else pa.float64()
                depth = _depth(next(v for v in values if v is not None))
                typ = inner
                for _ in range(depth):
                    typ = pa.list_(typ)
            elif name.endswith("_timestamp"):
                typ = pa.float64()
            elif name.endswith("_index") or name in ("length",):
                typ = pa.int64()
            else:  # an extra column the caller did not type
                typ = pa.array(values).type
            arrays.append(pa.array(values, typ))
            fields.append((name, typ))
        path = self.root / EPISODES_PATH.format(chunk_index=0, file_index=0)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_arrays(arrays, schema=pa.schema(fields)), path)

    def abort(self) -> None:
        """Close what is open and remove the partial files."""
        if self._data is not None:
            self._data.close()
        for v in self._videos.values():
            v.writer.close()
        shutil.rmtree(self.root, ignore_errors=True)


def _depth(v: Any) -> int:
    d = 0
    while isinstance(v, list):
        d += 1
        v = v[0] if v else None
    return d


def _write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=4, allow_nan=False), encoding="utf-8")
    os.replace(tmp, path)


# --------------------------------------------------------------------------- reader
#
# A dataset may come from anywhere, so the reader trusts nothing in it: every path it names is
# filled from a checked template and must stay inside the root (symlinks resolved), JSON is
# bounded in size and depth, and every field is type- and range-checked before use, so a
# malformed dataset is one DatasetError line, never a traceback or a file outside the root.

SIDECAR_PATH = "meta/robosafe.json"
_INDEX_LIMIT = 10 ** MAX_FIELD_WIDTH  # an index a path template can print
_INDEX_COLUMNS = ("episode_index", "frame_index", "index", "task_index")


def is_dataset(path: str | Path) -> bool:
    return (Path(path) / INFO_PATH).is_file()


def _index(v: Any, where: str, lo: int = 0) -> int:
    """A non-negative integer field (an index, a length) of a dataset file."""
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v < _INDEX_LIMIT:
        raise DatasetError(f"{where}: expected an integer >= {lo}, got {v!r}")
    return v


def _fps(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
            math.isfinite(v) and v > 0):
        raise DatasetError(f"{where}: fps must be a positive number, got {v!r}")
    return v


def _features(v: Any, where: str) -> dict[str, dict]:
    if not isinstance(v, dict):
        raise DatasetError(f"{where}: features must be an object of name -> feature")
    for name, ft in v.items():
        if not isinstance(ft, dict) or not isinstance(ft.get("dtype"), str):
            raise DatasetError(f"{where}: features.{name}: expected an object with a dtype")
        shape = ft.get("shape")
        if not isinstance(shape, list) or not all(
                isinstance(n, int) and not isinstance(n, bool) and 0 <= n < _INDEX_LIMIT
                for n in shape):
            raise DatasetError(f"{where}: features.{name}.shape: expected a list of sizes, "
                               f"got {shape!r}")
    return v


class Dataset:
    """A LeRobot v3.0 dataset on disk: info, tasks, episodes, per-episode frames and videos."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        info_path = self.root / INFO_PATH
        if not info_path.is_file():
            raise DatasetError(f"{self.root}: not a LeRobot dataset (no {INFO_PATH})")
        info = read_json(self._file(INFO_PATH, INFO_PATH), error=DatasetError)
        if not isinstance(info, dict):
            raise DatasetError(f"{info_path}: expected a JSON object")
        version = info.get("codebase_version")
        if version != CODEBASE_VERSION:
            raise DatasetError(f"{info_path}: codebase_version {version!r}; robosafe reads "
                               f"LeRobot {CODEBASE_VERSION} datasets (convert older ones with "
                               "lerobot's converter)")
        for key in ("fps", "features", "data_path"):
            if key not in info:
                raise DatasetError(f"{info_path}: missing field {key!r}")
        self.info = info
        self.fps = _fps(info["fps"], str(info_path))
        self.features: dict[str, dict] = _features(info["features"], str(info_path))
        # a template that leaves the folder for any index is one error here, not one per
        # episode later; each filled path is checked again when it is read (symlinks)
        self._resolve("data_path", "chunk 0, file 0", chunk_index=0, file_index=0)
        if self.video_keys:
            self._resolve("video_path", "chunk 0, file 0", video_key=self.video_keys[0],
                          chunk_index=0, file_index=0)
        self.tasks = self._tasks()
        self.episodes = self._episodes()
        self.notes: list[str] = []
        self._attach_records()
        self.robosafe = self._sidecar()
        self._tables: dict[str, pa.Table] = {}

    def _file(self, rel: str, field: str) -> Path:
        """``root / rel``, which must stay inside the dataset folder."""
        return inside(self.root, rel, field, DatasetError)

    def _sidecar(self) -> dict | None:
        if not (self.root / SIDECAR_PATH).is_file():
            return None
        doc = read_json(self._file(SIDECAR_PATH, SIDECAR_PATH), error=DatasetError)
        if not isinstance(doc, dict):
            raise DatasetError(f"{self.root / SIDECAR_PATH}: expected a JSON object")
        return doc

    @property
    def video_keys(self) -> list[str]:
        return [k for k, v in self.features.items() if v.get("dtype") == "video"]

    def _read(self, path: Path) -> pa.Table:
        try:
            return pq.read_table(path)
        except (pa.ArrowException, OSError) as exc:
            raise DatasetError(f"{path}: not a readable Parquet file: {exc}") from None

    def _tasks(self) -> list[str]:
        path = self.root / TASKS_PATH
        if not path.is_file():
            raise DatasetError(f"{path}: missing (the dataset's task strings)")
        t = self._read(self._file(TASKS_PATH, TASKS_PATH))
        if "task_index" not in t.column_names:
            raise DatasetError(f"{path}: no task_index column")
        text = next((c for c in ("task", "__index_level_0__") if c in t.column_names), None)
        if text is None:
            raise DatasetError(f"{path}: no task column")
        index, strings = t.column("task_index").to_pylist(), t.column(text).to_pylist()
        out: list[str | None] = [None] * t.num_rows
        for i, s in zip(index, strings):
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(out) \
                    or out[i] is not None or not isinstance(s, str):
                raise DatasetError(f"{path}: task_index must number the {len(out)} task "
                                   f"strings 0..{len(out) - 1} once each (got {i!r}: {s!r})")
            out[i] = s
        return out  # type: ignore[return-value]

    def _episodes(self) -> list[dict[str, Any]]:
        folder = self.root / "meta" / "episodes"
        files = sorted(folder.glob("chunk-*/file-*.parquet"))
        if not files:
            raise DatasetError(f"{folder}: no episode metadata files")
        rows, seen = [], {}
        for f in files:
            table = self._read(self._file(f.relative_to(self.root).as_posix(),
                                          "meta/episodes"))
            for need in ("episode_index", "length", "data/chunk_index", "data/file_index"):
                if need not in table.column_names:
                    raise DatasetError(f"{f}: missing column {need!r}")
            for k, r in enumerate(table.to_pylist()):
                where = f"{f}: row {k}"
                idx = _index(r["episode_index"], f"{where}: episode_index")
                _index(r["length"], f"{where}: length", lo=1)
                _index(r["data/chunk_index"], f"{where}: data/chunk_index")
                _index(r["data/file_index"], f"{where}: data/file_index")
                if idx in seen:  # counting it twice would be a silently wrong n
                    raise DatasetError(f"{where}: episode {idx} is listed twice in "
                                       f"meta/episodes (also {seen[idx]}); a dataset lists "
                                       "each episode once")
                seen[idx] = where
                rows.append(r)
        return sorted(rows, key=lambda r: r["episode_index"])

    def _attach_records(self) -> None:
        """Merge robosafe's per-episode records (``meta/robosafe_episodes.parquet``) into the
        episode rows they describe. A record is used only when its episode's index, length and
        first frame still match: another tool may have rewritten or renumbered the episodes."""
        path = self.root / RECORDS_PATH
        if not path.is_file():
            return
        table = self._read(self._file(RECORDS_PATH, RECORDS_PATH))
        keys = ("episode_index", "length", "dataset_from_index")
        for need in keys:
            if need not in table.column_names:
                raise DatasetError(f"{path}: missing column {need!r}")
        rows = {r["episode_index"]: r for r in self.episodes}
        stale, seen = [], set()
        for k, rec in enumerate(table.to_pylist()):
            idx = _index(rec["episode_index"], f"{path}: row {k}: episode_index")
            if idx in seen:
                raise DatasetError(f"{path}: row {k}: episode {idx} has two records")
            seen.add(idx)
            row = rows.get(idx)
            if row is None or any(row.get(c) != rec[c] for c in keys[1:]):
                stale.append(idx)
                continue
            row.update({c: v for c, v in rec.items() if c not in keys})
        if stale:
            self.notes.append(f"{RECORDS_PATH}: records of episodes {_span(stale)} match no "
                              "episode of the same index, length and first frame; not used")

    def episode(self, index: int) -> dict[str, Any]:
        for r in self.episodes:
            if r["episode_index"] == index:
                return r
        raise DatasetError(f"{self.root}: no episode {index}")

    def record(self, index: int, frames: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
        """The episode's ``meta/episodes`` row with robosafe's record (``robosafe/*`` keys):
        from :data:`RECORDS_PATH` where it still matches the episode, else from the episode's
        first ``robosafe.record`` frame (what survives lerobot's editing tools), else the row
        alone. ``frames``: the episode's, when already read."""
        row = self.episode(index)
        if any(k.startswith("robosafe/") for k in row) or RECORD_FEATURE not in self.features:
            return row
        f = self.frames(index) if frames is None else frames
        values = f.get(RECORD_FEATURE)
        if values is None or not len(values) or not values[0]:
            return row
        where = f"{self.root}: episode {index}: {RECORD_FEATURE}"
        rec = parse_json(str(values[0]), where, DatasetError)
        if not isinstance(rec, dict):
            raise DatasetError(f"{where}: expected a JSON object")
        return {**row, **{k: v for k, v in rec.items() if str(k).startswith("robosafe/")}}

    def task(self, task_index: Any, where: str) -> str:
        """The task string of a frame's ``task_index``, which must be a row of tasks.parquet."""
        if isinstance(task_index, (int, np.integer)) and 0 <= task_index < len(self.tasks):
            return self.tasks[int(task_index)]
        raise DatasetError(f"{where}: task_index {task_index!r} is not a row of {TASKS_PATH} "
                           f"({len(self.tasks)} tasks)")

    def _resolve(self, template_key: str, where: str, **values: int | str) -> Path:
        """The file a path template of meta/info.json names for one episode."""
        rel = fill_template(self.info.get(template_key), f"{self.root / INFO_PATH}: "
                            f"{template_key}", values, DatasetError)
        return self._file(rel, f"{INFO_PATH}: {template_key} ({where})")

    def frames(self, index: int) -> dict[str, np.ndarray]:
        """Every non-video feature of one episode as numpy, (L,) or (L, n), in frame order."""
        row = self.episode(index)
        path = self._resolve("data_path", f"episode {index}",
                             chunk_index=row["data/chunk_index"],
                             file_index=row["data/file_index"])
        key = str(path)
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = self._read(path)
        for name in _INDEX_COLUMNS:
            if name in table.column_names:
                col = table.column(name)
                if not pa.types.is_integer(col.type) or col.null_count:
                    raise DatasetError(f"{path}: column {name!r} must be integers without "
                                       f"nulls (is {col.type}, {col.null_count} nulls)")
            elif name in ("episode_index", "frame_index"):
                raise DatasetError(f"{path}: no {name} column")
        mask = table.column("episode_index").to_numpy() == index
        rows = np.flatnonzero(mask)
        if rows.size != row["length"]:
            raise DatasetError(f"{path}: episode {index} has {rows.size} frames, "
                               f"meta/episodes says {row['length']}")
        part = table.take(pa.array(rows))
        out = {}
        for name in part.column_names:
            out[name] = _numpy(part.column(name), f"{path}: column {name!r}")
        order = np.argsort(out["frame_index"], kind="stable")
        return {k: v[order] for k, v in out.items()}

    def video(self, key: str, index: int) -> np.ndarray:
        """The episode's frames of one camera, (L, H, W, 3) uint8."""
        from robosafe.formats.video import read_frames

        row = self.episode(index)
        where = f"{self.root}: meta/episodes: episode {index}"
        cols = [f"videos/{key}/{c}" for c in ("chunk_index", "file_index", "from_timestamp",
                                              "to_timestamp")]
        if any(c not in row for c in cols):
            raise DatasetError(f"{where}: no {', '.join(c for c in cols if c not in row)}")
        path = self._resolve("video_path", f"episode {index}", video_key=key,
                             chunk_index=_index(row[cols[0]], f"{where}: {cols[0]}"),
                             file_index=_index(row[cols[1]], f"{where}: {cols[1]}"))
        start, stop = (_timestamp(row[c], f"{where}: {c}") * self.fps for c in cols[2:])
        return np.stack(list(read_frames(path, round(start), round(stop))))


def _span(indices: list[int]) -> str:
    """Episode indices for a message: '3', '3-5' or '3, 7, 9' (at most 10 named)."""
    xs = sorted(indices)
    if len(xs) > 1 and xs == list(range(xs[0], xs[-1] + 1)):
        return f"{xs[0]}-{xs[-1]}"
    return ", ".join(map(str, xs[:10])) + (f" (+{len(xs) - 10} more)" if len(xs) > 10 else "")


def _timestamp(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
            math.isfinite(v) and 0 <= v < _INDEX_LIMIT):
        raise DatasetError(f"{where}: expected a time in seconds, got {v!r}")
    return float(v)


def _values(arr: pa.Array, where: str) -> np.ndarray:
    """A flat Arrow array as numpy; nulls only where they become NaN (floats)."""
    if arr.null_count and not pa.types.is_floating(arr.type):
        raise DatasetError(f"{where}: {arr.null_count} null values in a {arr.type} column")
    return arr.to_numpy(zero_copy_only=False)


def _numpy(col: pa.ChunkedArray, where: str) -> np.ndarray:
    arr = col.combine_chunks()
    if pa.types.is_fixed_size_list(arr.type) or pa.types.is_list(arr.type) or \
            pa.types.is_large_list(arr.type):
        if arr.null_count:
            raise DatasetError(f"{where}: {arr.null_count} null rows")
        if pa.types.is_fixed_size_list(arr.type):
            width = arr.type.list_size
        else:
            sizes = np.diff(arr.offsets.to_numpy())
            if len(arr) and (sizes != sizes[0]).any():
                raise DatasetError(f"{where}: rows of different lengths")
            width = int(sizes[0]) if len(arr) else 0
        return _values(arr.flatten(), where).reshape(len(arr), width)
    return _values(arr, where)
