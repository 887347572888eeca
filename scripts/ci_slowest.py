"""The slowest tests of a CI run, across every part, from the JUnit XML files pytest wrote.

    python3 scripts/ci_slowest.py .ci-logs 30

scripts/ci-tests.sh prints this after its summary, so a test that grows slow shows up in the
CI log without a separate timing run. A test's time is pytest's total for it (setup, call and
teardown), so a module-scoped fixture counts towards the first test that uses it. Standard
library only: it runs with whichever Python starts it.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Timing:
    part: str
    test: str
    seconds: float


def timings(folder: Path) -> list[Timing]:
    """Every test case of every ``<part>.xml`` in ``folder``."""
    out = []
    for xml in sorted(folder.glob("*.xml")):
        for case in ET.parse(xml).getroot().iter("testcase"):
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            out.append(Timing(xml.stem, name, float(case.get("time") or 0.0)))
    return out


def main(argv: list[str]) -> int:
    folder = Path(argv[1]) if len(argv) > 1 else Path(".ci-logs")
    count = int(argv[2]) if len(argv) > 2 else 30
    rows = sorted(timings(folder), key=lambda t: t.seconds, reverse=True)[:count]
    for t in rows:
        print(f"{t.seconds:8.1f} s  {t.part:<8} {t.test}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
