"""Errors a user can act on.

Every error names where the problem is (file, line, episode, field) so the CLI can print it as
one line and exit 2 without a traceback (DESIGN.md, Conventions).
"""

from __future__ import annotations


class RobosafeError(Exception):
    """Base class for user-actionable errors."""


def located(source: str, line: int | None = None, column: int | None = None) -> str:
    """``source[:line[:column]]``, the prefix every located error message starts with."""
    if line is None:
        return source
    return f"{source}:{line}" + (f":{column}" if column is not None else "")


#: Python's JSON parser recurses per nesting level; past the interpreter's recursion limit it
#: raises RecursionError. No robosafe file nests that deep, so such a file is malformed.
DEEP_JSON = "invalid JSON: nested too deeply"


class TraceError(RobosafeError):
    """A trace file or episode record is malformed.

    ``source`` is the file (optionally ``file:line``), ``episode`` the episode id when known,
    ``field`` a path into the record such as ``steps[5].joint_torque_nm``.
    """

    def __init__(self, message: str, *, source: str | None = None, episode: str | None = None,
                 field: str | None = None):
        self.message = message
        self.source = source
        self.episode = episode
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = []
        if self.source:
            where.append(self.source)
        if self.episode is not None:
            where.append(f"episode {self.episode!r}")
        if self.field:
            where.append(self.field)
        return (": ".join(where) + ": " if where else "") + self.message


def error_record(err: Exception) -> dict:
    """An error as a JSON record (``errors`` of the metrics output): a :class:`TraceError`'s
    source, episode and field, and for every error its message and full text."""
    if isinstance(err, TraceError):
        return {"source": err.source, "episode": err.episode, "field": err.field,
                "message": err.message, "text": str(err)}
    return {"message": str(err), "text": str(err)}


class DatasetError(RobosafeError):
    """A dataset (a LeRobot v3.0 dataset, a TouchSafeBench episode or its root) is malformed or
    unsafe to read. The message names the file and field; a TouchSafeBench error also keeps
    ``path`` (the offending file, prefixed to the message), ``episode_dir`` and ``file``, and
    ``line`` / ``column`` of a JSON syntax error. Pickles across worker processes (as its one
    line of text)."""

    def __init__(self, message: str, *, path: str | None = None, episode_dir: str | None = None,
                 file: str | None = None, line: int | None = None, column: int | None = None):
        self.message = message
        self.path = path
        self.episode_dir = episode_dir
        self.file = file
        self.line = line
        self.column = column
        super().__init__(str(self))

    def __str__(self) -> str:
        where = located(self.path or "", self.line, self.column)
        return f"{where}: {self.message}" if where else self.message

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("message", "path", "episode_dir", "file", "line",
                                              "column")}


class SpecError(RobosafeError):
    """An STL formula or a registry row is malformed (names the spec and column)."""


class RegistryError(RobosafeError):
    """A registry data file is inconsistent, or a task cannot be resolved."""


class UnknownTaskError(RegistryError):
    """A task is neither in the applicability registry nor carries its own task tags."""


class TaskError(RobosafeError):
    """A CBDDL task file is malformed or invalid; names file:line:column and what was expected."""

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None,
                 column: int | None = None):
        self.message = message
        self.source = source
        self.line = line
        self.column = column
        super().__init__(str(self))

    def __str__(self) -> str:
        where = located(self.source or "<text>", self.line, self.column)
        return f"{where}: {self.message}"


class HostContractError(RobosafeError):
    """A host env does not keep the host contract (``hosts.contract.check_host_env`` names the
    check)."""


class EndpointError(RobosafeError):
    """A VLM endpoint cannot serve any clip (unreachable, auth rejected, unknown URL or model)."""


class ChatRequestError(RobosafeError):
    """One VLM request failed for good (recorded on that clip, the run goes on)."""


class MonitorError(RobosafeError):
    """A closed-loop monitor failed for one episode (no answer in time, an answer that is not
    a label, an exception): the episode is reported as failed for that monitor, never safe."""


class AskInterrupted(RobosafeError):
    """Ctrl-C while asking a VLM about clips; ``answers`` holds the records completed before
    it."""

    def __init__(self, answers: list, total: int):
        super().__init__(f"interrupted: {len(answers)} of {total} clips answered")
        self.answers, self.total = answers, total


class BudgetError(RobosafeError):
    """A size that would cost more than its limit; the message says what it would need
    (:mod:`robosafe.budget`)."""
