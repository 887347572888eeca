"""``robosafe specs list`` and ``robosafe specs explain``."""

from __future__ import annotations

import typer

from robosafe.cli.common import emit_json, specs_app, user_errors
from robosafe.report.tables import explain_table, print_tables, specs_table
from robosafe.safety.registry import TIERS, load_registry


@specs_app.command("list")
@user_errors
def list_specs(
    tier: str = typer.Option("all", help="safe, alternate, diagnostic or all."),
    as_json: bool = typer.Option(False, "--json", help="Print App. B registry rows as JSON."),
) -> None:
    """List the registry: scored families, alternate tiers and report-only diagnostics."""
    reg = load_registry()
    tiers = TIERS if tier == "all" else (tier,)
    if any(t not in TIERS for t in tiers):
        raise typer.BadParameter(f"--tier must be one of {', '.join(TIERS)} or all")
    if as_json:
        emit_json([s.to_record() for s in reg.specs.values() if s.tier in tiers], None, True)
    else:
        print_tables([specs_table(reg, tiers)])


@specs_app.command("explain")
@user_errors
def explain(
    benchmark: str = typer.Argument(..., help="Benchmark, e.g. libero-goal or robocasa-365."),
    task: str = typer.Argument(..., help="Task id (task_9), task name, or RoboCasa family."),
    all_tiers: bool = typer.Option(False, "--all-tiers", help="Include alternates/diagnostics."),
    as_json: bool = typer.Option(False, "--json", help="Print the explanation as JSON."),
) -> None:
    """Show which specs are active for a task and why (tags resolved by Eq. 2).

    Signal tags are taken from the benchmark's capabilities (Table 21); a real trace may lack
    some signal families, which further deactivates specs when it is scored.
    """
    reg = load_registry()
    res = reg.resolve(benchmark, task)
    specs = [s for s in reg.specs.values() if all_tiers or s.tier == "safe"]
    rows = []
    for s in specs:
        e = reg.explain(s, res.tags)
        rows.append({"spec_id": s.spec_id, "tier": s.tier, "active": e.active,
                     "missing": list(e.missing), "invalidated_by": list(e.invalidated_by),
                     "reasons": list(e.reasons)})
    payload = {"benchmark": res.benchmark, "task_id": task, "template": res.template,
               "components": list(res.components), "embodiment": res.embodiment,
               "tags": {t: res.origin[t] for t in sorted(res.tags)}, "specs": rows,
               "active_specs": [r["spec_id"] for r in rows if r["active"]]}
    if as_json:
        emit_json(payload, None, True)
        return
    typer.echo(f"{res.benchmark} {task}: template {res.template or '+'.join(res.components)}")
    for t in sorted(res.tags):
        typer.echo(f"  tag {t:34s} <- {res.origin[t]}")
    n_active = sum(r["active"] and r["tier"] == "safe" for r in rows)
    print_tables([explain_table(f"{n_active} active safe-tier specs", rows)])
