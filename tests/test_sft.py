"""Supervised fine-tuning through the one trainer: init_from a base model file, the assistant task or a folder of
conversations as data, exact resume, the task's report in summary.json, and one-line refusals for bad input."""
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from enlace.checkpoint import export_model, load_model
from enlace.config import load_config, load_layer
from enlace.conversation import render, write_conversations
from enlace.model import Transformer
from enlace.report import finish_run
from enlace.tasks.assistant.data import conversations
from enlace.tokenizer import Tokenizer

from conftest import ROOT

SMALL = ["train.max_steps=6", "train.ckpt_every=3", "train.eval_every=3", "train.warmup_steps=2", "train.batch_size=4",
         "hardware.batch_size=4", "train.eval_batches=2", "train.keep_last=3", "train.seq_len=256",
         "model.vocab_size=267"]  # the base here reads bytes


def sft(out, base, *extra, run="configs/runs/sft-smoke-cpu.yaml"):
    cmd = [sys.executable, "-m", "enlace.train", run, f"init_from={base}", *SMALL, *extra, "--out", str(out),
           "--no-progress", "--no-report"]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def weights(out, step):
    return hashlib.sha256((out / f"checkpoints/step_{step:07d}/model.safetensors").read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    torch.manual_seed(0)
    cfg = load_layer(ROOT / "configs/model/smoke.yaml", "model")
    return export_model(Transformer(cfg), tmp_path_factory.mktemp("base"), Tokenizer.bytes())


def test_sft_starts_from_the_base_and_resumes_exactly(tmp_path, base):
    r = sft(tmp_path, base)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2, 3, 4, 5, 6] and rows[-1]["val_loss"] is not None
    full = weights(tmp_path, 6)
    shutil.rmtree(tmp_path / "checkpoints" / "step_0000006")  # as if killed after step 3's checkpoint
    r = sft(tmp_path, base)
    assert r.returncode == 0, r.stderr
    assert "resumed from" in r.stderr and weights(tmp_path, 6) == full


def test_the_base_weights_are_loaded(tmp_path, base):
    r = sft(tmp_path, base, "train.max_steps=4", "train.lr=1e-9", "train.warmup_steps=1", "train.decay_frac=0.25")
    assert r.returncode == 0, r.stderr
    from safetensors.torch import load_file
    tuned = load_file(tmp_path / "checkpoints/step_0000004/model.safetensors")
    start = load_model(base)[0].state_dict()
    assert all(torch.allclose(tuned[k], start[k], atol=1e-6) for k in start)


def test_finish_reports_the_assistant_figures(tmp_path, base):
    r = sft(tmp_path, base, "train.max_steps=5")
    assert r.returncode == 0, r.stderr
    cfg = load_config(ROOT / "configs/runs/sft-smoke-cpu.yaml", [f"init_from={base}", *SMALL, "train.max_steps=5"])
    tok = load_model(base)[1]  # fine-tuning keeps the base's tokenizer: the one the trainer hands to the report
    s = finish_run(tmp_path, cfg, tok, tiny=True, tracking=False, log=lambda m: None)
    assert "shrunk" not in s  # no time budget given: the whole (tiny) evaluation
    assert {"heldout.tool_choice", "heldout.arguments"} <= set(s["metrics"])
    assert 0 <= s["metrics"]["heldout.tool_choice"] <= 1 and s["assistant"]["n"] == 64
    assert s["memory"]["n"] == 64 and 0 < s["memory"]["recall_n"] < 64  # the memory block, measured on its own
    assert 0 <= s["metrics"]["heldout.memory_ignore_tool_choice"] <= 1
    assert (tmp_path / "transcript.md").is_file() and len(s["transcript"]) == 3
    man = json.loads(Path(s["model_file"]).with_suffix(".json").read_text())
    assert man["chat_template"].startswith("{{- '<|bos|>'") and man["init_from"] == str(base)
    dropped = json.loads((tmp_path / "data.json").read_text())["dropped"]  # train.seq_len=256 here: some do not fit
    assert dropped["train"] > 0 and json.loads((tmp_path / "summary.json").read_text())["dropped"] == dropped


def test_a_run_by_time_keeps_time_for_its_report_and_says_what_it_shrank(tmp_path, base):
    "train.time_budget_s bounds the whole run: training stops early for the report, whose evaluation shrinks to fit."
    cmd = [sys.executable, "-m", "enlace.train", "configs/runs/sft-smoke-cpu.yaml", f"init_from={base}", *SMALL,
           "train.max_steps=100000", "train.time_budget_s=20", "--out", str(tmp_path), "--no-progress"]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    # 20 s: the 20 000 training conversations alone take ~9 s to draw on 2 cores (docs/LOG.md 2026-12-06, noche)
    assert "time budget 20 s: training until 15 s, 5 s kept for the report" in r.stderr, r.stderr
    assert json.loads(r.stdout)["elapsed_s"] < 20  # training stopped inside the budget, with the report's share left
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["shrunk"][0].startswith("tool choice: ") and s["shrunk"][0].endswith(
        " of 1000 held-out conversations (train.time_budget_s)"), s["shrunk"]
    assert s["assistant"]["n"] < 1000 and "report: evaluation shrunk to fit train.time_budget_s" in r.stderr
    assert not (tmp_path / ".lock").exists()  # the folder is released, and its lock file goes with it


def test_conversations_folder_and_its_refusals(tmp_path, base):
    data = tmp_path / "chat"
    data.mkdir()
    convs = conversations(40, "train", seed=3)
    long = {"messages": [{"role": "user", "content": "x" * 400}, {"role": "assistant", "content": "y"}]}
    write_conversations(data / "train.jsonl", convs + [long])
    write_conversations(data / "val.jsonl", convs[:8])
    args = ["data.source=conversations", f"data.path={data}", "train.max_steps=5"]
    r = sft(tmp_path / "run", base, *args)
    assert r.returncode == 0, r.stderr
    tok = Tokenizer.bytes()
    too_long = lambda cs: sum(len(render(c, tok)[0]) > 257 for c in cs)  # rows hold seq_len + 1 tokens
    want = {"train": too_long(convs + [long]), "val": too_long(convs[:8])}
    assert want["train"] > want["val"] and want["train"] >= 1
    assert f"train: dropped {want['train']} of 41 conversations longer than train.seq_len=256" in r.stderr
    assert json.loads((tmp_path / "run" / "data.json").read_text())["dropped"] == want
    (data / "val.jsonl").write_text('{"messages": [{"role": "user", "content": "hola"}]}\n')
    torch.manual_seed(0)
    old_cfg = load_layer(ROOT / "configs/model/smoke.yaml", "model").model_copy(update={"vocab_size": 256})
    old = export_model(Transformer(old_cfg), tmp_path / "old", Tokenizer.bytes(specials=False))
    cases = [([f"init_from={base}", *args], f"data.path: {data}/val.jsonl:1: no assistant turn"),
             ([f"init_from={old}", "model.vocab_size=256"], "has no chat specials"),
             ([f"init_from={tmp_path}/nope.safetensors"], "model file not found"),
             ([f"init_from={base}", "model.d_model=64", "model.n_heads=2", "model.n_kv_heads=1"], "init_from: model.d_model is 128")]
    for extra, want in cases:
        r = sft(tmp_path / "bad", extra[0].split("=", 1)[1], *extra[1:])
        assert r.returncode == 2, (extra, r.stderr)
        assert want in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
