"""From a request to a run plan: every check of a run's settings, in one place.

:func:`plan_run` turns a :class:`RunRequest` (what the command line, ``collect``, ``demo``, an
audit or a script asked for; ``None``: not given) into a :class:`robosafe.runner.plan.RunPlan`,
or raises one :class:`RobosafeError` naming the first problem, before any folder is made or
scene built. Each default lives in the plan's types (RunPlan, the host's options class,
ShieldConfig, UntilPlan), never here. What only an episode can tell (a learned policy's inputs
against the host's first observation) is the driver's preflight (robosafe.runner.run).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from robosafe.budget import MAX_EPISODES, BudgetError
from robosafe.errors import RobosafeError
from robosafe.hosts.options import OptionRequest
from robosafe.redact import redact_url
from robosafe.runner.plan import Recording, RunPlan, check_sizes, config_text
from robosafe.runner.shield import ShieldConfig
from robosafe.runner.until_plan import UntilPlan, parse_until

#: the perturbation levels W0-W4 / V0-V4 (VLA-Arena Sec. 2.2-2.3)
TOP_LEVEL = 4


@dataclass(frozen=True)
class TaskSelection:
    """Tasks as the command line names them: a built-in ``suite`` (its ``level`` and
    ``task_ids`` only, when given), task ``files`` and every ``*.bddl`` below ``folder``; for a
    host with suites of its own (LIBERO), the host's ``suite`` and ``task_ids``."""

    suite: str | None = None
    level: int | None = None
    task_ids: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    folder: str | None = None


@dataclass(frozen=True)
class UntilRequest:
    """``--until`` and its options as given (None: not given)."""

    rule: str | None = None
    against: str | None = None
    metric: str | None = None
    alpha: float | None = None
    delta: float | None = None
    two_sided: bool | None = None
    against_policy: str | None = None


@dataclass(frozen=True)
class RunRequest:
    """A run as asked for, unchecked. ``tasks``: task id -> file, or a selection. ``seeds``
    and the levels: numbers, or the command line's text (``0,1,2`` / ``0-4``). ``resume``:
    continue the run in ``out`` (settings not given are the run's own)."""

    policy: str
    tasks: dict[str, str] | TaskSelection
    host: str = "robosafe"
    episodes: int = 1
    seeds: tuple[int, ...] | str | None = None
    language_levels: tuple[int, ...] | str | None = None
    visual_levels: tuple[int, ...] | str | None = None
    horizon: int | None = None
    suite: str | None = None
    images: bool | None = None  # None: for policies that look at cameras
    image_size: int | None = None
    obs_adapter: str | None = None
    record_frames: bool = False
    placement_jitter: tuple[float, ...] = ()
    assets: str | None = None
    cost_mode: str | None = None
    controller: str | None = None
    arena_evaluator: str | None = None
    shield: str | None = None
    shield_horizon: int | None = None
    shield_margin: float | None = None
    shield_candidates: tuple[str, ...] | str | None = None
    predictor: str | None = None
    predictor_margin: float | None = None
    until: UntilRequest = UntilRequest()
    checkpoint_ref: str = ""
    policy_name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    out: str | Path | None = None
    resume: bool = False


def plan_run(req: RunRequest) -> RunPlan:
    """The plan of ``req``, every setting checked (module docstring)."""
    from robosafe.hosts.registry import host_spec, run_hosts

    if req.host not in run_hosts():
        raise RobosafeError(f"--host: unknown host {req.host!r} ({' or '.join(run_hosts())})")
    spec = host_spec(req.host)
    stored = _stored(req)
    shield = _shield(req)
    if shield.mode != "off" and not req.resume:
        from robosafe.runner.shield import check_host

        # before the host's tasks are looked up (LIBERO's import takes time)
        check_host(req.host, shield.predictor)
    tasks, suite = _tasks(req, spec)
    language = _levels(req.language_levels, "--language-level")
    visual = _levels(req.visual_levels, "--visual-level")
    check_sizes(len(tasks), len(language) * len(visual), req.episodes, req.horizon,
                req.image_size)  # before the seeds are listed
    seeds = seed_option(req.seeds, req.episodes) or tuple(range(req.episodes))
    if len(seeds) != req.episodes:
        raise RobosafeError(f"--seeds gives {len(seeds)} seeds for {req.episodes} episodes; "
                            "give one per episode")
    if (language, visual) != ((0,), (0,)) and not spec.supports("levels"):
        raise RobosafeError(f"--language-level / --visual-level perturb robosafe's CBDDL tasks; "
                            f"the {req.host} host runs its own protocol unchanged")
    controller = req.controller or (stored.options.to_json()["controller"]
                                    if stored is not None else None)
    options = spec.options_class().build(
        OptionRequest(req.assets, req.cost_mode, controller, req.arena_evaluator), tasks,
        installed=not req.resume)
    check_policy_spec(req.policy)
    images = _looks(req.policy) if req.images is None else req.images
    if req.placement_jitter and (not spec.supports("placement_jitter")
                                 or len(req.placement_jitter) != 2):
        raise RobosafeError("placement jitter is (xy metres, yaw degrees) and needs robosafe's "
                            "simulator")
    if req.obs_adapter is not None:
        from robosafe.policies.remote import check_adapter

        check_adapter(req.obs_adapter)
    if images and req.record_frames:
        from robosafe.formats.video import require_video

        require_video()
    plan = RunPlan(policy=req.policy, tasks=tasks, host=req.host, options=options,
                   episodes=req.episodes, seeds=seeds, language_levels=language,
                   visual_levels=visual, horizon=req.horizon, suite=suite,
                   recording=Recording(images, req.image_size, req.record_frames),
                   obs_adapter=req.obs_adapter, placement_jitter=tuple(req.placement_jitter),
                   shield=shield, checkpoint_ref=req.checkpoint_ref,
                   policy_name=req.policy_name, extra=dict(req.extra))
    if not req.resume:
        _preflight(plan, spec)
    plan = replace(plan, until=_until(req, plan, stored))
    config_text(plan.to_json())
    return plan


def _stored(req: RunRequest) -> RunPlan | None:
    """On ``--resume``, the plan the run in ``out`` was started with (None: there is none yet;
    the driver says so)."""
    if not req.resume or req.out is None or not (Path(req.out) / "run.json").is_file():
        return None
    from robosafe.runner.rundir import open_run

    return open_run(req.out).plan


def _shield(req: RunRequest) -> ShieldConfig:
    if req.predictor is not None and req.shield in (None, "off"):
        raise RobosafeError("--predictor needs --shield")
    if req.predictor_margin is not None and req.predictor != "kinematic":
        raise RobosafeError("--predictor-margin needs --predictor kinematic")
    given = {"mode": req.shield, "horizon": req.shield_horizon, "margin": req.shield_margin,
             "candidates": _names(req.shield_candidates), "predictor": req.predictor,
             "predictor_margin": req.predictor_margin}
    return ShieldConfig(**{k: v for k, v in given.items() if v is not None})


def _names(text: tuple[str, ...] | str | None) -> tuple[str, ...] | None:
    if isinstance(text, str):
        return tuple(c.strip() for c in text.split(",") if c.strip())
    return text


def _looks(policy: str) -> bool:
    """Whether a policy looks at cameras (a server's VLA, a probe, a LeRobot checkpoint): it
    gets images unless told otherwise."""
    from robosafe.policies.base import policy_kind

    return policy_kind(policy) in ("remote", "probe", "lerobot")


def _preflight(plan: RunPlan, spec: Any) -> None:
    """Every task read (its text copied into the run) and checked by its host; with a shield,
    every task the host can tag before an episode has a spec the shield can monitor (a host
    whose tags come with its scene runs a task with nothing to monitor unshielded)."""
    from robosafe.runner.rundir import task_texts

    monitored = plan.shield.mode != "off"
    if monitored:
        from robosafe.safety.online import monitorable
        from robosafe.safety.registry import load_registry

        reg = load_registry()
    for task_id, path in sorted(plan.tasks.items()):
        tags = plan.options.preflight(task_id, path)
        if monitored and tags is not None:
            res = reg.resolve(plan.suite or spec.benchmark, task_id, tags)
            if not any(monitorable(s) for s in reg.active(list(reg.specs.values()), res.tags)):
                raise RobosafeError(f"{path}: --shield: task {task_id!r} has no active safety "
                                    "spec the shield can monitor")
    task_texts(plan.tasks)


def check_policy_spec(spec: str) -> None:
    """The policy spec checked before the run directory exists, as far as that costs
    nothing: its kind, a replay file's actions, a server URL's host and port. Found by the
    workers, each would be a crashed episode of a run that had to be removed first."""
    from urllib.parse import urlsplit

    from robosafe.policies.base import ReplayPolicy, policy_kind

    kind = policy_kind(spec)
    if kind == "replay":
        ReplayPolicy(spec.removeprefix("replay:"))
    elif kind == "lerobot":
        from robosafe.policies.lerobot import read_checkpoint

        read_checkpoint(spec.removeprefix("lerobot:"))
    elif kind == "remote":
        try:
            url = urlsplit(spec)
            ok = bool(url.hostname) and url.port is not None
        except ValueError:  # a port that is not a number in 0..65535
            ok = False
        if not ok:
            raise RobosafeError(f"--policy {redact_url(spec)!r}: expected ws://HOST:PORT or "
                                "wss://HOST:PORT with a port in 1..65535")


# -- tasks --------------------------------------------------------------------------------------

def _tasks(req: RunRequest, spec: Any) -> tuple[dict[str, str], str | None]:
    """The run's tasks (task id -> file) and suite."""
    if not isinstance(req.tasks, TaskSelection):
        return dict(req.tasks), req.suite
    sel = req.tasks
    if sel.folder is not None and req.out is not None:
        from robosafe.outputs import check_outside

        # the run copies its tasks under OUT/tasks: inside the folder, the next --task-dir
        # run of it would find them as tasks of its own
        check_outside(Path(req.out), {"--task-dir folder": Path(sel.folder)})
    if spec.run_tasks == "files":
        return select_tasks(sel), sel.suite
    if sel.folder is not None:
        raise RobosafeError(f"--task-dir selects robosafe's CBDDL tasks; with --host {req.host} "
                            "choose --suite")
    if sel.level is not None or sel.files:
        raise RobosafeError(f"--level and --task select robosafe's CBDDL tasks; with --host "
                            f"{req.host} choose --suite and --task-id")
    from robosafe.hosts.registry import suite_tasks

    return suite_tasks(req.host, sel.suite, list(sel.task_ids) or None), sel.suite


def tasks_below(folder: Path) -> dict[str, str]:
    """task_id -> file for every ``*.bddl`` below ``folder``, sorted by path. The id is the
    path below the folder without the suffix, '.' for '/': VLA-Arena's levels reuse file
    names, so a stem alone would not tell them apart."""
    if not folder.is_dir():
        raise RobosafeError(f"--task-dir: {folder} is not a folder")
    files = sorted(p for p in folder.rglob("*.bddl") if p.is_file())
    if not files:
        raise RobosafeError(f"--task-dir: no *.bddl file below {folder}")
    tasks: dict[str, str] = {}
    for p in files:
        name = ".".join(p.relative_to(folder).with_suffix("").parts)
        if name in tasks:  # a/x.bddl and a.x.bddl: one id, and one of them would not run
            raise RobosafeError(f"two tasks named {name}: {tasks[name]} and {p}")
        tasks[name] = str(p)
    return tasks


def select_tasks(sel: TaskSelection) -> dict[str, str]:
    """task_id -> task file of a selection of robosafe's CBDDL tasks (run, collect, the
    probes)."""
    from robosafe.tasks.suites import suite_tasks

    tasks: dict[str, str] = {}
    if sel.suite:
        chosen = {k: str(v) for k, v in suite_tasks(sel.suite, sel.level).items()}
        unknown = sorted(set(sel.task_ids) - set(chosen))
        if unknown:
            raise RobosafeError(f"--task-id: {', '.join(unknown)} not in suite {sel.suite}"
                                + (f" level L{sel.level}" if sel.level is not None else ""))
        tasks.update({k: v for k, v in chosen.items() if not sel.task_ids or k in sel.task_ids})
    elif sel.level is not None or sel.task_ids:
        raise RobosafeError("--level and --task-id select tasks of a --suite")
    named = [(Path(t).stem, str(t)) for t in sel.files]
    named += list(tasks_below(Path(sel.folder)).items()) if sel.folder is not None else []
    for name, path in named:
        if name in tasks:
            raise RobosafeError(f"two tasks named {name}: {tasks[name]} and {path}")
        tasks[name] = path
    if not tasks:
        raise RobosafeError("nothing to run: give --suite NAME, --task FILE or --task-dir DIR")
    return tasks


# -- numbers as the command line writes them ------------------------------------------------------

def _ints(text: str, what: str, most: int, of: str) -> tuple[int, ...]:
    """``0,1,2`` or ``0-4`` -> a tuple of ints. An empty list (``,``, ``""``) or a range that
    runs backwards (``5-4``) is an error naming the option: taken as "no value" it used to
    fall back to the defaults without a word. A range is counted before it is expanded: more
    than ``most`` numbers (``of`` says what they are counted against) is refused, so
    ``0-999999999`` costs nothing."""
    try:
        if "-" in text and "," not in text:
            lo, hi = (int(x) for x in text.split("-", 1))
            if hi < lo:
                raise RobosafeError(f"{what}: {text!r} is an empty range (write LOW-HIGH with "
                                    "LOW <= HIGH)")
            _at_most(hi - lo + 1, text, what, most, of)
            return tuple(range(lo, hi + 1))
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise RobosafeError(f"{what}: expected numbers like 0,1,2 or 0-4, got {text!r}") from None
    if not values:
        raise RobosafeError(f"{what}: {text!r} lists no number (expected e.g. 0,1,2 or 0-4)")
    _at_most(len(values), text, what, most, of)
    return values


def _at_most(count: int, text: str, what: str, most: int, of: str) -> None:
    if count > most:
        raise BudgetError(f"{what}: {text!r} gives {count:,} numbers, more than {of} ({most:,})")


def seed_option(text: tuple[int, ...] | str | None, episodes: int | None = None
                ) -> tuple[int, ...]:
    """--seeds of run and collect: () (the default 0..N-1) only when the option is absent. One
    seed per episode (``episodes``, when known), each once."""
    if text is None:
        return ()
    if not isinstance(text, str):
        return _once(tuple(int(s) for s in text), "--seeds", "seed",
                     "each episode needs a seed of its own")
    most, of = ((episodes, f"the episodes per task (-n {episodes})") if episodes is not None
                else (MAX_EPISODES, "the episodes a run may hold"))
    return _once(_ints(text, "--seeds", most, of), "--seeds", "seed",
                 "each episode needs a seed of its own")


def _once(values: tuple[int, ...], what: str, noun: str, why: str) -> tuple[int, ...]:
    """``values``, refused when one is given twice: a seed or level twice is the same cells
    twice (one instance id for two episodes), which the paired tests refuse only after the run."""
    seen: set[int] = set()
    for v in values:
        if v in seen:
            raise RobosafeError(f"{what}: {noun} {v} is given twice; {why}")
        seen.add(v)
    return values


def _levels(given: tuple[int, ...] | str | None, what: str) -> tuple[int, ...]:
    """Perturbation levels (0..4), each once; absent: level 0 only."""
    if given is None:
        return (0,)
    text = given if isinstance(given, str) else ",".join(map(str, given))
    levels = _once(_ints(text, what, TOP_LEVEL + 1, f"the levels 0..{TOP_LEVEL}"), what,
                   "level", "each level is run once")
    bad = [v for v in levels if not 0 <= v <= TOP_LEVEL]
    if not levels or bad:
        raise RobosafeError(f"{what}: levels must be in 0..{TOP_LEVEL}, got {text!r}")
    return levels


# -- --until ------------------------------------------------------------------------------------

def _until(req: RunRequest, plan: RunPlan, stored: RunPlan | None) -> UntilPlan | None:
    """The --until plan, checked before any episode runs: the options themselves, the budget
    against the smallest sample that can decide, and the baseline run against the run asked
    for. Absent on --resume: the run's own plan, if it has one."""
    from robosafe.runner.until import baseline_outcomes, check_alongside

    u = req.until
    if u.rule is None:
        given = [name for name, v in (("--against", u.against), ("--until-metric", u.metric),
                                      ("--against-policy", u.against_policy),
                                      ("--alpha", u.alpha), ("--delta", u.delta),
                                      ("--two-sided/--one-sided", u.two_sided)) if v is not None]
        if given:
            raise RobosafeError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} "
                                "with --until")
        if stored is None or stored.until is None:
            return None
        until = stored.until
    else:
        mode, width = parse_until(u.rule)
        given = {"metric": u.metric, "alpha": u.alpha, "two_sided": u.two_sided}
        until = UntilPlan(mode=mode, budget=len(plan.cells()),
                          against=None if u.against is None else str(Path(u.against).resolve()),
                          width=width, delta=u.delta, baseline_policy=u.against_policy,
                          **{k: v for k, v in given.items() if v is not None})
    if until.baseline_policy is not None:
        check_policy_spec(until.baseline_policy)
        check_alongside(until, plan)
    elif until.mode == "decided":
        baseline_outcomes(until, plan)
    return until
