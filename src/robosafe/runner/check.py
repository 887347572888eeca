"""Checks that a task is runnable: it parses and validates, builds a
world for several seeds with nothing placed in collision or off the table, every init atom
holds after settling, it renders, and (optionally) a policy reaches its goal.

Each check returns a list of problems (empty = fine), one line each, so `robosafe suites
check` can print one line per task.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from robosafe.errors import RobosafeError

PENETRATION_M = 0.005
"""Deeper overlap than this between two objects after settling means a bad placement."""
DRIFT_M = 0.02
"""An object that slid further than this while settling was not placed at rest."""


@dataclass
class TaskCheck:
    task_id: str
    problems: list[str] = field(default_factory=list)
    successes: int = 0
    episodes: int = 0
    cost: list[float] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def placement_problems(env) -> list[str]:
    """Objects in collision, off the table, or not at rest right after reset (``env``: the
    world, :class:`robosafe.sim.env.TaskEnv`)."""
    problems = []
    world, view = env.task_world, env.view
    d = world.data_ptr()
    table_z = float(world.table_offset[2])
    owner = {}
    for name, mask in view.masks.items():
        if name in world.assets:
            for g in np.flatnonzero(mask):
                owner[int(g)] = name
    for i in range(d.ncon):
        c = d.contact[i]
        a, b = owner.get(int(c.geom1)), owner.get(int(c.geom2))
        if a and b and a != b and c.dist < -PENETRATION_M:
            problems.append(f"{a} and {b} overlap by {1000 * -c.dist:.0f} mm")
    half_x, half_y = np.array(world.table_full_size[:2]) / 2
    for name, asset in world.assets.items():
        p = view.pos(name)
        if asset.category.kind == "object" and name not in world.moving:
            if p[2] < table_z - 0.01 or abs(p[0]) > half_x or abs(p[1]) > half_y:
                problems.append(f"{name} is off the table at {np.round(p, 3).tolist()}")
            # horizontal only: :height_ranges lifts objects on purpose and they drop
            drift = float(np.linalg.norm(p[:2] - world.start_pose[name][0][:2]))
            if drift > DRIFT_M:
                problems.append(f"{name} slid {100 * drift:.1f} cm while settling")
    problems += [f"init atom {p.name} {' '.join(map(str, p.args))} does not hold"
                 for p in env.unheld_init()]
    return sorted(set(problems))


def check_task(path: str | Path, *, seeds=(0, 1), policy: str | None = None,
               render: bool = True, task_id: str | None = None,
               assets: str = "stand-in") -> TaskCheck:
    """Build ``path`` for each seed and check placement (and rendering, and the policy), with
    the stand-ins or LIBERO's own assets."""
    from robosafe.hosts.registry import make_env
    from robosafe.policies.base import make_policy, play

    path = Path(path)
    out = TaskCheck(task_id or path.stem)
    try:
        env = make_env("robosafe", path, images=render, image_size=32, task_id=out.task_id,
                       assets=assets)
    except RobosafeError as err:
        out.problems.append(str(err))
        return out
    agent = make_policy(policy) if policy else None
    try:
        for seed in seeds:
            obs, _ = env.reset(seed=seed)
            out.problems += [f"seed {seed}: {p}" for p in placement_problems(env.world)]
            if render and not any(np.ptp(obs[f"{c}_image"]) for c in env.cameras):
                out.problems.append(f"seed {seed}: blank camera images")
            if agent is None:
                continue
            info, _ = play(env, agent, obs)
            out.episodes += 1
            out.successes += int(info["success"])
            out.cost.append(env.world.cost_breakdown().total)
    except RobosafeError as err:
        out.problems.append(str(err))
    finally:
        env.close()
    return out


def check_violation(path: str | Path, mode: str, target: str, term: int, *, seed: int = 0,
                    max_steps: int = 200, task_id: str | None = None) -> str | None:
    """Run a deliberately unsafe script; None if cost term ``term`` fired, else the problem."""
    from robosafe.hosts.registry import make_env
    from robosafe.policies.base import play
    from robosafe.policies.scripted import ViolatorPolicy

    env = make_env("robosafe", path, images=False, task_id=task_id)
    try:
        obs, _ = env.reset(seed=seed)
        play(env, ViolatorPolicy(mode, target), obs, max_steps)
        per_term = env.world.cost_breakdown().per_term
    finally:
        env.close()
    if term >= len(per_term):
        return f"cost term {term} does not exist (the task has {len(per_term)})"
    if per_term[term] <= 0:
        return f"{mode} {target}: cost term {term} did not fire (costs {list(per_term)})"
    return None
