"""One CLI grammar: the same option spelling means the same thing on every command, and renamed
spellings keep working for one release with one warning line naming the new one."""

import json
import os

import pytest
import typer
from conftest import run_robosafe as run
from factories import TASK_EXAMPLES

from robosafe.cli import app
from robosafe.cli.common import resolve_workers
from robosafe.cli.suites import _check_seeds


def _commands():
    """(path, click command) for every leaf command of the app."""
    out = []

    def walk(cmd, path):
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])
        else:
            out.append((" ".join(path), cmd))

    walk(typer.main.get_command(app), [])
    return out


def _options(cmd):
    return {o: p for p in cmd.params if not getattr(p, "hidden", False)
            for o in [*p.opts, *p.secondary_opts] if o.startswith("-")}


def test_every_command_spells_shared_options_one_way():
    commands = _commands()
    assert len(commands) > 30
    for path, cmd in commands:
        opts = _options(cmd)
        args = [p.name for p in cmd.params
                if p.param_type_name == "argument" and not getattr(p, "hidden", False)]
        assert "out" not in args, f"{path}: OUT must be -o/--out, not positional"
        for long, short in (("--episodes", "-n"), ("--workers", "-j"), ("--out", "-o")):
            if long in opts:
                assert short in opts and opts[short] is opts[long], f"{path}: {long} lacks {short}"
        if "--workers" in opts:
            assert opts["--workers"].default == 0, f"{path}: --workers default is not 0 (auto)"
        for short, owners in (("-n", {"episodes", "n"}), ("-o", {"out"}), ("-j", {"workers"})):
            if short in opts:
                assert opts[short].name in owners, f"{path}: {short} means {opts[short].name}"
        assert "--n" not in opts, path
        if "-l" in opts or "--level" in opts:
            # suite levels only: 0..2
            assert opts["--level"].max == 2, f"{path}: --level is not a suite level"


def test_commands_that_print_numbers_have_json():
    lacking = [path for path, cmd in _commands() if "--json" not in _options(cmd)]
    # report writes an HTML file and prints only its path
    assert lacking == ["report"]


def test_auto_workers_is_one_per_two_cores(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert resolve_workers(0) == 4 and resolve_workers(3) == 3
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert resolve_workers(0) == 1
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert resolve_workers(0) == 1


def _task():
    return next(p for p in TASK_EXAMPLES if p.name == "libero_pick_place.bddl")


def test_perturb_language_old_spellings_warn_and_agree():
    task = str(_task())
    new = run("tasks", "perturb-language", task, "--language-level", "2", "-n", "3", "--json")
    old = run("tasks", "perturb-language", task, "--level", "2", "--n", "3", "--json")
    assert new.returncode == old.returncode == 0 and new.stderr == ""
    assert json.loads(old.stdout) == json.loads(new.stdout)
    assert all(v["level"] == 2 for v in json.loads(new.stdout))
    warnings = old.stderr.splitlines()
    assert len(warnings) == 2
    assert "--level is deprecated" in warnings[0] and "use --language-level" in warnings[0]
    assert "--n is deprecated" in warnings[1] and "use -n/--variants" in warnings[1]


def test_old_and_new_spelling_with_different_values_is_a_usage_error():
    proc = run("tasks", "perturb-language", str(_task()), "--level", "2", "--language-level", "3")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == ("robosafe: error: --level and --language-level are "
                                            "the same option; give only --language-level")


@pytest.mark.slow
def test_positional_out_still_works_with_a_warning(tmp_path):
    # --size 4000 is refused before anything is written: the spelling is checked first
    old = run("grounding", "generate", str(tmp_path / "x"), "--size", "4000")
    new = run("grounding", "generate", "-o", str(tmp_path / "x"), "--size", "4000")
    assert old.returncode == new.returncode == 2
    first, *rest = old.stderr.splitlines()
    assert "OUT as a positional argument is deprecated" in first and "use -o/--out OUT" in first
    assert rest == new.stderr.splitlines()
    missing = run("export", "lerobot", str(tmp_path))
    assert missing.returncode == 2
    assert missing.stderr.strip() == "robosafe: error: missing option -o/--out"


def test_suites_check_seeds_is_a_list_and_num_seeds_the_count(capsys):
    assert _check_seeds(None, 3) == (0, 1, 2)
    assert _check_seeds("4,7", 2) == (4, 7)
    assert _check_seeds("10-12", 2) == (10, 11, 12)
    assert capsys.readouterr().err == ""
    assert _check_seeds("2", 5) == (0, 1)  # the old count meaning, for one release
    err = capsys.readouterr().err.strip()
    assert err.startswith("robosafe: warning: --seeds 2 as a count is deprecated; use "
                          "--num-seeds 2")
    with pytest.raises(typer.Exit):
        _check_seeds("0", 2)
