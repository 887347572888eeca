"""Scoring a run directory: the one path ``score RUN_DIR``, ``report`` and ``results ingest``
take from a run's outcome rows and traces to per-episode safety scores (SafeVLA-Bench Sec. 3.3).

What a run directory holds is what its outcome rows say (``runner.rundir``): a finished
episode (a row without ``error_type``) is scored from its trace; a crashed episode has no
judgement. One rule for a finished episode whose trace is missing, whichever command reads the
run: its safety is unknown (``score`` is None; never counted as safe), and one gap line names
the row and the missing trace (docs/decisions.md "One rule for a missing trace").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from robosafe.errors import RobosafeError, TraceError
from robosafe.log import NOTE
from robosafe.runner.rundir import RunDir, open_run, read_outcome_row
from robosafe.safety.score import EpisodeScore, Scorer, file_warnings, score_stream
from robosafe.stats.outcomes import OutcomeRow
from robosafe.trace.episode import Episode

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunEpisode:
    """One outcome row of a run and, when its trace was scored, the episode's score."""

    cell: str
    """The cell name (``outcomes/<cell>.json``, ``traces/<cell>.jsonl``)."""
    row_path: Path
    row: OutcomeRow
    trace: Path
    score: EpisodeScore | None
    """None for a crashed episode, and for a finished one whose trace is missing or could not
    be scored: its safety is unknown."""

    @property
    def crashed(self) -> bool:
        return self.row.crashed


@dataclass(frozen=True)
class RunScores:
    """A scored run directory (:func:`score_run`)."""

    run: RunDir
    episodes: list[RunEpisode]
    """Every outcome row of the run, in cell-name order."""
    gaps: list[str]
    """One line per finished episode whose trace is missing (its safety is unknown)."""
    notes: list[str]
    """Files and rows that are not episodes to score: crashed episodes, traces without an
    outcome row, partial writes of an interrupted run."""
    warnings: list[str]
    """Signal warnings of the scored traces (``safety.score.file_warnings``, one line per
    unusable field over the whole run)."""

    @property
    def finished(self) -> list[RunEpisode]:
        return [e for e in self.episodes if not e.crashed]

    @property
    def crashed(self) -> list[RunEpisode]:
        return [e for e in self.episodes if e.crashed]

    @property
    def scored(self) -> list[RunEpisode]:
        """The finished episodes that have a score, in cell order."""
        return [e for e in self.episodes if e.score is not None]

    @property
    def scores(self) -> list[EpisodeScore]:
        return [e.score for e in self.scored]


def _gap(row_path: Path, trace: Path) -> str:
    return f"{row_path}: a finished episode, but its trace {trace} is missing; not scored"


def score_run(run_dir: str | Path | RunDir, *, variant: str = "default", workers: int = 1,
              on_error: Callable[[RobosafeError], None] | None = None) -> RunScores:
    """Score the traces of a run directory's finished episodes.

    A finished episode whose trace is missing is a gap (its ``score`` is None, one line in
    ``gaps``), never an error and never safe. A trace that cannot be scored (unreadable, not
    exactly one episode, another task than its outcome row's) is raised as a
    :class:`RobosafeError` naming the file, or with ``on_error`` reported there and that
    episode's safety is unknown. A bad outcome row (a field of the wrong type) is always
    raised, naming the file and column. ``workers`` processes score the traces.
    """
    run = run_dir if isinstance(run_dir, RunDir) else open_run(run_dir)
    paths = sorted((run.path / "outcomes").glob("*.json"))
    rows = [(p, OutcomeRow.from_json(read_outcome_row(p), str(p))) for p in paths]
    notes = run.unscored_notes(sum(row.crashed for _, row in rows))

    def report(err: RobosafeError) -> None:
        if on_error is None:
            raise err
        on_error(err)

    scorer = Scorer(variant=variant)
    order: list[int] = []  # the row of each episode handed to scoring, in order

    def episodes() -> Iterator[Episode]:
        """The finished episodes' traces, read as scoring asks for them (memory stays bounded
        by the scoring chunks, not the run)."""
        for i, (p, row) in enumerate(rows):
            trace = run.path / "traces" / f"{p.stem}.jsonl"
            if row.crashed or not trace.is_file():
                continue
            try:
                ep = _one_episode(trace, row)
                scorer.prepare(ep)  # task resolution errors here, so scoring cannot fail
            except RobosafeError as err:
                report(err if str(trace) in str(err) else RobosafeError(f"{trace}: {err}"))
                continue
            order.append(i)
            yield ep

    scores: dict[int, EpisodeScore] = {}
    for k, s in enumerate(score_stream(episodes(), variant=variant, workers=workers)):
        scores[order[k]] = s
    every, gaps = [], []
    for i, (p, row) in enumerate(rows):
        trace = run.path / "traces" / f"{p.stem}.jsonl"
        if not row.crashed and not trace.is_file():
            gaps.append(_gap(p, trace))
        every.append(RunEpisode(p.stem, p, row, trace, scores.get(i)))
    warnings = file_warnings(str(run.path / "traces"), list(scores.values()))
    return RunScores(run, every, gaps, notes, warnings)


def _one_episode(trace: Path, row: OutcomeRow) -> Episode:
    """The one episode of a run's trace file, checked against its outcome row."""
    from robosafe.trace.io import read_episodes

    try:
        eps, errors = read_episodes(trace)
    except TraceError as err:
        raise RobosafeError(str(err)) from None
    if errors:
        raise errors[0]
    if len(eps) != 1:
        raise RobosafeError(f"{trace}: expected one episode in a run-directory trace, found "
                            f"{len(eps)}")
    (ep,) = eps
    # The task must match (a trace of another task is a swapped file); the instance is the
    # row's to say (paired statistics join on the row's instance_id, and a trace made by
    # another tool may name its instances its own way).
    if row.task_id is not None and ep.task_id != row.task_id:
        raise RobosafeError(f"{trace}: holds episode {ep.episode_id!r} of task {ep.task_id!r}, "
                            f"not the outcome row's task {row.task_id!r}")
    return ep


@dataclass(frozen=True)
class FolderInputs:
    """What ``score`` finds below a folder that is neither a run directory nor a LeRobot
    dataset: trace files by kind (``json``, ``jsonl``, ``parquet``), and the run directories
    and datasets below it, which keep their own meaning (a run's traces are scored with its
    outcome rows, not as loose files)."""

    folder: Path
    traces: dict[str, list[Path]]
    runs: list[Path]
    datasets: list[Path]

    @property
    def paths(self) -> list[Path]:
        return sorted([p for ps in self.traces.values() for p in ps] + self.runs
                      + self.datasets)

    def summary(self) -> str:
        parts = [f"{len(ps)} {kind} trace file(s)" for kind, ps in sorted(self.traces.items())]
        parts += [f"{len(self.runs)} run director{'y' if len(self.runs) == 1 else 'ies'}"
                  ] if self.runs else []
        parts += [f"{len(self.datasets)} LeRobot dataset(s)"] if self.datasets else []
        return f"{self.folder}: scoring " + ", ".join(parts) + " found below it"


def folder_inputs(folder: Path) -> FolderInputs:
    """Every trace file below ``folder`` (sorted), each run directory and dataset once.

    Hidden files and folders are left out: a killed run's partial writes are dot files.
    """
    from robosafe.formats.lerobot import is_dataset
    from robosafe.runner.rundir import is_run_dir
    from robosafe.trace.io import trace_kind

    traces: dict[str, list[Path]] = {}
    runs: list[Path] = []
    datasets: list[Path] = []

    def walk(d: Path) -> None:
        for p in sorted(d.iterdir()):
            if p.name.startswith("."):
                continue
            if p.is_dir():
                if is_run_dir(p):
                    runs.append(p)
                elif is_dataset(p):
                    datasets.append(p)
                else:
                    walk(p)
            elif (kind := trace_kind(p)) is not None:
                traces.setdefault(kind, []).append(p)

    walk(folder)
    found = FolderInputs(folder, traces, runs, datasets)
    if not found.paths:
        raise RobosafeError(f"{folder}: a folder with no trace file (.json, .jsonl[.gz], "
                            ".parquet), run directory or LeRobot dataset below it")
    return found


def expand_folders(paths: Iterable[Path]) -> list[Path]:
    """``paths`` with each plain folder replaced by what :func:`folder_inputs` finds below it
    (one note line per folder saying how many of which kind)."""
    from robosafe.formats.lerobot import is_dataset
    from robosafe.runner.rundir import is_run_dir

    out: list[Path] = []
    for p in paths:
        if p.is_dir() and not is_run_dir(p) and not is_dataset(p):
            found = folder_inputs(p)
            log.log(NOTE, "%s", found.summary())
            out.extend(found.paths)
        else:
            out.append(p)
    return out


def score_paths(paths: Iterable[str | Path], *, variant: str = "default", workers: int = 1,
                on_error: Callable[[RobosafeError], None] | None = None
                ) -> Iterator[EpisodeScore]:
    """Score what ``robosafe score`` is given, in order, each episode once
    (``runner.inputs.count_once``): trace files (JSON, JSONL, Parquet), run directories of
    ``robosafe run`` (:func:`score_run`: the traces its outcome rows say finished), LeRobot
    v3.0 dataset directories, and any other folder as everything of those below it
    (:func:`expand_folders`). Trace files come first, datasets last, as given.

    A bad episode, an unreadable file or a finished episode whose trace is missing goes to
    ``on_error`` and is skipped (raised without it); signal warnings and notes on files left
    out are logged (``robosafe.log``). A run directory without finished episodes is an error.
    """
    from robosafe.formats.lerobot import is_dataset
    from robosafe.runner.inputs import count_once, score_dataset
    from robosafe.runner.rundir import is_run_dir
    from robosafe.safety.score import score_files

    def report(err: RobosafeError) -> None:
        if on_error is None:
            raise err
        on_error(err)

    def run_scores(path: Path) -> Iterator[EpisodeScore]:
        scored = score_run(path, variant=variant, workers=workers, on_error=report)
        for line in scored.notes:
            log.log(NOTE, "%s", line)
        for line in scored.gaps:
            report(RobosafeError(line))
        if not scored.finished:
            raise RobosafeError(f"{path}: the run has no finished episodes to score")
        for line in scored.warnings:
            log.warning("%s", line)
        yield from scored.scores

    paths = expand_folders(Path(p) for p in paths)
    datasets = [p for p in paths if is_dataset(p)]
    inputs: list[tuple[str, Iterable[EpisodeScore]]] = []
    for p in paths:
        if p in datasets:
            continue
        if is_run_dir(p):
            inputs.append((str(p), run_scores(p)))
        else:
            inputs.append((str(p), score_files([p], variant=variant, workers=workers,
                                                on_error=on_error,
                                                on_warning=_warn)))
    inputs += [(str(d), score_dataset(d, variant=variant, on_error=on_error))
               for d in datasets]
    yield from count_once(inputs, on_error=on_error)


def _warn(line: str) -> None:
    log.warning("%s", line)
