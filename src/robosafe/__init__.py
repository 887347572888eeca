"""robosafe: evaluate robot policies beyond task success.

The public API, importable from here (each name loads its module on first use, so ``import
robosafe`` stays as light as the CLI's start-up):

- traces: :func:`read_episodes`, :func:`write_episodes`, :class:`Episode`
- safety: :func:`score_episodes` (STL scoring, SafeVLA-Bench Sec. 3), :func:`score_paths`
  (what ``robosafe score`` scores: trace files, run directories, LeRobot datasets, each
  episode once), :func:`score_run` (one run directory, :class:`RunScores`),
  :func:`cell_metrics` (SR / Safety / SBU / P[U|S] / VSI with intervals, Sec. 3.3 and App. E,
  a :class:`CellMetrics`), :func:`metrics_output` (the App. B metrics JSON)
- statistics: :func:`wilson_interval`, :func:`paired_wald_test` (the audit's App. C),
  :func:`cutoff_table` and :func:`classify_gain` (top-line significance cutoffs, App. C.3-C.4)
- evaluation: :class:`RunRequest` -> :func:`plan_run` -> :class:`RunPlan` (a run's settings,
  checked once), :func:`prepare`, :func:`execute` (a policy on tasks, into a resumable run
  directory)
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_API = {
    "Episode": "robosafe.trace.episode",
    "read_episodes": "robosafe.trace.io",
    "write_episodes": "robosafe.trace.io",
    "score_episodes": "robosafe.safety.score",
    "score_paths": "robosafe.runner.scoring",
    "score_run": "robosafe.runner.scoring",
    "RunScores": "robosafe.runner.scoring",
    "cell_metrics": "robosafe.stats.aggregate",
    "CellMetrics": "robosafe.stats.aggregate",
    "metrics_output": "robosafe.stats.aggregate",
    "OutcomeRow": "robosafe.stats.outcomes",
    "wilson_interval": "robosafe.stats.intervals",
    "paired_wald_test": "robosafe.stats.wald",
    "cutoff_table": "robosafe.stats.cutoffs",
    "classify_gain": "robosafe.stats.cutoffs",
    "RunRequest": "robosafe.runner.request",
    "plan_run": "robosafe.runner.request",
    "RunPlan": "robosafe.runner.plan",
    "prepare": "robosafe.runner.run",
    "execute": "robosafe.runner.run",
}
__all__ = ["__version__", *_API.keys()]  # noqa: PLE0604 - the names are strings


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'robosafe' has no attribute {name!r}")
    value = getattr(importlib.import_module(_API[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
