"""Tests for the Spanish grammatical minimal pairs (enlace.tasks.conjugations.pairs): the one-word contract, the sizes, the
determinism, and that each phenomenon changes only the word it is about, into a form that is really wrong."""
import json
import os
import subprocess
import sys
from collections import defaultdict

import pytest

from conftest import ROOT
from enlace.tasks.conjugations.corpus import PERSONS, TENSES, VERBS, conjugate
from enlace.tasks.conjugations.pairs import (ADJECTIVES, DETERMINERS, DIRECT_CLITICS, ESTAR_ONLY, FUTURE_ADVERBS, INDIRECT_CLITICS,
                                NOUNS, PAST_ADVERBS, PHENOMENA, SER_ONLY, check_pair, minimal_pairs, pair_counts)

PAIRS = minimal_pairs()
BY_PHENOMENON = defaultdict(list)
for _p in PAIRS:
    BY_PHENOMENON[_p["phenomenon"]].append(_p)

# the subject pronouns and the person each one takes (the tests' own table, not the module's)
PRONOUNS = {"yo": "yo", "tú": "tú", "él": PERSONS[2], "ella": PERSONS[2], "usted": PERSONS[2],
            "nosotros": "nosotros", "nosotras": "nosotros", "vosotros": "vosotros", "vosotras": "vosotros",
            "ellos": PERSONS[5], "ellas": PERSONS[5], "ustedes": PERSONS[5]}
SINGULAR_DETS, PLURAL_DETS = {"mi", "tu", "el", "la"}, {"mis", "tus", "los", "las"}


def diff(p):
    "(index, good word, bad word) of the one differing position, with the final period stripped."
    pos = [i for i, (a, b) in enumerate(zip(p["good"].split(), p["bad"].split())) if a != b]
    assert len(pos) == 1, p
    i = pos[0]
    return i, p["good"].split()[i].rstrip("."), p["bad"].split()[i].rstrip(".")


def slot(word):
    "(family, its four forms, index) of a determiner or adjective form (masc. sg., fem. sg., masc. pl., fem. pl.)."
    w = word.lower()
    for name, forms in DETERMINERS.items():
        if w in forms:
            return f"det:{name}", list(forms), forms.index(w)
    for name, (forms, _, _) in ADJECTIVES.items():
        if w in forms.split():
            return f"adj:{name}", forms.split(), forms.split().index(w)
    return None


def noun_features(word):
    "(gender, plural) of a noun form from NOUNS, singular or plural."
    w = word.lower().rstrip(".")
    for noun, (gender, plural_form, _) in NOUNS.items():
        if w == noun:
            return gender, False
        if w == plural_form:
            return gender, True
    raise AssertionError(f"not a noun: {word!r}")


FORMS = defaultdict(set)  # form -> {(verb, tense, person)}
for _v in VERBS:
    for _t in TENSES:
        for _person in PERSONS:
            FORMS[conjugate(_v, _t, _person)].add((_v, _t, _person))


def subject_person(words, i):
    "The person of the subject just before the verb at position i: a pronoun, or a determiner + noun."
    prev = words[i - 1].lower()
    if prev in PRONOUNS:
        return PRONOUNS[prev]
    det = words[i - 2].lower()
    assert det in SINGULAR_DETS | PLURAL_DETS, words
    return PERSONS[2] if det in SINGULAR_DETS else PERSONS[5]


# --- sizes and shape --------------------------------------------------------------------------------------------------

def test_sizes_and_phenomena():
    assert len(PAIRS) >= 2000
    assert len(PHENOMENA) >= 8 and len(set(PHENOMENA)) == len(PHENOMENA)
    assert all(name.isascii() and name.isidentifier() and name.islower() for name in PHENOMENA)
    assert pair_counts(PAIRS) == {name: 300 for name in PHENOMENA}
    assert all(set(p) == {"phenomenon", "good", "bad"} for p in PAIRS)
    assert pair_counts(minimal_pairs(7, seed=2)) == {name: 7 for name in PHENOMENA}
    assert minimal_pairs(0) == []


def test_pair_counts():
    pairs = [{"phenomenon": "a", "good": "", "bad": ""}, {"phenomenon": "b", "good": "", "bad": ""},
             {"phenomenon": "a", "good": "", "bad": ""}]
    assert pair_counts(pairs) == {"a": 2, "b": 1} and pair_counts([]) == {}


def test_every_pair_is_minimal_well_formed_and_unique():
    for p in PAIRS:
        check_pair(p["good"], p["bad"])
        assert p["good"] != p["bad"]
        for s in (p["good"], p["bad"]):
            assert s[0].isupper() and s.endswith(".") and s.count(".") == 1 and s == " ".join(s.split()), s
    assert len({(p["good"], p["bad"]) for p in PAIRS}) == len(PAIRS)
    assert not {p["good"] for p in PAIRS} & {p["bad"] for p in PAIRS}


def test_lexicon():
    assert len(NOUNS) >= 60 and len(ADJECTIVES) >= 30
    assert {"día", "mapa", "problema"} <= {n for n, (g, _, _) in NOUNS.items() if g == "m" and n.endswith("a")}
    assert {"mano", "foto"} <= {n for n, (g, _, _) in NOUNS.items() if g == "f" and n.endswith("o")}
    assert not {"agua", "águila", "aula", "radio", "estudiante", "mar", "lunes"} & set(NOUNS)
    assert all(len(forms.split()) == 4 for forms, _, _ in ADJECTIVES.values())


# --- determinism ------------------------------------------------------------------------------------------------------

def test_deterministic_across_calls_and_seeds():
    assert minimal_pairs() == PAIRS
    assert minimal_pairs(50, seed=3) == minimal_pairs(50, seed=3)
    assert minimal_pairs(50, seed=3) != minimal_pairs(50, seed=4)


@pytest.mark.parametrize("hashseed", ["1", "4242"])
def test_deterministic_across_hash_seeds(hashseed):
    code = "import json; from enlace.tasks.conjugations.pairs import minimal_pairs; print(json.dumps(minimal_pairs(40, seed=3)))"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, encoding="utf-8",
                       timeout=300, env={**os.environ, "PYTHONHASHSEED": hashseed})
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout) == minimal_pairs(40, seed=3)


# --- check_pair -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["El libro están allí.",  # two words differ
                                 "Los libros allí.",  # a word less
                                 "Los libros están allí ahora.",  # a word more
                                 "Los libros están allí."])  # none differs
def test_check_pair_raises(bad):
    with pytest.raises(ValueError) as e:
        check_pair("Los libros están allí.", bad)
    assert "\n" not in str(e.value) and bad in str(e.value) and "Los libros están allí." in str(e.value)


def test_check_pair_accepts_one_word():
    check_pair("Los libros están allí.", "El libros están allí.")
    check_pair("Compré el libro nuevo.", "Compré el libro nueva.")  # the last word, with its period


# --- each phenomenon changes the word it is about --------------------------------------------------------------------

GENDER = ("article_noun_gender", "demonstrative_gender", "noun_adjective_gender", "predicate_adjective_gender")
NUMBER = ("article_noun_number", "noun_adjective_number")


@pytest.mark.parametrize("name", GENDER + NUMBER)
def test_agreement_pairs_swap_one_form_of_one_lemma(name):
    for p in BY_PHENOMENON[name]:
        i, good, bad = diff(p)
        g, b = slot(good), slot(bad)
        assert g and b and g[0] == b[0], (p, g, b)  # two forms of the same determiner or adjective
        if name in GENDER:
            assert g[2] // 2 == b[2] // 2 and g[2] % 2 != b[2] % 2, p  # same number, other gender
        else:
            assert g[2] // 2 != b[2] // 2 and g[2] % 2 == b[2] % 2, p  # same gender, other number
        family = g[0].split(":")[0]
        assert family == ("det" if name.startswith(("article", "demonstrative")) else "adj"), p
        if name.startswith("article"):
            assert g[0] in ("det:el", "det:un"), p
        if name.startswith("demonstrative"):
            assert g[0] in ("det:este", "det:ese", "det:aquel"), p
        # the good form agrees with its noun: after a determiner, before a postnominal adjective, 2nd word otherwise
        words = p["good"].split()
        noun = words[i + 1] if family == "det" else words[i - 1] if name.startswith("noun") else words[1]
        gender, plural = noun_features(noun)
        assert good.lower() == g[1][2 * plural + (gender == "f")], (p, noun)


def test_gender_pairs_never_use_a_gender_invariable_adjective():
    for name in ("noun_adjective_gender", "predicate_adjective_gender"):
        for p in BY_PHENOMENON[name]:
            _, good, _ = diff(p)
            forms = slot(good)[1]
            assert forms[0] != forms[1], p


@pytest.mark.parametrize("name", ["subject_verb_person", "subject_verb_number"])
def test_subject_verb_pairs_use_conjugate(name):
    assert {p["good"].split()[0] for p in BY_PHENOMENON[name]} >= {"Yo", "Nosotros", "Ellos"}
    for p in BY_PHENOMENON[name]:
        i, good, bad = diff(p)
        words = p["good"].split()
        person = subject_person(words, i)
        triples = [(v, t) for v, t, q in FORMS[good] if q == person]
        assert triples, (p, person)  # the good verb is conjugate(verb, tense, the subject's person)
        wrong = {q for v, t in triples for w, u, q in FORMS[bad] if (w, u) == (v, t)}
        assert wrong, p  # the bad verb is the same verb and tense in another person
        j = PERSONS.index(person)
        ks = [PERSONS.index(q) for q in wrong]  # several where forms coincide: "tome" is yo and él
        if name == "subject_verb_person":
            assert any(k // 3 == j // 3 and k != j for k in ks), (p, wrong)  # same number, another person
        else:
            assert any(k % 3 == j % 3 and k // 3 != j // 3 for k in ks), (p, wrong)  # same person, other number
        # the bad form is no form of that verb for the subject's person, in any tense
        assert not [v for v, t in triples if bad in {conjugate(v, u, person) for u in TENSES}], p
        if name == "subject_verb_person" and j >= 3:
            assert words[i - 1].lower() in PRONOUNS, p  # "los niños comemos" is grammatical: no plural noun phrase


def test_tense_adverb_pairs_swap_preterite_and_future():
    for p in BY_PHENOMENON["tense_adverb"]:
        _, good, bad = diff(p)
        text = p["good"].lower()
        past, future = any(a in text for a in PAST_ADVERBS), any(a in text for a in FUTURE_ADVERBS)
        assert past != future, p
        tense, wrong = ("preterito_indefinido", "futuro") if past else ("futuro", "preterito_indefinido")
        matches = [(v, q) for v, t, q in FORMS[good.lower()] if t == tense
                   and conjugate(v, wrong, q) == bad.lower()]
        assert matches, p
        assert all(conjugate(v, "presente", q) != bad.lower() for v, q in matches), p


def test_ser_estar_pairs_swap_the_copula_only():
    estar = {w for forms in ESTAR_ONLY.values() for w in forms.split()} - {"-"}
    ser = {w for forms in SER_ONLY.values() for w in forms.split()}
    seen = set()
    for p in BY_PHENOMENON["ser_estar"]:
        _, good, bad = diff(p)
        words = {w.rstrip(".").lower() for w in p["good"].split()}
        copula = "estar" if words & estar else "ser"
        assert bool(words & estar) != bool(words & ser), p
        other = "ser" if copula == "estar" else "estar"
        assert [(t, q) for t in TENSES for q in PERSONS if conjugate(copula, t, q) == good.lower()
                and conjugate(other, t, q) == bad.lower()], p
        seen.add(copula)
    assert seen == {"ser", "estar"}


def test_clitic_pairs():
    kinds = set()
    for p in BY_PHENOMENON["clitic_se_lo"]:
        i, good, bad = diff(p)
        if good.lower() == "se":
            assert bad.lower() in ("le", "les") and p["good"].split()[i + 1].lower() in DIRECT_CLITICS, p
            kinds.add("proclitic")
        else:
            direct = next(d for d in DIRECT_CLITICS if good.endswith("se" + d))
            base = good[: -len("se" + direct)]
            assert bad in (base + "le" + direct, base + "les" + direct), p
            kinds.add("enclitic")
    assert kinds == {"proclitic", "enclitic"}


def test_enclitic_order_pairs_reverse_the_clitics_and_keep_the_accent():
    for p in BY_PHENOMENON["enclitic_order"]:
        _, good, bad = diff(p)
        found = [(io, do) for io in INDIRECT_CLITICS for do in DIRECT_CLITICS
                 if good.endswith(io + do) and bad == good[: -len(io + do)] + do + io]
        assert len(found) == 1, p
        base = good[: -len("".join(found[0]))]
        assert sum(ch in "áéí" for ch in base) == 1 and base.endswith(("r", "ndo")), p  # dár-, explicándo-
