"""Observations without camera images where the policy will not look (a chunk being played):
robosafe's simulator renders nothing for them, and every frame it does render, and every
action, row and cost of the episode, is the same as with every frame rendered."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from robosafe.hosts.registry import make_env
from robosafe.policies.base import play
from robosafe.sim.env import TaskEnv
from robosafe.trace.io import write_episodes

pytestmark = pytest.mark.sim  # steps MuJoCo and renders

STOVE = Path(str(resources.files("robosafe.tasks"))) / "suites" / "demo" / "turn_off_stove.bddl"
IMAGES = ("agentview_image", "robot0_eye_in_hand_image", "agentview_depth",
          "robot0_eye_in_hand_depth")


def test_frames_left_out_change_no_later_frame_even_with_noise():
    """V4 (Gaussian pixel noise drawn per frame) with depth: one env renders every step, the
    other every third; at the third steps both have the same bytes, elsewhere the second has
    no image or depth key and every other key equal."""
    envs = [TaskEnv(STOVE, image_size=(24, 32), depth=True, visual_level=4) for _ in range(2)]
    try:
        obs = [env.reset(seed=5)[0] for env in envs]
        assert envs[0].perturbation.noise_specs  # the noise stream is exercised
        rng = np.random.default_rng(1)
        for t in range(1, 10):
            a = rng.uniform(-1, 1, envs[0].action_dim)
            full = envs[0].step(a)[0]
            some = envs[1].step(a, images=t % 3 == 0)[0]
            assert set(full) - set(some) == (set() if t % 3 == 0 else set(IMAGES))
            for k, v in some.items():
                assert np.asarray(v).tobytes() == np.asarray(full[k]).tobytes(), (t, k)
        assert set(IMAGES) <= set(obs[0])
    finally:
        for env in envs:
            env.close()


class Chunked:
    """Plays a fixed chunk of ``execute`` actions after each look; notes what it looked at."""

    name = "chunked"

    def __init__(self, execute: int):
        self.execute, self.queue, self.seen = execute, [], []
        self.rng = np.random.default_rng(0)

    def reset(self, task_info):
        self.queue, self.seen = [], []
        self.rng = np.random.default_rng(0)

    def act(self, obs):
        if not self.queue:
            self.seen.append(obs["agentview_image"].copy())
            # the chunk depends on the image, so a wrong frame changes the episode
            bias = obs["agentview_image"].mean() / 255.0 - 0.5
            self.queue = list(np.clip(self.rng.uniform(-1, 1, (self.execute, 7)) + bias, -1, 1))
        return self.queue.pop(0)

    def needs_images(self):
        return not self.queue


def test_play_renders_only_where_a_chunked_policy_looks(tmp_path):
    """The same episode (actions, trace rows, costs, the frames the policy saw) with images
    left out between looks as with every frame rendered (``on_obs`` asks for every frame);
    rendered observations counted on the env."""
    runs = []
    for every_frame in (True, False):
        env = make_env("robosafe", STOVE, images=True, image_size=16, visual_level=4)
        rendered = []
        step = env.step

        def counted(action, *, images=True, _step=step, _n=rendered):
            out = _step(action, images=images)
            _n.append("agentview_image" in out[0])
            return out

        env.step = counted
        try:
            obs, _ = env.reset(seed=2)
            policy = Chunked(execute=4)
            _, actions = play(env, policy, obs, max_steps=13,
                              on_obs=(lambda o: None) if every_frame else None)
            trace = tmp_path / f"{every_frame}.jsonl"
            write_episodes(trace, [env.episode(episode_id="e")])
            runs.append((np.asarray(actions), trace.read_bytes(), env.world.step_costs,
                         policy.seen, rendered))
        finally:
            env.close()
    (a0, r0, c0, s0, n0), (a1, r1, c1, s1, n1) = runs
    assert np.array_equal(a0, a1) and r0 == r1 and c0 == c1
    assert len(s0) == len(s1) == 4 and all(np.array_equal(x, y) for x, y in zip(s0, s1,
                                                                                strict=True))
    assert n0 == [True] * 13
    # looks at reset, then after steps 4, 8, 12: the observations of steps 4, 8 and 12
    assert [i + 1 for i, r in enumerate(n1) if r] == [4, 8, 12]
