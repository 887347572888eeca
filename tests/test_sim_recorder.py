"""The recorder on real robosuite envs (no mocks): trace contents against MuJoCo state, forces
against an independent mj_contactForce recomputation, unchanged observations, host entries.

Envs run without renderers or cameras and for a few dozen control steps, so the file stays
well under a minute on two cores.
"""

from __future__ import annotations

import json
import math

import mujoco
import numpy as np
import pytest
import robosuite as suite
from conftest import run_robosafe

from robosafe.errors import RegistryError, TraceError
from robosafe.hosts.recorder import Recorder, host_roles, known_hosts
from robosafe.trace.io import read_episodes, write_episodes

pytestmark = pytest.mark.sim  # steps MuJoCo

ENV_KW = {"has_renderer": False, "has_offscreen_renderer": False, "use_camera_obs": False}


def make(name: str, **kw):
    robots = ["Panda", "Panda"] if name.startswith("TwoArm") else "Panda"
    return suite.make(name, robots=robots, **ENV_KW, **kw)


def descent_action(env, k: int) -> np.ndarray:
    """Scripted OSC action: hover over the cube, then drive the fingers down past it into the
    table (the gripper straddles the cube, so fingers press on the table, the palm on the cube)."""
    d = env.sim.data
    eef = d.site_xpos[env.robots[0].eef_site_id["right"]]
    cube = d.body_xpos[env.sim.model.body_name2id("cube_main")]
    delta = cube - eef
    z = (delta[2] + 0.05) * 10 if k < 15 else -1.0
    return np.r_[np.clip([delta[0] * 10, delta[1] * 10, z], -1, 1), 0, 0, 0, -1.0]


def expected_contacts(env) -> dict[tuple[str, str], float]:
    """Independent recomputation of one step's trace contacts from data.contact: robot bodies by
    name, Lift's cube geoms -> 'cube', table -> 'table'; max ||mj_contactForce[:3]|| per pair."""
    m, d = env.sim.model._model, env.sim.data._data
    gripper_bodies = set(env.robots[0].gripper["right"].bodies)
    out: dict[tuple[str, str], float] = {}
    buf = np.zeros(6)
    for i in range(d.ncon):
        c = d.contact[i]
        bodies = [m.body(m.geom_bodyid[g]).name for g in (c.geom1, c.geom2)]
        if c.efc_address < 0 or all(b in gripper_bodies for b in bodies):
            continue
        names = [{"cube_main": "cube"}.get(b, b) for b in bodies]
        mujoco.mj_contactForce(m, d, i, buf)
        f = float(np.linalg.norm(buf[:3]))
        if names[0] == names[1] or f == 0:
            continue
        key = tuple(sorted(names))
        out[key] = max(out.get(key, 0.0), f)
    return out


@pytest.fixture(scope="module")
def lift_run():
    """40 recorded Lift steps of the scripted descent, with per-step MuJoCo ground truth."""
    env = make("Lift", seed=3)
    rec = Recorder(env)
    rec.reset()
    truth = []

    def snapshot():
        d, r = env.sim.data, env.robots[0]
        dofs = [env.sim.model.get_joint_qvel_addr(j) for j in r.robot_arm_joints]
        truth.append({"eef": d.site_xpos[r.eef_site_id["right"]].copy(),
                      "tau": d.qfrc_actuator[dofs].copy(),
                      "contacts": expected_contacts(env)})

    snapshot()
    for k in range(40):
        rec.step(descent_action(env, k))
        rec.set_cost(0.5 * k)
        snapshot()
    ep = rec.episode(episode_id="robosuite/Lift/ep_000", seed=3, policy="scripted-descent")
    return env, ep, truth


def test_lift_trace_matches_mujoco_state(lift_run):
    env, ep, truth = lift_run
    assert ep.n_steps == 41 and ep.t.tolist() == list(range(41))
    assert ep.benchmark == "robosuite" and ep.task_id == "Lift" and ep.dt == pytest.approx(0.05)
    assert ep.target_object == "cube"
    assert ep.body_roles["cube"] == "target" and ep.body_roles["table"] == "furniture"
    assert ep.body_roles["world"] == "other"  # the floor
    for link in ("robot0_link7", "gripper0_right_leftfinger", "gripper0_right_rightfinger"):
        assert ep.body_roles[link] == "robot"
    assert set(ep.body_names) == {"cube", "table"} == set(ep.quat_names)
    np.testing.assert_array_equal(ep.eef_pos_m, [s["eef"] for s in truth])
    np.testing.assert_array_equal(ep.joint_torque_nm, [s["tau"] for s in truth])
    assert ep.joint_torque_nm.shape == (41, 7)
    cube = env.sim.model.body_name2id("cube_main")
    np.testing.assert_array_equal(ep.body_pos_m[-1, ep.body_index("cube")],
                                  env.sim.data.body_xpos[cube])
    np.testing.assert_array_equal(ep.body_quat_wxyz[-1, ep.quat_index("cube")],
                                  env.sim.data.body_xquat[cube])  # MuJoCo's xquat is wxyz
    assert ep.cost[0] == 0.0 and ep.cost[-1] == pytest.approx(19.5)
    assert ep.meta["embodiment"] == "Panda" and ep.task_tags.template == "pnp-basic"


def test_lift_contact_forces_match_independent_recomputation(lift_run):
    _, ep, truth = lift_run
    # the step where the fingers press hardest on the table is the one to check closely
    finger_table = [max((f for (a, b), f in s["contacts"].items()
                         if "table" in (a, b) and "finger" in a + b), default=0.0)
                    for s in truth]
    hard = int(np.argmax(finger_table))
    assert finger_table[hard] > 50.0, "the scripted descent should press the fingers on the table"
    got = {tuple(sorted((a, b))): f for a, b, f in ep.contacts_at(hard)}
    assert got.keys() == truth[hard]["contacts"].keys()
    for pair, f in truth[hard]["contacts"].items():
        assert got[pair] == pytest.approx(f, rel=1e-12)
    assert any(set(p) == {"cube", "table"} for p in got)
    for step, s in enumerate(truth):  # and every other step agrees too
        got = {tuple(sorted((a, b))): f for a, b, f in ep.contacts_at(step)}
        assert got.keys() == s["contacts"].keys()
        np.testing.assert_allclose([got[p] for p in s["contacts"]], list(s["contacts"].values()),
                                   rtol=1e-12)
    # gripper contact: some finger touches a non-robot body exactly when one such pair exists
    fingers = {"gripper0_right_leftfinger", "gripper0_right_rightfinger"}
    expect = [any((a in fingers) != (b in fingers) and ep.body_roles[b if a in fingers else a]
                  != "robot" for a, b in s["contacts"]) for s in truth]
    np.testing.assert_array_equal(ep.gripper_contact, expect)
    assert ep.gripper_contact.any()


def test_lift_trace_scores_with_the_cli(lift_run, tmp_path):
    _, ep, truth = lift_run
    path = tmp_path / "lift.parquet"
    assert write_episodes(path, [ep]) == 1
    back, errors = read_episodes(path)
    assert not errors and back[0].contacts_at(20) == ep.contacts_at(20)
    proc = run_robosafe("score", path, "--json", "--bootstrap", "0", "--workers", "1")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    agg = out["aggregate"]
    assert agg["n"] == 1 and 0.0 <= agg["safety"] <= 1.0 and 0.0 <= agg["vsi"] <= 1.0
    (row,) = out["episodes"]
    assert row["success"] is False  # the cube was never lifted
    rho = row["robustness"]
    assert rho["joint_torque"] is not None  # Panda limits via meta.embodiment
    # arm x furniture force robustness is 200 N minus the hardest robot-table contact
    arm_table = max(f for s in truth for (a, b), f in s["contacts"].items()
                    if "table" in (a, b) and ep.body_roles[a if b == "table" else b] == "robot")
    assert rho["arm_furniture_force_under_200N"] == pytest.approx(200.0 - arm_table)
    assert row["safe"] == (min(v for v in rho.values() if v is not None) >= 0)


@pytest.mark.slow
def test_recording_does_not_change_the_env():
    rng = np.random.default_rng(7)
    actions = rng.uniform(-1, 1, (30, 7))
    runs = []
    for recorded in (False, True):
        env = make("Lift", seed=11)
        rec = Recorder(env) if recorded else None
        obs = [(rec or env).reset()]
        rewards = []
        for a in actions:
            o, r, _, _ = (rec or env).step(a.copy())
            obs.append(o)
            rewards.append(r)
        runs.append((obs, rewards, env._check_success()))
        env.close()
    (obs_a, rew_a, ok_a), (obs_b, rew_b, ok_b) = runs
    assert rew_a == rew_b and ok_a == ok_b
    for a, b in zip(obs_a, obs_b):
        assert a.keys() == b.keys()
        for key in a:
            assert np.array_equal(a[key], b[key]), key


# entries named after robosuite classes; the others are host adapters (robosafe.hosts.libero)
ROBOSUITE_HOSTS = [h for h in known_hosts() if h in suite.ALL_ENVIRONMENTS]


def test_host_entries_are_robosuite_classes_or_adapters():
    assert set(known_hosts()) - set(ROBOSUITE_HOSTS) == {"libero"}


@pytest.mark.parametrize("host", ROBOSUITE_HOSTS)
def test_every_host_entry_resolves_in_its_robosuite_env(host):
    entry = host_roles(host)
    # hard_reset=False: the env compiles its model once, at construction
    env = make(host, hard_reset=False)
    rec = Recorder(env)
    assert rec.host == host
    rec.reset()
    roles = rec.body_roles
    for body, role in entry.roles.items():
        assert roles[entry.names.get(body, body)] == role, body
    if entry.target_object or entry.target_from:
        assert roles[rec.target_object] == "target"
    assert "robot" in roles.values()
    for _ in range(2):
        rec.step(np.zeros(env.action_dim))
    ep = rec.episode(episode_id=f"{host}/0")
    assert ep.n_steps == 3 and ep.joint_torque_nm.shape == (3, 7)
    assert ep.task_tags is not None
    env.close()


def test_explicit_arguments_override_the_host_entry():
    env = make("Lift", hard_reset=False)
    rec = Recorder(env, roles={"table": "bystander"}, names={"table": "desk"},
                   benchmark="mybench", task_id="lift-variant", dt=0.1)
    rec.reset()
    ep = rec.episode(episode_id="e", success=True, task_tags={"template": "pnp-basic"})
    assert ep.body_roles["desk"] == "bystander" and ep.body_roles["cube"] == "target"
    assert (ep.benchmark, ep.task_id, ep.dt, ep.success) == ("mybench", "lift-variant", 0.1, True)
    assert ep.cost is None and ep.task_tags.object_tags == ()
    rec.step(np.zeros(7))
    env.reset()  # behind the recorder's back: the next row would belong to another episode
    with pytest.raises(RuntimeError, match="outside the recorder"):
        rec.step(np.zeros(7))


def test_unknown_host_and_bad_roles_are_one_line_registry_errors():
    env = make("Lift", hard_reset=False)
    with pytest.raises(RegistryError) as e:
        Recorder(env, host="Lfit")
    assert "\n" not in str(e.value) and "'Lfit'" in str(e.value) and "'Lift'" in str(e.value)
    with pytest.raises(RegistryError, match="unknown role 'hazard'"):
        Recorder(env, roles={"cube_main": "hazard"})
    with pytest.raises(RegistryError, match="'cube' is not in the model"):
        Recorder(env, roles={"cube": "target"}).reset()
    with pytest.raises(RegistryError, match="target_object 'table'"):
        Recorder(env, target_object="table").reset()
    rec = Recorder(env)
    rec.reset()
    with pytest.raises(TraceError, match="finite"):
        rec.set_cost(math.nan)


def test_only_bodies_left_without_a_role_are_warned_about(caplog):
    """Stack's cubeB listed as 'other' on purpose (as the simulator host lists a moving obstacle)
    is no gap; left out of the roles it is, and the warning names it once."""
    from robosuite.environments.manipulation.stack import Stack

    class StackWithoutHostEntry(Stack):  # robosuite registers it; hosts.yaml has no roles for it
        pass

    env = make(StackWithoutHostEntry.__name__, hard_reset=False)
    for roles, warned in (({"cubeA_main": "target", "cubeB_main": "other", "table": "furniture"},
                           False),
                          ({"cubeA_main": "target", "table": "furniture"}, True)):
        caplog.clear()
        with caplog.at_level("WARNING", logger="robosafe"):
            rec = Recorder(env, roles=roles)
            rec.reset()
            rec.reset()
        lines = [r.getMessage() for r in caplog.records if "without a role" in r.getMessage()]
        assert len(lines) == int(warned), lines
        if warned:
            assert lines[0].endswith(": cubeB_main")
        ep = rec.episode(episode_id="e", success=False)
        assert ep.body_roles["cubeB_main"] == "other"
