"""AST -> canonical CBDDL text.

Canonical form: blocks in a fixed order (define, :domain, :control_freq, :language, :regions,
:fixtures, :objects, :moving_objects, :obj_of_interest, :init, :goal, :cost, :image_settings,
:noise, :camera, :random_color), 2-space indentation, one declaration / region attribute /
predicate per line, connectives spelled ``And`` / ``Or`` / ``Not``, numbers as ``repr(float)`` (shortest text that reads back to the same float), motion
periods in seconds with an explicit ``s``. The LIBERO core blocks (``:regions``, ``:fixtures``,
``:objects``, ``:obj_of_interest``, ``:init``) are always written, even when empty, because
LIBERO's loader expects them; the CBDDL extensions only when present.
``parse_task(write_task(p)) == p`` for every problem the parser can produce.
"""

from __future__ import annotations

from robosafe.tasks.ast import And, Formula, MovingObject, Not, Pred, Problem, Region

_IND = "  "


def _num(x: float) -> str:
    return repr(float(x))


def _vec(values) -> str:
    return "(" + " ".join(_num(v) for v in values) + ")"


def _vecs(rows) -> str:
    return "(" + " ".join(_vec(r) for r in rows) + ")"


def _arg(a) -> str:
    if isinstance(a, str):
        return a
    if isinstance(a, tuple):
        return "(" + " ".join(str(int(i)) for i in a) + ")"
    return _num(a)


def _block(name: str, body: list[str], depth: int = 1) -> list[str]:
    pad = _IND * depth
    if not body:
        return [f"{pad}({name})"]
    return [f"{pad}({name}", *body, f"{pad})"]


def atom_text(p: Pred) -> str:
    """One predicate application as CBDDL text, e.g. ``(CheckForce gripper0 apple_1 8.0)``."""
    return "(" + " ".join([p.name, *map(_arg, p.args)]) + ")"


def _formula(f: Formula, depth: int) -> list[str]:
    pad = _IND * depth
    if isinstance(f, Pred):
        return [pad + atom_text(f)]
    head = "Not" if isinstance(f, Not) else "And" if isinstance(f, And) else "Or"
    kids = (f.arg,) if isinstance(f, Not) else f.args
    return [f"{pad}({head}", *[ln for k in kids for ln in _formula(k, depth + 1)], f"{pad})"]


def write_formula(f: Formula) -> str:
    """A goal or cost formula as one line of CBDDL text."""
    return " ".join(line.strip() for line in _formula(f, 0))


def _region(r: Region) -> list[str]:
    pad = _IND * 3
    body = [f"{pad}(:target {r.target})"]
    if r.ranges:
        body.append(f"{pad}(:ranges {_vecs(r.ranges)})")
    if r.yaw_rotation:
        body.append(f"{pad}(:yaw_rotation {_vecs(r.yaw_rotation)})")
    if r.height_ranges:
        body.append(f"{pad}(:height_ranges {_vecs(r.height_ranges)})")
    if r.rgba is not None:
        body.append(f"{pad}(:rgba {_vec(r.rgba)})")
    return _block(r.name, body, 2)


def _motion_value(name: str, value) -> str:
    if name == "motion_period":
        return f"{_num(value)} s"
    if isinstance(value, bool):
        return "true" if value else "false"
    if name == "motion_waypoints":
        return _vecs(value)
    if isinstance(value, tuple):
        return _vec(value)
    return _num(value)


def _moving(m: MovingObject) -> list[str]:
    pad = _IND * 3
    body = [f"{pad}(:motion_type {m.motion_type})"]
    for a in m.attrs:
        if a.name == "motion_waypoints" and len(a.value) > 1:  # one waypoint per line
            body += [f"{pad}(:motion_waypoints (", *[pad + _IND + _vec(w) for w in a.value],
                     f"{pad}))"]
        else:
            body.append(f"{pad}(:{a.name} {_motion_value(a.name, a.value)})")
    return _block(m.name, body, 2)


def write_task(problem: Problem) -> str:
    """Canonical CBDDL text of ``problem`` (ends with a newline)."""
    p, pad = problem, _IND * 2
    out = [f"(define (problem {p.name})", f"{_IND}(:domain {p.domain})"]
    if p.control_freq is not None:
        out.append(f"{_IND}(:control_freq {_num(p.control_freq)})")
    out.append(f"{_IND}(:language {p.language})")
    out += _block(":regions", [ln for r in p.regions for ln in _region(r)])
    out += _block(":fixtures", [f"{pad}{d.name} - {d.category}" for d in p.fixtures])
    out += _block(":objects", [f"{pad}{d.name} - {d.category}" for d in p.objects])
    if p.moving_objects:
        out += _block(":moving_objects", [ln for m in p.moving_objects for ln in _moving(m)])
    out += _block(":obj_of_interest", [pad + n for n in p.obj_of_interest])
    out += _block(":init", [ln for a in p.init for ln in _formula(a, 2)])
    out += _block(":goal", _formula(p.goal, 2))
    if p.cost is not None:
        out += _block(":cost", _formula(p.cost, 2))
    if p.image_settings:
        out += _block(":image_settings", [f"{pad}{s.key} {_num(s.value)}"
                                          for s in p.image_settings])
    if p.noise is not None:
        out.append(f"{_IND}(:noise {' '.join([p.noise.kind, *map(_num, p.noise.params)])})")
    if p.camera:
        out += _block(":camera", [pad + c.name + ("" if c.offset is None else " " + _vec(c.offset))
                                  for c in p.camera])
    if p.random_color is not None:
        out.append(f"{_IND}(:random_color {'true' if p.random_color else 'false'})")
    out.append(")")
    return "\n".join(out) + "\n"
