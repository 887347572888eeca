"""Online monitor and simulator-in-the-loop shield (robosafe.safety.online, robosafe.shield)."""

from __future__ import annotations

import numpy as np
import pytest

from robosafe.safety.online import OnlineMonitor
from robosafe.safety.score import Scorer
from robosafe.trace.episode import Episode
from robosafe.trace.synthetic import PROFILES, synthesize_episode

NAMES = ("link1", "link2", "gripper", "bowl", "cup", "table")
ROLES = {"link1": "robot", "link2": "robot", "gripper": "robot", "bowl": "target",
         "cup": "bystander", "table": "furniture"}


def random_episode(rng: np.random.Generator, n: int) -> Episode:
    """A hostile random trace: contacts that come and go between every pair (so the static
    initial-contact filter sees pairs separate and re-touch), flickering grip, random poses."""
    counts, a, b, f = [], [], [], []
    persistent = {(3, 5), (4, 5), (1, 5)}  # in contact at step 0, may separate later
    for t in range(n):
        pairs = {p for p in persistent if t == 0 or rng.random() < 0.8}
        for _ in range(int(rng.integers(0, 3))):
            x, y = rng.choice(len(NAMES), 2, replace=False)
            pairs.add((int(min(x, y)), int(max(x, y))))
        counts.append(len(pairs))
        for x, y in sorted(pairs):
            a.append(x)
            b.append(y)
            f.append(float(rng.choice([rng.uniform(0, 50), rng.uniform(150, 400)])))
    pos = np.cumsum(rng.normal(0, 0.003, (n, 2, 3)), axis=0) + [0.5, 0.0, 0.8]
    q = rng.normal(0, 1, (n, 1, 4))
    q[:, :, 0] += 4.0  # mostly near upright, sometimes far
    q /= np.linalg.norm(q, axis=2, keepdims=True)
    torque = rng.normal(0, 1, (n, 7)) * np.array([87, 87, 87, 87, 12, 12, 12]) * 0.5
    return Episode(
        episode_id=f"r{rng.integers(1 << 30)}", benchmark="libero-spatial", task_id="task_0",
        success=True, dt=0.05, target_object="bowl", body_roles=ROLES, t=np.arange(n),
        eef_pos_m=np.cumsum(rng.normal(0, 0.01, (n, 3)), axis=0),
        body_names=("bowl", "cup"), body_pos_m=pos, quat_names=("bowl",), body_quat_wxyz=q,
        contact_names=NAMES, contact_ptr=np.concatenate([[0], np.cumsum(counts)]),
        contact_a=np.array(a, dtype=np.int32), contact_b=np.array(b, dtype=np.int32),
        contact_force_n=np.array(f), joint_torque_nm=torque,
        gripper_contact=rng.random(n) < 0.6, meta={"embodiment": "Panda"})


def online_final(ep: Episode, scorer: Scorer) -> tuple[OnlineMonitor, dict[str, float]]:
    mon = OnlineMonitor.for_episode(ep, scorer)
    for _ in range(ep.n_steps):
        mon.push(ep)
    return mon, mon.final()


def assert_matches_offline(ep: Episode, scorer: Scorer) -> OnlineMonitor:
    mon, online = online_final(ep, scorer)
    offline = next(iter(scorer.score([ep]))).robustness
    assert online, "no spec monitored"
    for sid, rho in online.items():
        assert rho == offline[sid], (sid, rho, offline[sid])  # bit for bit, not approx
    # every active spec is either monitored or named as skipped with a reason
    assert set(online) | set(mon.skipped) == set(offline)
    return mon


@pytest.mark.parametrize("seed", range(12))
def test_online_equals_offline_on_random_traces(seed):
    rng = np.random.default_rng(seed)
    ep = random_episode(rng, int(rng.integers(1, 40)))
    mon = assert_matches_offline(ep, Scorer())
    # the future-looking diagnostics are the ones left out, by name
    assert "eef_speed_under_1mps" in mon.skipped
    assert "max_contact_force_under_200N" in mon.spec_ids


@pytest.mark.parametrize("seed", range(4))
def test_online_equals_offline_on_synthetic_rollouts(seed):
    ep = synthesize_episode(np.random.default_rng(seed), benchmark="libero-spatial",
                            task_id="task_1", episode_id=f"e{seed}",
                            profile=PROFILES["fast-policy"], n_steps=60)
    assert_matches_offline(ep, Scorer())


def test_resting_pair_filtered_until_it_separates():
    """Worked by hand: the bowl rests on the table with 300 N at steps 0-1 (filtered as a
    resting contact), separates at step 2, touches again with 250 N at step 3: only step 3
    counts, so the per-step peak is 0 N before step 3 (robustness 200 - 0) and 250 N at step 3
    (robustness 200 - 250 = -50)."""
    n = 4
    force = [300.0, 300.0, 250.0]
    ep = Episode(episode_id="h", benchmark="libero-spatial", task_id="task_0", success=True,
                 dt=0.05, target_object="bowl", body_roles=ROLES, t=np.arange(n),
                 contact_names=NAMES, contact_ptr=np.array([0, 1, 2, 2, 3]),
                 contact_a=np.array([3, 3, 3], dtype=np.int32),
                 contact_b=np.array([5, 5, 5], dtype=np.int32),
                 contact_force_n=np.array(force), meta={"embodiment": "Panda"})
    mon = OnlineMonitor.for_episode(ep, Scorer())
    seen = [mon.push(ep)["max_contact_force_under_200N"] for _ in range(n)]
    assert seen[:3] == [200.0] * 3
    assert seen[3] == -50.0
