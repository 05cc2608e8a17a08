"Stage 1 end to end on a tiny corpus: text -> shards -> a time-budgeted run -> model file -> bits per byte -> samples."
import json
from pathlib import Path
import random
import subprocess
import sys

import nbformat
import pytest

from conftest import ROOT

from enlace.config import load_config
from enlace.prepare import prepare
from enlace.bpb import score_file
from enlace.checkpoint import load_model
from enlace.report import finish_run
from enlace.train import train

WORDS = "la casa del pueblo tenía una puerta verde y un patio con flores donde jugaban los niños cada tarde".split()
TINY = ["model.vocab_size=320", "model.d_model=64", "model.n_layers=2", "model.n_heads=2", "model.n_kv_heads=1", "model.d_ff=128",
        "train.seq_len=64", "train.batch_size=8", "train.warmup_steps=5", "train.eval_every=20", "train.ckpt_every=20", "train.eval_batches=2",
        "hardware.compile=false"]  # compiling would eat the 6-s budget of the timed test; test_compiled_run_matches_eager compiles


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    "A few hundred Spanish-like paragraphs in .txt files, prepared with a 320-token tokenizer."
    root = tmp_path_factory.mktemp("pretrain")
    rng = random.Random(0)
    (root / "raw").mkdir()
    for i in range(6):
        paras = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 40))).capitalize() + "." for _ in range(120)]
        (root / "raw" / f"libro{i}.txt").write_text("\n".join(paras), encoding="utf-8")
    prepare([str(root / "raw")], root / "shards", train_vocab=320, val_per_mille=200, workers=1, progress=False, log=lambda m: None,
            doc_chars=1000)  # ~100 short documents, ~20 of them in val
    return root


def test_time_budget_run_exports_a_model_that_scores_text(shards, tmp_path):
    cfg = load_config(ROOT / "configs/runs/pretrain-cpu.yaml", [f"data.path={shards / 'shards'}", "train.time_budget_s=6", *TINY])
    res = train(cfg, tmp_path / "run", progress=False, log=lambda m: None)
    assert res.elapsed_s < 9 and res.step > 20 and res.val_bpb < 4.0, res  # learned something in 6 s
    path = finish_run(tmp_path / "run", cfg, res.tokenizer, figures=False)["model_file"]
    model, tok, man = load_model(path)
    assert man["seq_len"] == 64 and man["tokenizer"]["type"] == "bpe" and tok.vocab_size == 320
    seen = tmp_path / "seen.txt"
    seen.write_text((shards / "raw/libro0.txt").read_text(encoding="utf-8")[:3000], encoding="utf-8")
    other = tmp_path / "other.txt"
    other.write_text("Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich. " * 20, encoding="utf-8")
    s, o = score_file(model, man, tok, seen), score_file(model, man, tok, other)
    assert s["bpb"] < 0.6 * o["bpb"], (s["bpb"], o["bpb"])  # its own kind of text is far cheaper than German

    # the CLI gives the same figures
    r = subprocess.run([sys.executable, "-m", "enlace.bpb", "--model", str(path), str(seen), str(other), "--json", "--no-progress"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [round(f["bpb"], 6) for f in out["files"]] == [round(s["bpb"], 6), round(o["bpb"], 6)]
    r = subprocess.run([sys.executable, "-m", "enlace.bpb", "--model", str(path), str(tmp_path / "nope.txt")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0 and "nope.txt: no such file" in r.stderr


def test_run_notebook_shows_samples_for_a_text_model(shards, tmp_path):
    out = tmp_path / "report.ipynb"
    over = json.dumps([f"data.path={shards / 'shards'}", *TINY])
    r = subprocess.run([sys.executable, "-m", "papermill", "nbs/train.ipynb", str(out), "-p", "run", "configs/runs/pretrain-cpu.yaml",
                        "-p", "hardware", "cpu", "-p", "tiny", "True", "-y", f"overrides: {over}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    text = "".join(o.get("text", "") for c in nbformat.read(out, as_version=4).cells for o in c.get("outputs", []))
    assert "model file:" in text and "Era una noche de invierno y" in text, text[-2000:]
    html = "".join(o.get("data", {}).get("text/html", "") for c in nbformat.read(out, as_version=4).cells
                   for o in c.get("outputs", []))
    assert "minimal-pairs" in html and "acc.subject_verb_person" in html and "chance" in html  # the card, as a table


def test_compiled_run_matches_eager(shards, tmp_path):
    "pretrain-cpu compiles: the compiled model trains like the eager one (float32, same steps) and resumes from its checkpoint."
    fixed = [f"data.path={shards / 'shards'}", *TINY, "hardware.dtype=float32", "train.time_budget_s=null", "train.max_steps=6", "train.warmup_steps=1",
             "train.ckpt_every=3"]
    losses = {}
    for c in ("false", "true"):
        cfg = load_config(ROOT / "configs/runs/pretrain-cpu.yaml", [*fixed, f"hardware.compile={c}"])
        train(cfg, tmp_path / c, progress=False, log=lambda m: None)
        losses[c] = [json.loads(line)["loss"] for line in (tmp_path / c / "metrics.jsonl").read_text().splitlines()]
    assert len(losses["true"]) == 6 and losses["true"] == pytest.approx(losses["false"], rel=1e-4), losses
    cfg = load_config(ROOT / "configs/runs/pretrain-cpu.yaml", [*fixed, "hardware.compile=true", "train.max_steps=9"])
    res = train(cfg, tmp_path / "true", progress=False, log=lambda m: None)  # resumes at step 6 (the compiled model's own weights)
    assert res.step == 9 and len((tmp_path / "true" / "metrics.jsonl").read_text().splitlines()) == 9


def test_cli_run_ends_with_the_same_summary_as_the_notebook_run(shards, tmp_path):
    "One door out of a run: `python -m enlace.train` and the run notebook write the same summary.json."
    steps = [f"data.path={shards / 'shards'}", *TINY, "train.time_budget_s=null", "train.max_steps=12", "hardware.dtype=float32"]
    r = subprocess.run([sys.executable, "-m", "enlace.train", "configs/runs/pretrain-cpu.yaml", *steps,
                        "--out", str(tmp_path / "cli"), "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    printed = json.loads(r.stdout)
    cli = json.loads((tmp_path / "cli" / "summary.json").read_text())
    assert printed["summary"] == str(tmp_path / "cli" / "summary.json") and printed["model_file"] == cli["model_file"]
    assert len(cli["samples"]) == 4 and {"val_bpb", "heldout", "metrics", "model_file"} <= set(cli), cli
    assert "minimal-pairs" in cli["card"] and "card.minimal-pairs.acc" in cli["metrics"]  # the card (bpb: with data/heldout)
    r = subprocess.run([sys.executable, "-m", "papermill", "nbs/train.ipynb", str(tmp_path / "report.ipynb"),
                        "-p", "run", "configs/runs/pretrain-cpu.yaml", "-p", "hardware", "cpu-bf16", "-p", "tiny", "False",
                        "-p", "out", str(tmp_path / "nb"), "-p", "overrides", " ".join(steps)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    nb = json.loads((tmp_path / "nb" / "summary.json").read_text())
    same = lambda s: {k: v for k, v in s.items() if k not in ("model_file", "mlflow")}
    assert same(nb) == same(cli)
    assert Path(nb["model_file"]).name == Path(cli["model_file"]).name  # the same weights, bit for bit


def test_a_model_vocab_that_is_not_the_tokenizers_is_refused_in_one_line(shards, tmp_path):
    "The shard folder carries its tokenizer: model.vocab_size must be its size, and the error says which size."
    over = [f"data.path={shards / 'shards'}", *TINY, "model.vocab_size=400", "train.time_budget_s=null", "train.max_steps=12"]
    r = subprocess.run([sys.executable, "-m", "enlace.train", "configs/runs/pretrain-cpu.yaml", *over, "--out",
                        str(tmp_path / "run"), "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r.stderr
    assert "model.vocab_size: 400 differs from the 320 tokens" in r.stderr and "set model.vocab_size=320" in r.stderr
