"""Determinism trace diff (audit paper App. B.2, Figure 6, Table 10).

Jiang et al., "What Are We Actually Benchmarking in Robot Manipulation?", App. B: two closed-
loop rollouts of the same episode (same policy, seed, initial state) are compared channel by
channel: simulator state, rendered images, actions, reward/done/success. For each channel we
report the first step at which the recorded arrays differ bitwise (App. B.1 target 1, "bitwise
determinism") and the per-step distance curve of Figure 6: L-inf distance for state/action-like
arrays, mean absolute pixel difference for images; plus the first step whose distance exceeds a
tolerance, so float noise can be told apart from real divergence.

Traces are ``.npz`` archives whose array names are the channels; time is axis 0. They are
loaded with ``allow_pickle=False``: object arrays are refused, never unpickled.
"""

from __future__ import annotations

import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from robosafe.errors import RobosafeError

CANONICAL_ORDER = ("state", "image", "action", "reward", "done", "success")
_BLOCK_ELEMENTS = 1 << 22  # per-chunk element budget, keeps float copies of videos small

TraceInput = str | Path | Mapping[str, Any]


def is_image_channel(name: str) -> bool:
    return name == "image" or name.startswith("image_")


@dataclass(frozen=True, eq=False)
class ChannelDiff:
    """Comparison of one channel between trace a and trace b.

    ``first_diff_step`` is the first step whose recorded values are not bitwise identical
    (by value when the dtypes differ, see ``note``); ``first_diff_step_tol`` the first step
    whose distance exceeds ``atol``. Both are None when the channel agrees; when the common
    prefix agrees but the lengths differ, both are the common length (the first step only one
    trace has). ``distance`` is the per-step curve over the common prefix. A channel that is
    not comparable (only in one trace, shapes differ beyond the time axis) has
    ``comparable=False``, an empty curve, NaN ``max_distance`` and the reason in ``note``.
    """

    name: str
    metric: str  # "linf", "mean_abs_pixel", "mismatch" (non-numeric dtype) or "" if not comparable
    comparable: bool
    first_diff_step: int | None
    first_diff_step_tol: int | None
    max_distance: float
    distance: np.ndarray = field(repr=False)
    atol: float
    length_a: int | None
    length_b: int | None
    note: str = ""

    @property
    def identical(self) -> bool:
        return self.comparable and self.first_diff_step is None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "metric": self.metric, "comparable": self.comparable,
                "first_diff_step": self.first_diff_step,
                "first_diff_step_tol": self.first_diff_step_tol,
                "max_distance": None if np.isnan(self.max_distance) else self.max_distance,
                "atol": self.atol, "length_a": self.length_a, "length_b": self.length_b,
                "note": self.note, "distance": self.distance.tolist()}


@dataclass(frozen=True, eq=False)
class TraceDiff:
    source_a: str
    source_b: str
    channels: tuple[ChannelDiff, ...]

    @property
    def identical(self) -> bool:
        """Bitwise determinism (App. B.1 target 1) over every recorded channel."""
        return all(c.identical for c in self.channels)

    def channel(self, name: str) -> ChannelDiff:
        for c in self.channels:
            if c.name == name:
                return c
        raise KeyError(name)

    def divergence_order(self, tolerance: bool = False) -> list[tuple[str, int]]:
        """(channel, first differing step) sorted by step: the propagation path of Figure 6."""
        pairs = [(c.name, c.first_diff_step_tol if tolerance else c.first_diff_step)
                 for c in self.channels]
        return sorted(((n, s) for n, s in pairs if s is not None), key=lambda p: (p[1], p[0]))

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.source_a, "b": self.source_b, "identical": self.identical,
                "channels": [c.to_dict() for c in self.channels]}


def load_trace_npz(path: str | Path) -> dict[str, np.ndarray]:
    """All arrays of an ``.npz`` trace, loaded with ``allow_pickle=False``."""
    p = Path(path)
    try:
        archive = np.load(p, allow_pickle=False)
    except FileNotFoundError:
        raise RobosafeError(f"{p}: no such file") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise RobosafeError(f"{p}: not a readable .npz archive ({exc})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise RobosafeError(f"{p}: holds a single array, expected an .npz archive of channels")
    out: dict[str, np.ndarray] = {}
    with archive:
        for name in archive.files:
            try:
                out[name] = archive[name]
            except ValueError:
                raise RobosafeError(f"{p}: array {name!r} holds Python objects; refusing to "
                                    f"unpickle it (store numeric or string arrays)") from None
            except (OSError, EOFError, zipfile.BadZipFile) as exc:
                raise RobosafeError(f"{p}: array {name!r} is unreadable ({exc})") from None
    if not out:
        raise RobosafeError(f"{p}: the archive holds no arrays")
    return out


def _flat(x: np.ndarray) -> np.ndarray:
    """(T, ...) -> (T, k); explicit k because reshape(T, -1) fails for empty steps."""
    return x.reshape(x.shape[0], int(np.prod(x.shape[1:], dtype=np.int64)))


def _abs_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| elementwise in float64; equal values (incl. matching NaN, inf) give 0, a NaN
    against a number gives inf so it can never pass a tolerance."""
    if a.dtype.kind in "iub" and b.dtype.kind in "iub":
        # Integer subtraction in a wide type: uint8 pixels would otherwise wrap around.
        return np.abs(a.astype(np.int64) - b.astype(np.int64)).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(a - b).astype(np.float64)
        same = (a == b) | (np.isnan(a) & np.isnan(b))
    d[same] = 0.0
    d[np.isnan(d)] = np.inf
    return d


def _per_step(fn, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    t = a.shape[0]
    per_step = max(1, int(np.prod(a.shape[1:], dtype=np.int64)))
    block = max(1, _BLOCK_ELEMENTS // per_step)
    return np.concatenate([fn(a[s:s + block], b[s:s + block]) for s in range(0, t, block)]
                          or [np.empty(0)])


def linf_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-step L-inf distance max |a_t - b_t| over all non-time axes (App. B.2, Figure 6)."""
    def block(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return _flat(_abs_diff(x, y)).max(axis=1, initial=0.0)
    return _per_step(block, a, b)


def mean_abs_pixel_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-step mean absolute pixel difference over (H, W, C) (App. B.2, Figure 6 image curve)."""
    def block(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        d = _flat(_abs_diff(x, y))
        return d.mean(axis=1) if d.shape[1] else np.zeros(x.shape[0])
    return _per_step(block, a, b)


def _mismatch_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """1.0 where any element of a non-numeric step differs (strings have no distance)."""
    if a.dtype.kind in "biufc" or b.dtype.kind in "biufc":
        # A number against a string: no elementwise comparison, every step differs.
        return np.ones(a.shape[0])
    return np.any(_flat(a != b), axis=1).astype(np.float64)


def bitwise_differs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-step flag: step t is not bitwise identical (App. B.1, bitwise determinism).

    Same dtype: raw bytes are compared, so -0.0 vs 0.0 differs and identical NaNs agree.
    Different dtypes have no common bit layout; values are compared exactly instead.
    """
    if a.dtype == b.dtype:
        ab = _flat(np.ascontiguousarray(a)).view(np.uint8)
        bb = _flat(np.ascontiguousarray(b)).view(np.uint8)
        return np.any(ab != bb, axis=1)
    numeric = (a.dtype.kind in "biufc", b.dtype.kind in "biufc")
    if numeric[0] != numeric[1]:
        return np.ones(a.shape[0], dtype=bool)
    same = a == b
    if numeric[0]:
        same |= np.isnan(a) & np.isnan(b)
    return ~np.all(_flat(same), axis=1)


def _first(flags: np.ndarray) -> int | None:
    hits = np.flatnonzero(flags)
    return int(hits[0]) if hits.size else None


def diff_channel(name: str, a: np.ndarray | None, b: np.ndarray | None, *, atol: float = 1e-6,
                 labels: tuple[str, str] = ("a", "b")) -> ChannelDiff:
    """Compare one channel; ``None`` marks a channel missing from that trace."""
    empty = np.empty(0)

    def incomparable(note: str, la: int | None, lb: int | None) -> ChannelDiff:
        return ChannelDiff(name, "", False, None, None, float("nan"), empty, atol, la, lb, note)

    if a is None or b is None:
        present, missing = (labels[0], labels[1]) if b is None else (labels[1], labels[0])
        arr = a if b is None else b
        length = int(arr.shape[0]) if arr.ndim else 1
        return incomparable(f"only in {present}, missing from {missing}",
                            length if a is not None else None, length if b is not None else None)
    notes = []
    if a.ndim == 0 and b.ndim == 0:
        a, b = a.reshape(1), b.reshape(1)
        notes.append("no time axis; compared as one value")
    if a.ndim == 0 or b.ndim == 0 or a.shape[1:] != b.shape[1:]:
        return incomparable(f"shapes differ beyond the time axis: {a.shape} in {labels[0]} vs "
                            f"{b.shape} in {labels[1]}",
                            a.shape[0] if a.ndim else None, b.shape[0] if b.ndim else None)
    la, lb = int(a.shape[0]), int(b.shape[0])
    t = min(la, lb)
    if la != lb:
        notes.append(f"lengths differ ({la} in {labels[0]} vs {lb} in {labels[1]}); compared "
                     f"over the first {t} steps")
    if a.dtype != b.dtype:
        notes.append(f"dtypes differ ({a.dtype} vs {b.dtype}); exact comparison by value")
    pa, pb = a[:t], b[:t]
    numeric = a.dtype.kind in "biufc" and b.dtype.kind in "biufc"
    if not numeric:
        metric, dist = "mismatch", _mismatch_distance(pa, pb)
    elif is_image_channel(name):
        metric, dist = "mean_abs_pixel", mean_abs_pixel_distance(pa, pb)
    else:
        metric, dist = "linf", linf_distance(pa, pb)
    first = _first(bitwise_differs(pa, pb))
    first_tol = _first(dist > atol)
    # A prefix that agrees still differs where one trace runs on and the other has ended.
    if la != lb:
        first = t if first is None else first
        first_tol = t if first_tol is None else first_tol
    return ChannelDiff(name, metric, True, first, first_tol,
                       float(dist.max()) if dist.size else 0.0, dist, atol, la, lb,
                       "; ".join(notes))


def _channel_order(names: set[str]) -> list[str]:
    def rank(n: str) -> tuple[int, str]:
        base = "image" if is_image_channel(n) else n
        return (CANONICAL_ORDER.index(base) if base in CANONICAL_ORDER else
                len(CANONICAL_ORDER), n)
    return sorted(names, key=rank)


def _load(trace: TraceInput, label: str) -> tuple[str, dict[str, np.ndarray]]:
    if isinstance(trace, (str, Path)):
        return str(trace), load_trace_npz(trace)
    arrays = {k: np.asarray(v) for k, v in trace.items()}
    for k, v in arrays.items():
        if v.dtype.kind == "O":
            raise RobosafeError(f"{label}: array {k!r} holds Python objects; expected numeric "
                                f"or string arrays")
    return label, arrays


def trace_diff(a: TraceInput, b: TraceInput, *, atol: float = 1e-6,
               channel_atol: Mapping[str, float] | None = None) -> TraceDiff:
    """Channel-by-channel diff of two recorded traces of the same episode (App. B.2).

    ``a`` and ``b`` are ``.npz`` paths or mappings of channel name to array (time on axis 0).
    ``atol`` is the tolerance on the per-step distance (L-inf, or mean absolute pixel
    difference for ``image`` / ``image_<camera>``); ``channel_atol`` overrides it by name.
    Channels are ordered state, images, action, reward, done, success, then the rest by name.
    """
    src_a, arr_a = _load(a, "a")
    src_b, arr_b = _load(b, "b")
    if src_a == src_b and isinstance(a, (str, Path)) and isinstance(b, (str, Path)):
        src_a, src_b = f"{src_a} (a)", f"{src_b} (b)"
    tol = dict(channel_atol or {})
    return TraceDiff(src_a, src_b, tuple(
        diff_channel(n, arr_a.get(n), arr_b.get(n), atol=tol.get(n, atol),
                     labels=(src_a, src_b))
        for n in _channel_order(set(arr_a) | set(arr_b))))
