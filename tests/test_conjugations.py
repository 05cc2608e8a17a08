"""Tests for the embedded English-Spanish conjugation corpus (enlace.tasks.conjugations.corpus)."""
import json
import subprocess
import sys
import unicodedata
from collections import Counter, defaultdict

import pytest

from enlace.tasks.conjugations.corpus import (PERSONS, TENSES, VERBS, conjugate, english, english_predicate, examples,
                                      main, spanish, combo_split, verb_classes)

EXPORT_KEYS = {"infinitive", "tense", "person", "split", "english", "spanish", "form"}


def _export(path):
    "Run the CLI in a fresh interpreter, as a user would."
    return subprocess.run([sys.executable, "-m", "enlace.tasks.conjugations.corpus", "--export", str(path)],
                          capture_output=True, text=True, encoding="utf-8", timeout=120)


# --- CLI -------------------------------------------------------------------------------------------------------------

def test_cli_export_keys_counts_and_determinism(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    ra, rb = _export(a), _export(b)
    assert ra.returncode == 0 and rb.returncode == 0, ra.stderr + rb.stderr
    assert a.read_bytes() == b.read_bytes(), "two exports differ"
    out = ra.stdout.strip().splitlines()
    assert len(out) == 1 and "examples" in out[0] and "verbs" in out[0] and "held-out" in out[0], ra.stdout
    rows = [json.loads(line) for line in a.read_text(encoding="utf-8").splitlines()]
    assert all(set(r) == EXPORT_KEYS for r in rows)
    assert len(rows) == len(VERBS) * len(TENSES) * len(PERSONS)
    assert str(len(rows)) in out[0] and str(len(VERBS)) in out[0]
    assert str(sum(r["split"] == "heldout" for r in rows)) in out[0]
    assert "comerán" in a.read_text(encoding="utf-8"), "ensure_ascii must be off"
    row = next(r for r in rows if (r["infinitive"], r["tense"], r["person"]) == ("comer", "futuro", "yo"))
    assert row["english"] == "I will eat" and row["spanish"] == "yo comeré" and row["form"] == "comeré"


def test_cli_bad_arguments_exit_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "enlace.tasks.conjugations.corpus", "--no-such-flag"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "usage" in r.stderr.lower()
    r = subprocess.run([sys.executable, "-m", "enlace.tasks.conjugations.corpus", "--export"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2


def test_cli_unwritable_path_exit_1(tmp_path):
    target = tmp_path / "missing" / "dir" / "out.jsonl"
    r = _export(target)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert str(target) in r.stderr
    assert main(["--export", str(tmp_path)]) == 1  # a directory is not writable as a file either


def test_cli_without_export_prints_summary_and_samples(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "examples" in out[0] and len(out) >= 3 and all(" | es: " in line for line in out[1:])


# --- tables and counts -----------------------------------------------------------------------------------------------

def test_counts():
    assert len(VERBS) >= 200
    irregular = [v for v in VERBS if verb_classes(v)]
    assert len(irregular) >= 40
    labels = Counter(label for v in VERBS for label in verb_classes(v))
    for label in ["irregular", "e>ie", "o>ue", "u>ue", "e>i", "i>ie", "c>zc", "-ducir", "c>qu", "g>gu", "z>c", "g>j",
                  "gu>g", "gu>gü", "c>z", "i>y", "i>í", "u>ú"]:
        assert labels[label] >= 1, label
    assert TENSES == ("presente", "preterito_indefinido", "imperfecto", "futuro", "condicional", "presente_subjuntivo")
    assert PERSONS == ("yo", "tú", "él/ella/usted", "nosotros", "vosotros", "ellos/ellas/ustedes")
    combos = Counter((e["tense"], e["person"]) for e in examples())
    assert len(combos) == 36 and set(combos.values()) == {len(VERBS)}


def test_everything_is_nfc_and_deterministic():
    ex = examples()
    assert ex == examples()
    for e in ex:
        for k, v in e.items():
            assert unicodedata.is_normalized("NFC", v), (k, v)
    for inf in VERBS: assert unicodedata.is_normalized("NFC", inf)


def test_example_fields_are_consistent():
    for e in examples():
        assert e["line"] == f"en: {e['english']} | es: {e['spanish']}"
        assert e["spanish"].endswith(" " + e["form"])
        assert e["form"] == conjugate(e["infinitive"], e["tense"], e["person"])
        assert e["english"] == english(e["infinitive"], e["tense"], e["person"])
        assert e["spanish"] == spanish(e["infinitive"], e["tense"], e["person"])
        assert e["split"] in ("train", "heldout")
        assert e["spanish"].startswith("que ") == (e["tense"] == "presente_subjuntivo") == e["english"].startswith("that ")


def test_pronouns_recover_the_person():
    es_of = {"I": "yo", "you": "tú", "he": "él", "she": "ella", "you (formal)": "usted", "we": "nosotros",
             "you all": "vosotros", "they": "ellos", "they (f)": "ellas", "you all (formal)": "ustedes"}
    person_of = {"yo": "yo", "tú": "tú", "él": "él/ella/usted", "ella": "él/ella/usted", "usted": "él/ella/usted",
                 "nosotros": "nosotros", "vosotros": "vosotros", "ellos": "ellos/ellas/ustedes",
                 "ellas": "ellos/ellas/ustedes", "ustedes": "ellos/ellas/ustedes"}
    seen = set()
    for e in examples():
        en = e["english"].removeprefix("that ")
        es = e["spanish"].removeprefix("que ")
        subject = max((p for p in es_of if en.startswith(p + " ")), key=len)
        assert es.startswith(es_of[subject] + " "), (en, es)
        assert person_of[es_of[subject]] == e["person"]
        seen.add(es_of[subject])
    assert seen == set(es_of.values())


# --- uniqueness and split --------------------------------------------------------------------------------------------

def test_english_line_determines_spanish_line():
    spanish_of = defaultdict(set)
    for e in examples(): spanish_of[e["english"]].add(e["spanish"])
    clashes = {en: es for en, es in spanish_of.items() if len(es) > 1}
    assert not clashes, list(clashes.items())[:5]
    glosses = [g for g, _, _ in VERBS.values()]
    assert len(glosses) == len(set(glosses))


def test_heldout_split():
    ex = examples()
    held = [e for e in ex if e["split"] == "heldout"]
    assert 0.08 <= len(held) / len(ex) <= 0.12
    train = [e for e in ex if e["split"] == "train"]
    for key in ("infinitive", "tense", "person"):
        assert {e[key] for e in held} <= {e[key] for e in train}, key
    # each held-out triple's verb, tense and person appear in train in *other* combinations
    train_vt = {(e["infinitive"], e["tense"]) for e in train}
    train_vp = {(e["infinitive"], e["person"]) for e in train}
    train_tp = {(e["tense"], e["person"]) for e in train}
    for e in held:
        assert (e["infinitive"], e["tense"]) in train_vt or (e["infinitive"], e["person"]) in train_vp
        assert (e["tense"], e["person"]) in train_tp
    assert all(e["split"] == combo_split(e["infinitive"], e["tense"], e["person"]) for e in ex)
    # triples are the unit of the split: one example per triple
    assert len({(e["infinitive"], e["tense"], e["person"]) for e in ex}) == len(ex)


# --- errors ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, bad, choice", [
    (("comerr", "presente", "yo"), "comerr", "comer"),
    (("comer", "pluscuamperfecto", "yo"), "pluscuamperfecto", "presente_subjuntivo"),
    (("comer", "presente", "ustedes"), "ustedes", "ellos/ellas/ustedes"),
])
def test_conjugate_rejects_unknown_values(args, bad, choice):
    with pytest.raises(ValueError) as err: conjugate(*args)
    assert bad in str(err.value) and choice in str(err.value)


# --- English forms ---------------------------------------------------------------------------------------------------

ENGLISH = [  # (infinitive, tense, subject, predicate)
    ("ir", "presente", "he", "goes"), ("hacer", "presente", "she", "does"), ("tener", "presente", "he", "has"),
    ("arreglar", "presente", "she", "fixes"), ("intentar", "presente", "he", "tries"), ("jugar", "presente", "he", "plays"),
    ("estudiar", "presente", "she", "studies"), ("tocar", "presente", "he", "touches"), ("lavar", "presente", "he", "washes"),
    ("pagar", "presente", "he", "pays"), ("llorar", "presente", "she", "cries"), ("buscar", "presente", "he", "looks for"),
    ("almorzar", "presente", "she", "has lunch"), ("comer", "presente", "you (formal)", "eat"),
    ("ser", "presente", "I", "am"), ("ser", "presente", "he", "is"), ("ser", "presente", "we", "are"),
    ("ser", "preterito_indefinido", "I", "was"), ("ser", "preterito_indefinido", "you all", "were"),
    ("estar", "presente", "they", "are (located)"), ("poder", "preterito_indefinido", "she", "was able to"),
    ("comer", "preterito_indefinido", "I", "ate"), ("ir", "preterito_indefinido", "we", "went"),
    ("ver", "preterito_indefinido", "he", "saw"), ("hacer", "preterito_indefinido", "they", "did"),
    ("correr", "preterito_indefinido", "I", "ran"), ("traer", "preterito_indefinido", "I", "brought"),
    ("pensar", "preterito_indefinido", "I", "thought"), ("estudiar", "preterito_indefinido", "I", "studied"),
    ("jugar", "preterito_indefinido", "I", "played"), ("parar", "preterito_indefinido", "I", "stopped"),
    ("preferir", "preterito_indefinido", "I", "preferred"), ("usar", "preterito_indefinido", "I", "used"),
    ("poner", "preterito_indefinido", "I", "put (past)"), ("leer", "preterito_indefinido", "she", "read (past)"),
    ("comer", "imperfecto", "I", "used to eat"), ("ser", "imperfecto", "they", "used to be"),
    ("comer", "futuro", "they", "will eat"), ("comer", "condicional", "we", "would eat"),
    ("comer", "presente_subjuntivo", "he", "eat"), ("ser", "presente_subjuntivo", "I", "be"),
]


@pytest.mark.parametrize("inf, tense, subject, expected", ENGLISH)
def test_english_predicates(inf, tense, subject, expected):
    assert english_predicate(inf, tense, subject) == expected


def test_english_sides():
    assert english("comer", "futuro", "yo") == "I will eat"
    assert english("comer", "presente_subjuntivo", "yo") == "that I eat"
    assert english("ser", "presente_subjuntivo", "tú") == "that you be"
    assert english("hablar", "presente", "vosotros") == "you all speak"
    assert spanish("comer", "presente_subjuntivo", "tú") == "que tú comas"
    assert spanish("comer", "futuro", "nosotros") == "nosotros comeremos"
    assert english("ser", "presente", "yo") != english("estar", "presente", "yo")


# --- hand-verified Spanish forms (written independently of the generator) --------------------------------------------
# tense: P presente, PI pretérito indefinido, IM imperfecto, F futuro, C condicional, S presente de subjuntivo
# person: 1s yo, 2s tú, 3s él/ella/usted, 1p nosotros, 2p vosotros, 3p ellos/ellas/ustedes

SPOT_CHECKS = """
ser P 1s soy | ser P 2s eres | ser P 2p sois | ser PI 3s fue | ser PI 1s fui | ser IM 1p éramos | ser IM 2p erais
ser S 2p seáis | ser F 3p serán | ser C 1s sería
estar P 2s estás | estar P 3p están | estar PI 1s estuve | estar PI 3p estuvieron | estar S 1s esté | estar S 2p estéis
estar S 1p estemos | estar IM 3s estaba
ir P 1s voy | ir P 2p vais | ir PI 3s fue | ir PI 2s fuiste | ir IM 1p íbamos | ir IM 2p ibais | ir S 1p vayamos
ir F 1s iré | ir C 3p irían
tener P 1s tengo | tener P 2s tienes | tener P 1p tenemos | tener PI 3s tuvo | tener F 1s tendré | tener C 2p tendríais
tener S 2s tengas
hacer P 1s hago | hacer PI 1s hice | hacer PI 3s hizo | hacer PI 3p hicieron | hacer F 3s hará | hacer C 1s haría
hacer S 1p hagamos
poder P 3s puede | poder P 2p podéis | poder PI 1s pude | poder F 1p podremos | poder S 3p puedan | poder S 1p podamos
decir P 1s digo | decir P 3s dice | decir P 2p decís | decir PI 3p dijeron | decir PI 2s dijiste | decir F 2s dirás
decir S 3s diga | decir C 1p diríamos
poner P 1s pongo | poner PI 3s puso | poner F 3p pondrán | poner S 1s ponga
venir P 2s vienes | venir P 2p venís | venir PI 1s vine | venir PI 3s vino | venir F 1s vendré | venir S 2p vengáis
saber P 1s sé | saber PI 3s supo | saber F 1s sabré | saber S 1s sepa | saber S 2p sepáis
querer P 1s quiero | querer P 1p queremos | querer PI 1s quise | querer PI 3s quiso | querer F 3s querrá
querer C 1s querría | querer S 1p queramos
dar P 1s doy | dar P 2p dais | dar PI 1s di | dar PI 3s dio | dar PI 3p dieron | dar S 1s dé | dar S 3s dé | dar S 2s des
dar S 2p deis
ver P 1s veo | ver P 2p veis | ver PI 1s vi | ver PI 3s vio | ver IM 1s veía | ver IM 1p veíamos | ver S 1s vea
salir P 1s salgo | salir F 1s saldré | salir C 3p saldrían | salir S 2s salgas | salir PI 3s salió
traer P 1s traigo | traer PI 1s traje | traer PI 3p trajeron | traer S 3s traiga | traer IM 3s traía
oír P 1s oigo | oír P 2s oyes | oír P 1p oímos | oír P 2p oís | oír P 3p oyen | oír PI 2s oíste | oír PI 3s oyó
oír PI 3p oyeron | oír F 1s oiré | oír S 1p oigamos | oír IM 1s oía
caer P 1s caigo | caer P 2p caéis | caer PI 3s cayó | caer PI 2s caíste | caer PI 1p caímos | caer S 3p caigan
conducir P 1s conduzco | conducir PI 1s conduje | conducir PI 3p condujeron | conducir S 1p conduzcamos
conducir F 1s conduciré | traducir PI 3s tradujo | traducir P 1s traduzco | producir PI 3p produjeron
conocer P 1s conozco | conocer S 2s conozcas | conocer PI 1s conocí | ofrecer P 1s ofrezco | ofrecer S 1p ofrezcamos
parecer S 3s parezca | nacer P 1s nazco
construir P 1s construyo | construir P 1p construimos | construir P 2p construís | construir P 3p construyen
construir PI 3s construyó | construir PI 2s construiste | construir PI 1s construí | construir S 1s construya
destruir PI 3p destruyeron | destruir S 2p destruyáis | incluir P 3s incluye
huir P 1s huyo | huir P 2p huis | huir P 1p huimos | huir PI 1s hui | huir PI 3s huyó | huir S 1s huya
leer PI 3s leyó | leer PI 2s leíste | leer PI 1p leímos | leer PI 2p leísteis | leer PI 3p leyeron | leer P 2p leéis
creer PI 3s creyó | creer PI 1s creí
pedir P 1s pido | pedir P 1p pedimos | pedir PI 3s pidió | pedir S 1p pidamos | servir PI 3p sirvieron | servir P 2s sirves
repetir P 3s repite | repetir PI 3s repitió
seguir P 1s sigo | seguir P 2s sigues | seguir PI 3s siguió | seguir S 1s siga | seguir S 1p sigamos | vestir P 1s visto
elegir P 1s elijo | elegir P 2s eliges | elegir S 3s elija | elegir PI 3s eligió
corregir P 1s corrijo | corregir PI 3p corrigieron
dormir P 1s duermo | dormir P 1p dormimos | dormir PI 3s durmió | dormir PI 3p durmieron | dormir S 1p durmamos
dormir S 3s duerma | morir PI 3s murió | morir S 2p muráis | morir P 3p mueren
sentir P 1s siento | sentir PI 3s sintió | sentir S 1p sintamos | preferir P 3s prefiere | preferir PI 3p prefirieron
mentir P 1s miento | mentir PI 3s mintió
pensar P 1s pienso | pensar P 1p pensamos | pensar P 2p pensáis | pensar S 2p penséis | pensar S 3p piensen
cerrar P 3s cierra | cerrar S 1s cierre
empezar P 1s empiezo | empezar PI 1s empecé | empezar S 3s empiece | empezar S 1p empecemos
comenzar PI 1s comencé | comenzar P 3p comienzan | entender P 1s entiendo | entender S 1p entendamos | perder P 3s pierde
contar P 1s cuento | contar S 1p contemos | encontrar P 3p encuentran
volver P 1s vuelvo | volver P 1p volvemos | volver S 3s vuelva | mover P 2s mueves
almorzar P 1s almuerzo | almorzar PI 1s almorcé | almorzar S 3s almuerce | almorzar S 1p almorcemos
recordar P 3s recuerda | mostrar P 1s muestro
jugar P 1s juego | jugar P 1p jugamos | jugar PI 1s jugué | jugar S 3s juegue | jugar S 1p juguemos | jugar S 2p juguéis
buscar PI 1s busqué | buscar S 3s busque | buscar PI 3s buscó | tocar PI 1s toqué | tocar S 3p toquen | sacar S 1s saque
llegar PI 1s llegué | llegar S 1p lleguemos | pagar PI 1s pagué | pagar S 2s pagues
coger P 1s cojo | coger S 3s coja | escoger P 1s escojo | recoger S 1p recojamos | proteger P 1s protejo
dirigir P 1s dirijo | dirigir S 2s dirijas | exigir P 1s exijo
enviar P 1s envío | enviar P 1p enviamos | enviar P 2p enviáis | enviar S 3s envíe | enviar PI 3s envió
continuar P 1s continúo | continuar P 3p continúan | continuar S 2s continúes | continuar S 1p continuemos
andar PI 1s anduve | andar PI 3p anduvieron | averiguar PI 1s averigüé | averiguar S 3s averigüe
distinguir P 1s distingo | vencer P 1s venzo | vencer S 3s venza
oler P 1s huelo | oler P 1p olemos | oler S 3s huela | adquirir P 1s adquiero | adquirir S 1p adquiramos
prohibir P 1s prohíbo | prohibir P 1p prohibimos | reunir P 3s reúne | torcer P 1s tuerzo | torcer S 1p torzamos
mantener P 3s mantiene | mantener PI 1s mantuve | mantener F 1s mantendré | proponer PI 3s propuso
deshacer PI 3s deshizo | intervenir PI 3s intervino | atraer PI 3p atrajeron
caber P 1s quepo | caber PI 3s cupo | caber F 1s cabré | caber S 1s quepa | valer P 1s valgo | valer F 3s valdrá
hablar P 2p habláis | hablar PI 1s hablé | hablar PI 3s habló | hablar IM 1p hablábamos | hablar IM 2p hablabais
hablar S 2p habléis | comer P 2p coméis | comer PI 1s comí | comer PI 3s comió | comer F 3p comerán
comer C 1p comeríamos | comer S 2s comas | vivir P 2p vivís | vivir PI 2p vivisteis | vivir IM 2p vivíais
vivir F 2p viviréis | estudiar P 3s estudia | esquiar P 1s esquío | actuar P 3s actúa
"""
_TENSE = {"P": "presente", "PI": "preterito_indefinido", "IM": "imperfecto", "F": "futuro", "C": "condicional",
          "S": "presente_subjuntivo"}
_PERSON = dict(zip(["1s", "2s", "3s", "1p", "2p", "3p"], PERSONS))
SPOT = [tuple(item.split()) for line in SPOT_CHECKS.strip().splitlines() for item in line.split("|")]


def test_spot_check_table_is_large_and_broad():
    assert len(SPOT) >= 150 and len(set(SPOT)) == len(SPOT)
    assert {t for _, t, _, _ in SPOT} == set(_TENSE) and {p for _, _, p, _ in SPOT} == set(_PERSON)
    assert len({inf for inf, *_ in SPOT if verb_classes(inf)}) >= 60


@pytest.mark.parametrize("inf, tense, person, form", SPOT, ids=["-".join(s) for s in SPOT])
def test_spot_checks(inf, tense, person, form):
    assert conjugate(inf, _TENSE[tense], _PERSON[person]) == form
