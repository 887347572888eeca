"""Run directories: what `robosafe run` writes and `score` / `report` / `results` read.

Layout::

    RUN_DIR/
      run.json              the run config (FORMAT, policy, tasks, seeds, levels, horizon, ...)
      tasks/<task_id>.bddl  the task files, as run
      traces/<cell>.jsonl   one App. B trace per finished episode
      actions/<cell>.npy    the actions the policy took (replay:RUN_DIR/traces/<cell>.jsonl)
      outcomes/<cell>.json  one episode-outcome row per episode (finished or crashed)
      outcomes.csv          every row, sorted by cell (rebuilt after each run and on resume)
      frames/<cell>/        with record_frames: state.npy and <camera>.mp4 (runner.frames)

A cell is one (task, episode index, language level, visual level); its seed is the run's seed
list entry for the episode index, so two policies run with the same seeds see the same initial
states, and ``instance_id`` (``seed<S>-W<w>-V<v>``) pairs their episodes (DESIGN.md: paired
statistics join on suite, task_id, instance_id). Every file is written atomically (temporary
file + rename): a killed run leaves whole episodes or nothing, and ``--resume`` runs only the
cells without an outcome file.
"""

from __future__ import annotations

import csv
import io
import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robosafe.errors import RobosafeError
from robosafe.outputs import LOCK_FILE, DirLock
from robosafe.runner.plan import Cell, RunPlan, config_text
from robosafe.stats.outcomes import RUN_COLUMNS as COLUMNS
from robosafe.textio import MAX_TASK_FILE

FORMAT = "robosafe-run/1"


def atomic_write(path: Path, text: str, *, newline: str | None = None) -> None:
    """Write ``text`` to ``path`` so readers see the old file or the whole new one."""
    _atomic(path, lambda fd: os.fdopen(fd, "w", encoding="utf-8", newline=newline), text)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """:func:`atomic_write` for bytes."""
    _atomic(path, lambda fd: os.fdopen(fd, "wb"), data)


def _atomic(path: Path, opener, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Created like open() creates the traces (0666 less the umask); mkstemp's 0600 made
    # run.json and outcomes.csv unreadable to the group that can read the traces.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with opener(fd) as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@dataclass
class RunDir:
    path: Path
    # run.json as stored: the plan's fields (read them typed through :attr:`plan`) and the
    # run's own record beside them (format, run_id, created, robosafe_version, until_result)
    config: dict[str, Any]
    # in memory only: the policy spec as given (a URL with its credentials; run.json masks
    # them) and the writer's lock on the directory (runner.run.prepare / execute)
    policy_spec: str | None = field(default=None, repr=False, compare=False)
    lock: DirLock | None = field(default=None, repr=False, compare=False)

    def set_record(self, key: str, value: Any) -> None:
        """``key`` of run.json's record beside the plan (the ``--until`` result), written
        under the run directory's lock (never one of the plan's own fields)."""
        lock = DirLock.acquire(self.path, "run directory")
        try:
            config = {**open_run(self.path).config, key: value}
            atomic_write(self.path / "run.json", config_text(config))
            self.config = config
        finally:
            lock.release()

    @property
    def plan(self) -> RunPlan:
        """What the run evaluates, typed and migrated (RunPlan.from_json)."""
        return RunPlan.from_json(self.config)

    @property
    def run_id(self) -> str:
        return str(self.config.get("run_id") or self.path.name)

    @property
    def policy_name(self) -> str:
        return str(self.config.get("policy_name") or self.config.get("policy", ""))

    def task_file(self, task_id: str) -> Path:
        return self.path / "tasks" / f"{task_id}.bddl"

    def trace_path(self, cell: Cell) -> Path:
        return self.path / "traces" / f"{cell.name}.jsonl"

    def actions_path(self, cell: Cell) -> Path:
        return self.path / "actions" / f"{cell.name}.npy"

    def outcome_path(self, cell: Cell) -> Path:
        return self.path / "outcomes" / f"{cell.name}.json"

    def trace_paths(self) -> list[Path]:
        # dot files are writes in progress (".partial-*", left behind by a killed run)
        return sorted(p for p in (self.path / "traces").glob("*.jsonl")
                      if not p.name.startswith("."))

    def unscored_notes(self, n_crashed: int) -> list[str]:
        """Note lines for files and rows that are not episodes to score: ``n_crashed`` crashed
        episodes, traces without an outcome row, partial writes of a killed run."""
        notes = []
        if n_crashed:
            notes.append(f"{self.path}: {n_crashed} crashed episode(s) have no trace to score "
                         "(their rows are in outcomes.csv)")
        names = {p.stem for p in (self.path / "outcomes").glob("*.json")}
        orphans = sorted(p.name for p in self.trace_paths() if p.stem not in names)
        if orphans:
            notes.append(f"{self.path}: {len(orphans)} trace(s) without an outcome row (episodes "
                         f"that did not finish; --resume reruns them) not scored: {orphans[0]}"
                         + (", ..." if len(orphans) > 1 else ""))
        partial = [p for p in (self.path / "traces").glob(".partial-*")]
        if partial:
            notes.append(f"{self.path}: {len(partial)} partial trace write(s) from an "
                         "interrupted run ignored")
        return notes

    def outcomes(self) -> list[dict[str, Any]]:
        """Every outcome row (from the per-episode files), sorted by cell name."""
        return [read_outcome_row(p) for p in sorted((self.path / "outcomes").glob("*.json"))]

    def done(self) -> set[str]:
        """Cell names that already have a finished outcome. Crashed cells (``error_type``) are
        not done: ``--resume`` runs them again (a server that was down, a bad replay file)."""
        done = set()
        for p in (self.path / "outcomes").glob("*.json"):
            try:
                crashed = read_outcome_row(p).get("error_type")
            except RobosafeError:
                continue  # unreadable: run it again rather than trust it
            if not crashed:
                done.add(p.stem)
        return done

    def write_outcome(self, cell: Cell, row: dict[str, Any]) -> None:
        atomic_write(self.outcome_path(cell), json.dumps(row, sort_keys=True))

    def write_outcomes_csv(self) -> Path:
        out = self.path / "outcomes.csv"
        buf = io.StringIO(newline="")
        w = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in self.outcomes():
            w.writerow({k: r.get(k, "") for k in COLUMNS})
        atomic_write(out, buf.getvalue(), newline="")
        return out


def read_outcome_row(path: Path) -> dict[str, Any]:
    """One ``outcomes/<cell>.json`` row; a clear error naming the file if it is not one."""
    try:
        row = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, RecursionError, json.JSONDecodeError) as exc:
        raise RobosafeError(f"{path}: unreadable outcome row: {exc}") from None
    if not isinstance(row, dict):
        raise RobosafeError(f"{path}: an outcome row must be a JSON object")
    return row


def create_run(path: Path, config: dict[str, Any], task_files: dict[str, Path]) -> RunDir:
    """A new run directory (the config and the task files); an existing one is an error, and
    so is a directory holding anything else (a run never mixes its files with others)."""
    if (path / "run.json").exists():
        raise RobosafeError(f"{path}: a run already exists here; use --resume to continue it "
                            "or choose another --out")
    if path.is_dir() and any(p.name != LOCK_FILE for p in path.iterdir()):
        raise RobosafeError(f"{path}: exists and is not empty (and not a run directory); "
                            "choose another --out")
    # everything that can be refused is read and formatted before the first folder is made
    texts = task_texts(task_files)
    config = {"format": FORMAT, "run_id": path.name, **config}
    text = config_text(config)
    for sub in ("tasks", "traces", "actions", "outcomes"):
        (path / sub).mkdir(parents=True, exist_ok=True)
    for task_id, task_text in texts.items():
        atomic_write(path / "tasks" / f"{task_id}.bddl", task_text)
    atomic_write(path / "run.json", text)
    return RunDir(path, config)


def task_texts(task_files: dict[str, str | Path]) -> dict[str, str]:
    """task_id -> the text of its file; a file that is missing or not UTF-8 is one error
    naming it (the run copies the text, and a worker reads the copy)."""
    out = {}
    for task_id, src in task_files.items():
        try:
            with open(src, "rb") as fh:
                data = fh.read(MAX_TASK_FILE + 1)  # bounded: a huge file is not read whole
        except FileNotFoundError:
            raise RobosafeError(f"task file not found: {src}") from None
        if len(data) > MAX_TASK_FILE:
            raise RobosafeError(f"{src}: larger than {MAX_TASK_FILE >> 20} MiB; not a task file")
        try:
            out[task_id] = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RobosafeError(f"{src}: not a UTF-8 text file (byte {exc.start}: "
                                f"{exc.reason})") from None
    return out


def open_run(path: str | Path) -> RunDir:
    """An existing run directory; a clear error if ``path`` is not one."""
    path = Path(path)
    cfg = path / "run.json"
    if not cfg.is_file():
        raise RobosafeError(f"{path}: not a run directory (no run.json)")
    try:
        config = json.loads(cfg.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RobosafeError(f"{cfg}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
    except (UnicodeDecodeError, RecursionError) as exc:
        raise RobosafeError(f"{cfg}: not valid JSON ({exc})") from None
    if not isinstance(config, dict):
        raise RobosafeError(f"{cfg}: the run config must be a JSON object")
    if config.get("format") != FORMAT:
        raise RobosafeError(f"{cfg}: format {config.get('format')!r}, expected {FORMAT!r}")
    return RunDir(path, config)


def is_run_dir(path: str | Path) -> bool:
    return (Path(path) / "run.json").is_file()
