"Tokenizer (enlace.tokenizer) and its fertility CLI: exact inverse, specials, manifest checks, vocab bound, CLI errors."
import json
import random
import time

import pytest

from conftest import ROOT
from enlace.tokenizer import (END, SPECIAL_TOKENS, USER, Tokenizer, TokenizerError, fertility, iter_files, random_text,
                              read_manifest, roundtrip, train_tokenizer)

CORPUS = ROOT.parent / "shared/corpus/es"
SAMPLE = ["¿Dónde está el pingüino? ¡En la montaña, señor!", "El niño comió 1887 cerezas en año y medio.",
          "Muchas gracias, dijo la señora; «así sea», contestó él.", "Pero\u0301 ñandú — ¡qué cosa! 😀"] * 40


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(SAMPLE, vocab_size=500)


@pytest.fixture(scope="module")
def tok_dir(tok, tmp_path_factory):
    return tok.save(tmp_path_factory.mktemp("tok") / "t", corpus_hash="sample")


def test_roundtrip_property(tok):
    rng = random.Random(1234)
    cases = [random_text(rng, 60) for _ in range(500)]
    cases += ["", " ", "\n", "\x00", "e\u0301", "A\u030a", "\ufeff¿Qué?", "<|bos|>x<|eos|>", "<|bo", "\U0010ffff", "  \t\n\r\n "]
    bad = [c for c in cases if not roundtrip(tok, c)]
    assert not bad, f"{len(bad)} strings do not round-trip, first: {bad[0]!r}"


def test_no_normalizer_keeps_non_nfc(tok):
    s = "Espan\u0303a"  # decomposed ñ: kept as is, NFC is the cleaning step's job
    assert tok.decode(tok.encode(s)) == s


def test_specials(tok):
    n = len(SPECIAL_TOKENS)
    assert [tok.special(s) for s in SPECIAL_TOKENS] == list(range(n)) and n == 11
    ids = tok.encode("<|user|>hola<|end|>")
    assert ids[0] == tok.special(USER) == 4 and ids[-1] == tok.special(END) == 6
    assert all(i >= n for i in tok.encode("bos eos pad tool_call"))


def test_vocab_bound():
    with pytest.raises(ValueError, match="uint16"):
        train_tokenizer(SAMPLE, vocab_size=65536)
    with pytest.raises(ValueError, match="below"):
        train_tokenizer(SAMPLE, vocab_size=200)


def test_manifest_and_load(tok, tok_dir):
    m = read_manifest(tok_dir)
    assert m["vocab_size"] == tok.vocab_size <= 500
    assert m["special_tokens"] == {s: i for i, s in enumerate(SPECIAL_TOKENS)}
    assert m["corpus_hash"] == "sample" and m["settings"]["normalizer"] is None and len(m["tokenizer_sha256"]) == 64
    assert Tokenizer.load(tok_dir).encode(SAMPLE[0]) == tok.encode(SAMPLE[0])


def test_load_rejects_modified_file(tok, tmp_path):
    d = tok.save(tmp_path / "t", corpus_hash="sample")
    data = json.loads((d / "tokenizer.json").read_text(encoding="utf-8"))
    data["model"]["vocab"]["xyz"] = 499  # a tampered vocabulary
    (d / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"tokenizer\.json: sha256") as e:
        Tokenizer.load(d)
    assert "\n" not in str(e.value)
    (d / "manifest.json").unlink()
    with pytest.raises(TokenizerError, match="missing manifest"):
        Tokenizer.load(d)


def test_fertility_counts(tok):
    f = fertility(tok, ["uno dos  tres", "cuatro\n"])
    assert f["words"] == 4 and f["bytes"] == len("uno dos  trescuatro\n") and f["tokens"] >= 4
    assert f["tokens_per_word"] == f["tokens"] / 4 and f["bytes_per_token"] == f["bytes"] / f["tokens"]


def test_cli(cli, tok_dir, tmp_path):
    txt = tmp_path / "a.txt"
    txt.write_text("¿Dónde está el pingüino?\n", encoding="utf-8")
    r = cli("enlace.tokenizer", "--tokenizer", tok_dir, txt)
    assert r.returncode == 0, r.stderr
    assert "tokens/word=" in r.stdout and "bytes/token=" in r.stdout and "words=4" in r.stdout


def test_cli_errors(cli, tok_dir, tmp_path):
    txt = tmp_path / "a.txt"
    txt.write_text("hola\n", encoding="utf-8")
    r = cli("enlace.tokenizer", "--tokenizer", tok_dir, tmp_path / "missing.txt")
    assert r.returncode == 2 and r.stderr.strip().endswith("missing.txt: no such file") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = cli("enlace.tokenizer", "--tokenizer", tmp_path / "nodir", txt)
    assert r.returncode == 2 and "nodir: not a tokenizer directory" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"shared corpus not found at {CORPUS}")
def test_fertility_on_shared_corpus():
    "Train a 4k tokenizer on a few MB of short stories; a held-out Galdós novel must get a sane fertility."
    held = CORPUS / "novela-espanola/Galdos_Tristana-ne0005.txt"
    files = sorted((CORPUS / "cuentos-espanoles").glob("*.txt"))
    t0 = time.time()
    tok = train_tokenizer(iter_files(files), vocab_size=4096)
    f = fertility(tok, iter_files([held]))
    assert time.time() - t0 < 60
    assert 1.2 < f["tokens_per_word"] < 1.9 and 3.0 < f["bytes_per_token"] < 5.5, f
    sample = next(iter_files([held]))
    assert roundtrip(tok, sample)
