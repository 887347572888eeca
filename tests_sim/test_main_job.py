"""The sim lane: robosafe installed as the README's main job installs it (``pip install
'.[sim]'``, nothing else), running the main job's command as written there.

The main test suite has the dev extra (pandas, PyAV, Ray, torch, ...); a path of the main job
that needed one of them would pass there and fail for a user. Here it fails the lane.
"""

import json
import re
import subprocess
import sys
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

import pytest

import robosafe

ROOT = Path(__file__).resolve().parents[1]
# What the dev, probe, video and ray extras bring, none of which the main job may need
DEV_ONLY = ["pandas", "av", "ray", "torch", "statsmodels", "hypothesis", "rtamt", "mkdocs"]


def main_job() -> list[str]:
    """The robosafe command of the README's main-job block (after `# main job:`), as argv."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n# main job:.*?\n```", text, flags=re.DOTALL).group(0)
    (cmd,) = re.findall(r"\.venv/bin/(robosafe[^&\n]*)", block)
    return cmd.split()


@pytest.mark.parametrize("module", DEV_ONLY)
def test_lane_has_no_dev_packages(module):
    """Guards the lane: with any of these installed, the main job below proves nothing."""
    assert find_spec(module) is None, f"{module} is installed in the sim lane"


def test_lane_is_the_sim_extra_installed():
    # the sim extra's pins (pyproject.toml)
    assert (version("mujoco"), version("robosuite")) == ("3.9.0", "1.5.2")
    assert "site-packages" in robosafe.__file__  # the installed wheel, not the checkout


def test_readme_names_the_demo():
    assert main_job() == ["robosafe", "demo"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The main job as a user runs it: the console script, in an empty working directory."""
    cwd = tmp_path_factory.mktemp("user")
    exe = Path(sys.executable).parent / main_job()[0]
    proc = subprocess.run([str(exe), *main_job()[1:]], cwd=cwd, capture_output=True, text=True,
                          timeout=1800, check=False)
    return cwd, proc


def test_main_job_runs_scores_stores_and_reports(demo):
    cwd, proc = demo
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    out = cwd / "robosafe-demo"
    assert f"report: {Path('robosafe-demo') / 'report.html'}" in proc.stdout
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "scripted-careful" in html and "scripted-careless" in html
    assert (out / "robosafe.duckdb").is_file()
    for policy in ("scripted-careful", "scripted-careless"):
        assert policy in proc.stdout  # the summary table
        # 5 demo tasks x 3 episodes (the command's defaults), one outcome row each
        rows = (out / policy / "outcomes.csv").read_text().splitlines()
        assert len(rows) == 1 + 15, rows[:3]


def test_second_run_reuses_the_episodes(demo):
    """README: a second `robosafe demo` reuses finished episodes."""
    cwd, _ = demo
    traces = sorted((cwd / "robosafe-demo").glob("*/traces/*"))
    assert len(traces) == 30  # 2 policies x 15 episodes
    before = {p: p.stat().st_mtime_ns for p in traces}
    exe = Path(sys.executable).parent / "robosafe"
    proc = subprocess.run([str(exe), "demo", "--json"], cwd=cwd, capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout)["runs"]
    assert {p: (r["episodes"], r["crashed"]) for p, r in runs.items()} == {
        "scripted-careful": (15, 0), "scripted-careless": (15, 0)}
    # the central finding of the demo: success does not imply safety
    assert runs["scripted-careless"]["safety_rate"] < runs["scripted-careful"]["safety_rate"]
    assert {p: p.stat().st_mtime_ns for p in traces} == before
