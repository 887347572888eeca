"""The ``robosafe`` command line. Each command is a thin call into one package.

User mistakes (bad files, unknown tasks, malformed specs) print one line and exit 2, never a
traceback (DESIGN.md conventions).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any

import typer

from robosafe.errors import RobosafeError


def _hide_flag_types() -> None:
    """Typer 0.29 labels every flag ``<bool>`` in help (``--help <bool>``), which reads as if
    the flag took a value; flags get no type label, as in click's plain help."""
    from typer.core import TyperOption

    label = getattr(TyperOption, "display_type_rich", None)
    if label is None or getattr(label, "_robosafe", False):
        return

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        return None if self.is_flag else label(self, ctx)

    display_type_rich._robosafe = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_hide_flag_types()

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Evaluate robot policies beyond task success.")
specs_app = typer.Typer(no_args_is_help=True, help="Inspect the safety spec registry.")
app.add_typer(specs_app, name="specs")

EXIT_USER_ERROR = 2


def fail(message: str) -> None:
    """Print one error line and exit 2."""
    typer.echo(f"robosafe: error: {message}", err=True)
    raise typer.Exit(EXIT_USER_ERROR)


def user_errors(fn: Callable) -> Callable:
    """Turn robosafe errors into one line on stderr and exit status 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RobosafeError as err:
            fail(str(err))
        except OSError as err:
            # a file the system refuses (permissions, a full disk, a path through a regular
            # file) that no command anticipated: still one line naming it, not a traceback
            if err.filename is None:
                raise
            fail(f"{err.filename}: {err.strerror or err}")

    return wrapper


def emit_json(payload: Any, out: str | None, to_stdout: bool) -> None:
    text = json.dumps(payload, indent=2, allow_nan=False)
    if out:
        try:
            with open(out, "w") as fh:
                fh.write(text + "\n")
        except OSError as err:
            fail(f"{out}: cannot write output: {err.strerror}")
    if to_stdout:
        sys.stdout.write(text + "\n")


# Commands live in their own modules; importing registers them on ``app``.
from robosafe.cli import audit as _audit  # noqa: F401
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


def _one_line_usage_error(exc: Any) -> None:
    """A usage error (unknown option or command, bad value) as one line, like every other error
    robosafe reports, instead of typer's boxed usage block; click's own "Did you mean" /
    "Possible options" hint stays in the message."""
    ctx = getattr(exc, "ctx", None)
    where = f" (see {ctx.command_path} --help)" if ctx is not None else ""
    typer.echo(f"robosafe: error: {exc.format_message()}{where}", err=True)


def main() -> None:
    from typer import rich_utils

    rich_utils.rich_format_error = _one_line_usage_error
    app()
