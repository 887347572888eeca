"""Headless rendering the right way up: real EGL rendering, small images."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest

from robosafe.errors import RobosafeError
from robosafe.sim import render
from robosafe.sim.perturb import VisualPerturbation, apply_image, apply_model
from robosafe.sim.render import ensure_gl_backend, flip_robosuite_image, render_camera

pytestmark = pytest.mark.sim  # steps MuJoCo

H = W = 64
CAM_HEIGHT = 1.5

# A camera with the identity orientation looks down -z with image up = +y and right = +x, so
# from 1.5 m above the floor the red box (+y) is in the top half and the blue box (+x) in the
# right half of a picture that is the right way up.
SCENE = f"""
<mujoco>
  <visual><map znear="0.01" zfar="50"/></visual>
  <worldbody>
    <light pos="0 0 3" dir="0 0 -1" directional="true"/>
    <geom name="floor" type="plane" size="2 2 .1" rgba=".5 .5 .5 1"/>
    <geom name="red" type="box" pos="0 .3 .05" size=".08 .08 .05" rgba="1 0 0 1"/>
    <geom name="blue" type="box" pos=".3 0 .05" size=".08 .08 .05" rgba="0 0 1 1"/>
    <camera name="top" pos="0 0 {CAM_HEIGHT}" fovy="60"/>
  </worldbody>
</mujoco>
"""


@pytest.fixture(scope="module")
def scene():
    model = mujoco.MjModel.from_xml_string(SCENE)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    return model, data


def centroid(mask: np.ndarray) -> tuple[float, float]:
    rows, cols = np.nonzero(mask)
    assert rows.size > 10
    return rows.mean(), cols.mean()


def test_image_is_the_right_way_up(scene):
    img = render_camera(*scene, "top", height=H, width=W)
    assert img.shape == (H, W, 3) and img.dtype == np.uint8
    r, g, b = (img[..., i].astype(int) for i in range(3))
    red_row, red_col = centroid((r - g > 80) & (r - b > 80))
    blue_row, blue_col = centroid((b - r > 80) & (b - g > 80))
    assert red_row < H / 2 - 5 and abs(red_col - (W - 1) / 2) < 2  # +y: top, centred
    assert blue_col > W / 2 + 5 and abs(blue_row - (H - 1) / 2) < 2  # +x: right, centred


def test_depth_in_metres_and_repeatable(scene):
    depth = render_camera(*scene, "top", height=H, width=W, depth=True)
    assert depth.shape == (H, W) and depth.dtype == np.float32
    assert abs(float(depth[H // 2, W // 2]) - CAM_HEIGHT) < 1e-3  # the floor
    red_row, red_col = int(H / 2 - 0.3 / (CAM_HEIGHT * np.tan(np.pi / 6)) * H / 2), W // 2
    assert abs(float(depth[red_row, red_col]) - (CAM_HEIGHT - 0.1)) < 1e-3  # the box top
    a = render_camera(*scene, "top", height=H, width=W)
    b = render_camera(*scene, "top", height=H, width=W)
    assert a.tobytes() == b.tobytes()
    assert render_camera(*scene, "top", height=H, width=W, shadows=True,
                         reflections=True).shape == (H, W, 3)


def test_renderers_are_reused_per_model_and_size(scene):
    model, _ = scene
    r1 = render._renderer(model, H, W)
    assert render._renderer(model, H, W) is r1
    assert render._renderer(model, 32, 32) is not r1
    assert render._renderer(model, H, W) is r1
    assert len(render._renderers) <= render._CACHE_SIZE


def test_unknown_camera_is_a_user_error(scene):
    with pytest.raises(RobosafeError, match="cameras: top"):
        render_camera(*scene, "nope", height=H, width=W)


def test_perturbed_model_renders_the_offset_and_colour(scene):
    model = mujoco.MjModel.from_xml_string(SCENE)
    data = mujoco.MjData(model)
    cam = model.camera("top").id
    base = model.cam_pos.copy()
    pert = VisualPerturbation(recolor=True, object_rgba=((0.2, 0.8, 0.2, 1.0),),
                              camera_offsets={"top": (0.0, 0.0, 0.5)})
    apply_model(model, pert, object_geoms=[[model.geom("red").id]], camera_ids={"top": cam},
                base_cam_pos=base)
    mujoco.mj_forward(model, data)
    depth = render_camera(model, data, "top", height=H, width=W, depth=True)
    assert abs(float(depth[H // 2, W // 2]) - (CAM_HEIGHT + 0.5)) < 1e-3
    img = render_camera(model, data, "top", height=H, width=W)
    r, g, b = (img[..., i].astype(int) for i in range(3))
    assert not np.any((r - g > 80) & (r - b > 80)) and np.any((g - r > 80) & (g - b > 80))
    noisy = apply_image(img, VisualPerturbation(noise=("gaussian", 0.0, 0.085)),
                        np.random.default_rng(0))
    again = apply_image(render_camera(model, data, "top", height=H, width=W),
                        VisualPerturbation(noise=("gaussian", 0.0, 0.085)),
                        np.random.default_rng(0))
    assert noisy.tobytes() == again.tobytes()


# --------------------------------------------------------------------------- GL backend


# robosafe.sim's package __init__ imports robosuite, which itself exports MUJOCO_GL=egl when it is
# unset; to test the choice made by ensure_gl_backend alone, the subprocesses load render.py by
# file path, without the package.
LOAD_RENDER = f"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location("render", {str(render.__file__)!r})
render = importlib.util.module_from_spec(spec); sys.modules["render"] = render
spec.loader.exec_module(render)
"""


def run_python(code: str, **env_changes) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM")}
    env.update(env_changes)
    return subprocess.run([sys.executable, "-c", LOAD_RENDER + code], env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_backend_set_in_environment_is_respected():
    assert ensure_gl_backend() == os.environ["MUJOCO_GL"]
    # A backend the user asked for is not probed (osmesa need not even be installed).
    proc = run_python("print(render.ensure_gl_backend(), 'mujoco' in sys.modules)",
                      MUJOCO_GL="osmesa")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["osmesa", "False"]


RENDER_AFTER = """
import os
{before}
backend = render.ensure_gl_backend()
import mujoco
m = mujoco.MjModel.from_xml_string("<mujoco><worldbody><light pos='0 0 1'/>"
    "<geom type='box' size='.1 .1 .1' rgba='1 0 0 1'/><camera name='c' pos='0 0 1'/>"
    "</worldbody></mujoco>")
d = mujoco.MjData(m); mujoco.mj_forward(m, d)
img = render.render_camera(m, d, "c", height=16, width=16)
print(backend, os.environ["MUJOCO_GL"], os.environ["PYOPENGL_PLATFORM"], int(img[8, 8, 0] > 100))
"""


@pytest.mark.parametrize("before", ["", "import mujoco  # GL context fixed before the choice"])
def test_backend_is_chosen_when_unset(before):
    proc = run_python(RENDER_AFTER.format(before=before))
    assert proc.returncode == 0, proc.stderr
    backend, exported, platform, red = proc.stdout.split()
    assert backend in render.BACKENDS and exported == platform == backend and red == "1"


def test_missing_backend_message_is_one_actionable_line():
    msg = render.missing_gl_message({"egl": "EGLError: no display", "osmesa": "no libOSMesa"})
    assert "\n" not in msg
    assert "apt-get install -y" in msg and "libosmesa6" in msg and "libegl1" in msg
    assert "libgl1-mesa-dri" in msg


# --------------------------------------------------------------------------- robosuite


@pytest.mark.slow
def test_robosuite_camera_observations_are_upside_down():
    suite = pytest.importorskip("robosuite")
    env = suite.make("Lift", robots="Panda", has_renderer=False, has_offscreen_renderer=True,
                     use_camera_obs=True, camera_names=["agentview"], camera_heights=H,
                     camera_widths=W, camera_depths=True)
    try:
        obs = env.reset()
        raw = obs["agentview_image"]
        upright = flip_robosuite_image(raw)
        model, data = env.sim.model._model, env.sim.data._data
        # robosuite renders visual geoms (groups 1, 2) with reflections on.
        ours = render_camera(model, data, "agentview", height=H, width=W, groups=(1, 2),
                             reflections=True)
        assert np.array_equal(upright, ours)
        assert not np.array_equal(raw, ours)
        # The table top (near the camera, light) fills the bottom rows of the upright view.
        table_z = env.table_offset[2]
        depth = render_camera(model, data, "agentview", height=H, width=W, depth=True,
                              groups=(1, 2))
        assert depth[-1].mean() < depth[0].mean()  # bottom row nearer than the top row
        assert table_z > 0.5 and upright[-4:].mean() > upright[:4].mean()
        assert flip_robosuite_image(obs["agentview_depth"]).shape == (H, W, 1)
        assert np.array_equal(flip_robosuite_image(raw, "opencv"), raw)
    finally:
        env.close()


# --------------------------------------------------------------------------- the view cull

CULL = """
<mujoco>
  <worldbody>
    <light pos="0 0 3" dir="0 0 -1" directional="true"/>
    <geom name="floor" type="plane" size="3 3 .1" rgba=".5 .5 .5 1"/>
    <geom name="far" type="sphere" pos="1.0 0 .05" size=".05" rgba="1 0 0 1"/>
    <geom name="edge" type="sphere" pos=".88 0 .05" size=".05" rgba="0 1 0 1"/>
    <geom name="above" type="sphere" pos="0 0 1.7" size=".1" rgba="0 0 1 1"/>
    <geom name="centre" type="box" pos="0 0 .05" size=".05 .05 .05" rgba="1 1 0 1"/>
    <camera name="top" pos="0 0 1.5" fovy="60"/>
  </worldbody>
</mujoco>
"""


def test_outside_view_worked_by_hand():
    """Camera 1.5 m up looking down, fovy 60: at the sphere centres' depth (1.45 m) the view's
    half-width is 1.45 tan 30 = 0.837 m; a side plane's unit normal has 1 / cos 30 = 1.1547.
    'far' (x = 1.0): (1.0 - 0.837) / 1.1547 = 0.141 m beyond, more than its 0.05 m radius:
    out. 'edge' (x = 0.88): 0.037 m beyond, less than 0.05: it may show, kept. 'above' is
    0.2 m behind the camera, radius 0.1: out. The plane (rbound 0) always stays. At aspect 2
    the half-width is 1.675 m: 'far' is in."""
    model = mujoco.MjModel.from_xml_string(CULL)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    names = [model.geom(i).name for i in range(model.ngeom)]
    out = render.outside_view(model, data, 0, 1.0)
    assert [n for n, o in zip(names, out, strict=True) if o] == ["far", "above"]
    out = render.outside_view(model, data, 0, 2.0)
    assert [n for n, o in zip(names, out, strict=True) if o] == ["above"]
    assert render.outside_view(model, data, -1, 1.0) is None  # the free camera: not known
    for w in (64, 128):
        a = render_camera(model, data, "top", height=64, width=w)
        assert a.tobytes() == render_camera(model, data, "top", height=64, width=w,
                                            cull_view=False).tobytes()
    assert (model.geom_group == 0).all()  # the groups the cull borrowed are back


ARENA_SCENE = (Path(__file__).resolve().parents[2] / "shared/vla-arena/bddl_files"
               / "safety_static_obstacles/level_1")


@pytest.mark.parametrize("task,level", [
    ("demo/turn_off_stove", 0), ("demo/place_lemon_in_bowl", 3), ("vla-arena", 3)])
def test_culled_frames_are_the_full_scenes_frames_byte_for_byte(task, level):
    """Real scenes, both cameras, colour and depth, at states a random policy reaches, with
    the V3 camera offsets: leaving out what is outside the view changes no byte, and the
    eye-in-hand camera does leave geoms out (else this would compare a scene with itself)."""
    from robosafe.sim.env import VISUAL_GROUPS, TaskEnv

    if task == "vla-arena":
        if not ARENA_SCENE.is_dir():
            pytest.skip("needs ../shared/vla-arena/bddl_files")
        path = min(ARENA_SCENE.glob("*.bddl"))
    else:
        path = Path(render.__file__).parents[1] / "tasks/suites" / f"{task}.bddl"
    env = TaskEnv(path, visual_level=level, render=False)
    try:
        env.reset(seed=3)
        m, d = env.task_world.model_ptr(), env.task_world.data_ptr()
        rng = np.random.default_rng(0)
        left_out = 0
        for _ in range(3):
            for _ in range(8):
                env.step(rng.uniform(-1, 1, env.action_dim))
            for cam in ("agentview", "robot0_eye_in_hand"):
                for depth in (False, True):
                    kw = {"height": 48, "width": 64, "groups": VISUAL_GROUPS, "depth": depth}
                    culled = render_camera(m, d, cam, **kw)
                    assert culled.tobytes() == render_camera(m, d, cam, cull_view=False,
                                                             **kw).tobytes(), (cam, depth)
            left_out += int(render.outside_view(m, d, m.camera("robot0_eye_in_hand").id,
                                                64 / 48).sum())
        assert left_out > 0
    finally:
        env.close()


MESA_EGL = "/usr/share/glvnd/egl_vendor.d/50_mesa.json"


@pytest.mark.skipif(not os.path.exists(MESA_EGL), reason="Mesa's EGL vendor file is absent")
def test_the_renderer_is_named_and_mesas_cpu_rasteriser_is_software():
    # Mesa's EGL forced to its CPU rasteriser, on any machine (a GPU's vendor library ignored)
    proc = run_python("r = render.gl_renderer(); print(r.software, '|', r.describe())",
                      MUJOCO_GL="egl", __EGL_VENDOR_LIBRARY_FILENAMES=MESA_EGL,
                      LIBGL_ALWAYS_SOFTWARE="1")
    assert proc.returncode == 0, proc.stderr
    software, described = proc.stdout.strip().split(" | ")
    assert software == "True" and described.startswith("software EGL (")
    assert any(k in described for k in ("llvmpipe", "softpipe", "swrast"))
    assert render.GLRenderer("egl", "NVIDIA H200/PCIe/SSE2", False).describe() == (
        "GPU EGL (NVIDIA H200/PCIe/SSE2)")
    assert render.GLRenderer("osmesa", "OSMesa", True).describe() == (
        "OSMesa (software, on the CPU)")


@pytest.mark.sim
def test_a_run_with_cameras_names_its_renderer_first(tmp_path):
    from conftest import run_robosafe

    args = ["run", "--suite", "demo", "--task-id", "turn_off_stove", "-n", "1", "--horizon",
            "2", "--policy", "zero"]
    proc = run_robosafe(*args, "--images", "--out", str(tmp_path / "a"))
    assert proc.returncode == 0, proc.stderr
    r = render.gl_renderer()
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"robosafe: cameras drawn by {r.describe()}")
    assert ("on a CPU each 128 px frame costs" in first) == r.software
    proc = run_robosafe(*args, "--no-images", "--out", str(tmp_path / "b"))
    assert proc.returncode == 0 and "cameras drawn" not in proc.stderr
