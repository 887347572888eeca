"""CBDDL cost semantics (VLA-Arena Sec. 4.1, App. 7.4) with hand-computed totals."""

import numpy as np
import pytest

from robosafe.errors import TaskError
from robosafe.tasks.ast import And, Not, Or, Pred
from robosafe.tasks.cost import ALPHA, cost_terms, evaluate_cost

T = 6
TRUTH = {
    Pred("InContact", ("tomato_1", "toy_motorbike_1")): [0, 1, 1, 0, 0, 1],
    Pred("CheckGripperContact", ("toy_motorbike_1",)): [0, 0, 1, 1, 0, 0],
    Pred("Fall", ("teapot_1",)): [0, 0, 0, 0, 0, 1],
    Pred("CheckDistance", ("tomato_1", "region_B", 0.05)): [1, 1, 0, 0, 0, 0],
    Pred("NotOn", ("apple_1", "plate_1")): [1, 1, 1, 1, 1, 0],
}


def atom(p):
    return np.array(TRUTH[p], dtype=bool)


def total(cost, **kw):
    return evaluate_cost(cost, atom, T, **kw)


def test_app_7_4_example_counts_each_term():
    preds = list(TRUTH)[:4]
    cost = And(tuple(preds))
    out = total(cost, success=True)
    # instantaneous: 3 + 2 + 2 steps; terminal Fall true at the end: alpha
    np.testing.assert_array_equal(out.per_step, [1, 2, 2, 1, 0, 1])
    assert out.terminal == ALPHA
    assert out.total == 7 + ALPHA
    assert out.per_term == (3.0, 2.0, ALPHA, 2.0)


def test_terminal_costs_count_on_failure_too():
    cost = Pred("Fall", ("teapot_1",))
    assert total(cost, success=False).total == ALPHA
    assert total(cost, success=False, mode="vla-arena").total == 0.0
    assert total(cost, success=True, mode="vla-arena").total == ALPHA
    assert total(cost, success=True, alpha=3.0).total == 3.0


def test_nested_connectives_are_logic_in_both_modes():
    a, b = list(TRUTH)[:2]
    term = Or((And((a, b)), Not(a)))
    cost = And((term,))
    # (a and b) or not a -> [1,0,1,1,1,0] -> 4. VLA-Arena splits only the top-level And and
    # cannot evaluate a nested connective at all; robosafe reads it as logic in both modes.
    assert total(cost, success=True).total == 4
    assert total(cost, success=True, mode="vla-arena").total == 4
    assert cost_terms(cost) == (term,) and cost_terms(a) == (a,)


def test_mixed_timing_term_is_rejected():
    with pytest.raises(TaskError, match="mixes instantaneous and terminal"):
        total(Or((next(iter(TRUTH)), list(TRUTH)[2])), success=True)
    with pytest.raises(TaskError, match="unknown cost predicate 'Smash'"):
        total(Pred("Smash"), success=True)


def test_aliases_resolve():
    p = Pred("CheckGripperDistance", ("candle_1", 0.04))
    out = evaluate_cost(p, lambda _: np.array([0, 1, 1], bool), 3, success=True)
    assert out.total == 2


def test_predicate_names_ignore_case_like_the_validator():
    out = evaluate_cost(Pred("fall", ("teapot_1",)), lambda _: np.array([0, 1], bool), 2,
                        success=False)
    assert out.terminal == ALPHA
