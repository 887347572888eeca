"""Visual observation perturbations V0-V4 (VLA-Arena paper 001, Sec. 2.3, App. 7.3, App. 8.2).

A :class:`VisualPerturbation` is a plain, frozen record of *what* to perturb in one episode:
lighting offsets and colour temperature, per-object colours, camera position offsets and a pixel
noise model. It is drawn once per episode from the episode's seeded generator, either from the
level ladder (:func:`draw_level`, Sec. 2.3 / Table 4) or from a task's CBDDL blocks
(:func:`from_task`, App. 7.3), and the two combine with :func:`combine`. Two functions apply it:

- :func:`apply_model` edits the compiled MuJoCo model (object colours, camera positions), once
  per episode, before rendering;
- :func:`apply_image` post-processes every rendered frame (lighting, temperature, noise).

The distributions live in ``sim/data/perturbations.yaml``; the decisions taken where the paper
is ambiguous are in docs/decisions.md, "Simulator: visual perturbations and rendering".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np

from robosafe.errors import RobosafeError, TaskError
from robosafe.yamldata import load_yaml

if TYPE_CHECKING:  # mujoco is only needed for the type: importing it fixes the GL backend
    import mujoco

    from robosafe.tasks.ast import Problem

__all__ = ["LEVELS", "VisualPerturbation", "apply_image", "apply_model", "combine", "draw_level",
           "from_task", "load_config", "temperature_gains"]

LEVELS = (0, 1, 2, 3, 4)
NEUTRAL_K = 6500.0


@cache
def load_config() -> dict:
    """The distributions of ``sim/data/perturbations.yaml`` (cached; do not mutate)."""
    text = resources.files("robosafe.sim").joinpath("data/perturbations.yaml").read_text("utf-8")
    return load_yaml(text)


# --------------------------------------------------------------------------- the record

Noise = tuple  # ("gaussian", mean, var) | ("salt_pepper", prob)


def _noise_spec(spec: Any) -> tuple:
    kind = spec[0]
    params = tuple(float(p) for p in spec[1:])
    if kind == "gaussian" and len(params) == 2:
        if not params[1] >= 0:
            raise ValueError(f"gaussian noise variance must be >= 0, got {params[1]!r}")
    elif kind == "salt_pepper" and len(params) == 1:
        if not 0.0 <= params[0] <= 1.0:
            raise ValueError(f"salt_pepper probability must be in [0, 1], got {params[0]!r}")
    else:
        raise ValueError(f"noise must be ('gaussian', mean, var) or ('salt_pepper', prob), "
                         f"got {spec!r}")
    return (kind, *params)


@dataclass(frozen=True)
class VisualPerturbation:
    """One episode's visual perturbation (App. 8.2; all zero / None = V0, the canonical view).

    ``brightness``, ``contrast``, ``saturation``: offsets to 0, applied as PIL ImageEnhance
    factors ``1 + offset`` (App. 7.3.1). ``temperature_k``: light colour temperature in Kelvin,
    ``None`` = the neutral 6500 K. ``recolor`` with ``object_rgba``: one RGBA per object, in the
    order of the ``object_geoms`` given to :func:`apply_model`. ``camera_offsets``: metres added
    to each named camera's position (in its parent-body frame, as VLA-Arena edits the camera's
    ``pos``). ``noise``: ``("gaussian", mean, var)`` on pixels in [0, 1] (var is sigma^2) or
    ``("salt_pepper", prob)``; :func:`combine` may make it a tuple of such specs applied in
    order. ``level``: the V-level drawn, ``None`` for a task-only perturbation.
    """

    brightness: float = 0.0
    contrast: float = 0.0
    saturation: float = 0.0
    temperature_k: float | None = None
    recolor: bool = False
    object_rgba: tuple[tuple[float, float, float, float], ...] | None = None
    camera_offsets: Mapping[str, tuple[float, float, float]] = field(default_factory=dict)
    noise: Noise | tuple[Noise, ...] | None = None
    level: int | None = None

    def __post_init__(self) -> None:
        # Normalise numpy scalars and lists so that equality and hashing are by value.
        put = object.__setattr__
        for name in ("brightness", "contrast", "saturation"):
            put(self, name, float(getattr(self, name)))
        if self.temperature_k is not None:
            t = float(self.temperature_k)
            if not t > 0:
                raise ValueError(f"temperature_k must be > 0 Kelvin, got {self.temperature_k!r}")
            put(self, "temperature_k", t)
        if self.object_rgba is not None:
            rgba = tuple(tuple(float(c) for c in row) for row in self.object_rgba)
            if any(len(row) != 4 for row in rgba):
                raise ValueError("object_rgba rows must be RGBA (4 values)")
            put(self, "object_rgba", rgba)
        offsets = {}
        for cam, off in dict(self.camera_offsets).items():
            off = tuple(float(v) for v in off)
            if len(off) != 3:
                raise ValueError(f"camera offset for {cam!r} must be (dx, dy, dz), got {off!r}")
            offsets[str(cam)] = off
        put(self, "camera_offsets", offsets)
        if self.noise is not None and len(self.noise) == 0:
            put(self, "noise", None)
        elif self.noise is not None:
            specs = self.noise if isinstance(self.noise[0], (tuple, list)) else (self.noise,)
            specs = tuple(_noise_spec(s) for s in specs)
            put(self, "noise", specs[0] if len(specs) == 1 else specs)
        put(self, "recolor", bool(self.recolor))
        if self.level is not None:
            put(self, "level", int(self.level))

    def __hash__(self) -> int:
        return hash((self.brightness, self.contrast, self.saturation, self.temperature_k,
                     self.recolor, self.object_rgba, tuple(sorted(self.camera_offsets.items())),
                     self.noise, self.level))

    @property
    def noise_specs(self) -> tuple[Noise, ...]:
        """The noise models in the order they are applied (empty if none)."""
        if self.noise is None:
            return ()
        return self.noise if isinstance(self.noise[0], tuple) else (self.noise,)

    @property
    def is_identity_image(self) -> bool:
        """True if :func:`apply_image` returns the frame unchanged."""
        return (self.brightness == self.contrast == self.saturation == 0.0
                and (self.temperature_k is None or self.temperature_k == NEUTRAL_K)
                and not self.noise_specs)


# --------------------------------------------------------------------------- drawing


def _substream(rng: np.random.Generator) -> np.random.Generator:
    # One 63-bit key per family keeps the parent's consumption fixed (independent of how many
    # objects and cameras a world has), so adding an object never shifts the camera offsets.
    return np.random.default_rng(int(rng.integers(0, 2**63 - 1)))


def _draw_colors(rng: np.random.Generator, n_objects: int) -> tuple:
    c = load_config()["color"]
    lo, hi = c["rgb"]
    rgb = rng.uniform(lo, hi, size=(n_objects, 3))
    return tuple((*map(float, row), float(c["alpha"])) for row in rgb)


def draw_level(level: int, rng: np.random.Generator, *, cameras: Sequence[str],
               n_objects: int) -> VisualPerturbation:
    """The V-level perturbation of one episode (paper 001, Sec. 2.3; Table 4 / App. 8.2).

    V0 canonical; V1 lighting (brightness, contrast, saturation offsets U(-0.75, 0.75),
    temperature U(3500, 8500) K); V2 + object colour (RGB U(0.2, 0.8), A = 1, one per object);
    V3 + camera position offset U(-0.105, 0.105) m per axis for each camera in ``cameras``;
    V4 + Gaussian pixel noise N(0, sigma^2 = 0.085).

    Every family is drawn at every level, in a fixed order (lighting, colours, cameras), and
    then the families the level excludes are dropped: the same generator state gives the same
    perturbation, and V(k+1) contains exactly V(k)'s draws. Pass scene cameras in ``cameras``
    (App. 7.3.3 offsets scene cameras; a wrist camera moves with the hand). The parent
    generator advances by the same amount whatever ``cameras`` and ``n_objects`` are.
    """
    if level not in LEVELS:
        raise RobosafeError(f"visual perturbation level must be one of 0-4 (V0-V4), got {level!r}")
    if n_objects < 0:
        raise ValueError(f"n_objects must be >= 0, got {n_objects}")
    cfg = load_config()
    light_rng, color_rng, camera_rng = _substream(rng), _substream(rng), _substream(rng)

    lc = cfg["lighting"]
    bright, contr, sat, temp = (float(light_rng.uniform(*lc[k])) for k in
                                ("brightness", "contrast", "saturation", "temperature_k"))
    colors = _draw_colors(color_rng, n_objects)
    lo, hi = cfg["camera"]["offset"]
    offs = camera_rng.uniform(lo, hi, size=(len(cameras), 3))
    offsets = {str(cam): tuple(map(float, row)) for cam, row in zip(cameras, offs, strict=True)}
    nc = cfg["noise"]
    noise = (nc["kind"], float(nc["mean"]), float(nc["var"]))

    families = set(cfg["levels"][level])
    light = "lighting" in families
    return VisualPerturbation(
        brightness=bright if light else 0.0,
        contrast=contr if light else 0.0,
        saturation=sat if light else 0.0,
        temperature_k=temp if light else None,
        recolor="color" in families,
        object_rgba=colors if "color" in families else None,
        camera_offsets=offsets if "camera" in families else {},
        noise=noise if "noise" in families else None,
        level=level,
    )


def from_task(problem: Problem, rng: np.random.Generator, *, cameras: Sequence[str],
              n_objects: int) -> VisualPerturbation:
    """The perturbation a task's CBDDL blocks ask for (paper 001, App. 7.3).

    ``(:image_settings ...)`` gives the lighting offsets and temperature (App. 7.3.1),
    ``(:noise ...)`` the noise model (App. 7.3.2), ``(:camera NAME (dx dy dz) ...)`` fixed
    camera offsets (App. 7.3.3; a camera without an offset is only rendered), and
    ``(:random_color true)`` one random colour per object, drawn like V2 (Table 4). ``cameras``
    are the cameras the world has: an offset for any other camera is a :class:`TaskError` at the
    block's position. The generator advances by the same amount whether or not colours are
    drawn.
    """
    image = problem.image
    color_rng = _substream(rng)
    recolor = bool(problem.random_color)
    known = set(cameras)
    offsets = {}
    for cam in problem.camera:
        if cam.offset is None:
            continue
        if cam.name not in known:
            line, col = (cam.pos.line, cam.pos.column) if cam.pos else (None, None)
            raise TaskError(f"camera '{cam.name}' has an offset but the world has no such camera "
                            f"(cameras: {', '.join(cameras) or 'none'})", line=line, column=col)
        offsets[cam.name] = cam.offset
    noise = None
    if problem.noise is not None:
        named = problem.noise.named
        if problem.noise.kind == "gaussian":
            noise = ("gaussian", named.get("mean", 0.0), named.get("var", 0.0))
        else:
            noise = ("salt_pepper", named.get("prob", 0.0))
    return VisualPerturbation(
        brightness=image.get("brightness", 0.0),
        contrast=image.get("contrast", 0.0),
        saturation=image.get("saturation", 0.0),
        temperature_k=image.get("temperature"),
        recolor=recolor,
        object_rgba=_draw_colors(color_rng, n_objects) if recolor else None,
        camera_offsets=offsets,
        noise=noise,
        level=None,
    )


def _mired(kelvin: float | None) -> float:
    return 1e6 / (NEUTRAL_K if kelvin is None else kelvin)


def combine(task_pert: VisualPerturbation, level_pert: VisualPerturbation) -> VisualPerturbation:
    """A task's own perturbation with a level ladder on top (docs/decisions.md).

    The level *adds* to the task: lighting offsets add (clipped to [-1, 1], the range the CBDDL
    validator accepts, i.e. enhancement factors in [0, 2]); colour temperatures add as shifts in
    mired (10^6 / K, the unit in which colour-correction filters compose), relative to 6500 K;
    camera offsets add per camera. Object colours: the level's draws when the level recolours,
    else the task's. Noise: two Gaussians merge into one (means and variances add), two
    salt-and-pepper models into one (p = 1 - (1 - p1)(1 - p2)), and different kinds are applied
    in turn, the task's first. ``level`` is the level's.
    """
    cfg = load_config()["lighting"]
    lo, hi = cfg["offset_clip"]

    def add(a: float, b: float) -> float:
        return float(min(hi, max(lo, a + b)))

    # Either side neutral: the other's Kelvin exactly (the mired round trip is not exact).
    if task_pert.temperature_k is None:
        temp = level_pert.temperature_k
    elif level_pert.temperature_k is None:
        temp = task_pert.temperature_k
    else:
        kmin, kmax = cfg["temperature_clip_k"]
        mired = _mired(task_pert.temperature_k) + _mired(level_pert.temperature_k) - _mired(None)
        mired = min(1e6 / kmin, max(1e6 / kmax, mired))
        temp = 1e6 / mired

    offsets = dict(task_pert.camera_offsets)
    for cam, off in level_pert.camera_offsets.items():
        base = offsets.get(cam, (0.0, 0.0, 0.0))
        offsets[cam] = tuple(a + b for a, b in zip(base, off, strict=True))

    noise = list(task_pert.noise_specs)
    for spec in level_pert.noise_specs:
        same = next((i for i, s in enumerate(noise) if s[0] == spec[0]), None)
        if same is None:
            noise.append(spec)
        elif spec[0] == "gaussian":
            noise[same] = ("gaussian", noise[same][1] + spec[1], noise[same][2] + spec[2])
        else:
            noise[same] = ("salt_pepper", 1.0 - (1.0 - noise[same][1]) * (1.0 - spec[1]))

    return VisualPerturbation(
        brightness=add(task_pert.brightness, level_pert.brightness),
        contrast=add(task_pert.contrast, level_pert.contrast),
        saturation=add(task_pert.saturation, level_pert.saturation),
        temperature_k=temp,
        recolor=task_pert.recolor or level_pert.recolor,
        object_rgba=level_pert.object_rgba if level_pert.recolor else task_pert.object_rgba,
        camera_offsets=offsets,
        noise=tuple(noise) or None,
        level=level_pert.level,
    )


# --------------------------------------------------------------------------- images


def _luma(img: np.ndarray) -> np.ndarray:
    # PIL's RGB -> L conversion (ITU-R 601-2 luma in 16-bit fixed point, rounded), so the
    # degenerate images below are bit-identical to ImageEnhance's.
    i = img.astype(np.int32)
    return ((i[..., 0] * 19595 + i[..., 1] * 38470 + i[..., 2] * 7471 + 0x8000) >> 16).astype(
        np.uint8)


def _blend(degenerate: np.ndarray, img: np.ndarray, factor: float) -> np.ndarray:
    # PIL's Image.blend: float32 interpolation / extrapolation, clipped, truncated to uint8.
    f = np.float32(factor)
    d = degenerate.astype(np.float32)
    out = d + f * (img.astype(np.float32) - d)
    return np.clip(out, 0.0, 255.0).astype(np.uint8)


def _brightness(img: np.ndarray, offset: float) -> np.ndarray:
    """PIL ``ImageEnhance.Brightness(img).enhance(1 + offset)``: blend with black."""
    return _blend(np.zeros_like(img), img, 1.0 + offset)


def _contrast(img: np.ndarray, offset: float) -> np.ndarray:
    """PIL ``ImageEnhance.Contrast(img).enhance(1 + offset)``: blend with the mean grey."""
    mean = int(float(_luma(img).mean()) + 0.5)
    return _blend(np.full_like(img, mean), img, 1.0 + offset)


def _saturation(img: np.ndarray, offset: float) -> np.ndarray:
    """PIL ``ImageEnhance.Color(img).enhance(1 + offset)``: blend with the grey image."""
    return _blend(np.repeat(_luma(img)[..., None], 3, axis=-1), img, 1.0 + offset)


# CIE 1931 2-degree colour-matching functions, multi-lobe piecewise-Gaussian fit of Wyman,
# Sloan & Shirley, "Simple Analytic Approximations to the CIE XYZ Color Matching Functions",
# JCGT 2(2), 2013, Eq. 2: (weight, mu, sigma below mu, sigma above mu) per lobe, nm.
_CMF_LOBES = {
    "x": ((1.056, 599.8, 37.9, 31.0), (0.362, 442.0, 16.0, 26.7), (-0.065, 501.1, 20.4, 26.2)),
    "y": ((0.821, 568.8, 46.9, 40.5), (0.286, 530.9, 16.3, 31.1)),
    "z": ((1.217, 437.0, 11.8, 36.0), (0.681, 459.0, 26.0, 13.8)),
}
# XYZ -> linear sRGB (IEC 61966-2-1).
_XYZ_TO_SRGB = np.array([[3.2406, -1.5372, -0.4986],
                         [-0.9689, 1.8758, 0.0415],
                         [0.0557, -0.2040, 1.0570]])
_C2 = 1.4388e-2  # second radiation constant h c / k_B, m K


@cache
def _cmf() -> tuple[np.ndarray, np.ndarray]:
    lam = np.arange(380.0, 781.0, 1.0)
    rows = []
    for lobes in _CMF_LOBES.values():
        total = np.zeros_like(lam)
        for w, mu, s1, s2 in lobes:
            s = np.where(lam < mu, s1, s2)
            total += w * np.exp(-0.5 * ((lam - mu) / s) ** 2)
        rows.append(total)
    return lam, np.array(rows)


def _blackbody_linear_rgb(kelvin: float) -> np.ndarray:
    lam, cmf = _cmf()
    metres = lam * 1e-9
    radiance = metres**-5 / np.expm1(_C2 / (metres * kelvin))  # Planck's law, up to a constant
    rgb = _XYZ_TO_SRGB @ (cmf @ radiance)
    return np.clip(rgb, 0.0, None)


@lru_cache(maxsize=256)
def temperature_gains(kelvin: float) -> tuple[float, float, float]:
    """Linear-light RGB gains of a black-body light at ``kelvin`` seen by a camera white-balanced
    for 6500 K (App. 8.2 "deviating from the standard daylight white balance of 6500K").

    Planck's law integrated against the CIE 1931 colour-matching functions (Wyman-Sloan-Shirley
    2013 fit), converted to linear sRGB (IEC 61966-2-1), divided channel-wise by the same for
    6500 K and scaled so the largest gain is 1 (no channel clips). 6500 K gives (1, 1, 1).
    """
    if kelvin == NEUTRAL_K:
        return (1.0, 1.0, 1.0)
    g = _blackbody_linear_rgb(kelvin) / _blackbody_linear_rgb(NEUTRAL_K)
    g = g / g.max()
    return tuple(float(v) for v in g)


_SRGB_DECODE = np.array([v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4
                         for v in np.arange(256) / 255.0])


@lru_cache(maxsize=256)
def _temperature_lut(kelvin: float) -> np.ndarray:
    # Per-channel gains on linear light are a 256-entry lookup per channel on sRGB values.
    gains = np.asarray(temperature_gains(kelvin))
    lin = _SRGB_DECODE[:, None] * gains  # white balance acts on light, i.e. linear values
    enc = np.where(lin <= 0.0031308, 12.92 * lin, 1.055 * np.power(lin, 1 / 2.4) - 0.055)
    return np.rint(np.clip(enc, 0.0, 1.0) * 255.0).astype(np.uint8)


def _temperature(img: np.ndarray, kelvin: float) -> np.ndarray:
    if temperature_gains(float(kelvin)) == (1.0, 1.0, 1.0):
        return img
    lut = _temperature_lut(float(kelvin))
    return np.stack([lut[img[..., c], c] for c in range(3)], axis=-1)


def _noise(img: np.ndarray, spec: tuple, rng: np.random.Generator) -> np.ndarray:
    if spec[0] == "gaussian":
        _, mean, var = spec
        x = img.astype(np.float64) / 255.0 + rng.normal(mean, math.sqrt(var), size=img.shape)
        return np.rint(np.clip(x, 0.0, 1.0) * 255.0).astype(np.uint8)
    prob = spec[1]
    hit = rng.random(img.shape[:2]) < prob  # whole pixels, all channels (App. 7.3.2)
    salt = rng.random(img.shape[:2]) < 0.5
    out = img.copy()
    out[hit & salt] = 255
    out[hit & ~salt] = 0
    return out


def apply_image(img: np.ndarray, pert: VisualPerturbation,
                rng: np.random.Generator | None = None) -> np.ndarray:
    """One rendered frame under ``pert`` (paper 001, App. 7.3.1-7.3.2 and App. 8.2).

    In order: brightness, contrast, saturation (each exactly PIL ``ImageEnhance`` with factor
    ``1 + offset``, uint8 between steps as when chaining PIL calls), colour temperature
    (:func:`temperature_gains` applied in linear light), then noise "after any image
    enhancement" (App. 7.3.2): Gaussian on pixels normalised to [0, 1] with standard deviation
    ``sqrt(var)``, clipped to [0, 1] and rounded back to uint8; salt-and-pepper sets a fraction
    ``prob`` of pixels to 0 or 255 with equal chance. Noise is drawn from ``rng`` (required when
    ``pert`` has noise), so the same generator state gives the same noisy frame.

    ``img`` is uint8 HxWx3; the result is a new uint8 HxWx3 array (the input is not modified).
    """
    img = np.asarray(img)
    if img.dtype != np.uint8 or img.ndim != 3 or img.shape[-1] != 3:
        raise ValueError(f"apply_image expects a uint8 HxWx3 image, got {img.dtype} {img.shape}")
    out = img
    if pert.brightness:
        out = _brightness(out, pert.brightness)
    if pert.contrast:
        out = _contrast(out, pert.contrast)
    if pert.saturation:
        out = _saturation(out, pert.saturation)
    if pert.temperature_k is not None:
        out = _temperature(out, pert.temperature_k)
    specs = pert.noise_specs
    if specs and rng is None:
        raise ValueError("apply_image needs the episode's generator (rng) to draw noise")
    for spec in specs:
        out = _noise(out, spec, rng)
    return out.copy() if out is img else out


# --------------------------------------------------------------------------- model


def apply_model(model: mujoco.MjModel, pert: VisualPerturbation, *,
                object_geoms: Sequence[Sequence[int]], camera_ids: Mapping[str, int],
                base_cam_pos: np.ndarray, base_geom_rgba: np.ndarray | None = None) -> None:
    """Recolour objects and move cameras in a compiled model (paper 001, App. 7.3.3, App. 8.2).

    ``object_geoms[i]`` are the visual geom ids of object ``i``; each gets ``object_rgba[i]``
    (``geom_rgba`` overrides the geom's material colour; a texture is tinted, as VLA-Arena's
    material recolouring does). ``camera_ids`` maps the cameras this world may move to their
    ids; each camera's ``cam_pos`` becomes ``base_cam_pos[id] + offset`` (0 if the camera has no
    offset), where ``base_cam_pos`` is a copy of ``model.cam_pos`` taken before any
    perturbation, so applying twice equals applying once and V0 restores the canonical view.
    With ``base_geom_rgba`` (a copy of ``model.geom_rgba``) a perturbation without colours
    restores the objects' colours. Call ``mujoco.mj_forward`` (or step) before rendering so
    ``data.cam_xpos`` follows.
    """
    if pert.object_rgba is not None:
        if len(pert.object_rgba) != len(object_geoms):
            raise RobosafeError(f"the perturbation has colours for {len(pert.object_rgba)} "
                                f"objects but the world has {len(object_geoms)}")
        for geoms, rgba in zip(object_geoms, pert.object_rgba, strict=True):
            idx = np.asarray(geoms, dtype=int)
            model.geom_rgba[idx] = rgba
    elif base_geom_rgba is not None:
        for geoms in object_geoms:
            idx = np.asarray(geoms, dtype=int)
            model.geom_rgba[idx] = base_geom_rgba[idx]

    unknown = sorted(set(pert.camera_offsets) - set(camera_ids))
    if unknown:
        raise RobosafeError(f"camera offset for unknown camera(s) {', '.join(unknown)} "
                            f"(this world moves: {', '.join(camera_ids) or 'none'})")
    base = np.asarray(base_cam_pos, dtype=float)
    for name, cid in camera_ids.items():
        model.cam_pos[cid] = base[cid] + np.asarray(pert.camera_offsets.get(name, (0.0, 0.0, 0.0)))
