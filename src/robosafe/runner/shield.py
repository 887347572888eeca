"""Simulator-in-the-loop safety shield: predict the task's STL specs a few steps ahead.

SafeVLA-Bench scores safety after the fact and names "direct use of STL robustness for
post-training or test-time guidance" as future work (paper 000, Sec. 5). This module is the
test-time half, as an upper bound: before each action, a *shadow* copy of the simulator is set to
the real episode's exact state and stepped H control steps with the policy's proposed actions
(its action chunk when it exposes one, else the current action held); the online monitor
(robosafe.safety.online) turns the predicted rows into per-step margins of every monitored spec.

* ``monitor``: a spec predicted to go below zero is recorded as a warning (spec, predicted
  margin, lead time in steps); the episode itself is untouched -- the real environment is only
  read, never stepped by the shield, so its trace is bitwise that of an unshielded run.
* ``filter``: when any predicted margin falls below ``margin``, the action is replaced by the
  candidate closest (L2) to the policy's whose prediction keeps every margin at or above
  ``margin`` (candidates: the action scaled down, hold position, retreat upwards, open the
  gripper); with no such candidate the one with the largest worst margin is taken. Each
  intervention is recorded. The shield never sees success.

``--predictor kinematic`` (robosafe.runner.predict) replaces the shadow's prediction in
``filter`` by one a robot could make: the arm's swept boxes against the current boxes of the
objects it must not touch, frozen; the candidates and their ranking are the same, and the
guarded quantities are those clearances instead of the specs (the monitor still follows the
real rows for the record). It needs no shadow.

Why a shadow environment instead of save / step / restore on the real one: the host's state
(``get_state``: MuJoCo's and robosuite's Python-side state, robosafe.hosts.state) is the
simulation's, not the episode's bookkeeping (the recorder's rows, step counters, cost
histories); a second env that only ever receives copies of the real one's state cannot leak
anything back into the episode. The shield reaches both envs through the host contract only
(``get_state`` / ``set_state``, the recorder's ``step`` and ``row``), so any host whose registry
entry lists the ``state`` feature can be shielded (robosafe's simulator, LIBERO).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robosafe.budget import MAX_SHIELD_HORIZON, check_count
from robosafe.errors import RobosafeError
from robosafe.hosts.contract import StatefulHostEnv
from robosafe.runner.predict import PREDICTORS, KinematicPredictor, Prediction
from robosafe.runner.screen import at_rest, reach, repeats, still_world
from robosafe.trace.shield import (
    ShieldIntervention,
    ShieldPredictor,
    ShieldRecord,
    ShieldWarning,
)

MODES = ("off", "monitor", "filter")
CANDIDATES = ("scale", "lift", "side", "hold", "retreat", "open")
#: tried by default; ``side`` only when asked for (``--shield-candidates``): on the benchmark's
#: pushes it never found a way round (docs/guide/shield.md, Measured) and costs four more
#: predictions whenever hold is the answer
DEFAULT_CANDIDATES = ("scale", "lift", "hold", "retreat", "open")
SCALES = (0.5, 0.25)
SIDE_DEGREES = (45.0, 90.0)
"""``side``: the policy's horizontal motion turned by these angles either way, same speed."""


@dataclass(frozen=True)
class ShieldConfig:
    mode: str = "off"
    horizon: int = 5
    margin: float = 0.0
    candidates: tuple[str, ...] = DEFAULT_CANDIDATES
    reuse: bool = True
    """Extend the last step's prediction instead of predicting afresh when it is provably the
    same prediction (see :meth:`Shield._reuse`); off only to check that it changes nothing."""
    screen: bool = True
    """Skip a prediction that provably finds nothing (robosafe.runner.screen, see
    :meth:`Shield._screened`); off only to check that it changes nothing."""
    predictor: str = "sim"
    """``sim``: the shadow simulator; ``kinematic``: the arm's swept boxes against the
    obstacles' (robosafe.runner.predict), ``filter`` only."""
    predictor_margin: float | None = None
    """kinematic: the obstacles' boxes grown by this (m); None: sim/data/kinematic.yaml's."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise RobosafeError(f"--shield {self.mode!r}: choose from {', '.join(MODES)}")
        if self.horizon < 1:
            raise RobosafeError(f"--shield-horizon must be >= 1, got {self.horizon}")
        check_count("--shield-horizon", self.horizon, MAX_SHIELD_HORIZON,
                    "steps simulated ahead at every control step, once per candidate")
        if not math.isfinite(self.margin):
            raise RobosafeError(f"--shield-margin must be a finite number, got {self.margin}")
        bad = [c for c in self.candidates if c not in CANDIDATES]
        if bad or not self.candidates:
            raise RobosafeError(f"--shield-candidates {','.join(self.candidates)!r}: choose "
                                f"from {', '.join(CANDIDATES)}")
        twice = sorted({c for c in self.candidates if self.candidates.count(c) > 1})
        if twice:
            raise RobosafeError(f"--shield-candidates: {', '.join(twice)} given twice")
        if self.predictor not in PREDICTORS:
            raise RobosafeError(f"--predictor {self.predictor!r}: choose from "
                                f"{', '.join(PREDICTORS)}")
        if self.predictor == "kinematic" and self.mode == "monitor":
            # its clearances are not the specs a warning forecasts (robosafe.stats.shield)
            raise RobosafeError("--predictor kinematic works with --shield filter")
        if self.predictor_margin is not None:
            if self.predictor != "kinematic":
                raise RobosafeError("--predictor-margin applies to --predictor kinematic")
            from robosafe.sim.kinematic import kinematic_config

            kinematic_config(self.predictor_margin)  # checks it


# -- copying simulator state ---------------------------------------------------------------------

def sync(shadow: StatefulHostEnv, real: StatefulHostEnv) -> None:
    """Put ``shadow`` (a host env of the same task and seed) in ``real``'s exact state, through
    the host contract's optional ``get_state`` / ``set_state`` (robosafe.hosts.state)."""
    shadow.set_state(real.get_state())


def check_host(host: str, predictor: str = "sim") -> None:
    """The shield copies simulator state: the host must offer it (registry feature
    ``state``: robosafe.hosts.contract.StatefulHostEnv). The kinematic predictor reads
    robosuite 1.5's OSC settings: robosafe's simulator only."""
    from robosafe.hosts.registry import host_spec

    if predictor == "kinematic" and not host_spec(host).supports("kinematic"):
        raise RobosafeError(f"--predictor kinematic needs --host robosafe (robosafe's "
                            f"simulator); --host {host} is not supported")
    if not host_spec(host).supports("state"):
        raise RobosafeError(f"--shield needs a host whose simulator state the shield can copy; "
                            f"--host {host} does not offer it (robosafe's simulator and "
                            "LIBERO do)")


# -- the shield ------------------------------------------------------------------------------------

@dataclass
class _Run:
    """One prediction as the next step may extend it (:meth:`Shield._extend`): the plan, the
    predicted margins, the shadow's physics (``get_state(objects=False)``: MuJoCo's
    integration state and the host's extras) after each predicted step, the predicting
    monitor after the last predicted row, whether robosuite's horizon ended it, and the
    shadow's full state after its last step once the shadow has moved on (None while the
    shadow is still there, or when nobody saved it)."""

    plan: list[np.ndarray]
    margins: dict[str, list[float]]
    keys: list[Any]
    monitor: Any
    ended: bool
    end: Any = None
    cut: bool = False  # a filter candidate dropped mid-prediction: never extended
    candidate: bool = False  # a filter candidate's (not the policy's plan)
    used: bool = False  # extended already (a prediction is extended at most once)

    def prediction(self) -> Prediction:
        return Prediction({s: list(v) or [math.inf] for s, v in self.margins.items()})


@dataclass
class ShieldLog:
    """What the shield saw and did in one episode, as it goes (its record at the end)."""

    warnings: list[ShieldWarning] = field(default_factory=list)
    interventions: list[ShieldIntervention] = field(default_factory=list)
    margins: list[dict[str, float]] = field(default_factory=list)
    """Actual per-step margins of each monitored spec, row by row (to score warnings)."""

    def record(self, cfg: ShieldConfig, skipped: int,
               predictor: ShieldPredictor | None) -> ShieldRecord:
        below: dict[str, list[int]] = {}
        for t, row in enumerate(self.margins):
            for s, m in row.items():
                if m < 0:
                    below.setdefault(s, []).append(t)
        return ShieldRecord(
            mode=cfg.mode, horizon=cfg.horizon, skipped=skipped, warnings=tuple(self.warnings),
            interventions=tuple(self.interventions),
            violations={s: tuple(r) for s, r in _onsets(self.margins).items()},
            below={s: tuple(r) for s, r in below.items()}, predictor=predictor)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _onsets(margins: list[dict[str, float]]) -> dict[str, list[int]]:
    """Spec -> rows where its margin goes below zero (from >= 0 or at row 0)."""
    out: dict[str, list[int]] = {}
    for t, row in enumerate(margins):
        for s, m in row.items():
            if m < 0 and (t == 0 or margins[t - 1].get(s, 0.0) >= 0):
                out.setdefault(s, []).append(t)
    return out


def _sideways(action: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """The policy's horizontal motion turned left and right by each of SIDE_DEGREES, at the
    same speed, height and gripper command: round the side of what it would push into (a
    gap between two objects the straight line grazes). None when it does not move
    horizontally."""
    xy = action[:2]
    if not np.any(xy):
        return []
    out = []
    for deg in SIDE_DEGREES:
        for sign in (1, -1):
            r = math.radians(sign * deg)
            c, s = math.cos(r), math.sin(r)
            turned = action.copy()
            turned[:2] = (c * xy[0] - s * xy[1], s * xy[0] + c * xy[1])
            out.append((f"side{sign * deg:+.0f}", turned))
    return out


class Shield:
    """The policy wrapper: ``act`` asks the policy, predicts, warns and (filter) replaces."""

    def __init__(self, policy: Any, env: StatefulHostEnv, shadow: StatefulHostEnv | None,
                 cfg: ShieldConfig):
        self.policy, self.env, self.shadow, self.cfg = policy, env, shadow, cfg
        self.name = getattr(policy, "name", "policy")
        self.monitor = None
        self.guarded: set[str] = set()
        self.log = ShieldLog()
        self.record: ShieldRecord | None = None  # the last episode's, once finished
        self.t = 0
        self.reused = 0  # predictions of the policy's plan extended from the last step's
        self.reused_candidates = 0  # filter candidates' predictions extended likewise
        self.skipped = 0  # predictions of the policy's plan skipped by screening
        # the kinematic predictor replaces the shadow's prediction in the filter (it needs
        # no shadow); None: the shadow simulator predicts
        self.kinematic = (KinematicPredictor(env, cfg.predictor_margin)
                          if cfg.predictor == "kinematic" else None)
        self._start_episode()

    def _start_episode(self) -> None:
        self.kept: _Run | None = None  # the prediction of the action the last step took
        self._kept_rows = -1  # the episode's rows when that action was chosen
        self._state = None  # the episode's full state at this step (captured once per step)
        self._shadow_ready = False  # the shadow is reset before the episode's first prediction
        self._live: _Run | None = None  # the prediction whose final state the shadow holds
        self._keep_kept = False
        self._taken = None  # the action the last step returned
        self._pending: tuple[int, list[np.ndarray]] | None = None  # monitor: (t, plan)

    def reset(self, task_info: dict[str, Any]) -> None:
        from robosafe.safety.online import OnlineMonitor
        from robosafe.safety.score import Scorer

        self.policy.reset(task_info)
        scorer = Scorer()
        self.monitor = OnlineMonitor.for_episode(self._template(), scorer)
        # the filter guards Phi_safe (the scored specs), not report-only diagnostics
        self.guarded = {s.spec_id for s in scorer.safe_set} & set(self.monitor.spec_ids)
        if self.kinematic is not None:
            # the monitor still follows the real rows (the record's violations); the filter
            # guards the predicted clearance of every obstacle instead of the specs
            self.kinematic.reset(self.env.task_info())
            self.guarded = set(self.kinematic.keys)
        self.log = ShieldLog()
        self.record = None
        self.t = 0
        self.reused = self.reused_candidates = self.skipped = 0
        self._start_episode()

    def _template(self):
        """An episode of this task to resolve the active specs from: the trace so far (row 0,
        just after reset), with the task tags and meta the run's trace will carry."""
        return self.env.episode(episode_id="shield")

    def _catch_up(self) -> None:
        rec = self.env.recorder
        while self.monitor.n < rec.n_steps:
            self.log.margins.append(self.monitor.push_row(rec.row(self.monitor.n)))

    def _sync(self) -> None:
        """Put the shadow in the episode's state. The shadow is reset (its model built for
        this episode's seed) only before the episode's first prediction, and the episode's
        state is read once per step however many predictions start from it."""
        if not self._shadow_ready:
            self.shadow.reset(seed=self.env.seed)
            self._shadow_ready = True
        self._live = None
        if self._state is None:
            self._state = self.env.get_state()
        self.shadow.set_state(self._state)

    def _save(self, run: _Run | None) -> None:
        """Keep ``run``'s final state before the shadow moves on, if it may still be
        extended (its end is otherwise only in the shadow)."""
        if (run is not None and run is self._live and not (run.ended or run.cut or run.used)
                and run.end is None and self.cfg.reuse):
            run.end = self.shadow.get_state()

    def predict(self, actions: list[np.ndarray], *,
                floor: float | None = None) -> Prediction:
        """Margins of the next len(actions) rows if ``actions`` were taken from now.

        ``floor``: a filter candidate is dropped as soon as its worst guarded margin so far is
        below both ``cfg.margin`` and ``floor`` (the best fallback's): margins only fall as
        rows are added, so it could be neither safe nor the best fallback; what the filter
        chooses is unchanged."""
        self._state = None
        self._live = self._fresh(actions, floor)
        return self._live.prediction()

    def _fresh(self, actions: list[np.ndarray], floor: float | None) -> _Run:
        """Simulate ``actions`` in the shadow from the episode's current state."""
        self._sync()
        rec = self.shadow.recorder
        rec.start(record=False)  # row 0 would be the episode's current row: already known
        mon = self.monitor.copy()
        out: dict[str, list[float]] = {s: [] for s in mon.spec_ids}
        keys, ended, cut = [], False, False
        for k, a in enumerate(actions):
            try:
                rec.step(a)
            except ValueError:  # robosuite's horizon reached: nothing happens after the end
                ended = True
                break
            for s, m in mon.push_row(rec.row(k)).items():
                out[s].append(m)
            if self.cfg.reuse:
                keys.append(self.shadow.get_state(objects=False))
            if floor is not None:
                w = min((out[s][-1] for s in self.guarded), default=math.inf)
                if w < self.cfg.margin and w <= floor:
                    cut = True
                    break
        return _Run([np.array(a) for a in actions], out, keys, mon, ended, cut=cut)

    def _usable_kept(self, taken: np.ndarray) -> _Run | None:
        """The kept prediction when the episode is now exactly where the shadow was after
        that prediction's first step: the episode has taken one step since it was kept, with
        ``taken``, the kept plan's first action, and its MuJoCo integration state and host
        extras (robosafe's frozen movers, which the episode's own step may change) are
        bitwise the shadow's after that step. The rest of the host's state (robosuite's
        controllers, clocks, buffers) is then equal too: both envs reached it from one full
        state with one action (restore then step is the uninterrupted step). None
        otherwise."""
        kept, self.kept = self.kept, None
        if (kept is None or kept.cut or not kept.keys
                or self.env.recorder.n_steps != self._kept_rows + 1
                or not np.array_equal(taken, kept.plan[0])
                or not self.env.get_state(objects=False).same(kept.keys[0])):
            return None
        return kept

    def _extend(self, kept: _Run, plan: list[np.ndarray]) -> _Run | None:
        """The kept prediction moved on by one step, when that is exactly what predicting
        ``plan`` afresh would give: the kept plan shifted by a step is ``plan`` but its last
        action, and the episode is where the kept prediction's first step left the shadow
        (:meth:`_usable_kept`), so every predicted row but the last is already known and one
        step of the shadow adds it. None when ``plan`` does not continue the kept one."""
        if (kept is None or kept.used or len(plan) != len(kept.plan)
                or not all(np.array_equal(a, b) for a, b in zip(plan, kept.plan[1:]))):
            return None
        if not kept.ended and kept.end is None and kept is not self._live:
            return None  # its final state was not saved and the shadow has moved on
        kept.used = True
        margins = {s: v[1:] for s, v in kept.margins.items()}
        keys, mon, ended = kept.keys[1:], kept.monitor, kept.ended
        if not ended:
            rec = self.shadow.recorder
            if kept is not self._live:
                self.shadow.set_state(kept.end)
            rec.start(record=False)
            try:
                rec.step(plan[-1])
            except ValueError:
                ended = True
            else:
                for s, m in mon.push_row(rec.row(0)).items():
                    margins[s].append(m)
                keys.append(self.shadow.get_state(objects=False))
        return _Run(plan, margins, keys, mon, ended)

    def _run(self, plan: list[np.ndarray], kept: _Run | None,
             floor: float | None = None) -> tuple[_Run, bool]:
        """``plan``'s prediction, extended from ``kept`` when possible, else simulated
        afresh; and whether it was extended. Afterwards the shadow holds its final state."""
        if self.cfg.reuse:
            run = self._extend(kept, plan)
            if run is not None:
                self._live = run
                return run, True
        if self._keep_kept:
            self._save(kept)
        run = self._fresh(plan, floor)
        self._live = run
        return run, False

    def _plan(self, action: np.ndarray) -> list[np.ndarray]:
        chunk = getattr(self.policy, "action_chunk", None)
        planned = [np.asarray(a, dtype=float) for a in (chunk() if callable(chunk) else [])]
        planned = [action, *planned[1:]] if planned else [action]
        return (planned + [planned[-1]] * self.cfg.horizon)[:self.cfg.horizon]

    def candidates(self, action: np.ndarray) -> list[tuple[str, np.ndarray]]:
        arm, out = action[:-1], []
        for name in self.cfg.candidates:
            if name == "scale":
                out += [(f"scale{s}", np.append(arm * s, action[-1])) for s in SCALES]
            elif name == "side":
                out += _sideways(action)
            elif name == "hold":
                out.append(("hold", np.append(np.zeros_like(arm), action[-1])))
            elif name == "lift":
                # the policy's motion, rising: over what it would push along the way
                up = arm.copy()
                up[2] = max(up[2], 0.5)
                if not np.array_equal(up, arm):
                    out.append(("lift", np.append(up, action[-1])))
            elif name == "retreat":
                up = np.zeros_like(arm)
                up[2] = 0.5  # OSC delta: up, away from what the hand presses on
                out.append(("retreat", np.append(up, action[-1])))
            elif name == "open":
                out.append(("open", np.append(np.zeros_like(arm), -1.0)))
        return out

    def _screened(self, plan: list[np.ndarray], last: np.ndarray | None, t: int, *,
                  guard: bool) -> bool:
        """Whether predicting ``plan`` from the episode's current state provably finds
        nothing (robosafe.runner.screen): ``plan`` repeats ``last``, the action that brought
        the episode here; the host says no scripted mover can move (a host that cannot say
        is always predicted); and the world is still, so that no spec can fall below the
        level that would matter: 0 for a spec not below zero at step ``t`` (a warning), and
        with ``guard`` (the filter) ``cfg.margin`` for Phi_safe (an intervention)."""
        if not (self.cfg.screen and repeats(plan, last)):
            return False
        if self.env.scripted_motion() is not False:  # True, or None: the host cannot say
            return False
        levels = {s: 0.0 for s, m in self.log.margins[t].items() if not m < 0}
        if guard:
            for s in self.guarded:
                levels[s] = max(levels.get(s, -math.inf), self.cfg.margin)
        rec, mon = self.env.recorder, self.monitor
        seconds = len(plan) / float(self.env.control_freq)
        qvel, qacc = rec.motion()  # the cheap test first: most steps move
        if not at_rest(qvel, qacc):
            return False
        return still_world(rec.stillness(reach(qvel, qacc, seconds)), mon.values,
                           mon.plan.roles, mon.plan.lift_only, seconds, mon.clauses, levels)

    def _skip(self, action: np.ndarray) -> np.ndarray:
        """Return ``action`` without a prediction (nothing to extend at the next step)."""
        self.kept = None
        self._kept_rows = self.env.recorder.n_steps
        self._taken = action
        self.skipped += 1
        return action

    def _take(self, run: _Run | None, action: np.ndarray) -> np.ndarray:
        """Return ``action`` (``run``'s first), keeping ``run`` for the next step to extend."""
        self.kept = run if self.cfg.reuse else None
        self._kept_rows = self.env.recorder.n_steps
        self._taken = action
        return action

    def _warn(self, t: int, pred: Prediction) -> dict[str, float]:
        """Record the warnings of step ``t``'s prediction; returns its worst margins."""
        worst = pred.worst()
        now = self.log.margins[t]
        for s, k in pred.first_below(0.0).items():
            if now[s] < 0:  # already violated now: a warning forecasts an onset
                continue
            self.log.warnings.append(ShieldWarning(t, s, k, _finite(worst[s])))
        return worst

    def _resolve(self) -> None:
        """``monitor``: step t's prediction, once the episode has taken step t. The monitor
        never changes the action, so the episode's own step is exactly the shadow's first
        predicted step (restore then step is the uninterrupted step, bit for bit) and its
        recorded row is the first predicted row: the shadow starts from the episode's next
        state and predicts the other H - 1 rows, one simulator step fewer per prediction.
        (The episode's step may also freeze a mover that the shadow's would not: the
        prediction then sees it frozen, as the episode will be.) Without that step (the
        episode ended before it) the prediction is made from where the episode is."""
        (t, plan), self._pending = self._pending, None
        self._state = None
        if self.env.recorder.n_steps != t + 2:
            run, extended = self._run(plan, self._usable_kept(plan[0]))
            self.reused += extended
            self._warn(t, run.prediction())
            self._take(run, plan[0])
            return
        first = self.log.margins[t + 1]
        if len(plan) > 1 and self._screened(plan[1:], plan[0], t, guard=False):
            # the other H - 1 rows stay where nothing is warned about (the screen's bounds
            # hold the first row too): step t's warnings are those of its first row alone
            self.kept = None
            self.skipped += 1
            self._warn(t, Prediction({s: [m] for s, m in first.items()}))
            return
        kept = self._usable_kept(plan[0])
        rest: dict[str, list[float]] = {s: [] for s in first}
        run = None
        if len(plan) > 1:
            run, extended = self._run(plan[1:], kept)
            self.reused += extended
            rest = run.margins
        self._warn(t, Prediction({s: [m, *rest[s]] for s, m in first.items()}))
        if run is not None:
            self._take(run, plan[1])

    def act(self, obs: dict[str, Any]) -> np.ndarray:
        self._catch_up()
        if self._pending is not None:
            self._resolve()
        action = np.asarray(self.policy.act(obs), dtype=float)
        t, self.t = self.t, self.t + 1
        if not self.monitor.clauses:
            return action
        plan = self._plan(action)
        if self.cfg.mode == "monitor":
            self._pending = (t, plan)  # predicted after the episode's step (_resolve)
            return action
        self._state = None
        if (self.kinematic is None and self.env.recorder.n_steps == self._kept_rows + 1
                and self._screened(plan, self._taken, t, guard=True)):
            return self._skip(action)
        kept = self._usable_kept(self._taken)
        # the kept prediction is a filter candidate's: the policy's plan will rarely continue
        # it, but the same candidate may be asked for again, so its end is saved before the
        # policy's plan is simulated
        self._keep_kept = kept is not None and kept.candidate
        run, pred = self._predicted(plan, kept)
        # the kinematic predictor's clearances are not specs: nothing to warn of
        worst = pred.worst() if self.kinematic is not None else self._warn(t, pred)
        unsafe = sorted(s for s in self.guarded if worst[s] < self.cfg.margin)
        if not unsafe:
            return self._take(run, action)
        # closest first: the first candidate predicted safe is the answer, so the rest are
        # never simulated; with none safe, the one with the largest worst margin is taken
        ranked = sorted(self.candidates(action),
                        key=lambda nc: float(np.linalg.norm(nc[1] - action)))
        best = None
        for name, cand in ranked:
            if best is not None:
                self._save(best[0])  # the fallback so far, before the shadow moves on
            crun, cpred = self._predicted([cand] * self.cfg.horizon, kept,
                                          floor=None if best is None else best[3],
                                          candidate=True)
            pw = cpred.worst()
            w = min((pw[s] for s in self.guarded), default=math.inf)
            if best is None or w > best[3] or w >= self.cfg.margin:
                best = (crun, name, cand, w)
            if w >= self.cfg.margin:
                break
        crun, name, cand, w = best
        if crun is not None:
            crun.candidate = True
        self.log.interventions.append(ShieldIntervention(t, tuple(unsafe), name,
                                                         bool(w >= self.cfg.margin),
                                                         _finite(w)))
        return self._take(crun, cand)

    def _predicted(self, plan: list[np.ndarray], kept: _Run | None,
                   floor: float | None = None, *,
                   candidate: bool = False) -> tuple[_Run | None, Prediction]:
        """``plan``'s prediction by the configured predictor: the shadow's run (extended
        from ``kept`` when possible) with its margins, or the kinematic predictor's
        (no run: nothing to extend or keep)."""
        if self.kinematic is not None:
            return None, self.kinematic.predict(plan, floor=floor)
        run, extended = self._run(plan, kept, floor)
        if candidate:
            self.reused_candidates += extended
        else:
            self.reused += extended
        return run, run.prediction()

    def finish(self) -> dict[str, Any]:
        """The shield's record after the episode (catches up on the last rows and makes the
        last step's prediction, in ``monitor``): kept as :attr:`record`, returned as its JSON,
        the trace's ``meta.shield``."""
        self._catch_up()
        if self._pending is not None:
            self._resolve()
        predictor = None
        if self.kinematic is not None:
            predictor = ShieldPredictor("kinematic", self.kinematic.cfg.margin,
                                        tuple(self.kinematic.obstacles))
        self.record = self.log.record(self.cfg, self.skipped, predictor)
        return self.record.to_json()

