"""VLA-Arena's own asset files in robosafe's simulator (``--assets vla-arena``,
robosafe.sim.libero_assets): an object built from a VLA-Arena asset XML keeps the file's geoms,
masses and frictions (numbers worked out by hand from the XML written here), and a file the
folder lacks is one warning line and the stand-in. The asset folders are written into tmp_path:
no VLA-Arena file is shipped or needed."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

import robosafe.sim.env as sim_env
from robosafe.errors import RobosafeError
from robosafe.sim.assets import make_asset
from robosafe.sim.libero_assets import arena_root, missing_file, source_frame

# VLA-Arena's layout (stable_scanned_objects/<name>/<name>.xml), robosuite's default classes,
# a visual geom with a density (MuJoCo counts it in the mass, as VLA-Arena's env does)
APPLE = """<mujoco model="apple">
  <default>
    <default class="collision"><geom group="0" friction="0.95 0.3 0.1"/></default>
  </default>
  <asset/>
  <worldbody>
    <body>
      <body name="object">
        <geom type="box" size="0.02 0.03 0.01" group="1" contype="0" conaffinity="0"
              density="100"/>
        <geom type="box" size="0.02 0.03 0.01" density="1000" class="collision"/>
        <geom type="box" pos="0 0 0.02" size="0.01 0.01 0.01" density="500" class="collision"/>
      </body>
      <site name="bottom_site" pos="0 0 -0.01" size="0.005"/>
    </body>
  </worldbody>
</mujoco>
"""

# a file that names a mesh the folder does not have
LEMON = """<mujoco model="lemon">
  <asset><mesh name="skin" file="visual/lemon.obj"/></asset>
  <worldbody><body><body name="object">
    <geom type="mesh" mesh="skin" group="0"/>
  </body></body></worldbody>
</mujoco>
"""

TASK = """(define (problem vla_arena_assets)
  (:domain robosuite)
  (:language Pick up the apple)
  (:regions
    (a (:target main_table) (:ranges ((-0.16 -0.16 -0.14 -0.14))))
    (b (:target main_table) (:ranges ((-0.16 0.14 -0.14 0.16))))
    (c (:target main_table) (:ranges ((0.09 -0.01 0.11 0.01))))
  )
  (:fixtures main_table - table)
  (:objects
    apple_1 - apple
    kiwi_1 - kiwi
    lemon_1 - lemon
  )
  (:obj_of_interest apple_1)
  (:init
    (On apple_1 main_table_a)
    (On kiwi_1 main_table_b)
    (On lemon_1 main_table_c)
  )
  (:goal (And (Up apple_1)))
)
"""


@pytest.fixture
def arena_dir(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "assets"
    for name, text in (("apple", APPLE), ("lemon", LEMON)):
        folder = root / "stable_scanned_objects" / name
        folder.mkdir(parents=True)
        (folder / f"{name}.xml").write_text(text)
    monkeypatch.setenv("ROBOSAFE_VLA_ARENA_ASSETS", str(root))
    return root


def test_object_from_a_vla_arena_xml_has_its_geoms_mass_and_friction(arena_dir):
    # fixed: the MJCF compiles on its own (a free joint needs a top-level body)
    asset = make_asset("apple", "apple_1", source="vla-arena", real_key="apple", fixed=True)
    assert asset.source == "vla-arena"
    m = mujoco.MjModel.from_xml_string(asset.xml)
    body = m.body("object").id
    # by hand: 0.04 x 0.06 x 0.02 m at 1000 kg/m3 = 0.048, 0.02^3 at 500 = 0.004, the visual
    # box at 100 = 0.0048, and robosuite's two collision-geom copies (VLA-Arena's apple is built
    # with duplicate_collision_geoms) at 1e-8 kg each
    assert m.body_subtreemass[body] == pytest.approx(0.048 + 0.004 + 0.0048 + 2e-8, rel=1e-12)
    collision = [g for g in range(m.ngeom) if m.geom_group[g] == 0]
    assert len(collision) == 2  # the default class gave both their group
    np.testing.assert_allclose(m.geom_size[collision], [[0.02, 0.03, 0.01], [0.01, 0.01, 0.01]])
    np.testing.assert_allclose(m.geom_friction[collision], [[0.95, 0.3, 0.1]] * 2)
    # the file's visual box and one non-colliding copy per collision box (their 2e-8 kg above)
    visual = [g for g in range(m.ngeom) if m.geom_group[g] == 1]
    assert len(visual) == 3 and not m.geom_contype[visual].any()
    np.testing.assert_allclose(m.geom_size[visual[1:]], m.geom_size[collision])
    # collision box: x +-0.02, y +-0.03, z from -0.01 to 0.03; robosafe's origin is its centre,
    # 1 cm above the file's origin, which source_frame reports for poses from VLA-Arena's env
    np.testing.assert_allclose(asset.category.half_extents, [0.02, 0.03, 0.02], atol=1e-12)
    pos, quat = source_frame("apple", "vla-arena")
    np.testing.assert_allclose(pos, [0.0, 0.0, 0.01], atol=1e-15)
    np.testing.assert_allclose(quat, [1.0, 0.0, 0.0, 0.0])


def test_missing_file_is_one_warning_line_and_the_stand_in(arena_dir, monkeypatch, caplog):
    from robosafe.sim.env import TaskEnv

    monkeypatch.setattr(sim_env, "_WARNED", set())
    path = arena_dir.parent / "task.bddl"
    path.write_text(TASK)
    for _ in range(2):  # a second build and reset of the same task says nothing again
        env = TaskEnv(path, assets="vla-arena", render=False)
        env.reset(seed=0)
        sources = {n: a.source for n, a in env.task_world.assets.items()}
        env.close()
        assert sources == {"apple_1": "vla-arena", "kiwi_1": "stand-in", "lemon_1": "stand-in"}
    # WARNING records: the CLI prints each as one "robosafe: warning: ..." line
    err = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    kiwi = [ln for ln in err if "kiwi_1" in ln]
    lemon = [ln for ln in err if "lemon_1" in ln]
    assert len(kiwi) == 1 and "stable_scanned_objects/kiwi/kiwi.xml not found" in kiwi[0]
    assert len(lemon) == 1 and "stable_scanned_objects/lemon/visual/lemon.obj not found" in lemon[0]
    assert all("procedural stand-in used" in ln for ln in kiwi + lemon)


def test_vla_arena_assets_not_found_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBOSAFE_VLA_ARENA_ASSETS", str(tmp_path / "nowhere"))
    with pytest.raises(RobosafeError, match="ROBOSAFE_VLA_ARENA_ASSETS=.*not a directory"):
        arena_root()


def test_a_mesh_named_outside_the_assets_folder_is_not_read(arena_dir, monkeypatch, caplog):
    """Asset folders come from elsewhere: a file an XML names past its root is missing, said in
    one warning, never opened (the stand-in is built)."""
    from robosafe.sim.env import TaskEnv

    monkeypatch.setattr(sim_env, "_WARNED", set())
    (arena_dir.parent / "outside.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    lemon = arena_dir / "stable_scanned_objects" / "lemon" / "lemon.xml"
    lemon.write_text(LEMON.replace("visual/lemon.obj", "../../../outside.obj"))
    path = arena_dir.parent / "task.bddl"
    path.write_text(TASK)
    env = TaskEnv(path, assets="vla-arena", render=False)
    env.reset(seed=0)
    assert env.task_world.assets["lemon_1"].source == "stand-in"
    env.close()
    lines = [r.getMessage() for r in caplog.records
             if r.levelname == "WARNING" and "lemon_1" in r.getMessage()]
    assert len(lines) == 1 and "outside.obj not found" in lines[0]


def test_an_assets_folder_of_symlinks_is_read_through_them(tmp_path, monkeypatch):
    """scripts/vla-arena-env.sh lays VLA-Arena's assets folder as symlinks into LIBERO's files
    and VLA-Arena's own: a link inside the folder is its layout, so its target is used (the
    real asset, not a stand-in)."""
    real = tmp_path / "elsewhere" / "lemon"
    real.mkdir(parents=True)
    (real / "visual").mkdir(parents=True)
    (real / "lemon.xml").write_text(LEMON)
    (real / "visual" / "lemon.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\n"
                                               "f 1 2 3\nf 1 2 4\nf 1 3 4\nf 2 3 4\n")
    farm = tmp_path / "farm" / "stable_scanned_objects" / "lemon"
    (farm / "visual").mkdir(parents=True)
    for rel in ("lemon.xml", "visual/lemon.obj"):  # as cp -rs lays it: folders, file links
        (farm / rel).symlink_to(real / rel)
    monkeypatch.setenv("ROBOSAFE_VLA_ARENA_ASSETS", str(tmp_path / "farm"))
    assert missing_file("vla-arena", "lemon") is None
    asset = make_asset("lemon", "lemon_1", source="vla-arena", real_key="lemon", fixed=True)
    assert asset.source == "vla-arena"


#: eight levels of ten references each: 10^9 characters from a few hundred bytes
ENTITY_BOMB = ('<?xml version="1.0"?>\n<!DOCTYPE b [<!ENTITY a0 "aaaaaaaaaa">'
               + "".join(f'<!ENTITY a{i} "{f"&a{i - 1};" * 10}">' for i in range(1, 9))
               + "]>\n<b>&a8;</b>")


@pytest.mark.parametrize("text", ["not xml at all <", ENTITY_BOMB], ids=["garbage", "entity-bomb"])
def test_an_asset_xml_that_cannot_be_read_is_an_error_naming_it(arena_dir, text):
    """A file that is there but unreadable is not "not found" (and a silent stand-in)."""
    from robosafe.sim.libero_assets import missing_file

    bad = arena_dir / "stable_scanned_objects" / "lemon" / "lemon.xml"
    bad.write_text(text)
    with pytest.raises(RobosafeError, match=rf"^{bad}: cannot read asset \("):
        missing_file("vla-arena", "lemon")
