"""The simulator: CBDDL tasks as MuJoCo worlds on robosuite, with costs, moving objects, visual
perturbations, and a recorder that turns any robosuite env into safety traces (issue #5,
VLA-Arena paper 001 Sec. 2-4 and App. 7-8; SafeVLA-Bench paper 000 App. B for the trace)."""

import logging as _logging

from robosafe.errors import RobosafeError
from robosafe.sim.render import ensure_gl_backend as _ensure_gl


def _quiet_robosuite() -> None:
    """Import robosuite without its start-up chatter (private-macro and optional-model
    warnings, controller-config INFO lines): robosafe's output must stay one line per error."""
    previous = _logging.root.manager.disable
    _logging.disable(_logging.WARNING)
    try:
        import robosuite  # noqa: F401
    finally:
        _logging.disable(previous)
    _logging.getLogger("robosuite_logs").setLevel(_logging.ERROR)


# robosuite sets MUJOCO_GL=egl on import when it is unset: pick a working backend first
try:
    _ensure_gl()
except RobosafeError:  # no GL at all: physics-only use still works; rendering reports it
    _logging.getLogger(__name__).debug("no OpenGL backend found at import")
_quiet_robosuite()
import robosuite  # noqa: F401  (already imported quietly above; re-exported for the CLI)
