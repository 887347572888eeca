"""The YAML data files shipped in the package (registries, catalogues, world constants)."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` of one of the package's own data files, parsed by libyaml where PyYAML
    was built with it: the same safe constructor, so the same objects, about ten times faster
    (every worker process parses these when it starts; ``sim/data/assets.yaml`` alone took
    0.6 s in pure Python). Files a user gives keep ``yaml.safe_load``."""
    return yaml.load(text, Loader=_LOADER)


@cache
def package_yaml(*parts: str) -> Any:
    """A data file of the package by its path below ``robosafe/`` (``"sim", "data",
    "choices.yaml"``), parsed once per process, without importing the subpackage that holds
    it (``robosafe.sim`` imports robosuite)."""
    return load_yaml(resources.files("robosafe").joinpath(*parts).read_text("utf-8"))


def sim_choices() -> dict[str, Any]:
    """``sim/data/choices.yaml``: the simulator's controllers and asset sources."""
    return package_yaml("sim", "data", "choices.yaml")
