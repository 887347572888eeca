"""Terminal tables: identifiers are never cut short, and piped output respects COLUMNS."""

import io
import os
import sys

import pytest
from conftest import run_robosafe
from rich.console import Console

from robosafe.report.tables import _table, table_width

A = "PickPlaceCounterToStove_with_a_long_suffix"
B = "PickPlaceCounterToSink_with_a_long_suffix"


def test_long_task_ids_fold_instead_of_ending_in_an_ellipsis():
    t = _table("t", ["task_id"], ["n", "SR", "Safety"])
    t.add_row(A, "6", "50.0 [18.8, 81.2]", "83.3 [43.6, 97.0]")
    t.add_row(B, "6", "83.3 [43.6, 97.0]", "83.3 [43.6, 97.0]")
    buf = io.StringIO()
    Console(file=buf, width=40).print(t)
    text = buf.getvalue()
    assert "…" not in text
    lines = text.splitlines()
    assert max(map(len, lines)) <= 40
    # the first column's pieces, read down, give back each name whole
    first = "".join(line.split("│")[1].strip() for line in lines if line.startswith("│"))
    assert A in first and B in first


def test_table_width_respects_columns(monkeypatch):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    monkeypatch.setenv("COLUMNS", "100")
    assert table_width() is None  # rich reads COLUMNS itself
    monkeypatch.delenv("COLUMNS")
    assert table_width() == 200
    monkeypatch.setenv("COLUMNS", "wide")  # not a number: ignored, as rich ignores it
    assert table_width() == 200


@pytest.mark.slow
def test_piped_score_tables_fit_columns():
    def widest(env):
        proc = run_robosafe("score", "--example", "--group-by", "task_id", "--bootstrap", "0",
                            env=env)
        assert proc.returncode == 0, proc.stderr
        assert "…" not in proc.stdout
        return max(map(len, proc.stdout.splitlines()))

    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    assert widest({**env, "COLUMNS": "100"}) == 100
    assert 100 < widest(env) <= 200
