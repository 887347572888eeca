"""What a run evaluates: the :class:`RunPlan` (policy spec, host, the host's own typed options,
tasks, cells, shield settings, recording, the ``--until`` stopping rule), frozen and typed.

A plan is made by exactly one function, :func:`robosafe.runner.request.plan_run`, which checks
a request once; it is stored as run.json by :meth:`RunPlan.to_json` and read back (migrated:
older run.json files) by :meth:`RunPlan.from_json` only. Seeds are fixed by the plan, so two
policies evaluated with the same plan see the same initial states, perturbations and
instructions (paired comparisons need that).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from robosafe.budget import MAX_EPISODES, check_count, check_horizon, check_image_size
from robosafe.errors import RobosafeError
from robosafe.hosts.options import HostOptions, SimOptions
from robosafe.redact import redact_url
from robosafe.runner.shield import ShieldConfig
from robosafe.runner.until_plan import UntilPlan


def level_of(row: dict[str, Any], key: str) -> int:
    """A perturbation level column of an outcome row (empty = 0)."""
    try:
        return int(row.get(key) or 0)
    except (TypeError, ValueError):
        raise RobosafeError(f"outcome row {row.get('task_id')!r} episode "
                            f"{row.get('episode_idx')!r}: {key} {row.get(key)!r} is not an "
                            "integer level") from None


@dataclass(frozen=True)
class Cell:
    """One episode of a plan: task, episode index (its seed), language and visual level."""

    task_id: str
    episode_idx: int
    seed: int
    language_level: int = 0
    visual_level: int = 0

    @classmethod
    def of_row(cls, row: dict[str, Any]) -> Cell:
        """The cell an outcome row belongs to; one error line if the row cannot say."""
        try:
            return cls(str(row["task_id"]), int(row["episode_idx"]), int(row["seed"]),
                       level_of(row, "language_level"), level_of(row, "visual_level"))
        except (KeyError, TypeError, ValueError) as exc:
            raise RobosafeError(f"outcome row {row!r:.120}: cannot locate its episode "
                                f"({exc!r})") from None

    @property
    def instance_id(self) -> str:
        return f"seed{self.seed}-W{self.language_level}-V{self.visual_level}"

    @property
    def name(self) -> str:
        return (f"{self.task_id}__ep{self.episode_idx:03d}__W{self.language_level}"
                f"V{self.visual_level}")


@dataclass(frozen=True)
class Recording:
    """What each episode keeps beyond its trace: camera images (and their side), and with
    ``frames`` the robot state and camera videos per episode (``robosafe export lerobot``)."""

    images: bool = False
    image_size: int | None = None
    frames: bool = False


@dataclass(frozen=True)
class RunPlan:
    """One run, checked (make it with robosafe.runner.request.plan_run)."""

    policy: str
    tasks: dict[str, str]  # task id -> task file
    host: str = "robosafe"
    options: HostOptions = field(default_factory=SimOptions)
    episodes: int = 1
    seeds: tuple[int, ...] = (0,)  # one per episode index
    language_levels: tuple[int, ...] = (0,)
    visual_levels: tuple[int, ...] = (0,)
    horizon: int | None = None
    suite: str | None = None
    recording: Recording = field(default_factory=Recording)
    obs_adapter: str | None = None  # remote policies: adapters.yaml entry (default: the host's)
    # (xy metres, yaw degrees): objects placed off each seed's spots, a stream per episode index
    # (demonstrations "around" evaluation seeds: robosafe.audit.datasource)
    placement_jitter: tuple[float, ...] = ()
    shield: ShieldConfig = field(default_factory=ShieldConfig)
    until: UntilPlan | None = None
    checkpoint_ref: str = ""
    policy_name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def cells(self) -> list[Cell]:
        return [Cell(t, k, self.seeds[k], w, v) for t in sorted(self.tasks)
                for w in self.language_levels for v in self.visual_levels
                for k in range(self.episodes)]

    def identity(self) -> dict[str, Any]:
        """What must match for --resume: everything that decides the cells and episodes."""
        d = self.to_json()
        d["tasks"] = sorted(self.tasks)
        for k in ("extra", "policy_name"):
            d.pop(k)
        return d

    def identity_text(self) -> str:
        """:meth:`identity` as run.json writes it: equal settings are never "different" for a
        formatting reason (a tuple against a list, a NaN an older run.json holds)."""
        return json.dumps(self.identity(), sort_keys=True, default=str)

    def without_until(self, policy: str) -> RunPlan:
        """This plan's cells for another policy, with no stopping rule of its own (the
        baseline made alongside an ``--until`` run)."""
        return replace(self, policy=policy, policy_name="", until=None)

    def to_json(self) -> dict[str, Any]:
        """The plan as run.json stores it (flat, as it always has): credentials in a policy URL
        are masked (the connection gets them from the in-memory spec, RunDir.policy_spec)."""
        s = self.shield
        return {
            "policy": redact_url(self.policy), "tasks": dict(self.tasks), "host": self.host,
            "episodes": self.episodes, "seeds": list(self.seeds),
            "language_levels": list(self.language_levels),
            "visual_levels": list(self.visual_levels), "horizon": self.horizon,
            "suite": self.suite, "images": self.recording.images,
            "image_size": self.recording.image_size, "obs_adapter": self.obs_adapter,
            "record_frames": self.recording.frames,
            "placement_jitter": list(self.placement_jitter), **self.options.to_json(),
            "shield": s.mode, "shield_horizon": s.horizon, "shield_margin": s.margin,
            "shield_candidates": list(s.candidates), "shield_predictor": s.predictor,
            "shield_predictor_margin": s.predictor_margin,
            "until": self.until.to_dict() if self.until is not None else {},
            "checkpoint_ref": self.checkpoint_ref,
            "policy_name": redact_url(self.policy_name), "extra": dict(self.extra)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunPlan:
        """The plan of a run.json, migrated (older files lack later fields: their runs ran
        the defaults of the time, which :meth:`HostOptions.from_json` knows)."""
        from robosafe.hosts.registry import host_spec

        try:
            host = str(d.get("host", "robosafe"))
            episodes = int(d.get("episodes", 1))
            language, visual = (tuple(d.get(k, (0,))) for k in ("language_levels",
                                                                 "visual_levels"))
            # a run.json is a file: its sizes are priced before its seeds are listed
            check_sizes(len(d["tasks"]), len(language) * len(visual), episodes,
                        d.get("horizon"), d.get("image_size"))
            seeds = tuple(int(x) for x in d.get("seeds") or range(episodes))
            dflt = ShieldConfig()
            shield = ShieldConfig(
                d.get("shield", dflt.mode), int(d.get("shield_horizon", dflt.horizon)),
                float(d.get("shield_margin", dflt.margin)),
                tuple(d.get("shield_candidates", dflt.candidates)),
                predictor=d.get("shield_predictor", dflt.predictor),
                predictor_margin=d.get("shield_predictor_margin"))
            until = d.get("until") or None
            plan = cls(
                policy=str(d["policy"]), tasks=dict(d["tasks"]), host=host,
                options=host_spec(host).options_class().from_json(d), episodes=episodes,
                seeds=seeds, language_levels=language, visual_levels=visual,
                horizon=d.get("horizon"),
                suite=d.get("suite"),
                recording=Recording(bool(d.get("images", False)), d.get("image_size"),
                                    bool(d.get("record_frames", False))),
                obs_adapter=d.get("obs_adapter"),
                placement_jitter=tuple(d.get("placement_jitter", ())), shield=shield,
                until=UntilPlan.from_dict(until) if until else None,
                checkpoint_ref=str(d.get("checkpoint_ref", "")),
                policy_name=str(d.get("policy_name", "")), extra=dict(d.get("extra", {})))
        except (KeyError, TypeError, ValueError) as exc:
            raise RobosafeError(f"run.json: not a run configuration robosafe can read ({exc!r})"
                                ) from None
        if len(plan.seeds) != plan.episodes:
            raise RobosafeError(f"run.json: {len(plan.seeds)} seeds for {plan.episodes} episodes")
        return plan


def check_sizes(tasks: int, levels: int, episodes: int, horizon: int | None,
                image_size: int | None) -> None:
    """Every size of a run priced before anything is built (robosafe.budget): a run of a
    billion episodes or steps is refused here, not found out by running out of memory."""
    if episodes < 1:
        raise RobosafeError(f"episodes must be at least 1, got {episodes}")
    check_count("episodes of the run (tasks x levels x -n)", tasks * levels * episodes,
                MAX_EPISODES, "each is an outcome row and a trace file, and the run lists them all")
    if horizon is not None:
        check_horizon(horizon)
    if image_size is not None:
        check_image_size(image_size, "--image-size")


def robosafe_version() -> str:
    """The installed robosafe's version, as run.json records it."""
    try:
        return version("robosafe")
    except PackageNotFoundError:  # running from a source tree
        return "unknown"


def config_text(config: dict[str, Any]) -> str:
    """run.json's text: strict JSON, so a number that is not one (NaN, inf) is refused here
    rather than written as a bare ``NaN`` that no JSON reader (nor ``--resume``) accepts."""
    try:
        return json.dumps(config, indent=2, sort_keys=True, allow_nan=False)
    except ValueError as exc:
        bad = sorted(k for k, v in config.items()
                     if isinstance(v, float) and not math.isfinite(v))
        raise RobosafeError("the run configuration holds a number JSON cannot write"
                            + (f" ({', '.join(bad)})" if bad else f" ({exc})")) from None
