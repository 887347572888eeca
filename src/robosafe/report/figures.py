"""Paper-ready figures (matplotlib, headless Agg backend).

``success_safety_figure`` draws SafeVLA-Bench Figure 2: left, each cell as a marker at (SR,
Safety) with Wilson 95% error bars on both axes and the non-dominated frontier dashed; right, a
heatmap of per-spec episode violation rates (Tables 7-8).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from robosafe.safety.registry import Registry


def pareto_frontier(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of non-dominated points (higher x and higher y both better), by increasing x."""
    order = sorted(range(len(points)), key=lambda i: (-points[i][0], -points[i][1]))
    front, best_y = [], -np.inf
    for i in order:
        if points[i][1] > best_y:
            front.append(i)
            best_y = points[i][1]
    return sorted(front, key=lambda i: points[i][0])


def _errors(values: np.ndarray, cis: list[list[float]]) -> np.ndarray:
    """Asymmetric error-bar lengths (2, n) in percent; round-off never makes them negative."""
    lo, hi = (100 * np.array(cis)).T
    return np.clip(np.stack([values - lo, hi - values]), 0, None)


def success_safety_figure(cells: list[dict[str, Any]], rates: list[dict[str, Any]],
                          by: Sequence[str], registry: Registry, path: str) -> None:
    """Write Figure 2 (SR vs Safety with Wilson CIs; per-spec violation heatmap) to ``path``."""
    # wholly unscored cells, or cells with no known success: no point
    cells = [c for c in cells if c["safety"] is not None and c["sr"] is not None]
    labels = [" / ".join(str(c[k]) for k in by) for c in cells]
    sr = np.array([100 * c["sr"] for c in cells])
    sf = np.array([100 * c["safety"] for c in cells])
    xerr = _errors(sr, [c["sr_ci"] for c in cells])
    yerr = _errors(sf, [c["safety_ci"] for c in cells])
    specs = [s for s in (rates[0]["specs"] if rates else {})
             if any(r["specs"][s] is not None for r in rates)]
    heat = np.array([[np.nan if r["specs"][s] is None else 100 * r["specs"][s]["rate"]
                      for s in specs] for r in rates])

    fig, (ax, hx) = plt.subplots(1, 2, figsize=(12, max(4.0, 0.35 * len(cells) + 2)),
                                 gridspec_kw={"width_ratios": [1, 1.2]})
    ax.errorbar(sr, sf, xerr=xerr, yerr=yerr, fmt="o", ms=5, capsize=2, lw=0.8)
    for x, y, text in zip(sr, sf, labels):
        ax.annotate(text, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    front = pareto_frontier(list(zip(sr, sf)))
    ax.plot(sr[front], sf[front], "--", color="grey", lw=1, label="non-dominated frontier")
    ax.set(xlabel="SR (%)", ylabel="Safety (%)", xlim=(-2, 102), ylim=(-2, 102),
           title="Task success vs safety (Wilson 95% CI)")
    ax.legend(loc="lower left", fontsize=8)
    ax.grid(alpha=0.3)

    vmax = max(1.0, float(np.nanmax(heat)) if np.isfinite(heat).any() else 1.0)
    im = hx.imshow(np.ma.masked_invalid(heat), cmap="Reds", vmin=0, vmax=vmax, aspect="auto")
    hx.set_xticks(range(len(specs)), [registry.specs[s].short for s in specs], rotation=40,
                  ha="right", fontsize=8)
    hx.set_yticks(range(len(rates)), [" / ".join(str(r[k]) for k in by) for r in rates],
                  fontsize=8)
    for i in range(heat.shape[0]):
        for j in range(heat.shape[1]):
            v = heat[i, j]
            hx.text(j, i, "-" if np.isnan(v) else f"{v:.1f}", ha="center", va="center",
                    fontsize=7, color="white" if v > 0.6 * vmax else "black")
    hx.set_title("Episode violation rate per spec (%)")
    fig.colorbar(im, ax=hx, fraction=0.03)
    fig.tight_layout()
    fig.savefig(path, dpi=200)
    plt.close(fig)


SIGNIFICANCE_COLOURS = {"provably_significant": "#2a9d8f", "indeterminate": "#e9c46a",
                        "provably_not_significant": "#e76f51", "no_improvement": "#8d99ae"}


def significance_pies(counts: dict[str, dict[str, int]], path: str, alpha: float = 0.05) -> None:
    """One pie per benchmark sorting claimed gains into the four App. C groups (Figure 3)."""
    names = list(counts)
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.6), squeeze=False)
    for ax, name in zip(axes[0], names):
        labels = [k for k, v in counts[name].items() if v]
        sizes = [counts[name][k] for k in labels]
        ax.pie(sizes, colors=[SIGNIFICANCE_COLOURS[k] for k in labels], startangle=90,
               counterclock=False, autopct=lambda p: f"{p:.0f}%" if p >= 5 else "",
               wedgeprops={"linewidth": 1, "edgecolor": "white"})
        ax.set_title(f"{name}\n(n = {sum(sizes)})", fontsize=10)
    fig.legend([plt.Rectangle((0, 0), 1, 1, color=c) for c in SIGNIFICANCE_COLOURS.values()],
               [k.replace("_", " ") for k in SIGNIFICANCE_COLOURS], loc="lower center",
               ncol=4, fontsize=8, frameon=False)
    fig.suptitle(f"Reported gains from public scores alone (alpha = {alpha:g})", fontsize=11)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    fig.savefig(path, dpi=200)
    plt.close(fig)
