"""TouchSafeBench-style episodes from MuJoCo (paper 003, Sec. 3 and App. E).

Paper 003 records a Spot-like mobile manipulator and a Habitat 3.0 humanoid in HSSD scenes.
This generator builds the same co-presence situation in MuJoCo (the ``sim`` extra's
``mujoco`` bindings, no robosuite) and writes it through :func:`dataset.write_episode`, so
``robosafe grounding index`` reads it like any App. E dataset.

* **Scene**: a seeded procedural room (four walls, one with a doorway) with 3-6 pieces of
  furniture along the walls (``data/furniture.yaml``) and 3-6 free YCB-named objects.
* **Robot**: by default (``robot="spot"``) Boston Dynamics Spot with the Spot arm as robosuite
  1.5 ships them (MJCF and meshes derived from MuJoCo Menagerie's ``boston_dynamics_spot``;
  ``data/robots.yaml``), posed kinematically: legs in a standing pose, the arm between stow
  and reach. ``robot="primitive"`` is robosafe's own stand-in without robosuite (cylindrical
  wheeled base, mast, two-link arm, gripper, arm camera on the gripper; 0.3 m base radius and
  0.55 m forward reach).
* **Humanoid**: a capsule body (torso, head, two arms, two legs swinging with the walked
  distance) with a head camera, kinematically walking seeded waypoints at ~1.1 m/s.
* **Cameras**: arm, head, a follow camera per agent (behind and above it, kept inside the
  room, looking at it) and a fixed overhead camera for ``topdown.mp4``; all 90 degrees FOV.
* **Behaviour**: both agents are kinematic (poses set per step, then ``mj_forward``). The
  robot follows the human's path at 1-2 m (social_navigation) or drives object pick/place
  routes between furniture (social_rearrangement). Seeded events bend its path: an approach
  onto the human (the episode's human collision), close passes at 1.0-1.4 m (near misses) and,
  in social_navigation only, bumps into the nearest wall or furniture (scene contacts: App.
  F.1, "Scene collisions occur exclusively in social_navigation episodes";
  ``scene_bump_tasks`` asks otherwise); pushed floor objects move. The robot's planned
  speed never exceeds ``robot_max_speed_m_s``: an event's approach lasts as long as the
  distance needs at that speed, and the final path is speed-limited step by step.
* **Labels come from MuJoCo contacts**, classified by the root body of each geom: robot-human
  -> ``did_collide_human`` (the episode ends at the first one, App. F.3), robot-static (walls,
  furniture; the floor is visual only) -> ``robot_scene_colls``, robot-free object (not the
  carried one) -> ``robot_obj_colls``; the per-step values are contact counts.
* **Frames**: MuJoCo z-up is written in Habitat's y-up frame, ``(x, y, z)_habitat = (x, z,
  -y)_mujoco``; cameras look down -z with y up in both, so a camera's rotation is the same
  change of basis applied to ``cam_xmat``. Depth is MuJoCo's z-buffer distance along the
  optical axis in metres (as Habitat's depth sensor). ``visibility.json`` holds, per view and
  frame, whether any humanoid / robot geom is in the segmentation render.

Rendering uses :func:`robosafe.sim.render.ensure_gl_backend`: EGL when it works (a GPU's EGL
when one is present, Mesa's software EGL otherwise), else OSMesa; shadows and reflections off.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from robosafe.errors import RobosafeError
from robosafe.grounding.dataset import (
    HUMAN_TYPES,
    INFO_FILE,
    SIM_TASKS,
    VIEWS,
    EpisodeRecord,
    write_dataset_info,
    write_episode,
)
from robosafe.grounding.synthetic import (
    YCB_OBJECTS,
    _smooth_noise,  # the same seeded smooth noise
)
from robosafe.trace.episode import Episode as TraceEpisode
from robosafe.trace.episode import TaskTags

DT = 1.0 / 30.0  # Habitat's 30 Hz (App. E)
ROBOT_RADIUS_M, HUMAN_SPEED_M_S, ROBOT_SPEED_M_S = 0.30, 1.1, 0.8
WALL_HEIGHT_M, WALL_HALF_THICK_M = 2.4, 0.05
# geom contact bits: static 1, robot 2, human 4, objects 8. The robot collides with everything;
# nothing else collides with anything (the other bodies are posed, not simulated).
_BITS = {"static": (1, 0), "robot": (2, 1 | 4 | 8), "human": (4, 2), "object": (8, 2)}
_HUMAN_COLOURS = {"female_2": (0.75, 0.20, 0.25), "male_2": (0.20, 0.55, 0.30),
                  "neutral_0": (0.50, 0.50, 0.55)}
_C = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])  # MuJoCo z-up -> y-up
_CAM = {"arm": "arm", "head": "head", "third_robot": "third_robot",
        "third_human": "third_human"}
_STOW, _REACH = (-1.0, 1.6), (0.3, 1.2)  # shoulder, elbow (rad)


#: Largest rendered image side: the offscreen buffer is sized to the image (MuJoCo's default
#: buffer is 640 px); a 2048 px frame is 12 MiB of RGB, six views per step.
MAX_IMAGE_SIZE = 2048
#: In-progress state of a generate run (its config and finished episodes), next to the
#: episodes until dataset_info.json is written last; what a rerun with the same settings
#: continues.
PROGRESS_FILE = ".generate-progress.json"


@dataclass(frozen=True)
class GenerateConfig:
    """Episode count, size and event rates. Rates are per episode."""

    episodes: int = 6
    seed: int = 0
    sim_tasks: tuple[str, ...] = SIM_TASKS
    image_size: int = 128
    max_steps: int = 600
    p_human_collision: float = 0.7  # paper: 73.4 % of episodes (App. F.1)
    near_misses: float = 1.0  # Poisson mean
    scene_bumps: float = 1.2  # Poisson mean
    max_depth_m: float = 10.0
    shadows: bool = False  # shadows and reflections (MuJoCo's default on; 10x slower on CPU)
    robot: str = "spot"  # "spot" (real model, data/robots.yaml) or "primitive"
    # App. F.1: "Scene collisions occur exclusively in social_navigation episodes"; tasks
    # named here get scene bumps (robosafe's own option to ask otherwise)
    scene_bump_tasks: tuple[str, ...] = ("social_navigation",)
    # The robot's speed limit. ROBOT_SPEED_M_S (0.8) is the rearrangement cruise speed; the
    # follower must keep up with the humanoid, whose walk is clipped at 1.6 m/s (_walked).
    robot_max_speed_m_s: float = 1.6

    def check(self) -> None:
        """One error line for a setting that would fail part way (checked before anything is
        written: a bad --size used to leave a dataset_info.json and no episode)."""
        if self.episodes < 1:
            raise RobosafeError(f"--episodes {self.episodes}: must be at least 1")
        if not 8 <= self.image_size <= MAX_IMAGE_SIZE or self.image_size % 2:
            raise RobosafeError(f"--size {self.image_size}: must be even and in 8.."
                                f"{MAX_IMAGE_SIZE} (the top-down MPEG-4 video; the offscreen "
                                "render buffer)")
        if self.max_steps < 10:
            raise RobosafeError(f"--max-steps {self.max_steps}: must be at least 10")
        unknown = [t for t in self.sim_tasks if t not in SIM_TASKS]
        if not self.sim_tasks or unknown:
            raise RobosafeError(f"--task {unknown[0] if unknown else ''!r}: expected one of "
                                f"{', '.join(SIM_TASKS)}")
        if self.robot not in ("spot", "primitive"):
            raise RobosafeError(f"--robot {self.robot!r}: expected spot or primitive")


@dataclass
class Room:
    size: np.ndarray  # (2,) x, y extent; the room spans [0, size]
    boxes: list[tuple[str, np.ndarray, np.ndarray, tuple[float, ...]]]  # name, centre, half
    door: tuple[float, float]  # doorway span on the south wall (y = 0)
    objects: list[tuple[str, np.ndarray]] = field(default_factory=list)
    interior: tuple[np.ndarray, np.ndarray] = (np.zeros(2), np.zeros(2))


@cache
def furniture_kinds() -> dict[str, dict[str, Any]]:
    import yaml

    text = resources.files("robosafe.grounding").joinpath("data/furniture.yaml").read_text()
    return yaml.safe_load(text)


def build_room(rng: np.random.Generator) -> Room:
    """Walls with a doorway and furniture against them, no two pieces overlapping."""
    size = rng.uniform(6.0, 9.0, size=2)
    door_at = rng.uniform(1.0, size[0] - 2.0)
    door = (door_at, door_at + 1.0)
    t, h = WALL_HALF_THICK_M, WALL_HEIGHT_M / 2
    grey = (0.82, 0.80, 0.76)
    boxes = [("wall_south_a", np.array([door[0] / 2, -t, h]), np.array([door[0] / 2, t, h]),
              grey),
             ("wall_south_b", np.array([(door[1] + size[0]) / 2, -t, h]),
              np.array([(size[0] - door[1]) / 2, t, h]), grey),
             ("wall_north", np.array([size[0] / 2, size[1] + t, h]),
              np.array([size[0] / 2 + 2 * t, t, h]), grey),
             ("wall_west", np.array([-t, size[1] / 2, h]), np.array([t, size[1] / 2, h]), grey),
             ("wall_east", np.array([size[0] + t, size[1] / 2, h]),
              np.array([t, size[1] / 2, h]), grey)]
    kinds = furniture_kinds()
    names = sorted(kinds)
    placed: list[tuple[np.ndarray, np.ndarray]] = []
    for i in range(int(rng.integers(3, 7))):
        kind = names[int(rng.integers(len(names)))]
        length, depth, height = kinds[kind]["size"]
        for _ in range(20):
            side = int(rng.integers(4))  # 0 south, 1 north, 2 west, 3 east
            along = size[0] if side < 2 else size[1]
            a = rng.uniform(length / 2 + 0.1, along - length / 2 - 0.1)
            if side == 0 and door[0] - length / 2 - 0.6 < a < door[1] + length / 2 + 0.6:
                continue  # keep the doorway free
            off = depth / 2 + 0.02
            centre = {0: (a, off), 1: (a, size[1] - off), 2: (off, a),
                      3: (size[0] - off, a)}[side]
            half = np.array([length / 2, depth / 2] if side < 2 else [depth / 2, length / 2])
            c = np.array(centre)
            if all(np.any(np.abs(c - pc) > half + ph + 0.3) for pc, ph in placed):
                placed.append((c, half))
                boxes.append((f"furniture_{i}_{kind}", np.array([*c, height / 2]),
                              np.array([*half, height / 2]), tuple(kinds[kind]["colour"])))
                break
    margin = 0.9 + 0.5  # deepest furniture + clearance
    room = Room(size=size, boxes=boxes, door=door,
                interior=(np.full(2, margin), size - margin))
    lo, hi = room.interior
    for name in sorted(rng.choice(YCB_OBJECTS, size=int(rng.integers(3, 7)), replace=False)):
        # on the floor between the walked interior and the furniture
        p = rng.uniform(lo, hi)
        side = int(rng.integers(4))
        p[side // 2] = (lo if side % 2 == 0 else hi)[side // 2] + (0.35 if side % 2 else -0.35)
        room.objects.append((str(name), p))
    return room


def _geom(name: str, role: str, extra: str, rgba: tuple[float, ...]) -> str:
    ct, ca = _BITS[role]
    colour = " ".join(f"{c:.3f}" for c in (*rgba[:3], 1.0))
    return (f'<geom name="{name}" {extra} contype="{ct}" conaffinity="{ca}" '
            f'rgba="{colour}"/>')


def _vec(v: Any) -> str:
    return " ".join(f"{float(x):.4f}" for x in v)


@cache
def _robot_spec() -> dict[str, Any]:
    import yaml

    return yaml.safe_load((Path(__file__).with_name("data") / "robots.yaml").read_text())["spot"]


def _asset_root(package: str) -> Path:
    """A package's directory without importing it (robosuite's import is slow and chatty)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RobosafeError(f"the spot robot model needs the '{package}' package (the sim "
                            "extra); use --robot primitive without it")
    return Path(next(iter(spec.submodule_search_locations)))


def _load_spec(mujoco: Any, root: Path, rel: str) -> Any:
    path = root / rel
    spec = mujoco.MjSpec.from_file(str(path))
    for mesh in spec.meshes:       # absolute, so the attached copies resolve from any world
        mesh.file = str(path.parent / mesh.file)
    return spec


def build_model(room: Room, human_type: str, robot: str) -> Any:
    """The compiled MjModel of one episode: the MJCF world, with the real Spot and Spot arm
    attached to the robot's base joints when ``robot == "spot"`` (feet on the floor, collision
    geoms given the robot's contact bits, arm camera and grip site on the hand)."""
    import mujoco

    xml = build_mjcf(room, human_type, robot)
    if robot == "primitive":
        return mujoco.MjModel.from_xml_string(xml)
    if robot != "spot":
        raise RobosafeError(f"--robot {robot!r}: expected spot or primitive")
    r = _robot_spec()
    root = _asset_root(r["package"])
    world = mujoco.MjSpec.from_string(xml)
    spot, arm = _load_spec(mujoco, root, r["body"][0]), _load_spec(mujoco, root, r["arm"][0])
    body = spot.body(r["body"][1])
    spot.delete(body.first_joint())                 # its free joint: our base joints move it
    spot.body(r["arm_parent"]).add_frame().attach_body(arm.body(r["arm"][1]), "arm_", "")
    world.body("robot").add_frame().attach_body(body, "spot_", "")
    hand = world.body("spot_arm_" + r["hand"])
    hand.add_site(name="grip", pos=[0.12, 0, 0])
    # the primitive's arm camera frame: looking along the hand's +x, image up = +z
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, np.array([[0, 0, -1], [-1, 0, 0], [0, 1, 0]], float).ravel())
    hand.add_camera(name="arm", pos=[0.08, 0, 0.04], quat=quat, fovy=90)
    model = world.compile()
    data = mujoco.MjData(model)
    stand(model, data)
    mujoco.mj_kinematics(model, data)
    # soles on the floor: the lowest foot sphere of the standing pose at z = 0
    model.body(f"spot_{r['body'][1]}").pos[2] -= min(
        data.geom_xpos[model.geom(f"spot_{f}").id][2] - model.geom(f"spot_{f}").size[0]
        for f in r["feet"])
    robot_id = model.body("robot").id
    bits, mask = _BITS["robot"]
    for g in range(model.ngeom):   # the robot's collision geoms take the robot's contact bits
        if model.body_rootid[model.geom_bodyid[g]] == robot_id and \
                (model.geom_contype[g] or model.geom_conaffinity[g]):
            model.geom_contype[g], model.geom_conaffinity[g] = bits, mask
            # the broadphase filters body pairs by the per-body OR compiled from the geoms
            b = model.geom_bodyid[g]
            model.body_contype[b], model.body_conaffinity[b] = bits, mask
    return model


def stand(model: Any, data: Any) -> None:
    """Spot's standing legs and stowed arm (data/robots.yaml). Set in ``data``, not as the
    model's qpos0: MuJoCo measures hinge angles from qpos0, so that would move the zero."""
    r = _robot_spec()
    for leg in r["legs"]:
        for part, angle in r["standing"].items():
            data.qpos[model.joint(f"spot_{leg}_{part}_leg_joint").qposadr[0]] = angle
    for joint, angle in zip(r["arm_joints"], r["stow"], strict=True):
        data.qpos[model.joint(f"spot_arm_{joint}").qposadr[0]] = angle


# The primitive mobile manipulator (docs/decisions.md): geoms filled in by build_mjcf.
PRIMITIVE_ROBOT = """      {base}
      {wl}
      {wr}
      <body name="robot_torso" pos="0 0 0.42">
        {mast}
        <body name="robot_upper" pos="0.05 0 0.5">
          <joint name="robot_shoulder" type="hinge" axis="0 1 0"/>
          {upper}
          <body name="robot_fore" pos="0.35 0 0">
            <joint name="robot_elbow" type="hinge" axis="0 1 0"/>
            {fore}
            <body name="robot_hand" pos="0.3 0 0">
              <!-- a capsule, not a box: box-box pairs (hand vs held box object) can return
                   more contacts than MuJoCo allows per pair, a fatal error -->
              {hand}
              <site name="grip" pos="0.1 0 -0.02"/>
              <camera name="arm" pos="0.05 0 0.05" fovy="90" xyaxes="{cam}"/>
            </body>
          </body>
        </body>
      </body>
    </body>
"""


def build_mjcf(room: Room, human_type: str, robot: str = "primitive") -> str:
    """The MJCF of one episode's world (see the module docstring). With ``robot="spot"`` the
    robot body holds only its base joints and the camera target; :func:`build_model` attaches
    the real model."""
    w, d = room.size
    skin, shirt = (0.85, 0.70, 0.55), _HUMAN_COLOURS.get(human_type, (0.4, 0.4, 0.4))
    orange, dark = (0.90, 0.50, 0.10), (0.15, 0.15, 0.15)
    static = "".join(_geom(n, "static", f'type="box" pos="{_vec(c)}" size="{_vec(h)}"', rgba)
                     for n, c, h, rgba in room.boxes)
    objects = "".join(
        f'<body name="obj_{n}" pos="{_vec(p)} 0.06"><freejoint name="obj_{n}"/>'
        + _geom(f"obj_{n}", "object", 'type="box" size="0.05 0.05 0.06"', (0.9, 0.8, 0.1))
        + "</body>" for n, p in room.objects)
    cam_tilt = "0 -1 0 {:.4f} 0 {:.4f}"  # camera looking along body +x, pitched down
    top = max(w, d) / 2 + 0.6  # the whole room inside the overhead camera's 90 degrees
    limbs = "".join(
        f'<body name="human_{s}arm" pos="0 {y} 0.42"><joint name="human_{s}sh" type="hinge" '
        f'axis="0 1 0"/>' + _geom(f"human_{s}arm", "human",
                                   'type="capsule" fromto="0 0 0 0 0 -0.55" size="0.05"', skin)
        + f'</body><body name="human_{s}leg" pos="0 {y / 2} 0"><joint name="human_{s}hip" '
        f'type="hinge" axis="0 1 0"/>' + _geom(f"human_{s}leg", "human",
                                               'type="capsule" fromto="0 0 0 0 0 -0.8" '
                                               'size="0.07"', dark) + "</body>"
        for s, y in (("l", 0.21), ("r", -0.21)))
    spot_torso = f'<body name="robot_torso" pos="0 0 {_robot_spec()["torso_height_m"]}"/>' \
        '</body>' if robot == "spot" else ""
    primitive = PRIMITIVE_ROBOT.format(
        base=_geom("robot_base", "robot", f'type="cylinder" pos="0 0 0.25" '
                   f'size="{ROBOT_RADIUS_M} 0.17"', orange),
        wl=_geom("robot_wheel_l", "robot", 'type="cylinder" pos="0 0.24 0.1" size="0.1 0.03" '
                 'euler="90 0 0"', dark),
        wr=_geom("robot_wheel_r", "robot", 'type="cylinder" pos="0 -0.24 0.1" size="0.1 0.03" '
                 'euler="90 0 0"', dark),
        mast=_geom("robot_mast", "robot", 'type="capsule" fromto="0 0 0 0 0 0.5" size="0.06"',
                   dark),
        upper=_geom("robot_upper", "robot", 'type="capsule" fromto="0 0 0 0.35 0 0" '
                    'size="0.045"', orange),
        fore=_geom("robot_fore", "robot", 'type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"',
                   orange),
        hand=_geom("robot_hand", "robot", 'type="capsule" fromto="0 -0.04 0 0 0.04 0" '
                   'size="0.035"', dark),
        cam=cam_tilt.format(0, 1))
    return f"""<mujoco model="touchsafe_room">
  <visual><global offwidth="640" offheight="640"/>
    <headlight ambient="0.45 0.45 0.45" diffuse="0.5 0.5 0.5"/><map znear="0.02"/></visual>
  <asset><texture name="grid" type="2d" builtin="checker" rgb1=".78 .76 .72"
    rgb2=".68 .66 .62" width="64" height="64"/>
    <material name="floor" texture="grid" texrepeat="{w:.1f} {d:.1f}"/></asset>
  <worldbody>
    <light directional="true" pos="0 0 6" dir="0.3 0.2 -1"/>
    <geom name="floor" type="plane" pos="{w / 2:.3f} {d / 2:.3f} 0" size="{w / 2 + 3:.3f}
      {d / 2 + 3:.3f} 0.1" material="floor" contype="0" conaffinity="0"/>
    {static}
    <camera name="overhead" pos="{w / 2:.3f} {d / 2:.3f} {top:.3f}" fovy="90"
      xyaxes="1 0 0 0 1 0"/>
    <camera name="third_robot" mode="targetbody" target="robot_torso" pos="0 0 2" fovy="90"/>
    <camera name="third_human" mode="targetbody" target="human" pos="0 0 2" fovy="90"/>
    <body name="robot">
      <joint name="robot_x" type="slide" axis="1 0 0"/>
      <joint name="robot_y" type="slide" axis="0 1 0"/>
      <joint name="robot_yaw" type="hinge" axis="0 0 1"/>
{primitive if robot == "primitive" else spot_torso}
    <body name="human" pos="0 0 0.9">
      <joint name="human_x" type="slide" axis="1 0 0"/>
      <joint name="human_y" type="slide" axis="0 1 0"/>
      <joint name="human_yaw" type="hinge" axis="0 0 1"/>
      {_geom("human_torso", "human", 'type="capsule" fromto="0 0 0 0 0 0.45" size="0.15"',
             shirt)}
      {_geom("human_head", "human", 'type="sphere" pos="0 0 0.68" size="0.11"', skin)}
      <camera name="head" pos="0.13 0 0.7" fovy="90"
        xyaxes="{cam_tilt.format(np.sin(0.15), np.cos(0.15))}"/>
      {limbs}
    </body>
    {objects}
  </worldbody>
</mujoco>"""


# ----------------------------------------------------------------------------- behaviour


def _waypoints(rng: np.random.Generator, room: Room, length: float,
               start: np.ndarray | None = None) -> np.ndarray:
    """Random points of the furniture-free interior (convex, so the straight legs stay in it)
    until the path is at least ``length`` long."""
    lo, hi = room.interior
    pts = [rng.uniform(lo, hi) if start is None else start]
    total = 0.0
    while total < length:
        nxt = rng.uniform(lo, hi)
        if np.linalg.norm(nxt - pts[-1]) < 1.0:
            continue
        total += float(np.linalg.norm(nxt - pts[-1]))
        pts.append(nxt)
    return np.array(pts)


def _along(points: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Positions at arc lengths ``s`` along a polyline."""
    cum = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(points, axis=0), axis=1))])
    return np.stack([np.interp(s, cum, points[:, 0]), np.interp(s, cum, points[:, 1])], axis=1)


def _walked(rng: np.random.Generator, n: int, speed: float) -> np.ndarray:
    """Arc length walked per step, with seeded speed changes and pauses."""
    v = np.clip(speed * (1 + 0.2 * _smooth_noise(rng, n, 90)), 0.2, 1.6)
    for _ in range(rng.poisson(n / 400)):
        a = int(rng.integers(0, n))
        v[a:a + int(rng.integers(15, 45))] = 0.0
    return np.concatenate([[0.0], np.cumsum(v[:-1] * DT)])


def _heading(xy: np.ndarray, initial: float = 0.0) -> np.ndarray:
    """Yaw of the direction of motion (MuJoCo: about +z, 0 = +x), held while still."""
    v = np.gradient(xy, axis=0) if len(xy) > 1 else np.zeros_like(xy)
    moving = np.hypot(v[:, 0], v[:, 1]) > 1e-4
    yaw = np.where(moving, np.arctan2(v[:, 1], v[:, 0]), np.nan)
    if not moving.any():
        return np.full(len(xy), initial)
    yaw[0] = yaw[0] if moving[0] else yaw[np.argmax(moving)]
    idx = np.maximum.accumulate(np.where(moving, np.arange(len(xy)), 0))
    return np.unwrap(yaw[idx])


def _bump(n: int, t0: int, up: int, hold: int, down: int) -> np.ndarray:
    """Weight 0 -> 1 (smoothstep over ``up``), held, -> 0 over ``down`` steps."""
    t = np.arange(n, dtype=float)

    def ramp(x: np.ndarray) -> np.ndarray:
        x = np.clip(x, 0.0, 1.0)
        return x * x * (3 - 2 * x)

    return ramp((t - t0) / up) * (1 - ramp((t - t0 - up - hold) / down))


def _nearest_static(room: Room, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closest point of any wall / furniture footprint to ``p`` and the outward normal there."""
    best = None
    for _, c, h, _ in room.boxes:
        q = np.clip(p, c[:2] - h[:2], c[:2] + h[:2])
        dist = float(np.linalg.norm(p - q))
        if best is None or dist < best[0]:
            best = (dist, q)
    dist, q = best
    normal = (p - q) / dist if dist > 1e-6 else np.array([0.0, 1.0])
    return q, normal


@dataclass
class Plan:
    """Kinematic poses per step (MuJoCo frame) before physics decides where the episode ends."""

    robot: np.ndarray  # (n, 2)
    human: np.ndarray  # (n, 2)
    arm: np.ndarray  # (n, 2) shoulder, elbow
    carried: list[str | None]  # object held at each step
    placed: dict[int, tuple[str, np.ndarray]]  # step -> object put down at a point
    events: list[tuple[str, int]]  # (kind, step of the event's peak)


def plan_episode(rng: np.random.Generator, room: Room, task: str, n: int,
                 config: GenerateConfig) -> Plan:
    """Human walk, robot base path and the seeded events (module docstring)."""
    carried: list[str | None] = [None] * n
    placed: dict[int, tuple[str, np.ndarray]] = {}
    arm = np.tile(_STOW, (n, 1))
    if task == "social_navigation":
        follow = rng.uniform(1.5, 2.2)
        walked = _walked(rng, n, HUMAN_SPEED_M_S)
        path = _waypoints(rng, room, follow + walked[-1] + 1.0)
        human = _along(path, follow + walked)
        gap = np.clip(follow + 0.3 * _smooth_noise(rng, n, 120), 1.3, 2.6)
        robot = _along(path, np.maximum.accumulate(np.maximum(follow + walked - gap, 0.0)))
    else:
        walked = _walked(rng, n, HUMAN_SPEED_M_S)
        human = _along(_waypoints(rng, room, walked[-1] + 1.0), walked)
        robot, arm, carried, placed = _rearrangement_route(rng, room, human, n)
    human = _step_aside(human, robot)
    events: list[tuple[str, int]] = []
    base = robot.copy()
    n_near, n_scene = int(rng.poisson(config.near_misses)), int(rng.poisson(config.scene_bumps))
    if task not in config.scene_bump_tasks:
        n_scene = 0  # drawn all the same: every later draw of the episode stays as it was
    kinds = ["near_miss"] * n_near + ["scene"] * n_scene
    rng.shuffle(kinds)
    # The human collision is placed first (at 35-90 % of the episode, earlier if its approach
    # at the speed limit needs the room); the other events fill the time before it.
    stop = n
    collision = None
    if rng.random() < config.p_human_collision:
        up, hold, down = int(rng.integers(25, 45)), int(rng.integers(10, 25)), 35
        tc = int(rng.uniform(0.35, 0.9) * n)
        up, down = _within_speed(base, human, tc, up, hold, down, config)
        tc = min(tc, n - 1 - up - hold - down)
        if tc >= 40:
            up, down = _within_speed(base, human, tc, up, hold, down, config)
            collision, stop = (tc, up, hold, down), tc
    t = int(rng.integers(40, 90))
    for kind in kinds:
        up, hold, down = int(rng.integers(25, 45)), int(rng.integers(10, 25)), 35
        if t + up + hold + down >= stop:
            break
        peak = t + up
        if kind == "near_miss":
            away = base[peak] - human[peak]
            away = away / max(np.linalg.norm(away), 1e-6)
            target = human + away * rng.uniform(1.0, 1.4)
        else:
            q, normal = _nearest_static(room, base[peak])
            target = np.tile(q + normal * (ROBOT_RADIUS_M - 0.08), (n, 1))
        up, down = _within_speed(robot, target, t, up, hold, down, config)
        if t + up + hold + down >= stop:
            break
        robot = robot + _bump(n, t, up, hold, down)[:, None] * (target - robot)
        events.append((kind, t + up))
        t = t + up + hold + down + int(rng.integers(60, 140))
    if collision is not None:
        tc, up, hold, down = collision
        robot = robot + _bump(n, tc, up, hold, down)[:, None] * (human - robot)
        events.append(("collision", tc + up))
    robot = limit_speed(robot, config.robot_max_speed_m_s * DT)
    return Plan(robot=robot, human=human, arm=arm, carried=carried, placed=placed,
                events=events)


def _within_speed(robot: np.ndarray, target: np.ndarray, t: int, up: int, hold: int,
                  down: int, config: GenerateConfig) -> tuple[int, int]:
    """(up, down) of an event starting at ``t``, stretched so the detour alone stays within
    the speed limit (a smoothstep's peak speed is 1.5 x its mean)."""
    n, vmax = len(robot), config.robot_max_speed_m_s * DT
    for _ in range(3):  # the peak moves with ``up``; a few rounds settle it
        peak, end = min(t + up, n - 1), min(t + up + hold, n - 1)
        up = max(up, int(np.ceil(1.5 * np.linalg.norm(target[peak] - robot[peak]) / vmax)))
    down = max(down, int(np.ceil(1.5 * np.linalg.norm(target[end] - robot[end]) / vmax)))
    return up, down


def limit_speed(path: np.ndarray, step_m: float) -> np.ndarray:
    """The planned path followed at no more than ``step_m`` per step: each step moves toward
    the planned pose, by at most ``step_m`` (it catches up once the plan slows down)."""
    out = path.copy()
    for t in range(1, len(path)):
        d = path[t] - out[t - 1]
        dist = float(np.hypot(d[0], d[1]))
        out[t] = out[t - 1] + (d if dist <= step_m else d * (step_m / dist))
    return out


def _step_aside(human: np.ndarray, robot: np.ndarray, keep_m: float = 1.3) -> np.ndarray:
    """The humanoid keeps ``keep_m`` from the robot's planned path (a social-force push), so
    contacts come from the robot's seeded events, not from the human walking into it."""
    away = human - robot
    d = np.maximum(np.linalg.norm(away, axis=1, keepdims=True), 1e-6)
    push = np.clip(keep_m - d, 0.0, None) * away / d
    k = 15  # smooth the push over half a second so the walk stays continuous
    pad = np.pad(push, ((k, k), (0, 0)), mode="edge")
    kernel = np.ones(2 * k + 1) / (2 * k + 1)
    smooth = np.stack([np.convolve(pad[:, i], kernel, mode="valid") for i in range(2)], axis=1)
    return human + smooth


REARRANGE_CLEARANCE_M = 1.2  # base half-length + arm reach: nothing static in the arm's sweep


def _clear_of_static(room: Room, p: np.ndarray) -> np.ndarray:
    """``p`` moved toward the room's centre until every wall and piece of furniture is at
    least REARRANGE_CLEARANCE_M away: the rearrangement robot avoids environmental contacts
    (App. F.1: its navigation policy "avoids environmental contacts")."""
    centre = room.size / 2
    p = np.asarray(p, dtype=float)
    for _ in range(100):
        q, _ = _nearest_static(room, p)
        if np.linalg.norm(p - q) >= REARRANGE_CLEARANCE_M:
            break
        step = centre - p
        p = p + step / max(float(np.linalg.norm(step)), 1e-6) * 0.05
    return p


def _rearrangement_route(rng: np.random.Generator, room: Room, human: np.ndarray, n: int):
    """Robot drives to an object, picks it (arm reaches, 1 s), carries it to a furniture front
    and places it; repeated for up to two targets, then roams."""
    furniture = [(c, h) for name, c, h, _ in room.boxes if name.startswith("furniture")]
    lo, hi = room.interior
    stops: list[tuple[np.ndarray, str, str | None]] = []
    centre = room.size / 2
    for name, pos in room.objects[:2]:
        toward = (centre - pos) / max(float(np.linalg.norm(centre - pos)), 1e-6)
        stops.append((_clear_of_static(room, pos + 0.55 * toward), "pick", name))
        # the goal: the walkable point nearest a random piece of furniture (placing on it)
        c = furniture[int(rng.integers(len(furniture)))][0] if furniture else rng.uniform(lo, hi)
        goal = _clear_of_static(room, np.clip(c[:2], lo, hi))
        stops.append((goal, "place", name))
    start = rng.uniform(lo, hi)
    for _ in range(50):  # start away from the human
        if np.linalg.norm(start - human[0]) > 2.0:
            break
        start = rng.uniform(lo, hi)
    robot = np.zeros((n, 2))
    arm = np.tile(_STOW, (n, 1))
    carried: list[str | None] = [None] * n
    placed: dict[int, tuple[str, np.ndarray]] = {}
    pos, t, holding = start, 0, None
    for goal, action, name in stops + [(_clear_of_static(room, rng.uniform(lo, hi)), "roam",
                                        None)] * 20:
        dist = float(np.linalg.norm(goal - pos))
        k = max(1, int(dist / ROBOT_SPEED_M_S / DT))
        seg = pos + np.outer(np.linspace(0, 1, k + 1)[1:], goal - pos)
        robot[t:t + k] = seg[:max(0, min(k, n - t))]
        for i in range(t, min(t + k, n)):
            carried[i] = holding
        t += k
        pos = goal
        if t >= n:
            break
        pause = 30 if action in ("pick", "place") else int(rng.integers(0, 30))
        w = np.sin(np.linspace(0, np.pi, pause))[:, None] if pause else np.zeros((0, 1))
        end = min(t + pause, n)
        robot[t:end] = pos
        arm[t:end] = (np.array(_STOW) + w * (np.array(_REACH) - np.array(_STOW)))[:end - t]
        if action == "pick":
            holding = name
            for i in range(t + pause // 2, end):
                carried[i] = holding
        elif action == "place":
            for i in range(t, min(t + pause // 2, n)):
                carried[i] = holding
            placed[min(t + pause // 2, n - 1)] = (str(name), pos.copy())
            holding = None
        t = end
        if t >= n:
            break
    return robot, arm, carried, placed


# ----------------------------------------------------------------------------- simulation


def _to_habitat(p: np.ndarray) -> np.ndarray:
    return np.asarray(p, dtype=float) @ _C.T


class Episode:
    """One episode's MuJoCo world, replayable at any step (the renderer restores states)."""

    def __init__(self, room: Room, human_type: str, plan: Plan, robot: str = "primitive"):
        import mujoco

        self.mujoco = mujoco
        self.room, self.plan, self.robot = room, plan, robot
        self.model = build_model(room, human_type, robot)
        self.data = mujoco.MjData(self.model)
        if robot == "spot":
            stand(self.model, self.data)
        m = self.model
        self.root_role = {}
        for g in range(m.ngeom):
            root = int(m.body_rootid[m.geom_bodyid[g]])
            name = m.body(root).name
            self.root_role[g] = ("static" if root == 0 else "robot" if name == "robot" else
                                 "human" if name == "human" else "object")
        self.human_geoms = np.array([g for g, r in self.root_role.items() if r == "human"])
        self.robot_geoms = np.array([g for g, r in self.root_role.items() if r == "robot"])
        self.qpos: list[np.ndarray] = []
        self.cam_pos: list[np.ndarray] = []
        self.trace: TraceEpisode | None = None  # the App. B trace (simulate sets it)

    def _adr(self, joint: str) -> int:
        return int(self.model.joint(joint).qposadr[0])

    def pose(self, t: int, yaw_r: float, yaw_h: float, gait: float) -> None:
        """Set the kinematic state of step ``t`` (objects keep their current pose)."""
        q, p = self.data.qpos, self.plan
        q[self._adr("robot_x"):self._adr("robot_x") + 2] = p.robot[t]
        q[self._adr("robot_yaw")] = yaw_r
        self._arm(q, p.arm[t])
        q[self._adr("human_x"):self._adr("human_x") + 2] = p.human[t]
        q[self._adr("human_yaw")] = yaw_h
        swing = 0.35 * np.sin(gait)
        for joint, sign in (("human_lhip", 1), ("human_rhip", -1), ("human_lsh", -1),
                            ("human_rsh", 1)):
            q[self._adr(joint)] = sign * swing
        self.mujoco.mj_kinematics(self.model, self.data)
        if p.carried[t] is not None:  # the held object hangs from the gripper site
            a = self._adr(f"obj_{p.carried[t]}")
            q[a:a + 3] = self.data.site("grip").xpos
            q[a + 3:a + 7] = (1.0, 0.0, 0.0, 0.0)
        if t in p.placed:
            name, at = p.placed[t]
            a = self._adr(f"obj_{name}")
            q[a:a + 3] = (*at, 0.06)
        for cam, agent, yaw in (("third_robot", p.robot[t], yaw_r),
                                ("third_human", p.human[t], yaw_h)):
            behind = agent - 1.6 * np.array([np.cos(yaw), np.sin(yaw)])
            self.model.cam(cam).pos[:] = (*np.clip(behind, 0.2, self.room.size - 0.2), 1.8)
        self.mujoco.mj_forward(self.model, self.data)

    def _arm(self, q: np.ndarray, arm: np.ndarray) -> None:
        """The plan's arm pose: primitive joint angles, or for Spot the same stow -> reach
        fraction applied between Spot's own stow and reach poses (data/robots.yaml)."""
        if self.robot == "primitive":
            q[self._adr("robot_shoulder")], q[self._adr("robot_elbow")] = arm
            return
        r = _robot_spec()
        w = (arm[0] - _STOW[0]) / (_REACH[0] - _STOW[0])
        for joint, a, b in zip(r["arm_joints"], r["stow"], r["reach"], strict=True):
            q[self._adr(f"spot_arm_{joint}")] = a + w * (b - a)

    def contacts(self, carried: str | None) -> tuple[int, int, int]:
        """(robot-human, robot-static, robot-object) contact counts of the current state."""
        counts = {"human": 0, "static": 0, "object": 0}
        held = self.model.body(f"obj_{carried}").id if carried else -1
        m = self.model
        for c in self.data.contact[:self.data.ncon]:
            roles = (self.root_role[c.geom1], self.root_role[c.geom2])
            if "robot" not in roles:
                continue
            other = c.geom2 if roles[0] == "robot" else c.geom1
            role = self.root_role[other]
            if role == "object" and m.body_rootid[m.geom_bodyid[other]] == held:
                continue  # the grasp, not a collision
            if role in counts:
                counts[role] += 1
                if role == "object":  # pushed along the contact normal
                    a = int(m.jnt_qposadr[m.body_jntadr[m.geom_bodyid[other]]])
                    sign = 1.0 if other == c.geom2 else -1.0
                    self.data.qpos[a:a + 2] += sign * c.frame[:2] * max(-c.dist, 0.0)
        return counts["human"], counts["static"], counts["object"]

    def trace_row(self) -> tuple[np.ndarray, list[tuple[str, str, float]]]:
        """The App. B trace values of the current state: positions of TRACE_BODIES (MuJoCo
        frame, z up) and the robot's contacts as (a, b, normal force N); contact names are
        the robot's and the human's root body, a wall's or furniture's geom name, or the
        object's body (robosafe.grounding.simgen.trace_roles gives their roles)."""
        d, m = self.data, self.model
        pos = np.array([d.site("grip").xpos if name == "robot_gripper" else d.body(name).xpos
                        for name in TRACE_BODIES])
        out: list[tuple[str, str, float]] = []
        force = np.zeros(6)
        for i, c in enumerate(d.contact[:d.ncon]):
            names = []
            for g in (c.geom1, c.geom2):
                role = self.root_role[g]
                names.append(m.geom(g).name if role == "static" else
                             m.body(int(m.body_rootid[m.geom_bodyid[g]])).name)
            if "robot" not in (self.root_role[c.geom1], self.root_role[c.geom2]):
                continue
            self.mujoco.mj_contactForce(m, d, i, force)
            out.append((names[0], names[1], abs(float(force[0]))))
        return pos, out

    def save(self) -> None:
        self.qpos.append(self.data.qpos.copy())
        self.cam_pos.append(self.model.cam_pos.copy())

    def restore(self, t: int) -> None:
        self.data.qpos[:] = self.qpos[t]
        self.model.cam_pos[:] = self.cam_pos[t]
        self.mujoco.mj_forward(self.model, self.data)

    def camera_pose(self, cam: str) -> tuple[np.ndarray, np.ndarray]:
        """Habitat-frame position and wxyz quaternion of a camera in the current state."""
        c = self.data.cam(cam)
        rot = _C @ c.xmat.reshape(3, 3)
        quat = np.zeros(4)
        self.mujoco.mju_mat2Quat(quat, rot.reshape(-1))
        return _to_habitat(c.xpos), quat


TRACE_BENCHMARK = "touchsafe-mujoco"
TRACE_BODIES = ("robot", "robot_gripper", "human", "human_larm", "human_rarm")
"""Bodies whose positions the App. B trace records: the robot's base and gripper, the
humanoid's torso (root) and shoulders."""
TRACE_TAGS = TaskTags(task_tags=("human_copresence",), benchmark_signal_tags=(
    "human_pose_signal", "human_contact_signal", "arm_furniture_contact_signal"))
"""The App. B task-tag record of the generator's traces. The robot and the humanoid are posed,
not simulated, so a contact's force is MuJoCo's constraint response to the posed overlap, not a
physical impact force: the force-ceiling specs (which need ``scene_contact_risk``) are left
inactive, the contact clauses count contacts."""


def trace_roles(room: Room) -> dict[str, str]:
    """App. B ``body_roles`` of a room's trace: robot, human (robosafe's extension), walls and
    furniture, free objects (``other``: contacts only, no poses)."""
    roles = {"robot": "robot", "robot_gripper": "robot", "human": "human",
             "human_larm": "human", "human_rarm": "human"}
    roles.update({name: "furniture" for name, *_ in room.boxes})
    roles.update({f"obj_{name}": "other" for name, _ in room.objects})
    return roles


def episode_trace(room: Room, *, episode_id: str, sim_task: str, positions: list[np.ndarray],
                  contacts: list[list[tuple[str, str, float]]], seed: int | None,
                  meta: dict[str, Any]) -> TraceEpisode:
    """The App. B episode trace of one simulated episode (robosafe.trace), checked."""
    from robosafe.trace.validate import check_episode

    roles = trace_roles(room)
    names = tuple(roles)
    flat = [c for step in contacts for c in step]
    return check_episode(TraceEpisode(
        episode_id=episode_id, benchmark=TRACE_BENCHMARK, task_id=sim_task, success=None,
        dt=DT, target_object=None, body_roles=roles, t=np.arange(len(positions)),
        body_names=TRACE_BODIES, body_pos_m=np.round(np.array(positions), 5),
        contact_names=names,
        contact_ptr=np.concatenate([[0], np.cumsum([len(c) for c in contacts])]),
        contact_a=np.array([names.index(a) for a, _, _ in flat], dtype=np.int32),
        contact_b=np.array([names.index(b) for _, b, _ in flat], dtype=np.int32),
        contact_force_n=np.array([f for *_, f in flat], dtype=float),
        task_tags=TRACE_TAGS, seed=seed, meta=meta))


def scene_plan(rng: np.random.Generator, sim_task: str, config: GenerateConfig
               ) -> tuple[Room, Plan]:
    """An episode's seeded room and plan (what :func:`simulate` and the closed-loop runner,
    robosafe.grounding.intervene, start from: the same seed gives the same episode)."""
    room = build_room(rng)
    return room, plan_episode(rng, room, sim_task, config.max_steps, config)


def human_gait(human: np.ndarray) -> np.ndarray:
    """The legs' and arms' swing phase per step: 2 pi per 1.4 m walked."""
    return np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(human, axis=0),
                                                           axis=1))]) * (2 * np.pi / 1.4)


def simulate(rng: np.random.Generator, *, human_type: str, sim_task: str, scene_id: str,
             episode_id: int, config: GenerateConfig) -> tuple[EpisodeRecord, Episode]:
    """Run one episode; the record's labels are the simulator's contacts, and it ends at the
    first robot-human contact. ``Episode.trace`` holds its App. B trace."""
    room, plan = scene_plan(rng, sim_task, config)
    n = config.max_steps
    ep = Episode(room, human_type, plan, config.robot)
    yaw_r, yaw_h = _heading(plan.robot), _heading(plan.human)
    gait = human_gait(plan.human)
    robot_pos, human_pos, cams = [], [], {v: ([], []) for v in VIEWS}
    hum, scene, obj, trace_pos, trace_contacts = [], [], [], [], []
    for t in range(n):
        ep.pose(t, yaw_r[t], yaw_h[t], gait[t])
        ep.save()
        p, c = ep.trace_row()  # before contacts() pushes objects: the posed state's contacts
        trace_pos.append(p)
        trace_contacts.append(c)
        h, s, o = ep.contacts(plan.carried[t])
        hum.append(h > 0)
        scene.append(s)
        obj.append(o)
        robot_pos.append(_to_habitat([*plan.robot[t], 0.3]))
        human_pos.append(_to_habitat(ep.data.body("human").xpos))
        for v in VIEWS:
            p, q = ep.camera_pose(_CAM[v])
            cams[v][0].append(p)
            cams[v][1].append(q)
        if h:
            break
    targets = [name for name, _ in room.objects][:2] if sim_task == "social_rearrangement" \
        else []
    record = EpisodeRecord(
        human_type=human_type, sim_task=sim_task, scene_id=scene_id, episode_id=episode_id,
        robot_pos=np.round(np.array(robot_pos), 4), human_pos=np.round(np.array(human_pos), 4),
        human_collision=np.array(hum, dtype=bool), robot_obj_colls=np.array(obj),
        robot_scene_colls=np.array(scene),
        cameras={v: (np.array(p), np.array(q)) for v, (p, q) in cams.items()},
        rigid_objs=[name for name, _ in room.objects], target_objs=targets,
        object_labels={f"{o}_:0000": f"goal{i}" for i, o in enumerate(targets)},
        max_depth_m=config.max_depth_m, image_size=(config.image_size, config.image_size))
    ep.trace = episode_trace(room, episode_id=record.episode_dir, sim_task=sim_task,
                             positions=trace_pos, contacts=trace_contacts,
                             seed=config.seed,
                             meta={"human_type": human_type, "robot": config.robot,
                                   "scene_id": scene_id, "frame": "mujoco z-up"})
    return record, ep


class Renders:
    """Frame source for :func:`write_episode`: restores each step and, with one scene update
    per view, renders RGB and a depth pass whose colour buffer is read as the segmentation
    (for visibility): two renders per view and step, not three."""

    def __init__(self, ep: Episode, size: int, shadows: bool = False):
        import mujoco

        self.ep, self.size, self.shadows = ep, size, int(shadows)
        vis = ep.model.vis.global_  # the offscreen buffer must hold the image (default 640)
        vis.offwidth, vis.offheight = max(vis.offwidth, size), max(vis.offheight, size)
        self.renderer = mujoco.Renderer(ep.model, size, size)
        self.option = mujoco.MjvOption()  # the Renderer's default: geom groups 0-2 shown
        self._rect = mujoco.MjrRect(0, 0, size, size)
        n = len(ep.qpos)
        self.human_visible = {v: np.zeros(n, dtype=bool) for v in VIEWS}
        self.robot_visible = {v: np.zeros(n, dtype=bool) for v in VIEWS}
        self._state = -1

    def _scene(self, t: int, camera: str) -> None:
        mj = self.ep.mujoco
        if self._state != t:
            self.ep.restore(t)
            self._state = t
        from robosafe.sim.render import culled

        # geoms outside the view left out: the same pixels and ids (robosafe.sim.render)
        with culled(self.ep.model, self.ep.data, camera, self.option,
                    None if self.shadows else 1.0):
            self.renderer.update_scene(self.ep.data, camera=camera, scene_option=self.option)
        self.renderer.scene.flags[mj.mjtRndFlag.mjRND_SHADOW] = self.shadows
        self.renderer.scene.flags[mj.mjtRndFlag.mjRND_REFLECTION] = self.shadows

    def __call__(self, view: str, t: int) -> tuple[np.ndarray, np.ndarray]:
        self._scene(t, _CAM[view])
        r = self.renderer
        rgb = r.render().copy()
        r.enable_depth_rendering()
        depth = r.render().copy()
        r.disable_depth_rendering()
        geoms = self._drawn_geoms()
        self.human_visible[view][t] = bool(np.isin(geoms, self.ep.human_geoms).any())
        self.robot_visible[view][t] = bool(np.isin(geoms, self.ep.robot_geoms).any())
        return rgb, depth

    def _drawn_geoms(self) -> np.ndarray:
        """Model geom ids seen in the last render, a depth pass. ``mujoco.Renderer`` draws
        depth with the flags of its segmentation pass (segment colours, one colour per scene
        geom), so the colour buffer of that same render is the segmentation image: reading it
        saves a render per view and step (on a CPU most of generate's time) and gives the ids
        the segmentation pass gave (tests/test_grounding_simgen.py compares the two)."""
        mj = self.ep.mujoco
        ids = np.empty((self.size, self.size, 3), dtype=np.uint8)
        # the Renderer's context: public mujoco has no other handle on its framebuffer
        mj.mjr_readPixels(ids, None, self._rect, self.renderer._mjr_context)
        # a pixel's colour is segid + 1 in base 256 (0: background), as in the Renderer
        seen = np.unique(ids[..., 0] | ids[..., 1].astype(np.int64) << 8
                         | ids[..., 2].astype(np.int64) << 16)
        scene = self.renderer.scene
        geom_of = {g.segid + 1: g.objid for g in scene.geoms[:scene.ngeom]
                   if g.segid != -1 and g.objtype == mj.mjtObj.mjOBJ_GEOM}
        return np.array([geom_of[s] for s in seen.tolist() if s in geom_of], dtype=np.int64)

    def topdown(self, t: int) -> np.ndarray:
        self._scene(t, "overhead")
        return self.renderer.render().copy()

    def close(self) -> None:
        self.renderer.close()


def episode_plan(config: GenerateConfig) -> list[tuple[str, str, str, int]]:
    """(human_type, sim_task, scene_id, episode_id) per episode: appearances and tasks cycle;
    every episode has its own procedural room."""
    out = []
    for i in range(config.episodes):
        task = config.sim_tasks[i % len(config.sim_tasks)]
        ht = HUMAN_TYPES[(i // len(config.sim_tasks)) % len(HUMAN_TYPES)]
        out.append((ht, task, f"{config.seed}{i:04d}", i))
    return out


@dataclass(frozen=True)
class GenerateSummary:
    root: Path
    episodes: int
    resumed: int  # episodes kept from an interrupted run with the same settings
    steps: int
    human_collision_episodes: int
    scene_collision_episodes: int
    object_collision_episodes: int


def _config_json(config: GenerateConfig) -> dict[str, Any]:
    from dataclasses import asdict

    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()}


def _start(root: Path, config: GenerateConfig) -> dict[str, list]:
    """The finished episodes (id -> stats) to keep in ``root``: none for a new or empty
    directory, those of an interrupted run with the same settings; any other content (a
    finished dataset, another run's episodes, other files) is refused, never mixed with."""
    from robosafe.outputs import make_dir

    if root.is_dir() and any(root.iterdir()):
        try:
            state = json.loads((root / PROGRESS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            state = None
        if not isinstance(state, dict) or state.get("config") != _config_json(config):
            what = ("holds a dataset" if (root / INFO_FILE).exists() else
                    "holds an interrupted generate with other settings"
                    if state is not None else "is not empty")
            raise RobosafeError(f"{root}: {what}; choose a new directory (generate writes "
                                "only into an empty one, or continues its own interrupted "
                                "run with the same settings)")
        return {str(k): v for k, v in state.get("done", {}).items()}
    make_dir(root)
    return {}


def _save_progress(root: Path, config: GenerateConfig, done: dict[str, list]) -> None:
    tmp = root / f"{PROGRESS_FILE}.tmp"
    tmp.write_text(json.dumps({"config": _config_json(config), "done": done}) + "\n",
                   encoding="utf-8")
    os.replace(tmp, root / PROGRESS_FILE)


TRACES_DIR = "traces"
"""Folder of the dataset root holding one App. B trace per episode (``robosafe score
ROOT/traces``); the App. E index does not look into it (no scene folders)."""


def write_trace(root: Path, trace: TraceEpisode) -> Path:
    """One episode's trace as ``traces/<episode dir with _ for />.json`` (written whole or not
    at all, by robosafe.trace.write_episodes)."""
    from robosafe.trace.io import write_episodes

    (root / TRACES_DIR).mkdir(exist_ok=True)
    path = root / TRACES_DIR / (trace.episode_id.replace("/", "_") + ".json")
    write_episodes(path, [trace])
    return path


def generate(root: str | os.PathLike[str], config: GenerateConfig,
             progress: Callable[[int, int], None] | None = None) -> GenerateSummary:
    """Write ``config.episodes`` MuJoCo episodes in the App. E layout under ``root`` (new or
    empty). dataset_info.json is written last; until then ``root`` holds its progress file,
    and a rerun with the same settings keeps the episodes already finished."""
    from robosafe.sim.render import ensure_gl_backend

    config.check()
    root = Path(root)
    done = _start(root, config)
    resumed = len(done)
    ensure_gl_backend()
    _save_progress(root, config, done)
    for i, (ht, task, sid, eid) in enumerate(episode_plan(config)):
        if str(eid) in done:
            continue
        record, ep = simulate(np.random.default_rng([config.seed, i]), human_type=ht,
                              sim_task=task, scene_id=sid, episode_id=eid, config=config)
        frames = Renders(ep, config.image_size, config.shadows)
        try:
            out = write_episode(root, record, frames=frames, topdown=frames.topdown)
        finally:
            frames.close()
        write_trace(root, ep.trace)
        (out / "visibility.json").write_text(json.dumps({
            "human_visible": {v: frames.human_visible[v].astype(int).tolist() for v in VIEWS},
            "robot_visible": {v: frames.robot_visible[v].astype(int).tolist() for v in VIEWS},
        }) + "\n", encoding="utf-8")
        done[str(eid)] = [record.n_steps, bool(record.human_collision.any()),
                          bool(record.robot_scene_colls.any()),
                          bool(record.robot_obj_colls.any())]
        _save_progress(root, config, done)
        if progress:
            progress(i + 1, config.episodes)
    write_dataset_info(root, name="TouchSafeBench (MuJoCo)",
                       generator="robosafe.grounding.simgen", seed=config.seed,
                       config=_config_json(config),
                       human_types=list(HUMAN_TYPES), tasks=list(config.sim_tasks),
                       views=list(VIEWS), num_episodes=config.episodes,
                       frame="habitat y-up: (x, y, z) = (x, z, -y) of MuJoCo")
    (root / PROGRESS_FILE).unlink()
    stats = list(done.values())
    return GenerateSummary(root=root, episodes=len(stats), resumed=resumed,
                           steps=sum(s[0] for s in stats),
                           human_collision_episodes=sum(s[1] for s in stats),
                           scene_collision_episodes=sum(s[2] for s in stats),
                           object_collision_episodes=sum(s[3] for s in stats))
