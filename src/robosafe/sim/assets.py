"""The bundled asset library: every object and fixture category of the built-in suites.

Categories are data (``data/assets.yaml``): a builder kind, dimensions, colours, mass, safety
properties and named parts. This module holds a handful of generic builders, one per geometry
family, that turn a row into procedural MJCF (primitives, plus lathed meshes written inline as
``<mesh vertex=... face=...>`` for visuals only), so the library installs with pip and needs no
mesh files or downloads.

The category list covers the objects of VLA-Arena's task suites (paper 001, App. 9, Tables 5-15:
StaticObstacles, CautiousGrasp, HazardAvoidance, StatePreservation, DynamicObstacles, ...,
LongHorizon), the LIBERO objects those suites reuse, and the CBDDL examples in
``robosafe/tasks/examples``. Tables are robosuite's table arena (robosafe.sim.world), never this
library's.

Conventions (the world builder relies on them):

- The root body's origin is the centre of the collision bounding box, so an object resting on a
  surface at height ``h`` has its origin at ``h + half_extents[2]``.
- Fixtures face -x: drawer fronts, handles and doors point towards -x in the asset frame.
- Collision geoms are group 0 (one part id each, named ``<name>_c<part>_<k>``), visual geoms
  group 1 with ``contype = conaffinity = 0`` and no mass (named ``<name>_v<k>``).
- "Sensor" geoms (the candle flame) are group-0 geoms of their own part with
  ``contype = conaffinity = 0``: never solid, never in ``data.contact``; touching one is
  ``mujoco.mj_geomDistance(...) <= 0``. (A contact ``gap`` cannot do this: MuJoCo 3.x detects
  out to ``margin + gap`` but still solves every contact closer than ``margin``.)
"""

from __future__ import annotations

import difflib
import itertools
import math
import os
import tempfile
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from typing import Any

import numpy as np
from robosuite.models.objects import MujocoXMLObject

from robosafe.errors import RegistryError
from robosafe.sim.categories import KINDS, PROPERTIES, Articulation, Category
from robosafe.yamldata import load_yaml

__all__ = ["Asset", "asset_xml", "categories", "category", "make_asset"]

_FREE_JOINT = "joint0"


# ---------------------------------------------------------------------------------------------
# Registry


def _data() -> dict[str, Any]:
    text = resources.files("robosafe.sim").joinpath("data/assets.yaml").read_text("utf-8")
    return load_yaml(text)


def _norm(name: str) -> str:
    return name.strip().lower().replace(" ", "_").replace("-", "_")


@lru_cache(maxsize=1)
def _registry() -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """(canonical name -> resolved row, alias -> canonical name), ``extends`` merged in."""
    raw = _data()
    defaults, rows = raw.get("defaults", {}), raw["categories"]
    resolved: dict[str, dict[str, Any]] = {}

    def resolve(name: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
        if name in resolved:
            return resolved[name]
        if name not in rows:
            raise RegistryError(f"assets.yaml: categories.{seen[-1]}: extends unknown {name!r}")
        if name in seen:
            raise RegistryError(f"assets.yaml: categories.{name}: circular extends")
        row = dict(rows[name] or {})
        base = resolve(row.pop("extends"), (*seen, name)) if "extends" in row else defaults
        out = {k: v for k, v in base.items() if k != "aliases"}
        out.update(row)
        out.setdefault("aliases", [])
        where = f"assets.yaml: categories.{name}"
        if out.get("builder") not in BUILDERS:
            raise RegistryError(f"{where}.builder: {out.get('builder')!r} not one of "
                                f"{', '.join(sorted(BUILDERS))}")
        if out.setdefault("kind", "object") not in KINDS:
            raise RegistryError(f"{where}.kind: {out['kind']!r} not one of {', '.join(KINDS)}")
        bad = set(out.get("properties", [])) - PROPERTIES
        if bad:
            raise RegistryError(f"{where}.properties: unknown {', '.join(sorted(bad))}")
        resolved[name] = out
        return out

    aliases: dict[str, str] = {}
    for name in rows:
        for alias in map(_norm, resolve(name)["aliases"]):
            if alias in rows or aliases.get(alias, name) != name:
                raise RegistryError(f"assets.yaml: alias {alias!r} is used twice")
            aliases[alias] = name
    return resolved, aliases


def categories() -> tuple[str, ...]:
    """Sorted canonical category names (aliases resolve through :func:`category`)."""
    return tuple(sorted(_registry()[0]))


def _canonical(name: str) -> str:
    rows, aliases = _registry()
    key = _norm(name)
    if key in rows:
        return key
    if key in aliases:
        return aliases[key]
    close = difflib.get_close_matches(key, [*rows, *aliases], n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}?" if close else f"{len(rows)} categories known"
    raise RegistryError(f"unknown asset category {name!r}; {hint}")


@cache
def category(name: str) -> Category:
    """The category ``name`` (canonical or alias); RegistryError naming close matches if unknown."""
    canon = _canonical(name)
    row = _registry()[0][canon]
    body = _build(row)
    lo, hi = _aabb(body)
    parts = {int(k): str(v) for k, v in (row.get("parts") or {0: "body"}).items()}
    if 0 not in parts:
        raise RegistryError(f"assets.yaml: categories.{canon}.parts: part 0 is missing")
    return Category(
        name=canon, kind=row["kind"], properties=frozenset(row.get("properties", [])),
        parts=parts, hazard_parts=frozenset(int(p) for p in row.get("hazard_parts", [])),
        half_extents=tuple(round(float(v), 6) for v in (hi - lo) / 2),
        mass=float(row.get("mass", 1.0)), builder=row["builder"],
        arena_parts={int(k): int(v) for k, v in (row.get("arena_parts") or {}).items()})


# ---------------------------------------------------------------------------------------------
# Geometry model: bodies of primitives, built in a natural frame (z = 0 at the bottom), then
# shifted so the collision bounding box is centred on the root origin.


@dataclass
class _Geom:
    type: str
    size: tuple[float, ...]
    pos: tuple[float, float, float] = (0.0, 0.0, 0.0)
    quat: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)
    part: int = 0
    rgba: tuple[float, ...] | None = None  # None: the category's (randomisable) main colour
    collide: bool = True
    visual: bool = True  # emit a group-1 visual copy of a collision geom
    sensor: bool = False
    mesh: tuple[np.ndarray, np.ndarray] | None = None  # (vertices, faces) of a visual mesh


@dataclass
class _Body:
    name: str
    pos: tuple[float, float, float] = (0.0, 0.0, 0.0)
    geoms: list[_Geom] = field(default_factory=list)
    sites: dict[str, tuple[str, tuple[float, ...], tuple[float, ...]]] = field(default_factory=dict)
    children: list[_Body] = field(default_factory=list)
    joint: dict[str, Any] | None = None  # type, axis, range, key, closed, open
    mass: float = 0.0


def _quat(euler_deg) -> tuple[float, float, float, float]:
    """Quaternion (w, x, y, z) of rotations about fixed x, then y, then z (degrees)."""
    q = np.array([1.0, 0.0, 0.0, 0.0])
    for axis, ang in zip(np.eye(3), np.radians(euler_deg)):
        r = np.array([math.cos(ang / 2), *(math.sin(ang / 2) * axis)])
        q = _qmul(r, q)
    return tuple(float(v) for v in q)


def _qmul(a, b):
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def _rotmat(q) -> np.ndarray:
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _half(g: _Geom) -> np.ndarray:
    """World-axis half extents of a collision primitive."""
    r = _rotmat(g.quat)
    s = g.size
    if g.type == "box":
        return np.abs(r) @ np.array(s)
    if g.type == "sphere":
        return np.full(3, s[0])
    if g.type == "ellipsoid":
        return np.sqrt((r * np.array(s)) ** 2 @ np.ones(3))
    axis = np.abs(r[:, 2])
    rad = s[0] * np.sqrt(np.clip(1 - axis**2, 0, 1)) if g.type == "cylinder" else s[0]
    return rad + s[1] * axis


def _volume(g: _Geom) -> float:
    s = g.size
    return {"box": lambda: 8 * s[0] * s[1] * s[2],
            "sphere": lambda: 4 / 3 * math.pi * s[0] ** 3,
            "ellipsoid": lambda: 4 / 3 * math.pi * s[0] * s[1] * s[2],
            "cylinder": lambda: 2 * math.pi * s[0] ** 2 * s[1],
            "capsule": lambda: 2 * math.pi * s[0] ** 2 * s[1] + 4 / 3 * math.pi * s[0] ** 3,
            }[g.type]()


def _aabb(body: _Body, offset=(0.0, 0.0, 0.0)) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
    base = np.array(offset) + np.array(body.pos)
    for g in body.geoms:
        if g.collide:
            h = _half(g)
            lo, hi = np.minimum(lo, base + g.pos - h), np.maximum(hi, base + g.pos + h)
    for child in body.children:
        clo, chi = _aabb(child, base)
        lo, hi = np.minimum(lo, clo), np.maximum(hi, chi)
    return lo, hi


def lathe(profile, n: int = 24, loop: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Surface of revolution about z of the (r, z) ``profile``: a closed, outward-oriented mesh.

    Profile points with r == 0 become single pole vertices; ``loop`` closes the profile back to
    its first point (a torus). Without ``loop`` the profile should start and end on the axis."""
    verts, rings = [], []
    angles = np.linspace(0, 2 * math.pi, n, endpoint=False)
    for r, z in profile:
        if r <= 1e-9:
            rings.append([len(verts)] * n)
            verts.append((0.0, 0.0, z))
        else:
            rings.append(list(range(len(verts), len(verts) + n)))
            verts.extend((r * math.cos(a), r * math.sin(a), z) for a in angles)
    pairs = list(itertools.pairwise(rings)) + ([(rings[-1], rings[0])] if loop else [])
    faces = []
    for a, b in pairs:
        for i in range(n):
            j = (i + 1) % n
            for tri in ((a[i], a[j], b[j]), (a[i], b[j], b[i])):
                if len(set(tri)) == 3:
                    faces.append(tri)
    v, f = np.array(verts), np.array(faces)
    signed = np.einsum("ij,ij->i", v[f[:, 0]], np.cross(v[f[:, 1]], v[f[:, 2]])).sum()
    return v, (f[:, ::-1] if signed < 0 else f)


# ---------------------------------------------------------------------------------------------
# Builders: one per geometry family. Each returns the root body in the natural frame.


def _b_fruit(s):
    rx, ry, rz = s["radii"]
    sphere = rx == ry == rz
    geoms = [_Geom("sphere" if sphere else "ellipsoid", (rx,) if sphere else (rx, ry, rz),
                   (0, 0, rz))]
    if "stem" in s:
        r, hl = s["stem"]
        geoms.append(_Geom("cylinder", (r, hl), (0, 0, 2 * rz + 0.4 * hl), collide=False,
                           rgba=tuple(s.get("stem_rgba", (0.35, 0.25, 0.1, 1)))))
    return _Body("object", geoms=geoms)


def _b_box(s):
    hx, hy, hz = s["size"]
    return _Body("object", geoms=[_Geom("box", (hx, hy, hz), (0, 0, hz))])


def _profile_cylinders(profile, merge=0.12):
    cyl: list[list[float]] = []
    for (r0, z0), (r1, z1) in itertools.pairwise(profile):
        if z1 - z0 <= 1e-9:
            continue
        r = max(r0, r1)
        if cyl and abs(r - cyl[-1][0]) <= merge * max(r, cyl[-1][0]):
            cyl[-1] = [max(r, cyl[-1][0]), cyl[-1][1], z1]
        else:
            cyl.append([r, z0, z1])
    return cyl


def _b_lathe(s):
    prof = [tuple(p) for p in s["profile"]]
    cyls = s.get("collision") or _profile_cylinders(prof)
    geoms = [_Geom("cylinder", (r, (z1 - z0) / 2), (0, 0, (z0 + z1) / 2), visual=False)
             for r, z0, z1 in cyls]
    geoms.append(_Geom("mesh", (), collide=False, mesh=lathe(prof, s.get("segments", 24))))
    return _Body("object", geoms=geoms)


def _b_container(s):
    wall, floor = s["wall"], s["floor"]
    if s.get("shape", "round") == "rect":
        hx, hy, hz = s["size"]
        geoms = [_Geom("box", (hx, hy, floor / 2), (0, 0, floor / 2))]
        for sx in (-1, 1):
            geoms.append(_Geom("box", (wall / 2, hy, hz), (sx * (hx - wall / 2), 0, hz)))
            geoms.append(_Geom("box", (hx - wall, wall / 2, hz), (0, sx * (hy - wall / 2), hz)))
        inner = (hx - wall, hy - wall)
        height = 2 * hz
    else:
        rim, rb, height, n = s["radius"], s.get("base_radius", s["radius"]), s["height"], s["n"]
        alpha = math.atan2(rim - rb, height)
        length = math.hypot(rim - rb, height)
        rc = (rim + rb) / 2 - wall / 2 * math.cos(alpha)
        zc = height / 2 + wall / 2 * math.sin(alpha)
        chord = rim * math.tan(math.pi / n) * 1.05
        geoms = [_Geom("cylinder", (rb, floor / 2), (0, 0, floor / 2), visual=False)]
        for k in range(n):
            phi = 2 * math.pi * k / n
            q = _qmul(_quat((0, 0, math.degrees(phi))), _quat((0, math.degrees(alpha), 0)))
            geoms.append(_Geom("box", (wall / 2, chord, length / 2),
                               (rc * math.cos(phi), rc * math.sin(phi), zc),
                               tuple(float(v) for v in q), visual=False))
        top = height + wall * math.sin(alpha)
        prof = [(0, 0), (rb, 0), (rim, top), (rim - wall, top),
                (rb - wall * (1 + math.sin(alpha)), floor), (0, floor)]
        geoms.append(_Geom("mesh", (), collide=False, mesh=lathe(prof, 2 * n)))
        inner = (rb - wall,) * 2
    zin = (height - floor) / 2
    return _Body("object", geoms=geoms,
                 sites={"contain_region": ("box", (0, 0, floor + zin), (*inner, zin))})


def _b_torus(s):
    big, r, n = s["major"], s["minor"], s["n"]
    geoms = []
    for k in range(n):
        phi = 2 * math.pi * k / n
        q = _quat((90, 0, math.degrees(phi)))  # capsule axis (z) -> tangent direction
        geoms.append(_Geom("capsule", (r, big * math.tan(math.pi / n)),
                           (big * math.cos(phi), big * math.sin(phi), r), q, visual=False))
    circle = [(big + r * math.cos(t), r + r * math.sin(t))
              for t in np.linspace(0, 2 * math.pi, 12, endpoint=False)]
    geoms.append(_Geom("mesh", (), collide=False, mesh=lathe(circle, 2 * n, loop=True)))
    return _Body("object", geoms=geoms)


def _b_compound(s):
    return _Body("object")


def _b_cabinet(s):
    """Carcass of boxes with levels top to bottom: ``drawer`` (slide joint), ``open`` (shelf)
    or ``door`` (one hinged front door over the whole carcass, e.g. a microwave)."""
    hx, hy, hz = s["size"]
    t, c = s["wall"], 0.002
    levels, part = s["levels"], s.get("parts_of", {"drawer": 1, "handle": 2, "door": 1})
    body = _Body("object", mass=s.get("carcass_mass", 10.0))
    body.geoms += [_Geom("box", (t / 2, hy, hz), (hx - t / 2, 0, hz)),
                   _Geom("box", (hx, t / 2, hz), (0, -(hy - t / 2), hz)),
                   _Geom("box", (hx, t / 2, hz), (0, hy - t / 2, hz)),
                   _Geom("box", (hx - t / 2, hy - t, t / 2), (-t / 2, 0, 2 * hz - t / 2)),
                   _Geom("box", (hx - t / 2, hy - t, t / 2), (-t / 2, 0, t / 2))]
    body.sites["top_side"] = ("box", (0, 0, 2 * hz + 0.005), (hx - t, hy - t, 0.005))
    n = len(levels)
    hl = (2 * hz - 2 * t - (n - 1) * t) / n
    travel = s.get("travel", 1.5 * hx)
    for i, lvl in enumerate(levels):
        ztop = 2 * hz - t - i * (hl + t)
        zc = ztop - hl / 2
        if i < n - 1:
            body.geoms.append(_Geom("box", (hx - t / 2, hy - t, t / 2),
                                    (-t / 2, 0, ztop - hl - t / 2)))
        region = f"{lvl['name']}_region"
        inner = (hx - t / 2, hy - t, hl / 2)  # the level's free space
        if lvl["type"] == "open":
            body.sites[region] = ("box", (-t / 2, 0, zc), inner)
        elif lvl["type"] == "drawer":
            dy, dz, dxh = hy - t - c, hl / 2 - c, hx - t / 2 - c / 2
            x0 = -t / 2 - c / 2  # drawer box spans [-hx, hx - t - c]
            wall_h = 0.7 * dz
            d = _Body(f"{lvl['name']}_drawer", (0, 0, zc), mass=lvl.get("mass", 0.8),
                      joint={"type": "slide", "axis": (-1, 0, 0), "range": (0, travel),
                             "key": lvl.get("joint", f"{lvl['name']}_level"),
                             "closed": 0.0, "open": travel, "frictionloss": 0.5})
            p, ph = part["drawer"], part["handle"]
            d.geoms += [_Geom("box", (t / 2, dy, dz), (-hx + t / 2, 0, 0), part=p),
                        _Geom("box", (dxh, dy, t / 2), (x0, 0, -dz + t / 2), part=p),
                        _Geom("box", (t / 2, dy, wall_h), (hx - t - c - t / 2, 0, -dz + wall_h),
                              part=p),
                        _Geom("box", (dxh, t / 2, wall_h), (x0, -dy + t / 2, -dz + wall_h), part=p),
                        _Geom("box", (dxh, t / 2, wall_h), (x0, dy - t / 2, -dz + wall_h), part=p),
                        _Geom("box", (0.01, min(0.05, dy / 2), 0.006), (-hx - 0.01, 0, 0), part=ph,
                              rgba=tuple(s.get("handle_rgba", (0.3, 0.3, 0.3, 1))))]
            d.sites[region] = ("box", (x0, 0, -dz + t + (wall_h * 2 - t) / 2),
                               (dxh - t, dy - t, (wall_h * 2 - t) / 2))
            body.children.append(d)
        elif lvl["type"] == "door":
            body.sites[region] = ("box", (-t / 2, 0, zc), inner)
        else:
            raise RegistryError(f"assets.yaml: cabinet level type {lvl['type']!r} unknown")
    if any(lvl["type"] == "door" for lvl in levels):
        open_ = s.get("door_open", 1.6)
        door = _Body("door", (-hx - t / 2, -hy, hz), mass=s.get("door_mass", 1.0),
                     joint={"type": "hinge", "axis": (0, 0, 1), "range": (0, 2.0), "key": "door",
                            "closed": 0.0, "open": open_, "damping": 1.0, "frictionloss": 0.1})
        door.geoms += [_Geom("box", (t / 2, hy, hz), (0, hy, 0), part=part["door"],
                             rgba=tuple(s.get("door_rgba", (0.15, 0.15, 0.15, 1)))),
                       _Geom("box", (0.01, 0.008, 0.6 * hz), (-t / 2 - 0.01, 2 * hy - 0.03, 0),
                             part=part["handle"],
                             rgba=tuple(s.get("handle_rgba", (0.6, 0.6, 0.6, 1))))]
        body.children.append(door)
    return body


def _b_stove(s):
    hx, hy, hz = s["size"]
    br, bh, bx, by = s["burner"]
    kr, kh, kx, ky = s["knob"]
    body = _Body("object", mass=s.get("base_mass", 5.0))
    body.geoms += [_Geom("box", (hx, hy, hz), (0, 0, hz)),
                   _Geom("cylinder", (br, bh), (bx, by, 2 * hz + bh), part=1,
                         rgba=tuple(s.get("burner_rgba", (0.25, 0.05, 0.05, 1))))]
    body.sites["burner"] = ("cylinder", (bx, by, 2 * hz + 2 * bh + 0.01), (br, 0.01))
    on = s.get("knob_on", 1.5708)
    knob = _Body("knob", (kx, ky, 2 * hz), mass=0.02,
                 joint={"type": "hinge", "axis": (0, 0, 1), "range": (0, on), "key": "knob",
                        "closed": 0.0, "open": on, "damping": 0.01, "frictionloss": 0.005,
                        "armature": 0.0005})
    knob.geoms += [_Geom("cylinder", (kr, kh), (0, 0, kh), part=2,
                         rgba=tuple(s.get("knob_rgba", (0.1, 0.1, 0.1, 1)))),
                   _Geom("box", (0.8 * kr, 0.002, 0.001), (0, 0, 2 * kh + 0.001), collide=False,
                         rgba=(0.9, 0.9, 0.9, 1))]
    body.children.append(knob)
    return body


BUILDERS = {"fruit": _b_fruit, "box": _b_box, "lathe": _b_lathe, "container": _b_container,
            "torus": _b_torus, "compound": _b_compound, "cabinet": _b_cabinet,
            "stove": _b_stove}


def _extra(e: dict[str, Any]) -> _Geom:
    return _Geom(e["type"], tuple(e["size"]), tuple(e.get("pos", (0, 0, 0))),
                 _quat(e.get("euler", (0, 0, 0))), int(e.get("part", 0)),
                 tuple(e["rgba"]) if "rgba" in e else None, bool(e.get("collide", True)),
                 bool(e.get("visual", True)), bool(e.get("sensor", False)))


def _build(row: dict[str, Any]) -> _Body:
    """The root body of a category row, centred on its collision bounding box."""
    body = BUILDERS[row["builder"]](row)
    body.geoms += [_extra(e) for e in row.get("extras", [])]
    for st in row.get("sites", []):
        body.sites[st["name"]] = (st.get("type", "sphere"), tuple(st["pos"]),
                                  tuple(st.get("size", (0.005,))))
    lo, hi = _aabb(body)
    if not np.all(np.isfinite(lo)):
        raise RegistryError(f"assets.yaml: {row['builder']} row has no collision geom")
    ctr = (lo + hi) / 2

    def shift(p):
        return tuple(float(v) for v in np.array(p) - ctr)

    for g in body.geoms:
        g.pos = shift(g.pos)
    body.sites = {k: (t, shift(p), sz) for k, (t, p, sz) in body.sites.items()}
    for child in body.children:
        child.pos = shift(child.pos)
    half = (hi - lo) / 2
    body.sites.setdefault("top", ("sphere", (0, 0, half[2]), (0.005,)))
    body.sites.setdefault("bottom", ("sphere", (0, 0, -half[2]), (0.005,)))
    if body.mass == 0.0:
        body.mass = float(row.get("mass", 1.0))
    return body


# ---------------------------------------------------------------------------------------------
# MJCF writer


def _f(values) -> str:
    return " ".join(f"{float(v):.6g}" if abs(float(v)) > 5e-10 else "0" for v in values)


@dataclass
class _Out:
    lines: list[str] = field(default_factory=list)
    meshes: list[str] = field(default_factory=list)
    part_geoms: dict[int, list[str]] = field(default_factory=dict)
    sensors: list[str] = field(default_factory=list)
    visual: list[str] = field(default_factory=list)
    recolor: list[str] = field(default_factory=list)
    sites: list[str] = field(default_factory=list)
    joints: dict[str, tuple[str, float, float]] = field(default_factory=dict)


def _emit(body: _Body, row, rgba, out: _Out, depth: int, free: bool) -> None:
    pad = "  " * depth
    attrs = f' name="{body.name}"' + (f' pos="{_f(body.pos)}"' if body.name != "object" else "")
    out.lines.append(f"{pad}<body{attrs}>")
    if free:
        out.lines.append(f'{pad}  <joint name="{_FREE_JOINT}" type="free" damping="0.0005"/>')
    j = body.joint
    if j:
        opts = {"damping": 5.0, "frictionloss": 0.0, "armature": 0.01}
        opts.update({k: j[k] for k in opts if k in j})
        extra = "".join(f' {k}="{_f([v])}"' for k, v in opts.items())
        out.lines.append(f'{pad}  <joint name="{j["key"]}" type="{j["type"]}"'
                         f' axis="{_f(j["axis"])}" range="{_f(j["range"])}"'
                         f' limited="true"{extra}/>')
        out.joints[j["key"]] = (j["key"], float(j["closed"]), float(j["open"]))
    solid = [g for g in body.geoms if g.collide and not g.sensor]
    vol = sum(_volume(g) for g in solid)
    fr = _f(row.get("friction", (1.0, 0.005, 0.0001)))
    condim = int(row.get("condim", 4))
    for g in body.geoms:
        color = _f(g.rgba if g.rgba is not None else rgba)
        place = f'pos="{_f(g.pos)}"' + ("" if g.quat == (1.0, 0.0, 0.0, 0.0)
                                         else f' quat="{_f(g.quat)}"')
        if g.type == "mesh":
            mname = f"mesh{len(out.meshes)}"
            v, fc = g.mesh
            out.meshes.append(f'    <mesh name="{mname}" vertex="{_f(v.ravel())}" '
                              f'face="{" ".join(str(int(i)) for i in fc.ravel())}"/>')
            shape = f'type="mesh" mesh="{mname}"'
        else:
            shape = f'type="{g.type}" size="{_f(g.size)}"'
        if g.collide:
            gname = f"c{g.part}_{len(out.part_geoms.setdefault(g.part, []))}"
            out.part_geoms[g.part].append(gname)
            if g.sensor:
                out.sensors.append(gname)
            mass = 0.0 if g.sensor or vol == 0 else body.mass * _volume(g) / vol
            phys = (f' group="0" friction="{fr}" condim="{condim}" mass="{_f([mass])}"'
                    + (' contype="0" conaffinity="0"' if g.sensor else ""))
            out.lines.append(f'{pad}  <geom name="{gname}" {shape} {place}{phys} rgba="{color}"/>')
        if g.visual:
            vname = f"v{len(out.visual)}"
            out.visual.append(vname)
            if g.rgba is None:
                out.recolor.append(vname)
            out.lines.append(f'{pad}  <geom name="{vname}" {shape} {place} group="1" contype="0" '
                             f'conaffinity="0" mass="0" rgba="{color}"/>')
    for sname, (stype, spos, ssize) in body.sites.items():
        out.sites.append(sname)
        out.lines.append(f'{pad}  <site name="{sname}" type="{stype}" pos="{_f(spos)}" '
                         f'size="{_f(ssize)}" rgba="0 0 0 0" group="3"/>')
    for child in body.children:
        _emit(child, row, rgba, out, depth + 1, False)
    out.lines.append(f"{pad}</body>")


def _generate(cat: Category, rgba, fixed: bool) -> tuple[str, _Out]:
    row = _registry()[0][cat.name]
    body = _build(row)
    color = tuple(rgba) if rgba is not None else tuple(row.get("rgba", (0.6, 0.6, 0.6, 1)))
    if len(color) == 3:
        color = (*color, 1.0)
    out = _Out()
    _emit(body, row, color, out, 3, not fixed)
    hx, hy, hz = cat.half_extents
    xml = "\n".join([
        f'<mujoco model="{cat.name}">',
        "  <asset>", *out.meshes, "  </asset>",
        "  <worldbody>", "    <body>", *out.lines,
        f'      <site name="bottom_site" pos="{_f((0, 0, -hz))}" size="0.005" rgba="0 0 0 0"/>',
        f'      <site name="top_site" pos="{_f((0, 0, hz))}" size="0.005" rgba="0 0 0 0"/>',
        (f'      <site name="horizontal_radius_site" pos="{_f((hx, hy, 0))}" size="0.005"'
         ' rgba="0 0 0 0"/>'),
        "    </body>", "  </worldbody>", "</mujoco>", ""])
    return xml, out


def _resolve(cat: Category | str) -> Category:
    return cat if isinstance(cat, Category) else category(cat)


def asset_xml(cat: Category | str, *, rgba=None, fixed: bool | None = None) -> str:
    """The MJCF text of a category (independent of the instance name; same inputs, same bytes)."""
    c = _resolve(cat)
    return _generate(c, rgba, c.kind == "fixture" if fixed is None else fixed)[0]


class Asset(MujocoXMLObject):
    """A robosuite object for one category instance.

    Extra attributes (full compiled names): ``category``, ``part_geoms`` (part id -> collision
    geoms), ``named_sites`` (contain_region, burner, flame, top, bottom, drawer regions, ...),
    ``articulations`` (drawer / door / knob joints), ``rgba_geoms`` (randomisable visual geoms),
    ``sensor_geoms`` (non-solid part geoms such as the flame: sense them with mj_geomDistance),
    ``free_joint`` (None when fixed), ``xml`` (the generated MJCF). robosuite's own ``joints`` and
    ``sites`` lists are left as robosuite defines them (its envs index ``obj.joints[0]``)."""

    def __init__(self, cat: Category, name: str, *, rgba=None, fixed: bool | None = None,
                 source: str = "stand-in", real_key: str | None = None):
        fixed = cat.kind == "fixture" if fixed is None else bool(fixed)
        frames = None  # a real asset's file numbering and site frames (FileFrames)
        from robosafe.sim.libero_assets import resolve_source

        # its files are looked up as it is built (one line naming a missing folder)
        if resolve_source(source, installed=False) == "stand-in":
            xml, out = _generate(cat, rgba, fixed)
        else:
            cat, xml, out, frames = _real(cat, fixed, source, real_key or cat.name)
        self.source = source
        # real assets: robosafe's root frame in the file's own root frame (pose mapping)
        self.source_frame = None
        if source != "stand-in":
            from robosafe.sim.libero_assets import source_frame

            self.source_frame = source_frame(real_key or cat.name, source)
        fd, path = tempfile.mkstemp(prefix="robosafe_asset_", suffix=".xml")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(xml)
            super().__init__(path, name=name, joints=None, obj_type="all",
                             duplicate_collision_geoms=False)
        finally:
            os.unlink(path)
        p = self.naming_prefix
        self.xml = xml
        self.category = cat
        self.fixed = fixed
        self.free_joint = None if fixed else p + _FREE_JOINT
        self.part_geoms = {k: tuple(p + g for g in v) for k, v in sorted(out.part_geoms.items())}
        self.named_sites = {s: p + s for s in out.sites}
        self.named_sites["default"] = p + "default_site"
        for key in ("top_region", "heating_region"):
            if "contain_region" not in self.named_sites and key in self.named_sites:
                self.named_sites["contain_region"] = self.named_sites[key]
        if "burner" in self.named_sites:
            self.named_sites.setdefault("cook_region", self.named_sites["burner"])
        self.articulations = {k: Articulation(p + j, lo, hi)
                              for k, (j, lo, hi) in out.joints.items()}
        self.rgba_geoms = tuple(p + g for g in out.recolor)
        self.sensor_geoms = tuple(p + g for g in out.sensors)
        # VLA-Arena's geom index -> collision geom (part ids in its numbering: its tools), and
        # box sites as the file turns and sizes them (VLA-Arena's region tests read those)
        self.index_geoms = {i: p + g for i, g in frames.index_geoms.items()} if frames else {}
        self.file_sites = {p + n: v for n, v in frames.sites.items()} if frames else {}
        # the body whose pose is robosafe's pose of the object (its collision box centre,
        # upright): the root, or VLA-Arena's assets' massless child (their root is the file's
        # body, which holds the free joint as in VLA-Arena's env)
        self.centre_body = p + "centre" if source == "vla-arena" else self.root_body

    @property
    def horizontal_radius(self) -> float:
        return float(math.hypot(*self.category.half_extents[:2]))

    def get_bounding_box_half_size(self) -> np.ndarray:
        return np.array(self.category.half_extents)


def _real(cat: Category, fixed: bool, source: str, key: str) -> tuple[Category, str, _Out, Any]:
    """The real asset (row ``key`` of ``source``, see :mod:`robosafe.sim.libero_assets`) for
    ``cat``, with the stand-in's root sites it lacks scaled onto it."""
    from robosafe.sim.libero_assets import real_xml

    stand_in = _build(_registry()[0][cat.name])
    real = real_xml(cat, fixed, stand_in.sites, cat.half_extents, source, key)
    out = _Out(part_geoms=real.part_geoms, visual=real.visual, recolor=list(real.visual),
               sites=real.sites, joints=real.joints)
    return real.category, real.xml, out, real.frames


def region_articulation(asset: Asset, name: str) -> Articulation | None:
    """The articulation a region of ``asset`` names (``top_region`` -> the ``top`` drawer), or
    None if the region is not an articulated part."""
    art = asset.articulations.get(name)
    if art is None:
        stem = name.removesuffix("_region")
        art = next((a for k, a in asset.articulations.items() if k.startswith(stem)), None)
    return art


def make_asset(cat: Category | str, name: str, *, rgba=None, fixed: bool | None = None,
               source: str = "stand-in", real_key: str | None = None) -> Asset:
    """A robosuite object for category ``cat`` named ``name`` (robosuite prefixes every element
    with ``f"{name}_"``). Objects get a free joint unless ``fixed``; fixtures are fixed by default.
    A fixed asset has no joint on its root body, so the world builder may weld it or make it a
    mocap body (set ``mocap="true"`` on ``asset.get_obj()``)."""
    return Asset(_resolve(cat), name, rgba=rgba, fixed=fixed, source=source, real_key=real_key)
