"""robosafe's stderr lines as log records.

Library modules report what a user should know through ``logging`` (never ``print``): a
``WARNING`` is something robosafe could not use or will not count, a ``NOTE`` a file or row it
leaves out on purpose, an ``INFO`` a plain statement about the input. The CLI installs
:class:`StderrLines`, which prints each record as the one line robosafe always printed
(``robosafe: warning: ...``, ``robosafe: note: ...``, ``robosafe: ...``); a Python user gets the
same records through their own logging configuration.
"""

from __future__ import annotations

import logging

#: Between INFO and WARNING: a deliberate omission the user may want to know about.
NOTE = 25
logging.addLevelName(NOTE, "NOTE")

_PREFIX = {logging.WARNING: "warning: ", NOTE: "note: ", logging.INFO: ""}


class StderrLines(logging.Handler):
    """Print robosafe's records on stderr as ``robosafe: <kind>: <message>`` lines.

    The stream is looked up at every record (``typer.echo(err=True)``), so a test runner that
    swaps ``sys.stderr`` sees the lines."""

    def emit(self, record: logging.LogRecord) -> None:
        import typer

        prefix = _PREFIX.get(record.levelno, f"{record.levelname.lower()}: ")
        try:
            typer.echo(f"robosafe: {prefix}{record.getMessage()}", err=True)
        except Exception:  # noqa: BLE001 - logging must not raise into the caller
            self.handleError(record)


def install_stderr_lines() -> None:
    """Route the ``robosafe`` loggers to :class:`StderrLines` (INFO and up), once."""
    logger = logging.getLogger("robosafe")
    if not any(isinstance(h, StderrLines) for h in logger.handlers):
        logger.addHandler(StderrLines())
    logger.setLevel(logging.INFO)
    logger.propagate = False  # one line per record, not a second one from the root logger
