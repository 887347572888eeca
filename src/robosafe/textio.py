"""Reading user files with bounds.

Line by line with a bound, so a huge or garbage file costs at most one bounded line of memory
before it is rejected (a plain ``for line in fh`` reads a 1 GiB line whole, and
``read_text().splitlines()`` holds the file twice); small JSON documents with a size and a
nesting bound; and paths a file names, kept inside that file's folder (DESIGN.md, Contracts:
untrusted inputs).
"""

from __future__ import annotations

import csv
import json
import os
import re
import string
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import IO, Any, AnyStr

from robosafe.errors import DEEP_JSON, RobosafeError

#: Longest line of a CSV or a JSONL file of clips or answers (their rows are short).
MAX_TEXT_LINE = 1 << 20
#: Longest JSONL trace line (one episode: a 1,000-step synthetic episode is 0.5 MB) and
#: largest ``.json`` trace document (several episodes); bigger recordings belong in JSONL or
#: Parquet, which are read an episode / a row group at a time.
MAX_TRACE_LINE = 64 << 20
MAX_JSON_DOCUMENT = 256 << 20
#: Largest CBDDL task file (the shipped ones are a few KiB).
MAX_TASK_FILE = 4 << 20
#: Largest metadata JSON document of a dataset (LeRobot's meta/info.json is a few KiB; the
#: task files a robosafe dataset carries in meta/robosafe.json a few MiB at most).
MAX_META_JSON = 16 << 20
#: Widest integer field of a path template (LeRobot's are ``03d``); a bound, so a template
#: such as ``{chunk_index:999999999d}`` cannot allocate a gigabyte of padding.
MAX_FIELD_WIDTH = 12


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


def parse_json(text: str | bytes, source: str,
               error: type[RobosafeError] = RobosafeError) -> Any:
    """``text`` as JSON; invalid, non-UTF-8 or too deeply nested text is ``error`` naming
    ``source`` (one line: never a JSONDecodeError or RecursionError traceback)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{source}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
    except UnicodeDecodeError:
        raise error(f"{source}: not valid JSON (not UTF-8 text)") from None
    except RecursionError:
        raise error(f"{source}: {DEEP_JSON}") from None


def read_json(path: Path, source: str | None = None, limit: int = MAX_META_JSON,
              error: type[RobosafeError] = RobosafeError) -> Any:
    """A whole JSON file of at most ``limit`` bytes (see :func:`parse_json`)."""
    where = source or str(path)
    try:
        with open(path, "rb") as fh:
            data = bounded_read(fh, where, limit)
    except OSError as exc:
        raise error(f"{where}: cannot read: {exc.strerror}") from None
    except RobosafeError as exc:
        raise error(str(exc)) from None
    return parse_json(data, where, error)


def inside(root: Path, rel: Any, field: str,
           error: type[RobosafeError] = RobosafeError) -> Path:
    """``root / rel`` for a relative path a file under ``root`` names in ``field``.

    The path must be a relative POSIX path without ``..`` and, with every symlink resolved,
    must stay inside ``root``: a file never makes robosafe read or write outside its folder.
    """
    if not isinstance(rel, str) or not rel or "\0" in rel:
        raise error(f"{root}: {field}: expected a relative path, got {rel!r}")
    pure = PurePosixPath(rel)
    if pure.is_absolute() or os.path.isabs(rel) or ".." in pure.parts:
        raise error(f"{root}: {field}: {rel!r} leaves the dataset folder (absolute or '..')")
    path = root / rel
    base = root.resolve()
    if not path.resolve().is_relative_to(base):
        raise error(f"{path}: {field}: a symlink leads outside {root}")
    return path


_WIDTH = re.compile(r"0?(\d{1,2})d|d|")


def fill_template(template: Any, field: str, values: dict[str, int | str],
                  error: type[RobosafeError] = RobosafeError) -> str:
    """A path template from a file (``data/chunk-{chunk_index:03d}/...``) filled with
    ``values``, never with ``str.format``: only the named fields, integers as ``d`` with a
    width of at most :data:`MAX_FIELD_WIDTH`, strings with no format spec."""
    if not isinstance(template, str):
        raise error(f"{field}: expected a path template string, got {template!r}")
    out = []
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise error(f"{field}: {template!r} is not a path template ({exc})") from None
    for literal, name, spec, conv in parts:
        out.append(literal)
        if name is None:
            continue
        if name not in values or conv is not None:
            raise error(f"{field}: {template!r}: unknown field {{{name}}} (known: "
                        f"{', '.join(sorted(values))})")
        value = values[name]
        m = _WIDTH.fullmatch(spec or "")
        if isinstance(value, str):
            if spec:
                raise error(f"{field}: {template!r}: {{{name}}} takes no format spec")
            out.append(value)
        elif m is None or (m.group(1) and int(m.group(1)) > MAX_FIELD_WIDTH):
            raise error(f"{field}: {template!r}: {{{name}:{spec}}} is not an integer "
                        f"format of width <= {MAX_FIELD_WIDTH} (such as 03d)")
        else:
            out.append(format(value, spec or "d"))
    return "".join(out)


@contextmanager
def csv_reader(path: str | Path, what: str) -> Iterator[csv.DictReader]:
    """A CSV file (UTF-8, a BOM allowed) as a ``csv.DictReader`` over :func:`bounded_lines`;
    a file that cannot be opened is one error, ``PATH: cannot read WHAT (reason)``."""
    try:
        fh = Path(path).open(newline="", encoding="utf-8-sig")  # noqa: SIM115 - the with below
    except OSError as exc:
        raise RobosafeError(f"{path}: cannot read {what} ({exc.strerror})") from None
    with fh:
        yield csv.DictReader(bounded_lines(fh, str(path)))
