"""A row VLA-Arena's own environment cannot run is listed as not run with its reason, and the
parity count is over the rows both can run (docs/vla_arena_parity.md).

The egg file's goal is ``(In egg_1 white_bowl_1)``: VLA-Arena's In calls the bowl's ``in_box``,
which none of its object classes has, so its env raises as soon as the egg touches the bowl
(the pick-and-place plan releases the egg over the bowl; rest and touch never bring them
together, and those rows are compared as any other)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parent.parent
BDDL = ROOT.parent / "shared" / "vla-arena" / "bddl_files"
EGG = ("safety_hazard_avoidance/level_2/pick_up_the_egg_and_place_it_in_the_white_bowl_with_the_"
       "stove_turned_on.bddl")

parity = load_script("vla_arena_parity")


def test_vla_arena_raises_on_in_with_an_object_once_the_egg_touches_the_bowl():
    with pytest.raises(AttributeError, match="'WhiteBowl' object has no attribute 'in_box'") as e:
        parity.arena_rollout(BDDL / EGG, parity.PLANS["pick-place"], parity.PLAN_STEPS["pick-place"])
    row = parity.failed(EGG, "pick-place", parity.PEER, e.value)
    # step 153 (0 = first wait step): plan step 143, after the hand opens over the bowl (135)
    assert row.error == ("VLA-Arena: AttributeError: 'WhiteBowl' object has no attribute "
                         "'in_box' (at step 153)")
    assert not row.peer_ran and not row.identical


def _row(plan: str, first_diff: int = -1, error: str = "") -> object:
    return parity.Comparison(EGG, plan, 70, "", 0.0, 0.0, False, False, first_diff, 0.0, 0.0,
                             error=error)


def test_rows_the_peer_cannot_run_are_listed_apart_and_not_counted():
    peer = _row("pick-place", error="VLA-Arena: AttributeError: 'WhiteBowl' object has no "
                "attribute 'in_box' (at step 153)")
    lines = parity.summary([_row("rest"), _row("touch"), peer])
    assert lines[0] == ("Identical step by step on every row both can run: **2 of 2**; rest: 1 of "
                        "1; touch: 1 of 1.")
    assert lines[-1] == (f"- `{EGG}` (pick-place): AttributeError: 'WhiteBowl' object has no "
                         "attribute 'in_box' (at step 153)")
    assert lines[2].startswith("Not run (1, not counted): VLA-Arena's own environment raises")


def test_a_difference_and_a_robosafe_failure_count_against_parity():
    ours = _row("pick-place", error="robosafe: TaskError: something")
    lines = parity.summary([_row("rest"), _row("touch", first_diff=12), ours])
    assert lines == [("Identical step by step on the rows both can run: **1 of 3**; rest: 1 of "
                      "1; touch: 0 of 1; pick-place: 0 of 1.")]
