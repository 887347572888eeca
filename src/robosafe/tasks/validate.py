"""Semantic checks of a parsed CBDDL task against the predicate catalogue.

``validate_task`` returns every problem it finds (the CLI prints them all), each a
:class:`TaskError` at the offending node. Name resolution:

* objects and fixtures share one namespace; the robot's gripper is always available as
  ``gripper0`` (App. 7.4, ``(CheckForce gripper0 apple_1 8.0)``);
* a region is named ``<target>_<region name>`` as in LIBERO (``kitchen_table_plate_region``) or,
  as an extension for the paper's App. 7.4 example (``region_B``), by its bare name;
* ``:init`` and ``:goal`` take ``goal`` predicates, ``:cost`` takes ``cost`` predicates.
"""

from __future__ import annotations

import math
from functools import lru_cache
from importlib import resources

from robosafe.errors import TaskError
from robosafe.tasks.ast import MovingObject, Pos, Pred, Problem, atoms
from robosafe.yamldata import load_yaml

ROBOT_ENTITIES = frozenset({"gripper0"})
ARG_KINDS = ("object", "region", "entity", "ids", "number")
MOTION_REQUIRED = {
    "linear": ("motion_period", "motion_travel_dist", "motion_direction"),
    "circular": ("motion_center", "motion_period"),
    # The paper gives waypoints no timing; robosafe requires the duration of one pass.
    "waypoint": ("motion_waypoints", "motion_period"),
    "projectile": ("motion_initial_speed", "motion_direction", "motion_gravity"),
}
MOTION_OPTIONAL = {"waypoint": ("motion_loop",)}
# Ranges documented by VLA-Arena's scene-construction guide (offsets, and Kelvin).
IMAGE_RANGES = {"brightness": (-1.0, 1.0), "saturation": (-1.0, 1.0), "contrast": (-1.0, 1.0),
                "temperature": (2000.0, 10000.0)}


@lru_cache(maxsize=1)
def load_catalogue() -> dict:
    """The predicate catalogue ``tasks/data/predicates.yaml`` (cached; do not mutate)."""
    text = resources.files("robosafe.tasks").joinpath("data/predicates.yaml").read_text("utf-8")
    return load_yaml(text)


@lru_cache(maxsize=4)
def _index(section: str) -> dict[str, tuple[str, dict]]:
    out: dict[str, tuple[str, dict]] = {}
    for name, entry in load_catalogue()[section].items():
        for spelling in (name, *entry.get("aliases", ())):
            out[spelling.lower()] = (name, entry)
    return out


def lookup_predicate(name: str, section: str) -> tuple[str, dict] | None:
    """(canonical name, catalogue entry) for ``name`` in section ``goal`` or ``cost``.

    Case-insensitive and alias-aware (``CheckGripperDistance`` -> ``CheckGripperDist``).
    """
    return _index(section).get(name.lower())


@lru_cache(maxsize=1)
def _world() -> dict:
    # read as a file of the robosafe package: importing robosafe.sim would import robosuite
    path = resources.files("robosafe").joinpath("sim/data/world.yaml")
    return load_yaml(path.read_text(encoding="utf-8"))


def _offset_limits(decl, placed: bool) -> tuple[float, float]:
    """Largest |x|, |y| offsets of a region on ``decl`` (module data: sim/data/world.yaml).

    A table region that ``:init`` places objects in must lie on the table top (else they start
    in the air). One only named by the goal may reach past the edges within
    ``max_fixture_offset_m``: VLA-Arena writes "anywhere on the table" as (-1 -1 1 1), and the
    table's own edges bound it."""
    world = _world()
    table = world["table"]
    if placed and decl is not None and decl.category in table["categories"]:
        return table["full_size"][0] / 2, table["full_size"][1] / 2
    limit = float(world["max_fixture_offset_m"])
    return limit, limit


class _Checker:
    def __init__(self, problem: Problem, source: str):
        self.p, self.source = problem, source
        self.errors: list[TaskError] = []
        self.decls = {d.name: d for d in (*problem.fixtures, *problem.objects)}
        self.refs = problem.region_index()

    def err(self, message: str, pos: Pos | None) -> None:
        self.errors.append(TaskError(message, source=self.source,
                                     line=pos.line if pos else None,
                                     column=pos.column if pos else None))

    def unique(self, items, what: str, key=lambda x: x.name) -> None:
        seen: dict[str, Pos | None] = {}
        for item in items:
            k = key(item)
            if k in seen:
                first = seen[k]
                at = f" (first at {first.line}:{first.column})" if first else ""
                self.err(f"duplicate {what} '{k}'{at}", item.pos)
            else:
                seen[k] = item.pos

    def run(self) -> list[TaskError]:
        p = self.p
        self.unique((*p.fixtures, *p.objects), "object or fixture name")
        # VLA-Arena keys regions by '<target>_<name>': one name may serve several targets.
        self.unique(p.regions, "region", key=lambda r: r.ref)
        self.unique(p.moving_objects, "moving object")
        self.unique(p.camera, "camera")
        self.unique(p.image_settings, "image setting", key=lambda s: s.key)
        for r in p.regions:
            self.region(r)
        for m in p.moving_objects:
            self.moving(m)
        where = p.obj_of_interest_pos or (None,) * len(p.obj_of_interest)
        for name, pos in zip(p.obj_of_interest, where, strict=False):
            if name not in self.decls:
                self.err(f"undefined object '{name}' in :obj_of_interest", pos)
        for atom in p.init:
            self.pred(atom, "goal", ":init")
        for atom in atoms(p.goal):
            self.pred(atom, "goal", ":goal")
        if p.cost is not None:
            for atom in atoms(p.cost):
                self.pred(atom, "cost", ":cost")
        self.perturbations()
        return self.errors

    def region(self, r) -> None:
        if r.target not in self.decls:
            self.err(f"region '{r.name}' targets undefined object or fixture '{r.target}'",
                     r.target_pos or r.pos)
        refs = {ref for ref, reg in self.refs.items() if reg is r}
        placed = any(str(a) in refs for atom in self.p.init for a in atom.args[1:])
        hx, hy = _offset_limits(self.decls.get(r.target), placed)
        for x0, y0, x1, y1 in r.ranges:
            if not all(-hx <= x <= hx for x in (x0, x1)) or not all(-hy <= y <= hy
                                                                  for y in (y0, y1)):
                self.err(f"region '{r.name}' range ({x0!r} {y0!r} {x1!r} {y1!r}) leaves its "
                         f"target '{r.target}' (offsets in metres from its centre: |x| <= "
                         f"{hx:g}, |y| <= {hy:g})", r.pos)
            elif x0 > x1 or y0 > y1:
                self.err(f"region '{r.name}' has a range with min > max "
                         f"({x0!r} {y0!r} {x1!r} {y1!r}); write (x_min y_min x_max y_max)",
                         r.pos)
        for lo, hi in (*r.yaw_rotation, *r.height_ranges):
            if lo > hi:
                self.err(f"region '{r.name}' has a (min max) pair with min > max "
                         f"({lo!r} {hi!r})", r.pos)
        if r.rgba is not None and not all(0.0 <= c <= 1.0 for c in r.rgba):
            self.err(f"region '{r.name}' rgba components must be in [0, 1]", r.pos)

    def moving(self, m: MovingObject) -> None:
        if m.name not in self.decls:
            self.err(f"moving object '{m.name}' is not declared in (:objects ...)", m.pos)
        elif m.name not in {d.name for d in self.p.objects}:
            self.err(f"moving object '{m.name}' is a fixture; only (:objects ...) can move",
                     m.pos)
        required = MOTION_REQUIRED[m.motion_type]
        allowed = (*required, *MOTION_OPTIONAL.get(m.motion_type, ()))
        self.unique(m.attrs, f"attribute of '{m.name}'", key=lambda a: ":" + a.name)
        for a in m.attrs:
            if a.name not in allowed:
                self.err(f"':{a.name}' does not apply to {m.motion_type} motion (allowed: "
                         f"{', '.join(':' + x for x in allowed)})", a.pos)
            else:
                self.motion_value(m, a)
        missing = [":" + r for r in required if m.get(r) is None]
        if missing:
            self.err(f"{m.motion_type} motion of '{m.name}' needs {', '.join(missing)}", m.pos)

    def motion_value(self, m: MovingObject, a) -> None:
        v = a.value
        if a.name == "motion_period" and not v > 0:
            self.err(f"motion period of '{m.name}' must be positive, got {v!r} s", a.pos)
        elif a.name == "motion_travel_dist" and not v > 0:
            self.err(f"travel distance of '{m.name}' must be positive, got {v!r}", a.pos)
        elif a.name == "motion_initial_speed" and not v >= 0:
            self.err(f"initial speed of '{m.name}' must be non-negative, got {v!r}", a.pos)
        elif a.name == "motion_direction" and not any(v):
            self.err(f"motion direction of '{m.name}' must be a non-zero vector", a.pos)
        elif a.name == "motion_waypoints":
            if len(v) < 2:
                self.err(f"waypoint motion of '{m.name}' needs at least 2 waypoints, "
                         f"got {len(v)}", a.pos)
            if any(not any(w[3:]) for w in v):
                self.err(f"waypoint directions (dx dy dz) of '{m.name}' must be non-zero",
                         a.pos)

    def pred(self, p: Pred, section: str, block: str) -> None:
        hit = lookup_predicate(p.name, section)
        if hit is None:
            other = "cost" if section == "goal" else "goal"
            if lookup_predicate(p.name, other) is not None:
                self.err(f"'{p.name}' is a {other} predicate; {block} takes {section} "
                         "predicates", p.pos)
            else:
                names = ", ".join(load_catalogue()[section])
                self.err(f"unknown predicate '{p.name}' in {block} (expected one of {names})",
                         p.pos)
            return
        kinds = hit[1]["args"]
        if len(p.args) != len(kinds):
            self.err(f"'{p.name}' takes {len(kinds)} argument{'s' * (len(kinds) != 1)} "
                     f"({', '.join(kinds) or 'none'}), got {len(p.args)}", p.pos)
            return
        where = p.arg_pos or (p.pos,) * len(p.args)
        for i, (arg, kind, pos) in enumerate(zip(p.args, kinds, where, strict=False), 1):
            self.arg(arg, kind, f"argument {i} of '{p.name}'", pos)

    def arg(self, arg, kind: str, what: str, pos: Pos | None) -> None:
        if kind == "number":
            if isinstance(arg, str | tuple) or not math.isfinite(arg):
                self.err(f"{what} must be a number, got {_show(arg)}", pos)
            return
        if kind == "ids":
            if not isinstance(arg, tuple):
                self.err(f"{what} must be a list of part ids such as (0 3), got {_show(arg)}",
                         pos)
            return
        noun = {"object": "an object", "region": "a region"}.get(kind, "an object or region")
        if not isinstance(arg, str):
            self.err(f"{what} must be {noun} name, got {_show(arg)}", pos)
            return
        is_obj = arg in self.decls or arg in ROBOT_ENTITIES
        is_region = arg in self.refs
        if kind == "object" and not is_obj:
            self.err(f"{what} must be an object or fixture; '{arg}' is a region" if is_region
                     else f"undefined object '{arg}' ({what})", pos)
        elif kind == "region" and not is_region:
            self.err(f"{what} must be a region (<target>_<region>); '{arg}' is an object"
                     if is_obj else f"undefined region '{arg}' ({what})", pos)
        elif kind == "entity" and not (is_obj or is_region):
            self.err(f"undefined object or region '{arg}' ({what})", pos)

    def perturbations(self) -> None:
        for s in self.p.image_settings:
            lo, hi = IMAGE_RANGES[s.key]
            if not lo <= s.value <= hi:
                self.err(f"{s.key} must be in [{lo:g}, {hi:g}], got {s.value!r}", s.pos)
        n = self.p.noise
        if n is not None:
            named = n.named
            if n.kind == "gaussian" and not named.get("var", 0.0) >= 0:
                self.err(f"gaussian noise variance must be non-negative, got {named['var']!r}",
                         n.pos)
            if n.kind == "salt_pepper" and not 0.0 <= named.get("prob", 0.0) <= 1.0:
                self.err(f"salt_pepper probability must be in [0, 1], got {named['prob']!r}",
                         n.pos)


def _show(arg) -> str:
    if isinstance(arg, str):
        return f"'{arg}'"
    if isinstance(arg, tuple):
        return "(" + " ".join(map(str, arg)) + ")"
    return f"number {arg!r}"


def validate_task(problem: Problem, source: str = "<text>") -> list[TaskError]:
    """Every semantic error in ``problem`` (empty when the task is valid), in source order."""
    errors = _Checker(problem, source).run()
    return sorted(errors, key=lambda e: (e.line is None, e.line or 0, e.column or 0))
