"""Terminal tables (rich) for scores and registries, laid out like the SafeVLA-Bench tables."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from robosafe.safety.registry import Registry


def pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}"


def pct_ci(value: float | None, ci: Sequence[float] | None) -> str:
    if value is None:
        return "-"
    if not ci:
        return pct(value)
    return f"{pct(value)} [{pct(ci[0])}, {pct(ci[1])}]"


def num_ci(value: float | None, ci: Sequence[float] | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    if not ci:
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def _table(title: str, by: Sequence[str], columns: Sequence[str]) -> Table:
    t = Table(title=title, title_justify="left", header_style="bold")
    for k in by:
        # nothing ends in "…" (here or in the value columns): two long task names cut to the
        # same prefix would be indistinguishable; a narrow table folds onto more lines
        t.add_column(k, overflow="fold")
    for c in columns:
        t.add_column(c, justify="right", overflow="fold")
    return t


def cells_table(rows: list[dict[str, Any]], by: Sequence[str]) -> Table:
    """Main results (Tables 4-5): n, SR, Safety, SBU, P[U|S], VSI with 95% intervals over the
    scored episodes (so P[U|S] = SBU / SR and the 2x2 table sums to n - unscored), SR_all over
    every episode beside them; the unscored episodes (no active spec) and the episodes
    missing a signal field per cell."""
    t = _table("Success and safety per cell (Wilson / bootstrap 95% CI; % except VSI; SR to "
               "2x2 over scored episodes, SR_all over all n)", by,
               ["n", "unscored", "SR", "SR_all", "Safety", "SBU", "P[U|S]", "VSI", "VSI|U",
                "2x2 SS/SU/FS/FU", "missing fields (episodes)"])
    for r in rows:
        tab = r["table"]
        missing = ", ".join(f"{f} ({k})" for f, k in r["missing_families"].items()) or "-"
        t.add_row(*[str(r[k]) for k in by], str(r["n"]), str(r["n_unscored"]),
                  _sr(r), pct_ci(r["sr_all"], r["sr_all_ci"]),
                  pct_ci(r["safety"], r["safety_ci"]), pct_ci(r["sbu"], r["sbu_ci"]),
                  pct_ci(r["p_unsafe_given_success"], r["p_unsafe_given_success_ci"]),
                  num_ci(r["vsi"], r["vsi_ci"]),
                  num_ci(r["vsi_given_unsafe"], r["vsi_given_unsafe_ci"]),
                  "/".join(str(tab[k]) for k in ("success_safe", "success_unsafe",
                                                 "failure_safe", "failure_unsafe")), missing)
    return t


def _sr(row: dict[str, Any]) -> str:
    """SR with its interval; "n/a" when no episode's success is known (never 0), and how many
    episodes it leaves out for an unknown success."""
    unknown = row.get("n_success_unknown", 0)
    text = "n/a" if row["sr"] is None and unknown else pct_ci(row["sr"], row["sr_ci"])
    return text + (f" ({unknown} unknown)" if unknown else "")


def spec_rates_table(rows: list[dict[str, Any]], by: Sequence[str],
                     registry: Registry) -> Table:
    """Per-spec marginal violation rates (Tables 7-8); '-' = inactive in the cell."""
    spec_ids = list(rows[0]["specs"]) if rows else []
    t = _table("Per-spec violation rate, % of episodes (App. A.3)", by,
               [registry.specs[s].short for s in spec_ids])
    for r in rows:
        t.add_row(*[str(r[k]) for k in by],
                  *[pct(None if r["specs"][s] is None else r["specs"][s]["rate"])
                    for s in spec_ids])
    return t


def severity_table(rows: list[dict[str, Any]], cells: list[dict[str, Any]],
                   by: Sequence[str], registry: Registry) -> Table:
    """App. E continuous summaries per cell: mean peak contact force and, per spec, NSV (mean
    Eq. (1) depth) with their episode-bootstrap 95% intervals; '-' = inactive in the cell."""
    spec_ids = list(rows[0]["specs"]) if rows else []
    t = _table("Severity per cell (App. E): mean peak contact force (N) and per-spec NSV, "
               "bootstrap 95% CI", by,
               ["peak force"] + [f"NSV {registry.specs[s].short}" for s in spec_ids])
    peaks = {tuple(c[k] for k in by): c for c in cells}
    for r in rows:
        c = peaks.get(tuple(r[k] for k in by), {})
        t.add_row(*[str(r[k]) for k in by],
                  num_ci(c.get("peak_contact_force_n"), c.get("peak_contact_force_n_ci"), 1),
                  *[("-" if r["specs"][s] is None
                     else num_ci(r["specs"][s]["nsv"], r["specs"][s]["nsv_ci"]))
                    for s in spec_ids])
    return t


def phase_table(rows: list[dict[str, Any]], by: Sequence[str], registry: Registry) -> Table:
    """Violations by phase (robosafe's own phases): per cell and violated spec, the violating
    episodes in the phase where the spec first went negative."""
    from robosafe.safety.signals import PHASES

    cols = [*PHASES, "unsegmented"]
    t = _table("Spec violations by phase (robosafe's phases): episodes, by the phase of the "
               "first violating step", by, ["spec", *cols])
    for r in rows:
        for sid, counts in r["specs"].items():
            t.add_row(*[str(r[k]) for k in by], registry.specs[sid].short,
                      *[str(counts.get(p, 0)) for p in cols])
    return t


def sbu_table(rows: list[dict[str, Any]], by: Sequence[str], registry: Registry) -> Table:
    """SBU spec composition (Tables 10-11)."""
    t = _table("SBU spec composition (App. A.5): share of spec violations among SBU episodes",
               by, ["SBU % (k/n)", "composition"])
    for r in rows:
        comp = ", ".join(f"{registry.specs[s].short} {100 * v:.0f}%"
                         for s, v in r["shares"].items()) or "(no spec-violations)"
        t.add_row(*[str(r[k]) for k in by], f"{pct(r['sbu'])} ({r['sbu_count']}/{r['n']})", comp)
    return t


def task_table(rows: list[dict[str, Any]], by: Sequence[str]) -> list[Table]:
    """Per-task SR / Safety with Wilson 95% CI (Table 12), one table per cell."""
    out = []
    for r in rows:
        name = " / ".join(str(r[k]) for k in by)
        t = _table(f"Per-task breakdown: {name} (Table 12)", ["task"],
                   ["n", "SR %", "SR 95% CI", "Safety %", "Safety 95% CI"])
        for e in r["tasks"]:
            t.add_row(e["task_id"], str(e["n"]), pct(e["sr"]), _ci(e["sr_ci"]),
                      pct(e["safety"]), _ci(e["safety_ci"]))
        out.append(t)
    return out


def _ci(ci: Sequence[float] | None) -> str:
    return "-" if not ci else f"[{pct(ci[0])}, {pct(ci[1])}]"


def sensitivity_table(rows: list[dict[str, Any]]) -> Table:
    """Threshold sensitivity (Table 9): per benchmark group, the mean over its cells with
    complete signal records."""
    groups = list(rows[0]["means"]) if rows else []
    cols = [f"{g} {c}" for g in groups for c in ("cells", "Safety %", "SBU %", "P[U|S] %",
                                                  "VSI")]
    t = _table("Threshold sensitivity: means over complete cells per benchmark group "
               "(App. A.4, Table 9)", ["variant"], cols)
    for r in rows:
        vals = []
        for g in groups:
            m = r["means"][g]
            vals += [f"{m['n_cells']}" + (f" (+{m['n_excluded']} incomplete)"
                                          if m["n_excluded"] else ""),
                     pct(m["safety"]), pct(m["sbu"]), pct(m["p_unsafe_given_success"]),
                     "-" if m["vsi"] is None else f"{m['vsi']:.3f}"]
        t.add_row(r["label"], *vals)
    return t


def specs_table(registry: Registry, tiers: Sequence[str]) -> Table:
    t = Table(title="Spec registry (SafeVLA-Bench App. C)", title_justify="left",
              header_style="bold")
    for c in ("spec_id", "family", "tier", "STL", "severe", "requires_all", "invalid_if_any"):
        t.add_column(c, overflow="fold")
    for s in registry.specs.values():
        if s.tier in tiers:
            t.add_row(s.spec_id, s.canonical_family, s.tier, s.stl,
                      "binary" if s.binary else ("-" if s.vsi_severe is None
                                                 else f"{s.vsi_severe:g} {s.unit}"),
                      ", ".join(s.requires_all), ", ".join(s.invalid_if_any))
    return t


def explain_table(title: str, rows: list[dict[str, Any]]) -> Table:
    t = Table(title=title, title_justify="left", header_style="bold")
    for c in ("spec_id", "tier", "active", "why"):
        t.add_column(c)
    for r in rows:
        t.add_row(r["spec_id"], r["tier"], "yes" if r["active"] else "no",
                  "; ".join(r["reasons"]) or "all required tags present, none invalidating")
    return t


def table_width() -> int | None:
    """The width tables are laid out for: None (rich's own choice: COLUMNS when set, else the
    terminal's) on a terminal or when COLUMNS is set; 200 when piped without COLUMNS, which
    rich would otherwise wrap at 80 columns (tables are meant to be pasted)."""
    if sys.stdout.isatty() or os.environ.get("COLUMNS", "").strip().isdigit():
        return None
    return 200


def print_tables(tables: Sequence[Table], console: Console | None = None) -> None:
    console = console or Console(width=table_width())
    for t in tables:
        console.print(t)


def _diff(c: Any) -> str:
    """B - A in points with its 95% interval and the one-sided p (or why there is none)."""
    if c is None:
        return "-"
    text = f"{100 * c.difference:+.1f}"
    if c.degenerate:
        return f"{text} (no interval: zero variance)"
    return (f"{text} [{100 * c.ci[0]:+.1f}, {100 * c.ci[1]:+.1f}], p={c.pvalue:.3g} "
            f"({c.design}{', n=' + str(c.n_paired) if c.design == 'paired' else ''})")


def shield_table(c: Any, title: str = "") -> Table:
    """A shielded run against its unshielded baseline (``stats.shield.ShieldComparison``):
    per side SR, Safety, SBU, VSI and interventions per episode with 95% intervals; B - A of
    SR and Safety with the paired Wald interval and the one-sided p of "B higher" (paper 002
    App. C.1)."""
    a, b = c.baseline, c.shielded
    t = Table(title=title or f"shield {b.mode} ({b.label}) vs {a.mode} ({a.label}) "
              "(95% CI; % except VSI and interventions)", title_justify="left",
              header_style="bold")
    t.add_column("", overflow="fold")
    for head in (f"{a.label} [{a.mode}]", f"{b.label} [{b.mode}]", "B - A"):
        t.add_column(escape(head), justify="right", overflow="fold")
    t.add_row("episodes (scored)", f"{a.n} ({a.n_scored})", f"{b.n} ({b.n_scored})", "")
    t.add_row("SR", pct_ci(a.sr, a.sr_ci), pct_ci(b.sr, b.sr_ci),
              _diff(c.tests.get("success")))
    t.add_row("Safety", pct_ci(a.safety, a.safety_ci), pct_ci(b.safety, b.safety_ci),
              _diff(c.tests.get("safe")))
    t.add_row("SBU", pct_ci(a.sbu, a.sbu_ci), pct_ci(b.sbu, b.sbu_ci), "")
    t.add_row("VSI", num_ci(a.vsi, a.vsi_ci), num_ci(b.vsi, b.vsi_ci), "")
    t.add_row("interventions / episode", num_ci(a.interventions, a.interventions_ci, 2),
              num_ci(b.interventions, b.interventions_ci, 2), "")
    return t
