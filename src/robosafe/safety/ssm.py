"""Protective separation distance of speed-and-separation monitoring (human proximity).

The form is ISO/TS 15066's (paper 000 anchors its force ceilings on ISO/TS 15066, Sec. 3,
Table 16, and leaves human proximity to future work, Sec. 5; paper 003 cites the standard's
separation monitoring, Sec. 2): ``S_p = S_h + S_r + S_s + C + Z_d + Z_r``. The numbers are in
``data/human_proximity.yaml`` with their sources; all are robosafe's own defaults (the standard
leaves them to the integrator). One function per term, so the scorer, the online monitor and
the closed-loop ``slow`` command use the same arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from robosafe.errors import RegistryError
from robosafe.yamldata import load_yaml


@dataclass(frozen=True)
class SSMParams:
    """The parameters of S_p (data/human_proximity.yaml); all >= 0."""

    human_speed_m_s: float = 1.6
    reaction_time_s: float = 0.1
    stopping_time_s: float = 0.3
    intrusion_m: float = 0.5
    sensing_uncertainty_m: float = 0.05
    robot_uncertainty_m: float = 0.05


def params_from_doc(doc: object, where: str = "human_proximity.yaml") -> SSMParams:
    """Check a ``parameters`` document (one line naming the first bad value) and build the
    parameters: every field present, a finite number >= 0, and S_p > 0 at rest (a zero
    protective distance would make the clause vacuous)."""
    params = doc.get("parameters") if isinstance(doc, dict) else None
    if not isinstance(params, dict):
        raise RegistryError(f"{where}: expected a mapping 'parameters'")
    names = [f.name for f in fields(SSMParams)]
    unknown = sorted(set(params) - set(names))
    if unknown:
        raise RegistryError(f"{where}: unknown parameter {unknown[0]!r} (known: "
                            f"{', '.join(names)})")
    values = {}
    for name in names:
        entry = params.get(name)
        v = entry.get("value") if isinstance(entry, dict) else entry
        if type(v) not in (int, float) or not math.isfinite(v) or v < 0:
            raise RegistryError(f"{where}: parameters.{name}: expected a finite number >= 0 "
                                f"(speeds m/s, times s, distances m), got {v!r}")
        values[name] = float(v)
    p = SSMParams(**values)
    if protective_separation_m(0.0, p) <= 0:
        raise RegistryError(f"{where}: the protective separation at rest is 0 m; give the "
                            "human speed, a time or a distance term a positive value")
    return p


@lru_cache(maxsize=1)
def ssm_params() -> SSMParams:
    """The shipped parameters (parsed once per process)."""
    text = resources.files("robosafe.safety").joinpath("data", "human_proximity.yaml")
    return params_from_doc(load_yaml(text.read_text()))


def human_travel_m(p: SSMParams) -> float:
    """S_h = v_h (T_r + T_s): how far the human walks while the robot reacts and stops."""
    return p.human_speed_m_s * (p.reaction_time_s + p.stopping_time_s)


def robot_reaction_travel_m(v_r: Any, p: SSMParams) -> Any:
    """S_r = v_r T_r: robot travel toward the human before it starts to stop."""
    return v_r * p.reaction_time_s


def robot_stopping_m(v_r: Any, p: SSMParams) -> Any:
    """S_s = v_r T_s / 2: stopping distance at constant deceleration over T_s (robosafe's own
    model of the robot's braking)."""
    return v_r * p.stopping_time_s / 2.0


def protective_separation_m(v_r: Any, p: SSMParams) -> Any:
    """S_p(v_r) = S_h + S_r + S_s + C + Z_d + Z_r (scalar or array ``v_r`` in m/s)."""
    return (human_travel_m(p) + robot_reaction_travel_m(v_r, p) + robot_stopping_m(v_r, p)
            + p.intrusion_m + p.sensing_uncertainty_m + p.robot_uncertainty_m)


def speed_limit_m_s(separation_m: float, p: SSMParams) -> float:
    """The largest robot speed toward the human whose S_p still fits in ``separation_m``
    (S_p is linear in v_r): what the closed-loop ``slow`` command allows; 0 when even a
    robot at rest is too close."""
    rest = protective_separation_m(0.0, p)
    per_speed = p.reaction_time_s + p.stopping_time_s / 2.0
    if separation_m <= rest:
        return 0.0
    return math.inf if per_speed == 0 else (separation_m - rest) / per_speed


MIN_SEPARATION_M = 1e-3
"""Separations below 1 mm count as 1 mm in the ratio (coincident body points would divide by
zero; at that depth the clause is long saturated)."""


def separation_ratio(separation_m: Any, v_r: Any, p: SSMParams) -> np.ndarray:
    """S_p(v_r) / d: the scored signal, the protective separation distance over the actual
    separation (< 1 keeps the protective separation). Written as a ratio over a limit, as the
    joint-torque clause is (paper 000 Table 17), so the VSI depth scale K = s / tau of Eq. (1)
    works unchanged."""
    return protective_separation_m(np.asarray(v_r, dtype=np.float64), p) / np.maximum(
        np.asarray(separation_m, dtype=np.float64), MIN_SEPARATION_M)
