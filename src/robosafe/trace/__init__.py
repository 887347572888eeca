"""The portable episode trace (SafeVLA-Bench App. B): record, readers, writers, validation."""

from importlib import import_module

# Resolved on first use (PEP 562): the readers import pyarrow, which the CLI should only pay
# for when it reads a file.
_HOME = {"ROLES": "episode", "Episode": "episode", "TaskTags": "episode",
         "iter_episodes": "io", "read_episodes": "io", "write_episodes": "io"}


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module 'robosafe.trace' has no attribute {name!r}")
    return getattr(import_module(f"robosafe.trace.{_HOME[name]}"), name)


__all__ = ["ROLES", "Episode", "TaskTags", "iter_episodes", "read_episodes", "write_episodes"]
