#!/usr/bin/env python3
"""Offline docs build: nbs/*.ipynb -> one HTML page each, README.md -> index.html, without Quarto.

Steps:
1. Process every notebook with nbdev's own doc processors (the list `nbdev-proc-nbs` uses: frontmatter,
   show_doc cells after exported definitions, doc links, hidden cells removed, ...), writing the processed
   notebooks to a cache folder (`_proc/` by default). One processor is swapped: nbdev's `exec_show_docs`
   also runs whole every cell that mixes imports with other code (here: test code, run from the repo root,
   which fails on relative paths). Ours runs only what the API docs need: exported cells, import-only cells, the
   import statements of mixed cells, and show_doc cells. Cells flagged with the project's test flags
   (`tst_flags`: slow, gpu) are never run.
2. Render the processed notebooks with nbconvert's `basic` template (body only, no external scripts),
   wrap each in a page with a sidebar listing every page, give headings pandoc-style ids (the ids nbdev's
   doc links point at), and rewrite links: notebook and markdown links become the built pages, links to
   the published docs site become relative, links to other repository files point at the repository.
3. Markdown files linked from a page (e.g. docs/PLAN.md) become pages too.

Usage (from anywhere; paths are relative to the repo root):
    python scripts/build_docs.py [--out _docs] [--proc _proc] [--jobs N] [--force]
Exit codes: 0 built, 1 a notebook failed to process (its name and the failing cell are printed).
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import html
import json
import multiprocessing
import os
import re
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
MARKER = ".enlace-docs"  # marks an output folder this script may wipe
EXEC_DIRS = {"export", "exports", "exporti", "exec_doc"}
MIXED: list[int] = []  # in a worker: cells that mix imports with other code (nbdev-docs would run them whole)


# ---------------------------------------------------------------------------------------------------------
# 1. processing (runs in worker processes; imports nbdev lazily so the parent stays light)

def _safe_filter():
    "nbdev's FilterDefaults with exec_show_docs replaced by a processor that runs only what the API docs need."
    from fastcore.basics import str2bool
    from nbdev.config import get_config
    from nbdev.processors import FilterDefaults, _do_eval, _show_docs, exec_show_docs

    flags = set(str(get_config().get("tst_flags", "")).split())

    class exec_docs_only(exec_show_docs):
        "Run exported cells, imports and show_doc calls; never test code, training or test-flagged cells."
        def __call__(self, cell):
            if not getattr(self.nb, "has_docs_", None) or not hasattr(self, "k"): return
            fm = getattr(self.nb, "frontmatter_", {}) or {}
            if str2bool(fm.get("skip_showdoc", False)): return
            if not _do_eval(cell): return
            dirs = set(cell.directives_)
            if dirs & flags and not dirs & EXEC_DIRS: return
            trees = cell.parsed_() or []
            imports = [t for t in trees if isinstance(t, (ast.Import, ast.ImportFrom))]
            if dirs & EXEC_DIRS or _show_docs(trees) or len(imports) == len(trees):
                self.k.cell(cell)  # outputs are stored in the cell, as nbdev does
            else:
                MIXED.append(cell.idx_)
                src = "\n".join(ast.get_source_segment(cell.source, t) or "" for t in imports)
                self.k.run_cell(src)  # only the imports of a mixed cell; its outputs are not kept
            if (e := self.k.exc):
                raise RuntimeError(f"cell {cell.idx_}: {type(e).__name__}: {e}\n{cell.source}") from e

    class SafeFilter(FilterDefaults):
        def base_procs(self):
            return [exec_docs_only if p is exec_show_docs else p for p in super().base_procs()]

    return SafeFilter


def _process_one(src: str, dst: str) -> tuple[str, str | None, list[int]]:
    "Worker: process notebook `src` into `dst`; returns (src, error or None, indices of mixed cells)."
    MIXED.clear()
    try:
        import warnings
        from fastcore.nbio import read_nb, write_nb
        warnings.filterwarnings("ignore", message="Found cells containing imports")  # we do not run those cells
        os.chdir(Path(src).parent)  # notebooks use paths relative to nbs/, as under nbdev-test
        os.environ["IN_TEST"] = "1"
        nb = read_nb(src)
        _safe_filter()()(nb)
        write_nb(nb, dst)
        return src, None, list(MIXED)
    except BaseException as e:  # report, never hang the pool
        return src, f"{type(e).__name__}: {e}", list(MIXED)


def _notebooks(nbs: Path) -> list[Path]:
    "Notebooks under nbs/, skipping names and folders that start with '_' or '.' (nbdev's defaults)."
    out = []
    for p in sorted(nbs.rglob("*.ipynb")):
        rel = p.relative_to(nbs)
        if any(part[0] in "_." for part in rel.parts): continue
        out.append(p)
    return out


def _cache_key(nb: Path) -> str:
    "Changes when the notebook, the package, the processing code, pyproject.toml or nbdev change."
    h = hashlib.sha256()
    import nbdev
    h.update(nbdev.__version__.encode())
    import inspect
    h.update((inspect.getsource(_safe_filter) + inspect.getsource(_process_one)).encode())
    for f in [nb, ROOT / "pyproject.toml", *sorted((ROOT / "enlace").rglob("*.py"))]:
        h.update(str(f.relative_to(ROOT) if f.is_relative_to(ROOT) else f).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def process(nbs: Path, proc: Path, jobs: int, force: bool) -> list[Path]:
    "Process every notebook into `proc` (cached by content); returns the processed notebooks."
    proc.mkdir(parents=True, exist_ok=True)
    index_f = proc / ".build-docs.json"
    try: cache = json.loads(index_f.read_text()) if not force else {}
    except (OSError, ValueError): cache = {}
    todo, done = [], []
    for nb in _notebooks(nbs):
        rel = str(nb.relative_to(nbs))
        dst = proc / rel
        key = _cache_key(nb)
        done.append(dst)
        if cache.get(rel) == key and dst.exists(): continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        todo.append((str(nb), str(dst), rel, key))
    for stale in set(cache) - {str(p.relative_to(proc)) for p in done}:
        (proc / stale).unlink(missing_ok=True); cache.pop(stale)
    if todo:
        print(f"[docs] processing {len(todo)} notebook(s) with {min(jobs, len(todo))} worker(s)")
        ctx = multiprocessing.get_context("spawn")
        # workers import this file as a module ('__main__' is not importable by name under spawn)
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        worker = __import__(Path(__file__).stem)._process_one
        failed, mixed = [], []
        with ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=ctx) as ex:
            futs = {ex.submit(worker, s, d): (rel, key) for s, d, rel, key in todo}
            for f, (rel, key) in futs.items():
                src, err, cells = f.result()
                if err: failed.append(f"{rel}: {err}")
                else: cache[rel] = key
                if cells: mixed.append(f"{rel} ({len(cells)})")
        index_f.write_text(json.dumps(cache, indent=1, sort_keys=True))
        if mixed:  # nbdev's exec_show_docs runs such cells whole, so nbdev-docs may fail where we do not
            print(f"[docs] note: cells that mix imports with other code (only their imports ran here; nbdev-docs "
                  f"runs them whole, see nbdev's FAQ): {', '.join(mixed)}")
        if failed:
            for msg in failed: print(f"[docs] error: {msg}", file=sys.stderr)
            raise SystemExit(1)
    return done


# ---------------------------------------------------------------------------------------------------------
# 2. rendering

def slugify(text: str) -> str:
    "Pandoc's identifier rule (what Quarto uses and nbdev's doc links expect)."
    s = re.sub(r"[^\w\s.\-]", "", text).lower()  # keep letters, digits, '_', '-', '.'
    s = re.sub(r"\s+", "-", s.strip())
    first = re.search(r"[^\W\d_]", s)  # identifiers start at the first letter
    return s[first.start():] if first else "section"


def _inline(text: str) -> str:
    "Escape text and render `code` spans (titles, descriptions, nav entries)."
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


_RE_SRCLINK = re.compile(r"\[source\]\(([^)\s]+)\)\{[^}\n]*\}")
_RE_PANDOC_ATTR = re.compile(r"(\]\([^)\s]*\))\{[^}\n]*\}")


def _fix_markdown(md: str) -> str:
    "Quarto-only markdown that a CommonMark renderer would print literally: link attributes, fenced divs."
    md = _RE_SRCLINK.sub(r'<a class="source-link" href="\1">source</a>', md)
    md = _RE_PANDOC_ATTR.sub(r"\1", md)
    out = []
    for line in md.split("\n"):
        m = re.match(r"^:{3,}\s*(\{.*\}|[\w-]+)?\s*$", line)
        if m and m.group(1):
            classes = " ".join(c.lstrip(".") for c in re.findall(r"\.[\w-]+", m.group(1))) or m.group(1)
            out += [f'<div class="{html.escape(classes)}">', ""]
        elif m: out += ["", "</div>"]
        else: out.append(line)
    return "\n".join(out)


def _directives(src: str) -> tuple[dict, str]:
    "Leading `#| key: value` lines of a code cell, and the source without them."
    dirs, lines = {}, src.split("\n")
    i = 0
    while i < len(lines) and (lines[i].startswith("#|") or not lines[i].strip()):
        m = re.match(r"#\|\s*([\w-]+)\s*:?\s*(.*)$", lines[i])
        if m: dirs[m.group(1)] = m.group(2).strip().strip("\"'").lower()
        i += 1
    return dirs, "\n".join(lines[i:]).strip("\n")


def _frontmatter(nb) -> dict:
    "The YAML frontmatter nbdev writes as the first raw cell; removes that cell."
    import yaml
    if nb.cells and nb.cells[0].cell_type == "raw" and nb.cells[0].source.startswith("---"):
        text = nb.cells.pop(0).source.strip().strip("-")
        try: return yaml.safe_load(text) or {}
        except yaml.YAMLError: return {}
    return {}


def _prepare(nb):
    "Apply the Quarto cell options nbdev leaves for the renderer (echo, output, include) and clean sources."
    cells = []
    for c in nb.cells:
        if "source" not in c: continue  # nbdev's hide_ / rm_export drop the source of hidden cells
        c.metadata = {k: v for k, v in c.get("metadata", {}).items() if k == "tags"}  # e.g. execution timings
        if c.cell_type == "markdown":
            c.source = _fix_markdown(c.source)
            if c.source.strip() == "<!-- WARNING: THIS FILE WAS AUTOGENERATED! DO NOT EDIT! -->": continue
        elif c.cell_type == "code":
            dirs, c.source = _directives(c.source)
            if dirs.get("include") == "false": continue
            if dirs.get("output") == "false": c.outputs = []
            for o in c.get("outputs", []):
                md = o.get("data", {}).get("text/markdown")
                if md is not None:
                    o["data"]["text/markdown"] = _fix_markdown("".join(md) if isinstance(md, list) else md)
                    o["data"].pop("text/plain", None)
            if dirs.get("echo") == "false": c.metadata.setdefault("tags", []).append("remove_input")
            if not c.source.strip() and not c.get("outputs"): continue
        elif c.cell_type == "raw": continue
        cells.append(c)
    nb.cells = cells
    return nb


def _exports(nb: Path) -> bool:
    "Whether notebook `nb` exports a module (has a default_exp directive)."
    return bool(re.search(r'"#\|\s*default_exp\s', nb.read_text(encoding="utf-8")))


def _exporter():
    from nbconvert import HTMLExporter
    from traitlets.config import Config
    cfg = Config()
    cfg.TagRemovePreprocessor.enabled = True
    cfg.TagRemovePreprocessor.remove_input_tags = {"remove_input"}
    cfg.HTMLExporter.exclude_anchor_links = True
    return HTMLExporter(config=cfg, template_name="basic")


class Page:
    def __init__(self, name: str, title: str, description: str, body, src: Path, nav: bool = True):
        self.name, self.title, self.description, self.body, self.src, self.nav = name, title, description, body, src, nav


def _soup(fragment: str):
    from bs4 import BeautifulSoup
    return BeautifulSoup(fragment, "html.parser")


def _set_ids(body) -> None:
    "Pandoc-style unique ids for every heading (replacing nbconvert's ids)."
    seen = set()
    for tag in body.find_all(True):
        if tag.name in {"h1", "h2", "h3", "h4", "h5", "h6"}:
            base = slugify(tag.get_text(" ", strip=True))
            slug, n = base, 0
            while slug in seen: n += 1; slug = f"{base}-{n}"
            tag["id"] = slug
        elif tag.get("id"):
            if tag["id"] in seen: del tag["id"]
            else: seen.add(tag["id"]); continue
        else: continue
        seen.add(tag["id"])


def render_notebook(exporter, path: Path, src: Path) -> Page:
    import nbformat
    nb = nbformat.read(path, as_version=4)
    fm = _frontmatter(nb)
    body_html, _ = exporter.from_notebook_node(_prepare(nb))
    name = fm.get("output-file") or re.sub(r"^\d+[_-]", "", path.stem) + ".html"
    return Page(name, str(fm.get("title") or path.stem), str(fm.get("description") or ""), _soup(body_html), src)


def render_markdown(exporter, md: str, name: str, src: Path, nav: bool = True) -> Page:
    import nbformat
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(_fix_markdown(md))])
    body_html, _ = exporter.from_notebook_node(nb)
    body = _soup(body_html)
    h1 = body.find("h1")
    title = h1.get_text(" ", strip=True) if h1 else Path(name).stem
    return Page(name, title, "", body, src, nav)


# ---------------------------------------------------------------------------------------------------------
# 3. links

class Site:
    def __init__(self, out: Path, nbs: Path, nb_pages: dict[Path, str]):
        from nbdev.config import get_config
        cfg = get_config()
        self.out, self.nbs = out, nbs
        self.nb_pages = nb_pages  # source notebook (resolved) -> page name
        self.md_pages: dict[Path, str] = {(ROOT / "README.md").resolve(): "index.html"}
        self.pending: list[Path] = []
        host, base = str(cfg.get("doc_host", "")).rstrip("/"), str(cfg.get("doc_baseurl", "")).strip("/")
        self.doc_url = f"{host}/{base}/" if host else None
        self.git_url = str(cfg.get("git_url", "")).rstrip("/")
        self.branch = str(cfg.get("branch", "main"))
        self.warnings: list[str] = []

    def md_page(self, p: Path) -> str:
        "Page name for a repository markdown file (rendered later if new)."
        if p not in self.md_pages:
            rel = p.relative_to(ROOT).with_suffix("")
            self.md_pages[p] = "-".join(rel.parts) + ".html"
            self.pending.append(p)
        return self.md_pages[p]

    def target(self, href: str, base: Path) -> str | None:
        "New href for a link found in a page whose source lives in folder `base`; None leaves it as is."
        parts = urlsplit(href)
        if self.doc_url and href.startswith(self.doc_url):  # nbdev doc links: absolute URLs of the published site
            return href[len(self.doc_url):] or "index.html"
        if parts.scheme or parts.netloc or href.startswith(("#", "/")) or not parts.path: return None
        frag = f"#{parts.fragment}" if parts.fragment else ""
        p = (base / unquote(parts.path)).resolve()
        if not p.is_relative_to(ROOT): return None
        if p in self.nb_pages: return self.nb_pages[p] + frag
        if p.suffix == ".ipynb" and p.with_suffix(".ipynb") not in self.nb_pages and not p.exists(): return None
        if p.suffix.lower() == ".md" and p.is_file(): return self.md_page(p) + frag
        if p.exists() and self.git_url:  # any other repository file: its page on the forge
            kind = "tree" if p.is_dir() else "blob"
            return f"{self.git_url}/{kind}/{self.branch}/{p.relative_to(ROOT).as_posix()}{frag}"
        return None

    def asset(self, src: str, base: Path) -> str | None:
        "Copy a local image into the site (under assets/) and return its new src."
        parts = urlsplit(src)
        if parts.scheme or parts.netloc or src.startswith(("/", "data:")) or not parts.path: return None
        p = (base / unquote(parts.path)).resolve()
        if not p.is_file() or not p.is_relative_to(ROOT): return None
        rel = Path("assets") / p.relative_to(ROOT)
        (self.out / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, self.out / rel)
        return rel.as_posix()


def rewrite_links(site: Site, page: Page) -> None:
    base = page.src.parent
    for a in page.body.find_all("a", href=True):
        new = site.target(a["href"], base)
        if new is not None: a["href"] = new
        if a.get("class") and "source-link" in a["class"]: a["target"], a["rel"] = "_blank", "noopener"
    for img in page.body.find_all("img", src=True):
        new = site.asset(img["src"], base)
        if new is not None: img["src"] = new


def drop_dead_doclinks(site: Site, pages: dict[str, Page]) -> None:
    "nbdev links every backticked exported name, private ones too; unlink those without a doc entry."
    ids = {name: {t["id"] for t in p.body.find_all(id=True)} for name, p in pages.items()}
    for page in pages.values():
        for a in page.body.find_all("a", href=True):
            href = a["href"]
            if a.find("code") is None or "://" in href or "#" not in href: continue
            name, frag = href.split("#", 1)
            if name in ids and frag not in ids[name]:
                site.warnings.append(f"{name}#{frag}")
                a.unwrap()


# ---------------------------------------------------------------------------------------------------------
# 4. the site

CSS = """
:root { --fg: #1d2330; --muted: #5b6475; --accent: #1f5fbf; --bg-code: #f5f7fa; --border: #e1e5ec; }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); }
a { color: var(--accent); text-decoration: none; } a:hover { text-decoration: underline; }
.sidebar { position: fixed; top: 0; bottom: 0; left: 0; width: 16rem; overflow-y: auto; padding: 1.2rem 1rem;
           border-right: 1px solid var(--border); background: #fafbfc; font-size: 0.92rem; }
.sidebar .site-title { display: block; font-weight: 700; font-size: 1.2rem; margin-bottom: 1rem; color: var(--fg); }
.sidebar ul { list-style: none; padding: 0; margin: 0 0 1rem; }
.sidebar li a { display: block; padding: 0.25rem 0.4rem; border-radius: 4px; color: var(--fg); }
.sidebar li a.current { background: #e6eefb; color: var(--accent); font-weight: 600; }
.sidebar .section { color: var(--muted); font-size: 0.8rem; text-transform: uppercase; margin: 0.8rem 0 0.3rem; }
main { margin-left: 16rem; padding: 1.5rem 2.5rem 4rem; max-width: 62rem; }
header .description { color: var(--muted); font-size: 1.1rem; margin-top: -0.4rem; }
pre, code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.88em; }
pre { background: var(--bg-code); padding: 0.7rem 0.9rem; border-radius: 6px; overflow-x: auto; }
:not(pre) > code { background: var(--bg-code); padding: 0.05rem 0.3rem; border-radius: 3px; }
table { border-collapse: collapse; margin: 1rem 0; } th, td { border: 1px solid var(--border); padding: 0.3rem 0.6rem; }
.cell { margin: 0.6rem 0; } .prompt { display: none; }
.output_area pre { background: #fff; border-left: 3px solid var(--border); border-radius: 0; }
.output_markdown { border: 1px solid var(--border); border-radius: 6px; padding: 0 1rem 0.4rem; margin: 1rem 0; }
.output_markdown hr { display: none; } .output_markdown h3 { margin-top: 0.6rem; }
.output_markdown pre { border-left: 0; background: var(--bg-code); }
.source-link { float: right; font-size: smaller; }
img { max-width: 100%; }
@media (max-width: 50rem) { .sidebar { position: static; width: auto; border-right: 0; } main { margin-left: 0; } }
"""


def _nav(pages: list[Page], current: str) -> str:
    items = []
    for p in pages:
        cls = ' class="current"' if p.name == current else ""
        items.append(f'<li><a href="{html.escape(p.name)}"{cls}>{_inline(p.title)}</a></li>')
    return "<ul>\n" + "\n".join(items) + "\n</ul>"


def write_page(out: Path, page: Page, nav_main: list[Page], nav_extra: list[Page], site_title: str) -> None:
    header = ""
    if not page.body.find("h1"):
        desc = f'<p class="description">{_inline(page.description)}</p>' if page.description else ""
        header = f'<header><h1 class="title" id="{slugify(page.title)}">{_inline(page.title)}</h1>{desc}</header>\n'
    extra = f'<div class="section">docs</div>\n{_nav(nav_extra, page.name)}' if nav_extra else ""
    title_txt = html.escape(page.title.replace("`", ""))
    doc = f"""<!DOCTYPE html>
<html lang="es">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title_txt} – {html.escape(site_title)}</title>
<link rel="stylesheet" href="style.css">
</head>
<body>
<nav class="sidebar">
<a class="site-title" href="index.html">{html.escape(site_title)}</a>
{_nav(nav_main, page.name)}
{extra}
</nav>
<main>
{header}{page.body}
</main>
</body>
</html>
"""
    (out / page.name).write_text(doc, encoding="utf-8")


def _check_out(out: Path) -> None:
    "Refuse to wipe a non-empty folder that this script (or nbdev, for _docs/) did not write."
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists() and out != (ROOT / "_docs").resolve():
        raise SystemExit(f"[docs] error: {out} is not empty and was not built by scripts/build_docs.py; choose another --out")


def _prepare_out(out: Path) -> None:
    "An empty output folder, marked as ours."
    _check_out(out)
    if out.exists(): shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARKER).write_text("built by scripts/build_docs.py; the whole folder is regenerated\n")


def build(out: Path, proc: Path, jobs: int, force: bool) -> list[Page]:
    from nbdev.config import get_config
    from pygments.formatters import HtmlFormatter
    os.chdir(ROOT)
    cfg = get_config()
    nbs = Path(cfg.nbs_path)
    _check_out(out)
    t0 = time.perf_counter()
    processed = process(nbs, proc, jobs, force)
    t1 = time.perf_counter()

    exporter = _exporter()
    pages: dict[str, Page] = {}
    nb_pages: dict[Path, str] = {}
    for dst in processed:
        src = (nbs / dst.relative_to(proc)).resolve()
        page = render_notebook(exporter, dst, src)
        if page.name == "index.html":  # the landing page is the README (see the module docstring)
            page = render_markdown(exporter, (ROOT / "README.md").read_text(encoding="utf-8"), "index.html",
                                   ROOT / "README.md")
        if page.name in pages:  # e.g. 08_train.ipynb and train.ipynb; Quarto would silently keep only one
            other = pages.pop(page.name)
            # the module notebook keeps the name (nbdev's doc links point there); the other gets its own stem
            keep, move = (page, other) if _exports(page.src) and not _exports(other.src) else (other, page)
            move.name = move.src.stem + (".html" if move.src.stem + ".html" != keep.name else "-notebook.html")
            print(f"[docs] note: {keep.src.name} and {move.src.name} both map to {keep.name}; "
                  f"{move.src.name} is published as {move.name}")
            for p in (keep, move):
                pages[p.name] = p
                nb_pages[p.src] = nb_pages[p.src.with_suffix(".md")] = p.name
            continue
        pages[page.name] = page
        nb_pages[src] = page.name
        nb_pages[src.with_suffix(".md")] = page.name  # links written as 03_model.md (Quarto style)
    site = Site(out, nbs, nb_pages)
    _prepare_out(out)
    for page in list(pages.values()): rewrite_links(site, page)
    while site.pending:  # markdown files linked from pages become pages themselves
        p = site.pending.pop(0)
        page = render_markdown(exporter, p.read_text(encoding="utf-8"), site.md_pages[p], p, nav=False)
        pages[page.name] = page
        rewrite_links(site, page)
    for page in pages.values(): _set_ids(page.body)
    drop_dead_doclinks(site, pages)

    order = sorted((p for p in pages.values() if p.nav), key=lambda p: (p.name != "index.html", p.src.name))
    extra = sorted((p for p in pages.values() if not p.nav), key=lambda p: p.name)
    title = str(cfg.get("title") or cfg.get("lib_name") or "docs")
    for page in pages.values(): write_page(out, page, order, extra, title)
    (out / "style.css").write_text(CSS + HtmlFormatter(style="default").get_style_defs(".highlight"), encoding="utf-8")
    if site.warnings:
        print(f"[docs] note: nbdev doc links to names without a doc entry left as plain code: {', '.join(site.warnings)}")
    print(f"[docs] {len(pages)} pages in {out} (processing {t1 - t0:.1f} s, rendering {time.perf_counter() - t1:.1f} s)")
    return list(pages.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/build_docs.py", description="Build the docs site offline (no Quarto).")
    ap.add_argument("--out", default="_docs", help="output folder (default _docs; wiped and rebuilt)")
    ap.add_argument("--proc", default="_proc", help="processed-notebook cache (default _proc)")
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="worker processes")
    ap.add_argument("--force", action="store_true", help="ignore the cache and process every notebook")
    args = ap.parse_args(argv)
    out, proc = (Path(p) if Path(p).is_absolute() else ROOT / p for p in (args.out, args.proc))
    build(out.resolve(), proc.resolve(), max(1, args.jobs), args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
