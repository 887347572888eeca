"""Language perturbation W0-W4: WordNet word substitution in task instructions.

VLA-Arena (paper 001, Sec. 2.2 and App. 8.1) perturbs an instruction by replacing the words in
its semantic slots, its verbs and nouns, with words one WordNet edge away (synset shortest path
length 1: synonyms, direct hypernyms, direct hyponyms). Level W_k replaces exactly k slots; W0 is
the original instruction.

- Nouns are substituted automatically from ``data/wordnet_substitutes.json``, a table generated
  offline from WordNet 3.0 by ``scripts/make_wordnet_table.py`` (its docstring gives the sense and
  filtering rule). Nothing is downloaded and neither ``wn`` nor ``nltk`` is imported here.
- Verbs are substituted only from the hand-screened list ``data/verbs.yaml``.

Slot detection (rule based; instructions are short imperatives):

- Words are runs of letters, matched case-insensitively. Articles, prepositions, pronouns and
  every word outside the two vocabularies are never slots.
- A verb slot is a verb of ``verbs.yaml`` at the start of a clause (start of the instruction,
  after punctuation, or after "and", "then", "please", "also", "first", "finally"). Phrasal verbs
  are one slot: "pick up" -> "grab"; a split "pick it up" is the same slot and becomes "grab it".
  A substitute with a particle keeps English order around a pronoun: "close it" -> "close it up".
- A noun slot is the longest match against the noun table (compounds such as "cream cheese" or
  "wine bottle" are one slot). Regular plurals are recognised ("apples") and the substitute is
  pluralised. When a noun directly precedes another noun ("cookie box", "orange mug") it is a
  modifier and only the head noun is a slot.

Rendering keeps the instruction's style: underscores stay underscores ("pick_up_the_bowl"),
spaces stay spaces, an initial capital stays, and "a"/"an" before a substituted noun is adjusted.

Sampling is deterministic: ``numpy.random.default_rng(seed)`` picks k distinct slots uniformly,
then one substitute per chosen slot uniformly. An instruction with fewer than k substitutable
slots raises :class:`robosafe.errors.RobosafeError`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import numpy as np
import yaml

from robosafe.errors import RobosafeError

__all__ = [
    "MAX_LEVEL",
    "STOPWORDS",
    "Perturbation",
    "Slot",
    "Substitute",
    "Substitution",
    "count_variants",
    "perturb_instruction",
    "semantic_slots",
    "variants",
]

MAX_LEVEL = 4
DATA = Path(__file__).resolve().parent / "data"
NOUN_TABLE = DATA / "wordnet_substitutes.json"
VERB_TABLE = DATA / "verbs.yaml"
RELATIONS = ("synonym", "hypernym", "hyponym", "curated")

_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
_CLAUSE_WORDS = frozenset({"and", "then", "please", "also", "first", "finally"})
_OBJECT_PRONOUNS = frozenset({"it", "them"})
_PARTICLES = frozenset({"up", "down", "out", "in", "on", "off", "over", "away", "back"})
# Never slots, whatever the tables say (articles, prepositions, pronouns, conjunctions).
STOPWORDS = frozenset({
    "a", "an", "the", "this", "that", "these", "those", "it", "them", "its", "their", "and", "or",
    "but", "then", "both", "all", "each", "every", "some", "any", "of", "in", "on", "at", "to",
    "into", "onto", "from", "with", "without", "by", "for", "over", "under", "above", "below",
    "behind", "between", "beside", "next", "near", "inside", "outside", "up", "down", "out",
    "off", "away", "back", "top", "bottom", "left", "right", "front", "middle", "side",
})


class Substitute(NamedTuple):
    """A candidate replacement for a slot and its relation to the original word."""

    text: str
    relation: str  # synonym | hypernym | hyponym | curated (verbs only)


class Substitution(NamedTuple):
    """One replacement made in a perturbation (compares equal to ``(original, new, relation)``)."""

    original: str
    new: str
    relation: str


@dataclass(frozen=True)
class Slot:
    """A substitutable word or phrase of an instruction.

    ``index`` is the slot's position among the instruction's slots; ``span`` the character
    range ``[start, end)`` it covers in the instruction; ``word`` its lower-case text with
    single spaces (an embedded object pronoun, as in "pick it up", is left out); ``lemma`` the
    table key it matched ("apple" for "apples"); ``pos`` is ``"noun"`` or ``"verb"``.
    """

    index: int
    span: tuple[int, int]
    word: str
    lemma: str
    pos: str
    substitutes: tuple[Substitute, ...]
    plural: bool = False
    pronoun: str | None = None  # object pronoun inside a split phrasal verb ("pick it up")


@dataclass(frozen=True)
class Perturbation:
    """An instruction at level W_k: ``text`` with exactly ``level`` slots substituted.

    ``perturb_instruction(original, level, seed)`` reproduces it. ``slots`` are the indices
    (into :func:`semantic_slots`) of the substituted slots, in text order, aligned with
    ``substitutions``.
    """

    text: str
    level: int
    seed: int
    substitutions: tuple[Substitution, ...]
    original: str
    slots: tuple[int, ...] = ()


# --- tables -----------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _nouns() -> dict[str, tuple[Substitute, ...]]:
    try:
        table = json.loads(NOUN_TABLE.read_text(encoding="utf-8"))
        nouns = table["nouns"]
    except (OSError, ValueError, KeyError) as exc:
        raise RobosafeError(f"{NOUN_TABLE}: cannot read the noun substitution table ({exc}); "
                            "regenerate it with scripts/make_wordnet_table.py") from exc
    out = {}
    for word, entry in nouns.items():
        subs = tuple(Substitute(text, rel) for text, rel in entry["substitutes"])
        _check_entry(NOUN_TABLE, word, subs)
        out[word] = subs
    return out


@lru_cache(maxsize=1)
def _verbs() -> dict[str, tuple[Substitute, ...]]:
    try:
        table = yaml.safe_load(VERB_TABLE.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise RobosafeError(f"{VERB_TABLE}: cannot read the verb list ({exc})") from exc
    if not isinstance(table, dict):
        raise RobosafeError(f"{VERB_TABLE}: expected a mapping verb -> {{substitute: relation}}")
    out = {}
    for verb, subs in table.items():
        if not isinstance(subs, dict):
            raise RobosafeError(f"{VERB_TABLE}: {verb!r}: expected {{substitute: relation}}")
        entry = tuple(Substitute(str(text), str(rel)) for text, rel in sorted(subs.items()))
        _check_entry(VERB_TABLE, str(verb), entry)
        out[str(verb)] = entry
    return out


def _check_entry(source: Path, word: str, subs: tuple[Substitute, ...]) -> None:
    if not subs:
        raise RobosafeError(f"{source}: {word!r} has no substitutes")
    if word in STOPWORDS:
        raise RobosafeError(f"{source}: {word!r} is a function word and cannot be a slot")
    for sub in subs:
        if sub.relation not in RELATIONS:
            raise RobosafeError(f"{source}: {word!r} -> {sub.text!r}: unknown relation "
                                f"{sub.relation!r} (expected one of {', '.join(RELATIONS)})")
        if sub.text == word:
            raise RobosafeError(f"{source}: {word!r} lists itself as a substitute")


@lru_cache(maxsize=1)
def _max_noun_words() -> int:
    return max(len(word.split()) for word in _nouns())


# --- tokenisation and slots -------------------------------------------------------------------

class _Token(NamedTuple):
    text: str   # as written
    low: str    # lower case
    start: int
    end: int
    gap: str    # text between the previous token and this one


def _tokens(instruction: str) -> list[_Token]:
    tokens, prev_end = [], 0
    for m in _WORD.finditer(instruction):
        tokens.append(_Token(m.group(), m.group().lower(), m.start(), m.end(),
                             instruction[prev_end:m.start()]))
        prev_end = m.end()
    return tokens


def _plain_gap(gap: str) -> bool:
    """Tokens separated only by spaces or underscores (no punctuation) can form a phrase."""
    return bool(gap) and all(ch in " _\t" for ch in gap)


def _clause_start(tokens: list[_Token], i: int) -> bool:
    if i == 0:
        return True
    if any(ch in ",;:.!?()" for ch in tokens[i].gap):
        return True
    return tokens[i - 1].low in _CLAUSE_WORDS


def _singulars(word: str) -> list[str]:
    out = []
    if word.endswith("ies") and len(word) > 4:
        out.append(word[:-3] + "y")
    if word.endswith("ves"):
        out += [word[:-3] + "f", word[:-3] + "fe"]
    if word.endswith("s") and not word.endswith("ss"):
        out.append(word[:-1])
    if word.endswith("es"):
        out.append(word[:-2])
    return out


def _pluralize(phrase: str) -> str:
    head, _, last = phrase.rpartition(" ")
    if last.endswith(("s", "x", "z", "ch", "sh")):
        last += "es"
    elif last.endswith("y") and len(last) > 1 and last[-2] not in "aeiou":
        last = last[:-1] + "ies"
    elif last.endswith("ife"):
        last = last[:-3] + "ives"
    elif last.endswith(("elf", "eaf", "oaf")):
        last = last[:-1] + "ves"
    else:
        last += "s"
    return f"{head} {last}" if head else last


def _match_verb(tokens: list[_Token], i: int) -> tuple[int, str, str | None] | None:
    """(number of tokens, verb lemma, embedded pronoun) of the verb starting at token i."""
    verbs = _verbs()
    low = tokens[i].low

    def particle(k: int) -> bool:  # "out of", "off of" are prepositions, not particles
        return (k < len(tokens) and _plain_gap(tokens[k].gap)
                and not (k + 1 < len(tokens) and tokens[k + 1].low == "of"))

    if particle(i + 1):
        phrasal = f"{low} {tokens[i + 1].low}"
        if phrasal in verbs:
            return 2, phrasal, None
    if (i + 1 < len(tokens) and _plain_gap(tokens[i + 1].gap)
            and tokens[i + 1].low in _OBJECT_PRONOUNS and particle(i + 2)):
        split = f"{low} {tokens[i + 2].low}"
        if split in verbs:
            return 3, split, tokens[i + 1].low
    if low in verbs:
        return 1, low, None
    return None


def _match_noun(tokens: list[_Token], i: int) -> tuple[int, str, bool] | None:
    """(number of tokens, table key, plural) of the longest noun starting at token i."""
    nouns = _nouns()
    if tokens[i].low in STOPWORDS:
        return None
    for n in range(min(_max_noun_words(), len(tokens) - i), 0, -1):
        words = [t.low for t in tokens[i:i + n]]
        if any(not _plain_gap(t.gap) for t in tokens[i + 1:i + n]):
            continue
        phrase = " ".join(words)
        if phrase in nouns:
            return n, phrase, False
        for singular in _singulars(words[-1]):
            key = " ".join(words[:-1] + [singular])
            if key in nouns:
                return n, key, True
    return None


def semantic_slots(instruction: str) -> list[Slot]:
    """The substitutable verbs and nouns of ``instruction``, in text order."""
    if not isinstance(instruction, str):
        raise RobosafeError(f"instruction must be a string, got {type(instruction).__name__}")
    tokens = _tokens(instruction)
    nouns, verbs = _nouns(), _verbs()
    slots: list[Slot] = []
    i = 0
    while i < len(tokens):
        if _clause_start(tokens, i) and (verb := _match_verb(tokens, i)):
            n, lemma, pronoun = verb
            words = [t.low for t in tokens[i:i + n] if not (pronoun and t.low == pronoun)]
            slots.append(Slot(len(slots), (tokens[i].start, tokens[i + n - 1].end),
                              " ".join(words), lemma, "verb", verbs[lemma], pronoun=pronoun))
            i += n
            continue
        noun = _match_noun(tokens, i)
        if noun is None:
            i += 1
            continue
        n, key, plural = noun
        j = i + n
        if j < len(tokens) and _plain_gap(tokens[j].gap) and _match_noun(tokens, j):
            i = j  # a modifier ("cookie" in "cookie box"): only the head noun is a slot
            continue
        slots.append(Slot(len(slots), (tokens[i].start, tokens[j - 1].end),
                          " ".join(t.low for t in tokens[i:j]), key, "noun", nouns[key],
                          plural=plural))
        i = j
    return slots


# --- perturbation -----------------------------------------------------------------------------

def _check_level(level: int) -> None:
    if isinstance(level, bool) or not isinstance(level, (int, np.integer)) \
            or not 0 <= level <= MAX_LEVEL:
        raise RobosafeError(f"language level must be an integer W0-W{MAX_LEVEL}, got {level!r}")


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise RobosafeError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def _too_few(instruction: str, slots: list[Slot], level: int) -> RobosafeError:
    found = ", ".join(f"{s.word!r} ({s.pos})" for s in slots) or "none"
    return RobosafeError(f"instruction {instruction!r} has {len(slots)} substitutable slot(s) "
                         f"[{found}]; level W{level} needs {level}")


def _style(instruction: str) -> str:
    return "_" if "_" in instruction and not any(ch.isspace() for ch in instruction) else " "


def _case_like(original: str, text: str) -> str:
    if len(original) > 1 and original.isupper():
        return text.upper()
    if original[:1].isupper():
        return text[:1].upper() + text[1:]
    return text


def _render(instruction: str, chosen: list[tuple[Slot, Substitute]]
            ) -> tuple[str, tuple[Substitution, ...]]:
    sep = _style(instruction)
    tokens = _tokens(instruction)
    by_start = {t.start: k for k, t in enumerate(tokens)}
    edits: list[tuple[int, int, str]] = []
    records = []
    for slot, sub in chosen:
        start, end = slot.span
        new = _pluralize(sub.text) if slot.plural else sub.text
        words = new.split()
        pronoun = slot.pronoun
        if slot.pos == "verb" and pronoun is None:
            k = by_start[start] + len(slot.word.split())
            if (len(words) > 1 and words[-1] in _PARTICLES and k < len(tokens)
                    and tokens[k].low in _OBJECT_PRONOUNS and _plain_gap(tokens[k].gap)):
                pronoun, end = tokens[k].text, tokens[k].end  # "close it" -> "close it up"
        elif pronoun is not None:
            pronoun = tokens[by_start[start] + 1].text
        if pronoun is not None:
            if len(words) > 1 and words[-1] in _PARTICLES:
                words = words[:-1] + [pronoun, words[-1]]
            else:
                words = words + [pronoun]
        text = _case_like(instruction[start:end], sep.join(words))
        if slot.pos == "noun":
            start, text = _fix_article(instruction, tokens, by_start[start], start, text)
        edits.append((start, end, text))
        records.append(Substitution(slot.word, new, sub.relation))
    out = instruction
    for start, end, text in sorted(edits, reverse=True):
        out = out[:start] + text + out[end:]
    return out, tuple(records)


def _fix_article(instruction: str, tokens: list[_Token], k: int, start: int, text: str
                 ) -> tuple[int, str]:
    """Make a directly preceding "a"/"an" agree with the substitute's first sound (roughly)."""
    if k == 0 or tokens[k - 1].low not in ("a", "an") or not _plain_gap(tokens[k].gap):
        return start, text
    article = "an" if text[:1].lower() in "aeiou" else "a"
    prev = tokens[k - 1]
    return prev.start, _case_like(prev.text, article) + tokens[k].gap + text


def _perturb(instruction: str, slots: list[Slot], level: int, seed: int) -> Perturbation:
    if level == 0:
        return Perturbation(instruction, 0, seed, (), instruction, ())
    if len(slots) < level:
        raise _too_few(instruction, slots, level)
    rng = np.random.default_rng(seed)
    picked = sorted(int(k) for k in rng.choice(len(slots), size=level, replace=False))
    chosen = []
    for k in picked:
        subs = slots[k].substitutes
        chosen.append((slots[k], subs[int(rng.integers(len(subs)))]))
    text, records = _render(instruction, chosen)
    return Perturbation(text, level, seed, records, instruction, tuple(picked))


def perturb_instruction(instruction: str, level: int, seed: int) -> Perturbation:
    """``instruction`` at language level W``level``: exactly ``level`` slots substituted.

    W0 returns the instruction unchanged. Deterministic for a given ``seed``.
    """
    _check_level(level)
    seed = _check_seed(seed)
    return _perturb(instruction, semantic_slots(instruction), int(level), seed)


def count_variants(instruction: str, level: int) -> int:
    """How many distinct W``level`` variants ``instruction`` has (1 for W0)."""
    _check_level(level)
    counts = [len(s.substitutes) for s in semantic_slots(instruction)]
    # elementary symmetric polynomial e_level(counts)
    e = [1] + [0] * int(level)
    for c in counts:
        for k in range(int(level), 0, -1):
            e[k] += e[k - 1] * c
    return e[int(level)]


def variants(instruction: str, level: int, n: int, seed: int) -> list[Perturbation]:
    """``n`` distinct W``level`` variants of ``instruction``, deterministic for ``seed``.

    Variant candidates are ``perturb_instruction(instruction, level, s)`` for ``s = seed``
    and then for seeds drawn from ``numpy.random.default_rng(seed)``; a candidate whose text
    was already produced is skipped. Each returned perturbation records its own seed, so it
    can be reproduced alone. Asking for more variants than exist (``count_variants``) raises
    :class:`RobosafeError`, as does an extremely unlucky search (``100 n + 10000`` draws).
    """
    _check_level(level)
    seed = _check_seed(seed)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise RobosafeError(f"number of variants must be a positive integer, got {n!r}")
    slots = semantic_slots(instruction)
    if len(slots) < level:
        raise _too_few(instruction, slots, level)
    total = count_variants(instruction, level)
    if n > total:
        raise RobosafeError(f"instruction {instruction!r} has only {total} distinct W{level} "
                            f"variant(s); {n} requested")
    rng = np.random.default_rng(seed)
    out: list[Perturbation] = []
    seen: set[str] = set()
    candidate = seed
    for _ in range(100 * int(n) + 10_000):
        p = _perturb(instruction, slots, int(level), candidate)
        if p.text not in seen:
            seen.add(p.text)
            out.append(p)
            if len(out) == n:
                return out
        candidate = int(rng.integers(2**63))
    raise RobosafeError(f"instruction {instruction!r}: found only {len(out)} distinct W{level} "
                        f"variants of {total} while sampling; request fewer than {n}")
