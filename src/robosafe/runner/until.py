"""``robosafe run --until``: stop evaluating as soon as the answer is known.

Two plans (:class:`UntilPlan`):

* ``decided`` (``--against BASELINE_RUN``): the new policy runs on the baseline's cells, in the
  baseline's seed order (:func:`robosafe.stats.ordered.seed_order`), paired with the
  baseline's outcome rows on (suite, task_id, instance_id) exactly as ``robosafe audit
  sequential`` pairs them; after every episode the anytime-valid paired test of
  :mod:`robosafe.stats.sequential` looks at the pairs, and the run stops once it decides
  (better, worse, not better by delta) or the budget (``-n``: every cell of the run) is spent.
* ``decided`` with ``--against-policy`` (neither policy has run): the baseline is made too,
  in the ``--against`` folder, batch by batch in seed order, each batch by the baseline and
  then by the new policy (:func:`run_alternately`); both stop at the decision.
* ``width`` (one policy): the beta-binomial confidence sequence of the metric, in the run's
  own seed order, until it is narrower than the width asked.

The test reads a *prefix* of the fixed order only: the longest run of cells, from the first,
that all have an outcome row. Parallel workers finish out of order (failures run to the
horizon, so the order they finish in depends on the outcomes); an episode finished past a gap
waits until the gap is filled. Every decision is therefore the one the test makes on the
outcomes in seed order, and the same as ``robosafe audit sequential BASELINE RUN --order
episode --budget B`` computes from the stored tables (tests/test_run_until.py checks that).
The budget is fixed before the first episode (it is ``-n``, part of the run's identity), so
the comparison uses the threshold calibrated to it (``calibrated_log_threshold``): valid at
every stop up to the budget, and a run is never extended past it.

The plan is part of run.json's configuration (``--resume`` must match it); what the run
decided (:class:`UntilRecord`) is written beside it as ``until_result``, and recomputed from
the stored outcomes on ``--resume``: a decided run runs nothing more.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robosafe.errors import RobosafeError
from robosafe.outputs import DirLock
from robosafe.runner.rundir import Cell, RunDir, open_run
from robosafe.runner.until_plan import UntilPlan
from robosafe.stats.ordered import OrderedOutcomes, order_records, pair_in_order, seed_order
from robosafe.stats.sequential import (
    ComparisonDecision,
    ProportionDecision,
    paired_sequential,
    proportion_sequential,
)

if TYPE_CHECKING:
    from robosafe.runner.plan import RunPlan

RESULT_KEY = "until_result"  # run.json: the UntilRecord of the run


@dataclass(frozen=True)
class Curve:
    """One test's path along the episodes: ``values[i]`` after i + 1 pairs (episodes), and
    the boundary whose crossing decides ``name``. ``scale`` ``log_e``: log e-value, decided
    at or above ``boundary`` = log(1/alpha'); ``width``: the interval's width, decided at or
    below ``boundary``. None: an e-value of 0 (log -inf)."""

    name: str
    scale: str
    boundary: float
    values: tuple[float | None, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "scale": self.scale, "boundary": self.boundary,
                "values": list(self.values)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Curve:
        return cls(str(d["name"]), str(d["scale"]), float(d["boundary"]),
                   tuple(None if v is None else float(v) for v in d["values"]))


@dataclass(frozen=True)
class MetricResult:
    """One metric's decision: after ``episodes`` of the ``available`` pairs (episodes), at
    ``alpha`` (the plan's alpha / m); ``interval``: the rate's interval (mode width)."""

    metric: str
    decision: str
    episodes: int
    available: int
    alpha: float
    curves: tuple[Curve, ...]
    interval: tuple[float, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["curves"] = [c.to_dict() for c in self.curves]
        d["interval"] = None if self.interval is None else list(self.interval)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MetricResult:
        return cls(str(d["metric"]), str(d["decision"]), int(d["episodes"]),
                   int(d["available"]), float(d["alpha"]),
                   tuple(Curve.from_dict(c) for c in d["curves"]),
                   None if d.get("interval") is None else tuple(d["interval"]))


STATUSES = ("decided", "budget", "incomplete")


@dataclass(frozen=True)
class UntilRecord:
    """Where an ``--until`` run stands (run.json ``until_result``, the results store, the
    report). ``status``: decided; budget (every cell ran, undecided); incomplete (stopped
    before either, e.g. interrupted or crashed episodes to rerun). ``episodes``: pairs
    (episodes) up to the decision, the last metric's; ``episodes_run``: outcome rows the run
    holds (the cells in flight at the decision finish too); ``saved``: budget - episodes_run
    once decided."""

    plan: UntilPlan
    decision: str  # "decided" or "undecided"
    status: str
    episodes: int
    episodes_run: int
    metrics: tuple[MetricResult, ...]

    @property
    def budget(self) -> int:
        return self.plan.budget

    @property
    def saved(self) -> int:
        return self.budget - self.episodes_run if self.status == "decided" else 0

    def to_dict(self) -> dict[str, Any]:
        return {"plan": self.plan.to_dict(), "decision": self.decision, "status": self.status,
                "episodes": self.episodes, "episodes_run": self.episodes_run,
                "budget": self.budget, "saved": self.saved,
                "metrics": [m.to_dict() for m in self.metrics]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> UntilRecord:
        try:
            return cls(UntilPlan.from_dict(d["plan"]), str(d["decision"]), str(d["status"]),
                       int(d["episodes"]), int(d["episodes_run"]),
                       tuple(MetricResult.from_dict(m) for m in d["metrics"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise RobosafeError(f"run.json {RESULT_KEY}: not a stopping record ({exc!r})"
                                ) from None


def read_record(run: RunDir) -> UntilRecord | None:
    """The run's stopping record, or None for a run made without ``--until``."""
    d = run.config.get(RESULT_KEY)
    return None if d is None else UntilRecord.from_dict(d)


# -- the baseline -------------------------------------------------------------------------------

def _suite(config: dict[str, Any]) -> str:
    return config.get("suite") or "tasks"  # the suite column runner.run writes


def in_seed_order(cells: list[Cell], suite: str) -> list[Cell]:
    """``cells`` in the order the sequential tests read a run (stats.ordered.seed_order)."""
    return sorted(cells, key=lambda c: seed_order(c.episode_idx,
                                                  (suite, c.task_id, c.instance_id)))


def baseline_outcomes(plan: UntilPlan, cfg, partial: bool = False
                      ) -> dict[str, OrderedOutcomes]:
    """The baseline run's outcomes per metric, in seed order, checked against the run asked
    for (``cfg``, a RunPlan): the same tasks, suite and levels, the same seed for every
    episode index, and (unless ``partial``: a baseline made alongside) an outcome row for
    every cell. One error line otherwise, before any episode."""
    base = open_run(plan.against)
    bc = base.config
    where = f"--against {plan.against}"
    if _suite(bc) != (cfg.suite or "tasks"):
        raise RobosafeError(f"{where}: the baseline ran suite {_suite(bc)!r}, this run "
                            f"{cfg.suite or 'tasks'!r}")
    tasks = sorted(bc.get("tasks") or ())
    if tasks != sorted(cfg.tasks):
        missing = sorted(set(cfg.tasks) - set(tasks))
        extra = sorted(set(tasks) - set(cfg.tasks))
        raise RobosafeError(f"{where}: the baseline ran other tasks ("
                            + "; ".join(x for x in (
                                f"not {', '.join(missing)}" if missing else "",
                                f"also {', '.join(extra)}" if extra else "") if x)
                            + "); select the same tasks")
    seeds = list(cfg.seeds)
    theirs = list(bc.get("seeds") or ())
    if theirs[:len(seeds)] != seeds[:len(theirs)]:
        raise RobosafeError(f"{where}: the baseline's seeds {theirs[:8]}"
                            f"{' ...' if len(theirs) > 8 else ''} are not this run's "
                            f"{seeds[:8]}{' ...' if len(seeds) > 8 else ''} (episode by "
                            "episode); pairs need the same seeds")
    if len(theirs) < len(seeds):
        raise RobosafeError(f"{where}: the baseline lacks episodes {len(theirs)}.."
                            f"{len(seeds) - 1} of each task (it ran -n {len(theirs)}); the "
                            f"budget -n can be at most {len(theirs)}")
    for key, mine in (("language_levels", cfg.language_levels),
                      ("visual_levels", cfg.visual_levels)):
        if sorted(bc.get(key) or (0,)) != sorted(mine):
            raise RobosafeError(f"{where}: the baseline ran {key.replace('_', ' ')} "
                                f"{bc.get(key)}, this run {list(mine)}")
    rows = base.outcomes()
    have = {(str(r.get("task_id")), str(r.get("instance_id"))) for r in rows}
    lacking = [c for c in cfg.cells() if (c.task_id, c.instance_id) not in have]
    if partial and not rows:
        return {}
    if lacking and not partial:
        raise RobosafeError(f"{where}: the baseline lacks {len(lacking)} of this run's "
                            f"{len(cfg.cells())} episodes (first: {lacking[0].name}); run it "
                            "with the same -n, or resume it first")
    records = [(f"{plan.against}:{r.get('task_id')}#{r.get('episode_idx')}", r) for r in rows]
    return {m: order_records(str(plan.against), records, False, m, "episode")
            for m in plan.metrics}


# -- the decision -------------------------------------------------------------------------------

def _undecided(metric: str, alpha: float) -> MetricResult:
    return MetricResult(metric, "undecided", 0, 0, alpha, ())


def _comparison(metric: str, r: ComparisonDecision) -> MetricResult:
    curves = tuple(Curve(e.name, "log_e", e.log_threshold,
                         tuple(None if math.isinf(v) else v for v in e.log_e))
                   for e in r.evidence)
    return MetricResult(metric, r.decision, r.episodes, r.available, r.alpha, curves)


def _proportion(metric: str, r: ProportionDecision) -> MetricResult:
    widths = tuple(hi - lo for lo, hi in zip(r.lower, r.upper, strict=True))
    return MetricResult(metric, r.decision, r.episodes, r.available, r.alpha,
                        (Curve("width", "width", float(r.width), widths),),
                        (r.lower[-1], r.upper[-1]) if r.lower else (0.0, 1.0))


def decide(plan: UntilPlan, rows: list[dict[str, Any]], source: str,
           baseline: dict[str, OrderedOutcomes] | None) -> list[MetricResult]:
    """Each metric's test on ``rows`` (the run's rows of a prefix of its seed order)."""
    records = [(f"{source}:{r.get('task_id')}#{r.get('episode_idx')}", r) for r in rows]
    out = []
    for m in plan.metrics:
        if not records:
            out.append(_undecided(m, plan.alpha_each))
            continue
        mine = order_records(source, records, False, m, "episode")
        if plan.mode == "width":
            out.append(_proportion(m, proportion_sequential(
                mine.values, alpha=plan.alpha_each, width=plan.width, budget=plan.budget))
                if mine.values else _undecided(m, plan.alpha_each))
            continue
        theirs = baseline.get(m)
        if theirs is None or not set(mine.keys) & set(theirs.keys):
            out.append(_undecided(m, plan.alpha_each))
            continue
        ya, yb, _, _ = pair_in_order(theirs, mine)
        out.append(_comparison(m, paired_sequential(
            ya, yb, alpha=plan.alpha_each, delta=plan.delta, two_sided=plan.two_sided,
            budget=plan.budget)))
    return out


def _joint(plan: UntilPlan, results: list[MetricResult]) -> tuple[str, int]:
    """("decided" when every metric is, else "undecided"; the episodes of the last)."""
    if all(r.decision != "undecided" for r in results):
        return "decided", max(r.episodes for r in results)
    return "undecided", max(r.available for r in results)


class Tracker:
    """The run's rows as they arrive, and the decision on the prefix of its seed order."""

    def __init__(self, plan: UntilPlan, run: RunDir, cells: list[Cell],
                 baseline: dict[str, OrderedOutcomes] | None,
                 partner: set[str] | None = None):
        self.plan, self.run, self.baseline = plan, run, baseline
        # a baseline made alongside: the cells it has a row for (the prefix needs both)
        self.partner = partner
        self.order = in_seed_order(cells, _suite(run.config))
        self.rows: dict[str, dict[str, Any]] = {}
        for row in run.outcomes():
            self.add(row, recompute=False)
        self.results = self._decide()

    def set_baseline(self, baseline: dict[str, OrderedOutcomes], partner: set[str]) -> None:
        self.baseline, self.partner = baseline, partner
        self.results = self._decide()

    def add(self, row: dict[str, Any], recompute: bool = True) -> None:
        self.rows[Cell.of_row(row).name] = row
        if recompute:
            self.results = self._decide()

    def refresh(self) -> None:
        """Take in every row the run directory holds: an interrupt can fall between an outcome
        written and its ``add`` (the record must count what is stored, as --resume will)."""
        for row in self.run.outcomes():
            self.rows.setdefault(Cell.of_row(row).name, row)
        self.results = self._decide()

    def prefix(self) -> list[dict[str, Any]]:
        out = []
        for c in self.order:
            if c.name not in self.rows or (self.partner is not None
                                           and c.name not in self.partner):
                break
            out.append(self.rows[c.name])
        return out

    def _decide(self) -> list[MetricResult]:
        return decide(self.plan, self.prefix(), str(self.run.path), self.baseline)

    @property
    def decided(self) -> bool:
        return _joint(self.plan, self.results)[0] == "decided"

    def record(self) -> UntilRecord:
        decision, episodes = _joint(self.plan, self.results)
        done = len(self.prefix()) == len(self.order)  # every cell, on both sides
        status = "decided" if decision == "decided" else "budget" if done else "incomplete"
        return UntilRecord(self.plan, decision, status, episodes, len(self.rows),
                           tuple(self.results))


def run_until(run: RunDir, cells: list[Cell], plan: UntilPlan, *,
              execute: Callable[..., Any], **kw: Any) -> UntilRecord:
    """Run ``cells`` (those of ``run`` still to run, from ``runner.run.prepare``) in seed order
    through ``execute`` (``runner.run.execute``, with its ``workers`` / ``backend`` /
    ``on_result`` / ``ray_address`` in ``kw``) until the plan's test decides; the record is
    written into run.json. A run decided before (``--resume``) runs nothing."""
    try:
        cfg = run.plan
        baseline = baseline_outcomes(plan, cfg) if plan.mode == "decided" else None
        tracker = Tracker(plan, run, cfg.cells(), baseline)
    except BaseException:
        if run.lock is not None:  # execute would have released it
            run.lock.release()
            run.lock = None
        raise
    todo = [] if tracker.decided else in_seed_order(cells, _suite(run.config))
    on_result = kw.pop("on_result", None)

    def seen(row: dict[str, Any]) -> None:
        tracker.add(row)
        if on_result:
            on_result(row)

    try:
        execute(run, todo, on_result=seen, in_order=True, stop=lambda: tracker.decided, **kw)
    finally:
        tracker.refresh()
        record = tracker.record()
        write_record(run, record)
    return record


def run_alternately(run: RunDir, cells: list[Cell], plan: UntilPlan, *,
                    prepare: Callable[..., Any], execute: Callable[..., Any],
                    workers: int = 1, **kw: Any) -> UntilRecord:
    """:func:`run_until` when the baseline is made too (``plan.baseline_policy``): batches of
    ``workers`` cells in seed order, each run first by the baseline (in ``plan.against``,
    created or continued through ``prepare``) and then by this run, until the test decides.
    The test reads the cells both runs hold, from the first on, so neither side's order of
    finishing matters; the baseline stops where this run does."""
    cfg = run.plan
    # the baseline's task files: this run's own copies (run.json names them relative to it)
    cfg_a = replace(cfg.without_until(plan.baseline_policy),
                    tasks={t: str(run.task_file(t)) for t in cfg.tasks})
    suite = _suite(run.config)
    on_result = kw.pop("on_result", None)
    tracker = None
    try:
        tracker = Tracker(plan, run, cfg.cells(), *_alongside(plan, cfg))
        todo = {c.name for c in cells}
        every = in_seed_order(cfg.cells(), suite)
        size = max(1, workers)

        def seen(row: dict[str, Any]) -> None:
            tracker.add(row)
            if on_result:
                on_result(row)

        for i in range(0, len(every), size):
            if tracker.decided:
                break
            batch = {c.name for c in every[i:i + size]}
            base, todo_a = prepare(cfg_a, plan.against, resume=is_run(plan.against))
            execute(base, in_seed_order([c for c in todo_a if c.name in batch], suite),
                    in_order=True, workers=workers, **kw)
            tracker.set_baseline(*_alongside(plan, cfg))
            if run.lock is None:  # execute released it after the previous batch
                run.lock = DirLock.acquire(run.path, "run directory")
            execute(run, [c for c in every[i:i + size] if c.name in todo], on_result=seen,
                    in_order=True, stop=lambda: tracker.decided, workers=workers, **kw)
    finally:
        if run.lock is not None:
            run.lock.release()
            run.lock = None
        if tracker is not None:
            tracker.refresh()
            write_record(run, tracker.record())
    return tracker.record()


def check_alongside(plan: UntilPlan, cfg: RunPlan) -> None:
    """A baseline to be made alongside, checked before any episode: a baseline run already
    there (continued) ran this policy on these cells."""
    if is_run(plan.against):
        ran = open_run(plan.against).config.get("policy")
        if ran != cfg.without_until(plan.baseline_policy).to_json()["policy"]:
            raise RobosafeError(f"--against {plan.against}: ran policy {ran!r}, not "
                                f"--against-policy {plan.baseline_policy!r}")
        baseline_outcomes(plan, cfg, partial=True)


def is_run(path: str | Path) -> bool:
    return (Path(path) / "run.json").is_file()


def _alongside(plan: UntilPlan, cfg) -> tuple[dict[str, OrderedOutcomes], set[str]]:
    """A baseline made alongside: its outcomes so far and the cells it has rows for."""
    if not is_run(plan.against):
        return {}, set()
    names = {Cell.of_row(r).name for r in open_run(plan.against).outcomes()}
    return baseline_outcomes(plan, cfg, partial=True), names


def write_record(run: RunDir, record: UntilRecord) -> None:
    """``until_result`` in run.json, beside the plan."""
    run.set_record(RESULT_KEY, record.to_dict())


def describe(record: UntilRecord) -> list[str]:
    """Lines for the terminal: the decision per metric, when, and what it saved."""
    p = record.plan
    out = []
    for m in record.metrics:
        if p.mode == "width":
            lo, hi = m.interval or (0.0, 1.0)
            what = (f"interval [{lo:.3f}, {hi:.3f}] narrower than {p.width:g}"
                    if m.decision == "width_reached" else "interval not yet that narrow")
        else:
            what = {"better": "better than the baseline", "worse": "worse than the baseline",
                    "not_better": f"not better than the baseline by {p.delta}",
                    "undecided": "undecided"}[m.decision]
        unit = "episodes" if p.mode == "width" else "pairs"
        out.append(f"{m.metric}: {what} after {m.episodes} {unit} (alpha {m.alpha:g})")
    if record.status == "decided":
        out.append(f"decided after {record.episodes_run} of {record.budget} episodes: "
                   f"{record.saved} not run")
    elif record.status == "budget":
        out.append(f"undecided: the budget of {record.budget} episodes is spent")
    else:
        out.append(f"not decided yet: {record.episodes_run} of {record.budget} episodes "
                   "stored; --resume continues")
    return out
