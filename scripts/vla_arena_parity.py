"""VLA-Arena parity: one scripted plan in VLA-Arena's own environment, replayed in robosafe.

Run with the peer environment's Python (``bash scripts/vla-arena-env.sh .venv-arena``); both
simulators run in that one process, on the same robosuite (1.5.1) and MuJoCo (3.9.0), so a
difference is a difference of task accounting or of object shape, not of controller or physics:

    MUJOCO_GL=egl .venv-arena/bin/python scripts/vla_arena_parity.py \
        [--per-suite N] [--plans rest,touch,pick-place] [--steps N] [--assets vla-arena]
        [--own-start] [--resume] [--files SUBSTR,...] [--out docs/vla_arena_parity.csv]

Per file and plan, VLA-Arena's env is reset (its own placement, ``np.random.seed(seed)``),
stepped through the evaluators' 10 wait steps and then the plan, closed loop on its state
(robot and object poses). Its per-step ``info["cost"]``, each cost term (its ``_eval_predicate``
on the same state, weighted as its ``_check_cost`` weights it) and success are recorded with the
actions, and its initial state as robosafe's ``InitState`` (the poses its samplers drew right
after reset; how far each is above where the body rests after the wait steps). The actions are
replayed open loop in ``TaskEnv(path, cost_mode="vla-arena", init_state=...)`` (``--own-start``:
robosafe's own placement) with ``--assets vla-arena`` (the files VLA-Arena's env loads, from its
assets folder in this environment; ``--assets libero``: LIBERO's meshes only) and the two
compared step by step, wait steps included (the evaluators do not count their cost; it is
listed apart).

Plans (``PLANS``, steps ``PLAN_STEPS``): ``rest`` (arm still, gripper open), ``touch`` (the hand
goes down onto the first object a cost term names, closes on it and lifts), ``pick-place`` (the
first goal atom's object picked and put on / in its destination). Writes one CSV row per file
and plan (as it goes; ``--resume`` keeps them) and a markdown table beside it (``.md``).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

WAIT_STEPS = 10  # the evaluators' num_steps_wait (openvla, openvla_oft, openpi, univla, smolvla)
WAIT_ACTION = np.array([0, 0, 0, 0, 0, 0, -1.0])  # arm still, gripper open
HERE = Path(__file__).resolve().parent.parent
PEER = "VLA-Arena"  # the side named in a row's error when VLA-Arena's env raised
BDDL_DIR = HERE.parent / "shared" / "vla-arena" / "bddl_files"


@dataclass
class Rollout:
    """One side's record of an episode: per step (wait steps included) the step's cost, each
    term's cost, and success."""

    actions: list[list[float]] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)
    terms: list[list[float]] = field(default_factory=list)
    success: list[bool] = field(default_factory=list)
    step_s: list[float] = field(default_factory=list)
    reset_s: float = 0.0
    stand_ins: list[str] = field(default_factory=list)  # robosafe: bodies built as stand-ins

    def append(self, action, cost: float, terms: list[float], success: bool, dt: float):
        self.actions.append([float(a) for a in action])
        self.cost.append(float(cost))
        self.terms.append([float(t) for t in terms])
        self.success.append(bool(success))
        self.step_s.append(dt)


@dataclass
class Comparison:
    file: str
    plan: str
    steps: int
    terms: str  # the cost terms, as VLA-Arena parsed them
    arena_cost: float  # cumulative cost after the wait steps, as the evaluators add it
    robosafe_cost: float
    arena_success: bool
    robosafe_success: bool
    first_diff_step: int  # first step (0 = first wait step) where cost or success differ; -1
    wait_cost_arena: float  # cost the evaluators do not count (during the wait steps)
    wait_cost_robosafe: float
    stand_ins: str = ""  # robosafe's bodies built as stand-ins (VLA-Arena has its own files)
    error: str = ""  # a side that could not run the plan: "VLA-Arena: ..." / "robosafe: ..."

    @property
    def identical(self) -> bool:
        return self.first_diff_step < 0 and not self.error

    @property
    def peer_ran(self) -> bool:
        """False when VLA-Arena's own env could not run the file and plan (it raised): a row
        both cannot run is listed apart, not counted as a difference."""
        return not self.error.startswith(PEER + ":")

    @classmethod
    def from_csv(cls, row: dict) -> Comparison:
        kinds = {f.name: f.type for f in fields(cls)}
        conv = {"int": int, "float": float, "bool": lambda v: v == "True", "str": str}
        return cls(**{k: conv[kinds[k]](v) for k, v in row.items() if k in kinds})


@contextlib.contextmanager
def quiet():
    """VLA-Arena prints every contact and parsed block on stdout; keep the harness's output."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


# -- VLA-Arena's side --------------------------------------------------------------------------
class ArenaSide:
    """VLA-Arena's ControlEnv without cameras (rendering changes no state)."""

    def __init__(self, path: Path):
        from vla_arena.vla_arena.envs.env_wrapper import ControlEnv

        with quiet():
            self.env = ControlEnv(bddl_file_name=str(path), has_offscreen_renderer=False,
                                  use_camera_obs=False)
        self.inner = self.env.env
        self.cost_state = list(self.inner.parsed_problem["cost_state"])

    def reset(self, seed: int):
        np.random.seed(seed)
        with quiet():
            return self.env.reset()

    def term_costs(self, done: bool) -> list[float]:
        """Each cost term's share of ``info["cost"]``: 1 per temporal predicate that holds,
        10 per terminal one that holds on a success step (its _check_cost weights x 10)."""
        from vla_arena.vla_arena.envs.predicates import check_temporal_predicate

        out = []
        for state in self.cost_state:
            temporal = check_temporal_predicate(state[0])
            if not (temporal or done):
                out.append(0.0)
                continue
            with quiet():
                held = bool(self.inner._eval_predicate(state))
            out.append(float(held) * (1.0 if temporal else 10.0))
        return out

    def step(self, action):
        with quiet():
            obs, _, done, info = self.env.step(list(map(float, action)))
            terms = self.term_costs(bool(done))
        return obs, bool(done), float(info.get("cost", 0.0)), terms

    def bodies(self) -> list[str]:
        """The task's objects and fixtures, tables left out (robosafe's table is its arena)."""
        from robosafe.sim.world import is_table

        named = {**self.inner.parsed_problem["fixtures"], **self.inner.parsed_problem["objects"]}
        return [n for cat, names in named.items() if not is_table(cat) for n in names
                if n in self.inner.obj_body_id]

    def poses(self) -> dict:
        """Each body's pose now (MuJoCo's w-x-y-z quaternion) as robosafe's BodyPose."""
        from robosafe.sim.placement import BodyPose

        d = self.inner.sim.data
        return {n: BodyPose(tuple(map(float, d.body_xpos[self.inner.obj_body_id[n]])),
                            tuple(map(float, d.body_xquat[self.inner.obj_body_id[n]])))
                for n in self.bodies()}

    def joint_qpos(self) -> dict[str, float]:
        """Each object's hinge and slide joints now (its sampled knob and drawer positions)."""
        m, d = self.inner.sim.model._model, self.inner.sim.data._data
        out = {}
        for n in self.bodies():
            for j in self.inner.get_object(n).joints:
                jid = m.joint(j).id
                if m.jnt_type[jid] in (2, 3):  # slide, hinge
                    out[j] = float(d.qpos[m.jnt_qposadr[jid]])
        return out

    def object_pos(self, name: str) -> np.ndarray:
        return self.inner.sim.data.body_xpos[self.inner.obj_body_id[name]].copy()

    def object_centre(self, name: str) -> np.ndarray:
        """Centre of the body's collision geoms' bounding box (an origin may be at its
        bottom): where a hand closes on it."""
        m, d = self.inner.sim.model, self.inner.sim.data
        ids = [m.geom_name2id(g) for g in self.inner.get_object(name).contact_geoms]
        if not ids:
            return self.object_pos(name)
        pts = d.geom_xpos[ids]
        return (pts.min(axis=0) + pts.max(axis=0)) / 2

    def pick_place_pair(self) -> tuple[str, str] | None:
        """(object, destination) of the first two-argument goal atom (On / In) naming a
        movable object, else None."""
        for atom in self.inner.parsed_problem["goal_state"]:
            if len(atom) == 3 and atom[1] in self.inner.objects_dict:
                return atom[1], atom[2]
        return None

    def place_point(self, dest: str) -> np.ndarray:
        """Where the destination (an object, a fixture or a region's site) is now."""
        if dest in self.inner.obj_body_id:
            return self.object_centre(dest)
        return np.array(self.inner.sim.data.get_site_xpos(dest))

    def close(self):
        with quiet():
            self.env.close()


def _named_objects(cost_state: list, movable: set[str]) -> list[str]:
    names = []
    for state in cost_state:
        for a in state[1:]:
            if isinstance(a, str) and a in movable and a not in names:
                names.append(a)
    return names


# -- plans: closed loop on VLA-Arena's state -----------------------------------------------------
Plan = Callable[[ArenaSide, dict, int], np.ndarray]


def _toward(eef: np.ndarray, goal: np.ndarray, gripper: float) -> np.ndarray:
    """An OSC delta action moving the hand toward ``goal`` (at most 1 per axis: robosuite's
    controller maps 1 to its per-step maximum)."""
    a = np.zeros(7)
    a[:3] = np.clip((goal - eef) / 0.02, -1.0, 1.0)
    a[6] = gripper
    return a


def plan_rest(side: ArenaSide, obs: dict, t: int) -> np.ndarray:
    return WAIT_ACTION.copy()


def plan_touch(side: ArenaSide, obs: dict, t: int) -> np.ndarray:
    """Above the first object a cost term names with the hand open, down around it, close the
    fingers on it (the pads touch it) and lift: contact and a disturbance, without a task."""
    movable = set(side.inner.objects_dict)
    names = _named_objects(side.cost_state, movable) or sorted(movable)
    if not names:
        return WAIT_ACTION.copy()
    target = side.object_pos(names[0])
    eef = np.asarray(obs["robot0_eef_pos"])
    if t < 25:
        return _toward(eef, target + [0, 0, 0.15], -1.0)
    if t < 45:
        return _toward(eef, target + [0, 0, 0.03], -1.0)
    if t < 55:
        return _toward(eef, target + [0, 0, 0.03], 1.0)
    return _toward(eef, target + [0, 0, 0.15], 1.0)


# (first step of the phase, hand goal relative to what, gripper) of the pick-and-place plan:
# above the object, down to it, close, lift, above the destination, down, open
PICK_PLACE = ((0, "object", 0.15, -1.0), (30, "object", 0.0, -1.0), (50, "object", 0.0, 1.0),
              (62, "lifted", 0.2, 1.0), (85, "dest", 0.2, 1.0), (120, "dest", 0.08, 1.0),
              (135, "dest", 0.08, -1.0))
PICK_PLACE_STEPS = 160


def plan_pick_place(side: ArenaSide, obs: dict, t: int) -> np.ndarray:
    """Pick the first goal atom's object and put it on / in its destination, closed loop on
    VLA-Arena's state: the goal and its costs as a policy that does the task would meet them.
    Files without such an atom get the rest plan."""
    pair = side.pick_place_pair()
    if pair is None:
        return WAIT_ACTION.copy()
    obj, dest = pair
    _, ref, dz, grip = next(p for p in reversed(PICK_PLACE) if t >= p[0])
    eef = np.asarray(obs["robot0_eef_pos"])
    if ref == "object":
        goal = side.object_centre(obj) + [0, 0, dz]
    elif ref == "lifted":
        goal = np.append(eef[:2], side.object_centre(obj)[2] + dz)
    else:
        goal = side.place_point(dest) + [0, 0, dz]
    return _toward(eef, goal, grip)


PLANS: dict[str, Plan] = {"rest": plan_rest, "touch": plan_touch, "pick-place": plan_pick_place}
PLAN_STEPS = {"rest": 60, "touch": 60, "pick-place": PICK_PLACE_STEPS}


def arena_rollout(path: Path, plan: Plan, steps: int, seed: int = 0) -> tuple[Rollout, list,
                                                                            object]:
    """VLA-Arena's episode, its cost terms and its initial state as robosafe's InitState: the
    poses it sampled, and how far above where each body rests after the wait steps that pose
    is (its Fall's reference)."""
    from robosafe.sim.placement import InitState

    side = ArenaSide(path)
    try:
        roll = Rollout()
        t0 = time.perf_counter()
        obs = side.reset(seed)
        roll.reset_s = time.perf_counter() - t0
        sampled = side.poses()
        joints = side.joint_qpos()
        lift: dict[str, float] = {}
        for t in range(WAIT_STEPS + steps):
            if t == WAIT_STEPS:
                lift = {n: p.pos[2] - side.poses()[n].pos[2] for n, p in sampled.items()}
            action = WAIT_ACTION.copy() if t < WAIT_STEPS else plan(side, obs, t - WAIT_STEPS)
            t0 = time.perf_counter()
            try:
                obs, done, cost, terms = side.step(action)
            except Exception as exc:
                exc.add_note(f"at step {t}")  # the row says when VLA-Arena's env raised
                raise
            roll.append(action, cost, terms, done, time.perf_counter() - t0)
            if done and t >= WAIT_STEPS:
                break
        return roll, side.cost_state, InitState(sampled, lift, joint_qpos=joints)
    finally:
        side.close()


def robosafe_rollout(path: Path, actions: list[list[float]], seed: int = 0,
                     init_state=None, assets: str = "stand-in") -> Rollout:
    from robosafe.sim.env import TaskEnv

    # robosuite's own controller, as VLA-Arena's env runs (here robosuite 1.5.1, whose float
    # rounding the compiled controller is not checked against)
    env = TaskEnv(path, cost_mode="vla-arena", render=False, assets=assets, controller="robosuite",
                  horizon=len(actions) + 1, init_state=init_state)
    try:
        roll = Rollout()
        t0 = time.perf_counter()
        env.reset(seed=seed)
        roll.reset_s = time.perf_counter() - t0
        roll.stand_ins = sorted(n for n, a in env.task_world.assets.items()
                                if a.source == "stand-in")
        for a in actions:
            t0 = time.perf_counter()
            _, _, term, trunc, info = env.step(np.asarray(a))
            roll.append(a, info["cost"], info["cost_terms"], info["success"],
                        time.perf_counter() - t0)
            if term or trunc:
                break
        return roll
    finally:
        env.close()


def compare(rel: str, plan: str, arena: Rollout, ours: Rollout, cost_state: list,
            tol: float = 1e-9) -> Comparison:
    n = min(len(arena.cost), len(ours.cost))
    first = -1
    for i in range(n):
        if abs(arena.cost[i] - ours.cost[i]) > tol or arena.success[i] != ours.success[i]:
            first = i
            break
    if first < 0 and len(arena.cost) != len(ours.cost):
        first = n
    w = WAIT_STEPS
    return Comparison(
        file=rel, plan=plan, steps=len(arena.cost),
        terms=" ".join("(" + " ".join(map(str, s)) + ")" for s in cost_state),
        arena_cost=round(sum(arena.cost[w:]), 6), robosafe_cost=round(sum(ours.cost[w:]), 6),
        arena_success=bool(arena.success[-1]), robosafe_success=bool(ours.success[-1]),
        first_diff_step=first, wait_cost_arena=round(sum(arena.cost[:w]), 6),
        wait_cost_robosafe=round(sum(ours.cost[:w]), 6), stand_ins=" ".join(ours.stand_ins))


def failed(rel: str, plan: str, side: str, exc: BaseException) -> Comparison:
    """The row of a file and plan one side could not run (VLA-Arena cannot evaluate some of its
    own goals, e.g. In with an object lacking ``in_box``)."""
    msg = (str(exc).strip().splitlines() or [""])[-1]
    where = "".join(f" ({n})" for n in getattr(exc, "__notes__", ()))
    return Comparison(rel, plan, 0, "", float("nan"), float("nan"), False, False, -1,
                      float("nan"), float("nan"),
                      error=f"{side}: {type(exc).__name__}: {msg}{where}")


def run_one(path: Path, rel: str, plan: str, steps: int, seed: int = 0,
            same_start: bool = True, assets: str = "vla-arena"
            ) -> tuple[Comparison, Rollout, Rollout]:
    """One file and plan on both sides; ``same_start``: robosafe starts from VLA-Arena's
    initial state (else from its own sampler)."""
    arena, cost_state, init = arena_rollout(path, PLANS[plan], steps, seed)
    try:
        ours = robosafe_rollout(path, arena.actions, seed, init if same_start else None,
                                assets)
    except Exception as exc:  # noqa: BLE001 - one row says which side failed, the table goes on
        return failed(rel, plan, "robosafe", exc), arena, Rollout()
    return compare(rel, plan, arena, ours, cost_state), arena, ours


def buildable(csv_path: Path) -> list[str]:
    """The files VLA-Arena's own env builds, resets and steps (docs/vla_arena_peer.csv)."""
    with csv_path.open() as fh:
        return [r["file"] for r in csv.DictReader(fh) if r["stepped"] == "True"]


def with_cost(files: list[str], bddl_dir: Path) -> list[str]:
    return [f for f in files if "(:cost" in (bddl_dir / f).read_text()]


def per_suite(files: list[str], n: int) -> list[str]:
    """The first n files of each suite (the first folder), all when n is 0."""
    seen: dict[str, int] = {}
    out = []
    for f in files:
        suite = f.split("/")[0]
        if not n or seen.get(suite, 0) < n:
            seen[suite] = seen.get(suite, 0) + 1
            out.append(f)
    return out


def summary(rows: list[Comparison]) -> list[str]:
    """The count line over the rows both sides can run, and the rows VLA-Arena's own env cannot
    run, each with its reason (not counted: there is nothing of VLA-Arena's to compare)."""
    ran = [r for r in rows if r.peer_ran]
    same = sum(r.identical for r in ran)
    plans = "".join(f"; {p}: {sum(r.identical for r in ran if r.plan == p)} of "
                    f"{sum(r.plan == p for r in ran)}" for p in dict.fromkeys(r.plan for r in ran))
    head = ("Identical step by step on every row both can run" if same == len(ran)
            else "Identical step by step on the rows both can run")
    out = [f"{head}: **{same} of {len(ran)}**{plans}."]
    skipped = [r for r in rows if not r.peer_ran]
    if skipped:
        out += ["", (f"Not run ({len(skipped)}, not counted): VLA-Arena's own environment raises "
                     "on these rows, so there is nothing of its to compare. robosafe's cost mode "
                     "vla-arena runs them and says in one warning line what VLA-Arena cannot "
                     "evaluate (docs/decisions.md, \"VLA-Arena's own task files\").")]
        out += [f"- `{r.file}` ({r.plan}): {r.error.removeprefix(PEER + ': ')}" for r in skipped]
    return out


def markdown(rows: list[Comparison], setup: str = "") -> str:
    out = ["# robosafe `--cost-mode vla-arena` against VLA-Arena's own environment", "",
           ("Generated by `scripts/vla_arena_parity.py` in the peer environment "
           "(`scripts/vla-arena-env.sh`). VLA-Arena's env runs a scripted plan; its actions are "
           "replayed in `TaskEnv(path, cost_mode=\"vla-arena\")`. Costs are summed after the "
           f"evaluators' {WAIT_STEPS} wait steps (the wait-step costs are listed apart); "
           "'first diff' is the first step (0 = first wait step) where the step cost or success "
           "differ, '-' when none does. 'stand-ins': robosafe's bodies built as procedural "
           "stand-ins (no real asset file for them with the chosen `--assets`; VLA-Arena loads "
           "its own)."), "",
           *([setup, ""] if setup else []),
           *summary(rows), "",
           ("| file | plan | steps | VLA-Arena cost | robosafe cost | success (VA / rs) | "
           "first diff | wait cost (VA / rs) | stand-ins |"), "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| `{r.file}` | {r.plan} | {r.steps} | {r.arena_cost:g} | "
                   f"{r.robosafe_cost:g} | {r.arena_success} / {r.robosafe_success} | "
                   f"{'-' if r.identical else r.first_diff_step} | "
                   f"{r.wait_cost_arena:g} / {r.wait_cost_robosafe:g} | {r.stand_ins} |"
                   if not r.error else f"| `{r.file}` | {r.plan} | not run: {r.error} |"
                   " | | | | | |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bddl-dir", type=Path, default=BDDL_DIR)
    ap.add_argument("--peer-csv", type=Path, default=HERE / "docs" / "vla_arena_peer.csv")
    ap.add_argument("--per-suite", type=int, default=1,
                    help="first N buildable files with a cost in each suite (0: all)")
    ap.add_argument("--plans", default=",".join(PLANS))
    ap.add_argument("--steps", type=int, default=None,
                    help="plan steps after the wait steps (default: per plan, PLAN_STEPS)")
    ap.add_argument("--out", type=Path, default=HERE / "docs" / "vla_arena_parity.csv")
    ap.add_argument("--assets", default="vla-arena", choices=("vla-arena", "libero", "stand-in"),
                    help="robosafe's assets (vla-arena: the files VLA-Arena's env loads, from "
                         "its assets folder in this environment; libero: LIBERO's meshes only)")
    ap.add_argument("--resume", action="store_true",
                    help="keep the rows already in --out and run the rest")
    ap.add_argument("--files", default="",
                    help="only files whose path contains one of these comma-separated strings "
                         "(re-running the rows a change touches; write them to another --out)")
    ap.add_argument("--own-start", action="store_true",
                    help="robosafe samples its own initial poses (default: VLA-Arena's)")
    args = ap.parse_args(argv)
    files = per_suite(with_cost(buildable(args.peer_csv), args.bddl_dir), args.per_suite)
    wanted = [w for w in args.files.split(",") if w]
    if wanted:
        files = [f for f in files if any(w in f for w in wanted)]
    done: dict[tuple[str, str], Comparison] = {}
    if args.resume and args.out.exists():  # rows of an interrupted run, kept
        with args.out.open() as fh:
            done = {(r.file, r.plan): r for r in map(Comparison.from_csv, csv.DictReader(fh))}
    names = [f.name for f in fields(Comparison)]
    rows = []
    with args.out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, names, lineterminator="\n")
        w.writeheader()
        for rel in files:
            for plan in args.plans.split(","):
                row = done.get((rel, plan))
                if row is None:
                    try:
                        row, _, _ = run_one(args.bddl_dir / rel, rel, plan,
                                            args.steps or PLAN_STEPS[plan],
                                            same_start=not args.own_start, assets=args.assets)
                    except Exception as exc:  # noqa: BLE001 - VLA-Arena's side failed
                        row = failed(rel, plan, PEER, exc)
                rows.append(row)
                w.writerow(asdict(row))
                fh.flush()
                print(f"{rel} [{plan}]: VLA-Arena {row.arena_cost:g} robosafe "
                      f"{row.robosafe_cost:g} first diff {row.first_diff_step} {row.error}",
                      file=sys.stderr, flush=True)
    setup = (f"Setup: robosafe assets `{args.assets}`, initial state "
             + ("robosafe's own sampler" if args.own_start else "VLA-Arena's (`init_state`)")
             + f", seed 0, files: {len(files)} (buildable in the peer and with a cost block"
             + (f", the first {args.per_suite} per suite" if args.per_suite else "") + ").")
    args.out.with_suffix(".md").write_text(markdown(rows, setup))
    return 0


if __name__ == "__main__":
    sys.exit(main())
