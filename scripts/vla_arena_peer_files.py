"""Which of VLA-Arena's task files its own environment can build, reset and step.

Run with the peer environment's Python (``bash scripts/vla-arena-env.sh .venv-arena``):

    MUJOCO_GL=egl .venv-arena/bin/python scripts/vla_arena_peer_files.py \
        [--bddl-dir ../shared/vla-arena/bddl_files] [--out docs/vla_arena_peer.csv] [--limit N]

Every ``*.bddl`` below the folder (sorted) is built with VLA-Arena's ``ControlEnv`` as its
evaluators build it, minus the cameras (rendering does not change what loads), reset once and
stepped ten times with the evaluators' wait action (gripper open, arm still). A failure is
reported with its reason: for a missing asset, every asset file the scene names that is not in
VLA-Arena's assets folder (relative to it), not only the first MuJoCo trips on. Writes the CSV
and a short markdown summary beside it (``.md``).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import re
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, fields
from pathlib import Path

WAIT_ACTION = [0, 0, 0, 0, 0, 0, -1]  # the evaluators' no-op: arm still, gripper open
WAIT_STEPS = 10  # the evaluators' num_steps_wait
ASSET_TAGS = ("mesh", "texture", "hfield", "skin")
# XMLs LIBERO's wheels ship, loaded in place of a missing object / scene while diagnosing
STAND_IN = "stable_hope_objects/bbq_sauce/bbq_sauce.xml"
STAND_IN_SCENE = "scenes/libero_floor_warm_style.xml"


@dataclass
class FileResult:
    file: str  # relative to the bddl folder
    built: bool = False
    reset: bool = False
    stepped: bool = False
    build_s: float = 0.0
    reset_s: float = 0.0
    missing: str = ""  # asset files (relative to VLA-Arena's assets folder), ';'-separated
    error: str = ""  # first line of the error when it is not (only) a missing file


class _XmlTap:
    """Sees what robosuite loads, to list every missing file rather than the first.

    It keeps the last MJCF string robosuite compiles; in diagnosis mode (a second build of a
    file that failed on a missing object XML) it records each missing object XML and loads a
    stand-in object in its place, so the build goes on to the next missing file.
    """

    def __init__(self, root: Path):
        from robosuite.models import base
        from robosuite.utils import binding_utils

        self.xml: str | None = None
        self.diagnose = False
        self.missing_xml: list[str] = []
        compile_xml = binding_utils.MjSim.from_xml_string.__func__
        load_xml = base.MujocoXML.__init__

        def tapped_compile(cls, xml):
            self.xml = xml
            return compile_xml(cls, xml)

        def tapped_load(obj, fname):
            if self.diagnose and not os.path.exists(fname):
                self.missing_xml.append(fname)
                scene = Path(fname).parent.name == "scenes"
                fname = str(root / (STAND_IN_SCENE if scene else STAND_IN))
            load_xml(obj, fname)

        binding_utils.MjSim.from_xml_string = classmethod(tapped_compile)
        base.MujocoXML.__init__ = tapped_load


def assets_root() -> Path:
    from vla_arena.vla_arena import get_vla_arena_path

    return Path(get_vla_arena_path("assets"))


def _relative(path: str, root: Path) -> str:
    p = Path(path)
    try:
        return str(p.resolve(strict=False).relative_to(root.resolve()))
    except ValueError:
        # symlinked trees: fall back to the part after the last assets/ folder
        m = re.search(r"(?:^|/)assets/(.*)$", str(p))
        return m[1] if m else str(p)


def missing_in_xml(xml: str, root: Path) -> list[str]:
    """Asset files the compiled scene names that do not exist."""
    tree = ET.fromstring(xml)
    comp = tree.find("compiler")
    dirs = {"mesh": (comp.get("meshdir") if comp is not None else None) or "",
            "texture": (comp.get("texturedir") if comp is not None else None) or ""}
    out = []
    for tag in ASSET_TAGS:
        for el in tree.iter(tag):
            for attr in ("file", "fileright", "fileleft", "fileup", "filedown", "filefront",
                         "fileback"):
                f = el.get(attr)
                if not f:
                    continue
                path = f if os.path.isabs(f) else os.path.join(dirs.get(tag, ""), f)
                if not os.path.exists(path):
                    out.append(_relative(path, root))
    return sorted(set(out))


def missing_in_error(exc: BaseException, root: Path) -> list[str]:
    """The file an error names when an object XML itself is missing."""
    name = getattr(exc, "filename", None)
    if name:
        return [_relative(name, root)]
    m = re.search(r"(/\S+?\.(?:xml|obj|stl|msh|png))", str(exc))
    return [_relative(m[1], root)] if m and not os.path.exists(m[1]) else []


def _build(path: Path):
    from vla_arena.vla_arena.envs.env_wrapper import ControlEnv

    return ControlEnv(bddl_file_name=str(path), has_offscreen_renderer=False,
                      use_camera_obs=False)


def diagnose(path: Path, tap: _XmlTap, root: Path) -> list[str]:
    """Every missing file of a scene: builds it again with stand-ins for missing object XMLs."""
    tap.xml, tap.missing_xml, tap.diagnose = None, [], True
    # a scene with stand-ins may fail later on; what was seen until then is kept
    with contextlib.suppress(Exception):
        _build(path).close()
    tap.diagnose = False
    found = [_relative(f, root) for f in tap.missing_xml]
    found += missing_in_xml(tap.xml, root) if tap.xml else []
    return sorted(set(found))


def try_file(path: Path, rel: str, tap: _XmlTap, root: Path) -> FileResult:
    import numpy as np

    res = FileResult(rel)
    tap.xml = None
    env = None
    try:
        t = time.perf_counter()
        env = _build(path)
        res.build_s = round(time.perf_counter() - t, 2)
        res.built = True
        np.random.seed(0)
        t = time.perf_counter()
        env.reset()
        res.reset_s = round(time.perf_counter() - t, 2)
        res.reset = True
        for _ in range(WAIT_STEPS):
            env.step(WAIT_ACTION)
        res.stepped = True
    except Exception as exc:  # noqa: BLE001 - every failure is a row of the table
        missing = missing_in_xml(tap.xml, root) if tap.xml else []
        if not missing and missing_in_error(exc, root):
            missing = diagnose(path, tap, root)
        res.missing = ";".join(missing)
        if not missing:
            res.error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
    finally:
        if env is not None:
            with contextlib.suppress(Exception):  # a half-built env may not close
                env.close()
    return res


def summary(rows: list[FileResult]) -> str:
    ok = [r for r in rows if r.stepped]
    failed = [r for r in rows if not r.stepped]
    missing = sorted({m for r in failed for m in r.missing.split(";") if m})
    other = [r for r in failed if not r.missing]
    lines = [
        "# VLA-Arena's own environment on its 170 task files",
        "",
        ("Generated by `scripts/vla_arena_peer_files.py` in the peer environment "
        "(`bash scripts/vla-arena-env.sh .venv-arena`: VLA-Arena 1.0.0, robosuite 1.5.1, "
        "MuJoCo 3.9.0, LIBERO's asset wheels overlaid with `../shared/vla-arena/assets-extra`). "
        "Each file is built with VLA-Arena's `ControlEnv` (no cameras), reset once and stepped "
        f"{WAIT_STEPS} times with the evaluators' wait action. Per-file rows: "
        "[vla_arena_peer.csv](vla_arena_peer.csv)."),
        "",
        f"- build, reset and step: **{len(ok)}** of {len(rows)}",
        (f"- fail on missing asset files: **{len(failed) - len(other)}**, naming "
        f"**{len(missing)}** distinct files that neither VLA-Arena's repository nor LIBERO's "
        "wheels have"),
        f"- fail otherwise: **{len(other)}**",
        "",
    ]
    if missing:
        lines += [("Missing files (relative to VLA-Arena's `assets/`), with the number of task "
                  "files that need each:"), "", "| file | task files |", "|---|---|"]
        for m in missing:
            n = sum(m in r.missing.split(";") for r in failed)
            lines.append(f"| `{m}` | {n} |")
        lines.append("")
    if other:
        lines += ["Other failures:", ""] + [f"- `{r.file}`: {r.error}" for r in other] + [""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bddl-dir", type=Path,
                    default=here.parent / "shared" / "vla-arena" / "bddl_files")
    ap.add_argument("--out", type=Path, default=here / "docs" / "vla_arena_peer.csv")
    ap.add_argument("--limit", type=int, default=None, help="first N files only (a quick look)")
    args = ap.parse_args(argv)
    files = sorted(args.bddl_dir.rglob("*.bddl"))[: args.limit]
    if not files:
        print(f"no *.bddl below {args.bddl_dir}", file=sys.stderr)
        return 2
    root = assets_root()
    tap = _XmlTap(root)
    rows = []
    for i, f in enumerate(files, 1):
        r = try_file(f, str(f.relative_to(args.bddl_dir)), tap, root)
        rows.append(r)
        state = "ok" if r.stepped else ("missing " + r.missing if r.missing else r.error)
        print(f"[{i}/{len(files)}] {r.file}: {state}", file=sys.stderr, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, [f.name for f in fields(FileResult)], lineterminator="\n")
        w.writeheader()
        w.writerows(asdict(r) for r in rows)
    args.out.with_suffix(".md").write_text(summary(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
