"""Scoring inputs other than one trace file: LeRobot datasets (tied to registry tasks) and
several inputs at once, each episode counted once (SafeVLA-Bench Sec. 3.3 scoring, App. B
records).

What ``robosafe score`` does with its arguments, callable from Python::

    from robosafe.runner.inputs import count_once, score_dataset
    from robosafe.safety.score import score_files

    errors = []
    scores = list(count_once([("a.jsonl", score_files(["a.jsonl"], on_error=errors.append)),
                              ("ds", score_dataset("ds", on_error=errors.append))],
                             on_error=errors.append))

Lines a user should read (a task found in no registry entry, what a dataset lacks) are logged
on ``robosafe.runner.inputs`` (``robosafe.log``); a skipped episode goes to ``on_error``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path

from robosafe.errors import RobosafeError
from robosafe.safety.registry import Registry, load_registry
from robosafe.safety.score import EpisodeScore, score_stream
from robosafe.trace.episode import Episode, TaskTags

log = logging.getLogger(__name__)


def registry_tasks(episodes: list[Episode], profile: str, source: str,
                   registry: Registry | None = None) -> list[Episode]:
    """Tie another tool's task strings to registry tasks: the profile's benchmarks are searched
    for an entry whose name or id is the task (LIBERO-10 names carry a scene prefix). A task
    found nowhere is scored with an empty task-tag record (only the specs its signals back),
    and one line says so."""
    from robosafe.formats.traces import profile_benchmarks

    reg = registry or load_registry()
    found: dict[str, tuple[str, str] | None] = {}
    for ep in episodes:
        if ep.task_id in found:
            continue
        hit = None
        for bench in profile_benchmarks(profile):
            for e in reg.tasks.get(bench, {}).get("entries", []):
                name = str(e.get("name", ""))
                if ep.task_id in (name, e.get("id")) or name.lower().endswith("_" + ep.task_id):
                    hit = (bench, e["id"])
                    break
            if hit:
                break
        found[ep.task_id] = hit
        if hit is None:
            log.info("%s: task %r is in no %s registry entry: scored without task tags (only "
                     "the specs its signals back)", source, ep.task_id, profile)
    out = []
    for ep in episodes:
        hit = found[ep.task_id]
        out.append(replace(ep, benchmark=hit[0], task_id=hit[1],
                           meta={**ep.meta, "task_name": ep.task_id}) if hit
                   else replace(ep, task_tags=TaskTags()))
    return out


def dataset_episodes(path: str | Path,
                     on_error: Callable[[RobosafeError], None] | None = None) -> list[Episode]:
    """A LeRobot v3.0 dataset's episodes as traces (robosafe's own exactly, another tool's
    through its profile and the registry); what the dataset lacks is logged once, a bad
    episode goes to ``on_error`` (or is raised)."""
    from robosafe.formats.lerobot import Dataset
    from robosafe.formats.traces import read_traces

    imp = read_traces(Dataset(Path(path)))
    for line in imp.lines(str(path)):
        log.info("%s", line)
    for err in imp.errors:
        if on_error is None:
            raise err
        on_error(err)
    if imp.profile == "robosafe":
        return imp.episodes
    return registry_tasks(imp.episodes, imp.profile, str(path))


def score_dataset(path: str | Path, *, variant: str = "default",
                  on_error: Callable[[RobosafeError], None] | None = None
                  ) -> Iterator[EpisodeScore]:
    """Score a LeRobot dataset's episodes; with ``on_error``, a dataset robosafe cannot read
    is reported there and yields nothing. Episodes with no usable signal family come out
    unscored (``EpisodeScore.scored`` is False), as for traces."""
    try:
        episodes = dataset_episodes(path, on_error)
    except RobosafeError as err:
        if on_error is None:
            raise
        on_error(err)
        return
    yield from score_stream(episodes, variant=variant, on_error=on_error)


def episode_identity(s: EpisodeScore) -> tuple:
    """What makes two scored episodes the same episode (read twice, not run twice): benchmark,
    policy, task, episode id, instance, seed and the safety shield it ran under (a shielded
    run and its unshielded baseline share every other field, and are two episodes)."""
    return (s.benchmark, s.policy, s.task_id, s.episode_id, s.instance_id, s.seed, s.shield)


def count_once(inputs: Iterable[tuple[str, Iterable[EpisodeScore]]], *,
               on_error: Callable[[RobosafeError], None] | None = None
               ) -> Iterator[EpisodeScore]:
    """The scores of several inputs ``(name, scores)`` in order, each episode once.

    An input given twice (or a copy of it) must not count its episodes twice: an episode whose
    :func:`episode_identity` an earlier input already gave is dropped, and one error per input
    names how many and where they were first read (to ``on_error``, or raised after the
    input)."""
    first_read: dict[tuple, tuple[int, str]] = {}  # identity -> (input position, name)
    for pos, (name, scores) in enumerate(inputs):
        repeats, first = 0, None
        for s in scores:
            seen = first_read.setdefault(episode_identity(s), (pos, name))
            if seen[0] != pos:
                repeats, first = repeats + 1, first or seen[1]
                continue
            yield s
        if repeats:
            err = RobosafeError(
                f"{name}: {repeats} episode(s) already read from {first} (same benchmark, "
                "policy, task, episode_id, instance, seed); counted once")
            if on_error is None:
                raise err
            on_error(err)
