"""Recording overhead: robosuite Lift stepped through the Recorder vs the same env unrecorded.

Baseline (named, run in the same invocation): robosuite 1.5 ``Lift`` with a Panda and its
default OSC controller, no renderer, no cameras, stepped directly. The recorded side is an
identical env (same seed) wrapped in :class:`robosafe.hosts.recorder.Recorder`. Both replay the
same random action sequence, so they simulate the same trajectory and the same contacts.
The two envs are stepped alternately, one action at a time (and which goes first alternates),
so load changes on a shared machine hit both alike; resets are not timed. The overhead is the
median over repetitions of the paired ratio of total recorded / unrecorded step time. Target: at most 10% of the env step.

Run:  python benchmarks/bench_recorder.py [--steps 400] [--reps 7] [--seed 0]

Also printed: the recorder's own per-row cost (``_record`` timed alone on the final state),
a noise-free lower-level view of the same overhead.
"""

from __future__ import annotations

import argparse
import statistics
import time
import timeit

import numpy as np
import robosuite as suite

from robosafe.hosts.recorder import Recorder

TARGET = 0.10


def make_env(seed: int):
    return suite.make("Lift", robots="Panda", has_renderer=False, has_offscreen_renderer=False,
                      use_camera_obs=False, seed=seed)


def run_pair(bare, rec, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-step seconds of both sides over ``actions``, stepped alternately (which side goes
    first alternates too), so load changes on a shared machine hit both alike. Resets are not
    timed."""
    bare.reset()
    rec.reset()
    tb, tr = np.empty(len(actions)), np.empty(len(actions))
    clock = time.perf_counter
    for i, a in enumerate(actions):
        if i % 2:
            t0 = clock()
            rec.step(a)
            t1 = clock()
            bare.step(a)
            t2 = clock()
            tr[i], tb[i] = t1 - t0, t2 - t1
        else:
            t0 = clock()
            bare.step(a)
            t1 = clock()
            rec.step(a)
            t2 = clock()
            tb[i], tr[i] = t1 - t0, t2 - t1
    return tb, tr


def compare(label: str, bare, rec, recorder: Recorder, actions: np.ndarray, reps: int,
            target: float) -> float:
    """Time ``bare`` against ``rec`` (``recorder`` inside it) over ``reps`` interleaved
    repetitions of ``actions``, print the comparison, return the median overhead."""
    run_pair(bare, rec, actions[:20])  # warm-up: first-call costs of both sides
    t_bare, t_rec, ratios, step_ratios = [], [], [], []
    for _ in range(reps):
        tb, tr = run_pair(bare, rec, actions)
        t_bare.append(tb.sum())
        t_rec.append(tr.sum())
        ratios.append(tr.sum() / tb.sum())
        step_ratios.append(tr / tb)
    ep = recorder.episode(episode_id="bench", success=False)
    n_contacts = ep.contact_ptr[-1] / ep.n_steps
    per_row = timeit.timeit(recorder._record, number=2000) / 2000  # rows into a scratch episode

    steps = len(actions)
    sb, sr = steps / statistics.median(t_bare), steps / statistics.median(t_rec)
    overhead = statistics.median(ratios) - 1.0
    print(f"{label}: {steps} steps x {reps} interleaved repetitions, {n_contacts:.1f} trace "
          "contacts per row")
    print(f"unrecorded: {sb:8.1f} steps/s  ({1e3 / sb:.3f} ms per step, median)")
    print(f"recorded:   {sr:8.1f} steps/s  ({1e3 / sr:.3f} ms per step, median)")
    print(f"overhead:   {100 * overhead:+.1f}% (median over repetitions of total recorded / "
          f"unrecorded time; per repetition: {', '.join(f'{100 * (x - 1):+.1f}%' for x in ratios)})")
    print(f"            {100 * (np.median(np.concatenate(step_ratios)) - 1):+.1f}% (median of "
          "per-step paired ratios, robust to load spikes)")
    print(f"recorder alone: {1e6 * per_row:.1f} us per row = "
          f"{100 * per_row * sb:.2f}% of the unrecorded step")
    print(f"{'PASS' if overhead <= target else 'FAIL'}: target overhead <= {100 * target:.0f}%")
    return overhead


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=400, help="env steps per repetition")
    ap.add_argument("--reps", type=int, default=7, help="interleaved repetitions")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    actions = np.random.default_rng(args.seed).uniform(-1, 1, (args.steps, 7))
    rec = Recorder(make_env(args.seed))
    compare(f"robosuite {suite.__version__} Lift (Panda, OSC, no rendering)",
            make_env(args.seed), rec, rec, actions, args.reps, TARGET)


if __name__ == "__main__":
    main()
