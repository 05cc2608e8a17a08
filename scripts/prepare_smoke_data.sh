#!/usr/bin/env bash
# Raw Spanish text for pretraining and its token shards, in two steps that are both cheap to re-run:
#   1. the text: training files in data/raw/es/, the held-out novel(s) in data/heldout/ (never trained on)
#        --from DIR   symlink every .txt under DIR (recursively; --from again for more folders) with a flattened name, e.g.
#                     novela-espanola__Galdos_Tristana-ne0005.txt; names containing --heldout TEXT
#                     (default Galdos_Tristana) go to data/heldout/. Developers: --from ../shared/corpus/es
#        (default)    download the pinned Project Gutenberg list configs/data/gutenberg-es.tsv (--list FILE),
#                     checking each book's sha256; books already present with the right hash are skipped
#   2. python -m enlace.prepare data/raw/es --out data/shards/es --train-tokenizer 16384 (resumable)
#
# usage: scripts/prepare_smoke_data.sh [--from DIR] [--vocab N] [--out DIR] [--mirror URL] [--list FILE] [--pin]
#                                      [--heldout TEXT] [--data-root DIR] [-- PREPARE_ARGS...]
#   --vocab N        tokenizer vocabulary (default 16384)
#   --out DIR        shards and tokenizer (default DATA_ROOT/shards/es)
#   --mirror URL     a Gutenberg mirror's base URL instead of https://www.gutenberg.org (URL/cache/epub/ID/pgID.txt)
#   --pin            download books whose sha256 is "-" (not pinned yet) and write the sha256 into the list
#   --data-root DIR  instead of data/ (raw/es, heldout and shards/es go under it)
#   -- ARGS          passed on to enlace.prepare (e.g. -- --no-progress)
# Exit: 0 done; 1 with one line on stderr (offline, hash mismatch, unpinned book, bad list); 2 from prepare.
# ENLACE_PYTHON=/path/to/python uses that interpreter as is, instead of creating or updating .venv (tests do).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ORIG="$PWD"
abspath() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$ORIG/$1" ;; esac; }
die() { echo "error: $*" >&2; exit 1; }

FROM=() VOCAB=16384 OUT="" MIRROR="" LIST="" PIN=0 HELDOUT="Galdos_Tristana" DATA_ROOT="" PREP_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --from) [ $# -ge 2 ] || die "--from needs a folder"; FROM+=("$(abspath "$2")"); shift 2 ;;
    --vocab) [[ "${2:-}" =~ ^[0-9]+$ ]] || die "--vocab needs a number, e.g. --vocab 16384"; VOCAB="$2"; shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a folder"; OUT="$(abspath "$2")"; shift 2 ;;
    --mirror) [ $# -ge 2 ] || die "--mirror needs a URL"; MIRROR="$2"; shift 2 ;;
    --list) [ $# -ge 2 ] || die "--list needs a file"; LIST="$(abspath "$2")"; shift 2 ;;
    --pin) PIN=1; shift ;;
    --heldout) [ $# -ge 2 ] || die "--heldout needs a file-name part"; HELDOUT="$2"; shift 2 ;;
    --data-root) [ $# -ge 2 ] || die "--data-root needs a folder"; DATA_ROOT="$(abspath "$2")"; shift 2 ;;
    --) shift; PREP_ARGS=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done

if [ -n "${ENLACE_PYTHON:-}" ]; then
  PY="$ENLACE_PYTHON"; cd "$HERE/.."
else
  source "$HERE/_venv.sh"; PY=python
fi
ROOT="$PWD"
DATA_ROOT="${DATA_ROOT:-$ROOT/data}"
RAW="$DATA_ROOT/raw/es" HELD="$DATA_ROOT/heldout"
OUT="${OUT:-$DATA_ROOT/shards/es}"
LIST="${LIST:-$ROOT/configs/data/gutenberg-es.tsv}"
mkdir -p "$RAW" "$HELD"

# Step 1 (Python for the hashing, the downloads and the one-line errors). Arguments: mode, then its settings.
if [ ${#FROM[@]} -gt 0 ]; then set -- link "$HELDOUT" "${FROM[@]}"; else set -- download "$LIST" "${MIRROR:-https://www.gutenberg.org}" "$PIN"; fi
"$PY" - "$RAW" "$HELD" "$@" <<'PY'
import hashlib, os, re, socket, sys, time, unicodedata, urllib.error, urllib.parse, urllib.request
from pathlib import Path

from enlace.common import sha256_file as sha256

def die(msg):
    print(f"error: {msg}", file=sys.stderr); sys.exit(1)

def say(msg): print(f"[data] {msg}", flush=True)

def links(*folders):
    "The symlinks in `folders` (made by --from; downloads are regular files)."
    return [p for d in folders for p in d.iterdir() if p.is_symlink()]

def link_from(raw: Path, held: Path, heldout: str, *srcs: str):
    "Symlink every .txt under each of `srcs` into raw (or held when its flattened name contains `heldout`)."
    want, roots = {}, []
    for src in srcs:
        root = Path(src)
        if not root.is_dir(): die(f"--from {src}: not a folder")
        root = root.resolve()
        roots.append(root)
        files = sorted(p for p in root.rglob("*.txt") if p.is_file())
        if not files: die(f"--from {src}: no .txt files under it")
        for f in files:
            name = "__".join(f.relative_to(root).parts)
            dest = (held if heldout and heldout in name else raw) / name
            if dest in want: die(f"--from {src}: {f} and {want[dest]} flatten to the same name {name}; rename one")
            want[dest] = f
    root = ", ".join(map(str, roots))
    for dest, f in want.items():
        if dest.is_symlink() and os.readlink(dest) == str(f): continue
        if dest.exists() and not dest.is_symlink(): die(f"{dest}: a regular file is in the way of a link to {f}; move it away")
        tmp = dest.with_name(f".{dest.name}.link"); tmp.unlink(missing_ok=True)
        os.symlink(f, tmp); os.replace(tmp, dest)
    stale = [p for p in links(raw, held) if p not in want]
    for p in stale: p.unlink()
    n_held = sum(d.parent == held for d in want)
    say(f"linked {len(want) - n_held} files into {raw} and {n_held} held out into {held} (from {root})"
        + (f"; removed {len(stale)} stale links" if stale else ""))
    if not n_held: say(f"note: no file name contains {heldout!r}: nothing is held out")
    others = [p for p in raw.iterdir() if p.is_file() and not p.is_symlink() and p.suffix == ".txt"]
    if others: say(f"note: {raw} also holds {len(others)} downloaded .txt files; they are prepared too (delete them to use only {root})")

def slug(s: str) -> str:
    "ASCII CamelCase of a name, for file names: 'Benito Pérez Galdós' -> 'BenitoPerezGaldos'."
    s = unicodedata.normalize("NFKD", s).encode("ascii", "ignore").decode()
    return "".join(w[:1].upper() + w[1:] for w in re.findall(r"[A-Za-z0-9]+", s))

def read_list(path: Path):
    "The books of a gutenberg-es.tsv (line index, id, sha256 or None, split, author, title) and its lines."
    if not path.is_file(): die(f"--list {path}: no such file")
    lines, books = path.read_text(encoding="utf-8").splitlines(keepends=True), []
    for i, line in enumerate(lines):
        f = line.rstrip("\r\n").split("\t")
        if not line.strip() or line.startswith("#") or f[0] == "gutenberg_id": continue
        where = f"{path}:{i + 1}"
        if len(f) != 5: die(f"{where}: expected 5 tab-separated columns: gutenberg_id, sha256, split, author, title")
        gid, sha, split, author, title = f
        if not gid.isdigit(): die(f"{where}: gutenberg_id {gid!r} is not a number")
        if sha != "-" and not re.fullmatch(r"[0-9a-f]{64}", sha): die(f"{where}: sha256 must be 64 hex digits or '-', got {sha!r}")
        if split not in ("train", "heldout"): die(f"{where}: split must be train or heldout, got {split!r}")
        books.append(dict(line=i, id=gid, sha=None if sha == "-" else sha, split=split, author=author, title=title))
    if not books: die(f"--list {path}: no books in it")
    return books, lines

def pin(path: Path, lines: list, book: dict, sha: str):
    "Write `sha` into the book's line of the list (atomically), so that the next run checks it."
    f = lines[book["line"]].rstrip("\r\n").split("\t"); f[1] = sha
    lines[book["line"]] = "\t".join(f) + "\n"
    tmp = path.with_name(f".{path.name}.tmp"); tmp.write_text("".join(lines), encoding="utf-8"); os.replace(tmp, path)

def reachable(base: str) -> bool:
    "True when a TCP connection to the base URL's host opens (skipped behind a proxy, which would do the connecting)."
    u = urllib.parse.urlparse(base)
    if u.scheme in urllib.request.getproxies(): return True
    try: socket.create_connection((u.hostname, u.port or (443 if u.scheme == "https" else 80)), timeout=10).close(); return True
    except OSError: return False

def fetch(url: str, tmp: Path, what: str, tries: int = 3) -> str:
    "Download `url` into `tmp`; returns its sha256. Retries transient failures politely (5 s, 10 s)."
    req = urllib.request.Request(url, headers={"User-Agent": "enlace-prepare-smoke-data/1 (one-off corpus download)"})
    for attempt in range(1, tries + 1):
        try:
            h = hashlib.sha256()
            with urllib.request.urlopen(req, timeout=60) as r, open(tmp, "wb") as f:
                for chunk in iter(lambda: r.read(1 << 16), b""): f.write(chunk); h.update(chunk)
            return h.hexdigest()
        except urllib.error.HTTPError as e:
            tmp.unlink(missing_ok=True)
            if e.code < 500 and e.code != 429: die(f"{what}: HTTP {e.code} for {url}")
            err = f"HTTP {e.code}"
        except (urllib.error.URLError, OSError) as e:
            tmp.unlink(missing_ok=True); err = str(getattr(e, "reason", e))
        if attempt < tries:
            say(f"  {what}: {err}; retrying in {5 * attempt} s"); time.sleep(5 * attempt)
    die(f"{what}: download failed after {tries} tries ({err}): {url}")

def download(raw: Path, held: Path, list_path: str, base: str, do_pin: str):
    "Fetch the books of the list that are not present with the right hash; with --pin, pin the unpinned ones."
    path, do_pin, base = Path(list_path), do_pin == "1", base.rstrip("/")
    books, lines = read_list(path)
    for b in books:
        b["dest"] = (raw if b["split"] == "train" else held) / f"{slug(b['author'])}_{slug(b['title'])}-pg{b['id']}.txt"
        b["what"] = f"pg{b['id']} ({b['title']})"
        have = b["dest"].is_file() and not b["dest"].is_symlink()
        b["get"] = not have or (b["sha"] is not None and sha256(b["dest"]) != b["sha"])
    stale = links(raw, held)
    for p in stale: p.unlink()
    if stale: say(f"removed {len(stale)} links left by an earlier --from run")
    todo = [b for b in books if b["get"]]
    host = urllib.parse.urlparse(base).netloc or base
    if todo and not reachable(base):
        die(f"cannot reach {host} (offline?); use --from DIR with a local folder of .txt files "
            f"(developers: --from ../shared/corpus/es)")
    unpinned = [b for b in books if b["sha"] is None]
    if unpinned and not do_pin:
        die(f"{path}: {len(unpinned)} books have no sha256 pinned yet ({', '.join(b['what'] for b in unpinned[:3])}"
            f"{', ...' if len(unpinned) > 3 else ''}); rerun with --pin to download them and write their sha256 into the list")
    pinned = 0
    for b in books:
        if not b["get"]:
            if b["sha"] is None: pin(path, lines, b, sha256(b["dest"])); pinned += 1
            continue
        k = todo.index(b) + 1
        url = f"{base}/cache/epub/{b['id']}/pg{b['id']}.txt"
        tmp = b["dest"].with_name(f".{b['dest'].name}.part")
        got = fetch(url, tmp, b["what"])
        if b["sha"] is not None and got != b["sha"]:
            tmp.unlink(missing_ok=True)
            die(f"{b['what']}: sha256 mismatch (got {got[:16]}..., the list pins {b['sha'][:16]}...); nothing kept. "
                f"Another edition at {url}? Check {path}")
        os.replace(tmp, b["dest"])
        if b["sha"] is None: pin(path, lines, b, got); pinned += 1
        say(f"{k}/{len(todo)} {b['what']}: {b['dest'].stat().st_size / 1e6:.2f} MB -> {b['dest']}"
            + (" (pinned)" if b["sha"] is None else " (sha256 ok)"))
        if host == "www.gutenberg.org" and k < len(todo): time.sleep(2)  # be gentle with the main site
    say(f"{len(books) - len(todo)} of {len(books)} books already present, {len(todo)} downloaded")
    if pinned: say(f"pinned the sha256 of {pinned} books in {path}: review and commit it")

raw, held, mode, *args = sys.argv[1:]
(link_from if mode == "link" else download)(Path(raw), Path(held), *args)
PY

# Step 2: clean, train the tokenizer and write the shards (resumable: a second run reuses everything).
"$PY" -m enlace.prepare "$RAW" --out "$OUT" --train-tokenizer "$VOCAB" ${PREP_ARGS[@]+"${PREP_ARGS[@]}"}
echo "[data] shards: $OUT (manifest.json)"
echo "[data] tokenizer: $OUT/tokenizer"
echo "[data] held-out: $(find "$HELD" -maxdepth 1 -name '*.txt' | sort | tr '\n' ' ')"
