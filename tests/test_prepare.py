"Corpus preparation CLI (enlace.data.prepare): cleaning report, hash split, shards that decode to the cleaned text, resume, errors."
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT
from enlace.data.loader import read_shard
from enlace.tokenizer.bpe import load

CORPUS = ROOT.parent / "shared/corpus/es"
PARAS = [f"Párrafo {i}: el niño comió cerezas en la montaña, señor, ¿verdad? Y volvió a casa muy contento." for i in range(240)]
GUTENBERG_HEAD = "The Project Gutenberg eBook of X\r\n\r\nRelease date: 2020\r\n\r\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\r\n\r\n"
GUTENBERG_TAIL = "\r\n\r\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\r\n\r\nSection 1. General Terms of Use\r\n"


def run(*args):
    return subprocess.run([sys.executable, "-m", "enlace.data.prepare", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    "A txt with a Gutenberg header, CRLF and a control char; a jsonl; a parquet; 30 duplicated paragraphs."
    d = tmp_path_factory.mktemp("corpus")
    body = "\r\n\r\n".join(PARAS[:100]).replace("Párrafo 5:", "Párrafo\x07 5:")
    (d / "book.txt").write_bytes((GUTENBERG_HEAD + body + GUTENBERG_TAIL).encode())
    (d / "web.jsonl").write_text("".join(json.dumps({"text": p}) + "\n" for p in PARAS[100:180] + PARAS[:20]), encoding="utf-8")
    pd.DataFrame({"text": PARAS[180:] + PARAS[100:110] + ["corto"]}).to_parquet(d / "rows.parquet", row_group_size=16)
    return d


@pytest.fixture(scope="module")
def prepared(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("out") / "p"
    r = run(corpus, "--out", out, "--train-tokenizer", 300, "--val-per-mille", 150, "--shard-tokens", 800,
            "--workers", 2, "--min-chars", 20, "--no-progress")
    assert r.returncode == 0, r.stderr
    return out, r


def docs_of(out):
    m = json.loads((out / "manifest.json").read_text())
    tok, got = load(out / "tokenizer"), {"train": [], "val": []}
    for name in m["shards"]:
        ids = np.asarray(read_shard(out / f"{name}.bin"))
        assert ids.dtype == np.uint16 and ids[-1] == m["eos_id"]
        cuts = np.flatnonzero(ids == m["eos_id"])
        starts = np.concatenate([[0], cuts[:-1] + 1])
        got[name.split("_")[0]] += [tok.decode(ids[a:b].tolist(), skip_special_tokens=False) for a, b in zip(starts, cuts)]
    return m, got


def test_report(prepared, corpus):
    out, r = prepared
    rep = json.loads((out / "report.json").read_text())[str(corpus)]
    assert rep["files"] == 3 and rep["control_chars_removed"] == 1
    assert rep["dropped"]["duplicate_paragraph"]["count"] == 30
    assert rep["dropped"]["too_short"]["count"] == 1
    assert rep["dropped"]["gutenberg_header"]["count"] > 0 and rep["dropped"]["gutenberg_licence"]["count"] == 1
    assert "duplicate_paragraph=30" in r.stdout and r.stdout.strip().splitlines()[-1].endswith("MB/s")


def test_shards_decode_to_clean_text(prepared):
    m, got = docs_of(prepared[0])
    assert got["train"] and got["val"] and not set(got["train"]) & set(got["val"])
    assert sorted(p for g in got.values() for doc in g for p in doc.split("\n\n")) == sorted(PARAS)
    assert not any("\r" in d or "\x07" in d or "Gutenberg" in d for g in got.values() for d in g)
    assert m["bytes_per_token"] == pytest.approx(m["bytes"] / m["tokens"]) and len(m["tokenizer_sha256"]) == 64
    assert m["splits"]["train"]["shards"] >= 2


def test_resume_redoes_only_missing_shard(prepared, corpus):
    out = prepared[0]
    m0 = json.loads((out / "manifest.json").read_text())
    (out / "train_000001.bin").unlink()
    r = run(corpus, "--out", out, "--train-tokenizer", 300, "--val-per-mille", 150, "--shard-tokens", 800,
            "--workers", 2, "--min-chars", 20, "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "(1 tokenized," in r.stdout and "reusing" in r.stdout
    assert json.loads((out / "manifest.json").read_text())["shards"] == m0["shards"]


def test_errors(tmp_path, corpus):
    (tmp_path / "x.csv").write_text("a")
    (tmp_path / "empty.txt").write_text("\n\n")
    bad_tok = tmp_path / "nottok"; bad_tok.mkdir()
    cases = [((tmp_path / "missing", "--train-tokenizer", 300), "no such file"),
             ((tmp_path / "x.csv", "--train-tokenizer", 300), "unknown extension"),
             ((tmp_path / "empty.txt", "--train-tokenizer", 300), "empty corpus"),
             ((corpus, "--tokenizer", bad_tok), "manifest")]
    for args, msg in cases:
        r = run(*args, "--out", tmp_path / "o", "--no-progress")
        assert r.returncode == 2 and msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)


@pytest.mark.skipif(not CORPUS.is_dir(), reason="dev corpus not present")
def test_real_corpus_reader_smoke():
    from enlace.data.prepare import Cleaner
    f = sorted(CORPUS.rglob("*.txt"))[0]
    docs = [d for _, d in zip(range(5), Cleaner().documents("es", f))]
    assert docs and all("\r" not in d for d in docs)
