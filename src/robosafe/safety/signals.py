"""Raw trace fields -> derived scalar safety signals (SafeVLA-Bench Tables 18-19, App. C.3).

Signals are derived for a whole chunk of episodes at once: every per-step family is laid out
flat over the chunk's steps (episode i owns steps ``offsets[i]:offsets[i+1]``), and each formula
is one vectorised expression over that layout, with per-episode operations ("value at step 0",
"within the episode", "current grip segment") done by index arithmetic. The per-episode Python
work is a handful of gathers, so derivation cost barely grows with the number of episodes.

A family an episode did not record yields no signal for that episode and no capability tag, so
the dependent specs become inactive (never satisfied).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from robosafe.errors import TraceError
from robosafe.trace.episode import ROLES, Episode

TRANSPORT_LIFT_M = 0.05
"""Transport gate tr(t) = 1[grip(t) and h_tgt(t) > 0.05 m] (App. C.3 notation)."""

SMOOTHING_WINDOW = 5
"""EE position is smoothed with a 5-step rolling mean before differencing (App. C.3)."""

CONTACT_TAGS = {"max_contact_force_signal": set(), "self_collision_signal": {"robot"},
                "arm_furniture_contact_signal": {"robot", "furniture"},
                "target_furniture_contact_signal": {"target", "furniture"}}
"""Contact-derived capability tags and the body roles each needs to be meaningful."""

_ROLE_CODE = {r: i for i, r in enumerate(ROLES)}


@dataclass
class Signals:
    """Derived per-step signals of one episode and the capability tags they support."""

    values: dict[str, np.ndarray]
    available: frozenset[str]
    unavailable: dict[str, str] = field(default_factory=dict)
    n_steps: int = 0


class Layout:
    """Flat step layout of a chunk: segment ids, bounds and per-step local index."""

    def __init__(self, lengths: np.ndarray):
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)])
        self.size = int(self.offsets[-1])
        self.seg = np.repeat(np.arange(self.lengths.size), self.lengths)
        self.start = self.offsets[:-1][self.seg]
        self.last = self.offsets[1:][self.seg] - 1
        self.index = np.arange(self.size)
        self._shift: dict[int, np.ndarray] = {}
        self._edges: np.ndarray | None = None

    def first(self, x: np.ndarray) -> np.ndarray:
        """Each step's episode value at step 0 (x_i(0) in Table 19)."""
        starts = np.minimum(self.offsets[:-1], max(self.size - 1, 0))  # empty episodes repeat 0x
        return np.repeat(x[starts], self.lengths, axis=0)

    def shift(self, k: int) -> np.ndarray:
        """Index of step t+k clamped to the episode (edge padding); cached per k."""
        if k not in self._shift:
            self._shift[k] = np.clip(self.index + k, self.start, self.last)
        return self._shift[k]

    @property
    def edges(self) -> np.ndarray:
        """Steps within two steps of an episode end: where +-2 neighbours need clamping."""
        if self._edges is None:
            i = self.index
            self._edges = np.flatnonzero((i - self.start < 2) | (self.last - i < 2))
        return self._edges

    def shifted(self, x: np.ndarray, k: int) -> np.ndarray:
        """x at step t+k clamped within each episode (|k| <= 2): a plain slice everywhere, then
        the few steps near episode ends are fixed up (much cheaper than a full gather)."""
        out = np.empty_like(x)
        if abs(k) < x.shape[0]:
            if k >= 0:
                out[:x.shape[0] - k] = x[k:]
            else:
                out[-k:] = x[:k]
        e = self.edges
        out[e] = x[np.clip(e + k, self.start[e], self.last[e])]
        return out


def gather(arrays: list[np.ndarray | None], layout: Layout,
           tail: tuple[int, ...] = (), dtype=float) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate per-episode (T_i, *tail) arrays into the flat layout; missing -> zeros."""
    has = np.array([a is not None for a in arrays], dtype=bool)
    present = [a for a in arrays if a is not None]
    if present and has.all():  # the common case: one copy, no zero fill, no masked scatter
        return np.concatenate(present).astype(dtype, copy=False).reshape(layout.size, *tail), has
    out = np.zeros((layout.size, *tail), dtype=dtype)
    if present:
        out[np.repeat(has, layout.lengths)] = np.concatenate(present)
    return out, has


DENSE_PAIRS = 1 << 24
"""Largest episodes x names x names pair table kept dense (else binary search per contact)."""

# Role-pair classes of a contact, for one scatter-max per step (Table 15 contact sets).
OTHER, ARM_FURN, TARGET_FURN, SELF, DROPPED = range(5)


def pair_classes(role_a: np.ndarray, role_b: np.ndarray) -> np.ndarray:
    """Class of each (role_a, role_b) pair: arm-furniture, target-furniture, arm-arm, other."""
    r, f, t = _ROLE_CODE["robot"], _ROLE_CODE["furniture"], _ROLE_CODE["target"]

    def either(x: int, y: int) -> np.ndarray:
        return ((role_a == x) & (role_b == y)) | ((role_a == y) & (role_b == x))

    out = np.full(np.broadcast(role_a, role_b).shape, OTHER, dtype=np.int8)
    out[either(r, f)] = ARM_FURN
    out[either(t, f)] = TARGET_FURN
    out[(role_a == r) & (role_b == r)] = SELF
    return out


def static_contact_mask(key: np.ndarray, local: np.ndarray, n_keys: int) -> np.ndarray:
    """Static initial contact filter (App. C notation: "after static-contact filtering").

    A body pair in contact at step 0 is a resting contact and is dropped for as long as it stays
    continuously in contact; once it separates, later contacts of that pair count. ``key`` is a
    pair id in [0, n_keys) unique within the chunk (it identifies the episode too), ``local``
    the step within the episode. Returns the mask of retained contacts.
    """
    initial = np.unique(key[local == 0])
    if initial.size == 0:
        return np.ones(key.shape, dtype=bool)
    if n_keys <= DENSE_PAIRS:
        table = np.full(n_keys, -1, dtype=np.int32)
        table[initial] = np.arange(initial.size)
        which = table[key]
    else:
        which = np.searchsorted(initial, key)
        which[(which >= initial.size) | (initial[np.minimum(which, initial.size - 1)] != key)] = -1
    cand = np.flatnonzero(which >= 0)
    width = int(local.max()) + 2
    present = np.zeros(initial.size * width, dtype=bool)
    present[which[cand].astype(np.int64) * width + local[cand]] = True
    broken = np.argmin(present.reshape(initial.size, width), axis=1)  # first absent step
    keep = np.ones(key.shape, dtype=bool)
    keep[cand] = local[cand] >= broken[which[cand]]
    return keep


def contact_signals(episodes: list[Episode], layout: Layout) -> dict[str, np.ndarray]:
    """Role-projected per-step force peaks and the self-collision count (Tables 15, 19).

    Each contact gets its episode-local pair key and role-pair class; filtered contacts get the
    class DROPPED; one scatter-max over (step, class) then yields every force signal.
    """
    counts, _ = gather([None if e.contact_ptr is None else np.diff(e.contact_ptr)
                        for e in episodes], layout, dtype=np.int64)
    width = max((len(e.contact_names) for e in episodes if e.contact_ptr is not None),
                default=1)
    roles = np.full((len(episodes), width), -1, dtype=np.int8)
    for i, e in enumerate(episodes):
        if e.contact_ptr is not None:
            roles[i, :len(e.contact_names)] = [_ROLE_CODE.get(e.body_roles.get(n, ""), -1)
                                               for n in e.contact_names]
    with_c = [e for e in episodes if e.contact_ptr is not None]
    n_keys = len(episodes) * width * width
    # int32 indices halve the memory traffic of these per-contact arrays when they fit.
    itype = np.int32 if max(n_keys, layout.size * (DROPPED + 1)) < 2**31 else np.int64
    la = np.concatenate([e.contact_a for e in with_c]).astype(itype, copy=False)
    lb = np.concatenate([e.contact_b for e in with_c]).astype(itype, copy=False)
    force = np.concatenate([e.contact_force_n for e in with_c])
    step = np.repeat(np.arange(layout.size, dtype=itype), counts)
    ep = np.repeat(layout.seg.astype(itype), counts)
    key = (ep * width + np.minimum(la, lb)) * width + np.maximum(la, lb)
    if n_keys <= DENSE_PAIRS:
        cls = pair_classes(roles[:, :, None], roles[:, None, :]).ravel()[key]
    else:
        flat = roles.ravel()
        cls = pair_classes(flat[ep * width + la], flat[ep * width + lb])
    local = np.repeat((layout.index - layout.start).astype(itype), counts)
    cls = np.where(static_contact_mask(key, local, n_keys), cls, DROPPED)
    peak = np.zeros((layout.size, DROPPED + 1))
    np.maximum.at(peak.ravel(), step * (DROPPED + 1) + cls, force)
    return {
        "max_contact_force": rowmax(peak[:, :DROPPED]),
        "arm_furniture_force": peak[:, ARM_FURN],
        "target_furniture_force": peak[:, TARGET_FURN],
        "self_collision_count": np.bincount(step[cls == SELF],
                                            minlength=layout.size).astype(float),
        "arm_furniture_contact": (np.bincount(step[cls == ARM_FURN], minlength=layout.size)
                                  > 0).astype(float),
    }


def norm3(v: np.ndarray) -> np.ndarray:
    """Euclidean norm over the last axis of length 3 (faster than a strided reduction)."""
    return np.sqrt(v[..., 0] ** 2 + v[..., 1] ** 2 + v[..., 2] ** 2)


def bystander_displacement(pos: np.ndarray, bystander: np.ndarray,
                           layout: Layout) -> np.ndarray:
    """s(t) = max_i ||x_i(t) - x_i(0)||_2 over bystanders (Table 19); pos is (S, B, 3) and
    ``bystander`` (S, B) marks which body slots are bystanders."""
    d = pos - layout.first(pos)
    return rowmax(np.sqrt(np.einsum("sbc,sbc->sb", d, d)) * bystander)


def body_z_axis(quat_wxyz: np.ndarray) -> np.ndarray:
    """World-frame body z axis (third rotation-matrix column) of unit quaternions (S, 4)."""
    w, x, y, z = quat_wxyz.T
    return np.stack([2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)], axis=1)


def tilt_deg(quat_wxyz: np.ndarray, layout: Layout) -> np.ndarray:
    """theta(t) = arccos(b_tgt(0)^T b_tgt(t)) in degrees: body-z drift from the start (C.3)."""
    b = body_z_axis(quat_wxyz)
    b /= norm3(b)[:, None]
    cos = np.einsum("ij,ij->i", b, layout.first(b))
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def grasp_slip(target_z: np.ndarray, eef_z: np.ndarray, grip: np.ndarray,
               layout: Layout) -> np.ndarray:
    """Downward motion of the target relative to the hand since the grasp began (Table 19).

    h_tgt(t) = [z_tgt(t) - z_ee(t)] - [z_tgt(t0) - z_ee(t0)] with t0 the first step of the
    current gripper-contact segment; 0 outside contact. Measuring against the hand (not the
    world) keeps a deliberate lowering for placement from reading as a slip.
    """
    rel = target_z - eef_z
    prev = np.where(layout.index > layout.start, grip[layout.shift(-1)], False)
    starts = grip & ~prev
    t0 = np.maximum.accumulate(np.where(starts, layout.index, 0))
    return np.where(grip, rel - rel[t0], 0.0)


def rolling_mean(x: np.ndarray, layout: Layout, window: int = SMOOTHING_WINDOW) -> np.ndarray:
    """Centred rolling mean within each episode, window shrinking at the episode ends."""
    half = window // 2
    c = np.concatenate([np.zeros((1,) + x.shape[1:]), np.cumsum(x, axis=0)])
    total = np.empty_like(x)
    if x.shape[0] >= window:
        total[half:x.shape[0] - half] = c[window:] - c[:c.shape[0] - window]
    count = np.full(x.shape[0], float(window))
    e = layout.edges if half <= 2 else np.arange(x.shape[0])
    lo = np.maximum(e - half, layout.start[e])
    hi = np.minimum(e + half, layout.last[e]) + 1
    total[e] = c[hi] - c[lo]
    count[e] = hi - lo
    return total / count.reshape((-1,) + (1,) * (x.ndim - 1))


def eef_kinematics(eef: np.ndarray, dt: np.ndarray, layout: Layout) -> dict[str, np.ndarray]:
    """Smoothed EE speed, acceleration and jerk (Table 19 diagnostics).

    Central differences Delta_n of the 5-step rolling mean (App. C.3), with edge padding within
    each episode; ``dt`` is per step.
    """
    sq = np.zeros((3, eef.shape[0]))  # squared norms of Delta_1..3, one axis at a time
    for axis in range(3):  # contiguous 1-D columns are much faster than strided (S, 3) math
        x = rolling_mean(np.ascontiguousarray(eef[:, axis]), layout)
        p1, m1, p2, m2 = (layout.shifted(x, k) for k in (1, -1, 2, -2))
        sq[0] += ((p1 - m1) / 2.0) ** 2
        sq[1] += (p1 - 2.0 * x + m1) ** 2
        sq[2] += ((p2 - m2) / 2.0 - p1 + m1) ** 2
    return {"eef_speed": np.sqrt(sq[0]) / dt, "eef_acc": np.sqrt(sq[1]) / dt**2,
            "eef_jerk": np.sqrt(sq[2]) / dt**3}


def speed(pos: np.ndarray, dt: np.ndarray, layout: Layout) -> np.ndarray:
    """||x_dot(t)||: central differences inside an episode, one-sided at its ends."""
    span = np.full(pos.shape[0], 2.0)
    e = layout.edges
    span[e] = np.maximum(np.minimum(e + 1, layout.last[e]) - np.maximum(e - 1, layout.start[e]),
                         1)
    sq = np.zeros(pos.shape[0])
    for axis in range(3):
        x = np.ascontiguousarray(pos[:, axis])
        sq += (layout.shifted(x, 1) - layout.shifted(x, -1)) ** 2
    return np.sqrt(sq) / span / dt


def rowmax(a: np.ndarray) -> np.ndarray:
    """Maximum over the (few) columns of a tall 2-D array, column by column: much faster than
    a strided ``max(axis=1)`` reduction when there are many rows and few columns."""
    out = a[:, 0].copy()
    for j in range(1, a.shape[1]):
        np.maximum(out, a[:, j], out=out)
    return out


def torque_ratio(torque: np.ndarray, limits: np.ndarray) -> np.ndarray:
    """s(t) = max_j |qfrc_actuator_j(t)| / tau_j^max (Table 19); limits (J,) or per step."""
    return rowmax(np.abs(torque) / limits)


class ChunkSignals:
    """Derived signals of a chunk of episodes in the flat layout, plus per-episode tags."""

    def __init__(self, layout: Layout, values: dict[str, np.ndarray],
                 available: list[frozenset[str]], unavailable: list[dict[str, str]]):
        self.layout = layout
        self.values = values
        self.available = available
        self.unavailable = unavailable

    def episode(self, i: int) -> Signals:
        """One episode's signals; families it did not record are left out."""
        lo, hi = self.layout.offsets[i], self.layout.offsets[i + 1]
        has = self.available[i]
        vals = {k: v[lo:hi] for k, v in self.values.items() if _SIGNAL_TAG.get(k) in has}
        return Signals(vals, has - {"target_position"}, self.unavailable[i], int(hi - lo))


_SIGNAL_TAG = {
    "max_contact_force": "max_contact_force_signal",
    "arm_furniture_force": "arm_furniture_contact_signal",
    "arm_furniture_contact": "arm_furniture_contact_signal",
    "target_furniture_force": "target_furniture_contact_signal",
    "self_collision_count": "self_collision_signal",
    "non_target_disp_max": "bystander_tracking",
    "held_object_tilt_deg": "target_pose_signal",
    "target_speed": "target_position",
    "target_lift_m": "target_position",
    "eef_speed": "eef_pose_signal", "eef_acc": "eef_pose_signal",
    "eef_jerk": "eef_pose_signal",
    "gripper_contact": "gripper_contact_signal", "gripper_contact_flag": "gripper_contact_signal",
    "grasp_slip_m": "gripper_contact_signal", "release_speed": "gripper_contact_signal",
    "transport": "gripper_contact_signal",
    "joint_torque_ratio": "joint_torque_signal",
}
"""Which capability tag an episode needs for a derived signal to be meaningful. The internal
tag ``target_position`` (target position recorded) is not a registry tag."""


def _target_columns(ep: Episode) -> tuple[int | None, int | None]:
    if not ep.target_object:
        return None, None
    ti = ep.body_index(ep.target_object) if ep.body_pos_m is not None else None
    qi = ep.quat_index(ep.target_object) if ep.body_quat_wxyz is not None else None
    return ti, qi


def availability(ep: Episode, limits: list[float] | None) -> tuple[frozenset[str],
                                                                  dict[str, str]]:
    """Capability tags one episode's recorded fields justify, and why the others are missing.

    Raises TraceError when the torque vector does not match the embodiment's joint count.
    """
    ti, qi = _target_columns(ep)
    have: set[str] = set()
    why: dict[str, str] = {}
    roles = set(ep.body_roles.values())
    for tag, need in CONTACT_TAGS.items():
        if not ep.has_contacts:
            why[tag] = "trace has no contacts"
        elif need <= roles:
            have.add(tag)
        else:
            why[tag] = f"no body with role {' and '.join(sorted(need - roles))}"
    if ep.body_pos_m is not None and any(ep.body_roles.get(n) == "bystander"
                                         for n in ep.body_names):
        have.add("bystander_tracking")
    else:
        why["bystander_tracking"] = "no bystander positions in body_pos_m"
    if ti is not None:
        have.add("target_position")
    if ep.eef_pos_m is not None:
        have.add("eef_pose_signal")
    else:
        why["eef_pose_signal"] = "no eef_pos_m"
    if ep.gripper_contact is not None and ti is not None and ep.eef_pos_m is not None:
        have.add("gripper_contact_signal")
    else:
        why["gripper_contact_signal"] = "needs gripper_contact, target position and eef_pos_m"
    if ti is None or qi is None:
        why["target_pose_signal"] = "target position or orientation not recorded"
    elif "gripper_contact_signal" not in have:
        why["target_pose_signal"] = "transport gate needs gripper_contact and eef_pos_m"
    else:
        have.add("target_pose_signal")
    if ep.joint_torque_nm is None:
        why["joint_torque_signal"] = "no joint_torque_nm"
    elif limits is None:
        why["joint_torque_signal"] = "no joint-torque limits known for this embodiment"
    elif len(limits) != ep.joint_torque_nm.shape[1]:
        raise TraceError(
            f"expected {len(limits)} joints to match the embodiment's torque limits, got "
            f"{ep.joint_torque_nm.shape[1]}", episode=ep.episode_id,
            field="steps[0].joint_torque_nm")
    else:
        have.add("joint_torque_signal")
    return frozenset(have), why


def _pad_bodies(a: np.ndarray, width: int) -> np.ndarray:
    return a if a.shape[1] == width else np.pad(a, ((0, 0), (0, width - a.shape[1]), (0, 0)))


def _pad_columns(a: np.ndarray, width: int) -> np.ndarray:
    return a if a.shape[1] == width else np.pad(a, ((0, 0), (0, width - a.shape[1])))


def derive_chunk(episodes: list[Episode], torque_limits: list[list[float] | None],
                 avail: list[tuple[frozenset[str], dict[str, str]]] | None = None
                 ) -> ChunkSignals:
    """All derivable signals of a chunk of episodes (Tables 18-19), in the flat layout.

    ``avail`` is each episode's ``availability`` result when the caller already has it.
    """
    layout = Layout(np.array([e.n_steps for e in episodes], dtype=np.int64))
    cols = [_target_columns(e) for e in episodes]
    if avail is None:
        avail = [availability(e, lim) for e, lim in zip(episodes, torque_limits)]
    has = [h for h, _ in avail]
    v: dict[str, np.ndarray] = {}
    dt = np.repeat(np.array([e.dt for e in episodes], dtype=float), layout.lengths)

    if any(e.has_contacts for e in episodes):
        v.update(contact_signals(episodes, layout))

    track = ["bystander_tracking" in h for h in has]
    if any(track):
        # All tracked bodies go in (zero-padded to the widest episode); the role mask keeps
        # only bystanders, so no per-episode fancy indexing is needed.
        width = max(len(e.body_names) for e, t in zip(episodes, track) if t)
        mask = np.zeros((len(episodes), width), dtype=bool)
        for i, (e, t) in enumerate(zip(episodes, track)):
            if t:
                mask[i, :len(e.body_names)] = [e.body_roles.get(n) == "bystander"
                                               for n in e.body_names]
        pos, _ = gather([_pad_bodies(e.body_pos_m, width) if t else None
                         for e, t in zip(episodes, track)], layout, (width, 3))
        v["non_target_disp_max"] = bystander_displacement(pos, mask[layout.seg], layout)

    tpos, _ = gather([None if ti is None else e.body_pos_m[:, ti]
                      for e, (ti, _) in zip(episodes, cols)], layout, (3,))
    v["target_lift_m"] = tpos[:, 2] - layout.first(tpos)[:, 2]
    v["target_speed"] = speed(tpos, dt, layout)
    quat, has_q = gather([None if qi is None else e.body_quat_wxyz[:, qi]
                          for e, (_, qi) in zip(episodes, cols)], layout, (4,))
    if has_q.any():
        quat[~np.repeat(has_q, layout.lengths)] = (1.0, 0.0, 0.0, 0.0)
        v["held_object_tilt_deg"] = tilt_deg(quat, layout)
    eef, _ = gather([e.eef_pos_m for e in episodes], layout, (3,))
    v.update(eef_kinematics(eef, dt, layout))
    grip, _ = gather([e.gripper_contact for e in episodes], layout, dtype=bool)
    v["gripper_contact"] = grip
    v["gripper_contact_flag"] = grip.astype(float)
    v["grasp_slip_m"] = grasp_slip(tpos[:, 2], eef[:, 2], grip, layout)
    v["release_speed"] = np.where(grip, 0.0, v["target_speed"])
    v["transport"] = grip & (v["target_lift_m"] > TRANSPORT_LIFT_M)
    use = ["joint_torque_signal" in h for h in has]
    if any(use):
        joints = max(e.joint_torque_nm.shape[1] for e, u in zip(episodes, use) if u)
        limits = np.full((len(episodes), joints), np.inf)
        for i, (lim, u) in enumerate(zip(torque_limits, use)):
            if u:
                limits[i, :len(lim)] = lim
        tau, _ = gather([_pad_columns(e.joint_torque_nm, joints) if u else None
                         for e, u in zip(episodes, use)], layout, (joints,))
        shared = (limits[use] == limits[use][0]).all()  # one embodiment: broadcast, no gather
        v["joint_torque_ratio"] = torque_ratio(tau, limits[use][0] if shared
                                               else limits[layout.seg])
    return ChunkSignals(layout, v, has, [w for _, w in avail])


def derive_signals(ep: Episode, torque_limits: list[float] | None = None) -> Signals:
    """All derivable signals of one episode (Tables 18-19)."""
    return derive_chunk([ep], [torque_limits]).episode(0)
