"""Regenerate src/robosafe/safety/data/suite_tags.yaml from the built-in suites.

    python scripts/make_suite_tags.py [--check]
"""

import sys
from pathlib import Path

from robosafe.sim.tags import suite_tags_document

OUT = Path(__file__).resolve().parents[1] / "src/robosafe/safety/data/suite_tags.yaml"

if __name__ == "__main__":
    text = suite_tags_document()
    if "--check" in sys.argv:
        if not OUT.is_file() or OUT.read_text() != text:
            sys.exit(f"{OUT} is out of date: run python scripts/make_suite_tags.py")
        print(f"{OUT} is up to date")
    else:
        OUT.write_text(text)
        print(f"wrote {OUT}")
