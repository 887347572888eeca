"""robosafe's base install leaves pyarrow open above (lerobot's numpy-2 environments hold
pyarrow 26), and pyarrow 22+ refuse to import under numpy 1: the command line then says so in
one line, with the fix, instead of a traceback in every command."""

from __future__ import annotations

import os

from conftest import run_robosafe


def test_a_pyarrow_for_numpy_2_under_numpy_1_is_one_line(tmp_path):
    # a pyarrow that fails as pyarrow 26 does under numpy 1.26 (its own message), found first
    shim = tmp_path / "shim" / "pyarrow"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(
        'raise ImportError("pyarrow requires NumPy 2.0 or newer, found 1.26.4")\n')
    path = os.pathsep.join([str(tmp_path / "shim"), os.environ.get("PYTHONPATH", "")])
    proc = run_robosafe("stats", "wilson", "3", "4", env={**os.environ, "PYTHONPATH": path})
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert line.startswith("robosafe: error: pyarrow ") and "needs numpy 2" in line
    assert line.endswith("pip install 'pyarrow>=14,<22'")
