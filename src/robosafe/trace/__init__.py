"""The portable episode trace (SafeVLA-Bench App. B): record, readers, writers, validation."""

from robosafe.trace.episode import ROLES, Episode, TaskTags
from robosafe.trace.io import iter_episodes, read_episodes, write_episodes

__all__ = ["ROLES", "Episode", "TaskTags", "iter_episodes", "read_episodes", "write_episodes"]
