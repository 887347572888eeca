"""``robosafe report``: the HTML report of run directories, its numbers, and how it renders in a
real headless browser (Debian chromium).

Run directories are built here from synthetic traces (no simulator): two policies on the same
instances, one with a crashed episode, plus the first policy again at language level W1.
"""

import base64
import dataclasses
import io
import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from conftest import run_robosafe
from PIL import Image
from statsmodels.stats.proportion import proportion_confint

from robosafe.runner.rundir import Cell, create_run
from robosafe.safety.score import score_files
from robosafe.trace.io import write_episodes
from robosafe.trace.synthetic import PROFILES, synthesize_episode

CHROMIUM = "/usr/bin/chromium"
TASKS = ("task_0", "task_1")
EPISODES = 5
TITLE = "Careful vs careless <b>&</b> \"W1\""


def make_run(root: Path, name: str, profile: str, *, w: int = 0, v: int = 0,
             crash: tuple[str, int] | None = None) -> Path:
    run = create_run(root / name, {"policy": profile, "policy_name": profile,
                                   "suite": "libero-spatial"}, {})
    (run.path / "traces").mkdir(exist_ok=True)
    for ti, task in enumerate(TASKS):
        for k in range(EPISODES):
            cell = Cell(task, k, 100 + k, w, v)
            row = {"suite": "libero-spatial", "task_id": task, "task_name": task,
                   "episode_idx": k, "instance_id": cell.instance_id, "policy_name": profile,
                   "seed": cell.seed, "language_level": w, "visual_level": v}
            if crash == (task, k):
                run.write_outcome(cell, {**row, "success": 0, "num_env_steps": 3,
                                         "error_type": "RuntimeError",
                                         "error": "MuJoCo <unstable> & diverged"})
                continue
            # Same generator key for both policies: the same instances, different profiles.
            rng = np.random.default_rng([k, ti, w, v, sorted(PROFILES).index(profile)])
            ep = synthesize_episode(rng, benchmark="libero-spatial", task_id=task,
                                    episode_id=cell.name, profile=PROFILES[profile],
                                    n_steps=100, seed=cell.seed)
            ep = dataclasses.replace(ep, instance_id=cell.instance_id)
            write_episodes(run.trace_path(cell), [ep])
            run.write_outcome(cell, {**row, "success": int(ep.success), "error_type": "",
                                     "num_env_steps": 99,
                                     "cumulative_cost": float(rng.integers(0, 6))})
    return run.path


def add_until_record(baseline: Path, run: Path) -> None:
    """``run`` as if made with ``robosafe run --until decided --against baseline`` on success
    (one-sided, budget 10): its stopping record computed by runner.until from its rows."""
    from robosafe.runner.rundir import open_run
    from robosafe.runner.until import Tracker, UntilPlan, write_record
    from robosafe.stats.ordered import order_records

    rd = open_run(run)
    plan = UntilPlan("decided", 10, "success", 0.05, against=str(baseline), two_sided=False)
    base = [(str(i), r) for i, r in enumerate(open_run(baseline).outcomes())]
    cells = [Cell.of_row(r) for r in rd.outcomes()]
    tracker = Tracker(plan, rd, cells, {"success": order_records(str(baseline), base, False,
                                                                 "success", "episode")})
    write_record(rd, tracker.record())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    out = [make_run(root, "careful", "steady-policy"),
           make_run(root, "careless", "fast-policy", crash=("task_1", 2)),
           make_run(root, "careful-w1", "steady-policy", w=1)]
    add_until_record(out[0], out[1])
    return out


@pytest.fixture(scope="module")
def report(runs, tmp_path_factory):
    from robosafe.report.html import write_report

    out = tmp_path_factory.mktemp("report") / "sub" / "report.html"
    assert write_report(runs, out, title=TITLE) == out
    return out


class Page(HTMLParser):
    """Tables by id (rows of (text, attrs) cells), images, every attribute, tag names."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[tuple[str, dict]]]] = {}
        self.imgs: list[dict] = []
        self.attrs: list[tuple[str, str, str]] = []
        self.tags: list[str] = []
        self.title = ""
        self._table = self._row = self._cell = None
        self._in_title = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        self.attrs += [(tag, k, v or "") for k, v in attrs]
        if tag == "table":
            self._table = self.tables.setdefault(a.get("id", f"#{len(self.tables)}"), [])
        elif tag == "tr" and self._table is not None:
            self._row = []
            self._table.append(self._row)
        elif tag in ("td", "th") and self._row is not None:
            self._cell = ["", a]
        elif tag == "img":
            self.imgs.append(a)
        elif tag == "title":
            self._in_title = True

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append((self._cell[0].strip(), self._cell[1]))
            self._cell = None
        elif tag == "table":
            self._table = None
        elif tag == "title":
            self._in_title = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[0] += data
        if self._in_title:
            self.title += data


@pytest.fixture(scope="module")
def page(report):
    return Page(report.read_text(encoding="utf-8"))


def by_run(table):
    header = [c[0] for c in table[0]]
    return {row[0][0]: dict(zip(header, row)) for row in table[1:]}


def wilson(k, n):
    return proportion_confint(k, n, alpha=0.05, method="wilson")


def bootstrap(x, n_boot=10_000, seed=0):
    x = np.asarray(x, float)
    idx = np.random.default_rng(seed).integers(0, len(x), size=(n_boot, len(x)))
    return np.quantile(x[idx].mean(axis=1), [0.025, 0.975])


def hand_counts(run: Path):
    """Everything the main table shows, from the outcome rows and the traces by hand."""
    import json

    rows = [json.loads(p.read_text()) for p in sorted((run / "outcomes").glob("*.json"))]
    done = [r for r in rows if not r["error_type"]]
    traces = sorted((run / "traces").glob("*.jsonl"))
    scores = {s.episode_id: s for s in score_files(traces)}
    safe = [scores[Cell(r["task_id"], r["episode_idx"], r["seed"], r["language_level"],
                        r["visual_level"]).name].safe for r in done]
    vsi = [s.vsi for s in scores.values()]
    succ = [bool(r["success"]) for r in done]
    return {"n": len(done), "crashed": len(rows) - len(done), "succ": sum(succ),
            "safe": sum(safe), "sbu": sum(a and not b for a, b in zip(succ, safe)),
            "vsi": vsi, "cc": [r["cumulative_cost"] for r in done], "rows": done}


def check_pct(cell, k, n, suffix=""):
    text, attrs = cell
    lo, hi = wilson(k, n)
    assert float(attrs["data-value"]) == pytest.approx(k / n, abs=1e-12)
    assert float(attrs["data-low"]) == pytest.approx(lo, abs=1e-9)
    assert float(attrs["data-high"]) == pytest.approx(hi, abs=1e-9)
    assert text == f"{100 * k / n:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]{suffix}"


@pytest.mark.slow
def test_main_table_equals_hand_computation(runs, page):
    table = by_run(page.tables["main-table"])
    assert list(table) == ["careful", "careless", "careful-w1"]
    for run in runs:
        h, row = hand_counts(run), table[run.name]
        assert row["policy"][0] == ("fast-policy" if run.name == "careless" else "steady-policy")
        assert row["n"][0] == str(h["n"]) and row["crashed"][0] == str(h["crashed"])
        check_pct(row["SR %"], h["succ"], h["n"])  # every episode is scored: SR = SR_all
        check_pct(row["SR_all %"], h["succ"], h["n"])
        check_pct(row["Safety %"], h["safe"], h["n"])
        check_pct(row["SBU %"], h["sbu"], h["n"])
        check_pct(row["P[U|S] %"], h["sbu"], h["succ"])
        vsi_lo, vsi_hi = bootstrap(h["vsi"])
        assert row["VSI"][0] == f"{np.mean(h['vsi']):.3f} [{vsi_lo:.3f}, {vsi_hi:.3f}]"
        cc_lo, cc_hi = bootstrap(h["cc"])
        assert float(row["CC"][1]["data-value"]) == pytest.approx(np.mean(h["cc"]))
        assert float(row["CC"][1]["data-low"]) == pytest.approx(cc_lo)
        assert float(row["CC"][1]["data-high"]) == pytest.approx(cc_hi)
        assert row["CC"][0] == f"{np.mean(h['cc']):.2f} [{cc_lo:.2f}, {cc_hi:.2f}]"
    # The crashed episode is in no denominator: 2 tasks x 5 episodes, one crashed.
    assert table["careless"]["n"][0] == "9" and table["careless"]["crashed"][0] == "1"


def test_per_task_and_levels_tables(runs, page):
    h = hand_counts(runs[1])
    for task in TASKS:
        rows = [r for r in h["rows"] if r["task_id"] == task]
        k = sum(r["success"] for r in rows)
        (row,) = [r for r in page.tables["tasks-table"][1:]
                  if r[0][0] == task and r[1][0] == "careless"]
        assert row[2][0] == str(len(rows))
        check_pct(row[3], k, len(rows))
        assert float(row[5][1]["data-value"]) == pytest.approx(
            np.mean([r["cumulative_cost"] for r in rows]))
    # W0 and W1 vary, V does not: only the language-perturbation curve is drawn.
    assert "levels-W-table" in page.tables and "levels-V-table" not in page.tables
    levels = {r[0][0]: r for r in page.tables["levels-W-table"][1:]}
    for col, run in ((1, runs[0]), (2, runs[2])):
        hc = hand_counts(run)
        check_pct(levels["steady-policy"][col], hc["succ"], hc["n"], f" (n={hc['n']})")
    assert levels["fast-policy"][2][0] == "-"  # never run at W1


def test_until_section_equals_the_paired_test(runs, page):
    """The --until table: the decision and stop point of the one-sided paired test, worked
    out here from the outcome rows in seed order (crashed pair left out) by stats.sequential."""
    from robosafe.stats.sequential import paired_sequential

    def rows(run):
        out = {}
        for p in sorted((run / "outcomes").glob("*.json")):
            r = json.loads(p.read_text())
            if not r["error_type"]:
                out[(r["episode_idx"], r["task_id"])] = int(r["success"])
        return out

    a, b = rows(runs[0]), rows(runs[1])
    keys = sorted(set(a) & set(b))  # seed order: episode index, then task
    want = paired_sequential([a[k] for k in keys], [b[k] for k in keys], budget=10)
    (row,) = by_run(page.tables["until-table"]).values()
    assert row["metric"][0] == "success" and row["decision"][0] == want.decision
    assert int(row["after"][1]["data-value"]) == want.episodes
    # careless won 4 of the 9 pairs (one crashed), one-sided at budget 10 that takes 5: the
    # whole budget ran, nothing saved
    assert (want.decision, want.episodes, want.wins_b, want.wins_a) == ("undecided", 9, 4, 0)
    assert int(row["budget"][0]) == 10 and int(row["episodes run"][0]) == 10
    assert int(row["saved"][0]) == 0
    assert any(i["alt"] == "evidence against its boundary" for i in page.imgs)


def test_crashes_listed_and_text_escaped(report, page):
    crashed = page.tables["crashed-table"]
    assert [c[0] for c in crashed[1]] == ["careless", "task_1", "2", "seed102-W0-V0",
                                         "RuntimeError", "MuJoCo <unstable> & diverged"]
    assert page.title == TITLE
    text = report.read_text(encoding="utf-8")
    assert "<unstable>" not in text and "<b>&</b>" not in text
    assert "b" not in page.tags and "unstable" not in page.tags


def test_self_contained(report, page):
    # scatter, heatmap, SBU composition, W curve, the --until evidence
    assert len(page.imgs) == 5
    for img in page.imgs:
        prefix = "data:image/png;base64,"
        assert img["src"].startswith(prefix)
        png = Image.open(io.BytesIO(base64.b64decode(img["src"][len(prefix):],
                                                     validate=True)))
        png.load()
        assert png.format == "PNG" and png.width > 600 and png.height > 300
        assert img["alt"]
    assert "script" not in page.tags and "link" not in page.tags
    for tag, name, value in page.attrs:
        if name in ("src", "href", "action", "srcset"):
            assert not value.lower().startswith(("http:", "https:", "//")), (tag, value)
    assert "http://" not in report.read_text() and "https://" not in report.read_text()


def chromium(args, profile: Path, timeout=60):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} not found: the HTML report test needs Debian chromium "
                    "(apt-get install -y chromium)")
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
           *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # Chromium logs every page console message (errors, CSP violations, uncaught exceptions)
    # as a CONSOLE line; a script-free page must produce none.
    console = [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]
    assert not console, console
    return proc


def test_renders_in_headless_chromium(report, tmp_path):
    text = report.read_text(encoding="utf-8")
    # A copy that reports through its title whether every image decoded; the report itself
    # has no script, so its CSP gets an inline-script allowance in the copy only.
    probe = ("<script>window.addEventListener('load', () => { document.title = "
             "[...document.images].every(i => i.complete && i.naturalWidth > 0) && "
             "document.images.length === 5 ? 'IMAGES-OK' : 'IMAGES-BROKEN'; });</script>")
    csp = "style-src 'unsafe-inline'"
    assert csp in text
    copy = tmp_path / "probe.html"
    copy.write_text(text.replace(csp, csp + "; script-src 'unsafe-inline'", 1)
                    .replace("</body>", probe + "</body>", 1), encoding="utf-8")
    dom = chromium(["--dump-dom", copy.as_uri()], tmp_path / "profile1").stdout
    assert "<title>IMAGES-OK</title>" in dom
    assert 'id="main-table"' in dom and 'id="crashed-table"' in dom

    shot = tmp_path / "shot.png"
    chromium([f"--screenshot={shot}", "--window-size=1200,2400", report.as_uri()],
             tmp_path / "profile2")
    img = Image.open(shot).convert("L")
    assert img.size == (1200, 2400)
    pixels = np.asarray(img)
    # Text, table borders and figures: a real fraction of the page is not background.
    assert (pixels < 200).mean() > 0.02 and pixels.min() < 50


def cli(*args):
    return run_robosafe("report", *args)


@pytest.mark.slow
def test_cli_writes_report_and_prints_path(runs, tmp_path):
    out = tmp_path / "r.html"
    proc = cli(*runs[:2], "--out", out, "--title", "two runs", "--bootstrap", "200")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(out)
    assert Page(out.read_text()).title == "two runs"


@pytest.mark.slow
def test_cli_errors_are_one_line(runs, tmp_path):
    # Not a run directory.
    proc = cli(tmp_path, "--out", tmp_path / "x.html")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "not a run directory" in proc.stderr
    # A run whose only episodes crashed has nothing to report: the error names it.
    dead = tmp_path / "dead"
    run = create_run(dead, {"policy": "random", "policy_name": "random"}, {})
    run.write_outcome(Cell("task_0", 0, 0), {"task_id": "task_0", "episode_idx": 0, "seed": 0,
                                             "success": 0, "error_type": "RuntimeError"})
    proc = cli(runs[0], dead, "--out", tmp_path / "y.html")
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0
    assert str(dead) in proc.stderr and "no finished episodes" in proc.stderr
    assert not (tmp_path / "y.html").exists()
    # A finished episode whose trace is gone.
    broken = tmp_path / "broken"
    shutil.copytree(runs[0], broken)
    victim = min((broken / "traces").glob("*.jsonl"))
    victim.unlink()
    proc = cli(broken, "--out", tmp_path / "z.html")
    assert proc.returncode == 2 and str(victim) in proc.stderr
    assert f"its trace {victim} is missing; not scored" in proc.stderr
    assert "without its trace (not scored)" in (tmp_path / "z.html").read_text()


def _rate(k, n):
    lo, hi = wilson(k, n)
    return {"successes": k, "episodes": n, "sr": k / n, "ci": [float(lo), float(hi)]}


@pytest.mark.slow
def test_diagnostics_section_from_audit_results(runs, tmp_path):
    """The shortcut probe's and the demonstrator's SR per task (paper 002 Sec. 3) and the
    data-source comparison (Sec. 6), from the audit commands' JSON files."""
    shortcut = {"diagnostic": "shortcut", "suite": "demo", "tasks": ["a", "b"],
                "episodes_per_task": 4, "solved": ["b"], "conclusion": "probe solves <b>",
                "demonstrator": {**_rate(7, 8), "tasks": {"a": _rate(4, 4), "b": _rate(3, 4)}},
                "best": {"step": 20, **_rate(3, 8), "tasks": {"a": _rate(0, 4), "b": _rate(3, 4)}},
                "final": {"step": 40, **_rate(2, 8),
                          "tasks": {"a": _rate(0, 4), "b": _rate(2, 4)}}}
    data_source = {"diagnostic": "data-source", "suite": "demo", "conclusion": "near wins",
                   "paired_test": {"wald": {"statistic": None, "pvalue": 0.0}},
                   "policies": {"near": {"demos": 6, **_rate(4, 4), "train_test_distance":
                                         {"median_m": 0.002, "max_m": 0.003}},
                                "far": {"demos": 6, **_rate(1, 4), "train_test_distance":
                                        {"median_m": 0.05, "max_m": 0.1}}}}
    (tmp_path / "shortcut.json").write_text(json.dumps(shortcut))
    (tmp_path / "ds.json").write_text(json.dumps(data_source))
    out = tmp_path / "r.html"
    proc = cli(runs[0], "--out", out, "--bootstrap", "0", "--diagnostics",
               tmp_path / "shortcut.json", "--diagnostics", tmp_path / "ds.json")
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "probe solves &lt;b&gt;" in text and "near wins" in text
    page = Page(text)
    rows = by_run(page.tables["shortcut-table"])
    assert rows["b"]["probe best (step 20) SR %"][1]["data-value"] == repr(0.75)
    assert rows["b"]["probe final (step 40) SR %"][1]["data-value"] == repr(0.5)
    assert rows["a"]["demonstrator SR %"][1]["data-value"] == repr(1.0)
    assert rows["all"]["demonstrator SR %"][1]["data-low"] == repr(float(wilson(7, 8)[0]))
    assert [rows[t]["solved"][0] for t in ("a", "b")] == ["no", "yes"]
    # a data_source.json written before robosafe recorded its training: one multi-task probe
    # with augmentation, what robosafe then did
    assert "one multi-task probe (robosafe&#x27;s option), image augmentation on" in text
    ds = by_run(page.tables["data-source-table"])
    assert ds["near"]["SR %"][1]["data-value"] == repr(1.0)
    assert ds["far"]["train-test distance cm (median / max)"][0] == "5.00 / 10.00"
    # anything else is one error line
    (tmp_path / "bad.json").write_text(json.dumps({"diagnostic": "vibes"}))
    proc = cli(runs[0], "--out", tmp_path / "x.html", "--diagnostics", tmp_path / "bad.json")
    assert proc.returncode == 2 and "field 'diagnostic' is 'vibes'" in proc.stderr
    assert proc.stderr.strip().count("\n") == 0


@pytest.mark.slow
def test_intervention_section_from_grounding_intervene(runs, tmp_path):
    """The JSON of `robosafe grounding intervene` as a diagnostics table; a malformed field is
    one error line naming it."""
    def row(monitor, **kw):
        base = {"episodes": 4, "failed": 0, "human_collisions": 0, "prevented": 0,
                "stopped_contacts": 0, "scene_collision_episodes": 0, "interventions": 0,
                "false_interventions": 0, "false_per_min": 0.0, "time_lost_s": 0.0,
                "errors": []}
        return {"monitor": monitor, **base, **kw}

    doc = {"diagnostic": "intervention", "config": {"action": "stop", "horizon_s": 1.0},
           "summaries": [row("none", human_collisions=3),
                         row("ssm", prevented=3, stopped_contacts=2, interventions=9,
                             false_interventions=7, false_per_min=12.5, time_lost_s=4.25),
                         row("vlm", failed=4, false_per_min=None)]}
    (tmp_path / "iv.json").write_text(json.dumps(doc))
    out = tmp_path / "r.html"
    proc = cli(runs[0], "--out", out, "--bootstrap", "0", "--diagnostics", tmp_path / "iv.json")
    assert proc.returncode == 0, proc.stderr
    page = Page(out.read_text())
    rows = by_run(page.tables["intervention-table"])
    assert rows["ssm"]["prevented"][1]["data-value"] == repr(3)
    assert rows["ssm"]["false / min"][1]["data-value"] == repr(12.5)
    assert rows["ssm"]["time lost s"][0] == "4.25"
    assert rows["vlm"]["failed"][0] == "4" and rows["vlm"]["false / min"][0] == "-"
    assert rows["none"]["human collisions"][0] == "3"
    # the page with the table renders in the real browser, without a console message
    dom = chromium(["--dump-dom", out.as_uri()], tmp_path / "profile").stdout
    assert 'id="intervention-table"' in dom and "Closed-loop intervention (stop)" in dom
    doc["summaries"][1]["time_lost_s"] = -1
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    proc = cli(runs[0], "--out", tmp_path / "x.html", "--diagnostics", tmp_path / "bad.json")
    assert proc.returncode == 2 and "summaries[1].time_lost_s: expected a number >= 0" in (
        proc.stderr)
    assert proc.stderr.strip().count("\n") == 0
