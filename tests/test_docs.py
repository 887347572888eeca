"""The README and the docs site: the site builds strictly, the CLI reference is what the app
says, every `robosafe` command written in README.md or docs/ names a real command and real
options, and the README's quickstarts run on small inputs."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import cli_fork
import numpy as np
import pytest
import typer
from factories import (
    TASK_EXAMPLES,
    make_run,
    synthetic_episodes,
    two_episodes,
    write_libero_style,
    write_robosafe,
)

from robosafe.cli import app
from robosafe.cli.score import example_paths

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# generated from the app, or a copy of the shared design: no hand-written commands in them
GENERATED = {ROOT / "docs" / "reference" / "cli.md", ROOT / "docs" / "design.md"}


def _blocks(path: Path) -> list[str]:
    return re.findall(r"```(?:bash|sh|console)\n(.*?)```", path.read_text(encoding="utf-8"),
                      flags=re.DOTALL)


def _commands(text: str) -> list[str]:
    """The `robosafe ...` invocations of a shell block: continuation lines joined, comments,
    pipes and `&&` chains split off."""
    text = text.replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        for part in re.split(r"&&|\|\||\||;", line):
            part = part.strip()
            part = re.sub(r"^(?:[A-Z_]+=\S+\s+)+", "", part)  # VAR=value prefixes
            if part.startswith("robosafe ") or part == "robosafe":
                out.append(part)
    return out


def documented_commands() -> list[tuple[str, str]]:
    return [(f"{p.relative_to(ROOT)}", c) for p in DOCS if p not in GENERATED
            for b in _blocks(p) for c in _commands(b)]


def _resolve(argv: list[str]):
    """The click command an argv names, and the rest of the argv."""
    root = typer.main.get_command(app)
    cmd, rest = root, list(argv)
    while hasattr(cmd, "list_commands") and rest and not rest[0].startswith("-"):
        ctx = cmd.context_class(cmd, info_name="robosafe")
        sub = cmd.get_command(ctx, rest[0])
        if sub is None:
            return None, rest
        cmd, rest = sub, rest[1:]
    return cmd, rest


@pytest.mark.parametrize("where,command", documented_commands())
def test_documented_command_exists_with_its_options(where, command):
    argv = shlex.split(command.replace("...", ""))[1:]
    if not argv or argv == ["--help"]:
        return
    cmd, rest = _resolve(argv)
    assert cmd is not None, f"{where}: `{command}`: no command {rest[0]!r}"
    assert not hasattr(cmd, "list_commands") or not rest, \
        f"{where}: `{command}`: {rest[0]!r} is not a subcommand"
    known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
    for tok in rest:
        if tok.startswith("-") and not re.fullmatch(r"-\d.*", tok):
            assert tok.split("=", 1)[0] in known, \
                f"{where}: `{command}`: no option {tok!r} (has {sorted(known)})"


def test_the_command_check_can_fail():
    """Guards the check above: a renamed option and a missing command are caught."""
    cmd, _rest = _resolve(["stats", "cutoffs", "--score", "1"])
    assert "--score" not in {o for p in cmd.params for o in p.opts}
    assert _resolve(["tasks", "perturb"])[0] is None
    assert ("README.md", "robosafe stats wilson 167 200") in documented_commands()


def test_cli_reference_is_current():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_cli_docs.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_the_design_page_states_the_layers_the_layer_test_checks():
    """docs/design.md (the project's DESIGN.md) and tests/test_layers.py name one import order."""
    import re

    from test_layers import LAYERS

    text = " ".join((ROOT / "docs" / "design.md").read_text().split())
    stated = re.search(r"lowest first: (.*?)\. A package", text).group(1)
    layers = tuple(tuple(re.findall(r"`(\w+)`", part)) for part in stated.split(" < "))
    assert layers == tuple(layer for layer in LAYERS if layer != ("__main__",))


def test_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d",
                           str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                          check=False, env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "api" / "index.html").is_file()
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    assert "score_episodes" in api and "Wilson" in api  # docstrings made it in


# ------------------------------------------------------------------ the docs, executed

def _outcomes_csv(path: Path, gains: bool) -> None:
    """Outcome rows of a baseline (gains=False) or a new policy on the same 3 tasks x 4
    instances: the new one succeeds on every instance the baseline fails, nowhere else differs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(["suite", "task_id", "instance_id", "success"])
        for t in range(3):
            for i in range(4):
                wr.writerow(["demo", f"t{t}", f"seed{i}", int(i < 2 or gains)])


def build_workdir(d: Path) -> Path:
    """Every input file the docs' commands name, made small, under the names they use."""
    from robosafe.grounding import SyntheticConfig, generate_dataset
    from robosafe.trace.io import write_episodes

    ex = {p.suffix: p for p in example_paths()}
    shutil.copy(ex[".jsonl"], d / "rollouts.jsonl")
    shutil.copy(ex[".jsonl"], d / "b.jsonl")
    shutil.copy(ex[".parquet"], d / "a.parquet")
    shutil.copy(ex[".parquet"], d / "traces.parquet")
    (d / "rollouts" / "sub").mkdir(parents=True)  # a folder of trace files for `score DIR`
    shutil.copy(ex[".jsonl"], d / "rollouts" / "robocasa.jsonl")
    shutil.copy(ex[".parquet"], d / "rollouts" / "sub" / "libero.parquet")
    (d / "runs").mkdir()
    shutil.copy(ex[".parquet"], d / "runs" / "libero.parquet")  # runs/*.parquet: 240 episodes
    shutil.copy(ex[".jsonl"], d / "runs" / "robocasa.jsonl")
    write_episodes(d / "runs" / "ep.json", synthetic_episodes(1))
    write_libero_style(d / "path" / "to" / "lerobot_dataset", success=[True, False])
    write_robosafe(d / "data" / "demo_careful", two_episodes())
    # run directories as `robosafe run` writes them, under each name the guides give them
    for name in ("pi0", "s", "careful", "careless", "careless-filter", "pi05-goal", "scripted"):
        make_run(d / "runs" / name, crashed=(), policy=name)
    # outcome tables: baseline a / calibration and a gaining b / altered (App. C.1 by hand
    # in test_readme_audit_quickstart_runs); three repeats for `audit disagreement`
    for a, b in (("runs/a/outcomes.csv", "runs/b/outcomes.csv"),
                 ("outcomes_a.csv", "outcomes_b.csv"), ("calibration.csv", "altered.csv")):
        _outcomes_csv(d / a, gains=False)
        _outcomes_csv(d / b, gains=True)
    for k in (1, 2, 3):
        _outcomes_csv(d / f"run{k}.csv", gains=k == 2)
    (d / "claims.csv").write_text("benchmark,tasks,samples,previous,new\n"
                                  "LIBERO,40,50,0.95,0.97\nSimplerEnv,4,24,0.5,0.8\n")
    state = np.zeros((10, 3))
    np.savez(d / "run1.npz", state=state, action=np.zeros((10, 2)))
    state[6:, 1] = 0.5  # the second run departs at step 6
    np.savez(d / "run2.npz", state=state, action=np.zeros((10, 2)))
    for name, src in (("my_task.bddl", 0), ("other.bddl", 1), ("task.bddl", 0)):
        shutil.copy(TASK_EXAMPLES[src], d / name)
    # long enough for a balanced clip set of every class (tests/test_cli_grounding.py: longer)
    generate_dataset(d / "DATASET", SyntheticConfig(length_scale=0.6, n_scenes=2,
                                                    episodes_per_scene=3, images=False), seed=1)
    return d


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return build_workdir(tmp_path_factory.mktemp("docs"))


@dataclass(frozen=True)
class DocRun:
    """A documented command the tests execute (tests/docs_commands.toml says how)."""

    command: str
    expect: str
    exit: int = 0
    creates: str | None = None
    before: tuple[str, ...] = ()
    slow: bool = False
    sim: bool = False
    # run smaller: (documented text, what runs instead) pairs applied to the command, e.g.
    # ("-n 50", "-n 1 --horizon 4"); `{port}` is the port of `serve`
    shrink: tuple[tuple[str, str], ...] = ()
    # a policy spec served on a loopback port (`robosafe serve-policy`) while the command runs,
    # standing for the documented GPU server
    serve: str | None = None


def docs_plan() -> tuple[list[DocRun], dict[str, str]]:
    """The commands run (with their checks) and the ones skipped (with the reason)."""
    data = tomllib.loads((ROOT / "tests" / "docs_commands.toml").read_text(encoding="utf-8"))
    runs = [DocRun(**{**e, "before": tuple(e.get("before", ())),
                      "shrink": tuple(tuple(pair) for pair in e.get("shrink", ()))})
            for e in data["run"]]
    skips = {e["command"]: e["reason"] for e in data["skip"]}
    return runs, skips


def test_every_documented_command_is_run_or_skipped_with_a_reason():
    runs, skips = docs_plan()
    planned = [r.command for r in runs] + list(skips)
    assert len(planned) == len(set(planned)), "a command is listed twice"
    documented = {c for _, c in documented_commands()}
    missing = sorted(f"{w}: {c}" for w, c in documented_commands() if c not in set(planned))
    assert not missing, ("add these to tests/docs_commands.toml ([[run]] with a check, or "
                         f"[[skip]] with the reason): {missing}")
    stale = sorted(set(planned) - documented)
    assert not stale, f"tests/docs_commands.toml lists commands no page shows: {stale}"
    assert all(reason.strip() for reason in skips.values())


def _optional_args_left_out(command: str) -> str:
    """`[--x y]` is the docs' notation for an optional argument (an unclosed one ends the
    line, where a `|` inside it cut the command)."""
    return re.sub(r"\s*\[[^\]]*(?:\]|$)", "", command)


def test_optional_args_are_left_out():
    assert _optional_args_left_out("robosafe a D [--cache i.parquet] --x 1 [--json]") == \
        "robosafe a D --x 1"
    assert _optional_args_left_out("robosafe g -o OUT [--task social") == "robosafe g -o OUT"


def _doc_run_params() -> list:
    return [pytest.param(r, id=r.command, marks=[m for flag, m in ((r.slow, pytest.mark.slow),
                                                                   (r.sim, pytest.mark.sim))
                                                 if flag])
            for r in docs_plan()[0]]


@pytest.mark.parametrize("doc", _doc_run_params())
def test_documented_command_runs(doc: DocRun, workdir, tmp_path):
    cwd = tmp_path / "w"
    shutil.copytree(workdir, cwd, symlinks=True)
    for step in doc.before:
        proc = _run(step, cwd)
        assert proc.returncode == 0, (step, proc.stderr)
    command = _optional_args_left_out(doc.command)
    with contextlib.ExitStack() as stack:
        port = stack.enter_context(_served(doc.serve)) if doc.serve else None
        for documented, instead in doc.shrink:
            assert documented in command, (documented, command)
            command = command.replace(documented, instead.replace("{port}", str(port)))
        proc = _run(command, cwd)
    assert proc.returncode == doc.exit, (command, proc.stdout[-2000:], proc.stderr)
    assert doc.expect in proc.stdout + proc.stderr, (doc.command, proc.stdout[-2000:])
    if doc.creates:
        assert (cwd / doc.creates).stat().st_size > 0, doc.creates


@contextlib.contextmanager
def _served(spec: str):
    """`robosafe serve-policy SPEC` on a free loopback port, until the block ends."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "robosafe", "serve-policy", spec,
                               "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, server.stderr.read()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the policy server did not start"
                time.sleep(0.2)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)


def _readme_block(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    part = text.split(f"## {title}", 1)[1]
    return re.search(r"```bash\n(.*?)```", part, flags=re.DOTALL).group(1)


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """As a user's shell runs it (globs, redirection), with this environment's robosafe."""
    # a fixed width: rich sizes its tables by the terminal, which differs between runners
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "COLUMNS": "160"}
    # its `robosafe` is forked from tests/cli_fork.py's preloaded parent, as run_robosafe's are
    env = cli_fork.shell_env(env)
    proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.mark.slow
def test_readme_scoring_quickstart_runs(workdir):
    commands = _commands(_readme_block("Quickstart: score rollouts you already have"))
    assert len(commands) == 5
    for c in commands:
        proc = _run(c, workdir)
        # the LeRobot conversion holds positions only: its episodes are unscored, said, exit 2
        assert proc.returncode == (2 if "lerobot" in c else 0), (c, proc.stderr)
        assert proc.stdout.strip() or "> metrics.json" in c, c
    # the shipped LIBERO-style archive: 240 episodes (scripts/make_examples.py)
    assert json.loads((workdir / "metrics.json").read_text())["aggregate"]["n"] == 240


@pytest.mark.slow
def test_readme_audit_quickstart_runs(workdir):
    commands = _commands(_readme_block("Quickstart: is a claimed gain real?"))
    assert len(commands) == 4
    outs = {(c.split()[1] if c.split()[1] == "compare" else c.split()[2]): _run(c, workdir)
            for c in commands}
    for c, proc in outs.items():
        assert proc.returncode == 0, (c, proc.stderr)
    assert "[77.73, 88.00]%" in outs["wilson"].stdout  # Wilson 167/200, by hand in tests_base
    # d = B - A: 2 of 4 instances per task gain 1. L = 6, Q = sum d^2 - sum_t L_t^2 / S
    # = 6 - 3 * 4 / 4 = 3, Z = L / sqrt(Q * S / (S - 1)) = 6 / 2 = 3 (App. C.1)
    assert "Z = 3.000" in outs["paired"].stdout
    assert "significant at alpha=0.05" in outs["paired"].stdout
    # the front door runs the same test: one-sided p = 1 - Phi(3) = 0.00135
    assert "paired on 12 instance(s) both finished" in outs["compare"].stdout
    assert "0.00135 B better" in outs["compare"].stdout
    assert "not reported: safety: A (runs/a/outcomes.csv) has no safety judgement" \
        in outs["compare"].stdout


@pytest.mark.slow
def test_readme_python_snippet_runs(workdir):
    code = re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(),
                     flags=re.DOTALL).group(1)
    proc = subprocess.run([sys.executable, "-c", code], cwd=workdir, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    # one cell per policy of the example file (6 episodes each): 5 and 3 of 6 succeed, read from
    # the file's own success fields
    wins: dict[str, list[bool]] = {}
    for line in (workdir / "rollouts.jsonl").read_text().splitlines():
        rec = json.loads(line)
        wins.setdefault(rec["policy"], []).append(bool(rec["success"]))
    assert [ln.split()[:2] for ln in lines[:2]] == [
        [p, repr(sum(w) / len(w))] for p, w in sorted(wins.items())]
    assert [ln.split()[1] for ln in lines[:2]] == ["0.8333333333333334", "0.5"]
    assert lines[2].startswith("Interval(low=0.7773")


def test_counts_in_the_guides_are_the_sources_counts():
    """A number the guides state about the code or a generated page is checked against it."""
    from robosafe.sim.assets import categories

    sim = (ROOT / "docs/guide/simulator.md").read_text()
    (n,) = re.findall(r"asset library \((\d+) categories", sim)
    assert int(n) == len(categories())
    parity = (ROOT / "docs/vla_arena_parity.md").read_text()
    got = re.search(r"both can run: \*\*(\d+) of (\d+)\*\*; rest: (\d+) of (\d+); touch: (\d+) of "
                    r"(\d+); pick-place: (\d+) of (\d+)\.", parity)
    guide = " ".join((ROOT / "docs/guide/vla-arena.md").read_text().split())
    said = re.search(r"\*\*(\d+) of (\d+)\*\* pairs both can run \(rest (\d+) of (\d+), touch "
                     r"(\d+) of (\d+), pick-place (\d+) of (\d+);", guide)
    assert got and said and said.groups() == got.groups()
