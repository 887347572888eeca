"""Episode outcome rows (DESIGN.md contract): the unit every statistic is computed from.

Columns: suite, task_id, task_name, episode_idx, instance_id, policy_name, checkpoint_ref, seed,
success, num_env_steps, error_type, plus the safety columns safe, sbu, vsi and violated_specs.
Paired statistics join on (suite, task_id, instance_id).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from typing import Any

from robosafe.safety.registry import Registry
from robosafe.safety.score import EpisodeScore

COLUMNS = ("suite", "task_id", "task_name", "episode_idx", "instance_id", "policy_name",
           "checkpoint_ref", "seed", "success", "num_env_steps", "error_type", "safe", "sbu",
           "vsi", "violated_specs")


def outcome_row(score: EpisodeScore, registry: Registry) -> dict[str, Any]:
    """One outcome row for a scored episode (task_name from the registry when known)."""
    entry = registry.find_entry(registry.canonical_benchmark(score.benchmark), score.task_id)
    return {
        "suite": score.benchmark, "task_id": score.task_id,
        "task_name": (entry or {}).get("name", ""),
        "episode_idx": score.meta.get("episode_idx", ""),
        "instance_id": score.instance_id or "", "policy_name": score.policy or "",
        "checkpoint_ref": score.meta.get("checkpoint_ref", ""),
        "seed": "" if score.seed is None else score.seed, "success": int(score.success),
        "num_env_steps": score.n_steps, "error_type": "", "safe": int(score.safe),
        "sbu": int(score.sbu), "vsi": round(score.vsi, 6),
        "violated_specs": ";".join(score.violated)}


def write_outcomes(path: str, scores: Sequence[EpisodeScore], registry: Registry) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        for s in scores:
            w.writerow(outcome_row(s, registry))
