"""MuJoCo's integration state of a model's data, read and written one way for every host
(robosafe's simulator, LIBERO's and robosuite's ``MjSim``): what a restore needs so the next
step is the original's bit for bit; and the action vector every host steps with, checked one
way (:func:`host_action`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from robosafe.errors import RobosafeError


def host_action(action: Any, dim: int) -> np.ndarray:
    """``action`` as the float vector a host steps with: ``dim`` finite numbers, else one
    error line (a policy's NaN must not reach the simulator)."""
    a = np.asarray(action, dtype=float)
    if a.shape != (dim,) or not np.all(np.isfinite(a)):
        raise RobosafeError(f"action must be {dim} finite numbers, got shape {a.shape}")
    return a


def _spec() -> Any:
    import mujoco

    return mujoco.mjtState.mjSTATE_INTEGRATION


def get_state(model: Any, data: Any) -> np.ndarray:
    """qpos, qvel, act, warm start, mocap poses, ... (``mjSTATE_INTEGRATION``) as float64."""
    import mujoco

    out = np.empty(mujoco.mj_stateSize(model, _spec()))
    mujoco.mj_getState(model, data, out, _spec())
    return out


def set_state(model: Any, data: Any, state: np.ndarray) -> None:
    """Set the integration state and recompute everything derived from it."""
    import mujoco

    state = np.asarray(state, dtype=float)
    size = mujoco.mj_stateSize(model, _spec())
    if state.shape != (size,):
        raise RobosafeError(f"state has shape {state.shape}; this model's state has {size} "
                            "numbers")
    mujoco.mj_setState(model, data, state, _spec())
    mujoco.mj_forward(model, data)
    # mj_forward's constraint solver overwrites the warm start with the acceleration it found;
    # the next step must start its solver where the original's would
    mujoco.mj_setState(model, data, state, _spec())
