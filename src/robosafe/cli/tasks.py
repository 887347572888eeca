"""``robosafe tasks ...``: check, format and perturb CBDDL task files (VLA-Arena App. 7-8)."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import typer

from robosafe.cli.common import (
    EXIT_USER_ERROR,
    app,
    deprecated_option,
    emit_json,
    fail,
    renamed,
    user_errors,
    warn,
)
from robosafe.cli.run import ASSETS
from robosafe.errors import RobosafeError, TaskError

# robosafe.tasks (numpy through the cost semantics) is imported when a tasks command runs.

tasks_app = typer.Typer(no_args_is_help=True, help="CBDDL task files: check, fmt, perturb.")
app.add_typer(tasks_app, name="tasks")


def _formula_text(node) -> str:
    kind = type(node).__name__
    if kind == "Pred":
        return f"({node.name}{''.join(' ' + _arg(a) for a in node.args)})"
    if kind == "Not":
        return f"(Not {_formula_text(node.arg)})"
    return f"({kind} {' '.join(_formula_text(a) for a in node.args)})"


def _arg(a: Any) -> str:
    if isinstance(a, tuple):
        return "(" + " ".join(str(x) for x in a) + ")"
    return str(a)


def summarize(problem, source: str) -> tuple[dict[str, Any], list[TaskError]]:
    """What a task declares, and every problem found (validation + cost-term timing)."""
    from robosafe.tasks import validate_task
    from robosafe.tasks.cost import cost_terms, predicates, term_timing

    errors = list(validate_task(problem, source))
    terms = []
    for term in cost_terms(problem.cost):
        try:
            timing = term_timing(term, source)
        except TaskError as err:
            if not any(str(err) == str(e) for e in errors):
                errors.append(err)
            timing = "invalid"
        terms.append({"term": _formula_text(term), "timing": timing,
                      "predicates": [p.name for p in predicates(term)]})
    summary = {
        "problem": problem.name, "language": problem.language,
        "objects": {d.name: d.category for d in problem.objects},
        "fixtures": {d.name: d.category for d in problem.fixtures},
        "regions": {r.name: r.target for r in problem.regions},
        "goal": [p.name for p in predicates(problem.goal)],
        "cost_terms": terms,
        "moving_objects": {m.name: m.motion_type for m in problem.moving_objects},
        "perturbations": {
            "image_settings": {s.key: s.value for s in problem.image_settings},
            "noise": None if problem.noise is None else
            {"kind": problem.noise.kind, "params": list(problem.noise.params)},
            "camera": [{"name": c.name, "offset": list(c.offset) if c.offset else None}
                       for c in problem.camera],
            "random_color": problem.random_color},
    }
    return summary, errors


def _build(path: Path, assets: str) -> tuple[bool, RobosafeError | None]:
    """Build ``path`` in robosafe's simulator and reset it once; (built, the error if not)."""
    from robosafe.hosts.registry import make_env

    try:
        env = make_env("robosafe", path, assets=assets, images=False)
        try:
            env.reset(seed=0)
        finally:
            env.close()
    except RobosafeError as err:
        return False, err
    return True, None


@tasks_app.command("check")
@user_errors
def check(files: list[Path] = typer.Argument(..., help="CBDDL task files."),
          build: bool = typer.Option(False, "--build",
                                     help="Also build each valid file in robosafe's simulator "
                                          "and reset it (seed 0): what a run needs."),
          assets: str = ASSETS,
          as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Parse and validate task files; print what each declares (exit 2 on any error)."""
    if build:
        from robosafe.hosts.options import OptionRequest, SimOptions

        assets = SimOptions.build(OptionRequest(assets=assets), {}).assets
    results, n_bad = [], 0
    for path in files:
        try:
            from robosafe.tasks import parse_file

            problem = parse_file(path)
            summary, errors = summarize(problem, str(path))
        except TaskError as err:
            summary, errors = None, [err]
        warns = list(problem.warnings) if summary is not None else []
        built = None
        if build and not errors:
            built, err = _build(path, assets)
            errors += [err] if err is not None else []
        n_bad += bool(errors)
        results.append({"file": str(path), "ok": not errors, "summary": summary,
                        "errors": [str(e) for e in errors], "warnings": warns, "built": built})
        for w in warns if built is None else ():  # a build logs the file's warnings itself
            warn(w)
        for e in errors:
            typer.echo(f"robosafe: error: {e}", err=True)
    if as_json:
        emit_json(results, None, True)
    else:
        for r in results:
            s = r["summary"]
            if s is None:
                continue
            built = {True: ", built and reset", False: ", does not build"}.get(r["built"], "")
            typer.echo(f"{r['file']}: {'ok' if r['ok'] else 'INVALID'}{built}  "
                       f"({s['problem']})")
            typer.echo(f"  language: {s['language']}")
            typer.echo(f"  objects {len(s['objects'])}, fixtures {len(s['fixtures'])}, "
                       f"regions {len(s['regions'])}, goal predicates {len(s['goal'])}, "
                       f"moving objects {len(s['moving_objects'])}")
            for t in s["cost_terms"]:
                typer.echo(f"  cost [{t['timing']}] {t['term']}")
            for name, kind in s["moving_objects"].items():
                typer.echo(f"  moving {name}: {kind}")
            p = s["perturbations"]
            blocks = [k for k, v in p.items() if v not in (None, {}, [])]
            typer.echo(f"  perturbation blocks: {', '.join(blocks) or 'none'}")
    if n_bad:
        raise typer.Exit(EXIT_USER_ERROR)


@tasks_app.command("fmt")
@user_errors
def fmt(file: Path = typer.Argument(..., help="CBDDL task file."),
        write: bool = typer.Option(False, "--write", help="Rewrite the file in place."),
        drop_comments: bool = typer.Option(False, "--drop-comments",
                                           help="Let --write rewrite a file that has ';' "
                                                "comments (the canonical form has none)."),
        as_json: bool = typer.Option(False, "--json", help="Print {file, text, changed, "
                                                           "comments_dropped}.")
        ) -> None:
    """Print the canonical form of a task file (or rewrite it with --write).

    The canonical form is written from the parsed task, which keeps no comments: --write
    refuses a file with ';' comments unless --drop-comments is given."""
    from robosafe.tasks import parse_file, write_task
    from robosafe.tasks.parser import comment_lines

    text = write_task(parse_file(file))
    original = file.read_text(encoding="utf-8")
    comments = comment_lines(original)
    if comments and write and not drop_comments:
        fail(f"{file}: not rewritten: fmt would drop its {len(comments)} ';' comment(s) "
             f"(first on line {comments[0]}); pass --drop-comments to rewrite it anyway")
    if comments and not as_json:
        warn(f"{file}: the canonical form drops {len(comments)} ';' comment(s) (first on line "
             f"{comments[0]})")
    if as_json:
        emit_json({"file": str(file), "text": text, "changed": text != original,
                   "comments_dropped": len(comments)}, None, True)
    if as_json and not write:
        return
    if not write:
        typer.echo(text, nl=not text.endswith("\n"))
        return
    # a symlink is written through: its target is rewritten (atomically, beside it) and the
    # link stays a link, where replacing the link's own path would turn it into a copy
    target = file.resolve()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(tmp, stat.S_IMODE(target.stat().st_mode))  # the file's mode, not mkstemp's 0600
    os.replace(tmp, target)


@tasks_app.command("perturb-language")
@user_errors
def perturb_language(file: Path = typer.Argument(..., help="CBDDL task file."),
                     language_level: int = typer.Option(
                         1, "--language-level", min=0, max=4,
                         help="W_k: number of slots substituted."),
                     seed: int = typer.Option(0, "--seed", min=0, help="Random seed."),
                     n: int = typer.Option(1, "--variants", "-n", min=1,
                                           help="Number of distinct variants."),
                     as_json: bool = typer.Option(False, "--json", help="Print JSON."),
                     old_level: int = deprecated_option("--level"),
                     old_n: int = deprecated_option("--n")) -> None:
    """Language variants of a task's instruction at level W_k (VLA-Arena App. 8.1)."""
    level = renamed(old_level, language_level, "--level", "--language-level", default=1)
    n = renamed(old_n, n, "--n", "-n/--variants", default=1)
    from robosafe.tasks import parse_file
    from robosafe.tasks.language import variants

    instruction = parse_file(file).language
    out = variants(instruction, level, n, seed)
    if as_json:
        emit_json([{"text": v.text, "level": v.level, "seed": v.seed,
                    "substitutions": [list(s) for s in v.substitutions]} for v in out],
                  None, True)
    else:
        for v in out:
            typer.echo(v.text)
