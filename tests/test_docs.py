"""The README and the docs site: the site builds strictly, the CLI reference is what the app
says, every `robosafe` command written in README.md or docs/ names a real command and real
options, and the README's quickstarts run on small inputs."""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import typer

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


# ------------------------------------------------------------------ the README, executed

@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """The files the README's quickstarts name, made small."""
    from robosafe.formats.lerobot import DatasetWriter

    d = tmp_path_factory.mktemp("readme")
    ex = {p.suffix: p for p in example_paths()}
    shutil.copy(ex[".jsonl"], d / "rollouts.jsonl")
    (d / "runs").mkdir()
    shutil.copy(ex[".parquet"], d / "runs" / "libero.parquet")
    feats = {"observation.state": {"dtype": "float32", "shape": [8], "names": None},
             "action": {"dtype": "float32", "shape": [7], "names": None},
             "next.success": {"dtype": "bool", "shape": [1], "names": None}}
    w = DatasetWriter(d / "path" / "to" / "lerobot_dataset", fps=10, features=feats)
    for ok in (True, False):
        w.add_episode({"observation.state": np.zeros((20, 8), np.float32),
                       "action": np.zeros((20, 7), np.float32),
                       "next.success": np.r_[np.zeros(19, bool), [ok]]}, task="pick the bowl")
    w.close()
    # outcome tables of a baseline A and a new policy B on the same 3 tasks x 4 instances:
    # B succeeds on every instance A fails, and nowhere else differs
    for name, extra in (("a", 0), ("b", 1)):
        (d / "runs" / name).mkdir()
        with open(d / "runs" / name / "outcomes.csv", "w", newline="") as fh:
            wr = csv.writer(fh)
            wr.writerow(["suite", "task_id", "instance_id", "success"])
            for t in range(3):
                for i in range(4):
                    wr.writerow(["demo", f"t{t}", f"seed{i}", int(i < 2 or extra)])
    return d


def _readme_block(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    part = text.split(f"## {title}", 1)[1]
    return re.search(r"```bash\n(.*?)```", part, flags=re.DOTALL).group(1)


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """As a user's shell runs it (globs, redirection), with this environment's robosafe."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_readme_scoring_quickstart_runs(workdir):
    commands = _commands(_readme_block("Quickstart: score rollouts you already have"))
    assert len(commands) == 4
    for c in commands:
        proc = _run(c, workdir)
        # the LeRobot conversion holds positions only: its episodes are unscored, said, exit 2
        assert proc.returncode == (2 if "lerobot" in c else 0), (c, proc.stderr)
        assert proc.stdout.strip() or "> metrics.json" in c, c
    # the shipped LIBERO-style archive: 240 episodes (scripts/make_examples.py)
    assert json.loads((workdir / "metrics.json").read_text())["aggregate"]["n"] == 240


def test_readme_audit_quickstart_runs(workdir):
    commands = _commands(_readme_block("Quickstart: is a claimed gain real?"))
    assert len(commands) == 3
    outs = {c.split()[2]: _run(c, workdir) for c in commands}
    for c, proc in outs.items():
        assert proc.returncode == 0, (c, proc.stderr)
    assert "[77.73, 88.00]%" in outs["wilson"].stdout  # Wilson 167/200, by hand in tests_base
    # d = B - A: 2 of 4 instances per task gain 1. L = 6, Q = sum d^2 - sum_t L_t^2 / S
    # = 6 - 3 * 4 / 4 = 3, Z = L / sqrt(Q * S / (S - 1)) = 6 / 2 = 3 (App. C.1)
    assert "Z = 3.000" in outs["paired"].stdout
    assert "significant at alpha=0.05" in outs["paired"].stdout


def test_readme_python_snippet_runs(workdir):
    code = re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(),
                     flags=re.DOTALL).group(1)
    proc = subprocess.run([sys.executable, "-c", code], cwd=workdir, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[0] == "0.6666666666666666"  # 8 of the 12 example episodes succeed
    assert lines[1].startswith("Interval(low=0.7773")
