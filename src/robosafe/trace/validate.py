"""App. B episode record <-> :class:`Episode`, with strict validation.

``episode_from_record`` checks the record's structure (required fields, types, per-step family
presence, vector lengths, dict keys) while it builds the numpy arrays, then ``check_episode``
checks values on the arrays (finite numbers, step order, force sign, quaternion norm, roles).
``check_episode`` is shared by every reader and writer, so a Parquet row and a JSON record give
the same error for the same mistake, with a field path into the App. B record
(``steps[3].body_pos_m.plate``).

Columnar readers (Parquet) check a whole batch of rows at once first: :func:`suspect_rows` applies
the value rules to the flat values buffers of the batch's list columns and flags the rows that
may break one; only those rows go through :func:`check_episode` one by one, which stays the
authority for every message. The batch checks are conservative (they may flag a good row, which
then just takes the slow path) but never pass a row that :func:`check_episode` would reject.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, NamedTuple

import numpy as np

from robosafe.errors import TraceError
from robosafe.trace.episode import ROLES, Episode, TaskTags

STEP_FAMILIES = ("eef_pos_m", "body_pos_m", "body_quat_wxyz", "contacts", "joint_torque_nm",
                 "gripper_contact", "cost")
"""Optional per-step keys of an App. B step, in record order (``t`` is always required)."""

_TAG_LISTS = ("components", "task_tags", "object_tags", "benchmark_signal_tags")
_QUAT_TOL = 1e-12  # quaternions already unit within this are kept bit-exact (round trips)


class _Bad(Exception):
    """Internal: a field-level failure; converted to TraceError with source/episode."""

    def __init__(self, field: str | None, message: str):
        super().__init__(message)
        self.field, self.message = field, message


def _show(v: Any) -> str:
    """A value as the user wrote it in JSON, shortened."""
    if isinstance(v, float) and not math.isfinite(v):
        text = "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    else:
        try:
            text = json.dumps(v, allow_nan=True, default=str)
        except (TypeError, ValueError):
            text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_num(v: Any) -> bool:
    return type(v) is float or type(v) is int  # bool is not a number here


# --------------------------------------------------------------------------- record -> Episode

def _get(d: dict, key: str, kind: type | tuple, what: str, *, path: str = "",
         required: bool = True) -> Any:
    """``d[key]`` checked against ``kind``; None when optional and absent/null."""
    field = f"{path}{key}"
    if key not in d or (d[key] is None and not required):
        if required:
            raise _Bad(field, "required field is missing")
        return None
    v = d[key]
    if not isinstance(v, kind) or (kind is not bool and isinstance(v, bool)):
        raise _Bad(field, f"expected {what}, got {_show(v)}")
    return v


def _vec(v: Any, n: int | None, field: str, like: str = "") -> list:
    """A list of ``n`` JSON numbers (any length when ``n`` is None)."""
    if type(v) is not list:
        raise _Bad(field, f"expected a list of numbers, got {_show(v)}")
    if n is not None and len(v) != n:
        raise _Bad(field, f"expected {n} numbers{like}, got {len(v)}")
    for i, x in enumerate(v):
        if not _is_num(x):
            raise _Bad(f"{field}[{i}]", f"expected a number, got {_show(x)}")
    return v


def _named_vecs(v: Any, names: tuple[str, ...] | None, n: int, field: str) -> tuple:
    """A ``{body: [n numbers]}`` dict; its keys must equal ``names`` (from steps[0])."""
    if type(v) is not dict:
        raise _Bad(field, f"expected an object of body -> [{n} numbers], got {_show(v)}")
    if names is None:
        names = tuple(v)
    elif len(v) != len(names) or any(k not in v for k in names):
        missing = [k for k in names if k not in v]
        extra = [k for k in v if k not in names]
        parts = [f"missing {', '.join(map(repr, missing))}"] if missing else []
        parts += [f"extra {', '.join(map(repr, extra))}"] if extra else []
        raise _Bad(field, f"bodies differ from steps[0] ({'; '.join(parts)})")
    return names, [_vec(v[k], n, f"{field}.{k}") for k in names]


def _contacts(v: Any, field: str, index: dict[str, int], out: list) -> int:
    """Append (a, b, force) of one step's contact list to ``out``; returns the count.

    ``index`` maps body names to their position in ``body_roles`` (the contact names)."""
    if type(v) is not list:
        raise _Bad(field, f"expected a list of contacts, got {_show(v)}")
    for j, c in enumerate(v):
        cf = f"{field}[{j}]"
        if type(c) is not dict:
            raise _Bad(cf, f"expected an object {{a, b, force_n}}, got {_show(c)}")
        ab = [_get(c, k, str, "a body name", path=cf + ".") for k in ("a", "b")]
        for k, body in zip("ab", ab):
            if body not in index:
                raise _Bad(f"{cf}.{k}", f"body {body!r} has no role in body_roles")
        f = c.get("force_n")
        if not _is_num(f):
            raise _Bad(cf + ".force_n", "required field is missing" if f is None
                       else f"expected a number, got {_show(f)}")
        out.append((index[ab[0]], index[ab[1]], f))
    return len(v)


def _steps(steps: list, roles: dict[str, str]) -> dict[str, Any]:
    """Per-step arrays (and name tuples) of the ``steps`` list; structure checks only.

    Contact names are the ``body_roles`` keys, so contact indices are stable across episodes
    of one task and every contact body has a role by construction."""
    if not steps:
        raise _Bad("steps", "must contain at least one step")
    first = steps[0]
    if type(first) is not dict:
        raise _Bad("steps[0]", f"expected an object, got {_show(first)}")
    present = [k for k in STEP_FAMILIES if first.get(k) is not None]
    cols: dict[str, list] = {k: [] for k in ("t", *present)}
    names: dict[str, tuple | None] = {"body_pos_m": None, "body_quat_wxyz": None}
    n_joints = None
    cindex = {name: i for i, name in enumerate(roles)}
    cflat: list = []
    for i, s in enumerate(steps):
        p = f"steps[{i}]"
        if type(s) is not dict:
            raise _Bad(p, f"expected an object, got {_show(s)}")
        t = _get(s, "t", int, "an integer step index", path=p + ".")
        cols["t"].append(t)
        for k in STEP_FAMILIES:
            has = s.get(k) is not None
            if has != (k in cols):
                raise _Bad(f"{p}.{k}", "present, but absent in steps[0]" if has
                           else "missing, but present in steps[0]")
        for k in present:
            v, f = s[k], f"{p}.{k}"
            if k == "eef_pos_m":
                v = _vec(v, 3, f)
            elif k in names:
                names[k], v = _named_vecs(v, names[k], 3 if k == "body_pos_m" else 4, f)
            elif k == "contacts":
                v = _contacts(v, f, cindex, cflat)
            elif k == "joint_torque_nm":
                v = _vec(v, n_joints, f, " like steps[0]")
                n_joints = len(v)
            elif k == "gripper_contact" and type(v) is not bool:
                raise _Bad(f, f"expected true/false, got {_show(v)}")
            elif k == "cost" and not _is_num(v):
                raise _Bad(f, f"expected a number, got {_show(v)}")
            cols[k].append(v)
    T = len(steps)
    out: dict[str, Any] = {"t": np.asarray(cols["t"], dtype=np.int64)}
    for k in ("eef_pos_m", "joint_torque_nm", "cost"):
        if k in cols:
            out[k] = np.asarray(cols[k], dtype=np.float64)
    if "gripper_contact" in cols:
        out["gripper_contact"] = np.asarray(cols["gripper_contact"], dtype=bool)
    for k, n, nk in (("body_pos_m", 3, "body_names"), ("body_quat_wxyz", 4, "quat_names")):
        if k in cols:
            out[nk] = names[k]
            out[k] = np.asarray(cols[k], dtype=np.float64).reshape(T, len(names[k]), n)
    if "contacts" in cols:
        arr = np.asarray(cflat, dtype=np.float64).reshape(-1, 3)
        out["contact_names"] = tuple(roles)
        out["contact_ptr"] = np.concatenate([[0], np.cumsum(cols["contacts"])], dtype=np.int64)
        out["contact_a"] = arr[:, 0].astype(np.int32)
        out["contact_b"] = arr[:, 1].astype(np.int32)
        out["contact_force_n"] = np.ascontiguousarray(arr[:, 2])
    return out


def _task_tags(v: Any, field: str) -> TaskTags:
    if type(v) is not dict:
        raise _Bad(field, f"expected an object, got {_show(v)}")
    for k in v:
        if k not in ("template", "benchmark", "task_id", *_TAG_LISTS):
            raise _Bad(f"{field}.{k}", "unknown key (expected template, components, "
                       "task_tags, object_tags, benchmark_signal_tags)")
    lists = {}
    for k in _TAG_LISTS:
        tags = _get(v, k, list, "a list of strings", path=field + ".", required=False) or []
        for i, tag in enumerate(tags):
            if type(tag) is not str:
                raise _Bad(f"{field}.{k}[{i}]", f"expected a string, got {_show(tag)}")
        lists[k] = tuple(tags)
    template = _get(v, "template", str, "a string", path=field + ".", required=False)
    return TaskTags(template=template, **lists)


def task_tags_from_record(v: Any, *, source: str | None = None) -> TaskTags:
    """The App. B task-tag record (its own ``benchmark``/``task_id`` keys are ignored)."""
    try:
        return _task_tags(v, "task_tags")
    except _Bad as e:
        raise TraceError(e.message, source=source, field=e.field) from None


def episode_from_record(rec: dict, *, source: str) -> Episode:
    """Convert one App. B trajectory record into a validated :class:`Episode`.

    Raises :class:`TraceError` with ``source``, the episode id (when readable) and the field
    path of the first problem. Unknown (host-specific) keys are ignored, as App. B allows.
    """
    episode = None
    try:
        if type(rec) is not dict:
            raise _Bad(None, f"expected an episode record (JSON object), got {_show(rec)}")
        episode = _get(rec, "episode_id", str, "a string")
        head = {k: _get(rec, k, str, "a string") for k in ("benchmark", "task_id")}
        if "success" not in rec:
            raise _Bad("success", "required field is missing (use null for unknown)")
        success = _get(rec, "success", bool, "true, false or null (unknown)", required=False)
        dt = _get(rec, "dt", (int, float), "a positive number")
        if "target_object" not in rec:
            raise _Bad("target_object", "required field is missing (use null for none)")
        target = _get(rec, "target_object", str, "a body name or null", required=False)
        roles = _get(rec, "body_roles", dict, "an object of body -> role")
        for body, role in roles.items():
            if type(role) is not str:
                raise _Bad(f"body_roles.{body}", f"expected a role name, got {_show(role)}")
        tags = rec.get("task_tags")
        tags = None if tags is None else _task_tags(tags, "task_tags")
        opt = {"seed": _get(rec, "seed", int, "an integer", required=False),
               "instance_id": _get(rec, "instance_id", str, "a string", required=False),
               "policy": _get(rec, "policy", str, "a string", required=False)}
        meta = _get(rec, "meta", dict, "an object", required=False) or {}
        arrays = _steps(_get(rec, "steps", list, "a list of steps"), roles)
    except _Bad as e:
        raise TraceError(e.message, source=source, episode=episode, field=e.field) from None
    ep = Episode(episode_id=episode, success=success, dt=float(dt), target_object=target,
                 body_roles=dict(roles), task_tags=tags, meta=dict(meta), **head, **opt,
                 **arrays)
    return check_episode(ep, source=source)


# --------------------------------------------------------------------------- value checks

def _step_of(ptr: np.ndarray, k: int) -> tuple[int, int]:
    """(step, position within the step) of flat contact row ``k``."""
    s = int(np.searchsorted(ptr, k, side="right")) - 1
    return s, k - int(ptr[s])


def _first_bad(mask: np.ndarray) -> tuple[int, ...] | None:
    return None if not mask.any() else tuple(int(i) for i in np.argwhere(mask)[0])


MAX_DT_S = 2.0
"""Longest plausible control step; a larger dt is almost always milliseconds given as seconds."""
MAX_POS_M = 100.0
"""Largest plausible |coordinate| of a manipulation scene; beyond it, millimetres were given."""
_POSITIONS = ("eef_pos_m", "body_pos_m")
MAX_VALUE = 1e12
"""Largest |value| of a contact force (N), joint torque (N m) or cost: far beyond any physical
one, and small enough that sums over many episodes (means, bootstrap resamples) stay finite,
so every reported number is a JSON number (1e308 would overflow them to inf and NaN)."""


def _value_checks(ep: Episode) -> np.ndarray | None:
    """Raise _Bad for the first shape or value problem of ``ep``'s arrays; returns
    normalised quaternions when they need replacing."""
    if not isinstance(ep.dt, (int, float)) or isinstance(ep.dt, bool) or not (
            math.isfinite(ep.dt) and ep.dt > 0):
        raise _Bad("dt", f"must be a positive number, got {_show(ep.dt)}")
    if ep.dt > MAX_DT_S:
        raise _Bad("dt", f"{_show(ep.dt)} s per step is implausible: dt is in seconds "
                   "(milliseconds given?)")
    for body, role in ep.body_roles.items():
        if role not in ROLES:
            raise _Bad(f"body_roles.{body}",
                       f"unknown role {role!r} (expected one of {', '.join(ROLES)})")
    unposed = unposed_humans(ep.body_roles, ep.body_names if ep.body_pos_m is not None else ())
    if unposed:
        raise _Bad(f"body_roles.{unposed[0]}",
                   "role 'human' needs the body's position in body_pos_m at every step "
                   "(the human-proximity specs read it); none is recorded")
    if ep.target_object is not None:
        role = ep.body_roles.get(ep.target_object)
        if role is None:
            raise _Bad("target_object", f"body {ep.target_object!r} is not in body_roles")
        if role != "target":
            raise _Bad("target_object", f"body {ep.target_object!r} has role {role!r} in "
                       "body_roles, expected 'target'")
    t = ep.t
    if t.ndim != 1 or t.shape[0] == 0 or t.dtype.kind not in "iu":
        raise _Bad("steps", "must contain at least one step with an integer t")
    T = t.shape[0]
    bad = np.flatnonzero(t[1:] <= t[:-1])
    if bad.size:
        raise _Bad(f"steps[{bad[0] + 1}].t", "steps must be in increasing order "
                   f"(t={int(t[bad[0] + 1])} after t={int(t[bad[0]])})")
    shapes = {"eef_pos_m": (T, 3), "body_pos_m": (T, len(ep.body_names), 3),
              "body_quat_wxyz": (T, len(ep.quat_names), 4), "cost": (T,),
              "joint_torque_nm": (T, None), "gripper_contact": (T,)}
    names = {"body_pos_m": ep.body_names, "body_quat_wxyz": ep.quat_names}
    for k, shape in shapes.items():
        a = getattr(ep, k)
        if a is None:
            continue
        if a.ndim != len(shape) or any(n is not None and n != m for n, m in zip(shape, a.shape)):
            raise _Bad(k, f"array shape {a.shape} does not match {T} steps"
                       + (f" x {len(names[k])} bodies" if k in names else ""))
        if k == "gripper_contact":
            continue
        finite = np.isfinite(a)
        if not finite.all():
            where = _first_bad(~finite)
            f = f"steps[{where[0]}].{k}" + (f".{names[k][where[1]]}" if k in names else "")
            raise _Bad(f, f"value {_show(float(a[where]))} is not finite")
        if k in _POSITIONS and a.size and np.abs(a).max() > MAX_POS_M:
            where = _first_bad(np.abs(a) > MAX_POS_M)
            f = f"steps[{where[0]}].{k}" + (f".{names[k][where[1]]}" if k in names else "")
            raise _Bad(f, f"{_show(float(a[where]))} m is implausible: positions are in "
                       "metres (millimetres given?)")
        if a.size and np.abs(a).max() > MAX_VALUE:
            where = _first_bad(np.abs(a) > MAX_VALUE)
            raise _Bad(f"steps[{where[0]}].{k}", f"{_show(float(a[where]))} is implausible "
                       f"(|value| > {MAX_VALUE:g})")
    for k, seq in (("body_pos_m", ep.body_names), ("body_quat_wxyz", ep.quat_names),
                   ("contacts", ep.contact_names)):
        if len(set(seq)) != len(seq):
            raise _Bad(k, "body names are not unique")
    if ep.contact_ptr is not None:
        _contact_checks(ep, T)
    return _unit_quats(ep)


def _unit_quats(ep: Episode) -> np.ndarray | None:
    """Normalised ``body_quat_wxyz``, or None when it is absent or already unit."""
    q = ep.body_quat_wxyz
    if q is None:
        return None
    n2 = np.einsum("tqi,tqi->tq", q, q)
    if (where := _first_bad(n2 == 0)) is not None:
        raise _Bad(f"steps[{where[0]}].body_quat_wxyz.{ep.quat_names[where[1]]}",
                   "quaternion has zero norm")
    if np.all(np.abs(n2 - 1.0) <= _QUAT_TOL):
        return None
    return q / np.sqrt(n2)[..., None]


def _contact_checks(ep: Episode, T: int) -> None:
    ptr, a, b, f = ep.contact_ptr, ep.contact_a, ep.contact_b, ep.contact_force_n
    K = 0 if a is None else a.shape[0]
    if (ptr.shape != (T + 1,) or ptr[0] != 0 or ptr[-1] != K or np.any(ptr[1:] < ptr[:-1])
            or any(x is None or x.shape != (K,) for x in (a, b, f))):
        raise _Bad("contacts", f"contact arrays are inconsistent with {T} steps")

    def at(k: int, side: str) -> str:
        s, j = _step_of(ptr, k)
        return f"steps[{s}].contacts[{j}].{side}"

    names = ep.contact_names
    out = (a < 0) | (a >= len(names)) | (b < 0) | (b >= len(names))
    if (k := _first_bad(out)) is not None:
        side = "a" if not 0 <= a[k] < len(names) else "b"
        raise _Bad(at(k[0], side), f"body index out of range for {len(names)} contact names")
    if (k := _first_bad(~np.isfinite(f))) is not None:
        raise _Bad(at(k[0], "force_n"), f"value {_show(float(f[k]))} is not finite")
    if (k := _first_bad(f < 0)) is not None:
        raise _Bad(at(k[0], "force_n"), f"must be >= 0, got {float(f[k])}")
    if (k := _first_bad(f > MAX_VALUE)) is not None:
        raise _Bad(at(k[0], "force_n"), f"{float(f[k]):g} N is implausible "
                   f"(> {MAX_VALUE:g})")
    known = np.array([n in ep.body_roles for n in names], dtype=bool)
    if (k := _first_bad(~known[a] | ~known[b])) is not None:
        side = "a" if not known[a[k]] else "b"
        body = names[int((a if side == "a" else b)[k])]
        raise _Bad(at(k[0], side), f"body {body!r} has no role in body_roles")


def roles_ok(roles: Any, target: str | None) -> bool:
    """True when ``body_roles`` (parsed) and ``target_object`` pass :func:`check_episode`'s
    role rules (known roles; the target has role ``target``)."""
    return (type(roles) is dict and all(r in ROLES for r in roles.values())
            and (target is None or roles.get(target) == "target"))


def unposed_humans(roles: dict[str, str], posed: tuple[str, ...]) -> list[str]:
    """Bodies with role ``human`` that have no position in ``posed`` (the body_pos_m names):
    robosafe's extension of App. B requires every human body to carry poses."""
    return [b for b, r in roles.items() if r == "human" and b not in posed]


def names_ok(names: tuple[str, ...]) -> bool:
    """True when a body-name tuple passes :func:`check_episode` (no repeated names)."""
    return len(set(names)) == len(names)


# --------------------------------------------------------------------------- episode header

@dataclasses.dataclass(frozen=True)
class Header:
    """The static facts of an episode that signal availability depends on: target, roles,
    recorded families and their body names. Hashable, so the episodes of one task share one
    computation of everything derived from it. A family's names are None when it is absent."""

    target_object: str | None
    body_roles: tuple[tuple[str, str], ...]
    body_names: tuple[str, ...] | None
    quat_names: tuple[str, ...] | None
    contact_names: tuple[str, ...] | None
    eef: bool
    grip: bool
    n_joints: int | None

    @property
    def roles(self) -> dict[str, str]:
        return dict(self.body_roles)


def header_of(ep: Episode) -> Header:
    """The :class:`Header` of an episode."""
    return Header(ep.target_object, tuple(ep.body_roles.items()),
                  None if ep.body_pos_m is None else tuple(ep.body_names),
                  None if ep.body_quat_wxyz is None else tuple(ep.quat_names),
                  None if ep.contact_ptr is None else tuple(ep.contact_names),
                  ep.eef_pos_m is not None, ep.gripper_contact is not None,
                  None if ep.joint_torque_nm is None else int(ep.joint_torque_nm.shape[1]))


# --------------------------------------------------------------------------- batch value checks

class Flat(NamedTuple):
    """One list column of a batch of rows: row ``i`` is ``values[offsets[i]:offsets[i + 1]]``
    when ``valid[i]`` (else null). Values outside ``offsets[0]:offsets[-1]`` are ignored."""

    offsets: np.ndarray
    values: np.ndarray
    valid: np.ndarray

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def span(self) -> np.ndarray:
        """The values of all rows of the batch (null rows included), flat."""
        return self.values[self.offsets[0]:self.offsets[-1]]

    def rows(self, positions: np.ndarray) -> np.ndarray:
        """Rows holding the values at ``positions`` (indices into :attr:`span`)."""
        return np.searchsorted(self.offsets, positions + self.offsets[0], side="right") - 1


class BatchCheck(NamedTuple):
    """Result of :func:`suspect_rows`."""

    suspect: np.ndarray
    """(n,) bool: rows that must go through :func:`check_episode`."""
    normalise: np.ndarray
    """(n,) bool: rows whose quaternions are not all unit (``check_episode`` replaces them)."""
    quat_norm2: np.ndarray | None
    """Squared norm of every quaternion of the quaternion column's :attr:`Flat.span`."""
    contact_csum: np.ndarray
    """Running total of the contact counts' :attr:`Flat.span` after a leading 0 (a row's
    contact pointers are its slice minus its first value)."""


def _beyond(col: Flat, limit: float) -> np.ndarray:
    """Rows of a float column holding NaN, +-inf or a value beyond +-``limit`` (empty when
    there are none)."""
    span = col.span  # min and max, not abs().max(): no temporary the size of the column
    if not span.size or (span.max() <= limit and span.min() >= -limit):  # NaN fails both
        return np.zeros(0, dtype=np.intp)
    return col.rows(np.flatnonzero(~(np.abs(span) <= limit)))


def suspect_rows(*, dt: np.ndarray, t: Flat, floats: list[Flat], positions: list[Flat],
                 quats: Flat,
                 counts: Flat, contact_a: Flat, contact_b: Flat, force: Flat,
                 n_contact_names: np.ndarray) -> BatchCheck:
    """Value checks of :func:`check_episode` on a batch of ``n`` rows at once.

    ``dt`` (n,) float (NaN for null); ``t`` the step indices; ``floats`` the float families
    that must be finite and within +-MAX_VALUE (arrays of any shape, flattened);
    ``positions`` those that must be within +-MAX_POS_M instead; ``quats`` the flat wxyz quaternions
    (finite, non-zero; the rows with some non-unit quaternion are returned);
    ``counts`` the contacts per step (a row's contacts are checked when its counts are valid);
    ``contact_a``/``contact_b``/``force`` the flat contacts, ``n_contact_names`` (n,) the number
    of contact names of each row. Not covered here (per row, cheap with caching): the role
    rules (:func:`roles_ok`), name uniqueness (:func:`names_ok`), contact bodies having a role,
    and array shapes beyond the contact arrays' consistency.
    """
    suspect = ~(dt > 0) | ~(dt <= MAX_DT_S)
    bad: list[np.ndarray] = []
    T = t.sizes
    suspect |= ~t.valid | (T == 0)
    tv = t.span
    if tv.size > 1:
        step = tv[1:] > tv[:-1]
        first = t.offsets[1:-1] - t.offsets[0] - 1  # pairs that straddle two rows
        step[first[(first >= 0) & (first < step.size)]] = True
        if not step.all():
            bad.append(t.rows(np.flatnonzero(~step) + 1))
    # the range checks reject NaN and inf too: no separate finiteness pass
    bad += [_beyond(col, MAX_VALUE) for col in floats if not any(col is p for p in positions)]
    bad += [_beyond(col, MAX_POS_M) for col in positions]
    normalise = np.zeros(dt.shape, dtype=bool)
    q, n2 = quats.span, None
    if q.size:
        if np.any((quats.offsets - quats.offsets[0]) % 4):  # not whole quaternions: no fast path
            suspect |= quats.valid
        else:
            q4 = q.reshape(-1, 4)
            n2 = np.einsum("ij,ij->i", q4, q4)  # as _unit_quats computes it, bit for bit
            lo, hi = float(n2.min()), float(n2.max())
            if not (lo > 0 and hi < math.inf):  # a zero norm, or NaN/inf in some component
                bad.append(quats.rows(np.flatnonzero(~((n2 > 0) & (n2 < math.inf))) * 4))
            if not (hi - 1.0 <= _QUAT_TOL and 1.0 - lo <= _QUAT_TOL):  # some are not unit
                dev = n2 - 1.0
                np.abs(dev, out=dev)
                normalise[quats.rows(np.flatnonzero(dev > _QUAT_TOL) * 4)] = True
    # contacts: CSR consistency (as _contact_checks), index range, force finite and >= 0
    has = counts.valid
    cv = counts.span
    lo, hi = (int(cv.min()), int(cv.max())) if cv.size else (0, 0)
    if lo < 0:
        bad.append(counts.rows(np.flatnonzero(cv < 0)))
    total = np.zeros(cv.size + 1,
                     dtype=np.int32 if max(hi, -lo) * cv.size < 2**31 else np.int64)
    np.cumsum(cv, out=total[1:])  # no overflow: bounded by the largest count x their number
    per_row = total[counts.offsets[1:] - counts.offsets[0]] - total[counts.offsets[:-1]
                                                                     - counts.offsets[0]]
    K = contact_a.sizes
    suspect |= has & ((counts.sizes != T) | ~contact_a.valid | ~contact_b.valid | ~force.valid
                      | (K != per_row) | (contact_b.sizes != K) | (force.sizes != K))
    for col in (contact_a, contact_b):
        idx = col.span
        if not idx.size:
            continue
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= int(n_contact_names[col.sizes > 0].min()):
            limit = np.repeat(n_contact_names, col.sizes)
            bad.append(col.rows(np.flatnonzero((idx < 0) | (idx >= limit))))
    f = force.span
    if f.size and not (f.min() >= 0 and f.max() <= MAX_VALUE):  # NaN fails both
        bad.append(force.rows(np.flatnonzero(~(f >= 0) | ~(f <= MAX_VALUE))))
    for rows in bad:
        suspect[rows] = True
    return BatchCheck(suspect, normalise, n2, total)


def check_episode(ep: Episode, *, source: str | None = None) -> Episode:
    """Validate ``ep``'s values; return it with quaternions normalised (a copy if changed).

    Raises :class:`TraceError` naming the App. B field path of the first problem.
    """
    try:
        quats = _value_checks(ep)
    except _Bad as e:
        raise TraceError(e.message, source=source, episode=ep.episode_id, field=e.field) from None
    return ep if quats is None else dataclasses.replace(ep, body_quat_wxyz=quats)


# --------------------------------------------------------------------------- Episode -> record

def _named(names: tuple[str, ...], rows: list) -> dict[str, list]:
    return dict(zip(names, rows))


def episode_to_record(ep: Episode) -> dict[str, Any]:
    """The App. B record of ``ep`` (inverse of :func:`episode_from_record`).

    Key order follows App. B; optional fields that are None/empty are omitted.
    """
    rec: dict[str, Any] = {"episode_id": ep.episode_id, "benchmark": ep.benchmark,
                           "task_id": ep.task_id,
                           "success": None if ep.success is None else bool(ep.success),
                           "dt": float(ep.dt), "target_object": ep.target_object,
                           "body_roles": dict(ep.body_roles)}
    if ep.task_tags is not None:
        rec["task_tags"] = ep.task_tags.to_dict()
    for k in ("seed", "instance_id", "policy"):
        if getattr(ep, k) is not None:
            rec[k] = getattr(ep, k)
    if ep.meta:
        rec["meta"] = ep.meta
    T = ep.n_steps
    cols: dict[str, list] = {"t": ep.t.tolist()}
    for k in ("eef_pos_m", "joint_torque_nm", "gripper_contact", "cost"):
        if getattr(ep, k) is not None:
            cols[k] = getattr(ep, k).tolist()
    if ep.body_pos_m is not None:
        cols["body_pos_m"] = [_named(ep.body_names, r) for r in ep.body_pos_m.tolist()]
    if ep.body_quat_wxyz is not None:
        cols["body_quat_wxyz"] = [_named(ep.quat_names, r) for r in ep.body_quat_wxyz.tolist()]
    if ep.contact_ptr is not None:
        names = ep.contact_names
        flat = [{"a": names[a], "b": names[b], "force_n": f} for a, b, f in
                zip(ep.contact_a.tolist(), ep.contact_b.tolist(), ep.contact_force_n.tolist())]
        ptr = ep.contact_ptr.tolist()
        cols["contacts"] = [flat[ptr[i]:ptr[i + 1]] for i in range(T)]
    order = [k for k in ("t", *STEP_FAMILIES) if k in cols]
    rec["steps"] = [{k: cols[k][i] for k in order} for i in range(T)]
    return rec
