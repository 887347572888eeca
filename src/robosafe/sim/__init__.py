"""The simulator: CBDDL tasks as MuJoCo worlds on robosuite 1.5, with costs, moving objects and
visual perturbations (VLA-Arena paper 001 Sec. 2-4 and App. 7-8). The pure world: the host
adapter that records its episodes, gives roles and task info is :mod:`robosafe.hosts.robosafe`
(SafeVLA-Bench paper 000 App. B). Installed with the ``sim`` extra.

Importing it imports robosuite (quietly) but starts no process: the OpenGL backend is chosen
at the first render (:func:`robosafe.sim.render.ensure_gl_backend`)."""

import logging as _logging
import os as _os

from robosafe.errors import RobosafeError

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


# The OpenGL backend is chosen at the first render (ensure_gl_backend: EGL, then OSMesa, each
# probed in a subprocess), not at import. robosuite exports MUJOCO_GL=egl on import when it is
# unset (before mujoco loads any GL context): unset it again, so the first render still
# chooses (ensure_gl_backend rebinds mujoco's context then). Physics-only use needs no backend.
_GL_SET = "MUJOCO_GL" in _os.environ
try:
    _quiet_robosuite()
finally:
    if not _GL_SET:
        _os.environ.pop("MUJOCO_GL", None)
import robosuite  # noqa: F401  (already imported quietly above; re-exported for the CLI)
