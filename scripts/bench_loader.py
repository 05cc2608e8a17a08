"""Benchmark: is loading ever the bottleneck? Loader time per batch against training step time.

Measures (1) the padded conjugation loader against a real smoke training step, and (2) the memory-mapped
uint16 shard loader (a synthetic 20 M-token shard, checksum verified on open) in tokens/s, against the
tokens/s a tiny-50m step consumes on this machine. Prints a table and writes JSON. Usage:
    .venv/bin/python scripts/bench_loader.py [--out runs/bench/loader.json]
"""
import argparse, json, statistics, tempfile, time
from pathlib import Path

import numpy as np
import torch

from enlace.config import load_config, micro_batch
from enlace.dataloader import Loader, make_data, shard_windows
from enlace.shards import read_shard, write_shard
from enlace.model import Transformer
from enlace import backends
from enlace.train import accumulate, make_optimizer

ROOT = Path(__file__).resolve().parent.parent


def per_call(fn, n):
    times = []
    for _ in range(n):
        t0 = time.perf_counter(); fn(); times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "runs/bench/loader.json"))
    args = ap.parse_args()
    res = {"torch": torch.__version__, "threads": torch.get_num_threads()}

    cfg = load_config(ROOT / "configs/runs/smoke-cpu.yaml")
    data = make_data(cfg, micro_batch(cfg))
    load_s = per_call(data.train.next, 200)
    model = Transformer(cfg.model); opt = make_optimizer(model, cfg.train); scaler = backends.grad_scaler(cfg.hardware)
    batch = data.train.next()
    def step():
        accumulate(model, [batch], cfg.hardware, cfg.train.z_loss, scaler); opt.step(); opt.zero_grad(set_to_none=True)
    step()
    step_s = per_call(step, 30)
    res["conjugations"] = {"batch": micro_batch(cfg), "load_ms": load_s * 1e3, "step_ms": step_s * 1e3, "ratio": load_s / step_s}
    print(f"conjugations (B={micro_batch(cfg)}): load {load_s * 1e3:.2f} ms/batch, train step {step_s * 1e3:.1f} ms "
          f"-> loading is {load_s / step_s:.1%} of a step")

    with tempfile.TemporaryDirectory() as t:
        n = 20_000_000
        toks = np.random.default_rng(0).integers(0, 16384, n, dtype=np.uint16)
        t0 = time.perf_counter(); write_shard(Path(t) / "train_000.bin", toks, "uint16"); w = time.perf_counter() - t0
        t0 = time.perf_counter(); shard = read_shard(Path(t) / "train_000.bin", verify=True); v = time.perf_counter() - t0
        count, make = shard_windows([shard], 512)
        loader = Loader(count, make, 16, seed=0)
        load_s = per_call(loader.next, 200)
        tok_s = 16 * 512 / load_s
    tiny = load_config(ROOT / "configs/runs/pretrain-2060.yaml", ["hardware=cpu", "train.batch_size=32"])
    m = Transformer(tiny.model)
    idx = torch.randint(0, tiny.model.vocab_size, (2, 513))
    def tiny_step():
        out = m(idx[:, :-1]); out.float().mean().backward()
    tiny_step()
    model_tok_s = 2 * 512 / per_call(tiny_step, 3)
    res["shards"] = {"tokens": n, "write_s": w, "open_verify_s": v, "batch": 16, "seq_len": 512,
                     "loader_tok_s": tok_s, "tiny50m_cpu_tok_s": model_tok_s, "ratio": model_tok_s / tok_s}
    print(f"uint16 shard of {n / 1e6:.0f} M tokens: write {w:.2f} s, open+sha256 {v:.2f} s; windows 16x512: "
          f"{tok_s / 1e6:.1f} M tok/s vs tiny-50m fwd+bwd {model_tok_s:.0f} tok/s on this CPU "
          f"-> loading is {model_tok_s / tok_s:.3%} of a step")
    out = Path(args.out); out.parent.mkdir(parents=True, exist_ok=True); out.write_text(json.dumps(res, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
