"""Benchmark: engine decode tokens/s with the KV cache vs recomputing the whole prefix each token, at 64, 256 and
1024 tokens of context, on the pretrain-cpu model: a trained model file or run folder (runs/pretrain-cpu), or the
shape of a model config with random weights (the default: speed does not depend on the weights); prefill tokens/s;
KV-cache bytes per token. The two decoders run interleaved in one process, so the ratio is fair on a noisy machine.
Issue 14's target: the cache wins by >= 5x at the longest context; the last line says whether it does, and the exit
status is 1 when it does not. Prints a table and writes JSON. Usage:
    .venv/bin/python scripts/bench_engine.py [--model configs/model/pretrain-cpu.yaml | runs/pretrain-cpu]
                                             [--out runs/bench/engine.json]
"""
import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from enlace.checkpoint import load_model
from enlace.config import load_layer
from enlace.engine import Engine, KVCache
from enlace.model import Transformer, memory_estimate, param_count

ROOT = Path(__file__).resolve().parent.parent
TARGET = 5.0  # issue 14: the cached decode is at least this many times faster at the longest context


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
    trained = not args.model.endswith((".yaml", ".yml"))
    if trained:  # a model file or a run folder: its weights, in a model with room for the longest context
        base, _, _ = load_model(args.model)
        cfg, weights = base.cfg, base.state_dict()
    else:
        cfg, weights = load_layer(args.model, "model"), None
    cfg = cfg.model_copy(update={"max_seq_len": max(cfg.max_seq_len, max(contexts) + args.new)})  # room to decode
    model = Transformer(cfg).eval()
    if weights is not None:
        model.load_state_dict(weights)  # RoPE's table is not a weight: it follows max_seq_len
    engine = Engine(model)
    kv_bytes = memory_estimate(cfg, 1, 1)["kv_cache_per_token"]  # k and v, fp32, per token of context
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
    last = rows[-1]
    met = last["speedup"] >= TARGET
    out = {"model": args.model, "trained": trained, "params": param_count(cfg)["total"], "kv_bytes_per_token": kv_bytes,
           "rows": rows, "target_speedup": TARGET, "target_met": met, "torch": torch.__version__,
           "threads": torch.get_num_threads(), "machine": platform.processor() or platform.machine()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(f"wrote {args.out}")
    verdict = "met" if met else "NOT met"
    print(f"the KV cache decodes {last['speedup']:.1f}x faster at {last['context']} tokens (target >= {TARGET:g}x): {verdict}")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
