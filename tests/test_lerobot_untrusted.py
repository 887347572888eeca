"""A LeRobot dataset from somewhere else never makes robosafe read or write outside its folder,
never prints a traceback and never gives a silently wrong count (DESIGN.md, Contracts:
untrusted inputs). Every hostile dataset is made here from a valid small one."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import run_robosafe as run
from factories import make_episode, two_episodes, write_libero_style, write_robosafe

from robosafe.errors import RobosafeError
from robosafe.formats.lerobot import Dataset, DatasetError
from robosafe.formats.traces import REPLAY_COLUMN, read_traces

DATA = "data/chunk-000/file-000.parquet"
EPISODES = "meta/episodes/chunk-000/file-000.parquet"
RECORDS = "meta/robosafe_episodes.parquet"  # robosafe's per-episode records


def set_info(root: Path, **fields) -> None:
    info = json.loads((root / "meta/info.json").read_text())
    info.update(fields)
    (root / "meta/info.json").write_text(json.dumps(info))


def edit_table(path: Path, name: str, values: pa.Array | None = None) -> None:
    """Replace (or, with ``values`` None, drop) one column of a Parquet file."""
    t = pq.read_table(path)
    i = t.column_names.index(name)
    pq.write_table(t.remove_column(i) if values is None else t.set_column(i, name, values), path)


def set_list_value(path: Path, name: str, flat_index: int, value: float) -> None:
    col = pq.read_table(path).column(name).combine_chunks()
    flat = col.flatten().to_numpy(zero_copy_only=False).copy()
    flat[flat_index] = value
    edit_table(path, name, pa.FixedSizeListArray.from_arrays(pa.array(flat), col.type.list_size))


@pytest.fixture
def own(tmp_path) -> Path:
    """robosafe's own dataset of two episodes that score (exit 0) as they are."""
    write_robosafe(tmp_path / "ds", two_episodes())
    return tmp_path / "ds"


def errors(proc) -> list[str]:
    return [ln for ln in proc.stderr.splitlines()
            if ln.startswith(("robosafe: skipped:", "robosafe: error:"))]


# ---------------------------------------------------------------- paths stay inside the root

@pytest.mark.slow
@pytest.mark.parametrize("where", ["relative", "absolute"])
def test_data_path_outside_the_dataset_is_refused_by_every_command(own, tmp_path, where):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.copy(own / DATA, outside / "x.parquet")  # a valid copy: reading it would score
    rel = "../elsewhere/x.parquet" if where == "relative" else str(outside / "x.parquet")
    set_info(own, data_path=rel)
    line = f"{own}: meta/info.json: data_path (chunk 0, file 0): {rel!r} leaves the dataset"
    proc = run("score", str(own), "--json", "--bootstrap", "0")
    assert proc.returncode == 2 and proc.stdout == ""  # before: exit 0, the copy scored
    assert errors(proc)[0].startswith(f"robosafe: skipped: {line}")
    proc = run("import", "lerobot", str(own), "--out", str(tmp_path / "t.jsonl"))
    assert proc.returncode == 2 and errors(proc) == [(f"robosafe: error: {line} folder "
                                                     "(absolute or '..')")]
    assert not (tmp_path / "t.jsonl").exists()


def test_a_data_file_symlinked_outside_is_refused(own, tmp_path):
    outside = tmp_path / "elsewhere.parquet"
    (own / DATA).rename(outside)
    (own / DATA).symlink_to(outside)
    proc = run("import", "lerobot", str(own), "--out", str(tmp_path / "t.jsonl"))
    assert proc.returncode == 2  # before: 2 traces written from the file outside
    assert errors(proc) == [(f"robosafe: error: {own / DATA}: meta/info.json: data_path "
                            f"(chunk 0, file 0): a symlink leads outside {own}")]


def test_a_symlink_inside_the_dataset_is_followed(own):
    (own / "store").mkdir()
    (own / DATA).rename(own / "store/d.parquet")
    (own / DATA).symlink_to(own / "store/d.parquet")
    assert len(read_traces(Dataset(own)).episodes) == 2


@pytest.mark.parametrize("rel", ["meta/info.json", "meta/tasks.parquet", EPISODES,
                                 "meta/robosafe.json"])
def test_metadata_files_symlinked_outside_are_refused(own, tmp_path, rel):
    outside = tmp_path / "copy"
    shutil.copy(own / rel, outside)
    (own / rel).unlink()
    (own / rel).symlink_to(outside)
    with pytest.raises(DatasetError, match="a symlink leads outside"):
        Dataset(own)


def test_video_path_outside_the_dataset_is_refused(own):
    info = json.loads((own / "meta/info.json").read_text())
    info["features"]["observation.images.top"] = {"dtype": "video", "shape": [8, 8, 3],
                                                  "names": None}
    info["video_path"] = "../{video_key}.mp4"
    (own / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(DatasetError, match=r"video_path \(chunk 0, file 0\): "
                                           r"'../observation.images.top.mp4' leaves"):
        Dataset(own)


def test_inside_rejects_escapes_and_keeps_plain_paths(tmp_path):
    from robosafe.textio import inside

    assert inside(tmp_path, "a/b.parquet", "f") == tmp_path / "a/b.parquet"
    for rel in ("../x", "a/../../x", "/etc/passwd", "", 5, None, "a\0b"):
        with pytest.raises(RobosafeError, match="f: "):
            inside(tmp_path, rel, "f")


# ---------------------------------------------------------------- templates

def test_templates_are_filled_only_with_known_bounded_fields():
    from robosafe.textio import fill_template

    vals = {"chunk_index": 7, "file_index": 12, "video_key": "cam"}
    assert fill_template("data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet", "f",
                         vals) == "data/chunk-007/file-012.parquet"
    assert fill_template("v/{video_key}/{chunk_index}-{file_index:012d}", "f", vals) == \
        "v/cam/7-000000000012"
    for bad, why in (("{chunk_index:999999999d}", "width <= 12"),
                     ("{chunk_index:013d}", "width <= 12"),
                     ("{chunk_index:,}", "width <= 12"),
                     ("{chunk_index.real}", "unknown field"), ("{0}", "unknown field"),
                     ("{}", "unknown field"), ("{chunk_index!r}", "unknown field"),
                     ("{video_key:>9}", "takes no format spec"),
                     ("{chunk_index", "not a path template"), (5, "expected a path template")):
        with pytest.raises(RobosafeError, match=why):
            fill_template(bad, "f", vals)


def test_huge_template_width_is_one_line_in_bounded_memory(own, tmp_path):
    set_info(own, data_path="data/chunk-{chunk_index:999999999d}/file-{file_index:03d}.parquet")
    proc = run("import", "lerobot", str(own), "--out", str(tmp_path / "t.jsonl"))
    assert proc.returncode == 2  # before: a 1 GB string per episode (out of memory)
    assert "is not an integer format of width <= 12" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------- malformed structure

DEEP = "[" * 200_000 + "]" * 200_000


@pytest.mark.parametrize("text,message", [
    (None, "meta/info.json: not valid JSON (not UTF-8 text)"),  # random bytes
    ("[1, 2]", "meta/info.json: expected a JSON object"),
    (DEEP, "meta/info.json: invalid JSON: nested too deeply"),
])
def test_info_json_that_is_not_an_object_is_one_error(own, text, message):
    path = own / "meta/info.json"
    if text is None:
        path.write_bytes(np.random.default_rng(0).integers(128, 256, 300, np.uint8).tobytes())
    else:
        path.write_text(text)
    with pytest.raises(DatasetError) as err:
        Dataset(own)
    assert str(err.value) == f"{own}/{message}"


@pytest.mark.parametrize("fields,message", [
    ({"features": [1]}, "features must be an object of name -> feature"),
    ({"features": {"a": {"dtype": "float32", "shape": "3"}}}, "features.a.shape: expected"),
    ({"features": {"a": 1}}, "features.a: expected an object with a dtype"),
    ({"data_path": 5}, "data_path: expected a path template string, got 5"),
    ({"fps": 0}, "fps must be a positive number, got 0"),
    ({"fps": "x"}, "fps must be a positive number, got 'x'"),
    ({"fps": True}, "fps must be a positive number, got True"),
    ({"fps": float("nan")}, "fps must be a positive number, got nan"),
])
def test_info_fields_of_the_wrong_type_are_one_error(own, fields, message):
    set_info(own, **fields)
    with pytest.raises(DatasetError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Dataset(own)


def test_sidecar_that_is_not_json_is_one_error(own):
    (own / "meta/robosafe.json").write_text("nope{")
    with pytest.raises(DatasetError, match=r"meta/robosafe.json: line 1: not valid JSON"):
        Dataset(own)


def test_null_negative_or_missing_episode_fields_are_one_error(own):
    path = own / EPISODES
    original = pq.read_table(path)
    for values, message in (([None, 1], ("row 0: episode_index: expected an integer >= 0, "
                                        "got None")),
                            ([0, -1], ("row 1: episode_index: expected an integer >= 0, "
                                      "got -1"))):
        edit_table(path, "episode_index", pa.array(values, pa.int64()))
        with pytest.raises(DatasetError, match=message):
            Dataset(own)
        pq.write_table(original, path)
    edit_table(path, "length", pa.array([0, 4]))
    with pytest.raises(DatasetError, match="row 0: length: expected an integer >= 1, got 0"):
        Dataset(own)
    pq.write_table(original, path)
    edit_table(path, "data/file_index")
    with pytest.raises(DatasetError, match="missing column 'data/file_index'"):
        Dataset(own)


def test_task_index_out_of_range_skips_the_episode(tmp_path):
    root = tmp_path / "lib"
    write_libero_style(root, success=[True, False])
    t = pq.read_table(root / DATA)
    task = t.column("task_index").to_numpy().copy()
    task[t.column("episode_index").to_numpy() == 1] = -1  # a Python index would wrap around
    edit_table(root / DATA, "task_index", pa.array(task))
    imp = read_traces(Dataset(root))
    assert [e.meta["episode_index"] for e in imp.episodes] == [0]
    assert [str(e) for e in imp.errors] == [
        f"{root}: episode 1: task_index -1 is not a row of meta/tasks.parquet (1 tasks)"]


def test_tasks_table_numbering_is_checked(own):
    pq.write_table(pa.table({"task_index": [3], "task": ["x"]}), own / "meta/tasks.parquet")
    with pytest.raises(DatasetError, match="task_index must number the 1 task strings"):
        Dataset(own)


def test_null_frame_indices_skip_the_episode(own):
    t = pq.read_table(own / DATA)
    frame = t.column("frame_index").to_pylist()
    frame[0] = None
    edit_table(own / DATA, "frame_index", pa.array(frame, pa.int64()))
    imp = read_traces(Dataset(own))
    assert imp.episodes == [] and len(imp.errors) == 2
    assert "column 'frame_index' must be integers without nulls" in str(imp.errors[0])


@pytest.mark.slow
def test_nan_in_a_foreign_state_is_a_skipped_episode_and_valid_json(tmp_path):
    root = tmp_path / "lib"
    write_libero_style(root, success=[True, False])
    set_list_value(root / DATA, "observation.state", 8 * 12 + 1, float("nan"))  # episode 1
    proc = run("score", str(root), "--json", "--bootstrap", "0")
    assert proc.returncode == 2
    assert errors(proc)[0] == (f"robosafe: skipped: {root}: episode 1: episode "
                               "'lib/episode_000001': steps[0].eef_pos_m: value NaN is not "
                               "finite")
    out = json.loads(proc.stdout)  # before: "Out of range float values" traceback
    assert [e["episode_id"] for e in out["episodes"]] == ["lib/episode_000000"]


@pytest.mark.slow
def test_an_absurd_contact_force_is_a_skipped_episode_and_valid_json(own):
    # episode a, step 1, link7|table (the 9th of 10 pairs), a contact
    set_list_value(own / DATA, "safety.contact_force_n", 10 + 8, 1e308)
    proc = run("score", str(own), "--json")  # with the bootstrap, which summed to inf - inf
    assert proc.returncode == 2
    assert errors(proc)[0] == (f"robosafe: skipped: {own}: episode 0: episode 'a': "
                               "steps[1].contacts[0].force_n: 1e+308 N is implausible "
                               "(> 1e+12)")
    assert [e["episode_id"] for e in json.loads(proc.stdout)["episodes"]] == ["b"]


# ---------------------------------------------------------------- counts

@pytest.mark.slow
def test_an_episode_listed_twice_is_refused_the_same_way_by_every_command(own, tmp_path):
    t = pq.read_table(own / EPISODES)
    pq.write_table(pa.concat_tables([t, t]), own / EPISODES)
    line = (f"{own / EPISODES}: row 2: episode 0 is listed twice in meta/episodes (also "
            f"{own / EPISODES}: row 0); a dataset lists each episode once")
    proc = run("score", str(own), "--json", "--bootstrap", "0")
    assert proc.returncode == 2 and errors(proc)[0] == f"robosafe: skipped: {line}"  # before: n=4
    proc = run("import", "lerobot", str(own), "--out", str(tmp_path / "t.jsonl"))
    assert proc.returncode == 2 and errors(proc) == [f"robosafe: error: {line}"]


@pytest.mark.slow
def test_success_contradicting_next_success_is_unknown_and_said(tmp_path):
    a, b = two_episodes()  # both succeed in their trace headers
    write_robosafe(tmp_path / "ds", [a, b], next_success=[True, False])
    proc = run("score", str(tmp_path / "ds"), "--json", "--bootstrap", "0")
    assert proc.returncode == 0, proc.stderr
    notes = [ln for ln in proc.stderr.splitlines() if "next.success" in ln]
    assert notes == [(f"robosafe: {tmp_path / 'ds'}: episode 1 (b): robosafe/trace says success "
                     "True, the next.success frames say False; success is unknown for it "
                     "(left out of SR)")]
    out = json.loads(proc.stdout)
    assert [e["success"] for e in out["episodes"]] == [True, None]
    agg = out["aggregate"]
    assert agg["sr"] == 1.0 and agg["n_success_unknown"] == 1  # 1 of 1 known, not 1 of 2
    # both are safe (50 N is under every force limit): b, of unknown success, leaves the 2x2
    assert agg["safety"] == 1.0 and agg["n_scored"] == 2
    assert agg["table"] == {"success_safe": 1, "success_unsafe": 0, "failure_safe": 0,
                            "failure_unsafe": 0}


@pytest.mark.slow
def test_import_says_n_of_m_and_exits_2_when_an_episode_is_skipped(own, tmp_path):
    t = pq.read_table(own / RECORDS)
    heads = t.column("robosafe/trace").to_pylist()
    heads[1] = "{"
    edit_table(own / RECORDS, "robosafe/trace", pa.array(heads))
    out = tmp_path / "t.jsonl"
    proc = run("import", "lerobot", str(own), "--out", str(out), "--json")
    assert proc.returncode == 2  # before: exit 0 with 1 of 2 written
    assert errors(proc) == [(f"robosafe: skipped: {own}: episode 1: robosafe/trace: line 1: "
                            "not valid JSON (Expecting property name enclosed in double "
                            "quotes)")]
    summary = json.loads(proc.stdout)
    assert (summary["episodes"], summary["total"], summary["skipped"]) == (1, 2, 1)
    assert [json.loads(ln)["episode_id"] for ln in out.read_text().splitlines()] == ["a"]
    proc = run("import", "lerobot", str(own), "--out", str(out))
    assert proc.stdout.strip() == f"1 of 2 traces written to {out}"


def test_import_of_short_data_keeps_the_complete_episode(own, tmp_path):
    t = pq.read_table(own / DATA)
    pq.write_table(t.slice(0, t.num_rows - 2), own / DATA)  # episode b loses 2 of 4 frames
    proc = run("import", "lerobot", str(own), "--out", str(tmp_path / "t.jsonl"))
    assert proc.returncode == 2
    assert errors(proc) == [(f"robosafe: skipped: {own / DATA}: episode 1 has 2 frames, "
                            "meta/episodes says 4")]
    assert proc.stdout.strip() == f"1 of 2 traces written to {tmp_path / 't.jsonl'}"


def test_import_of_no_readable_episode_writes_nothing(own, tmp_path):
    edit_table(own / RECORDS, "robosafe/trace", pa.array(["[", "["]))
    proc = run("import", "lerobot", str(own), "--out", str(tmp_path / "t.jsonl"))
    assert proc.returncode == 2 and not (tmp_path / "t.jsonl").exists()
    assert errors(proc)[-1] == (f"robosafe: error: {own}: none of the 2 episodes could be "
                                "read; no traces written")


@pytest.mark.slow
def test_foreign_dataset_without_success_has_unknown_sr_not_zero(tmp_path):
    root = tmp_path / "lib"
    write_libero_style(root)
    proc = run("score", str(root), "--json", "--bootstrap", "0")
    out = json.loads(proc.stdout)
    assert [e["success"] for e in out["episodes"]] == [None, None]
    assert out["aggregate"]["sr"] is None and out["aggregate"]["sr_ci"] is None
    assert out["aggregate"]["n_success_unknown"] == 2 and out["aggregate"]["sbu"] is None
    # wide enough that no cell wraps (tables follow COLUMNS when it is set)
    table = run("score", root, "--bootstrap", "0", "--table", "main",
                env={**os.environ, "COLUMNS": "400"}).stdout
    assert "n/a (2 unknown)" in table and "0.0 [" not in table
    # the unknown survives into the traces written from the dataset
    trace = tmp_path / "t.jsonl"
    assert run("import", "lerobot", str(root), "--out", str(trace)).returncode == 0
    assert [json.loads(ln)["success"] for ln in trace.read_text().splitlines()] == [None, None]


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])  # columnar and record paths
def test_known_and_unknown_success_in_one_cell(tmp_path, suffix):
    """SR over the known labels only: 1 success of 2 known, the third episode unknown."""
    from robosafe.trace.io import write_episodes

    eps = [make_episode(4, episode_id=f"e{k}", success=s, contacts=[[]] * 4)
           for k, s in enumerate([True, False, None])]
    write_episodes(tmp_path / f"t{suffix}", eps)
    agg = json.loads(run("score", str(tmp_path / f"t{suffix}"), "--json", "--bootstrap",
                         "0").stdout)["aggregate"]
    assert (agg["n"], agg["sr"], agg["n_success_unknown"]) == (3, 0.5, 1)
    assert agg["table"] == {"success_safe": 1, "success_unsafe": 0, "failure_safe": 1,
                            "failure_unsafe": 0}


# ---------------------------------------------------------------- replay metadata

def replay_dataset_with_task_id(root: Path, task_id: str) -> None:
    a, b = two_episodes()
    cell = json.dumps({"task_id": task_id, "seed": 0, "language_level": 0, "visual_level": 0})
    write_robosafe(root, [a, b], extra=[{REPLAY_COLUMN: cell}] * 2,
                   sidecar={"tasks": {task_id: "(define (problem x))"}})


@pytest.mark.parametrize("kind", ["absolute", "relative"])
def test_replay_never_writes_a_task_file_where_the_dataset_says(tmp_path, kind):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    # enough '..' to climb from any temporary directory to /, then down to ``outside``
    task_id = str(outside / "NAME") if kind == "absolute" else \
        "../" * 64 + str(outside / "NAME").lstrip("/")
    replay_dataset_with_task_id(tmp_path / "ds", task_id)
    before = sorted(p for p in tmp_path.rglob("*"))
    proc = run("import", "lerobot", str(tmp_path / "ds"), "--replay", "--out",
               str(tmp_path / "o.jsonl"))
    assert proc.returncode == 2
    assert not (outside / "NAME.bddl").exists()  # before: written there, then exit 2
    assert sorted(p for p in tmp_path.rglob("*")) == before
    assert "robosafe: skipped:" in proc.stderr and "tasks[" in proc.stderr


def test_replay_cell_of_the_wrong_type_skips_the_episode(tmp_path):
    root = tmp_path / "ds"
    a, b = two_episodes()
    cells = [{REPLAY_COLUMN: json.dumps({"task_id": 5})}, {REPLAY_COLUMN: "[[["}]
    write_robosafe(root, [a, b], extra=cells, sidecar={"tasks": {}})
    from robosafe.runner.replay import replay_dataset

    res = replay_dataset(root)
    assert res.episodes == [] and res.total == 2
    assert [str(e) for e in res.errors] == [
        f"{root}: episode 0: robosafe/replay: task_id: expected str, got 5",
        f"{root}: episode 1: robosafe/replay: line 1: not valid JSON (Expecting value)"]


def test_dataset_error_lives_in_errors_and_stays_importable_from_the_reader():
    from robosafe import errors as E

    assert DatasetError is E.DatasetError and issubclass(DatasetError, RobosafeError)

