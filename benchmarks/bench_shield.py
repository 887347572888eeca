"""The simulator-in-the-loop shield against the same policy unshielded, in one process.

For each task (the demo suite and, with ``--safety-suites``, level L0 of the safety suites:
cautious_grasp, hazard_avoidance, state_preservation, dynamic_obstacles) and seed, the same
episode runs three times with ``scripted-careless``: shield off (the named baseline), monitor
(predict and warn only) and filter (replace unsafe actions). Reported: Safety and SR per mode,
interventions per episode, wall time per step relative to the unshielded run, and the warnings
of the monitor runs scored as an early-warning detector per spec family (precision, recall,
lead time in steps).

Targets the brief measured against: careless Safety from ~60 % to >= 95 % with <= 5 points of
SR lost; per-step wall time with H=5 <= 3x unshielded; monitor-only overhead < 5 %.

Run:  python benchmarks/bench_shield.py [--seeds 2] [--horizon-steps N] [--shield-horizon 5]
      [--safety-suites] [--tasks K] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np


def tasks(safety: bool, limit: int | None) -> dict[str, str]:
    from robosafe.tasks.suites import suite_tasks

    out = {k: str(v) for k, v in suite_tasks("demo").items()}
    if safety:
        for s in ("cautious_grasp", "hazard_avoidance", "state_preservation",
                  "dynamic_obstacles"):
            out.update({k: str(v) for k, v in suite_tasks(s, 0).items()})
    return dict(list(out.items())[:limit]) if limit else out


def episode(env, shadow, mode: str, seed: int, horizon: int):
    from robosafe.policies.base import make_policy, play
    from robosafe.runner.shield import Shield, ShieldConfig

    policy = make_policy("scripted-careless")
    if mode != "off":
        policy = Shield(policy, env, shadow, ShieldConfig(mode, horizon))
    obs, _ = env.reset(seed=seed)
    t = time.perf_counter()
    _, actions = play(env, policy, obs)
    wall = time.perf_counter() - t
    record = policy.finish() if mode != "off" else None
    return env.episode(episode_id=f"{env.task_id}/{seed}/{mode}"), len(actions), wall, record


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--horizon-steps", type=int, default=None,
                    help="episode length (default: each task's)")
    ap.add_argument("--shield-horizon", type=int, default=5)
    ap.add_argument("--safety-suites", action="store_true")
    ap.add_argument("--tasks", type=int, default=None, help="first K tasks only")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from robosafe.hosts.registry import make_env
    from robosafe.runner.shield import score_warnings
    from robosafe.safety.score import Scorer

    scorer = Scorer()
    family = {s.spec_id: s.canonical_family for s in scorer.registry.specs.values()}
    modes = ("off", "monitor", "filter")
    res: dict[str, dict[str, list]] = {m: {"safe": [], "success": [], "steps": [], "wall": [],
                                           "interventions": []} for m in modes}
    ratios: dict[str, list[float]] = {"monitor": [], "filter": []}
    records = []
    for task_id, path in tasks(args.safety_suites, args.tasks).items():
        env = make_env("robosafe", path, task_id=task_id, horizon=args.horizon_steps,
                       images=False)
        shadow = make_env("robosafe", path, task_id=task_id, horizon=args.horizon_steps,
                          images=False)
        for seed in range(args.seeds):
            per_step = {}
            for mode in modes:
                ep, n, wall, rec = episode(env, shadow, mode, seed, args.shield_horizon)
                score = next(iter(scorer.score([ep])))
                r = res[mode]
                r["safe"].append(score.safe)
                r["success"].append(bool(ep.success))
                r["steps"].append(n)
                r["wall"].append(wall)
                r["interventions"].append(len(rec["interventions"]) if rec else 0)
                per_step[mode] = wall / max(n, 1)
                if mode == "monitor":
                    records.append(rec)
                print(f"{task_id} seed {seed} {mode}: safe={score.safe} success={ep.success} "
                      f"steps={n} wall={wall:.1f}s "
                      f"interventions={r['interventions'][-1]}", flush=True)
            for mode in ("monitor", "filter"):
                ratios[mode].append(per_step[mode] / per_step["off"])
    warn = score_warnings(records, args.shield_horizon, family)
    out = {
        "modes": {m: {"safety": float(np.mean(r["safe"])), "sr": float(np.mean(r["success"])),
                      "interventions_per_episode": float(np.mean(r["interventions"])),
                      "episodes": len(r["safe"]), "steps": int(sum(r["steps"]))}
                  for m, r in res.items()},
        "wall_per_step_vs_off": {m: {"median": statistics.median(v), "max": max(v)}
                                 for m, v in ratios.items() if v},
        "warnings": {f: {"warnings": w.warnings, "precision": w.precision, "onsets": w.onsets,
                         "recall": w.recall,
                         "lead_median": statistics.median(w.leads) if w.leads else None,
                         "lead_hist": {k: w.leads.count(k) for k in sorted(set(w.leads))}}
                     for f, w in sorted(warn.items())},
        "shield_horizon": args.shield_horizon,
    }
    print(json.dumps(out, indent=1))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
