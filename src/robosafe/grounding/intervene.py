"""Closed-loop intervention on the generator's scenes: a monitor commands the robot.

Paper 003 evaluates monitors on short clips, not in closed loop (Sec. 5: "evaluates short clips
rather than closed-loop intervention") and asks for explicit geometry baselines; paper 000
leaves human proximity and test-time use of STL robustness to future work (Sec. 5). This
module runs a monitor while a :mod:`robosafe.grounding.simgen` episode is simulated and lets it
command the robot:

* ``stop`` -- protective stop: the robot holds its pose while the monitor alarms; the human
  keeps walking (its walk is the plan's, whatever the robot does);
* ``slow`` -- while the monitor alarms, the robot's step toward the human is scaled so its
  approach speed stays within what the protective separation distance allows at the current
  separation (robosafe.safety.ssm.speed_limit_m_s); steps that do not approach are not slowed.

The robot follows its planned path by a progress variable (planned steps done); a command
changes how fast it advances, never where the path goes (robosafe's own model of an
intervention that does not replan). Monitors (each sees only the present and the past, except
the oracle):

* ``ssm`` -- robosafe's online monitor (robosafe.safety.online) of the human-proximity spec on
  the episode's App. B trace rows: alarm while S_p / separation >= 1;
* ``baseline`` -- the geometry baseline's Task 2 rule (robosafe.grounding.baseline.decide) on
  the planar robot-human distance at the last three sampled frames: alarm on label C;
* ``vlm`` -- the early-warning VLM path: every ``vlm_every`` steps the ego RGB frames of the
  last three sampled steps go through the OpenAI-compatible client with the Task 2 prompt;
  alarm on label C until the next answer;
* ``oracle`` -- knows the future contact: simulates ``horizon_s`` ahead at full speed from the
  current state and alarms if the robot would touch the human;
* ``none`` -- never alarms: the reference run each monitor is compared with.

A monitor that raises, times out or answers something that is not a label fails the episode
(:class:`~robosafe.errors.MonitorError`): the episode is reported as failed for that monitor
and left out of its other counts, never counted as safe.

Per episode: whether a moving robot touched the human (a human collision; the episode ends
there, as in the generator), whether the human walked into a robot that did not move that step
(a contact with a stopped robot; it ends the episode too), scene-contact steps, interventions
(alarm onsets) and how many were false (from that state, continuing at full speed for
``horizon_s`` would not have touched the human: the oracle's question), and the time lost
(planned steps not yet done at the episode's end, in seconds).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from robosafe.errors import MonitorError, RobosafeError
from robosafe.grounding.dataset import SIM_TASKS
from robosafe.grounding.simgen import (
    DT,
    Episode,
    GenerateConfig,
    Plan,
    Room,
    _heading,
    episode_plan,
    episode_trace,
    human_gait,
    scene_plan,
)

ACTIONS = ("stop", "slow")
MONITORS = ("ssm", "baseline", "vlm", "oracle")
BASELINE_STRIDE = 5
"""Steps between the three frames a sampled-frame monitor (baseline, vlm) looks at
(robosafe's own choice: 1/3 s at 30 Hz, a 10-step window)."""


@dataclass(frozen=True)
class VLMSettings:
    """The OpenAI-compatible endpoint of the ``vlm`` monitor (robosafe.grounding.client)."""

    endpoint: str
    model: str
    timeout_s: float = 30.0
    max_retries: int = 0
    every: int = 15
    image_size: int = 64
    api_key_env: str = "OPENAI_API_KEY"


@dataclass(frozen=True)
class InterveneConfig:
    """The seeded episodes and what runs on them."""

    episodes: int = 4
    seed: int = 0
    max_steps: int = 300
    robot: str = "primitive"
    sim_tasks: tuple[str, ...] = SIM_TASKS
    action: str = "stop"
    monitors: tuple[str, ...] = ("ssm", "baseline", "oracle")
    horizon_s: float = 1.0
    vlm: VLMSettings | None = None

    def generate_config(self) -> GenerateConfig:
        return GenerateConfig(episodes=self.episodes, seed=self.seed, max_steps=self.max_steps,
                              robot=self.robot, sim_tasks=self.sim_tasks)

    def check(self) -> None:
        """One error line for a bad setting, before anything runs."""
        self.generate_config().check()
        if self.action not in ACTIONS:
            raise RobosafeError(f"--action {self.action!r}: expected one of "
                                f"{', '.join(ACTIONS)}")
        bad = [m for m in self.monitors if m not in MONITORS]
        if bad or not self.monitors:
            raise RobosafeError(f"--monitor {bad[0] if bad else ''!r}: expected one of "
                                f"{', '.join(MONITORS)}")
        if not (math.isfinite(self.horizon_s) and 0 < self.horizon_s <= 10):
            raise RobosafeError(f"--horizon-s {self.horizon_s}: must be in (0, 10] seconds")
        if "vlm" in self.monitors and self.vlm is None:
            raise RobosafeError("--monitor vlm needs --endpoint and --model")
        if self.vlm is not None and self.vlm.every < 1:
            raise RobosafeError(f"--vlm-every {self.vlm.every}: must be at least 1")
        from robosafe.safety import ssm

        ssm.ssm_params()  # a bad human_proximity.yaml is one line now, not a failed monitor

    @property
    def horizon_steps(self) -> int:
        return max(1, round(self.horizon_s / DT))


@dataclass(frozen=True)
class EpisodeOutcome:
    """One episode under one monitor (``status`` "ok" or "failed"; counts only when ok)."""

    monitor: str
    episode: int
    sim_task: str
    status: str
    error: str | None
    steps: int
    human_collision: bool
    stopped_contact: bool
    scene_contact_steps: int
    interventions: int
    false_interventions: int
    time_lost_s: float

    @property
    def duration_min(self) -> float:
        return self.steps * DT / 60.0


@dataclass
class _Step:
    """What a monitor sees at step ``t`` (after the step was simulated)."""

    t: int
    ep: Episode
    positions: np.ndarray            # (len(TRACE_BODIES), 3) trace positions
    contacts: list[tuple[str, str, float]]
    robot_xy: np.ndarray
    human_xy: np.ndarray
    history: list[float]             # planar robot-human distance of every step so far
    future: Callable[[], bool]       # would full speed touch the human within the horizon?


class Monitor:
    """A closed-loop monitor: ``observe`` returns whether it alarms after this step."""

    name = "none"

    def observe(self, s: _Step) -> bool:
        return False


class SSMMonitor(Monitor):
    """robosafe's online monitor of the human-proximity spec on the trace rows."""

    name = "ssm"
    spec_id = "human_ssm_separation"

    def __init__(self, room: Room, episode_id: str):
        self.room, self.episode_id = room, episode_id
        self.mon: Any = None

    def observe(self, s: _Step) -> bool:
        from robosafe.safety.online import OnlineMonitor

        row = episode_trace(self.room, episode_id=self.episode_id, sim_task="closed_loop",
                            positions=[s.positions], contacts=[s.contacts], seed=None, meta={})
        if self.mon is None:
            self.mon = OnlineMonitor.for_episode(row)
            if self.spec_id not in self.mon.spec_ids:
                raise MonitorError(f"the online monitor does not follow {self.spec_id}")
        return self.mon.push_row(row)[self.spec_id] < 0


def _frames(t: int) -> tuple[int, ...]:
    return tuple(max(0, t - k * BASELINE_STRIDE) for k in (2, 1, 0))


class BaselineMonitor(Monitor):
    """The geometry baseline's Task 2 decision on the planar distance (no depth cue)."""

    name = "baseline"

    def observe(self, s: _Step) -> bool:
        from robosafe.grounding.baseline import ClipGeometry, decide

        frames = _frames(s.t)
        g = ClipGeometry(frames, tuple(s.history[f] for f in frames), (None,) * 3)
        return decide(2, g)[0] == "C"


class OracleMonitor(Monitor):
    """Knows the future: alarms when full speed would touch the human within the horizon."""

    name = "oracle"

    def observe(self, s: _Step) -> bool:
        return s.future()


class VLMMonitor(Monitor):
    """The Task 2 prompt on the ego RGB frames, through the OpenAI-compatible client."""

    name = "vlm"

    def __init__(self, settings: VLMSettings):
        from robosafe.grounding.client import ChatClient
        from robosafe.grounding.prompts import build_prompt, image_sequence

        self.settings = settings
        self.client = ChatClient(settings.endpoint, settings.model,
                                 api_key_env=settings.api_key_env,
                                 timeout_s=settings.timeout_s, max_retries=settings.max_retries,
                                 backoff_s=0.0)
        self.prompt = build_prompt(2, "rgb", "ego", 3)
        self.order = image_sequence("rgb", "ego", 3)
        self.renderer: Any = None
        self.alarm = False

    def observe(self, s: _Step) -> bool:
        from robosafe.errors import ChatRequestError, EndpointError
        from robosafe.grounding.answers import parse_answer
        from robosafe.grounding.representations import ClipImage, _png
        from robosafe.grounding.simgen import _CAM

        if s.t % self.settings.every:
            return self.alarm
        if self.renderer is None:
            from robosafe.sim.render import ensure_gl_backend

            ensure_gl_backend()  # headless GL chosen before the first context, however called
            size = self.settings.image_size
            self.renderer = s.ep.mujoco.Renderer(s.ep.model, size, size)
        frames = _frames(s.t)
        images = []
        with _kept_state(s.ep):  # earlier steps are restored to be drawn
            for k, cam, ch in self.order:
                s.ep.restore(frames[k - 1])
                self.renderer.update_scene(s.ep.data, camera=_CAM[cam])
                images.append(ClipImage(k, cam, ch, "rgb", "image/png",
                                        _png(self.renderer.render())))
        try:
            raw = self.client.complete(self.prompt, images)
        except (ChatRequestError, EndpointError) as e:
            raise MonitorError(f"vlm: {e}") from None
        answer = parse_answer(raw, 2, 3)
        if not answer.valid or answer.label not in ("A", "B", "C"):
            raise MonitorError(f"vlm: no risk label in the answer ({answer.error or 'none'})")
        self.alarm = answer.label == "C"
        return self.alarm

    def close(self) -> None:
        if self.renderer is not None:
            self.renderer.close()


@contextmanager
def _kept_state(ep: Episode) -> Iterator[None]:
    """The simulator state (poses, pushed objects, follow cameras) as it was on entry, back
    on exit: for looking ahead or drawing earlier steps without disturbing the episode."""
    d, m = ep.data, ep.model
    qpos, cams = d.qpos.copy(), m.cam_pos.copy()
    try:
        yield
    finally:
        d.qpos[:] = qpos
        m.cam_pos[:] = cams
        ep.mujoco.mj_forward(m, d)


def _robot_human_contact(ep: Episode) -> bool:
    d = ep.data
    return any({ep.root_role[c.geom1], ep.root_role[c.geom2]} == {"robot", "human"}
               for c in d.contact[:d.ncon])


class _Run:
    """One closed-loop episode: the plan's robot path followed by a progress variable."""

    def __init__(self, room: Room, plan: Plan, human_type: str, robot: str, horizon: int):
        self.room, self.plan, self.horizon = room, plan, horizon
        self.n = len(plan.robot)
        self.live = Plan(robot=plan.robot.copy(), human=plan.human, arm=plan.arm.copy(),
                         carried=list(plan.carried), placed={}, events=plan.events)
        self.ep = Episode(room, human_type, self.live, robot)
        self.yaw_r, self.yaw_h = _heading(plan.robot), _heading(plan.human)
        self.gait = human_gait(plan.human)

    def at(self, progress: float) -> tuple[np.ndarray, int]:
        """The planned base position after ``progress`` planned steps, and its plan step."""
        i = min(int(progress), self.n - 1)
        j = min(i + 1, self.n - 1)
        frac = progress - i
        return self.plan.robot[i] + frac * (self.plan.robot[j] - self.plan.robot[i]), i

    def pose(self, t: int, progress: float) -> None:
        base, i = self.at(progress)
        self.live.robot[t], self.live.arm[t] = base, self.plan.arm[i]
        self.live.carried[t] = self.plan.carried[i]
        self.ep.pose(t, self.yaw_r[i], self.yaw_h[t], self.gait[t])

    def future(self, t: int, progress: float) -> bool:
        """Would the robot touch the human within the horizon at full speed from here?
        The state is restored after (objects and cameras included)."""
        saved = (self.live.robot.copy(), self.live.arm.copy(), list(self.live.carried))
        hit = False
        with _kept_state(self.ep):
            for k in range(1, min(self.horizon, self.n - 1 - t) + 1):
                self.pose(t + k, progress + k)
                if _robot_human_contact(self.ep):
                    hit = True
                    break
        self.live.robot[:], self.live.arm[:] = saved[0], saved[1]
        self.live.carried[:] = saved[2]
        return hit


def slow_rate(run: _Run, t: int, progress: float, separation_m: float) -> float:
    """The fraction of the next planned step the ``slow`` command allows: the step's speed
    toward the human scaled down to the SSM speed limit at this separation (1 when the step
    does not approach; robosafe.safety.ssm.speed_limit_m_s)."""
    from robosafe.safety.ssm import speed_limit_m_s, ssm_params

    here, _ = run.at(progress)
    nxt, _ = run.at(progress + 1)
    toward = run.plan.human[min(t + 1, run.n - 1)] - here
    dist = float(np.hypot(*toward))
    approach = float(np.dot(nxt - here, toward)) / max(dist, 1e-9) / DT
    if approach <= 0:
        return 1.0
    return min(1.0, speed_limit_m_s(separation_m, ssm_params()) / approach)


def run_episode(room: Room, plan: Plan, *, human_type: str, robot: str, monitor: Monitor,
                action: str, horizon: int, episode: int = 0,
                sim_task: str = "") -> EpisodeOutcome:
    """Simulate one episode with ``monitor`` in the loop (module docstring)."""
    run = _Run(room, plan, human_type, robot, horizon)
    progress, posed, prev_base = 0.0, 0.0, None
    history: list[float] = []
    scene = interventions = false = 0
    human = stopped = False
    alarmed = False
    t = 0
    try:
        for t in range(run.n):
            run.pose(t, progress)
            posed = progress  # planned steps done at step t (the time lost is t - posed)
            run.ep.save()
            positions, contacts = run.ep.trace_row()
            h, sc, _ = run.ep.contacts(run.live.carried[t])
            base = run.live.robot[t].copy()
            moved = prev_base is None or float(np.hypot(*(base - prev_base))) > 1e-9
            prev_base = base
            scene += sc > 0
            if h:
                human, stopped = moved, not moved
                break
            history.append(float(np.hypot(*(plan.human[t] - base))))
            step = _Step(t, run.ep, positions, contacts, base, plan.human[t], history,
                         lambda t=t, p0=progress: run.future(t, p0))
            verdict = _observe(monitor, step)
            if isinstance(verdict, str):
                return EpisodeOutcome(monitor.name, episode, sim_task, "failed", verdict,
                                      t + 1, False, False, 0, 0, 0, 0.0)
            alarm = verdict
            if alarm and not alarmed:
                interventions += 1
                false += not run.future(t, progress)
            alarmed = alarm
            rate = 1.0
            if alarm:
                rate = 0.0 if action == "stop" else slow_rate(run, t, progress, history[-1])
            progress = min(progress + rate, run.n - 1.0)
    finally:
        close = getattr(monitor, "close", None)
        if close is not None:
            close()
    return EpisodeOutcome(monitor.name, episode, sim_task, "ok", None, t + 1, human, stopped,
                          int(scene), interventions, false, round((t - posed) * DT, 4))


def _observe(monitor: Monitor, step: _Step) -> bool | str:
    """The monitor's alarm, or why it failed: its own error, any exception it raised, or an
    answer that is not a bool (the simulator's own errors are not caught here)."""
    try:
        alarm = monitor.observe(step)
    except MonitorError as e:
        return str(e)
    except Exception as e:  # noqa: BLE001 - any monitor crash fails the episode, never "safe"
        return f"{type(e).__name__}: {e}"
    if not isinstance(alarm, (bool, np.bool_)):
        return f"the monitor answered {alarm!r}, not an alarm (True/False)"
    return bool(alarm)


def _monitor(name: str, room: Room, episode_id: str, config: InterveneConfig) -> Monitor:
    if name == "ssm":
        return SSMMonitor(room, episode_id)
    if name == "baseline":
        return BaselineMonitor()
    if name == "oracle":
        return OracleMonitor()
    if name == "vlm":
        return VLMMonitor(config.vlm)
    return Monitor()


@dataclass(frozen=True)
class MonitorSummary:
    """One monitor's counts over the episodes (failed episodes left out of every count but
    ``failed``); ``prevented``: episodes whose reference run had a human collision and this
    run (ok) had none."""

    monitor: str
    episodes: int
    failed: int
    human_collisions: int
    prevented: int
    stopped_contacts: int
    scene_collision_episodes: int
    interventions: int
    false_interventions: int
    false_per_min: float | None
    time_lost_s: float
    errors: tuple[str, ...] = field(default=())


def summarize(name: str, outcomes: Sequence[EpisodeOutcome],
              reference: Sequence[EpisodeOutcome]) -> MonitorSummary:
    ref = {o.episode: o for o in reference}
    ok = [o for o in outcomes if o.status == "ok"]
    minutes = sum(o.duration_min for o in ok)
    false = sum(o.false_interventions for o in ok)
    return MonitorSummary(
        monitor=name, episodes=len(outcomes), failed=len(outcomes) - len(ok),
        human_collisions=sum(o.human_collision for o in ok),
        prevented=sum(ref[o.episode].human_collision and not o.human_collision for o in ok),
        stopped_contacts=sum(o.stopped_contact for o in ok),
        scene_collision_episodes=sum(o.scene_contact_steps > 0 for o in ok),
        interventions=sum(o.interventions for o in ok), false_interventions=false,
        false_per_min=round(false / minutes, 3) if minutes else None,
        time_lost_s=round(sum(o.time_lost_s for o in ok), 3),
        errors=tuple(f"episode {o.episode}: {o.error}" for o in outcomes if o.error))


@dataclass(frozen=True)
class InterveneResult:
    config: InterveneConfig
    summaries: tuple[MonitorSummary, ...]
    outcomes: tuple[EpisodeOutcome, ...]


def intervene(config: InterveneConfig,
              progress: Callable[[int, int], None] | None = None) -> InterveneResult:
    """Every monitor (and the ``none`` reference) over the same seeded episodes."""
    config.check()
    gen = config.generate_config()
    names = ("none", *dict.fromkeys(config.monitors))
    outcomes: dict[str, list[EpisodeOutcome]] = {n: [] for n in names}
    plan_list = episode_plan(gen)
    for i, (ht, task, sid, eid) in enumerate(plan_list):
        room, plan = scene_plan(np.random.default_rng([config.seed, i]), task, gen)
        for name in names:
            mon = _monitor(name, room, f"{sid}/{eid}", config)
            outcomes[name].append(run_episode(
                room, plan, human_type=ht, robot=config.robot, monitor=mon,
                action=config.action, horizon=config.horizon_steps, episode=eid,
                sim_task=task))
        if progress:
            progress(i + 1, len(plan_list))
    ref = outcomes["none"]
    return InterveneResult(config, tuple(summarize(n, outcomes[n], ref) for n in names),
                           tuple(o for n in names for o in outcomes[n]))


def result_json(result: InterveneResult) -> dict[str, Any]:
    """The ``--json`` document."""
    from dataclasses import asdict

    cfg = asdict(replace(result.config, vlm=None))
    if result.config.vlm is not None:  # the endpoint and model, never a key
        cfg["vlm"] = {"endpoint": result.config.vlm.endpoint, "model": result.config.vlm.model,
                      "every": result.config.vlm.every}
    return {"diagnostic": "intervention", "config": cfg, "dt_s": DT,
            "summaries": [asdict(s) for s in result.summaries],
            "episodes": [asdict(o) for o in result.outcomes]}
