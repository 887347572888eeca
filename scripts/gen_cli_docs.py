"""Write docs/reference/cli.md from the typer app itself, so the reference cannot drift from the
commands (tests/test_docs.py checks the file is what this script writes).

    python scripts/gen_cli_docs.py           # rewrite docs/reference/cli.md
    python scripts/gen_cli_docs.py --check   # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import typer

from robosafe.cli import app

OUT = Path(__file__).resolve().parents[1] / "docs" / "reference" / "cli.md"


def _rows(cmd) -> list[str]:
    rows = []
    for p in cmd.params:
        if p.param_type_name == "argument":
            name = f"`{p.name.upper()}`"
        else:
            name = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
        if getattr(p, "hidden", False):
            continue
        help_text = " ".join((getattr(p, "help", None) or "").split()).replace("|", "\\|")
        default = p.default
        show = "" if default in (None, False, (), []) or callable(default) else f" (default: `{default}`)"
        req = " **required**" if p.required else ""
        rows.append(f"| {name} | {help_text}{show}{req} |")
    return rows


def _walk(cmd, path: list[str], out: list[str]) -> None:
    # typer ships its own copy of click: duck-typed here
    ctx = cmd.context_class(cmd, info_name=" ".join(path))
    if hasattr(cmd, "list_commands"):
        # the app loads a command's module when asked for it (fast start-up)
        for name in sorted(cmd.list_commands(ctx)):
            sub = cmd.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                _walk(sub, [*path, name], out)
        return
    out.append(f"## `{' '.join(path)}`\n")
    out.append("```text\n" + cmd.get_usage(ctx).replace("Usage: ", "") + "\n```\n")
    if cmd.help:
        out.append(" ".join(cmd.help.split("\f")[0].split()) + "\n")
    rows = _rows(cmd)
    if rows:
        out.append("| argument / option | meaning |\n|---|---|")
        out.extend(rows)
        out.append("")


def render() -> str:
    root = typer.main.get_command(app)
    out = ["# Command-line reference\n",
           ("Generated from the typer app by `python scripts/gen_cli_docs.py`; every command "
           "also has `--help`.\n")]
    _walk(root, ["robosafe"], out)
    return "\n".join(out).rstrip("\n") + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = render()
    if args.check:
        if not OUT.is_file() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} is out of date: python scripts/gen_cli_docs.py", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
