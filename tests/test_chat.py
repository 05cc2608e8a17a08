"""`python -m enlace.chat`: one answer as JSON from a model file, and one-line refusals (exit 2) for a missing
model, a model without the chat specials, a bad time zone; the REPL reads stdin and leaves on /exit."""
import json
import subprocess
import sys

import pytest
import torch

from enlace.checkpoint import export_model
from enlace.config import load_layer
from enlace.model import Transformer
from enlace.tokenizer import Tokenizer

from conftest import ROOT


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    torch.manual_seed(0)
    cfg = load_layer(ROOT / "configs/model/smoke.yaml", "model")
    return export_model(Transformer(cfg), tmp_path_factory.mktemp("chat"), Tokenizer.bytes())


def test_once_json_prints_one_object(cli, model_file, tmp_path):
    r = cli("enlace.chat", model_file, "--once", "¿cuánto es 12 por 7?", "--json", "--max-tokens", "40",
            "--state", tmp_path / "state")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) == {"reply", "tool_calls"} and isinstance(out["reply"], str) and isinstance(out["tool_calls"], list)
    for call in out["tool_calls"]:
        assert set(call) == {"name", "arguments", "result"}


def test_repl_reads_commands_and_exits(model_file):
    r = subprocess.run([sys.executable, "-m", "enlace.chat", str(model_file), "--max-tokens", "8"], cwd=ROOT,
                       input="/tools\nhola\n/reset\n/exit\n", capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "calculator(expression)" in r.stdout and "(conversación nueva)" in r.stdout and "enlace> " in r.stdout


def test_refusals_are_one_line(cli, model_file, tmp_path):
    torch.manual_seed(0)
    cfg = load_layer(ROOT / "configs/model/smoke.yaml", "model").model_copy(update={"vocab_size": 256})
    old = export_model(Transformer(cfg), tmp_path / "old", Tokenizer.bytes(specials=False))
    cases = [([tmp_path / "nope.safetensors"], "model file not found"),
             ([old], "has no chat specials"),
             ([model_file, "--zone", "Mars/Olympus"], "unknown time zone 'Mars/Olympus'")]
    for args, want in cases:
        r = cli("enlace.chat", *args, "--once", "hola")
        assert r.returncode == 2, (args, r.stderr)
        assert want in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
