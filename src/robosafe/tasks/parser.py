"""CBDDL text -> typed AST (VLA-Arena paper 001, App. 7; LIBERO's BDDL plus extensions).

Grammar (``;`` starts a comment to the end of the line, anywhere, including inside
``:language``)::

    (define (problem NAME)
      (:domain NAME)                                   ; required
      (:control_freq HZ)                               ; optional, see below
      (:language free text, balanced parens allowed)   ; required
      (:regions (NAME (:target OBJ) (:ranges ((x_min y_min x_max y_max) ...))
                      [(:yaw_rotation ((min max) ...))] [(:height_ranges ((z_min z_max) ...))]
                      [(:rgba (r g b a))]) ...)
      (:fixtures NAME ... - CATEGORY ...)
      (:objects NAME ... - CATEGORY ...)
      (:moving_objects (NAME (:motion_type TYPE) (:motion_ATTR VALUE) ...) ...)
      (:obj_of_interest NAME ...)
      (:init (PRED ARG ...) ...)
      (:goal FORMULA)                                  ; required
      (:cost FORMULA)
      (:image_settings brightness X saturation X contrast X temperature X)
      (:noise gaussian MEAN VAR) | (:noise salt_pepper PROB)
      (:camera NAME [(dx dy dz) | dx dy dz] ...)
      (:random_color true|false))

    FORMULA := (And FORMULA ...) | (Or FORMULA ...) | (Not FORMULA) | (PRED ARG ...)
    ARG     := NAME | NUMBER | (INT ...)               ; (INT ...) = mesh part ids

Blocks may come in any order, each at most once. Connectives are case-insensitive; predicate
names are kept as written (the catalogue lookup is case-insensitive). Numbers are decimal
literals (``nan``/``inf`` are not numbers).

Motion types are ``linear``, ``circular``, ``waypoint`` and ``projectile`` (the public VLA-Arena
spellings ``circle`` and ``parabolic`` are read as aliases). Attributes: ``:motion_period T``,
``:motion_travel_dist D``, ``:motion_direction (x y z)``, ``:motion_center (x y z)``,
``:motion_waypoints ((x y z dx dy dz) ...)`` (``(x y z (dx dy dz))`` is also read),
``:motion_initial_speed V``, ``:motion_gravity (gx gy gz)``, ``:motion_loop true|false``.

Motion timing is in SECONDS in the AST. A period may carry a unit, ``(:motion_period 125
steps)`` or ``(:motion_period 6.25 s)``; a bare number is a count of control steps, as in the
public VLA-Arena code and the paper's own example (App. 7.2.3, "Full cycle in 125 steps").
Steps are converted with the task's control frequency: the optional top-level block
``(:control_freq HZ)``, else the ``control_freq`` argument of :func:`parse_task`, else 20 Hz
(robosuite's default). Giving both a block and a different argument is an error. The writer
always emits the unit, so a written file means the same at any frequency.

VLA-Arena's own files are read as VLA-Arena's parser and motion generators read them
(``vla_arena/envs/bddl_utils.py``, ``envs/utils.py``):

* ``(:motion_dt DT)`` on waypoint motion: every segment takes ``max(1, int(10 / DT))`` control
  steps and the object runs the waypoints forward and back for ever (VLA-Arena's ping-pong; its
  ``:motion_loop`` is read with Python's ``bool`` of a string, always true). robosafe expands
  this into a looped list ``w0 .. wn .. w1`` with the matching period in steps. On projectile
  motion DT is the simulated seconds per control step, so speed and gravity are rescaled. On
  linear and circular motion VLA-Arena ignores it, and so does robosafe (with a warning).
* ``(:motion_start_quat (x y z w))``: VLA-Arena reads it only for parabolic motion; robosafe
  keeps the placed orientation and says so.
* A region is keyed ``<target>_<name>``, so one name on two targets is two regions; the same
  name twice on one target: the later one wins (a warning).
* Several formulas in ``:goal`` / ``:cost`` without ``And``: VLA-Arena keeps only the first;
  robosafe reads them as an implicit ``And`` (all counted) and warns. The cost mode
  ``vla-arena`` reproduces VLA-Arena's reading.
* An ``:obj_of_interest`` entry that is not an object or fixture (a region, a typo): VLA-Arena
  stores it unused; robosafe drops it with a warning.

Each such reading produces one located line in :attr:`Problem.warnings`.

Every error is a :class:`robosafe.errors.TaskError` naming ``source:line:column``.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

from robosafe.errors import TaskError
from robosafe.tasks.ast import (
    And,
    Camera,
    Decl,
    Formula,
    MotionAttr,
    MovingObject,
    Noise,
    Not,
    Or,
    Pos,
    Pred,
    Problem,
    Region,
    Setting,
    atoms,
)
from robosafe.textio import MAX_TASK_FILE

DEFAULT_CONTROL_FREQ = 20.0
"""Hz; robosuite's default control frequency, used to convert ``steps`` when nothing is said."""

BLOCKS = (":domain", ":control_freq", ":language", ":regions", ":fixtures", ":objects",
          ":moving_objects", ":obj_of_interest", ":init", ":goal", ":cost", ":image_settings",
          ":noise", ":camera", ":random_color")
REQUIRED_BLOCKS = (":domain", ":language", ":goal")
MOTION_TYPES = ("linear", "circular", "waypoint", "projectile")
MOTION_ALIASES = {"circle": "circular", "parabolic": "projectile"}
MOTION_ATTRS = ("motion_period", "motion_travel_dist", "motion_direction", "motion_center",
                "motion_waypoints", "motion_initial_speed", "motion_gravity", "motion_loop")
# VLA-Arena-only attributes, translated into the ones above when the moving object is read.
ARENA_MOTION_ATTRS = ("motion_dt", "motion_start_quat")
ARENA_SEGMENT_TIME = 10.0
"""VLA-Arena's SmoothWaypointMotionGenerator default segment time; steps = int(10 / dt)."""
IMAGE_KEYS = ("brightness", "saturation", "contrast", "temperature")
NOISE_PARAMS = {"gaussian": ("mean", "var"), "salt_pepper": ("prob",)}
CONNECTIVES = {"and": And, "or": Or, "not": Not}
MAX_DEPTH = 100  # formula nesting; deeper input would otherwise hit Python's recursion limit

_TOKEN = re.compile(r"(\n)|[^\S\n]+|;[^\n]*|([()])|([^\s();]+)")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INT = re.compile(r"\d{1,18}")  # bounded: int() refuses very long digit strings


class _Tok:
    __slots__ = ("column", "end", "kind", "line", "start", "text")

    def __init__(self, kind: str, text: str, line: int, column: int, start: int, end: int):
        self.kind, self.text, self.line, self.column = kind, text, line, column
        self.start, self.end = start, end

    @property
    def pos(self) -> Pos:
        return Pos(self.line, self.column)


class _Steps(float):
    """A period still counted in control steps; divided by the frequency once it is known."""


class _PerStep(float):
    """A VLA-Arena projectile quantity whose clock runs ``dt`` seconds per control step."""

    def __new__(cls, value: float, dt: float, power: int):
        out = super().__new__(cls, value)
        out.dt, out.power = dt, power
        return out


def _to_seconds(value, freq: float):
    """Steps -> seconds; VLA-Arena per-step quantities -> per-second ones (see _PerStep)."""
    if isinstance(value, _Steps):
        return float(value) / freq
    if isinstance(value, _PerStep):
        return float(value) * (value.dt * freq) ** value.power
    if isinstance(value, tuple) and value and isinstance(value[0], _PerStep):
        return tuple(_to_seconds(v, freq) for v in value)
    return value


def _tokenize(text: str) -> tuple[list[_Tok], Pos]:
    toks: list[_Tok] = []
    line, line_start = 1, 0
    for m in _TOKEN.finditer(text):
        if m.group(1):
            line, line_start = line + 1, m.end()
        elif m.group(2) or m.group(3):
            kind = m.group(2) or "atom"
            toks.append(_Tok(kind, m.group(), line, m.start() - line_start + 1, m.start(),
                             m.end()))
    return toks, Pos(line, len(text) - line_start + 1)


def comment_lines(text: str) -> list[int]:
    """Line numbers of the ``;`` comments in CBDDL text (the tokenizer's own rule, so a ``;``
    inside ``:language`` counts as it does when parsing)."""
    lines, line = [], 1
    for m in _TOKEN.finditer(text):
        if m.group(1):
            line += 1
        elif m.group().startswith(";"):
            lines.append(line)
    return lines


def _desc(tok: _Tok | None) -> str:
    if tok is None:
        return "end of file"
    text = tok.text if len(tok.text) <= 40 else tok.text[:37] + "..."
    return repr(text) if "'" in text else f"'{text}'"


class _Parser:
    def __init__(self, text: str, source: str):
        self.source = source
        self.toks, self.eof = _tokenize(text)
        self.i = 0
        self.warnings: list[str] = []

    def warn(self, message: str, at: _Tok | Pos | None) -> None:
        self.warnings.append(str(self.error(message, at)))

    # -- token helpers -----------------------------------------------------------------------
    def error(self, message: str, at: _Tok | Pos | None = None) -> TaskError:
        pos = at.pos if isinstance(at, _Tok) else (at or self.eof)
        return TaskError(message, source=self.source, line=pos.line, column=pos.column)

    def peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> _Tok | None:
        tok = self.peek()
        self.i += tok is not None
        return tok

    def more(self) -> bool:
        """True while the current list goes on (not at its ')' and not at end of file)."""
        tok = self.peek()
        return tok is not None and tok.kind != ")"

    def open(self, what: str) -> _Tok:
        tok = self.take()
        if tok is None or tok.kind != "(":
            raise self.error(f"expected {what}, got {_desc(tok)}", tok)
        return tok

    def close(self, opener: _Tok, label: str, hint: str = "") -> None:
        tok = self.take()
        if tok is None or tok.kind == "(":
            raise self.unclosed("')'", tok, opener, label, hint if tok is not None else "")
        if tok.kind != ")":
            raise self.error(f"expected ')' to close '{label}' opened at "
                             f"{opener.line}:{opener.column}, got {_desc(tok)}", tok)

    def atom(self, what: str, opener: _Tok | None = None, label: str = "") -> _Tok:
        """An atom; a '(' inside a flat list is reported as the list not being closed."""
        tok = self.take()
        if tok is not None and tok.kind == "atom":
            return tok
        if tok is not None and tok.kind == "(":
            raise self.unclosed("')'" if opener is not None else what, tok, opener, label)
        raise self.error(f"expected {what}, got {_desc(tok)}", tok)

    def unclosed(self, expected: str, got: _Tok | None, opener: _Tok | None = None,
                 label: str = "", hint: str = "") -> TaskError:
        """A '(' or the end of file where ``expected`` should come: almost always the list
        around it was not closed, so the error points at the line where that list opened (the
        line to fix) and names the token it ran into."""
        opener = opener or self.enclosing(got)
        if opener is None:
            return self.error(f"expected {expected}, got {_desc(got)}", got)
        where = f" at {got.line}:{got.column}" if got is not None else ""
        return self.error(f"'{label or self.label(opener)}' is not closed: expected "
                          f"{expected} before {_desc(got)}{where}{hint}", opener)

    def enclosing(self, tok: _Tok | None) -> _Tok | None:
        """The '(' of the innermost list still open where ``tok`` (None: end of file) is."""
        end = len(self.toks) if tok is None else self.toks.index(tok)
        depth = 0
        for prev in reversed(self.toks[:end]):
            if prev.kind == ")":
                depth += 1
            elif prev.kind == "(":
                if depth == 0:
                    return prev
                depth -= 1
        return None

    def label(self, opener: _Tok) -> str:
        """'(' and the atom after it, as a list is named in messages: '(:motion_period'."""
        i = self.toks.index(opener) + 1
        head = self.toks[i] if i < len(self.toks) else None
        return "(" + (head.text if head is not None and head.kind == "atom" else "")

    def number(self, what: str = "") -> float:
        tok = self.take()
        if tok is None or tok.kind == "(":
            raise self.unclosed(f"a number{what}", tok)
        if tok.kind != "atom" or not _NUMBER.fullmatch(tok.text):
            raise self.error(f"expected a number{what}, got {_desc(tok)}", tok)
        value = float(tok.text)
        if not math.isfinite(value):
            raise self.error(f"number {_desc(tok)} is out of range", tok)
        return value

    def boolean(self) -> bool:
        tok = self.atom("true or false")
        if tok.text.lower() not in ("true", "false"):
            raise self.error(f"expected true or false, got {_desc(tok)}", tok)
        return tok.text.lower() == "true"

    def vector(self, names: tuple[str, ...]) -> tuple[float, ...]:
        spelled = " ".join(names)
        opener = self.open(f"'(' to start ({spelled})")
        values = []
        while self.more():
            values.append(self.number(f" ({names[len(values)]})" if len(values) < len(names)
                                      else ""))
        self.close(opener, "(")
        if len(values) != len(names):
            raise self.error(f"expected {len(names)} numbers ({spelled}), got {len(values)}",
                             opener)
        return tuple(values)

    def vectors(self, names: tuple[str, ...]) -> tuple[tuple[float, ...], ...]:
        opener = self.open(f"'(' to start a list of ({' '.join(names)})")
        out = []
        while self.more():
            out.append(self.vector(names))
        self.close(opener, "(")
        return tuple(out)

    # -- problem -----------------------------------------------------------------------------
    def problem(self, control_freq: float | None) -> Problem:
        top = self.open("'(define'")
        kw = self.atom("'define'")
        if kw.text != "define":
            raise self.error(f"expected 'define', got {_desc(kw)}", kw)
        head = self.open("'(problem <name>)'")
        kw = self.atom("'problem'")
        if kw.text != "problem":
            raise self.error(f"expected 'problem', got {_desc(kw)}", kw)
        name = self.atom("a problem name").text
        self.close(head, "(problem")
        blocks: dict[str, tuple[_Tok, object]] = {}
        while self.more():
            opener = self.open("'(' to start a block such as (:objects ...)")
            kw = self.atom("a block name such as :objects")
            if kw.text not in BLOCKS:
                raise self.error(f"unknown block {_desc(kw)} (expected one of "
                                 f"{', '.join(BLOCKS)})", kw)
            if kw.text in blocks:
                first = blocks[kw.text][0]
                raise self.error(f"duplicate block '{kw.text}' (first at "
                                 f"{first.line}:{first.column})", opener)
            handler = getattr(self, "block_" + kw.text[1:])
            blocks[kw.text] = (opener, handler(opener, "(" + kw.text))
        self.close(top, "(define")
        if (extra := self.peek()) is not None:
            raise self.error(f"unexpected {_desc(extra)} after the end of '(define' opened at "
                             f"{top.line}:{top.column}", extra)
        for req in REQUIRED_BLOCKS:
            if req not in blocks:
                raise self.error(f"missing block '({req} ...)'", top)

        def get(block, default=None):
            return blocks[block][1] if block in blocks else default

        declared = get(":control_freq")
        if control_freq is not None and declared is not None and declared != control_freq:
            raise self.error(f"the task declares (:control_freq {declared!r}) but "
                             f"control_freq={control_freq!r} was requested",
                             blocks[":control_freq"][0])
        freq = declared or control_freq or DEFAULT_CONTROL_FREQ
        moving = tuple(replace(m, attrs=tuple(
            replace(a, value=_to_seconds(a.value, freq)) for a in m.attrs))
            for m in get(":moving_objects", ()))
        decls = {d.name for d in (*get(":fixtures", ()), *get(":objects", ()))}
        interest = self.interest(get(":obj_of_interest", ()), decls,
                                 {r.ref for r in get(":regions", ())})
        used = {str(a) for f in (*get(":init", ()), get(":goal"), get(":cost"))
                for atom in atoms(f) for a in atom.args}
        return Problem(
            name=name, domain=get(":domain"), language=get(":language"), goal=get(":goal"),
            regions=self.targeted(get(":regions", ()), decls, used),
            fixtures=get(":fixtures", ()),
            objects=get(":objects", ()), moving_objects=moving,
            obj_of_interest=tuple(t.text for t in interest), init=get(":init", ()),
            cost=get(":cost"), image_settings=get(":image_settings", ()), noise=get(":noise"),
            camera=get(":camera", ()), random_color=get(":random_color"), control_freq=declared,
            obj_of_interest_pos=tuple(t.pos for t in interest), pos=top.pos,
            warnings=tuple(self.warnings))

    def targeted(self, regions: tuple[Region, ...], decls: set[str], used: set[str]
                 ) -> tuple[Region, ...]:
        """Regions whose target is declared. One on an undeclared target that no predicate
        argument names (``name`` or ``<anything>_name``) is dropped with a warning: LIBERO's
        libero_goal files carry such a region and LIBERO and VLA-Arena build nothing for it.
        One a predicate names stays, for the checker to report the target (a typo)."""
        kept = []
        for r in regions:
            if r.target in decls or any(a == r.name or a.endswith("_" + r.name) for a in used):
                kept.append(r)
                continue
            self.warn(f"region '{r.name}' targets '{r.target}', which the file does not declare, "
                      "and no predicate names it: LIBERO and VLA-Arena build nothing for it; "
                      "robosafe ignores it", r.target_pos or r.pos)
        return tuple(kept)

    def interest(self, toks: tuple[_Tok, ...], decls: set[str], refs: set[str]):
        kept = []
        for t in toks:
            if t.text in decls:
                kept.append(t)
                continue
            what = "a region" if t.text in refs else "not declared"
            self.warn(f"':obj_of_interest' entry '{t.text}' is {what}: VLA-Arena stores it "
                      "unused; robosafe ignores it", t)
        return tuple(kept)

    # -- blocks (each consumes up to and including its closing paren) -------------------------
    def block_domain(self, op: _Tok, label: str) -> str:
        name = self.atom("a domain name such as robosuite", op, label).text
        self.close(op, label)
        return name

    def block_control_freq(self, op: _Tok, label: str) -> float:
        at = self.peek()
        hz = self.number(" (control frequency in Hz)")
        if hz <= 0:
            raise self.error(f"control frequency must be positive, got {hz!r}", at)
        self.close(op, label)
        return hz

    def block_language(self, op: _Tok, label: str) -> str:
        # Free text: the tokens up to the matching ')', one space wherever the source had
        # whitespace or a comment, so "(left)" survives and line breaks collapse.
        parts: list[str] = []
        depth, prev = 0, None
        while True:
            tok = self.take()
            if tok is None:
                raise self.error(f"expected ')' to close '{label}' opened at "
                                 f"{op.line}:{op.column}, got end of file")
            if tok.kind == ")" and depth == 0:
                return "".join(parts)
            depth += {"(": 1, ")": -1}.get(tok.kind, 0)
            if prev is not None and tok.start > prev.end:
                parts.append(" ")
            parts.append(tok.text)
            prev = tok

    def block_regions(self, op: _Tok, label: str) -> tuple[Region, ...]:
        # VLA-Arena keys regions by '<target>_<name>' in a dict: the later duplicate wins.
        regions: dict[str, Region] = {}
        while self.more():
            r = self.region()
            if (first := regions.pop(r.ref, None)) is not None:
                self.warn(f"region '{r.name}' on '{r.target}' is defined twice (first at "
                          f"{first.pos.line}:{first.pos.column}): VLA-Arena and robosafe both "
                          "use this later one", r.pos)
            regions[r.ref] = r
        self.close(op, label)
        return tuple(regions.values())

    def region(self) -> Region:
        op = self.open("'(' to start a region such as (name (:target table) ...)")
        name = self.atom("a region name")
        fields: dict[str, object] = {}
        target: _Tok | None = None
        while self.more():
            aop = self.open("'(' to start a region attribute such as (:target table)")
            key = self.atom("a region attribute such as :target")
            if key.text in fields or (key.text == ":target" and target is not None):
                raise self.error(f"duplicate '{key.text}' in region '{name.text}'", aop)
            if key.text == ":target":
                target = self.atom("a target object or fixture name", aop, "(:target")
            elif key.text == ":ranges":
                fields[key.text] = self.vectors(("x_min", "y_min", "x_max", "y_max"))
            elif key.text == ":yaw_rotation":
                fields[key.text] = self.vectors(("min", "max"))
            elif key.text == ":height_ranges":
                fields[key.text] = self.vectors(("z_min", "z_max"))
            elif key.text == ":rgba":
                fields[key.text] = self.vector(("r", "g", "b", "a"))
            else:
                raise self.error(f"unknown region attribute {_desc(key)} (expected one of "
                                 ":target, :ranges, :yaw_rotation, :height_ranges, :rgba)", key)
            self.close(aop, "(" + key.text)
        self.close(op, "(" + name.text)
        if target is None:
            raise self.error(f"region '{name.text}' needs (:target <object or fixture>)", op)
        return Region(name.text, target.text, fields.get(":ranges", ()),
                      fields.get(":yaw_rotation", ()), fields.get(":height_ranges", ()),
                      fields.get(":rgba"), pos=name.pos, target_pos=target.pos)

    def typed_names(self, op: _Tok, label: str) -> tuple[Decl, ...]:
        decls: list[Decl] = []
        pending: list[_Tok] = []
        while self.more():
            tok = self.atom("a name", op, label)
            if tok.text != "-":
                pending.append(tok)
                continue
            if not pending:
                raise self.error("expected a name before '-'", tok)
            category = self.atom("a category after '-'", op, label)
            if category.text == "-":
                raise self.error("expected a category after '-', got '-'", category)
            decls += [Decl(t.text, category.text, pos=t.pos) for t in pending]
            pending = []
        if pending:
            raise self.error(f"expected '- <category>' after {_desc(pending[-1])}", pending[0])
        self.close(op, label)
        return tuple(decls)

    block_fixtures = typed_names
    block_objects = typed_names

    def block_obj_of_interest(self, op: _Tok, label: str) -> tuple[_Tok, ...]:
        names = []
        while self.more():
            names.append(self.atom("an object name", op, label))
        self.close(op, label)
        return tuple(names)

    def block_init(self, op: _Tok, label: str) -> tuple[Pred, ...]:
        atoms = []
        while self.more():
            f = self.formula(0)
            if not isinstance(f, Pred):
                raise self.error(f"(:init lists predicates; '{type(f).__name__}' is not "
                                 "allowed here", f.pos)
            atoms.append(f)
        self.close(op, label)
        return tuple(atoms)

    def block_goal(self, op: _Tok, label: str) -> Formula:
        kids = [self.formula(0)]
        while self.more():
            kids.append(self.formula(0))
        self.close(op, label)
        if len(kids) == 1:
            return kids[0]
        self.warn(f"'{label}' lists {len(kids)} formulas without (And ...): VLA-Arena reads "
                  f"only the first; robosafe reads them as (And ...) and counts all "
                  f"{len(kids)} (mode vla-arena: only the first)", op)
        return And(tuple(kids), pos=op.pos, implicit=True)

    block_cost = block_goal

    def formula(self, depth: int) -> Formula:
        op = self.open("a formula such as (On a b)")
        if depth > MAX_DEPTH:
            raise self.error(f"formula nested deeper than {MAX_DEPTH} levels", op)
        head = self.atom("a predicate name or And / Or / Not")
        connective = CONNECTIVES.get(head.text.lower())
        if connective is not None:
            kids = []
            while self.more():
                kids.append(self.formula(depth + 1))
            self.close(op, "(" + head.text)
            if not kids:
                raise self.error(f"'{head.text}' needs at least one formula", op)
            if connective is Not:
                if len(kids) != 1:
                    raise self.error(f"'{head.text}' takes exactly one formula", kids[1].pos)
                return Not(kids[0], pos=op.pos)
            return connective(tuple(kids), pos=op.pos)
        if _NUMBER.fullmatch(head.text) or head.text.startswith(":") or head.text == "-":
            raise self.error(f"expected a predicate name, got {_desc(head)}", head)
        args: list = []
        where: list[Pos] = []
        while self.more():
            tok = self.peek()
            where.append(tok.pos)
            if tok.kind == "(":
                args.append(self.part_ids())
            elif _NUMBER.fullmatch(tok.text):
                args.append(self.number())
            else:
                args.append(self.take().text)
        self.close(op, "(" + head.text)
        return Pred(head.text, tuple(args), pos=op.pos, arg_pos=tuple(where))

    def part_ids(self) -> tuple[int, ...]:
        op = self.open("'(' to start a list of part ids")
        ids = []
        while self.more():
            tok = self.take()
            if tok.kind != "atom" or not _INT.fullmatch(tok.text):
                raise self.error(f"expected a non-negative integer part id, got {_desc(tok)}",
                                 tok)
            ids.append(int(tok.text))
        self.close(op, "(")
        if not ids:
            raise self.error("expected at least one part id in '( )'", op)
        return tuple(ids)

    def block_moving_objects(self, op: _Tok, label: str) -> tuple[MovingObject, ...]:
        out = []
        while self.more():
            out.append(self.moving_object())
        self.close(op, label)
        return tuple(out)

    def moving_object(self) -> MovingObject:
        op = self.open("'(' to start a moving object such as (name (:motion_type linear) ...)")
        name = self.atom("a moving object name")
        motion_type: str | None = None
        attrs = []
        while self.more():
            aop = self.open("'(' to start a motion attribute such as (:motion_period 6.25 s)")
            key = self.atom("a motion attribute such as :motion_type")
            if key.text == ":motion_type":
                if motion_type is not None:
                    raise self.error(f"duplicate ':motion_type' for '{name.text}'", aop)
                tok = self.atom("a motion type", aop, "(:motion_type")
                motion_type = MOTION_ALIASES.get(tok.text.lower(), tok.text.lower())
                if motion_type not in MOTION_TYPES:
                    raise self.error(f"unknown motion type {_desc(tok)} (expected one of "
                                     f"{', '.join(MOTION_TYPES)})", tok)
            elif key.text.startswith(":") and key.text[1:] in MOTION_ATTRS + ARENA_MOTION_ATTRS:
                attrs.append(MotionAttr(key.text[1:], self.motion_value(key.text[1:]),
                                        pos=aop.pos))
            else:
                raise self.error(f"unknown motion attribute {_desc(key)} (expected one of "
                                 f":motion_type, {', '.join(':' + a for a in MOTION_ATTRS)})",
                                 key)
            self.close(aop, "(" + key.text)
        self.close(op, "(" + name.text)
        if motion_type is None:
            raise self.error(f"moving object '{name.text}' needs (:motion_type "
                             f"{' | '.join(MOTION_TYPES)})", op)
        return MovingObject(name.text, motion_type, self.arena_motion(motion_type, attrs),
                            pos=name.pos)

    def arena_motion(self, kind: str, attrs: list[MotionAttr]) -> tuple[MotionAttr, ...]:
        """Translate VLA-Arena's :motion_dt / :motion_start_quat (see the module docstring)."""
        extra = {a.name: a for a in attrs if a.name in ARENA_MOTION_ATTRS}
        out = [a for a in attrs if a.name not in ARENA_MOTION_ATTRS]
        if (q := extra.get("motion_start_quat")) is not None:
            self.warn(f"':motion_start_quat' is read by VLA-Arena only for parabolic motion; "
                      f"robosafe keeps the object's placed orientation ({kind} motion)", q.pos)
        dt = extra.get("motion_dt")
        if dt is None:
            return tuple(out)
        if not dt.value > 0:
            raise self.error(f"':motion_dt' must be positive, got {dt.value!r}", dt.pos)
        if kind == "waypoint":
            return self.arena_waypoints(out, dt)
        if kind == "projectile":  # VLA-Arena's clock advances dt simulated seconds per step
            return tuple(self.arena_projectile(a, dt.value) for a in out)
        self.warn(f"':motion_dt' is ignored by VLA-Arena for {kind} motion (it steps "
                  "':motion_period' in control steps); robosafe ignores it too", dt.pos)
        return tuple(out)

    def arena_waypoints(self, attrs: list[MotionAttr], dt: MotionAttr):
        by = {a.name: a for a in attrs}
        wps = by.get("motion_waypoints")
        if wps is None or len(wps.value) < 2:
            return tuple(attrs)  # the validator names the missing / short waypoint list
        for ignored in ("motion_period", "motion_loop"):
            if ignored in by:
                self.warn(f"':{ignored}' is ignored by VLA-Arena when ':motion_dt' times "
                          "waypoint motion; robosafe ignores it too", by[ignored].pos)
        steps = max(1, int(ARENA_SEGMENT_TIME / dt.value))
        pts = tuple(wps.value) + tuple(reversed(wps.value[1:-1]))  # forward and back, looped
        return tuple(a for a in attrs if a.name not in ("motion_waypoints", "motion_period",
                                                        "motion_loop")) + (
            MotionAttr("motion_waypoints", pts, pos=wps.pos),
            MotionAttr("motion_period", _Steps(steps * len(pts)), pos=dt.pos),
            MotionAttr("motion_loop", True, pos=dt.pos))

    @staticmethod
    def arena_projectile(a: MotionAttr, dt: float) -> MotionAttr:
        # VLA-Arena's t advances dt per control step; robosafe's advances 1/freq. Speeds scale
        # by dt * freq, gravity by its square: a marker float carries the factor to problem().
        if a.name == "motion_initial_speed":
            return replace(a, value=_PerStep(a.value, dt, 1))
        if a.name == "motion_gravity":
            return replace(a, value=tuple(_PerStep(g, dt, 2) for g in a.value))
        return a

    def motion_value(self, attr: str):
        if attr == "motion_period":
            value = self.number(" (period)")
            if not self.more():
                return _Steps(value)  # VLA-Arena's unit (App. 7.2.3: "125 steps")
            unit = self.take()
            if unit.kind == "atom" and unit.text == "s":
                return value
            if unit.kind == "atom" and unit.text == "steps":
                return _Steps(value)
            if unit.kind == "(":
                raise self.unclosed("a unit 's' or 'steps', or ')'", unit)
            raise self.error(f"expected unit 's' or 'steps', got {_desc(unit)}", unit)
        if attr in ("motion_travel_dist", "motion_initial_speed", "motion_dt"):
            return self.number()
        if attr == "motion_start_quat":
            return self.vector(("x", "y", "z", "w"))
        if attr in ("motion_direction", "motion_center"):
            return self.vector(("x", "y", "z"))
        if attr == "motion_gravity":
            return self.vector(("gx", "gy", "gz"))
        if attr == "motion_loop":
            return self.boolean()
        opener = self.open("'(' to start a list of waypoints")
        points = []
        while self.more():
            points.append(self.waypoint())
        self.close(opener, "(")
        return tuple(points)

    def waypoint(self) -> tuple[float, ...]:
        names = ("x", "y", "z", "dx", "dy", "dz")
        op = self.open("'(' to start a waypoint (x y z dx dy dz)")
        values: list[float] = []
        while self.more():
            if self.peek().kind == "(" and len(values) in (0, 3):  # ((x y z) (dx dy dz))
                values += self.vector(names[len(values):len(values) + 3])
            else:
                values.append(self.number(f" ({names[len(values)]})" if len(values) < 6
                                          else ""))
        self.close(op, "(")
        if len(values) != 6:
            raise self.error(f"expected 6 numbers (x y z dx dy dz), got {len(values)}", op)
        return tuple(values)

    def block_image_settings(self, op: _Tok, label: str) -> tuple[Setting, ...]:
        out = []
        while self.more():
            key = self.atom("an image setting name", op, label)
            if key.text not in IMAGE_KEYS:
                raise self.error(f"unknown image setting {_desc(key)} (expected one of "
                                 f"{', '.join(IMAGE_KEYS)})", key)
            out.append(Setting(key.text, self.number(f" for {key.text}"), pos=key.pos))
        self.close(op, label)
        return tuple(out)

    def block_noise(self, op: _Tok, label: str) -> Noise:
        kind = self.atom("a noise type (gaussian or salt_pepper)", op, label)
        if kind.text not in NOISE_PARAMS:
            raise self.error(f"unknown noise type {_desc(kind)} (expected gaussian or "
                             "salt_pepper)", kind)
        params = tuple(self.number(f" ({p})") for p in NOISE_PARAMS[kind.text])
        self.close(op, label)
        return Noise(kind.text, params, pos=op.pos)

    def block_camera(self, op: _Tok, label: str) -> tuple[Camera, ...]:
        cams = []
        while self.more():
            tok = self.peek()
            if tok.kind == "(":
                raise self.error("expected a camera name before the offset '(dx dy dz)'", tok)
            name = self.take()
            offset = None
            if (nxt := self.peek()) is not None and nxt.kind == "(":
                offset = self.vector(("dx", "dy", "dz"))
            elif nxt is not None and _NUMBER.fullmatch(nxt.text):  # VLA-Arena: NAME dx dy dz
                offset = tuple(self.number(f" ({n})") for n in ("dx", "dy", "dz"))
            cams.append(Camera(name.text, offset, pos=name.pos))
        self.close(op, label)
        return tuple(cams)

    def block_random_color(self, op: _Tok, label: str) -> bool:
        value = self.boolean()
        self.close(op, label)
        return value


def parse_task(text: str, source: str = "<text>", *,
               control_freq: float | None = None) -> Problem:
    """Parse CBDDL text into a :class:`Problem`; ``source`` names the file in errors.

    ``control_freq`` (Hz) converts ``steps`` periods when the task has no ``(:control_freq)``.
    """
    if control_freq is not None and not (math.isfinite(control_freq) and control_freq > 0):
        raise TaskError(f"control_freq must be a positive number of Hz, got {control_freq!r}",
                        source=source)
    return _Parser(text, source).problem(control_freq)


def parse_file(path: str | Path, *, control_freq: float | None = None) -> Problem:
    """Read and parse a ``.bddl`` file (UTF-8)."""
    source = str(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_TASK_FILE + 1)  # bounded: a huge file is not read whole
    except OSError as exc:
        raise TaskError(f"cannot read task file: {exc.strerror or exc}", source=source) from None
    if len(data) > MAX_TASK_FILE:
        raise TaskError(f"larger than {MAX_TASK_FILE >> 20} MiB; not a task file",
                        source=source)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[:exc.start].decode("utf-8", errors="replace")
        line = before.count("\n") + 1
        raise TaskError("not valid UTF-8", source=source, line=line,
                        column=len(before) - before.rfind("\n")) from None
    return parse_task(text, source, control_freq=control_freq)
