"""Every size a user gives is priced before any work (robosafe.budget): over its limit, one line
saying what it would need, exit 2, and nothing created. Numbers that are not numbers (NaN, inf)
are refused for every float option, and every check of a run's inputs comes before its folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import run_robosafe as cli
from test_bounded_inputs import _peak_mib

from robosafe.errors import RobosafeError

EXAMPLES = Path(__file__).resolve().parents[1] / "src/robosafe/tasks/examples"
TASK = EXAMPLES / "libero_pick_place.bddl"


def _one_line(proc, message: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [f"robosafe: error: {message}"]


# The demo suite has 5 tasks; every case fails before a run directory or an episode exists.
RUN_CASES = [
    (["--seeds", "0-999999999"],
     ("--seeds: '0-999999999' gives 1,000,000,000 numbers, more than the episodes per task "
     "(-n 1) (1)")),
    (["-n", "2", "--seeds", "0,0"],
     "--seeds: seed 0 is given twice; each episode needs a seed of its own"),
    (["-n", "1000000000"],
     ("episodes of the run (tasks x levels x -n): 5,000,000,000 is over the limit of "
     "1,000,000 (each is an outcome row and a trace file, and the run lists them all)")),
    (["--visual-level", "2,0,2"],
     "--visual-level: level 2 is given twice; each level is run once"),
    (["--language-level", "0-99999999999"],
     ("--language-level: '0-99999999999' gives 100,000,000,000 numbers, more than the levels "
     "0..4 (5)")),
    (["--horizon", "0"], "--horizon must be at least 1 step, got 0"),
    (["--horizon", "-1"], "--horizon must be at least 1 step, got -1"),
    (["--horizon", "100001"],
     ("--horizon: 100,001 is over the limit of 100,000 (steps of one episode, each kept in "
     "memory until its trace is written)")),
    # shield options are checked with the shield off too: run.json records them either way
    (["--shield-horizon", "1000000000"],
     ("--shield-horizon: 1,000,000,000 is over the limit of 1,000 (steps simulated ahead at "
     "every control step, once per candidate)")),
    (["--shield-horizon", "-5"], "--shield-horizon must be >= 1, got -5"),
    (["--shield-candidates", "garbage"],
     "--shield-candidates 'garbage': choose from scale, lift, side, hold, retreat, open"),
    (["--shield-candidates", "hold,lift,hold"], "--shield-candidates: hold given twice"),
    (["--shield-margin", "nan"], "--shield-margin: nan is not a finite number"),
    (["--shield", "monitor", "--shield-margin", "-inf"],
     "--shield-margin: -inf is not a finite number"),
    (["--backend", "bogus"], "--backend: 'bogus' is not local or ray"),
    # the policy spec as far as it costs nothing: a server's port, a replay file
    (["-p", "ws://localhost:99999"],
     ("--policy 'ws://localhost:99999': expected ws://HOST:PORT or wss://HOST:PORT with a port "
     "in 1..65535")),
    (["-p", "replay:/nonexistent/a.npy"],
     ("/nonexistent/a.npy: not an action array (.npy): [Errno 2] No such file or directory: "
     "'/nonexistent/a.npy'")),
    (["--backend", "ray", "--ray-address", "ray://"],
     ("Ray address 'ray://': expected HOST:PORT, ray://HOST:PORT or auto (--ray-address / "
     "RAY_ADDRESS)")),
    (["--backend", "ray", "--ray-address", "127.0.0.1:70000"],
     ("Ray address '127.0.0.1:70000': expected HOST:PORT, ray://HOST:PORT or auto "
     "(--ray-address / RAY_ADDRESS)")),
]


@pytest.mark.parametrize(("args", "message"), RUN_CASES, ids=lambda v: " ".join(v)
                         if isinstance(v, list) else "")
def test_run_sizes_and_options_are_refused_before_the_run_folder(tmp_path, args, message):
    out = tmp_path / "run"
    _one_line(cli("run", "-o", out, "-p", "zero", "--suite", "demo", *args), message)
    assert not out.exists()


@pytest.mark.parametrize(("args", "message"), [
    (["stats", "wilson", "3", "10", "--confidence", "nan"],
     "--confidence: nan is not a finite number"),
    (["stats", "compare", "--tasks", "3", "--samples", "4", "--baseline", "3", "--new", "5",
      "--alpha", "inf"], "--alpha: inf is not a finite number"),
    (["audit", "paired", "a.csv", "b.csv", "--max-memory", "nan"],
     "--max-memory: nan is not a finite number"),
    (["score", "x.jsonl", "--bootstrap", "99999999999"],
     ("--bootstrap: 99,999,999,999 is over the limit of 1,000,000 (resamples, each of every "
     "episode)")),
    (["report", "run", "--bootstrap", "1000001"],
     "--bootstrap: 1,000,001 is over the limit of 1,000,000 (resamples, each of every episode)"),
    (["audit", "disagreement", "a.csv", "b.csv", "--bootstrap", "1000001"],
     "--bootstrap: 1,000,001 is over the limit of 1,000,000 (resamples, each of every episode)"),
    (["sim", "record", "Lift", "-o", "t.jsonl", "--steps", "999999999"],
     ("--steps: 999,999,999 is over the limit of 100,000 (steps of one episode, each kept in "
     "memory until its trace is written)")),
    (["sim", "run", "x.bddl", "-o", "t.jsonl", "--horizon", "0"],
     "--horizon must be at least 1 step, got 0"),
    (["grounding", "generate", "-o", "g", "--size", "100000"],
     "--size: 100,000 is over the limit of 4,096 (pixels on a side, 3 bytes each per frame)"),
    (["run", "-o", "r", "-p", "zero", "--suite", "demo", "--image-size", "4097"],
     ("--image-size: 4,097 is over the limit of 4,096 (pixels on a side, 3 bytes each per "
     "frame)")),
    (["score", "x.jsonl", "-j", "1025"],
     ("Invalid value for '--workers' / '-j': Input should be less than or equal to 1024 (see "
     "python -m robosafe score --help)")),
    (["suites", "check", "--num-seeds", "999999999999"],
     ("--num-seeds: 999,999,999,999 is over the limit of 1,000,000 (the episodes a check may "
     "run, one per seed and task)")),
])
def test_other_commands_refuse_sizes_and_non_numbers(tmp_path, args, message):
    _one_line(cli(*args, cwd=tmp_path), message)
    assert list(tmp_path.iterdir()) == []  # nothing made


def test_a_cutoff_shape_over_the_memory_limit_says_what_it_would_need():
    proc = cli("stats", "cutoffs", "--tasks", "1000", "--samples", "1000", "--baseline",
               "500000", "--max-score", "2", "--max-memory", "0.5")
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("robosafe: error: the exact Q_hi envelope for T=1000 S=1000 R=2 "
                           "would need about ")
    assert line.endswith(" GiB of memory, over the limit of 512 MiB (raise it with "
                         "--max-memory)")


@pytest.mark.slow
def test_a_million_sample_success_benchmark_fits_in_bounded_memory(tmp_path):
    """T = S = 1000 with R = 1 once took a 7.46 GiB table: L_forall now builds only the gaps it
    searches and a claim's class only its own gap. The cutoff is the first gap every compatible
    table rejects, so the gap one below it is not provably significant and it is."""
    proc, peak = _peak_mib("stats", "cutoffs", "--tasks", "1000", "--samples", "1000",
                           "--baseline", "500000", "--json")
    assert proc.returncode == 0, proc.stderr
    assert peak < 1024
    lf = json.loads(proc.stdout)["l_forall"]
    labels = []
    for gap in (lf - 1, lf):
        p = cli("stats", "compare", "--tasks", "1000", "--samples", "1000", "--baseline",
                "500000", "--new", str(500000 + gap), "--json")
        labels.append(json.loads(p.stdout)["label"])
    assert labels[0] != "provably_significant" and labels[1] == "provably_significant"
    claims = tmp_path / "claims.csv"
    claims.write_text("benchmark,tasks,samples,previous,new\nbig,1000,1000,0.5,0.505\n")
    proc, peak = _peak_mib("audit", "significance", str(claims), "--json")
    assert proc.returncode == 0, proc.stderr
    assert peak < 1024
    # 0.5 -> A = 500000, 0.505 -> B = 505000: a gap of 5000, far above the cutoff
    (claim,) = json.loads(proc.stdout)["claims"]
    assert (claim["previous_count"], claim["new_count"]) == (500000, 505000)
    assert claim["label"] == "provably_significant"


def test_task_dir_ids_that_collide_are_refused_like_task(tmp_path):
    root = tmp_path / "tasks"
    (root / "a").mkdir(parents=True)
    (root / "a" / "x.bddl").write_text(TASK.read_text())
    (root / "a.x.bddl").write_text(TASK.read_text())
    out = tmp_path / "run"
    # paths sort part by part: ("a", "x.bddl") before ("a.x.bddl",)
    _one_line(cli("run", "-o", out, "-p", "zero", "--task-dir", root),
              f"two tasks named a.x: {root / 'a' / 'x.bddl'} and {root / 'a.x.bddl'}")
    assert not out.exists()


def test_a_task_file_that_is_not_utf8_is_one_line_and_makes_nothing(tmp_path):
    bad = tmp_path / "bad.bddl"
    bad.write_bytes(b"; caf\xe9\n" + TASK.read_bytes())  # latin-1: line 1, column 6
    out = tmp_path / "run"
    for command in ("run", "collect"):
        proc = cli(command, "-o", out, "-p", "scripted-careful", "--task", bad)
        assert proc.returncode == 2, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert line == f"robosafe: error: {bad}:1:6: not valid UTF-8"
        assert not out.exists() and not list(tmp_path.glob(".collect-*"))


def test_a_task_parse_error_names_the_users_file_before_the_run_folder(tmp_path):
    bad = tmp_path / "broken.bddl"
    bad.write_text(TASK.read_text().replace("(:goal", "(:gaol", 1))
    out = tmp_path / "run"
    proc = cli("run", "-o", out, "-p", "zero", "--task", bad)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"robosafe: error: {bad}:") and "robosafe-worker-" not in line
    assert not out.exists()


def test_a_bad_ray_address_from_the_environment_is_refused_before_the_run_folder(tmp_path):
    out = tmp_path / "run"
    _one_line(cli("run", "-o", out, "-p", "zero", "--suite", "demo", "--backend", "ray",
                  env={**os.environ, "RAY_ADDRESS": "garbage"}),
              "Ray address 'garbage': expected HOST:PORT, ray://HOST:PORT or auto "
              "(--ray-address / RAY_ADDRESS)")
    assert not out.exists()


def test_a_worker_error_names_the_runs_copy_of_the_task(tmp_path):
    """The worker parses its own temporary copy; what it reports names the run's copy (the
    same text, a file the user can open)."""
    from robosafe.runner.rundir import Cell
    from robosafe.runner.worker import CellJob, _run_copy_names, _task_file

    temp = _task_file("x", "(define (problem x))")
    job = CellJob(str(tmp_path / "run"), None, "zero", "(define (problem x))",
                  Cell("x", 0, 0, 0, 0))
    assert _run_copy_names(job, f"{temp}:3:1: expected ')'") == \
        f"{tmp_path / 'run' / 'tasks' / 'x.bddl'}:3:1: expected ')'"


def test_run_json_is_strict_json_or_nothing_is_made(tmp_path):
    from robosafe.runner.rundir import create_run

    with pytest.raises(RobosafeError, match=r"a number JSON cannot write \(shield_margin\)"):
        create_run(tmp_path / "run", {"policy": "zero", "shield_margin": float("nan")}, {})
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("reply", [
    pytest.param(b"HTTP/1.1 400 Bad Request\r\n\r\n", id="http"),
    # waits out the probe's 5 s of silence
    pytest.param(None, id="silent", marks=pytest.mark.slow)])
def test_a_ray_address_that_answers_but_is_not_ray_is_one_line(tmp_path, reply):
    """Ray would retry such a listener for minutes; a gRPC server (Ray's) answers an HTTP/2
    preface with a SETTINGS frame, this one does not (or says nothing)."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(1024)
            if reply is not None:
                conn.sendall(reply)
            else:
                conn.recv(1024)  # holds the connection open, silent, until the client leaves

    threading.Thread(target=answer, daemon=True).start()
    out = tmp_path / "run"
    with server:
        _one_line(cli("run", "-o", out, "-p", "zero", "--suite", "demo", "--backend", "ray",
                      "--ray-address", f"127.0.0.1:{port}"),
                  f"'127.0.0.1:{port}' answers but is not a Ray cluster (no gRPC reply); fix "
                  "--ray-address / RAY_ADDRESS")
    assert not out.exists()


def test_json_output_writes_a_number_that_is_not_one_as_null(capsys):
    """An older run.json may hold a bare NaN (a --shield-margin nan before it was refused):
    `results show --json` and the like print JSON's null for it, as for every missing number."""
    from robosafe.cli.common import emit_json

    emit_json({"shield_margin": float("nan"), "q": [float("inf"), 1.5]}, None, True)
    assert json.loads(capsys.readouterr().out) == {"shield_margin": None, "q": [None, 1.5]}


def test_an_empty_vla_arena_assets_folder_is_refused_before_any_episode(tmp_path):
    empty = tmp_path / "assets"
    empty.mkdir()
    out = tmp_path / "run"
    _one_line(cli("run", "-o", out, "-p", "zero", "--suite", "demo", "--assets", "vla-arena",
                  env={**os.environ, "ROBOSAFE_VLA_ARENA_ASSETS": str(empty)}),
              f"$ROBOSAFE_VLA_ARENA_ASSETS={empty}: holds no asset folders; point it at the "
              "assets folder itself")
    assert not out.exists()


def test_a_run_json_is_priced_before_its_seeds_are_listed(tmp_path):
    """run.json is a file someone may have edited: a billion episodes without a seed list is
    refused by its size on --resume, never expanded into a billion seeds."""
    out = tmp_path / "run"
    args = ("run", "-o", out, "-p", "zero", "--suite", "demo", "--task-id", "turn_off_stove",
            "--horizon", "2")
    assert cli(*args).returncode == 0
    cfg = json.loads((out / "run.json").read_text())
    cfg.update(episodes=10**12, seeds=[])
    (out / "run.json").write_text(json.dumps(cfg))
    _one_line(cli(*args, "--resume"),
              "episodes of the run (tasks x levels x -n): 1,000,000,000,000 is over the limit "
              "of 1,000,000 (each is an outcome row and a trace file, and the run lists them "
              "all)")
