"""When a ``robosafe run --until`` stops (:class:`UntilPlan`, part of the run plan and of
run.json's ``until``): the mode, metric, alpha and budget, checked when the plan is made.
Running it is :mod:`robosafe.runner.until`."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from robosafe.errors import RobosafeError
from robosafe.stats.sequential import check_alpha, smallest_decidable, smallest_width_sample

MODES = ("decided", "width")
UNTIL_METRICS = {"success": ("success",), "safe": ("safe",), "both": ("success", "safe")}


def parse_until(text: str) -> tuple[str, float | None]:
    """``decided`` or ``width:W`` (0 < W < 1) -> (mode, width)."""
    t = text.strip()
    if t == "decided":
        return "decided", None
    head, sep, tail = t.partition(":")
    if head == "width" and sep:
        try:
            w = float(tail)
        except ValueError:
            w = math.nan
        if 0.0 < w < 1.0:
            return "width", w
    raise RobosafeError(f"--until: expected 'decided' or 'width:W' with W in (0, 1) (e.g. "
                        f"width:0.1), got {text!r}")


@dataclass(frozen=True)
class UntilPlan:
    """When an ``--until`` run stops (stored in run.json's config as ``until``).

    ``budget``: the most episodes (pairs) the run may use, its cell count, fixed before the
    first one; ``against``: the baseline run directory (mode ``decided``); ``alpha``: the
    chance of any wrong decision, split over the metrics (alpha / m each)."""

    mode: str
    budget: int
    metric: str = "success"
    alpha: float = 0.05
    against: str | None = None
    width: float | None = None
    delta: float | None = None
    two_sided: bool = True
    # the baseline's policy when this run also makes the baseline run, alternately
    baseline_policy: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise RobosafeError(f"--until: unknown mode {self.mode!r}")
        if self.metric not in UNTIL_METRICS:
            raise RobosafeError(f"--until-metric: {self.metric!r} is not one of "
                                f"{', '.join(UNTIL_METRICS)}")
        check_alpha(self.alpha)
        if self.mode == "decided" and not self.against:
            raise RobosafeError("--until decided compares with a baseline run: give --against "
                                "RUN_DIR (or --until width:W for one policy)")
        if self.mode == "width" and self.against:
            raise RobosafeError("--until width:W measures one policy; --against applies to "
                                "--until decided")
        if self.baseline_policy is not None and self.mode != "decided":
            raise RobosafeError("--against-policy applies to --until decided")
        if self.mode == "width" and self.delta is not None:
            raise RobosafeError("--delta applies to --until decided")
        least = self.smallest_budget()
        if self.budget < least:
            raise RobosafeError(
                f"a budget of {self.budget} episodes can never decide ("
                + (f"interval width {self.width:g}" if self.mode == "width" else "compare")
                + f" at alpha={self.alpha:g}{' per metric' if len(self.metrics) > 1 else ''}"
                f"): the smallest decidable sample is {least}; raise -n")

    @property
    def metrics(self) -> tuple[str, ...]:
        return UNTIL_METRICS[self.metric]

    @property
    def alpha_each(self) -> float:
        return self.alpha / len(self.metrics)

    def smallest_budget(self) -> int:
        """The fewest episodes that can decide under this plan (stats.sequential)."""
        if self.mode == "width":
            return smallest_width_sample(self.alpha_each, self.width)
        return smallest_decidable(self.alpha_each, self.two_sided, budget=self.budget)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> UntilPlan:
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})
