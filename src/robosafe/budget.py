"""Work budgets: every size a user gives is priced before any work is done.

A few characters on a command line (``--seeds 0-999999999``, ``--tasks 1000 --samples 1000``)
can ask for more memory than the machine has; discovered by allocating, that is a MemoryError
traceback or a process killed minutes later. Each command instead computes what a size would
cost and, over the limit, stops with one line saying what it would need and what the limit is
(docs/guide/safeguards.md, "Work budget"). Limits a user could mean to exceed (the memory of an
exact cutoff computation) are raised by an option; the others are fixed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

from robosafe.errors import BudgetError, RobosafeError

GIB = 1 << 30

#: memory one computation may plan to hold unless the user raises it (``--max-memory``): what a
#: laptop can spare beside its other work
DEFAULT_MEMORY = 2 * GIB

#: episodes of one run (tasks x language levels x visual levels x episodes): every cell is a row
#: of outcomes.csv and a trace file, and the run holds its cell list in memory
MAX_EPISODES = 1_000_000

#: control steps of one episode: a trace keeps every step in memory until it is written
MAX_HORIZON = 100_000

#: steps the shield predicts ahead at every control step: 50 s at 20 Hz, longer than any task's
#: own episode (30 s); each step is simulated once per candidate action
MAX_SHIELD_HORIZON = 1_000

#: bootstrap resamples (--bootstrap): each resamples every episode, so a million is already
#: minutes for a large run; the default is 10,000
MAX_BOOTSTRAP = 1_000_000

#: side of a rendered image in pixels (--image-size, grounding's --size): one RGB frame of 4096 px
#: is 48 MiB, per camera and step
MAX_IMAGE_SIZE = 4096

#: processes of one command (-j/--workers): each is a Python interpreter with its own scene or
#: reader, some 0.3-0.6 GB; more than this is no machine's count of cores
MAX_WORKERS = 1024

_limit = [DEFAULT_MEMORY]


def memory_limit() -> int:
    """Bytes one computation may plan to hold (see :func:`memory_budget`)."""
    return _limit[0]


@contextmanager
def memory_budget(limit: int | None) -> Iterator[None]:
    """Within the block, computations may plan to hold ``limit`` bytes (None: the default)."""
    before = _limit[0]
    _limit[0] = DEFAULT_MEMORY if limit is None else int(limit)
    try:
        yield
    finally:
        _limit[0] = before


def gib(text_or_number: float, what: str = "--max-memory") -> int:
    """A memory limit given in GiB (``--max-memory 8``) as bytes; a positive finite number."""
    value = float(text_or_number)
    if not math.isfinite(value) or value <= 0:
        raise BudgetError(f"{what}: expected a positive number of GiB, got {text_or_number}")
    # past an exbibyte the limit means "none": clamped, so the byte count stays a number
    return int(min(value, float(1 << 30)) * GIB)


def size_text(nbytes: float) -> str:
    """Bytes as the one unit a reader takes in at a glance (``7.5 GiB``, ``12 MiB``)."""
    for unit, scale in (("TiB", GIB << 10), ("GiB", GIB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{int(nbytes)} B"


def check_memory(what: str, nbytes: float, option: str = "--max-memory") -> None:
    """Refuse ``what`` before it allocates when it would need more than the limit."""
    if nbytes > _limit[0]:
        raise BudgetError(f"{what} would need about {size_text(nbytes)} of memory, over the "
                          f"limit of {size_text(_limit[0])} (raise it with {option})")


def check_horizon(steps: int, what: str = "--horizon") -> None:
    """Refuse an episode of no step or longer than MAX_HORIZON steps."""
    if steps < 1:
        raise RobosafeError(f"{what} must be at least 1 step, got {steps}")
    check_count(what, steps, MAX_HORIZON,
                "steps of one episode, each kept in memory until its trace is written")


def check_episodes(episodes: int, what: str = "-n/--episodes") -> None:
    """Refuse more than MAX_EPISODES episodes of one command."""
    check_count(what, episodes, MAX_EPISODES, "episodes, each kept until it is written")


def check_image_size(pixels: int, what: str) -> None:
    """Refuse images larger than MAX_IMAGE_SIZE on a side."""
    check_count(what, pixels, MAX_IMAGE_SIZE, "pixels on a side, 3 bytes each per frame")


def check_bootstrap(n_boot: int) -> None:
    """Refuse more bootstrap resamples than MAX_BOOTSTRAP (one check for every command)."""
    check_count("--bootstrap", n_boot, MAX_BOOTSTRAP, "resamples, each of every episode")


def check_count(what: str, count: int, limit: int, why: str) -> None:
    """Refuse a count over its fixed ``limit``; ``why`` says what each unit costs."""
    if count > limit:
        raise BudgetError(f"{what}: {count:,} is over the limit of {limit:,} ({why})")
