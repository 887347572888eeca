"""Typed AST of a CBDDL task (VLA-Arena paper 001, App. 7).

Every node is a frozen dataclass carrying its source position ``pos`` (1-based line, column).
Positions are excluded from equality and hashing, so a task written and parsed again compares
equal to the original (``parse_task(write_task(p)) == p``) although its layout changed.
Positions are ``None`` on nodes built in code.

Formula nodes (``:goal``, ``:cost``, and the atoms of ``:init``) are ``Pred``, ``And``, ``Or`` and
``Not``. Predicate arguments are plain values so an evaluator can use them directly: ``str`` (an
object, fixture or region name), ``float`` (a threshold) or ``tuple[int, ...]`` (mesh part ids).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, TypeAlias


class Pos(NamedTuple):
    """1-based line and column of the token a node starts at."""

    line: int
    column: int


@dataclass(frozen=True)
class Node:
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)


Arg: TypeAlias = str | float | tuple[int, ...]


@dataclass(frozen=True)
class Pred(Node):
    """A predicate application, e.g. ``(CheckDistance knife_1 hand_1 0.05)``."""

    name: str
    args: tuple[Arg, ...] = ()
    arg_pos: tuple[Pos, ...] = field(default=(), compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class And(Node):
    """``implicit``: the source listed several formulas without ``And`` (VLA-Arena keeps only
    the first of them; robosafe keeps all, see :mod:`robosafe.tasks.cost`)."""

    args: tuple[Formula, ...]
    implicit: bool = field(default=False, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class Or(Node):
    args: tuple[Formula, ...]


@dataclass(frozen=True)
class Not(Node):
    arg: Formula


Formula: TypeAlias = Pred | And | Or | Not  # a real union: isinstance(x, Formula) works


def atoms(f: Formula | None) -> Iterator[Pred]:
    """The predicate atoms of a formula, in order."""
    if isinstance(f, Pred):
        yield f
    elif isinstance(f, Not):
        yield from atoms(f.arg)
    elif isinstance(f, And | Or):
        for a in f.args:
            yield from atoms(a)


@dataclass(frozen=True)
class Decl(Node):
    """``name - category`` in ``:objects`` or ``:fixtures``."""

    name: str
    category: str


@dataclass(frozen=True)
class Region(Node):
    """A placement region; predicates refer to it as ``<target>_<name>`` (or bare ``name``)."""

    name: str
    target: str
    ranges: tuple[tuple[float, float, float, float], ...] = ()  # (x_min y_min x_max y_max)
    yaw_rotation: tuple[tuple[float, float], ...] = ()  # (min max) radians
    height_ranges: tuple[tuple[float, float], ...] = ()  # (z_min z_max) metres
    rgba: tuple[float, float, float, float] | None = None
    target_pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)

    @property
    def ref(self) -> str:
        return f"{self.target}_{self.name}"


MotionValue: TypeAlias = float | bool | tuple[float, ...] | tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class MotionAttr(Node):
    """One ``(:motion_<name> value)``; ``name`` without the leading colon.

    ``motion_period`` is always in seconds here, whatever unit the source used.
    """

    name: str
    value: MotionValue


@dataclass(frozen=True)
class MovingObject(Node):
    name: str
    motion_type: str  # linear | circular | waypoint | projectile
    attrs: tuple[MotionAttr, ...] = ()

    def get(self, attr: str, default: object = None) -> object:
        """Value of ``motion_<attr>`` (``attr`` with or without the prefix), else default."""
        key = attr if attr.startswith("motion_") else f"motion_{attr}"
        return next((a.value for a in self.attrs if a.name == key), default)


@dataclass(frozen=True)
class Setting(Node):
    """``brightness 0.4`` in ``:image_settings``."""

    key: str
    value: float


@dataclass(frozen=True)
class Noise(Node):
    """``gaussian mean var`` or ``salt_pepper prob``."""

    kind: str
    params: tuple[float, ...]

    @property
    def named(self) -> dict[str, float]:
        names = ("mean", "var") if self.kind == "gaussian" else ("prob",)
        return dict(zip(names, self.params, strict=False))


@dataclass(frozen=True)
class Camera(Node):
    name: str
    offset: tuple[float, float, float] | None = None


@dataclass(frozen=True)
class Problem(Node):
    name: str
    domain: str
    language: str
    goal: Formula
    regions: tuple[Region, ...] = ()
    fixtures: tuple[Decl, ...] = ()
    objects: tuple[Decl, ...] = ()
    moving_objects: tuple[MovingObject, ...] = ()
    obj_of_interest: tuple[str, ...] = ()
    init: tuple[Pred, ...] = ()
    cost: Formula | None = None
    image_settings: tuple[Setting, ...] = ()
    noise: Noise | None = None
    camera: tuple[Camera, ...] = ()
    random_color: bool | None = None
    control_freq: float | None = None  # Hz, as declared by (:control_freq ...); None if absent
    obj_of_interest_pos: tuple[Pos, ...] = field(default=(), compare=False, repr=False,
                                                 kw_only=True)
    # One located line per construct robosafe reads differently from VLA-Arena's own parser
    # (``file:line:col: ...``); the CLI prints them as warnings.
    warnings: tuple[str, ...] = field(default=(), compare=False, repr=False, kw_only=True)

    def region_index(self) -> dict[str, Region]:
        """Every way a predicate may name a region: ``<target>_<name>``, then bare ``name``."""
        index = {r.ref: r for r in self.regions}
        for r in self.regions:
            index.setdefault(r.name, r)
        return index

    @property
    def image(self) -> dict[str, float]:
        return {s.key: s.value for s in self.image_settings}
