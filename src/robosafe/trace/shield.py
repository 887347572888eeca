"""The safety shield's record in a trace: ``meta.shield`` (robosafe's own entry; App. B leaves
``meta`` to the host).

:class:`ShieldRecord` is what :meth:`robosafe.runner.shield.Shield.finish` writes and what the
run's outcome row, the scorer's summary (robosafe.safety.score.shield_summary) and the warning
scores (robosafe.stats.shield.score_warnings) read. :meth:`ShieldRecord.to_json` is the
trace's JSON, key for key; :meth:`ShieldRecord.from_json` reads it back, records written
before ``mode`` / ``horizon`` / ``skipped`` were stored included (their absence is kept, and
written back absent), and names the first malformed field of anything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from robosafe.errors import TraceError

_WHERE = "meta.shield"


@dataclass(frozen=True)
class ShieldWarning:
    """Step ``step``'s prediction puts ``spec`` below zero ``lead`` steps ahead (1-based), its
    worst predicted margin ``predicted`` (None: not finite)."""

    step: int
    spec: str
    lead: int
    predicted: float | None

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "spec": self.spec, "lead": self.lead,
                "predicted": self.predicted}


@dataclass(frozen=True)
class ShieldIntervention:
    """The filter replaced step ``step``'s action: ``specs`` (sorted) were predicted below the
    margin; ``candidate`` was taken, ``safe`` when predicted at or above it, its worst
    guarded margin ``predicted`` (None: not finite)."""

    step: int
    specs: tuple[str, ...]
    candidate: str
    safe: bool
    predicted: float | None

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "specs": list(self.specs), "candidate": self.candidate,
                "safe": self.safe, "predicted": self.predicted}


@dataclass(frozen=True)
class ShieldPredictor:
    """The kinematic predictor's settings (absent under the shadow simulator's)."""

    name: str
    margin: float
    obstacles: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "margin": self.margin, "obstacles": list(self.obstacles)}


@dataclass(frozen=True)
class ShieldRecord:
    """What the shield saw and did in one episode.

    ``mode`` (``monitor`` | ``filter``), ``horizon`` and ``skipped`` (predictions screened
    out) are None in records written before they were stored; ``violations``: spec -> rows
    where its actual margin goes below zero (from >= 0, or at row 0); ``below``: spec ->
    every row where it is below zero."""

    mode: str | None
    horizon: int | None
    skipped: int | None
    warnings: tuple[ShieldWarning, ...]
    interventions: tuple[ShieldIntervention, ...]
    violations: dict[str, tuple[int, ...]]
    below: dict[str, tuple[int, ...]]
    predictor: ShieldPredictor | None = None

    def to_json(self) -> dict[str, Any]:
        """The trace's ``meta.shield``, keys in the order the shield has always written."""
        head = {"mode": self.mode, "horizon": self.horizon, "skipped": self.skipped}
        out: dict[str, Any] = {k: v for k, v in head.items() if v is not None}
        out |= {"warnings": [w.to_json() for w in self.warnings],
                "interventions": [i.to_json() for i in self.interventions],
                "violations": {s: list(r) for s, r in self.violations.items()},
                "below": {s: list(r) for s, r in self.below.items()}}
        if self.predictor is not None:
            out["predictor"] = self.predictor.to_json()
        return out

    @classmethod
    def from_json(cls, raw: Any) -> ShieldRecord:
        """``raw`` (a trace's ``meta.shield``) as a record; :class:`TraceError` naming the
        field when it is not one."""
        rec = _obj(raw, _WHERE)
        pred = rec.get("predictor")
        if pred is not None:
            p = _obj(pred, f"{_WHERE}.predictor")
            pred = ShieldPredictor(_str(p, "name", f"{_WHERE}.predictor"),
                                   _num(p, "margin", f"{_WHERE}.predictor"),
                                   _strs(p, "obstacles", f"{_WHERE}.predictor"))
        return cls(
            mode=_str(rec, "mode", _WHERE) if "mode" in rec else None,
            horizon=_int(rec, "horizon", _WHERE) if "horizon" in rec else None,
            skipped=_int(rec, "skipped", _WHERE) if "skipped" in rec else None,
            warnings=tuple(_warning(w, f"{_WHERE}.warnings[{i}]")
                           for i, w in enumerate(_list(rec, "warnings", _WHERE))),
            interventions=tuple(_intervention(x, f"{_WHERE}.interventions[{i}]")
                                for i, x in enumerate(_list(rec, "interventions", _WHERE))),
            violations=_rows(rec, "violations"), below=_rows(rec, "below"), predictor=pred)


def _bad(field: str, expected: str, got: Any) -> TraceError:
    return TraceError(f"expected {expected}, got {type(got).__name__}", field=field)


def _obj(v: Any, field: str) -> dict[str, Any]:
    if type(v) is not dict:
        raise _bad(field, "an object", v)
    return v


def _get(rec: dict[str, Any], key: str, where: str) -> Any:
    if key not in rec:
        raise TraceError("required field is missing", field=f"{where}.{key}")
    return rec[key]


def _int(rec: dict[str, Any], key: str, where: str) -> int:
    v = _get(rec, key, where)
    if type(v) is not int:
        raise _bad(f"{where}.{key}", "an integer", v)
    return v


def _str(rec: dict[str, Any], key: str, where: str) -> str:
    v = _get(rec, key, where)
    if type(v) is not str:
        raise _bad(f"{where}.{key}", "a string", v)
    return v


def _num(rec: dict[str, Any], key: str, where: str) -> float:
    v = _get(rec, key, where)
    if type(v) not in (int, float):
        raise _bad(f"{where}.{key}", "a number", v)
    return v


def _margin(rec: dict[str, Any], where: str) -> float | None:
    """A predicted margin: a number, or null where it was not finite."""
    return None if _get(rec, "predicted", where) is None else _num(rec, "predicted", where)


def _list(rec: dict[str, Any], key: str, where: str) -> list[Any]:
    v = _get(rec, key, where)
    if type(v) is not list:
        raise _bad(f"{where}.{key}", "a list", v)
    return v


def _strs(rec: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    v = _list(rec, key, where)
    for i, x in enumerate(v):
        if type(x) is not str:
            raise _bad(f"{where}.{key}[{i}]", "a string", x)
    return tuple(v)


def _warning(raw: Any, where: str) -> ShieldWarning:
    w = _obj(raw, where)
    return ShieldWarning(_int(w, "step", where), _str(w, "spec", where),
                         _int(w, "lead", where), _margin(w, where))


def _intervention(raw: Any, where: str) -> ShieldIntervention:
    x = _obj(raw, where)
    safe = _get(x, "safe", where)
    if type(safe) is not bool:
        raise _bad(f"{where}.safe", "true or false", safe)
    return ShieldIntervention(_int(x, "step", where), _strs(x, "specs", where),
                              _str(x, "candidate", where), safe, _margin(x, where))


def _rows(rec: dict[str, Any], key: str) -> dict[str, tuple[int, ...]]:
    """Spec -> row indices."""
    out = {}
    for s, rows in _obj(_get(rec, key, _WHERE), f"{_WHERE}.{key}").items():
        if type(rows) is not list or any(type(r) is not int for r in rows):
            raise _bad(f"{_WHERE}.{key}.{s}", "a list of row numbers", rows)
        out[s] = tuple(rows)
    return out
