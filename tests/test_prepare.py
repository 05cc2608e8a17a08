"""Corpus preparation CLI (enlace.prepare): cleaning report, hash split, shards that decode to the cleaned text, resume,
errors; Hugging Face datasets sources (saved folders, hf:NAME streaming, offline, missing column, missing package).
Issue 19, hostile users and machines: --out a file or read-only, a full disk (RLIMIT_FSIZE) while cleaning or writing
shards then a resume, a fake .parquet, corrupt shards rebuilt, no validation split, symlinked folders and loops, jsonl
text that is no string, a folder held by another process and the .lock it leaves."""
import ctypes
import errno
import json
import os
import resource
import shutil
import signal
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT
from enlace.corpus import Cleaner, doc_split, list_files
from enlace.prepare import format_report, main as prepare_main
from enlace.shards import data_tokenizer, open_shards, read_data_manifest, read_shard
from enlace.tokenizer import Tokenizer

CORPUS = ROOT.parent / "shared/corpus/es"
PARAS = [f"Párrafo {i}: el niño comió cerezas en la montaña, señor, ¿verdad? Y volvió a casa muy contento." for i in range(240)]
GUTENBERG_HEAD = "The Project Gutenberg eBook of X\r\n\r\nRelease date: 2020\r\n\r\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\r\n\r\n"
GUTENBERG_TAIL = "\r\n\r\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\r\n\r\nSection 1. General Terms of Use\r\n"


def run(*args, env=None, **kw):
    return subprocess.run([sys.executable, "-m", "enlace.prepare", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})}, **kw)


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
    opts = dict(train_vocab=300, val_per_mille=150, shard_tokens=800, min_chars=20, doc_chars=300, progress=False,
                log=lambda *a: None)  # documents of ~300 characters: a few go to validation
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


# --- hostile inputs and hostile machines (issue 19: case 8, and the folder lock of case 1) ---------------------
ARGS = ("--train-tokenizer", 300, "--val-per-mille", 150, "--shard-tokens", 800, "--workers", 2, "--min-chars", 20,
        "--no-progress")  # the settings of `prepared`: a run with them resumes its folder (or a copy of it)


def one_line_error(r, *words):
    "The run failed with exit 2 and one line on stderr holding every one of `words`; returns the line."
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and all(str(w) in lines[0] for w in words), (r.returncode, r.stderr)
    return lines[0]


def tree(folder):
    "Every file under a folder: relative path -> (bytes, mtime_ns)."
    files = [p for p in sorted(folder.rglob("*")) if p.is_file()]
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) for p in files}


def leftovers(folder):
    "Temporary files of interrupted atomic writes under a folder."
    return sorted(str(p.relative_to(folder)) for p in folder.rglob(".*.tmp"))


def copy_prepared(prepared, dst):
    shutil.copytree(prepared[0], dst)
    return dst


def test_out_naming_a_file_is_refused(corpus, tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("mine")
    one_line_error(run(corpus, "--out", f, *ARGS), f, "not a folder")
    one_line_error(run(corpus, "--out", f / "sub", *ARGS), f, "not a folder")
    assert f.read_text() == "mine"


def limit_file_size(n):
    "A preexec_fn: no file may grow past `n` bytes, so writes fail with EFBIG as on a full disk (SIGXFSZ ignored)."
    def pre():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
    return pre


def test_disk_full_while_cleaning_then_resume(prepared, corpus, tmp_path):
    out = tmp_path / "o"
    one_line_error(run(corpus, "--out", out, *ARGS, preexec_fn=limit_file_size(2000)), "disk full at", out / "clean")
    assert not (out / "clean" / "done.json").exists() and not (out / "manifest.json").exists() and not leftovers(out)
    r = run(corpus, "--out", out, *ARGS)
    assert r.returncode == 0, r.stderr
    assert shards(out) == shards(prepared[0])


def test_disk_full_while_writing_shards_then_resume(prepared, corpus, tmp_path):
    out = copy_prepared(prepared, tmp_path / "o")
    for n in ("train_000001", "train_000002"):
        (out / f"{n}.bin").unlink()
    r = run(corpus, "--out", out, *ARGS, preexec_fn=limit_file_size(1000))
    one_line_error(r, "disk full at", out / "train_000001.bin")
    assert not (out / "train_000001.bin").exists() and not leftovers(out)
    assert not (out / "manifest.json").exists()  # a folder with a manifest is complete, and this one is not
    r = run(corpus, "--out", out, *ARGS)
    assert r.returncode == 0 and "(2 tokenized," in r.stdout, r.stdout + r.stderr
    assert shards(out) == shards(prepared[0])


def as_plain_user():
    "A preexec_fn for root, whom mode bits do not stop: drop the capabilities that bypass them (CAP_DAC_OVERRIDE...)."
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2, 3):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, out of the bounding set before exec
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def test_read_only_out_is_one_line(tmp_path):
    "A folder the user may not write (mode 0o555), left as it was; a new folder inside it, likewise."
    src = tmp_path / "src.txt"
    src.write_text("\n\n".join(PARAS[:50]), encoding="utf-8")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    kw = {"preexec_fn": as_plain_user} if os.geteuid() == 0 else {}
    try:
        try:
            r = run(src, "--out", ro, *ARGS, **kw)
        except subprocess.SubprocessError as e:
            pytest.skip(f"root here cannot drop CAP_DAC_OVERRIDE: {e}")
        one_line_error(r, ro, "cannot write")
        one_line_error(run(src, "--out", ro / "sub", *ARGS, **kw), ro / "sub", "cannot write")
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o755)


def test_write_errors_of_any_kind_are_one_line(prepared, corpus, tmp_path, monkeypatch, capsys):
    "A read-only file system under a shard, and a non-OSError from a writer (the tokenizers library's own)."
    out = copy_prepared(prepared, tmp_path / "o")
    (out / "train_000001.bin").unlink()

    def read_only(path, *a, **k):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr("enlace.prepare.write_shard", read_only)
    assert prepare_main([str(corpus), "--out", str(out), *map(str, ARGS)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{out / 'train_000001.bin'}: cannot write (Read-only file system)" in err[0], err
    monkeypatch.undo()

    def full(self, *a, **k):
        raise Exception("No space left on device (os error 28)")

    monkeypatch.setattr(Tokenizer, "save", full)
    assert prepare_main([str(corpus), "--out", str(tmp_path / "o2"), *map(str, ARGS)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"disk full at {tmp_path / 'o2' / 'tokenizer'}" in err[0], err


def test_a_parquet_that_is_not_one(tmp_path):
    pytest.importorskip("pyarrow.parquet")
    bad = tmp_path / "x.parquet"
    bad.write_bytes(b"PAR1 this is not a parquet file \x00\x01\x02" * 10)
    one_line_error(run(bad, "--out", tmp_path / "o", *ARGS), bad, "not a Parquet file")
    nums = tmp_path / "nums.parquet"
    pd.DataFrame({"text": [1, 2, 3]}).to_parquet(nums)
    one_line_error(run(nums, "--out", tmp_path / "o", *ARGS), nums, "'text' column holds int64")


def test_a_corrupt_shard_is_rebuilt_not_reused(prepared, corpus, tmp_path):
    "A flipped byte, a valid shard in the place of another, an unreadable done mark: each rebuilt, in one line."
    out = copy_prepared(prepared, tmp_path / "o")
    f = out / "train_000001.bin"
    b = bytearray(f.read_bytes())
    b[100] ^= 0xFF
    f.write_bytes(bytes(b))
    shutil.copyfile(out / "train_000003.bin", out / "train_000002.bin")
    (out / "done" / "val_000000.json").write_text("{not json")
    r = run(corpus, "--out", out, *ARGS)
    assert r.returncode == 0, r.stderr
    assert "(3 tokenized," in r.stdout, r.stdout
    rebuilt = [l for l in r.stdout.splitlines() if l.startswith("verify: rebuilding")]
    names = [l.split(":")[1].strip() for l in rebuilt]
    assert names == [f"rebuilding {n}" for n in ("train_000001", "train_000002", "val_000000")], rebuilt
    assert "checksum mismatch" in rebuilt[0] and "unreadable done mark" in rebuilt[2], rebuilt
    assert shards(out) == shards(prepared[0])


def test_a_corpus_too_small_for_a_validation_split_is_refused(tmp_path):
    assert not any(doc_split(t, 10) == "val" for t in PARAS[:5])
    src = tmp_path / "few.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in PARAS[:5]), encoding="utf-8")
    opts = ("--train-tokenizer", 300, "--min-chars", 20, "--no-progress")
    r = run(src, "--out", tmp_path / "o", *opts)
    one_line_error(r, "5 documents", "validation", "about 100", "--val-per-mille")
    one_line_error(run(src, "--out", tmp_path / "o", *opts, "--val-per-mille", 0), "--val-per-mille", "validation")
    r = run(src, "--out", tmp_path / "o", *opts, "--val-per-mille", 1000)
    one_line_error(r, "all 5 documents went to validation")
    assert not (tmp_path / "o" / "clean" / "done.json").exists()  # other settings may be tried in the same folder


def test_symlinked_folders_are_followed_once(tmp_path):
    "A link to a folder elsewhere is read; links back to an ancestor, or a second way to a folder or file, are not."
    root, other = tmp_path / "c", tmp_path / "other"
    (root / "a").mkdir(parents=True)
    other.mkdir()
    (root / "a" / "x.txt").write_text("x")
    (other / "y.txt").write_text("y")
    (root / "b_link").symlink_to(root / "a")  # the same real folder a second time
    (root / "loop").symlink_to(root)  # an ancestor: must not recurse forever
    (root / "a" / "up").symlink_to("..")  # a relative one
    (root / "outside").symlink_to(other)  # a folder elsewhere: read
    (root / "z.txt").symlink_to(root / "a" / "x.txt")  # a file reached a second time
    (root / "gone").symlink_to(tmp_path / "nowhere")  # a broken link: nothing to read
    assert list_files([root]) == {str(root): [root / "a" / "x.txt", root / "outside" / "y.txt"]}


def test_jsonl_text_that_is_not_a_string_is_refused_and_counted(tmp_path):
    rows = [{"text": PARAS[0]}, {"text": {"a": 1}}, {"text": ["uno", "dos"]}, {"text": 3}, {"text": None},
            {"text": True}, {"text": PARAS[1]}]
    f = tmp_path / "mixed.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    c = Cleaner(min_chars=1)
    assert list(c.documents("s", f)) == [PARAS[0], PARAS[1]]
    assert c.report["s"]["dropped"]["not_text"]["count"] == 5
    assert "not_text=5" in format_report(c.report)


HOLD = ("import sys, time\n"
        "from enlace.common import own_folder\n"
        "with own_folder(sys.argv[1], 'prepare'):\n"
        "    print('held', flush=True)\n"
        "    time.sleep(120)\n")


def test_a_folder_in_use_is_refused(prepared, corpus, tmp_path):
    out = copy_prepared(prepared, tmp_path / "o")
    (out / "train_000001.bin").unlink()  # work to do: a run that ignored the lock would change the folder
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = tree(out)
        one_line_error(run(corpus, "--out", out, *ARGS), out, f"pid {holder.pid}")
        assert tree(out) == before
    finally:
        holder.kill()
        holder.wait()
    r = run(corpus, "--out", out, *ARGS)  # the holder gone, the folder is free again
    assert r.returncode == 0 and "(1 tokenized," in r.stdout, r.stdout + r.stderr


def test_the_lock_file_does_not_confuse_the_shard_folder(prepared, corpus):
    out = prepared[0]
    assert not (out / ".lock").exists()  # released and removed when prepare ended
    (out / ".lock").write_text("999999\n")  # what a killed prepare leaves: a file nobody holds
    m = read_data_manifest(out)
    assert ".lock" not in json.dumps(m) and set(m["shards"]) == {p.stem for p in out.glob("*.bin")}
    for split in ("train", "val"):
        assert len(open_shards(out, split)) == m["splits"][split]["shards"]
    assert data_tokenizer(out, m).sha256 == m["tokenizer_sha256"]
    r = run(corpus, "--out", out, *ARGS)  # a run into a folder with a .lock left behind resumes it
    assert r.returncode == 0 and "(0 tokenized," in r.stdout, r.stdout + r.stderr
