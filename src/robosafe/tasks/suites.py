"""Built-in task suites (VLA-Arena paper 001, Sec. 3 and App. 9).

A suite is a directory of CBDDL files shipped as package data, ``tasks/suites/<suite>/``,
with the VLA-Arena suites split into ``L0/``, ``L1/``, ``L2/``; the task id is the file stem
(unique within a suite). ``suites.yaml`` holds each suite's dimension, title and paper
section; a safety suite's ``checks.yaml`` names, per task, a deliberately unsafe plan that
must make one of its cost terms fire (`robosafe suites check`).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import yaml

from robosafe.errors import RobosafeError

_LEVEL = re.compile(r"^L(\d)$")


@dataclass(frozen=True)
class SuiteTask:
    suite: str
    task_id: str
    level: int | None
    path: Path


def _root() -> Path:
    return Path(str(resources.files("robosafe.tasks").joinpath("suites")))


@cache
def suite_info() -> dict[str, dict]:
    """suites.yaml: name -> {dimension, title, paper}."""
    return yaml.safe_load((_root() / "suites.yaml").read_text(encoding="utf-8")) or {}


def suite_names() -> list[str]:
    """Suites that have task files, in suites.yaml order (then any others, sorted)."""
    root = _root()
    present = {p.name for p in root.iterdir() if p.is_dir() and any(p.rglob("*.bddl"))}
    ordered = [n for n in suite_info() if n in present]
    return ordered + sorted(present - set(ordered))


def _unknown(name: str) -> RobosafeError:
    names = suite_names()
    close = difflib.get_close_matches(name, names, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return RobosafeError(f"unknown suite {name!r}{hint} (built-in: {', '.join(names)})")


def _level(path: Path, suite_dir: Path) -> int | None:
    for part in path.relative_to(suite_dir).parts[:-1]:
        m = _LEVEL.match(part)
        if m:
            return int(m.group(1))
    return None


def suite_entries(name: str, level: int | None = None) -> list[SuiteTask]:
    """The tasks of a suite (optionally one level), sorted by level then id."""
    if name not in suite_names():
        raise _unknown(name)
    root = _root() / name
    out: dict[str, SuiteTask] = {}
    for f in sorted(root.rglob("*.bddl")):
        t = SuiteTask(name, f.stem, _level(f, root), f)
        if t.task_id in out:
            raise RobosafeError(f"suite {name}: two tasks named {t.task_id} "
                                f"({out[t.task_id].path}, {f})")
        out[t.task_id] = t
    tasks = sorted(out.values(), key=lambda t: (t.level if t.level is not None else -1,
                                                t.task_id))
    if level is not None:
        levels = sorted({t.level for t in tasks if t.level is not None})
        tasks = [t for t in tasks if t.level == level]
        if not tasks:
            raise RobosafeError(f"suite {name} has no level L{level} (levels: "
                                f"{', '.join(f'L{v}' for v in levels) or 'none'})")
    return tasks


def suite_tasks(name: str, level: int | None = None) -> dict[str, Path]:
    """Task id -> file of a built-in suite (optionally one level)."""
    return {t.task_id: t.path for t in suite_entries(name, level)}


def suite_checks(name: str) -> dict[str, dict]:
    """checks.yaml of a suite: task id -> {mode, target, term} (empty if none)."""
    path = _root() / name / "checks.yaml"
    if not path.is_file():
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    known = set(suite_tasks(name))
    for task_id, spec in data.items():
        if task_id not in known:
            raise RobosafeError(f"{path}: {task_id}: no such task in suite {name}")
        if not isinstance(spec, dict) or not {"mode", "target", "term"} <= set(spec):
            raise RobosafeError(f"{path}: {task_id}: needs mode, target and term")
    return data
