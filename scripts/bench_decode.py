"""Benchmark: batch-1 decoding against the machine's memory bandwidth (issue 46 §2). For each model config (random
weights: speed does not depend on them), prefill tokens/s and cached greedy decode tokens/s at 128, 512 and 1024
tokens of context; the machine's measured copy bandwidth; and the decode limit it implies: a decoded token reads
every weight once (fp32; the tied embedding counts once, as the output head) plus the KV cache so far, so
    limit tok/s = bandwidth / (weight bytes + KV bytes per token x context).
The share of that limit is the figure to improve (issue 46's goal: >= 60 %). llama.cpp on the same GGUF belongs
beside it once the GGUF export exists (issue 46 §1); until then its column says so. Prints a table, writes JSON.
Run it on a quiet machine (nothing else busy). Usage:
    .venv/bin/python scripts/bench_decode.py [--models configs/model/pretrain-cpu.yaml,configs/model/tiny-50m.yaml]
                                             [--out runs/bench/decode.json]
"""
import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from enlace.config import load_layer
from enlace.engine import Engine, KVCache
from enlace.model import Transformer, memory_estimate, param_count

ROOT = Path(__file__).resolve().parent.parent
GOAL = 0.60  # issue 46: decode at >= 60 % of the memory-bandwidth limit


def bandwidth(mb: int = 512, repeats: int = 5) -> float:
    "Bytes per second a large copy moves (read + write), best of `repeats`: what decoding can hope to stream."
    src = np.ones(mb * 2**20 // 8)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 2 * src.nbytes / best


def measure(cfg_path: str, contexts: list[int], new: int, repeats: int, bw: float) -> dict:
    torch.manual_seed(0)
    cfg = load_layer(cfg_path, "model")
    cfg = cfg.model_copy(update={"max_seq_len": max(cfg.max_seq_len, max(contexts) + new)})
    model = Transformer(cfg).eval()
    engine = Engine(model)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())  # tied: counted once
    kv = memory_estimate(cfg, 1, 1)["kv_cache_per_token"]
    rows = []
    for ctx in contexts:
        prompt = torch.randint(0, cfg.vocab_size, (ctx,)).tolist()
        decode, prefill = [], []
        engine.generate(prompt[:8], max_tokens=2, temperature=0)  # warm-up
        for _ in range(repeats):
            with torch.no_grad():
                cache = KVCache(cfg, 1, ctx, dtype=torch.float32)
                t0 = time.perf_counter()
                model(torch.tensor([prompt]), cache)
                prefill.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            got = sum(1 for _ in engine.generate(prompt, max_tokens=new, temperature=0))
            # the prompt's prefill is inside this time too: take it out, so that the rate is decoding's
            decode.append(max(1e-9, time.perf_counter() - t0 - prefill[-1]) / got)
        per_token = weights + kv * (ctx + new / 2)
        limit = bw / per_token
        tok_s = 1 / statistics.median(decode)
        rows.append({"context": ctx, "prefill_tok_s": ctx / statistics.median(prefill), "decode_tok_s": tok_s,
                     "bytes_per_token": per_token, "limit_tok_s": limit, "share_of_limit": tok_s / limit,
                     "llama_cpp_tok_s": None})
    return {"model": cfg_path, "params": param_count(cfg)["total"], "weight_bytes": weights, "kv_bytes_per_token": kv,
            "rows": rows}


def main():
    ap = argparse.ArgumentParser()
    models = ",".join(str(ROOT / f"configs/model/{m}.yaml") for m in ("pretrain-cpu", "tiny-50m"))
    ap.add_argument("--models", default=models, help="model configs, comma-separated")
    ap.add_argument("--contexts", default="128,512,1024")
    ap.add_argument("--new", type=int, default=32, help="tokens decoded per measurement")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "runs/bench/decode.json"))
    args = ap.parse_args()
    contexts = [int(c) for c in args.contexts.split(",")]
    bw = bandwidth()
    print(f"memory bandwidth (copy, read + write): {bw / 1e9:.1f} GB/s; torch threads {torch.get_num_threads()}")
    results = [measure(m, contexts, args.new, args.repeats, bw) for m in args.models.split(",")]
    print(f"{'model':>14} {'params':>8} {'context':>8} {'prefill tok/s':>14} {'decode tok/s':>13} {'limit tok/s':>12}"
          f" {'share':>6} {'llama.cpp':>10}")
    for res in results:
        for r in res["rows"]:
            print(f"{Path(res['model']).stem:>14} {res['params'] / 1e6:>7.1f}M {r['context']:>8} "
                  f"{r['prefill_tok_s']:>14.0f} {r['decode_tok_s']:>13.1f} {r['limit_tok_s']:>12.1f} "
                  f"{r['share_of_limit']:>6.0%} {'no GGUF yet':>10}")
    worst = min(r["share_of_limit"] for res in results for r in res["rows"])
    out = {"bandwidth_bytes_s": bw, "results": results, "goal_share": GOAL, "worst_share": worst,
           "llama_cpp": "not measured: ENLACE has no GGUF export yet (issue 46 §1)", "torch": torch.__version__,
           "threads": torch.get_num_threads(), "machine": platform.processor() or platform.machine()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(f"wrote {args.out}")
    print(f"the slowest case decodes at {worst:.0%} of the bandwidth limit (goal >= {GOAL:.0%}): "
          f"{'met' if worst >= GOAL else 'NOT met'}")
    return 0 if worst >= GOAL else 1


if __name__ == "__main__":
    raise SystemExit(main())
