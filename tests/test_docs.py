"""The docs site: `scripts/docs.sh` builds it offline, and headless Chromium (Debian's `chromium`, no browser
downloads) checks the rendered DOM: one page per notebook, the README as landing page, the model's API docs,
and no broken internal link or anchor."""
import ast
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from conftest import ROOT

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


class Dom(HTMLParser):
    "What the tests need from a DOM: ids, links, heading texts, visible text."
    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.ids, self.links, self.nav, self.headings, self.text = set(), [], [], [], []
        self._heading, self._skip, self._nav = None, 0, 0
        self.feed(html)
        self.text = " ".join("".join(self.text).split())

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"): self.ids.add(a["id"])
        for attr in ("href", "src"):
            if a.get(attr) is not None and tag in ("a", "img", "link", "script"): self.links.append((tag, attr, a[attr], a))
        if tag == "nav": self._nav += 1
        if tag == "a" and self._nav and a.get("href"): self.nav.append(a["href"])
        if re.fullmatch(r"h[1-6]", tag): self._heading = [tag, a.get("id"), []]
        if tag in ("script", "style"): self._skip += 1

    def handle_endtag(self, tag):
        if self._heading and tag == self._heading[0]:
            self.headings.append((self._heading[1], " ".join("".join(self._heading[2]).split())))
            self._heading = None
        if tag in ("script", "style"): self._skip = max(0, self._skip - 1)
        if tag == "nav": self._nav = max(0, self._nav - 1)

    def handle_data(self, data):
        if self._skip: return
        self.text.append(data)
        if self._heading: self._heading[2].append(data)


def dump_dom(page: Path, profile: Path) -> Dom:
    "The DOM of `page` after Chromium loaded it."
    r = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.resolve().as_uri()],
                       capture_output=True, text=True, timeout=90)
    assert r.returncode == 0 and "<html" in r.stdout, f"chromium failed on {page}: {r.stderr[-2000:]}"
    return Dom(r.stdout)


def dump_all(site: Path, work: Path) -> dict[str, Dom]:
    "DOMs of every page of `site`, keyed by path relative to the site (a few Chromiums at a time)."
    pages = sorted(site.rglob("*.html"))
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 2)) as ex:
        doms = ex.map(lambda ip: dump_dom(ip[1], work / f"profile{ip[0]}"), enumerate(pages))
        return {p.relative_to(site).as_posix(): d for p, d in zip(pages, doms)}


def broken_links(site: Path, doms: dict[str, Dom]) -> list[str]:
    "Relative <a href>/<img src>/<link href>/<script src> whose file is missing or whose #anchor has no element."
    bad = []
    for name, dom in doms.items():
        for tag, attr, url, _ in dom.links:
            parts = urlsplit(url)
            if parts.scheme or parts.netloc or url.startswith("//"): continue
            target = name if not parts.path else (Path(name).parent / unquote(parts.path)).as_posix()
            f = (site / target).resolve()
            if not f.is_relative_to(site.resolve()) or not f.is_file():
                bad.append(f"{name}: <{tag} {attr}={url!r}>: {target} does not exist"); continue
            if parts.fragment:
                key = f.relative_to(site.resolve()).as_posix()
                if key not in doms: bad.append(f"{name}: <{tag} {attr}={url!r}>: anchor into a non-page"); continue
                if unquote(parts.fragment) not in doms[key].ids:
                    bad.append(f"{name}: <{tag} {attr}={url!r}>: no element with id {parts.fragment!r} in {key}")
    return bad


def plain(md: str) -> str:
    "Markdown inline text as a browser shows it: no backticks, no emphasis markers, single spaces."
    return " ".join(re.sub(r"[`*]", "", md).split())


def notebooks() -> list[Path]:
    return [p for p in sorted((ROOT / "nbs").rglob("*.ipynb")) if not any(s[0] in "_." for s in p.relative_to(ROOT / "nbs").parts)]


def nb_title(nb: Path) -> str:
    import json
    for c in json.loads(nb.read_text(encoding="utf-8"))["cells"]:
        if c["cell_type"] == "markdown":
            m = re.search(r"^#\s+(.+)$", "".join(c["source"]), re.M)
            if m: return plain(m.group(1))
    return nb.stem


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    "The site built by the documented entry point (offline path forced, output into a temp dir)."
    tmp = tmp_path_factory.mktemp("docs")
    r = subprocess.run(["bash", "scripts/docs.sh", "--out", str(tmp / "site"), "--proc", str(tmp / "proc")], cwd=ROOT,
                       capture_output=True, text=True, timeout=600, env={**os.environ, "ENLACE_DOCS_OFFLINE": "1"})
    assert r.returncode == 0, f"scripts/docs.sh failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return tmp / "site"


@pytest.fixture(scope="module")
def doms(site, tmp_path_factory):
    return dump_all(site, tmp_path_factory.mktemp("chromium"))


def test_every_notebook_is_a_page_in_the_nav(site, doms):
    h1 = {name: next((t for _, t in d.headings), None) for name, d in doms.items()}
    names = [("index" if nb.stem == "index" else re.sub(r"^\d+[_-]", "", nb.stem)) + ".html" for nb in notebooks()]
    pages = set()
    for nb, name in zip(notebooks(), names):
        if names.count(name) == 1:  # nbdev's naming: numeric prefix stripped (two notebooks may clash)
            assert (site / name).is_file(), f"{nb.name}: no page {name}"
        titled = [n for n, t in h1.items() if t == nb_title(nb)]
        assert titled, f"{nb.name}: no page has the title {nb_title(nb)!r}"
        pages |= set(titled)
    assert len(pages) == len(notebooks()), f"{len(notebooks())} notebooks but {len(pages)} pages: {sorted(pages)}"
    for name, dom in doms.items():  # the sidebar of every page lists every notebook's page
        missing = pages - set(dom.nav)
        assert not missing, f"{name}: sidebar lacks {sorted(missing)}"


def test_landing_page_is_the_readme(doms):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    readme = re.sub(r"^```.*?^```", "", readme, flags=re.M | re.S)  # headings only outside code blocks
    wanted = [plain(h) for h in re.findall(r"^#{1,3}\s+(.+)$", readme, re.M)]
    shown = {t for _, t in doms["index.html"].headings}
    assert wanted and not [h for h in wanted if h not in shown], f"README headings missing from index.html: {wanted} vs {shown}"
    first_par = plain(re.split(r"\n\s*\n", readme.split("\n", 1)[1].strip())[0])
    assert first_par in doms["index.html"].text


@pytest.mark.parametrize("page, module, names", [
    ("model.html", "enlace/model.py", ["Transformer", "Attention", "lm_loss", "param_count", "flops_per_token",
                                       "rope_tables", "apply_rope"]),
    ("engine.html", "enlace/engine.py", ["Engine", "KVCache", "sample_next_token", "complete"]),
])
def test_module_pages_show_the_api_docs(doms, page, module, names):
    dom = doms[page]
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    docs = {n.name: ast.get_docstring(n) for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    headings = dict(dom.headings)
    for name in names:
        assert docs.get(name), f"{name} has no docstring in {module}"
        slug = name.lower()
        assert headings.get(slug) == name, f"{page}: no heading {name!r} with id {slug!r}: {sorted(headings)[:40]}"
        assert plain(docs[name]) in dom.text, f"{page}: the docstring of {name} is not shown"
        kw = "class" if name[0].isupper() else "def"
        assert f"def {name}(" in dom.text or f"{kw} {name}" in dom.text, f"{page}: no signature for {name}"
    sources = [url for tag, _, url, a in dom.links if tag == "a" and f"{module}#L" in url]
    assert len(sources) >= len(names), f"{page}: the API docs should link to their source lines"


def test_run_notebook_page_keeps_its_usage(doms):
    "nbdev turns the title cell into front matter and drops it: the papermill usage must live in a cell of its own."
    assert "papermill nbs/train.ipynb" in doms["train.html"].text and "--log-output" in doms["train.html"].text


def test_no_broken_internal_link(site, doms):
    assert len(doms) > len(notebooks()) - 1
    bad = broken_links(site, doms)
    assert not bad, "broken internal links:\n" + "\n".join(bad)
    internal = sum(1 for d in doms.values() for _, _, url, _ in d.links if not urlsplit(url).scheme)
    assert internal > 10 * len(doms), "too few internal links: is the sidebar there?"
    remote = [f"{n}: {u}" for n, d in doms.items() for t, _, u, _ in d.links if t in ("script", "link") and urlsplit(u).scheme]
    assert not remote, f"the site must work offline, but loads: {remote}"


def test_link_checker_finds_broken_links(tmp_path):
    "The checker itself: a missing page, a missing anchor and a missing image are reported; good links are not."
    site = tmp_path / "site"; site.mkdir()
    (site / "a.html").write_text('<html><body><a href="b.html#ok">ok</a><a href="b.html#nope">x</a>'
                                 '<a href="gone.html">y</a><img src="img/none.png"><a href="#top">t</a>'
                                 '<a href="https://example.org/x">ext</a><h1 id="top">A</h1></body></html>')
    (site / "b.html").write_text('<html><body><h2 id="ok">B</h2></body></html>')
    bad = broken_links(site, dump_all(site, tmp_path))
    assert len(bad) == 3, bad
    assert any("nope" in b for b in bad) and any("gone.html" in b for b in bad) and any("none.png" in b for b in bad)
