#!/usr/bin/env python3
"""Format the exported cells of the notebooks with black (120 columns), then nbdev-export: the house style.

One statement per line, no `;`, compound statements on lines of their own, at most 120 columns where black can
wrap (strings and comments it cannot wrap are checked by tests/test_layout.py). Only `#| export` cells are
touched: tests and teaching cells keep their own layout. Run it before a commit:
    .venv/bin/python scripts/format.py [--check] [NOTEBOOK...]
Exit codes: 0 formatted (or already formatted with --check), 1 with --check when a cell would change.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

import black

ROOT = Path(__file__).resolve().parent.parent
MODE = black.Mode(line_length=120, target_versions={black.TargetVersion.PY310})
EXPORT = ("#| export", "#|export", "#| exporti", "#| exports")


def format_source(src: str) -> str:
    "The cell's code as black writes it; the nbdev directive line is kept as the first line."
    head, _, body = src.partition("\n")
    out = black.format_str(body, mode=MODE).rstrip("\n")
    return f"{head}\n{out}"


def format_notebook(path: Path, check: bool) -> list[int]:
    "Format the export cells of one notebook in place (unless `check`); returns the indices of changed cells."
    nb = json.loads(path.read_text(encoding="utf-8"))
    changed = []
    for i, c in enumerate(nb["cells"]):
        src = "".join(c["source"])
        if c["cell_type"] != "code" or not src.startswith(EXPORT):
            continue
        new = format_source(src)
        if new != src:
            changed.append(i)
            lines = new.split("\n")
            c["source"] = [line + "\n" for line in lines[:-1]] + [lines[-1]]
    if changed and not check:
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return changed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: nbs/*.ipynb")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a cell would change")
    a = ap.parse_args()
    todo = a.notebooks or sorted((ROOT / "nbs").glob("*.ipynb"))
    dirty = {p: cells for p in todo if (cells := format_notebook(p, a.check))}
    for p, cells in dirty.items():
        print(f"{'would format' if a.check else 'formatted'} {p.name}: cells {cells}")
    if a.check:
        return 1 if dirty else 0
    # clean first: it gives new cells their ids, and the export names each cell by its id (else a random one)
    subprocess.run(["nbdev-clean"], cwd=ROOT, check=True)
    subprocess.run(["nbdev-export"], cwd=ROOT, check=True)
    subprocess.run(["nbdev-clean"], cwd=ROOT, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
