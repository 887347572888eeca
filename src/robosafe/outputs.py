"""Output directories: created with one error line, locked while a process writes them.

A path that cannot be created (under ``/proc``, under a regular file, a regular file itself)
is a :class:`~robosafe.errors.RobosafeError` naming the path, never an ``OSError`` traceback.
A directory one robosafe process is writing (a run directory) is locked with ``flock`` on a
file inside it, so a second writer stops with one line instead of running the same episodes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from robosafe.errors import RobosafeError

LOCK_FILE = ".lock"


def cannot(path: Path, exc: OSError) -> RobosafeError:
    """The one-line error for an ``OSError`` while creating the output ``path``."""
    return RobosafeError(f"{path}: cannot create the output: {exc.strerror or exc}")


def make_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` as a directory (parents included), or one error line naming it."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise RobosafeError(f"{path}: exists and is not a directory; choose another output "
                            "directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise cannot(path, exc) from None
    return path


def check_parent(path: str | os.PathLike[str]) -> Path:
    """The folder an output ``path`` goes into exists (created if need be) and takes new
    entries, tried by making and removing an empty directory there (permission bits alone say
    nothing for root or on /proc); checked before any work, so a bad path fails at once."""
    path = Path(path)
    parent = path.absolute().parent
    try:
        if parent.exists() and not parent.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(parent))
        parent.mkdir(parents=True, exist_ok=True)
        os.rmdir(tempfile.mkdtemp(dir=parent, prefix=".robosafe-probe-"))
    except OSError as exc:
        raise cannot(path, exc) from None
    return parent


def check_outside(out: str | os.PathLike[str], inputs: dict[str, str | os.PathLike[str]]) -> None:
    """Refuse an output path that is one of the inputs (``{what: path}``: a dataset, a run
    directory) or lies inside one: writing it would overwrite what is being read (``import
    lerobot DS --out DS/meta/info.json`` once replaced the dataset's own info.json). Paths are
    compared resolved, so a symlink or ``..`` does not hide the overlap."""
    target = Path(out).resolve()
    for what, path in inputs.items():
        source = Path(path).resolve()
        if target == source or source in target.parents:
            raise RobosafeError(f"{out}: the output lies inside the {what} {path}, which it "
                                "would overwrite; write it elsewhere")


@dataclass
class DirLock:
    """An exclusive ``flock`` on ``<directory>/.lock``, held until :meth:`release` (or the
    process ends: the kernel drops it, so a killed writer never leaves a stale lock)."""

    path: Path
    _fh: IO[str] | None = None

    @classmethod
    def acquire(cls, directory: Path, what: str) -> DirLock:
        """Lock ``directory``; a second process gets "``what`` X is in use by another
        robosafe process (pid N)"."""
        lock = directory / LOCK_FILE
        try:
            fh = open(lock, "a+", encoding="utf-8")  # noqa: SIM115 - held past this function
        except OSError as exc:
            raise cannot(directory, exc) from None
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            pid = fh.read().strip() or "unknown"
            fh.close()
            raise RobosafeError(f"{what} {directory} is in use by another robosafe process "
                                f"(pid {pid})") from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        return cls(lock, fh)

    def release(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            with contextlib.suppress(OSError):
                fh.close()  # closing the file drops the flock
