"""Per-episode and dataset statistics of a LeRobot v3.0 dataset, computed by lerobot 0.6's rules.

lerobot 0.6 stores, per feature, ``min max mean std count`` and the quantiles ``q01 q10 q50 q90
q99`` (in ``meta/stats.json`` and as ``stats/<feature>/<stat>`` columns of ``meta/episodes``);
pi0.5's QUANTILES normalization refuses a dataset without ``q01`` / ``q99``. The rules, read in
lerobot's ``datasets/compute_stats.py`` (not copied) and checked value for value against it by
``tests_lerobot``:

- a feature's values are taken in ``result_type(dtype, float32)`` (float32 stays float32, bool
  becomes float32, int64 and float64 become float64); timestamps as ``frame_index / fps`` in
  float64 (lerobot's frame buffer holds Python floats);
- quantiles come from a 5,000-bin histogram over ``[min - 1e-10, max + 1e-10]`` per column, the
  bin holding the ``q * count``-th value, linearly interpolated inside it; an episode of one
  frame has every quantile equal to its mean;
- camera frames: the frames at ``round(linspace(0, n - 1, k))`` (k = n below 100 frames, else
  ``max(100, min(int(n ** 0.75), 10000))``), every ``int(side / 150)``-th pixel once a side
  reaches 300, per channel, divided by 255, shape (3, 1, 1), ``count`` = frames used;
- the dataset's statistics fold the episodes' in order, two at a time: min / max, count-weighted
  means of ``mean`` and of every quantile, the pooled variance.
"""

from __future__ import annotations

import numpy as np

QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
QUANTILE_KEYS = tuple(f"q{round(q * 100):02d}" for q in QUANTILES)
STAT_KEYS = ("min", "max", "mean", "std", "count", *QUANTILE_KEYS)
BINS = 5000
PAD = 1e-10  # widens the histogram range so min and max fall inside the first / last bin

Stats = dict[str, np.ndarray]


def _quantile(hist: np.ndarray, edges: np.ndarray, target: float):
    """The value below which ``target`` of the histogram's counts lie (interpolated in its bin)."""
    cum = np.cumsum(hist)
    i = int(np.searchsorted(cum, target))
    if i == 0:
        return edges[0]
    if i >= len(cum):
        return edges[-1]
    before = cum[i - 1]
    inside = cum[i] - before
    if inside == 0:
        return edges[i]
    return edges[i] + (target - before) / inside * (edges[i + 1] - edges[i])


def column_stats(x: np.ndarray) -> Stats:
    """Statistics of (n, d) values, one per column, ``count`` = n."""
    work = x.astype(np.result_type(x.dtype, np.float32), copy=False)
    n = work.shape[0]
    if n < 2:  # lerobot takes these in the values' own dtype
        out = {"min": x.min(0), "max": x.max(0), "mean": x.mean(0), "std": x.std(0)}
        return out | {"count": np.array([n])} | {k: out["mean"].copy() for k in QUANTILE_KEYS}
    lo, hi, mean = work.min(0), work.max(0), work.mean(0)
    var = (work ** 2).mean(0) - mean ** 2
    out = {"min": lo, "max": hi, "mean": mean, "std": np.sqrt(np.maximum(0, var)),
           "count": np.array([n])}
    pad = work.dtype.type(PAD)
    qs: list[list] = [[] for _ in QUANTILES]
    for c in range(work.shape[1]):
        edges = np.linspace(lo[c] - pad, hi[c] + pad, BINS + 1)
        hist = np.histogram(work[:, c], bins=edges)[0].astype(np.float64)
        for j, q in enumerate(QUANTILES):
            qs[j].append(_quantile(hist, edges, q * n))
    return out | {k: np.array(v) for k, v in zip(QUANTILE_KEYS, qs)}


def feature_stats(values: np.ndarray) -> Stats:
    """Statistics of one numeric feature over an episode: (n,) values give shape (1,) stats,
    (n, d) values shape (d,)."""
    if values.ndim == 1:
        s = column_stats(values.reshape(-1, 1))
        return {k: v if k == "count" else v.reshape(1) for k, v in s.items()}
    return column_stats(values.reshape(values.shape[0], -1))


def sample_frames(n: int) -> np.ndarray:
    """Which of an episode's n camera frames lerobot's image statistics look at."""
    k = n if n < 100 else max(100, min(int(n ** 0.75), 10_000))
    return np.round(np.linspace(0, n - 1, k)).astype(int)


def image_stats(frames: np.ndarray) -> Stats:
    """Per-channel statistics of (n, H, W, C) uint8 frames, in [0, 1], shape (C, 1, 1)."""
    shot = frames[sample_frames(frames.shape[0])]
    h, w = shot.shape[1:3]
    if max(h, w) >= 300:
        step = int(w / 150) if w > h else int(h / 150)
        shot = shot[:, ::step, ::step]
    s = column_stats(np.ascontiguousarray(shot).reshape(-1, shot.shape[-1]))
    s["count"] = np.array([shot.shape[0]])
    return {k: v if k == "count" else (v / 255.0).reshape(-1, 1, 1) for k, v in s.items()}


def merge(a: Stats, b: Stats) -> Stats:
    """Statistics of two parts together (lerobot's aggregate of a list of two)."""
    counts = np.stack([a["count"], b["count"]])
    total = counts.sum(axis=0)
    means = np.stack([a["mean"], b["mean"]])
    while counts.ndim < means.ndim:
        counts = np.expand_dims(counts, -1)
    mean = (means * counts).sum(axis=0) / total
    var = ((np.stack([a["std"] ** 2, b["std"] ** 2]) + (means - mean) ** 2) * counts
           ).sum(axis=0) / total
    out = {"min": np.min(np.stack([a["min"], b["min"]]), axis=0),
           "max": np.max(np.stack([a["max"], b["max"]]), axis=0),
           "mean": mean, "std": np.sqrt(var), "count": total}
    for k in QUANTILE_KEYS:
        if k in a and k in b:
            out[k] = (np.stack([a[k], b[k]]) * counts).sum(axis=0) / total
    return out


def fold(episodes: list[Stats]) -> Stats:
    """The dataset's statistics of one feature from its episodes', in episode order."""
    out = episodes[0]
    for s in episodes[1:]:
        out = merge(out, s)
    return out


def as_lists(stats: Stats) -> dict[str, list]:
    return {k: np.asarray(v).tolist() for k, v in stats.items()}
