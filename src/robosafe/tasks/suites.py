"""Built-in task suites: directories of CBDDL files shipped as package data
(``tasks/suites/<suite>/**/*.bddl``; the task id is the file stem)."""

from __future__ import annotations

import difflib
from importlib import resources
from pathlib import Path

from robosafe.errors import RobosafeError


def _root() -> Path:
    return Path(str(resources.files("robosafe.tasks").joinpath("suites")))


def suite_names() -> list[str]:
    root = _root()
    return sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.rglob("*.bddl"))) \
        if root.is_dir() else []


def suite_tasks(name: str) -> dict[str, Path]:
    """Task id -> file of a built-in suite; an unknown suite is an error naming close ones."""
    names = suite_names()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise RobosafeError(f"unknown suite {name!r}{hint} (built-in: {', '.join(names)})")
    files = sorted((_root() / name).rglob("*.bddl"))
    out: dict[str, Path] = {}
    for f in files:
        if f.stem in out:
            raise RobosafeError(f"suite {name}: two tasks named {f.stem} ({out[f.stem]}, {f})")
        out[f.stem] = f
    return out
