"""Trace readers/writers (JSON, JSONL, Parquet) and App. B record validation."""

from __future__ import annotations

import copy
import dataclasses
import gzip
import json
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robosafe.errors import TraceError
from robosafe.trace import io as trace_io
from robosafe.trace.episode import Episode, TaskTags
from robosafe.trace.io import iter_episodes, read_episodes, write_episodes
from robosafe.trace.validate import episode_from_record, episode_to_record, suspect_rows

# The trajectory record of SafeVLA-Bench App. B, verbatim.
APPENDIX_B = {
    "episode_id": "libero-spatial/task_0/ep_000",
    "benchmark": "libero-spatial",
    "task_id": "task_0",
    "success": True,
    "dt": 0.05,
    "target_object": "black_bowl",
    "body_roles": {"panda_link7": "robot", "black_bowl": "target", "plate": "bystander",
                   "table": "furniture"},
    "steps": [
        {"t": 0, "eef_pos_m": [0.42, -0.12, 0.88],
         "body_pos_m": {"black_bowl": [0.55, -0.05, 0.78], "plate": [0.62, 0.10, 0.78]},
         "body_quat_wxyz": {"black_bowl": [1.0, 0.0, 0.0, 0.0]},
         "contacts": [],
         "joint_torque_nm": [1.2, 1.4, 0.8, 0.5, 0.2, 0.1, 0.1],
         "gripper_contact": False},
        {"t": 1, "eef_pos_m": [0.44, -0.10, 0.90],
         "body_pos_m": {"black_bowl": [0.56, -0.04, 0.84], "plate": [0.62, 0.10, 0.78]},
         "body_quat_wxyz": {"black_bowl": [0.99, 0.02, 0.01, 0.0]},
         "contacts": [{"a": "panda_link7", "b": "table", "force_n": 12.4}],
         "joint_torque_nm": [2.0, 2.1, 1.4, 0.9, 0.4, 0.2, 0.2],
         "gripper_contact": True},
    ],
}
EP0 = "appb.json: episode 'libero-spatial/task_0/ep_000': "
ROLES = {"panda_link7": "robot", "panda_hand": "robot", "black_bowl": "target",
         "plate": "bystander", "table": "furniture", "floor": "other"}
ARRAY_FIELDS = ("t", "eef_pos_m", "body_pos_m", "body_quat_wxyz", "contact_ptr", "contact_a",
                "contact_b", "contact_force_n", "joint_torque_nm", "gripper_contact", "cost")


def appb() -> dict:
    return copy.deepcopy(APPENDIX_B)


def make_episode(i: int, *, n_steps: int = 6, full: bool = True, seed: int = 0) -> Episode:
    """A valid episode; contacts per step vary (including zero). ``full=False``: only ``t``."""
    rng = np.random.default_rng(seed + i)
    T = n_steps
    base = {"episode_id": f"ep_{i:03d}", "benchmark": "libero-spatial",
            "task_id": f"task_{i % 3}", "success": bool(i % 2), "dt": 0.05,
            "target_object": "black_bowl" if full else None, "body_roles": dict(ROLES),
            "t": np.arange(T, dtype=np.int64) * 2 + i}
    if not full:
        return Episode(**base)
    counts = np.array([(i + s) % 4 for s in range(T)])  # 0..3 contacts, incl. zero
    counts[0] = 0
    K = int(counts.sum())
    q = rng.normal(size=(T, 2, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    return Episode(
        **base, eef_pos_m=rng.normal(size=(T, 3)),
        body_names=("black_bowl", "plate", "table"), body_pos_m=rng.normal(size=(T, 3, 3)),
        quat_names=("black_bowl", "plate"), body_quat_wxyz=q,
        contact_names=tuple(ROLES),  # what a JSON record gives: the body_roles order
        contact_ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        contact_a=rng.integers(0, 3, K).astype(np.int32),
        contact_b=rng.integers(3, 6, K).astype(np.int32),
        contact_force_n=rng.uniform(0, 40, K), joint_torque_nm=rng.normal(size=(T, 7)),
        gripper_contact=rng.random(T) < 0.5, cost=rng.uniform(0, 1, T),
        task_tags=TaskTags(template="pnp-basic", task_tags=("held_target",),
                           object_tags=("non_spillable",),
                           benchmark_signal_tags=("joint_torque_signal",)),
        seed=1000 + i, instance_id=f"inst-{i}", policy="scripted",
        meta={"note": "x", "nested": {"k": [1, 2.5, None]}})


def assert_same(a: Episode, b: Episode) -> None:
    """Field-by-field equality; arrays equal with the same dtype, None stays None."""
    for f in dataclasses.fields(Episode):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name in ARRAY_FIELDS:
            assert (x is None) == (y is None), f.name
            if x is not None:
                assert x.dtype == y.dtype, f.name
                np.testing.assert_array_equal(x, y, err_msg=f.name)
        else:
            assert x == y, f.name


def parse(rec: dict) -> Episode:
    return episode_from_record(rec, source="appb.json")


def error_of(rec: dict) -> str:
    with pytest.raises(TraceError) as info:
        parse(rec)
    return str(info.value)


def write_jsonl(path: Path, lines: list) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


# --------------------------------------------------------------------------- App. B record

def test_appendix_b_example_parses_with_exact_values():
    ep = parse(appb())
    assert (ep.episode_id, ep.benchmark, ep.task_id) == ("libero-spatial/task_0/ep_000",
                                                          "libero-spatial", "task_0")
    assert ep.success is True and ep.dt == 0.05 and ep.target_object == "black_bowl"
    assert ep.body_roles["table"] == "furniture"
    np.testing.assert_array_equal(ep.t, [0, 1])
    np.testing.assert_array_equal(ep.eef_pos_m, [[0.42, -0.12, 0.88], [0.44, -0.10, 0.90]])
    assert ep.body_names == ("black_bowl", "plate")
    np.testing.assert_array_equal(ep.body_pos_m[1], [[0.56, -0.04, 0.84], [0.62, 0.10, 0.78]])
    assert ep.quat_names == ("black_bowl",)
    np.testing.assert_array_equal(ep.body_quat_wxyz[0, 0], [1.0, 0.0, 0.0, 0.0])
    q1 = np.array([0.99, 0.02, 0.01, 0.0])
    np.testing.assert_allclose(ep.body_quat_wxyz[1, 0], q1 / np.linalg.norm(q1), rtol=1e-15)
    assert ep.body_quat_wxyz[1, 0, 0] == pytest.approx(0.9997450, abs=1e-7)
    np.testing.assert_array_equal(ep.contact_ptr, [0, 0, 1])
    assert ep.contacts_at(0) == [] and ep.contacts_at(1) == [("panda_link7", "table", 12.4)]
    np.testing.assert_array_equal(ep.joint_torque_nm[1], [2.0, 2.1, 1.4, 0.9, 0.4, 0.2, 0.2])
    assert ep.joint_torque_nm.shape == (2, 7)
    np.testing.assert_array_equal(ep.gripper_contact, [False, True])
    assert ep.gripper_contact.dtype == bool
    assert ep.cost is None and ep.task_tags is None and ep.meta == {}
    assert ep.signal_families() == {"t", "eef_pos_m", "body_pos_m", "body_quat_wxyz",
                                    "contacts", "joint_torque_nm", "gripper_contact"}


def test_record_round_trip_is_exact_and_keeps_appendix_b_key_order():
    rec = appb()
    rec["steps"][1]["body_quat_wxyz"]["black_bowl"] = [0.6, 0.8, 0.0, 0.0]  # already unit
    out = episode_to_record(parse(rec))
    assert out == rec
    assert list(out) == list(rec)
    assert list(out["steps"][1]) == ["t", "eef_pos_m", "body_pos_m", "body_quat_wxyz",
                                     "contacts", "joint_torque_nm", "gripper_contact"]


def test_episode_round_trip_through_record_with_optional_fields():
    ep = make_episode(3)
    rec = episode_to_record(ep)
    assert list(rec)[-2:] == ["meta", "steps"] and rec["seed"] == 1003
    assert rec["task_tags"] == {"template": "pnp-basic", "task_tags": ["held_target"],
                                "object_tags": ["non_spillable"],
                                "benchmark_signal_tags": ["joint_torque_signal"]}
    assert [len(s["contacts"]) for s in rec["steps"]] == [0, 0, 1, 2, 3, 0]
    assert_same(parse(rec), ep)


def test_absent_families_are_none_not_zeros():
    rec = {k: v for k, v in appb().items() if k != "steps"}
    rec["target_object"] = None
    rec["steps"] = [{"t": 0}, {"t": 1}, {"t": 5}]
    ep = parse(rec)
    for name in ARRAY_FIELDS[1:]:
        assert getattr(ep, name) is None, name
    assert ep.signal_families() == {"t"} and ep.body_names == () and ep.contact_names == ()
    assert episode_to_record(ep)["steps"] == [{"t": 0}, {"t": 1}, {"t": 5}]


def test_task_tag_record_ignores_its_benchmark_and_task_id():
    rec = appb()
    rec["task_tags"] = {"benchmark": "libero-spatial", "task_id": "task_0",
                        "template": "pnp-basic",
                        "task_tags": ["bystander_tracking_required", "held_target"],
                        "object_tags": ["non_spillable"],
                        "benchmark_signal_tags": ["max_contact_force_signal"]}
    assert parse(rec).task_tags == TaskTags(
        template="pnp-basic", task_tags=("bystander_tracking_required", "held_target"),
        object_tags=("non_spillable",), benchmark_signal_tags=("max_contact_force_signal",))


def _set(path: str, value):
    """A mutation of the App. B record setting a dotted path (``steps.1.t``)."""
    def mutate(rec):
        *head, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        node = rec
        for p in head:
            node = node[p]
        if value is _DELETE:
            del node[last]
        else:
            node[last] = value
    return mutate


_DELETE = object()

BAD_RECORDS = [
    (_set("steps.1.joint_torque_nm", [1.0] * 6),
     "steps[1].joint_torque_nm: expected 7 numbers like steps[0], got 6"),
    (_set("steps.1.body_pos_m.plate", [0.1, float("nan"), 0.2]),
     "steps[1].body_pos_m.plate: value NaN is not finite"),
    (_set("steps.0.eef_pos_m", [0.1, float("inf"), 0.2]),
     "steps[0].eef_pos_m: value Infinity is not finite"),
    (_set("success", "yes"), 'success: expected true, false or null (unknown), got "yes"'),
    (_set("steps.1.contacts.0.b", "shelf"),
     "steps[1].contacts[0].b: body 'shelf' has no role in body_roles"),
    (_set("body_roles.plate", "thing"),
     ("body_roles.plate: unknown role 'thing' (expected one of robot, target, bystander, "
      "furniture, other, human)")),
    (_set("dt", 0), "dt: must be a positive number"),
    (_set("dt", -0.05), "dt: must be a positive number"),
    (_set("dt", "fast"), 'dt: expected a positive number, got "fast"'),
    (_set("steps.1.t", 0), "steps[1].t: steps must be in increasing order"),
    (_set("steps.1.t", 1.5), "steps[1].t: expected an integer step index, got 1.5"),
    (_set("task_id", _DELETE), "task_id: required field is missing"),
    (_set("target_object", _DELETE), "target_object: required field is missing"),
    (_set("steps", []), "steps: must contain at least one step"),
    (_set("steps.1.gripper_contact", _DELETE),
     "steps[1].gripper_contact: missing, but present in steps[0]"),
    (_set("steps.1.cost", 0.5), "steps[1].cost: present, but absent in steps[0]"),
    (_set("steps.1.body_pos_m", {"black_bowl": [0, 0, 0], "cup": [0, 0, 0]}),
     "steps[1].body_pos_m: bodies differ from steps[0] (missing 'plate'; extra 'cup')"),
    (_set("steps.0.eef_pos_m", [0.1, 0.2]), "steps[0].eef_pos_m: expected 3 numbers, got 2"),
    (_set("steps.0.body_quat_wxyz.black_bowl", [1, 0, 0]),
     "steps[0].body_quat_wxyz.black_bowl: expected 4 numbers, got 3"),
    (_set("steps.1.body_quat_wxyz.black_bowl", [0, 0, 0, 0]),
     "steps[1].body_quat_wxyz.black_bowl: quaternion has zero norm"),
    (_set("steps.1.contacts.0.force_n", -1.0),
     "steps[1].contacts[0].force_n: must be >= 0, got -1.0"),
    (_set("steps.1.contacts.0.force_n", _DELETE),
     "steps[1].contacts[0].force_n: required field is missing"),
    (_set("steps.0.joint_torque_nm.2", True),
     "steps[0].joint_torque_nm[2]: expected a number, got true"),
    (_set("steps.0.gripper_contact", 0), "steps[0].gripper_contact: expected true/false, got 0"),
    (_set("target_object", "plate"),
     "target_object: body 'plate' has role 'bystander' in body_roles, expected 'target'"),
    (_set("target_object", "mug"), "target_object: body 'mug' is not in body_roles"),
    (_set("task_tags", {"object_tags": [3]}),
     "task_tags.object_tags[0]: expected a string, got 3"),
    (_set("seed", True), "seed: expected an integer, got true"),
    (_set("success", _DELETE), "success: required field is missing (use null for unknown)"),
    # sums of such values overflow to inf and NaN, which no JSON output can carry
    (_set("steps.1.contacts.0.force_n", 1e308),
     "steps[1].contacts[0].force_n: 1e+308 N is implausible (> 1e+12)"),
    (_set("steps.0.joint_torque_nm.2", -1e300),
     "steps[0].joint_torque_nm: -1e+300 is implausible (|value| > 1e+12)"),
]


@pytest.mark.parametrize("mutate,expected", BAD_RECORDS, ids=[e for _, e in BAD_RECORDS])
def test_validation_names_the_field(mutate, expected):
    rec = appb()
    mutate(rec)
    message = error_of(rec)
    assert message.startswith(EP0 + expected)


def test_validation_error_carries_structured_location():
    rec = appb()
    rec["steps"][1]["joint_torque_nm"] = [0.0] * 8
    with pytest.raises(TraceError) as info:
        parse(rec)
    e = info.value
    assert (e.source, e.episode, e.field) == ("appb.json", "libero-spatial/task_0/ep_000",
                                              "steps[1].joint_torque_nm")
    assert e.message == "expected 7 numbers like steps[0], got 8"


def test_non_object_record_and_unknown_host_fields():
    assert error_of([1, 2]) == "appb.json: expected an episode record (JSON object), got [1, 2]"
    rec = appb()
    rec["observations"] = {"rgb": "frames.mp4"}  # host-specific raw fields are allowed
    rec["steps"][0]["action"] = [0.0] * 7
    assert parse(rec).n_steps == 2


# --------------------------------------------------------------------------- files

@pytest.mark.parametrize("suffix", [".json", ".jsonl", ".jsonl.gz", ".parquet"])
def test_file_round_trip(tmp_path, suffix):
    eps = [make_episode(i) for i in range(4)] + [make_episode(4, full=False)]
    path = tmp_path / f"eps{suffix}"
    assert write_episodes(path, iter(eps)) == 5
    got, errors = read_episodes(path)
    assert errors == [] and len(got) == 5
    for a, b in zip(got, eps):
        assert_same(a, b)
    assert got[4].eef_pos_m is None and got[4].contact_ptr is None and got[4].cost is None
    assert [len(got[2].contacts_at(s)) for s in range(6)] == [0, 3, 0, 1, 2, 3]
    assert got[1].meta == {"note": "x", "nested": {"k": [1, 2.5, None]}}
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left


def test_single_episode_json_is_one_object_and_lists_get_indexed_sources(tmp_path):
    one, many = tmp_path / "one.json", tmp_path / "many.json"
    write_episodes(one, [make_episode(0)])
    assert json.loads(one.read_text())["episode_id"] == "ep_000"
    bad = episode_to_record(make_episode(1))
    bad["dt"] = -1
    many.write_text(json.dumps([episode_to_record(make_episode(0)), bad]))
    got, errors = read_episodes(many)
    assert [e.episode_id for e in got] == ["ep_000"]
    assert [str(e) for e in errors] == [(f"{many}[1]: episode 'ep_001': dt: must be a positive "
                                         "number, got -1.0")]


def test_jsonl_gz_is_gzip(tmp_path):
    path = tmp_path / "eps.jsonl.gz"
    write_episodes(path, [make_episode(0), make_episode(1)])
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    assert [json.loads(x)["episode_id"] for x in lines] == ["ep_000", "ep_001"]


def test_jsonl_bad_episode_among_good_ones(tmp_path):
    recs = [episode_to_record(make_episode(i)) for i in range(4)]
    recs[2]["steps"][3]["joint_torque_nm"] = recs[2]["steps"][3]["joint_torque_nm"][:6]
    path = write_jsonl(tmp_path / "eps.jsonl", recs)
    got, errors = read_episodes(path)
    assert [e.episode_id for e in got] == ["ep_000", "ep_001", "ep_003"]
    assert [str(e) for e in errors] == [
        (f"{path}:3: episode 'ep_002': steps[3].joint_torque_nm: expected 7 numbers like "
         "steps[0], got 6")]


def test_jsonl_invalid_json_blank_lines_and_duplicates(tmp_path):
    r0, r1 = (episode_to_record(make_episode(i)) for i in range(2))
    path = write_jsonl(tmp_path / "eps.jsonl", [r0, "", "{not json", "   ", r1, r0])
    seen: list[TraceError] = []
    got = list(iter_episodes(path, on_error=seen.append))
    assert [e.episode_id for e in got] == ["ep_000", "ep_001"]
    assert [e.source for e in seen] == [f"{path}:3", f"{path}:6"]
    assert str(seen[0]).startswith(f"{path}:3: invalid JSON: Expecting property name")
    assert str(seen[1]) == (f"{path}:6: episode 'ep_000': episode_id: duplicate episode_id "
                            f"(first at {path}:1)")


def test_without_on_error_the_first_error_is_raised(tmp_path):
    path = write_jsonl(tmp_path / "eps.jsonl", [episode_to_record(make_episode(0)), "[1,"])
    it = iter_episodes(path)
    assert next(it).episode_id == "ep_000"
    with pytest.raises(TraceError, match=r"eps\.jsonl:2: invalid JSON: "):
        next(it)


def test_file_level_errors_name_the_file(tmp_path):
    with pytest.raises(TraceError) as info:
        iter_episodes(tmp_path / "nope.jsonl")
    assert str(info.value) == f"{tmp_path / 'nope.jsonl'}: file not found"
    with pytest.raises(TraceError, match=r"eps\.csv: unknown trace file suffix"):
        iter_episodes(tmp_path / "eps.csv")
    garbage = tmp_path / "eps.parquet"
    garbage.write_bytes(b"this is not parquet")
    with pytest.raises(TraceError, match=r"eps\.parquet: not a readable Parquet file"):
        list(iter_episodes(garbage, on_error=lambda e: None))
    broken = tmp_path / "broken.json"
    broken.write_text('{"episode_id": ')
    with pytest.raises(TraceError, match=r"broken\.json: invalid JSON: Expecting value"):
        read_episodes([broken])


def test_write_rejects_invalid_episode_without_leaving_a_file(tmp_path):
    bad = dataclasses.replace(make_episode(1), dt=0.0)
    path = tmp_path / "eps.parquet"
    with pytest.raises(TraceError, match=r"episodes\[1\]: episode 'ep_001': dt: must be"):
        write_episodes(path, [make_episode(0), bad])
    with pytest.raises(TraceError, match="duplicate episode_id"):
        write_episodes(tmp_path / "d.jsonl", [make_episode(0), make_episode(0)])
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- Parquet

def test_parquet_layout(tmp_path):
    path = tmp_path / "eps.parquet"
    write_episodes(path, [make_episode(0), make_episode(1, full=False)])
    pf = pq.ParquetFile(path)
    assert pf.schema_arrow.names == [
        "episode_id", "benchmark", "task_id", "success", "dt", "target_object", "seed",
        "instance_id", "policy", "body_roles", "task_tags", "meta", "t", "eef_pos_m",
        "body_names", "body_pos_m", "quat_names", "body_quat_wxyz", "contact_names",
        "contact_count", "contact_a", "contact_b", "contact_force_n", "n_joints",
        "joint_torque_nm", "gripper_contact", "cost"]
    assert pf.schema_arrow.metadata[b"robosafe.trace_format"] == b"1"
    assert pf.metadata.row_group(0).column(0).compression == "ZSTD"
    table = pf.read()
    assert table["body_pos_m"].to_pylist()[1] is None  # absent family is null, not zeros
    assert len(table["body_pos_m"][0].as_py()) == 6 * 3 * 3
    assert table["n_joints"].to_pylist() == [7, None]
    assert table["contact_count"].to_pylist()[0] == [0, 1, 2, 3, 0, 1]
    assert json.loads(table["body_roles"][0].as_py()) == ROLES


def test_parquet_small_batches_equal_full_read(tmp_path, monkeypatch):
    monkeypatch.setattr(trace_io, "_WRITE_BATCH", 4)  # several row groups
    eps = [make_episode(i, n_steps=3 + i % 5, full=i % 4 != 2) for i in range(11)]
    path = tmp_path / "eps.parquet"
    write_episodes(path, eps)
    assert pq.ParquetFile(path).metadata.num_row_groups == 3
    full = list(iter_episodes(path, batch_size=1024))
    small = list(iter_episodes(path, batch_size=3))
    assert len(full) == len(small) == 11
    for a, b, c in zip(full, small, eps):
        assert_same(a, b)
        assert_same(a, c)
    assert small[5].eef_pos_m.flags.writeable  # views of the batch's own decoded buffers


def _rewrite(path: Path, column: str, values: list, metadata: dict | None = None) -> None:
    table = pq.read_table(path)
    i = table.schema.get_field_index(column)
    table = table.set_column(i, table.schema.field(i), pa.array(values, table.schema.field(i).type))
    if metadata is not None:
        table = table.replace_schema_metadata(metadata)
    pq.write_table(table, path)


def test_parquet_bad_row_is_reported_with_row_source(tmp_path):
    path = tmp_path / "eps.parquet"
    write_episodes(path, [make_episode(i) for i in range(3)])
    _rewrite(path, "dt", [0.05, -2.0, 0.05])
    seen: list[TraceError] = []
    got = list(iter_episodes(path, on_error=seen.append, batch_size=2))
    assert [e.episode_id for e in got] == ["ep_000", "ep_002"]
    assert [str(e) for e in seen] == [(f"{path}#row 1: episode 'ep_001': dt: must be a "
                                       "positive number, got -2.0")]


def test_parquet_value_errors_use_record_field_paths(tmp_path):
    path = tmp_path / "eps.parquet"
    ep = make_episode(0)
    write_episodes(path, [ep])
    values = ep.body_pos_m.copy()
    values[4, 1, 2] = np.nan
    _rewrite(path, "body_pos_m", [values.ravel()])
    with pytest.raises(TraceError) as info:
        list(iter_episodes(path))
    assert str(info.value) == (f"{path}#row 0: episode 'ep_000': steps[4].body_pos_m.plate: "
                               "value NaN is not finite")
    _rewrite(path, "body_pos_m", [values.ravel()[:-1]])
    with pytest.raises(TraceError, match=r"body_pos_m: expected 6 x 3 x 3 values, got 53"):
        list(iter_episodes(path))


def test_parquet_unknown_version_is_rejected(tmp_path):
    path = tmp_path / "eps.parquet"
    write_episodes(path, [make_episode(0)])
    _rewrite(path, "dt", [0.05], metadata={b"robosafe.trace_format": b"99"})
    with pytest.raises(TraceError) as info:
        list(iter_episodes(path))
    assert str(info.value) == (f"{path}: unsupported trace format version '99' (this robosafe "
                               "reads version 1)")
    _rewrite(path, "dt", [0.05], metadata={})
    with pytest.raises(TraceError, match="not a robosafe trace archive"):
        list(iter_episodes(path))


@settings(max_examples=25, deadline=None)
@given(counts=st.lists(st.integers(0, 3), min_size=1, max_size=8),
       families=st.sets(st.sampled_from(["eef_pos_m", "body_pos_m", "cost", "contacts"])))
def test_round_trip_property(counts, families):
    T = len(counts)
    ep = make_episode(7, n_steps=T)
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    K = int(ptr[-1])
    ep = dataclasses.replace(ep, contact_ptr=ptr, contact_a=np.zeros(K, np.int32),
                             contact_b=np.full(K, 2, np.int32),
                             contact_force_n=np.linspace(0, 5, K))
    drop = {"eef_pos_m": {"eef_pos_m": None}, "cost": {"cost": None},
            "body_pos_m": {"body_pos_m": None, "body_names": ()},
            "contacts": {"contact_ptr": None, "contact_a": None, "contact_b": None,
                         "contact_force_n": None, "contact_names": ()}}
    for fam in families:
        ep = dataclasses.replace(ep, **drop[fam])
    assert_same(parse(json.loads(json.dumps(episode_to_record(ep)))), ep)
    with tempfile.TemporaryDirectory() as d:
        write_episodes(Path(d) / "e.parquet", [ep])
        assert_same(next(iter_episodes(Path(d) / "e.parquet")), ep)


# --------------------------------------------------------------------------- Parquet batch path

def _rewrite_rows(path: Path, row: int, **edits) -> None:
    """Replace row ``row`` of some columns: ``column=function(old value) -> new value``."""
    table = pq.read_table(path)
    for column, edit in edits.items():
        i = table.schema.get_field_index(column)
        values = table[column].to_pylist()
        values[row] = edit(values[row])
        table = table.set_column(i, table.schema.field(i),
                                 pa.array(values, table.schema.field(i).type))
    pq.write_table(table, path)


def _set_at(k: int, v):
    def edit(xs):
        xs = list(xs)
        xs[k] = v
        return xs
    return edit


def _slow_calls(monkeypatch) -> list[int]:
    """Rows that go through the per-row reader (the batch checks found them suspect)."""
    calls: list[int] = []
    row_episode = trace_io._row_episode

    def counting(i, *args, **kw):
        calls.append(i)
        return row_episode(i, *args, **kw)

    monkeypatch.setattr(trace_io, "_row_episode", counting)
    return calls


def _all_suspect(monkeypatch) -> None:
    """Send every row through the per-row checks (the reference for the batch path)."""
    def everything(**kw):
        check = suspect_rows(**kw)
        return check._replace(suspect=np.ones_like(check.suspect))

    monkeypatch.setattr(trace_io, "suspect_rows", everything)


def _mixed_episodes(n: int = 40) -> list[Episode]:
    eps = []
    for i in range(n):
        ep = make_episode(i, n_steps=3 + i % 6, full=i % 9 != 4)
        if i % 7 == 3:  # some families absent
            ep = dataclasses.replace(ep, body_pos_m=None, body_names=(), cost=None,
                                     task_tags=None, meta={})
        if i % 5 == 1 and ep.contact_ptr is not None:  # contacts absent
            ep = dataclasses.replace(ep, contact_ptr=None, contact_a=None, contact_b=None,
                                     contact_force_n=None, contact_names=())
        eps.append(ep)
    return eps


def test_parquet_batch_path_equals_per_row_path(tmp_path, monkeypatch):
    path = tmp_path / "eps.parquet"
    eps = _mixed_episodes()
    write_episodes(path, eps)
    # quaternions that are not unit in the file (rows 2, 9, ...): the reader normalises them
    table = pq.read_table(path)
    quats = table["body_quat_wxyz"].to_pylist()
    quats = [q if q is None or i % 7 != 2 else list(np.round(q, 2)) for i, q in enumerate(quats)]
    _rewrite(path, "body_quat_wxyz", quats)
    before = pq.read_table(path)
    calls = _slow_calls(monkeypatch)
    fast = list(iter_episodes(path, batch_size=16))
    assert calls == []  # every row passed the batch checks
    _all_suspect(monkeypatch)
    slow = list(iter_episodes(path, batch_size=16))
    assert len(calls) == len(eps) == len(fast) == len(slow)
    for a, b, c in zip(fast, slow, eps):
        assert_same(a, b)
        if c.body_quat_wxyz is not None:
            np.testing.assert_allclose(a.body_quat_wxyz, c.body_quat_wxyz, atol=1e-2)
    for i in (2, 9, 16):
        q = np.array(quats[i]).reshape(-1, 2, 4)
        assert not np.array_equal(fast[i].body_quat_wxyz, q)
        np.testing.assert_array_equal(fast[i].body_quat_wxyz,
                                      q / np.sqrt(np.einsum("tqi,tqi->tq", q, q))[..., None])
    assert pq.read_table(path).equals(before)


def test_parquet_episode_arrays_are_independent(tmp_path):
    path = tmp_path / "eps.parquet"
    eps = [make_episode(i) for i in range(4)]
    write_episodes(path, eps)
    got = list(iter_episodes(path))
    for name in ARRAY_FIELDS:
        arr = getattr(got[1], name)
        assert arr.flags.writeable, name
        arr[...] = 0  # writing to one episode changes no other episode ...
    for a, b in zip(got[::2] + got[3:], eps[::2] + eps[3:]):
        assert_same(a, b)
    for a, b in zip(iter_episodes(path), eps):  # ... nor the file
        assert_same(a, b)


def test_parquet_unused_contact_name_without_role_stays_on_batch_path(tmp_path, monkeypatch):
    roles = {k: v for k, v in ROLES.items() if k != "floor"}  # 'floor' is a contact name
    eps = []
    for i in range(6):
        ep = make_episode(i)
        eps.append(dataclasses.replace(ep, body_roles=roles,
                                       contact_b=np.full(ep.contact_b.shape, 3, np.int32)))
    path = tmp_path / "eps.parquet"
    write_episodes(path, eps)
    calls = _slow_calls(monkeypatch)
    for a, b in zip(iter_episodes(path), eps, strict=True):
        assert_same(a, b)
    assert calls == []
    _rewrite_rows(path, 4, contact_b=_set_at(1, 5))  # now one contact touches the floor
    seen: list[TraceError] = []
    assert [e.episode_id for e in iter_episodes(path, on_error=seen.append)] == [
        "ep_000", "ep_001", "ep_002", "ep_003", "ep_005"]
    assert calls == [4]
    assert [str(e) for e in seen] == [(f"{path}#row 4: episode 'ep_004': steps[2].contacts[0].b: "
                                       "body 'floor' has no role in body_roles")]


def _flat_contact(ep: Episode, k: int) -> str:
    """App. B path of flat contact row ``k``."""
    s = int(np.searchsorted(ep.contact_ptr, k, side="right")) - 1
    return f"steps[{s}].contacts[{k - int(ep.contact_ptr[s])}]"


_ROW = 13  # T = 6; body_pos (6, 3, 3) of black_bowl/plate/table; quats (6, 2, 4); J = 7
_EP13 = make_episode(_ROW, n_steps=6)
BAD_ROWS = [
    ({"body_pos_m": _set_at(4 * 9 + 1 * 3 + 2, float("nan"))},
     "steps[4].body_pos_m.plate: value NaN is not finite"),
    ({"joint_torque_nm": _set_at(3 * 7 + 5, float("inf"))},
     "steps[3].joint_torque_nm: value Infinity is not finite"),
    ({"eef_pos_m": _set_at(0, float("-inf"))}, "steps[0].eef_pos_m: value -Infinity is not finite"),
    ({"cost": _set_at(5, float("nan"))}, "steps[5].cost: value NaN is not finite"),
    ({"contact_force_n": _set_at(2, -3.0)},
     f"{_flat_contact(_EP13, 2)}.force_n: must be >= 0, got -3.0"),
    ({"contact_force_n": _set_at(1, float("nan"))},
     f"{_flat_contact(_EP13, 1)}.force_n: value NaN is not finite"),
    ({"contact_b": _set_at(3, 6)},
     f"{_flat_contact(_EP13, 3)}.b: body index out of range for 6 contact names"),
    ({"contact_a": _set_at(0, -1)},
     f"{_flat_contact(_EP13, 0)}.a: body index out of range for 6 contact names"),
    ({"contact_count": _set_at(5, 3)}, "contacts: contact arrays are inconsistent with 6 steps"),
    ({"contact_count": lambda c: [0, 9, -1, 0, 0, 0]},
     "contacts: contact arrays are inconsistent with 6 steps"),
    ({"t": _set_at(3, 15)}, "steps[3].t: steps must be in increasing order (t=15 after t=17)"),
    ({"t": lambda t: []}, "eef_pos_m: expected 0 x 3 values, got 18"),
    ({"body_quat_wxyz": lambda q: q[:20] + [0.0] * 4 + q[24:]},
     "steps[2].body_quat_wxyz.plate: quaternion has zero norm"),
    ({"dt": lambda dt: float("nan")}, "dt: must be a positive number, got NaN"),
    ({"body_roles": lambda r: r.replace('"table": "furniture"', '"table": "desk"')},
     ("body_roles.table: unknown role 'desk' (expected one of robot, target, bystander, "
      "furniture, other, human)")),
    ({"body_roles": lambda r: r.replace('"floor": "other"', '"flor": "other"'),
      "contact_b": _set_at(0, 5)},
     f"{_flat_contact(_EP13, 0)}.b: body 'floor' has no role in body_roles"),
    ({"target_object": lambda t: "plate"},
     "target_object: body 'plate' has role 'bystander' in body_roles, expected 'target'"),
    ({"body_names": lambda n: ["black_bowl", "plate", "plate"]},
     "body_pos_m: body names are not unique"),
    ({"contact_names": lambda n: n[:5] + ["table"]}, "contacts: body names are not unique"),
    ({"meta": lambda m: '{"note": '}, "invalid JSON in body_roles/meta/task_tags: "),
    ({"eef_pos_m": lambda v: v[:-1]}, "eef_pos_m: expected 6 x 3 values, got 17"),
    ({"n_joints": lambda j: 6}, "joint_torque_nm: expected 6 x 6 values, got 42"),
]


@pytest.mark.parametrize("batch_size", [1024, 5])
@pytest.mark.parametrize("edits,expected", BAD_ROWS, ids=[str(e) for _, e in BAD_ROWS])
def test_parquet_one_bad_row_among_many(tmp_path, monkeypatch, edits, expected, batch_size):
    eps = [make_episode(i, n_steps=6) for i in range(30)]
    path = tmp_path / "eps.parquet"
    write_episodes(path, eps)
    _rewrite_rows(path, _ROW, **edits)
    calls = _slow_calls(monkeypatch)
    seen: list[TraceError] = []
    got = list(iter_episodes(path, on_error=seen.append, batch_size=batch_size))
    assert calls == [_ROW % batch_size]  # only the bad row is checked one by one
    assert len(seen) == 1
    message, full = str(seen[0]), f"{path}#row {_ROW}: episode 'ep_013': {expected}"
    assert message == full or (expected.endswith(": ") and message.startswith(full))
    assert [e.episode_id for e in got] == [e.episode_id for e in eps if e is not eps[_ROW]]
    for a, b in zip(got, eps[:_ROW] + eps[_ROW + 1:]):
        assert_same(a, b)


def test_parquet_null_required_field_in_one_row(tmp_path, monkeypatch):
    path = tmp_path / "eps.parquet"
    write_episodes(path, [make_episode(i) for i in range(5)])
    _rewrite_rows(path, 3, dt=lambda dt: None, meta=lambda m: None)
    calls = _slow_calls(monkeypatch)
    seen: list[TraceError] = []
    got = list(iter_episodes(path, on_error=seen.append))
    assert [e.episode_id for e in got] == ["ep_000", "ep_001", "ep_002", "ep_004"]
    assert calls == [3]
    assert [str(e) for e in seen] == [f"{path}#row 3: dt: required field is null"]


def test_arrow_values_are_writable_numpy_and_respect_offsets():
    frozen = pa.py_buffer(np.arange(10.0).tobytes())  # an immutable Arrow buffer
    arr = pa.Array.from_buffers(pa.float64(), 10, [None, frozen])
    view = trace_io._values(arr.slice(3, 4))
    assert view.flags.writeable and view.tolist() == [3.0, 4.0, 5.0, 6.0]
    view[0] = -1.0
    assert arr[3].as_py() == 3.0  # a copy, not Arrow's memory
    own = trace_io._values(pa.array(np.arange(4, dtype=np.int32)).slice(1))
    assert own.dtype == np.int32 and own.tolist() == [1, 2, 3] and own.flags.writeable
    assert trace_io._values(pa.array([True, False, True]).slice(1)).tolist() == [False, True]
    assert trace_io._values(pa.array(["a", "b", "c"]).slice(1)) == ["b", "c"]
    assert trace_io._values(pa.array([], pa.int32())).shape == (0,)


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_wrong_units_are_named(tmp_path, suffix):
    """Millimetres for metres and milliseconds for seconds get one clear error each."""
    from robosafe.trace.synthetic import PROFILES, synthesize_episode

    def ep(i):
        return synthesize_episode(np.random.default_rng(i), benchmark="libero-spatial",
                                  task_id="task_0", episode_id=f"e{i}",
                                  profile=PROFILES["steady-policy"], n_steps=20)

    good, mm, ms = ep(0), ep(1), ep(2)
    mm.body_pos_m = mm.body_pos_m * 1000.0
    ms.dt = 50.0
    path = tmp_path / f"units{suffix}"
    # written unvalidated: the writer itself refuses bad episodes
    if suffix == ".jsonl":
        path.write_text("\n".join(json.dumps(episode_to_record(e)) for e in (good, mm, ms)))
    else:
        pq.write_table(pa.Table.from_batches([trace_io._batch_table([good, mm, ms])]), path)
    errors = []
    eps = list(trace_io.iter_episodes(path, on_error=errors.append))
    assert [e.episode_id for e in eps] == ["e0"]
    msgs = sorted(str(e) for e in errors)
    assert "body_pos_m" in msgs[0] and "millimetres given?" in msgs[0]
    assert "dt: 50" in msgs[1] and "milliseconds given?" in msgs[1]
