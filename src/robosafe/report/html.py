"""One self-contained HTML report for one or more run directories.

The file holds everything it shows: CSS inline, figures as base64 PNG data URIs drawn with
matplotlib's Agg backend, no script and no external URL (a Content-Security-Policy meta tag
blocks any that slipped in), so it opens from a mail attachment or an air-gapped machine and
the tables can be copied into a paper. Every number comes from the same functions as
``robosafe score``: ``stats.aggregate`` for the cells and breakdowns, ``stats.intervals`` for
the intervals, ``report.tables`` for the number formats.

Episodes are the finished episodes of each run (an outcome row without ``error_type``), scored
from their traces; crashed episodes are listed on their own and are in no denominator, since a
crash says nothing about the policy's success or safety.
"""

from __future__ import annotations

import base64
import html
import io
import json
import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import robosafe
from robosafe.errors import RobosafeError
from robosafe.report.figures import _errors, pareto_frontier
from robosafe.report.tables import num_ci, pct, pct_ci
from robosafe.runner.rundir import RunDir
from robosafe.runner.scoring import score_run
from robosafe.runner.until import MetricResult, UntilRecord, read_record
from robosafe.safety.registry import Registry, load_registry
from robosafe.safety.score import EpisodeScore
from robosafe.stats import aggregate as agg
from robosafe.stats.intervals import mean_with_ci, wilson_interval
from robosafe.stats.outcomes import OutcomeRow
from robosafe.stats.shield import (
    ShieldComparison,
    ShieldEpisode,
    ShieldSide,
    compare_shield,
    shield_side,
)

log = logging.getLogger(__name__)

LEVEL_AXES = {"language_level": "W", "visual_level": "V"}
# Single-column width of a two-column paper's full text (about 6.5 in) at print resolution.
FIG_WIDTH = 6.4
DPI = 200
RC = {"font.size": 10, "axes.titlesize": 10, "axes.labelsize": 10, "xtick.labelsize": 9,
      "ytick.labelsize": 9, "legend.fontsize": 9, "figure.dpi": DPI}
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1280px; padding: 0 1em; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 2em; }
p.meta { color: #555; margin-top: 0; }
p.note, figcaption { color: #555; font-size: 0.9em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.55em; vertical-align: top;
         white-space: nowrap; }
div.scroll { overflow-x: auto; }
th { background: #f2f2f2; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
figure { margin: 1em 0; }
figure img { width: 100%; max-width: 760px; height: auto; display: block; }
code { font-size: 0.95em; }
"""


@dataclass
class RunResult:
    """One run directory: its scored finished episodes (outcome rows aligned with their
    scores), its crashed outcome rows, the lines naming finished episodes whose trace is
    missing (safety unknown: in no denominator), and its main-table metrics."""

    run: RunDir
    label: str
    rows: list[OutcomeRow]
    scores: list[EpisodeScore]
    crashed: list[OutcomeRow]
    metrics: dict[str, Any] = field(default_factory=dict)
    gaps: list[str] = field(default_factory=list)

    @property
    def policy(self) -> str:
        return self.run.policy_name or "-"

    @property
    def shield(self) -> str:
        """The run's ``--shield`` mode as run.json records it ("off" without one)."""
        return self.run.config.get("shield") or "off"


def load_run(path: str | Path, *, label: str | None = None, workers: int = 1) -> RunResult:
    """Open a run directory and score the traces of its finished episodes
    (``runner.scoring.score_run``, whose rule for a missing trace applies: see ``gaps``).

    A trace that does not hold exactly its row's episode, or a run without any scored
    finished episode, is an error naming the file or run.
    """
    scored = score_run(path, workers=workers)
    run = scored.run
    crashed = [e.row for e in scored.crashed]
    if not scored.finished:
        raise RobosafeError(f"{run.path}: no finished episodes to report"
                            + (f" ({len(crashed)} crashed)" if crashed else
                               " (the run has not finished any episode yet)"))
    if not scored.scored:
        raise RobosafeError(f"{run.path}: no finished episode has its trace "
                            f"({len(scored.gaps)} missing); nothing to report")
    return RunResult(run, label or run.run_id, [e.row for e in scored.scored], scored.scores,
                     crashed, gaps=scored.gaps)


def _level(row: OutcomeRow, key: str) -> int:
    """A perturbation level of a row (unknown = level 0, as ``rundir.level_of`` reads it)."""
    return getattr(row, key) or 0


def run_metrics(r: RunResult, *, n_boot: int, seed: int) -> dict[str, Any]:
    """SR, Safety, SBU, P[U|S], VSI, VSI|U (SafeVLA-Bench Sec. 3.3, Tables 4-5) and CC
    (VLA-Arena Sec. 4.1: mean over episodes of the per-episode cumulative cost)."""
    m = agg.cell_metrics(r.scores, n_boot=n_boot, seed=seed).to_dict()
    costs = [row.cumulative_cost for row in r.rows if row.cumulative_cost is not None]
    m["cc"], m["cc_ci"] = mean_with_ci(costs, n_boot=n_boot, seed=seed)
    m["cc_n"] = len(costs)
    m["crashed"] = len(r.crashed)
    return m


def level_curves(results: Sequence[RunResult], key: str) -> dict[str, list[dict[str, Any]]]:
    """SR per perturbation level and policy with Wilson 95% intervals (VLA-Arena Fig. 2).

    VLA-Arena perturbs one axis at a time, so the curve along ``key`` uses the episodes whose
    other axis is at its lowest level present (V0 for the W curve, W0 for the V curve);
    episodes of every run of the same policy are pooled.
    """
    other = next(k for k in LEVEL_AXES if k != key)
    eps = [(r.policy, _level(row, key), _level(row, other), s.success)
           for r in results for row, s in zip(r.rows, r.scores)]
    base = min(e[2] for e in eps)
    out: dict[str, list[dict[str, Any]]] = {}
    for policy in dict.fromkeys(e[0] for e in eps):
        points = []
        for level in sorted({e[1] for e in eps if e[0] == policy and e[2] == base}):
            ok = [e[3] for e in eps if e[0] == policy and e[1] == level and e[2] == base]
            k, n = int(sum(ok)), len(ok)
            points.append({"level": level, "k": k, "n": n, "sr": k / n,
                           "sr_ci": wilson_interval(k, n).as_list()})
        out[policy] = points
    return out


def varied_axes(results: Sequence[RunResult]) -> list[str]:
    """The perturbation axes with more than one level among the finished episodes."""
    return [k for k in LEVEL_AXES
            if len({_level(row, k) for r in results for row in r.rows}) > 1]


# -- figures -----------------------------------------------------------------------------------

def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def scatter_png(results: Sequence[RunResult]) -> str:
    """SR vs Safety per run with Wilson 95% bars on both axes and the dashed non-dominated
    frontier (SafeVLA-Bench Fig. 2, left)."""
    sr = np.array([100 * r.metrics["sr"] for r in results])
    sf = np.array([100 * r.metrics["safety"] for r in results])
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(FIG_WIDTH, 4.4))
        colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for i, r in enumerate(results):
            ax.errorbar(sr[i:i + 1], sf[i:i + 1],
                        xerr=_errors(sr[i:i + 1], [r.metrics["sr_ci"]]),
                        yerr=_errors(sf[i:i + 1], [r.metrics["safety_ci"]]), fmt="o", ms=6,
                        capsize=3, lw=1, color=colours[i % len(colours)], label=r.label)
        front = pareto_frontier(list(zip(sr, sf)))
        ax.plot(sr[front], sf[front], "--", color="grey", lw=1.2, label="non-dominated frontier")
        ax.set(xlabel="SR (%)", ylabel="Safety (%)", xlim=(-3, 103), ylim=(-3, 103))
        ax.legend(loc="lower left", frameon=True, framealpha=0.9)
        ax.grid(alpha=0.3)
        return _png(fig)


def _heat_colours(ax, values: np.ndarray, vmax: float, fmt) -> None:
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            v = values[i, j]
            ax.text(j, i, "-" if np.isnan(v) else fmt(v), ha="center", va="center", fontsize=9,
                    color="white" if not np.isnan(v) and v > 0.6 * vmax else "black")


def heatmap_png(results: Sequence[RunResult], rates: list[dict[str, Any]],
                specs: list[str], registry: Registry) -> str:
    """Episode violation rate (%) per run and spec, '-' = inactive (SafeVLA-Bench Fig. 2,
    right; Tables 7-8)."""
    heat = np.array([[np.nan if r["specs"][s] is None else 100 * r["specs"][s]["rate"]
                      for s in specs] for r in rates])
    vmax = max(1.0, float(np.nanmax(heat)) if np.isfinite(heat).any() else 1.0)
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(FIG_WIDTH, 1.6 + 0.45 * len(results)))
        im = ax.imshow(np.ma.masked_invalid(heat), cmap="Reds", vmin=0, vmax=vmax,
                       aspect="auto")
        ax.set_xticks(range(len(specs)), [registry.specs[s].short for s in specs],
                      rotation=35, ha="right")
        ax.set_yticks(range(len(results)), [r.label for r in results])
        _heat_colours(ax, heat, vmax, lambda v: f"{v:.1f}")
        fig.colorbar(im, ax=ax, fraction=0.04, label="% of episodes")
        return _png(fig)


def sbu_png(results: Sequence[RunResult], comp: list[dict[str, Any]], specs: list[str],
            registry: Registry) -> str:
    """Share of each spec among the violations of unsafe successes, one bar per run
    (SafeVLA-Bench App. A.5, Tables 10-11, drawn as stacked bars)."""
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(FIG_WIDTH, 1.4 + 0.45 * len(results)))
        left = np.zeros(len(results))
        cmap = plt.get_cmap("tab10")
        for j, s in enumerate(specs):
            w = np.array([100 * c["shares"].get(s, 0.0) for c in comp])
            ax.barh(range(len(results)), w, left=left, color=cmap(j % 10),
                    label=registry.specs[s].short, edgecolor="white")
            left += w
        ax.set_yticks(range(len(results)),
                      [f"{r.label} ({c['sbu_count']}/{c['n']})" for r, c in zip(results, comp)])
        ax.invert_yaxis()
        ax.set(xlabel="share of SBU spec violations (%)", xlim=(0, 100))
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
        return _png(fig)


def levels_png(curves: dict[str, dict[str, list[dict[str, Any]]]]) -> str:
    """SR against language levels W0-W4 and visual levels V0-V4, one line per policy, Wilson
    95% bars (VLA-Arena Sec. 4.2, Fig. 2)."""
    policies = list(dict.fromkeys(p for per in curves.values() for p in per))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    # Policies often share a level's SR; a small sideways dodge keeps their bars apart.
    dodge = {p: 0.06 * (i - (len(policies) - 1) / 2) for i, p in enumerate(policies)}
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, len(curves), figsize=(FIG_WIDTH, 3.4), squeeze=False,
                                 sharey=True)
        for ax, (key, per_policy) in zip(axes[0], curves.items()):
            prefix = LEVEL_AXES[key]
            levels = sorted({p["level"] for pts in per_policy.values() for p in pts})
            for policy, pts in per_policy.items():
                if not pts:
                    continue
                x = np.array([p["level"] for p in pts]) + dodge[policy]
                y = np.array([100 * p["sr"] for p in pts])
                ax.errorbar(x, y, yerr=_errors(y, [p["sr_ci"] for p in pts]), fmt="-o", ms=5,
                            capsize=3, lw=1.2, label=policy,
                            color=colours[policies.index(policy) % len(colours)])
            ax.set_xticks(levels, [f"{prefix}{v}" for v in levels])
            ax.set_xlim(min(levels) - 0.4, max(levels) + 0.4)
            ax.set(title=("Language" if prefix == "W" else "Visual") + " perturbation",
                   ylim=(-3, 103))
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("SR (%)")
        handles, labels = axes[0][0].get_legend_handles_labels()
        for ax in axes[0][1:]:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                if lab not in labels:
                    handles.append(h)
                    labels.append(lab)
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   ncol=min(4, len(labels)), frameon=False)
        fig.tight_layout()
        return _png(fig)


def evidence_png(panels: Sequence[tuple[str, UntilRecord, MetricResult]]) -> str:
    """Each ``--until`` test's path against its boundary, one panel per (run, metric): the log
    e-value of each test after every pair (decided when it reaches log(1/alpha'), the dashed
    line), or the confidence interval's width after every episode (decided when it falls to
    the width asked). The dotted line marks where the run's test decided."""
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    with plt.rc_context(RC):
        fig, axes = plt.subplots(len(panels), 1, figsize=(FIG_WIDTH, 2.6 * len(panels)),
                                 squeeze=False)
        for ax, (label, record, m) in zip(axes[:, 0], panels, strict=True):
            for i, c in enumerate(m.curves):
                colour = colours[i % len(colours)]
                y = np.array([np.nan if v is None else v for v in c.values], dtype=float)
                ax.plot(np.arange(1, len(y) + 1), y, "-o", ms=3, lw=1.2, color=colour,
                        label=c.name.replace("_", " "))
                ax.axhline(c.boundary, ls="--", lw=1, color=colour)
            if m.decision not in ("undecided",) and m.episodes:
                ax.axvline(m.episodes, ls=":", color="grey", lw=1)
            unit = "episodes" if record.plan.mode == "width" else "pairs"
            scale = m.curves[0].scale if m.curves else "log_e"
            ax.set(title=f"{label}: {m.metric}, {m.decision.replace('_', ' ')} after "
                         f"{m.episodes} {unit}",
                   xlabel=unit, ylabel="interval width" if scale == "width" else "log e-value")
            ax.grid(alpha=0.3)
            if m.curves:
                ax.legend(loc="best", frameon=True, framealpha=0.9)
        fig.tight_layout()
        return _png(fig)


# -- HTML --------------------------------------------------------------------------------------

def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


@dataclass(frozen=True)
class Num:
    """A numeric table cell: the formatted text plus the exact value and interval as data
    attributes, so scripts (and the tests) read numbers without parsing the text."""

    text: str
    metric: str = ""
    value: float | None = None
    ci: Sequence[float] | None = None

    def html(self) -> str:
        attrs = f' data-metric="{_e(self.metric)}"' if self.metric else ""
        if self.value is not None:
            attrs += f' data-value="{self.value!r}"'
        if self.ci:
            attrs += f' data-low="{self.ci[0]!r}" data-high="{self.ci[1]!r}"'
        return f'<td class="num"{attrs}>{_e(self.text)}</td>'


def _pct(value: float | None, ci: Sequence[float] | None, metric: str) -> Num:
    return Num(pct_ci(value, ci), metric, value, ci)


def _num(value: float | None, ci: Sequence[float] | None, metric: str, digits: int) -> Num:
    return Num(num_ci(value, ci, digits), metric, value, ci)


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, table_id: str = "",
           row_attrs: Sequence[str] | None = None) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        cells = "".join(c.html() if isinstance(c, Num) else f"<td>{_e(c)}</td>" for c in row)
        extra = f" {row_attrs[i]}" if row_attrs else ""
        body.append(f"<tr{extra}>{cells}</tr>")
    tid = f' id="{_e(table_id)}"' if table_id else ""
    return (f"<div class=\"scroll\"><table{tid}><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>")


def _figure(b64: str, alt: str, caption: str) -> str:
    return (f'<figure><img src="data:image/png;base64,{b64}" alt="{_e(alt)}">'
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def _levels_text(rows: list[OutcomeRow], key: str) -> str:
    return ",".join(f"{LEVEL_AXES[key]}{v}" for v in sorted({_level(r, key) for r in rows}))


def _section_header(results: Sequence[RunResult], title: str, generated: str) -> str:
    policies = list(dict.fromkeys(r.policy for r in results))
    tasks = sorted({s.task_id for r in results for s in r.scores}
                   | {c.task_id for r in results for c in r.crashed if c.task_id})
    n_fin = sum(len(r.scores) for r in results)
    n_crash = sum(len(r.crashed) for r in results)
    n_gap = sum(len(r.gaps) for r in results)
    meta = (f"{len(results)} run(s) · {len(policies)} policy(ies): {', '.join(policies)} · "
            f"{len(tasks)} task(s) · {n_fin} finished episode(s)"
            + (f", {n_crash} crashed" if n_crash else "")
            + (f", {n_gap} without its trace (not scored)" if n_gap else "")
            + f" · generated {generated} by robosafe {robosafe.__version__}")
    rows = []
    for r in results:
        cfg = r.run.config
        every = r.rows + r.crashed
        rows.append([r.label, r.policy, r.shield, cfg.get("suite") or "-",
                     ", ".join(sorted({x.task_id for x in every if x.task_id})),
                     str(len(r.rows)), str(len(r.crashed)),
                     (f"{_levels_text(every, 'language_level')} / "
                      f"{_levels_text(every, 'visual_level')}"),
                     cfg.get("checkpoint_ref") or "-", cfg.get("created") or "-",
                     cfg.get("robosafe_version") or "-", str(r.run.path)])
    runs = _table(["run", "policy", "shield", "suite", "tasks", "finished", "crashed", "levels W / V",
                   "checkpoint", "created", "robosafe (run)", "directory"], rows,
                  table_id="runs-table")
    return (f"<header><h1>{_e(title)}</h1><p class=\"meta\">{_e(meta)}</p>{runs}</header>")


def _section_main(results: Sequence[RunResult], n_boot: int, seed: int) -> str:
    rows, attrs = [], []
    for r in results:
        m = r.metrics
        rows.append([r.label, r.policy, r.shield, Num(str(m["n"]), "n", m["n"]),
                     Num(str(m["crashed"]), "crashed", m["crashed"]),
                     _pct(m["sr"], m["sr_ci"], "sr"), _pct(m["sr_all"], m["sr_all_ci"], "sr_all"),
                     _pct(m["safety"], m["safety_ci"], "safety"),
                     _pct(m["sbu"], m["sbu_ci"], "sbu"),
                     _pct(m["p_unsafe_given_success"], m["p_unsafe_given_success_ci"],
                          "p_unsafe_given_success"),
                     _num(m["vsi"], m["vsi_ci"], "vsi", 3),
                     _num(m["vsi_given_unsafe"], m["vsi_given_unsafe_ci"], "vsi_given_unsafe", 3),
                     _num(m["cc"], m["cc_ci"], "cc", 2)])
        attrs.append(f'data-run="{_e(r.label)}"')
    boot = (f"episode-level percentile bootstrap ({n_boot:,} resamples, seed {seed})"
            if n_boot else "no bootstrap (point estimates only)")
    return (
        "<section id=\"main\"><h2>Success, safety and cost per run</h2>"
        + _table(["run", "policy", "shield", "n", "crashed", "SR %", "SR_all %", "Safety %", "SBU %",
                  "P[U|S] %", "VSI", "VSI|U", "CC"], rows, table_id="main-table",
                 row_attrs=attrs)
        + "<p class=\"note\">n = finished episodes (crashed episodes are listed below and are "
          "in no denominator). SR, Safety, SBU = Succ-But-Unsafe and P[U|S] = SBU/SR over the "
          "scored episodes (those with an active safety spec), SR_all over all n, with "
          "Wilson score 95% intervals; VSI (violation severity index, mean of the per-episode "
          "maximum normalised violation depth) and VSI|U (over unsafe episodes) "
          f"with an {_e(boot)} (SafeVLA-Bench Sec. 3.3, Tables 4-5, App. E). CC = mean "
          "cumulative cost per episode of the task's CBDDL cost terms (VLA-Arena Sec. 4.1, "
          "App. 7.4), same bootstrap.</p></section>")


def _section_scatter(results: Sequence[RunResult]) -> str:
    return ("<section id=\"success-safety\"><h2>Task success vs safety</h2>"
            + _figure(scatter_png(results), "SR vs Safety scatter",
                      "Each marker is a run; bars are Wilson 95% intervals for SR and Safety; "
                      "the dashed line is the non-dominated frontier (higher SR and higher "
                      "Safety both better). SafeVLA-Bench Fig. 2, left.")
            + "</section>")


def _section_specs(results: Sequence[RunResult], rates: list[dict[str, Any]],
                   registry: Registry) -> str:
    specs = [s for s in (rates[0]["specs"] if rates else {})
             if any(r["specs"][s] is not None for r in rates)]
    if not specs:
        return ("<section id=\"specs\"><h2>Per-spec violation rates</h2><p>No safety "
                "specification is active for any episode.</p></section>")
    rows = []
    for r, rr in zip(results, rates):
        cells = []
        for s in specs:
            e = rr["specs"][s]
            cells.append(Num("-", s) if e is None else
                         Num(f"{pct(e['rate'])} ({e['k']}/{e['n']})", s, e["rate"], e["ci"]))
        rows.append([r.label, *cells])
    return ("<section id=\"specs\"><h2>Per-spec violation rates</h2>"
            + _figure(heatmap_png(results, rates, specs, registry), "per-spec violation heatmap",
                      "Episode violation rate (%) per run and safe-tier spec; '-' = the spec "
                      "is inactive for every episode of the run. SafeVLA-Bench Fig. 2, right.")
            + _table(["run", *(registry.specs[s].short for s in specs)], rows,
                     table_id="specs-table")
            + "<p class=\"note\">% of the run's finished episodes that violate the spec "
              "(k/n); '-' = inactive in the run (SafeVLA-Bench App. A.3, Tables 7-8).</p>"
              "</section>")


def _section_sbu(results: Sequence[RunResult], comp: list[dict[str, Any]],
                 registry: Registry) -> str:
    specs = list(dict.fromkeys(s for c in comp for s in c["shares"]))
    rows = []
    for r, c in zip(results, comp):
        rows.append([r.label, Num(f"{pct(c['sbu'])} ({c['sbu_count']}/{c['n']})", "sbu",
                                  c["sbu"]),
                     *(Num(pct(c["shares"][s]) if s in c["shares"] else "-", s,
                           c["shares"].get(s)) for s in specs)])
    out = ("<section id=\"sbu\"><h2>SBU composition</h2>"
           + _table(["run", "SBU % (k/n)", *(f"{registry.specs[s].short} %" for s in specs)],
                    rows, table_id="sbu-table"))
    if specs:
        out += _figure(sbu_png(results, comp, specs, registry), "SBU composition",
                       "Share of each spec among the spec violations of the run's "
                       "successful-but-unsafe episodes (an episode violating k specs adds 1 to "
                       "each and k to the total). SafeVLA-Bench App. A.5, Tables 10-11.")
    else:
        out += "<p>No successful-but-unsafe episodes.</p>"
    return out + ("<p class=\"note\">Shares sum to 100% within a run (SafeVLA-Bench App. A.5)."
                  "</p></section>")


def _section_tasks(results: Sequence[RunResult], n_boot: int, seed: int) -> str:
    per_run = [agg.per_task(r.scores, ())[0]["tasks"] for r in results]
    tasks = sorted({e["task_id"] for ts in per_run for e in ts if e["task_id"] != "aggregate"})
    rows, attrs = [], []
    for task in tasks:
        for r, entries in zip(results, per_run):
            e = next((x for x in entries if x["task_id"] == task), None)
            if e is None:
                continue
            costs = [row.cumulative_cost for row, s in zip(r.rows, r.scores)
                     if s.task_id == task and row.cumulative_cost is not None]
            cc, cc_ci = mean_with_ci(costs, n_boot=n_boot, seed=seed)
            rows.append([task, r.label, Num(str(e["n"]), "n", e["n"]),
                         _pct(e["sr"], e["sr_ci"], "sr"),
                         _pct(e["safety"], e["safety_ci"], "safety"), _num(cc, cc_ci, "cc", 2)])
            attrs.append(f'data-task="{_e(task)}" data-run="{_e(r.label)}"')
    return ("<section id=\"tasks\"><h2>Per-task results</h2>"
            + _table(["task", "run", "n", "SR %", "Safety %", "CC"], rows, table_id="tasks-table",
                     row_attrs=attrs)
            + "<p class=\"note\">Per-task SR and Safety with Wilson 95% intervals "
              "(SafeVLA-Bench App. A.6, Table 12) and mean cumulative cost with a bootstrap "
              "95% interval (VLA-Arena Sec. 4.1).</p></section>")


def _section_levels(results: Sequence[RunResult]) -> str:
    axes = varied_axes(results)
    if not axes:
        return ""
    curves = {k: level_curves(results, k) for k in axes}
    tables = []
    for key, per_policy in curves.items():
        levels = sorted({p["level"] for pts in per_policy.values() for p in pts})
        rows = []
        for policy, pts in per_policy.items():
            at = {p["level"]: p for p in pts}
            rows.append([policy, *(Num(f"{pct_ci(at[v]['sr'], at[v]['sr_ci'])} (n={at[v]['n']})",
                                       f"{LEVEL_AXES[key]}{v}", at[v]["sr"], at[v]["sr_ci"])
                                   if v in at else Num("-") for v in levels)])
        tables.append(_table(["policy", *(f"SR % {LEVEL_AXES[key]}{v}" for v in levels)], rows,
                             table_id=f"levels-{LEVEL_AXES[key]}-table"))
    return ("<section id=\"levels\"><h2>Robustness to language and visual perturbations</h2>"
            + _figure(levels_png(curves), "SR against perturbation level",
                      "SR per perturbation level and policy with Wilson 95% intervals; each "
                      "axis is perturbed alone (the other held at its lowest level present) and "
                      "runs of the same policy are pooled. VLA-Arena Sec. 4.2, Fig. 2.")
            + "".join(tables) + "</section>")


def shield_baseline(shielded: RunResult, results: Sequence[RunResult]) -> RunResult | None:
    """The unshielded run a shielded one is compared with: the first run given without a
    shield, of the same policy and the same tasks."""
    def same(r: RunResult) -> bool:
        a, b = r.run.config, shielded.run.config
        return (r.shield == "off" and a.get("policy") == b.get("policy")
                and sorted(a.get("tasks") or ()) == sorted(b.get("tasks") or ()))
    return next((r for r in results if same(r)), None)


def shield_episodes(r: RunResult) -> list[ShieldEpisode]:
    """The run's scored finished episodes as the shield comparison reads them: the row gives
    the pairing key and the intervention count, the score the judgement."""
    return [ShieldEpisode(suite=row.suite or s.benchmark, task_id=row.task_id or s.task_id,
                          instance_id=row.instance_id or "", episode_id=s.episode_id,
                          episode_idx=row.episode_idx, success=s.success,
                          safe=bool(s.safe) if s.scored else None,
                          vsi=float(s.vsi) if s.scored else None,
                          interventions=row.interventions)
            for row, s in zip(r.rows, r.scores, strict=True)]


def shield_comparisons(results: Sequence[RunResult], *, n_boot: int, seed: int
                       ) -> list[tuple[RunResult, ShieldComparison | ShieldSide]]:
    """Each shielded run against its baseline (:func:`shield_baseline`), or its own side
    alone when no baseline was given."""
    out: list[tuple[RunResult, ShieldComparison | ShieldSide]] = []
    for r in results:
        if r.shield == "off":
            continue
        eps = shield_episodes(r)
        side = shield_side(r.label, r.shield, eps, n_boot=n_boot, seed=seed)
        base = shield_baseline(r, results)
        if base is None:
            out.append((r, side))
            continue
        base_eps = shield_episodes(base)
        out.append((r, compare_shield(shield_side(base.label, "off", base_eps, n_boot=n_boot,
                                                  seed=seed), base_eps, side, eps)))
    return out


def _side_cells(side: ShieldSide) -> list[Num]:
    return [Num(f"{side.n} ({side.n_scored})", "n", side.n),
            _pct(side.sr, side.sr_ci, "sr"), _pct(side.safety, side.safety_ci, "safety"),
            _pct(side.sbu, side.sbu_ci, "sbu"), _num(side.vsi, side.vsi_ci, "vsi", 3),
            _num(side.interventions, side.interventions_ci, "interventions", 2)]


def _test_cell(c: Any, metric: str) -> Num:
    if c is None:
        return Num("-", metric)
    text = f"{100 * c.difference:+.1f}"
    if c.degenerate:
        return Num(f"{text} (zero variance: no interval)", metric, c.difference)
    return Num(f"{text} [{100 * c.ci[0]:+.1f}, {100 * c.ci[1]:+.1f}] p={c.pvalue:.3g} "
               f"({c.design}, n={c.n})", metric, c.difference, c.ci)


def _section_shield(results: Sequence[RunResult], n_boot: int, seed: int) -> str:
    found = shield_comparisons(results, n_boot=n_boot, seed=seed)
    if not found:
        return ""
    rows, attrs, notes = [], [], []
    for r, c in found:
        if isinstance(c, ShieldSide):
            rows.append([r.label, c.mode, *_side_cells(c), Num("-", "sr_diff"),
                         Num("-", "safety_diff")])
            attrs.append(f'data-run="{_e(r.label)}" data-role="shielded"')
            notes.append(f"{r.label}: no unshielded run of the same policy and tasks given; "
                         "add one to compare")
            continue
        rows.append([c.baseline.label, "off", *_side_cells(c.baseline), Num(""), Num("")])
        attrs.append(f'data-run="{_e(c.baseline.label)}" data-role="baseline" '
                     f'data-shielded="{_e(r.label)}"')
        rows.append([r.label, c.shielded.mode, *_side_cells(c.shielded),
                     _test_cell(c.tests.get("success"), "sr_diff"),
                     _test_cell(c.tests.get("safe"), "safety_diff")])
        attrs.append(f'data-run="{_e(r.label)}" data-role="shielded"')
        notes += [f"{r.label}, {m}: {n}" for m, n in c.notes.items()]
    note_html = "".join(f"<p class=\"note\">{_e(n)}</p>" for n in notes)
    return ("<section id=\"shield\"><h2>Safety shield against its unshielded baseline</h2>"
            + _table(["run", "shield", "n (scored)", "SR %", "Safety %", "SBU %", "VSI",
                      "interventions / episode", "SR B - A (pts)", "Safety B - A (pts)"], rows,
                     table_id="shield-table", row_attrs=attrs)
            + "<p class=\"note\">Each shielded run (robosafe run --shield) under its "
              "baseline: the first run given without a shield with the same policy and tasks. "
              "SR, Safety, SBU with Wilson 95% intervals, VSI and interventions per episode "
              "with a bootstrap 95% interval (SafeVLA-Bench App. E). B - A is the shielded "
              "run minus the baseline in points, with the 95% Wald interval and the one-sided "
              "p of \"B higher\" of the task-stratified test, paired on (suite, task, "
              "instance) when both runs hold the same instances (benchmark audit paper 002, "
              "Sec. 4, App. C.1), else the two-sample test (App. C.6). The shield predicts "
              "with the simulator itself: an upper bound on test-time guidance "
              "(docs/guide/shield.md).</p>" + note_html + "</section>")


def _section_until(results: Sequence[RunResult]) -> str:
    """Runs made with ``robosafe run --until``: what the test decided, when, what it saved,
    and the evidence against its boundary (runner.until)."""
    rows, panels = [], []
    for r in results:
        record = read_record(r.run)
        if record is None:
            continue
        p = record.plan
        for m in record.metrics:
            rows.append([r.label, m.metric, "paired" if p.mode == "decided" else "width",
                         m.decision.replace("_", " "), Num(str(m.episodes), "", m.episodes),
                         Num(str(record.episodes_run), "", record.episodes_run),
                         Num(str(record.budget), "", record.budget),
                         Num(str(record.saved), "", record.saved), f"{m.alpha:g}"])
            panels.append((r.label, record, m))
    if not rows:
        return ""
    return ("<section id=\"until\"><h2>Stopped when decided</h2>"
            + _table(["run", "metric", "test", "decision", "after", "episodes run", "budget",
                      "saved", "alpha"], rows, table_id="until-table")
            + _figure(evidence_png(panels), "evidence against its boundary",
                      "Each test's evidence after every pair (log e-value; it decides when it "
                      "reaches the dashed line of the same colour, log(1/alpha'), with the "
                      "budget's calibrated threshold) or the interval's width after every "
                      "episode (decided at the dashed width). The dotted line is where the "
                      "run stopped looking. A decision is wrong with probability at most "
                      "alpha however the run was stopped (docs/guide/audit.md).")
            + "</section>")


def _or_dash(v: Any) -> str:
    return "-" if v is None else str(v)


def _section_crashed(results: Sequence[RunResult]) -> str:
    rows = [[r.label, _or_dash(c.task_id), _or_dash(c.episode_idx), _or_dash(c.instance_id),
             _or_dash(c.error_type), c.error or ""]
            for r in results for c in r.crashed]
    body = (_table(["run", "task", "episode", "instance", "error_type", "message"], rows,
                   table_id="crashed-table") if rows else "<p>No episode crashed.</p>")
    return f"<section id=\"crashed\"><h2>Crashed episodes</h2>{body}</section>"


DIAGNOSTICS = ("shortcut", "data-source", "intervention")

INTERVENTION_COLUMNS = (
    ("monitor", "monitor"), ("episodes", "episodes"), ("failed", "failed"),
    ("human_collisions", "human collisions"), ("prevented", "prevented"),
    ("stopped_contacts", "stopped-robot contacts"),
    ("scene_collision_episodes", "scene-contact episodes"),
    ("interventions", "interventions"), ("false_interventions", "false"),
    ("false_per_min", "false / min"), ("time_lost_s", "time lost s"))
"""The columns of the intervention table: the fields of ``robosafe grounding intervene``'s
summaries (robosafe.grounding.intervene.MonitorSummary) and their headers."""


def _check_intervention(doc: dict[str, Any], p: str | Path) -> None:
    """One error line naming the first field of an intervention JSON the table cannot use."""
    rows = doc.get("summaries")
    if not isinstance(rows, list) or not rows:
        raise RobosafeError(f"{p}: 'summaries' must be a non-empty list (robosafe grounding "
                            "intervene --json)")
    for i, row in enumerate(rows):
        for key, _ in INTERVENTION_COLUMNS:
            v = row.get(key, "missing") if isinstance(row, dict) else "missing"
            if key == "monitor":
                ok = isinstance(v, str)
            elif key == "false_per_min" and v is None:  # no simulated minute: no rate
                ok = True
            else:
                ok = type(v) in (int, float) and math.isfinite(v) and v >= 0
            if not ok:
                raise RobosafeError(f"{p}: summaries[{i}].{key}: expected "
                                    f"{'a name' if key == 'monitor' else 'a number >= 0'}, "
                                    f"got {v!r}"[:200])


def load_diagnostics(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """The result files of ``audit shortcut`` / ``audit data-source`` (shortcut.json,
    data_source.json); one error line for a file that is neither."""
    out = []
    for p in paths:
        try:
            doc = json.loads(Path(p).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise RobosafeError(f"{p}: not a readable diagnostics JSON file ({exc})") from None
        kind = doc.get("diagnostic") if isinstance(doc, dict) else None
        if kind not in DIAGNOSTICS:
            raise RobosafeError(f"{p}: field 'diagnostic' is {kind!r}; expected the output of "
                                "robosafe audit shortcut, audit data-source or grounding "
                                "intervene --json")
        if kind == "intervention":
            _check_intervention(doc, p)
        out.append(doc)
    return out


def _rate(r: dict[str, Any] | None, metric: str) -> Num:
    if not r or r.get("sr") is None:
        return Num("-")
    return Num(f"{pct_ci(r['sr'], r['ci'])} ({r['successes']}/{r['episodes']})", metric,
               r["sr"], r["ci"])


def _shortcut_html(d: dict[str, Any]) -> str:
    best, final, demo = d["best"], d["final"], d["demonstrator"]
    rows = [[t, _rate(demo["tasks"].get(t) if demo else None, "demonstrator"),
             _rate(best["tasks"].get(t), "probe-best"), _rate(final["tasks"].get(t), "probe-final"),
             "yes" if t in d["solved"] else "no"] for t in d["tasks"]]
    rows.append(["all", _rate(demo, "demonstrator"), _rate(best, "probe-best"),
                 _rate(final, "probe-final"), str(len(d["solved"]))])
    return (f"<h3>Shortcut probe ({_e(d['suite'] or 'tasks')})</h3>"
            + _table(["task", "demonstrator SR %", f"probe best (step {best['step']}) SR %",
                      f"probe final (step {final['step']}) SR %", "solved"], rows,
                     table_id="shortcut-table")
            + f"<p>{_e(d['conclusion'] or 'No demonstrator SR to compare with.')}</p>"
            + "<p class=\"note\">The probe never reads the instruction: a learned task index "
              "replaces it (paper 002 Sec. 3, App. A.1). Best = the checkpoint scoring highest "
              "on these same episodes (selection on the test set, as the paper reports); final "
              f"= the last step. {d['episodes_per_task']} episodes per task, Wilson 95% "
              "intervals.</p>")


def _datasource_html(d: dict[str, Any]) -> str:
    rows = []
    for name, p in d["policies"].items():
        dist = p["train_test_distance"]
        rows.append([name, Num(str(p["demos"]), "demos", p["demos"]),
                     Num(f"{100 * dist['median_m']:.2f} / {100 * dist['max_m']:.2f}",
                         "distance-cm", dist["median_m"]), _rate(p, f"sr-{name}")])
    w = d["paired_test"]["wald"]
    z = "infinite" if w["statistic"] is None else f"{w['statistic']:.3f}"
    return (f"<h3>Data-source dependence ({_e(d['suite'] or 'tasks')})</h3>"
            + _table(["training data", "demos", "train-test distance cm (median / max)",
                      "SR %"], rows, table_id="data-source-table")
            + f"<p>Paired Wald test, near over far: Z = {_e(z)}, one-sided p = "
              f"{w['pvalue']:.4g}. {_e(d['conclusion'])}</p>"
            + "<p class=\"note\">Near: demonstrations at the evaluation seeds with objects "
              "jittered by up to 0.0025 m and 15 degrees; far: other seeds (paper 002 Sec. 6, "
              "App. A.3). Distance: per training episode, the largest horizontal displacement "
              "of a body from the nearest evaluation episode of its task. Policies: "
              f"{_e(_datasource_training(d))}.</p>")


def _datasource_training(d: dict[str, Any]) -> str:
    """How the data-source policies were trained (files written before robosafe recorded it
    trained one multi-task probe with augmentation)."""
    per_task = d.get("training", "multi-task") == "per-task"
    aug = d.get("augmentation", "training" not in d)
    return (("one per task (App. A.3)" if per_task else "one multi-task probe (robosafe's option)")
            + (", image augmentation on" if aug else ", no image augmentation (App. A.3)"))


def _intervention_html(d: dict[str, Any]) -> str:
    cfg = d.get("config") if isinstance(d.get("config"), dict) else {}
    rows = [[r["monitor"], *(Num(_or_dash(r[k]), f"{r['monitor']}-{k}", r[k])
                             for k, _ in INTERVENTION_COLUMNS[1:])] for r in d["summaries"]]
    action = cfg.get("action", "?")
    return (f"<h3>Closed-loop intervention ({_e(action)})</h3>"
            + _table([h for _, h in INTERVENTION_COLUMNS], rows, table_id="intervention-table")
            + "<p class=\"note\">robosafe grounding intervene: monitors command the robot "
              "(stop: protective stop; slow: speed scaled to the protective separation "
              "distance) in the generator's seeded scenes; <i>none</i> is the same episodes "
              "without intervention. Prevented: the reference collided, this run did not. "
              "Stopped-robot contacts: the human walked into a robot that did not move. "
              "False: an alarm onset from which a full-speed look-ahead "
              f"({_e(cfg.get('horizon_s', '?'))} s) would not have touched the human. Failed "
              "episodes (the monitor timed out, crashed or answered no label) count in no "
              "other column (docs/guide/human-proximity.md).</p>")


def _section_diagnostics(diagnostics: Sequence[dict[str, Any]]) -> str:
    if not diagnostics:
        return ""
    html_of = {"shortcut": _shortcut_html, "data-source": _datasource_html,
               "intervention": _intervention_html}
    parts = [html_of[d["diagnostic"]](d) for d in diagnostics]
    return "<section id=\"diagnostics\"><h2>Benchmark diagnostics</h2>" + "".join(parts) \
        + "</section>"


def render_html(results: Sequence[RunResult], *, title: str, n_boot: int, seed: int,
                registry: Registry, generated: str,
                diagnostics: Sequence[dict[str, Any]] = ()) -> str:
    """The report page for already loaded runs (``metrics`` filled in)."""
    rates = [agg.spec_violation_rates(r.scores, (), registry, n_boot=0)[0] for r in results]
    comp = [agg.sbu_composition(r.scores, ())[0] for r in results]
    body = "".join([
        _section_header(results, title, generated), "<main>",
        _section_main(results, n_boot, seed), _section_scatter(results),
        _section_specs(results, rates, registry), _section_sbu(results, comp, registry),
        _section_shield(results, n_boot, seed), _section_until(results),
        _section_tasks(results, n_boot, seed), _section_levels(results),
        _section_diagnostics(diagnostics), _section_crashed(results), "</main>"])
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<meta name=\"generator\" content=\"robosafe {_e(robosafe.__version__)}\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head>"
            f"<body>{body}</body></html>\n")


def write_report(run_dirs: Sequence[str | Path], out_path: str | Path, *,
                 title: str | None = None, n_boot: int = 10_000, seed: int = 0,
                 workers: int = 1, diagnostics: Sequence[str | Path] = (),
                 warn: Callable[[str], None] | None = None) -> Path:
    """Score the run directories and write one self-contained HTML report; returns its path.

    Sections: runs header; main table SR / Safety / SBU / P[U|S] / VSI / VSI|U / CC with 95%
    intervals (SafeVLA-Bench Tables 4-5, App. E; VLA-Arena 4.1); SR-vs-Safety scatter with
    the non-dominated frontier and the per-spec violation heatmap (SafeVLA-Bench Fig. 2,
    Tables 7-8); SBU composition (App. A.5, Tables 10-11); per-task SR / Safety / CC (App.
    A.6, Table 12); SR against W0-W4 / V0-V4 when the runs vary them (VLA-Arena Fig. 2); and
    the benchmark diagnostics given (the shortcut probe's and demonstrator's SR per task, the
    data-source comparison: paper 002 Sec. 3 and 6); the crashed episodes with their error_type.

    ``warn`` (default: the logger) gets one line per finished episode whose trace is missing;
    the report is still written, with that episode in no denominator.
    """
    diags = load_diagnostics(diagnostics)
    if not run_dirs:
        raise RobosafeError("no run directories given")
    seen: dict[Path, str] = {}
    results: list[RunResult] = []
    for d in run_dirs:
        key = Path(d).resolve()
        if key in seen:
            raise RobosafeError(f"{d}: run directory given twice (also as {seen[key]})")
        seen[key] = str(d)
        r = load_run(d, workers=workers)
        for line in r.gaps:
            (warn or log.warning)(line)
        labels = {x.label for x in results}
        if r.label in labels:  # same run name in two parents: keep rows apart
            r.label = next(f"{r.label} ({i})" for i in range(2, len(results) + 3)
                           if f"{r.label} ({i})" not in labels)
        r.metrics = run_metrics(r, n_boot=n_boot, seed=seed)
        results.append(r)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = render_html(results, title=title or "robosafe report", n_boot=n_boot, seed=seed,
                       registry=load_registry(), generated=generated, diagnostics=diags)
    out = Path(out_path)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out)
    except OSError as err:
        raise RobosafeError(f"{out}: cannot write the report: {err.strerror or err}") from None
    return out
