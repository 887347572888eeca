"""Vectorised Signal Temporal Logic robustness (SafeVLA-Bench App. C, quantitative semantics).

Standard discrete-time robustness (Donzé & Maler 2010), one time unit = one step, evaluated
over a whole padded batch of episodes at once.

Grammar (whitespace-insensitive; lowest precedence first)::

    formula := disj ( ('->' | 'implies') formula )?          # right-associative
    disj    := conj ( ('or' | '|' | '||') conj )*
    conj    := unary ( ('and' | '&' | '&&') unary )*
    unary   := ('not' | '!') unary
             | ('G' | 'always' | 'F' | 'eventually') interval? unary
             | '(' formula ')' | 'true' | 'false' | comparison | NAME
    interval   := '[' INT ',' (INT | 'T' | 'inf') ']'
    comparison := operand ('<' | '<=' | '>' | '>=') operand  # at least one operand a NAME
    operand    := NAME | NUMBER                              # NUMBER: 1, -0.02, 1e-3, .5

Semantics, with rho(phi, t) the robustness at step t of an episode with valid length L:

* ``s < c`` / ``s <= c``: ``c - s(t)``; ``s > c`` / ``s >= c``: ``s(t) - c``. Either side may be
  a constant or a signal, so ``a < b`` between two signals is supported (``b(t) - a(t)``).
* A bare ``NAME`` is a Boolean atom (bool or 0/1 signal): +inf where true, -inf where false, so
  a gated clause ``G(tr -> theta < 15)`` yields ``15 - theta`` on gated steps and is vacuous
  elsewhere. ``true``/``false`` are +inf/-inf.
* ``not`` negates; ``and``/``or`` are elementwise min/max; ``a -> b`` is ``max(-a, b)``.
* ``G[a,b] phi`` is the min of rho(phi) over ``[t+a, t+b] ∩ [0, L-1]``; ``F[a,b]`` the max.
  ``G phi``, ``G[a,T]`` and ``G[a,inf]`` run to the end of the episode. Windows are truncated at
  the episode end; an empty window (``t+a > L-1``) gives +inf for G and -inf for F (the
  neutral elements). rtamt 0.4.10's offline discrete-time monitor uses the same conventions, and
  the tests check that against it.

Steps ``>= lengths[i]`` are padding: they never influence values at valid steps, and the values
returned at padded steps are unspecified.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from robosafe.errors import SpecError

__all__ = ["Formula", "parse", "robustness"]


# ----------------------------------------------------------------------------------- AST nodes

@dataclass(frozen=True)
class Const:
    value: float


@dataclass(frozen=True)
class Atom:
    name: str


@dataclass(frozen=True)
class Pred:
    lhs: str | float  # a str is a signal name, a float a constant
    op: str
    rhs: str | float


@dataclass(frozen=True)
class Not:
    arg: Node


@dataclass(frozen=True)
class And:
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Implies:
    lhs: Node
    rhs: Node


@dataclass(frozen=True)
class Always:
    lo: int
    hi: int | None  # None = to the end of the episode
    arg: Node


@dataclass(frozen=True)
class Eventually:
    lo: int
    hi: int | None
    arg: Node


Node = Const | Atom | Pred | Not | And | Or | Implies | Always | Eventually


def _children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, (Const, Atom, Pred)):
        return ()
    if isinstance(node, (And, Or)):
        return node.args
    return (node.lhs, node.rhs) if isinstance(node, Implies) else (node.arg,)


def _has_temporal(node: Node) -> bool:
    return isinstance(node, (Always, Eventually)) or any(_has_temporal(c)
                                                         for c in _children(node))


def _signal_names(node: Node) -> set[str]:
    if isinstance(node, Atom):
        return {node.name}
    if isinstance(node, Pred):
        return {s for s in (node.lhs, node.rhs) if isinstance(s, str)}
    return set().union(*(_signal_names(c) for c in _children(node)))


@dataclass(frozen=True)
class Formula:
    """A parsed, immutable STL formula (SafeVLA-Bench App. C, quantitative semantics).

    ``text`` is the source, ``signals`` every signal name it references; the semantics are in
    the module docstring.
    """

    text: str
    root: Node = field(repr=False)
    signals: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "signals", frozenset(_signal_names(self.root)))

    def __str__(self) -> str:
        return self.text

    def episode_robustness(self, signals: Mapping[str, np.ndarray],
                           offsets: np.ndarray) -> np.ndarray:
        """Robustness at step 0 of every episode of a flat step layout (episode i owns steps
        ``offsets[i]:offsets[i+1]`` of each 1-D signal); returns shape (N,).

        The registry's clauses are ``G[0,T] phi`` with a temporal-free ``phi``: then ``phi`` is
        evaluated elementwise on the flat arrays and reduced per episode, with no padding. Any
        other formula is evaluated on a padded (N, T) batch.
        """
        offsets = np.asarray(offsets, dtype=np.int64)
        lengths = np.diff(offsets)
        root = self.root
        if (isinstance(root, (Always, Eventually)) and root.lo == 0 and root.hi is None
                and not _has_temporal(root.arg) and np.all(lengths > 0)):
            inner = Formula(self.text, root.arg)
            step = _evaluate(inner, {k: signals[k] for k in inner.signals}, None)
            ufunc = np.minimum if isinstance(root, Always) else np.maximum
            return ufunc.reduceat(step, offsets[:-1]) if lengths.size else step[:0]
        width = int(lengths.max()) if lengths.size else 0
        seg = np.repeat(np.arange(lengths.size), lengths)
        local = np.arange(int(offsets[-1])) - offsets[:-1][seg]
        batch = {}
        for k in self.signals:
            flat = np.asarray(signals[k])
            padded = np.zeros((lengths.size, width), dtype=flat.dtype)
            padded[seg, local] = flat
            batch[k] = padded
        return self.robustness(batch, lengths)[:, 0] if width else np.full(lengths.size,
                                                                             math.inf)

    def step_margins(self, signals: Mapping[str, np.ndarray]) -> np.ndarray | None:
        """Per-step margin of ``phi`` for a clause ``G[0,T] phi`` with temporal-free ``phi``,
        over a flat step layout (a step violates where it is < 0); None for other formulas.
        Used to say in which phase a violation happened (Sec. 3.2)."""
        root = self.root
        if not (isinstance(root, Always) and root.lo == 0 and root.hi is None
                and not _has_temporal(root.arg)):
            return None
        inner = Formula(self.text, root.arg)
        return _evaluate(inner, {k: signals[k] for k in inner.signals}, None)

    def robustness(self, signals: Mapping[str, np.ndarray],
                   lengths: np.ndarray | None = None) -> np.ndarray:
        """Per-step robustness (SafeVLA-Bench App. C, quantitative semantics).

        ``signals`` maps names to arrays of shape (N, T) (a padded batch) or (T,) (one episode);
        ``lengths`` (N,) gives each episode's valid length, None meaning all T steps are valid.
        Returns float64 of shape (N, T), or (T,) for 1-D input; column 0 is the episode's
        robustness. Values at padded steps are unspecified.
        """
        return _evaluate(self, signals, lengths)


# ------------------------------------------------------------------------------------- parsing

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<op>->|&&|\|\||<=|>=|[<>!&|()\[\],])
""", re.VERBOSE)

_KEYWORDS = {"G", "F", "always", "eventually", "not", "and", "or", "implies", "true", "false"}
_CMP = {"<", "<=", ">", ">="}


@dataclass(frozen=True)
class _Tok:
    kind: str  # 'num', 'name', 'kw', 'op', 'end'
    text: str
    col: int  # 1-based


def _tokenize(text: str) -> list[_Tok]:
    toks, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise SpecError(f"STL spec {text!r}: unknown token {text[pos]!r} at column {pos + 1}")
        kind = m.lastgroup
        if kind != "ws":
            word = m.group()
            toks.append(_Tok("kw" if kind == "name" and word in _KEYWORDS else kind, word, pos + 1))
        pos = m.end()
    toks.append(_Tok("end", "", len(text) + 1))
    return toks


def _operand(tok: _Tok) -> str | float:
    return tok.text if tok.kind == "name" else float(tok.text)


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def error(self, expected: str) -> SpecError:
        found = "end of input" if self.tok.kind == "end" else repr(self.tok.text)
        return SpecError(f"STL spec {self.text!r}: expected {expected} at column {self.tok.col}"
                         f" (found {found})")

    def accept(self, *texts: str) -> bool:
        if self.tok.kind in ("op", "kw") and self.tok.text in texts:
            self.i += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.accept(text):
            raise self.error(repr(text))

    def parse(self) -> Node:
        node = self.formula()
        if self.tok.kind != "end":
            raise self.error("an operator or end of input")
        return node

    def formula(self) -> Node:
        lhs = self.disj()
        if self.accept("->", "implies"):
            return Implies(lhs, self.formula())
        return lhs

    def disj(self) -> Node:
        args = [self.conj()]
        while self.accept("or", "|", "||"):
            args.append(self.conj())
        return args[0] if len(args) == 1 else Or(tuple(args))

    def conj(self) -> Node:
        args = [self.unary()]
        while self.accept("and", "&", "&&"):
            args.append(self.unary())
        return args[0] if len(args) == 1 else And(tuple(args))

    def unary(self) -> Node:
        tok = self.tok
        if self.accept("not", "!"):
            return Not(self.unary())
        if self.accept("G", "always", "F", "eventually"):
            lo, hi = self.interval() if self.tok.text == "[" else (0, None)
            cls = Always if tok.text in ("G", "always") else Eventually
            return cls(lo, hi, self.unary())
        if self.accept("("):
            node = self.formula()
            self.expect(")")
            return node
        if self.accept("true"):
            return Const(math.inf)
        if self.accept("false"):
            return Const(-math.inf)
        if tok.kind in ("name", "num"):
            self.i += 1
            if self.tok.text not in _CMP:
                if tok.kind == "name":
                    return Atom(tok.text)
                raise self.error("a comparison operator")
            op = self.tok.text
            self.i += 1
            rhs = self.tok
            if rhs.kind not in ("name", "num"):
                raise self.error("a signal name or number")
            if tok.kind == rhs.kind == "num":
                raise SpecError(f"STL spec {self.text!r}: expected a signal name at column "
                                f"{tok.col} (comparison of two constants)")
            self.i += 1
            return Pred(_operand(tok), op, _operand(rhs))
        raise self.error("a predicate, signal name, '(' or unary operator")

    def interval(self) -> tuple[int, int | None]:
        self.expect("[")
        lo = self.bound(allow_inf=False)
        self.expect(",")
        col = self.tok.col
        hi = self.bound(allow_inf=True)
        self.expect("]")
        if hi is not None and hi < lo:
            raise SpecError(f"STL spec {self.text!r}: expected an interval with lower <= upper "
                            f"bound at column {col}")
        return lo, hi

    def bound(self, allow_inf: bool) -> int | None:
        tok = self.tok
        if allow_inf and tok.kind == "name" and tok.text in ("T", "inf"):
            self.i += 1
            return None
        if tok.kind != "num" or not tok.text.isdigit():
            raise self.error("a non-negative integer step bound" + (", 'T' or 'inf'"
                                                                     if allow_inf else ""))
        self.i += 1
        return int(tok.text)


@lru_cache(maxsize=1024)
def parse(text: str) -> Formula:
    """Parse an STL formula (SafeVLA-Bench App. C, quantitative semantics).

    Raises :class:`SpecError` with a 1-based column on malformed input.
    """
    return Formula(text, _Parser(text).parse())


# ---------------------------------------------------------------------------------- evaluation

def robustness(formula: Formula | str, signals: Mapping[str, np.ndarray],
               lengths: np.ndarray | None = None) -> np.ndarray:
    """Per-step robustness of ``formula`` (SafeVLA-Bench App. C, quantitative semantics).

    See :meth:`Formula.robustness`; a string is parsed first (parses are cached).
    """
    return (parse(formula) if isinstance(formula, str) else formula).robustness(signals, lengths)


class _Env:
    def __init__(self, formula: Formula, signals: Mapping[str, np.ndarray],
                 lengths: np.ndarray | None):
        missing = sorted(formula.signals - set(signals))
        if missing:
            raise SpecError(f"STL spec {formula.text!r}: missing signal "
                            + ", ".join(repr(m) for m in missing))
        names = sorted(formula.signals) or list(signals)[:1]
        if not names:
            raise ValueError("cannot infer the trace shape: no signals given")
        shape = np.shape(signals[names[0]])
        if len(shape) not in (1, 2):
            raise ValueError(f"signal {names[0]!r} must be 1-D (T,) or 2-D (N, T), got {shape}")
        self.squeeze = len(shape) == 1
        self.shape = (1, shape[0]) if self.squeeze else shape
        self.formula = formula
        self.raw = signals
        self.cache: dict[str, np.ndarray] = {}
        n, t = self.shape
        if lengths is None:
            self.valid = None
        else:
            lengths = np.asarray(lengths).reshape(-1)
            if lengths.shape != (n,) or np.any((lengths < 0) | (lengths > t)):
                raise ValueError(f"lengths must be ({n},) integers in [0, {t}]")
            self.valid = np.arange(t)[None, :] < lengths[:, None]

    def signal(self, name: str) -> np.ndarray:
        if name not in self.cache:
            arr = np.asarray(self.raw[name])
            want = self.shape[1:] if self.squeeze else self.shape
            if arr.shape != want:
                raise ValueError(f"signal {name!r} has shape {arr.shape}, expected {want}")
            self.cache[name] = arr.reshape(self.shape)
        return self.cache[name]

    def operand(self, x: str | float) -> np.ndarray | float:
        return self.signal(x).astype(np.float64, copy=False) if isinstance(x, str) else x


def _eval(node: Node, env: _Env) -> np.ndarray:
    if isinstance(node, Pred):
        lhs, rhs = env.operand(node.lhs), env.operand(node.rhs)
        return rhs - lhs if node.op in ("<", "<=") else lhs - rhs
    if isinstance(node, Atom):
        return _boolean(node.name, env)
    if isinstance(node, Const):
        return np.full(env.shape, node.value)
    if isinstance(node, Not):
        return -_eval(node.arg, env)
    if isinstance(node, (And, Or)):
        ufunc = np.minimum if isinstance(node, And) else np.maximum
        out = _eval(node.args[0], env)
        for arg in node.args[1:]:
            out = ufunc(out, _eval(arg, env))
        return out
    if isinstance(node, Implies):
        return np.maximum(-_eval(node.lhs, env), _eval(node.rhs, env))
    if isinstance(node, (Always, Eventually)):
        g = isinstance(node, Always)
        return _window(_eval(node.arg, env), node.lo, node.hi, env.valid,
                       np.minimum if g else np.maximum, math.inf if g else -math.inf)
    raise TypeError(f"unknown STL node {node!r}")


def _boolean(name: str, env: _Env) -> np.ndarray:
    sig = env.signal(name)
    if sig.dtype != np.bool_:
        check = sig if env.valid is None else sig[env.valid]
        if not np.all((check == 0) | (check == 1)):
            raise SpecError(f"STL spec {env.formula.text!r}: Boolean atom {name!r} must be a "
                            f"bool or 0/1 signal; compare other signals, e.g. '{name} > 0.5'")
    # 2b - 1 is +-1, so no 0 * inf NaNs; faster than np.where on unpredictable masks.
    return (np.multiply(sig, 2.0, dtype=np.float64) - 1.0) * math.inf


def _window(x: np.ndarray, lo: int, hi: int | None, valid: np.ndarray | None,
            ufunc: np.ufunc, neutral: float) -> np.ndarray:
    """``ufunc``-reduce x over [t+lo, t+hi] per row, treating padding and the tail as neutral."""
    n, t = x.shape
    if valid is not None:
        x = np.where(valid, x, neutral)  # padding must not leak into valid windows
    out = np.full((n, t), neutral)
    if lo >= t:
        return out
    if hi is None or hi >= t - 1:
        # Every window reaches the end of the batch: a suffix scan, shifted by lo.
        out[:, :t - lo] = ufunc.accumulate(x[:, lo:][:, ::-1], axis=1)[:, ::-1]
        return out
    # Sparse-table doubling: after each round cur[:, i] covers [i, i + span); two overlapping
    # spans cover any width w, so the cost is O(log w) batch-wide operations, not O(w).
    w = hi - lo + 1
    cur = np.full((n, t - lo + w - 1), neutral)
    cur[:, :t - lo] = x[:, lo:]
    span = 1
    while 2 * span <= w:
        cur = ufunc(cur[:, :-span], cur[:, span:])
        span *= 2
    out[:, :t - lo] = ufunc(cur[:, :t - lo], cur[:, w - span:w - span + t - lo])
    return out


def _evaluate(formula: Formula, signals: Mapping[str, np.ndarray],
              lengths: np.ndarray | None) -> np.ndarray:
    env = _Env(formula, signals, lengths)
    out = np.asarray(_eval(formula.root, env), dtype=np.float64)  # every node returns a new array
    return out[0] if env.squeeze else out
