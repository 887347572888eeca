"""The asset categories' data types: what a category is (:class:`Category`) and what an
articulated part is (:class:`Articulation`), apart from the procedural builders
(:mod:`robosafe.sim.assets`) and the real-file sources (:mod:`robosafe.sim.libero_assets`), which
both use them and neither of which the other needs at import time."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["KINDS", "PROPERTIES", "Articulation", "Category"]

PROPERTIES = frozenset({"graspable", "spillable", "fragile", "hazard", "articulated",
                        "switchable", "container", "sharp", "hot",
                        "ring"})  # ring: held by its rim (bagel), like a wide container
KINDS = ("object", "fixture")


@dataclass(frozen=True)
class Category:
    """One asset category, as data. ``parts`` maps mesh part ids to names (part 0 always exists);
    ``half_extents`` is the collision bounding box (closed drawers/doors), centred on the origin."""

    name: str
    kind: str
    properties: frozenset[str]
    parts: dict[int, str] = field(hash=False)
    hazard_parts: frozenset[int]
    half_extents: tuple[float, float, float]
    mass: float
    builder: str
    arena_parts: dict[int, int] = field(default_factory=dict, hash=False)

    def part_ids(self, ids) -> tuple[int, ...]:
        """Part ids as a task wrote them: robosafe's own, or (when any id is not one of ours
        and all are in ``arena_parts``) VLA-Arena's mesh geom indices mapped onto our parts."""
        ids = tuple(int(i) for i in ids)
        if all(i in self.parts for i in ids) or not all(i in self.arena_parts for i in ids):
            return ids
        return tuple(dict.fromkeys(self.arena_parts[i] for i in ids))


@dataclass(frozen=True)
class Articulation:
    """A drawer, door or knob joint (full compiled name) and its closed / open positions.
    A switchable knob is "on" when ``|q - closed| > 0.5 * |open - closed|``."""

    joint: str
    closed: float
    open: float

    def is_open(self, q: float) -> bool:
        return abs(q - self.closed) > 0.5 * abs(self.open - self.closed)
