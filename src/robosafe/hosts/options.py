"""Each host's own run options, typed and validating themselves (the registry's ``run_options``
names the class of each host). A run plan (robosafe.runner.plan.RunPlan) holds one; run.json
stores its fields flat, as it always has (``assets``, ``cost_mode``, ``controller``,
``arena_evaluator``, ``arena_tasks``), so a host that decides one itself (LIBERO: its own
meshes and robosuite's controller) records what its episodes used.

``preflight`` is the host's check of one task before any episode: it reads the task as the host
will (robosafe's simulator parses and validates a CBDDL file) and gives its tags when they are
known without building a scene, so the shield can refuse a task it could not monitor.

Importing this module imports no simulator."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from robosafe.errors import RobosafeError
from robosafe.yamldata import sim_choices

if TYPE_CHECKING:
    from robosafe.trace.episode import TaskTags

ASSET_SOURCES = tuple(sim_choices()["asset_sources"])
CONTROLLERS = tuple(sim_choices()["controllers"])
DEFAULT_CONTROLLER: str = sim_choices()["default_controller"]


@dataclass(frozen=True)
class OptionRequest:
    """The host options a run asks for, unchecked (None: not given, the host's default)."""

    assets: str | None = None
    cost_mode: str | None = None
    controller: str | None = None
    arena_evaluator: str | None = None


@dataclass(frozen=True)
class HostOptions:
    """What every host's options class offers (this one: a host with no options of its own)."""

    host: ClassVar[str] = ""

    @classmethod
    def build(cls, ask: OptionRequest, tasks: dict[str, str], *, installed: bool = True
              ) -> HostOptions:
        """The options of ``ask`` for a run of ``tasks``, checked; ``installed``: also that
        what they name is there (False when a stored run is read back)."""
        refuse_foreign(ask, cls.host)
        return cls()

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> HostOptions:
        """The options as run.json stores them, migrated (not checked against this machine)."""
        return cls.build(OptionRequest(), {}, installed=False)

    def to_json(self) -> dict[str, Any]:
        """run.json's flat fields (every host writes them all: what its episodes used; a host
        with none of robosafe's simulator's options writes that simulator's defaults)."""
        return SimOptions().to_json()

    def env_keywords(self, task_id: str) -> dict[str, Any]:
        """The keywords the host's env takes from these options, for task ``task_id``."""
        return {}

    def preflight(self, task_id: str, path: str) -> TaskTags | None:
        """Check task ``task_id`` (its file, for a host that runs task files) as the host will
        read it; its tags when known before an episode (None: the host learns them when it
        builds the task's scene)."""
        return None


def refuse_foreign(ask: OptionRequest, host: str) -> None:
    """robosafe's simulator's options, refused for a host that takes none of them (one line
    each; the simulator's defaults are accepted, as the command line has always passed them)."""
    if ask.assets not in (None, "stand-in"):
        raise RobosafeError(f"--assets chooses robosafe's own simulator assets; the {host} host "
                            "always has its own")
    if ask.cost_mode not in (None, "robosafe"):
        raise RobosafeError(f"--cost-mode applies to CBDDL costs in robosafe's simulator; the "
                            f"{host} host's tasks have none")
    if ask.controller == "compiled":
        raise RobosafeError(f"--controller compiled drives robosafe's simulator; the {host} "
                            "host runs its own controller")
    if ask.arena_evaluator is not None:
        raise RobosafeError("--arena-evaluator applies with --cost-mode vla-arena")
    _known(ask)


def _known(ask: OptionRequest) -> None:
    from robosafe.tasks.cost import MODES

    if ask.assets is not None and ask.assets not in ASSET_SOURCES:
        raise RobosafeError(f"--assets: {ask.assets!r} is not stand-in, libero or vla-arena")
    if ask.cost_mode is not None and ask.cost_mode not in MODES:
        raise RobosafeError(f"--cost-mode: {ask.cost_mode!r} is not one of {', '.join(MODES)}")
    if ask.controller is not None and ask.controller not in CONTROLLERS:
        raise RobosafeError(f"--controller: {ask.controller!r} is not one of "
                            f"{', '.join(CONTROLLERS)}")


@dataclass(frozen=True)
class SimOptions(HostOptions):
    """robosafe's simulator (CBDDL task files)."""

    host: ClassVar[str] = "robosafe"

    #: "stand-in" (procedural), "libero" or "vla-arena" (what their files cover)
    assets: str = "stand-in"
    #: "vla-arena" books costs, episode length and success as VLA-Arena's code does
    #: (robosafe.tasks.cost), so cumulative_cost is the number VLA-Arena would report
    cost_mode: str = "robosafe"
    #: the arm controller (robosafe.sim.choices.CONTROLLERS)
    controller: str = DEFAULT_CONTROLLER
    #: cost mode vla-arena: whose episode rules give the reported cost
    #: (robosafe.tasks.cost.EVALUATORS); None in robosafe's own mode
    arena_evaluator: str | None = None
    #: cost mode vla-arena: task id -> VLA-Arena's (suite, level), read from the folders of
    #: the file given (the run keeps a copy under tasks/, whose path names neither)
    arena_tasks: dict[str, tuple[str | None, int | None]] = field(default_factory=dict)

    @classmethod
    def build(cls, ask: OptionRequest, tasks: dict[str, str], *, installed: bool = True
              ) -> SimOptions:
        from robosafe.tasks.cost import EVALUATORS, arena_suite, evaluator_name

        for name in ("assets", "cost_mode", "controller", "arena_evaluator"):
            value = getattr(ask, name)
            if value is not None and not isinstance(value, str):
                raise RobosafeError(f"{name}: expected a name, got {value!r:.60}")
        _known(ask)
        assets = ask.assets or cls.assets
        cost_mode = ask.cost_mode or cls.cost_mode
        if installed and assets == "libero":
            from robosafe.sim.libero_assets import assets_root

            assets_root()
        if installed and assets == "vla-arena":
            from robosafe.sim.libero_assets import arena_root

            arena_root()
        evaluator, arena_tasks = None, {}
        if cost_mode == "vla-arena":
            if ask.arena_evaluator is not None and ask.arena_evaluator not in EVALUATORS:
                raise RobosafeError(f"--arena-evaluator: {ask.arena_evaluator!r} is not one of "
                                    f"{', '.join(EVALUATORS)}")
            # an older run.json without the field ran openvla's rules: resume still matches
            evaluator = evaluator_name(ask.arena_evaluator)
            arena_tasks = {k: arena_suite(v) for k, v in tasks.items()}
        elif ask.arena_evaluator is not None:
            raise RobosafeError("--arena-evaluator applies with --cost-mode vla-arena")
        return cls(assets, cost_mode, ask.controller or cls.controller, evaluator, arena_tasks)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SimOptions:
        # run.json from before the controller choice: its episodes ran robosuite's controller
        ask = OptionRequest(d.get("assets"), d.get("cost_mode"),
                            d.get("controller") or "robosuite", d.get("arena_evaluator"))
        opts = cls.build(ask, {}, installed=False)
        stored = _arena_tasks(d.get("arena_tasks") or {})
        return cls(opts.assets, opts.cost_mode, opts.controller, opts.arena_evaluator,
                   stored if opts.cost_mode == "vla-arena" else {})

    def to_json(self) -> dict[str, Any]:
        return {"assets": self.assets, "cost_mode": self.cost_mode,
                "controller": self.controller, "arena_evaluator": self.arena_evaluator,
                "arena_tasks": {k: list(v) for k, v in self.arena_tasks.items()}}

    def env_keywords(self, task_id: str) -> dict[str, Any]:
        return {"assets": self.assets, "cost_mode": self.cost_mode,
                "controller": self.controller, "arena_evaluator": self.arena_evaluator,
                "arena_task": self.arena_tasks.get(task_id)}

    def preflight(self, task_id: str, path: str) -> TaskTags | None:
        """The file parsed and validated (an error names the user's file, where a worker's
        would name its temporary copy); its tags as the simulator's host gives them."""
        from robosafe.sim.tags import task_tags
        from robosafe.tasks.parser import parse_file
        from robosafe.tasks.validate import validate_task

        if not Path(path).is_file():
            raise RobosafeError(f"task file not found: {path}")
        problem = parse_file(path)
        errors = validate_task(problem, str(path))
        if errors:
            raise errors[0]
        return task_tags(problem)


def _arena_tasks(given: Any) -> dict[str, tuple[str | None, int | None]]:
    """run.json's (or a dataset's) task id -> VLA-Arena (suite, level), checked: a suite is a
    name or null, a level a whole number or null."""
    try:
        out = {str(k): (v[0], v[1]) for k, v in given.items() if len(v) == 2}
    except (AttributeError, TypeError, IndexError, KeyError):
        out = None
    if out is None or len(out) != len(given) or not all(
            (s is None or isinstance(s, str))
            and (lv is None or (isinstance(lv, int) and not isinstance(lv, bool)))
            for s, lv in out.values()):
        raise RobosafeError("arena_tasks: expected task id -> [suite name or null, level or null]")
    return out


@dataclass(frozen=True)
class LiberoOptions(HostOptions):
    """LIBERO's own envs: its scenes from its own meshes, robosuite's controller, no CBDDL
    costs, whatever --assets / --controller would choose for robosafe's simulator."""

    host: ClassVar[str] = "libero"

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "assets": "libero", "controller": "robosuite"}


@dataclass(frozen=True)
class RobosuiteOptions(HostOptions):
    """robosuite's own tasks: nothing of robosafe's simulator applies."""

    host: ClassVar[str] = "robosuite"
