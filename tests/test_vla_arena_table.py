"""The suites README's table of VLA-Arena's 170 files is the one `scripts/vla_arena_table.py`
computes from its per-file CSV (docs/vla_arena_files.csv): the two cannot drift apart, and the
CSV covers every file of the shipped folder."""

from __future__ import annotations

import csv
from pathlib import Path

from test_examples import load_script
from test_vla_arena_files import FILES, needs_files

ROOT = Path(__file__).resolve().parents[1]


def _script():
    return load_script("vla_arena_table")


def test_readme_table_is_the_csv_summed():
    mod = _script()
    rows = list(csv.DictReader(mod.CSV.open()))
    assert len(rows) == 170
    assert mod.table(rows) in mod.README.read_text()
    # the totals quoted in the VLA-Arena guide are the table's
    tot = {k: sum(int(r[k]) for r in rows) for k in mod.COUNTED}
    readme = " ".join((ROOT / "docs" / "guide" / "vla-arena.md").read_text().split())
    assert (f"All 170 files check; {tot['build']} build and reset with the stand-ins "
            f"({tot['build_libero']} with LIBERO's meshes)") in readme
    assert f"`scripted-careful` solves {tot['solved']} in one" in readme


@needs_files
def test_csv_lists_every_shipped_file():
    rows = list(csv.DictReader(_script().CSV.open()))
    assert sorted(r["file"] for r in rows) == sorted(p.name for p in FILES)
