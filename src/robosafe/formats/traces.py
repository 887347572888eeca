"""robosafe traces inside LeRobot datasets, and traces out of other tools' LeRobot datasets.

Out: every App. B family a trace recorded (SafeVLA-Bench App. B, Table 13) becomes a per-frame
``safety.*`` feature, so a LeRobot loader sees it beside ``observation.*`` and ``action``:

- ``safety.eef_pos_m`` (3,), ``safety.gripper_contact`` bool, ``safety.cost`` (CBDDL cost);
- ``safety.body_pos_m`` (3 B,) and ``safety.body_quat_wxyz`` (4 Q,) over the union of the
  episodes' pose bodies, named ``<body>.x`` ... ``<body>.w``;
- ``safety.contact_force_n`` (P,) and ``safety.in_contact`` (P,) bool, one column per pair of
  the scene's contact bodies (every pair of the union of the episodes' ``contact_names``, which
  the recorder takes from the scene, not from what touched), named ``<a>|<b>``: the pair's
  force, 0 with ``in_contact`` false when it is not in contact (a trace holds at most one
  contact per pair and step; the recorder merges MuJoCo's contacts that way). So the schema is
  fixed by the task: a careful and a careless dataset of one task have the same features and
  lerobot's ``aggregate_datasets`` merges them;
- ``safety.joint_torque_nm`` (J,).

All float64, so the trace comes back bit for bit. No NaN anywhere (lerobot's tools read NaN as
missing data): a family or body an episode lacks is 0 in its frames, and the episode's
``robosafe/trace`` record says what it has. What is not per frame (ids, roles, target,
seed, task tags, which families the episode has) is one JSON column ``robosafe/trace`` of
``meta/episodes``, and ``meta/robosafe.json`` marks the dataset as robosafe's.

In: a robosafe dataset gives back its traces; another tool's dataset is read through a profile
of ``data/lerobot.yaml`` (e.g. LIBERO conversions: the eef position is the first 3 numbers of
``observation.state``) and every family it lacks is listed once per dataset. An episode that
cannot be read is an error of its own (the others are kept); success is unknown (None) when the
dataset does not say it, or says two different things (the ``robosafe/trace`` header and the
``next.success`` frames), never a guessed False.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any

import numpy as np
import yaml

from robosafe.errors import DatasetError, RobosafeError
from robosafe.formats.lerobot import Dataset
from robosafe.textio import parse_json
from robosafe.trace.episode import ROLES, Episode
from robosafe.trace.validate import check_episode, task_tags_from_record

TRACE_COLUMN = "robosafe/trace"
REPLAY_COLUMN = "robosafe/replay"  # the episode's cell: task_id, seed, language / visual level
FORMAT = "robosafe-lerobot/1"
FAMILIES = ("eef_pos_m", "body_pos_m", "body_quat_wxyz", "contacts", "joint_torque_nm",
            "gripper_contact", "cost")
_XYZ, _WXYZ = ("x", "y", "z"), ("w", "x", "y", "z")


@cache
def profiles_doc() -> dict:
    text = resources.files("robosafe.formats").joinpath("data/lerobot.yaml").read_text()
    return yaml.safe_load(text)


# --------------------------------------------------------------------------- out

@dataclass
class Layout:
    """The ``safety.*`` columns of a dataset: the union over its episodes."""

    bodies: list[str] = field(default_factory=list)
    quats: list[str] = field(default_factory=list)
    pairs: list[tuple[str, str]] = field(default_factory=list)
    joints: int = 0
    eef: bool = False
    grip: bool = False
    cost: bool = False

    @classmethod
    def of(cls, episodes: list[Episode]) -> Layout:
        lay = cls()
        bodies, quats, names = {}, {}, {}
        for ep in episodes:
            if ep.body_pos_m is not None:
                bodies.update(dict.fromkeys(ep.body_names))
            if ep.body_quat_wxyz is not None:
                quats.update(dict.fromkeys(ep.quat_names))
            if ep.contact_ptr is not None:
                names.update(dict.fromkeys(ep.contact_names))
            if ep.joint_torque_nm is not None:
                lay.joints = max(lay.joints, ep.joint_torque_nm.shape[1])
            lay.eef |= ep.eef_pos_m is not None
            lay.grip |= ep.gripper_contact is not None
            lay.cost |= ep.cost is not None
        scene = sorted(names)
        lay.bodies, lay.quats = list(bodies), list(quats)
        lay.pairs = [(a, b) for i, a in enumerate(scene) for b in scene[i + 1:]]
        for a, b in lay.pairs:
            if "|" in a or "|" in b:
                raise RobosafeError(f"contact body name with '|' cannot be exported: {a}, {b}")
        return lay

    def features(self) -> dict[str, dict]:
        f = {}
        if self.eef:
            f["safety.eef_pos_m"] = _ft("float64", 3, list(_XYZ))
        if self.bodies:
            f["safety.body_pos_m"] = _ft("float64", 3 * len(self.bodies),
                                         [f"{b}.{c}" for b in self.bodies for c in _XYZ])
        if self.quats:
            f["safety.body_quat_wxyz"] = _ft("float64", 4 * len(self.quats),
                                             [f"{b}.{c}" for b in self.quats for c in _WXYZ])
        if self.pairs:
            names = [f"{a}|{b}" for a, b in self.pairs]
            f["safety.contact_force_n"] = _ft("float64", len(self.pairs), names)
            f["safety.in_contact"] = _ft("bool", len(self.pairs), names)
        if self.joints:
            f["safety.joint_torque_nm"] = _ft("float64", self.joints,
                                              [f"joint_{i}" for i in range(self.joints)])
        if self.grip:
            f["safety.gripper_contact"] = {"dtype": "bool", "shape": [1], "names": None}
        if self.cost:
            f["safety.cost"] = {"dtype": "float64", "shape": [1], "names": None}
        return f

    def frames(self, ep: Episode) -> tuple[dict[str, np.ndarray], list[str]]:
        """The episode's ``safety.*`` columns (T rows) and warnings about what could not be
        represented exactly."""
        n, out, notes = ep.n_steps, {}, []
        if self.eef:
            out["safety.eef_pos_m"] = _or_zero(ep.eef_pos_m, (n, 3))
        if self.bodies:
            out["safety.body_pos_m"] = _spread(ep.body_pos_m, ep.body_names, self.bodies, n, 3)
        if self.quats:
            out["safety.body_quat_wxyz"] = _spread(ep.body_quat_wxyz, ep.quat_names,
                                                   self.quats, n, 4)
        if self.pairs:
            forces = np.zeros((n, len(self.pairs)))
            touch = np.zeros((n, len(self.pairs)), bool)
            if ep.contact_ptr is not None:
                col = {p: i for i, p in enumerate(self.pairs)}
                names = ep.contact_names
                step = np.repeat(np.arange(n), np.diff(ep.contact_ptr))
                cols = np.array([col[_pair(names[a], names[b])] for a, b in
                                 zip(ep.contact_a.tolist(), ep.contact_b.tolist())], dtype=int)
                if cols.size:
                    seen = np.full((n, len(self.pairs)), -np.inf)
                    np.maximum.at(seen, (step, cols), ep.contact_force_n)
                    hit = np.isfinite(seen)
                    forces[hit], touch[hit] = seen[hit], True
                    merged = cols.size - int(hit.sum())
                    if merged:
                        notes.append(f"episode {ep.episode_id}: {merged} repeated contacts of "
                                     "one body pair in one step kept as their largest force")
            out["safety.contact_force_n"], out["safety.in_contact"] = forces, touch
        if self.joints:
            tau = np.zeros((n, self.joints))
            if ep.joint_torque_nm is not None:
                tau[:, :ep.joint_torque_nm.shape[1]] = ep.joint_torque_nm
            out["safety.joint_torque_nm"] = tau
        if self.grip:
            g = ep.gripper_contact
            out["safety.gripper_contact"] = np.zeros(n, bool) if g is None else g.astype(bool)
        if self.cost:
            out["safety.cost"] = np.zeros(n) if ep.cost is None else ep.cost
        return out, notes


def _ft(dtype: str, n: int, names: list[str]) -> dict:
    return {"dtype": dtype, "shape": [n], "names": names}


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def _or_zero(x: np.ndarray | None, shape: tuple[int, int]) -> np.ndarray:
    return np.zeros(shape) if x is None else x


def _spread(x: np.ndarray | None, names: tuple[str, ...], union: list[str], n: int,
            k: int) -> np.ndarray:
    out = np.zeros((n, len(union), k))
    if x is not None:
        slot = {b: i for i, b in enumerate(union)}
        out[:, [slot[b] for b in names]] = x
    return out.reshape(n, -1)


def trace_header(ep: Episode) -> str:
    """The per-episode JSON that is not per frame (column ``robosafe/trace``)."""
    has = sorted(ep.signal_families() - {"t"})
    return json.dumps({
        "episode_id": ep.episode_id, "benchmark": ep.benchmark, "task_id": ep.task_id,
        "success": None if ep.success is None else bool(ep.success), "dt": ep.dt, "target_object": ep.target_object,
        "body_roles": ep.body_roles, "body_names": list(ep.body_names),
        "quat_names": list(ep.quat_names), "contact_names": list(ep.contact_names),
        "families": has, "joints": 0 if ep.joint_torque_nm is None else
        int(ep.joint_torque_nm.shape[1]), "seed": ep.seed, "instance_id": ep.instance_id, "policy": ep.policy,
        "task_tags": None if ep.task_tags is None else ep.task_tags.to_dict(),
        "meta": ep.meta}, allow_nan=False)


# --------------------------------------------------------------------------- in

@dataclass
class Imported:
    """Traces read from one dataset, and what it could not provide (one line each)."""

    episodes: list[Episode]
    unscored: dict[str, str]  # family -> what it would have scored
    notes: list[str]
    profile: str
    errors: list[RobosafeError] = field(default_factory=list)
    total: int = 0  # episodes the dataset lists (read or not)

    def lines(self, name: str) -> list[str]:
        out = []
        if self.unscored:
            fams = "; ".join(f"{k} ({v})" for k, v in self.unscored.items())
            out.append(f"{name}: unscored families (not in the dataset, never counted as "
                       f"satisfied): {fams}")
        out += [f"{name}: {n}" for n in self.notes]
        return out


def read_traces(ds: Dataset) -> Imported:
    """The dataset's episodes as traces: exact for robosafe's datasets, through a profile for
    other tools'."""
    if ds.robosafe is not None and ds.robosafe.get("format") == FORMAT or _robosafe_frames(ds):
        return _own(ds)
    return _foreign(ds)


def _robosafe_frames(ds: Dataset) -> bool:
    """The dataset has robosafe's ``safety.*`` features without robosafe's records (an
    aggregate made by lerobot's ``aggregate_datasets`` keeps frames, not side files)."""
    return all(k in ds.features for k in ("safety.eef_pos_m", "next.success"))


def _names(ft: dict) -> list[str]:
    """A feature's per-column names; anything but a list of strings is no names."""
    v = ft.get("names")
    return v if isinstance(v, list) and all(isinstance(n, str) for n in v) else []


def header(row: dict[str, Any], column: str, where: str) -> dict[str, Any]:
    """A per-episode JSON column of ``meta/episodes`` (``robosafe/trace``, ``robosafe/replay``)
    as an object."""
    if not isinstance(row.get(column), str):
        raise DatasetError(f"{where}: no {column} column")
    h = parse_json(row[column], f"{where}: {column}", DatasetError)
    if not isinstance(h, dict):
        raise DatasetError(f"{where}: {column}: expected a JSON object")
    return h


def _frame_success(f: dict[str, np.ndarray], where: str) -> bool | None:
    """Whether any frame's ``next.success`` is set (LeRobot marks the final frame of a
    success); None without the column."""
    if "next.success" not in f:
        return None
    col = f["next.success"]
    if col.dtype.kind not in "biu":
        raise DatasetError(f"{where}: next.success: expected booleans, got {col.dtype}")
    return bool(col.any())


def _own(ds: Dataset) -> Imported:
    names = {k: _names(v) for k, v in ds.features.items()}
    slots = {k: {n: i for i, n in enumerate(v)} for k, v in names.items()}
    pairs = [tuple(n.split("|", 1)) for n in names.get("safety.contact_force_n", [])]
    out, errors, notes, foreign = [], [], list(ds.notes), []
    for row in ds.episodes:
        idx = row["episode_index"]
        where = f"{ds.root}: episode {idx}"
        try:
            f = ds.frames(idx)
            row = ds.record(idx, f)
            if TRACE_COLUMN not in row:
                foreign.append(idx)
                h = _frames_header(ds, f, idx, where)
            else:
                h = header(row, TRACE_COLUMN, where)
            ep = check_episode(_episode(h, f, slots, pairs), source=where)
            marked = _frame_success(f, where)
            if marked is not None and ep.success is not None and marked != ep.success:
                # neither record can be preferred without guessing which one was edited
                notes.append(f"episode {idx} ({ep.episode_id}): {TRACE_COLUMN} says success "
                             f"{ep.success}, the next.success frames say {marked}; success "
                             "is unknown for it (left out of SR)")
                ep = replace(ep, success=None)
            out.append(ep)
        except (KeyError, ValueError, TypeError, IndexError, AttributeError) as exc:
            errors.append(DatasetError(f"{where}: {TRACE_COLUMN} or safety.* columns "
                                       f"unreadable: {type(exc).__name__}: {exc}"))
        except RobosafeError as exc:
            errors.append(exc)
    if foreign:
        from robosafe.formats.lerobot import _span

        notes.append(f"episodes {_span(foreign)} have no robosafe record (added by another "
                     "tool, or merged without robosafe's side file): read from their safety.* "
                     "frames as foreign episodes (success from next.success; body roles from "
                     "meta/robosafe.json, else 'other'; no target or task tags)")
    missing = set(FAMILIES) - {f for e in out for f in e.signal_families()}
    fams = profiles_doc()["families"]
    return Imported(out, {k: fams[k] for k in FAMILIES if k in missing and k in fams}, notes,
                    "robosafe", errors, len(ds.episodes))


def _frames_header(ds: Dataset, f: dict[str, np.ndarray], idx: int, where: str) -> dict:
    """What a ``robosafe/trace`` record would say, from the frames alone."""
    names = {k: _names(v) for k, v in ds.features.items()}
    bodies = list(dict.fromkeys(n.rsplit(".", 1)[0] for n in names.get("safety.body_pos_m", [])))
    quats = list(dict.fromkeys(n.rsplit(".", 1)[0]
                               for n in names.get("safety.body_quat_wxyz", [])))
    contact = sorted({b for n in names.get("safety.contact_force_n", []) for b in n.split("|")})
    has = {fam for fam, feat in (("eef_pos_m", "safety.eef_pos_m"),
                                 ("body_pos_m", "safety.body_pos_m"),
                                 ("body_quat_wxyz", "safety.body_quat_wxyz"),
                                 ("contacts", "safety.contact_force_n"),
                                 ("joint_torque_nm", "safety.joint_torque_nm"),
                                 ("gripper_contact", "safety.gripper_contact"),
                                 ("cost", "safety.cost")) if feat in f}
    task = ds.task(f["task_index"][0], where) if "task_index" in f else ""
    tau = f.get("safety.joint_torque_nm")
    # the scene's roles when robosafe's dataset marker is still there (lerobot appended to
    # it); a merge made elsewhere has none: "other" plays no scored role
    known = (ds.robosafe or {}).get("body_roles")
    known = known if isinstance(known, dict) else {}
    roles = {b: known.get(b) if known.get(b) in ROLES else "other" for b in contact}
    return {"episode_id": f"{ds.root.name}/episode_{idx:06d}", "benchmark": "lerobot",
            "task_id": task_name(task), "success": _frame_success(f, where),
            "dt": 1.0 / float(ds.fps), "target_object": None, "body_roles": roles,
            "body_names": bodies, "quat_names": quats, "contact_names": contact,
            "families": sorted(has), "joints": 0 if tau is None else tau.shape[1],
            "instance_id": f"episode_{idx:06d}",
            "meta": {"lerobot_dataset": str(ds.root), "episode_index": idx, "task": task}}


def _episode(h: dict, f: dict[str, np.ndarray], slots: dict, pairs: list) -> Episode:
    has = set(h["families"])
    n = len(f["frame_index"])

    def pick(feature: str, names: list[str], comps: tuple[str, ...]) -> np.ndarray:
        cols = [slots[feature][f"{b}.{c}"] for b in names for c in comps]
        return f[feature][:, cols].reshape(n, len(names), len(comps)).astype(float)

    kw: dict[str, Any] = {}
    if "eef_pos_m" in has:
        kw["eef_pos_m"] = f["safety.eef_pos_m"].astype(float)
    if "body_pos_m" in has:
        kw["body_names"] = tuple(h["body_names"])
        kw["body_pos_m"] = pick("safety.body_pos_m", h["body_names"], _XYZ)
    if "body_quat_wxyz" in has:
        kw["quat_names"] = tuple(h["quat_names"])
        kw["body_quat_wxyz"] = pick("safety.body_quat_wxyz", h["quat_names"], _WXYZ)
    if "contacts" in has:
        cn = list(h["contact_names"])
        index = {c: i for i, c in enumerate(cn)}
        forces = f.get("safety.contact_force_n", np.zeros((n, 0)))
        touch = f.get("safety.in_contact")
        if touch is None:  # written before the mask: NaN was "not in contact"
            touch = ~np.isnan(forces)
        steps, cols = np.nonzero(touch)  # row-major: step order
        kw["contact_names"] = tuple(cn)
        kw["contact_ptr"] = np.concatenate([[0], np.cumsum(np.bincount(steps, minlength=n))])
        kw["contact_a"] = np.array([index[pairs[c][0]] for c in cols], dtype=np.int32)
        kw["contact_b"] = np.array([index[pairs[c][1]] for c in cols], dtype=np.int32)
        kw["contact_force_n"] = forces[steps, cols].astype(float)
    if "joint_torque_nm" in has:
        tau = f["safety.joint_torque_nm"].astype(float)
        width = h["joints"] if "joints" in h else int(np.isfinite(tau).all(0).sum())
        kw["joint_torque_nm"] = tau[:, :width]
    if "gripper_contact" in has:
        kw["gripper_contact"] = f["safety.gripper_contact"].astype(bool)
    if "cost" in has:
        kw["cost"] = f["safety.cost"].astype(float)
    tags = h.get("task_tags")
    if h["success"] is not None and not isinstance(h["success"], bool):
        raise DatasetError(f"success: expected true, false or null, got {h['success']!r}")
    for key in ("episode_id", "benchmark", "task_id"):
        if not isinstance(h[key], str):
            raise DatasetError(f"{key}: expected a string, got {h[key]!r}")
    return Episode(
        episode_id=h["episode_id"], benchmark=h["benchmark"], task_id=h["task_id"],
        success=h["success"], dt=float(h["dt"]), target_object=h["target_object"],
        body_roles=dict(h["body_roles"]), t=np.arange(n, dtype=np.int64),
        task_tags=None if tags is None else task_tags_from_record(tags),
        seed=h.get("seed"), instance_id=h.get("instance_id"), policy=h.get("policy"),
        meta=dict(h.get("meta") or {}), **kw)


def _matches(ds: Dataset, match: dict[str, list[int]]) -> bool:
    return all(k in ds.features and list(ds.features[k].get("shape", [])) == list(v)
               for k, v in match.items())


def task_name(text: str) -> str:
    """A task string as a snake_case id ("pick up the bowl" -> "pick_up_the_bowl")."""
    return re.sub(r"[^0-9a-zA-Z]+", "_", text.strip()).strip("_").lower()


def _foreign(ds: Dataset) -> Imported:
    doc = profiles_doc()
    name, prof = next(((k, p) for k, p in doc["profiles"].items() if _matches(ds, p["match"])),
                      (None, None))
    if prof is None:
        known = ", ".join(f"{k} ({p['description'].split(':')[0]})"
                          for k, p in doc["profiles"].items())
        raise DatasetError(f"{ds.root}: not written by robosafe and matches no known layout "
                           f"({known}); robosafe cannot tell which columns hold the "
                           "end-effector or object poses")
    has_success = "next.success" in ds.features
    out, errors = [], []
    for row in ds.episodes:
        idx = row["episode_index"]
        where = f"{ds.root}: episode {idx}"
        try:
            out.append(check_episode(_foreign_episode(ds, idx, prof, where), source=where))
        except RobosafeError as exc:
            errors.append(exc)
    have = set(prof["signals"]) | ({"success"} if has_success else set())
    fams = doc["families"]
    unscored = {k: v for k, v in fams.items() if k not in have}
    return Imported(out, unscored, list(prof.get("notes", [])), name, errors, len(ds.episodes))


def _foreign_episode(ds: Dataset, idx: int, prof: dict, where: str) -> Episode:
    """One episode of another tool's dataset through its profile; success None (unknown)
    when the dataset has no ``next.success``."""
    f = ds.frames(idx)
    n = len(f["frame_index"])
    task = ds.task(f["task_index"][0], where) if "task_index" in f else ""
    kw = {}
    for fam, src in prof["signals"].items():
        lo, hi = src["columns"]
        col = f.get(src["feature"])
        if col is None or col.ndim != 2 or col.shape[1] < hi or col.dtype.kind not in "fiu":
            raise DatasetError(f"{where}: {src['feature']}: expected numbers with at least "
                               f"{hi} columns per frame for {fam}")
        kw[fam] = np.asarray(col[:, lo:hi], dtype=float)
    return Episode(
        episode_id=f"{ds.root.name}/episode_{idx:06d}", benchmark=prof["benchmark"],
        task_id=task_name(task), success=_frame_success(f, where), dt=1.0 / float(ds.fps),
        target_object=None, body_roles={}, t=np.arange(n, dtype=np.int64),
        instance_id=f"episode_{idx:06d}",
        meta={"lerobot_dataset": str(ds.root), "episode_index": idx, "task": task}, **kw)


def profile_benchmarks(profile: str) -> list[str]:
    """Benchmarks a profile's task names are looked up in, in order."""
    return list(profiles_doc()["profiles"].get(profile, {}).get("benchmarks", []))

