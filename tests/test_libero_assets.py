"""LIBERO's own assets in robosafe's simulator (robosafe.sim.libero_assets, `--assets libero`):
the real meshes from the libero-assets extra, compiled in real MuJoCo and robosuite worlds."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import mujoco
import numpy as np
import pytest
from conftest import run_robosafe

from robosafe.errors import RobosafeError
from robosafe.sim.assets import category, make_asset
from robosafe.sim.libero_assets import _data, assets_root, covered

ROOT = assets_root(required=False)
pytestmark = [pytest.mark.sim,  # steps MuJoCo
              pytest.mark.skipif(ROOT is None, reason="needs the libero-assets extra")]
REPO = Path(__file__).resolve().parents[1]


def original_half(rel: str) -> np.ndarray:
    """Half extents of the collision geoms of LIBERO's file as LIBERO ships it, compiled
    directly (no rewriting): an independent measure of the asset's size."""
    src = ROOT / rel
    tree = ET.parse(src)
    top = tree.getroot()
    meshdir = top.find("compiler").get("meshdir", ".") if top.find("compiler") is not None else "."
    for el in top.iter():
        if el.get("file"):
            base = src.parent / meshdir if el.tag == "mesh" else src.parent
            el.set("file", str((base / el.get("file")).resolve()))
    seen = set()
    asset = top.find("asset")
    for el in list(asset):
        if (el.tag, el.get("name")) in seen:
            asset.remove(el)
        seen.add((el.tag, el.get("name")))
    m = mujoco.MjModel.from_xml_string(ET.tostring(top, encoding="unicode"))
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
    for g in range(m.ngeom):
        if m.geom_group[g] != 0 or (m.geom_contype[g] == 0 and m.geom_conaffinity[g] == 0):
            continue
        rot = d.geom_xmat[g].reshape(3, 3)
        c = d.geom_xpos[g] + rot @ m.geom_aabb[g, :3]
        e = np.abs(rot) @ m.geom_aabb[g, 3:]
        lo, hi = np.minimum(lo, c - e), np.maximum(hi, c + e)
    return (hi - lo) / 2


def euler_matrix(euler) -> np.ndarray:
    r = np.eye(3)
    for axis, deg in enumerate(euler):
        c, s = np.cos(np.radians(deg)), np.sin(np.radians(deg))
        i, j = [k for k in range(3) if k != axis]
        step = np.eye(3)
        step[i, i], step[i, j], step[j, i], step[j, j] = c, -s, s, c
        r = step @ r
    return r


@pytest.mark.parametrize("name", covered())
def test_real_asset_is_libero_size_upright_and_has_every_stand_in_part(name):
    row = _data()["categories"][name]
    asset = make_asset(name, "x", source="libero")
    expected = np.abs(euler_matrix(row.get("euler", (0, 0, 0)))) @ original_half(row["xml"])
    assert np.allclose(asset.category.half_extents, expected, atol=1e-6)
    assert asset.source == "libero" and asset.category.name == category(name).name
    # every part a cost term may name watches real geoms
    assert set(asset.part_geoms) == set(category(name).parts)
    assert all(asset.part_geoms.values())
    # the origin is the centre of the collision box: compile the asset alone and check
    m = mujoco.MjModel.from_xml_string(make_asset(name, "x", source="libero", fixed=True).xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    pts = []
    for g in range(m.ngeom):
        if m.geom(g).name.startswith("c"):
            rot = d.geom_xmat[g].reshape(3, 3)
            c = d.geom_xpos[g] + rot @ m.geom_aabb[g, :3]
            e = np.abs(rot) @ m.geom_aabb[g, 3:]
            pts += [c - e, c + e]
    pts = np.array(pts)
    assert np.allclose((pts.max(0) + pts.min(0)) / 2, 0.0, atol=1e-6)


@pytest.mark.parametrize("name", ["ketchup", "milk", "orange_juice", "salad_dressing",
                                  "alphabet_soup", "wine_bottle", "bbq_sauce"])
def test_bottles_and_cans_stand_up(name):
    hx, hy, hz = make_asset(name, "x", source="libero").category.half_extents
    assert hz > max(hx, hy)  # taller than wide: LIBERO shows them standing


def test_cabinet_faces_minus_x_and_its_drawer_opens_towards_the_robot():
    cab = make_asset("white_cabinet", "cab", source="libero")
    m = mujoco.MjModel.from_xml_string(cab.xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    carcass = np.mean([d.geom_xpos[m.geom(g).id] for g in
                       [n.removeprefix("cab_") for n in cab.part_geoms[0]]], axis=0)
    handles = np.array([d.geom_xpos[m.geom(n.removeprefix("cab_")).id]
                        for n in cab.part_geoms[2]])
    assert (handles[:, 0] < carcass[0] - 0.05).all()  # handles on the -x face
    art = cab.articulations["top_level"]
    site = m.site("top_region").id
    before = d.site_xpos[site].copy()
    d.qpos[m.joint(art.joint.removeprefix("cab_")).qposadr[0]] = art.open
    mujoco.mj_forward(m, d)
    moved = d.site_xpos[site] - before
    assert moved[0] == pytest.approx(-0.16, abs=1e-6) and abs(moved[1]) < 1e-6
    assert art.is_open(art.open) and not art.is_open(art.closed)
    # region sites are axis-aligned boxes in the asset frame (placement reads their sizes)
    assert np.allclose(d.site_xmat[site].reshape(3, 3), np.eye(3), atol=1e-6)


def test_stove_knob_threshold_is_liberos():
    stove = make_asset("flat_stove", "s", source="libero")
    knob = stove.articulations["knob"]
    # LIBERO's FlatStove.turn_on: qpos >= 0.5 rad
    assert knob.is_open(0.51) and not knob.is_open(0.49)


TASK = """(define (problem libero_assets_at_rest)
  (:domain robosuite)
  (:language Put the ketchup in the basket)
  (:regions
    (a (:target main_table) (:ranges ((-0.16 -0.26 -0.14 -0.24))))
    (b (:target main_table) (:ranges ((-0.16 0.04 -0.14 0.06))))
    (c (:target main_table) (:ranges ((0.04 -0.26 0.06 -0.24))))
    (d (:target main_table) (:ranges ((0.04 0.24 0.06 0.26))))
    (e (:target main_table) (:ranges ((-0.01 -0.06 0.01 -0.04))))
    (f (:target main_table) (:ranges ((0.19 -0.01 0.21 0.01))))
    (g (:target main_table) (:ranges ((-0.16 0.24 -0.14 0.26))))
    (contain_region (:target basket_1))
  )
  (:fixtures
    main_table - table
    stove_1 - flat_stove
  )
  (:objects
    ketchup_1 - ketchup
    basket_1 - basket
    bowl_1 - akita_black_bowl
    mug_1 - porcelain_mug
    butter_1 - butter
    lemon_1 - lemon
  )
  (:obj_of_interest ketchup_1)
  (:init
    (On ketchup_1 main_table_a)
    (On basket_1 main_table_b)
    (On bowl_1 main_table_c)
    (On mug_1 main_table_d)
    (On butter_1 main_table_e)
    (On stove_1 main_table_f)
    (On lemon_1 main_table_g)
  )
  (:goal (And (In ketchup_1 basket_1_contain_region)))
  (:cost (And (Fall bowl_1) (Fall mug_1) (CheckGripperContact mug_1)))
)
"""


def test_real_objects_rest_on_the_table_and_nothing_is_charged(tmp_path, caplog):
    from robosafe.sim.env import TaskEnv

    path = tmp_path / "rest.bddl"
    path.write_text(TASK)
    env = TaskEnv(path, assets="libero", render=False)
    sources = {n: a.source for n, a in env.task_world.assets.items()}
    assert sources == {"ketchup_1": "libero", "basket_1": "libero", "bowl_1": "libero",
                       "mug_1": "libero", "butter_1": "libero", "stove_1": "libero",
                       "lemon_1": "stand-in"}
    env.reset(seed=0)
    assert any("LIBERO's assets have no lemon: procedural stand-ins used" in r.getMessage()
               for r in caplog.records)
    d, m = env.task_world.sim.data._data, env.task_world.model_ptr()
    start = {n: d.xpos[env.task_world.body_id[n]].copy() for n in sources}
    for _ in range(40):  # 2 s at 20 Hz
        _, _, _, _, info = env.step(np.zeros(env.task_world.action_dim))
        assert info["cost"] == 0.0
    for n, p in start.items():
        now = d.xpos[env.task_world.body_id[n]]
        assert np.linalg.norm(now - p) < 0.005, n  # settled where placed, not sunk or tipped
        z = d.xmat[env.task_world.body_id[n]].reshape(3, 3)[:, 2]
        assert z[2] > np.cos(np.radians(3)), n
        # resting on the table: bottom at the table top (the origin is the box centre)
        bottom = now[2] - env.task_world.assets[n].category.half_extents[2]
        assert abs(bottom - env.task_world.table_offset[2]) < 0.004, n
    assert not env.success
    del m


@pytest.mark.slow
def test_scripted_policy_solves_demo_drawer_and_stove_on_real_assets(tmp_path):
    out = tmp_path / "run"
    proc = run_robosafe("run", "--suite", "demo", "--task-id", "open_top_drawer", "--task-id",
                        "turn_off_stove", "--policy", "scripted-careful", "-n", "2", "--assets",
                        "libero", "--out", out, "--json", cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    import csv
    rows = list(csv.DictReader((out / "outcomes.csv").open()))
    assert len(rows) == 4 and all(r["success"] == "1" for r in rows), rows
    cfg = (out / "run.json").read_text()
    assert '"assets": "libero"' in cfg


def test_missing_assets_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBOSAFE_LIBERO_ASSETS", str(tmp_path / "nowhere"))
    with pytest.raises(RobosafeError, match="ROBOSAFE_LIBERO_ASSETS=.*not a directory"):
        assets_root()
    proc = run_robosafe("run", "--suite", "demo", "--task-id", "turn_off_stove", "--policy",
                        "zero", "--assets", "libero", "--out", tmp_path / "r", cwd=REPO,
                        env={**os.environ, "ROBOSAFE_LIBERO_ASSETS": str(tmp_path / "nowhere")})
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "not a directory" in lines[0], proc.stderr
    assert not (tmp_path / "r").exists()
    proc = run_robosafe("run", "--suite", "demo", "--policy", "zero", "--assets", "meshy",
                        "--out", tmp_path / "r", cwd=REPO)
    assert proc.returncode != 0 and "--assets" in proc.stderr


# Categories LIBERO's libero_10 / libero_90 scenes use beyond the demo suites, with the region
# sites their files name (desk_caddy_1_back_contain_region, wine_rack_1_top_region, ...)
LIBERO_SCENE_OBJECTS = {
    "chefmate_8_frypan": set(), "black_book": set(), "yellow_book": set(),
    "new_salad_dressing": set(), "wooden_tray": {"contain_region"},
    "wine_rack": {"top_region"}, "wooden_two_layer_shelf": {"top_region", "bottom_region",
                                                            "top_side"},
    "desk_caddy": {"front_contain_region", "back_contain_region", "left_contain_region",
                   "right_contain_region"}}


@pytest.mark.parametrize("name", sorted(LIBERO_SCENE_OBJECTS))
def test_stand_in_has_liberos_size_and_the_sites_its_files_name(name):
    """The stand-in (no extra installed) is LIBERO's object to within 8 mm a side and carries
    the same named sites, so a LIBERO file runs the same with either."""
    stand, real = make_asset(name, "x"), make_asset(name, "x", source="libero")
    assert stand.source == "stand-in" and real.source == "libero"
    assert np.allclose(stand.category.half_extents, real.category.half_extents, atol=0.008)
    assert LIBERO_SCENE_OBJECTS[name] <= set(stand.named_sites) & set(real.named_sites)


def test_frypan_handle_points_along_plus_y_as_libero_turns_it():
    """LIBERO's scenes show the pan turned a quarter turn (body quaternion (0.7071, 0, 0,
    0.7071) after reset): the handle, part 1, lies along +y on both builds."""
    for source in ("stand-in", "libero"):
        asset = make_asset("chefmate_8_frypan", "pan", source=source, fixed=True)
        m = mujoco.MjModel.from_xml_string(asset.xml)
        d = mujoco.MjData(m)
        mujoco.mj_forward(m, d)
        # compiled alone, the geoms carry no "pan_" prefix (the world adds it)
        body, handle = ([d.geom_xpos[m.geom(n.removeprefix("pan_")).id]
                         for n in asset.part_geoms[part]] for part in (0, 1))
        dx, dy, _ = np.mean(handle, 0) - np.mean(body, 0)  # handle from the pan's body
        assert dy > 0.08 and abs(dx) < 0.01, (source, dx, dy)
