"""Reading user files line by line with a bound, so a huge or garbage file costs at most one
bounded line of memory before it is rejected (a plain ``for line in fh`` reads a 1 GiB line
whole, and ``read_text().splitlines()`` holds the file twice)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, AnyStr

from robosafe.errors import RobosafeError

#: Longest line of a CSV or a JSONL file of clips or answers (their rows are short).
MAX_TEXT_LINE = 1 << 20
#: Longest JSONL trace line (one episode: a 1,000-step synthetic episode is 0.5 MB) and
#: largest ``.json`` trace document (several episodes); bigger recordings belong in JSONL or
#: Parquet, which are read an episode / a row group at a time.
MAX_TRACE_LINE = 64 << 20
MAX_JSON_DOCUMENT = 256 << 20
#: Largest CBDDL task file (the shipped ones are a few KiB).
MAX_TASK_FILE = 4 << 20


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def bounded_lines(fh: IO[AnyStr], source: str, limit: int = MAX_TEXT_LINE
                  ) -> Iterator[AnyStr]:
    """The lines of ``fh``; a line longer than ``limit`` characters (bytes in binary mode) is
    an error naming ``source`` and the line number."""
    n = 0
    while line := fh.readline(limit + 1):
        n += 1
        if len(line) > limit:
            raise RobosafeError(f"{source}:{n}: line longer than {_size(limit)}; not a "
                                "file robosafe can read")
        yield line


def bounded_read(fh: IO[AnyStr], source: str, limit: int) -> AnyStr:
    """All of ``fh``, or an error naming ``source`` if it holds more than ``limit``."""
    data = fh.read(limit + 1)
    if len(data) > limit:
        raise RobosafeError(f"{source}: larger than {_size(limit)}; not a file robosafe can "
                            "read whole")
    return data
