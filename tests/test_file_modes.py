"""Files robosafe writes get the same permissions: 0666 less the umask, as open() gives the
traces (mkstemp's 0600 made run.json and outcomes.csv private), and `tasks fmt --write` keeps
the mode the task file had."""

from __future__ import annotations

import os
import stat

import pytest
from conftest import run_robosafe as run
from factories import make_run


def _mode(p) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_run_directory_files_share_one_mode(tmp_path, umask_022):
    rd = make_run(tmp_path / "r")
    csv = rd.write_outcomes_csv()
    trace = rd.trace_paths()[0]
    assert _mode(trace) == 0o644
    assert _mode(rd.path / "run.json") == 0o644
    assert _mode(csv) == 0o644
    assert {_mode(p) for p in (rd.path / "outcomes").iterdir()} == {0o644}
    assert not list(rd.path.glob(".*.tmp"))  # no temporary left behind


def test_umask_is_honoured(tmp_path):
    old = os.umask(0o077)
    try:
        rd = make_run(tmp_path / "r")
        assert _mode(rd.path / "run.json") == _mode(rd.trace_paths()[0]) == 0o600
    finally:
        os.umask(old)


def test_outcomes_csv_bytes_unchanged(tmp_path):
    rd = make_run(tmp_path / "r")
    text = rd.write_outcomes_csv().read_bytes()
    assert text.startswith(b"suite,task_id,") and text.count(b"\r\n") == 6  # header + 5 rows


def test_tasks_fmt_write_keeps_the_file_mode(tmp_path):
    from factories import TASK_EXAMPLES

    path = tmp_path / "t.bddl"
    path.write_text(TASK_EXAMPLES[0].read_text() + "\n\n")
    os.chmod(path, 0o640)
    # the example's comments go (fmt rebuilds the file from the parsed task): said and allowed
    proc = run("tasks", "fmt", str(path), "--write", "--drop-comments")
    assert proc.returncode == 0, proc.stderr
    assert _mode(path) == 0o640
