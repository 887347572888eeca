"""Headless rendering the right way up.

- :func:`ensure_gl_backend` picks MuJoCo's OpenGL backend when ``MUJOCO_GL`` is unset: EGL,
  then OSMesa, each probed by really rendering in a subprocess (the backend is fixed when
  ``mujoco`` is first imported, so a failed attempt cannot be undone in this process). If
  neither works it names the Debian package to install.
- :func:`render_camera` renders one camera with ``mujoco.Renderer`` (top row first), shadows and
  reflections off by default (10-20x faster on software GL), reusing one renderer per model and
  image size, and leaving out of the scene the geoms wholly outside the camera's view
  (:func:`outside_view`): the same pixels, bit for bit, for less of the software rasteriser's
  time (MuJoCo sends every geom to OpenGL; a wrist camera sees a fifth of a robot arm's mesh
  triangles, benchmarks/bench_render.py).
- :func:`gl_renderer` says what draws the cameras (GPU EGL, software EGL, OSMesa), for the run
  header: on software rendering the cameras are most of a step's time.
- :func:`flip_robosuite_image` turns robosuite's camera observations (bottom row first under its
  default ``IMAGE_CONVENTION = "opengl"``) the right way up. LIBERO / VLA-Arena users rotate
  those images by hand; robosafe's env does it once, here.

Call :func:`ensure_gl_backend` before anything imports ``mujoco`` (importing mujoco imports its
GL context module, which reads ``MUJOCO_GL`` once). If mujoco was imported first it still
works: the context class mujoco chose is rebound to the selected backend.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes.util
import glob
import os
import subprocess
import sys
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from robosafe.errors import RobosafeError

if TYPE_CHECKING:
    import mujoco

__all__ = ["GLRenderer", "culled", "ensure_gl_backend", "flip_robosuite_image", "gl_renderer",
           "outside_view", "render_camera"]

BACKENDS = ("egl", "osmesa")
_APT = "sudo apt-get install -y"
_backend: str | None = None

# Renders a one-geom scene into a small buffer; exit status 0 means the backend works.
_PROBE = """
import mujoco
m = mujoco.MjModel.from_xml_string(
    "<mujoco><worldbody><light pos='0 0 1'/><geom type='sphere' size='.1'/></worldbody></mujoco>")
d = mujoco.MjData(m)
mujoco.mj_forward(m, d)
r = mujoco.Renderer(m, 8, 8)
r.update_scene(d)
assert r.render().shape == (8, 8, 3)
r.close()
"""


def _probe_env(backend: str) -> dict[str, str]:
    env = dict(os.environ)
    env["MUJOCO_GL"] = backend
    env.setdefault("PYOPENGL_PLATFORM", backend)
    return env


def _probe(backend: str) -> str | None:
    """None if ``backend`` renders in a fresh interpreter, else the last line of its error."""
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE], env=_probe_env(backend),
                              capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if proc.returncode == 0:
        return None
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit status {proc.returncode}"


def _has_dri_driver() -> bool:
    return bool(glob.glob("/usr/lib/*/dri/*_dri.so") or glob.glob("/usr/lib/dri/*_dri.so")
                or glob.glob("/usr/lib64/dri/*_dri.so"))


def missing_gl_message(errors: dict[str, str]) -> str:
    """The one-line error when no backend works: which Debian packages are missing and the apt
    command (EGL needs ``libegl1`` and Mesa's drivers ``libgl1-mesa-dri``; OSMesa needs
    ``libosmesa6``)."""
    egl_missing = [pkg for pkg, present in (("libegl1", ctypes.util.find_library("EGL")),
                                            ("libgl1-mesa-dri", _has_dri_driver())) if not present]
    osmesa_missing = [] if ctypes.util.find_library("OSMesa") else ["libosmesa6"]
    egl_pkgs = egl_missing or ["libegl1", "libgl1-mesa-dri"]
    why = "; ".join(f"{b.upper() if b == 'egl' else 'OSMesa'}: {e}" for b, e in errors.items())
    missing = egl_missing + osmesa_missing
    head = (f"no headless OpenGL for MuJoCo (missing Debian package(s): {', '.join(missing)})"
            if missing else "no headless OpenGL for MuJoCo")
    return (f"{head}; install with: {_APT} {' '.join(egl_pkgs)} "
            f"(or for OSMesa: {_APT} libosmesa6), or set MUJOCO_GL [{why}]")


def _align_mujoco_context(backend: str) -> None:
    """Rebind the GL context class of an already-imported mujoco to ``backend``.

    mujoco picks its GLContext when ``mujoco`` is imported; if that happened before MUJOCO_GL was
    set (or robosuite set it to egl afterwards), ``mujoco.Renderer`` would use GLFW, which needs
    a display.
    """
    gl = sys.modules.get("mujoco.rendering.classic.gl_context")
    if gl is None or getattr(gl, "_MUJOCO_GL", None) == backend:
        return
    try:
        if backend == "egl":
            from mujoco.egl import GLContext
        elif backend == "osmesa":
            from mujoco.osmesa import GLContext
        else:
            return
    except ImportError as exc:
        raise RobosafeError(f"mujoco was imported before MUJOCO_GL was set and cannot switch to "
                            f"{backend}: {exc}; set MUJOCO_GL={backend} before starting "
                            f"Python") from None
    gl.GLContext = GLContext
    legacy = sys.modules.get("mujoco.gl_context")
    if legacy is not None:
        legacy.GLContext = GLContext


def ensure_gl_backend() -> str:
    """The MuJoCo OpenGL backend for this process, choosing one if ``MUJOCO_GL`` is unset.

    A set ``MUJOCO_GL`` is respected. Otherwise EGL then OSMesa are tried, each by rendering in a
    subprocess, and the first that works is exported as ``MUJOCO_GL`` (and
    ``PYOPENGL_PLATFORM`` if unset). Raises :class:`RobosafeError` with one line naming the
    missing Debian package and the apt command if neither works. Cached per process.
    """
    global _backend
    if _backend is not None:
        return _backend
    chosen = os.environ.get("MUJOCO_GL", "").strip()
    if not chosen:
        errors: dict[str, str] = {}
        for backend in BACKENDS:
            err = _probe(backend)
            if err is None:
                chosen = backend
                break
            errors[backend] = err
        else:
            raise RobosafeError(missing_gl_message(errors))
        os.environ["MUJOCO_GL"] = chosen
        os.environ.setdefault("PYOPENGL_PLATFORM", chosen)
    _align_mujoco_context(chosen.lower())
    _backend = chosen
    return chosen


@dataclass(frozen=True)
class GLRenderer:
    """What draws MuJoCo's cameras in this process: the backend and OpenGL's renderer string."""

    backend: str
    device: str
    software: bool

    def describe(self) -> str:
        if self.backend == "osmesa":
            return "OSMesa (software, on the CPU)"
        kind = "software" if self.software else "GPU"
        return f"{kind} {self.backend.upper()} ({self.device})"


# Mesa's CPU rasterisers, as OpenGL names them in GL_RENDERER
_SOFTWARE = ("llvmpipe", "softpipe", "swrast", "software")


def gl_renderer() -> GLRenderer:
    """The renderer behind :func:`render_camera`, read from a 1x1 context of the chosen backend
    (GL_RENDERER; OSMesa is software by construction)."""
    backend = ensure_gl_backend().lower()
    if backend == "osmesa":
        return GLRenderer(backend, "OSMesa", True)
    import mujoco

    ctx = mujoco.GLContext(1, 1)
    try:
        ctx.make_current()
        from OpenGL import GL

        device = GL.glGetString(GL.GL_RENDERER).decode(errors="replace")
    finally:
        ctx.free()
    return GLRenderer(backend, device, any(k in device.lower() for k in _SOFTWARE))


# --------------------------------------------------------------------------- rendering

_CACHE_SIZE = 4  # each entry holds a GL context and the model's uploaded meshes
_renderers: OrderedDict[tuple[int, int, int], tuple[object, object]] = OrderedDict()
_atexit_registered = False


def _renderer(model: mujoco.MjModel, height: int, width: int):
    import mujoco

    # The entry holds the model, so its id() cannot be reused by another model while cached.
    key = (id(model), height, width)
    hit = _renderers.get(key)
    if hit is not None:
        _renderers.move_to_end(key)
        return hit[1]
    renderer = mujoco.Renderer(model, height=height, width=width)
    global _atexit_registered
    if not _atexit_registered:
        # After the first context exists, i.e. after mujoco's EGL hook that terminates the
        # display: atexit runs hooks last-in first-out, so renderers close while it is alive
        # (otherwise their destructors print EGL errors at interpreter exit).
        atexit.register(_close_all)
        _atexit_registered = True
    _renderers[key] = (model, renderer)
    while len(_renderers) > _CACHE_SIZE:
        _close(_renderers.popitem(last=False)[1][1])
    return renderer


def _close(renderer) -> None:
    try:
        renderer.close()
    except Exception:  # noqa: BLE001 - any GL error here means the context is already gone
        # robosuite's EGL exit hook terminates the display it shares with mujoco's, possibly
        # before ours runs: drop the dead context so the destructors do not retry and print
        # EGL errors at interpreter exit.
        ctx = getattr(renderer, "_gl_context", None)
        if ctx is not None and hasattr(ctx, "_context"):
            ctx._context = None
        with contextlib.suppress(Exception):
            renderer.close()


def _close_all() -> None:
    while _renderers:
        _close(_renderers.popitem()[1][1])


def render_camera(model: mujoco.MjModel, data: mujoco.MjData, camera: str | int, *, height: int,
                  width: int, depth: bool = False, shadows: bool = False,
                  reflections: bool = False, groups: Sequence[int] | None = None,
                  cull_view: bool = True) -> np.ndarray:
    """One camera image, the right way up (top row of the array = top of the picture).

    RGB: uint8 ``height x width x 3``. ``depth=True``: float32 ``height x width`` distance along
    the optical axis in metres. ``camera`` is a camera name or id (-1 = the free camera).
    Shadows and reflections are off unless asked for. ``groups`` are the visible geom groups
    (default MuJoCo's 0, 1, 2; robosuite models keep visual geoms in group 1 and collision geoms
    in group 0, and robosuite renders groups 1 and 2). ``data`` must be forwarded
    (``mj_forward`` or a step) since the last change of state or camera position. Geoms wholly
    outside the view are left out of the scene (:func:`outside_view`) unless ``cull_view`` is
    False or shadows or reflections are on: the image is the same either way.
    """
    import mujoco

    ensure_gl_backend()
    renderer = _renderer(model, int(height), int(width))
    option = mujoco.MjvOption()
    if groups is not None:
        visible = {int(g) for g in groups}
        for g in range(len(option.geomgroup)):
            option.geomgroup[g] = int(g in visible)
    try:
        # a geom outside the view can still cast a shadow or show in a mirror into it
        cull = not (shadows or reflections) and cull_view
        with culled(model, data, camera, option, width / height if cull else None):
            renderer.update_scene(data, camera=camera, scene_option=option)
    except ValueError as exc:
        names = [model.camera(i).name for i in range(model.ncam)]
        raise RobosafeError(f"cannot render camera {camera!r}: {exc} "
                            f"(cameras: {', '.join(names) or 'none'})") from None
    flags = renderer.scene.flags
    flags[mujoco.mjtRndFlag.mjRND_SHADOW] = int(shadows)
    flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = int(reflections)
    if depth:
        renderer.enable_depth_rendering()
        try:
            return renderer.render()
        finally:
            renderer.disable_depth_rendering()
    return renderer.render()


def outside_view(model: mujoco.MjModel, data: mujoco.MjData, camera: int,
                 aspect: float) -> np.ndarray | None:
    """Which geoms lie wholly outside fixed camera ``camera``'s view (a bool per geom), or None
    if robosafe cannot tell for this camera (the free camera, one with intrinsics or
    orthographic: their projection is not the plain ``cam_fovy`` pyramid).

    A geom is outside when its bounding sphere (``geom_xpos``, ``geom_rbound``: MuJoCo's own,
    around every vertex of a mesh) lies wholly beyond one side of the view pyramid (vertical
    angle ``cam_fovy``, horizontal from ``aspect`` = width / height, as MuJoCo projects a
    fixed camera) or behind the camera. Such a geom draws no pixel, so leaving it out changes
    no pixel of the image (the others keep their order); planes (``geom_rbound`` 0) always
    stay. ``data`` must be forwarded, as for rendering.
    """
    if camera < 0 or np.any(model.cam_sensorsize[camera]) or \
            int(getattr(model, "cam_orthographic", np.zeros(model.ncam))[camera]):
        return None
    # camera frame: x right, y up, looking along -z (cam_xmat's columns, in world coordinates)
    rel = (data.geom_xpos - data.cam_xpos[camera]) @ data.cam_xmat[camera].reshape(3, 3)
    x, y, depth = rel[:, 0], rel[:, 1], -rel[:, 2]
    r = model.geom_rbound
    ty = np.tan(np.deg2rad(model.cam_fovy[camera]) / 2)
    tx = ty * aspect
    # signed distance beyond each side plane of the pyramid (unit normals), and behind
    beyond = np.maximum.reduce([(np.abs(x) - tx * depth) / np.hypot(1.0, tx),
                                (np.abs(y) - ty * depth) / np.hypot(1.0, ty), -depth])
    return (beyond > r) & (r > 0)


@contextlib.contextmanager
def culled(model: mujoco.MjModel, data: mujoco.MjData, camera: str | int,
           option: mujoco.MjvOption, aspect: float | None) -> Iterator[None]:
    """Around one scene update (``mjv_updateScene``) of ``camera`` with ``option``: the geoms
    outside the view (:func:`outside_view`; ``aspect`` None: none) moved to a geom group
    ``option`` hides, then put back. Only for renders without shadows or reflections (a geom
    outside the view can cast a shadow or show in a mirror inside it)."""
    import mujoco

    hidden = [g for g in range(len(option.geomgroup)) if not option.geomgroup[g]]
    cid = (mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
           if isinstance(camera, str) else int(camera))
    out = outside_view(model, data, cid, aspect) if hidden and aspect and cid >= 0 else None
    if out is None or not out.any():
        yield
        return
    idx = np.flatnonzero(out)
    groups = model.geom_group[idx].copy()
    model.geom_group[idx] = hidden[0]
    try:
        yield
    finally:
        model.geom_group[idx] = groups


def flip_robosuite_image(img: np.ndarray, convention: str | None = None) -> np.ndarray:
    """A robosuite camera observation the right way up.

    robosuite returns OpenGL's bottom-row-first buffer unless ``robosuite.macros.
    IMAGE_CONVENTION`` is ``"opencv"`` (verified on robosuite 1.5.2: ``Lift``'s
    ``agentview_image`` flipped vertically equals ``render_camera`` of the same state,
    groups (1, 2), reflections on, bit for bit). Only rows are reversed: left and right are
    already correct. ``convention`` defaults to robosuite's current macro. Works for RGB
    (HxWx3), depth (HxWx1 or HxW) and batches (NxHxWxC).
    """
    if convention is None:
        macros = sys.modules.get("robosuite.macros")
        convention = getattr(macros, "IMAGE_CONVENTION", "opengl") if macros else "opengl"
    if convention == "opencv":
        return img
    if convention != "opengl":
        raise ValueError(f"unknown robosuite IMAGE_CONVENTION {convention!r}")
    axis = 0 if img.ndim <= 3 else img.ndim - 3
    return np.ascontiguousarray(np.flip(img, axis=axis))
