import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
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


# --- a live `python -m enlace.serve` for the service and web page tests ---


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, token=None):
    "(status, JSON body) of a GET."
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


@contextlib.contextmanager
def served(model, state, *args, token=None):
    "Run `python -m enlace.serve` on a free port until /health answers (with `token`, if any); yields its base URL."
    port = free_port()
    log = (state.parent / f"serve-{port}.log").open("w+")
    cmd = [sys.executable, "-m", "enlace.serve", str(model), "--state", str(state), "--port", str(port),
           "--person", "ana", "--person", "luis", *map(str, args)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"enlace.serve exited with {proc.returncode}:\n{log.read()[-3000:]}")
            with contextlib.suppress(OSError):
                if get(url + "/health", token)[0] == 200:
                    break
            if time.monotonic() > deadline:
                log.seek(0)
                pytest.fail(f"enlace.serve did not answer /health in 60 s:\n{log.read()[-3000:]}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
