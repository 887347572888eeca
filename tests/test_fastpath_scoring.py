"""The columnar Parquet scoring path gives exactly the scores of the per-Episode path.

``score_files`` reads Parquet archives as columnar :class:`EpisodeBatch` runs (no Episode
objects) and validates them batch-wise; the reference is reading the same file as validated
``Episode`` objects (``iter_episodes``) and scoring those. Values must be identical, bad rows
reported the same way, and neither chunking nor worker count may change a value.
"""

import math
from importlib.resources import files

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from factories import make_episode

from robosafe.safety import signals as S
from robosafe.safety.score import Scorer, score_files
from robosafe.trace.io import iter_batches, iter_episodes, read_episodes, write_episodes
from robosafe.trace.synthetic import PROFILES, synthesize_episode

EXAMPLES = files("robosafe") / "examples"


def reference(path, chunk: int = 256):
    """Scores and error messages of the per-Episode path."""
    errors = []
    scores = list(Scorer().score(iter_episodes(path, on_error=errors.append),
                                 on_error=errors.append, chunk=chunk))
    return scores, errors


def fast(path, workers: int = 1):
    errors = []
    return list(score_files([path], workers=workers, on_error=errors.append)), errors


def test_bundled_parquet_example_scores_identically():
    path = EXAMPLES / "libero_synthetic.parquet"
    assert any(not isinstance(x, type(make_episode())) for x in iter_batches(path))
    ref, ref_err = reference(path)
    got, err = fast(path)
    assert not ref_err and not err and len(got) == 240
    assert got == ref  # dataclass equality: every field, every robustness value exactly


def test_bundled_jsonl_example_scores_identically_through_parquet(tmp_path):
    eps, errors = read_episodes(EXAMPLES / "robocasa_synthetic.jsonl")
    assert not errors
    path = tmp_path / "robocasa.parquet"
    write_episodes(path, eps)
    ref = list(Scorer().score(eps))
    got, err = fast(path)
    assert not err and got == ref


def _episodes(n: int = 48):
    eps = []
    for i in range(n):
        ep = synthesize_episode(np.random.default_rng(i), benchmark="libero-goal",
                                task_id=f"task_{i % 10}", episode_id=f"ep{i:03d}",
                                profile=PROFILES["fast-policy" if i % 2 else "steady-policy"],
                                n_steps=50 + 7 * (i % 5))
        eps.append(ep)
    # missing families: dependent specs inactive, never satisfied
    eps[7].joint_torque_nm = None
    eps[8].contact_ptr = eps[8].contact_a = eps[8].contact_b = eps[8].contact_force_n = None
    eps[9].gripper_contact = None
    eps[10].body_quat_wxyz, eps[10].quat_names = None, ()
    eps[11].eef_pos_m = None
    eps[12].benchmark, eps[12].task_id = "nowhere", "x"  # unknown task: reported at scoring
    eps[14].body_quat_wxyz = eps[14].body_quat_wxyz * 1.5  # not unit: normalised on read
    eps[15].joint_torque_nm = eps[15].joint_torque_nm[:, :6]  # 6 joints for a 7-joint Panda
    # a wider body table in one episode (heterogeneous widths within a batch)
    extra = eps[16].body_pos_m[:, -1:] + 0.3
    eps[16].body_pos_m = np.concatenate([eps[16].body_pos_m, extra], axis=1)
    eps[16].body_names = (*eps[16].body_names, "extra_cup")
    eps[16].body_roles = {**eps[16].body_roles, "extra_cup": "bystander"}
    eps[17].meta = {"embodiment": "nonexistent-arm", "episode_idx": 17}
    return eps


def _write_with_bad_values(path):
    """Archive of the episodes above, then values no writer accepts patched into the file."""
    write_episodes(path, _episodes())
    table = pq.read_table(path)
    cols = {name: table[name].to_pylist() for name in ("body_pos_m", "contact_force_n",
                                                       "contact_a", "t", "episode_id")}
    cols["episode_id"][13] = "ep003"  # duplicate id
    cols["body_pos_m"][5][7] = math.nan  # NaN position
    cols["contact_force_n"][20][3] = -1.0  # negative force
    cols["contact_a"][21][0] = 40  # contact body index outside the names
    cols["t"][22][4] = cols["t"][22][3]  # steps out of order
    for name, values in cols.items():
        i = table.schema.get_field_index(name)
        table = table.set_column(i, table.schema.field(i), pa.array(values, table[name].type))
    pq.write_table(table, path, row_group_size=16)  # several row groups and batches


@pytest.fixture()
def bad_archive(tmp_path):
    path = tmp_path / "mixed.parquet"
    _write_with_bad_values(path)
    return path


def by_id_of(scores):
    return {s.episode_id: s for s in scores}


def test_bad_rows_are_reported_and_the_rest_scored_identically(bad_archive):
    ref, ref_err = reference(bad_archive)
    got, err = fast(bad_archive)
    assert got == ref
    assert sorted(map(str, err)) == sorted(map(str, ref_err))
    located = {(e.episode, e.field) for e in err if hasattr(e, "field")}
    assert located == {("ep005", "steps[0].body_pos_m.bowl"), ("ep003", "episode_id"),
                       ("ep020", "steps[0].contacts[3].force_n"),
                       ("ep021", "steps[0].contacts[0].a"), ("ep022", "steps[4].t")}
    assert any("'nowhere'" in str(e) for e in err) and len(err) == 6
    ids = [s.episode_id for s in got]
    assert len(ids) == len(set(ids)) == 48 - 6
    # 6 torque columns for a 7-joint Panda: the torque spec is inactive, the episode scored
    assert "joint_torque" not in by_id_of(got)["ep015"].active_specs
    assert by_id_of(got)["ep015"].missing == {
        "joint_torque_nm": "6 joints recorded but the embodiment's torque limits list 7"}
    by_id = {s.episode_id: s for s in got}
    assert "joint_torque" not in by_id["ep007"].active_specs
    assert not any("force" in s for s in by_id["ep008"].active_specs)
    assert "joint_torque" not in by_id["ep017"].active_specs  # no limits for this arm


def test_workers_and_chunking_do_not_change_values(bad_archive):
    ref, ref_err = fast(bad_archive)
    got, err = fast(bad_archive, workers=2)
    assert got == ref and sorted(map(str, err)) == sorted(map(str, ref_err))
    one_by_one, _ = reference(bad_archive, chunk=1)
    assert one_by_one == ref


def _naive_contacts(ep):
    """Table 15 role projection with the static initial contact filter, step by step."""
    roles = [ep.body_roles.get(n) for n in ep.contact_names]
    T = ep.n_steps
    steps = [list(zip(ep.contact_a[ep.contact_ptr[t]:ep.contact_ptr[t + 1]],
                      ep.contact_b[ep.contact_ptr[t]:ep.contact_ptr[t + 1]],
                      ep.contact_force_n[ep.contact_ptr[t]:ep.contact_ptr[t + 1]]))
              for t in range(T)]
    pairs = [{frozenset((int(a), int(b))) for a, b, _ in s} for s in steps]
    out = {k: np.zeros(T) for k in ("max", "arm_furn", "tgt_furn", "self", "arm_furn_c")}
    for t, s in enumerate(steps):
        for a, b, f in s:
            pair = frozenset((int(a), int(b)))
            if all(pair in pairs[u] for u in range(t + 1)):  # resting since step 0
                continue
            r = {roles[a], roles[b]}
            out["max"][t] = max(out["max"][t], f)
            if r == {"robot", "furniture"}:
                out["arm_furn"][t] = max(out["arm_furn"][t], f)
                out["arm_furn_c"][t] = 1
            elif r == {"target", "furniture"}:
                out["tgt_furn"][t] = max(out["tgt_furn"][t], f)
            elif roles[a] == roles[b] == "robot":
                out["self"][t] += 1
    return out


def test_contact_kernel_matches_a_naive_loop():
    rng = np.random.default_rng(3)
    names = ["link7", "hand", "bowl", "plate", "table", "floor"]
    eps = []
    for i in range(12):
        contacts = [[tuple(rng.choice(names, 2, replace=False)) + (float(rng.uniform(0, 300)),)
                     for _ in range(rng.integers(0, 5))] for _ in range(int(rng.integers(1, 15)))]
        if i % 3 == 0 and len(contacts) > 2:  # a resting pair that separates and comes back
            contacts[0].append(("bowl", "table", 5.0))
            contacts[1].append(("table", "bowl", 6.0))
            contacts[-1].append(("bowl", "table", 7.0))
        eps.append(make_episode(len(contacts), contacts=contacts, episode_id=str(i),
                                roles={"link7": "robot", "hand": "robot", "bowl": "target",
                                       "plate": "bystander", "table": "furniture",
                                       "floor": "other"}))
    chunk = S.derive_chunk(eps, [None] * len(eps))
    for i, ep in enumerate(eps):
        want = _naive_contacts(ep)
        got = chunk.episode(i).values
        for key, name in (("max", "max_contact_force"), ("arm_furn", "arm_furniture_force"),
                          ("tgt_furn", "target_furniture_force"),
                          ("self", "self_collision_count"),
                          ("arm_furn_c", "arm_furniture_contact")):
            np.testing.assert_array_equal(got[name], want[key], err_msg=f"{i} {name}")


def test_kernels_reject_inconsistent_shapes():
    layout = S.Layout([3])
    with pytest.raises(ValueError):
        S.speed(np.zeros((2, 3)), np.ones(3), layout)
    with pytest.raises(ValueError):
        S.contact_signals(np.array([1, 0, 0]), np.array([0], np.int32), np.array([5], np.int32),
                          np.array([1.0]), np.zeros((1, 2), np.int8), layout)
