"""`robosafe grounding intervene`: monitors command the robot while a generator scene is
simulated. A hand-built scene (the robot drives straight at a person standing still) gives
values worked out by hand; seeded scenes check the reference run against the generator (an
independent path); the VLM monitor runs against a real HTTP server on loopback."""

import json

import numpy as np
import pytest

pytest.importorskip("mujoco")

import test_grounding_client

from robosafe.grounding.intervene import (
    BaselineMonitor,
    InterveneConfig,
    Monitor,
    OracleMonitor,
    SSMMonitor,
    VLMMonitor,
    VLMSettings,
    intervene,
    run_episode,
    summarize,
)
from robosafe.grounding.simgen import (
    DT,
    GenerateConfig,
    Plan,
    Room,
    episode_plan,
    simulate,
)

pytestmark = [pytest.mark.sim]

chat = test_grounding_client.chat  # the loopback chat-completions server fixture
N, SPEED = 150, 0.02  # 0.6 m/s
HORIZON = 30


def head_on():
    """An empty 6 x 5 m room; the person stands at (4, 2.5); the robot drives from (1, 2.5)
    along +x at 0.02 m per step (0.6 m/s)."""
    room = Room(size=np.array([6.0, 5.0]), boxes=[], door=(2.0, 3.0),
                interior=(np.array([0.5, 0.5]), np.array([5.5, 4.5])))
    robot = np.stack([1.0 + SPEED * np.arange(N), np.full(N, 2.5)], axis=1)
    plan = Plan(robot=robot, human=np.tile([4.0, 2.5], (N, 1)), arm=np.tile([-1.0, 1.6], (N, 1)),
                carried=[None] * N, placed={}, events=[])
    return room, plan


def run(monitor, action="stop", scene=None):
    room, plan = scene or head_on()
    return run_episode(room, plan, human_type="neutral_0", robot="primitive", monitor=monitor,
                       action=action, horizon=HORIZON)


@pytest.fixture(scope="module")
def reference():
    out = run(Monitor())
    assert out.human_collision and not out.stopped_contact  # it drives into the person
    return out


def test_oracle_stop_by_hand(reference):
    t_c = reference.steps - 1  # the step of the first contact
    out = run(OracleMonitor())
    # the first step whose 30-step look-ahead reaches t_c is t_c - 30: the robot stops there,
    # at progress t_c - 30. The look-ahead ends with the episode (step N - 1), so from step
    # N - 30 on it no longer reaches t_c: the robot moves one planned step per step again and
    # ends at progress t_c - 1, N - t_c steps behind its plan, never touching the person.
    assert not out.human_collision and not out.stopped_contact
    assert out.steps == N and out.interventions == 1 and out.false_interventions == 0
    assert out.time_lost_s == pytest.approx((N - t_c) * DT, abs=1e-4)
    summary = summarize("oracle", [out], [reference])
    assert summary.prevented == 1 and summary.false_per_min == 0.0


def test_ssm_stops_short_of_the_protective_distance(reference):
    out = run(SSMMonitor(head_on()[0], "head_on"))
    assert out.status == "ok" and not out.human_collision and not out.stopped_contact
    assert out.interventions >= 1 and out.time_lost_s > 0
    # it halts earlier than the oracle: S_p at rest (1.24 m) is kept, contact is ~0.5 m
    assert out.time_lost_s > run(OracleMonitor()).time_lost_s


def test_baseline_stop_misses_a_contact_beyond_its_contact_distance(reference):
    """The baseline's contact prior is a 0.5 m root-to-root distance; this robot's stowed arm
    touches the person at 4 - (1 + 0.02 t_c) = 0.66 m. Stopped, its closing rate is 0 and its
    extrapolation no longer warns, so the robot creeps on and touches the person: a human
    collision the baseline did not prevent (reported as such, not as safe)."""
    t_c = reference.steps - 1
    assert 4.0 - (1.0 + SPEED * t_c) == pytest.approx(0.66)
    out = run(BaselineMonitor(), "stop")
    assert out.human_collision and out.interventions >= 1
    assert summarize("baseline", [out], [reference]).prevented == 0


def test_slow_rate_by_hand():
    from robosafe.grounding.intervene import _Run, slow_rate

    room, plan = head_on()
    r = _Run(room, plan, "neutral_0", "primitive", HORIZON)
    # head-on at 0.6 m/s; the SSM limit is (d - 1.24 m) / (T_r + T_s / 2 = 0.25 s)
    assert slow_rate(r, 10, 10.0, 1.315) == pytest.approx(0.5)
    assert slow_rate(r, 10, 10.0, 1.39) == pytest.approx(1.0)
    assert slow_rate(r, 10, 10.0, 1.2) == 0.0
    away = Plan(robot=plan.robot[::-1].copy(), human=plan.human, arm=plan.arm,
                carried=plan.carried, placed={}, events=[])
    assert slow_rate(_Run(room, away, "neutral_0", "primitive", HORIZON), 10, 10.0, 0.9) == 1.0


def _content(label):
    return json.dumps({"robot_human_distance_m": [2.0, 1.5, 1.0], "distance_trend": "closing",
                       "human_contact": [False] * 3, "scene_contact": [False] * 3,
                       "reasoning": "scripted", "risk_level": label})


def vlm(chat, every=50, timeout=5.0):
    return VLMMonitor(VLMSettings(chat.url, "mock", timeout_s=timeout, every=every,
                                  image_size=16))


def test_vlm_warning_stops_the_robot_by_hand(chat, reference):
    chat.script = [("content", _content("C"))] * 10
    out = run(vlm(chat))
    # asked at t = 0, 50, 100: C from the start, the robot never leaves its first pose
    assert len(chat) == 3 and out.status == "ok" and out.interventions == 1
    assert not out.human_collision and out.time_lost_s == pytest.approx((N - 1) * DT, abs=1e-4)
    # at t = 0 a second at full speed would not reach the person (contact at t_c ~ 117)
    assert out.false_interventions == 1
    req = chat.requests[0]["body"]["messages"][0]["content"]
    assert '"risk_level"' in req[0]["text"] and len(req) == 1 + 6  # 3 frames x arm, head


def test_vlm_saying_safe_is_the_reference(chat, reference):
    chat.script = [("content", _content("A"))] * 10
    out = run(vlm(chat))
    assert out.status == "ok" and out.interventions == 0
    assert (out.steps, out.human_collision) == (reference.steps, reference.human_collision)


@pytest.mark.parametrize("action", [("raw", b"not json at all"),
                                    ("content", "I cannot tell from these pictures."),
                                    ("status", 500), ("hang",)])
def test_vlm_garbage_timeout_or_error_fails_the_episode_never_safe(chat, action):
    chat.script = [action] * 5
    out = run(vlm(chat, timeout=0.3))
    assert out.status == "failed" and out.error and out.error.startswith("vlm:")
    s = summarize("vlm", [out], [out])
    assert s.failed == 1 and s.human_collisions == 0 and s.prevented == 0
    assert s.errors and "episode 0" in s.errors[0]


def test_monitor_crash_mid_episode_is_a_failure():
    class Crashing(Monitor):
        name = "crash"

        def observe(self, s):
            if s.t == 20:
                raise ValueError("sensor dropped out")
            return False

    out = run(Crashing())
    assert out.status == "failed" and "sensor dropped out" in out.error and out.steps == 21

    class Vague(Monitor):
        name = "vague"

        def observe(self, s):
            return "maybe"

    out = run(Vague())
    assert out.status == "failed" and "not an alarm" in out.error and out.steps == 1


def test_reference_reproduces_the_generator_and_monitors_share_episodes():
    config = InterveneConfig(episodes=2, seed=1, max_steps=120, monitors=("oracle",))
    result = intervene(config)
    gen = GenerateConfig(episodes=2, seed=1, max_steps=120, robot="primitive")
    ref = [o for o in result.outcomes if o.monitor == "none"]
    for i, (ht, task, sid, eid) in enumerate(episode_plan(gen)):
        record, _ = simulate(np.random.default_rng([1, i]), human_type=ht, sim_task=task,
                             scene_id=sid, episode_id=eid, config=gen)
        assert ref[i].steps == record.n_steps
        assert ref[i].human_collision == bool(record.human_collision.any())
        assert ref[i].scene_contact_steps == int((record.robot_scene_colls > 0).sum())
    assert [s.monitor for s in result.summaries] == ["none", "oracle"]


def test_cli_json_and_bad_options(cli, tmp_path):
    out = tmp_path / "iv.json"
    proc = cli("grounding", "intervene", "-n", "1", "--max-steps", "40", "--monitor", "oracle",
               "--json", "--out", out)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert json.loads(out.read_text()) == doc
    assert [s["monitor"] for s in doc["summaries"]] == ["none", "oracle"]
    # the file is a diagnostics input of the HTML report (robosafe report --diagnostics)
    from robosafe.report.html import load_diagnostics

    assert load_diagnostics([out])[0]["diagnostic"] == "intervention"
    for args, msg in ((["--action", "fly"], "--action 'fly'"),
                      (["--monitor", "vlm"], "--monitor vlm needs --endpoint and --model"),
                      (["--monitor", "magic"], "--monitor 'magic'"),
                      (["--horizon-s", "-1"], "--horizon-s -1.0")):
        bad = cli("grounding", "intervene", *args)
        assert bad.returncode == 2 and msg in bad.stderr and len(
            bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_bad_ssm_parameters_stop_the_run_before_it_starts(monkeypatch):
    """A broken human_proximity.yaml is a configuration error (one line, exit 2 in the CLI),
    not a monitor that failed on every episode."""
    from robosafe.errors import RegistryError
    from robosafe.safety import ssm

    def broken():
        raise RegistryError("human_proximity.yaml: parameters.stopping_time_s: expected a "
                            "finite number >= 0")

    monkeypatch.setattr(ssm, "ssm_params", broken)
    with pytest.raises(RegistryError, match="stopping_time_s"):
        InterveneConfig(episodes=1, max_steps=20).check()
