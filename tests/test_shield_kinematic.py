"""The shield's kinematic predictor (robosafe.runner.predict, robosafe.sim.kinematic): what it
flags in a scene built by hand, its options, and a shielded run against the unshielded one."""

from __future__ import annotations

import csv

import numpy as np
import pytest

VASE = "place_apple_on_plate_past_vase"


def _task_path(name: str) -> str:
    from importlib import resources

    return str(resources.files("robosafe.tasks") / "suites" / "demo" / f"{name}.bddl")


@pytest.fixture(scope="module")
def scene():
    """The demo vase task, seed 0, with the vase (a fragile asset) moved onto the line the
    hand travels along the robot's +x, 15 cm ahead of the hand's site, on the table."""
    pytest.importorskip("mujoco")
    import mujoco

    from robosafe.hosts.robosafe import RobosafeEnv

    env = RobosafeEnv(_task_path(VASE), horizon=40, render=False)
    env.reset(seed=0)
    assert "fragile" in env.task_info().objects["vase_1"].properties
    m, d = env.recorder.base.sim.model._model, env.recorder.base.sim.data._data
    body = m.body("vase_1_main").id
    adr = m.jnt_qposadr[m.body_jntadr[body]]
    hand = d.site_xpos[m.site("gripper0_right_grip_site").id].copy()
    d.qpos[adr:adr + 2] = hand[0] + 0.15, hand[1]
    d.qvel[:] = 0.0
    mujoco.mj_forward(m, d)
    return env, m, d


def _predictor(env):
    from robosafe.runner.predict import KinematicPredictor

    kp = KinematicPredictor(env)
    kp.reset(env.task_info())
    return kp


def _push(x: float) -> np.ndarray:
    """Hand motion along the base frame's x (the Panda's base is not turned on robosafe's
    table: the world's x), gripper open."""
    return np.array([x, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0])


@pytest.mark.sim
def test_the_vase_on_the_hands_path_is_flagged_and_motion_away_is_not(scene):
    import mujoco

    env, m, d = scene
    kp = _predictor(env)
    assert kp.obstacles == ("vase_1",)  # the apple (target) and plate (the goal's) are exempt
    key = "clearance:vase_1"
    margin = kp.cfg.margin
    still = kp.predict([_push(0.0)] * 5).margins[key]
    # holding still: one clearance, and a lower bound on the hand's true distance (MuJoCo's
    # own geometry) less the margin: boxes enclose the geoms
    assert max(still) - min(still) < 1e-12
    exact = min(mujoco.mj_geomDistance(m, d, int(a), int(b), 1.0, np.zeros(6))
                for a in kp.boxes.arm.geoms for b in env.recorder.collision_geoms()["vase_1"])
    assert 0 < still[0] <= exact - margin
    # straight at it at full speed: the hand covers reach x 5 cm a step (the OSC's output
    # range) along x (the arm follows by damped least squares: within 2 mm over 3 steps)
    step = kp.cfg.reach * 0.05
    eef = kp.boxes.arm.eef
    start = kp.boxes.d.site_xpos[eef].copy()  # the private copy, set from the world's state
    toward = kp.predict([_push(1.0)] * 3).margins[key]
    moved = kp.boxes.d.site_xpos[eef] - start
    assert np.allclose(moved, [3 * step, 0.0, 0.0], atol=2e-3), moved
    # the clearance falls with each step, at most by the hand's step, and crosses zero where
    # the hand has closed the gap: after ceil(c0 / step) steps, or a step later (the arm's
    # boxes, not only the hand, set the clearance)
    toward = kp.predict([_push(1.0)] * 8).margins[key]
    first = next(k for k, c in enumerate(toward, 1) if c < 0)
    drops = np.diff([still[0], *toward[:first]])
    assert np.all(drops < 0) and np.all(drops >= -step - 1e-3), drops
    assert int(np.ceil(still[0] / step)) <= first <= int(np.ceil(still[0] / step)) + 1
    # away: never closer than now
    away = kp.predict([_push(-1.0)] * 8).margins[key]
    assert min(away) >= still[0] - 1e-9 and away[-1] > away[0]


@pytest.mark.sim
def test_the_flag_comes_before_the_simulated_contact(scene):
    """Step the world itself with the push: the hand does hit the vase, and not before the
    step the prediction named (reach is the largest share of the commanded motion)."""
    env, m, d = scene
    kp = _predictor(env)
    pred = kp.predict([_push(1.0)] * 12).first_below(0.0)["clearance:vase_1"]
    hit = None
    for k in range(1, 25):
        env.recorder.step(_push(1.0))
        bodies = {mujoco_body(m, int(g)) for c in range(d.ncon)
                  for g in (d.contact.geom1[c], d.contact.geom2[c])}
        if "vase_1_main" in bodies and any(b.startswith(("robot0", "gripper0")) for b in bodies):
            hit = k
            break
    assert hit is not None and hit >= pred, (hit, pred)


def mujoco_body(m, geom: int) -> str:
    import mujoco

    return mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, int(m.geom_bodyid[geom])) or ""


@pytest.mark.parametrize("args, message", [
    (["--predictor", "kinematic"], "robosafe: error: --predictor needs --shield"),
    (["--shield", "filter", "--predictor", "oracle"],
     "robosafe: error: --predictor 'oracle': choose from sim, kinematic"),
    (["--shield", "filter", "--predictor", "kinematic", "--predictor-margin", "-0.01"],
     "robosafe: error: --predictor-margin must be a finite number >= 0 (metres), got -0.01"),
    (["--shield", "filter", "--predictor-margin", "0.01"],
     "robosafe: error: --predictor-margin needs --predictor kinematic"),
    (["--shield", "monitor", "--predictor", "kinematic"],
     "robosafe: error: --predictor kinematic works with --shield filter"),
    (["--host", "libero", "--suite", "libero_spatial", "--shield", "filter", "--predictor",
      "kinematic"],
     ("robosafe: error: --predictor kinematic needs --host robosafe (robosafe's simulator); "
      "--host libero is not supported")),
])
def test_bad_predictor_options_are_one_line(cli, tmp_path, args, message):
    out = tmp_path / "r"
    suite = [] if "--suite" in args else ["--suite", "demo"]
    proc = cli("run", *suite, "--policy", "zero", "--out", out, *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [message]
    assert not out.exists()


def _safe(run_dir) -> list[int]:
    with open(run_dir / "outcomes.csv", newline="") as f:
        return [int(r["safe"]) for r in sorted(csv.DictReader(f), key=lambda r: r["seed"])]


@pytest.mark.slow
@pytest.mark.sim
def test_a_kinematic_shield_keeps_the_careless_policy_safe(cli, tmp_path):
    """The careless policy pushes the mug past 5 mm on place_lemon_in_bowl (seed 1): unsafe
    unshielded; the kinematic shield, same seed, keeps it safe (and never less safe)."""
    common = ("run", "--suite", "demo", "--task-id", "place_lemon_in_bowl", "--policy",
              "scripted-careless", "--seeds", "1", "--workers", "1", "--horizon", "150")
    off = cli(*common, "--out", tmp_path / "off")
    on = cli(*common, "--out", tmp_path / "on", "--shield", "filter", "--predictor",
             "kinematic")
    assert off.returncode == 0 and on.returncode == 0, (off.stderr, on.stderr)
    assert _safe(tmp_path / "off") == [0]
    assert _safe(tmp_path / "on") == [1]


def test_the_goals_objects_are_not_obstacles():
    """Worked by hand: the goal (On apple_1 plate_1_top_region) exempts the apple (an
    argument and the target) and the plate (the region's owner); the vase and the stove stay
    obstacles. plate_10's region exempts plate_10, not plate_1 (the owner's name and an
    underscore must start the region's)."""
    from types import SimpleNamespace

    from robosafe.runner.predict import goal_names

    info = SimpleNamespace(goal_atoms=(("On", "apple_1", "plate_1_top_region"),),
                           objects={"apple_1": 0, "plate_1": 0, "plate_10": 0, "vase_1": 0,
                                    "stove_1": 0},
                           target_object="apple_1")
    assert goal_names(info) == {"apple_1", "plate_1"}
    info.goal_atoms = (("On", "apple_1", "plate_10_top_region"),)
    assert goal_names(info) == {"apple_1", "plate_10"}
