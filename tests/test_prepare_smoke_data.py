"""scripts/prepare_smoke_data.sh for real, on temporary folders only (--data-root): --from links a folder tree and holds out
Galdos_Tristana; the download path against a local HTTP mirror (--mirror, --list): unpinned books refused without --pin,
pinned with it, nothing downloaded twice, a hash mismatch keeps nothing, an unreachable mirror is the one-line offline error.
A tiny vocabulary (300) keeps the tokenizer step fast."""
import hashlib
import http.server
import os
import random
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import ROOT

SCRIPT = ROOT / "scripts/prepare_smoke_data.sh"
ENV = {**os.environ, "ENLACE_PYTHON": sys.executable}
PREP = ("--", "--no-progress", "--val-per-mille", "300")  # tiny corpora: enough for a validation split
WORDS = ("el niño la señora don Ramón doña Perfecta el cura la huerta Madrid la aldea el río las cerezas un café "
         "comió miró dijo volvió soñaba escribía cantaba pensó quería ¿verdad? ¡ay! mañana ayer despacio").split()


def sh(*args, cwd=ROOT, timeout=300):
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)], cwd=cwd, env=ENV, capture_output=True, text=True,
                          timeout=timeout)


def spanish(seed: int, paragraphs: int = 40) -> str:
    "Deterministic Spanish-ish prose: paragraphs of sentences drawn from WORDS."
    rng = random.Random(seed)
    def sentence(): return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))).capitalize() + "."
    return "\n\n".join(" ".join(sentence() for _ in range(rng.randint(3, 6))) for _ in range(paragraphs)) + "\n"


def one_line(r) -> str:
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


@pytest.fixture(autouse=True)
def real_data_untouched():
    "Nothing of this test may land in the repo's own data/ folders."
    paths = [ROOT / "data/raw/es", ROOT / "data/heldout", ROOT / "data/shards/es"]
    def state(): return [(str(p), sorted(os.listdir(p)) if p.is_dir() else None) for p in paths]
    before = state()
    yield
    assert state() == before


def test_from_links_holds_out_tristana_and_prepares(tmp_path):
    src = tmp_path / "corpus"
    files = {"novela-espanola/Galdos_Tristana-ne0005.txt": 1, "novela-espanola/Bazan_Pazos-ne0077.txt": 2,
             "cuentos-espanoles/Clarin_Pipa-ce0020.txt": 3, "cuentos-espanoles/sub/Miro_Huerto.txt": 4}
    for rel, seed in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(spanish(seed), encoding="utf-8")
    (src / "LEEME.md").write_text("no es texto del corpus")
    r = sh("--from", "corpus", "--data-root", "data", "--vocab", 300, *PREP, cwd=tmp_path)  # relative to the caller's folder
    assert r.returncode == 0, r.stderr
    raw, held, out = tmp_path / "data/raw/es", tmp_path / "data/heldout", tmp_path / "data/shards/es"
    assert sorted(p.name for p in raw.iterdir()) == ["cuentos-espanoles__Clarin_Pipa-ce0020.txt",
                                                     "cuentos-espanoles__sub__Miro_Huerto.txt",
                                                     "novela-espanola__Bazan_Pazos-ne0077.txt"]
    assert [p.name for p in held.iterdir()] == ["novela-espanola__Galdos_Tristana-ne0005.txt"]
    for p in [*raw.iterdir(), *held.iterdir()]:
        assert p.is_symlink() and Path(os.readlink(p)).is_absolute()  # linked, never copied
        assert p.resolve() == (src / p.name.replace("__", "/")).resolve()
    assert (out / "manifest.json").is_file() and (out / "tokenizer" / "tokenizer.json").is_file()
    assert "linked 3 files" in r.stdout and "1 held out" in r.stdout
    assert f"[data] shards: {out}" in r.stdout and "Galdos_Tristana" in r.stdout.splitlines()[-1]
    assert "clean " + str(raw) + ": 3 files" in r.stdout  # the held-out novel is not in the training sources

    again = sh("--from", src, "--data-root", tmp_path / "data", "--vocab", 300, *PREP)
    assert again.returncode == 0, again.stderr
    assert "clean: reusing" in again.stdout and "tokenizer: reusing" in again.stdout and "(0 tokenized," in again.stdout

    (src / "cuentos-espanoles/Clarin_Pipa-ce0020.txt").unlink()  # a stale link goes; a new --out prepares the new set
    third = sh("--from", src, "--data-root", tmp_path / "data", "--out", tmp_path / "out2", "--vocab", 300, *PREP)
    assert third.returncode == 0, third.stderr
    assert "removed 1 stale links" in third.stdout and len(list(raw.iterdir())) == 2


def test_from_twice_links_both_folders(tmp_path):
    "--from A --from B: the 123 MB corpus of the ten-minute benchmark is ../shared/corpus/es plus es-extra."
    for rel, seed in {"a/novela/Galdos_Tristana.txt": 1, "a/novela/Bazan.txt": 2, "b/conha19/nh0001.txt": 3}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(spanish(seed), encoding="utf-8")
    r = sh("--from", tmp_path / "a", "--from", tmp_path / "b", "--data-root", tmp_path / "data", "--vocab", 300, *PREP)
    assert r.returncode == 0, r.stderr
    raw = tmp_path / "data/raw/es"
    assert sorted(p.name for p in raw.iterdir()) == ["conha19__nh0001.txt", "novela__Bazan.txt"]
    assert [p.name for p in (tmp_path / "data/heldout").iterdir()] == ["novela__Galdos_Tristana.txt"]
    (tmp_path / "b/novela").mkdir()
    (tmp_path / "b/novela/Bazan.txt").write_text(spanish(4), encoding="utf-8")
    r = sh("--from", tmp_path / "a", "--from", tmp_path / "b", "--data-root", tmp_path / "data")
    assert r.returncode == 1 and "flatten to the same name novela__Bazan.txt" in one_line(r)


def test_from_errors(tmp_path):
    r = sh("--from", tmp_path / "missing", "--data-root", tmp_path / "data")
    assert r.returncode == 1 and "not a folder" in one_line(r)
    (tmp_path / "empty").mkdir()
    r = sh("--from", tmp_path / "empty", "--data-root", tmp_path / "data")
    assert r.returncode == 1 and "no .txt files" in one_line(r)


BOOKS = {11: ("Autora Uno", "Primera novela", "train"), 22: ("Autor Dos", "Segunda novela", "train"),
         33: ("Benito Pérez Galdós", "Novela reservada", "heldout")}


def book_text(gid: int) -> bytes:
    "A Gutenberg-style file: header, START marker, prose, END marker, licence; CRLF like the real ones."
    title = BOOKS[gid][1]
    body = (f"The Project Gutenberg eBook of {title}\n\nRelease date: 2020\n\n*** START OF THE PROJECT GUTENBERG EBOOK {title} ***\n\n"
            + spanish(gid, 60) + f"\n*** END OF THE PROJECT GUTENBERG EBOOK {title} ***\n\nSection 1. General Terms of Use\n")
    return body.replace("\n", "\r\n").encode()


@pytest.fixture
def mirror(tmp_path):
    "A local HTTP mirror serving /cache/epub/ID/pgID.txt; `requests` lists the paths asked for."
    root = tmp_path / "mirror"
    for gid in BOOKS:
        (root / f"cache/epub/{gid}").mkdir(parents=True)
        (root / f"cache/epub/{gid}/pg{gid}.txt").write_bytes(book_text(gid))
    requests = []
    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw): super().__init__(*a, directory=str(root), **kw)
        def do_GET(self): requests.append(self.path); super().do_GET()
        def log_message(self, *a): pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", requests
    server.shutdown(); server.server_close()


def write_list(path: Path, shas: dict) -> Path:
    rows = [f"{gid}\t{shas.get(gid, '-')}\t{split}\t{author}\t{title}" for gid, (author, title, split) in BOOKS.items()]
    path.write_text("# a test list\ngutenberg_id\tsha256\tsplit\tauthor\ttitle\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_download_pin_and_nothing_twice(mirror, tmp_path):
    url, requests = mirror
    tsv = write_list(tmp_path / "list.tsv", {})
    args = ("--mirror", url, "--list", tsv, "--data-root", tmp_path / "data", "--vocab", 300, *PREP)
    raw, held = tmp_path / "data/raw/es", tmp_path / "data/heldout"

    r = sh(*args)
    assert r.returncode == 1 and "3 books have no sha256 pinned yet" in one_line(r) and "--pin" in one_line(r)
    assert requests == [] and not list(raw.iterdir()) and not list(held.iterdir())

    r = sh("--pin", *args)
    assert r.returncode == 0, r.stderr
    assert sorted(requests) == [f"/cache/epub/{g}/pg{g}.txt" for g in sorted(BOOKS)]
    want = {g: hashlib.sha256(book_text(g)).hexdigest() for g in BOOKS}
    assert tsv.read_text(encoding="utf-8") == write_list(tmp_path / "expected.tsv", want).read_text(encoding="utf-8")
    assert sorted(p.name for p in raw.iterdir()) == ["AutorDos_SegundaNovela-pg22.txt", "AutoraUno_PrimeraNovela-pg11.txt"]
    assert [p.name for p in held.iterdir()] == ["BenitoPerezGaldos_NovelaReservada-pg33.txt"]
    assert (raw / "AutoraUno_PrimeraNovela-pg11.txt").read_bytes() == book_text(11)
    assert "pinned the sha256 of 3 books" in r.stdout and (tmp_path / "data/shards/es/manifest.json").is_file()
    assert "gutenberg_header=" in r.stdout and "gutenberg_licence=2" in r.stdout  # the cleaner strips both

    n = len(requests)
    r = sh(*args)
    assert r.returncode == 0, r.stderr
    assert len(requests) == n and "3 of 3 books already present, 0 downloaded" in r.stdout and "(0 tokenized," in r.stdout


def test_hash_mismatch_keeps_nothing(mirror, tmp_path):
    url, requests = mirror
    tsv = write_list(tmp_path / "list.tsv", {11: hashlib.sha256(book_text(11)).hexdigest(), 22: "0" * 64,
                                             33: hashlib.sha256(book_text(33)).hexdigest()})
    r = sh("--mirror", url, "--list", tsv, "--data-root", tmp_path / "data", "--vocab", 300)
    line = one_line(r)
    assert r.returncode == 1 and line.startswith("error: pg22 (Segunda novela): sha256 mismatch") and "nothing kept" in line
    files = [p.name for p in (tmp_path / "data").rglob("*") if p.is_file()]
    assert "AutoraUno_PrimeraNovela-pg11.txt" in files and not any("pg22" in f for f in files), files


def test_unreachable_mirror_is_the_offline_line(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    tsv = write_list(tmp_path / "list.tsv", {})
    r = sh("--mirror", f"http://127.0.0.1:{port}", "--list", tsv, "--data-root", tmp_path / "data")
    assert r.returncode == 1 and one_line(r) == (f"error: cannot reach 127.0.0.1:{port} (offline?); use --from DIR with a "
                                                 "local folder of .txt files (developers: --from ../shared/corpus/es)")


def test_bad_list_is_one_line(tmp_path):
    tsv = tmp_path / "bad.tsv"
    tsv.write_text("gutenberg_id\tsha256\tsplit\tauthor\ttitle\n2000\t-\ttest\tCervantes\tQuijote\n", encoding="utf-8")
    r = sh("--list", tsv, "--data-root", tmp_path / "data")
    assert r.returncode == 1 and "split must be train or heldout" in one_line(r) and f"{tsv}:2" in one_line(r)


def test_the_pinned_list():
    "configs/data/gutenberg-es.tsv: well formed, ids unique, exactly one held-out book, sha256 pinned or '-'."
    rows = [l.split("\t") for l in (ROOT / "configs/data/gutenberg-es.tsv").read_text(encoding="utf-8").splitlines()
            if l and not l.startswith("#")]
    assert rows[0] == ["gutenberg_id", "sha256", "split", "author", "title"]
    books = rows[1:]
    assert len(books) >= 10 and all(len(b) == 5 and b[0].isdigit() for b in books)
    assert len({b[0] for b in books}) == len(books)
    assert [b[2] for b in books].count("heldout") == 1 and {b[2] for b in books} == {"train", "heldout"}
    assert all(b[1] == "-" or (len(b[1]) == 64 and int(b[1], 16) >= 0) for b in books)
