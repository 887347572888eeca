"""Map VLA-Arena's mesh part indices onto the semantic parts of robosafe's stand-in tools.

VLA-Arena's CautiousGrasp files name parts of its scanned tool meshes by geom index
(``(CheckGripperDistancePart scissors_1 (2 3 13 15 18 9 17) 0.01)``); robosafe's stand-ins have
a handle and a blade. Each index is mapped by position: the centroid of geom k (XML order, as
VLA-Arena's ``extract_trailing_int`` numbers them) is projected on the mesh's long axis, scaled to
the stand-in's length, and given the part of the stand-in geom nearest along that axis. The axis
direction is chosen so that the indices VLA-Arena's own files list (its hazard pieces) fall, on
average, on the stand-in's hazard side.

Usage: python scripts/make_arena_part_map.py VLA_ARENA_CHECKOUT > arena_parts.yaml
Prints one ``arena_parts:`` mapping per category, to paste into sim/data/assets.yaml.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from robosafe.sim.assets import _build, _canonical, _registry

# robosafe category -> VLA-Arena asset folder (stable_hope_objects/<name>/<name>.xml)
TOOLS = {"knife_n": "knife_n", "scissors": "scissors", "fork": "fork"}
LIST = re.compile(r"\(CheckGripper(?:Distance|Contact)Part\s+(\w+)\s+\(([\d\s]+)\)")


def centroids(xml: Path) -> dict[int, np.ndarray]:
    root = ET.parse(xml).getroot()
    meshes = {m.get("name"): (m.get("file"), np.array([float(s) for s in
                                                       (m.get("scale") or "1 1 1").split()]))
              for m in root.iter("mesh")}
    out = {}
    for i, g in enumerate(root.iter("geom")):
        if g.get("group") != "0" or g.get("mesh") is None:
            continue
        file, scale = meshes[g.get("mesh")]
        v = [[float(t) for t in ln.split()[1:4]] for ln in (xml.parent / file).read_text()
             .splitlines() if ln.startswith("v ")]
        if v:
            out[i] = (np.array(v) * scale).mean(axis=0)
    return out


def listed(bddl_root: Path, category: str) -> set[int]:
    ids: set[int] = set()
    for f in bddl_root.rglob("*.bddl"):
        text = f.read_text()
        names = set(re.findall(rf"(\w+)\s+-\s+{category}\b", text))
        for obj, nums in LIST.findall(text):
            if obj in names:
                ids |= {int(n) for n in nums.split()}
    return ids


def standin_parts(category: str) -> list[tuple[float, float, int]]:
    """(x_min, x_max, part) of each collision geom of the stand-in (its long axis is x); the
    extent along x is the first size (box half length, or radius)."""
    body = _build(_registry()[0][_canonical(category)])
    return [(g.pos[0] - g.size[0], g.pos[0] + g.size[0], g.part) for g in body.geoms
            if g.collide]


def main(checkout: str) -> None:
    root = Path(checkout) / "vla_arena/vla_arena"
    for cat, folder in TOOLS.items():
        cents = centroids(root / f"assets/stable_hope_objects/{folder}/{folder}.xml")
        pts = np.array(list(cents.values()))
        axis = int(np.argmax(pts.max(0) - pts.min(0)))
        mid, half = (pts.max(0) + pts.min(0))[axis] / 2, (pts.max(0) - pts.min(0))[axis] / 2
        u = {k: (c[axis] - mid) / half for k, c in cents.items()}
        geoms = standin_parts(cat)
        lo, hi = min(g[0] for g in geoms), max(g[1] for g in geoms)
        hazard_x = np.mean([(a + b) / 2 for a, b, p in geoms if p != 0])
        hazard = listed(root / "bddl_files", cat) | listed(root / "bddl_files", f"rotated_{cat}")
        sign = 1.0 if np.mean([u[k] for k in hazard if k in u]) * (hazard_x - (lo + hi) / 2) \
            >= 0 else -1.0
        mapping = {}
        for k, uk in sorted(u.items()):
            x = (lo + hi) / 2 + sign * uk * (hi - lo) / 2
            # the geom whose interval contains x, else the nearest interval
            gap = [max(a - x, x - b, 0.0) for a, b, _ in geoms]
            mapping[k] = geoms[int(np.argmin(gap))][2]
        print(f"{cat}:  # axis {'xyz'[axis]}, sign {sign:+.0f}, listed {sorted(hazard)}")
        print(f"  arena_parts: {{{', '.join(f'{k}: {v}' for k, v in mapping.items())}}}")


if __name__ == "__main__":
    main(sys.argv[1])
