"""Seeded synthetic TouchSafeBench dataset in the App. E layout (paper 003).

A humanoid walks a smoothed waypoint path on the floor plane of a room (Habitat world frame,
y-up, 30 Hz); the robot keeps a smoothly varying offset from it: behind the human while
following (social_navigation), drifting around it in a shared workspace
(social_rearrangement). The robot-human distance profile is designed first, so that events
are exact: near misses dip into (contact + 0.1 m, 1.5 m), and a human collision is one approach
that crosses ``contact_distance_m`` on the final step only (human collisions are terminal,
App. F.3). The per-step ``did_collide_human`` flag is then derived from the written positions,
so flags and geometry agree. Scene-collision intervals occur only in social_navigation (App.
F.1: the rearrangement policy avoids the environment); object contacts are rare bursts.

Episode lengths follow App. F.1 / F.3 at ``length_scale=1``: 73.4 % of episodes end in a human
collision at a step of mean ~485 / median ~410, the rest run up to the 1,500-step limit, giving
mean ~650 / median ~545 steps per episode and ~1.9 M steps for the paper's 2,940 episodes
(:meth:`SyntheticConfig.paper`). Positions are rounded to 0.1 mm before anything is derived
from them, so the written JSON is exactly the returned ground truth.

Positions are simulator root translations: the robot base ~0.48 m and the humanoid pelvis
~0.9 m above the floor, which is why d is measured in the x-z plane (see ``dataset``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from robosafe.grounding.dataset import (
    HUMAN_TYPES,
    SIM_TASKS,
    VIEWS,
    EpisodeRecord,
    FrameSource,
    planar_distance,
    write_dataset_info,
    write_episode,
)

YCB_OBJECTS = ("002_master_chef_can", "003_cracker_box", "004_sugar_box", "005_tomato_soup_can",
               "007_tuna_fish_can", "008_pudding_box", "009_gelatin_box", "010_potted_meat_can",
               "024_bowl")  # 9 YCB objects (paper Sec. 3)
ROBOT_ROOT_HEIGHT_M, HUMAN_ROOT_HEIGHT_M = 0.48, 0.90


@dataclass(frozen=True)
class SyntheticConfig:
    """Size and event rates of a synthetic dataset. The default is small (24 short episodes with
    16x16 images); :meth:`paper` is the App. F.1 size, JSON only."""

    human_types: tuple[str, ...] = HUMAN_TYPES
    sim_tasks: tuple[str, ...] = SIM_TASKS
    n_scenes: int = 2
    episodes_per_scene: int = 2
    length_scale: float = 0.05  # multiplies the paper's step counts (1.0 = App. F.1)
    max_steps: int = 1500
    p_human_collision: float = 0.734
    p_near_miss: float = 0.3
    scene_events_per_step: float = 8428 / 1_906_099 * 2  # App. F.3: 8,428 events in nav half
    contact_distance_m: float = 0.45
    near_miss_distance_m: float = 1.5
    images: bool = True
    image_size: int = 16
    max_depth_m: float = 10.0

    @classmethod
    def paper(cls) -> SyntheticConfig:
        """3 appearances x 2 tasks x 49 scenes x 10 episodes = 2,940 episodes, ~1.9 M steps."""
        return cls(n_scenes=49, episodes_per_scene=10, length_scale=1.0, images=False)

    @property
    def n_episodes(self) -> int:
        return len(self.human_types) * len(self.sim_tasks) * self.n_scenes * \
            self.episodes_per_scene


@dataclass(frozen=True)
class SyntheticSummary:
    root: Path
    n_episodes: int
    total_steps: int
    human_collision_episodes: int
    scene_collision_episodes: int


def scene_ids(sim_task: str, n: int) -> list[str]:
    """HSSD-style numeric scene ids; some rearrangement scenes carry a layout-variant suffix
    (App. E.1)."""
    ids = [str(102343985 + 1187 * s) for s in range(n)]
    if sim_task == "social_rearrangement":
        ids = [f"{x}_{s % 3}" if s % 4 == 3 else x for s, x in enumerate(ids)]
    return ids


def episode_plan(config: SyntheticConfig) -> list[tuple[str, str, str, int]]:
    """(human_type, sim_task, scene_id, episode_id) of every episode, in generation order; the
    i-th episode's randomness is ``default_rng([seed, i])``, independent of worker count."""
    plan = []
    for ht in config.human_types:
        for task in config.sim_tasks:
            for s, sid in enumerate(scene_ids(task, config.n_scenes)):
                for k in range(config.episodes_per_scene):
                    plan.append((ht, task, sid, s * config.episodes_per_scene + k))
    return plan


def _smooth_noise(rng: np.random.Generator, n: int, period: float) -> np.ndarray:
    """Zero-mean, unit-scale noise that varies over ~``period`` steps (smoothstep knots)."""
    k = int(n / period) + 2
    knots = rng.normal(size=k)
    u = np.linspace(0.0, (n - 1) / period, n)
    i = np.minimum(u.astype(int), k - 2)
    s = u - i
    s = s * s * (3 - 2 * s)
    return knots[i] * (1 - s) + knots[i + 1] * s


def _moving_average(x: np.ndarray, w: int) -> np.ndarray:
    if len(x) < 2 or w < 2:
        return x
    pad = np.pad(x, (w // 2, w - 1 - w // 2), mode="edge")
    return np.convolve(pad, np.ones(w) / w, mode="valid")


def _episode_length(rng: np.random.Generator, collide: bool, c: SyntheticConfig) -> int:
    if collide:  # final (collision) step ~ Gamma(2, 240): mean ~485, median ~410 (App. F.3)
        n = int(min(rng.gamma(2.0, 240.0), c.max_steps - 1)) + 1
    elif rng.random() < 0.3:  # hit the step limit
        n = c.max_steps
    else:
        n = int(np.clip(rng.gamma(5.0, 200.0), 1, c.max_steps))
    return max(1, round(n * c.length_scale))


def _human_walk(rng: np.random.Generator, n: int, room: np.ndarray) -> np.ndarray:
    """(n, 2) x-z positions walking through random waypoints at ~1 m/s with pauses."""
    dt = 1 / 30
    speed = np.clip(1.0 + 0.3 * _smooth_noise(rng, n, 90), 0.2, 1.6)
    for _ in range(rng.poisson(n / 600)):  # stop to look or hand over an object
        a = rng.integers(0, n)
        speed[a:a + rng.integers(15, 60)] = 0.0
    s = np.concatenate([[0.0], np.cumsum(speed[:-1] * dt)])
    pts, total = [rng.uniform(0.5, room - 0.5)], 0.0
    while total <= s[-1] + 1e-9:
        nxt = rng.uniform(0.5, room - 0.5)
        total += float(np.linalg.norm(nxt - pts[-1]))
        pts.append(nxt)
    p = np.array(pts)
    cum = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(p, axis=0), axis=1))])
    xz = np.stack([np.interp(s, cum, p[:, 0]), np.interp(s, cum, p[:, 1])], axis=1)
    return np.stack([_moving_average(xz[:, 0], 15), _moving_average(xz[:, 1], 15)], axis=1)


def _heading(xz: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Direction-of-motion angle in the x-z plane, held while standing still."""
    if len(xz) < 2:
        return np.full(len(xz), rng.uniform(-np.pi, np.pi))
    v = np.gradient(xz, axis=0)
    moving = np.hypot(v[:, 0], v[:, 1]) > 1e-5
    idx = np.maximum.accumulate(np.where(moving, np.arange(len(xz)), 0))
    ang = np.arctan2(v[:, 1], v[:, 0])
    ang[~moving & (idx == 0)] = ang[np.argmax(moving)] if moving.any() else 0.0
    return ang[idx]


def _distance_profile(rng: np.random.Generator, n: int, collide: bool, task: str,
                      c: SyntheticConfig) -> np.ndarray:
    """Planar robot-human distance per step, designed so events are exact (module doc)."""
    t = np.arange(n)
    if task == "social_navigation":  # following at ~1.6-3.5 m
        d = np.clip(2.4 + 0.6 * _smooth_noise(rng, n, 120), 1.6, 3.5)
    else:  # independent work in a shared space
        d = np.clip(3.0 + 1.2 * _smooth_noise(rng, n, 150), 1.6, 6.0)
    if rng.random() < c.p_near_miss:  # close pass without contact: a hard negative
        for _ in range(rng.integers(1, 3)):
            low = rng.uniform(c.contact_distance_m + 0.1, c.near_miss_distance_m - 0.1)
            g = np.exp(-0.5 * ((t - rng.uniform(0, n)) / rng.uniform(8, 30)) ** 2)
            d = np.where(d > low, d - (d - low) * g, d)
    if collide:  # accelerating approach that first reaches contact on the final step
        length = min(n, int(rng.integers(20, 90)))
        if length >= 2:
            u = np.linspace(0.0, 1.0, length - 1) ** 2
            a = n - length
            d[a:n - 1] = d[a:n - 1] * (1 - u) + (c.contact_distance_m + 0.03) * u
        d[n - 1] = c.contact_distance_m - 0.04
    return d


def _bursts(rng: np.random.Generator, n: int, n_events: int, max_bursts: int) -> np.ndarray:
    """Per-step contact counts made of ``n_events`` events of 1..max_bursts short bursts with
    gaps < 30 steps (one event under the App. F.3 30-frame clustering)."""
    counts = np.zeros(n, dtype=np.int64)
    for _ in range(n_events):
        t = int(rng.integers(0, n))
        for _ in range(int(rng.integers(1, max_bursts + 1))):
            length = int(rng.geometric(0.3))
            counts[t:t + length] = rng.integers(1, 3)
            t += length + int(rng.integers(2, 12))
    return counts


def _quat_yaw_pitch(yaw: np.ndarray, pitch: float) -> np.ndarray:
    """wxyz of R_y(yaw) R_x(pitch): a Habitat camera (looking down -z) turned by yaw and tilted
    by pitch (negative looks down)."""
    cy, sy = np.cos(yaw / 2), np.sin(yaw / 2)
    cp, sp = np.cos(pitch / 2), np.sin(pitch / 2)
    return np.stack([cy * cp, cy * sp, sy * cp, -sy * sp], axis=1)


def camera_rig(robot_pos: np.ndarray, human_pos: np.ndarray, robot_yaw: np.ndarray,
               human_yaw: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per-view camera (position, quaternion wxyz): arm camera on the robot, head camera on the
    human, and a chase camera behind and above each agent. Yaw 0 looks along -z."""
    def fwd(yaw: np.ndarray) -> np.ndarray:
        return np.stack([-np.sin(yaw), np.zeros_like(yaw), -np.cos(yaw)], axis=1)

    up = np.array([0.0, 1.0, 0.0])
    fr, fh = fwd(robot_yaw), fwd(human_yaw)
    return {
        "arm": (robot_pos + 0.35 * fr + 0.45 * up, _quat_yaw_pitch(robot_yaw, -0.15)),
        "head": (human_pos + 0.10 * fh + 0.70 * up, _quat_yaw_pitch(human_yaw, -0.10)),
        "third_robot": (robot_pos - 2.0 * fr + 1.30 * up, _quat_yaw_pitch(robot_yaw, -0.35)),
        "third_human": (human_pos - 2.0 * fh + 0.90 * up, _quat_yaw_pitch(human_yaw, -0.35)),
    }


def synthesize_episode(rng: np.random.Generator, *, human_type: str, sim_task: str,
                       scene_id: str, episode_id: int,
                       config: SyntheticConfig | None = None) -> EpisodeRecord:
    """One plausible episode; its arrays are the ground truth of what :func:`write_episode`
    writes."""
    c = config or SyntheticConfig()
    collide = bool(rng.random() < c.p_human_collision)
    n = _episode_length(rng, collide, c)
    room = rng.uniform(6.0, 12.0, size=2)
    floor = rng.uniform(-0.05, 0.15)
    hxz = _human_walk(rng, n, room)
    walk = _heading(hxz, rng)
    d = _distance_profile(rng, n, collide, sim_task, c)
    if sim_task == "social_navigation":
        bearing = walk + np.pi + 0.5 * _smooth_noise(rng, n, 100)  # behind the human
    else:
        bearing = rng.uniform(-np.pi, np.pi) + np.cumsum(0.02 * _smooth_noise(rng, n, 60))
    rxz = hxz + d[:, None] * np.stack([np.cos(bearing), np.sin(bearing)], axis=1)
    bob = 0.02 * np.sin(np.arange(n) * 2 * np.pi / 30)  # gait: the pelvis bobs
    robot = np.round(np.stack([rxz[:, 0], np.full(n, floor + ROBOT_ROOT_HEIGHT_M), rxz[:, 1]],
                              axis=1), 4)
    human = np.round(np.stack([hxz[:, 0], floor + HUMAN_ROOT_HEIGHT_M + bob, hxz[:, 1]],
                              axis=1), 4)
    contact = planar_distance(robot, human) < c.contact_distance_m
    if contact.any():  # terminal: the episode ends on the first contact
        n = int(np.argmax(contact)) + 1
        robot, human, contact, walk = robot[:n], human[:n], contact[:n], walk[:n]
    scene = np.zeros(n, dtype=np.int64)
    if sim_task == "social_navigation":
        scene = _bursts(rng, n, max(1, rng.poisson(c.scene_events_per_step * n)), 3)
    obj = _bursts(rng, n, rng.poisson(1.0 if sim_task == "social_rearrangement" else 0.1), 1)
    rel = human[:, [0, 2]] - robot[:, [0, 2]]
    robot_yaw = np.arctan2(-rel[:, 0], -rel[:, 1])  # the robot faces the human
    human_yaw = np.arctan2(-np.cos(walk), -np.sin(walk))  # forward (-sin, -cos) = walk direction
    objs = sorted(rng.choice(YCB_OBJECTS, size=int(rng.integers(3, 7)), replace=False).tolist())
    targets = objs[:2] if sim_task == "social_rearrangement" else []
    return EpisodeRecord(
        human_type=human_type, sim_task=sim_task, scene_id=scene_id, episode_id=episode_id,
        robot_pos=robot, human_pos=human, human_collision=contact, robot_obj_colls=obj,
        robot_scene_colls=scene, cameras=camera_rig(robot, human, robot_yaw, human_yaw),
        rigid_objs=objs, target_objs=targets,
        object_labels={f"{o}_:0000": f"goal{i}" for i, o in enumerate(targets)},
        max_depth_m=c.max_depth_m, image_size=(c.image_size, c.image_size))


def iter_synthetic_episodes(config: SyntheticConfig | None = None, *,
                            seed: int = 0) -> Iterator[EpisodeRecord]:
    """The records :func:`generate_dataset` writes with the same config and seed."""
    c = config or SyntheticConfig()
    for i, (ht, task, sid, eid) in enumerate(episode_plan(c)):
        yield synthesize_episode(np.random.default_rng([seed, i]), human_type=ht,
                                 sim_task=task, scene_id=sid, episode_id=eid, config=c)


def frame_renderer(record: EpisodeRecord) -> FrameSource:
    """Tiny placeholder frames: a per-view colour brightening as the agents close in, and a
    depth ramp whose near edge is the robot-human distance."""
    size = record.image_size
    d = planar_distance(record.robot_pos, record.human_pos)
    base = {"arm": (200, 80, 40), "head": (40, 160, 90), "third_human": (60, 90, 200),
            "third_robot": (180, 180, 60)}
    ramp = np.linspace(0.0, 1.0, size[1])[:, None] * np.ones((1, size[0]))

    def render(view: str, t: int) -> tuple[np.ndarray, np.ndarray]:
        k = 1.0 - min(d[t], 5.0) / 10.0
        rgb = np.empty((size[1], size[0], 3), dtype=np.uint8)
        rgb[:] = np.clip(np.array(base[view]) * k, 0, 255).astype(np.uint8)
        return rgb, d[t] + ramp * 3.0

    return render


def _generate_chunk(args: tuple[str, SyntheticConfig, int, list[int]]) -> list[tuple[int, bool,
                                                                                       bool]]:
    root, c, seed, indices = args
    plan = episode_plan(c)
    out = []
    for i in indices:
        ht, task, sid, eid = plan[i]
        rec = synthesize_episode(np.random.default_rng([seed, i]), human_type=ht, sim_task=task,
                                 scene_id=sid, episode_id=eid, config=c)
        write_episode(root, rec, frames=frame_renderer(rec) if c.images else None)
        out.append((rec.n_steps, bool(rec.human_collision.any()),
                    bool(rec.robot_scene_colls.any())))
    return out


def generate_dataset(root: str | os.PathLike[str], config: SyntheticConfig | None = None, *,
                     seed: int = 0, workers: int = 1) -> SyntheticSummary:
    """Write a synthetic dataset (dataset_info.json + every episode) under ``root``."""
    c = config or SyntheticConfig()
    root = Path(root)
    n = c.n_episodes
    write_dataset_info(root, images=c.images, name="TouchSafeBench (synthetic)",
                       generator="robosafe.grounding.synthetic", seed=seed, config=asdict(c),
                       human_types=list(c.human_types), tasks=list(c.sim_tasks),
                       views=list(VIEWS), num_episodes=n)
    k = max(1, min(n, workers * 8)) if workers > 1 else 1
    chunks = [(str(root), c, seed, list(range(i, n, k))) for i in range(k)]
    if workers > 1 and n > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            stats = [s for part in pool.map(_generate_chunk, chunks) for s in part]
    else:
        stats = [s for ch in chunks for s in _generate_chunk(ch)]
    return SyntheticSummary(root=root, n_episodes=n, total_steps=sum(s[0] for s in stats),
                            human_collision_episodes=sum(s[1] for s in stats),
                            scene_collision_episodes=sum(s[2] for s in stats))
