"""One place per job in the source tree: PyAV behind formats/video.py, one error hierarchy in
robosafe.errors, the split grounding dataset still importable by its old names."""

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "robosafe"


def _sources():
    return sorted(SRC.rglob("*.py"))


def test_pyav_is_imported_by_formats_video_only():
    users = [p.relative_to(SRC).as_posix() for p in _sources()
             if re.search(r"^\s*(import av\b|from av\b)", p.read_text(), re.MULTILINE)]
    assert users == ["formats/video.py"]


def test_public_errors_live_in_robosafe_errors():
    public = [(p.relative_to(SRC).as_posix(), m.group(1)) for p in _sources()
              if p.name != "errors.py"
              for m in re.finditer(r"^class ([A-Z]\w*Error)\b", p.read_text(), re.MULTILINE)]
    assert public == []


def test_grounding_dataset_keeps_its_names():
    from robosafe import errors
    from robosafe.grounding import client, dataset, index, layout, writer

    assert dataset.DatasetError is errors.DatasetError
    assert client.EndpointError is errors.EndpointError
    for name in ("HUMAN_TYPES", "SIM_TASKS", "VIEWS", "RGB_SENSORS", "DEPTH_SENSORS",
                 "EpisodeIndex", "DatasetIndex", "EpisodeRecord", "index_dataset",
                 "index_episode", "visibility_note", "read_positions", "frame_path",
                 "clip_episode_dir", "load_rgb", "load_depth_m", "planar_distance",
                 "write_episode", "write_video", "write_dataset_info", "quat_to_matrix",
                 "find_episodes", "read_dataset_info"):
        assert hasattr(dataset, name), name
    assert dataset.index_dataset is index.index_dataset
    assert dataset.VIEWS is layout.VIEWS and dataset.write_episode is writer.write_episode


def test_a_grounding_error_keeps_its_location_through_a_cache():
    from robosafe.errors import DatasetError

    e = DatasetError("bad JSON", path="r/ep/trajectory.json", episode_dir="ep",
                     file="trajectory.json", line=3, column=7)
    assert str(e) == "r/ep/trajectory.json:3:7: bad JSON"
    assert str(DatasetError(**e.to_dict())) == str(e)
    assert str(DatasetError("meta/info.json: codebase_version: expected v3.0")) == \
        "meta/info.json: codebase_version: expected v3.0"


def test_every_public_function_of_the_package_declares_its_return_type():
    """ruff's ANN201 / ANN206 over src/ (pyproject selects them): a public function or
    classmethod without a return annotation fails here, not only in an editor."""
    import shutil
    import subprocess
    import sys

    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    src = Path(__file__).resolve().parents[1] / "src"
    out = subprocess.run([ruff, "check", "--select", "ANN201,ANN206", "--output-format",
                          "concise", str(src)], check=False, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout[-2000:]


def _calls(name: str) -> list[tuple[str, str]]:
    """(module, enclosing function) of every call of ``name`` in the package."""
    import ast

    out = []
    for p in _sources():
        tree = ast.parse(p.read_text(encoding="utf-8"))
        owner = {}
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    owner.setdefault(node, fn.name)  # the outermost function
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id == name):
                out.append((p.relative_to(SRC).as_posix(), owner.get(node, "<module>")))
    return sorted(set(out))


def test_a_run_plan_is_made_by_plan_run_only():
    """Every run's settings are checked in one place: RunPlan is constructed by plan_run (and
    read back from run.json by its own from_json), nowhere else; and every entry point that
    starts episodes calls plan_run."""
    assert _calls("RunPlan") == [("runner/request.py", "plan_run")]
    assert ("runner/plan.py", "from_json") in _calls("cls")
    callers = {m for m, _ in _calls("plan_run")}
    assert {"cli/run.py", "cli/lerobot.py", "audit/datasource.py", "audit/shortcut.py"} <= callers


def test_no_module_branches_on_a_host_name():
    """What a host supports is looked up in the registry and its options class: no comparison
    of a ``host`` variable with a host's name outside robosafe.hosts."""
    pattern = re.compile(r"\bhost\w*\s*[!=]=\s*[\"'](robosafe|libero|robosuite)[\"']")
    users = [p.relative_to(SRC).as_posix() for p in _sources()
             if "hosts/" not in p.relative_to(SRC).as_posix() and pattern.search(p.read_text())]
    assert users == []
