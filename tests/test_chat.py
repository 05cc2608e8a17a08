"""`python -m enlace.chat`: one answer as JSON from a model file, and one-line refusals (exit 2) for a missing
model, a model without the chat specials, a bad time zone; the REPL reads stdin and leaves on /exit."""
import json
import os
import subprocess
import sys

import pytest
import torch

from enlace.chat import repl
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


def test_repl_survives_bytes_that_are_not_utf8(model_file):
    "Invalid UTF-8 from the terminal loses that line, never the conversation (it used to end the REPL)."
    r = subprocess.run([sys.executable, "-m", "enlace.chat", str(model_file), "--max-tokens", "4"], cwd=ROOT,
                       input=b"hola\n\xff\xfe roto\n/reset\n/exit\n", capture_output=True, timeout=120,
                       env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    out = r.stdout.decode()
    assert r.returncode == 0 and "Traceback" not in r.stderr.decode(), r.stderr.decode()
    assert "(esa línea no es texto UTF-8; escríbela otra vez)" in out and "(conversación nueva)" in out
    # the same when a `read` of its own raises on such bytes: that line is refused, the conversation goes on
    lines = iter([UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), "/exit"])

    def read(_):
        line = next(lines)
        if isinstance(line, Exception):
            raise line
        return line

    said = []
    repl(None, read=read, write=lambda *a, **k: said.append(a[0] if a else ""))
    assert "(esa línea no es texto UTF-8; escríbela otra vez)" in said


def test_refusals_are_one_line(cli, model_file, tmp_path):
    torch.manual_seed(0)
    cfg = load_layer(ROOT / "configs/model/smoke.yaml", "model").model_copy(update={"vocab_size": 256})
    old = export_model(Transformer(cfg), tmp_path / "old", Tokenizer.bytes(specials=False))
    cases = [([tmp_path / "nope.safetensors"], "model file not found"),
             ([old], "has no chat specials"),
             ([model_file, "--zone", "Mars/Olympus"], "unknown time zone 'Mars/Olympus'"),
             ([model_file, "--system", "ho\udcffla"], "--system: el texto no es UTF-8 válido")]  # bytes 'ho\xffla'
    for args, want in cases:
        r = cli("enlace.chat", *args, "--once", "hola")
        assert r.returncode == 2, (args, r.stderr)
        assert want in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = cli("enlace.chat", model_file, "--once", "ho\udcffla")  # argv's bytes that are not UTF-8
    assert r.returncode == 2 and r.stderr.strip() == "error: --once: el texto no es UTF-8 válido; escríbelo otra vez"


def test_fitting_a_long_conversation_tokenizes_each_message_once():
    "A 199-message request held the generation thread for 6 s: every dropped turn re-rendered the whole prompt."
    import random

    from enlace.chat import fit_prompt
    from enlace.conversation import random_conversation, render_prompt

    tok = Tokenizer.bytes()
    calls = []
    real = tok.encode
    tok.encode = lambda *a, **k: calls.append(1) or real(*a, **k)
    rng = random.Random(0)
    for seed in range(60):
        msgs = random_conversation(random.Random(seed), turns=rng.randint(1, 30))["messages"]
        if seed % 2 and msgs[-1]["role"] == "assistant":  # the rest end as they end: even after a tool result
            msgs = msgs + [{"role": "user", "content": "¿y ahora?"}]
        for limit in (64 + 8, 64 + 40, 64 + 400, 4096):
            calls.clear()
            ids, dropped = fit_prompt(msgs, tok, limit)
            assert len(calls) <= 2 * len(msgs) + 2, (len(calls), len(msgs))  # linear, whatever it drops
            system = msgs[:1] if msgs[0]["role"] == "system" else []
            assert ids == render_prompt(system + msgs[len(system) + dropped :], tok)  # the very prompt it stands for
            kept = msgs[len(system) + dropped :]
            assert dropped == 0 or kept[0]["role"] == "user" or len(kept) == 1


def test_int8_weights_answer_and_a_missing_torchao_is_one_line(cli, model_file, tmp_path, monkeypatch, capsys):
    "--int8 (torchao's int8 weights): the same kind of answer; without torchao, one line in Spanish and exit 2."
    pytest.importorskip("torchao", reason="torchao is not installed: pip install -e '.[int8]'")
    r = cli("enlace.chat", model_file, "--once", "hola", "--json", "--max-tokens", "8", "--int8",
            "--state", tmp_path / "state")
    assert r.returncode == 0, r.stderr
    assert set(json.loads(r.stdout)) == {"reply", "tool_calls"}
    import importlib.util

    from enlace import chat

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torchao" else real(name, *a))
    assert chat.main([str(model_file), "--once", "hola", "--int8", "--state", str(tmp_path / "s2")]) == 2
    err = capsys.readouterr().err
    assert err == "error: --int8 necesita torchao: pip install -e '.[int8]'\n", err
