"""TouchSafeBench clip sampler (paper 003, Sec. 3; App. F.2 Table 9; App. F.3 Tables 10-15).

:func:`candidate_clips` applies the Table 9 rules to every episode; :func:`sample_clips` then
balances them (App. F.2: down-sample to the smallest of A/B/C, A subtypes first, then stratify by
humanoid appearance and simulation task). :func:`sweep` / :func:`sweep_all` reproduce the shape of
the F.3 parameter sweeps. Every clip carries the simulator ground truth the App. G diagnostics
need (distance, trend, per-frame contacts).

Conventions (all frame indices are simulation steps, intervals are inclusive):

* Clustering (F.3 "separated by fewer than gap_threshold frames are merged"): two consecutive
  event frames stay in one event when fewer than ``gap`` non-event frames lie between them, i.e.
  a new event starts where ``np.diff(steps) > gap``. With gap 30 this leaves >= 30 free frames
  between events, which is why a 30-frame pre/post window fits and a 45-frame one often does not
  (Table 14). An event's *size* is its number of event frames.
* "Uniformly sample frames" is deterministic even spacing over the interval ``[lo, hi]``:
  ``lo + (hi - lo) * i // (k - 1)``, so e.g. a 90-frame window starting at s gives s, s+44, s+89
  and a near miss centred at c gives c-30, c, c+30. Randomness is only in balancing.
* Exclusion region (F.2): full scene-collision event intervals plus ``human_margin`` frames either
  side of every human-collision frame.

Choices where our copy of the paper lost the number, or is silent (all ``SamplerParams`` fields):

* ``human_margin = 30``: the margin around human-collision frames. 30 equals the Task 2 pre/post
  windows, so no A clip lies within the warning zone of a human contact, and it covers every lead
  offset (<= 20).
* ``min_scene_collision_frames = 3``: Task 1 B skips events with fewer collision frames than
  there are time points, so the three frames come from a genuine multi-frame contact. Task 2 B and
  A-post use every event (Table 16: 7,027 T2-B > 6,664 T1-B candidates).
* ``lead_offsets = (20, 15, 10, 5)``: F.3 says four offsets spanning 0.17-0.67 s at 30 Hz, and
  Table 15 sweeps single offsets 3..30. Candidates are tried in this (chronological) order and the
  first ``frames_per_clip`` valid ones form the clip: f-20, f-15, f-10, falling back to f-15,
  f-10, f-5 when f < 20. Valid = inside the episode and not itself a human-collision frame.
* ``frames_per_clip = 3`` (Sec. 3); Task 1 C is the final human-collision frame and the
  ``frames_per_clip - 1`` frames before it.
* ``trend_tolerance_m = 0.05``: ``truth_trend`` is closing / separating when the distance changes
  by more than 5 cm between the first and last frame, else stable. 5 cm absorbs root-position
  jitter, while a 0.75 m/s approach over the shortest clip (Task 1 C, 2 steps) still reads closing.
* ``object_contacts_unsafe = True``: robot-object contact frames are not "collision-free" (never
  in an A-easy window, never a near-miss frame: F.3 "no contact is occurring").
* Near-miss windows ``[c - half_span, c + half_span]`` that leave the episode are discarded, like
  those overlapping the exclusion region.
* Task 1 B events that contain a human-collision frame are skipped: such a clip would show both
  contacts, and Task 1 labels that C.
* Task 2 B/A-post "excluding human-collision frames" uses the human part of the exclusion region
  (frame +- human_margin), so a "scene imminent" or "no risk" clip never precedes a human contact
  within the warning window. "Windows that overlap another imminent collision" (A-post) are,
  literally, those overlapping another scene event or the human warning zone.
* ``strict_task2_negatives = True``: every Task 2 A clip (the reused A-easy / near-miss clips
  and A-post) also avoids every *imminent zone* (the ``pre_window`` before a scene event, the
  lead span before the human collision), since a clip just before a scene contact is B by the
  Task 2 definition (Sec. 3): a literal A-post window after one event can be, frame for frame,
  the B window of the next. ``False`` is Table 9 literally. Table 14 (post 7,167 > pre 7,027)
  was counted the literal way; the strict A-post count is below the pre count whenever events
  follow each other within pre + post frames (docs/decisions.md has the sweep on generated
  data).
* Balancing: the A quota is split over its subtypes, then each class or subtype quota over the
  (human_type, sim_task) strata, both as evenly as availability allows (water-filling; leftover
  units go to the larger strata). ``clips_per_class`` caps the per-class count (the paper's
  standardized set has 150). Candidates are ordered by (sample type, episode_dir, frames) before
  drawing, so the result depends on the seed only, not on the order episodes are given in.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from robosafe.errors import DEEP_JSON, RobosafeError
from robosafe.grounding.dataset import EpisodeIndex
from robosafe.textio import bounded_lines

# Table 9: task -> label -> sample types (App. G.2 order).
SAMPLE_TYPES: dict[int, dict[str, tuple[str, ...]]] = {
    1: {"A": ("no_event_easy", "no_event_hard_negative"), "B": ("scene_collision",),
        "C": ("human_collision_risk",)},
    2: {"A": ("no_risk_easy", "no_risk_hard_negative", "no_risk_post_collision"),
        "B": ("scene_collision_imminent",), "C": ("human_collision_imminent",)},
}
LABEL_OF = {st: (task, lab) for task, labs in SAMPLE_TYPES.items() for lab, sts in labs.items()
            for st in sts}
_TYPE_ORDER = {st: i for i, st in enumerate(LABEL_OF)}
TRENDS = ("closing", "separating", "stable")


@dataclass(frozen=True)
class SamplerParams:
    """Table 10 values plus the choices documented in the module docstring."""

    gap_threshold: int = 30  # scene-collision clustering (Table 11)
    safe_event_window: int = 90  # A-easy window (Table 12)
    near_miss_dist: float = 1.5  # metres, planar (Table 13)
    near_miss_gap: int = 15  # near-miss clustering (Table 13)
    near_miss_half_span: int = 30  # near-miss window half width (Table 13 "hs")
    pre_window: int = 30  # Task 2 B zone (Table 14)
    post_window: int = 30  # Task 2 A-post zone (Table 14)
    lead_offsets: tuple[int, ...] = (20, 15, 10, 5)  # Task 2 C (Table 15), tried in order
    human_margin: int = 30  # exclusion margin around human-collision frames
    min_scene_collision_frames: int = 3  # Task 1 B minimum event size
    frames_per_clip: int = 3
    trend_tolerance_m: float = 0.05
    object_contacts_unsafe: bool = True
    strict_task2_negatives: bool = True
    clips_per_class: int | None = None  # None: the smallest class (App. F.2)

    def __post_init__(self) -> None:
        k = _int(self, "frames_per_clip", 2)
        _int(self, "gap_threshold", 0)
        _int(self, "human_margin", 0)
        _int(self, "near_miss_half_span", 1)
        _int(self, "min_scene_collision_frames", 1)
        for name in ("safe_event_window", "pre_window", "post_window"):
            _int(self, name, k)
        _int(self, "near_miss_gap", 0)
        for name in ("near_miss_dist", "trend_tolerance_m"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not v >= 0:
                raise RobosafeError(f"SamplerParams.{name}: expected a number >= 0, got {v!r}")
        offs = self.lead_offsets
        if isinstance(offs, int | str) or not all(
                isinstance(o, int) and not isinstance(o, bool) and o >= 1 for o in offs):
            raise RobosafeError(f"SamplerParams.lead_offsets: expected positive step offsets, "
                                f"got {offs!r}")
        offs = tuple(offs)
        if len(set(offs)) != len(offs) or len(offs) < k:
            raise RobosafeError(f"SamplerParams.lead_offsets: need {k} distinct offsets, got "
                                f"{offs!r}")
        object.__setattr__(self, "lead_offsets", offs)
        if self.clips_per_class is not None:
            _int(self, "clips_per_class", 1)


def _int(p: SamplerParams, name: str, low: int) -> int:
    v = getattr(p, name)
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < low:
        raise RobosafeError(f"SamplerParams.{name}: expected an integer >= {low}, got {v!r}")
    return int(v)


@dataclass(frozen=True)
class Clip:
    """One three-time-point evaluation sample (Sec. 3) with its simulator ground truth.

    ``window`` is the interval the frames were drawn from; ``truth_human`` / ``truth_scene`` are
    the per-frame contact flags (``truth_contacts`` in records)."""

    clip_id: str
    task: int
    label: str
    sample_type: str
    episode_dir: str
    episode_id: int
    scene_id: str
    human_type: str
    sim_task: str
    frames: tuple[int, ...]
    window: tuple[int, int]
    truth_distance: tuple[float | None, ...]  # None: the human is not in any camera's view
    truth_trend: str
    truth_human: tuple[bool, ...]
    truth_scene: tuple[bool, ...]

    @property
    def truth_contacts(self) -> dict[str, list[bool]]:
        return {"human": list(self.truth_human), "scene": list(self.truth_scene)}

    def to_record(self) -> dict[str, Any]:
        return {"clip_id": self.clip_id, "task": self.task, "label": self.label,
                "sample_type": self.sample_type, "episode_dir": self.episode_dir,
                "episode_id": self.episode_id, "scene_id": self.scene_id,
                "human_type": self.human_type, "sim_task": self.sim_task,
                "frames": list(self.frames), "window": list(self.window),
                "truth_distance": list(self.truth_distance), "truth_trend": self.truth_trend,
                "truth_contacts": self.truth_contacts}

    @classmethod
    def from_record(cls, rec: Mapping[str, Any], where: str = "record") -> Clip:
        if not isinstance(rec, Mapping):
            raise RobosafeError(f"{where}: expected a JSON object")
        try:
            st = str(rec["sample_type"])
            if st not in LABEL_OF:
                raise RobosafeError(f"{where}.sample_type: unknown sample type {st!r}")
            task, label = LABEL_OF[st]
            if (rec["task"], rec["label"]) != (task, label):
                raise RobosafeError(f"{where}: task {rec['task']!r} / label {rec['label']!r} do "
                                    f"not match sample type {st!r} (task {task}, {label})")
            contacts = rec["truth_contacts"]
            clip = cls(clip_id=str(rec["clip_id"]), task=task, label=label, sample_type=st,
                       episode_dir=str(rec["episode_dir"]), episode_id=int(rec["episode_id"]),
                       scene_id=str(rec["scene_id"]), human_type=str(rec["human_type"]),
                       sim_task=str(rec["sim_task"]), frames=tuple(map(int, rec["frames"])),
                       window=tuple(map(int, rec["window"])),  # type: ignore[arg-type]
                       truth_distance=tuple(None if d is None else float(d)
                                            for d in rec["truth_distance"]),
                       truth_trend=str(rec["truth_trend"]),
                       truth_human=tuple(map(bool, contacts["human"])),
                       truth_scene=tuple(map(bool, contacts["scene"])))
        except KeyError as e:
            raise RobosafeError(f"{where}: missing field {e.args[0]!r}") from None
        except (TypeError, ValueError) as e:
            raise RobosafeError(f"{where}: malformed clip record ({e})") from None
        n = len(clip.frames)
        if not (len(clip.truth_distance) == len(clip.truth_human) == len(clip.truth_scene) == n
                and len(clip.window) == 2):
            raise RobosafeError(f"{where}: frames, truth_distance and truth_contacts differ in "
                                "length")
        if clip.truth_trend not in TRENDS:
            raise RobosafeError(f"{where}.truth_trend: {clip.truth_trend!r} is not one of "
                                f"{', '.join(TRENDS)}")
        return clip


# ----------------------------------------------------------------------------- per episode


def _cluster(steps: np.ndarray, gap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted unique event steps -> (start, end, size) per event (module doc, Clustering)."""
    if steps.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    cut = np.flatnonzero(np.diff(steps) > gap)
    first = np.concatenate([[0], cut + 1])
    last = np.concatenate([cut, [steps.size - 1]])
    return steps[first], steps[last], last - first + 1


def _cover(n: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Boolean mask of the union of inclusive intervals [lo, hi], clipped to the episode."""
    if not len(lo):
        return np.zeros(n, dtype=bool)
    lo, hi = np.maximum(lo, 0), np.minimum(np.asarray(hi) + 1, n)
    keep = lo < hi
    marks = np.bincount(lo[keep], minlength=n + 1) - np.bincount(hi[keep], minlength=n + 1)
    return np.cumsum(marks[:n]) > 0


def _prefix(mask: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(mask, dtype=np.int64)])


def _hits(prefix: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Whether each in-range interval [lo, hi] contains a marked frame (O(1) each)."""
    return prefix[hi + 1] - prefix[lo] > 0


def _spread(lo: np.ndarray, hi: np.ndarray, k: int) -> np.ndarray:
    """k evenly spaced frames over each [lo, hi] ("uniformly sample", module doc)."""
    return lo[:, None] + ((hi - lo)[:, None] * np.arange(k)) // (k - 1)


def _steps(e: EpisodeIndex, name: str) -> np.ndarray:
    s = np.unique(np.asarray(getattr(e, name), dtype=np.int64))
    if s.size and (s[0] < 0 or s[-1] >= e.n_frames):
        raise RobosafeError(f"{e.episode_dir}: {name} has steps outside 0..{e.n_frames - 1}")
    return s


Windows = tuple[np.ndarray, np.ndarray, np.ndarray]  # lo (m,), hi (m,), frames (m, k)


class _Episode:
    """Masks and events of one episode under one parameter set (vectorised, no per-step Python).
    """

    def __init__(self, e: EpisodeIndex, p: SamplerParams):
        n = self.n = int(e.n_frames)
        self.e, self.p = e, p
        self.d = np.asarray(e.robot_human_distance, dtype=np.float64)
        if self.d.shape != (n,):
            raise RobosafeError(f"{e.episode_dir}: robot_human_distance has {self.d.size} values "
                                f"for {n} frames")
        self.human_steps = _steps(e, "human_collision_steps")
        self.scene_steps = _steps(e, "scene_collision_steps")
        self.human = np.zeros(n, dtype=bool)
        self.human[self.human_steps] = True
        self.scene = np.zeros(n, dtype=bool)
        self.scene[self.scene_steps] = True
        self.contact = self.human | self.scene
        if p.object_contacts_unsafe:
            self.contact[_steps(e, "object_collision_steps")] = True
        self.ev_start, self.ev_end, self.ev_size = _cluster(self.scene_steps, p.gap_threshold)
        scene_iv = _cover(n, self.ev_start, self.ev_end)
        m = p.human_margin
        human_zone = _cover(n, self.human_steps - m, self.human_steps + m)
        self.final_human = int(self.human_steps[-1]) if self.human_steps.size else None
        imminent = _cover(n, self.ev_start - p.pre_window, self.ev_start - 1)
        if self.final_human is not None:
            f = self.final_human
            imminent |= _cover(n, np.array([f - max(p.lead_offsets)]), np.array([f - 1]))
        self.excl = scene_iv | human_zone
        self.cs_excl, self.cs_human = _prefix(self.excl), _prefix(self.human)
        self.cs_scene_iv, self.cs_human_zone = _prefix(scene_iv), _prefix(human_zone)
        self.cs_imminent = _prefix(imminent)

    def _inside(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        return (lo >= 0) & (hi < self.n) & (lo <= hi)

    def _keep(self, lo: np.ndarray, hi: np.ndarray, ok: np.ndarray) -> Windows:
        lo, hi = lo[ok], hi[ok]
        return lo, hi, _spread(lo, hi, self.p.frames_per_clip)

    def easy(self) -> Windows:
        """A-easy (Table 9): safe segments outside the exclusion region, cut into windows."""
        safe = ~(self.excl | self.contact)
        edges = np.diff(np.concatenate([[0], safe.view(np.int8), [0]]))
        starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        w = self.p.safe_event_window
        per = (ends - starts) // w  # partial windows are dropped (Table 12 counts whole ones)
        seg = np.repeat(np.arange(per.size), per)
        within = np.arange(seg.size) - np.repeat(np.cumsum(per) - per, per)
        lo = starts[seg] + within * w
        return self._keep(lo, lo + w - 1, np.ones(lo.size, dtype=bool))

    def near_miss_events(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        frames = np.flatnonzero((self.d < self.p.near_miss_dist) & ~self.contact)
        return _cluster(frames, self.p.near_miss_gap)

    def near_miss(self) -> Windows:
        """A-hard (Table 9): window +- half_span around each near-miss cluster centre."""
        start, end, _ = self.near_miss_events()
        c = (start + end) // 2
        lo, hi = c - self.p.near_miss_half_span, c + self.p.near_miss_half_span
        ok = self._inside(lo, hi)
        ok[ok] = ~_hits(self.cs_excl, lo[ok], hi[ok])
        return self._keep(lo, hi, ok)

    def scene_collision(self) -> Windows:
        """Task 1 B (Table 9): the interval of each scene event large enough to sample."""
        lo, hi = self.ev_start, self.ev_end
        ok = (self.ev_size >= self.p.min_scene_collision_frames) & \
            (hi - lo + 1 >= self.p.frames_per_clip)
        ok &= ~_hits(self.cs_human, lo, hi)
        return self._keep(lo, hi, ok)

    def human_collision(self) -> Windows:
        """Task 1 C (Table 9): the final human-collision frame and the frames just before it."""
        k = self.p.frames_per_clip
        if self.final_human is None or self.final_human < k - 1:
            return _no_windows(k)
        f = self.final_human
        return np.array([f - k + 1]), np.array([f]), np.arange(f - k + 1, f + 1)[None, :]

    def pre(self) -> Windows:
        """Task 2 B (Table 9): the pre_window before each scene event starts."""
        lo, hi = self.ev_start - self.p.pre_window, self.ev_start - 1
        ok = self._inside(lo, hi)
        ok[ok] = ~(_hits(self.cs_scene_iv, lo[ok], hi[ok]) |
                   _hits(self.cs_human_zone, lo[ok], hi[ok]))
        return self._keep(lo, hi, ok)

    def post(self) -> Windows:
        """Task 2 A-post (Table 9): the post_window after each scene event ends."""
        lo, hi = self.ev_end + 1, self.ev_end + self.p.post_window
        ok = self._inside(lo, hi)
        lo_, hi_ = lo[ok], hi[ok]
        bad = _hits(self.cs_scene_iv, lo_, hi_) | _hits(self.cs_human_zone, lo_, hi_)
        if self.p.strict_task2_negatives:    # also not inside the next event's B zone
            bad |= _hits(self.cs_imminent, lo_, hi_)
        ok[ok] = ~bad
        return self._keep(lo, hi, ok)

    def lead(self) -> Windows:
        """Task 2 C (Table 9): the first valid lead-offset frames before the final contact."""
        k = self.p.frames_per_clip
        if self.final_human is None:
            return _no_windows(k)
        cand = self.final_human - np.asarray(self.p.lead_offsets)
        valid = cand >= 0
        valid[valid] = ~self.human[cand[valid]]
        chosen = np.sort(cand[valid][:k])
        if chosen.size < k:
            return _no_windows(k)
        return chosen[:1], chosen[-1:], chosen[None, :]

    def not_imminent(self, w: Windows) -> Windows:
        lo, hi, fr = w
        ok = ~_hits(self.cs_imminent, lo, hi)
        return lo[ok], hi[ok], fr[ok]

    def windows(self, task: int) -> dict[str, Windows]:
        if task == 1:
            return {"no_event_easy": self.easy(), "no_event_hard_negative": self.near_miss(),
                    "scene_collision": self.scene_collision(),
                    "human_collision_risk": self.human_collision()}
        easy, near = self.easy(), self.near_miss()
        if self.p.strict_task2_negatives:
            easy, near = self.not_imminent(easy), self.not_imminent(near)
        return {"no_risk_easy": easy, "no_risk_hard_negative": near,
                "no_risk_post_collision": self.post(), "scene_collision_imminent": self.pre(),
                "human_collision_imminent": self.lead()}

    def clips(self, task: int) -> list[Clip]:
        e, out = self.e, []
        for st, (lo, hi, fr) in self.windows(task).items():
            if not lo.size:
                continue
            _, label = LABEL_OF[st]
            dist = self.d[fr]
            delta = dist[:, -1] - dist[:, 0]
            tol = self.p.trend_tolerance_m
            trend = np.where(delta < -tol, "closing", np.where(delta > tol, "separating",
                                                                 "stable"))
            # App. G.1 scores a distance only where the human is visible in the simulator
            shown = dist.tolist() if e.human_visible is None else \
                np.where(e.human_visible[fr], dist, None).tolist()
            rows = zip(fr.tolist(), lo.tolist(), hi.tolist(), shown, trend.tolist(),
                       self.human[fr].tolist(), self.scene[fr].tolist(), strict=True)
            for frames, a, b, dd, tr, hum, sc in rows:
                key = f"{e.episode_dir}|{st}|{','.join(map(str, frames))}"
                digest = hashlib.blake2b(key.encode(), digest_size=6).hexdigest()
                out.append(Clip(
                    clip_id=f"{st}-{digest}", task=task, label=label, sample_type=st,
                    episode_dir=e.episode_dir, episode_id=int(e.episode_id),
                    scene_id=str(e.scene_id), human_type=e.human_type, sim_task=e.sim_task,
                    frames=tuple(frames), window=(a, b), truth_distance=tuple(dd),
                    truth_trend=tr, truth_human=tuple(hum), truth_scene=tuple(sc)))
        return out


def _no_windows(k: int) -> Windows:
    z = np.zeros(0, dtype=np.int64)
    return z, z, np.zeros((0, k), dtype=np.int64)


def _episodes(episodes: Iterable[EpisodeIndex], p: SamplerParams) -> list[_Episode]:
    out, seen = [], set()
    for e in episodes:
        if not isinstance(e, EpisodeIndex):
            raise RobosafeError(f"expected EpisodeIndex records, got {type(e).__name__}")
        if e.episode_dir in seen:
            raise RobosafeError(f"{e.episode_dir}: episode given twice")
        seen.add(e.episode_dir)
        out.append(_Episode(e, p))
    return out


def _task(task: int) -> int:
    if task not in (1, 2) or isinstance(task, bool):
        raise RobosafeError(f"task must be 1 or 2, got {task!r}")
    return int(task)


def _order(c: Clip) -> tuple[Any, ...]:
    return _TYPE_ORDER[c.sample_type], c.episode_dir, c.frames


# ----------------------------------------------------------------------------- sampling


def candidate_clips(episodes: Iterable[EpisodeIndex], task: int,
                    params: SamplerParams = SamplerParams()) -> list[Clip]:
    """Every clip the Table 9 rules produce for ``task`` (1 or 2), before balancing, ordered by
    (sample type, episode_dir, frames)."""
    task = _task(task)
    clips = [c for ep in _episodes(episodes, params) for c in ep.clips(task)]
    return sorted(clips, key=_order)


def _allocate(caps: Sequence[int], k: int) -> list[int]:
    """Split k over groups with capacities ``caps`` as evenly as possible (water-filling);
    requires k <= sum(caps). Groups are filled smallest first so that a scarce group's shortfall
    moves to the others; leftover units go to the larger groups."""
    alloc = [0] * len(caps)
    order = sorted(range(len(caps)), key=lambda i: caps[i])
    left = k
    for j, i in enumerate(order):
        alloc[i] = min(caps[i], left // (len(caps) - j))
        left -= alloc[i]
    for i in reversed(order):  # floor division may leave a few units unassigned
        extra = min(left, caps[i] - alloc[i])
        alloc[i] += extra
        left -= extra
    return alloc


def _stratified(clips: list[Clip], k: int, rng: np.random.Generator) -> list[Clip]:
    """k clips drawn evenly across (human_type, sim_task) strata (App. F.2)."""
    strata: dict[tuple[str, str], list[Clip]] = {}
    for c in clips:
        strata.setdefault((c.human_type, c.sim_task), []).append(c)
    keys = sorted(strata)
    out = []
    for key, q in zip(keys, _allocate([len(strata[s]) for s in keys], k), strict=True):
        group = strata[key]
        out += [group[i] for i in sorted(rng.choice(len(group), size=q, replace=False))]
    return out


def balance(candidates: Sequence[Clip], task: int, params: SamplerParams = SamplerParams(),
            seed: int = 0) -> list[Clip]:
    """App. F.2 balancing: down-sample every class to the smallest of A/B/C (or
    ``params.clips_per_class`` if smaller), splitting A evenly over its subtypes first and every
    class / subtype evenly over (human_type, sim_task). Seeded by ``default_rng(seed)`` only."""
    task = _task(task)
    by_type: dict[str, list[Clip]] = {st: [] for sts in SAMPLE_TYPES[task].values() for st in sts}
    for c in sorted(candidates, key=_order):
        if c.sample_type not in by_type:
            raise RobosafeError(f"clip {c.clip_id}: sample type {c.sample_type!r} is not a task "
                                f"{task} type")
        by_type[c.sample_type].append(c)
    counts = {lab: sum(len(by_type[st]) for st in sts) for lab, sts in SAMPLE_TYPES[task].items()}
    n = min(counts.values())
    if n == 0:
        raise RobosafeError(f"task {task}: cannot balance, a class has no candidate clips "
                            f"({', '.join(f'{k}={v}' for k, v in counts.items())})")
    if params.clips_per_class is not None:
        n = min(n, params.clips_per_class)
    rng = np.random.default_rng(seed)
    out = []
    for sts in SAMPLE_TYPES[task].values():
        for st, q in zip(sts, _allocate([len(by_type[s]) for s in sts], n), strict=True):
            out += _stratified(by_type[st], q, rng)
    return sorted(out, key=_order)


def sample_clips(episodes: Iterable[EpisodeIndex], task: int,
                 params: SamplerParams = SamplerParams(), seed: int = 0) -> list[Clip]:
    """The balanced TouchSafeBench clip set of ``task`` (Table 9 rules, App. F.2 balancing).
    The same episodes, params and seed always give the identical clip list."""
    return balance(candidate_clips(episodes, task, params), task, params, seed)


# ----------------------------------------------------------------------------- clip index files

_PARQUET_FIELDS: list[tuple[str, str]] = [
    ("clip_id", "string"), ("task", "int64"), ("label", "string"), ("sample_type", "string"),
    ("episode_dir", "string"), ("episode_id", "int64"), ("scene_id", "string"),
    ("human_type", "string"), ("sim_task", "string"), ("frames", "ints"), ("window", "ints"),
    ("truth_distance", "floats"), ("truth_trend", "string"), ("truth_contacts", "contacts")]


def _parquet_schema() -> Any:
    import pyarrow as pa

    kinds = {"string": pa.string(), "int64": pa.int64(), "ints": pa.list_(pa.int64()),
             "floats": pa.list_(pa.float64()),
             "contacts": pa.struct([("human", pa.list_(pa.bool_())),
                                    ("scene", pa.list_(pa.bool_()))])}
    return pa.schema([(name, kinds[kind]) for name, kind in _PARQUET_FIELDS])


def write_clip_index(clips: Iterable[Clip], path: str | os.PathLike[str]) -> Path:
    """Write one record per clip: Parquet when ``path`` ends in ``.parquet``, else JSON lines.
    Written atomically (temp file + rename)."""
    path = Path(path)
    records = [c.to_record() for c in clips]
    tmp = path.with_name(path.name + ".tmp")
    try:
        if path.suffix == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.Table.from_pylist(records, schema=_parquet_schema()), tmp)
        else:
            with open(tmp, "w", encoding="utf-8") as f:
                f.writelines(json.dumps(r) + "\n" for r in records)
        os.replace(tmp, path)
    except OSError as e:
        raise RobosafeError(f"{path}: cannot write clip index ({e.strerror or e})") from None
    return path


def read_clip_index(path: str | os.PathLike[str]) -> list[Clip]:
    """Read a clip index written by :func:`write_clip_index` (format chosen by suffix)."""
    path = Path(path)
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            try:
                rows = pq.read_table(path).to_pylist()
            except (ValueError, OSError) as e:
                if isinstance(e, FileNotFoundError):
                    raise
                raise RobosafeError(f"{path}: unreadable Parquet clip index ({e})") from None
            return [Clip.from_record(r, f"{path}: row {i}") for i, r in enumerate(rows)]
        clips = []
        with open(path, encoding="utf-8") as f:
            for i, line in enumerate(bounded_lines(f, str(path)), 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    raise RobosafeError(f"{path}:{i}: malformed JSON ({e.msg})") from None
                except RecursionError:
                    raise RobosafeError(f"{path}:{i}: {DEEP_JSON}") from None
                clips.append(Clip.from_record(rec, f"{path}:{i}"))
        return clips
    except UnicodeDecodeError as e:
        raise RobosafeError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise RobosafeError(f"{path}: cannot read clip index ({e.strerror or e})") from None


# ----------------------------------------------------------------------------- F.3 sweeps

# Which F.3 table a parameter belongs to (its rows have that table's columns).
_FAMILY = {"gap_threshold": "scene_events", "safe_event_window": "safe_windows",
           "near_miss_dist": "near_miss", "near_miss_gap": "near_miss",
           "near_miss_half_span": "near_miss", "pre_window": "pre_post",
           "post_window": "pre_post", "lead_offsets": "lead"}


def _n(x: Any) -> float | int | None:
    """Plain-Python number (rows are JSON-ready); median of an empty set is None."""
    if x is None:
        return None
    f = float(x)
    return int(f) if f.is_integer() else f


def _row(eps: list[_Episode], family: str, param: str, p: SamplerParams,
         task: int) -> dict[str, Any]:
    if family == "scene_events":  # Table 11
        sizes = np.concatenate([ep.ev_size for ep in eps]) if eps else np.zeros(0)
        q = np.percentile(sizes, [50, 75, 90]) if sizes.size else [None] * 3
        row = {"events": int(sizes.size),
               "episodes_with_events": sum(ep.ev_size.size > 0 for ep in eps),
               "median_size": _n(q[0]), "p75": _n(q[1]), "p90": _n(q[2])}
    elif family == "safe_windows":  # Table 12
        per = [ep.easy()[0].size for ep in eps]
        row = {"events": sum(per), "episodes_with_events": sum(k > 0 for k in per),
               "median_size": p.safe_event_window,
               "avg_per_episode": round(sum(per) / len(eps), 2) if eps else None}
    elif family == "near_miss":  # Table 13
        sizes = [ep.near_miss_events()[2] for ep in eps]
        allsz = np.concatenate(sizes) if sizes else np.zeros(0, dtype=np.int64)
        row = {"near_miss_dist": p.near_miss_dist, "near_miss_gap": p.near_miss_gap,
               "near_miss_half_span": p.near_miss_half_span, "events": int(allsz.size),
               "episodes_with_events": sum(s.size > 0 for s in sizes),
               "median_size": _n(np.median(allsz)) if allsz.size else None,
               "max_size": int(allsz.max()) if allsz.size else None,
               "valid": sum(ep.near_miss()[0].size for ep in eps)}
    elif family == "pre_post":  # Table 14; "events" are the windows the swept one governs
        pre = [ep.pre()[0].size for ep in eps]
        post = [ep.post()[0].size for ep in eps]
        per = {"pre_window": pre, "post_window": post}.get(
            param, [a + b for a, b in zip(pre, post, strict=True)])
        row = {"events": sum(per), "episodes_with_events": sum(k > 0 for k in per),
               "median_size": p.post_window if param == "post_window" else p.pre_window,
               "pre_window": p.pre_window, "post_window": p.post_window,
               "valid_pre": sum(pre), "valid_post": sum(post)}
    else:
        raise AssertionError(family)
    row["candidates"] = _candidate_counts(eps, task)
    return row


def _lead_row(eps: list[_Episode], offset: int) -> dict[str, Any]:
    """Table 15 row: human-collision episodes with a valid frame at ``f - offset``."""
    early = overlap = valid = 0
    for ep in eps:
        f = ep.final_human
        if f is None:
            continue
        if f - offset < 0:
            early += 1
        elif ep.human[f - offset]:
            overlap += 1
        else:
            valid += 1
    return {"events": valid, "episodes_with_events": valid, "median_size": None,
            "valid": valid, "skip_too_early": early, "skip_overlap": overlap}


def _candidate_counts(eps: list[_Episode], task: int) -> dict[str, int]:
    counts = dict.fromkeys((st for sts in SAMPLE_TYPES[task].values() for st in sts), 0)
    for ep in eps:
        for st, w in ep.windows(task).items():
            counts[st] += int(w[0].size)
    return counts


def _sweep_rows(episodes: Sequence[EpisodeIndex], family: str, param: str,
                settings: Iterable[tuple[Any, SamplerParams]], task: int) -> list[dict[str, Any]]:
    rows = []
    for value, p in settings:
        eps = _episodes(episodes, p)
        head = {"param": param, "value": value}
        if family == "lead":
            rows.append({**head, **_lead_row(eps, value)})
        elif family == "other":
            counts = _candidate_counts(eps, task)
            per_ep = [sum(w[0].size for w in ep.windows(task).values()) for ep in eps]
            rows.append({**head, "events": sum(counts.values()),
                         "episodes_with_events": sum(k > 0 for k in per_ep),
                         "median_size": None, "candidates": counts})
        else:
            rows.append({**head, **_row(eps, family, param, p, task)})
    return rows


def sweep(episodes: Iterable[EpisodeIndex], param: str, values: Iterable[Any], task: int = 1,
          params: SamplerParams = SamplerParams()) -> list[dict[str, Any]]:
    """One F.3 sweep: a row per value of ``param`` (other parameters from ``params``).

    Every row has ``param``, ``value``, ``events``, ``episodes_with_events``, ``median_size``
    (event size in event frames; the window length for window parameters), the columns of the
    parameter's table (Table 11: p75, p90; Table 12: avg_per_episode over all episodes; Table 13:
    max_size, valid = near-miss windows outside the exclusion region; Table 14: valid_pre,
    valid_post) and ``candidates``: Table 9 candidate counts per sample type of ``task``.
    ``lead_offsets`` takes single offsets and gives Table 15 rows (valid, skip_too_early,
    skip_overlap over the human-collision episodes) instead."""
    task = _task(task)
    names = {f.name for f in fields(SamplerParams)}
    if param not in names:
        raise RobosafeError(f"unknown sampler parameter {param!r}; expected one of "
                            f"{', '.join(sorted(names))}")
    episodes = list(episodes)
    family = _FAMILY.get(param, "other")
    values = list(values)
    if family == "lead":
        for v in values:
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise RobosafeError(f"lead_offsets sweep takes single positive offsets (Table "
                                    f"15), got {v!r}")
        settings = [(v, params) for v in values]
    else:
        settings = [(v, replace(params, **{param: v})) for v in values]
    return _sweep_rows(episodes, family, param, settings, task)


# F.3 sweep grids (Tables 11-15).
SWEEP_GRIDS: dict[str, tuple[Any, ...]] = {
    "gap_threshold": (5, 10, 15, 20, 30, 50),
    "safe_event_window": (30, 45, 60, 90, 120, 150, 180),
    "near_miss_dist": (0.8, 1.0, 1.5, 2.0),
    "near_miss_gap": (5, 15, 30),
    "pre_post_window": (10, 15, 20, 30, 45, 60),
    "lead_offsets": (3, 5, 10, 15, 20, 25, 30),
}


def sweep_all(episodes: Iterable[EpisodeIndex], task: int = 1,
              params: SamplerParams = SamplerParams()) -> dict[str, list[dict[str, Any]]]:
    """Tables 11-15 around ``params`` on the F.3 grids: Table 13 crosses near_miss_dist with
    near_miss_gap, Table 14 sets pre_window and post_window to the same value, as the paper does.
    """
    episodes = list(episodes)
    g = SWEEP_GRIDS
    table13 = []
    for dist in g["near_miss_dist"]:
        table13 += sweep(episodes, "near_miss_gap", g["near_miss_gap"], task,
                         replace(params, near_miss_dist=dist))
    windows = [(w, replace(params, pre_window=w, post_window=w)) for w in g["pre_post_window"]]
    return {
        "table11_gap_threshold": sweep(episodes, "gap_threshold", g["gap_threshold"], task,
                                       params),
        "table12_safe_event_window": sweep(episodes, "safe_event_window",
                                           g["safe_event_window"], task, params),
        "table13_near_miss": table13,
        "table14_pre_post_window": _sweep_rows(episodes, "pre_post", "pre_post_window",
                                               windows, _task(task)),
        "table15_lead_offsets": sweep(episodes, "lead_offsets", g["lead_offsets"], task, params),
    }
