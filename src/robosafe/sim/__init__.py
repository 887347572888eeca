"""The simulator: CBDDL tasks as MuJoCo worlds on robosuite 1.5, with costs, moving objects and
visual perturbations (VLA-Arena paper 001 Sec. 2-4 and App. 7-8). Its episodes are recorded by
:mod:`robosafe.hosts.recorder` (SafeVLA-Bench paper 000 App. B). Installed with the ``sim``
extra."""

import logging as _logging

from robosafe.errors import RobosafeError
from robosafe.sim.render import ensure_gl_backend as _ensure_gl

_NEEDS = ("robosafe's CBDDL simulator needs the sim extra (robosuite 1.5.2, MuJoCo 3.9.0): "
          "pip install 'robosafe[sim]'")


def _quiet_robosuite() -> None:
    """Import robosuite without its start-up chatter (private-macro and optional-model
    warnings, controller-config INFO lines): robosafe's output must stay one line per error.
    A missing or older robosuite (LIBERO's 1.4 environment) is one clear error, not a
    traceback deep inside the world builder."""
    previous = _logging.root.manager.disable
    _logging.disable(_logging.WARNING)
    try:
        import robosuite
    except ImportError as exc:
        raise RobosafeError(f"{_NEEDS} ({exc})") from None
    finally:
        _logging.disable(previous)
    _logging.getLogger("robosuite_logs").setLevel(_logging.ERROR)
    found = getattr(robosuite, "__version__", "unknown")
    if not str(found).startswith("1.5"):
        raise RobosafeError(f"{_NEEDS}; this environment has robosuite {found} (LIBERO's "
                            "environment: use `robosafe run --host libero`)")


# robosuite sets MUJOCO_GL=egl on import when it is unset: pick a working backend first
try:
    _ensure_gl()
except RobosafeError:  # no GL at all: physics-only use still works; rendering reports it
    _logging.getLogger(__name__).debug("no OpenGL backend found at import")
_quiet_robosuite()
import robosuite  # noqa: F401  (already imported quietly above; re-exported for the CLI)
