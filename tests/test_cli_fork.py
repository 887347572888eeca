"""tests/cli_fork.py: a forked `python -m robosafe` gives what a fresh interpreter gives.

Each case runs the same command both ways (forked from the preloaded parent, and as a plain
subprocess) and compares exit status, stdout and stderr, or the files it wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import cli_fork
import pytest

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "src/robosafe/tasks/suites/hazard_avoidance/L0/l0_lemon_plate_candle.bddl"

pytestmark = pytest.mark.skipif(not cli_fork.forked({**os.environ}),
                                reason="commands are not forked here (ROBOSAFE_TEST_NO_FORK)")


def _plain(args, cwd=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "robosafe", *args], capture_output=True,
                          text=True, cwd=cwd, env=env or {**os.environ}, check=False,
                          timeout=300)


def _forked(args, cwd=None, env=None) -> subprocess.CompletedProcess:
    return cli_fork.run(list(args), cwd, env or {**os.environ}, timeout=300)


@pytest.mark.parametrize("args", [
    ["stats", "wilson", "3", "10"],
    ["stats", "wilson", "3", "10", "--json"],
    ["scroe"],  # unknown command: one line, exit 2
    ["stats", "cutoffs", "--tasks", "3"],  # a missing option: exit 2
    ["score", "--help"],  # the usage line names `python -m robosafe`
])
def test_output_and_status_are_a_fresh_interpreters(args):
    a, b = _forked(args), _plain(args)
    assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)
    assert a.args == b.args


def test_environment_and_working_directory_are_the_commands(tmp_path):
    env = {**os.environ, "COLUMNS": "61"}  # the help text wraps at COLUMNS
    a, b = _forked(["stats", "--help"], env=env), _plain(["stats", "--help"], env=env)
    assert a.stdout == b.stdout and max(map(len, a.stdout.splitlines())) <= 61
    # a relative path is the command's working directory's
    for name, runner in (("forked", _forked), ("plain", _plain)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "t.bddl").write_text(TASK.read_text().replace("\n", "\n\n"))
        proc = runner(["tasks", "fmt", "--write", "--drop-comments", "t.bddl"], cwd=tmp_path / name)
        assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "forked" / "t.bddl").read_text() == \
        (tmp_path / "plain" / "t.bddl").read_text() != TASK.read_text().replace("\n", "\n\n")


def test_a_start_up_variable_that_differs_runs_a_plain_subprocess():
    assert cli_fork.forked({**os.environ})
    assert not cli_fork.forked({**os.environ, "PYTHONHASHSEED": "7"})
    other = "POSIX" if os.environ.get("LC_ALL") == "C" else "C"
    assert not cli_fork.forked({**os.environ, "LC_ALL": other})
    # MUJOCO_GL is read when robosafe.sim and MuJoCo are imported, which the command does itself
    assert cli_fork.forked({**os.environ, "MUJOCO_GL": "osmesa"})
    assert not any(m.split(".")[0] in ("robosafe", "mujoco", "robosuite", "torch")
                   for m in cli_fork.PRELOAD)


def test_timeout_kills_the_command(tmp_path):
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        cli_fork.run(["serve-policy", "scripted-careful", "--port", "0"], tmp_path,
                     {**os.environ}, timeout=3)
    assert time.monotonic() - start < 30


@pytest.mark.parametrize(("code", "status"), [(None, 0), (0, 0), (3, 3), (256 + 2, 2),
                                              ("a message", 1)])
def test_exit_status_is_the_interpreters(code, status):
    assert cli_fork._exit_status(code) == status
    if isinstance(code, str):  # the interpreter prints a non-integer code on stderr
        proc = subprocess.run([sys.executable, "-c", f"raise SystemExit({code!r})"],
                              capture_output=True, text=True, check=False)
        assert (proc.returncode, proc.stderr.strip()) == (status, code)
    else:
        proc = subprocess.run([sys.executable, "-c", f"raise SystemExit({code!r})"],
                              check=False)
        assert proc.returncode == status



def test_a_shell_commands_robosafe_is_the_console_scripts(tmp_path):
    """Through cli_fork.shell_env, `robosafe` in a shell command is forked, on the shell's own
    streams (here a redirection into a file), with the console script's name in its messages."""
    real = Path(sys.executable).parent / "robosafe"
    command = ("robosafe stats wilson 3 10 > out.txt; robosafe stats wilson 3 10 --json >> out.txt;"
               " command -v robosafe; robosafe scroe; echo status $?")
    base = {**os.environ, "PATH": f"{real.parent}{os.pathsep}{os.environ['PATH']}"}
    procs = {}
    for name, env in (("forked", cli_fork.shell_env(base)), ("plain", base)):
        (tmp_path / name).mkdir()
        procs[name] = subprocess.run(["bash", "-c", command], cwd=tmp_path / name, env=env,
                                     capture_output=True, text=True, check=False, timeout=300)
    a, b = procs["forked"], procs["plain"]
    assert a.stdout.splitlines()[0] != str(real)  # the forked one's robosafe is the stand-in
    assert b.stdout.splitlines()[0] == str(real)
    assert a.stdout.splitlines()[1:] == b.stdout.splitlines()[1:] == ["status 2"]
    assert a.stderr == b.stderr and "robosafe: error: No such command 'scroe'" in a.stderr
    assert "(see robosafe --help)" in a.stderr  # the console script's name, not python -m's
    assert (tmp_path / "forked" / "out.txt").read_text() == \
        (tmp_path / "plain" / "out.txt").read_text() != ""


LOOK = """
import json, os, sys, tempfile
import numpy as np
print(json.dumps({
    "argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(), "name": __name__,
    "tmp": tempfile.gettempdir(), "env": os.environ.get("LOOK_VAR"),
    "robosafe_imported": sorted(m for m in sys.modules if m.split(".")[0] == "robosafe"),
    "mujoco_imported": "mujoco" in sys.modules,
    "random": int(np.random.randint(1 << 30)),
}))
raise SystemExit(3)
"""


def test_a_forked_process_starts_as_a_fresh_interpreter(tmp_path):
    """A module run both ways prints what its interpreter gives it: the same but for numpy's
    legacy global seed, which is fresh in each process (two forked runs differ)."""
    (tmp_path / "look.py").write_text(LOOK)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "LOOK_VAR": "x"}
    seen = {}
    for name in ("forked", "forked again"):
        proc = cli_fork.run(["a", "b"], tmp_path, env, timeout=60, module="look")
        assert proc.returncode == 3, proc.stderr
        seen[name] = json.loads(proc.stdout)
    proc = subprocess.run([sys.executable, "-m", "look", "a", "b"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 3, proc.stderr
    plain = json.loads(proc.stdout)
    assert plain["tmp"] == str(tmp) and plain["argv"] == [str(tmp_path / "look.py"), "a", "b"]
    assert plain["robosafe_imported"] == [] and not plain["mujoco_imported"]
    a, b = seen["forked"], seen["forked again"]
    assert a["random"] != b["random"]
    for d in (a, b, plain):
        d.pop("random")
    assert a == b == plain


def test_the_parent_ends_when_its_test_process_is_killed(tmp_path):
    """A test process killed outright runs no exit handler: its parent notices it is orphaned."""
    here = str(Path(cli_fork.__file__).parent)
    code = (f"import os, sys; sys.path.insert(0, {here!r}); import cli_fork; "
            "cli_fork.forked(dict(os.environ)); print(cli_fork._parent.proc.pid, flush=True); "
            "import time; time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    parent = int(proc.stdout.readline())
    folder = next(Path(a).parent for a in Path(f"/proc/{parent}/cmdline").read_bytes()
                  .decode().split("\0") if a.endswith("sock"))
    assert folder.is_dir()  # running, with its socket
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 30
    while Path(f"/proc/{parent}").exists():
        assert time.monotonic() < deadline, "the orphaned parent is still running"
        time.sleep(0.2)
    assert not folder.exists()  # and its socket's folder is gone
