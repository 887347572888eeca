"""Property: random mutations of a valid small LeRobot dataset (truncated and garbled files,
JSON fields of the wrong type, huge, negative, paths with '..' or absolute, symlinks leading
outside) run through `score` and `import lerobot` never print a traceback, exit 0 or 2, read
no file outside the dataset and write nothing but the --out file. Seeded, in-process."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from factories import two_episodes, write_robosafe
from typer.testing import CliRunner

from robosafe.cli import app
from robosafe.formats.traces import REPLAY_COLUMN, TRACE_COLUMN

DATA = "data/chunk-000/file-000.parquet"
EPISODES = "meta/episodes/chunk-000/file-000.parquet"
RECORDS = "meta/robosafe_episodes.parquet"  # robosafe's per-episode records
FILES = ("meta/info.json", "meta/robosafe.json", "meta/tasks.parquet", EPISODES, DATA)
CASES = 120

_opened: list[str] | None = None  # paths opened while a command runs (the audit hook)


def _audit(event: str, args: tuple) -> None:
    if _opened is not None and event == "open" and isinstance(args[0], (str, os.PathLike)):
        _opened.append(os.fspath(args[0]))


sys.addaudithook(_audit)  # process-wide and permanent; records only while _opened is a list


def hostile(rng: np.random.Generator, outside: Path) -> object:
    pool = [None, -1, 0, 2 ** 63, 1e308, float("nan"), "x", [], {}, True, "a" * 5000,
            "../outside/" + DATA, str(outside / DATA), "/etc/hostname",
            "{chunk_index:999999999d}", "{0}", "{chunk_index.real}", "[" * 3000 + "]" * 3000,
            "../" * 30 + str(outside / "x").lstrip("/"), [[1, 2], {"a": None}]]
    return pool[rng.integers(len(pool))]


def set_json(path: Path, keys: list[str], value: object) -> None:
    doc = json.loads(path.read_text())
    node = doc
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = value
    path.write_text(json.dumps(doc))


def mutate(root: Path, outside: Path, rng: np.random.Generator) -> str:
    """Apply one random mutation to the dataset at ``root``; returns what it did."""
    kind = int(rng.integers(8))
    rel = FILES[rng.integers(len(FILES))]
    value = hostile(rng, outside)
    if kind == 0:
        key = ["fps", "features", "data_path", "video_path", "codebase_version"][
            rng.integers(5)]
        set_json(root / "meta/info.json", [key], value)
        return f"info.{key} = {value!r:.60}"
    if kind == 1:
        info = json.loads((root / "meta/info.json").read_text())
        name = list(info["features"])[rng.integers(len(info["features"]))]
        key = ["dtype", "shape", "names"][rng.integers(3)]
        set_json(root / "meta/info.json", ["features", name, key], value)
        return f"features.{name}.{key} = {value!r:.60}"
    if kind == 2:
        key = ["format", "tasks", "host"][rng.integers(3)]
        set_json(root / "meta/robosafe.json", [key], value)
        return f"robosafe.{key} = {value!r:.60}"
    if kind == 3:
        data = (root / rel).read_bytes()
        (root / rel).write_bytes(data[:rng.integers(len(data))])
        return f"truncate {rel}"
    if kind == 4:
        data = np.frombuffer((root / rel).read_bytes(), np.uint8).copy()
        data[rng.integers(data.size, size=8)] = rng.integers(256, size=8)
        (root / rel).write_bytes(data.tobytes())
        return f"garble {rel}"
    if kind == 5:
        (root / rel).unlink()
        (root / rel).symlink_to(outside / rel)
        return f"symlink {rel} -> outside"
    if kind == 6:
        name = ["episode_index", "length", "data/chunk_index", "data/file_index",
                TRACE_COLUMN][rng.integers(5)]
        target = RECORDS if name == TRACE_COLUMN else EPISODES
        t = pq.read_table(root / target)
        col = t.column(name).to_pylist()
        if name == TRACE_COLUMN:
            head = json.loads(col[0])
            key = ["success", "families", "body_names", "dt", "episode_id", "meta"][
                rng.integers(6)]
            head[key] = value
            col[0] = json.dumps(head)
        else:
            col[0] = [None, -1, 2 ** 62, col[1]][rng.integers(4)]  # col[1]: a duplicate
        i = t.column_names.index(name)
        pq.write_table(t.set_column(i, name, pa.array(col, t.schema.field(name).type)),
                       root / target)
        return f"episodes.{name}[0] = {col[0]!r:.60}"
    t = pq.read_table(root / DATA)
    name = t.column_names[rng.integers(t.num_columns)]
    col = t.column(name).combine_chunks()
    if pa.types.is_fixed_size_list(col.type):
        flat = col.flatten().to_numpy(zero_copy_only=False).astype(float)
        flat[rng.integers(flat.size)] = [np.nan, 1e308, -1e308, np.inf][rng.integers(4)]
        new = pa.FixedSizeListArray.from_arrays(pa.array(flat), col.type.list_size)
    else:
        values = col.to_pylist()
        values[rng.integers(len(values))] = None
        new = pa.array(values, col.type)
    pq.write_table(t.set_column(t.column_names.index(name), name, new), root / DATA)
    return f"data.{name}: one value NaN / huge / null"


def listing(top: Path, skip: Path) -> dict[str, tuple]:
    return {str(p): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in top.rglob("*")
            if skip not in p.parents and p != skip}


@pytest.fixture(scope="module")
def valid(tmp_path_factory) -> Path:
    """A valid dataset with every per-episode column robosafe reads (trace, replay)."""
    root = tmp_path_factory.mktemp("valid") / "ds"
    cell = json.dumps({"task_id": "t", "seed": 0, "language_level": 0, "visual_level": 0})
    write_robosafe(root, two_episodes(), next_success=[True, True],
                   extra=[{REPLAY_COLUMN: cell}] * 2, sidecar={"tasks": {"t": "x"}})
    return root


@pytest.mark.slow
def test_mutated_datasets_never_escape_or_crash(valid, tmp_path, monkeypatch):
    global _opened
    read: list[str] = []
    real = pq.read_table
    monkeypatch.setattr(pq, "read_table", lambda src, *a, **k: (read.append(str(src)),
                                                                 real(src, *a, **k))[1])
    runner = CliRunner()
    rng = np.random.default_rng(20240601)
    outside = tmp_path / "outside"
    shutil.copytree(valid, outside)  # a valid copy: a path that escapes would find data
    for case in range(CASES):
        root, out = tmp_path / f"c{case}" / "ds", tmp_path / f"c{case}" / "out"
        shutil.copytree(valid, root)
        out.mkdir()
        what = mutate(root, outside, rng)
        before = listing(tmp_path, out)
        for args in (["score", str(root), "--json", "--bootstrap", "0"],
                     ["import", "lerobot", str(root), "--out", str(out / "t.jsonl"), "--json"]):
            read.clear()
            _opened = []
            try:
                res = runner.invoke(app, args)
            finally:
                seen, _opened = [*read, *_opened], None
            label = f"case {case} ({what}): {' '.join(args[:2])}"
            assert res.exception is None or isinstance(res.exception, SystemExit), \
                f"{label}: {res.exception!r}"
            assert "Traceback" not in res.output + res.stderr, label
            assert res.exit_code in (0, 2), f"{label}: exit {res.exit_code}"
            if res.exit_code == 0 and args[0] == "score":
                json.loads(res.stdout)  # valid JSON: no NaN or Infinity
            for p in seen:  # under the test's folder, only the dataset and --out are opened
                full = Path(p).resolve()
                if full.is_relative_to(tmp_path.resolve()):
                    assert full.is_relative_to(root.resolve()) or \
                        full.is_relative_to(out.resolve()), f"{label}: read {p}"
        assert listing(tmp_path, out) == before, f"case {case} ({what}): wrote outside --out"
