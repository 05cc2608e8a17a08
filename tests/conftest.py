import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cli():
    "Run `python -m MODULE ARGS...` from the repo root; returns the CompletedProcess."
    def run(*args, timeout=300, env=None, cwd=ROOT):
        return subprocess.run([sys.executable, "-m", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, **(env or {})})
    return run
