"""Benchmark: engine decode tokens/s with the KV cache vs recomputing the whole prefix each token, at 64, 256 and
1024 tokens of context, on the pretrain-cpu model shape (random weights: speed does not depend on them); prefill
tokens/s; KV-cache bytes per token. The two decoders run interleaved in one process, so the ratio is fair on a
noisy machine. Prints a table and writes JSON. Usage:
    .venv/bin/python scripts/bench_engine.py [--model configs/model/pretrain-cpu.yaml] [--out runs/bench/engine.json]
"""
import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from enlace.config import load_layer
from enlace.engine import Engine, KVCache
from enlace.model import Transformer, param_count

ROOT = Path(__file__).resolve().parent.parent


@torch.no_grad()
def recompute_decode(model, prompt: list[int], n: int) -> list[int]:
    "Greedy decoding without a cache: every new token runs the model over the whole sequence so far."
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(model(torch.tensor([ids]))[0, -1].argmax()))
    return ids[len(prompt):]


def cached_decode(engine, prompt: list[int], n: int) -> list[int]:
    return [t[0] for t, _, _ in engine.generate(prompt, max_tokens=n, temperature=0)]


def timed(fn, *args) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(ROOT / "configs/model/pretrain-cpu.yaml"))
    ap.add_argument("--contexts", default="64,256,1024")
    ap.add_argument("--new", type=int, default=32, help="tokens decoded per measurement")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "runs/bench/engine.json"))
    args = ap.parse_args()
    torch.manual_seed(0)
    contexts = [int(c) for c in args.contexts.split(",")]
    cfg = load_layer(args.model, "model")
    cfg = cfg.model_copy(update={"max_seq_len": max(cfg.max_seq_len, max(contexts) + args.new)})  # room to decode
    model = Transformer(cfg).eval()
    engine = Engine(model)
    kv_bytes = 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * 4  # k and v, fp32, per token of context
    rows = []
    for ctx in contexts:
        n = args.new
        prompt = torch.randint(0, cfg.vocab_size, (ctx,)).tolist()
        cached, recomputed, prefill = [], [], []
        for _ in range(args.repeats):  # interleaved: both see the same machine load
            dt, a = timed(cached_decode, engine, prompt, n)
            cached.append(dt)
            dt, b = timed(recompute_decode, model, prompt, n)
            recomputed.append(dt)
            assert a == b, "the cached decode must give the tokens of the full recomputation"
            with torch.no_grad():
                cache = KVCache(cfg, 1, ctx, dtype=torch.float32)
                dt, _ = timed(model, torch.tensor([prompt]), cache)
            prefill.append(dt)
        c, r, p = statistics.median(cached), statistics.median(recomputed), statistics.median(prefill)
        rows.append({"context": ctx, "new_tokens": n, "cached_tok_s": n / c, "recompute_tok_s": n / r,
                     "speedup": r / c, "prefill_tok_s": ctx / p, "kv_cache_mb": kv_bytes * (ctx + n) / 2**20})
    print(f"model {Path(args.model).name}: {param_count(cfg)['total'] / 1e6:.2f} M parameters; "
          f"KV cache {kv_bytes} bytes/token (fp32), torch threads {torch.get_num_threads()}")
    print(f"{'context':>8} {'cached tok/s':>13} {'recompute tok/s':>16} {'speedup':>8} {'prefill tok/s':>14} {'KV MB':>7}")
    for r in rows:
        print(f"{r['context']:>8} {r['cached_tok_s']:>13.1f} {r['recompute_tok_s']:>16.1f} {r['speedup']:>7.1f}x "
              f"{r['prefill_tok_s']:>14.0f} {r['kv_cache_mb']:>7.2f}")
    out = {"model": args.model, "params": param_count(cfg)["total"], "kv_bytes_per_token": kv_bytes, "rows": rows,
           "torch": torch.__version__, "threads": torch.get_num_threads(), "machine": platform.processor() or platform.machine()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
