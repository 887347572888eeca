"""A seeded random sweep of hostile option values (huge, negative, NaN, empty, unicode) over every
command: each ends with exit status 0 or 2 and one line, never a traceback, and never needs
more memory than a set cap (an address-space limit, as `ulimit -v` sets).

The commands run in forked children of one process that imported the command line once (a few
hundred commands would otherwise each pay for Python's start-up and typer's import): the cap is
set in each child, so it holds the command alone. Each command gets base arguments that make it
stop on an input of its own (a file that does not exist), so a hostile value is checked before
any real work, and those anchors are never the option swept.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from cli_fork import PRELOAD

#: address space each command may use: the start-up's (some 0.2-1 GiB with numpy, MuJoCo,
#: numba) plus robosafe's default memory budget and room for thread stacks
CAP_BYTES = 6 << 30
#: a command that has not ended by then is doing work a hostile value asked for
CASE_TIMEOUT_S = 30
SEED = 20261128
CASES_PER_COMMAND = 3

HOSTILE = ["9" * 40, "999999999999", "-1", "-999999999", "0", "nan", "inf", "-inf", "1e308",
           "", " ", "é☃\u202e", "0-999999999", "0,0", "--", "ws://u:secret@127.0.0.1:1"]


def _base(missing: Path, out: Path) -> dict[str, list[str]]:
    """Per command, arguments that make it stop on an input of its own: a missing file (or an
    output it cannot create). Options listed here are anchors and are not swept."""
    m, o = str(missing), str(out)
    return {
        "run": ["-o", o, "-p", "zero", "--task", m],
        "demo": ["-o", "/dev/null/x"],
        "collect": ["-o", o, "--task", m],
        "serve-policy": [f"replay:{m}"],
        "report": [m],
        "score": [m],
        "specs list": [],
        "specs explain": ["libero", "x"],
        "audit drift": [m, m],
        "audit disagreement": [m, m],
        "audit diff": [m, m],
        "audit significance": [m],
        "audit paired": [m, m],
        "compare": [m, m],
        "audit sequential": [m, m],
        "audit shortcut": ["--demos", m],
        "audit data-source": ["--demos", m],
        "grounding index": [m],
        "grounding generate": ["--out", "/dev/null/x"],
        "grounding intervene": ["--out", "/dev/null/x"],
        "grounding score": [m],
        "grounding clips": [m, "--task", "x", "--out", o],
        "grounding sweep": [m],
        "grounding ask": [m, "--dataset", m, "--model", "x", "--endpoint",
                          "http://127.0.0.1:1", "--out", o],
        "grounding baseline": [m, "--dataset", m, "--out", o],
        "export lerobot": [m, "--out", o],
        "import lerobot": [m, "--out", o],
        "results ingest": [m],
        "results list": ["--db", m],
        "results compare": ["x", "y", "--db", m],
        "results show": ["x", "--db", m],
        "sim run": [m, "--out", o],
        "sim state": [m, "--out", o],
        "sim record": ["NoSuchEnv", "--out", "/dev/null/x"],
        "sim assets": [],
        "stats wilson": ["3", "10"],
        "stats newcombe": ["3", "10", "4", "10"],
        "stats cutoffs": ["--tasks", "3", "--samples", "4", "--baseline", "5"],
        "stats compare": ["--tasks", "3", "--samples", "4", "--baseline", "5", "--new", "7"],
        "suites list": [],
        "suites show": ["no-such-suite"],
        "suites check": ["--suite", "no-such-suite"],
        "tasks check": [m],
        "tasks fmt": [m],
        "tasks perturb-language": [m],
    }


def _commands():
    """(path, params) of every leaf command, from the command line's own tree."""
    import click
    import typer.main

    from robosafe.cli import app

    root = typer.main.get_command(app)
    ctx = click.Context(root)

    def walk(cmd, path):
        if getattr(cmd, "commands", None):
            for name in cmd.list_commands(ctx):
                yield from walk(cmd.get_command(ctx, name), [*path, name])
        else:
            yield " ".join(path), cmd.params

    return list(walk(root, []))


def _cases(tmp_path: Path) -> list[list[str]]:
    rng = random.Random(SEED)
    base = _base(tmp_path / "missing.x", tmp_path / "out")
    cases = []
    for path, params in _commands():
        assert path in base, f"{path}: a new command needs base arguments in this sweep"
        argv = base[path]
        anchors = set(argv)
        # every option that takes a value (flags have no value to be hostile), the anchors and
        # the old spellings kept for one release aside; positional ones are swept in place
        options = [p for p in params if p.param_type_name == "option" and not p.is_flag
                   and not p.hidden and not anchors & set(p.opts)]
        positions = [i for i, a in enumerate(argv) if not a.startswith("-")
                     and (i == 0 or not argv[i - 1].startswith("-"))
                     and "missing.x" not in a]
        targets = [("opt", max(p.opts, key=len)) for p in options] + \
                  [("pos", i) for i in positions]
        for kind, which in rng.sample(targets, min(CASES_PER_COMMAND, len(targets))):
            value = rng.choice(HOSTILE)
            if kind == "opt":
                case = [*argv, f"{which}={value}"]
            else:
                case = [*argv[:which], value, *argv[which + 1:]]
            cases.append([*path.split(), *case])
    return cases


DRIVER = r'''
import importlib, json, os, resource, sys, time
for name in json.loads(sys.argv[5]):  # what most commands import, once, before the forks
    try:
        importlib.import_module(name)
    except ImportError:
        pass
import robosafe.cli

cases, cap, timeout, outdir = json.load(open(sys.argv[1])), int(sys.argv[2]), \
    float(sys.argv[3]), sys.argv[4]
results = []
for i, argv in enumerate(cases):
    out, err = os.path.join(outdir, f"{i}.out"), os.path.join(outdir, f"{i}.err")
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
            for fd, path in ((1, out), (2, err)):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.chdir(outdir)
            sys.argv = ["robosafe", *argv]
            try:
                robosafe.cli.main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
            except BaseException:
                import traceback
                traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    deadline = time.monotonic() + timeout
    while not (done := os.waitpid(pid, os.WNOHANG))[0]:
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            done = None
            break
        time.sleep(0.01)
    status = "timeout" if done is None else os.waitstatus_to_exitcode(done[1])
    results.append({"argv": argv, "status": status, "s": time.monotonic() - start,
                    "stderr": open(err, errors="replace").read()[-3000:]})
print(json.dumps(results))
'''


@pytest.mark.slow
def test_hostile_option_values_end_in_0_or_2_without_traceback_under_a_memory_cap(tmp_path):
    cases = _cases(tmp_path)
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "MUJOCO_GL": "egl", "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1", "TMPDIR": str(work)}
    proc = subprocess.run([sys.executable, "-c", DRIVER, str(tmp_path / "cases.json"),
                           str(CAP_BYTES), str(CASE_TIMEOUT_S), str(work), json.dumps(PRELOAD)],
                          capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)
    assert len(results) == len(cases) > 80
    bad = [f"robosafe {' '.join(r['argv'])} -> {r['status']}: {r['stderr'][-600:]}"
           for r in results if r["status"] not in (0, 2) or "Traceback" in r["stderr"]
           or "MemoryError" in r["stderr"]]
    assert not bad, "\n\n".join(bad)
    # an error is one line; warnings (a deprecated spelling) may come before it
    many = [r["argv"] for r in results if r["status"] == 2 and
            len([x for x in r["stderr"].splitlines() if x.startswith("robosafe: error")]) != 1]
    assert not many
    assert not any("secret" in r["stderr"] for r in results)
