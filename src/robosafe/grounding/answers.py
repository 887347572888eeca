"""Parsing VLM answers to the TouchSafeBench structured JSON (paper 003, Sec. 3, App. G, App. I).

Real model output is messy: code fences, prose around the JSON, single quotes, trailing commas,
``"Class A"`` or ``"(C) human contact"`` instead of ``"C"``, numbers as strings, missing fields,
lists of the wrong length. ``parse_answer`` never raises on any text: an answer without a usable
final label is returned with ``valid=False`` and the reason in ``error``, so the metrics can
count it as wrong instead of losing it.

The expected answer (field names from ``data/prompts.yaml``)::

    {"robot_human_distance_m": [2.1, 1.6, null],   # metres per time point, null = cannot say
     "distance_trend": "closing",                    # closing | separating | stable | unknown
     "human_contact": [false, false, false],         # per time point
     "scene_contact": [false, false, true],          # per time point
     "reasoning": "...",
     "answer": "B"}                                  # Task 1; Task 2 uses "risk_level"

``valid`` is about the final label only. Diagnostic fields are filled when they can be read and
are ``None`` otherwise; anything dropped or adjusted on the way is listed in ``warnings``.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from robosafe.errors import RobosafeError
from robosafe.grounding.prompts import LABELS, answer_field, field_names, normalize_task

# Bounds that keep pathological inputs cheap; real answers are a few kB.
_MAX_TEXT = 200_000
_MAX_LITERAL_EVAL = 50_000
_MAX_DEPTH = 4
_MAX_DECODES = 100
_MAX_DECODE_CHARS = 1_000_000


@dataclass(frozen=True)
class ParsedAnswer:
    """One model answer, parsed.

    ``label``: "A" / "B" / "C" or None; ``distance_m``: robot-human distance at the last time
    point (or the single number the model gave); ``trend``: closing / separating / stable /
    unknown; ``contact_flags``: per time point, any contact (human or scene); ``distances_m``,
    ``human_contact``, ``scene_contact``: the per-time-point fields of App. G.1; ``source``:
    ``"json"``, ``"repaired_json"`` or ``"text"`` (where the label was found).
    """

    valid: bool
    label: str | None
    distance_m: float | None
    trend: str | None
    contact_flags: tuple[bool | None, ...] | None
    error: str | None
    raw: str
    distances_m: tuple[float | None, ...] | None = None
    human_contact: tuple[bool | None, ...] | None = None
    scene_contact: tuple[bool | None, ...] | None = None
    source: str | None = None
    warnings: tuple[str, ...] = ()


# --- keys the models actually use (normalised: lower case, "_" for spaces and dashes) --------

_LABEL_KEYS = ("answer", "risk_level", "final_answer", "final_label", "label", "prediction",
               "predicted_label", "classification", "class", "category", "safety_label",
               "safety_state", "risk", "decision", "verdict")
_DISTANCE_KEYS = ("robot_human_distance_m", "robot_human_distance", "distance_m", "distances_m",
                  "distance", "distances", "estimated_distance", "estimated_distance_m",
                  "human_distance", "distance_to_human", "distance_to_human_m")
_TREND_KEYS = ("distance_trend", "trend", "robot_human_trend")
_HUMAN_KEYS = ("human_contact", "human_contacts", "human_contact_flags", "robot_human_contact",
               "human_collision", "contact_human")
_SCENE_KEYS = ("scene_contact", "scene_contacts", "scene_contact_flags", "robot_scene_contact",
               "scene_collision", "contact_scene", "environment_contact", "object_contact")
# Bare "human" / "scene" are only read inside a contact container ({"contact_flags": {"human":
# [...]}}): at top level they too often describe something else ({"human": {"visible": true}}).
_HUMAN_INNER = ("human", "person")
_SCENE_INNER = ("scene", "environment", "object")
_CONTACT_CONTAINERS = ("contact_flags", "collision_flags", "contacts", "collisions", "flags")
_FRAME_CONTAINERS = ("frames", "per_frame", "time_points", "timepoints", "observations")

_NULL_WORDS = {"", "null", "none", "unknown", "n/a", "na", "nan", "-", "?", "unsure",
               "cannot estimate", "can't estimate", "not visible", "not available", "unclear"}
_TRUE_WORDS = {"true", "yes", "y", "1", "t", "contact", "collision", "collided", "touching"}
_FALSE_WORDS = {"false", "no", "n", "0", "f", "no contact", "no collision", "none"}
_TREND_WORDS = {
    "closing": ("closing", "approaching", "decreasing", "converging", "closer", "getting closer",
                "shrinking", "narrowing", "closing in"),
    "separating": ("separating", "receding", "increasing", "diverging", "moving apart",
                   "moving away", "farther", "further", "growing", "widening"),
    "stable": ("stable", "constant", "steady", "unchanged", "static", "same", "no change",
               "flat", "stationary"),
    "unknown": ("unknown", "unclear", "uncertain", "cannot tell", "can't tell", "n/a", "none",
                "null", "indeterminate"),
}


def parse_answer(raw: Any, task: int | str | None = None,
                 n_frames: int | None = None) -> ParsedAnswer:
    """Parse one raw model answer (text, or an already-decoded JSON object).

    ``task`` (1 / 2) selects the primary label field (``answer`` / ``risk_level``); other label
    fields are accepted as fallbacks. ``n_frames``, when given, pads per-time-point lists that are
    too short with None and truncates lists that are too long (both noted in ``warnings``).
    Never raises for any input text.
    """
    try:
        primary = answer_field(task) if task is not None else None
    except RobosafeError:  # an unknown task must not turn a parse into an exception
        primary = None
    if isinstance(raw, Mapping):
        text = _dumps(raw)
        objects: list[tuple[dict[str, Any], str]] = [(dict(raw), "json")]
    else:
        text = raw if isinstance(raw, str) else ("" if raw is None else str(raw))
        objects = list(_json_objects(text[:_MAX_TEXT]))
    warnings: list[str] = []
    if not text.strip():
        return _invalid("empty answer", text)

    obj, source = _choose(objects, primary)
    label: str | None = None
    error: str | None = None
    if obj is not None and (hit := _find_label_value(obj, primary)) is not None:
        key, value = hit
        label, error = parse_label(value)
        if label is None:
            error = f"field {key!r}: {error}"
    else:
        source = None
        label, error = _label_from_prose(text[:_MAX_TEXT])
        if label is not None:
            source = "text"
        elif obj is None:
            error = "no JSON object and no explicit label in the answer"
        else:
            error = "JSON has no label field (expected 'answer' or 'risk_level')"

    diag = _diagnostics(obj, n_frames, warnings) if obj is not None else {}
    return ParsedAnswer(
        valid=label is not None, label=label, distance_m=diag.get("distance_m"),
        trend=diag.get("trend"), contact_flags=diag.get("contact_flags"),
        error=None if label is not None else error, raw=text,
        distances_m=diag.get("distances_m"), human_contact=diag.get("human_contact"),
        scene_contact=diag.get("scene_contact"), source=source, warnings=tuple(warnings))


def parse_label(value: Any) -> tuple[str | None, str | None]:
    """``"A"``, ``"a"``, ``"Class A"``, ``"(C) human contact"``, ``"safe"``, ``"scene collision
    imminent"`` ... -> ``("A" | "B" | "C", None)``, or ``(None, reason)``.

    A letter together with a description that names a different class (``"C (scene contact)"``)
    is rejected as conflicting rather than guessed.
    """
    if isinstance(value, bool) or value is None:
        return None, f"label is {value!r}"
    if isinstance(value, list | tuple) and len(value) == 1:
        value = value[0]
    if not isinstance(value, str):
        return None, f"label is not text: {_short(value)}"
    text = value.strip().strip("\"'`*_ ").strip()
    if not text:
        return None, "empty label"
    letter, tail = _leading_letter(text)
    described = _label_from_words(tail if letter else text)
    if letter and described and described != letter:
        return None, f"label {_short(text)} names {letter} but describes {described}"
    if letter or described:
        return letter or described, None
    return None, f"unknown label {_short(text)}"


# --- locating the JSON ------------------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*(?:json5?|javascript|js|python)?[ \t]*\n?(.*?)```",
                    re.DOTALL | re.IGNORECASE)


def _json_objects(text: str) -> Iterator[tuple[dict[str, Any], str]]:
    """Every decodable JSON object in ``text``: fenced blocks first, then bare ``{...}`` spans.

    A span that does not decode is searched for decodable spans inside it. Decode attempts and
    the characters they read are capped so adversarial brace soup stays cheap.
    """
    budget = [_MAX_DECODES, _MAX_DECODE_CHARS]
    for chunk in [m.group(1) for m in _FENCE.finditer(text)] + [text]:
        pairs = _brace_pairs(chunk)
        yield from _decode_within(chunk, pairs, -1, len(chunk), budget)


def _brace_pairs(text: str) -> list[tuple[int, int]]:
    """All balanced ``{...}`` (start, end) pairs, sorted by start; one linear pass.

    Quotes are tracked only inside braces, so apostrophes in surrounding prose are harmless.
    """
    pairs, stack, quote = [], [], ""
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c == "{":
            stack.append(i)
        elif c == "}" and stack:
            pairs.append((stack.pop(), i))
        elif stack and c in "\"'" and not _is_apostrophe(text, i):
            quote = c
        i += 1
    return sorted(pairs)


def _decode_within(text: str, pairs: list[tuple[int, int]], lo: int, hi: int,
                   budget: list[int]) -> Iterator[tuple[dict[str, Any], str]]:
    inside = [(a, b) for a, b in pairs if lo < a and b < hi]
    last_end = -1
    for a, b in inside:
        if a <= last_end or budget[0] <= 0 or budget[1] < b - a:
            continue  # nested in a span already handled, or out of budget
        last_end = b
        budget[0] -= 1
        budget[1] -= b - a
        decoded = _decode(text[a:b + 1])
        if decoded is not None:
            yield decoded
        else:
            yield from _decode_within(text, inside, a, b, budget)


def _is_apostrophe(text: str, i: int) -> bool:
    # "robot's" inside an unquoted stretch must not open a string.
    return text[i] == "'" and 0 < i < len(text) - 1 and text[i - 1].isalnum() \
        and text[i + 1].isalnum()


_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_SMART_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'"})


def _decode(span: str) -> tuple[dict[str, Any], str] | None:
    try:
        obj = json.loads(span)
        if isinstance(obj, dict):
            return obj, "json"
    except (ValueError, RecursionError):
        pass
    # Cheap repairs: smart quotes, trailing commas, Python literals; then a Python-literal read
    # for single-quoted keys. ast.literal_eval never executes code.
    fixed = _TRAILING_COMMA.sub(r"\1", span.translate(_SMART_QUOTES))
    try:
        obj = json.loads(re.sub(r"\bTrue\b", "true", re.sub(r"\bFalse\b", "false",
                                re.sub(r"\bNone\b", "null", fixed))))
        if isinstance(obj, dict):
            return obj, "repaired_json"
    except (ValueError, RecursionError):
        pass
    if len(fixed) <= _MAX_LITERAL_EVAL:
        py = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False",
                                               re.sub(r"\bnull\b", "None", fixed)))
        try:
            obj = ast.literal_eval(py)
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
            return None
        if isinstance(obj, dict):
            return obj, "repaired_json"
    return None


def _choose(objects: list[tuple[dict[str, Any], str]],
            primary: str | None) -> tuple[dict[str, Any] | None, str | None]:
    # The last object that carries a label wins: models often echo the format, then answer.
    for obj, source in reversed(objects):
        if _find_label_value(obj, primary) is not None:
            return obj, source
    if objects:
        return objects[-1]
    return None, None


def _norm_key(key: Any) -> str:
    return re.sub(r"[^a-z0-9]+", "_", str(key).lower()).strip("_")


def _lookup(obj: Mapping[str, Any], keys: tuple[str, ...],
            depth: int = 0) -> tuple[str, Any] | None:
    """First of ``keys`` (in priority order) at this level, else in nested objects."""
    normed = {}
    for k, v in obj.items():
        normed.setdefault(_norm_key(k), (str(k), v))
    for key in keys:
        if key in normed:
            return normed[key]
    if depth < _MAX_DEPTH:
        for v in obj.values():
            if isinstance(v, Mapping):
                hit = _lookup(v, keys, depth + 1)
                if hit is not None:
                    return hit
    return None


def _find_label_value(obj: Mapping[str, Any], primary: str | None) -> tuple[str, Any] | None:
    keys = ((primary,) if primary else ()) + _LABEL_KEYS
    hit = _lookup(obj, keys)
    if hit is not None and isinstance(hit[1], Mapping):
        # {"answer": {"label": "B", ...}}: look inside for the label itself.
        inner = _lookup(hit[1], keys)
        return inner if inner is not None and not isinstance(inner[1], Mapping) else hit
    return hit


# --- labels -----------------------------------------------------------------------------------

_LETTER = re.compile(
    r"^(?P<prefix>(?:the\s+)?(?:final\s+)?(?:answer|label|classification|class|option|"
    r"category|choice|risk[\s_]*level|risk|prediction|state)\s*(?:is\s*)?[:=\-]?\s*)?"
    r"(?P<open>[\(\[])?(?P<letter>[abc])(?P<close>[\)\]])?(?P<tail>(?:[^a-z0-9].*)?)$",
    re.IGNORECASE | re.DOTALL)
_NEGATED = re.compile(
    r"\b(?:no|not|without|zero|nor)\s+(?:[a-z]+\s+){0,3}?"
    r"(?:contact|contacts|collision|collisions|collide|colliding|risk|touching|touch)\b")
_CONTACT = r"(?:contact\w*|collision\w*|collid\w*|touch\w*|hit\w*|risk\w*|imminent)"
_HUMAN = r"(?:human|humans|person|people|humanoid)"
_SCENE = (r"(?:scene|object|objects|environment|environmental|furniture|wall|walls|obstacle|"
          r"table|door|shelf)")


def _class_phrase(noun: str) -> re.Pattern[str]:
    return re.compile(rf"\b{noun}\s+(?:[a-z]+\s+){{0,2}}?{_CONTACT}|"
                      rf"\b{_CONTACT}\s+(?:with\s+)?(?:the\s+|a\s+)?{noun}\b")


_HUMAN_PHRASE = _class_phrase(_HUMAN)
_SCENE_PHRASE = _class_phrase(_SCENE)
_SAFE = re.compile(r"\b(?:safe|no risk|no event|normal|none)\b")
_NOT_SAFE = re.compile(r"\b(?:not|isn'?t|never)\s+(?:\w+\s+)?safe\b")


def _leading_letter(text: str) -> tuple[str | None, str]:
    m = _LETTER.match(text.replace("_", " "))  # "class_c", "risk_level_b"
    if not m:
        return None, text
    letter, tail = m.group("letter"), m.group("tail")
    bare = not (m.group("prefix") or m.group("open") or m.group("close"))
    if bare and letter in "aA" and re.match(r"\s+[a-z]", tail, re.IGNORECASE):
        return None, text  # the article "a", as in "a human collision is imminent"
    return letter.upper(), tail


def _label_from_words(text: str) -> str | None:
    t = " " + re.sub(r"[\s\-_\u2013\u2014/]+", " ", text.lower()) + " "
    if not t.strip(" .,:;()[]"):
        return None
    single = t.strip(" .,:;()[]!\"'")
    if single in ("human", "person", "humanoid"):
        return "C"
    if single in ("scene", "environment", "object", "objects", "furniture"):
        return "B"
    negated = bool(_NEGATED.search(t))
    rest = _NEGATED.sub(" ", t)
    found = set()
    if _HUMAN_PHRASE.search(rest):
        found.add("C")
    if _SCENE_PHRASE.search(rest):
        found.add("B")
    if not found and (negated or _SAFE.search(rest)) and not _NOT_SAFE.search(rest):
        found.add("A")
    return found.pop() if len(found) == 1 else None


_PROSE_LABEL = re.compile(
    r"(?i:\b(?:final\s+)?(?:answer|label|classification|class|risk[\s_]*level|prediction|"
    r"verdict|category|option))[\"']?\s*(?:is|:|=|-)?\s*[\*\"'`(\[]*\s*([ABC])\b(?![\w'])")


def _label_from_prose(text: str) -> tuple[str | None, str | None]:
    stripped = text.strip()
    if len(stripped) <= 80 and "{" not in stripped:
        label, _ = parse_label(stripped)
        if label:
            return label, None
    found = _PROSE_LABEL.findall(text)
    if found:
        return found[-1], None  # the last explicit statement is the model's final word
    return None, "no explicit label"


# --- diagnostics ------------------------------------------------------------------------------

def _diagnostics(obj: Mapping[str, Any], n_frames: int | None,
                 warnings: list[str]) -> dict[str, Any]:
    names = field_names()
    out: dict[str, Any] = {}
    frames = _lookup(obj, _FRAME_CONTAINERS)
    frame_list = [f for f in frames[1] if isinstance(f, Mapping)] \
        if frames and isinstance(frames[1], list) else []

    # distance: per-time-point list, a single number, or a per-frame object list
    dist_hit = _lookup(obj, (names["distance"],) + _DISTANCE_KEYS)
    dists: list[float | None] | None = None
    if dist_hit is not None:
        key, value = dist_hit
        if isinstance(value, Mapping):
            value = list(value.values())
        if isinstance(value, list | tuple):
            dists = [_to_float(v, key, warnings) for v in value]
        else:
            out["distance_m"] = _to_float(value, key, warnings)
    elif frame_list:
        dists = [_to_float(h[1], h[0], warnings) if (h := _lookup(f, _DISTANCE_KEYS)) else None
                 for f in frame_list]
    if dists is not None:
        dists = _fit(dists, n_frames, "distance", warnings)
        out["distances_m"] = tuple(dists)
        out["distance_m"] = dists[-1] if dists else None

    trend_hit = _lookup(obj, (names["trend"],) + _TREND_KEYS)
    if trend_hit is not None:
        out["trend"] = _to_trend(trend_hit[1], trend_hit[0], warnings)

    human = _flags(obj, (names["human_contact"],) + _HUMAN_KEYS, _HUMAN_INNER, frame_list,
                   warnings)
    scene = _flags(obj, (names["scene_contact"],) + _SCENE_KEYS, _SCENE_INNER, frame_list,
                   warnings)
    any_flags: list[bool | None] | None = None
    if human is None and scene is None:
        container = _lookup(obj, _CONTACT_CONTAINERS)
        if container is not None and isinstance(container[1], list) and not any(
                isinstance(v, Mapping) for v in container[1]):
            # a plain per-frame list without saying which contact: only "any contact" is known
            any_flags = [_to_bool(v, container[0], warnings) for v in container[1]]
    if human is not None:
        human = _fit(human, n_frames, "human_contact", warnings)
        out["human_contact"] = tuple(human)
    if scene is not None:
        scene = _fit(scene, n_frames, "scene_contact", warnings)
        out["scene_contact"] = tuple(scene)
    if any_flags is not None:
        out["contact_flags"] = tuple(_fit(any_flags, n_frames, "contact_flags", warnings))
    elif human is not None or scene is not None:
        n = max(len(human or ()), len(scene or ()))
        out["contact_flags"] = tuple(_any_contact(_at(human, i), _at(scene, i)) for i in range(n))
    return out


def _flags(obj: Mapping[str, Any], keys: tuple[str, ...], inner: tuple[str, ...],
           frame_list: list[Mapping[str, Any]], warnings: list[str]) -> list[bool | None] | None:
    hit = _lookup(obj, keys)
    if hit is None:
        container = _lookup(obj, _CONTACT_CONTAINERS)
        if container is not None:
            value = container[1]
            if isinstance(value, Mapping):
                hit = _lookup(value, keys + inner)
            elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
                frame_list = list(value)
    keys = keys + inner  # inside a per-frame object, {"human": true} is unambiguous
    if hit is not None:
        key, value = hit
        if isinstance(value, Mapping):
            value = list(value.values())
        if not isinstance(value, list | tuple):
            warnings.append(f"{key}: a single value where one per time point was expected")
            value = [value]
        return [_to_bool(v, key, warnings) for v in value]
    if frame_list:
        return [_to_bool(h[1], h[0], warnings) if (h := _lookup(f, keys)) else None
                for f in frame_list]
    return None


def _fit(values: list[Any], n_frames: int | None, name: str, warnings: list[str]) -> list[Any]:
    if not n_frames or len(values) == n_frames:
        return values
    warnings.append(f"{name}: {len(values)} values for {n_frames} time points")
    if len(values) > n_frames:
        return values[:n_frames]
    return values + [None] * (n_frames - len(values))


def _at(values: list[bool | None] | None, i: int) -> bool | None:
    return values[i] if values is not None and i < len(values) else None


def _any_contact(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    if a is False and b is False:
        return False
    return None


_NUMBER = re.compile(r"^(?:~|≈|about|approx\.?|approximately|around|<|>|<=|>=)?\s*"
                     r"(-?\d+(?:\.\d+)?|-?\.\d+)\s*(m|meters?|metres?|cm|centimet(?:er|re)s?)?\.?$")


def _to_float(value: Any, key: str, warnings: list[str]) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
    elif isinstance(value, str):
        s = value.strip().lower()
        if s in _NULL_WORDS:
            return None
        m = _NUMBER.match(s)
        if not m:
            warnings.append(f"{key}: not a distance: {_short(value)}")
            return None
        number = float(m.group(1)) / (100.0 if (m.group(2) or "").startswith("c") else 1.0)
    else:
        warnings.append(f"{key}: not a distance: {_short(value)}")
        return None
    if not math.isfinite(number) or number < 0:
        warnings.append(f"{key}: distance {number!r} dropped (must be finite and >= 0)")
        return None
    return number


def _to_bool(value: Any, key: str, warnings: list[str]) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        s = value.strip().lower()
        if s in _TRUE_WORDS:
            return True
        if s in _FALSE_WORDS:
            return False
        if s in _NULL_WORDS:
            return None
    warnings.append(f"{key}: not a contact flag: {_short(value)}")
    return None


def _to_trend(value: Any, key: str, warnings: list[str]) -> str | None:
    if value is None:
        return None
    s = re.sub(r"[\s_\-]+", " ", str(value).strip().lower()).strip(" .!\"'")
    for trend, words in _TREND_WORDS.items():
        if s in words:
            return trend
    for trend, words in _TREND_WORDS.items():  # "closing (distance decreasing)"
        if any(re.match(rf"{re.escape(w)}\b", s) for w in words):
            return trend
    warnings.append(f"{key}: unknown trend {_short(value)}")
    return None


def _invalid(error: str, raw: str) -> ParsedAnswer:
    return ParsedAnswer(valid=False, label=None, distance_m=None, trend=None, contact_flags=None,
                        error=error, raw=raw)


def _short(value: Any, limit: int = 40) -> str:
    s = repr(value)
    return s if len(s) <= limit else s[:limit - 3] + "..."


def _dumps(obj: Any) -> str:
    try:
        return json.dumps(obj, default=str)
    except (TypeError, ValueError, RecursionError):
        return str(obj)


# Re-exported for callers that only import this module.
__all__ = ["LABELS", "ParsedAnswer", "normalize_task", "parse_answer", "parse_label"]
