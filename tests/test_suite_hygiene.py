"""Rules for the test suite itself: the robosafe command line runs through one helper
(conftest.run_robosafe), so what every CLI test must check (no traceback) is checked once."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# Starting the CLI and waiting for it is the helper's job; Popen (a server, a run killed midway)
# stays with the tests that need a process they can signal.
WAITING_CALLS = {"run", "check_output", "check_call", "call"}


def _is_robosafe_argv(node: ast.expr) -> bool:
    """[sys.executable, "-m", "robosafe", ...] written out as a list."""
    if not isinstance(node, ast.List) or len(node.elts) < 3:
        return False
    exe, flag, mod = node.elts[:3]
    return (ast.unparse(exe) == "sys.executable"
            and isinstance(flag, ast.Constant) and flag.value == "-m"
            and isinstance(mod, ast.Constant) and mod.value == "robosafe")


def own_cli_runs(source: str) -> list[int]:
    """Lines where `source` runs `python -m robosafe` through subprocess and waits for it."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in WAITING_CALLS
                and ast.unparse(node.func.value) == "subprocess"
                and node.args and _is_robosafe_argv(node.args[0])):
            lines.append(node.lineno)
    return lines


def test_no_test_file_runs_the_cli_its_own_way():
    # cli_fork's own test compares its forked commands with plain subprocesses
    offenders = [f"{p.name}:{line}" for p in sorted(TESTS.glob("*.py"))
                 if p.name not in ("conftest.py", "test_cli_fork.py")
                 for line in own_cli_runs(p.read_text(encoding="utf-8"))]
    assert not offenders, (f"use run_robosafe / the cli fixture from tests/conftest.py instead "
                           f"of subprocess at {offenders}")


def test_the_check_finds_a_private_helper():
    """Guards the check above with the helper files used to define, and passes Popen."""
    private = ('import subprocess, sys\n'
               'def run(*args):\n'
               '    return subprocess.run([sys.executable, "-m", "robosafe", *args],\n'
               '                          capture_output=True, text=True)\n')
    assert own_cli_runs(private) == [3]
    server = 'import subprocess, sys\np = subprocess.Popen([sys.executable, "-m", "robosafe"])\n'
    assert own_cli_runs(server) == []


def test_spread_names_files_and_functions_that_exist():
    """conftest.SPREAD is matched against node ids by name: a renamed file or function would
    silently hand shared-result tests to different workers."""
    from conftest import SPREAD, xdist_scope

    for file, together in SPREAD.items():
        tree = ast.parse((TESTS / file).read_text(encoding="utf-8"))
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert set(together) <= defined, (file, set(together) - defined)
    assert xdist_scope("tests/test_cli.py::test_a[1]") == "tests/test_cli.py"
    assert xdist_scope("tests/test_suite_safety_b.py::test_b[x]") == \
        "tests/test_suite_safety_b.py::test_b[x]"
    assert xdist_scope("tests/test_suite_safety_a.py::test_l0_careful_table") == \
        xdist_scope("tests/test_suite_safety_a.py::test_l0_careful_succeeds_cleanly[k]")
