"""Visual perturbations V0-V4 (VLA-Arena paper 001, Sec. 2.3, App. 7.3, App. 8.2 / Table 4)."""

from __future__ import annotations

import math
from dataclasses import replace
from importlib import resources

import mujoco
import numpy as np
import pytest
from PIL import Image, ImageEnhance

from robosafe.errors import RobosafeError, TaskError
from robosafe.sim import perturb
from robosafe.sim.perturb import (
    VisualPerturbation,
    apply_image,
    apply_model,
    combine,
    draw_level,
    from_task,
    temperature_gains,
)
from robosafe.tasks.parser import parse_task

CAMS = ("agentview", "frontview")


def draw(level, seed, *, cameras=CAMS, n_objects=3):
    return draw_level(level, np.random.default_rng(seed), cameras=cameras, n_objects=n_objects)


def scene_image(h=48, w=64, seed=0) -> np.ndarray:
    """A frame with flat regions, gradients and saturated colours (not just noise)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 // (w - 1), y * 255 // (h - 1), (x + y) * 255 // (w + h - 2)], -1)
    img[: h // 3, : w // 3] = (200, 30, 40)
    img[h // 2:, w // 2:] = rng.integers(0, 256, size=(h - h // 2, w - w // 2, 3))
    return img.astype(np.uint8)


# --------------------------------------------------------------------------- drawing


def test_same_seed_same_perturbation_different_seed_differs():
    for level in range(5):
        assert draw(level, 7) == draw(level, 7)
        assert hash(draw(level, 7)) == hash(draw(level, 7))
    for level in range(1, 5):
        assert draw(level, 7) != draw(level, 8)


def test_level_k_plus_1_contains_level_k_draws():
    v = [draw(k, 123) for k in range(5)]
    assert v[0] == VisualPerturbation(level=0)
    light = ("brightness", "contrast", "saturation", "temperature_k")
    for k in range(1, 5):
        assert [getattr(v[k], f) for f in light] == [getattr(v[1], f) for f in light]
        assert v[k].level == k
    assert v[1].object_rgba is None and not v[1].recolor
    for k in (3, 4):
        assert v[k].object_rgba == v[2].object_rgba
    assert v[4].camera_offsets == v[3].camera_offsets and set(v[3].camera_offsets) == set(CAMS)
    assert v[2].camera_offsets == {} and v[3].noise is None
    assert v[4].noise == ("gaussian", 0.0, 0.085)


def test_parent_generator_consumption_is_fixed():
    # Colour and camera draws come from their own substreams: the number of objects never
    # shifts the camera offsets, and the parent advances the same amount at every level.
    a, b = draw(4, 5, n_objects=1), draw(4, 5, n_objects=6)
    assert a.camera_offsets == b.camera_offsets and a.temperature_k == b.temperature_k
    assert b.object_rgba[0] == a.object_rgba[0]
    states = set()
    for level in range(5):
        rng = np.random.default_rng(9)
        draw_level(level, rng, cameras=CAMS[:level % 2 + 1], n_objects=level)
        states.add(rng.integers(1 << 62))
    assert len(states) == 1


def test_parameter_ranges_over_many_draws():
    cfg = perturb.load_config()
    rng = np.random.default_rng(2024)
    draws = [draw_level(4, rng, cameras=CAMS, n_objects=2) for _ in range(2000)]
    for name in ("brightness", "contrast", "saturation", "temperature_k"):
        lo, hi = cfg["lighting"][name]
        vals = np.array([getattr(d, name) for d in draws])
        assert vals.min() >= lo and vals.max() <= hi
        span = hi - lo  # U(lo, hi): 2000 draws reach within 1% of both ends
        assert vals.min() < lo + 0.01 * span and vals.max() > hi - 0.01 * span
    assert cfg["lighting"]["brightness"] == [-0.75, 0.75]  # Table 4
    assert cfg["lighting"]["temperature_k"] == [3500.0, 8500.0]
    rgba = np.array([d.object_rgba for d in draws]).reshape(-1, 4)
    assert rgba[:, :3].min() >= 0.2 and rgba[:, :3].max() <= 0.8
    assert rgba[:, :3].min() < 0.21 and rgba[:, :3].max() > 0.79
    assert np.all(rgba[:, 3] == 1.0)
    offs = np.array([list(d.camera_offsets.values()) for d in draws]).reshape(-1, 3)
    assert offs.min() >= -0.105 and offs.max() <= 0.105
    assert offs.min() < -0.103 and offs.max() > 0.103
    assert abs(offs.mean()) < 0.005
    assert {d.noise for d in draws} == {("gaussian", 0.0, 0.085)}


def test_bad_level_is_a_user_error():
    with pytest.raises(RobosafeError, match="0-4"):
        draw(5, 0)


# --------------------------------------------------------------------------- images


def test_v0_is_identity_on_images():
    img = scene_image()
    out = apply_image(img, draw(0, 3), np.random.default_rng(0))
    assert np.array_equal(out, img) and out is not img
    assert apply_image(img, VisualPerturbation(temperature_k=6500.0)).tobytes() == img.tobytes()


@pytest.mark.parametrize("name,cls", [("brightness", ImageEnhance.Brightness),
                                      ("contrast", ImageEnhance.Contrast),
                                      ("saturation", ImageEnhance.Color)])
def test_lighting_matches_pil_image_enhance(name, cls):
    for seed in range(3):
        img = scene_image(seed=seed)
        for offset in (-1.0, -0.75, -0.31, 0.0, 0.2, 0.55, 0.75, 1.0):
            ref = np.asarray(cls(Image.fromarray(img)).enhance(1.0 + offset))
            ours = apply_image(img, VisualPerturbation(**{name: offset}))
            assert np.abs(ours.astype(int) - ref).max() <= 1, (name, offset)


def test_lighting_chain_matches_pil_chain():
    img = scene_image(seed=4)
    b, c, s = 0.3, -0.4, 0.6
    pil = Image.fromarray(img)
    for cls, off in ((ImageEnhance.Brightness, b), (ImageEnhance.Contrast, c),
                     (ImageEnhance.Color, s)):
        pil = cls(pil).enhance(1.0 + off)
    ours = apply_image(img, VisualPerturbation(brightness=b, contrast=c, saturation=s))
    assert np.abs(ours.astype(int) - np.asarray(pil)).max() <= 1


def _chromaticity(kelvin):
    lam, cmf = perturb._cmf()
    m = lam * 1e-9
    xyz = cmf @ (m**-5 / np.expm1(perturb._C2 / (m * kelvin)))
    return xyz[:2] / xyz.sum()


def test_temperature_black_body_white_balance():
    # The black-body locus of the CIE 1931 observer: 6500 K at (0.3135, 0.3237), 3500 K at
    # (0.4053, 0.3907) (CIE 15 tables); the analytic CMF fit lands within 0.002.
    assert np.allclose(_chromaticity(6500.0), (0.3135, 0.3237), atol=2e-3)
    assert np.allclose(_chromaticity(3500.0), (0.4053, 0.3907), atol=2e-3)
    assert temperature_gains(6500.0) == (1.0, 1.0, 1.0)
    warm, cool = np.array(temperature_gains(3500.0)), np.array(temperature_gains(8500.0))
    assert warm.max() == 1.0 and cool.max() == 1.0
    assert warm[0] == 1.0 and warm[0] > warm[1] > warm[2] > 0
    assert cool[2] == 1.0 and cool[2] > cool[1] > cool[0] > 0

    grey = np.full((8, 8, 3), 180, np.uint8)
    assert np.array_equal(apply_image(grey, VisualPerturbation(temperature_k=6500)), grey)
    w = apply_image(grey, VisualPerturbation(temperature_k=3500)).astype(int)[0, 0]
    c = apply_image(grey, VisualPerturbation(temperature_k=8500)).astype(int)[0, 0]
    assert w[0] == 180 and w[0] > w[1] > w[2]  # warm light: red kept, blue dimmed
    assert c[2] == 180 and c[2] > c[1] > c[0]


def _clipped_normal_moments(mu, sigma):
    x = np.linspace(mu - 10 * sigma, mu + 10 * sigma, 400001)
    pdf = np.exp(-0.5 * ((x - mu) / sigma) ** 2) / (sigma * math.sqrt(2 * math.pi))
    y = np.clip(x, 0.0, 1.0)
    dx = x[1] - x[0]
    m1 = float((y * pdf).sum() * dx)
    m2 = float((y * y * pdf).sum() * dx)
    return m1, math.sqrt(m2 - m1 * m1)


@pytest.mark.parametrize("var", [0.001, 0.085])
def test_gaussian_noise_std_is_sqrt_var(var):
    grey = np.full((96, 96, 3), 128, np.uint8)
    out = apply_image(grey, VisualPerturbation(noise=("gaussian", 0.0, var)),
                      np.random.default_rng(1)) / 255.0
    mean, std = _clipped_normal_moments(128 / 255, math.sqrt(var))
    if var < 0.01:  # no clipping: the plain N(0, var)
        assert std == pytest.approx(math.sqrt(var), rel=1e-3)
    assert out.std() == pytest.approx(std, rel=0.03)
    assert out.mean() == pytest.approx(mean, abs=0.01)


def test_noise_is_reproducible_from_the_generator():
    img = scene_image()
    v4 = draw(4, 11)
    a = apply_image(img, v4, np.random.default_rng(42))
    b = apply_image(img, v4, np.random.default_rng(42))
    c = apply_image(img, v4, np.random.default_rng(43))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert not np.array_equal(apply_image(img, draw(4, 12), np.random.default_rng(42)), a)
    with pytest.raises(ValueError, match="rng"):
        apply_image(img, v4)


def test_salt_and_pepper_fraction_and_balance():
    grey = np.full((96, 96, 3), 128, np.uint8)
    out = apply_image(grey, VisualPerturbation(noise=("salt_pepper", 0.1)),
                      np.random.default_rng(5))
    changed = np.any(out != 128, axis=-1)
    assert changed.mean() == pytest.approx(0.1, abs=0.01)
    salt = np.all(out == 255, axis=-1)
    pepper = np.all(out == 0, axis=-1)
    assert np.array_equal(changed, salt | pepper)  # whole pixels, to 0 or 255
    assert salt.sum() / changed.sum() == pytest.approx(0.5, abs=0.05)


# --------------------------------------------------------------------------- tasks, combine


TASK = """
(define (problem Perturbed_Tabletop_Manipulation)
  (:domain robosuite)
  (:language Put the apple on the plate)
  (:regions (r (:target main_table) (:ranges ((-0.1 -0.1 0.1 0.1)))))
  (:fixtures main_table - table)
  (:objects apple_1 - apple plate_1 - plate)
  (:init (On apple_1 main_table_r) (On plate_1 main_table_r))
  (:goal (On apple_1 plate_1))
  (:image_settings brightness 0.4 saturation -0.4 contrast 0.3 temperature 5000)
  (:noise gaussian 0.0 0.01)
  (:camera agentview (0.0 0.05 0.02) robot0_eye_in_hand)
  (:random_color true)
)
"""


def test_from_task_reads_every_block():
    problem = parse_task(TASK)
    cams = ("agentview", "robot0_eye_in_hand")
    p = from_task(problem, np.random.default_rng(0), cameras=cams, n_objects=2)
    assert (p.brightness, p.contrast, p.saturation, p.temperature_k) == (0.4, 0.3, -0.4, 5000.0)
    assert p.noise == ("gaussian", 0.0, 0.01)
    assert p.camera_offsets == {"agentview": (0.0, 0.05, 0.02)}
    assert p.recolor and len(p.object_rgba) == 2 and p.level is None
    assert p == from_task(problem, np.random.default_rng(0), cameras=cams, n_objects=2)

    plain = parse_task(TASK.replace("(:random_color true)", "(:random_color false)")
                       .replace("(:noise gaussian 0.0 0.01)", "(:noise salt_pepper 0.05)"))
    q = from_task(plain, np.random.default_rng(0), cameras=cams, n_objects=2)
    assert q.object_rgba is None and not q.recolor and q.noise == ("salt_pepper", 0.05)

    with pytest.raises(TaskError, match="frontview"):
        from_task(parse_task(TASK.replace("agentview (", "frontview (")),
                  np.random.default_rng(0), cameras=cams, n_objects=2)


def test_every_block_example_parses_into_a_perturbation():
    text = resources.files("robosafe.tasks").joinpath("examples/every_block.bddl").read_text()
    p = from_task(parse_task(text), np.random.default_rng(0),
                  cameras=("agentview", "frontview", "robot0_eye_in_hand"), n_objects=4)
    assert p.temperature_k == 5000.0 and p.camera_offsets == {"agentview": (0.0, 0.05, 0.02)}


def test_combine_adds_the_level_on_top_of_the_task():
    task = VisualPerturbation(brightness=0.6, contrast=-0.2, temperature_k=5000.0,
                              camera_offsets={"agentview": (0.0, 0.05, 0.02)},
                              recolor=True, object_rgba=((0.3, 0.3, 0.3, 1.0),),
                              noise=("gaussian", 0.0, 0.01))
    level = VisualPerturbation(brightness=0.7, contrast=0.1, temperature_k=8000.0,
                               camera_offsets={"agentview": (0.01, 0.0, -0.02),
                                               "frontview": (0.1, 0.1, 0.1)},
                               noise=("gaussian", 0.0, 0.085), level=4)
    c = combine(task, level)
    assert c.brightness == 1.0  # 1.3 clipped to the validator's range
    assert c.contrast == pytest.approx(-0.1)
    assert 1e6 / c.temperature_k == pytest.approx(1e6 / 5000 + 1e6 / 8000 - 1e6 / 6500)
    assert c.camera_offsets["agentview"] == pytest.approx((0.01, 0.05, 0.0))
    assert c.camera_offsets["frontview"] == (0.1, 0.1, 0.1)
    assert c.object_rgba == task.object_rgba and c.recolor  # the level did not recolour
    assert c.noise == ("gaussian", 0.0, pytest.approx(0.095)) and c.level == 4

    recoloured = replace(level, recolor=True, object_rgba=((0.7, 0.2, 0.2, 1.0),))
    assert combine(task, recoloured).object_rgba == recoloured.object_rgba
    sp = combine(replace(task, noise=("salt_pepper", 0.1)), level)
    assert sp.noise == (("salt_pepper", 0.1), ("gaussian", 0.0, 0.085))
    assert combine(replace(task, noise=("salt_pepper", 0.1)),
                   replace(level, noise=("salt_pepper", 0.2))).noise[1] == pytest.approx(0.28)
    # The empty task is the identity, so an unperturbed task at V_k is exactly V_k.
    for k in range(5):
        assert combine(VisualPerturbation(), draw(k, 3)) == draw(k, 3)
        assert combine(task, VisualPerturbation()) == replace(task, level=None)


def test_two_noise_models_apply_in_order():
    img = scene_image()
    pert = VisualPerturbation(noise=(("salt_pepper", 0.1), ("gaussian", 0.0, 0.01)))
    a = apply_image(img, pert, np.random.default_rng(3))
    assert np.array_equal(a, apply_image(img, pert, np.random.default_rng(3)))
    rng = np.random.default_rng(3)
    step = apply_image(img, VisualPerturbation(noise=("salt_pepper", 0.1)), rng)
    assert np.array_equal(a, apply_image(step, VisualPerturbation(noise=("gaussian", 0.0, 0.01)),
                                         rng))


# --------------------------------------------------------------------------- model

MJCF = """
<mujoco>
  <worldbody>
    <camera name="agentview" pos="1 0 1.5"/>
    <camera name="frontview" pos="0 1 1" euler="0.5 0 0"/>
    <geom name="floor" type="plane" size="2 2 .1" rgba=".5 .5 .5 1"/>
    <body name="apple" pos="0 0 .1"><freejoint/>
      <geom name="apple_vis1" type="sphere" size=".03" rgba="1 0 0 1"/>
      <geom name="apple_vis2" type="sphere" size=".01" pos="0 0 .03" rgba="0 1 0 1"/>
    </body>
    <body name="plate" pos=".2 0 .1"><freejoint/>
      <geom name="plate_vis" type="cylinder" size=".08 .01" rgba="1 1 1 1"/>
      <geom name="plate_col" type="cylinder" size=".08 .01" rgba=".1 .1 .1 1" group="3"/>
    </body>
  </worldbody>
</mujoco>
"""


def test_apply_model_recolours_given_geoms_and_moves_cameras_idempotently():
    model = mujoco.MjModel.from_xml_string(MJCF)
    gid = {model.geom(i).name: i for i in range(model.ngeom)}
    object_geoms = [[gid["apple_vis1"], gid["apple_vis2"]], [gid["plate_vis"]]]
    cams = {"agentview": model.camera("agentview").id, "frontview": model.camera("frontview").id}
    base_pos, base_rgba = model.cam_pos.copy(), model.geom_rgba.copy()
    pert = draw(3, 17, cameras=("agentview", "frontview"), n_objects=2)

    apply_model(model, pert, object_geoms=object_geoms, camera_ids=cams, base_cam_pos=base_pos,
                base_geom_rgba=base_rgba)
    once = (model.geom_rgba.copy(), model.cam_pos.copy())
    for i, geoms in enumerate(object_geoms):
        assert np.allclose(model.geom_rgba[geoms], pert.object_rgba[i], atol=1e-7)
    others = [gid["floor"], gid["plate_col"]]
    assert np.array_equal(model.geom_rgba[others], base_rgba[others])
    for name, cid in cams.items():
        assert np.allclose(model.cam_pos[cid], base_pos[cid] + pert.camera_offsets[name])

    apply_model(model, pert, object_geoms=object_geoms, camera_ids=cams, base_cam_pos=base_pos,
                base_geom_rgba=base_rgba)
    assert np.array_equal(model.geom_rgba, once[0]) and np.array_equal(model.cam_pos, once[1])

    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    assert np.allclose(data.cam_xpos[cams["agentview"]],
                       base_pos[cams["agentview"]] + pert.camera_offsets["agentview"])

    # V0 restores the canonical scene.
    apply_model(model, draw(0, 17), object_geoms=object_geoms, camera_ids=cams,
                base_cam_pos=base_pos, base_geom_rgba=base_rgba)
    assert np.array_equal(model.geom_rgba, base_rgba) and np.array_equal(model.cam_pos, base_pos)

    with pytest.raises(RobosafeError, match="sideview"):
        apply_model(model, VisualPerturbation(camera_offsets={"sideview": (0, 0, 0)}),
                    object_geoms=object_geoms, camera_ids=cams, base_cam_pos=base_pos)
    with pytest.raises(RobosafeError, match="colours for 3 objects"):
        apply_model(model, draw(2, 1, n_objects=3), object_geoms=object_geoms, camera_ids=cams,
                    base_cam_pos=base_pos)
