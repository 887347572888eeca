"""The post-hoc safety layer for any robosuite host: record an env's rollout as an App. B trace.

:class:`Recorder` wraps a robosuite ``MujocoEnv`` (robosuite's own tasks, our CBDDL worlds,
LIBERO / RoboCasa / VLA-Arena envs) and writes the SafeVLA-Bench trajectory record (paper 000,
App. B, Table 13) as a :class:`robosafe.trace.episode.Episode`: end-effector position, poses
of the role-carrying bodies, role-projected contacts with force magnitude, arm actuator
torques, the gripper-contact flag and, optionally, the per-step CBDDL cost. It only reads
MuJoCo state, so observations, actions, rewards, success and seeds are those of the bare env.

Roles (App. B ``body_roles``, Table 15 contact sets). Every body of ``env.robots[*]`` (arm
links, grippers, mount or mobile base) is ``robot`` and keeps its own link name, so arm x arm
contacts (self-collision) stay distinguishable. Listed bodies (``roles``, from the caller or
``data/hosts.yaml``) take their role and stand for their whole subtree: a contact on any geom
of an object is a contact of the object's listed body. Unlisted bodies with collision geoms
are ``other``, named after their top-level body (the floor is the ``world`` body). Listed
target / bystander / furniture bodies get pose columns (``body_xpos``, ``body_xquat``, wxyz).

Decisions (the paper leaves these to the host adapter):

- **Sampling at control rate.** A row is recorded after each ``env.step`` (and one after
  ``reset``, step 0), from the MuJoCo state of robosuite's last physics substep, the same
  state robosuite computes that step's observations from. Contacts that begin and end between
  two control steps (inside robosuite's substeps) are not seen; neither are force peaks that
  fall between them. Table 18 (App. C.3) speaks of "each simulator step"; we record at the
  rate the policy acts and stores rollouts, and ``dt`` is that step, so the EE speed / jerk
  diagnostics stay consistent. Catching substep peaks would need a hook inside the host's
  physics loop, which a wrapper around ``env.step`` cannot have.
- **Force magnitude** is ``||f_c||_2`` of the 3 linear components that ``mj_contactForce``
  returns in the contact frame (normal and both tangential; Table 15, App. C.3 "3-D linear
  contact-wrench magnitude"), never the normal or a tangential component alone.
- **Which contacts.** Contacts outside the constraint set (``efc_address < 0``: gap /
  excluded) and contacts transmitting exactly zero force are dropped: they are proximity, not
  interaction, and a zero-force robot x robot touch would otherwise count as a self-collision.
  Contacts between two geoms of the same trace body (an object's parts) and between two geoms
  of the same gripper (fingers meeting when the gripper closes on nothing) are dropped too:
  neither is a collision of the body with something else. Several MuJoCo contacts between the
  same pair of trace bodies in one step (a box on a table has four) become one contact with
  the largest force: the scored signals are per-step maxima over role pairs (App. C.3).
- **Torque** is ``data.qfrc_actuator`` at the dofs of robot0's arm joints (7 for the Panda;
  Tables 15 and 18), not the controller's commanded torque. Two-arm hosts record robot0.
  ``meta.embodiment`` (robot0's model name) selects the registry's datasheet limits; note that
  robosuite's Panda lets joint 5 apply 80 N m where the datasheet (and the registry) allow 12,
  so aggressive policies in robosuite can violate joint_torque.
- **Gripper contact** is true when a finger / pad geom of robot0's gripper touches a non-robot
  geom with non-zero force (grip(t) of App. C.3: the gripper reports contact); a gripper without
  finger geoms (robosuite's wiping tool) uses its contact geoms.
- **Cost**: :meth:`Recorder.set_cost` sets the cost of the last recorded row; rows it was not
  called for (typically step 0, before any action) get 0. Never called: the trace has no cost.
- **dt** is ``1 / env.control_freq``, the time between recorded rows.

Performance: lookup tables (geom -> trace body, geom -> gripper, finger / robot masks, pose
bodies, arm dofs) are built at every reset, because robosuite's hard reset recompiles the model.
Per step the MuJoCo arrays are read vectorised (``data.contact.geom1`` etc. are numpy views),
``mj_contactForce`` runs only for retained contacts into one preallocated buffer, and rows go
into preallocated numpy arrays that double when full. benchmarks/bench_recorder.py measures the
overhead against the same env unrecorded (target: <= 10% of the env step on Lift).
"""

from __future__ import annotations

import difflib
import logging
import math
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import mujoco
import numba
import numpy as np

from robosafe.errors import RegistryError, TraceError
from robosafe.hosts.state import grippers
from robosafe.trace.episode import ROLES, Episode, TaskTags
from robosafe.trace.validate import check_episode, task_tags_from_record
from robosafe.yamldata import load_yaml

POSE_ROLES = ("target", "bystander", "furniture")
"""Roles whose bodies get ``body_pos_m`` / ``body_quat_wxyz`` columns (App. B steps)."""
_ROLE_RANK = {r: i for i, r in enumerate(ROLES)}
_HOSTS_FILE = "hosts.yaml"
_ENTRY_KEYS = {"roles", "names", "target", "target_from", "task_tags", "benchmark", "task_id"}
log = logging.getLogger("robosafe")


# --------------------------------------------------------------------------- host registry

@dataclass(frozen=True)
class HostRoles:
    """One ``hosts.yaml`` entry: the roles, trace names, target and task tags of a host."""

    host: str
    benchmark: str
    task_id: str
    roles: dict[str, str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    target_object: str | None = None
    target_from: tuple[str, str] | None = None
    """(env attribute, body format): the target body is ``body.format(getattr(env, attr))``."""
    task_tags: TaskTags | None = None


def _bad(where: str, message: str) -> RegistryError:
    return RegistryError(f"{_HOSTS_FILE}: {where}: {message}")


def _str_map(v: Any, where: str) -> dict[str, str]:
    if v is None:
        return {}
    if type(v) is not dict or not all(type(k) is str and type(x) is str for k, x in v.items()):
        raise _bad(where, "expected a mapping of body name -> string")
    return dict(v)


def _check_roles(roles: dict[str, str], where: str, err=_bad) -> None:
    for body, role in roles.items():
        if role not in ROLES:
            raise err(f"{where}.{body}", f"unknown role {role!r} (expected one of "
                      f"{', '.join(ROLES)})")


def _entry(key: str, raw: Any, defaults: dict) -> HostRoles:
    where = f"hosts.{key}"
    if type(raw) is not dict:
        raise _bad(where, "expected a mapping")
    if unknown := set(raw) - _ENTRY_KEYS:
        raise _bad(f"{where}.{min(unknown)}", "unknown key (expected one of "
                   f"{', '.join(sorted(_ENTRY_KEYS))})")
    roles = _str_map(raw.get("roles"), f"{where}.roles")
    _check_roles(roles, f"{where}.roles")
    names = _str_map(raw.get("names"), f"{where}.names")
    target_from = raw.get("target_from")
    if target_from is not None:
        if (type(target_from) is not dict or set(target_from) != {"attribute", "body"}
                or "{}" not in str(target_from["body"])):
            raise _bad(f"{where}.target_from", 'expected {attribute: ..., body: "...{}..."}')
        target_from = (str(target_from["attribute"]), str(target_from["body"]))
    tags = raw.get("task_tags")
    try:
        tags = None if tags is None else task_tags_from_record(tags, source=_HOSTS_FILE)
    except TraceError as e:
        raise _bad(f"{where}.task_tags", e.message) from None
    return HostRoles(host=key, benchmark=str(raw.get("benchmark", defaults.get("benchmark"))),
                     task_id=str(raw.get("task_id", key)), roles=roles, names=names,
                     target_object=raw.get("target"), target_from=target_from, task_tags=tags)


@cache
def _hosts() -> dict[str, HostRoles]:
    text = resources.files("robosafe.hosts").joinpath("data", _HOSTS_FILE).read_text()
    doc = load_yaml(text)
    if type(doc) is not dict or type(doc.get("hosts")) is not dict:
        raise _bad("hosts", "expected a mapping of host name -> entry")
    defaults = doc.get("defaults") or {}
    return {key: _entry(key, raw, defaults) for key, raw in doc["hosts"].items()}


def known_hosts() -> tuple[str, ...]:
    """Host keys of ``hosts.yaml`` (robosuite environment class names)."""
    return tuple(_hosts())


def host_roles(host: str) -> HostRoles:
    """The ``hosts.yaml`` entry of ``host``; :class:`RegistryError` when there is none."""
    hosts = _hosts()
    if host not in hosts:
        near = difflib.get_close_matches(host, hosts, n=1)
        hint = f"did you mean {near[0]!r}? " if near else ""
        raise RegistryError(f"unknown recorder host {host!r}: {hint}known hosts are "
                            f"{', '.join(hosts)} (or pass roles= for any other env)")
    return hosts[host]


# --------------------------------------------------------------------------- lookup tables

def _raw(obj: Any, attr: str) -> Any:
    """The mujoco struct behind robosuite's MjModel / MjData wrapper (or the struct itself):
    attribute access on the raw struct skips the wrapper's Python-level indirection."""
    inner = getattr(obj, attr, None)
    return obj if inner is None else inner


def _robot_body_names(robot: Any) -> list[str]:
    """Every body of one robosuite robot: arm model, grippers, mount / mobile base."""
    model = robot.robot_model
    names = list(model.bodies)
    for g in grippers(robot):
        names += list(g.bodies)
    # robosuite 1.5 calls the mount / mobile base `base`, robosuite 1.4 (LIBERO) `mount`
    for part in ("base", "mount"):
        sub = getattr(model, part, None)
        if sub is not None:
            names += list(sub.bodies)
    return names


def arm_joints(robot: Any) -> list[str]:
    """robot0's arm joint names: ``robot_arm_joints`` / ``robot_model.arm_joints`` (robosuite
    1.5) or ``robot_joints`` (robosuite 1.4, where a single-arm robot's joints are its arm)."""
    joints = (getattr(robot, "robot_arm_joints", None)
              or getattr(robot.robot_model, "arm_joints", None)
              or getattr(robot, "robot_joints", None))
    if not joints:
        raise RegistryError(f"recorder: robot {getattr(robot, 'name', '?')!r} names no arm "
                            "joints (robot_arm_joints / arm_joints / robot_joints)")
    return list(joints)


def unwrap(env: Any) -> Any:
    """The robosuite env under wrappers that keep it as ``.env`` (LIBERO's ``ControlEnv`` /
    ``OffScreenRenderEnv``, gymnasium-style wrappers): the object that owns ``sim``."""
    for _ in range(16):  # wrappers may forward sim and robots: go down while .env has them
        inner = getattr(env, "env", None)
        if inner is None or getattr(inner, "robots", None) is None:
            break
        env = inner
    if getattr(env, "sim", None) is None or getattr(env, "robots", None) is None:
        raise RegistryError(f"recorder: {type(env).__name__} is not a robosuite env (no sim / "
                            "robots, also under .env wrappers)")
    return env


def _finger_geoms(gripper: Any) -> list[str]:
    fingers = [g for key, geoms in getattr(gripper, "important_geoms", {}).items()
               if "finger" in key for g in geoms]
    return fingers or list(getattr(gripper, "contact_geoms", []))


@dataclass
class _Layout:
    """Lookup tables of one compiled model (rebuilt at every reset)."""

    names: tuple[str, ...]             # trace names = contact names = body_roles keys
    roles: dict[str, str]
    gidx: np.ndarray                   # (ngeom,) geom -> index into names (-1: no collisions)
    ggroup: np.ndarray                 # (ngeom,) gripper id, or a unique negative id
    gfinger: np.ndarray                # (ngeom,) robot0 finger / pad geom
    gother: np.ndarray                 # (ngeom,) geom of a non-robot body
    pose_ids: np.ndarray               # body ids with a pose column
    pose_names: tuple[str, ...]
    eef_site: int
    dofs: np.ndarray                   # robot0 arm dof addresses
    target: str | None
    unmapped: tuple[str, ...] = ()     # bodies with collision geoms and no role (not world)


def _body_name(m: Any, i: int) -> str:
    return mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, i) or f"body{i}"


def _build_layout(env: Any, m: Any, roles: dict[str, str], names: dict[str, str],
                  target: str | None, where: str) -> _Layout:
    nb = m.nbody
    bnames = [_body_name(m, i) for i in range(nb)]
    bid = {n: i for i, n in enumerate(bnames)}
    listed: dict[int, str] = {}
    for body, role in roles.items():
        if body not in bid:
            near = difflib.get_close_matches(body, bnames, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise RegistryError(f"{where}: roles: body {body!r} is not in the model{hint}")
        listed[bid[body]] = role
    robots = env.robots
    robot_ids = {bid[n] for r in robots for n in _robot_body_names(r) if n in bid}
    robot_ids -= set(listed)  # an object listed under a robot hand (a held peg) keeps its role

    # owner[b]: the body whose trace name and role body b takes. MuJoCo numbers parents
    # before children, so one pass resolves every "nearest listed ancestor".
    parent = m.body_parentid
    owner = np.zeros(nb, dtype=np.int64)
    for b in range(1, nb):
        p = int(parent[b])
        if b in listed or b in robot_ids:
            owner[b] = b
        elif owner[p] in listed or (p != 0 and p not in robot_ids):
            owner[b] = owner[p]
        else:
            owner[b] = b  # top-level object, or an unlisted object attached to a robot

    def role_of(o: int) -> str:
        return listed.get(o) or ("robot" if o in robot_ids else "other")

    def trace_name(o: int) -> str:
        return names.get(bnames[o], bnames[o])

    collide = (m.geom_contype != 0) | (m.geom_conaffinity != 0)
    collide[m.pair_geom1] = collide[m.pair_geom2] = True  # explicit <pair>s ignore contype
    geom_owner = owner[m.geom_bodyid]
    needed = {int(o) for o in geom_owner[collide]}
    pose = sorted((b for b, r in listed.items() if r in POSE_ROLES),
                  key=lambda b: (_ROLE_RANK[listed[b]], b))
    needed |= set(pose)
    order = sorted(needed, key=lambda o: (_ROLE_RANK[role_of(o)], o))
    body_roles: dict[str, str] = {}
    index: dict[str, int] = {}
    for o in order:
        n, r = trace_name(o), role_of(o)
        if body_roles.setdefault(n, r) != r:
            raise RegistryError(f"{where}: names: trace name {n!r} is given to bodies with "
                                f"roles {body_roles[n]!r} and {r!r}")
        index.setdefault(n, len(index))
    pose_names = tuple(trace_name(b) for b in pose)
    if len(set(pose_names)) != len(pose_names):
        dup = next(n for n in pose_names if pose_names.count(n) > 1)
        raise RegistryError(f"{where}: names: two listed bodies are both named {dup!r}; their "
                            "poses would share one column")
    if target is not None:
        target = names.get(target, target)
        if body_roles.get(target) != "target":
            raise RegistryError(f"{where}: target_object {target!r} is not a body with role "
                                "'target' (list it in roles)")

    # A body the host listed as 'other' on purpose (a moving obstacle) is no gap to warn about.
    chosen = {trace_name(b) for b in listed}
    lut = np.array([index.get(trace_name(int(o)), -1) for o in range(nb)], dtype=np.int64)
    gidx = np.where(collide, lut[geom_owner], -1)
    # Same-gripper pairs compare equal in ggroup; every other geom gets its own negative id.
    ggroup = -1 - np.arange(m.ngeom, dtype=np.int64)
    gfinger = np.zeros(m.ngeom, dtype=bool)
    gid = {mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g): g for g in range(m.ngeom)}
    k = 0
    for ri, robot in enumerate(robots):
        for g in grippers(robot):
            bodies = [bid[n] for n in g.bodies if n in bid]
            ggroup[np.isin(m.geom_bodyid, bodies)] = k
            k += 1
            if ri == 0:
                gfinger[[gid[n] for n in _finger_geoms(g) if n in gid]] = True
    geom_role = np.array([role_of(int(o)) for o in geom_owner])
    r0 = robots[0]
    arm = r0.arms[0] if getattr(r0, "arms", None) else "right"
    site = r0.eef_site_id[arm] if isinstance(r0.eef_site_id, dict) else r0.eef_site_id
    dofs = np.array([m.jnt_dofadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j)]
                     for j in arm_joints(r0)], dtype=np.int64)
    return _Layout(names=tuple(index), roles=body_roles, gidx=gidx, ggroup=ggroup,
                   gfinger=gfinger, gother=geom_role != "robot",
                   pose_ids=np.array(pose, dtype=np.int64), pose_names=pose_names,
                   eef_site=int(site), dofs=dofs, target=target,
                   unmapped=tuple(n for n, r in body_roles.items()
                                  if r == "other" and n != bnames[0] and n not in chosen))


# --------------------------------------------------------------------------- recorder

@numba.njit(cache=True)
def _kept(g1, g2, efc_address, gidx, ggroup, gfinger, gother):
    """The contacts a row keeps (in the constraint set, between two trace bodies, not within
    one gripper), as (contact index, lower and higher trace body, whether a finger touches a
    non-robot geom): one compiled pass instead of a dozen numpy operations per row."""
    n = g1.size
    idx = np.empty(n, np.int64)
    lo = np.empty(n, np.int64)
    hi = np.empty(n, np.int64)
    touch = np.empty(n, np.bool_)
    k = 0
    for i in range(n):
        x, y = g1[i], g2[i]
        a, b = gidx[x], gidx[y]
        if efc_address[i] >= 0 and a != b and ggroup[x] != ggroup[y]:
            idx[k], lo[k], hi[k] = i, min(a, b), max(a, b)
            touch[k] = (gfinger[x] and gother[y]) or (gfinger[y] and gother[x])
            k += 1
    return idx[:k], lo[:k], hi[:k], touch[:k]


@dataclass(frozen=True)
class Stillness:
    """What the shield's screening reads of the env's current state
    (robosafe.runner.screen.still_world), from MuJoCo's arrays and the last recorded row."""

    qvel: float
    """Largest ``|qvel|`` over every dof (m/s or rad/s)."""
    qacc: float
    """Largest ``|qacc|`` over every dof (m/s^2 or rad/s^2)."""
    force: float
    """Largest contact force of the last row, over every recorded pair (resting or not)."""
    pairs: tuple[tuple[int, int], ...]
    """Trace-body pairs (contact-name indices, lower first) of every contact MuJoCo lists,
    whether or not it is in the constraint set or transmits force."""
    touch: bool
    """A finger geom of robot0's gripper is in such a contact with a non-robot geom."""
    clearance: dict[str, float]
    """Per class of geom pairs whose contact a binary signal counts -- ``robot_furniture``,
    ``robot_robot`` (pairs MuJoCo collides and the recorder keeps) and ``finger`` (robot0's
    fingers and any non-robot geom) -- the smallest gap - reach x (dofs moving one geom +
    dofs moving the other) over its pairs (:meth:`Recorder.stillness`): > 0 means no pair
    can touch while every dof moves at most ``reach`` per metre of lever; inf: no pair."""


_MESH = int(mujoco.mjtGeom.mjGEOM_MESH)


@dataclass(frozen=True)
class _Watch:
    """Geom pairs of one model whose contact a binary signal counts (Recorder.stillness)."""

    geoms: np.ndarray                      # every geom in a pair
    pairs: dict[str, tuple[np.ndarray, np.ndarray]]  # class -> (positions in geoms, same)
    levers: np.ndarray                     # per geom in geoms: dofs between it and the world


def _watch(m: Any, L: _Layout) -> _Watch:
    col = L.gidx >= 0
    robot = col & ~L.gother
    role = np.array([L.roles[L.names[i]] if i >= 0 else "" for i in L.gidx])
    furniture = col & (role == "furniture")
    parent, weld, body = m.body_parentid, m.body_weldid, m.geom_bodyid

    def collides(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """MuJoCo's filters (contype / conaffinity, same or parent body; no explicit pairs
        or excludes in these models) and the recorder's (same trace body or gripper)."""
        ok = ((m.geom_contype[a] & m.geom_conaffinity[b]) != 0) | (
            (m.geom_contype[b] & m.geom_conaffinity[a]) != 0)
        # MuJoCo's body filter works on rigid groups (weld ids): never within one, nor
        # between a group and its parent group unless one of them is the world
        wa, wb = weld[body[a]], weld[body[b]]
        ok &= (wa != wb) & ~((wa != 0) & (wb != 0) & ((weld[parent[wa]] == wb)
                                                      | (weld[parent[wb]] == wa)))
        return ok & (L.gidx[a] != L.gidx[b]) & (L.ggroup[a] != L.ggroup[b])

    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, left, right in (("robot_furniture", robot, furniture),
                              ("robot_robot", robot, robot),
                              ("finger", L.gfinger & col, col & L.gother)):
        a, b = np.nonzero(left[:, None] & right[None, :])
        if name == "robot_robot":
            a, b = a[a < b], b[a < b]
        keep = collides(a, b)
        out[name] = (a[keep], b[keep])
    geoms = np.unique(np.concatenate([np.concatenate(p) for p in out.values()]))
    pos = np.full(m.ngeom, -1, dtype=np.int64)
    pos[geoms] = np.arange(geoms.size)
    chain = np.zeros(m.nbody, dtype=np.int64)  # parents come first in MuJoCo's numbering
    for i in range(1, m.nbody):
        chain[i] = chain[parent[i]] + m.body_dofnum[i]
    return _Watch(geoms, {k: (pos[a], pos[b]) for k, (a, b) in out.items()},
                  chain[body[geoms]].astype(float))


class Recorder:
    """Record a robosuite env's episodes as App. B traces (paper 000, App. B, Tables 13, 15).

    ``roles`` / ``names`` are merged over the host entry (explicit keys win); ``benchmark``,
    ``task_id``, ``target_object`` (a trace or MuJoCo body name) and ``dt`` override it. The
    host entry is ``hosts.yaml[host]``, or ``hosts.yaml[type(env).__name__]`` when present.

    ``env`` may be a wrapper that keeps the robosuite env as ``.env`` (LIBERO's
    ``OffScreenRenderEnv``): ``reset`` / ``step`` go through the wrapper, MuJoCo state is read
    from the env under it. Recording starts at :meth:`reset`, or at :meth:`start` when the
    host's protocol must run first (LIBERO: ``set_init_state`` and settle steps), so that what
    the protocol does before the policy acts is not charged to the policy.
    """

    def __init__(self, env: Any, *, roles: dict[str, str] | None = None,
                 names: dict[str, str] | None = None, host: str | None = None,
                 benchmark: str | None = None, task_id: str | None = None,
                 target_object: str | None = None, dt: float | None = None):
        self.env = env
        self.base = base = unwrap(env)
        if host is not None:
            entry: HostRoles | None = host_roles(host)
        else:
            entry = _hosts().get(type(base).__name__)
        self.host = entry.host if entry else None
        self._where = f"recorder host {self.host!r}" if entry else "recorder"
        self._roles = {**(entry.roles if entry else {}), **(roles or {})}
        _check_roles(self._roles, "roles",
                     lambda w, msg: RegistryError(f"{self._where}: {w}: {msg}"))
        self._names = {**(entry.names if entry else {}), **(names or {})}
        self.benchmark = benchmark or (entry.benchmark if entry else "robosuite")
        self.task_id = task_id or (entry.task_id if entry else type(base).__name__)
        self._target = target_object if target_object is not None else (
            entry.target_object if entry else None)
        self._target_from = entry.target_from if entry and target_object is None else None
        self.task_tags = entry.task_tags if entry else None
        if dt is None:
            dt = 1.0 / float(base.control_freq)
        self.dt = float(dt)
        self.embodiment = getattr(base.robots[0], "name", None)
        self._warned: set[str] = set()
        self._layout: _Layout | None = None
        self._sim = None
        self._n = 0
        self._k = 0
        self._has_cost = False
        self._timestep = None
        self._force = np.zeros(6)
        self._watch: tuple[_Layout, _Watch] | None = None  # stillness' pairs, per layout

    # ---------------------------------------------------------------- episode buffers

    def _allocate(self, rows: int = 256, contacts: int = 1024) -> None:
        L = self._layout
        b = L.pose_ids.size
        self._eef = np.empty((rows, 3))
        self._pos = np.empty((rows, b, 3))
        self._quat = np.empty((rows, b, 4))
        self._tau = np.empty((rows, L.dofs.size))
        self._grip = np.zeros(rows, dtype=bool)
        self._cost = np.zeros(rows)
        self._ptr = np.zeros(rows + 1, dtype=np.int64)
        self._ca = np.empty(contacts, dtype=np.int32)
        self._cb = np.empty(contacts, dtype=np.int32)
        self._cf = np.empty(contacts)

    @staticmethod
    def _grown(a: np.ndarray, size: int) -> np.ndarray:
        out = np.zeros((size, *a.shape[1:]), dtype=a.dtype)
        out[:a.shape[0]] = a
        return out

    def _grow_rows(self) -> None:
        size = 2 * self._eef.shape[0]
        for k in ("_eef", "_pos", "_quat", "_tau", "_grip", "_cost"):
            setattr(self, k, self._grown(getattr(self, k), size))
        self._ptr = self._grown(self._ptr, size + 1)

    def _grow_contacts(self, need: int) -> None:
        size = max(2 * self._cf.shape[0], need)
        for k in ("_ca", "_cb", "_cf"):
            setattr(self, k, self._grown(getattr(self, k), size))

    # ---------------------------------------------------------------- env API

    def reset(self, **kw: Any) -> Any:
        """``env.reset(**kw)`` unchanged; starts a new episode and records step 0."""
        out = self.env.reset(**kw)
        self.start()
        return out

    def start(self, *, record: bool = True) -> None:
        """Start a new episode at the env's current state (recorded as step 0), without
        resetting: for hosts whose protocol sets an initial state and settles first.
        ``record=False``: the current state is not recorded, so row 0 is the state after the
        first step (the shield's predictions: their starting row is the episode's own,
        recorded already)."""
        self._bind()
        if record:
            self._record()

    def step(self, action: Any) -> Any:
        """``env.step(action)``, returned unchanged; records one row after the step."""
        if self._layout is None:
            raise RuntimeError("Recorder.step before Recorder.reset")
        out = self.env.step(action)
        # A reset behind the recorder's back would splice two episodes into one trace: a hard
        # reset swaps the sim, a soft one sends robosuite's step counter back.
        timestep = getattr(self.base, "timestep", None)
        if self.base.sim is not self._sim or (timestep is not None
                                             and self._timestep is not None
                                             and timestep <= self._timestep):
            raise RuntimeError("the env was reset or rebuilt outside the recorder; call "
                               "Recorder.reset() instead of env.reset()")
        self._timestep = timestep
        self._record()
        return out

    def set_cost(self, value: float) -> None:
        """Per-step CBDDL cost of the last recorded row (VLA-Arena 4.1 semantics)."""
        if self._n == 0:
            raise RuntimeError("Recorder.set_cost before Recorder.reset")
        v = float(value)
        if not math.isfinite(v):
            raise TraceError(f"cost must be a finite number, got {value!r}",
                             field=f"steps[{self._n - 1}].cost")
        self._cost[self._n - 1] = v
        self._has_cost = True

    @property
    def n_steps(self) -> int:
        """Rows recorded in the current episode (step 0 included)."""
        return self._n

    @property
    def body_roles(self) -> dict[str, str]:
        """Trace name -> role of the current model (after the first reset)."""
        if self._layout is None:
            raise RuntimeError("body roles are known after Recorder.reset")
        return dict(self._layout.roles)

    def collision_geoms(self) -> dict[str, np.ndarray]:
        """Trace name -> the collision geoms it stands for (its subtree's), of the current
        model (after the first reset)."""
        if self._layout is None:
            raise RuntimeError("collision geoms are known after Recorder.reset")
        g = self._layout.gidx
        return {n: np.flatnonzero(g == i) for i, n in enumerate(self._layout.names)}

    def held(self) -> str | None:
        """The trace name of the object (a target or bystander body: not furniture, the
        floor or an unlisted body) robot0's fingers touch now with non-zero force (the
        target, if several), else None."""
        L, m, d = self._layout, self._m, self._d
        n = d.ncon
        g1, g2 = d.contact.geom1[:n], d.contact.geom2[:n]
        live = d.contact.efc_address[:n] >= 0
        touched = []
        for a, b in ((g1, g2), (g2, g1)):
            for c in np.flatnonzero(live & L.gfinger[a] & L.gother[b] & (L.gidx[b] >= 0)):
                name = L.names[L.gidx[b[c]]]
                if L.roles[name] not in ("target", "bystander"):
                    continue
                mujoco.mj_contactForce(m, d, int(c), self._force)
                if np.any(self._force[:3]):
                    touched.append(name)
        if not touched:
            return None
        return L.target if L.target in touched else touched[0]

    @property
    def target_object(self) -> str | None:
        return self._layout.target if self._layout is not None else self._target

    def _bind(self) -> None:
        """Tables for the (possibly recompiled) model, and empty episode buffers."""
        sim = self.base.sim
        if sim is self._sim and self._layout is not None and self._target_from is None:
            # the same model (no hard reset since): its tables stand, the buffers are reused
            # (the shield starts a prediction this way every step)
            self._n = self._k = 0
            self._has_cost = False
            self._cost[:] = 0.0
            self._timestep = getattr(self.base, "timestep", None)
            return
        self._sim = sim
        self._m, self._d = _raw(sim.model, "_model"), _raw(sim.data, "_data")
        roles, target = self._roles, self._target
        if self._target_from is not None:
            attr, fmt = self._target_from
            if getattr(self.base, attr, None) is None:
                raise RegistryError(f"{self._where}: target_from: the env has no {attr!r} to "
                                    "choose the target body from")
            body = fmt.format(getattr(self.base, attr))
            roles = {**roles, body: "target"}
            target = body
        self._layout = _build_layout(self.base, self._m, roles, self._names, target,
                                     self._where)
        self._n = self._k = 0
        self._has_cost = False
        self._timestep = getattr(self.base, "timestep", None)
        self._allocate()
        self._warn_gaps()

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning("%s: %s", self._where, message)

    def _warn_gaps(self) -> None:
        """One line per recorder for what its traces will lack: a robot without torque limits
        in the registry (the joint_torque spec then stays inactive, paper 000 Table 17) and
        bodies with collision geoms but no role (scored as ``other``, in no Table 15 set)."""
        from robosafe.safety.registry import load_registry

        if load_registry().embodiment_limits(self.embodiment) is None:
            self._warn_once("embodiment", f"robot {self.embodiment!r} has no joint-torque "
                            "limits in embodiments.yaml (add it or an alias): joint_torque "
                            "will be inactive on these traces")
        if self._layout.unmapped:
            self._warn_once("unmapped", "bodies without a role, recorded as 'other' (in no "
                            f"scored contact set): {', '.join(self._layout.unmapped)}")

    def _record(self) -> None:
        d, L, n = self._d, self._layout, self._n
        if n == self._eef.shape[0]:
            self._grow_rows()
        self._eef[n] = d.site_xpos[L.eef_site]
        if L.pose_ids.size:
            self._pos[n] = d.xpos[L.pose_ids]
            self._quat[n] = d.xquat[L.pose_ids]
        self._tau[n] = d.qfrc_actuator[L.dofs]
        k = self._k
        ncon = d.ncon
        grip = False
        if ncon:
            con = d.contact
            idx, lo, hi, touch = _kept(con.geom1, con.geom2, con.efc_address, L.gidx, L.ggroup,
                                       L.gfinger, L.gother)
            if idx.size:
                lo, hi, touch = lo.tolist(), hi.tolist(), touch.tolist()
                merged: dict[tuple[int, int], float] = {}
                m, buf = self._m, self._force
                for j, i in enumerate(idx.tolist()):
                    mujoco.mj_contactForce(m, d, i, buf)
                    f = math.sqrt(buf[0] * buf[0] + buf[1] * buf[1] + buf[2] * buf[2])
                    if f > 0.0:
                        key = (lo[j], hi[j])
                        if f > merged.get(key, -1.0):
                            merged[key] = f
                        grip = grip or touch[j]
                if merged:
                    end = k + len(merged)
                    if end > self._cf.shape[0]:
                        self._grow_contacts(end)
                    pairs = np.array(list(merged), dtype=np.int32)
                    self._ca[k:end] = pairs[:, 0]
                    self._cb[k:end] = pairs[:, 1]
                    self._cf[k:end] = list(merged.values())
                    k = end
        self._grip[n] = grip
        self._k = k
        self._n = n + 1
        self._ptr[n + 1] = k

    def _refine(self, a: np.ndarray, b: np.ndarray, gap: np.ndarray,
                need: np.ndarray) -> float:
        """min(gap - need) over the geom pairs (a, b), with a more exact gap where the
        bounding boxes' is under ``need``: MuJoCo's distance (``mj_geomDistance``, capped at
        twice ``need``: it returns the cap when farther) when a mesh is involved (its convex
        collision computes distances); the boxes' gap otherwise (MuJoCo's box-box test
        reports 0 for boxes apart)."""
        m, d = self._m, self._d
        out = math.inf
        for x, y, box, n in zip(a.tolist(), b.tolist(), gap.tolist(), need.tolist()):
            if box < n and _MESH in (m.geom_type[x], m.geom_type[y]):
                box = max(box, mujoco.mj_geomDistance(m, d, x, y, 2 * n, None))
            out = min(out, box - n)
        return out

    def motion(self) -> tuple[float, float]:
        """Largest ``|qvel|`` and ``|qacc|`` over every dof of the current state."""
        d = self._d
        return float(np.abs(d.qvel).max(initial=0.0)), float(np.abs(d.qacc).max(initial=0.0))

    def stillness(self, reach: float = 0.0) -> Stillness:
        """The current state as :class:`Stillness` (after the last recorded row, whose state
        the env is in). Every contact MuJoCo lists counts, not only those the row kept: one
        outside the constraint set or at zero force may carry force at the next step.
        ``reach``: metres a geom may move per dof between it and the world (the clearances);
        gaps are those of world-aligned bounding boxes (never more than the true distance),
        refined where that is not enough (:meth:`_refine`)."""
        m, d, L, n = self._m, self._d, self._layout, self._n
        if L is None or n == 0:
            raise RuntimeError("Recorder.stillness before a row is recorded")
        a, b = int(self._ptr[n - 1]), int(self._ptr[n])
        force = float(self._cf[a:b].max()) if b > a else 0.0
        pairs: tuple[tuple[int, int], ...] = ()
        touch = False
        if d.ncon:
            con = d.contact
            _, lo, hi, t = _kept(con.geom1, con.geom2, np.zeros(d.ncon, dtype=np.int32),
                                 L.gidx, L.ggroup, L.gfinger, L.gother)
            pairs = tuple(sorted(set(zip(lo.tolist(), hi.tolist()))))
            touch = bool(t.any())
        if self._watch is None or self._watch[0] is not L:
            self._watch = (L, _watch(m, L))
        w = self._watch[1]
        g = w.geoms
        rot = d.geom_xmat[g].reshape(-1, 3, 3)
        box = m.geom_aabb[g]
        centre = d.geom_xpos[g] + np.einsum("nij,nj->ni", rot, box[:, :3])
        half = np.einsum("nij,nj->ni", np.abs(rot), box[:, 3:])
        clear = {}
        for k, (i, j) in w.pairs.items():
            sep = np.maximum(np.abs(centre[i] - centre[j]) - half[i] - half[j], 0.0)
            gap = np.sqrt((sep * sep).sum(axis=1))
            need = reach * (w.levers[i] + w.levers[j])
            clear[k] = float((gap - need).min(initial=math.inf))
            if clear[k] <= 0:
                clear[k] = self._refine(g[i], g[j], gap, need)
        return Stillness(*self.motion(), force, pairs, touch, clear)

    # ---------------------------------------------------------------- output

    def row(self, i: int) -> Episode:
        """Row ``i`` of the current episode as a one-row, unvalidated :class:`Episode` (the
        online monitor's input, robosafe.safety.online: O(1), unlike :meth:`episode`)."""
        if not 0 <= i < self._n:
            raise IndexError(f"row {i} of {self._n} recorded")
        L = self._layout
        lo, hi = int(self._ptr[i]), int(self._ptr[i + 1])
        pose = bool(L.pose_ids.size)
        return Episode(
            episode_id="", benchmark=self.benchmark, task_id=self.task_id, success=None,
            dt=self.dt, target_object=L.target, body_roles=L.roles, t=np.zeros(1, np.int64),
            eef_pos_m=self._eef[i:i + 1].copy(), body_names=L.pose_names,
            body_pos_m=self._pos[i:i + 1].copy() if pose else None, quat_names=L.pose_names,
            body_quat_wxyz=self._quat[i:i + 1].copy() if pose else None,
            contact_names=L.names, contact_ptr=np.array([0, hi - lo]),
            contact_a=self._ca[lo:hi].copy(), contact_b=self._cb[lo:hi].copy(),
            contact_force_n=self._cf[lo:hi].copy(), joint_torque_nm=self._tau[i:i + 1].copy(),
            gripper_contact=self._grip[i:i + 1].copy())

    def episode(self, *, success: bool | None = None, episode_id: str, seed: int | None = None,
                instance_id: str | None = None, policy: str | None = None,
                task_tags: TaskTags | dict | None = None,
                meta: dict[str, Any] | None = None) -> Episode:
        """The recorded episode as a validated :class:`Episode` (``check_episode``).

        ``success`` None asks the env (``env._check_success()``). ``task_tags`` (a
        :class:`TaskTags` or an App. B task-tag dict) overrides the host entry's. ``meta`` is
        merged over the recorder's own (``embodiment`` = robot0's model name, which selects the
        joint-torque limits of the safety registry; ``host``; ``recorder``).
        """
        if self._layout is None or self._n == 0:
            raise RuntimeError("Recorder.episode before Recorder.reset")
        if success is None:
            check = getattr(self.base, "_check_success", None)
            if check is None:
                raise TraceError("the env has no _check_success(); pass success=",
                                 episode=episode_id, field="success")
            success = check()
        if isinstance(task_tags, dict):
            task_tags = task_tags_from_record(task_tags, source="Recorder.episode")
        L, n, k = self._layout, self._n, self._k
        info = {"recorder": "robosafe.hosts.recorder", "sampling": "control-step",
                "embodiment": self.embodiment}
        if self.host:
            info["host"] = self.host
        info = {key: v for key, v in info.items() if v is not None} | (meta or {})
        has_pose = bool(L.pose_ids.size)
        ep = Episode(
            episode_id=episode_id, benchmark=self.benchmark, task_id=self.task_id,
            success=bool(success), dt=self.dt, target_object=L.target,
            body_roles=dict(L.roles), t=np.arange(n, dtype=np.int64),
            eef_pos_m=self._eef[:n].copy(),
            body_names=L.pose_names, body_pos_m=self._pos[:n].copy() if has_pose else None,
            quat_names=L.pose_names,
            body_quat_wxyz=self._quat[:n].copy() if has_pose else None,
            contact_names=L.names, contact_ptr=self._ptr[:n + 1].copy(),
            contact_a=self._ca[:k].copy(), contact_b=self._cb[:k].copy(),
            contact_force_n=self._cf[:k].copy(), joint_torque_nm=self._tau[:n].copy(),
            gripper_contact=self._grip[:n].copy(),
            task_tags=task_tags if task_tags is not None else self.task_tags, seed=seed,
            instance_id=instance_id, policy=policy,
            cost=self._cost[:n].copy() if self._has_cost else None, meta=info)
        return check_episode(ep, source=f"recorder:{self.task_id}")
