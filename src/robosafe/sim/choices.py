"""The simulator's choices a run names, importable without the simulator: the command line and
the run plan check ``--controller`` and ``--assets`` against these before MuJoCo, robosuite or
numba are loaded (robosafe.sim.controller and robosafe.sim.libero_assets use the same names)."""

from __future__ import annotations

#: the arm controllers: robosuite's own (Python) or robosafe's compiled one
#: (robosafe.sim.controller: the same torques within 1e-9 per substep, several times faster)
CONTROLLERS = ("robosuite", "compiled")
#: what a run uses when it names none (run.json from before the choice says robosuite:
#: robosafe.runner.plan migrates it)
DEFAULT_CONTROLLER = "compiled"

#: where a scene's objects come from: procedural stand-ins, LIBERO's meshes or VLA-Arena's
#: files (robosafe.sim.libero_assets, what each covers)
ASSET_SOURCES = ("stand-in", "libero", "vla-arena")
