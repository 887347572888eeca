"""The generator's episodes carry App. B traces with a `human` body, which `robosafe score`
reads and judges with the human-proximity specs; values are checked against the App. E record
the same run wrote (an independent path: the record's positions and contact labels)."""

import json

import numpy as np
import pytest

pytest.importorskip("mujoco")

from robosafe.grounding.simgen import (
    TRACE_BODIES,
    GenerateConfig,
    episode_plan,
    simulate,
)
from robosafe.safety.score import score_episodes

pytestmark = [pytest.mark.sim]

CONFIG = GenerateConfig(episodes=4, seed=1, max_steps=300, image_size=16, robot="primitive")


@pytest.fixture(scope="module")
def simulated():
    return [simulate(np.random.default_rng([CONFIG.seed, i]), human_type=ht, sim_task=task,
                     scene_id=sid, episode_id=eid, config=CONFIG)
            for i, (ht, task, sid, eid) in enumerate(episode_plan(CONFIG))]


def test_trace_poses_and_contacts_agree_with_the_record(simulated):
    collided = 0
    for record, ep in simulated:
        tr = ep.trace
        assert tr.n_steps == record.n_steps and tr.body_names == TRACE_BODIES
        base, torso = tr.body_pos_m[:, 0], tr.body_pos_m[:, 2]
        # the record is in Habitat's y-up frame: (x, y, z)_habitat = (x, z, -y)_mujoco
        assert np.allclose(base[:, 0], record.robot_pos[:, 0], atol=1e-4)
        assert np.allclose(base[:, 1], -record.robot_pos[:, 2], atol=1e-4)
        assert np.allclose(torso[:, 0], record.human_pos[:, 0], atol=1e-4)
        human = [any({a, b} & {"human"} and "robot" in (a, b) or
                     (tr.body_roles[a], tr.body_roles[b]) in (("robot", "human"),
                                                            ("human", "robot"))
                     for a, b, _ in tr.contacts_at(t)) for t in range(tr.n_steps)]
        assert human == record.human_collision.tolist()
        scene = [sum(tr.body_roles[b if tr.body_roles[a] == "robot" else a] == "furniture"
                     for a, b, _ in tr.contacts_at(t)) for t in range(tr.n_steps)]
        assert scene == record.robot_scene_colls.tolist()
        (s,) = score_episodes([tr])
        assert {"human_ssm_separation", "human_contact_free"} <= set(s.active_specs)
        assert ("human_contact_free" in s.violated) == bool(record.human_collision.any())
        collided += bool(record.human_collision.any())
        # the least separation of any robot point to any human point, by numpy
        d = np.linalg.norm(tr.body_pos_m[:, :2, None] - tr.body_pos_m[:, None, 2:], axis=-1)
        assert s.robustness["human_min_separation_0.5m"] == pytest.approx(d.min() - 0.5)
    assert collided >= 1  # the seeds include a human collision


def test_generate_writes_traces_that_score_reads(cli, tmp_path):
    root = tmp_path / "data"
    proc = cli("grounding", "generate", "-o", root, "--episodes", "2", "--seed", "3",
               "--size", "16", "--max-steps", "40", "--robot", "primitive", "--json")
    assert proc.returncode == 0, proc.stderr
    traces = sorted((root / "traces").glob("*.json"))
    assert len(traces) == 2
    out = cli("score", root / "traces", "--json", "--bootstrap", "0")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert sum(c["n"] for c in doc["cells"]) == 2
    assert "human_ssm_separation" in json.dumps(doc)


def test_online_monitor_on_generator_traces_equals_offline(simulated):
    from robosafe.safety.online import OnlineMonitor

    for _, ep in simulated:
        tr = ep.trace
        mon = OnlineMonitor.for_episode(tr)
        for _ in range(tr.n_steps):
            mon.push(tr)
        (s,) = score_episodes([tr])
        assert {"human_ssm_separation", "human_contact_free"} <= set(mon.spec_ids)
        for sid, v in mon.final().items():
            assert v == s.robustness[sid], sid
