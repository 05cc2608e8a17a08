"""python -m enlace.model's memory estimate against the peak of live tensors measured on this CPU (MemTracker), on
small configurations: the same check as scripts/bench_memory.py, which runs it on the repo's model sizes."""
import importlib.util
import json
import subprocess
import sys

import pytest

from conftest import ROOT

SCRIPT = ROOT / "scripts/bench_memory.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_memory", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("dtype,attention,ckpt", [("float32", "math", False), ("float32", "math", True),
                                                   ("bfloat16", "flash", False), ("bfloat16", "math", True)])
def test_estimate_within_20_percent_of_the_measured_peak(bench, dtype, attention, ckpt):
    from enlace.config import load_layer
    from enlace.model import memory_estimate

    cfg = load_layer(ROOT / "configs/model/pretrain-cpu.yaml", "model")
    got = bench.measure("pretrain-cpu", 2, 128, dtype, attention, ckpt)["total"]
    est = memory_estimate(cfg, 2, 128, dtype, attention, checkpointing=ckpt)["peak"]
    assert 0.8 <= est / got <= 1.2, (est, got)


def test_cli_prints_the_memory_of_a_run(cli):
    r = cli("enlace.model", "configs/runs/pretrain-2060.yaml")
    assert r.returncode == 0, r.stderr
    assert "memory of a training step (16 x 512 tokens, float16, mem_efficient attention, adamw)" in r.stdout
    assert "gradients" in r.stdout and "KV cache" in r.stdout
    adam, muon = (cli("enlace.model", "configs/runs/pretrain-cpu.yaml", f"train.optimizer={o}") for o in ("adamw", "muon"))
    assert "bfloat16, math attention, muon)" in muon.stdout  # Muon keeps one buffer per block matrix, AdamW two
    optimizer_mib = lambda out: float(next(l.split()[1] for l in out.splitlines() if l.strip().startswith("optimizer")))
    assert optimizer_mib(muon.stdout) < optimizer_mib(adam.stdout)
    r = cli("enlace.model", "configs/model/tiny-50m.yaml", "--seq-len", "x")
    assert r.returncode == 2 and "'x' is not a positive whole number" in r.stderr


def test_checkpointing_trains_the_same_numbers(tmp_path, cli):
    "hardware.checkpointing recomputes each block in backward: the same losses and gradient norms, step by step."
    rows = {}
    for on in ("false", "true"):
        r = cli("enlace.train", "configs/runs/smoke-cpu.yaml", "train.max_steps=6", "train.eval_every=3",
                "train.ckpt_every=3", "train.warmup_steps=1", f"hardware.checkpointing={on}", "--no-report",
                "--out", tmp_path / on, "--no-progress")
        assert r.returncode == 0, r.stderr[-2000:]
        lines = (tmp_path / on / "metrics.jsonl").read_text().splitlines()
        rows[on] = [json.loads(line)[k] for line in lines for k in ("loss", "grad_norm")]
    assert len(rows["true"]) == 12
    assert rows["true"] == pytest.approx(rows["false"], rel=1e-5)
