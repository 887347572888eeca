"""Human-proximity specs: the protective separation distance (ISO/TS 15066 SSM form), the
robot's approach speed from poses, the contact clause, the `human` body role of the trace, and
online = offline. Values are worked out by hand in the comments."""

import json
import math

import numpy as np
import pytest
from factories import make_episode

from robosafe.errors import RegistryError, TraceError
from robosafe.safety.online import OnlineMonitor
from robosafe.safety.score import score_episodes
from robosafe.safety.ssm import (
    SSMParams,
    params_from_doc,
    protective_separation_m,
    speed_limit_m_s,
    ssm_params,
)
from robosafe.trace.episode import TaskTags
from robosafe.trace.io import episode_to_record, read_episodes, write_episodes
from robosafe.trace.validate import check_episode

ROLES = {"base": "robot", "person": "human", "wall": "furniture"}
TAGS = TaskTags(task_tags=("human_copresence", "scene_contact_risk"),
                benchmark_signal_tags=("human_pose_signal", "human_contact_signal",
                                       "max_contact_force_signal"))


def approach(n=5, speed=1.0, dt=0.1, start=3.0, contacts=None, tags=TAGS, **kw):
    """Robot base driving along +x toward a person standing at x = start."""
    base = np.zeros((n, 3))
    base[:, 0] = speed * dt * np.arange(n)
    person = np.tile([start, 0.0, 0.0], (n, 1))
    return make_episode(n, body_pos={"base": base, "person": person}, roles=ROLES, target=None,
                        benchmark="touchsafe-mujoco", task_id="social_navigation", dt=dt,
                        task_tags=tags, contacts=[[]] * n if contacts is None else contacts,
                        **kw)


def test_protective_separation_by_hand():
    p = ssm_params()
    assert p == SSMParams(1.6, 0.1, 0.3, 0.5, 0.05, 0.05)
    # S_h = 1.6 * 0.4 = 0.64; S_r = 0.5 * 0.1 = 0.05; S_s = 0.5 * 0.3 / 2 = 0.075; C+Z = 0.6
    assert protective_separation_m(0.5, p) == pytest.approx(1.365)
    assert protective_separation_m(0.0, p) == pytest.approx(1.24)
    # the slow command's limit inverts S_p: S_p(limit(d)) = d; none at or below S_p(0)
    for d in (1.3, 2.0, 5.0):
        assert protective_separation_m(speed_limit_m_s(d, p), p) == pytest.approx(d)
    assert speed_limit_m_s(1.0, p) == 0.0


@pytest.mark.parametrize("name,value", [("human_speed_m_s", -1.6), ("stopping_time_s", -0.3),
                                        ("reaction_time_s", float("nan")),
                                        ("intrusion_m", "0.5")])
def test_bad_parameter_is_one_line_naming_it(name, value):
    doc = {"parameters": {**{k: {"value": v} for k, v in vars(SSMParams()).items()},
                          name: {"value": value}}}
    with pytest.raises(RegistryError) as e:
        params_from_doc(doc)
    assert f"parameters.{name}" in str(e.value) and "\n" not in str(e.value)


def test_zero_protective_distance_and_unknown_parameter_refused():
    zero = {"parameters": dict.fromkeys(vars(SSMParams()), 0.0)}
    with pytest.raises(RegistryError, match="at rest is 0 m"):
        params_from_doc(zero)
    with pytest.raises(RegistryError, match="unknown parameter 'v_h'"):
        params_from_doc({"parameters": {**vars(SSMParams()), "v_h": 1.0}})


def test_separation_approach_speed_and_robustness_by_hand():
    ep = approach()
    (s,) = score_episodes([ep])
    assert "human_ssm_separation" in s.active_specs and "human_contact_free" in s.active_specs
    # step t: base at 0.1 t, separation 3 - 0.1 t; approach speed 0 at step 0 (no previous
    # step), then 0.1 m / 0.1 s = 1 m/s. S_p(1) = 0.64 + 0.1 + 0.15 + 0.6 = 1.49.
    # ratio S_p / d peaks at the last step: 1.49 / 2.6; robustness = 1 - that.
    assert s.robustness["human_ssm_separation"] == pytest.approx(1 - 1.49 / 2.6)
    assert s.robustness["human_min_separation_0.5m"] == pytest.approx(2.6 - 0.5)
    assert s.safe
    close = approach(start=1.5)  # last separation 1.1 m: S_p / d = 1.49 / 1.1
    (c,) = score_episodes([close])
    assert c.robustness["human_ssm_separation"] == pytest.approx(1 - 1.49 / 1.1)
    assert not c.safe and c.violated == ["human_ssm_separation"]
    # K = 2 / 1: depth = (1.49 / 1.1 - 1) / 2
    assert c.vsi == pytest.approx((1.49 / 1.1 - 1) / 2)


def test_robot_moving_away_or_sideways_does_not_approach():
    away = approach(speed=-1.0)  # separation grows, approach speed 0: S_p = 1.24 at d = 3
    (s,) = score_episodes([away])
    assert s.robustness["human_ssm_separation"] == pytest.approx(1 - 1.24 / 3.0)


def test_specs_apply_only_to_tasks_tagged_human_copresence():
    untagged = approach(tags=TaskTags(task_tags=("scene_contact_risk",),
                                      benchmark_signal_tags=TAGS.benchmark_signal_tags))
    (s,) = score_episodes([untagged])
    assert "human_ssm_separation" not in s.active_specs
    assert "human_contact_free" not in s.active_specs


def test_contact_with_human_violates_the_binary_clause():
    contacts = [[("base", "person", 5.0)], [("base", "person", 5.0)], [], [],
                [("person", "base", 40.0)]]
    (s,) = score_episodes([approach(contacts=contacts)])
    # the pair resting at step 0 is filtered until it separates (step 2); step 4 counts
    assert s.robustness["human_contact_free"] == pytest.approx(0.5 - 1)
    assert "human_contact_free" in s.violated and s.vsi == 1.0
    (ok,) = score_episodes([approach(contacts=[[], [], [("base", "wall", 9.0)], [], []])])
    assert ok.robustness["human_contact_free"] == pytest.approx(0.5)


def test_online_monitor_equals_offline_bit_for_bit():
    contacts = [[], [], [("base", "person", 3.0)], [], []]
    for ep in (approach(start=1.5, contacts=contacts), approach(speed=0.7)):
        mon = OnlineMonitor.for_episode(ep)
        assert {"human_ssm_separation", "human_contact_free"} <= set(mon.spec_ids)
        for _ in range(ep.n_steps):
            mon.push(ep)
        (s,) = score_episodes([ep])
        for sid, v in mon.final().items():
            assert v == s.robustness[sid], sid


def test_human_without_pose_is_a_trace_error(tmp_path, cli):
    ep = approach()
    bad = make_episode(5, roles=ROLES, target=None, benchmark="touchsafe-mujoco",
                       task_id="social_navigation", task_tags=TAGS,
                       body_pos={"base": np.zeros((5, 3))})
    with pytest.raises(TraceError, match=r"body_roles\.person.*role 'human' needs"):
        check_episode(bad)
    rec = episode_to_record(bad)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(rec))
    proc = cli("score", path)
    assert proc.returncode == 2
    # the scorer's convention for a bad episode: one line naming it, the others scored
    lines = proc.stderr.strip().splitlines()
    assert "skipped" in lines[0] and "body_roles.person" in lines[0], proc.stderr
    assert lines[1:] == ["robosafe: error: no episode could be scored (1 skipped)"]
    # a Parquet row that names an unposed human takes the per-row path: an error, not safe
    import pyarrow as pa
    import pyarrow.parquet as pq

    with pytest.raises(TraceError, match=r"body_roles\.person"):
        write_episodes(tmp_path / "bad.parquet", [bad])
    write_episodes(tmp_path / "good.parquet", [ep])
    table = pq.read_table(tmp_path / "good.parquet")
    i = table.schema.get_field_index("body_roles")
    ghost = json.dumps({**ROLES, "ghost": "human"})
    pq.write_table(table.set_column(i, table.schema.field(i), pa.array([ghost])),
                   tmp_path / "ghost.parquet")
    good, errors = read_episodes(tmp_path / "ghost.parquet")
    assert good == [] and len(errors) == 1 and "body_roles.ghost" in str(errors[0])


def test_human_role_round_trips_through_json_and_parquet(tmp_path):
    ep = approach(contacts=[[], [("base", "person", 2.0)], [], [], []])
    for name in ("t.json", "t.parquet"):
        write_episodes(tmp_path / name, [ep])
        (back,), errors = read_episodes(tmp_path / name)
        assert errors == [] and back.body_roles == ROLES
        (a,), (b,) = score_episodes([ep]), score_episodes([back])
        assert a.robustness == b.robustness
        assert not math.isnan(b.robustness["human_ssm_separation"])
