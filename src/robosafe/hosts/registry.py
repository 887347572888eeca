"""The host registry: ``make_env(host, task, **options)`` for every host robosafe runs episodes
in, and what each host supports, as data (``data/registry.yaml``).

The runner, replay, collect, export, the CLI and audit make envs and ask what a host supports
here only, so no module outside :mod:`robosafe.hosts` branches on a host's name. Importing this
module imports no simulator: a host's module is imported when its first env is made.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from robosafe.errors import RegistryError, RobosafeError
from robosafe.hosts.contract import HostEnv
from robosafe.hosts.options import HostOptions
from robosafe.yamldata import load_yaml

FEATURES = ("levels", "placement_jitter", "state", "kinematic")
TASK_KINDS = ("file", "id", "name")


@dataclass(frozen=True)
class HostSpec:
    """One ``data/registry.yaml`` entry (its header documents the fields)."""

    name: str
    env: str
    summary: str
    task: str
    benchmark: str | None = None
    run_tasks: str | None = None
    run_options: str = "robosafe.hosts.options:HostOptions"
    options: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    needs_suite: bool = False

    def supports(self, feature: str) -> bool:
        if feature not in FEATURES:
            raise ValueError(f"unknown host feature {feature!r}")
        return feature in self.features

    def select(self, options: dict[str, Any]) -> dict[str, Any]:
        """The per-episode keywords this host's env takes, of ``options``."""
        return {k: v for k, v in options.items() if k in self.options}

    def options_class(self) -> type[HostOptions]:
        """The class of this host's own run options (robosafe.hosts.options; light to import)."""
        return _load(self.run_options)


def _load(obj: str) -> Any:
    module, _, name = obj.partition(":")
    return getattr(importlib.import_module(module), name)


@cache
def hosts() -> dict[str, HostSpec]:
    """Every registered host, checked."""
    raw = load_yaml(resources.files("robosafe.hosts").joinpath("data", "registry.yaml")
                    .read_text("utf-8"))
    out = {}
    for name, entry in raw.items():
        where = f"hosts/data/registry.yaml: {name}"
        try:
            spec = HostSpec(name=name, **{k: tuple(v) if isinstance(v, list) else v
                                          for k, v in entry.items()})
        except TypeError as exc:
            raise RegistryError(f"{where}: {exc}") from None
        bad = [f for f in spec.features if f not in FEATURES]
        if (spec.task not in TASK_KINDS or bad or ":" not in spec.env
                or not spec.run_options.startswith("robosafe.hosts.options:")):
            raise RegistryError(f"{where}: task must be one of {', '.join(TASK_KINDS)}, "
                                f"features of {', '.join(FEATURES)}, env module:Class, "
                                "run_options robosafe.hosts.options:Class")
        out[name] = spec
    return out


def host_spec(host: str) -> HostSpec:
    """The registry entry of ``host``; an unknown host is one error naming the known ones."""
    table = hosts()
    if host not in table:
        raise RobosafeError(f"unknown host {host!r} (known: {', '.join(table)})")
    return table[host]


def run_hosts() -> tuple[str, ...]:
    """Hosts `robosafe run` evaluates in (those that say how tasks are chosen)."""
    return tuple(h for h, s in hosts().items() if s.run_tasks is not None)


def suite_tasks(host: str, suite: str | None, task_ids: list[str] | None) -> dict[str, str]:
    """``{task id: file}`` of a host suite (hosts whose ``run_tasks`` lists a suite's)."""
    spec = host_spec(host)
    if spec.run_tasks in (None, "files"):
        raise RobosafeError(f"host {host} has no task suites of its own")
    return _load(spec.run_tasks)(suite, task_ids)


def make_env(host: str, task: Any, **options: Any) -> HostEnv:
    """A host env for ``task`` (a task file or parsed task, a suite's task id, or an
    environment name: the entry's ``task``) with the host's own keyword ``options``."""
    spec = host_spec(host)
    if spec.needs_suite and not isinstance(options.get("suite"), str):
        raise RobosafeError(f"host {host} needs suite= (the suite task {task!r} belongs to)")
    return _load(spec.env)(task, **options)
