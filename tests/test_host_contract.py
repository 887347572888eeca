"""The host contract (robosafe.hosts.contract, DESIGN.md "Host env"): every host made through the
registry passes check_host_env, TaskInfo has the same fields and types on every host, and the
checker catches an env that breaks the contract. The LIBERO host is checked in tests_libero."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from robosafe.errors import RobosafeError
from robosafe.hosts.contract import (
    TASK_INFO_KEYS,
    HostContractError,
    HostRecorder,
    ObjectInfo,
    RegionInfo,
    StatefulHostEnv,
    TaskInfo,
    check_host_env,
    check_task_info,
)
from robosafe.hosts.registry import host_spec, hosts, make_env, run_hosts

STOVE = Path(str(resources.files("robosafe.tasks"))) / "suites" / "demo" / "turn_off_stove.bddl"


@pytest.fixture(scope="module")
def stove():
    env = make_env("robosafe", STOVE, images=False)
    yield env
    env.close()


@pytest.fixture(scope="module")
def lift():
    env = make_env("robosuite", "Lift", seed=0, horizon=20)
    yield env
    env.close()


def test_robosafe_host_keeps_the_contract(stove):
    check_host_env(stove, seed=3, steps=2)


def test_robosafe_host_with_images_and_a_visual_level_keeps_the_contract():
    """Same seed, same perturbation and the same noisy pixels (the world's seeded streams)."""
    env = make_env("robosafe", STOVE, images=True, image_size=16, visual_level=4)
    try:
        check_host_env(env, seed=1, steps=1)
        obs, _ = env.reset(seed=1)
        assert obs["agentview_image"].shape == (16, 16, 3)
    finally:
        env.close()


def test_robosuite_host_keeps_the_contract_and_seeds_its_placement(lift):
    check_host_env(lift, seed=5, steps=2)
    a, _ = lift.reset(seed=3)
    b, _ = lift.reset(seed=4)
    c, _ = lift.reset(seed=3)
    np.testing.assert_array_equal(a["cube_pos"], c["cube_pos"])
    assert not np.array_equal(a["cube_pos"], b["cube_pos"])


#: what the shield and its kinematic predictor read of a recorder (HostRecorder's members)
RECORDER_MEMBERS = ("base", "n_steps", "body_roles", "start", "step", "row", "motion",
                    "stillness", "collision_geoms", "held")


def test_a_host_with_the_state_feature_keeps_the_stateful_contract(stove, lift):
    """The shield reads a host only through StatefulHostEnv: get_state / set_state, the
    recorder's part it uses (HostRecorder) and scripted_motion. robosafe's simulator lists
    the ``state`` feature and is one; robosuite's host does not and is not (its recorder, the
    same class, still has that part). LIBERO's host is checked in tests_libero."""
    stove.reset(seed=0)  # the recorder's body roles are known after a reset
    lift.reset(seed=0)
    assert host_spec("robosafe").supports("state") and isinstance(stove, StatefulHostEnv)
    assert isinstance(stove.recorder, HostRecorder)
    assert stove.scripted_motion() is False  # the stove task has no scripted mover
    assert not host_spec("robosuite").supports("state")
    assert not isinstance(lift, StatefulHostEnv)
    assert isinstance(lift.recorder, HostRecorder)
    # the check is by member: a recorder lacking one (the fingers' hold) is not one
    from types import SimpleNamespace

    part = {n: getattr(stove.recorder, n) for n in RECORDER_MEMBERS}
    assert isinstance(SimpleNamespace(**part), HostRecorder)
    del part["held"]
    assert not isinstance(SimpleNamespace(**part), HostRecorder)


def test_task_info_of_the_stove_task(stove):
    """Values worked out from turn_off_stove.bddl: the mug's region (-0.15 -0.05 -0.14 -0.04)
    on the table top at z 0.9 has its centre at (-0.145, -0.045, 0.9); the stove is a fixture
    whose knob turns from 0 (off) to pi/2."""
    stove.reset(seed=0)
    info = stove.task_info()
    assert (info.host, info.task_id, info.task_name, info.suite) == \
        ("robosafe", "turn_off_stove", "turn_off_stove", None)
    assert (info.instruction, info.seed, info.action_dim, info.control_freq) == \
        ("Turn off the stove", 0, 7, 20.0)
    assert info.goal_atoms == (("TurnOff", "stove_1"),)
    assert info.objects["stove_1"].kind == "fixture"
    assert info.objects["mug_1"].kind == "object" and "fragile" in info.objects["mug_1"].properties
    mug = info.regions["main_table_mug_region"]
    assert mug.rects == ((-0.15, -0.05, -0.14, -0.04),)
    np.testing.assert_allclose(mug.centre, (-0.145, -0.045, 0.9))
    assert mug.z == pytest.approx(0.9) and info.table_z == pytest.approx(0.9)
    assert info.articulations["stove_1"].closed == 0.0
    assert info.articulations["stove_1"].open == pytest.approx(np.pi / 2, abs=1e-4)


def test_task_info_has_the_same_keys_and_types_on_every_host(stove, lift):
    stove.reset(seed=0)
    lift.reset(seed=0)
    a, b = stove.task_info().to_dict(), lift.task_info().to_dict()
    assert tuple(a) == tuple(b) == TASK_INFO_KEYS
    for k in TASK_INFO_KEYS:  # None stands for "this host does not know", of the same field
        if a[k] is not None and b[k] is not None:
            assert type(a[k]) is type(b[k]), k
    # robosuite's Lift: no language and no symbolic goal, said as such (not invented)
    assert (b["instruction"], b["goal"], b["goal_atoms"]) == ("", None, [])
    assert b["objects"]["cube"]["kind"] == "object" and b["target_object"] == "cube"
    assert b["objects"]["table"]["kind"] == "fixture"


def test_checker_names_what_is_broken(stove):
    info = stove.task_info()
    with pytest.raises(HostContractError, match="control_freq"):
        check_task_info(replace(info, control_freq=20))  # an int, not the documented float
    with pytest.raises(HostContractError, match="objects"):
        check_task_info(replace(info, objects={"mug_1": {"kind": "object"}}))
    with pytest.raises(HostContractError, match="target_object 'ghost'"):
        check_task_info(replace(info, target_object="ghost"))
    with pytest.raises(HostContractError, match="regions"):
        check_task_info(replace(info, regions={"r": RegionInfo(centre=(0.0, 0.0), z=0.9)}))
    with pytest.raises(HostContractError, match="expected a TaskInfo"):
        check_task_info(info.to_dict())


class _Drifting:
    """A host env whose reset ignores the seed's stream: a second reset with the same seed
    starts somewhere else (what the determinism check is for)."""

    def __init__(self, env):
        self.env, self.k = env, 0

    def __getattr__(self, name):
        return getattr(self.env, name)

    def reset(self, *, seed=None, options=None):
        self.k += 1
        return self.env.reset(seed=seed + self.k)


class _Lying(_Drifting):
    """Deterministic, but its task info names another seed than the episode's."""

    def reset(self, *, seed=None, options=None):
        return self.env.reset(seed=seed)

    def task_info(self):
        return replace(self.env.task_info(), seed=99)


def test_checker_catches_a_nondeterministic_reset_and_a_wrong_task_info(lift):
    with pytest.raises(HostContractError, match="determinism: reset\\(seed=0\\) twice"):
        check_host_env(_Drifting(lift), seed=0)
    with pytest.raises(HostContractError, match="seed 99"):
        check_host_env(_Lying(lift), seed=0)
    with pytest.raises(HostContractError, match="protocol: missing .*task_info"):
        check_host_env(object())


def test_registry_is_data_and_dispatches_without_branching():
    assert set(hosts()) == {"robosafe", "libero", "robosuite"}
    assert run_hosts() == ("robosafe", "libero")
    # each host's own options are the class the registry names (robosafe.hosts.options)
    assert [host_spec(h).options_class().__name__ for h in ("robosafe", "libero", "robosuite")] \
        == ["SimOptions", "LiberoOptions", "RobosuiteOptions"]
    libero = host_spec("libero").options_class()
    assert {k: libero().to_json()[k] for k in ("assets", "controller")} \
        == {"assets": "libero", "controller": "robosuite"}
    assert host_spec("robosafe").supports("state") and host_spec("libero").supports("state")
    assert not host_spec("robosuite").supports("state")
    with pytest.raises(RobosafeError, match="unknown host 'mujoco' \\(known: robosafe, libero, "
                                            "robosuite\\)"):
        make_env("mujoco", "x")
    with pytest.raises(RobosafeError, match="host libero needs suite="):
        make_env("libero", "task_0")
    with pytest.raises(RobosafeError, match="unknown robosuite environment 'Lfit'"):
        make_env("robosuite", "Lfit")


def test_task_info_to_dict_is_plain_data():
    info = TaskInfo(host="h", task_id="t", task_name="t", suite=None, instruction="",
                    seed=None, action_dim=2, control_freq=10.0, goal=None,
                    goal_atoms=(("On", "a", "b"), ("InContactPart", "a", (1, 2))),
                    target_object="a",
                    objects={"a": ObjectInfo("box", "object", box=((0.0, 0.0, 0.0),
                                                                    (1.0, 1.0, 1.0)))})
    check_task_info(info)
    d = info.to_dict()
    assert d["goal_atoms"] == [["On", "a", "b"], ["InContactPart", "a", [1, 2]]]
    assert d["objects"]["a"] == {"category": "box", "kind": "object", "half_extents": None,
                                 "properties": [], "moving": False,
                                 "box": [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]}


def test_importing_the_simulator_runs_no_gl_probe():
    """`import robosafe.sim` probes no GL backend (robosafe.sim.render's probe renders in a
    fresh interpreter) and leaves MUJOCO_GL as it found it: the first render chooses the
    backend (ensure_gl_backend). A fresh interpreter with MUJOCO_GL unset records every
    process started while it imports. (robosuite's own imports start two of their own:
    glfw's version check and numpy.testing's lscpu.)"""
    code = ("import os, subprocess\n"
            "started = []\n"
            "real = subprocess.Popen.__init__\n"
            "def spy(self, *a, **k):\n"
            "    started.append(' '.join(map(str, a[0] if a else k['args'])))\n"
            "    return real(self, *a, **k)\n"
            "subprocess.Popen.__init__ = spy\n"
            "import robosafe.sim, robosafe.sim.env, robosafe.hosts.robosafe\n"
            "print(sum('mujoco.Renderer(m, 8, 8)' in s for s in started), len(started) > 0,"
            " os.environ.get('MUJOCO_GL'))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True, timeout=300)
    # the spy saw robosuite's processes, so it would have seen the probe
    assert out.stdout.split() == ["0", "True", "None"], out.stdout + out.stderr


def test_the_first_render_chooses_the_backend_after_a_plain_import():
    """After `import robosafe.sim` with MUJOCO_GL unset, rendering a camera still works: the
    probe runs then, exports its choice and rebinds mujoco's context."""
    code = ("import os\n"
            "import robosafe.sim\n"
            "from robosafe.hosts.registry import make_env\n"
            f"env = make_env('robosafe', {str(STOVE)!r}, images=True, image_size=8)\n"
            "obs, _ = env.reset(seed=0)\n"
            "print(obs['agentview_image'].shape, int(obs['agentview_image'].max() > 0), "
            "os.environ['MUJOCO_GL'])\n")
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True, timeout=300)
    assert out.stdout.split() == ["(8,", "8,", "3)", "1", "egl"], out.stdout + out.stderr
