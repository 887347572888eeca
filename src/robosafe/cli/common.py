"""What every command module of the command line shares: the ``app`` they register on,
the one-line error and warning helpers, and the options several commands take. The
package (:mod:`robosafe.cli`) imports the command modules; they import this module,
never the package, so no two modules of the command line import each other."""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from robosafe.errors import RobosafeError
from robosafe.log import install_stderr_lines
from robosafe.redact import redact_logs, redact_url

# Library warnings and notes are log records; the CLI prints each as its one stderr line, with
# the credentials of any URL in it masked.
install_stderr_lines()
redact_logs()


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


def _hide_hidden_arguments() -> None:
    """A hidden argument (an old positional spelling kept for one release) stays out of the
    usage line too, not only out of the argument list."""
    from typer.core import TyperArgument

    usage = TyperArgument.get_usage_pieces
    if getattr(usage, "_robosafe", False):
        return

    def get_usage_pieces(self: TyperArgument, ctx: Any) -> list[str]:
        return [] if self.hidden else usage(self, ctx)

    get_usage_pieces._robosafe = True  # type: ignore[attr-defined]
    TyperArgument.get_usage_pieces = get_usage_pieces  # type: ignore[method-assign]


_hide_hidden_arguments()

_log = logging.getLogger("robosafe.cli")

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Evaluate robot policies beyond task success.")
specs_app = typer.Typer(no_args_is_help=True, help="Inspect the safety spec registry.")
app.add_typer(specs_app, name="specs")

EXIT_USER_ERROR = 2


def fail(message: str) -> None:
    """Print one error line and exit 2 (any URL in it with its credentials masked: a message
    may quote a --policy, --ray-address or --endpoint the user gave)."""
    typer.echo(f"robosafe: error: {redact_url(message)}", err=True)
    raise typer.Exit(EXIT_USER_ERROR)


def user_errors(fn: Callable) -> Callable:
    """Turn robosafe errors into one line on stderr and exit status 2."""

    spelled = _spellings(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _finite_numbers(kwargs, spelled)
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


def _finite_numbers(values: dict[str, Any], spelled: dict[str, str]) -> None:
    """Every float option refuses nan and inf, which the parser accepts: a NaN margin or level
    compares false with everything, so it slips through every range check, and it has no JSON
    spelling (run.json would not be JSON). Checked here, once for every command."""
    import math

    for name, value in values.items():
        if isinstance(value, float) and not math.isfinite(value):
            fail(f"{spelled.get(name, name.upper())}: {value} is not a finite number")


def _spellings(fn: Callable) -> dict[str, str]:
    """Parameter name -> its longest option spelling (``shield_margin`` -> ``--shield-margin``),
    from the command's own declarations, for messages about a value."""
    import inspect

    from typer.models import OptionInfo

    out = {}
    for name, p in inspect.signature(fn).parameters.items():
        if isinstance(p.default, OptionInfo):  # undeclared: typer spells it from the name
            decls = [d for d in p.default.param_decls or () if d.startswith("-")]
            out[name] = max(decls, key=len) if decls else "--" + name.replace("_", "-")
    return out


def _finite(value: Any) -> Any:
    """``value`` with every float that is not finite as None, through dicts and lists."""
    import math

    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def warn(message: str) -> None:
    """One warning line on stderr (never stdout, which may carry --json)."""
    _log.warning("%s", message)


# One CLI grammar (docs/decisions.md "One CLI grammar"): -n/--episodes counts, -j/--workers
# parallel processes, -o/--out the file or directory written, --json the machine-readable
# result, --level suite levels only (W/V ladders are --language-level / --visual-level).
# Renamed spellings keep working for one release through hidden options and ``renamed``.

AUTO_WORKERS_HELP = "Parallel processes (0 = auto: one per two CPU cores, at least 1)."


def workers_option(help: str = AUTO_WORKERS_HELP) -> Any:
    """The -j/--workers option every parallel command shares: one default (0 = auto), at most
    robosafe.budget.MAX_WORKERS processes (each holds an interpreter and its scene)."""
    from robosafe.budget import MAX_WORKERS

    return typer.Option(0, "--workers", "-j", min=0, max=MAX_WORKERS, help=help)


def _applies(applies: str, text: str) -> str:
    return f"{applies}: {text}" if applies else text[:1].upper() + text[1:]


def alpha_option(default: float | None = 0.05, applies: str = "") -> Any:
    """--alpha of the anytime-valid tests (``audit sequential``, ``run --until``): one name and
    meaning, checked by robosafe.stats.sequential.check_alpha. ``applies``: the option it
    goes with, said first in the help (``None`` default: 0.05 when that option is given)."""
    return typer.Option(default, "--alpha", help=_applies(
        applies, "chance of any wrong decision, in (0, 0.5)"
        + (" (default 0.05)." if default is None else ".")))


def delta_option(applies: str = "") -> Any:
    """--delta of the anytime-valid comparison (``audit sequential``, ``run --until``)."""
    return typer.Option(None, "--delta", help=_applies(
        applies, "smallest gap worth having: decide 'not_better' once B is shown not better "
                 "by this much."))


def resolve_workers(workers: int) -> int:
    """0 (the default) -> one process per two CPU cores: each process also keeps a reader or
    renderer thread busy, so one per core oversubscribes (measured in docs/performance.md)."""
    import os

    return workers or max(1, (os.cpu_count() or 1) // 2)


def max_memory_option() -> Any:
    """--max-memory of the commands whose exact computations grow with the sizes given
    (robosafe.budget): over the limit they say what they would need instead of trying."""
    from robosafe.budget import DEFAULT_MEMORY, GIB

    return typer.Option(DEFAULT_MEMORY / GIB, "--max-memory",
                        help="GiB this command may plan to hold; a larger computation is "
                             "refused up front, saying what it would need.")


def memory_limit(max_memory: float) -> Any:
    """The block in which the command's computations keep to --max-memory."""
    from robosafe.budget import gib, memory_budget

    return memory_budget(gib(max_memory))


def deprecated_option(old: str) -> Any:
    """A hidden option keeping an old spelling alive for one release (see ``renamed``)."""
    return typer.Option(None, old, hidden=True)


def renamed(old_value: Any, new_value: Any, old: str, new: str, default: Any = None) -> Any:
    """The value of an option given either as ``new`` or (deprecated, one warning line naming
    the new spelling) as ``old``; giving both with different values is a usage error."""
    if old_value is None:
        return new_value
    warn(f"{old} is deprecated and will be removed in the next release; use {new}")
    if new_value != default and new_value != old_value:
        fail(f"{old} and {new} are the same option; give only {new}")
    return old_value


def out_option(positional: Path | None, out: Path | None) -> Path:
    """-o/--out of a command whose output was once positional: the old positional form keeps
    working for one release with a warning; one of the two is required."""
    value = renamed(positional, out, "OUT as a positional argument", "-o/--out OUT")
    if value is None:
        fail("missing option -o/--out")
    return value


def emit_json(payload: Any, out: str | None, to_stdout: bool) -> None:
    try:
        text = json.dumps(payload, indent=2, allow_nan=False)
    except ValueError:  # NaN / inf (an older run.json may hold one): JSON's null, as elsewhere
        text = json.dumps(_finite(payload), indent=2, allow_nan=False)
    if out:
        try:
            with open(out, "w") as fh:
                fh.write(text + "\n")
        except OSError as err:
            fail(f"{out}: cannot write output: {err.strerror}")
    if to_stdout:
        sys.stdout.write(text + "\n")
