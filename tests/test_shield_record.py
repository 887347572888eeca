"""The shield's record in a trace (robosafe.trace.shield): the exact JSON the shield has always
written, every earlier form of it read back unchanged, a malformed one named, and the scorer's
summary of it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from robosafe.errors import TraceError
from robosafe.safety.score import Scorer
from robosafe.trace.shield import (
    ShieldIntervention,
    ShieldPredictor,
    ShieldRecord,
    ShieldWarning,
)
from robosafe.trace.synthetic import PROFILES, synthesize_episode

RECORD = ShieldRecord(
    mode="filter", horizon=5, skipped=3,
    warnings=(ShieldWarning(2, "a", 4, -0.25), ShieldWarning(7, "b", 1, None)),
    interventions=(ShieldIntervention(7, ("a", "b"), "scale0.5", True, 0.125),),
    violations={"a": (9,)}, below={"a": (9, 10)},
    predictor=ShieldPredictor("kinematic", 0.02, ("vase_1", "stove_1")))

#: the text the shield wrote before the record was typed (Shield.finish at 911b65f), by hand
TEXT = ('{"mode": "filter", "horizon": 5, "skipped": 3, "warnings": [{"step": 2, "spec": "a", '
        '"lead": 4, "predicted": -0.25}, {"step": 7, "spec": "b", "lead": 1, "predicted": null}]'
        ', "interventions": [{"step": 7, "specs": ["a", "b"], "candidate": "scale0.5", "safe": '
        'true, "predicted": 0.125}], "violations": {"a": [9]}, "below": {"a": [9, 10]}, '
        '"predictor": {"name": "kinematic", "margin": 0.02, "obstacles": ["vase_1", "stove_1"]}}')


def test_the_json_is_the_one_the_shield_wrote():
    assert json.dumps(RECORD.to_json()) == TEXT
    assert ShieldRecord.from_json(json.loads(TEXT)) == RECORD


@pytest.mark.parametrize("dropped", [("skipped",), ("mode", "horizon", "skipped"),
                                     ("predictor",)])
def test_earlier_records_read_back_as_written(dropped):
    """Records written before ``skipped`` (and before ``mode`` / ``horizon``) were stored, and
    a record of the shadow simulator's (no ``predictor``), go back to the same text."""
    raw = {k: v for k, v in json.loads(TEXT).items() if k not in dropped}
    rec = ShieldRecord.from_json(raw)
    assert json.dumps(rec.to_json()) == json.dumps(raw)
    assert all(getattr(rec, k) is None for k in dropped)


@pytest.mark.parametrize(("edit", "field"), [
    (lambda r: r["warnings"][1].update(step="7"), "meta.shield.warnings[1].step"),
    (lambda r: r["interventions"][0].update(safe=1), "meta.shield.interventions[0].safe"),
    (lambda r: r["interventions"][0]["specs"].append(3), "meta.shield.interventions[0].specs[2]"),
    (lambda r: r["violations"].update(a=[9.5]), "meta.shield.violations.a"),
    (lambda r: r.pop("below"), "meta.shield.below"),
    (lambda r: r["predictor"].update(margin="2cm"), "meta.shield.predictor.margin"),
    (lambda r: r.update(warnings={}), "meta.shield.warnings"),
    (lambda r: r["warnings"][0].pop("predicted"), "meta.shield.warnings[0].predicted"),
])
def test_a_malformed_record_names_its_field(edit, field):
    raw = json.loads(TEXT)
    edit(raw)
    with pytest.raises(TraceError) as err:
        ShieldRecord.from_json(raw)
    assert err.value.field == field


def _episode(episode_id: str, shield: dict | None):
    ep = synthesize_episode(np.random.default_rng(0), benchmark="libero-spatial",
                            task_id="task_0", episode_id=episode_id,
                            profile=PROFILES["steady-policy"], n_steps=40)
    if shield is not None:
        ep.meta["shield"] = shield
    return ep


def test_the_scorer_summarises_the_record_and_names_a_malformed_one():
    """Counts of the record's lists; a record without ``mode`` says only that a shield ran
    ("on"); a malformed one is reported with its episode and field, the others scored."""
    old = {k: v for k, v in json.loads(TEXT).items() if k not in ("mode", "horizon")}
    bad = {**json.loads(TEXT), "interventions": 2}
    errors: list = []
    scores = list(Scorer().score([_episode("new", json.loads(TEXT)), _episode("old", old),
                                  _episode("bad", bad), _episode("off", None)],
                                 on_error=errors.append))
    got = {s.episode_id: (s.shield, s.meta.get("shield")) for s in scores}
    assert got == {"new": ("filter", {"mode": "filter", "interventions": 1, "warnings": 2}),
                   "old": ("on", {"mode": "on", "interventions": 1, "warnings": 2}),
                   "off": ("off", None)}
    assert [(e.episode, e.field) for e in errors] == [("bad", "meta.shield.interventions")]


def test_a_parquet_batch_reports_a_malformed_record_and_scores_the_rest(tmp_path):
    from robosafe.safety.score import score_files
    from robosafe.trace.io import write_episodes

    path = tmp_path / "t.parquet"
    write_episodes(path, [_episode("new", json.loads(TEXT)),
                          _episode("bad", {**json.loads(TEXT), "mode": 3})])
    errors: list = []
    scores = list(score_files([path], on_error=errors.append))
    assert [(s.episode_id, s.shield) for s in scores] == [("new", "filter")]
    assert [(e.episode, e.field) for e in errors] == [("bad", "meta.shield.mode")]
