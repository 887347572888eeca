"""Recording overhead on real LIBERO: a LIBERO task stepped through the LIBERO host's recorder
vs the same task unrecorded. Run in a LIBERO environment (scripts/libero-env.sh):

    .venv-libero/bin/python benchmarks/bench_libero_recorder.py [--suite libero_object]
        [--task-id task_0] [--steps 200] [--reps 5]

Baseline (named, same invocation): LIBERO's own ``ControlEnv`` for the same BDDL file, no
cameras, reset to the same official initial state and settled with the same no-op steps as
the host's protocol, stepped directly. The recorded side is :class:`LiberoEnv` (the host: the
same ControlEnv under :class:`robosafe.hosts.recorder.Recorder`). Both replay one random action
sequence, interleaved one action at a time (bench_recorder.run_pair). Target: at most 5%.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_recorder import compare

from robosafe.hosts.libero import LiberoEnv

TARGET = 0.05


class Bare:
    """LIBERO's ControlEnv under the host's protocol, without the recorder."""

    def __init__(self, host: LiberoEnv):
        from libero.libero.envs.env_wrapper import ControlEnv

        with contextlib.redirect_stdout(io.StringIO()):
            self.env = ControlEnv(bddl_file_name=host.bddl, use_camera_obs=False,
                                  has_renderer=False, has_offscreen_renderer=False)
        self.host = host

    def reset(self):
        self.env.reset()
        self.env.set_init_state(self.host.init_states[0])
        settle = np.asarray(self.host.protocol["settle_action"], dtype=float)
        for _ in range(int(self.host.protocol["settle_steps"])):
            self.env.step(settle)

    def step(self, action):
        return self.env.step(action)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="libero_object")
    ap.add_argument("--task-id", default="task_0")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    host = LiberoEnv(args.suite, args.task_id)
    bare = Bare(host)
    actions = np.random.default_rng(args.seed).uniform(-1, 1, (args.steps, 7))
    actions[:, 6] = np.where(actions[:, 6] > 0, 1.0, -1.0)
    compare(f"LIBERO {args.suite} {args.task_id} ({host.recorder.embodiment}, OSC_POSE, no "
            "rendering)", bare, host, host.recorder, actions, args.reps, TARGET)


if __name__ == "__main__":
    main()
