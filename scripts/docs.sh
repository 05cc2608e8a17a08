#!/usr/bin/env bash
# Build the docs site into _docs/: one page per notebook in nbs/ (API docs of the exported functions included),
# the README as the landing page (_docs/index.html). With Quarto on PATH this is nbdev's own `nbdev-docs`;
# without it (Quarto cannot be installed on our machines) scripts/build_docs.py processes the notebooks with
# nbdev's doc processors and renders them with nbconvert, offline. ENLACE_DOCS_OFFLINE=1 forces the offline
# build. Extra args go to the builder that runs (offline: --force, --jobs N, --out DIR, --proc DIR).
source "$(dirname "$0")/_venv.sh"
if [ "${ENLACE_DOCS_OFFLINE:-0}" != 1 ] && command -v quarto >/dev/null 2>&1; then
  echo "[docs] quarto found: nbdev-docs"
  nbdev-docs "$@"
else
  python scripts/build_docs.py "$@"
fi
