"""Output paths, run-directory locks, collect --resume and credentials in policy URLs.

Every command that writes gives one line and exit 2 for an output it cannot create; a run
directory has one writer at a time (real processes); an interrupted collect is continued, not
redone; a password in a ``ws://`` URL reaches neither disk nor stderr (a real server on
loopback).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from conftest import run_robosafe as cli

from robosafe.errors import RobosafeError
from robosafe.outputs import DirLock
from robosafe.redact import redact_url
from robosafe.runner.request import seed_option

pytestmark = pytest.mark.sim  # steps MuJoCo

EXAMPLES = Path(__file__).resolve().parents[1] / "src/robosafe/tasks/examples"
CAR = str(EXAMPLES / "pick_place_moving_car.bddl")


def one_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def wait_for(pred, what: str, timeout_s: float = 300) -> None:
    deadline = time.time() + timeout_s
    while not pred():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


# ---------------------------------------------------------------- outputs that cannot be made

@pytest.mark.slow
def test_every_writer_names_an_output_it_cannot_create(tmp_path):
    (tmp_path / "file").write_text("mine")
    paths = {tmp_path / "file": "exists and is not a",
             tmp_path / "file/out": "cannot create the output: Not a directory"}
    if Path("/proc/self").is_dir():
        paths[Path("/proc/robosafe-out")] = "cannot create the output"
    small = ["--task", CAR, "--policy", "random", "-n", "1", "--horizon", "3"]
    commands = {"run": lambda o: ["run", *small, "--out", str(o)],
                "collect": lambda o: ["collect", *small, "--out", str(o)],
                "generate": lambda o: ["grounding", "generate", "-o", str(o), "--episodes", "1",
                                       "--size", "16", "--max-steps", "10", "--robot",
                                       "primitive"]}
    for name, args in commands.items():
        for out, why in paths.items():
            line = one_line(cli(*args(out)))
            assert line.startswith(f"robosafe: error: {out}: {why}"), (name, line)
    assert (tmp_path / "file").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # no stray partial dirs


# ---------------------------------------------------------------- --seeds

@pytest.mark.slow
def test_seeds_that_list_nothing_are_refused_by_run_and_collect(tmp_path):
    assert seed_option("10-12") == (10, 11, 12)
    assert seed_option("3,1") == (3, 1)
    for bad, why in (("5-4", "'5-4' is an empty range"), (",", "',' lists no number")):
        with pytest.raises(RobosafeError, match=f"^--seeds: {why}"):
            seed_option(bad)
        for cmd in ("run", "collect"):
            out = tmp_path / f"{cmd}{len(bad)}"
            line = one_line(cli(cmd, "--task", CAR, "--policy", "random", "--seeds", bad,
                                "--out", str(out)))
            assert line.startswith(f"robosafe: error: --seeds: {why}")
            assert not out.exists()
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- one writer per run directory

@pytest.mark.slow
def test_a_second_writer_of_a_run_directory_is_refused_while_the_first_runs(tmp_path):
    out = tmp_path / "r"
    # far more episodes than the test waits for: the first writer is killed, never let finish
    # (a loaded machine once let 6 short episodes end between the two refused commands)
    args = ["run", "--task", CAR, "--policy", "random", "-n", "1000", "--horizon", "60",
            "--out", str(out)]
    first = subprocess.Popen([sys.executable, "-m", "robosafe", *args],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (out / "run.json").is_file()
                 and (out / ".lock").read_text().strip() == str(first.pid), "the first run")
        for extra in (["--resume"], []):
            line = one_line(cli(*args, *extra))
            assert line == (f"robosafe: error: run directory {out} is in use by another "
                            f"robosafe process (pid {first.pid})")
        assert first.poll() is None  # still running: the refusal touched nothing of its
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    # the kernel dropped the killed writer's lock: nothing stale to clean up by hand
    DirLock.acquire(out, "run directory").release()


# ---------------------------------------------------------------- collect --resume

@pytest.mark.slow
def test_collect_resume_keeps_the_episodes_an_interrupted_collect_finished(tmp_path):
    out = tmp_path / "c"
    partial = tmp_path / ".collect-c"
    args = ["collect", "--task", CAR, "--policy", "random", "-n", "4", "--horizon", "60",
            "--out", str(out)]
    proc = subprocess.Popen([sys.executable, "-m", "robosafe", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: len(list((partial / "outcomes").glob("*.json"))) >= 1 or
             proc.poll() is not None, "a finished episode")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = {p.name: p.read_bytes() for p in (partial / "outcomes").glob("*.json")}
    assert 1 <= len(finished) < 4 and not out.exists()
    # rerunning without --resume neither redoes nor drops them silently
    line = one_line(cli(*args))
    assert line == (f"robosafe: error: {out}: an interrupted collect left {len(finished)} "
                    f"finished episode(s) in {partial}; --resume continues it, --overwrite "
                    "starts again")
    assert {p.name: p.read_bytes() for p in (partial / "outcomes").glob("*.json")} == finished
    res = cli(*args, "--resume", "--json")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert (summary["resumed"], summary["episodes"], summary["of"]) == (len(finished), 4, 4)
    assert f"keeping {len(finished)} finished episode(s)" in res.stderr
    assert "no videos" not in res.stderr  # no cameras asked for: nothing to warn about
    assert not partial.exists()  # removed once the dataset is written
    info = json.loads((out / "meta/info.json").read_text())
    assert info["total_episodes"] == 4


# ---------------------------------------------------------------- credentials

def test_redact_url_masks_user_information_and_credential_parameters():
    assert redact_url("ws://user:pw@host:8000/x") == "ws://***@host:8000/x"
    assert redact_url("wss://tok@h/p?token=abc&n=2&api_key=k") == "wss://***@h/p?token=***&n=2&api_key=***"
    assert redact_url("no url user:pw@host") == "no url user:pw@host"
    assert redact_url("failed: ws://a:b@h:1 refused") == "failed: ws://***@h:1 refused"
    assert redact_url("ws://h:1/path@x") == "ws://h:1/path@x"  # an @ in the path is not userinfo


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_password_in_the_policy_url_reaches_no_file_and_no_output(tmp_path):
    from robosafe.policies.base import make_policy
    from robosafe.policies.server import PolicyServer

    def leaks(run_dir: Path, proc: subprocess.CompletedProcess) -> list[str]:
        found = [str(p) for p in run_dir.rglob("*") if p.is_file() and b"secret" in
                 p.read_bytes()]
        return found + [name for name, text in (("stdout", proc.stdout),
                                                ("stderr", proc.stderr)) if "secret" in text]

    small = ["--task", CAR, "-n", "1", "--horizon", "3", "--no-images"]
    with PolicyServer(make_policy("random")) as server:
        url = server.url.replace("ws://", "ws://user:secret@")
        proc = cli("run", *small, "--policy", url, "--out", str(tmp_path / "r"))
        assert proc.returncode == 0, proc.stderr  # connected with the credentials
        assert leaks(tmp_path / "r", proc) == []
        shown = server.url.replace("ws://", "ws://***@")
        assert json.loads((tmp_path / "r/run.json").read_text())["policy"] == shown
        # --resume with the same URL is the same run (stored config is compared masked)
        again = cli("run", *small, "--policy", url, "--out", str(tmp_path / "r"), "--resume")
        assert again.returncode == 0, again.stderr
    # an unreachable server: the error row and the lines printed quote the URL masked
    dead = f"ws://user:secret@127.0.0.1:{_closed_port()}"
    proc = cli("run", *small, "--policy", dead, "--out", str(tmp_path / "d"))
    assert proc.returncode == 2 and "unreachable" in proc.stderr
    assert "ws://***@127.0.0.1" in proc.stderr
    assert leaks(tmp_path / "d", proc) == []


@pytest.mark.slow
def test_demo_fresh_never_deletes_a_run_being_written(tmp_path):
    """`demo --fresh` removes its earlier run, but not while another process holds its lock."""
    out = tmp_path / "demo"
    run = out / "scripted-careful"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"format": "robosafe-run/1"}))
    lock = DirLock.acquire(run, "run directory")
    try:
        proc = cli("demo", "--fresh", "--out", str(out))
    finally:
        lock.release()
    assert proc.returncode == 2, proc.stderr
    assert "is in use by another robosafe process" in proc.stderr
    assert (run / "run.json").is_file()


# ---------------------------------------------------------------- Ctrl-C

@pytest.mark.slow
@pytest.mark.serial  # a signal sent mid-run: timing-sensitive
def test_ctrl_c_keeps_the_finished_episodes_and_says_how_to_continue(tmp_path):
    out = tmp_path / "r"
    args = ["run", "--task", CAR, "--policy", "random", "-n", "4", "--horizon", "60",
            "--out", str(out)]
    proc = subprocess.Popen([sys.executable, "-m", "robosafe", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_for(lambda: any((out / "outcomes").glob("*.json")) or proc.poll() is not None,
             "a finished episode")
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    kept = len(list((out / "outcomes").glob("*.json")))
    assert 1 <= kept < 4
    assert stderr.splitlines()[-1] == (f"robosafe: interrupted: {kept} of 4 episode(s) are "
                                       f"kept in {out}; the same command with --resume "
                                       "continues")
    res = cli(*args, "--resume", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["episodes"] == 4


# ---------------------------------------------------------------- worker warnings

@pytest.mark.sim
def test_a_warning_both_workers_meet_is_said_once_naming_the_runs_task_file(tmp_path):
    from robosafe.sim.libero_assets import assets_root

    if assets_root(required=False) is None:
        pytest.skip("needs the libero-assets extra")
    out = tmp_path / "r"
    proc = cli("run", "--suite", "demo", "--task-id", "place_lemon_in_bowl", "--policy", "zero",
               "-n", "2", "--horizon", "2", "--assets", "libero", "-j", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    said = [ln for ln in proc.stderr.splitlines() if "procedural stand-ins used" in ln]
    assert said == [(f"robosafe: warning: {out}/tasks/place_lemon_in_bowl.bddl: LIBERO's "
                     "assets have no bowl, lemon: procedural stand-ins used")]
    assert "robosafe-worker-" not in proc.stderr
