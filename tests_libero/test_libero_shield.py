"""The safety shield on the LIBERO host (robosuite 1.4): state copied through the host contract
(get_state / set_state), ``robosafe run --shield monitor|filter`` on a LIBERO task.

The careless case, worked out on ``libero_goal`` task_1 ("put the bowl on the stove"), initial
state 0: the hand starts 0.25 m above the table top; the action ``[0, 0, -1, 0, 0, 0, -1]``
held (OSC: straight down at full speed, gripper open) drives it into the bowl below. The scorer
puts the first contact over 200 N at trace row 20 (``max_contact_force_under_200N``, in Φ_safe).
A held action is exactly what the shield predicts for a policy without an action chunk, and
the simulator is deterministic, so the prediction made before action t (rows t+1 .. t+5, H = 5)
first contains row 20 at t = 15: the first warning (monitor) and the first intervention
(filter) are at step 15, lead 5; the filter's replacement keeps that contact under 200 N.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from robosafe.hosts.contract import HostRecorder, StatefulHostEnv
from robosafe.hosts.libero import LiberoEnv
from robosafe.safety.registry import load_registry
from robosafe.safety.signals import derive_signals
from robosafe.trace.io import read_episodes

SUITE, TASK = "libero_goal", "task_1"
DOWN = [0.0, 0.0, -1.0, 0.0, 0.0, 0.0, -1.0]
H, ONSET, STEPS = 5, 20, 22
SPEC = "max_contact_force_under_200N"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "robosafe", *args], capture_output=True,
                          text=True, timeout=600, check=False,
                          env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")})


def test_restore_then_step_is_the_uninterrupted_step_bit_for_bit():
    """robosuite 1.4 keeps state between steps outside MuJoCo (the OSC goal, the gripper's
    command, the robot's buffers, the observables): restored with MuJoCo's integration state
    (warm start included), a second env -- and the same env -- step exactly as the first."""
    a, b = LiberoEnv(SUITE, TASK), LiberoEnv(SUITE, TASK)
    try:
        rng = np.random.default_rng(0)
        actions = [np.append(rng.uniform(-1, 1, 6), rng.choice([-1.0, 1.0])) for _ in range(10)]
        a.reset(seed=0)
        b.reset(seed=0)
        # the shield reads the host through the contract's stateful part only
        assert isinstance(a, StatefulHostEnv) and isinstance(a.recorder, HostRecorder)
        assert a.scripted_motion() is None  # cannot say: screening never skips here
        for x in actions[:6]:  # gripper closing and opening: its command moves per step
            a.step(x)
        b.set_state(a.get_state())
        assert b.get_state().same(a.get_state())
        for x in actions[6:]:
            oa, *_ = a.step(x)
            ob, *_ = b.step(x)
            assert b.get_state().same(a.get_state())
            assert all(np.array_equal(oa[k], ob[k]) for k in oa)
        ea, eb = a.episode(), b.episode()
        for f in ("eef_pos_m", "body_pos_m", "joint_torque_nm"):
            assert np.array_equal(getattr(ea, f)[-4:], getattr(eb, f)[-4:]), f
        # the same env, restored: robosuite's own step (the recorder keeps the episode's rows)
        base = a.env
        saved = a.get_state()
        first, *_ = base.step(actions[0])
        after = a.get_state()
        a.set_state(saved)
        again, *_ = base.step(actions[0])
        assert a.get_state().same(after)
        assert all(np.array_equal(first[k], again[k]) for k in first)
        assert not after.same(saved)  # the step did move the state the comparison reads
    finally:
        a.close()
        b.close()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The careless case (module docstring), unshielded, monitored and filtered: one seed."""
    tmp = tmp_path_factory.mktemp("shield")
    actions = tmp / "down.npy"
    np.save(actions, np.tile(np.array(DOWN), (STEPS, 1)))
    out = {}
    for mode in ("off", "monitor", "filter"):
        r = _cli("run", "--host", "libero", "--suite", SUITE, "--task-id", TASK, "--policy",
                 f"replay:{actions}", "-n", "1", "--horizon", str(STEPS), "--shield", mode,
                 "--shield-horizon", str(H), "--out", str(tmp / mode), "--json")
        assert r.returncode == 0, r.stderr
        (trace,) = (tmp / mode / "traces").glob("*.jsonl")
        (ep,), errors = read_episodes(trace)
        assert not errors
        out[mode] = (trace, ep)
    return out


def _onset(ep, spec: str) -> int | None:
    margins = load_registry().specs[spec].formula.step_margins(derive_signals(ep).values)
    below = np.flatnonzero(margins < 0)
    return int(below[0]) if below.size else None


def test_monitor_leaves_the_trace_bitwise_that_of_the_unshielded_run(runs):
    (plain_path, plain), (mon_path, _) = runs["off"], runs["monitor"]
    assert _onset(plain, SPEC) == ONSET
    a = json.loads(plain_path.read_text().splitlines()[0])
    b = json.loads(mon_path.read_text().splitlines()[0])
    shield = b["meta"].pop("shield")
    assert a == b  # every step, contact and number of the trace, as written
    assert shield["mode"] == "monitor" and shield["interventions"] == []
    first = min((w for w in shield["warnings"] if w["spec"] == SPEC), key=lambda w: w["step"])
    assert (first["step"], first["lead"]) == (ONSET - H, H)
    assert shield["violations"][SPEC] == [ONSET]


def test_filter_intervenes_when_the_careless_action_is_predicted_unsafe(runs):
    _, ep = runs["filter"]
    shield = ep.meta["shield"]
    first = shield["interventions"][0]
    assert first["step"] == ONSET - H and first["specs"] == [SPEC]
    assert first["safe"] is True and first["candidate"] in ("scale0.5", "scale0.25", "lift",
                                                            "hold", "retreat", "open")
    assert _onset(ep, SPEC) is None  # no contact over 200 N any more
    rows = (Path(runs["filter"][0]).parent.parent / "outcomes.csv").read_text().splitlines()
    header = rows[0].split(",")
    assert int(rows[1].split(",")[header.index("interventions")]) == len(shield["interventions"])
