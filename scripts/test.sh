#!/usr/bin/env bash
# The whole test suite: exported code matches the notebooks, notebooks are clean, notebook tests, pytest.
source "$(dirname "$0")/_venv.sh"

snapshot() { find enlace nbs -type f \( -name '*.py' -o -name '*.ipynb' \) -not -path '*/.ipynb_checkpoints/*' -print0 | sort -z | xargs -0 sha256sum; }
before="$(snapshot)"
nbdev-export
nbdev-clean
after="$(snapshot)"
if [ "$before" != "$after" ]; then
  echo "FAIL: nbdev-export or nbdev-clean changed files; run them and commit the result:" >&2
  diff <(echo "$before") <(echo "$after") | grep '^[<>]' | awk '{print "  " $3}' | sort -u >&2
  exit 1
fi
echo "[test] nbdev-export and nbdev-clean change nothing"

nbdev-test --n-workers 2 --timing
echo "[test] notebook tests passed"

set +e
python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then echo "FAIL: pytest collected no tests" >&2; exit 1; fi
exit "$rc"
