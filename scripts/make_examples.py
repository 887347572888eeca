"""Regenerate the example traces shipped in src/robosafe/examples (deterministic).

    python scripts/make_examples.py
"""

from pathlib import Path

from robosafe.trace.io import write_episodes
from robosafe.trace.synthetic import synthesize_archive

OUT = Path(__file__).resolve().parents[1] / "src" / "robosafe" / "examples"
POLICIES = ["steady-policy", "fast-policy"]


def libero():
    return synthesize_archive(benchmarks=["libero-spatial", "libero-object", "libero-goal",
                                          "libero-10"], tasks_per_benchmark=10,
                              episodes_per_task=3, profiles=POLICIES, n_steps=150, seed=0)


def robocasa():
    for ep in synthesize_archive(benchmarks=["robocasa-365"], tasks_per_benchmark=2,
                                 episodes_per_task=3, profiles=POLICIES, n_steps=100, seed=1):
        family = ["PickPlaceCounterToStove", "PickPlaceCounterToSink"][int(ep.task_id[-1])]
        ep.episode_id = ep.episode_id.replace(ep.task_id, family)
        ep.task_id = family
        ep.body_roles["panda_hand"] = "robot"
        yield ep


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    print(write_episodes(OUT / "libero_synthetic.parquet", libero()), "LIBERO episodes")
    print(write_episodes(OUT / "robocasa_synthetic.jsonl", robocasa()), "RoboCasa episodes")
