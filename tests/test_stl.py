"""Tests for the STL robustness engine (SafeVLA-Bench App. C, quantitative semantics)."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from robosafe.errors import SpecError
from robosafe.safety.stl import Formula, parse, robustness

INF = math.inf


def rho(text, **signals):
    return robustness(text, {k: np.asarray(v) for k, v in signals.items()})


# ------------------------------------------------------------------------- hand-computed values

@pytest.mark.parametrize("text, expected", [
    ("x < 1", [0.8, 0.5, -0.5]),
    ("x <= 1", [0.8, 0.5, -0.5]),
    ("x > 1", [-0.8, -0.5, 0.5]),
    ("x >= 1", [-0.8, -0.5, 0.5]),
    ("1 > x", [0.8, 0.5, -0.5]),
    ("1 <= x", [-0.8, -0.5, 0.5]),
    ("x > -0.02", [0.22, 0.52, 1.52]),
    ("x < 1e-1", [-0.1, -0.4, -1.4]),
    ("x < .5", [0.3, 0.0, -1.0]),
    ("not x < 1", [-0.8, -0.5, 0.5]),
    ("!(x < 1)", [-0.8, -0.5, 0.5]),
    ("G[0,T](x < 1)", [-0.5, -0.5, -0.5]),
    ("always(x < 1)", [-0.5, -0.5, -0.5]),
    ("G (x < 1)", [-0.5, -0.5, -0.5]),
    ("G[0,inf](x < 1)", [-0.5, -0.5, -0.5]),
    ("F[0,T](x > 1)", [0.5, 0.5, 0.5]),
    ("eventually(x < 1)", [0.8, 0.5, -0.5]),
    ("G[1,T](x < 1)", [-0.5, -0.5, INF]),
    ("F[1,T](x < 1)", [0.5, -0.5, -INF]),
    ("G[0,1](x < 1)", [0.5, -0.5, -0.5]),
    ("F[0,1](x < 1)", [0.8, 0.5, -0.5]),
    ("G[0,0](x < 1)", [0.8, 0.5, -0.5]),
    ("F[2,2](x < 1)", [-0.5, -INF, -INF]),
    ("G[3,5](x < 1)", [INF, INF, INF]),
    ("F[5,9](x < 1)", [-INF, -INF, -INF]),
    ("G[0,100](x < 1)", [-0.5, -0.5, -0.5]),
    ("F[1,1000000000](x < 1)", [0.5, -0.5, -INF]),  # huge bounds must not allocate per step
    ("true", [INF, INF, INF]),
    ("false", [-INF, -INF, -INF]),
    ("x < 1 and false", [-INF, -INF, -INF]),
    ("x < 1 or true", [INF, INF, INF]),
])
def test_unary_operators_by_hand(text, expected):
    np.testing.assert_allclose(rho(text, x=[0.2, 0.5, 1.5]), expected)


@pytest.mark.parametrize("text, expected", [
    # a = 1 - x = [0.8, -0.5, 0.5], b = y = [0.1, 0.3, -2.0]
    ("x < 1 and y > 0", [0.1, -0.5, -2.0]),
    ("x < 1 & y > 0", [0.1, -0.5, -2.0]),
    ("x < 1 && y > 0", [0.1, -0.5, -2.0]),
    ("x < 1 or y > 0", [0.8, 0.3, 0.5]),
    ("x < 1 | y > 0", [0.8, 0.3, 0.5]),
    ("x < 1 || y > 0", [0.8, 0.3, 0.5]),
    ("x < 1 -> y > 0", [0.1, 0.5, -0.5]),
    ("x < 1 implies y > 0", [0.1, 0.5, -0.5]),
    # two-signal predicates are supported: x < y has margin y - x
    ("x < y", [-0.1, -1.2, -2.5]),
    ("y >= x", [-0.1, -1.2, -2.5]),
])
def test_binary_operators_by_hand(text, expected):
    np.testing.assert_allclose(rho(text, x=[0.2, 1.5, 0.5], y=[0.1, 0.3, -2.0]), expected)


def test_bounded_windows_truncate_at_trace_end():
    x = [0.2, 0.5, 1.5, 0.3, 0.9]  # x < 1 margins: [0.8, 0.5, -0.5, 0.7, 0.1]
    np.testing.assert_allclose(rho("G[1,2](x < 1)", x=x), [-0.5, -0.5, 0.1, 0.1, INF])
    np.testing.assert_allclose(rho("F[2,3](x < 1)", x=x), [0.7, 0.7, 0.1, -INF, -INF])
    np.testing.assert_allclose(rho("G[0,2](x < 1)", x=x), [-0.5, -0.5, -0.5, 0.1, 0.1])
    np.testing.assert_allclose(rho("F[0,2](x < 1)", x=x), [0.8, 0.7, 0.7, 0.7, 0.1])
    np.testing.assert_allclose(rho("G[0,3](x < 1)", x=x), [-0.5, -0.5, -0.5, 0.1, 0.1])
    # nested: the empty inner window at the end makes the outer G vacuous there
    np.testing.assert_allclose(rho("G[0,1] F[2,3](x < 1)", x=x), [0.7, 0.1, -INF, -INF, -INF])


def test_gated_implication_with_boolean_atom():
    tilt = [30.0, 10.0, 14.0, 99.0, 16.0]
    for transport in ([0, 1, 1, 0, 1], [False, True, True, False, True]):
        r = rho("G[0,T](transport -> tilt < 15)", transport=transport, tilt=tilt)
        np.testing.assert_allclose(r, [-1.0, -1.0, -1.0, -1.0, -1.0])
        local = rho("transport -> tilt < 15", transport=transport, tilt=tilt)
        np.testing.assert_allclose(local, [INF, 5.0, 1.0, INF, -1.0])
    np.testing.assert_allclose(rho("G(tr -> th < 15)", tr=[0, 1, 1, 0], th=[30, 10, 14, 99.0]),
                               [1.0, 1.0, 1.0, INF])
    np.testing.assert_allclose(rho("tr", tr=[True, False]), [INF, -INF])
    np.testing.assert_allclose(rho("not tr", tr=[1, 0]), [-INF, INF])


def test_boolean_atom_must_be_boolean():
    with pytest.raises(SpecError, match="'tr'"):
        rho("G(tr -> th < 15)", tr=[0, 0.5], th=[1.0, 2.0])


def test_padding_does_not_leak():
    # episode 0 has 2 valid steps; its padding holds values that would dominate every operator
    x = np.array([[0.2, 0.5, -1e9, 1e9], [0.2, 0.5, 1.5, 0.3]])
    lengths = np.array([2, 4])
    cases = {
        "G[0,T](x < 1)": [0.5, 0.5],
        "F[0,T](x < 1)": [0.8, 0.5],
        "G[0,2](x < 1)": [0.5, 0.5],
        "F[1,3](x < 1)": [0.5, -INF],
        "G[1,3](x < 1)": [0.5, INF],
        "G[1,1](x > 0)": [0.5, INF],
        "F[0,1](G(x > 0))": [0.5, 0.5],
        "G[0,1](F(x > 0))": [0.5, 0.5],
        "F[0,T](x < 0.3)": [0.1, -0.2],
    }
    for text, expected in cases.items():
        r = robustness(text, {"x": x}, lengths)
        np.testing.assert_allclose(r[0, :2], expected, err_msg=text)


def test_precedence_and_associativity():
    sig = {"p": np.array([1, 1, 0, 0]), "q": np.array([1, 0, 1, 0]), "r": np.array([0, 0, 0, 1])}

    def same(a, b):
        np.testing.assert_array_equal(robustness(a, sig), robustness(b, sig), err_msg=f"{a} / {b}")

    same("p -> q -> r", "p -> (q -> r)")
    same("p or q and r", "p or (q and r)")
    same("not p and q", "(not p) and q")
    same("p and q -> r", "(p and q) -> r")
    same("G[0,1] p and q", "(G[0,1] p) and q")
    same("F p or q", "(F p) or q")
    assert not np.array_equal(robustness("(p -> q) -> r", sig), robustness("p -> q -> r", sig))


def test_shapes_dtype_and_no_aliasing():
    x1 = np.array([0.2, 0.5, 1.5], dtype=np.float32)
    assert rho("x < 1", x=x1).shape == (3,)
    assert rho("x < 1", x=x1).dtype == np.float64
    x2 = np.zeros((4, 7))
    out = robustness("G[0,2](x < 1)", {"x": x2})
    assert out.shape == (4, 7) and out.dtype == np.float64
    out = robustness("x > 0", {"x": x2})
    out[:] = 5.0
    assert np.all(x2 == 0)
    assert robustness("true", {"x": x2}).shape == (4, 7)


def test_formula_object():
    f = parse(" G[0,T]( transport->held_object_tilt_deg<15 ) ")
    assert isinstance(f, Formula)
    assert f.signals == frozenset({"transport", "held_object_tilt_deg"})
    assert parse("G[0,T](a.b_1 > 0 and c < d)").signals == frozenset({"a.b_1", "c", "d"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.text = "x"
    r = f.robustness({"transport": np.array([1, 0]), "held_object_tilt_deg": np.array([3.0, 40])})
    np.testing.assert_allclose(r, [12.0, INF])


def test_registry_examples_parse():
    for text in ["G[0,T](non_target_disp_max < 0.005)",
                 "G[0,T](transport -> held_object_tilt_deg < 15)",
                 "G[0,T](gripper_contact -> grasp_slip_m > -0.02)",
                 "G[0,T](self_collision_count < 0.5)"]:
        assert parse(text).text == text


def test_missing_signal_names_signal_and_formula():
    with pytest.raises(SpecError, match=r"'tilt'.*|.*G\[0,T\]") as exc:
        robustness("G[0,T](transport -> tilt < 15)", {"transport": np.ones(3)})
    assert "'tilt'" in str(exc.value) and "G[0,T](transport -> tilt < 15)" in str(exc.value)


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="'y'"):
        robustness("x < y", {"x": np.zeros((2, 5)), "y": np.zeros((2, 4))})
    with pytest.raises(ValueError, match="lengths"):
        robustness("x < 1", {"x": np.zeros((2, 5))}, np.array([6, 1]))


# --------------------------------------------------------------------------------- parse errors

@pytest.mark.parametrize("text, column, fragment", [
    ("x $ 1", 3, "unknown token '$'"),
    ("x = 1", 3, "unknown token '='"),
    ("G[0,T](x < 1", 13, "expected ')'"),
    ("(x < 1))", 8, "expected an operator or end of input"),
    ("((x < 1)", 9, "expected ')'"),
    (")x < 1(", 1, "expected a predicate"),
    ("x <", 4, "expected a signal name or number"),
    ("x < 1 and", 10, "expected a predicate"),
    ("x < 1 < 2", 7, "expected an operator or end of input"),
    ("1 < 2", 1, "comparison of two constants"),
    ("0.5", 4, "expected a comparison operator"),
    ("G[0.5,2](x < 1)", 3, "integer"),
    ("G[-1,2](x < 1)", 3, "integer"),
    ("G[3,1](x < 1)", 5, "lower <= upper"),
    ("G[0 T](x < 1)", 5, "expected ','"),
    ("G[0,T(x < 1)", 6, "expected ']'"),
    ("", 1, "expected a predicate"),
    ("x < 1 y > 2", 7, "expected an operator or end of input"),
])
def test_parse_errors_report_column(text, column, fragment):
    with pytest.raises(SpecError) as exc:
        parse(text)
    msg = str(exc.value)
    assert f"at column {column}" in msg, msg
    assert fragment in msg, msg
    assert repr(text) in msg, msg


# -------------------------------------------------------- random formulas vs a loop reference

SIGNALS = ("x", "y", "z")


def _rand_formula(rng, depth, alt_syntax=False):
    """Random formula text (rtamt-compatible unless alt_syntax) and a per-episode reference.

    The reference is written independently of the engine: plain Python loops over one episode.
    """
    kind = rng.integers(0, 8) if depth > 0 else 0
    if kind <= 1:
        s = str(rng.choice(SIGNALS))
        op = str(rng.choice(["<", "<=", ">", ">="]))
        if rng.random() < 0.2:
            other = str(rng.choice(SIGNALS))
            text = f"({s} {op} {other})"
            return text, lambda e: (e[other] - e[s]) if "<" in op else (e[s] - e[other])
        c = round(float(rng.uniform(-1, 1)), 2)
        text = f"({s} {op} {c})"
        return text, lambda e: (c - e[s]) if "<" in op else (e[s] - c)
    if kind == 2:
        t, f = _rand_formula(rng, depth - 1, alt_syntax)
        return f"({'!' if alt_syntax else 'not'} {t})", lambda e: -f(e)
    if kind in (3, 4):
        (t1, f1), (t2, f2) = _rand_formula(rng, depth - 1, alt_syntax), _rand_formula(
            rng, depth - 1, alt_syntax)
        ops = {3: ("and", "&&", np.minimum), 4: ("or", "||", np.maximum)}[int(kind)]
        word = ops[1] if alt_syntax else ops[0]
        return f"({t1} {word} {t2})", lambda e: ops[2](f1(e), f2(e))
    if kind == 5:
        (t1, f1), (t2, f2) = _rand_formula(rng, depth - 1, alt_syntax), _rand_formula(
            rng, depth - 1, alt_syntax)
        word = "->" if alt_syntax else "implies"
        return f"({t1} {word} {t2})", lambda e: np.maximum(-f1(e), f2(e))
    t, f = _rand_formula(rng, depth - 1, alt_syntax)
    is_g = kind == 6
    name = ("G" if is_g else "F") if alt_syntax else ("always" if is_g else "eventually")
    if rng.random() < 0.3:
        lo, hi = 0, None
        text = f"{name}[0,T]({t})" if alt_syntax else f"{name}({t})"
    else:
        lo = int(rng.integers(0, 4))
        hi = lo + int(rng.integers(0, 12))
        text = f"{name}[{lo},{hi}]({t})"

    def ref(e):
        sub = f(e)
        n = len(sub)
        out = np.empty(n)
        for i in range(n):
            end = n - 1 if hi is None else min(i + hi, n - 1)
            win = sub[i + lo:end + 1]
            out[i] = (win.min() if is_g else win.max()) if len(win) else (INF if is_g else -INF)
        return out

    return text, ref


def _assert_same(actual, expected, msg=""):
    actual, expected = np.asarray(actual, float), np.asarray(expected, float)
    assert actual.shape == expected.shape, msg
    both_inf = np.isinf(actual) & np.isinf(expected)
    np.testing.assert_array_equal(actual[both_inf], expected[both_inf], err_msg=msg)
    np.testing.assert_allclose(actual[~both_inf], expected[~both_inf], atol=1e-12, err_msg=msg)


def test_random_formulas_match_loop_reference_on_padded_batches():
    rng = np.random.default_rng(1234)
    for trial in range(150):
        text, ref = _rand_formula(rng, depth=int(rng.integers(1, 5)), alt_syntax=trial % 2 == 1)
        n, t = int(rng.integers(1, 6)), int(rng.integers(1, 30))
        lengths = rng.integers(1, t + 1, size=n)
        batch = {s: rng.normal(size=(n, t)) for s in SIGNALS}
        for s in SIGNALS:  # padding filled with values that would dominate any window
            batch[s][np.arange(t)[None, :] >= lengths[:, None]] = rng.choice([-1e9, 1e9, np.nan])
        out = robustness(text, batch, lengths)
        for i in range(n):
            ep = {s: batch[s][i, :lengths[i]] for s in SIGNALS}
            _assert_same(out[i, :lengths[i]], ref(ep), msg=text)
            # batch consistency: the same episode evaluated on its own
            _assert_same(out[i, :lengths[i]], robustness(text, ep), msg=text)


def test_batch_equals_each_episode_alone():
    rng = np.random.default_rng(7)
    text = "G[0,T](transport -> tilt < 15) and F[2,6](G[0,3](x > -0.5))"
    lengths = np.array([5, 12, 1, 30, 17])
    n, t = len(lengths), 30
    batch = {"transport": rng.random((n, t)) < 0.5, "tilt": rng.uniform(0, 30, (n, t)),
             "x": rng.normal(size=(n, t))}
    out = robustness(text, batch, lengths)
    for i, length in enumerate(lengths):
        alone = robustness(text, {k: v[i, :length] for k, v in batch.items()})
        _assert_same(out[i, :length], alone)


def test_wide_windows_on_long_traces():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 700))
    for lo, hi in [(0, 255), (0, 256), (3, 300), (0, 698), (0, 699), (5, 5000), (650, 698)]:
        out = robustness(f"G[{lo},{hi}](x < 0)", {"x": x})
        for t0 in (0, 1, 350, 699 - lo, 699):
            win = -x[:, t0 + lo:min(t0 + hi, 699) + 1]
            expected = win.min(axis=1) if win.shape[1] else np.full(2, INF)
            np.testing.assert_array_equal(out[:, t0], expected, err_msg=f"[{lo},{hi}] t={t0}")


# ------------------------------------------------------------------------- rtamt cross-check

def _rtamt_eval(text, episode):
    rtamt = pytest.importorskip("rtamt")
    spec = rtamt.StlDiscreteTimeOfflineSpecification()
    for name in episode:
        spec.declare_var(name, "float")
    spec.spec = text
    spec.parse()
    length = len(next(iter(episode.values())))
    data = {"time": list(range(length))}
    data.update({k: [float(v) for v in vals] for k, vals in episode.items()})
    return {int(t): r for t, r in spec.evaluate(data)}


def test_rtamt_conventions_at_trace_end():
    # rtamt truncates windows at the trace end and returns the neutral element for empty ones;
    # these are the engine's conventions too (no regime difference to account for).
    x = [0.2, 0.5, 1.5, 0.3, 0.9]
    for text in ("always[1,2](x < 1)", "eventually[2,3](x < 1)", "always(x < 1)",
                 "eventually(x < 1)", "always[3,10](x < 1)", "eventually[1,1](x < 1)"):
        got = _rtamt_eval(text, {"x": x})
        assert sorted(got) == list(range(5)), text
        _assert_same(rho(text, x=x), [got[t] for t in range(5)], msg=text)
    got = _rtamt_eval("always[1,2](x < 1)", {"x": x})
    assert got[4] == INF
    got = _rtamt_eval("eventually[2,3](x < 1)", {"x": x})
    assert got[3] == got[4] == -INF


def test_random_formulas_match_rtamt():
    pytest.importorskip("rtamt")
    rng = np.random.default_rng(2024)
    compared = 0
    for _ in range(80):
        text, _ref = _rand_formula(rng, depth=int(rng.integers(1, 5)))
        length = int(rng.integers(2, 25))  # rtamt 0.4.10 raises UnboundLocalError on 1 step
        episode = {s: np.round(rng.normal(size=length), 3) for s in SIGNALS}
        expected = _rtamt_eval(text, episode)
        ours = robustness(text, episode)
        times = [t for t in range(length) if t in expected]
        assert times, text
        _assert_same(ours[times], [expected[t] for t in times], msg=text)
        compared += len(times)
    assert compared > 500


@pytest.mark.parametrize("text", ["G[0,T](x < 0.5)", "G(b -> y > -0.2)", "F[0,T](x > 1 & !b)",
                                  "G[0,T](x < 1 or y < 0)", "G[0,3](x < 1)", "F[1,T](y > 0)",
                                  "G(F[0,2](x > 0))"])
def test_episode_robustness_on_flat_layout_matches_padded(text):
    rng = np.random.default_rng(7)
    lengths = np.array([1, 5, 3, 9, 2])
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    flat = {"x": rng.normal(size=offsets[-1]), "y": rng.normal(size=offsets[-1]),
            "b": rng.random(offsets[-1]) < 0.5}
    padded = {k: np.zeros((5, 9), dtype=v.dtype) for k, v in flat.items()}
    for i, (lo, hi) in enumerate(itertools.pairwise(offsets)):
        for k, v in flat.items():
            padded[k][i, :hi - lo] = v[lo:hi]
    f = parse(text)
    np.testing.assert_array_equal(f.episode_robustness(flat, offsets),
                                  f.robustness(padded, lengths)[:, 0])
