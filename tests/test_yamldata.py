"""The package's YAML data files read through libyaml give exactly what PyYAML's Python parser
gives (robosafe.yamldata: the faster parser must not change a registry or a catalogue)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from robosafe.yamldata import load_yaml

SRC = Path(__file__).resolve().parents[1] / "src" / "robosafe"
FILES = sorted(SRC.rglob("*.yaml"))


def test_there_are_data_files():
    assert len(FILES) >= 10  # registries, catalogues, world, hosts, suites


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_same_objects_as_the_python_parser(path):
    text = path.read_text(encoding="utf-8")
    assert load_yaml(text) == yaml.safe_load(text)


def test_types_are_kept():
    # worked out by hand: YAML 1.1 booleans, ints, floats in exponent form, null, nesting
    doc = load_yaml("a: yes\nb: 0x10\nc: 1.5e-3\nd: ~\ne: [1, {f: off}]\n")
    assert doc == {"a": True, "b": 16, "c": 0.0015, "d": None, "e": [1, {"f": False}]}
