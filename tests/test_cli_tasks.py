"""`robosafe tasks` commands as real processes."""

import json
import os
from pathlib import Path

import pytest
from conftest import run_robosafe as run
from factories import TASK_EXAMPLES

from robosafe.tasks import parse_file, parse_task
from robosafe.tasks.language import semantic_slots

EXAMPLES = TASK_EXAMPLES


def test_check_examples():
    proc = run("tasks", "check", *map(str, EXAMPLES), "--json")
    assert proc.returncode == 0, proc.stderr
    data = {Path(r["file"]).name: r for r in json.loads(proc.stdout)}
    every = data["every_block.bddl"]["summary"]
    assert {t["timing"] for t in every["cost_terms"]} == {"instantaneous", "terminal"}
    assert sorted(every["moving_objects"].values()) == ["circular", "linear", "projectile",
                                                        "waypoint"]
    assert every["perturbations"]["noise"]["kind"] in ("gaussian", "salt_pepper")


def test_check_reports_line_and_column(tmp_path):
    bad = tmp_path / "bad.bddl"
    text = EXAMPLES[-1].read_text().replace("(On ", "(On ghost_1 ", 1).replace(
        "(On ghost_1 ", "(Up ghost_1) (On ", 1)
    bad.write_text(text)
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "ghost_1" in ln)
    proc = run("tasks", "check", str(bad), str(EXAMPLES[0]))
    assert proc.returncode == 2
    assert f"bad.bddl:{line}:" in proc.stderr and "ghost_1" in proc.stderr
    assert EXAMPLES[0].name in proc.stdout  # the valid file is still summarised
    unparsable = tmp_path / "u.bddl"
    unparsable.write_text("(define (problem x)\n  (:objects a - b\n")
    proc = run("tasks", "check", str(unparsable))
    assert proc.returncode == 2 and "u.bddl:" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_fmt_round_trips_and_writes(tmp_path):
    for path in EXAMPLES:
        out = run("tasks", "fmt", str(path)).stdout
        assert parse_task(out) == parse_file(path)
    copy = tmp_path / "x.bddl"
    copy.write_text(EXAMPLES[0].read_text())
    assert run("tasks", "fmt", str(copy), "--write", "--drop-comments").returncode == 0
    assert copy.read_text() == run("tasks", "fmt", str(EXAMPLES[0])).stdout


@pytest.mark.slow
def test_fmt_write_refuses_to_drop_comments(tmp_path):
    body = "; header\n(define (problem t) ; the name\n  (:domain robosuite)\n" \
           "  (:language pick ; not part of the text\n it up)\n  (:objects a b - thing)\n" \
           "  (:goal (On a b)))\n"
    path = tmp_path / "c.bddl"
    path.write_text(body)
    proc = run("tasks", "fmt", str(path), "--write")
    assert proc.returncode == 2 and path.read_text() == body  # untouched
    assert proc.stderr == (f"robosafe: error: {path}: not rewritten: fmt would drop its 3 ';' "
                           "comment(s) (first on line 1); pass --drop-comments to rewrite it "
                           "anyway\n")
    printed = run("tasks", "fmt", str(path))
    assert printed.returncode == 0 and ";" not in printed.stdout
    assert printed.stderr == (f"robosafe: warning: {path}: the canonical form drops 3 ';' "
                              "comment(s) (first on line 1)\n")
    assert json.loads(run("tasks", "fmt", str(path), "--json").stdout)["comments_dropped"] == 3
    no_comments = tmp_path / "n.bddl"
    no_comments.write_text(printed.stdout)
    proc = run("tasks", "fmt", str(no_comments), "--write")
    assert proc.returncode == 0 and proc.stderr == ""
    assert run("tasks", "fmt", str(path), "--write", "--drop-comments").returncode == 0
    assert path.read_text() == printed.stdout


@pytest.mark.slow
def test_perturb_language_is_deterministic(tmp_path):
    path = next(p for p in EXAMPLES if p.name == "libero_pick_place.bddl")
    a = json.loads(run("tasks", "perturb-language", str(path), "--language-level", "2", "--seed",
                       "5", "-n", "3", "--json").stdout)
    b = json.loads(run("tasks", "perturb-language", str(path), "--language-level", "2", "--seed",
                       "5", "-n", "3", "--json").stdout)
    assert a == b and len(a) == 3 and len({v["text"] for v in a}) == 3
    assert all(len(v["substitutions"]) == 2 for v in a)
    short = tmp_path / "short.bddl"
    short.write_text(path.read_text().replace(parse_file(path).language, "Pick up the bowl"))
    slots = len(semantic_slots("Pick up the bowl"))
    proc = run("tasks", "perturb-language", str(short), "--language-level", str(slots + 1))
    assert proc.returncode == 2 and f"has {slots} substitutable slot" in proc.stderr


def test_fmt_json_reports_changes(tmp_path):
    copy = tmp_path / "x.bddl"
    copy.write_text(EXAMPLES[0].read_text() + "\n; trailing comment\n")
    out = json.loads(run("tasks", "fmt", str(copy), "--json").stdout)
    assert out["changed"] and parse_task(out["text"]) == parse_file(copy)


CROWDED = """
(define (problem Crowded)
  (:domain robosuite)
  (:language put a plate on the other)
  (:regions (spot (:target main_table) (:ranges ((0.0 0.0 0.0 0.0)))))
  (:fixtures main_table - table)
  (:objects plate_1 plate_2 - plate)
  (:init (On plate_1 main_table_spot) (On plate_2 main_table_spot))
  (:goal (And (On plate_1 plate_2)))
)
"""


@pytest.mark.sim
def test_check_build_builds_and_resets_each_valid_file_and_names_one_that_cannot(tmp_path):
    """--build: what a run needs. Two plates in one point region validate but cannot both be
    placed: one error line naming the file, exit 2, the other file still built."""
    good = next(p for p in EXAMPLES if p.name == "libero_pick_place.bddl")
    crowded = tmp_path / "crowded.bddl"
    crowded.write_text(CROWDED)
    egl = {**os.environ, "MUJOCO_GL": "egl"}
    proc = run("tasks", "check", "--build", "--json", str(crowded), str(good), env=egl)
    assert proc.returncode == 2
    built = {Path(r["file"]).name: r["built"] for r in json.loads(proc.stdout)}
    assert built == {"crowded.bddl": False, "libero_pick_place.bddl": True}
    errors = [ln for ln in proc.stderr.splitlines() if "error" in ln]
    assert len(errors) == 1 and "crowded.bddl" in errors[0], proc.stderr
    assert "cannot place plate_2" in errors[0]
    proc = run("tasks", "check", "--build", str(good), env=egl)
    assert proc.returncode == 0 and "libero_pick_place.bddl: ok, built and reset" in proc.stdout
