"""python -m enlace.export: a folder that transformers loads as Qwen3ForCausalLM and that computes what ENLACE does
(logits, greedy generation, tokenizer, chat template), and one-line refusals that write nothing."""
import json
import random
import shutil

import pytest
import torch

from enlace.checkpoint import export_model
from enlace.config import ModelConfig, load_layer
from enlace.conversation import CHAT_TEMPLATE, check_conversation, random_conversation, render, render_prompt
from enlace.engine import Engine
from enlace.export import ExportError, export, rope_permutation
from enlace.model import Transformer, apply_rope, rope_tables
from enlace.tokenizer import Tokenizer, random_text, train_tokenizer

from conftest import ROOT

transformers = pytest.importorskip("transformers")  # the [hf] extra (in dev: CI runs these)
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

TEXTS = ["La casa de la pradera, ¿sí o no? Añade ñame y 2,5 kg de pan. «Hola», dijo él. 😀 ¡Qué día!"] * 30


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    tok = train_tokenizer(TEXTS, vocab_size=400)
    tok.save(tmp_path_factory.mktemp("tok"), corpus_hash="test")  # a model file carries a saved tokenizer
    return tok


def cfg(vocab_size, **kw):
    base = load_layer(ROOT / "configs/model/smoke.yaml", "model").model_dump()
    small = dict(vocab_size=vocab_size, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=96, max_seq_len=256)
    return ModelConfig(**{**base, "tie_embeddings": False, **small, **kw})


def exported(tmp_path, c, tok, name="hf", chat=False, seed=0, **kw):
    "A random model of config `c`, its model file and its export: (model, folder)."
    torch.manual_seed(seed)
    model = Transformer(c).eval()
    mf = export_model(model, tmp_path / f"mf-{name}", tok, {"chat_template": CHAT_TEMPLATE} if chat else None)
    export(mf, tmp_path / name, **kw)
    return model, tmp_path / name


def hf_model(folder):
    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def test_rope_permutation_with_transformers_own_rotation():
    "Our rotation of adjacent pairs, reordered, is Qwen3's rotate_half rotation of the reordered vector."
    from transformers.models.qwen3.modeling_qwen3 import apply_rotary_pos_emb

    hd, T = 32, 50
    q, k = torch.randn(2, 1, T, 4, hd, dtype=torch.float64).unbind(0)  # (B, T, H, D)
    freqs = rope_tables(hd, T, 10000.0)
    ang = torch.cat([freqs.angle(), freqs.angle()], dim=-1)[None].double()  # (1, T, D) as Qwen3RotaryEmbedding
    perm = rope_permutation(hd)
    hq, hk = apply_rotary_pos_emb(q[..., perm].transpose(1, 2), k[..., perm].transpose(1, 2), ang.cos(), ang.sin())
    assert torch.allclose(apply_rope(q, freqs)[..., perm], hq.transpose(1, 2), atol=1e-6)  # the table is complex64
    assert torch.allclose(apply_rope(k, freqs)[..., perm], hk.transpose(1, 2), atol=1e-6)
    assert not torch.allclose(apply_rope(q, freqs), hq.transpose(1, 2), atol=1e-3)  # without it: wrong


@pytest.mark.parametrize("kind,kw", [("bpe", {}), ("bpe", {"tie_embeddings": True, "n_kv_heads": 4}),
                                     ("bytes", {"tie_embeddings": True, "n_kv_heads": 1, "rope_theta": 500.0})])
def test_logits_equal_with_and_without_padding(tmp_path, bpe, kind, kw):
    tok = bpe if kind == "bpe" else Tokenizer.bytes()
    model, folder = exported(tmp_path, cfg(tok.vocab_size, **kw), tok)
    hf = hf_model(folder)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, tok.vocab_size, (4, 100), generator=g)
    with torch.no_grad():
        ours = model(ids)
        assert (ours - hf(ids).logits).abs().max() < 1e-4
        full = torch.randint(0, tok.vocab_size, (1, model.cfg.max_seq_len), generator=g)  # every position RoPE has
        assert (model(full) - hf(full).logits).abs().max() < 1e-4
        lengths = [100, 37, 64, 5]
        pad = tok.special("<|pad|>")
        for side in ("right", "left"):  # a batch of unequal rows, padded, with the attention mask
            batch = torch.full((4, 100), pad)
            mask = torch.zeros(4, 100, dtype=torch.long)
            for r, n in enumerate(lengths):
                cols = slice(0, n) if side == "right" else slice(100 - n, 100)
                batch[r, cols], mask[r, cols] = ids[r, :n], 1
            got = hf(batch, attention_mask=mask).logits
            for r, n in enumerate(lengths):
                cols = slice(0, n) if side == "right" else slice(100 - n, 100)
                assert (model(ids[r : r + 1, :n])[0] - got[r, cols]).abs().max() < 1e-4, (side, r)


def test_greedy_generation_is_identical_for_32_tokens(tmp_path, bpe):
    # init_std 0.5: peaked logits, so greedy choices are not near-ties that float noise could flip
    model, folder = exported(tmp_path, cfg(bpe.vocab_size, init_std=0.5), bpe)
    hf = hf_model(folder)
    prompt = bpe.document_ids("La casa de la pradera")
    ours = Engine(model, bpe).generate_batch([prompt], max_tokens=32, temperature=0)[0]
    # no stop token on either side (the engine was given none): 32 tokens, <|eos|> included if it comes
    hf.generation_config.eos_token_id = None
    theirs = hf.generate(torch.tensor([prompt]), max_new_tokens=32, do_sample=False, pad_token_id=2)
    assert len(ours) == 32
    assert theirs[0, len(prompt) :].tolist() == ours


@pytest.mark.parametrize("kind", ["bpe", "bytes"])
def test_tokenizer_encodes_and_decodes_500_strings_as_ours(tmp_path, bpe, kind):
    tok = bpe if kind == "bpe" else Tokenizer.bytes()
    _, folder = exported(tmp_path, cfg(tok.vocab_size), tok, check=False)
    ht = AutoTokenizer.from_pretrained(folder)
    rng = random.Random(0)
    specials = list(tok.specials)
    extras = ["   ", "\n\n\t", "ñ", "😀🇪🇸", "¿¡", "1234,56", "  a  ", "\r\n", *specials]
    for i in range(500):
        s = random_text(rng, rng.randint(0, 30)) + rng.choice(extras) + random_text(rng, rng.randint(0, 5))
        ids = tok.encode(s)
        assert ht.encode(s, add_special_tokens=False) == ids, s
        assert ht(s).input_ids == tok.document_ids(s), s  # with specials: a document's start, as in the shards
        assert ht.decode(ids) == tok.decode(ids) == s, s


@pytest.mark.parametrize("kind", ["bpe", "bytes"])
def test_apply_chat_template_gives_our_ids_on_50_conversations(tmp_path, bpe, kind):
    tok = bpe if kind == "bpe" else Tokenizer.bytes()
    _, folder = exported(tmp_path, cfg(tok.vocab_size), tok, chat=True, check=False)
    ht = AutoTokenizer.from_pretrained(folder)
    assert ht.eos_token == "<|end|>"
    stops = [tok.special(s) for s in ("<|end|>", "<|/tool_call|>", "<|eos|>")]  # a finished tool call stops too
    assert json.loads((folder / "config.json").read_text())["eos_token_id"] == stops
    assert json.loads((folder / "generation_config.json").read_text())["eos_token_id"] == stops
    rng = random.Random(3)
    for _ in range(50):
        c = check_conversation(random_conversation(rng))
        # a literal "<|end|>" inside a message is text to ENLACE but a special to transformers (notebook 22)
        c = json.loads(json.dumps(c).replace("<|end|>", "fin"))
        got = ht.apply_chat_template(c["messages"], tokenize=True)["input_ids"]
        assert got == render(c, tok)[0]
        prompt = ht.apply_chat_template(c["messages"][:-1], tokenize=True, add_generation_prompt=True)["input_ids"]
        assert prompt == render_prompt(c["messages"][:-1], tok)


def test_chat_template_takes_openai_shaped_tool_calls(tmp_path, bpe):
    _, folder = exported(tmp_path, cfg(bpe.vocab_size), bpe, chat=True, check=False)
    ht = AutoTokenizer.from_pretrained(folder)
    call = {"name": "list_add", "arguments": {"list": "compra", "items": ["leche", "pan"]}}
    ours = {"messages": [{"role": "user", "content": "añade leche y pan"},
                         {"role": "assistant", "content": "", "tool_calls": [call]},
                         {"role": "tool", "content": '{"ok": true}'}, {"role": "assistant", "content": "Hecho."}]}
    want = render(ours, bpe)[0]
    for args in (call["arguments"], json.dumps(call["arguments"], ensure_ascii=False, separators=(",", ":"))):
        theirs = json.loads(json.dumps(ours))
        theirs["messages"][1]["tool_calls"] = [{"type": "function", "id": "c1",
                                                "function": {"name": call["name"], "arguments": args}}]
        assert ht.apply_chat_template(theirs["messages"], tokenize=True)["input_ids"] == want


def test_a_full_disk_while_writing_the_weights_is_one_line_and_leaves_nothing(tmp_path, bpe, monkeypatch):
    "safetensors reports 'No space left on device' in its own exception, not an OSError: it was a traceback."
    from safetensors import SafetensorError

    import enlace.export

    torch.manual_seed(0)
    mf = export_model(Transformer(cfg(bpe.vocab_size)), tmp_path / "run", bpe)

    def full(*args, **kw):
        raise SafetensorError("Error while serializing: IoError(Os { code: 28, message: \"No space left on device\" })")

    monkeypatch.setattr(enlace.export, "save_file", full)
    with pytest.raises(ExportError, match="No space left on device.*free some space") as e:
        export(mf, tmp_path / "hf", check=False)
    assert "\n" not in str(e.value) and sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_force_replaces_an_earlier_export_only(tmp_path, bpe, cli):
    torch.manual_seed(0)
    mf = export_model(Transformer(cfg(bpe.vocab_size)), tmp_path / "run", bpe)
    assert cli("enlace.export", mf, tmp_path / "hf", "--no-check").returncode == 0
    r = cli("enlace.export", mf, tmp_path / "hf", "--no-check", "--force")
    assert r.returncode == 0, r.stderr  # an earlier export: replaced
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    for target in (tmp_path / "mine", tmp_path / "run"):  # a folder of someone's, the model's own run folder
        r = cli("enlace.export", mf, target, "--no-check", "--force")
        assert r.returncode == 2 and "not an earlier export" in r.stderr and len(r.stderr.splitlines()) == 1
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep" and mf.is_file()
    # a folder of someone's that merely holds a file named enlace.json: its other files are never deleted
    (tmp_path / "app" / "src").mkdir(parents=True)
    for name, text in (("enlace.json", "{}"), ("main.py", "print('hola')"), ("src/util.py", "x = 1")):
        (tmp_path / "app" / name).write_text(text)
    r = cli("enlace.export", mf, tmp_path / "app", "--no-check", "--force")
    assert r.returncode == 2 and "holds files an export does not write (main.py, src)" in r.stderr, r.stderr
    assert len(r.stderr.splitlines()) == 1 and (tmp_path / "app" / "src" / "util.py").read_text() == "x = 1"
    assert (tmp_path / "app" / "main.py").read_text() == "print('hola')"
    # a folder beside the target that looks like a half export but is not one of ours: left alone, no traceback
    (tmp_path / ".hf2.tmp-abc").mkdir()
    r = cli("enlace.export", mf, tmp_path / "hf2", "--no-check")
    assert r.returncode == 0 and (tmp_path / ".hf2.tmp-abc").is_dir(), r.stderr
    cfgjson = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert cfgjson["bos_token_id"] == bpe.special("<|eos|>")  # a document's start, as the harness will prefix


def test_save_pretrained_round_trip(tmp_path, bpe):
    model, folder = exported(tmp_path, cfg(bpe.vocab_size), bpe, chat=True)
    hf, ht = hf_model(folder), AutoTokenizer.from_pretrained(folder)
    hf.save_pretrained(tmp_path / "again")
    ht.save_pretrained(tmp_path / "again")
    hf2, ht2 = hf_model(tmp_path / "again"), AutoTokenizer.from_pretrained(tmp_path / "again")
    ids = torch.randint(0, bpe.vocab_size, (2, 40))
    with torch.no_grad():
        assert (hf2(ids).logits - model(ids)).abs().max() < 1e-4
    s = "¿Añado leche? <|end|> 😀"
    assert ht2(s).input_ids == ht(s).input_ids == bpe.document_ids(s)
    msgs = [{"role": "user", "content": "hola"}]
    assert ht2.apply_chat_template(msgs, add_generation_prompt=True)["input_ids"] == render_prompt(msgs, bpe)


def test_bfloat16_export_matches_rounded_weights(tmp_path, bpe):
    model, folder = exported(tmp_path, cfg(bpe.vocab_size), bpe, dtype="bfloat16")
    assert json.loads((folder / "config.json").read_text())["torch_dtype"] == "bfloat16"
    from safetensors import safe_open

    with safe_open(folder / "model.safetensors", "pt") as f:
        assert f.get_tensor("model.embed_tokens.weight").dtype == torch.bfloat16
    rounded = Transformer(model.cfg).eval()  # our model with its weights rounded to bfloat16, computed in float32
    rounded.load_state_dict({k: v.bfloat16().float() for k, v in model.state_dict().items()})
    ids = torch.randint(0, bpe.vocab_size, (2, 50))
    with torch.no_grad():
        assert (hf_model(folder)(ids).logits - rounded(ids)).abs().max() < 1e-4
        assert (hf_model(folder)(ids).logits - model(ids)).abs().max() > 1e-4  # the rounding is really there


def test_the_tolerance_follows_the_logits_scale_and_a_wrong_export_is_still_refused(tmp_path, bpe, monkeypatch):
    "A trained model's logits are large (|logit| ~ 30): a faithful export differs by ~1e-3 there, and was refused."
    torch.manual_seed(0)
    model = Transformer(cfg(bpe.vocab_size)).eval()
    with torch.no_grad():  # large activations and logits, as training grows them (a fresh model's are small)
        for name, p in model.named_parameters():
            if p.dim() == 2 and "lm_head" not in name:
                p.mul_(3.0)
        model.lm_head.weight.normal_(0.0, 20.0)
    mf = export_model(model, tmp_path / "big", bpe)
    for dtype in ("float32", "bfloat16"):
        res = export(mf, tmp_path / f"hf-{dtype}", dtype=dtype)
        assert res["max_abs_logit"] > 100 and res["tolerance"] == pytest.approx(1e-4 * res["max_abs_logit"])
        assert res["max_abs_logit_diff"] > 1e-4, res  # what the absolute bound refused
        assert res["max_abs_logit_diff"] <= res["tolerance"] and res["greedy_equal"] and res["tokens_equal"], res
    # a real mistake (RoPE's features in the wrong order) is off by far more than that: refused, nothing written
    monkeypatch.setattr("enlace.export.rope_permutation", lambda head_dim: torch.arange(head_dim))
    with pytest.raises(ExportError, match="transformers computes something else"):
        export(mf, tmp_path / "wrong")
    assert not (tmp_path / "wrong").exists()


def test_refusals_are_one_line_and_write_nothing(tmp_path, bpe, cli):
    c = cfg(bpe.vocab_size)
    torch.manual_seed(0)
    mf = export_model(Transformer(c), tmp_path / "mf", bpe)
    # an architecture Qwen3 would load but compute differently
    torch.manual_seed(0)
    nq = export_model(Transformer(c.model_copy(update={"qk_norm": False})), tmp_path / "nq", bpe)
    r = cli("enlace.export", nq, tmp_path / "out")
    assert r.returncode == 2 and "no exact Qwen3 equivalent" in r.stderr and len(r.stderr.splitlines()) == 1
    assert not (tmp_path / "out").exists()
    # a weight float16 cannot hold
    model = Transformer(c)
    with torch.no_grad():
        model.blocks[1].mlp.w_down.weight[0, 0] = 1e5
    big = export_model(model, tmp_path / "big", bpe)
    r = cli("enlace.export", big, tmp_path / "out", "--dtype", "float16")
    assert r.returncode == 2 and "model.layers.1.mlp.down_proj.weight" in r.stderr and "float16" in r.stderr
    assert not (tmp_path / "out").exists()
    # an existing folder is kept unless --force
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("keep")
    r = cli("enlace.export", mf, tmp_path / "out")
    assert r.returncode == 2 and "--force" in r.stderr and (tmp_path / "out" / "mine.txt").read_text() == "keep"
    # a model file without its tokenizer
    shutil.rmtree(next((tmp_path / "mf").glob("tokenizer-*")))
    r = cli("enlace.export", mf, tmp_path / "out2")
    assert r.returncode == 2 and "tokenizer" in r.stderr and len(r.stderr.splitlines()) == 1
    assert not (tmp_path / "out2").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left behind
