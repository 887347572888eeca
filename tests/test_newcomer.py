"""A newcomer's first commands: progress on stderr when it is not a terminal, the demo saying
it reuses an earlier run (or --fresh), default outputs ignored by git, and help that does not
label flags as taking a value."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_robosafe as run
from factories import make_run

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.sim
def test_run_shows_progress_on_stderr_without_a_terminal(tmp_path):
    out = tmp_path / "r"
    proc = run("run", "--suite", "demo", "--task-id", "turn_off_stove", "--policy", "zero",
               "-n", "2", "--horizon", "5", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("robosafe: zero: 2 episode(s) to run, 1 worker(s)")
    assert lines[1].startswith("robosafe: zero: 1/2 episodes, success 0/1, ")
    assert lines[2].startswith("robosafe: zero: 2/2 episodes, success 0/2, ")
    # --json keeps stderr quiet for scripts
    again = run("run", "--suite", "demo", "--task-id", "turn_off_stove", "--policy", "zero",
                "-n", "1", "--horizon", "5", "--out", str(tmp_path / "j"), "--json")
    assert again.returncode == 0 and again.stderr == ""


def test_demo_says_it_reuses_an_earlier_run(tmp_path, capsys):
    from robosafe.cli.run import _reuse

    rd = make_run(tmp_path / "scripted-careful")
    assert _reuse(rd.path, fresh=False) is True
    err = capsys.readouterr().err
    # 4 finished of 5 cells: the crashed one is not done (a resume runs it again)
    assert f"reusing the earlier run in {rd.path} (4 episode(s) done); --fresh" in err
    assert _reuse(tmp_path / "none", fresh=False) is False


def test_demo_fresh_removes_only_a_run_directory(tmp_path):
    from robosafe.cli.run import _reuse
    from robosafe.errors import RobosafeError

    rd = make_run(tmp_path / "scripted-careful")
    assert _reuse(rd.path, fresh=True) is False and not rd.path.exists()
    fake = tmp_path / "precious"
    fake.mkdir()
    (fake / "run.json").write_text('{"format": "something else"}')
    with pytest.raises(RobosafeError, match="format"):
        _reuse(fake, fresh=True)
    assert (fake / "run.json").exists()


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="needs the git checkout")
@pytest.mark.parametrize("path", ["robosafe-demo/scripted-careful/run.json", "robosafe.duckdb",
                                  "report.html"])
def test_default_outputs_are_ignored_by_git(path):
    proc = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT,
                          check=False)
    assert proc.returncode == 0, f"{path} is not in .gitignore"


@pytest.mark.parametrize("args", [(), ("demo",), ("run",), ("score",)])
def test_help_does_not_label_flags_as_values(args):
    proc = run(*args, "--help", env={"COLUMNS": "120", "PATH": "", **_pythonpath()})
    assert proc.returncode == 0, proc.stderr
    assert "--help" in proc.stdout and "<bool>" not in proc.stdout
    assert "--json" in proc.stdout or not args


def _pythonpath() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "HOME")}
