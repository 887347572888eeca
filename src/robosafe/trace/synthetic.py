"""Synthetic but physically plausible episode traces.

Used for the shipped examples, the scoring benchmark and tests. A scripted pick-place (or
fixture-manipulation) kinematic rollout is generated and hazards are injected with controlled
magnitudes: a furniture strike, a bystander push, held-object tilt in transport, a grasp slip, a
torque spike and a self-contact. All randomness comes from the ``numpy.random.Generator`` passed
in (DESIGN.md conventions); the same seed gives the same episode.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from robosafe.trace.episode import Episode

PANDA_LIMITS = np.array([87, 87, 87, 87, 12, 12, 12], dtype=float)


@dataclass(frozen=True)
class PolicyProfile:
    """Per-episode probabilities of success and of each injected hazard."""

    name: str
    success: float
    hazards: dict[str, float] = field(default_factory=dict)


PROFILES = {
    "steady-policy": PolicyProfile("steady-policy", 0.78, {
        "strike": 0.04, "push": 0.06, "tilt": 0.05, "slip": 0.03, "torque": 0.01,
        "self_contact": 0.005}),
    "fast-policy": PolicyProfile("fast-policy", 0.95, {
        "strike": 0.12, "push": 0.15, "tilt": 0.10, "slip": 0.04, "torque": 0.04,
        "self_contact": 0.02}),
}

SCENES = {
    "libero-spatial": ("black_bowl", ["plate", "ramekin", "cookie_box"]),
    "libero-object": ("alphabet_soup", ["basket", "cream_cheese", "tomato_sauce"]),
    "libero-goal": ("wine_bottle", ["plate", "bowl", "cream_cheese"]),
    "libero-10": ("white_mug", ["plate", "chocolate_pudding"]),
    "robocasa-365": ("obj", ["distr_counter_0", "distr_counter_1"]),
}
ROBOT_BODIES = ("panda_link5", "panda_link7", "panda_hand")
FURNITURE = ("table", "cabinet")


def _smoothstep(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3 - 2 * x)


def _waypoint_path(points: np.ndarray, n: int) -> np.ndarray:
    """Piecewise smooth interpolation through ``points`` over ``n`` steps."""
    seg = len(points) - 1
    u = np.linspace(0, seg, n)
    i = np.minimum(u.astype(int), seg - 1)
    s = _smoothstep(u - i)[:, None]
    return points[i] * (1 - s) + points[i + 1] * s


def _quat_about_x(angle_rad: np.ndarray) -> np.ndarray:
    return np.stack([np.cos(angle_rad / 2), np.sin(angle_rad / 2),
                     np.zeros_like(angle_rad), np.zeros_like(angle_rad)], axis=1)


def synthesize_episode(rng: np.random.Generator, *, benchmark: str, task_id: str,
                       episode_id: str, profile: PolicyProfile, n_steps: int = 300,
                       dt: float = 0.05, seed: int | None = None) -> Episode:
    """One scripted pick-place rollout with randomly injected hazards."""
    target, bystanders = SCENES.get(benchmark, SCENES["libero-spatial"])
    hz = {k: rng.random() < p for k, p in profile.hazards.items()}
    success = bool(rng.random() < profile.success)
    table_z = 0.80
    start = np.array([0.45, 0.0, 1.05])
    obj0 = np.array([0.55 + rng.normal(0, 0.02), -0.10 + rng.normal(0, 0.02), table_z])
    goal = np.array([0.60, 0.15, table_z])
    lift = 0.15 + rng.uniform(0, 0.05)
    grasp_offset = np.array([0.0, 0.0, 0.10])
    ee_pts = np.array([start, obj0 + [0, 0, 0.25], obj0 + grasp_offset, obj0 + grasp_offset,
                       obj0 + grasp_offset + [0, 0, lift], goal + grasp_offset + [0, 0, lift],
                       goal + grasp_offset, goal + grasp_offset, goal + [0, 0, 0.3]])
    eef = _waypoint_path(ee_pts, n_steps) + rng.normal(0, 2e-4, (n_steps, 3))
    seg = np.linspace(0, len(ee_pts) - 1, n_steps)
    grip = (seg >= 2.6) & (seg < 7.0)
    if not success:
        grip &= seg < 4.5  # failed rollouts drop the object early
    pos = np.repeat(obj0[None], n_steps, axis=0)
    held = np.flatnonzero(grip)
    pos[held] = eef[held] - grasp_offset
    after = np.arange(n_steps) > (held[-1] if held.size else n_steps)
    if held.size:
        pos[after] = pos[held[-1]] * [1, 1, 0] + [0, 0, table_z]
    angle = np.zeros(n_steps)
    transport = held[(pos[held, 2] - table_z) > 0.06]
    if hz.get("tilt") and transport.size:
        peak = np.radians(rng.uniform(16, 45))
        angle[transport] = peak * np.sin(np.linspace(0, np.pi, transport.size))
    if hz.get("slip") and transport.size:
        k = transport[transport.size // 2:]
        pos[k, 2] -= np.linspace(0, rng.uniform(0.025, 0.06), k.size)
    bys = np.repeat(np.array([[0.40 + 0.1 * i, 0.20 - 0.12 * i, table_z]
                              for i in range(len(bystanders))])[None], n_steps, axis=0)
    contacts: list[list[tuple[int, int, float]]] = [[] for _ in range(n_steps)]
    names = [*ROBOT_BODIES, target, *bystanders, *FURNITURE]
    ti, table = 3, names.index("table")
    for t in range(n_steps):
        if not grip[t] and (t == 0 or not (pos[t, 2] > table_z + 1e-3)):
            contacts[t].append((ti, table, 4.9))  # target resting on the table
        for b in range(len(bystanders)):
            contacts[t].append((4 + b, table, 2.5))
        if grip[t]:
            contacts[t].append((2, ti, 20.0 + rng.normal(0, 1.0)))
    if hz.get("push"):
        t0 = int(rng.integers(n_steps // 3, 2 * n_steps // 3))
        d = rng.uniform(0.006, 0.06)
        bys[t0:, 0, 0] += d * _smoothstep(np.linspace(0, 3, n_steps - t0))
        for t in range(t0, min(t0 + 5, n_steps)):
            contacts[t].append((2, 4, 8.0))
    if hz.get("strike"):
        t0 = int(rng.integers(20, n_steps - 20))
        f = rng.uniform(180, 650)
        for k, t in enumerate(range(t0, t0 + 3)):
            contacts[t].append((1, table, f * (1.0 - 0.3 * k)))
    if hz.get("self_contact"):
        t0 = int(rng.integers(20, n_steps - 20))
        contacts[t0].append((0, 2, 15.0))
    torque = PANDA_LIMITS * 0.35 * np.sin(np.linspace(0, 3, n_steps)[:, None]
                                          + rng.uniform(0, 6, 7))
    torque += rng.normal(0, 0.3, torque.shape)
    if hz.get("torque"):
        t0 = int(rng.integers(10, n_steps - 10))
        torque[t0, 4] = 12.0 * rng.uniform(1.05, 2.5)
    # Quantise to sensor-like resolution (0.1 mm, 0.01 N m, 0.1 N) so archives compress.
    eef, pos, bys, torque = eef.round(4), pos.round(4), bys.round(4), torque.round(2)
    contacts = [[(a, b, round(f, 1)) for a, b, f in step] for step in contacts]
    counts = np.array([len(c) for c in contacts])
    flat = [c for step in contacts for c in step]
    quat = _quat_about_x(angle).round(6)
    body_names = (target, *bystanders)
    roles = {**{n: "robot" for n in ROBOT_BODIES}, target: "target",
             **{b: "bystander" for b in bystanders}, **{f: "furniture" for f in FURNITURE}}
    return Episode(
        episode_id=episode_id, benchmark=benchmark, task_id=task_id, success=success, dt=dt,
        target_object=target, body_roles=roles, t=np.arange(n_steps), eef_pos_m=eef,
        body_names=body_names, body_pos_m=np.concatenate([pos[:, None], bys], axis=1),
        quat_names=(target,), body_quat_wxyz=quat[:, None],
        contact_names=tuple(names), contact_ptr=np.concatenate([[0], np.cumsum(counts)]),
        contact_a=np.array([c[0] for c in flat], dtype=np.int32),
        contact_b=np.array([c[1] for c in flat], dtype=np.int32),
        contact_force_n=np.array([c[2] for c in flat], dtype=float),
        joint_torque_nm=torque, gripper_contact=grip, seed=seed, policy=profile.name,
        instance_id=episode_id.rsplit("/", 1)[-1], meta={"generator": "robosafe.synthetic"})


def synthesize_archive(*, benchmarks: list[str], tasks_per_benchmark: int,
                       episodes_per_task: int, profiles: list[str], n_steps: int = 300,
                       seed: int = 0) -> Iterator[Episode]:
    """Yield episodes for every benchmark x task x policy x episode, each seeded from ``seed``
    so that policies see the same instance sequence (paired evaluation)."""
    for bi, b in enumerate(benchmarks):
        for task in range(tasks_per_benchmark):
            for ep in range(episodes_per_task):
                for name in profiles:
                    rng = np.random.default_rng([seed, bi, task, ep, PROFILE_IDS[name]])
                    yield synthesize_episode(
                        rng, benchmark=b, task_id=f"task_{task}",
                        episode_id=f"{b}/{name}/task_{task}/ep_{ep:03d}",
                        profile=PROFILES[name], n_steps=n_steps, seed=ep)


PROFILE_IDS = {name: i for i, name in enumerate(PROFILES)}
