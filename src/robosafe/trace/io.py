"""Read and write episode files: ``.json``, ``.jsonl`` (``.jsonl.gz``) and ``.parquet``.

The format is chosen by suffix. JSON and JSONL hold App. B records and go through
:func:`episode_from_record` / :func:`episode_to_record`; Parquet is a columnar archive with one
row per episode (layout in ``PARQUET_SCHEMA``) read in row batches whose list columns are turned
into numpy through Arrow's offsets/values buffers. Every episode, whatever its format, passes
the rules of :func:`check_episode`, so the same mistake gives the same message.

Parquet batches are validated as a whole: :func:`suspect_rows` runs the value rules on the flat
values of each list column, the JSON-string columns are parsed once per distinct string, and
only rows flagged there are read and checked one by one (:func:`_row_episode`,
:func:`check_episode`) to report their exact error. The arrays of a Parquet episode are
writable numpy views into the buffers Arrow decoded for its batch (never the file itself; a
copy is made when Arrow's buffer is read-only), reshaped, without a per-episode copy. Each
episode's arrays cover only its own row, so writing to one episode never changes another;
quaternions that need normalising are new arrays. The price: an episode that is kept alive keeps
its whole batch's buffers alive (about ``batch_size`` episodes of data), so a caller that keeps
a few episodes out of many should copy their arrays or read with a smaller ``batch_size``.
Name tuples and ``TaskTags`` (immutable) are shared between the episodes of a batch;
``body_roles`` and ``meta`` dicts are each episode's own.

Bad episodes: with ``on_error`` a bad line/row/record is reported and reading continues; without
it the first one is raised. File-level problems (missing file, unknown suffix, unreadable JSON
document or Parquet file, unknown format version) always raise one :class:`TraceError`.
"""

from __future__ import annotations

import gzip
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robosafe.errors import DEEP_JSON, RobosafeError, TraceError
from robosafe.textio import MAX_JSON_DOCUMENT, MAX_TRACE_LINE, bounded_lines, bounded_read
from robosafe.trace.episode import Episode, TaskTags
from robosafe.trace.validate import (
    BatchCheck,
    Flat,
    Header,
    check_episode,
    episode_from_record,
    episode_to_record,
    names_ok,
    roles_ok,
    suspect_rows,
    task_tags_from_record,
    unposed_humans,
)

FORMAT_VERSION = "1"
"""Version of the Parquet layout, stored under ``robosafe.trace_format`` in the file metadata."""
_VERSION_KEY = b"robosafe.trace_format"
_WRITE_BATCH = 512  # episodes per Parquet row group on write ...
_WRITE_STEPS = 1 << 20  # ... or fewer, once they hold this many steps

_F64, _I32, _I64 = pa.list_(pa.float64()), pa.list_(pa.int32()), pa.list_(pa.int64())
_NAMES = pa.list_(pa.string())
PARQUET_SCHEMA = pa.schema([
    ("episode_id", pa.string()), ("benchmark", pa.string()), ("task_id", pa.string()),
    ("success", pa.bool_()), ("dt", pa.float64()), ("target_object", pa.string()),
    ("seed", pa.int64()), ("instance_id", pa.string()), ("policy", pa.string()),
    ("body_roles", pa.string()), ("task_tags", pa.string()), ("meta", pa.string()),  # JSON
    ("t", _I64),                                   # (T,)
    ("eef_pos_m", _F64),                           # T*3
    ("body_names", _NAMES), ("body_pos_m", _F64),  # B names; T*B*3
    ("quat_names", _NAMES), ("body_quat_wxyz", _F64),  # Q names; T*Q*4
    ("contact_names", _NAMES), ("contact_count", _I32),  # names; (T,) contacts per step
    ("contact_a", _I32), ("contact_b", _I32), ("contact_force_n", _F64),  # (K,) each
    ("n_joints", pa.int32()), ("joint_torque_nm", _F64),  # J; T*J
    ("gripper_contact", pa.list_(pa.bool_())), ("cost", _F64),  # (T,) each
], metadata={_VERSION_KEY: FORMAT_VERSION.encode()})
"""One row per episode; a null list column means the family was not recorded."""

_SCALARS = ("episode_id", "benchmark", "task_id", "success", "dt", "target_object", "seed",
            "instance_id", "policy", "body_roles", "task_tags", "meta", "n_joints")
_LISTS = tuple(n for n in PARQUET_SCHEMA.names if n not in _SCALARS)
# success may be null: the source did not say (SR leaves the episode out)
_REQUIRED = ("episode_id", "benchmark", "task_id", "dt", "body_roles", "meta")


# --------------------------------------------------------------------------- files

def trace_kind(path: str | os.PathLike) -> str | None:
    """``json``, ``jsonl`` or ``parquet`` for a trace file's name, None for any other name."""
    try:
        return _kind(Path(path))
    except TraceError:
        return None


def _kind(path: Path) -> str:
    name = path.name.lower()
    for suffix, kind in ((".jsonl", "jsonl"), (".jsonl.gz", "jsonl"), (".json", "json"),
                         (".json.gz", "json"), (".parquet", "parquet")):
        if name.endswith(suffix):
            return kind
    raise TraceError("unknown trace file suffix (expected .json, .jsonl, .jsonl.gz or "
                     ".parquet)", source=str(path))


def _open(path: Path, mode: str) -> IO:
    return gzip.open(path, mode) if path.name.lower().endswith(".gz") else open(path, mode)


@contextmanager
def _atomic(path: Path) -> Iterator[Path]:
    """A temporary sibling of ``path`` that replaces it only if the block succeeds."""
    tmp = path.with_name(".partial-" + path.name)  # keeps the suffix (gzip is chosen by it)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _unique(seen: dict[str, str], ep: Episode, src: str) -> None:
    """Record ``ep``'s id; a repeat raises an error naming both positions."""
    first = seen.setdefault(ep.episode_id, src)
    if first != src:
        raise TraceError(f"duplicate episode_id (first at {first})", source=src,
                         episode=ep.episode_id, field="episode_id")


# --------------------------------------------------------------------------- JSON / JSONL

def _json_items(path: Path, batch_size: int) -> Iterator[tuple[str, Any]]:
    try:
        with _open(path, "rb") as fh:
            doc = json.loads(bounded_read(fh, str(path), MAX_JSON_DOCUMENT))
    except RobosafeError as e:  # too large: the file is skipped, the others are read
        raise TraceError(str(e)) from None
    except ValueError as e:
        raise TraceError(f"invalid JSON: {e}", source=str(path)) from None
    except RecursionError:
        raise TraceError(DEEP_JSON, source=str(path)) from None
    except (OSError, EOFError) as e:
        raise TraceError(f"cannot read: {e}", source=str(path)) from None
    if isinstance(doc, list):
        yield from ((f"{path}[{i}]", rec) for i, rec in enumerate(doc))
    else:
        yield str(path), doc


def _jsonl_items(path: Path, batch_size: int) -> Iterator[tuple[str, Any]]:
    try:
        with _open(path, "rb") as fh:
            for n, line in enumerate(bounded_lines(fh, str(path), MAX_TRACE_LINE), 1):
                if not line.strip():
                    continue
                src = f"{path}:{n}"
                try:
                    yield src, json.loads(line)
                except ValueError as e:
                    yield src, TraceError(f"invalid JSON: {e}", source=src)
                except RecursionError:
                    yield src, TraceError(DEEP_JSON, source=src)
    except (OSError, EOFError) as e:
        raise TraceError(f"cannot read: {e}", source=str(path)) from None
    except RobosafeError as e:  # a line too long: the episodes before it were read
        yield str(path), TraceError(str(e))


def _write_json(path: Path, episodes: Iterable[Episode], kind: str) -> int:
    with _atomic(path) as tmp, _open(tmp, "wt") as fh:
        if kind == "jsonl":
            n = 0
            for n, ep in enumerate(episodes, 1):
                fh.write(json.dumps(episode_to_record(ep), separators=(",", ":"),
                                    allow_nan=False) + "\n")
            return n
        recs = [episode_to_record(ep) for ep in episodes]
        json.dump(recs[0] if len(recs) == 1 else recs, fh, allow_nan=False)
        return len(recs)


# --------------------------------------------------------------------------- Parquet

def _pylist(arr: pa.Array) -> list:
    """``arr.to_pylist()``, through numpy when there are no nulls (an order of magnitude
    faster; with nulls numpy would turn null numbers into NaN)."""
    if arr.null_count == len(arr):
        return [None] * len(arr)
    return arr.to_numpy(zero_copy_only=False).tolist() if not arr.null_count else arr.to_pylist()


def _numpy_dtype(typ: pa.DataType) -> np.dtype:
    """numpy dtype of a fixed-width numeric Arrow type. Arrow's own ``to_pandas_dtype`` imports
    pandas, which the base install does not have."""
    if not (pa.types.is_integer(typ) or pa.types.is_floating(typ)):
        raise TypeError(f"not a numeric Arrow type: {typ}")
    kind = "f" if pa.types.is_floating(typ) else ("i" if pa.types.is_signed_integer(typ) else "u")
    return np.dtype(f"{kind}{typ.bit_width // 8}")


def _values(arr: pa.Array) -> np.ndarray | list:
    """The values of a primitive Arrow array as a writable numpy array, without a copy when
    the batch owns a mutable buffer (Parquet decoding gives one); strings as a list."""
    if pa.types.is_string(arr.type):
        return _pylist(arr)
    if pa.types.is_boolean(arr.type):
        return arr.to_numpy(zero_copy_only=False)  # bit-unpacked: a new array
    dtype = _numpy_dtype(arr.type)
    buf = arr.buffers()[1]
    if buf is None:
        return np.zeros(len(arr), dtype)
    view = np.frombuffer(buf, dtype=dtype, count=arr.offset + len(arr))[arr.offset:]
    return view if view.flags.writeable else view.copy()


def _list_column(col: pa.Array, name: str, src: str) -> tuple[np.ndarray, Any, np.ndarray]:
    """(offsets, values, valid) of a list column for the whole batch, from its Arrow buffers.

    Offsets index ``values`` directly (they already include the array's slice offset).
    """
    if col.values.null_count:
        raise TraceError(f"column {name!r} has null elements inside lists", source=src)
    valid = (np.ones(len(col), dtype=bool) if not col.null_count
             else col.is_valid().to_numpy(zero_copy_only=False))
    return col.offsets.to_numpy(), _values(col.values), valid


def _row_episode(i: int, sc: dict[str, list], ls: dict[str, tuple], src: str) -> Episode:
    """Episode of batch row ``i``, checking the Parquet structure only (no value checks):
    views of the batch's numpy buffers, reshaped."""

    def get(name: str, *shape: int, dtype: Any = None) -> np.ndarray | None:
        off, val, valid = ls[name]
        if not valid[i]:
            return None
        a = val[off[i]:off[i + 1]]
        if shape and a.size != math.prod(shape):
            raise TraceError(f"expected {' x '.join(map(str, shape))} values, got {a.size}",
                             source=src, episode=sc["episode_id"][i], field=name)
        return np.asarray(a.reshape(shape) if shape else a, dtype=dtype)

    def names(name: str) -> tuple[str, ...]:
        off, val, valid = ls[name]
        return tuple(val[off[i]:off[i + 1]]) if valid[i] else ()

    for name in _REQUIRED:
        if sc[name][i] is None:
            raise TraceError("required field is null", source=src, field=name)
    t = get("t", dtype=np.int64)
    if t is None:
        raise TraceError("required field is null", source=src, field="t")
    T = t.shape[0]
    body, quat, cnames = names("body_names"), names("quat_names"), names("contact_names")
    counts = get("contact_count")
    J = sc["n_joints"][i]
    try:
        roles, meta = json.loads(sc["body_roles"][i]), json.loads(sc["meta"][i])
        tags = sc["task_tags"][i]
        tags = None if tags is None else task_tags_from_record(json.loads(tags), source=src)
        if type(roles) is not dict or type(meta) is not dict:
            raise ValueError("body_roles and meta must be JSON objects")
    except RecursionError:
        raise TraceError(f"body_roles/meta/task_tags: {DEEP_JSON}", source=src,
                         episode=sc["episode_id"][i]) from None
    except ValueError as e:
        raise TraceError(f"invalid JSON in body_roles/meta/task_tags: {e}", source=src,
                         episode=sc["episode_id"][i]) from None
    return Episode(
        episode_id=sc["episode_id"][i], benchmark=sc["benchmark"][i], task_id=sc["task_id"][i],
        success=sc["success"][i], dt=sc["dt"][i], target_object=sc["target_object"][i],
        body_roles=roles, t=t, eef_pos_m=get("eef_pos_m", T, 3),
        body_names=body, body_pos_m=get("body_pos_m", T, len(body), 3),
        quat_names=quat, body_quat_wxyz=get("body_quat_wxyz", T, len(quat), 4),
        contact_names=cnames,
        contact_ptr=None if counts is None else np.concatenate([[0], np.cumsum(counts)],
                                                                dtype=np.int64),
        contact_a=get("contact_a"), contact_b=get("contact_b"),
        contact_force_n=get("contact_force_n"),
        joint_torque_nm=get("joint_torque_nm", T, J or 0),
        gripper_contact=get("gripper_contact", T), cost=get("cost", T), task_tags=tags,
        seed=sc["seed"][i], instance_id=sc["instance_id"][i], policy=sc["policy"][i],
        meta=meta)


def _flat(ls: dict[str, tuple], name: str) -> Flat:
    return Flat(*ls[name])


def _suspects(batch: pa.RecordBatch, ls: dict[str, tuple]) -> BatchCheck:
    """:func:`suspect_rows` plus the structure rules of :func:`_row_episode` (nulls, sizes)."""

    def sizes(name: str) -> np.ndarray:
        off, _, valid = ls[name]
        return np.where(valid, np.diff(off), 0)

    def scalar(name: str) -> np.ndarray:
        return batch.column(name).to_numpy(zero_copy_only=False)

    T = sizes("t")
    B, Q = sizes("body_names"), sizes("quat_names")
    J = np.nan_to_num(scalar("n_joints").astype(np.float64)).astype(np.int64)  # null -> 0
    eef, body = _flat(ls, "eef_pos_m"), _flat(ls, "body_pos_m")
    check = suspect_rows(
        dt=scalar("dt").astype(np.float64), t=_flat(ls, "t"),
        floats=[eef, body, _flat(ls, "joint_torque_nm"), _flat(ls, "cost")],
        positions=[eef, body],
        quats=_flat(ls, "body_quat_wxyz"), counts=_flat(ls, "contact_count"),
        contact_a=_flat(ls, "contact_a"), contact_b=_flat(ls, "contact_b"),
        force=_flat(ls, "contact_force_n"), n_contact_names=sizes("contact_names"))
    suspect = check.suspect
    for name in _REQUIRED:
        if batch.column(name).null_count:
            suspect |= batch.column(name).is_null().to_numpy(zero_copy_only=False)
    for name, expected in (("eef_pos_m", 3 * T), ("body_pos_m", 3 * T * B),
                           ("body_quat_wxyz", 4 * T * Q), ("joint_torque_nm", T * J),
                           ("gripper_contact", T), ("cost", T)):
        off, _, valid = ls[name]
        suspect |= valid & (np.diff(off) != expected)
    return check


class _BatchJSON:
    """The JSON-string columns of one batch, each distinct string parsed and checked once.

    A lookup gives None when the value would fail :func:`_row_episode` or the role rules of
    :func:`check_episode` (the row then takes the slow path for its exact message). Lookups
    return the shared parsed dicts (read only); an :class:`Episode` gets its own copies.
    ``TaskTags`` are immutable and shared.
    """

    def __init__(self) -> None:
        self.roles: dict[tuple[str, str | None], dict | None] = {}
        self.tags: dict[str, TaskTags | None] = {}
        self.meta: dict[str, tuple[dict, bool] | None] = {}

    def body_roles(self, text: str, target: str | None) -> dict | None:
        key = (text, target)
        if key not in self.roles:
            try:
                roles = json.loads(text)
            except (ValueError, RecursionError):  # the per-row path reports it
                roles = None
            self.roles[key] = roles if roles_ok(roles, target) else None
        return self.roles[key]

    def task_tags(self, text: str) -> TaskTags | None:
        if text not in self.tags:
            try:
                self.tags[text] = task_tags_from_record(json.loads(text))
            except (ValueError, RecursionError, TraceError):
                self.tags[text] = None
        return self.tags[text]

    def meta_of(self, text: str) -> dict | None:
        if text not in self.meta:
            try:
                meta = json.loads(text)
            except (ValueError, RecursionError):
                meta = None
            self.meta[text] = None if type(meta) is not dict else (
                meta, all(v is None or type(v) in (str, int, float, bool) for v in meta.values()))
        hit = self.meta[text]
        return None if hit is None else hit[0]

    def meta_copy(self, text: str, meta: dict) -> dict:
        """An episode's own copy of the parsed ``meta`` of ``text``."""
        return meta.copy() if self.meta[text][1] else json.loads(text)  # nested: a fresh parse


class EpisodeBatch:
    """Consecutive validated rows ``lo:hi`` of one Parquet record batch, kept columnar.

    Scoring reads the list columns (:class:`~robosafe.trace.validate.Flat` over the batch's
    Arrow buffers) and the per-row scalars directly, so no per-episode arrays or
    :class:`Episode` objects are built; :meth:`episode` builds one when a caller wants it.
    Every row passed the same rules as :func:`check_episode` (quaternions already normalised).
    """

    def __init__(self, data: _BatchData, lo: int, hi: int):
        self.data, self.lo, self.hi = data, lo, hi

    def __len__(self) -> int:
        return self.hi - self.lo

    def select(self, lo: int, hi: int) -> EpisodeBatch:
        """Rows ``lo:hi`` of this batch (positions relative to it)."""
        return EpisodeBatch(self.data, self.lo + lo, self.lo + hi)

    def column(self, name: str) -> Flat:
        off, val, valid = self.data.ls[name]
        return Flat(off[self.lo:self.hi + 1], val, valid[self.lo:self.hi])

    def scalar(self, name: str) -> list:
        return self.data.sc[name][self.lo:self.hi]

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.column("t").offsets)

    @property
    def sources(self) -> list[str]:
        return [self.data.source(i) for i in range(self.lo, self.hi)]

    @property
    def headers(self) -> list[Header]:
        return self.data.headers[self.lo:self.hi]

    @property
    def metas(self) -> list[dict]:
        """Parsed ``meta`` of each row, shared between rows with the same text: read only."""
        return self.data.metas[self.lo:self.hi]

    @property
    def task_tags(self) -> list[TaskTags | None]:
        return self.data.tags[self.lo:self.hi]

    def episode(self, i: int) -> Episode:
        """Row ``i`` (relative) as an :class:`Episode` of views into the batch's buffers."""
        return self.data.episode(self.lo + i)


class _BatchData:
    """What the rows of one record batch share: scalars as lists, list columns as (offsets,
    values, valid) arrays, parsed JSON columns and name tuples."""

    def __init__(self, sc: dict[str, list], ls: dict[str, tuple], path: Path, row0: int,
                 body: list, quat: list, cnames: list, js: _BatchJSON):
        self.sc, self.ls, self.path, self.row0 = sc, ls, path, row0
        self.body, self.quat, self.cnames, self.js = body, quat, cnames, js
        n = len(sc["episode_id"])
        self.roles: list[dict | None] = [None] * n
        self.metas: list[dict | None] = [None] * n
        self.tags: list[TaskTags | None] = [None] * n
        self.headers: list[Header | None] = [None] * n

    def source(self, i: int) -> str:
        return f"{self.path}#row {self.row0 + i}"

    def episode(self, i: int) -> Episode:
        sc, ls = self.sc, self.ls

        def get(name: str, *shape: int) -> np.ndarray | None:
            off, val, valid = ls[name]
            if not valid[i]:
                return None
            a = val[off[i]:off[i + 1]]
            return a.reshape(shape) if shape else a

        T = int(ls["t"][0][i + 1] - ls["t"][0][i])
        counts = get("contact_count")
        has_c = counts is not None
        return Episode(
            episode_id=sc["episode_id"][i], benchmark=sc["benchmark"][i],
            task_id=sc["task_id"][i], success=sc["success"][i], dt=sc["dt"][i],
            target_object=sc["target_object"][i], body_roles=self.roles[i].copy(),
            t=get("t"), eef_pos_m=get("eef_pos_m", T, 3), body_names=self.body[i],
            body_pos_m=get("body_pos_m", T, len(self.body[i]), 3), quat_names=self.quat[i],
            body_quat_wxyz=get("body_quat_wxyz", T, len(self.quat[i]), 4),
            contact_names=self.cnames[i],
            contact_ptr=np.concatenate([[0], np.cumsum(counts)], dtype=np.int64) if has_c
            else None,
            contact_a=get("contact_a") if has_c else None,
            contact_b=get("contact_b") if has_c else None,
            contact_force_n=get("contact_force_n") if has_c else None,
            joint_torque_nm=get("joint_torque_nm", T, sc["n_joints"][i] or 0),
            gripper_contact=get("gripper_contact", T), cost=get("cost", T),
            task_tags=self.tags[i], seed=sc["seed"][i], instance_id=sc["instance_id"][i],
            policy=sc["policy"][i], meta=self.js.meta_copy(sc["meta"][i], self.metas[i]))


def _batch_items(batch: pa.RecordBatch, path: Path, row0: int) -> Iterator[tuple[str, Any]]:
    """(source, EpisodeBatch | validated Episode | TraceError) covering every row of one record
    batch in order.

    The whole batch is checked at once (:func:`_suspects`); runs of rows that pass are yielded
    as :class:`EpisodeBatch` with no further checks. Suspect rows go through
    :func:`_row_episode` and :func:`check_episode`, which give their exact error (or find the
    row fine after all: the batch checks may be over-cautious, never lenient).
    """
    n = batch.num_rows
    src = f"{path}#rows {row0}-{row0 + n - 1}"
    sc = {name: _pylist(batch.column(name)) for name in _SCALARS}
    ls = {name: _list_column(batch.column(name), name, src) for name in _LISTS}
    check = _suspects(batch, ls)
    suspect = check.suspect.tolist()
    normalise = check.normalise & ~check.suspect  # suspect rows: check_episode's own copy
    if normalise.any():  # what check_episode does, bit for bit, in a copy of the column
        off, val, valid = ls["body_quat_wxyz"]
        lo, hi = off[0], off[-1]
        rows = np.repeat(normalise & valid, np.diff(off) // 4)
        val = val.copy()
        q = val[lo:hi].reshape(-1, 4)
        q[rows] = q[rows] / np.sqrt(check.quat_norm2[rows])[:, None]
        ls["body_quat_wxyz"] = (off, val, valid)
    interned: dict[tuple, tuple] = {}  # name tuples are immutable: episodes share them

    def names(name: str) -> list[tuple[str, ...]]:
        off, flat, has = ls[name][0].tolist(), ls[name][1], ls[name][2].tolist()
        rows = [tuple(flat[off[i]:off[i + 1]]) if v else () for i, v in enumerate(has)]
        return [interned.setdefault(r, r) for r in rows]

    body, quat, cnames = names("body_names"), names("quat_names"), names("contact_names")
    unique = {r: names_ok(r) for r in interned} | {(): True}
    js = _BatchJSON()
    data = _BatchData(sc, ls, path, row0, body, quat, cnames, js)
    known: dict[tuple, np.ndarray | None] = {}  # (contact names, body_roles) -> has-role mask
    headers: dict[tuple, Header] = {}
    roles_s, targets, tags_s, meta_s = (sc[k] for k in ("body_roles", "target_object",
                                                        "task_tags", "meta"))
    has = {k: ls[k][2].tolist() for k in ("eef_pos_m", "body_pos_m", "body_quat_wxyz",
                                          "contact_count", "joint_torque_nm",
                                          "gripper_contact")}
    o_a, v_a = ls["contact_a"][0], ls["contact_a"][1]
    o_b, v_b = ls["contact_b"][0], ls["contact_b"][1]

    def clean(i: int) -> bool:
        """Fill row ``i``'s parsed fields; False when it needs the per-row path."""
        body_i, quat_i, cn = body[i], quat[i], cnames[i]
        if suspect[i] or not (unique[body_i] and unique[quat_i] and unique[cn]):
            return False
        roles, meta = js.body_roles(roles_s[i], targets[i]), js.meta_of(meta_s[i])
        tags = None if tags_s[i] is None else js.task_tags(tags_s[i])
        if roles is None or meta is None or (tags is None and tags_s[i] is not None):
            return False
        if unposed_humans(roles, body_i if has["body_pos_m"][i] else ()):
            return False  # the per-row path names the body
        flags = tuple(has[k][i] for k in has)
        if flags[3]:  # every contact body must have a role
            key = (cn, roles_s[i])
            if key not in known:
                mask = np.array([c in roles for c in cn], dtype=bool)
                known[key] = None if mask.all() else mask
            if (mask := known[key]) is not None and not (
                    mask[v_a[o_a[i]:o_a[i + 1]]].all() and mask[v_b[o_b[i]:o_b[i + 1]]].all()):
                return False
        hkey = (roles_s[i], targets[i], body_i, quat_i, cn, flags, sc["n_joints"][i])
        h = headers.get(hkey)
        if h is None:
            h = headers[hkey] = Header(
                targets[i], tuple(roles.items()), body_i if flags[1] else None,
                quat_i if flags[2] else None, cn if flags[3] else None, flags[0], flags[5],
                (sc["n_joints"][i] or 0) if flags[4] else None)
        data.roles[i], data.metas[i], data.tags[i], data.headers[i] = roles, meta, tags, h
        return True

    start = 0
    for i in range(n):
        if clean(i):
            continue
        if start < i:
            yield src, EpisodeBatch(data, start, i)
        start = i + 1
        row_src = data.source(i)
        try:
            yield row_src, check_episode(_row_episode(i, sc, ls, row_src), source=row_src)
        except TraceError as e:
            yield row_src, e
    if start < n:
        yield src, EpisodeBatch(data, start, n)


def _parquet_file(path: Path) -> pq.ParquetFile:
    """Open and check a trace archive (format version, column types)."""
    try:
        # pre_buffer (pyarrow's default) would buffer the whole file; read row group by group
        pf = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
    except (pa.ArrowException, OSError) as e:
        raise TraceError(f"not a readable Parquet file: {e}", source=str(path)) from None
    version = (pf.schema_arrow.metadata or {}).get(_VERSION_KEY)
    if version is None:
        raise TraceError("not a robosafe trace archive (no 'robosafe.trace_format' in the "
                         "Parquet metadata)", source=str(path))
    if version != FORMAT_VERSION.encode():
        raise TraceError(f"unsupported trace format version {version.decode(errors='replace')!r}"
                         f" (this robosafe reads version {FORMAT_VERSION})", source=str(path))
    for field in PARQUET_SCHEMA:
        have = pf.schema_arrow.field(field.name).type if field.name in pf.schema_arrow.names \
            else None
        if have != field.type:
            raise TraceError(f"column {field.name!r} is {have or 'missing'}, expected "
                             f"{field.type}", source=str(path))
    return pf


def parquet_row_groups(path: str | os.PathLike) -> list[int]:
    """Number of episodes in each row group of a trace archive (units of parallel work)."""
    pf = _parquet_file(Path(path))
    return [pf.metadata.row_group(i).num_rows for i in range(pf.num_row_groups)]


def _parquet_items(path: Path, batch_size: int,
                   row_groups: Sequence[int] | None = None) -> Iterator[tuple[str, Any]]:
    pf = _parquet_file(path)
    sizes = [pf.metadata.row_group(i).num_rows for i in range(pf.num_row_groups)]
    groups = range(len(sizes)) if row_groups is None else row_groups

    def batches() -> Iterator[tuple[int, pa.RecordBatch]]:
        for g in groups:
            row = sum(sizes[:g])
            # one decoding thread: Arrow's column threads cost more than they save here
            for batch in pf.iter_batches(batch_size=batch_size, row_groups=[g],
                                         columns=PARQUET_SCHEMA.names, use_threads=False):
                yield row, batch
                row += batch.num_rows

    try:
        for row, batch in _read_ahead(batches()):
            yield from _batch_items(batch, path, row)
    except (pa.ArrowException, OSError) as e:
        raise TraceError(f"cannot read Parquet data: {e}", source=str(path)) from None


def _read_ahead(items: Iterator[Any]) -> Iterator[Any]:
    """``items``, each produced on a reader thread while the caller works on the previous one.

    Arrow decodes Parquet without holding the GIL, so decoding the next record batch overlaps
    checking and scoring this one (one extra batch in memory)."""
    with ThreadPoolExecutor(1, thread_name_prefix="robosafe-parquet") as pool:
        pending = pool.submit(next, items, None)
        while (item := pending.result()) is not None:
            pending = pool.submit(next, items, None)
            yield item


def _batch_table(eps: list[Episode]) -> pa.RecordBatch:
    """Columns of a list of episodes; list columns are built from concatenated numpy arrays."""

    def lists(arrays: list[np.ndarray | None], typ: pa.DataType) -> pa.Array:
        offsets = np.cumsum([0] + [0 if a is None else a.size for a in arrays])
        if offsets[-1] >= 2**31:
            raise TraceError("episodes too large for one Parquet row group (>= 2**31 values)")
        parts = [a.ravel() for a in arrays if a is not None]
        values = np.concatenate(parts) if parts else np.zeros(0)
        mask = np.array([a is None for a in arrays])
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()),
                                        pa.array(values, typ.value_type),
                                        mask=pa.array(mask) if mask.any() else None)

    def names(family: str, key: str) -> list:
        return [None if getattr(e, family) is None else list(getattr(e, key)) for e in eps]

    has_c = [e.contact_ptr is not None for e in eps]
    data = {k: [getattr(e, k) for e in eps] for k in
            ("episode_id", "benchmark", "task_id", "target_object", "seed", "instance_id",
             "policy")}
    data |= {
        "success": [None if e.success is None else bool(e.success) for e in eps], "dt": [float(e.dt) for e in eps],
        "body_roles": [json.dumps(e.body_roles) for e in eps],
        "task_tags": [None if e.task_tags is None else json.dumps(e.task_tags.to_dict())
                      for e in eps],
        "meta": [json.dumps(e.meta, allow_nan=False) for e in eps],
        "n_joints": [None if e.joint_torque_nm is None else e.joint_torque_nm.shape[1]
                     for e in eps],
        "body_names": names("body_pos_m", "body_names"),
        "quat_names": names("body_quat_wxyz", "quat_names"),
        "contact_names": names("contact_ptr", "contact_names"),
        "contact_count": [np.diff(e.contact_ptr) if h else None for e, h in zip(eps, has_c)],
    }
    arrays = []
    for field in PARQUET_SCHEMA:
        col = data[field.name] if field.name in data else [getattr(e, field.name) for e in eps]
        if pa.types.is_list(field.type) and pa.types.is_primitive(field.type.value_type):
            arrays.append(lists(col, field.type))
        else:
            arrays.append(pa.array(col, field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=PARQUET_SCHEMA)


def _row_groups(episodes: Iterable[Episode]) -> Iterator[list[Episode]]:
    chunk: list[Episode] = []
    steps = 0
    for ep in episodes:
        chunk.append(ep)
        steps += ep.n_steps
        if len(chunk) == _WRITE_BATCH or steps >= _WRITE_STEPS:
            yield chunk
            chunk, steps = [], 0
    if chunk:
        yield chunk


def _write_parquet(path: Path, episodes: Iterable[Episode]) -> int:
    n = 0
    with _atomic(path) as tmp, pq.ParquetWriter(tmp, PARQUET_SCHEMA, compression="zstd") as w:
        for chunk in _row_groups(episodes):
            w.write_batch(_batch_table(chunk), row_group_size=len(chunk))
            n += len(chunk)
    return n


# --------------------------------------------------------------------------- public API

_READERS = {"json": _json_items, "jsonl": _jsonl_items, "parquet": _parquet_items}


def iter_episodes(path: str | os.PathLike, *, on_error: Callable[[TraceError], None] | None = None,
                  batch_size: int = 256, row_groups: Sequence[int] | None = None
                  ) -> Iterator[Episode]:
    """Episodes of one file, validated, in file order.

    ``row_groups`` reads only those row groups of a Parquet archive (for parallel readers;
    duplicate ids are then only detected within the selection).

    A bad episode (invalid JSON line, failed validation, duplicate ``episode_id``) is passed
    to ``on_error`` and skipped; with ``on_error=None`` it is raised. Parquet is read
    ``batch_size`` rows at a time; its episodes' arrays are views into their batch's buffers
    (see the module docstring: keeping one episode keeps its batch's memory).
    """
    path = Path(path)
    items = _READERS[_kind(path)]
    if not path.is_file():
        raise TraceError("file not found" if not path.exists() else "not a file",
                         source=str(path))
    if row_groups is not None:
        if items is not _parquet_items:
            raise TraceError("row_groups applies to Parquet archives only", source=str(path))
        return _validated(_parquet_items(path, batch_size, row_groups), on_error)
    return _validated(items(path, batch_size), on_error)


def _validated(items: Iterator[tuple[str, Any]],
               on_error: Callable[[TraceError], None] | None,
               seen: dict[str, str] | None = None) -> Iterator[Episode]:
    seen = {} if seen is None else seen
    for src, item in _episodes(items):  # validated Episodes, App. B records or errors
        try:
            if isinstance(item, TraceError):
                raise item
            ep = item if isinstance(item, Episode) else episode_from_record(item, source=src)
            _unique(seen, ep, src)
        except TraceError as e:
            if on_error is None:
                raise
            on_error(e)
            continue
        yield ep


def _episodes(items: Iterator[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    """``items`` with every :class:`EpisodeBatch` expanded into its episodes."""
    for src, item in items:
        if isinstance(item, EpisodeBatch):
            yield from zip(item.sources, map(item.episode, range(len(item))))
        else:
            yield src, item


def iter_batches(path: str | os.PathLike, *,
                 on_error: Callable[[TraceError], None] | None = None, batch_size: int = 128,
                 row_groups: Sequence[int] | None = None) -> Iterator[Episode | EpisodeBatch]:
    """Like :func:`iter_episodes`, but the good rows of a Parquet archive come as columnar
    :class:`EpisodeBatch` runs (what scoring reads, without per-episode objects); rows that
    needed the per-row checks, and every episode of other formats, come as :class:`Episode`.
    Duplicate ids are reported and skipped as in :func:`iter_episodes`. The default batch
    (128 rows of 300 steps, ~10 MB decoded) keeps a batch's data mostly in cache from decoding
    to scoring; 256 rows measured ~20% slower."""
    path = Path(path)
    if _kind(path) != "parquet":
        yield from iter_episodes(path, on_error=on_error, batch_size=batch_size)
        return
    if not path.is_file():
        raise TraceError("file not found" if not path.exists() else "not a file",
                         source=str(path))
    seen: dict[str, str] = {}
    for src, item in _parquet_items(path, batch_size, row_groups):
        if not isinstance(item, EpisodeBatch):
            yield from _validated(iter([(src, item)]), on_error, seen)
            continue
        start = 0
        for i, (eid, row_src) in enumerate(zip(item.scalar("episode_id"), item.sources)):
            first = seen.setdefault(eid, row_src)
            if first == row_src:
                continue
            if start < i:
                yield item.select(start, i)
            start = i + 1
            err = TraceError(f"duplicate episode_id (first at {first})", source=row_src,
                             episode=eid, field="episode_id")
            if on_error is None:
                raise err
            on_error(err)
        if start < len(item):
            yield item.select(start, len(item))


def read_episodes(paths: str | os.PathLike | Iterable[str | os.PathLike]
                  ) -> tuple[list[Episode], list[TraceError]]:
    """All good episodes of one or more files, and the errors of the bad ones (skipped)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    errors: list[TraceError] = []
    episodes = [ep for p in paths for ep in iter_episodes(p, on_error=errors.append)]
    return episodes, errors


def write_episodes(path: str | os.PathLike, episodes: Iterable[Episode]) -> int:
    """Write ``episodes`` in the format given by the suffix of ``path``; returns the count.

    Each episode is validated first; an invalid or duplicate episode raises
    :class:`TraceError` and leaves no partial file behind.
    """
    path = Path(path)
    kind = _kind(path)
    seen: dict[str, str] = {}

    def checked() -> Iterator[Episode]:
        for i, ep in enumerate(episodes):
            ep = check_episode(ep, source=f"episodes[{i}]")
            _unique(seen, ep, f"episodes[{i}]")
            yield ep

    try:
        if kind == "parquet":
            return _write_parquet(path, checked())
        return _write_json(path, checked(), kind)
    except (TypeError, ValueError) as e:  # e.g. meta that JSON cannot encode
        raise TraceError(f"cannot write: {e}", source=str(path)) from None
    except OSError as e:
        raise TraceError(f"cannot write: {e.strerror or e}", source=str(path)) from None
