"""Inputs are not outputs, and secrets stay secret: an output inside an input is refused
before anything is read, a symlinked task file is rewritten through its link, and the
credentials of a URL are masked in every line whatever the case of its scheme."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

from conftest import run_robosafe as cli

from robosafe.redact import RedactRecords, redact_url

EXAMPLES = Path(__file__).resolve().parents[1] / "src/robosafe/tasks/examples"
TASK = EXAMPLES / "libero_pick_place.bddl"


def _one_line(proc, message: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [f"robosafe: error: {message}"]


def test_an_output_inside_the_dataset_it_reads_is_refused(tmp_path):
    ds = tmp_path / "DS"
    (ds / "meta").mkdir(parents=True)
    (ds / "meta" / "info.json").write_text('{"codebase_version": "v3.0"}')
    out = ds / "meta" / "info.json"
    _one_line(cli("import", "lerobot", ds, "--out", out),
              f"{out}: the output lies inside the dataset {ds}, which it would overwrite; "
              "write it elsewhere")
    assert out.read_text() == '{"codebase_version": "v3.0"}'
    # a path that reaches the same folder another way is the same folder
    (tmp_path / "link").symlink_to(ds)
    proc = cli("import", "lerobot", ds, "--out", tmp_path / "link" / "traces.jsonl")
    assert proc.returncode == 2 and "lies inside the dataset" in proc.stderr
    assert sorted(p.name for p in ds.rglob("*")) == ["info.json", "meta"]


def test_an_export_into_its_own_run_directory_and_a_run_into_its_task_folder_are_refused(
        tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    _one_line(cli("export", "lerobot", run, "--out", run / "ds"),
              f"{run / 'ds'}: the output lies inside the run directory {run}, which it would "
              "overwrite; write it elsewhere")
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "x.bddl").write_text(TASK.read_text())
    _one_line(cli("run", "-p", "zero", "--task-dir", tasks, "-o", tasks / "out"),
              f"{tasks / 'out'}: the output lies inside the --task-dir folder {tasks}, which "
              "it would overwrite; write it elsewhere")
    assert sorted(p.name for p in tasks.iterdir()) == ["x.bddl"]


def test_fmt_write_rewrites_a_symlinks_target_and_keeps_the_link(tmp_path):
    target = tmp_path / "real" / "task.bddl"
    target.parent.mkdir()
    # the example without its comments: --write would refuse to drop them
    body = "\n".join(line for line in TASK.read_text().splitlines()
                     if not line.lstrip().startswith(";"))
    target.write_text(body)
    link = tmp_path / "link.bddl"
    link.symlink_to(target)
    canonical = cli("tasks", "fmt", target).stdout
    proc = cli("tasks", "fmt", "--write", link)
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and link.resolve() == target
    assert target.read_text() == canonical
    assert sorted(p.name for p in target.parent.iterdir()) == ["task.bddl"]  # no temp left


def test_url_credentials_are_masked_whatever_the_case_of_the_scheme():
    assert redact_url("WS://alice:secret@h:1/x") == "WS://***@h:1/x"
    assert redact_url("Ray://user:secret@10.0.0.1:10001") == "Ray://***@10.0.0.1:10001"
    assert redact_url("HTTPS://h/v1?API_KEY=secret&n=1") == "HTTPS://h/v1?API_KEY=***&n=1"
    # a log record quoting a URL, as any module may word it, is masked once it passes
    record = logging.LogRecord("robosafe.x", logging.WARNING, __file__, 1,
                               "cannot reach %s", ("wss://bob:secret@h:2",), None)
    assert RedactRecords().filter(record)
    assert record.getMessage() == "cannot reach wss://***@h:2"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_secret_reaches_stderr_from_a_policy_or_ray_address(tmp_path):
    port = _closed_port()
    for args in (["--policy", f"WS://alice:secret@127.0.0.1:{port}"],
                 ["--policy", "zero", "--backend", "ray", "--ray-address",
                  f"RAY://user:secret@127.0.0.1:{port}"],
                 ["--policy", "zero", "--backend", "ray", "--ray-address",
                  f"user:secret@127.0.0.1:{port}"]):
        proc = cli("run", "-o", tmp_path / "r", "--suite", "demo", *args)
        assert proc.returncode == 2, proc.stderr
        assert "secret" not in proc.stderr and "***@" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "r").exists()


def test_an_endpoint_with_credentials_in_it_is_refused_masked():
    """urllib would not send a URL's user information, and its errors would quote it in the
    answer records; the key belongs in the API-key variable."""
    import pytest

    from robosafe.errors import RobosafeError
    from robosafe.grounding.client import chat_url

    with pytest.raises(RobosafeError) as err:
        chat_url("HTTPS://alice:secret@api.example/v1")
    assert str(err.value) == ("endpoint 'HTTPS://***@api.example/v1': credentials in the URL "
                              "are not sent; give the API key in $OPENAI_API_KEY (or "
                              "--api-key-env)")
    assert chat_url("HTTPS://api.example/v1/") == "HTTPS://api.example/v1/chat/completions"
