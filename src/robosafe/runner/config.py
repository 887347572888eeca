"""What a run evaluates (:class:`RunConfig`, stored as run.json): policy, tasks, episodes x seeds
x perturbation levels, the host's options, the shield and recording settings. Seeds are fixed by
the config, so two policies evaluated with the same config see the same initial states,
perturbations and instructions (paired comparisons need that)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from robosafe.budget import MAX_EPISODES, check_count, check_horizon, check_image_size
from robosafe.errors import RobosafeError
from robosafe.redact import redact_url
from robosafe.runner.rundir import Cell, RunDir

#: the robosafe host's arm controllers (robosafe.sim.controller.CONTROLLERS, named here so the
#: CLI checks --controller without importing the simulator)
CONTROLLERS = ("compiled", "robosuite")


@dataclass(frozen=True)
class RunConfig:
    """What a run evaluates; stored as run.json (with the task files copied beside it)."""

    policy: str
    tasks: dict[str, str]  # task_id -> task file
    host: str = "robosafe"  # a run host of robosafe.hosts.registry (robosafe, libero)
    episodes: int = 1
    seeds: tuple[int, ...] = ()  # one per episode index; default 0..episodes-1
    language_levels: tuple[int, ...] = (0,)
    visual_levels: tuple[int, ...] = (0,)
    horizon: int | None = None
    suite: str | None = None
    images: bool = False
    image_size: int | None = None
    obs_adapter: str | None = None  # remote policies: adapters.yaml entry (default: the host's)
    record_frames: bool = False  # robot state + camera mp4s per episode (LeRobot export)
    # (xy metres, yaw degrees): objects placed off each seed's spots, a stream per episode index
    # (demonstrations "around" evaluation seeds: robosafe.audit.datasource)
    placement_jitter: tuple[float, ...] = ()
    # robosafe host: "stand-in" (procedural), "libero" or "vla-arena" (what their files cover); the
    # libero host always uses LIBERO's own assets, and run.json says so (__post_init__)
    assets: str = "stand-in"
    # robosafe host: "vla-arena" books costs, episode length and success as VLA-Arena's code
    # does (robosafe.tasks.cost), so cumulative_cost is the number VLA-Arena would report
    cost_mode: str = "robosafe"
    # simulator-in-the-loop shield (robosafe.runner.shield): off, monitor or filter
    shield: str = "off"
    shield_horizon: int = 5
    shield_margin: float = 0.0
    shield_candidates: tuple[str, ...] = ("scale", "lift", "hold", "retreat", "open")
    # what the shield predicts with: "sim" (a shadow env) or "kinematic" (robosafe.runner.predict),
    # and the kinematic one's obstacle margin (m; None: its data file's)
    shield_predictor: str = "sim"
    shield_predictor_margin: float | None = None
    # robosafe host: the arm controller, robosuite's own (Python) or robosafe's compiled one
    # (robosafe.sim.controller: the same torques within 1e-9 per substep, several times faster)
    controller: str = "compiled"  # one of CONTROLLERS
    # cost mode vla-arena: whose episode rules (HazardAvoidance scale, safety threshold) give
    # the reported cost, one of the wheel's evaluators (robosafe.tasks.cost.EVALUATORS);
    # None in robosafe's own mode
    arena_evaluator: str | None = None
    # cost mode vla-arena: task_id -> VLA-Arena's (suite, level), read from the folders of the
    # file given (the run keeps a copy under tasks/, whose path names neither)
    arena_tasks: dict[str, tuple[str | None, int | None]] = field(default_factory=dict)
    # ``robosafe run --until``: when the run stops early (robosafe.runner.until.UntilPlan as
    # a dict; empty: the run runs every cell)
    until: dict[str, Any] = field(default_factory=dict)
    checkpoint_ref: str = ""
    policy_name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from robosafe.hosts.registry import host_spec

        self._check_sizes()
        # settings a host decides itself (LIBERO: its own assets and robosuite's controller,
        # whatever --assets / --controller say): run.json records what the episodes used
        for key, value in host_spec(self.host).fixed.items():
            object.__setattr__(self, key, value)
        if self.cost_mode == "vla-arena":
            from robosafe.tasks.cost import arena_suite, evaluator_name

            # an older run.json without the field ran openvla's rules: resume still matches
            object.__setattr__(self, "arena_evaluator", evaluator_name(self.arena_evaluator))
            if not self.arena_tasks:
                object.__setattr__(self, "arena_tasks",
                                   {k: arena_suite(v) for k, v in self.tasks.items()})
        elif self.arena_evaluator is not None:
            raise RobosafeError("an arena evaluator applies to cost mode vla-arena only")

    def _check_sizes(self) -> None:
        """Every size of the run priced before anything is built (robosafe.budget): a run of
        a billion episodes or steps is refused here, not found out by running out of memory."""
        if self.episodes < 1:
            raise RobosafeError(f"episodes must be at least 1, got {self.episodes}")
        check_count("episodes of the run (tasks x levels x -n)",
                    len(self.tasks) * len(self.language_levels) * len(self.visual_levels)
                    * self.episodes, MAX_EPISODES,
                    "each is an outcome row and a trace file, and the run lists them all")
        if self.horizon is not None:
            check_horizon(self.horizon)
        if self.image_size is not None:
            check_image_size(self.image_size, "--image-size")

    def seed_list(self) -> list[int]:
        seeds = list(self.seeds) or list(range(self.episodes))
        if len(seeds) != self.episodes:
            raise RobosafeError(f"--seeds gives {len(seeds)} seeds for {self.episodes} "
                                "episodes; give one per episode")
        return seeds

    def cells(self) -> list[Cell]:
        seeds = self.seed_list()
        return [Cell(t, k, seeds[k], w, v) for t in sorted(self.tasks)
                for w in self.language_levels for v in self.visual_levels
                for k in range(self.episodes)]

    def identity(self) -> dict[str, Any]:
        """What must match for --resume: everything that decides the cells and episodes."""
        d = self.to_json()
        d["tasks"] = sorted(self.tasks)
        for k in ("extra", "policy_name"):
            d.pop(k)
        return d

    def to_json(self) -> dict[str, Any]:
        """The config as stored in run.json: credentials in a policy URL are masked (the
        connection gets them from the in-memory spec, :attr:`RunDir.policy_spec`)."""
        d = asdict(self)
        d["seeds"] = self.seed_list()
        d["policy"] = redact_url(self.policy)
        d["policy_name"] = redact_url(self.policy_name)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunConfig:
        keys = cls.__dataclass_fields__
        kw = {k: d[k] for k in keys if k in d}
        # run.json from before the controller choice: its episodes ran robosuite's controller
        kw.setdefault("controller", "robosuite")
        for k in ("seeds", "language_levels", "visual_levels", "placement_jitter",
                  "shield_candidates"):
            if k in kw:
                kw[k] = tuple(kw[k])
        if "arena_tasks" in kw:  # JSON lists back to (suite, level)
            kw["arena_tasks"] = {k: tuple(v) for k, v in kw["arena_tasks"].items()}
        return cls(**kw)


def read_plan(run: RunDir) -> RunConfig:
    """The run's config from its run.json, migrated (:meth:`RunConfig.from_json`): how every
    part of the runner reads what a run evaluates."""
    return RunConfig.from_json(run.config)


def robosafe_version() -> str:
    try:
        return version("robosafe")
    except PackageNotFoundError:  # running from a source tree
        return "unknown"


def shield_config(cfg: RunConfig) -> Any:
    """The run's shield settings as the shield takes them (robosafe.runner.shield.ShieldConfig,
    which checks them: the driver checks them with the shield off too, since run.json records
    them)."""
    from robosafe.runner.shield import ShieldConfig

    return ShieldConfig(cfg.shield, cfg.shield_horizon, cfg.shield_margin, cfg.shield_candidates,
                        predictor=cfg.shield_predictor,
                        predictor_margin=cfg.shield_predictor_margin)


# -- the host's options, checked once ---------------------------------------------------------------
# Each run option a host may or may not take is checked here, against the host registry
# (robosafe.hosts.data/registry.yaml: what a host supports is looked up, never branched on its
# name), before anything is built: by `robosafe run` as the options are read, and by the driver
# (runner.run.prepare) for every run, however it was asked for (collect, demo, the audits).

ASSET_SOURCES = ("stand-in", "libero", "vla-arena")


def run_host(host: str) -> Any:
    """The registry entry of a `robosafe run` host (robosafe.hosts.registry), else one error."""
    from robosafe.hosts.registry import host_spec, run_hosts

    if host not in run_hosts():
        raise RobosafeError(f"--host: unknown host {host!r} ({' or '.join(run_hosts())})")
    return host_spec(host)


def check_assets(assets: str, host: str) -> str:
    """--assets: a known source the host takes, installed (one line naming the extra or the
    variable, before any episode)."""
    if assets not in ASSET_SOURCES:
        raise RobosafeError(f"--assets: {assets!r} is not stand-in, libero or vla-arena")
    if assets != "stand-in" and not run_host(host).supports("assets"):
        raise RobosafeError(f"--assets chooses robosafe's own simulator assets; the {host} host "
                            "always has its own")
    if assets == "libero":
        from robosafe.sim.libero_assets import assets_root

        assets_root()
    if assets == "vla-arena":
        from robosafe.sim.libero_assets import arena_root

        arena_root()
    return assets


def check_cost_mode(mode: str, host: str) -> str:
    from robosafe.tasks.cost import MODES

    if mode not in MODES:
        raise RobosafeError(f"--cost-mode: {mode!r} is not one of {', '.join(MODES)}")
    if mode != "robosafe" and not run_host(host).supports("cost_mode"):
        raise RobosafeError(f"--cost-mode applies to CBDDL costs in robosafe's simulator; the "
                            f"{host} host's tasks have none")
    return mode


def check_controller(name: str, host: str) -> str:
    if name not in CONTROLLERS:
        raise RobosafeError(f"--controller: {name!r} is not one of {', '.join(CONTROLLERS)}")
    if name == "compiled" and not run_host(host).supports("controller"):
        raise RobosafeError(f"--controller compiled drives robosafe's simulator; the {host} "
                            "host runs its own controller")
    return name


def check_arena_evaluator(evaluator: str | None, cost_mode: str) -> str | None:
    from robosafe.tasks.cost import EVALUATORS

    if evaluator is None:
        return None
    if cost_mode != "vla-arena":
        raise RobosafeError("--arena-evaluator applies with --cost-mode vla-arena")
    if evaluator not in EVALUATORS:
        raise RobosafeError(f"--arena-evaluator: {evaluator!r} is not one of "
                            f"{', '.join(EVALUATORS)}")
    return evaluator


def check_host_options(cfg: RunConfig) -> None:
    """The host's options of ``cfg`` (a host decides its ``fixed`` ones itself)."""
    fixed = run_host(cfg.host).fixed
    if "assets" not in fixed:
        check_assets(cfg.assets, cfg.host)
    check_cost_mode(cfg.cost_mode, cfg.host)
    if "controller" not in fixed:
        check_controller(cfg.controller, cfg.host)
