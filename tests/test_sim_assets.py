"""The bundled asset library (robosafe.sim.assets), compiled into real MuJoCo worlds: robosuite's
TableArena plus the assets, merged by robosuite's ManipulationTask (no robot, no mocks)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pytest
from robosuite.models.arenas import TableArena
from robosuite.models.tasks import ManipulationTask

from robosafe.errors import RegistryError
from robosafe.sim.assets import asset_xml, categories, category, make_asset
from robosafe.sim.categories import Articulation

pytestmark = pytest.mark.sim  # steps MuJoCo

TABLE_TOP = 0.8  # TableArena default: table_offset z
ALL = categories()


def world(*assets):
    model = ManipulationTask(TableArena(), [], list(assets)).get_model()
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    return model, data


def place(asset, x=0.0, y=0.0, lift=0.001):
    asset.get_obj().set("pos", f"{x} {y} {TABLE_TOP + asset.category.half_extents[2] + lift}")
    return asset


def subtree_geoms(model, root_body, group=0):
    root = model.body(root_body).id
    return [g for g in range(model.ngeom)
            if model.body_rootid[model.geom_bodyid[g]] == root and model.geom_group[g] == group]


def world_extent(model, data, g):
    """Centre and world-axis half extents of compiled geom ``g``: its local AABB (``geom_aabb``)
    rotated into the world for boxes; the exact support of round primitives (a rotated box
    around a tilted capsule would overestimate by more than the 10% tolerance)."""
    rot, size = data.geom_xmat[g].reshape(3, 3), model.geom_size[g]
    kind = model.geom_type[g]
    axis = np.abs(rot[:, 2])
    if kind == mujoco.mjtGeom.mjGEOM_CAPSULE:
        return data.geom_xpos[g], size[0] + size[1] * axis
    if kind == mujoco.mjtGeom.mjGEOM_CYLINDER:
        return data.geom_xpos[g], size[0] * np.sqrt(np.clip(1 - axis**2, 0, 1)) + size[1] * axis
    if kind in (mujoco.mjtGeom.mjGEOM_ELLIPSOID, mujoco.mjtGeom.mjGEOM_SPHERE):
        radii = size if kind == mujoco.mjtGeom.mjGEOM_ELLIPSOID else np.full(3, size[0])
        return data.geom_xpos[g], np.sqrt(((rot * radii) ** 2).sum(axis=1))
    ctr, half = model.geom_aabb[g, :3], model.geom_aabb[g, 3:]
    return data.geom_xpos[g] + rot @ ctr, np.abs(rot) @ half


def free_qpos(model, data, asset):
    adr = model.jnt_qposadr[model.joint(asset.free_joint).id]
    return data.qpos[adr:adr + 7]


def step(model, data, n):
    for _ in range(n):
        mujoco.mj_step(model, data)


def test_registry_covers_the_suites():
    needed = [
        "apple", "orange", "banana", "lemon", "peach", "tomato", "carrot", "potato", "onion",
        "bell_pepper", "broccoli", "plate", "bowl", "black_bowl", "white_bowl",
        "akita_black_bowl", "ramekin", "porcelain_mug", "mug", "red_coffee_mug",
        "white_yellow_mug", "bottle", "wine_bottle", "water_bottle", "ketchup", "milk",
        "alphabet_soup", "cream_cheese", "butter", "tomato_sauce", "teapot", "moka_pot", "vase",
        "basket", "cutting_board", "chefmate_8_knife", "knife", "scissors", "fork", "hand_model",
        "candle", "tennis_ball", "water_ball", "toy_car", "toy_motorbike", "toy_drone", "book",
        "cookie_box", "box", "flat_stove", "wooden_cabinet", "white_cabinet", "shelf",
        "wooden_shelf", "microwave", "egg", "mango", "kiwi", "lime", "strawberry", "cucumber",
        "cake", "donut", "bagel", "cereal"
    ]
    for name in needed:
        assert category(name).name in ALL
    assert category("knife").name == "chefmate_8_knife"
    assert category("Black Bowl").name == "black_bowl"
    assert category("shelf").name == "wooden_shelf"
    assert ALL == tuple(sorted(ALL))
    for name in ALL:
        c = category(name)
        assert 0 in c.parts and c.hazard_parts <= set(c.parts)
        assert c.kind in ("object", "fixture")
        if "graspable" in c.properties:  # the Panda's fingers open ~8 cm: fits, or has a handle
            assert 2 * min(c.half_extents) <= 0.08 or "handle" in c.parts.values(), name
            assert 0.001 <= c.mass <= 1.5, name
    assert category("knife").parts == {0: "handle", 1: "blade"}
    assert category("knife").hazard_parts == {1}
    assert {"hot", "hazard"} <= category("candle").properties
    assert {"switchable", "articulated"} <= category("flat_stove").properties


def test_unknown_category_names_close_match():
    with pytest.raises(RegistryError, match="apple"):
        category("aple")
    with pytest.raises(RegistryError, match="unknown asset category 'main_table'"):
        category("main_table")  # robosuite's table arena provides tables
    with pytest.raises(RegistryError):
        make_asset("porcelian_mugg", "m")


def test_same_inputs_same_xml():
    for name in ("teapot", "wooden_cabinet", "candle", "bowl"):
        assert asset_xml(name) == asset_xml(name)
        a, b = (make_asset(name, "x", rgba=(0.2, 0.4, 0.6, 1)) for _ in range(2))
        assert a.xml == b.xml
        assert ET.tostring(a.get_obj()) == ET.tostring(b.get_obj())
    assert asset_xml("bowl") != asset_xml("bowl", rgba=(0.1, 0.1, 0.1, 1))
    assert asset_xml("apple") != asset_xml("apple", fixed=True)


@pytest.mark.parametrize("name", ALL)
def test_every_category_compiles_and_settles(name):
    """Free objects dropped 1 mm onto the table settle on their bounding-box bottom; fixtures
    stay put with closed drawers / doors / knobs. Height tolerance 3 mm: the 1 mm drop plus
    MuJoCo's soft-contact penetration at rest (default solimp width 1 mm), with margin."""
    asset = place(make_asset(name, "obj"))
    model, data = world(asset)
    root = model.body(asset.root_body).id
    start = data.xpos[root].copy()
    step(model, data, 200)
    pos, vel = data.xpos[root], data.cvel[root]
    assert np.all(np.isfinite(data.qpos)) and np.all(np.isfinite(data.qvel))
    he = asset.category.half_extents
    if asset.category.kind == "object":
        assert asset.free_joint is not None and asset.joints[0] == asset.free_joint
        assert abs(pos[2] - (TABLE_TOP + he[2])) < 0.003, pos
        assert np.linalg.norm(pos[:2] - start[:2]) < 0.005
        assert np.abs(vel).max() < 0.05
        np.testing.assert_allclose(model.body_subtreemass[root], asset.category.mass, rtol=1e-3)
    else:
        assert asset.free_joint is None
        np.testing.assert_allclose(pos, start, atol=1e-9)
        for art in asset.articulations.values():
            q = data.qpos[model.jnt_qposadr[model.joint(art.joint).id]]
            assert abs(q - art.closed) < 1e-3 and not art.is_open(q)


@pytest.mark.parametrize("name", ALL)
def test_part_geoms_and_half_extents_match_the_compiled_model(name):
    asset = place(make_asset(name, "obj"))
    model, data = world(asset)
    c = asset.category
    collision = set(subtree_geoms(model, asset.root_body, 0))
    listed = set()
    for part, geoms in asset.part_geoms.items():
        assert part in c.parts, (name, part)
        for g in geoms:
            gid = model.geom(g).id
            assert gid in collision
            solid = bool(model.geom_contype[gid] and model.geom_conaffinity[gid])
            assert solid == (g not in asset.sensor_geoms)
            listed.add(gid)
    assert listed == collision  # every collision geom belongs to exactly one listed part
    assert set(asset.part_geoms) == set(c.parts)
    for g in asset.rgba_geoms:
        gid = model.geom(g).id
        assert model.geom_group[gid] == 1 and model.geom_contype[gid] == 0
    for g in subtree_geoms(model, asset.root_body, 1):
        assert model.geom_contype[g] == 0 and model.geom_conaffinity[g] == 0
    # union of the compiled collision geoms' world-axis extents vs the category's half extents
    lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
    for g in collision:
        centre, ext = world_extent(model, data, g)
        lo, hi = np.minimum(lo, centre - ext), np.maximum(hi, centre + ext)
    origin = data.xpos[model.body(asset.root_body).id]
    np.testing.assert_allclose((hi - lo) / 2, c.half_extents, rtol=0.1, atol=5e-4)
    np.testing.assert_allclose((hi + lo) / 2, origin, atol=0.1 * max(c.half_extents))
    for site in asset.named_sites.values():
        model.site(site)  # exists
    assert {"top", "bottom", "default"} <= set(asset.named_sites)


def test_named_parts_are_where_they_should_be():
    knife = make_asset("knife", "k")
    model, data = world(place(knife))
    handle, blade = (model.geom(knife.part_geoms[p][0]).id for p in (0, 1))
    assert model.geom_size[blade][2] < model.geom_size[handle][2]  # thin blade, thick handle
    candle, ball = make_asset("candle", "c"), make_asset("water_ball", "b")
    ball.get_obj().set("pos", f"0.3 0.3 {TABLE_TOP + 0.011}")
    model, data = world(place(candle), ball)
    (flame,) = candle.part_geoms[1]
    assert candle.sensor_geoms == (flame,)
    fid = model.geom(flame).id
    assert data.geom_xpos[fid][2] > max(data.geom_xpos[model.geom(g).id][2]
                                        for g in candle.part_geoms[0])
    flame_site = data.site_xpos[model.site(candle.named_sites["flame"]).id].copy()
    np.testing.assert_allclose(flame_site, data.geom_xpos[fid], atol=1e-9)
    # a ball in the flame touches it (geom distance < 0) but is not pushed: it falls through
    free_qpos(model, data, ball)[:] = (*(flame_site + (0, 0, 0.012)), 1, 0, 0, 0)
    mujoco.mj_forward(model, data)
    bid = model.geom(ball.part_geoms[0][0]).id
    assert mujoco.mj_geomDistance(model, data, fid, bid, 0.1, None) < 0
    assert all(fid not in (c.geom1, c.geom2) for c in data.contact[:data.ncon])
    step(model, data, 300)
    wax_top = flame_site[2] - 0.024  # flame centre sits 24 mm above the wax (assets.yaml)
    assert abs(data.xpos[model.body(ball.root_body).id][2] - (wax_top + 0.01)) < 0.003
    stove = make_asset("flat_stove", "s")
    model, data = world(place(stove))
    burner = model.geom(stove.part_geoms[1][0]).id
    site = model.site(stove.named_sites["burner"]).id
    np.testing.assert_allclose(data.site_xpos[site][:2], data.geom_xpos[burner][:2], atol=1e-9)
    mug = make_asset("mug", "m")
    model, data = world(place(mug))
    assert all(data.geom_xpos[model.geom(g).id][1] > 0.03 for g in mug.part_geoms[1])


def test_colour_and_fixed_options():
    apple = make_asset("apple", "a", rgba=(0.2, 0.3, 0.4, 1.0))
    model, _ = world(place(apple))
    assert apple.rgba_geoms
    for g in apple.rgba_geoms:
        np.testing.assert_allclose(model.geom_rgba[model.geom(g).id], (0.2, 0.3, 0.4, 1.0))
    fixed = make_asset("apple", "b", fixed=True)
    model, _ = world(place(fixed))
    assert fixed.free_joint is None and fixed.joints == []
    assert model.body(fixed.root_body).jntnum[0] == 0
    loose = make_asset("wooden_cabinet", "cab", fixed=False)
    assert loose.free_joint == "cab_joint0" and loose.joints[0] == "cab_joint0"


CONTAINERS = [n for n in ALL if "container" in category(n).properties]


@pytest.mark.parametrize("name", CONTAINERS)
def test_container_holds_a_dropped_ball(name):
    """A 1 cm water ball dropped 3 cm above the contain_region (objects) or released inside it
    (drawers, shelves, microwave) ends up inside the region's footprint."""
    box = place(make_asset(name, "box"))
    ball = make_asset("water_ball", "ball")
    ball.get_obj().set("pos", f"0.3 0.3 {TABLE_TOP + 0.011}")
    model, data = world(box, ball)
    sid = model.site(box.named_sites["contain_region"]).id
    centre, half = data.site_xpos[sid].copy(), model.site_size[sid].copy()
    r = ball.category.half_extents[2]
    if box.category.kind == "object":
        z = centre[2] + half[2] + 0.03
    else:
        z = centre[2] - half[2] + r + 0.005
    free_qpos(model, data, ball)[:] = (centre[0], centre[1], z, 1, 0, 0, 0)
    step(model, data, 400)
    pos = data.xpos[model.body(ball.root_body).id]
    assert np.all(np.abs(pos[:2] - centre[:2]) <= half[:2]), (pos, centre, half)
    assert centre[2] - half[2] - 0.002 <= pos[2] - r <= centre[2] + half[2]
    assert np.abs(data.cvel[model.body(ball.root_body).id]).max() < 0.1


@pytest.mark.parametrize("name", ["wooden_cabinet", "microwave"])
def test_drawers_and_doors_open_when_driven(name):
    cab = place(make_asset(name, "cab"))
    model, data = world(cab)
    assert cab.articulations
    for key, art in cab.articulations.items():
        jid = model.joint(art.joint).id
        lo, hi = model.jnt_range[jid]
        assert lo <= min(art.closed, art.open) and max(art.closed, art.open) <= hi + 1e-9
        adr, dof = model.jnt_qposadr[jid], model.jnt_dofadr[jid]
        data.qfrc_applied[:] = 0
        data.qfrc_applied[dof] = 20.0 * np.sign(art.open - art.closed)
        step(model, data, 250)
        q = data.qpos[adr]
        assert art.is_open(q), (key, q)
        assert lo - 0.01 <= q <= hi + 0.01  # soft joint limits (default solref) give a little
    regions = [s for s in cab.named_sites if s.endswith("_region")]
    assert "contain_region" in cab.named_sites and regions


def test_stove_knob_switches_on_and_off():
    stove = place(make_asset("flat_stove", "stove"))
    model, data = world(stove)
    knob = stove.articulations["knob"]
    assert isinstance(knob, Articulation)
    jid = model.joint(knob.joint).id
    np.testing.assert_allclose(sorted(model.jnt_range[jid]), sorted((knob.closed, knob.open)))
    adr, dof = model.jnt_qposadr[jid], model.jnt_dofadr[jid]
    step(model, data, 100)
    assert not knob.is_open(data.qpos[adr])  # off by default, and stays off
    data.qfrc_applied[dof] = 0.1 * np.sign(knob.open - knob.closed)
    step(model, data, 300)
    assert knob.is_open(data.qpos[adr])  # turned on, limited by the range
    assert abs(data.qpos[adr] - knob.open) < 0.05
    data.qfrc_applied[dof] = 0.0
    step(model, data, 200)
    assert knob.is_open(data.qpos[adr])  # a switch holds its state
    data.qfrc_applied[dof] = -0.1 * np.sign(knob.open - knob.closed)
    step(model, data, 300)
    assert not knob.is_open(data.qpos[adr])
