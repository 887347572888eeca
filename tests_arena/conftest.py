"""tests_arena runs only against a complete peer: when scripts/vla-arena-env.sh found no
../shared/vla-arena beside the repository it builds no peer, and these tests are skipped (with
that reason, by test_peer_built.py) rather than run against VLA-Arena's empty asset folder."""

from importlib.util import find_spec

PEER_BUILT = find_spec("vla_arena") is not None
collect_ignore = [] if PEER_BUILT else ["test_vla_arena_peer.py"]

import importlib.util
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def load_script(name: str):
    """scripts/<name>.py as a module, loaded once per process (the harness the tests drive)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]
