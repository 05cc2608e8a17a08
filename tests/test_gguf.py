"""python -m enlace.export MODEL OUT.gguf --format gguf: one GGUF file that llama.cpp (through llama-cpp-python)
loads and that computes what ENLACE does (logits, greedy generation, tokenizer, chat template, stops), and one-line
refusals that write nothing. Without llama-cpp-python (bash scripts/llama_cpp.sh) the llama.cpp tests skip."""

import contextlib
import json
import random

import pytest
import torch

from enlace.checkpoint import export_model
from enlace.config import ModelConfig, load_layer
from enlace.conversation import CHAT_TEMPLATE, check_conversation, random_conversation, render, render_prompt
from enlace.engine import Engine
from enlace.model import Transformer
from enlace.tokenizer import Tokenizer, random_text, train_tokenizer

from conftest import ROOT

gguf = pytest.importorskip("gguf")  # the [gguf] extra (in dev: CI runs these)
import enlace.export as L  # noqa: E402

TEXTS = ["La casa de la pradera, ¿sí o no? Añade ñame y 2,5 kg de pan. «Hola», dijo él. 😀 ¡Qué día! 1887"] * 30


def needs_llama():
    return pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed: bash scripts/llama_cpp.sh")


@contextlib.contextmanager
def opened(mf, tmp_path, n_ctx=256):
    "The model file `mf` exported (unchecked) and opened in llama.cpp; closed after."
    needs_llama()
    llm = L.llama_model(L.export_gguf(mf, tmp_path / "m.gguf", check=False)["out"], n_ctx)
    try:
        yield llm
    finally:
        llm.close()


@pytest.fixture(scope="module")
def toks(tmp_path_factory):
    "Three tokenizers: BPE with numbers digit by digit, BPE with numbers whole, raw bytes (BPEs saved, as a model file)."
    out = {
        "digits": train_tokenizer(TEXTS, vocab_size=400),
        "numbers": train_tokenizer(TEXTS, vocab_size=400, split_digits=False),
        "bytes": Tokenizer.bytes(),
    }
    for k in ("digits", "numbers"):
        out[k].save(tmp_path_factory.mktemp(k), corpus_hash="test")
    return out


def cfg(vocab_size, **kw):
    base = load_layer(ROOT / "configs/model/smoke.yaml", "model").model_dump()
    small = dict(vocab_size=vocab_size, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=96, max_seq_len=256)
    return ModelConfig(**{**base, "tie_embeddings": False, "init_std": 0.5, **small, **kw})


def model_file(tmp_path, tok, chat=False, seed=0, **kw):
    "A random model (peaked logits: clear greedy choices) and its model file."
    torch.manual_seed(seed)
    model = Transformer(cfg(**{"vocab_size": tok.vocab_size, **kw})).eval()
    return model, export_model(model, tmp_path / "mf", tok, {"chat_template": CHAT_TEMPLATE} if chat else None)


def test_the_file_reads_back_with_the_sizes_the_vocab_and_the_types(tmp_path, toks):
    tok = toks["digits"]
    model, mf = model_file(tmp_path, tok, chat=True)
    for q, kind in (("f32", "F32"), ("f16", "F16"), ("q8_0", "Q8_0")):
        res = L.export_gguf(mf, tmp_path / f"m-{q}.gguf", q, check=False, log=lambda s: None)
        r = gguf.GGUFReader(res["out"])
        field = lambda k: r.fields[k].contents()  # noqa: E731
        assert field("general.architecture") == "qwen3" and field("qwen3.embedding_length") == 64
        assert (field("qwen3.attention.head_count"), field("qwen3.attention.head_count_kv")) == (4, 2)
        tokens = field("tokenizer.ggml.tokens")
        assert len(tokens) == model.cfg.vocab_size and tokens[tok.special("<|user|>")] == "<|user|>"
        assert field("tokenizer.ggml.pre") == "qwen35"  # numbers digit by digit (notebook 22)
        assert field("tokenizer.ggml.eos_token_id") == tok.special("<|end|>")
        assert field("tokenizer.ggml.eom_token_id") == tok.special("<|/tool_call|>")
        assert field("tokenizer.ggml.add_bos_token") is False  # the template writes <|bos|>
        types = {t.name: t.tensor_type.name for t in r.tensors}
        assert types["blk.1.ffn_down.weight"] == kind and types["blk.1.attn_k_norm.weight"] == "F32"
    sizes = [(tmp_path / f"m-{q}.gguf").stat().st_size for q in ("f32", "f16", "q8_0")]
    assert sizes[0] > sizes[1] > sizes[2]


def test_refusals_are_one_line_and_leave_nothing(tmp_path, toks, cli):
    _, mf = model_file(tmp_path, toks["digits"])
    out = tmp_path / "out" / "m.gguf"
    assert cli("enlace.export", mf, out, "--format", "gguf", "--no-check").returncode == 0
    for args, says in (
        ((), "already exists; pass --force"),
        (("--type", "q4_0"), "invalid choice: 'q4_0'"),
        (("--dtype", "bfloat16"), "--dtype is for --format transformers; --format gguf takes --type"),
    ):
        r = cli("enlace.export", mf, out, "--format", "gguf", "--no-check", *args)
        assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = cli("enlace.export", mf, tmp_path / "m.bin", "--format", "gguf", "--no-check")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "ending in .gguf" in r.stderr
    r = cli("enlace.export", mf, tmp_path / "hf", "--type", "q8_0")
    assert r.returncode == 2 and "--type is for --format gguf" in r.stderr
    assert sorted(p.name for p in out.parent.iterdir()) == ["m.gguf"] and not (tmp_path / "hf").exists()
    _, byte_mf = model_file(tmp_path / "b", toks["bytes"], tie_embeddings=True)
    r = cli("enlace.export", byte_mf, tmp_path / "b.gguf", "--format", "gguf")
    assert r.returncode == 2 and "byte-level model has no BPE merges" in r.stderr and r.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir() if "gguf" in p.name) == []  # no temporary file left


@pytest.mark.parametrize("kind", ["digits", "numbers"])
@pytest.mark.parametrize("qtype", ["f32", "f16", "q8_0"])
def test_llama_cpp_computes_what_enlace_does(tmp_path, toks, kind, qtype, cli):
    needs_llama()
    tok = toks[kind]
    model, mf = model_file(tmp_path, tok, tie_embeddings=kind == "numbers")  # both heads: tied and untied
    r = cli("enlace.export", mf, tmp_path / "m.gguf", "--format", "gguf", "--type", qtype)
    assert r.returncode == 0 and "vs ENLACE in llama.cpp" in r.stdout, r.stderr
    llm = L.llama_model(tmp_path / "m.gguf", 256)
    try:
        res = L.check_gguf(model, tok, tmp_path / "m.gguf", qtype, llm=llm)
        assert res["max_abs_logit_diff"] < res["tolerance"] and res["greedy_equal"] and res["tokens_equal"], res
        if qtype != "q8_0":  # q8_0 rounds the activations too: a generation may part ways (scripts/check_gguf.py)
            prompt = tok.document_ids("La casa de la pradera")
            same = L.rounded_like(model, qtype)  # the file's weights: a random model's near-ties are not the test
            ours = Engine(same, tok).generate_batch([prompt], max_tokens=32, temperature=0)[0]
            assert L.llama_greedy(llm, prompt, 32) == ours
    finally:
        llm.close()


def test_llama_cpp_tokenizes_500_strings_as_ours(tmp_path, toks):
    "Spanish pieces, combining marks, emoji, controls, odd spaces and any code point (qwen35: marks in the word)."
    tok = toks["digits"]
    model, mf = model_file(tmp_path, tok)
    with opened(mf, tmp_path, 64) as llm:
        rng = random.Random(0)
        extras = ["   ", "\n\n\t", "ñ", "😀🇪🇸", "¿¡", "1234,56", "  a  ", "\r\n", "—¿Qué?", "«¡Olé!»"]
        for _ in range(500):
            s = random_text(rng, rng.randint(0, 30)) + rng.choice(extras) + random_text(rng, rng.randint(0, 5))
            assert llm.tokenize(s.encode("utf-8"), add_bos=False, special=False) == tok.encode(s, specials=False), s
            assert llm.detokenize(tok.encode(s)).decode("utf-8", "replace") == tok.decode(tok.encode(s)), s


def test_the_chat_template_and_the_stops_in_llama_cpp(tmp_path, toks):
    "The file's template, as llama-cpp-python renders it for a chat completion, gives our ids; turns and calls stop."
    needs_llama()
    import llama_cpp
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    tok = toks["digits"]
    model, mf = model_file(tmp_path, tok, chat=True)
    with opened(mf, tmp_path) as llm:
        fmt = Jinja2ChatFormatter(llm.metadata["tokenizer.chat_template"], eos_token="<|end|>", bos_token="<|bos|>")
        rng = random.Random(3)
        for _ in range(50):
            c = check_conversation(random_conversation(rng))
            msgs = json.loads(json.dumps(c["messages"][:-1]).replace("<|", "< |"))  # no special typed as text
            prompt = fmt(messages=msgs).prompt  # what create_chat_completion tokenizes (no BOS added: the template's)
            assert llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True) == render_prompt(msgs, tok)
        eog = {s: llama_cpp.llama_vocab_is_eog(llm._model.vocab, tok.special(s)) for s in tok.specials}
        assert {s for s, e in eog.items() if e} == {"<|end|>", "<|/tool_call|>"}, eog


@pytest.mark.parametrize("wrong", ["rope", "pre", "unknown"])
def test_a_wrong_file_fails_the_check(tmp_path, toks, monkeypatch, wrong):
    "The check can fail: q and k rows in our RoPE order, Falcon's split, an unknown split: caught, nothing written."
    needs_llama()
    tok = toks["digits"]
    model, mf = model_file(tmp_path, tok)
    if wrong == "rope":
        monkeypatch.setattr(L, "rope_permutation", lambda hd: torch.arange(hd))
    else:  # Falcon's split (punctuation runs of their own), or one that llama.cpp does not know
        monkeypatch.setattr(L, "llama_pre", lambda tok: "falcon" if wrong == "pre" else "enlace")
    says = "llama.cpp cannot load the file" if wrong == "unknown" else "llama.cpp computes something else"
    with pytest.raises(L.ExportError, match=says):
        L.export_gguf(mf, tmp_path / "m.gguf", "f32")
    assert sorted(p.name for p in tmp_path.iterdir() if "gguf" in p.name) == []
