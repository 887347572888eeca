"""TouchSafeBench prompt templates (paper 003, Sec. 3 and App. I) built from ``data/prompts.yaml``.

The templates are data; this module only selects and fills them. ``build_prompt`` returns the
full text for one (task, representation, views, clip size) condition, and ``image_sequence``
gives the matching image order so a client attaches images in the order the prompt announces.
The answer's field names (``answer_field``, ``field_names``, ``TREND_VALUES``) come from the same
file, so the prompt and the parser in ``robosafe.grounding.answers`` cannot drift apart.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from robosafe.errors import RobosafeError

LABELS: tuple[str, ...] = ("A", "B", "C")
TASKS: tuple[str, ...] = ("task1", "task2")

_DATA = Path(__file__).with_name("data") / "prompts.yaml"
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


@lru_cache(maxsize=1)
def prompt_data() -> dict[str, Any]:
    """The parsed ``prompts.yaml`` (read once per process)."""
    # A path next to the module works both as a namespace package and as a regular package.
    return yaml.safe_load(_DATA.read_text(encoding="utf-8"))


def normalize_task(task: int | str) -> str:
    """``1``, ``"1"``, ``"T1"``, ``"task 1"``, ``"task1"`` -> ``"task1"`` (likewise task 2)."""
    key = re.sub(r"[^a-z0-9]", "", str(task).lower())
    key = key.removeprefix("task").removeprefix("t")
    if key in ("1", "2"):
        return f"task{key}"
    raise RobosafeError(f"unknown task {task!r}: expected 1 / 'task1' or 2 / 'task2'")


def normalize_representation(representation: str) -> str:
    """Key of one of the nine Stage I representations (``"RGB-D Color"`` -> ``rgbd_color``)."""
    data = prompt_data()
    key = re.sub(r"[^a-z0-9]+", "_", str(representation).lower()).strip("_")
    key = data["representation_aliases"].get(key, key)
    if key not in data["representations"]:
        known = ", ".join(data["representations"])
        raise RobosafeError(f"unknown representation {representation!r}: expected one of {known}")
    return key


def resolve_views(views: str | Sequence[str]) -> tuple[str, ...]:
    """Camera keys for ``"ego"`` / ``"all"`` / ``"topdown"`` or an explicit list of camera keys.

    ``()`` means the top-down configuration (one bird's-eye map, no camera views).
    """
    data = prompt_data()
    if isinstance(views, str):
        key = re.sub(r"[^a-z]", "", views.lower())
        key = {"egoonly": "ego", "allviews": "all", "bev": "topdown"}.get(key, key)
        if key not in data["views"]:
            raise RobosafeError(f"unknown views {views!r}: expected ego, all, topdown or a list "
                                f"of cameras ({', '.join(data['cameras'])})")
        return tuple(data["views"][key])
    cams = tuple(views)
    bad = [c for c in cams if c not in data["cameras"]]
    if bad or not cams or len(set(cams)) != len(cams):
        raise RobosafeError(f"invalid camera list {list(cams)!r}: expected distinct names from "
                            f"{', '.join(data['cameras'])}")
    return cams


def answer_field(task: int | str) -> str:
    """The final-label field: ``"answer"`` for Task 1, ``"risk_level"`` for Task 2 (App. I)."""
    return prompt_data()["tasks"][normalize_task(task)]["answer_field"]


def field_names() -> dict[str, str]:
    """Diagnostic field names of the structured answer (App. G.1): distance, trend, contacts."""
    return dict(prompt_data()["fields"])


def trend_values() -> tuple[str, ...]:
    """``("closing", "separating", "stable", "unknown")`` (App. G.1)."""
    return tuple(prompt_data()["trend_values"])


def label_names(task: int | str) -> dict[str, str]:
    """Label letter -> the paper's name for it, e.g. ``{"A": "safe operation", ...}``."""
    return dict(prompt_data()["tasks"][normalize_task(task)]["labels"])


def image_sequence(representation: str, views: str | Sequence[str],
                   n_frames: int = 3) -> list[tuple[int, str, str]]:
    """``(time point 1..n, camera, channel)`` in the order the prompt announces.

    Frame-major: all views of t=1, then t=2, ...; within a view the representation's channels
    (RGB image before its depth map for RGB-D). The top-down configuration is a single image,
    returned as ``[(0, "topdown", "top-down map")]``.
    """
    _check_frames(n_frames)
    cams = resolve_views(views)
    if not cams:
        return [(0, "topdown", "top-down map")]
    channels = prompt_data()["representations"][normalize_representation(representation)]
    return [(t, cam, ch) for t in range(1, n_frames + 1) for cam in cams
            for ch in channels["channels"]]


def build_prompt(task: int | str, representation: str = "rgb",
                 views: str | Sequence[str] = "ego", n_frames: int = 3) -> str:
    """The full App. I prompt for one condition.

    ``task``: 1 or 2; ``representation``: one of the nine Stage I inputs (``rgb``, ``depth``,
    ``depth_color``, ``pred_depth``, ``pred_depth_color``, ``rgbd``, ``rgbd_color``,
    ``rgbd_pred``, ``rgbd_pred_color``; display names such as ``"RGB-D Color"`` work too);
    ``views``: ``"ego"`` (arm + head), ``"all"`` (the four cameras), ``"topdown"`` (the RGB
    bird's-eye map, App. I's separate template) or a list of camera keys; ``n_frames``: time
    points per clip (3 in the paper).
    """
    _check_frames(n_frames)
    data = prompt_data()
    task_key = normalize_task(task)
    rep = normalize_representation(representation)
    cams = resolve_views(views)
    if not cams and rep != "rgb":
        # The paper's top-down rows (Table 7, dagger) reuse the RGB map: there is no depth map.
        raise RobosafeError(f"the top-down map is an RGB rendering; representation {rep!r} "
                            "is not available with views='topdown' (use 'rgb')")
    rep_data = data["representations"][rep]
    images = image_sequence(rep, cams or "topdown", n_frames)
    field = data["tasks"][task_key]["answer_field"]
    values = {
        "n_frames": str(n_frames),
        "last_frame": str(n_frames),
        "n_views": str(len(cams)),
        "view_list": "; ".join(f"({i}) {data['cameras'][c]}" for i, c in enumerate(cams, 1)),
        "modality": rep_data["description"],
        "n_images": str(len(images)),
        "image_order": _image_order_text(cams, rep_data["channels"], n_frames),
        "answer_field": field,
        "distance_slots": ", ".join(f"<t={t}: metres or null>" for t in range(1, n_frames + 1)),
        "flag_slots": ", ".join(f"<t={t}: true/false>" for t in range(1, n_frames + 1)),
    }
    tpl = data["templates"]
    parts = [tpl["camera" if cams else "topdown"]["preamble"], tpl["instructions"][task_key],
             tpl["output_format"]]
    return "\n\n".join(_fill(p, values) for p in parts) + "\n"


def answer_schema(task: int | str, n_frames: int = 3) -> dict[str, Any]:
    """JSON Schema of the structured answer, for clients whose API accepts one."""
    _check_frames(n_frames)
    names = field_names()

    def per_frame(item: dict[str, Any]) -> dict[str, Any]:
        return {"type": "array", "items": item, "minItems": n_frames, "maxItems": n_frames}

    props = {
        names["distance"]: per_frame({"type": ["number", "null"], "minimum": 0}),
        names["trend"]: {"type": "string", "enum": list(trend_values())},
        names["human_contact"]: per_frame({"type": "boolean"}),
        names["scene_contact"]: per_frame({"type": "boolean"}),
        names["reasoning"]: {"type": "string"},
        answer_field(task): {"type": "string", "enum": list(LABELS)},
    }
    return {"type": "object", "properties": props, "required": list(props),
            "additionalProperties": False}


def _image_order_text(cams: tuple[str, ...], channels: list[str], n_frames: int) -> str:
    names = [c.split(" (")[0] for c in (prompt_data()["cameras"][k] for k in cams)]
    if len(channels) == 1:
        per_view = ", ".join(names)
    else:
        per_view = ", ".join(f"{n} ({' then '.join(channels)})" for n in names)
    if n_frames == 1:
        return f"t=1: {per_view}"
    return f"for each time point t=1..{n_frames} in turn: {per_view}"


def _fill(template: str, values: dict[str, str]) -> str:
    # Only known lower-case names are placeholders, so the JSON example's braces stay literal.
    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in values:
            raise RobosafeError(f"prompts.yaml: unknown placeholder {{{m.group(1)}}}")
        return values[m.group(1)]

    return _PLACEHOLDER.sub(sub, template)


def _check_frames(n_frames: int) -> None:
    if isinstance(n_frames, bool) or not isinstance(n_frames, int) or n_frames < 1:
        raise RobosafeError(f"n_frames must be a positive integer, got {n_frames!r}")
