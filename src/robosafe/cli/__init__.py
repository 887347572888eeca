"""The ``robosafe`` command line. Each command is a thin call into one package.

User mistakes (bad files, unknown tasks, malformed specs) print one line and exit 2, never a
traceback (DESIGN.md conventions).
"""

from __future__ import annotations

from typing import Any

import typer

# Commands live in their own modules; importing registers them on ``app``.
from robosafe.cli import audit as _audit  # noqa: F401
from robosafe.cli import compare as _compare  # noqa: F401
from robosafe.cli import grounding as _grounding  # noqa: F401
from robosafe.cli import lerobot as _lerobot  # noqa: F401
from robosafe.cli import policies as _policies  # noqa: F401
from robosafe.cli import probes as _probes  # noqa: F401
from robosafe.cli import report as _report  # noqa: F401
from robosafe.cli import results as _results  # noqa: F401
from robosafe.cli import run as _run  # noqa: F401
from robosafe.cli import score as _score  # noqa: F401
from robosafe.cli import sim as _sim  # noqa: F401
from robosafe.cli import specs as _specs  # noqa: F401
from robosafe.cli import stats as _stats  # noqa: F401
from robosafe.cli import suites as _suites  # noqa: F401
from robosafe.cli import tasks as _tasks  # noqa: F401
from robosafe.cli.common import EXIT_USER_ERROR, app
from robosafe.redact import redact_url

# `robosafe --help` lists first what a user comes to do (evaluate, score, compare, audit a
# claim), then the rest; rich help prints the panels in the order their first command appears.
START_HERE = "Start here: evaluate, score, compare, audit a claim"
MORE = "More commands"
_FIRST = ("run", "score", "compare", "audit")


def _command_name(info: Any) -> str:
    return info.name or (info.callback.__name__.replace("_", "-") if info.callback else "")


def _help_panels() -> None:
    for info in (*app.registered_commands, *app.registered_groups):
        info.rich_help_panel = START_HERE if _command_name(info) in _FIRST else MORE
    # the panel of the first command listed is printed first, so `run` leads the list
    app.registered_commands.sort(key=lambda info: _FIRST.index(_command_name(info))
                                 if _command_name(info) in _FIRST else len(_FIRST))


_help_panels()


def _one_line_usage_error(exc: Any) -> None:
    """A usage error (unknown option or command, bad value) as one line, like every other error
    robosafe reports, instead of typer's boxed usage block; click's own "Did you mean" /
    "Possible options" hint stays in the message."""
    ctx = getattr(exc, "ctx", None)
    where = f" (see {ctx.command_path} --help)" if ctx is not None else ""
    typer.echo(f"robosafe: error: {redact_url(exc.format_message())}{where}", err=True)


def _exit_on_sigterm() -> None:
    """SIGTERM (``kill``, a scheduler's stop) ends robosafe as an exception, so what a command
    holds is released on the way out: a run stops its pool workers, writes outcomes.csv and
    unlocks its directory, and temporary folders are removed (Python's default would end the
    process with none of that)."""
    import signal

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def _pyarrow_imports() -> None:
    """pyarrow 22+ refuse to import under numpy 1 (a numpy-1 stack such as LIBERO's, where pip
    took the newest pyarrow, since robosafe's base install leaves it open for lerobot's
    numpy-2 environments): one line naming the fix instead of a traceback in every command."""
    try:
        import pyarrow  # noqa: F401
    except ImportError as exc:
        if "NumPy" not in str(exc):
            raise
        from importlib.metadata import version

        import numpy

        typer.echo(f"robosafe: error: pyarrow {version('pyarrow')} needs numpy 2, this "
                   f"environment has numpy {numpy.__version__}: pip install "
                   "'pyarrow>=14,<22'", err=True)
        raise SystemExit(EXIT_USER_ERROR) from None


def main() -> None:
    from typer import rich_utils

    rich_utils.rich_format_error = _one_line_usage_error
    _pyarrow_imports()
    _exit_on_sigterm()
    app()
