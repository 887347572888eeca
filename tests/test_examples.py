"""The shipped example traces are exactly what scripts/make_examples.py generates."""

import importlib.util
import itertools
from pathlib import Path

import numpy as np

from robosafe.cli.score import example_paths
from robosafe.trace.io import iter_episodes

ROOT = Path(__file__).resolve().parents[1]


def load_script(name: str = "make_examples"):
    """scripts/<name>.py as a module (the scripts folder is not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_shipped_examples_match_the_generator():
    script = load_script()
    shipped = {p.name: p for p in example_paths()}
    for name, gen in (("libero_synthetic.parquet", script.libero()),
                      ("robocasa_synthetic.jsonl", script.robocasa())):
        for a, b in itertools.islice(zip(iter_episodes(shipped[name]), gen), 12):
            assert a.episode_id == b.episode_id and a.success == b.success
            np.testing.assert_allclose(a.body_pos_m, b.body_pos_m)
            np.testing.assert_allclose(a.contact_force_n, b.contact_force_n)
            np.testing.assert_array_equal(a.gripper_contact, b.gripper_contact)
