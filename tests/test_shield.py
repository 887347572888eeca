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


# -- the shield on robosafe's simulator (short horizons: the machine is shared) -----------------

VASE = "place_apple_on_plate_past_vase"


def _task_path() -> str:
    from importlib import resources

    return str(resources.files("robosafe.tasks") / "suites" / "demo" / f"{VASE}.bddl")


@pytest.fixture(scope="module")
def envs():
    pytest.importorskip("mujoco")
    from robosafe.hosts.robosafe import RobosafeEnv

    # 60 steps: the careless policy pushes the vase past 5 mm at row 53 (seed 0)
    return (RobosafeEnv(_task_path(), horizon=60, render=False),
            RobosafeEnv(_task_path(), horizon=60, render=False))


def _run(env, policy) -> Episode:
    from robosafe.policies.base import play

    obs, _ = env.reset(seed=0)
    play(env, policy, obs)
    return env.episode(episode_id="e")


@pytest.mark.sim
def test_monitor_on_a_recorded_run_equals_offline_and_leaves_the_episode_alone(envs):
    from robosafe.policies.base import make_policy
    from robosafe.runner.shield import Shield, ShieldConfig

    env, shadow = envs
    plain = _run(env, make_policy("scripted-careless"))
    shield = Shield(make_policy("scripted-careless"), env, shadow, ShieldConfig("monitor"))
    shielded = _run(env, shield)
    record = shield.finish()
    for k in ("eef_pos_m", "body_pos_m", "body_quat_wxyz", "contact_ptr", "contact_a",
              "contact_force_n", "joint_torque_nm", "gripper_contact"):
        assert np.array_equal(getattr(plain, k), getattr(shielded, k)), k  # bitwise
    offline = next(iter(Scorer().score([shielded]))).robustness
    for sid, rho in shield.monitor.final().items():
        assert rho == offline[sid], sid
    assert offline["non_target_max_disp_5mm"] < 0
    # the onset is where the recorded displacement first exceeds 5 mm, and it was foreseen
    onset = record["violations"]["non_target_max_disp_5mm"][0]
    margin = Scorer().registry.specs["non_target_max_disp_5mm"].formula.step_margins(
        {"non_target_disp_max": _disp(shielded)})
    assert onset == int(np.argmax(margin < 0))
    early = [w for w in record["warnings"] if w["spec"] == "non_target_max_disp_5mm"]
    assert early and early[0]["step"] + early[0]["lead"] == onset
    _same_json(shield, record)


def _same_json(shield, record) -> None:
    """``finish()``'s JSON is the typed record's, and reads back (through JSON text, as from a
    trace) as the same record."""
    import json

    from robosafe.trace.shield import ShieldRecord

    assert shield.record.to_json() == record
    text = json.dumps(record)
    back = ShieldRecord.from_json(json.loads(text))
    assert back == shield.record and json.dumps(back.to_json()) == text


def _disp(ep: Episode) -> np.ndarray:
    from robosafe.safety.signals import derive_signals

    return derive_signals(ep).values["non_target_disp_max"]


@pytest.mark.slow
@pytest.mark.sim
def test_filter_keeps_the_careless_policy_safe(envs):
    from robosafe.policies.base import make_policy
    from robosafe.runner.shield import Shield, ShieldConfig

    env, shadow = envs
    shield = Shield(make_policy("scripted-careless"), env, shadow, ShieldConfig("filter"))
    ep = _run(env, shield)
    record = shield.finish()
    score = next(iter(Scorer().score([ep])))
    assert "non_target_max_disp_5mm" not in score.violated
    assert record["interventions"]
    assert record["interventions"][0]["specs"] == ["non_target_max_disp_5mm"]
    assert shield.record.interventions[0].specs == ("non_target_max_disp_5mm",)
    _same_json(shield, record)


def test_score_warnings_by_hand():
    """Horizon 3. Spec a: warnings at steps 2 and 9; actual margin below zero at rows 4, 5
    (onset 4). Warning 2 is true (row 4 in (2, 5]), warning 9 false; onset 4 caught by the
    warning at 2 (in [1, 3]) with lead 2. Spec b: an onset at row 7 with no warning."""
    from robosafe.stats.shield import score_warnings
    from robosafe.trace.shield import ShieldRecord, ShieldWarning

    rec = ShieldRecord("monitor", 3, 0, (ShieldWarning(2, "a", 2, -1.0),
                                         ShieldWarning(9, "a", 1, -0.5)), (),
                       {"a": (4,), "b": (7,)}, {"a": (4, 5), "b": (7,)})
    out = score_warnings([rec], 3, {"a": "fa", "b": "fb"})
    assert (out["fa"].precision, out["fa"].recall, out["fa"].leads) == (0.5, 1.0, (2,))
    assert (out["fb"].precision, out["fb"].recall) == (None, 0.0)


def _run_cli(tmp_path, *args):
    from typer.testing import CliRunner

    from robosafe.cli import app

    return CliRunner().invoke(app, ["run", "--out", str(tmp_path / "r"), "--policy", "zero",
                                    *args])


def test_shield_usage_errors_are_one_line(tmp_path):
    res = _run_cli(tmp_path, "--suite", "demo", "--shield", "monitor", "--shield-horizon", "0")
    assert res.exit_code == 2, res.output
    assert len(res.output.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_a_host_whose_state_cannot_be_copied_is_refused_before_anything_runs(tmp_path,
                                                                                monkeypatch):
    """The registry says which hosts offer get_state / set_state; without it, --shield is one
    line naming the host, exit 2, and no run directory."""
    from dataclasses import replace

    from robosafe.hosts import registry

    table = {k: replace(v, features=tuple(f for f in v.features if f != "state"))
             if k == "libero" else v for k, v in registry.hosts().items()}
    monkeypatch.setattr(registry, "hosts", lambda: table)
    res = _run_cli(tmp_path, "--host", "libero", "--suite", "libero_spatial", "--shield",
                   "filter")
    assert res.exit_code == 2, res.output
    assert res.output.strip().splitlines() == [(
        "robosafe: error: --shield needs a host whose simulator state the shield can copy; "
        "--host libero does not offer it (robosafe's simulator and LIBERO do)")]
    assert not (tmp_path / "r").exists()


@pytest.mark.sim
def test_restore_then_step_is_the_uninterrupted_step_bit_for_bit(envs):
    """A second env set to the first's state (MuJoCo's, robosuite's clocks and controllers,
    the moving objects') steps exactly as the first: the shield's predictions are the
    episode's own future when the actions are the same."""
    env, shadow = envs
    rng = np.random.default_rng(3)
    actions = [np.append(rng.uniform(-1, 1, env.action_dim - 1), rng.choice([-1.0, 1.0]))
               for _ in range(8)]
    env.reset(seed=0)
    shadow.reset(seed=0)
    for a in actions[:4]:
        env.recorder.step(a)
    shadow.set_state(env.get_state())
    assert shadow.get_state().same(env.get_state())
    shadow.recorder.start()
    n = env.recorder.n_steps
    for k, a in enumerate(actions[4:], 1):
        env.recorder.step(a)
        shadow.recorder.step(a)
        assert shadow.get_state().same(env.get_state()), k
        mine, theirs = env.recorder.row(n - 1 + k), shadow.recorder.row(k)
        for f in ("eef_pos_m", "body_pos_m", "contact_force_n", "joint_torque_nm"):
            assert np.array_equal(getattr(mine, f), getattr(theirs, f)), (k, f)


class _Chunked:
    """scripted-careless asked every 5 steps, its action held and announced as the chunk."""

    name = "chunked"

    def __init__(self):
        from robosafe.policies.base import make_policy

        self.inner = make_policy("scripted-careless")

    def reset(self, task_info):
        self.inner.reset(task_info)
        self.left, self.a = 0, None

    def act(self, obs):
        if self.left == 0:
            self.a, self.left = np.asarray(self.inner.act(obs), dtype=float), 5
        self.left -= 1
        return self.a

    def action_chunk(self):
        return [self.a] * (self.left + 1)


@pytest.fixture(scope="module")
def long_envs():
    pytest.importorskip("mujoco")
    from robosafe.hosts.robosafe import RobosafeEnv

    # 100 steps: the chunked careless policy pushes the vase past 5 mm at row 99 (seed 0)
    return tuple(RobosafeEnv(_task_path(), horizon=100, render=False) for _ in range(2))


@pytest.mark.parametrize("mode", ["monitor", "filter"])
def test_extending_the_last_prediction_changes_nothing(long_envs, mode):
    """Within a chunk the plan only shifts, so the shield extends its last prediction by a
    step instead of simulating H afresh; the record and the episode are those of predicting
    afresh every step."""
    from robosafe.runner.shield import Shield, ShieldConfig

    env, shadow = long_envs
    out = {}
    for reuse in (False, True):
        shield = Shield(_Chunked(), env, shadow, ShieldConfig(mode, reuse=reuse))
        ep = _run(env, shield)
        out[reuse] = (ep, shield.finish(), shield.reused)
    (fresh, rec_fresh, n_fresh), (kept, rec_kept, n_kept) = out[False], out[True]
    assert n_fresh == 0 and n_kept > 0
    assert rec_kept == rec_fresh
    for k in ("eef_pos_m", "body_pos_m", "contact_force_n", "joint_torque_nm"):
        assert np.array_equal(getattr(fresh, k), getattr(kept, k)), k
    if mode == "filter":
        assert rec_kept["interventions"]  # the filter acted, and the same way
    else:
        assert rec_kept["violations"]["non_target_max_disp_5mm"] == [99]


def test_candidates_by_hand():
    """The policy moves +x at full speed, rising 0.2, gripper closed (+1)."""
    from robosafe.runner.shield import Shield, ShieldConfig

    shield = Shield(None, None, None, ShieldConfig("filter", candidates=("side", "lift",
                                                                          "hold")))
    got = dict(shield.candidates(np.array([1.0, 0.0, 0.2, 0.0, 0.0, 0.0, 1.0])))
    r = np.sqrt(0.5)
    expect = {"side+45": [r, r], "side-45": [r, -r], "side+90": [0.0, 1.0],
              "side-90": [0.0, -1.0]}
    for name, xy in expect.items():
        np.testing.assert_allclose(got[name], [*xy, 0.2, 0, 0, 0, 1.0], atol=1e-15)
    np.testing.assert_array_equal(got["lift"], [1.0, 0, 0.5, 0, 0, 0, 1.0])
    np.testing.assert_array_equal(got["hold"], [0, 0, 0, 0, 0, 0, 1.0])
    # no horizontal motion: nothing to turn
    assert not [n for n, _ in shield.candidates(np.array([0, 0, -1.0, 0, 0, 0, 1]))
                if n.startswith("side")]


# -- what the incremental monitor derives, and what it refuses -----------------------------------

def lifting_episode(rng: np.random.Generator, n: int, grip: bool = True) -> Episode:
    """A hostile random trace of a task outside the registry whose own tag record (a
    pick-and-place of a spillable object) activates every causal spec, with the bowl carried
    20 cm up so that the transport gate opens (grip and lift, or the lift alone when the trace
    records no gripper contact) and the tilt clauses are not vacuous."""
    from dataclasses import replace

    from robosafe.trace.episode import TaskTags

    ep = random_episode(rng, n)
    pos = ep.body_pos_m.copy()
    pos[:, 0, 2] += np.linspace(0.0, 0.2, n)
    return replace(ep, benchmark="custom-arm", body_pos_m=pos,
                   task_tags=TaskTags(template="pnp-basic", object_tags=("spillable",)),
                   gripper_contact=ep.gripper_contact if grip else None)


@pytest.mark.parametrize("seed", range(8))
def test_online_equals_offline_with_every_causal_signal(seed):
    from robosafe.safety.online import CAUSAL_SIGNALS, PROXIMITY_SIGNALS

    # the human-proximity signals need a human in the scene: tests/test_human_proximity.py
    human = {*PROXIMITY_SIGNALS, "human_contact_count", "human_contact_force"}
    rng = np.random.default_rng(100 + seed)
    grip = seed % 2 == 0
    mon = assert_matches_offline(lifting_episode(rng, int(rng.integers(20, 60)), grip),
                                 Scorer())
    if grip:
        assert mon.plan.needs == CAUSAL_SIGNALS - human
    else:
        assert mon.plan.lift_only and "grasp_slip_m" not in mon.plan.needs
    # the gate fired: the tilt clauses' robustness is a real margin, not a vacuous +inf
    for sid in ("held_object_tilt_world_15deg", "held_object_tilt_body_15deg"):
        assert np.isfinite(mon.current()[sid]), sid


def test_a_row_derives_only_what_the_monitored_specs_read():
    """The same rows under a task whose specs read the orientation drift (the spillable
    pick-and-place) and under one whose specs do not (libero-spatial task_0: its objects
    cannot spill): only the first derives it."""
    from dataclasses import replace

    from robosafe.safety.online import episode_rows

    orient = {"held_object_tilt_deg", "held_object_rotation_deg"}
    ep = lifting_episode(np.random.default_rng(5), 6)
    plain = replace(ep, benchmark="libero-spatial", task_tags=None)
    for episode, reads in ((ep, True), (plain, False)):
        mon = OnlineMonitor.for_episode(episode, Scorer())
        mon.push(episode)
        values = mon._step_values(episode_rows(episode, [1]))
        assert mon.plan.needs <= set(values)
        assert (orient <= set(values)) is reads and bool(orient & set(values)) is reads


def test_float32_rows_give_the_offline_numbers():
    """A trace read back with float32 poses, torques and forces: the offline kernels cast to
    float64 before any arithmetic, and so does the monitor."""
    ep = lifting_episode(np.random.default_rng(11), 25)
    f32 = {k: getattr(ep, k).astype(np.float32) for k in
           ("eef_pos_m", "body_pos_m", "body_quat_wxyz", "joint_torque_nm", "contact_force_n")}
    from dataclasses import replace

    assert_matches_offline(replace(ep, **f32), Scorer())


def test_a_contact_body_outside_the_names_is_a_trace_error():
    """Row 2 names contact body 9 of 6: one TraceError naming the row, never a silent 0 N."""
    from robosafe.errors import TraceError

    ep = random_episode(np.random.default_rng(2), 4)
    ptr = ep.contact_ptr
    bad = ep.contact_a.copy()
    bad[ptr[2]] = 9
    from dataclasses import replace

    ep = replace(ep, contact_a=bad)
    mon = OnlineMonitor.for_episode(ep, Scorer())
    mon.push(ep)
    mon.push(ep)
    with pytest.raises(TraceError, match=r"contact body index") as err:
        mon.push(ep)
    assert err.value.field == "steps[2].contacts"


@pytest.mark.sim
def test_a_prediction_records_from_its_first_step(envs):
    """``Recorder.start(record=False)``: the shadow's row 0 is the state after its first step,
    bitwise the row the episode records for that step; ``get_state(objects=False)`` is the
    physics and the frozen movers alone, equal on both after the same step."""
    env, shadow = envs
    env.reset(seed=0)
    shadow.reset(seed=0)
    a = np.zeros(env.action_dim)
    a[0], a[-1] = 0.5, 1.0
    shadow.set_state(env.get_state())
    shadow.recorder.start(record=False)
    assert shadow.recorder.n_steps == 0
    env.recorder.step(a)
    shadow.recorder.step(a)
    assert shadow.recorder.n_steps == 1
    mine, theirs = env.recorder.row(1), shadow.recorder.row(0)
    for f in ("eef_pos_m", "body_pos_m", "contact_a", "contact_force_n", "joint_torque_nm",
              "gripper_contact"):
        assert np.array_equal(getattr(mine, f), getattr(theirs, f)), f
    light = shadow.get_state(objects=False)
    assert light.objects == () and light.same(env.get_state(objects=False))
    assert np.array_equal(light.physics, env.get_state().physics)


@pytest.mark.slow
@pytest.mark.sim
def test_extending_a_candidates_prediction_changes_nothing(long_envs):
    """scripted-careless under the filter: its action changes every step, so its own plan is
    predicted afresh, but a candidate taken at one step and tried again at the next (hold,
    retreat: the same action whatever the policy proposes) is extended by a step; the record
    and the episode are those of predicting every candidate afresh."""
    from robosafe.policies.base import make_policy
    from robosafe.runner.shield import Shield, ShieldConfig

    env, shadow = long_envs
    out = {}
    for reuse in (False, True):
        shield = Shield(make_policy("scripted-careless"), env, shadow,
                        ShieldConfig("filter", reuse=reuse))
        ep = _run(env, shield)
        out[reuse] = (ep, shield.finish(), shield.reused_candidates)
    (fresh, rec_fresh, n_fresh), (kept, rec_kept, n_kept) = out[False], out[True]
    assert n_fresh == 0 and n_kept > 0
    assert rec_kept["interventions"] and rec_kept == rec_fresh
    for k in ("eef_pos_m", "body_pos_m", "contact_force_n", "joint_torque_nm"):
        assert np.array_equal(getattr(fresh, k), getattr(kept, k)), k
