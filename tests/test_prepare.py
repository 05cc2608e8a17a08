"""Corpus preparation CLI (enlace.prepare): cleaning report, hash split, shards that decode to the cleaned text, resume,
errors; Hugging Face datasets sources (saved folders, hf:NAME streaming, offline, missing column, missing package)."""
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT
from enlace.shards import read_shard
from enlace.tokenizer import Tokenizer

CORPUS = ROOT.parent / "shared/corpus/es"
PARAS = [f"Párrafo {i}: el niño comió cerezas en la montaña, señor, ¿verdad? Y volvió a casa muy contento." for i in range(240)]
GUTENBERG_HEAD = "The Project Gutenberg eBook of X\r\n\r\nRelease date: 2020\r\n\r\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\r\n\r\n"
GUTENBERG_TAIL = "\r\n\r\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\r\n\r\nSection 1. General Terms of Use\r\n"


def run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "enlace.prepare", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})


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
    tok, got = Tokenizer.load(out / "tokenizer"), {"train": [], "val": []}
    for name in m["shards"]:
        ids = np.asarray(read_shard(out / f"{name}.bin"))
        assert ids.dtype == np.uint16 and ids[-1] == m["eos_id"]
        cuts = np.flatnonzero(ids == m["eos_id"])
        starts = np.concatenate([[0], cuts[:-1] + 1])
        got[name.split("_")[0]] += [tok.decode(ids[a:b].tolist()) for a, b in zip(starts, cuts)]
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


def test_resume_sees_a_relative_and_an_absolute_path_as_one_source(corpus, tmp_path):
    "The same folder given once relative, once absolute resumes; a real change is refused naming what changed."
    from enlace.prepare import PrepareError, prepare
    opts = dict(train_vocab=300, val_per_mille=150, shard_tokens=800, min_chars=20, progress=False, log=lambda *a: None)
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("\n\n".join(PARAS[:60]), encoding="utf-8")
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        prepare(["src"], "out", **opts)
    finally:
        os.chdir(cwd)
    m = prepare([src.resolve()], tmp_path / "out", **opts)
    assert m["tokenized"] == [], "everything should have been reused"
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["tokenizer"] == "tokenizer"  # no cwd path
    (src / "b.txt").write_text("\n\n".join(PARAS[60:90]), encoding="utf-8")
    with pytest.raises(PrepareError, match=r"the inputs differ \(no longer: -, new: \[.*b\.txt'\]\)"):
        prepare([src], tmp_path / "out", **opts)
    with pytest.raises(PrepareError, match="val_per_mille was 150, now 10"):
        prepare([src], tmp_path / "out", **{**opts, "val_per_mille": 10})


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
    from enlace.corpus import Cleaner
    f = sorted(CORPUS.rglob("*.txt"))[0]
    docs = [d for _, d in zip(range(5), Cleaner().documents("es", f))]
    assert docs and all("\r" not in d for d in docs)


# --- Hugging Face datasets -------------------------------------------------------------------------------------
HUB_OFF = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
ROWS = [f"Fila {i}. La señora pidió café con leche y churros en la plaza mayor, ¿verdad? Sí, señor." for i in range(150)]
OPTS = ("--val-per-mille", 150, "--shard-tokens", 800, "--min-chars", 20, "--no-progress")


def shards(out):
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.bin"))}


@pytest.fixture(scope="module")
def hf(tmp_path_factory):
    "The same rows as a .jsonl, a saved DatasetDict (train split), a saved Dataset and a local data folder; shards of the jsonl."
    datasets = pytest.importorskip("datasets")
    datasets.disable_progress_bars()
    d = tmp_path_factory.mktemp("hf")
    rows = ROWS + [None]  # a null row is skipped, like in parquet
    (d / "local").mkdir()
    (d / "local" / "rows.jsonl").write_text("".join(json.dumps({"text": r}, ensure_ascii=False) + "\n" for r in ROWS), encoding="utf-8")
    ds = datasets.Dataset.from_dict({"id": list(range(len(rows))), "text": rows})
    datasets.DatasetDict({"train": ds, "test": ds.select(range(3))}).save_to_disk(str(d / "dd"))
    ds.save_to_disk(str(d / "ds"))
    datasets.Dataset.from_dict({"contenido": ROWS[:5]}).save_to_disk(str(d / "nocol"))
    r = run(d / "local" / "rows.jsonl", "--out", d / "ref", "--train-tokenizer", 300, *OPTS, env=HUB_OFF)
    assert r.returncode == 0, r.stderr
    return d


@pytest.mark.parametrize("source", ["dd@train", "ds", "hf:local"])
def test_datasets_give_the_same_shards_as_jsonl(hf, source):
    src = f"hf:{hf / 'local'}" if source.startswith("hf:") else f"{hf / source}"
    out = hf / f"out-{source.replace('@', '-').replace(':', '-')}"
    r = run(src, "--out", out, "--tokenizer", hf / "ref" / "tokenizer", *OPTS, env=HUB_OFF)
    assert r.returncode == 0, r.stderr
    assert shards(out) == shards(hf / "ref") and len(shards(out)) >= 3
    rep = json.loads((out / "report.json").read_text())[src]
    assert rep["kept_docs"] == len(ROWS) and rep["raw_bytes"] == sum(len(t.encode()) for t in ROWS)
    assert f"clean {src}: 1 files" in r.stdout
    again = run(src, "--out", out, "--tokenizer", hf / "ref" / "tokenizer", *OPTS, env=HUB_OFF)
    assert again.returncode == 0 and "clean: reusing" in again.stdout and "(0 tokenized," in again.stdout


def test_dataset_dict_reads_all_splits_and_resume_sees_changes(hf, tmp_path):
    import datasets
    r = run(hf / "dd", "--out", tmp_path / "o", "--tokenizer", hf / "ref" / "tokenizer", *OPTS, env=HUB_OFF)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "o" / "report.json").read_text())[str(hf / "dd")]["files"] == 2  # train and test
    changed = tmp_path / "dd2"
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ROWS[:100]})}).save_to_disk(str(changed))
    r = run(changed, "--out", tmp_path / "p", "--tokenizer", hf / "ref" / "tokenizer", *OPTS, env=HUB_OFF)
    assert r.returncode == 0, r.stderr
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ROWS[:90]})}).save_to_disk(str(changed))
    r = run(changed, "--out", tmp_path / "p", "--tokenizer", hf / "ref" / "tokenizer", *OPTS, env=HUB_OFF)
    assert r.returncode == 2 and "other sources or settings" in r.stderr


def test_dataset_errors(hf, tmp_path):
    cases = [(hf / "nocol", "no 'text' column (columns: contenido)"),
             (f"{hf / 'dd'}@validation", "no split 'validation'; the dataset has train, test"),
             (f"{hf / 'ds'}@train", "has no splits"),
             ("hf:", "expected hf:NAME[:CONFIG][@SPLIT]"),
             ("hf:wikimedia/wikipedia:20231101.es@train", "cannot reach the Hugging Face Hub (offline?)")]
    for src, msg in cases:
        r = run(src, "--out", tmp_path / "o", "--train-tokenizer", 300, "--no-progress", env=HUB_OFF)
        assert r.returncode == 2 and msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, (src, r.stderr)
        assert str(src).split("@")[0].split(":")[0] in r.stderr


class FakeStream:
    "Stands in for a streamed IterableDataset: rows as dicts; optionally the network drops after `fail_after` rows."
    def __init__(self, rows, column_names=("text",), fail_after=None):
        self.rows, self.column_names, self.fail_after = rows, list(column_names) if column_names else None, fail_after
    def __iter__(self):
        for i, r in enumerate(self.rows):
            if i == self.fail_after: raise ConnectionError("Read timed out")
            yield r


def test_hub_streaming_with_a_mocked_load_dataset(hf, tmp_path, monkeypatch):
    import datasets
    from enlace.prepare import PrepareError, prepare
    calls = []
    def fake(name, config=None, split=None, streaming=False, **kw):
        calls.append((name, config, split, streaming))
        if name == "org/offline": raise ConnectionError("Couldn't reach 'org/offline' on the Hub (LocalEntryNotFoundError)")
        if name == "org/drops": return FakeStream([{"text": t} for t in ROWS], fail_after=40)
        if name == "org/other": return FakeStream([{"body": t} for t in ROWS], column_names=None)
        return FakeStream([{"text": t, "id": i} for i, t in enumerate(ROWS)])
    monkeypatch.setattr(datasets, "load_dataset", fake)
    opts = dict(val_per_mille=150, shard_tokens=800, min_chars=20, progress=False, log=lambda *a: None)
    m = prepare(["hf:org/corpus:es@train"], tmp_path / "o", tokenizer=hf / "ref" / "tokenizer", **opts)
    assert calls[0] == ("org/corpus", "es", "train", True)
    assert shards(tmp_path / "o") == shards(hf / "ref") and m["raw_bytes"] == sum(len(t.encode()) for t in ROWS)
    fp = json.loads((tmp_path / "o" / "clean" / "done.json").read_text())["fingerprint"]["files"]
    assert fp == [["hf:org/corpus:es@train", "hub"]]
    for src, msg in [("hf:org/offline", "hf:org/offline: cannot reach the Hugging Face Hub (offline?)"),
                     ("hf:org/drops@train", "hf:org/drops@train: cannot reach the Hugging Face Hub (offline?)"),
                     ("hf:org/other", "hf:org/other@train: no 'text' column (columns: body)")]:
        with pytest.raises(PrepareError) as e: prepare([src], tmp_path / src.split("/")[1], train_vocab=300, **opts)
        assert msg in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_without_the_datasets_package():
    "enlace.prepare imports without datasets (or torch); a datasets source then says how to install it, in one line."
    code = ("import sys; sys.modules['datasets'] = None\n"
            "import enlace.prepare as p\n"
            "assert 'torch' not in sys.modules and 'datasets' not in [m for m in sys.modules if sys.modules[m]]\n"
            "raise SystemExit(p.main(['hf:org/corpus', '--out', '/nonexistent/o', '--train-tokenizer', '300']))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip() == (
        "prepare error: Hugging Face dataset sources need the `datasets` package: pip install -e .[datasets]"), r.stderr
