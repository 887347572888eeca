"""`pip install '.[sim]'` (the README's main job) resolves without backtracking: robosuite 1.5.2
leaves opencv-python open, and opencv-python 4.12+ need numpy 2 while robosuite's mink keeps
numpy below 2, so an unpinned resolve downloaded and threw away four opencv-python wheels
(~276 MB) before settling on 4.11. The sim extra pins it below 4.12.

What pip still fetches twice are numpy and pyarrow: the base install leaves them open above
(lerobot's environments hold numpy 2 and pyarrow 26) and pip prepares the base requirements
before it reads the extra's caps (robosuite's numpy < 2, pyarrow < 22). On an index that serves wheel metadata on its own (PEP 658, as PyPI does),
that costs the metadata file only; on a plain file index, as here, the wheel."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_sim_extra_resolves_without_backtracking(tmp_path):
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run",
                           "--ignore-installed", "--report", str(report), ".[sim]"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = proc.stdout + proc.stderr
    assert "looking at multiple versions" not in log, log[-3000:]
    fetched: dict[str, list[str]] = {}
    for name, version in re.findall(r"(?:Downloading|Processing) \S*?([A-Za-z0-9_]+)-(\d[^-]*)-"
                                    r"\S*\.whl", log):
        fetched.setdefault(name.lower().replace("_", "-"), []).append(version)
    chosen = {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"]
              for i in json.loads(report.read_text())["install"]}
    discarded = {n: [v for v in vs if v != chosen.get(n)] for n, vs in fetched.items()}
    discarded = {n: vs for n, vs in discarded.items() if vs}
    assert set(discarded) <= {"numpy", "pyarrow"}, discarded
    assert chosen["numpy"].startswith("1.") and chosen["opencv-python"].startswith("4.11")
    assert int(chosen["pyarrow"].split(".")[0]) < 22
