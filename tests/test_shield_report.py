"""A shielded run against its unshielded baseline, on real runs of robosafe's simulator: the
numbers `score`, `results compare` and the HTML report print, worked out here from the runs'
outcome rows by hand; and the shield's bad-input lines.

Two demo tasks x seeds 0-2 with ``scripted-careless`` for 52 steps, once without a shield and
once with ``--shield filter``. At 52 steps the careless policy knocks the vase on seed 1 only and
the mug on every seed, so the paired Safety differences vary within a task (the Wald variance
is not 0).
"""

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from robosafe.cli import app
from robosafe.stats.intervals import wilson_interval, z_value
from robosafe.stats.shield import ShieldEpisode, shield_side

TASKS = ("place_apple_on_plate_past_vase", "place_lemon_in_bowl")
RUN = ["--suite", "demo", "--policy", "scripted-careless", "--seeds", "0-2", "-n", "3",
       "--horizon", "52", "-j", "1", *(x for t in TASKS for x in ("--task-id", t))]


def _cli(*args: str):
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    pytest.importorskip("mujoco")
    root = tmp_path_factory.mktemp("shield-runs")
    out = {"off": root / "off", "filter": root / "filter"}
    _cli("run", *RUN, "--out", str(out["off"]))
    _cli("run", *RUN, "--out", str(out["filter"]), "--shield", "filter")
    return out


def _rows(run: Path) -> dict[tuple, dict]:
    rows = [json.loads(p.read_text()) for p in sorted((run / "outcomes").glob("*.json"))]
    return {(r["suite"], r["task_id"], r["instance_id"]): r for r in rows}


class Hand:
    """What the comparison must say, from the two runs' rows."""

    def __init__(self, runs: dict[str, Path]):
        a, b = _rows(runs["off"]), _rows(runs["filter"])
        assert a.keys() == b.keys() and len(a) == 6
        self.safety_a = sum(int(r["safe"]) for r in a.values()) / 6
        self.safety_b = sum(int(r["safe"]) for r in b.values()) / 6
        self.sr_b = sum(int(r["success"]) for r in b.values()) / 6
        counts = [int(r["interventions"]) for r in b.values()]
        self.interventions = sum(counts) / len(counts)
        self.interventions_total = sum(counts)
        assert not any("interventions" in r for r in a.values())  # no shield, no count
        # paired differences of Safety, per task (S = 3 seeds each)
        diffs = {t: [int(b[k]["safe"]) - int(a[k]["safe"]) for k in sorted(a) if k[1] == t]
                 for t in TASKS}
        self.diff = sum(sum(d) for d in diffs.values()) / 6  # the per-pair mean
        # App. C.1: V = sum_t (s_t - d_t^2 / S) / (T^2 S (S - 1)), T = 2, S = 3
        q = sum(sum(x * x for x in d) - sum(d) ** 2 / 3 for d in diffs.values())
        self.stderr = math.sqrt(q / (4 * 3 * 2))


@pytest.fixture(scope="module")
def hand(runs) -> Hand:
    h = Hand(runs)
    assert h.stderr > 0, "the design must not be degenerate"
    assert h.safety_a < 1.0 and h.safety_b == 1.0  # the filter keeps the careless policy safe
    return h


def test_score_keeps_both_runs_and_compares_them_paired(runs, hand):
    res = _cli("score", str(runs["off"]), str(runs["filter"]), "--json", "--bootstrap", "200")
    out = json.loads(res.stdout)
    # the shielded run's episodes are not "read twice" (same policy, tasks, seeds, cell names)
    cells = {c["shield"]: c for c in out["cells"]}
    assert out["group_by"] == ["benchmark", "policy", "shield"]
    assert cells["off"]["n"] == cells["filter"]["n"] == 6
    assert cells["off"]["safety"] == pytest.approx(hand.safety_a)
    (c,) = out["shield_comparisons"]
    assert (c["baseline"]["mode"], c["shielded"]["mode"]) == ("off", "filter")
    assert c["baseline"]["interventions"] is None
    assert c["shielded"]["interventions"] == pytest.approx(hand.interventions)
    assert c["shielded"]["interventions_total"] == hand.interventions_total
    assert c["shielded"]["safety"] == pytest.approx(hand.safety_b)
    assert c["shielded"]["sr"] == pytest.approx(hand.sr_b)
    safe = c["tests"]["safe"]
    assert (safe["design"], safe["n_paired"], safe["tasks"], safe["samples"]) == (
        "paired", 6, 2, 3)
    assert safe["difference"] == pytest.approx(hand.diff)
    half = z_value(0.95) * hand.stderr
    assert safe["ci"] == pytest.approx([hand.diff - half, hand.diff + half])
    # the printed table: both modes and the interventions per episode
    text = _cli("score", str(runs["off"]), str(runs["filter"]), "--table", "main",
                "--bootstrap", "200").stdout
    assert "[off]" in text and "[filter]" in text
    assert f"{hand.interventions:.2f}" in text


def test_results_compare_shows_each_sides_shield(runs, hand, tmp_path):
    db = str(tmp_path / "r.duckdb")
    _cli("results", "ingest", str(runs["off"]), str(runs["filter"]), "--db", db)
    out = json.loads(_cli("results", "compare", "off", "filter", "--metric", "safe",
                          "--db", db, "--json").stdout)
    assert out["shield"] == {"a": "off", "b": "filter"}
    assert out["design"] == "paired" and out["n_paired"] == 6
    assert out["difference"] == pytest.approx(hand.diff)
    ipe = out["interventions_per_episode"]
    assert ipe["a"]["mean"] is None
    assert ipe["b"]["mean"] == pytest.approx(hand.interventions)
    assert ipe["b"]["total"] == hand.interventions_total
    text = _cli("results", "compare", "off", "filter", "--metric", "safe", "--db", db).stdout
    assert "shield (run.json)" in text and "filter" in text
    listed = {r["run_id"]: r for r in json.loads(
        _cli("results", "list", "--db", db, "--json").stdout)["runs"]}
    assert listed["filter"]["shield"] == "filter" and listed["off"]["shield"] == "off"
    assert listed["filter"]["interventions_per_episode"] == pytest.approx(hand.interventions)


def test_report_has_the_shield_section(runs, hand, tmp_path):
    from test_report_html import Page

    out = tmp_path / "r.html"
    _cli("report", str(runs["off"]), str(runs["filter"]), "--out", str(out),
         "--bootstrap", "200")
    page = Page(out.read_text(encoding="utf-8"))
    head, base, shielded = page.tables["shield-table"]
    assert [c[0] for c in head][:2] == ["run", "shield"]
    assert (base[0][0], base[1][0]) == ("off", "off")
    assert (shielded[0][0], shielded[1][0]) == ("filter", "filter")
    cells = {c[1].get("data-metric"): c[1] for c in shielded if c[1].get("data-metric")}
    assert float(cells["interventions"]["data-value"]) == pytest.approx(hand.interventions)
    assert float(cells["safety"]["data-value"]) == pytest.approx(hand.safety_b)
    assert float(cells["safety_diff"]["data-value"]) == pytest.approx(hand.diff)
    half = z_value(0.95) * hand.stderr
    assert float(cells["safety_diff"]["data-low"]) == pytest.approx(hand.diff - half)
    # the shield mode in the runs and main tables
    for table in ("runs-table", "main-table"):
        rows = {r[0][0]: r for r in page.tables[table][1:]}
        assert rows["filter"][2][0] == "filter" and rows["off"][2][0] == "off"


def test_a_task_without_a_monitorable_spec_is_one_line(tmp_path, monkeypatch):
    """Every task of robosafe's simulator has monitorable specs (joint torque, contact force),
    so the case is made by declaring no spec monitorable: one line naming the task, exit 2,
    nothing created."""
    from robosafe.safety import online

    monkeypatch.setattr(online, "monitorable", lambda spec: False)
    res = CliRunner().invoke(app, ["run", "--suite", "demo", "--task-id", TASKS[0],
                                   "--policy", "zero", "--shield", "monitor",
                                   "--out", str(tmp_path / "r")])
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and TASKS[0] in lines[0] and "no active safety spec" in lines[0]
    assert not (tmp_path / "r").exists()


def test_side_denominators_by_hand():
    """SR over known success, Safety over judged episodes, SBU over both known, interventions
    over the episodes that report a count: each has its own denominator."""
    eps = [ShieldEpisode("s", "t", "i0", "e0", True, True, 0.0, 2),
           ShieldEpisode("s", "t", "i1", "e1", False, None, None, None),
           ShieldEpisode("s", "t", "i2", "e2", None, False, 0.5, 4),
           ShieldEpisode("s", "t", "i3", "e3", True, False, 1.0, 0)]
    side = shield_side("run", "filter", eps, n_boot=0)
    assert (side.n, side.n_scored) == (4, 3)
    assert side.sr == 2 / 3 and side.sr_ci == wilson_interval(2, 3).as_list()
    assert side.safety == 1 / 3
    assert side.sbu == 1 / 2  # e3 of (e0, e3): e2's success is unknown
    assert side.vsi == pytest.approx(0.5)
    assert (side.interventions, side.interventions_total) == (2.0, 6)
    assert side.interventions_ci is None  # n_boot=0: no bootstrap
