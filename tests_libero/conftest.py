"""Every test here runs inside LIBERO's own environment: marked `libero` so a selection by marker
(`-m libero`, `-m "not libero"`) sees them."""

from pathlib import Path

import pytest


def pytest_collection_modifyitems(items):
    # the hook sees every collected item, also those of other folders in the same session
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(pytest.mark.libero)
