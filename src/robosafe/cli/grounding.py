"""``robosafe grounding ...``: TouchSafeBench collision grounding (paper 003)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from robosafe.cli.common import (
    EXIT_USER_ERROR,
    app,
    emit_json,
    out_option,
    resolve_workers,
    user_errors,
    warn,
    workers_option,
)
from robosafe.errors import DEEP_JSON, RobosafeError
from robosafe.report.tables import print_tables

grounding_app = typer.Typer(no_args_is_help=True,
                            help="Collision grounding (TouchSafeBench): index, clips, monitors, "
                                 "metrics.")
app.add_typer(grounding_app, name="grounding")


def _rows_table(title: str, rows: list[dict[str, Any]]) -> Table:
    t = Table(title=title, title_justify="left", header_style="bold")
    for k in rows[0] if rows else ():
        t.add_column(str(k))
    for r in rows:
        t.add_row(*[_cell(v) for v in r.values()])
    return t


def _cell(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.1f}" if isinstance(v, float) else str(v)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a JSONL file; a malformed line is one error naming file and line."""
    from robosafe.textio import bounded_lines

    out = []
    try:
        with path.open(encoding="utf-8") as fh:
            for i, line in enumerate(bounded_lines(fh, str(path)), 1):
                if line.strip():
                    out.append(_json_line(line, f"{path}:{i}"))
    except OSError as err:
        raise RobosafeError(f"{path}: cannot read ({err.strerror})") from None
    except UnicodeDecodeError as err:
        raise RobosafeError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") \
            from None
    return out


def _json_line(line: str, where: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as err:
        raise RobosafeError(f"{where}: invalid JSON: {err.msg}") from None
    except RecursionError:
        raise RobosafeError(f"{where}: {DEEP_JSON}") from None


def _skipped(errors: list[str]) -> Callable[[Exception], None]:
    """An ``on_error`` that reports each skipped episode on stderr and keeps its text."""

    def on_error(err: Exception) -> None:
        errors.append(str(err))
        typer.echo(f"robosafe: skipped: {err}", err=True)

    return on_error


def _warn(message: str) -> None:
    warn(message)


@grounding_app.command("index")
@user_errors
def index(dataset: Path = typer.Argument(..., help="Dataset root (TouchSafeBench layout)."),
          cache: Path = typer.Option(None, "--cache", help="Index cache (.parquet or .jsonl)."),
          workers: int = workers_option(),
          deep: bool = typer.Option(False, "--deep", help="Check every frame file and the "
                                                          "full camera parameters."),
          as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Index a dataset reading JSON only; bad episodes are reported and skipped (exit 2)."""
    from robosafe.grounding.dataset import index_dataset

    errors: list[str] = []
    idx = index_dataset(dataset, on_error=_skipped(errors), workers=resolve_workers(workers),
                        deep=deep,
                        cache=cache, on_warning=_warn)
    by: dict[tuple[str, str], list] = {}
    for e in idx.episodes:
        by.setdefault((e.human_type, e.sim_task), []).append(e)
    rows = [{"human_type": h, "sim_task": s, "episodes": len(eps),
             "with human collision": sum(e.did_collide_human for e in eps),
             "with scene collision": sum(bool(e.scene_collision_steps.size) for e in eps),
             "steps": sum(e.n_frames for e in eps)} for (h, s), eps in sorted(by.items())]
    if as_json:
        emit_json({"dataset": str(dataset), "episodes": len(idx.episodes),
                   "total_steps": idx.total_steps, "subsets": rows, "errors": errors},
                  None, True)
    else:
        print_tables([_rows_table(f"{dataset}: {len(idx.episodes)} episodes, "
                                  f"{idx.total_steps} steps (App. F.1)", rows)])
    if errors:
        raise typer.Exit(EXIT_USER_ERROR)


@grounding_app.command("generate")
@user_errors
def generate(out_arg: Path = typer.Argument(None, hidden=True),
             out: Path = typer.Option(None, "--out", "-o",
                                      help="Dataset root to write (App. E layout); required."),
             episodes: int = typer.Option(6, "--episodes", "-n", min=1,
                                          help="Episodes to write."),
             seed: int = typer.Option(0, "--seed", help="Seed (rooms, walks, events)."),
             task: str = typer.Option(None, "--task",
                                      help="social_navigation or social_rearrangement "
                                           "(default: alternate both)."),
             size: int = typer.Option(128, "--size", min=8, help="Image width = height (px)."),
             max_steps: int = typer.Option(600, "--max-steps", min=10,
                                           help="Steps per episode at 30 Hz (an episode ends "
                                                "earlier at its first human contact)."),
             robot: str = typer.Option("spot", "--robot",
                                       help="spot (Boston Dynamics Spot + arm meshes, as "
                                            "robosuite ships them) or primitive."),
             as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Simulate human-robot co-presence episodes in MuJoCo; labels come from its contacts."""
    from dataclasses import asdict

    from robosafe.budget import check_episodes, check_horizon, check_image_size
    from robosafe.grounding.dataset import SIM_TASKS
    from robosafe.grounding.simgen import GenerateConfig
    from robosafe.grounding.simgen import generate as run

    out = out_option(out_arg, out)
    check_episodes(episodes)
    check_image_size(size, "--size")
    check_horizon(max_steps, "--max-steps")
    config = GenerateConfig(episodes=episodes, seed=seed, image_size=size, max_steps=max_steps,
                            robot=robot,
                            sim_tasks=(task,) if task else SIM_TASKS)
    config.check()  # every option, before anything is created
    summary = run(out, config, progress=None if as_json else
                  lambda i, n: typer.echo(f"episode {i}/{n} written", err=True))
    doc = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(summary).items()}
    if summary.resumed:
        typer.echo(f"robosafe: {out}: kept {summary.resumed} episode(s) of the interrupted "
                   "generate with the same settings", err=True)
    if as_json:
        emit_json(doc, None, True)
    else:
        print_tables([_rows_table(f"{out}: generated (MuJoCo)", [doc])])


@grounding_app.command("intervene")
@user_errors
def intervene(episodes: int = typer.Option(4, "--episodes", "-n", min=1,
                                           help="Seeded episodes (the generator's)."),
              seed: int = typer.Option(0, "--seed", help="Seed (rooms, walks, events)."),
              task: str = typer.Option(None, "--task",
                                       help="social_navigation or social_rearrangement "
                                            "(default: alternate both)."),
              max_steps: int = typer.Option(300, "--max-steps", min=10,
                                            help="Steps per episode at 30 Hz."),
              robot: str = typer.Option("primitive", "--robot", help="primitive or spot."),
              action: str = typer.Option("stop", "--action",
                                         help="stop (protective stop) or slow (speed scaled to "
                                              "keep the protective separation)."),
              monitor: list[str] = typer.Option(
                  ["ssm", "baseline", "oracle"], "--monitor",
                  help="ssm, baseline, vlm or oracle; repeat for several (the reference "
                       "without intervention always runs)."),
              horizon_s: float = typer.Option(1.0, "--horizon-s",
                                              help="Oracle look-ahead and false-stop window "
                                                   "(s)."),
              endpoint: str = typer.Option(None, "--endpoint",
                                           help="OpenAI-compatible base URL (vlm monitor)."),
              model: str = typer.Option(None, "--model", help="Model name (vlm monitor)."),
              vlm_every: int = typer.Option(15, "--vlm-every", min=1,
                                            help="Steps between VLM questions."),
              timeout: float = typer.Option(30.0, "--timeout", min=0.001,
                                            help="Seconds per VLM request (then: failed)."),
              out: Path = typer.Option(None, "--out", "-o", help="Write the JSON here too."),
              as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Closed-loop intervention: monitors command the robot in the generator's scenes."""
    from dataclasses import asdict

    from robosafe.budget import check_episodes, check_horizon
    from robosafe.grounding.dataset import SIM_TASKS
    from robosafe.grounding.intervene import (
        InterveneConfig,
        VLMSettings,
        result_json,
    )
    from robosafe.grounding.intervene import intervene as run
    from robosafe.outputs import check_parent

    check_episodes(episodes)
    check_horizon(max_steps, "--max-steps")
    vlm = (VLMSettings(endpoint, model, timeout_s=timeout, every=vlm_every)
           if endpoint and model else None)
    config = InterveneConfig(episodes=episodes, seed=seed, max_steps=max_steps, robot=robot,
                             sim_tasks=(task,) if task else SIM_TASKS, action=action,
                             monitors=tuple(monitor), horizon_s=horizon_s, vlm=vlm)
    config.check()  # every option, before anything runs
    if out is not None:
        check_parent(out)
    result = run(config, progress=None if as_json else
                 lambda i, n: typer.echo(f"episode {i}/{n} done", err=True))
    doc = result_json(result)
    for s in result.summaries:
        for e in s.errors:
            warn(f"monitor {s.monitor}: failed on {e}")
    emit_json(doc, str(out) if out else None, as_json)
    if not as_json:
        rows = [{k: v for k, v in asdict(s).items() if k != "errors"} for s in result.summaries]
        print_tables([_rows_table(f"closed-loop intervention ({action}, {episodes} episodes)",
                                  rows)])


@grounding_app.command("score")
@user_errors
def score(answers: list[Path] = typer.Argument(..., help="Answer JSONL files (records with "
                                                        "clip truth, model, representation, "
                                                        "answer)."),
          layout: str = typer.Option("full", "--layout",
                                     help="full (Tables 5-7), compact (Table 2) or views "
                                          "(Table 4)."),
          as_json: bool = typer.Option(False, "--json", help="Print all metrics as JSON.")
          ) -> None:
    """Score monitor answers: accuracy, Macro-F1, per-class F1, FAR, distance, trend, flags."""
    from robosafe.grounding.metrics import sample_type_rows, score_answers, table_rows

    records = [r for p in answers for r in read_jsonl(p)]
    if not records:
        raise RobosafeError("no answer records")
    scores = score_answers(records)
    if as_json:
        emit_json(scores, None, True)
        return
    print_tables([_rows_table("Monitor results per model x representation (%)",
                              table_rows(scores, layout)),
                  _rows_table("Accuracy per sample type (Table 3, %)",
                              sample_type_rows(scores))])


def _sampler_params(overrides: list[str]):
    from dataclasses import fields, replace

    from robosafe.grounding.sampler import SamplerParams

    params = SamplerParams()
    kinds = {f.name: f.type for f in fields(SamplerParams)}
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or key not in kinds:
            raise RobosafeError(f"--param {item!r}: expected NAME=VALUE with NAME one of "
                                f"{', '.join(kinds)}")
        default = getattr(params, key)
        try:
            if isinstance(default, bool):
                value: Any = raw.lower() in ("1", "true", "yes")
            elif isinstance(default, tuple):
                value = tuple(int(x) for x in raw.split(","))
            elif isinstance(default, int) or default is None:
                value = int(raw)
            else:
                value = float(raw)
        except ValueError:
            raise RobosafeError(f"--param {item!r}: {raw!r} is not a valid value") from None
        params = replace(params, **{key: value})
    return params


@grounding_app.command("clips")
@user_errors
def clips(dataset: Path = typer.Argument(..., help="Dataset root."),
          task: int = typer.Option(..., "--task", min=1, max=2, help="1 (state) or 2 (warning)."),
          out: Path = typer.Option(..., "--out", "-o", help="Clip index (.jsonl or .parquet)."),
          seed: int = typer.Option(0, "--seed", help="Sampling seed."),
          param: list[str] = typer.Option([], "--param",
                                          help="Override a sampler parameter, NAME=VALUE "
                                               "(e.g. gap_threshold=45, clips_per_class=150)."),
          cache: Path = typer.Option(None, "--cache", help="Index cache file."),
          workers: int = workers_option(),
          as_json: bool = typer.Option(False, "--json", help="Print a JSON summary.")) -> None:
    """Sample balanced evaluation clips with the paper's rules (App. F, Table 9)."""
    from collections import Counter

    from robosafe.grounding.dataset import index_dataset, visibility_note
    from robosafe.grounding.sampler import sample_clips, write_clip_index

    params = _sampler_params(param)
    errors: list[str] = []
    idx = index_dataset(dataset, on_error=_skipped(errors), workers=resolve_workers(workers),
                        cache=cache,
                        on_warning=_warn)
    if (note := visibility_note(idx.root, idx.episodes)) is not None:
        _warn(note)
    result = sample_clips(idx.episodes, task, params, seed)
    write_clip_index(result, out)
    counts = Counter((c.label, c.sample_type) for c in result)
    rows = [{"label": lab, "sample_type": st, "clips": n} for (lab, st), n in sorted(counts.items())]
    if as_json:
        emit_json({"out": str(out), "task": task, "clips": len(result), "by_type": rows,
                   "errors": errors}, None, True)
    else:
        print_tables([_rows_table(f"Task {task}: {len(result)} clips written to {out}", rows)])
    if errors:
        raise typer.Exit(EXIT_USER_ERROR)


@grounding_app.command("sweep")
@user_errors
def sweep(dataset: Path = typer.Argument(..., help="Dataset root."),
          task: int = typer.Option(1, "--task", min=1, max=2, help="Task whose candidates to "
                                                                   "count."),
          cache: Path = typer.Option(None, "--cache", help="Index cache file."),
          workers: int = workers_option(),
          as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Sampler parameter sweeps shaped like Tables 11-15 (events, episodes, median size)."""
    from robosafe.grounding.dataset import index_dataset
    from robosafe.grounding.sampler import sweep_all

    errors: list[str] = []
    idx = index_dataset(dataset, workers=resolve_workers(workers), cache=cache, on_error=_skipped(errors),
                        on_warning=_warn)
    tables = sweep_all(idx.episodes, task)
    if as_json:
        emit_json({**tables, "errors": errors}, None, True)
    else:
        print_tables([_rows_table(name.replace("_", " ", 1),
                                  [{k: v for k, v in r.items() if k != "candidates"}
                                   for r in rows])
                      for name, rows in tables.items()])
    if errors:
        raise typer.Exit(EXIT_USER_ERROR)


def _clip_records(path: Path) -> list[dict[str, Any]]:
    from robosafe.grounding.sampler import read_clip_index

    return [c.to_record() for c in read_clip_index(path)]


def _write_answers(records: list[dict[str, Any]], out: Path | None, as_json: bool) -> None:
    text = "".join(json.dumps(r, default=_json_default) + "\n" for r in records)
    if out:
        out.write_text(text, encoding="utf-8")
    if as_json:
        typer.echo(text, nl=False)


def _json_default(v: Any) -> Any:
    if hasattr(v, "tolist"):
        return v.tolist()
    raise TypeError(f"not JSON serialisable: {type(v).__name__}")


def _temperature(raw: str) -> float | None:
    """``--temperature``: a number >= 0, or ``omit`` (no temperature field in the request)."""
    if raw.strip().lower() in ("omit", "none"):
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise RobosafeError(f"--temperature {raw!r}: expected a number >= 0 or 'omit'")
    return value


@grounding_app.command("ask")
@user_errors
def ask(clips_file: Path = typer.Argument(..., help="Clip index (.jsonl or .parquet)."),
        dataset: Path = typer.Option(..., "--dataset", help="Dataset root."),
        model: str = typer.Option(..., "--model", help="Model name at the endpoint."),
        endpoint: str = typer.Option(..., "--endpoint",
                                     help="OpenAI-compatible base URL, e.g. "
                                          "http://localhost:8000/v1 (vLLM)."),
        representation: str = typer.Option("rgb", "--representation",
                                           help="rgb, depth, depth_color, rgbd, rgbd_color, "
                                                "pred_*"),
        views: str = typer.Option("ego", "--views", help="ego, all or topdown."),
        out: Path = typer.Option(..., "--out", "-o", help="Answer records (JSONL)."),
        cache: Path = typer.Option(None, "--cache",
                                   help="Answer cache (JSONL); defaults to OUT.cache.jsonl, so "
                                        "an interrupted run resumes."),
        api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env",
                                        help="Environment variable holding the API key."),
        concurrency: int = typer.Option(4, "--concurrency", min=1, help="Parallel requests."),
        temperature: str = typer.Option("0", "--temperature",
                                        help="Sampling temperature, or 'omit' to send none "
                                             "(endpoints that reject it, e.g. GPT-5 family)."),
        max_tokens: int = typer.Option(None, "--max-tokens", min=1,
                                       help="max_tokens per reply (default: not sent)."),
        timeout: float = typer.Option(120.0, "--timeout", min=0.001,
                                      help="Seconds to wait for one reply."),
        depth_predictor: str = typer.Option(None, "--depth-predictor",
                                            help="MODULE:CALLABLE mapping RGB uint8 HxWx3 to "
                                                 "metric depth HxW, for the pred_* "
                                                 "representations."),
        retries: int = typer.Option(4, "--retries", min=0,
                                    help="Retries of a request on 408/409/425/429/5xx, "
                                         "timeouts and dropped connections."),
        as_json: bool = typer.Option(False, "--json", help="Also print the records.")) -> None:
    """Ask a vision-language model about every clip (Sec. 4); answers are cached and resumable.
    Ctrl-C stops at once and writes the answers received; a 4xx rejection stops the run."""
    from rich.progress import Progress

    from robosafe.grounding.client import AskInterrupted, ask_clips
    from robosafe.grounding.representations import load_depth_predictor

    temp = _temperature(temperature)
    predictor = load_depth_predictor(depth_predictor) if depth_predictor else None
    records = _clip_records(clips_file)
    interrupted = None
    with Progress(transient=True, disable=as_json) as bar:
        job = bar.add_task("asking", total=len(records))
        try:
            answers = ask_clips(records, dataset, model, endpoint, representation, views,
                                cache=cache or out.with_suffix(".cache.jsonl"),
                                api_key_env=api_key_env, concurrency=concurrency,
                                temperature=temp, max_tokens=max_tokens, timeout_s=timeout,
                                max_retries=retries, depth_predictor=predictor,
                                progress=lambda done, total: bar.update(job, completed=done))
        except AskInterrupted as stop:
            answers, interrupted = stop.answers, stop
    if views != "ego":  # tables are per model x representation: keep view settings apart
        for r in answers:
            r["representation"] = f"{r['representation']} ({views})"
    _write_answers(answers, out, as_json)
    failed = sum(bool(r.get("error")) for r in answers)
    if interrupted is not None:
        typer.echo(f"robosafe: {interrupted}; {len(answers)} answers written to {out}", err=True)
        raise typer.Exit(130)  # the shell's code for Ctrl-C
    if not as_json:
        typer.echo(f"{len(answers)} answers written to {out}"
                   + (f"; {failed} failed requests recorded as invalid" if failed else ""))


@grounding_app.command("baseline")
@user_errors
def baseline(clips_file: Path = typer.Argument(..., help="Clip index (.jsonl or .parquet)."),
             dataset: Path = typer.Option(..., "--dataset", help="Dataset root."),
             out: Path = typer.Option(..., "--out", "-o", help="Answer records (JSONL)."),
             no_depth: bool = typer.Option(False, "--no-depth",
                                           help="Use trajectory geometry only."),
             as_json: bool = typer.Option(False, "--json", help="Also print the records.")
             ) -> None:
    """Geometric baseline monitor: distance, trend and arm depth, answering in the VLM JSON."""
    from robosafe.grounding.baseline import baseline_answers

    answers = baseline_answers(_clip_records(clips_file), dataset, use_depth=not no_depth)
    _write_answers(answers, out, as_json)
    failed = [r for r in answers if r.get("error")]
    for r in failed:
        typer.echo(f"robosafe: clip {r['clip_id']}: {r['error']}", err=True)
    if not as_json:
        typer.echo(f"{len(answers)} answers written to {out}"
                   + (f"; {len(failed)} clips failed, recorded as invalid" if failed else ""))
    if failed:
        raise typer.Exit(EXIT_USER_ERROR)
